"""The ``primus-launch -- CMD`` passthrough runs real child programs unchanged (issue 7).

Every test starts the real wrapper as a separate process (the installed ``primus-launch`` console
script, and ``python -m primus_launch.launch.launcher`` for the module alone) in front of a small
training-like Python program, and observes it from outside: exit status, what the child printed,
when it printed it, and what signals it received.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from primus_launch.errors import UserError
from primus_launch.launch.launcher import ensure_fits, exit_code_of, run_command
from primus_launch.plan import Cluster, ModelArch, Plan, Training
from primus_launch.projection.result import MemoryReport, ProjectionResult

PRIMUS = shutil.which("primus-launch") or str(Path(sys.executable).with_name("primus-launch"))
WRAPPERS = {
    "console-script": [PRIMUS, "--"],
    "module": [sys.executable, "-m", "primus_launch.launch.launcher", "--"],
}


@pytest.fixture(params=sorted(WRAPPERS))
def wrapper(request) -> list[str]:
    if request.param == "console-script" and not os.access(PRIMUS, os.X_OK):
        pytest.fail(f"console script {PRIMUS} is not installed (pip install -e .)")
    return WRAPPERS[request.param]


def _script(tmp_path: Path, body: str, name: str = "train.py") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return str(p)


TRAIN_LIKE = """
    import os, sys, time
    steps = int(sys.argv[1]); code = int(sys.argv[2])
    for step in range(1, steps + 1):
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
    if code == -9:
        os.kill(os.getpid(), 9)      # killed like an OOM-killed worker
    sys.exit(code)
"""


@pytest.mark.parametrize("code,expected", [(0, 0), (1, 1), (-9, 137)])
def test_exit_codes(tmp_path, wrapper, code, expected):
    prog = _script(tmp_path, TRAIN_LIKE)
    r = subprocess.run(wrapper + [sys.executable, prog, "3", str(code)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == expected, r.stderr
    assert r.stdout.splitlines() == ["step 1 loss 1.0000", "step 2 loss 0.5000", "step 3 loss 0.3333"]


def test_argv_env_cwd_passed_unchanged(tmp_path, wrapper):
    prog = _script(tmp_path, """
        import json, os, sys
        print(json.dumps({"argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd(),
                          "stdin": sys.stdin.read()}))
    """)
    args = ["--num-layers", "2", "--lr", "3e-4", "a b  c", "", "--flag=$HOME", "--", "'quoted'", "ünï"]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    env.update({"PRIMUS_TEST_VAR": "x=1 y", "NCCL_DEBUG": "INFO", "EMPTY": ""})
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    r = subprocess.run(wrapper + [sys.executable, prog, *args], input="from stdin\n", capture_output=True,
                       text=True, env=env, cwd=workdir, timeout=60)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    assert seen["argv"] == [prog, *args]
    assert seen["env"] == env
    assert Path(seen["cwd"]) == workdir
    assert seen["stdin"] == "from stdin\n"


def test_python_locale_coercion_does_not_reach_the_command(tmp_path, wrapper):
    """Under the C locale (no LANG / LC_*: containers, ``env -i``) Python's start-up exports
    ``LC_CTYPE=C.UTF-8`` (PEP 538), and the command saw it though its caller never set it; the child
    here is ``env`` (a Python child would coerce its own locale).  An LC_CTYPE the caller did set is kept."""
    env_bin = shutil.which("env")
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "PYTHONPATH")}
    base["PRIMUS_TEST_VAR"] = "1"
    for given in (base, {**base, "LC_CTYPE": "C.UTF-8"}):
        r = subprocess.run(wrapper + [env_bin], capture_output=True, text=True, env=given, timeout=60)
        assert r.returncode == 0, r.stderr
        assert dict(ln.split("=", 1) for ln in r.stdout.splitlines()) == given


def test_output_streams_line_by_line(tmp_path, wrapper):
    """The first step line is readable while the child is still running (nothing buffers it)."""
    go = tmp_path / "go"
    prog = _script(tmp_path, f"""
        import os, sys, time
        print("step 1 loss 2.5", flush=True)
        print("warming up", file=sys.stderr, flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.02)
        print("step 2 loss 2.1", flush=True)
    """)
    p = subprocess.Popen(wrapper + [sys.executable, prog], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline() == "step 1 loss 2.5\n"
        assert p.stderr.readline() == "warming up\n"
        assert p.poll() is None  # the child is still waiting for us: the line came out live
        go.touch()
        assert p.stdout.readline() == "step 2 loss 2.1\n"
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()


SIGNAL_CHILD = """
    import os, signal, sys, time
    role = sys.argv[1]
    def say(line):                             # one write() per line: two processes share the pipe
        os.write(1, (line + "\\n").encode())
    if role == "parent":                       # like torchrun: spawn a worker, wait for it
        import subprocess
        w = subprocess.Popen([sys.executable, __file__, "worker"])
    def on_signal(signum, frame):
        say(f"{role} {os.getpid()} got {signal.Signals(signum).name}")
        if role == "parent":
            w.wait()
        sys.exit(7 if role == "parent" else 0)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, on_signal)
    signal.signal(signal.SIGUSR2, on_signal)
    say(f"{role} ready pid={os.getpid()} pgid={os.getpgrp()}")
    while True:
        time.sleep(0.05)
"""


def _ready_lines(stream, n: int) -> list[str]:
    return [stream.readline().strip() for _ in range(n)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2])
def test_signal_forwarded_to_process_group(tmp_path, wrapper, sig):
    """A signal to primus-launch reaches the child and its worker (one process group), like torchrun.
    SIGUSR1 / SIGUSR2 too (Slurm's ``--signal=USR1@N`` before the time limit): at their default action
    they would end primus-launch alone and orphan the command."""
    prog = _script(tmp_path, SIGNAL_CHILD)
    # own session for the wrapper, so that nothing else in the test's group is touched
    p = subprocess.Popen(wrapper + [sys.executable, prog, "parent"], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        ready = sorted(_ready_lines(p.stdout, 2))
        assert ready[0].startswith("parent ready") and ready[1].startswith("worker ready"), ready
        fields = {role: dict(kv.split("=") for kv in line.split()[2:]) for role, line in
                  zip(("parent", "worker"), ready)}
        # the child leads its own process group (not the wrapper's), and the worker is in it
        assert fields["parent"]["pgid"] == fields["parent"]["pid"]
        assert fields["worker"]["pgid"] == fields["parent"]["pid"]
        assert int(fields["parent"]["pgid"]) != os.getpgid(p.pid)
        p.send_signal(sig)
        rest = p.stdout.read().splitlines()
        assert p.wait(timeout=60) == 7  # the child's own exit status after handling the signal
        assert sorted(line.split()[0] + " " + line.split()[-1] for line in rest) == [
            f"parent {sig.name}", f"worker {sig.name}"]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


def test_ignored_sigusr1_is_inherited_ignored(tmp_path, wrapper):
    """Started with SIGUSR1 ignored, primus-launch neither handles nor forwards it: the command inherits
    SIG_IGN, as it would when started directly (the same rule as SIGHUP under nohup)."""
    prog = _script(tmp_path, """
        import signal
        print(signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN, signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN)
    """)
    r = subprocess.run(wrapper + [sys.executable, prog], capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: signal.signal(signal.SIGUSR1, signal.SIG_IGN))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False"]


def test_unhandled_sigterm_gives_143(tmp_path, wrapper):
    prog = _script(tmp_path, """
        import time
        print("ready", flush=True)
        time.sleep(60)
    """)
    p = subprocess.Popen(wrapper + [sys.executable, prog], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        assert p.stdout.readline() == "ready\n"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


def test_missing_command_is_127_and_empty_is_user_error(wrapper):
    r = subprocess.run(wrapper + ["/nonexistent/torchrun-xyz", "--nnodes", "1"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 127
    assert r.stderr.strip().splitlines() == ["primus-launch: /nonexistent/torchrun-xyz: command not found"]
    with pytest.raises(UserError, match="empty"):
        run_command([])


def test_in_process_run_command_restores_handlers(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    prog = _script(tmp_path, TRAIN_LIKE)
    assert run_command([sys.executable, prog, "1", "3"]) == 3
    assert signal.getsignal(signal.SIGTERM) is before


def test_exit_code_of_matches_shell():
    for n in (1, 2, 9, 15):
        assert exit_code_of(-n) == 128 + n
    shell = subprocess.run(["sh", "-c", "kill -9 $$"]).returncode
    assert exit_code_of(shell) == int(subprocess.run(["sh", "-c", "sh -c 'kill -9 $$'; echo $?"],
                                                     capture_output=True, text=True).stdout)


def _result(fits: bool) -> ProjectionResult:
    plan = Plan(model=ModelArch(num_layers=2, hidden_size=64, ffn_hidden_size=256, num_attention_heads=4,
                                vocab_size=128, seq_length=32),
                training=Training(global_batch_size=8), cluster=Cluster(num_nodes=1, gpus_per_node=8))
    mem = MemoryReport(peak_bytes_per_gpu=90 * 1024 ** 3, capacity_bytes=80 * 1024 ** 3, margin_fraction=0.05,
                       fits=fits, worst_stage=0, breakdown={}, stages=[])
    return ProjectionResult(mode="dry-run", iteration_time_s=1.0, tokens_per_sec_per_gpu=1.0,
                            model_tflops_per_gpu=1.0, mfu=0.1, num_gpus=8, model_flops_per_iteration=1.0,
                            time_breakdown={}, memory=mem, plan=plan)


def test_ensure_fits_refuses_unless_forced():
    ensure_fits(_result(True), force=False)
    ensure_fits(_result(False), force=True)
    with pytest.raises(UserError) as ei:
        ensure_fits(_result(False), force=False)
    msg = str(ei.value)
    assert "\n" not in msg and "does not fit" in msg and "90.0 GiB" in msg and "--force" in msg
