"""Bad-input classes of the robust13 round (``scripts/bad_input_campaign.py --only r13:``).

- An option given twice with different values (a Megatron-LM flag in a script or after ``--``, a torchrun option, a
  TorchTitan override on a 0.3 launch line or a job-TOML command) was read as the last without a word (a YAML key
  given twice is noted): now one note names every value and the one read.  The value read stays argparse's: the last
  (checked against a stdlib argparse parser, the rule of Megatron-LM's ``parse_args``, torchrun's and tyro's parsers).
- A Megatron-Bridge ``run_config.yaml`` switch quoted (``sequence_parallel: 'false'``) was read as false; Bridge's
  ``instantiate`` keeps the string, true in Python: now refused in one line naming the field, as the Megatron-LM,
  Primus and NeMo YAML readers refuse it.
- An output (``--report``, ``--trace``, ``--out``) naming a tokenizer file the recipe names but this run does not read
  (a SentencePiece ``tokenizer.model`` under ``--vocab-size``, a ``--merge-file``) replaced it: now refused as an input.
- ``torchrun --nnodes 4`` in a script whose ``#SBATCH`` header allocates 2 nodes was projected on 4 without a word
  (the rendezvous waits for nodes the job lacks): now noted (sbatch's own ``--nodes`` wins over the header: no refusal).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from cli_run import run_cli
from test_bad_input_robust11 import _refused_writing_nothing as _refused  # refused, nothing written

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
TOML = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
BRIDGE = (ROOT / "tests/data/bridge/qwen3_moe_run_config.yaml").read_text()
DRY = ["--dry-run", "--json"]
TITAN = ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train"]


def _argparse_last(flag: str, *values: str) -> int:
    """What a stdlib argparse parser (Megatron-LM's ``parse_args``, torchrun's, tyro's) keeps of a flag given twice."""
    ap = argparse.ArgumentParser()
    ap.add_argument(flag, type=int, dest="value")
    return ap.parse_args([w for v in values for w in (flag, v)]).value


def _project(tmp_path: Path, files: dict[str, str], argv: list[str]) -> tuple[dict, str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    rc, out, err, _ = run_cli(argv, tmp_path)
    assert rc == 0 and "Traceback" not in err, err[-400:]
    return json.loads(out), err


@pytest.mark.parametrize("files, argv, note, read", [
    ({"r.sh": BASH.replace("    --bf16\n", "    --bf16 --num-layers 16\n", 1)}, ["--project", "r.sh", *DRY],
     "--num-layers given 2 times with different values ('32', '16')", ("model", "num_layers", "--num-layers", "32", "16")),
    ({"r.sh": BASH.replace("--nnodes $NUM_NODES", "--nnodes $NUM_NODES --nnodes 2", 1)}, ["--project", "r.sh", *DRY],
     "--nnodes given 2 times with different values ('1', '2')", ("cluster", "num_nodes", "--nnodes", "1", "2")),
    ({}, ["--project", *DRY, "--", *TITAN, "--module", "llama3", "--config", "llama3_8b",
          "--parallelism.tensor_parallel_degree", "2", "--parallelism.tensor_parallel_degree=4"],
     "--parallelism.tensor_parallel_degree given 2 times", ("parallel", "tp", "--parallelism.tensor_parallel_degree", "2", "4")),
    ({"c.toml": TOML}, ["--project", *DRY, "--", *TITAN, "--job.config_file", "c.toml",
                        "--parallelism.tensor_parallel_degree", "2", "--parallelism.tensor_parallel_degree", "4"],
     "--parallelism.tensor_parallel_degree given 2 times", ("parallel", "tp", "--parallelism.tensor_parallel_degree", "2", "4")),
])
def test_an_option_given_twice_is_noted_and_the_last_read(tmp_path, files, argv, note, read):
    d, err = _project(tmp_path, files, argv)
    section, key, flag, first, last = read
    assert note in err and f"argparse keeps the last, {last!r} is read" in err, err[-600:]
    assert d["plan"][section][key] == _argparse_last(flag, first, last) == int(last)


def test_a_flag_repeated_with_its_own_value_is_not_noted(tmp_path):
    _, err = _project(tmp_path, {"r.sh": BASH.replace("    --bf16\n", "    --bf16 --num-layers 32 --bf16\n", 1)},
                      ["--project", "r.sh", *DRY])
    assert "given 2 times" not in err


@pytest.mark.parametrize("line, field, word", [
    ("  sequence_parallel: true", "model.sequence_parallel", "'false'"),
    ("  sequence_parallel: true", "model.sequence_parallel", "'no'"),
    ("  bf16: true", "mixed_precision.bf16", "'0'"),
])
def test_a_quoted_false_bridge_switch_is_refused(tmp_path, line, field, word):
    assert bool(word.strip("'"))  # what Bridge's dataclass holds: a non-empty string, true in Python
    text = BRIDGE.replace(line, line.replace("true", word), 1)
    _refused(tmp_path, {"b.yaml": text}, ["--project", "b.yaml", *DRY], f"{field}={word}", "unquoted")


def test_a_quoted_true_bridge_switch_reads_true(tmp_path):
    d, _ = _project(tmp_path, {"b.yaml": BRIDGE.replace("  sequence_parallel: true", "  sequence_parallel: 'true'", 1)},
                    ["--project", "b.yaml", *DRY])
    assert d["plan"]["parallel"]["sequence_parallel"] is True


@pytest.mark.parametrize("flag, victim, name, text", [
    ("--report", "tok.model", "r.sh", BASH.replace("--tokenizer-model meta-llama/Llama-3.1-8B",
                                                   "--tokenizer-model tok.model --vocab-size 128256")),
    ("--trace", "m.txt", "r.sh", BASH.replace("    --bf16\n", "    --bf16 --merge-file m.txt\n", 1)),
    ("--report", "hf/tokenizer.json", "r.toml", TOML.replace('"./assets/hf/Llama-3.1-8B"', '"hf"')),
])
def test_an_output_over_a_tokenizer_file_the_recipe_names_is_refused(tmp_path, flag, victim, name, text):
    (tmp_path / victim).parent.mkdir(exist_ok=True)
    (tmp_path / victim).write_bytes(b"\x0a\x0bsentencepiece")  # never read by this run: its size is --vocab-size's
    _refused(tmp_path, {name: text}, ["--project", name, *DRY, flag, victim], f"{flag}={victim!r}",
             "input of this run")
    assert (tmp_path / victim).read_bytes() == b"\x0a\x0bsentencepiece"


@pytest.mark.parametrize("nodes, extra, noted", [("4", [], True), ("2", [], False), ("4", ["--nodes", "4"], False)])
def test_a_launcher_past_the_sbatch_allocation_is_noted(tmp_path, nodes, extra, noted):
    text = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n" + BASH.replace("NUM_NODES=1", f"NUM_NODES={nodes}")
    d, err = _project(tmp_path, {"r.sh": text}, ["--project", "r.sh", *DRY, *extra])
    assert ("the #SBATCH header allocates 2" in err) == noted, err[-600:]
    assert d["plan"]["cluster"]["num_nodes"] == int(nodes)  # projected as the launcher (or --nodes) says
