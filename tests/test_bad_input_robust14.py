"""Bad-input classes of the robust14 round (``scripts/bad_input_campaign.py --only r14:``).

- A Megatron-LM integer or float flag given ``None`` / ``null`` on a command line (``GBS=None`` in a script,
  ``--global-batch-size None`` after ``--``) was read as unset and the flag's default projected without a word;
  Megatron-LM's parser (argparse ``type=int``) exits with "invalid int value: 'None'": now refused in one line; the
  same word in a Megatron-LM argument YAML (``global_batch_size: None`` / ``'null'``: a string to ``yaml.safe_load``,
  kept by Megatron-LM's ``--yaml-cfg`` namespace) too, while YAML's own null still means the default.
- A local tokenizer folder whose files are not of a tokenizer's shape was read anyway: ``"vocab_size": true`` as a
  vocabulary of 1 (the note said "vocabulary True"), a ``model.vocab`` string as as many tokens as it has characters,
  ``true`` token ids as id 1; a negative id gave ``--vocab-size=-6`` (a flag the recipe never wrote): now not read (the
  refusal says the local tokenizer gives no size and asks for ``--vocab-size``).  A size past the plan's bound was
  refused as ``model.vocab_size=...``: now named by the file it came from.
- ``primus-launch --version`` / ``--help`` into a full or closed stdout (``> /dev/full``, ``>&-``) exited 0 having
  written nothing (argparse swallows the failed write): now one line and exit 2, as a projection's answer does.
- A wrapper's ``cluster.nodes = 0`` / ``gpus_per_node = -8`` was refused as the plan's ``num_nodes=0: Input should
  be greater than 0``: now named as written, with the range allowed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import run_cli
from primus_launch.adapters.megatron_vocab import local_vocab
from primus_launch.plan import PlanError
from primus_launch.plan.sections import LIMITS
from test_bad_input_robust11 import _refused_writing_nothing as _refused  # refused, nothing written

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
DRY = ["--dry-run", "--json"]
CMD = ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py", "--num-layers", "32", "--hidden-size", "4096",
       "--num-attention-heads", "32", "--seq-length", "4096", "--max-position-embeddings", "4096",
       "--micro-batch-size", "1", "--global-batch-size", "64", "--vocab-size", "128256", "--bf16"]


def _project(tmp_path: Path, files: dict[str, str], argv: list[str]) -> tuple[dict, str]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    rc, out, err, _ = run_cli(argv, tmp_path)
    assert rc == 0 and "Traceback" not in err, err[-400:]
    return json.loads(out), err


# ------------------------------------------------------------------ None / null for a number on a command line
def _argparse_refuses(kind: type, word: str) -> bool:
    """Whether a stdlib argparse parser with ``type=kind`` (Megatron-LM's ``--global-batch-size`` is ``type=int``,
    ``--lr`` ``type=float``: megatron/training/arguments.py) exits on ``word``."""
    ap = argparse.ArgumentParser(exit_on_error=False)
    ap.add_argument("--x", type=kind)
    try:
        ap.parse_args(["--x", word])
    except argparse.ArgumentError:
        return True
    return False


@pytest.mark.parametrize("word", ["None", "null", "NONE", "'None'"])
def test_none_for_an_integer_flag_in_a_script_is_refused(tmp_path: Path, word: str) -> None:
    assert _argparse_refuses(int, word.strip("'"))  # what Megatron-LM's parser does with it
    line = _refused(tmp_path, {"r.sh": BASH.replace("GLOBAL_BATCH_SIZE=128", f"GLOBAL_BATCH_SIZE={word}")},
                    ["--project", "r.sh", *DRY], "--global-batch-size=", "invalid int value")
    assert word.strip("'") in line


def test_none_for_a_number_after_double_dash_is_refused(tmp_path: Path) -> None:
    cmd = list(CMD)
    cmd[cmd.index("--global-batch-size") + 1] = "None"
    _refused(tmp_path, {}, ["--project", *DRY, "--", *cmd], "--global-batch-size='None'")
    assert _argparse_refuses(float, "None")
    cmd = CMD + ["--lr", "null"]
    _refused(tmp_path, {}, ["--project", *DRY, "--", *cmd], "--lr='null'")


def test_a_number_is_still_read_and_a_none_choice_kept(tmp_path: Path) -> None:
    """The refusal is of numbers only: ``--position-embedding-type none`` stays Megatron-LM's choice 'none'."""
    got, _ = _project(tmp_path, {}, ["--project", *DRY, "--", *CMD])
    assert got["plan"]["training"]["global_batch_size"] == 64
    rc, _, err, _ = run_cli(["--project", *DRY, "--", *CMD, "--position-embedding-type", "none"], tmp_path)
    assert "invalid int value" not in err and "Traceback" not in err


YAML = (ROOT / "recipes/megatron/llama3.1_8b.yaml").read_text()


@pytest.mark.parametrize("word", ["None", "'null'", '"None"'])
def test_none_word_for_a_number_in_a_megatron_yaml_is_refused(tmp_path: Path, word: str) -> None:
    """``yaml.safe_load`` (what Megatron-LM's ``--yaml-cfg`` reads with, yaml_arguments.py ``load_yaml``) gives the
    string, not None: Megatron-LM keeps it and fails; it was read as unset (the default projected)."""
    import yaml

    assert isinstance(yaml.safe_load(f"global_batch_size: {word}")["global_batch_size"], str)
    text = YAML.replace("global_batch_size: 128", f"global_batch_size: {word}")
    _refused(tmp_path, {"r.yaml": text}, ["--project", "r.yaml", *DRY], "--global-batch-size=", "null unquoted")


@pytest.mark.parametrize("word", ["null", "~", ""])
def test_yaml_null_for_a_number_is_still_the_default(tmp_path: Path, word: str) -> None:
    """YAML's null is None in Megatron-LM's namespace: the global batch defaults to micro-batch x DP
    (yaml_arguments.py validate_yaml); TP 2 on 8 GPUs: DP 4, micro-batch 1."""
    import yaml

    assert yaml.safe_load(f"global_batch_size: {word}")["global_batch_size"] is None
    got, _ = _project(tmp_path, {"r.yaml": YAML.replace("global_batch_size: 128", f"global_batch_size: {word}")},
                      ["--project", "r.yaml", *DRY])
    assert got["plan"]["training"]["global_batch_size"] == 1 * (8 // 2)


# ------------------------------------------------------------------ a local tokenizer's files
def _tok_recipe(files: dict[str, str]) -> dict[str, str]:
    return {"r.sh": BASH.replace("--tokenizer-model meta-llama/Llama-3.1-8B", "--tokenizer-model tok"),
            **{f"tok/{k}": v for k, v in files.items()}}


@pytest.mark.parametrize("files", [
    {"config.json": '{"vocab_size": true}'},
    {"config.json": '{"vocab_size": "128256"}'},
    {"tokenizer.json": '{"model": {"vocab": "abc"}}'},
    {"tokenizer.json": '{"model": {"vocab": {"a": true}}}'},
    {"tokenizer.json": '{"model": {"vocab": {"a": -7}}}'},
    {"tokenizer.json": '{"model": "x"}'},
], ids=["config-true", "config-string", "vocab-string", "id-true", "id-negative", "model-string"])
def test_a_tokenizer_of_no_tokenizer_shape_is_not_read(tmp_path: Path, files: dict[str, str]) -> None:
    (tmp_path / "tok").mkdir()
    line = _refused(tmp_path, _tok_recipe(files), ["--project", "r.sh", *DRY], "--tokenizer-model='tok'",
                    "a local tokenizer", "add --vocab-size N to the recipe's Megatron arguments")
    assert "--vocab-size=" not in line  # a flag the recipe never wrote
    assert local_vocab(str(tmp_path / "tok")) is None


@pytest.mark.parametrize("files, field, size", [
    ({"config.json": '{"vocab_size": 1000000000000}'}, "tok/config.json vocab_size", 10**12),
    ({"tokenizer.json": '{"model": {"vocab": {"a": 1000000000000}}}'}, "tok/tokenizer.json (highest token id + 1)",
     10**12 + 1),
    ({"tokenizer.json": '{"model": {"vocab": {"a": 0}}, "added_tokens": [{"id": 16777216}]}'},
     "tok/tokenizer.json (highest token id + 1)", 2**24 + 1),
])
def test_a_tokenizer_size_past_the_bound_is_named_by_its_file(tmp_path: Path, files: dict[str, str], field: str,
                                                               size: int) -> None:
    assert size > LIMITS["model.vocab_size"]
    (tmp_path / "tok").mkdir()
    _refused(tmp_path, _tok_recipe(files), ["--project", "r.sh", *DRY], f"{field}={size}", "at most 16,777,216")
    with pytest.raises(PlanError):
        local_vocab(str(tmp_path / "tok"))


@pytest.mark.parametrize("files, size", [
    ({"config.json": '{"vocab_size": 128256}'}, 128256),
    # Hugging Face BPE: highest id + 1 over model.vocab and added_tokens (len(tokenizer))
    ({"tokenizer.json": '{"model": {"vocab": {"a": 0, "b": 127999}}, "added_tokens": [{"id": 128255}]}'}, 128256),
    # Unigram: model.vocab a list of [piece, score], ids its positions
    ({"tokenizer.json": '{"model": {"vocab": [["a", 0.0], ["b", -1.5], ["c", -2.0]]}}'}, 3),
    # the bound itself is a size
    ({"config.json": '{"vocab_size": 16777216}'}, 2**24),
])
def test_a_tokenizer_of_the_right_shape_is_read(tmp_path: Path, files: dict[str, str], size: int) -> None:
    got, err = _project(tmp_path, _tok_recipe(files), ["--project", "r.sh", *DRY])
    assert got["plan"]["model"]["vocab_size"] == size
    assert f"vocabulary {size} from tok/" in err


# ------------------------------------------------------------------ a wrapper's cluster counts
@pytest.mark.parametrize("key, value, top", [
    ("nodes", 0, "131,072"), ("nodes", -1, "131,072"), ("num_nodes", 0, "131,072"), ("nodes", 2**17 + 1, "131,072"),
    ("gpus_per_node", 0, "1,024"), ("gpus_per_node", -8, "1,024"), ("gpus_per_node", 2**10 + 1, "1,024"),
])
def test_a_wrapper_count_out_of_range_is_named_as_written(tmp_path: Path, key: str, value: int, top: str) -> None:
    body = f'[recipe]\npath = "r.sh"\n[cluster]\n{key} = {value}\n'
    _refused(tmp_path, {"w.primus.toml": body, "r.sh": BASH}, ["--project", "w.primus.toml", *DRY],
             f"cluster.{key}={value}", f"an integer from 1 to {top}")


def test_a_wrapper_count_in_range_is_read(tmp_path: Path) -> None:
    body = '[recipe]\npath = "r.sh"\n[cluster]\nnodes = 2\ngpus_per_node = 8\n'
    got, _ = _project(tmp_path, {"w.primus.toml": body, "r.sh": BASH}, ["--project", "w.primus.toml", *DRY])
    assert (got["plan"]["cluster"]["num_nodes"], got["plan"]["cluster"]["gpus_per_node"]) == (2, 8)


# ------------------------------------------------------------------ --version / --help into a stdout that fails
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("flag, redirect, why", [
    ("--version", "> /dev/full", "No space left on device"), ("--help", "> /dev/full", "No space left on device"),
    ("--version", ">&-", "stdout is closed")])
def test_version_and_help_into_a_failing_stdout_say_so(tmp_path: Path, flag: str, redirect: str, why: str) -> None:
    p = subprocess.run(["bash", "-c", f"{sys.executable} -m primus_launch {flag} {redirect}"], cwd=tmp_path,
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("primus-launch: error: stdout: cannot write")
    assert why in lines[0]


def test_version_into_a_pipe_and_a_file_is_written(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "primus_launch", "--version"], cwd=tmp_path, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert p.returncode == 0 and p.stdout.decode().startswith("primus-launch ") and not p.stderr


# ------------------------------------------------------------------ the vocabulary refusal names what to add, and where
def test_vocab_refusal_names_the_recipes_own_argument_and_it_works(tmp_path: Path) -> None:
    """user16: "pass --vocab-size N" read as a primus-launch option (there is none); the refusal now says to add
    it to the recipe's Megatron arguments (a Primus experiment: its overrides' key), and doing that loads."""
    unknown = "--tokenizer-model no/such-tokenizer"
    bash = BASH.replace("--tokenizer-model meta-llama/Llama-3.1-8B", unknown)
    line = _refused(tmp_path, {"r.sh": bash}, ["--project", "r.sh", *DRY], "vocabulary size unknown",
                    "add --vocab-size N to the recipe's Megatron arguments")
    assert "pass --vocab-size" not in line
    fixed = bash.replace(unknown, unknown + " --vocab-size 128256")
    assert fixed != bash
    _project(tmp_path, {"ok.sh": fixed}, ["--project", "ok.sh", *DRY])

    prim = (ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
    bad = prim.replace("tokenizer_model: meta-llama/Llama-3.1-8B", "tokenizer_model: no/such-tokenizer")
    line = _refused(tmp_path, {"p.yaml": bad}, ["--project", "p.yaml", *DRY], "vocabulary size unknown",
                    "add vocab_size: N under modules.pre_trainer.overrides")
    assert "--vocab-size N" not in line
    fixed = bad.replace("    overrides:\n", "    overrides:\n      vocab_size: 128256\n")
    assert fixed != bad
    _project(tmp_path, {"okp.yaml": fixed}, ["--project", "okp.yaml", *DRY])
