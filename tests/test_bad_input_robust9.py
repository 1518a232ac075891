"""Bad-input classes of the robust9 round (``scripts/bad_input_campaign.py --only r9:`` and ``--only bridge-yaml:``).

Each case runs ``python -m primus_launch`` in a subprocess with a timeout (a hang fails the test) and checks the
rule: a non-zero exit, one ``primus-launch: error:`` line naming the field and the value, no traceback, no
internal error (exit 70), nothing written.

- Launcher node ranges: torchrun ``--nnodes MIN:MAX`` was read as its MAX whatever the MIN, so ``4:1`` projected
  one node and ``0:4`` four; torch refuses both (``torch.distributed.run.config_from_args``: ``0 < min_nodes <=
  max_nodes``), Slurm refuses ``--nodes=4-2`` (``verify_node_count``).
- Megatron-Bridge ``run_config.yaml``: the integers the reader converts itself (``model.seq_length``,
  ``num_query_groups``, ``dataset.seq_length``) went through ``int()``: nan, 1e400, a list or a mapping was an
  internal error; a mapping where a Megatron-LM number belongs (``expert_model_parallel_size: {a: 1}``) was
  noted as "not read" and the default projected.
- Primus ``recompute_layer_ids``: ``[1.5]`` was read as layer 1 and ``[.inf]`` was an internal error.
- An output naming a file of the running program (a module it imported, the interpreter): ``--report
  primus_launch/__init__.py`` replaced the tool's own code (every later run failed with a SyntaxError).
- ``--project ''`` was reported as ``recipe='.'`` (a folder) and ``--project -`` as a missing file; a working
  folder removed under the shell gave ``error: [Errno 2] No such file or directory`` (no name).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
PRIMUS = (ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
BRIDGE = (ROOT / "tests/data/bridge/qwen3_moe_run_config.yaml").read_text()
TIMEOUT = 60


def cli(args: list[str], cwd: Path, prelude: str = "") -> tuple[int, str, str]:
    """``python -m primus_launch ARGS`` in ``cwd`` (``prelude``: Python run first in the same process, then the
    CLI's entry point), killed after :data:`TIMEOUT` seconds."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if prelude:
        code = f"{prelude}\nimport sys\nfrom primus_launch.__main__ import run\nsys.argv = ['primus-launch', *{args!r}]\n" \
               "sys.exit(run())"
        cmd = [sys.executable, "-c", code]
    else:
        cmd = [sys.executable, "-m", "primus_launch", *args]
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def refused(rc: int, err: str, *words: str) -> str:
    """The one error line of a refused run (exit 2, last on stderr, naming ``words``)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, (rc, lines[-3:])
    assert "Traceback" not in err and "internal error" not in err, err[-400:]
    errors = [ln for ln in lines if ln.startswith("primus-launch: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines[-3:]
    for w in words:
        assert w in errors[0], (w, errors[0])
    return errors[0]


def _files(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()}


# ------------------------------------------------------------------------------------- launcher node ranges
@pytest.mark.parametrize("value", ["4:1", "0:4", "4-2"])
def test_launch_script_node_range_with_min_above_max_or_from_zero_is_refused(tmp_path, value):
    """torch.distributed.run.config_from_args refuses ``0 < min_nodes <= max_nodes`` false (the independent
    truth: torch's own rule, checked against torch in tests/test_cluster_flags_reading.py)."""
    (tmp_path / "r.sh").write_text(BASH.replace("NUM_NODES=1", f"NUM_NODES={value}"))
    rc, _, err = cli(["--project", "r.sh", "--dry-run", "--json"], tmp_path)
    line = refused(rc, err, f"--nnodes={value!r}")
    assert "MIN" in line  # says what a range must be


def test_torchrun_command_node_range_with_min_above_max_is_refused_and_a_valid_one_read(tmp_path):
    cmd = ["torchrun", "--nnodes", "4:1", "--nproc-per-node", "8", "pretrain_gpt.py", "--num-layers", "32",
           "--hidden-size", "4096", "--num-attention-heads", "32", "--seq-length", "4096",
           "--max-position-embeddings", "4096", "--micro-batch-size", "1", "--global-batch-size", "64", "--bf16",
           "--vocab-size", "128256"]
    rc, _, err = cli(["--project", "--dry-run", "--json", "--", *cmd], tmp_path)
    refused(rc, err, "--nnodes='4:1'")
    cmd[2] = "1:2"  # elastic: the plan takes the MAX
    rc, out, err = cli(["--project", "--dry-run", "--json", "--", *cmd], tmp_path)
    assert rc == 0, err[-300:]
    assert '"num_gpus": 16' in out


@pytest.mark.parametrize("value, rc, words", [
    ("gpu", 0, "--nproc_per_node gpu (torchrun: one process per GPU of the node it runs on): the count of processes "
               "per node falls back to 8"),
    ("auto", 0, "--nproc_per_node auto"),
    ("cpu", 2, "--nproc_per_node='cpu': a GPU count"),
    ("2:8", 2, "--nproc_per_node='2:8': an integer")])
def test_launch_script_nproc_words_and_ranges(tmp_path, value, rc, words):
    """torch.distributed.run.determine_local_world_size: ``gpu`` / ``auto`` are every GPU of the node (as
    ``$(nvidia-smi -L | wc -l)``, read as the cluster's GPUs per node with a note; it was refused, and
    --gpus-per-node alone did not lift the refusal), ``cpu`` is no GPU run, and a process count is ``int()`` of
    the word: ``2:8`` (read as 8) is refused."""
    (tmp_path / "r.sh").write_text(BASH.replace("GPUS_PER_NODE=8", f"GPUS_PER_NODE={value}"))
    got, out, err = cli(["--project", "r.sh", "--dry-run", "--json"], tmp_path)
    if rc == 2:
        refused(got, err, words)
    else:
        assert got == 0 and words in err and '"num_gpus": 8' in out, err[-400:]
        got, out, err = cli(["--project", "r.sh", "--dry-run", "--json", "--gpus-per-node", "4"], tmp_path)
        assert got == 0 and "falls back" not in err and '"num_gpus": 4' in out, err[-400:]


# ------------------------------------------------------------------------------------------ Megatron-Bridge
def _bridge_with(key_line: int, value: str) -> str:
    lines = BRIDGE.splitlines(keepends=True)
    head, _, _ = lines[key_line - 1].partition(":")
    lines[key_line - 1] = f"{head}: {value}\n"
    return "".join(lines)


def _line_of(key: str, section_last: bool = False) -> int:
    hits = [i + 1 for i, ln in enumerate(BRIDGE.splitlines()) if ln.strip().startswith(key + ":")]
    assert hits, key
    return hits[-1] if section_last else hits[0]


@pytest.mark.parametrize("key, last, flag, value, shown", [   # flag: the run config's section.key (user15)
    ("seq_length", True, "model.seq_length", ".nan", "'nan'"),
    ("seq_length", True, "model.seq_length", "{a: 1}", "{'a': 1}"),
    ("seq_length", False, "dataset.seq_length", "1e400", "'1e400'"),
    ("seq_length", False, "dataset.seq_length", "[1]", "[1]"),
    ("num_query_groups", False, "model.num_query_groups", ".nan", "'nan'"),
    ("num_query_groups", False, "model.num_query_groups", "{a: 1}", "{'a': 1}")])
def test_bridge_integers_the_reader_converts_are_refused_by_name(tmp_path, key, last, flag, value, shown):
    (tmp_path / "b.yaml").write_text(_bridge_with(_line_of(key, last), value))
    rc, _, err = cli(["--project", "b.yaml", "--dry-run", "--json"], tmp_path)
    refused(rc, err, f"{flag}={shown}")


def test_bridge_mapping_where_a_parallel_size_belongs_is_refused_not_noted(tmp_path):
    (tmp_path / "b.yaml").write_text(_bridge_with(_line_of("expert_model_parallel_size"), "{a: 1}"))
    rc, _, err = cli(["--project", "b.yaml", "--dry-run", "--json"], tmp_path)
    refused(rc, err, "model.expert_model_parallel_size={'a': 1}", "not a mapping")


# -------------------------------------------------------------------------------------------------- Primus
@pytest.mark.parametrize("value", ["[1.5]", "[.inf]", "[true]"])
def test_primus_recompute_layer_ids_of_non_integers_are_refused(tmp_path, value):
    text = PRIMUS.replace("      train_iters: 50\n", "      train_iters: 50\n      recompute_granularity: full\n"
                          f"      recompute_method: null\n      recompute_layer_ids: {value}\n")
    assert text != PRIMUS
    (tmp_path / "r.yaml").write_text(text)
    rc, _, err = cli(["--project", "r.yaml", "--dry-run", "--json"], tmp_path)
    refused(rc, err, "recompute_layer_ids=", "layer ids (integers)")


# ------------------------------------------------------------------------------------------------- outputs
@pytest.mark.parametrize("flag", ["--report", "--trace"])
def test_output_naming_a_module_of_the_running_program_is_refused(tmp_path, flag):
    """A module the process imported (here one written in tmp_path, never the repo's own: a regression would
    overwrite it) is a file the run read; the output is refused and the module left as it was."""
    (tmp_path / "r.sh").write_text(BASH)
    (tmp_path / "ownmod.py").write_text("VALUE = 1\n")
    before = _files(tmp_path)
    rc, _, err = cli(["--project", "r.sh", "--dry-run", flag, "ownmod.py"], tmp_path,
                     prelude=f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import ownmod")
    refused(rc, err, f"{flag}='ownmod.py'", "running program", "module ownmod")
    assert _files(tmp_path) == before


def test_program_file_names_the_interpreter_and_a_module_by_any_spelling(tmp_path):
    from primus_launch import inputs

    assert inputs.program_file(sys.executable) == "the Python interpreter"
    link = tmp_path / "link.py"
    link.symlink_to(inputs.__file__)
    assert inputs.program_file(link) == "module primus_launch.inputs"
    (tmp_path / "other.html").write_text("x")
    assert inputs.program_file(tmp_path / "other.html") is None and inputs.program_file(tmp_path / "none") is None


# ----------------------------------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("flag", ["--project", "--tune"])
@pytest.mark.parametrize("value, words", [("", ("empty",)), ("-", ("standard input is not read", "./-"))])
def test_empty_or_dash_recipe_is_named_as_given(tmp_path, flag, value, words):
    (tmp_path / "r.sh").write_text(BASH)
    rc, _, err = cli([flag, value, "--dry-run"], tmp_path)
    refused(rc, err, f"{flag}={value!r}", *words)
    assert _files(tmp_path) == {"r.sh": hashlib.sha256(BASH.encode()).hexdigest()}


@pytest.mark.parametrize("value", ["", ",,"])
def test_allow_naming_no_knob_is_refused(tmp_path, value):
    """``--allow ""`` / ``--allow ,,`` searched no numerics knob without a word (the user asked for one)."""
    (tmp_path / "r.sh").write_text(BASH)
    rc, _, err = cli(["--tune", "r.sh", "--dry-run", "--out", "t.sh", "--allow", value], tmp_path)
    refused(rc, err, f"--allow={value!r}", "fp8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sh"]


def test_removed_working_folder_is_named(tmp_path):
    (tmp_path / "r.sh").write_text(BASH)
    gone = tmp_path / "gone"
    gone.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    script = f'cd {gone} && rmdir {gone} && exec {sys.executable} -m primus_launch --project ../r.sh --dry-run'
    p = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    refused(p.returncode, p.stderr, "working folder", "cd to an existing folder")


# ------------------------------------------------------------------------------------------- bash `source`
@pytest.mark.parametrize("target, words", [("./f", "source ./f: a named pipe; skipped"),
                                           ("./", "source ./: a folder; skipped"),
                                           ('"$0"', "source '': an empty name"),
                                           ("./r.sh", "source ./r.sh: more than 20 nested sources")])
def test_a_sourced_name_that_is_no_file_is_said_as_what_it_is(tmp_path, target, words):
    """``source`` of a named pipe (never opened: it would block), a folder, an empty name (``$0`` has no value
    here) or the script itself (the nesting bound): each a note saying what it is, where every one read "not
    found next to the script" (a pipe or the script itself is found); the run goes on (exit 0), without a hang."""
    os.mkfifo(tmp_path / "f")
    (tmp_path / "r.sh").write_text(BASH.replace("# Parallelism and batch\n", f"source {target}\n# Parallelism and batch\n"))
    rc, out, err = cli(["--project", "r.sh", "--dry-run", "--json"], tmp_path)
    assert rc == 0 and "Traceback" not in err, err[-400:]
    assert words in err, err[-600:]


def test_torchrun_command_nproc_cpu_is_refused_even_with_the_cluster_given(tmp_path):
    """``--nproc-per-node cpu`` starts one process per CPU core (determine_local_world_size): no GPU run; with
    --gpus-per-node it was read as 8 GPUs."""
    cmd = ["torchrun", "--nproc-per-node", "cpu", "pretrain_gpt.py", "--num-layers", "32", "--hidden-size", "4096",
           "--num-attention-heads", "32", "--seq-length", "4096", "--max-position-embeddings", "4096",
           "--micro-batch-size", "1", "--global-batch-size", "64", "--bf16", "--vocab-size", "128256"]
    rc, _, err = cli(["--project", "--dry-run", "--json", "--gpus-per-node", "8", "--", *cmd], tmp_path)
    refused(rc, err, "--nproc-per-node='cpu'", "a GPU count")


def test_a_launch_script_with_windows_line_ends_is_said(tmp_path):
    """A script saved with CR LF read as the LF one, without a word, where bash keeps each CR (``X=2`` CR LF sets X
    to ``2\\r``; a ``\\`` then CR does not continue the torchrun line: bash itself shows both, the independent
    truth); the projection stands with a note naming the file, the count and the first line."""
    (tmp_path / "r.sh").write_text(BASH.replace("TP_SIZE=2\n", "TP_SIZE=2\r\n"))
    rc, out, err = cli(["--project", "r.sh", "--dry-run", "--json"], tmp_path)
    assert rc == 0 and "Traceback" not in err, err[-300:]
    line = BASH[:BASH.index("TP_SIZE=2\n")].count("\n") + 1
    assert f"1 line(s) of r.sh end in CR LF (Windows line ends; the first on line {line})" in err
    probe = subprocess.run(["bash", "-c", 'eval "$(printf "X=2\\r")"; printf %s "$X" | od -An -c'], capture_output=True,
                           text=True, timeout=TIMEOUT)
    assert "\\r" in probe.stdout  # bash keeps the CR


@pytest.mark.parametrize("name, near", [("mi300", "mi300x"), ("b20", "b200"), ("a100-sxm-80", "a100-sxm-80gb"),
                                        ("tpu-v9", None)])
def test_unknown_gpu_names_the_near_one(tmp_path, name, near):
    """``--gpu mi300`` listed thirteen names; the near one is said first (difflib, cutoff 0.75), a far one
    (``tpu-v9``) only gets the list."""
    (tmp_path / "r.sh").write_text(BASH)
    rc, _, err = cli(["--project", "r.sh", "--dry-run", "--json", "--gpu", name], tmp_path)
    line = refused(rc, err, f"cluster.gpu={name!r}", "one of a100-sxm-40gb")
    assert (f"did you mean {near}?" in line) if near else "did you mean" not in line
