"""Bad-input classes of the robust17 round (``scripts/bad_input_campaign.py --only r17:``).

- YAML anchors and aliases on scalars (``eval_iters: &one 1`` ... ``micro_batch_size: *one``): an alias is the node
  its anchor names, so the recipe writers' in-place edit of ``micro_batch_size`` edited ``eval_iters``' text (and
  dropped its anchor: the tuned recipe no longer loaded, "recipe='r.yaml': not valid YAML: found undefined alias",
  blaming the user's recipe); an anchored value's edit dropped the anchor the other keys name.  Now each alias of a
  scalar is written out before the edit (``yaml_text.unshared_scalars``), the same document to ``yaml.safe_load``.
- Megatron values its start-up refuses that were projected: ``--moe-shared-expert-intermediate-size 0`` (read as no
  shared expert; TransformerConfig raises), ``--encoder-seq-length`` beside ``--seq-length`` (validate_args asserts);
  a 0 given by ``--padded-vocab-size`` / ``--encoder-seq-length`` named as the flag the recipe does not hold.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from primus_launch.adapters import load_recipe, render_recipe
from primus_launch.adapters.yaml_text import unshared_scalars

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------- scalar anchors and aliases
@pytest.mark.parametrize("text", [
    "a: &x 1\nb: *x\n",
    "a: &x !!str 1\nb: [*x, 2]\nc: &y 3\nd: *y\n",
    "a: &s hello, world\nb: [*s]\nc: {k: *s}\n",
    "a: &x 'q: r'\nb: {k: *x}\n",
    "b: &B\n  c: &x 1\nd:\n  <<: *B\n  e: *x\n",
    "a: &x |\n  z\nb: *x\n",  # a block scalar: left shared
    "a: &m {k: [1, 2]}\nb: {c: *m}\n",  # a one-line flow mapping: written out
    "a: &x 1\nb: &l [*x]\nc: *l\n",  # a flow list holding an alias: written out on the next pass
    "a: &l [1,\n  2]\nb: *l\n",  # a flow list over two lines: left shared
])
def test_unshared_scalars_is_the_same_document(text):
    """The same Python value to yaml.safe_load (PyYAML: an alias is the node its anchor names), and no alias of a
    one-line scalar left."""
    out = unshared_scalars(text)
    assert yaml.safe_load(out) == yaml.safe_load(text), out
    aliases = [t.value for t in yaml.scan(out) if isinstance(t, yaml.AliasToken)]
    anchored = {t.value for t in yaml.scan(out) if isinstance(t, yaml.AnchorToken)}
    assert set(aliases) <= anchored
    if "|" not in text and "[1,\n" not in text:
        assert set(aliases) <= {"B"}, out  # the block mapping's anchor only


def test_unshared_scalars_leaves_text_without_scalar_aliases():
    for text in ("a: &x 1\n", "a: &m\n  k: 1\nb: *m\n", "not: [valid\n", (ROOT / "recipes/megatron/llama3.1_8b.yaml").read_text()):
        assert unshared_scalars(text) is text


def _aliased(text: str, key: str, other: str, anchored_first: bool) -> str:
    """``text`` with ``key``'s value shared with a new ``other`` entry beside it: ``key: &v X`` / ``other: *v``
    (anchored_first) or ``other: &v X`` / ``key: *v``."""
    m = re.search(rf"(?m)^(\s*){key}: (.*)$", text)
    ind, val = m.group(1), m.group(2)
    lines = (f"{ind}{key}: &v {val}\n{ind}{other}: *v" if anchored_first else f"{ind}{other}: &v {val}\n{ind}{key}: *v")
    text = re.sub(rf"(?m)^{re.escape(ind)}{other}: .*\n", "", text)  # the file's own `other` entry, if any
    m = re.search(rf"(?m)^(\s*){key}: (.*)$", text)
    return text[:m.start()] + lines + text[m.end():]


NEMO = (ROOT / "tests/test_adapter_nemo_yaml.py").read_text().split('CONFIG = """\\\n')[1].split('"""')[0]
CASES = [("megatron/llama3.1_8b.yaml", "r.yaml", ["micro_batch_size"]),
         (NEMO, "n.yaml", ["model", "micro_batch_size"]),
         ("primus/MI355X/llama3.1_8b.yaml", "r.yaml", ["modules", "pre_trainer", "overrides", "micro_batch_size"]),
         ("../tests/data/bridge/qwen3_moe_run_config.yaml", "b.yaml", ["train", "micro_batch_size"])]


@pytest.mark.parametrize("recipe,name,keys", CASES)
@pytest.mark.parametrize("anchored_first", [True, False])
def test_tuned_value_written_over_an_alias_changes_that_key_alone(tmp_path, monkeypatch, recipe, name, keys,
                                                                   anchored_first):
    """A tuned micro-batch size written into a YAML recipe whose micro_batch_size shares its scalar with
    eval_iters (either way round): the result loads, holds the new micro-batch size, and eval_iters keeps the value
    it had (before: the edit changed eval_iters or left an alias naming no anchor)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PRIMUS_MBS", raising=False)
    src = recipe if "\n" in recipe else (ROOT / "recipes" / recipe).read_text()
    text = _aliased(src, "micro_batch_size", "eval_iters", anchored_first)
    (tmp_path / name).write_text(text)
    plan = load_recipe(tmp_path / name)
    old = plan.training.micro_batch_size
    tuned = plan.model_copy(update={"training": plan.training.model_copy(update={"micro_batch_size": old * 2})})
    out = render_recipe(tuned, text)
    doc, before = yaml.safe_load(out), yaml.safe_load(text)
    for k in keys[:-1]:
        doc, before = doc[k], before[k]
    assert doc["micro_batch_size"] in (old * 2, f"${{PRIMUS_MBS:{old * 2}}}")  # Primus keeps its template
    assert doc["eval_iters"] == before["eval_iters"]
    (tmp_path / ("t" + name)).write_text(out)
    assert load_recipe(tmp_path / ("t" + name)).training.micro_batch_size == old * 2
    assert render_recipe(plan, text) == text  # nothing changed: the file byte for byte


# ------------------------------------------------------------------------- Megatron values its start-up refuses
BASH = (ROOT / "recipes/megatron/mixtral_8x22b.sh").read_text()


def _one_line_refusal(tmp_path: Path, script: str, *words: str) -> str:
    from cli_run import run_cli

    (tmp_path / "r.sh").write_text(script)
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--json"], tmp_path)
    lines = [ln for ln in err.splitlines() if ln.startswith("primus-launch: error:")]
    assert rc == 2 and len(lines) == 1 and not out, (rc, out, err)
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("size", [0, -2048])
def test_shared_expert_size_megatron_core_refuses_is_refused(tmp_path, size):
    """``--moe-shared-expert-intermediate-size 0`` was read as no shared expert and projected; megatron-core's
    TransformerConfig (installed here, core_v0.16.1) raises for any size <= 0, MoE or not."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    with pytest.raises(ValueError, match="moe_shared_expert_intermediate_size"):
        TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, num_moe_experts=8,
                          moe_shared_expert_intermediate_size=size)
    _one_line_refusal(tmp_path, BASH.replace("--moe-grouped-gemm", f"--moe-grouped-gemm --moe-shared-expert-intermediate-size {size}"),
                      f"--moe-shared-expert-intermediate-size={size}")


def test_shared_expert_size_positive_is_read(tmp_path):
    from primus_launch.adapters import load_recipe

    (tmp_path / "r.sh").write_text(BASH.replace("--moe-grouped-gemm", "--moe-grouped-gemm --moe-shared-expert-intermediate-size 4096"))
    assert load_recipe(tmp_path / "r.sh").model.moe_shared_expert_intermediate_size == 4096


def test_encoder_seq_length_beside_seq_length_is_refused(tmp_path):
    """Megatron-LM's validate_args (megatron/training/arguments.py, core_v0.16.1 and main) asserts
    ``args.encoder_seq_length is None`` where --seq-length is given; alone it is the sequence length."""
    from primus_launch.adapters import load_recipe

    _one_line_refusal(tmp_path, BASH.replace("--seq-length 4096", "--seq-length 4096 --encoder-seq-length 4096"),
                      "--encoder-seq-length=4096", "--seq-length=4096")
    (tmp_path / "e.sh").write_text(BASH.replace("--seq-length 4096", "--encoder-seq-length 2048"))
    assert load_recipe(tmp_path / "e.sh").model.seq_length == 2048


@pytest.mark.parametrize("flag,old", [("--padded-vocab-size", None), ("--encoder-seq-length", "--seq-length 4096")])
def test_size_given_by_its_alternative_flag_is_named_as_given(tmp_path, flag, old):
    """A 0 given by --padded-vocab-size / --encoder-seq-length was named as the plan field's usual flag
    (``--vocab-size=0``, ``--seq-length=0``), one the recipe does not hold."""
    script = BASH.replace(old, f"{flag} 0") if old else BASH.replace("    --bf16\n", f"    --bf16 {flag} 0\n")
    _one_line_refusal(tmp_path, script, f"{flag}=0")
