"""Bad-input classes the seventh round found (``scripts/bad_input_campaign.py --only edge:``): outputs the
permission bits call writable and the folder refuses (root everywhere, ``/proc``), ``-`` and read-only files
as outputs, GPU-file spellings the model would take silently for another, a tune with no plan that fits,
SIGHUP and ``nohup``, and the passthrough command on an interactive terminal.  Each refusal is one
``primus-launch: error:`` line naming the field and the value, exit 2, before any work; the signals and the
passthrough follow the shell's conventions (bash(1): 128 + N, 127 for a command that cannot be found)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_run import run_cli
from signal_helpers import children, signal_at, signal_ignored, signal_pending, start_cli
from test_bad_input_values import refused

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
LLAMA70 = (ROOT / "recipes/megatron/llama3.1_70b.sh").read_text()
PRIMUS = (ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
GPU = ('[gpu.mygpu]\nvendor = "custom"\npeak_flops_bf16 = 989e12\nhbm_bytes = 85899345920\nhbm_bw = 3.35e12\n'
       'intra_node_bw = 450e9\nintra_node_topology = "switch"\ninter_node_bw = 50e9\n')
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


# ------------------------------------------------------------------------------------------------ outputs
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_an_output_folder_that_refuses_the_create_is_refused_before_the_search(tmp_path):
    """/proc passes ``os.access(W_OK)`` for root (as every folder does); the tune ran to its end, then the
    trial log's write failed with a bare ``[Errno 2]`` line naming no flag."""
    (tmp_path / "r.sh").write_text(BASH)
    line = refused(["--tune", "r.sh", "--dry-run", "--out", "/proc/t.sh"], tmp_path, "--out='/proc/t.sh'",
                   "cannot create a file in folder '/proc'")
    assert "Errno" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sh"]


def test_a_failed_write_is_one_line_naming_the_file_and_still_an_oserror(tmp_path):
    """The caches tolerate a failed write (``except OSError``); the CLI prints the file it could not write."""
    from primus_launch.errors import OutputError, UserError
    from primus_launch.fileio import atomic_write_text

    (tmp_path / "f").write_text("a file, not a folder")
    with pytest.raises(OutputError) as e:
        atomic_write_text(tmp_path / "f" / "out.json", "{}")
    assert isinstance(e.value, OSError) and isinstance(e.value, UserError)
    assert str(e.value).startswith(f"output='{tmp_path / 'f' / 'out.json'}': cannot write: ")


@pytest.mark.parametrize("argv,words", [
    (["--project", "r.sh", "--dry-run", "--report", "-"], ["--report='-'", "never to standard output"]),
    (["--tune", "r.sh", "--dry-run", "--out", "t.sh"], ["--out='t.sh'", "read-only file (mode 0444)"]),
], ids=["dash", "read-only"])
def test_dash_and_read_only_outputs_are_refused(tmp_path, argv, words):
    """``--report -`` wrote a file named '-'; a read-only ``t.sh`` was replaced (the rename needs only the
    folder's permission), where ``cp`` would have refused."""
    (tmp_path / "r.sh").write_text(BASH)
    (tmp_path / "t.sh").write_text("keep me\n")
    os.chmod(tmp_path / "t.sh", 0o444)
    refused(argv, tmp_path, *words)
    assert (tmp_path / "t.sh").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sh", "t.sh"]


# ------------------------------------------------------------------------------------------------ GPU file
@pytest.mark.parametrize("extra,words", [
    ('arch = "hoper"', ["gpu.mygpu.arch='hoper'", "'hopper'"]),          # was: Hopper curves, as '' (unknown)
    ('vendor = "NVIDIA"', ["gpu.mygpu.vendor='NVIDIA'", "nvidia, amd, custom"]),  # was: no DeepEP searched
    ("sustained_clock_fraction = 1e-300", ["sustained_clock_fraction=1e-300", "between 0.05 and 1"]),  # 1e299 s
], ids=["arch", "vendor", "clock"])
def test_gpu_file_spellings_the_model_would_take_for_another_are_refused(tmp_path, extra, words):
    (tmp_path / "r.sh").write_text(BASH)
    (tmp_path / "g.toml").write_text(GPU.replace('vendor = "custom"\n', "") + extra + "\n")
    refused(["--project", "r.sh", "--dry-run", "--json", "--gpu-file", "g.toml", "--gpu", "mygpu"], tmp_path,
            "--gpu-file='g.toml'", *words)


def test_an_unknown_gpu_file_field_names_the_allowed_ones(tmp_path):
    """"hbm_bandwidth_bytes_per_s: Extra inputs are not permitted" named no field the file may give (user12);
    the line now ends with GPUSpec's fields."""
    from primus_launch.projection.hardware.gpus import GPUSpec

    (tmp_path / "r.sh").write_text(BASH)
    (tmp_path / "g.toml").write_text("[gpu.h100-sxm]\nhbm_bandwidth_bytes_per_s = 2e12\n")
    err = refused(["--project", "r.sh", "--dry-run", "--gpu-file", "g.toml"], tmp_path, "[gpu.h100-sxm]",
                  "hbm_bandwidth_bytes_per_s", "allowed fields: vendor, peak_flops_bf16")
    assert all(f in err for f in GPUSpec.model_fields if f != "name")


# ------------------------------------------------------------------------------------------------ model
def test_max_position_embeddings_below_the_sequence_is_refused(tmp_path):
    """Megatron-LM's validate_args asserts max_position_embeddings >= seq_length; the plan took 4096 / 8192."""
    (tmp_path / "r.sh").write_text(BASH.replace("--max-position-embeddings 131072", "--max-position-embeddings 4096"))
    refused(["--project", "r.sh", "--dry-run", "--json"], tmp_path, "--max-position-embeddings=4096",
            "at least seq_length=8192")


def test_a_primus_key_given_twice_is_noted(tmp_path):
    """Primus's yaml.safe_load keeps the last of two values for one key without a word; the Megatron YAML reader
    already said so, the Primus reader did not (MBS 2 of ``micro_batch_size: 4`` then ``2``, silently)."""
    text = PRIMUS.replace("      micro_batch_size: ${PRIMUS_MBS:4}\n",
                          "      micro_batch_size: ${PRIMUS_MBS:4}\n      micro_batch_size: 2\n")
    (tmp_path / "r.yaml").write_text(text)
    rc, out, err, _ = run_cli(["--project", "r.yaml", "--dry-run", "--json"], tmp_path)
    assert rc == 0, err[-500:]
    line = next(n + 1 for n, ln in enumerate(text.splitlines()) if ln == "      micro_batch_size: 2")
    assert f"primus-launch: note: micro_batch_size: given twice (lines {line - 1} and {line}); the last is read" in err


# ------------------------------------------------------------------------------------------------ tune
def test_a_tune_with_no_plan_that_fits_writes_nothing_and_says_why(tmp_path):
    """Llama 3.1 70B on one H100 (~1.4 TB of weights, gradients and Adam state): the tune wrote the
    original, which does not fit, as the "tuned recipe", and exited 0."""
    text = "\n".join(ln for ln in LLAMA70.splitlines() if "virtual-pipeline" not in ln)
    text = text.replace("TP=${TP:-8}", "TP=1").replace("PP=${PP:-4}", "PP=1")
    (tmp_path / "r.sh").write_text(text + "\n")
    refused(["--tune", "r.sh", "--dry-run", "--nodes", "1", "--gpus-per-node", "1", "--out", "t.sh"], tmp_path,
            "--tune=r.sh: no plan fits in memory on 1 x 1 h100-sxm", "GiB per GPU of 79.2 GiB", "nothing written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sh"]


def test_no_plan_fits_is_the_one_line_alone_and_offers_what_the_gpu_runs(tmp_path):
    """The no-fit error came after two warnings that contradicted it ("the original plan is kept", "gain is
    relative to it anyway": nothing is kept, there is no gain), and offered --allow fp8 on an A100, which
    has no FP8 tensor cores."""
    text = "\n".join(ln for ln in LLAMA70.splitlines() if "virtual-pipeline" not in ln)
    text = text.replace("TP=${TP:-8}", "TP=1").replace("PP=${PP:-4}", "PP=1")
    (tmp_path / "r.sh").write_text(text + "\n")
    rc, out, err, _ = run_cli(["--tune", "r.sh", "--dry-run", "--nodes", "1", "--gpus-per-node", "1", "--gpu",
                               "a100-sxm-80gb", "--out", "t.sh"], tmp_path)
    assert rc == 2 and "warning" not in err, err
    assert "or --allow optimizer-dtypes; nothing written" in err and "fp8" not in err


def test_more_workers_than_cores_run_as_many_as_the_cores(tmp_path):
    """``--workers 4096`` (the flag's bound) forked 4,096 copies of the process on any machine."""
    (tmp_path / "r.sh").write_text(BASH)
    rc, out, err, _ = run_cli(["--tune", "r.sh", "--dry-run", "--json", "--workers", "4096", "--out", "t.sh"], tmp_path)
    cores = len(os.sched_getaffinity(0))
    assert rc == 0, err[-800:]
    assert f"--workers=4096: this process may use {cores} core(s); {cores} worker process(es) run" in err


# ------------------------------------------------------------------------------------------------ signals
def test_sighup_ends_a_tune_with_one_line_and_129(tmp_path):
    """A hang-up (terminal or ssh closed) killed the CLI at once: no line, and its pool's workers, left
    with a closed pipe, printed BrokenPipeError tracebacks."""
    (tmp_path / "r.sh").write_text(BASH)
    proc = start_cli(["--tune", "r.sh", "--dry-run", "--exhaustive", "--workers", "2", "--out", "t.sh"], tmp_path)
    t0 = time.monotonic()
    while not children(proc.pid) and proc.poll() is None and time.monotonic() - t0 < 60:
        time.sleep(0.01)
    stopped = signal_at(proc, 0.0, signal.SIGHUP)
    if stopped.rc == 0:  # the sweep ended first (a fast machine): nothing to judge
        return
    assert stopped.rc == 129, (stopped.rc, stopped.lines[-3:])
    assert "Traceback" not in stopped.stderr and stopped.lines[-1] == "primus-launch: hung up (SIGHUP)", stopped.lines[-3:]
    assert not stopped.left  # nothing of its group outlived it (what is still there is already dying)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_nohup_keeps_the_passthrough_command_alive(tmp_path):
    """``nohup primus-launch -- cmd``: SIGHUP was handled and forwarded, so the hang-up nohup is there to
    shield the command from killed it (exit 129)."""
    def nohup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    # the command waits for a file, not for a time: the hang-up lands while it runs, however busy the machine
    proc = subprocess.Popen([sys.executable, "-m", "primus_launch", "--", "sh", "-c",
                             "while [ ! -e go ]; do sleep 0.01; done; echo alive"],
                            env=ENV, preexec_fn=nohup, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        t0 = time.monotonic()
        while not children(proc.pid) and proc.poll() is None and time.monotonic() - t0 < 60:
            time.sleep(0.005)  # until the command runs
        command = children(proc.pid)
        # the cause, read where it lives: the command was started with the hang-up still ignored (a launcher that
        # handles SIGHUP hands the command the default instead: exec resets a handled signal, not an ignored one)
        assert command and all(signal_ignored(p, signal.SIGHUP) for p in command), command
        proc.send_signal(signal.SIGHUP)
        # a hang-up the launcher handled (the old fault) is forwarded to the command at its delivery: go on once
        # neither the launcher nor the command has it pending (an ignored one is dropped as it is sent)
        while any(signal_pending(p, signal.SIGHUP) for p in [proc.pid, *command]) and time.monotonic() - t0 < 60:
            time.sleep(0.005)
        (tmp_path / "go").touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, out) == (0, b"alive\n"), err


# ------------------------------------------------------------------------------------------------ passthrough
def _in_terminal(argv: list[str], typed: bytes, after_s: float, limit_s: float = 20.0) -> tuple[object, bytes]:
    """Run ``argv`` on a new pseudo-terminal as its foreground job; type ``typed`` after ``after_s`` (the
    campaign's runner, ``scripts/bad_input_campaign.py`` ``run_in_terminal``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from bad_input_campaign import run_in_terminal

    env = dict(os.environ)
    env.update(ENV)
    rc, out = run_in_terminal(argv, typed, after_s, limit_s, env=env)
    return ("still running" if rc is None else rc), out


def test_a_passthrough_command_reads_the_terminal(tmp_path):
    """The command runs in its own process group, a background group on the terminal: its first read
    (``input()``, a ``breakpoint()``) stopped it with SIGTTIN, and primus-launch waited for ever."""
    rc, out = _in_terminal([sys.executable, "-m", "primus_launch", "--", sys.executable, "-c",
                            "print('got', input())"], b"hello\n", after_s=1.5)
    assert rc == 0 and b"got hello" in out, (rc, out[-300:])


@pytest.mark.parametrize("argv,rc,words", [
    ([""], 127, "command not found"),                                  # was 126 (Popen tried '' in every folder)
    (["./bad.sh"], 127, "required file not found"),                   # was "command not found" for a file that is there
], ids=["empty", "bad-interpreter"])
def test_passthrough_commands_that_cannot_start(tmp_path, argv, rc, words):
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/nonexistent/interpreter\n")
    bad.chmod(0o755)
    got, out, err, _ = run_cli(["--", *argv], tmp_path)
    assert got == rc and words in err and "Traceback" not in err, (got, err)


# ------------------------------------------------------------------------------------------------ eighth round
YAML = (ROOT / "recipes/megatron/llama3.1_8b.yaml").read_text()
TOML = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()


def _in_bash(snippet: str) -> str:
    return BASH.replace("# Parallelism and batch\n", snippet + "# Parallelism and batch\n", 1)


def test_bash_that_fans_out_is_refused_not_run_for_ever(tmp_path):
    """Depth (20) bounded each chain of calls or sources, not their number: two calls per level ran 2^30
    statements (a fragment sourcing the next twice hung past 60 s: the campaign's ``bash:source-fan-out``).
    The count of statements one reading runs is bounded."""
    (tmp_path / "r.sh").write_text(_in_bash("".join(f"f{i}() {{ f{i + 1}; f{i + 1}; }}\n" for i in range(30))
                                            + "f30() { X=1; }\nf0\n"))
    refused(["--project", "r.sh", "--dry-run", "--json"], tmp_path, "r.sh: runs more than 10,000 statements")


@pytest.mark.parametrize("snippet,words", [
    ("TP_SIZE=1\n((TP_SIZE = X = 2))\n", "arithmetic command '((TP_SIZE = X = 2))' not evaluated"),
    ("TP_SIZE=1\nlet TP_SIZE=X=2\n", "'let TP_SIZE=X=2' not evaluated"),
    ("TP_SIZE=1\n((TP_SIZE = (X <<= 1)))\n", "arithmetic command '((TP_SIZE = (X <<= 1)))' not evaluated"),
], ids=["arith-command", "let", "shift-assign"])
def test_bash_arithmetic_commands_are_noted(tmp_path, snippet, words):
    """An arithmetic command or ``let`` whose assignment holds another one changes a variable the reader does not
    follow: said, as a loop is (was silent).  A list of plain assignments (``((X *= 2))``, ``let X=X*2``) is
    evaluated (robust10: tests/test_bad_input_robust10.py)."""
    (tmp_path / "r.sh").write_text(BASH.replace("TP_SIZE=2\n", snippet, 1))
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--json"], tmp_path)
    assert rc == 0 and words in err, err[-600:]


@pytest.mark.parametrize("text,words", [
    (TOML.replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 1\ntensor_paralel_degree = 8"),
     ["parallelism.tensor_paralel_degree=8", "did you mean parallelism.tensor_parallel_degree?"]),
    (TOML + "\n[paralelism]\ntensor_parallel_degree = 8\n", ["[paralelism] is no TorchTitan table", "[parallelism]"]),
], ids=["key", "table"])
def test_torchtitan_key_typos_are_refused(tmp_path, text, words):
    """TorchTitan v0.2.2's ConfigManager refuses a field JobConfig lacks ("Invalid field names"); the reader
    listed it as not modelled and projected TP=1."""
    (tmp_path / "r.toml").write_text(text)
    refused(["--project", "r.toml", "--dry-run", "--json"], tmp_path, *words)


@pytest.mark.parametrize("text,words", [
    (YAML.replace("\nbf16: true\n", "\nbf16: 'false'\n"), ["--bf16='false'", "true or false unquoted"]),
    (PRIMUS.replace("    bf16: true\n", "    bf16: 'false'\n"), ["bf16='false'", "true or false, unquoted"]),
], ids=["megatron-yaml", "primus"])
def test_a_quoted_false_for_a_yaml_boolean_is_refused(tmp_path, text, words):
    """``bf16: 'false'`` is the string 'false' to yaml.safe_load: true in Megatron-LM's --yaml-cfg namespace,
    and Primus passes it to Megatron-LM as it is (its argument builder coerces enums only); the reader
    projected FP32.  ``bf16: 'true'`` (true either way) is read."""
    (tmp_path / "r.yaml").write_text(text)
    refused(["--project", "r.yaml", "--dry-run", "--json"], tmp_path, *words)
    (tmp_path / "r.yaml").write_text(text.replace("bf16: 'false'", "bf16: 'true'"))
    rc, out, err, _ = run_cli(["--project", "r.yaml", "--dry-run", "--json"], tmp_path)
    assert rc == 0 and '"precision": "bf16"' in out, err[-300:]


def _shell(cmd: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=ENV, capture_output=True, timeout=120)


def test_a_closed_stderr_keeps_the_json_answer_whole(tmp_path):
    """``2>&-``: Python's sys.stderr is None and print(file=None) writes to stdout: the notes went into the
    --json document a pipe reads."""
    (tmp_path / "r.sh").write_text(BASH)
    p = _shell(f"{sys.executable} -m primus_launch --project r.sh --dry-run --json 2>&-", tmp_path)
    import json

    assert p.returncode == 0 and json.loads(p.stdout)["num_gpus"] == 8, p.stdout[:300]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_stdout_is_one_line_and_full_stderr_is_not_the_runs_fault(tmp_path):
    """``> /dev/full``: a bare '[Errno 28] No space left on device' naming nothing; ``2>/dev/full``: the tune's
    progress bar write ended the run as an internal error (exit 70)."""
    (tmp_path / "r.sh").write_text(BASH)
    p = _shell(f"{sys.executable} -m primus_launch --project r.sh --dry-run > /dev/full", tmp_path)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and lines[-1] == "primus-launch: error: stdout: cannot write: No space left on device", lines
    p = _shell(f"{sys.executable} -m primus_launch --tune r.sh --dry-run --out t.sh 2>/dev/full", tmp_path)
    assert p.returncode == 0 and b"best:" in p.stdout, (p.returncode, p.stdout[-300:])


@pytest.mark.parametrize("old,new,words", [
    ("    --bf16\n", "    \u2014bf16\n", ["argument='\u2014bf16'", "U+2014 EM DASH", "write --bf16"]),
    ("    --bf16\n", "    --bf16 \u2013-recompute-activations\n", ["U+2013 EN DASH", "write --recompute-activations"]),
], ids=["em-dash", "en-dash"])
def test_a_flag_behind_a_unicode_dash_is_refused(tmp_path, old, new, words):
    """A flag pasted from a document (``\u2014bf16``) is a positional word to argparse: Megatron-LM exits with
    "unrecognized arguments"; the reader skipped it and projected FP32 / no recompute without a word."""
    assert old in BASH
    (tmp_path / "r.sh").write_text(BASH.replace(old, new, 1))
    refused(["--project", "r.sh", "--dry-run", "--json"], tmp_path, *words)
