"""Bad values and constructs the bad-input campaign's later generators found (``scripts/bad_input_campaign.py
--only typed: / construct: / cli:``): each must end in one ``primus-launch: error:`` line naming the field
and the value, exit 2, before any projection -- or, for the legitimate edge inputs at the end, in a
projection.  The expectations are the frameworks' own rules: Megatron-LM's argparse (``type=int`` takes
no ``0x10``, ``1e30`` or word; ``type=float`` takes ``nan``, which no training run means), the types of
TorchTitan v0.2.2's ``JobConfig`` fields (``torchtitan/config/job_config.py``), torchrun's refusal of
0 nodes / processes, bash's own expansion.  Runs the CLI in process: a few seconds in all."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
YAML = (ROOT / "recipes/megatron/llama3.1_8b.yaml").read_text()
PRIMUS = (ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
TOML = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
MIXTRAL = (ROOT / "recipes/megatron/mixtral_8x22b.sh").read_text()


def refused(argv: list[str], cwd: Path, *words: str) -> str:
    rc, out, err, secs = run_cli(argv, cwd)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, (rc, lines[-3:])
    assert "Traceback" not in err
    errors = [ln for ln in lines if ln.startswith("primus-launch: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines[-3:]
    for w in words:
        assert w in errors[0], (w, errors[0])
    assert secs < 30, secs  # a hang guard (the bombs below ran without end, or for minutes), not a speed check
    return errors[0]


def sub(text: str, pattern: str, repl: str) -> str:
    new, n = re.subn(pattern, lambda m: repl, text, count=1, flags=re.M)
    assert n == 1, pattern
    return new


# (file name, content, words the one error line holds)
VALUES = [
    # Megatron flags the plan does not read still hold Megatron-LM's argparse types
    ("r.sh", sub(BASH, r"--lr 3\.0e-4", "--lr nan"), ["--lr='nan'", "finite"]),
    ("r.sh", sub(BASH, r"--lr 3\.0e-4", "--lr -inf"), ["--lr='-inf'", "finite"]),
    ("r.sh", sub(BASH, r"--lr 3\.0e-4", "--lr yes"), ["--lr='yes'", "a number"]),
    ("r.sh", sub(BASH, r"--rotary-base 500000", "--rotary-base 1e30"), ["--rotary-base='1e30'", "an integer"]),
    ("r.sh", sub(BASH, r"--lr-warmup-iters 2000", f"--lr-warmup-iters {2**200}"), ["--lr-warmup-iters", "64 bits"]),
    # Megatron-LM fills only an absent --moe-ffn-hidden-size from --ffn-hidden-size: 0 was read as absent
    ("r.sh", sub(MIXTRAL, r"--num-experts 8", "--num-experts 8 --moe-ffn-hidden-size 0"), ["--moe-ffn-hidden-size=0"]),
    # past Python's 4,300-digit int(str) limit (an internal error) and shown by its head and size
    ("r.yaml", PRIMUS.replace("${PRIMUS_TP:1}", "${PRIMUS_TP:" + "9" * 5000 + "}"),
     ["tensor_model_parallel_size: ${PRIMUS_TP:999", "(5,013 characters): an integer"]),
    # a YAML list or mapping where Megatron takes one value (a list was read as its first element)
    ("r.yaml", sub(YAML, r"^num_layers: 32", "num_layers: [32]"), ["--num-layers=[32]", "an integer"]),
    ("r.yaml", sub(YAML, r"^lr: 3\.0e-4", "lr: {a: 1}"), ["--lr=", "not a mapping"]),
    ("r.yaml", sub(YAML, r"^lr: 3\.0e-4", "lr: .nan"), ["--lr=nan", "finite"]),
    ("r.yaml", sub(YAML, r"^rotary_base: 500000", f"rotary_base: {2**200}"), ["--rotary-base", "64 bits"]),
    ("r.yaml", sub(PRIMUS, r"^    bf16: true", "    bf16: [1]"), ["bf16=[1]", "true or false"]),
    # TorchTitan takes the TOML's values as they are: a string "false" is true there
    ("r.toml", sub(TOML, r"^lr = 3e-4", 'lr = "3e-4"'), ["optimizer.lr='3e-4'", "a number"]),
    ("r.toml", sub(TOML, r"^lr = 3e-4", "lr = nan"), ["optimizer.lr=nan", "finite"]),
    ("r.toml", sub(TOML, r"^enable = false", 'enable = "false"'), ["checkpoint.enable='false'", "true or false"]),
    ("r.toml", sub(TOML, r'^components = \["model", "loss"\]', "components = 1"), ["compile.components=1", "a list"]),
    ("r.toml", sub(TOML, r"^seq_len = 8192", f"seq_len = {2**200}"), ["training.seq_len", "64 bits"]),
    ("r.toml", sub(TOML, r"^warmup_steps = 200", "warmup_steps = 2.5"), ["lr_scheduler.warmup_steps=2.5", "integer"]),
    # a job that names no model (TorchTitan would train its llama3 debugmodel) and an empty file
    ("r.toml", re.sub(r'(?ms)^\[model\]\n.*?(?=^\[)', "", TOML), ["model.flavor=None", "names no model"]),
    ("r.toml", "# nothing\n\n", ["an empty TOML"]),
    # torchrun refuses 0 nodes / processes (0 was read as the default, -1 as 1)
    ("r.sh", sub(BASH, r"^NUM_NODES=1", "NUM_NODES=0"), ["--nnodes='0'", "from 1"]),
    ("r.sh", sub(BASH, r"^NUM_NODES=1", "NUM_NODES=-1"), ["--nnodes='-1'", "an integer"]),
    ("r.sh", sub(BASH, r"^GPUS_PER_NODE=8", "GPUS_PER_NODE=0"), ["--nproc_per_node='0'", "from 1"]),
    # ${V:?msg} of an unset V: bash stops there; the value is unset, not the message
    ("r.sh", sub(BASH, r"^TP_SIZE=2", "TP_SIZE=${NEVER_SET:?set it}"), ["--tensor-model-parallel-size=None",
                                                                        "no value"]),
]


@pytest.mark.parametrize("name,content,words", VALUES, ids=[f"{i}:{n}:{w[0][:28]}" for i, (n, _, w) in
                                                              enumerate(VALUES)])
def test_a_value_the_framework_would_refuse_is_refused(tmp_path, name, content, words):
    (tmp_path / name).write_text(content)
    refused(["--project", name, "--dry-run", "--json"], tmp_path, *words)


def _in_bash(snippet: str) -> str:
    return BASH.replace("# Parallelism and batch\n", snippet + "# Parallelism and batch\n", 1)


@pytest.mark.parametrize("snippet,words", [
    ("V=ab\n" + 'V="$V$V"\n' * 60, ["a word expands to more than 262,144 characters"]),
    ("A=(1 2)\n" + 'A=("${A[@]}" "${A[@]}")\n' * 40, ["more than 65,536"]),
], ids=["doubling-variable", "doubling-array"])
def test_a_variable_that_doubles_itself_is_refused_not_expanded(tmp_path, snippet, words):
    """Each line doubles the value: 2**60 characters (each with its provenance) took all memory."""
    (tmp_path / "r.sh").write_text(_in_bash(snippet))
    refused(["--project", "r.sh", "--dry-run", "--json"], tmp_path, *words)


def test_extends_bombs_and_cycles_are_refused(tmp_path):
    """30 files each extending the next one twice: 2**30 reads (Primus's own loader would take them)."""
    base = PRIMUS.replace("work_group:", "work_group_base:")
    (tmp_path / "base.yaml").write_text(base)
    (tmp_path / "r.yaml").write_text("extends: [d0.yaml]\n")
    for i in range(30):
        (tmp_path / f"d{i}.yaml").write_text(f"extends: [d{i + 1}.yaml, d{i + 1}.yaml]\n")
    (tmp_path / "d30.yaml").write_text("extends: [base.yaml]\n")
    refused(["--project", "r.yaml", "--dry-run", "--json"], tmp_path, "more than 256 files")
    (tmp_path / "sub").mkdir()
    (tmp_path / "c.yaml").write_text("extends: [sub/../c.yaml]\n")
    refused(["--project", "c.yaml", "--dry-run", "--json"], tmp_path, "extends itself")


@pytest.mark.parametrize("wrapper,words", [
    ('[cluster]\ngpu = "h100-sxm"\n', ["recipe.path: missing"]),
    ("[recipe]\n", ["recipe.path: missing"]),
], ids=["cluster-only", "recipe-without-path"])
def test_a_wrapper_without_its_recipe_is_refused(tmp_path, wrapper, words):
    (tmp_path / "w.primus.toml").write_text(wrapper)
    refused(["--project", "w.primus.toml", "--dry-run", "--json"], tmp_path, *words)


@pytest.mark.parametrize("argv,words", [
    (["--tune", "r.sh", "--dry-run", "--out", ""], ["--out=''", "empty"]),
    (["--tune", "r.sh", "--dry-run", "--llm", " "], ["--llm=' '", "a model name"]),
    (["--project", "r.sh", "--dry-run", "--primus-root", "nowhere"], ["--primus-root='nowhere'", "no such folder"]),
    (["--tune", "r.sh", "--dry-run", "--out", "t.toml"], ["--out='t.toml'", "r.sh", ".bash or .sbatch or .sh or .slurm"]),
    (["--tune", "r.sh", "--dry-run", "--out", "t"], ["--out='t'", "r.sh", ".bash or .sbatch or .sh or .slurm"]),
], ids=["out", "llm", "primus-root", "out-format", "out-no-ending"])
def test_empty_or_missing_path_flags_are_refused(tmp_path, argv, words):
    """``--out ""`` wrote the tuned recipe to the default path, as if --out were not given; ``--out t`` (no
    ending) wrote a tuned recipe that ``--project t`` refused as "unknown recipe kind"."""
    (tmp_path / "r.sh").write_text(BASH)
    refused(argv, tmp_path, *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sh"]


@pytest.mark.parametrize("name,content", [
    ("r.sh", sub(BASH, r"--group-query-attention", "--vocab-size 50257 --group-query-attention")),  # not / 128
    ("r.sh", sub(sub(sub(BASH, r"^TP_SIZE=2", "TP_SIZE=8"), r"^MICRO_BATCH_SIZE=1", "MICRO_BATCH_SIZE=4"),
                 r"^GLOBAL_BATCH_SIZE=128", "GLOBAL_BATCH_SIZE=4")),  # MBS = GBS
    ("r.sh", sub(BASH, r"--lr 3\.0e-4", "--lr -.5e-4")),  # argparse's negative number, not an option
    ("r.yaml", sub(sub(YAML, r"^rotary_base: 500000", "rotary_base: 500000.0"), r"^num_layers: 32",
                   "num_layers: 0x20")),  # a whole YAML float for an int; YAML 1.1 hex
    ("r.toml", sub(TOML, r"^max_norm = 1\.0", "max_norm = 1")),  # TorchTitan: float | int
], ids=["vocab-not-divisible", "mbs-equals-gbs", "negative-float", "yaml-whole-float-hex", "toml-int-for-float"])
def test_legitimate_edge_inputs_still_project(tmp_path, name, content):
    (tmp_path / name).write_text(content)
    rc, out, err, _ = run_cli(["--project", name, "--dry-run", "--json"], tmp_path)
    assert rc == 0, err[-600:]
    d = json.loads(out)
    assert d["iteration_time_s"] > 0
