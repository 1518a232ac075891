"""Run ``python -m primus_launch`` as a user would, signal it at a chosen moment of its run and
check how it ended (issue 29): one line, exit 130 / 143, nothing left running, no partial file,
no touched input.  Used by ``tests/test_interrupts.py`` and ``scripts/bad_input_campaign.py``.

Nothing here depends on how busy the machine is (the tests that use it ran on 2 cores shared by several
runs, robust8): the start is the moment the CLI handles every signal it ends on (its ``/proc`` signal
masks, not a sleep); a moment of its run can be given in the CLI's own CPU time (:func:`wait_cpu`: the
kernel's ``sum_exec_runtime``, the same phase of the run however long the machine makes it wait); the time
it takes to end after a signal is also given without the time it spent waiting for a CPU
(:attr:`Stopped.own_s`, from ``/proc/PID/schedstat``); and a process of its group still there when it
ended counts as left behind only when it is not already dying (:func:`doomed`: exiting, or a kill
pending), instead of after a fixed grace.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _mask(status: dict[str, str], name: str) -> int:
    return int(status.get(name, "0").strip() or "0", 16)


def _has(mask: int, signum: int) -> bool:
    return bool(mask >> (int(signum) - 1) & 1)


def handles_signals(pid: int) -> bool:
    """Whether ``pid`` catches SIGINT and SIGTERM, and SIGHUP unless it ignores it (``nohup``) (``SigCgt``,
    ``SigIgn``): primus-launch's entry point installs its handlers on its first lines, so this marks the moment
    its own code runs -- before it the interpreter is still starting, and a signal gets Python's defaults.
    All three: a SIGHUP sent between the first handler and the last would end the process by the default."""
    st = _status(pid)
    cgt, ign = _mask(st, "SigCgt"), _mask(st, "SigIgn")
    return bool(st) and _has(cgt, signal.SIGINT) and _has(cgt, signal.SIGTERM) and (
        _has(cgt, signal.SIGHUP) or _has(ign, signal.SIGHUP))


def schedstat(pid: int | str) -> Optional[tuple[float, float]]:
    """Seconds ``pid`` (or ``"PID/task/TID"``, a thread) has run on a CPU and has waited for one (runnable, not
    running), from ``/proc/PID/schedstat`` (the scheduler's ``sum_exec_runtime`` and ``run_delay``); None when
    not readable."""
    try:
        run_ns, wait_ns = Path(f"/proc/{pid}/schedstat").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


def cpu_seconds(pid: int) -> Optional[float]:
    """CPU time ``pid`` has used (:func:`schedstat`, else ``utime + stime`` of ``/proc/PID/stat``)."""
    st = schedstat(pid)
    if st is not None:
        return st[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(pgid: int) -> float:
    """CPU time used by the live processes of group ``pgid`` (the CLI and its workers)."""
    return sum(c for c in (cpu_seconds(p) for p in group_members(pgid)) if c is not None)


def wait_cpu(proc: subprocess.Popen, cpu_s: float, limit_s: float = 300.0) -> None:
    """Return once the process and its workers (its group, :func:`start_cli`) have used ``cpu_s`` seconds of
    CPU together (or it ended): a moment of its run given in its own time, the same phase of the run on an idle
    machine and on a busy one."""
    t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < limit_s:
        if group_cpu_seconds(proc.pid) >= cpu_s:
            return
        time.sleep(0.005)


def signal_pending(pid: int, signum: int) -> bool:
    """Whether ``signum`` is pending for ``pid`` (sent, not yet delivered; ``SigPnd`` / ``ShdPnd``)."""
    st = _status(pid)
    return _has(_mask(st, "SigPnd") | _mask(st, "ShdPnd"), signum)


def signal_ignored(pid: int, signum: int) -> bool:
    """Whether ``pid`` ignores ``signum`` (``SigIgn``)."""
    return _has(_mask(_status(pid), "SigIgn"), signum)


PF_EXITING = 0x4  # include/linux/sched.h: the task is in do_exit


def doomed(pid: int) -> bool:
    """Whether ``pid`` is gone or already ending: a zombie, a task in ``do_exit`` (``PF_EXITING``), or one
    with SIGKILL pending, or SIGTERM pending that it neither blocks, catches nor ignores (its default ends
    it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    if fields[0] in ("Z", "X", "x") or int(fields[6]) & PF_EXITING:
        return True
    st = _status(pid)
    pending = _mask(st, "SigPnd") | _mask(st, "ShdPnd")
    if _has(pending, signal.SIGKILL):
        return True
    held = _mask(st, "SigBlk") | _mask(st, "SigCgt") | _mask(st, "SigIgn")
    return _has(pending, signal.SIGTERM) and not _has(held, signal.SIGTERM)


def _live(field_index: int, value: int) -> list[int]:
    """Live (not zombie) processes whose ``/proc/PID/stat`` field ``field_index`` (after the state;
    1: parent pid, 2: process group) is ``value``."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[field_index]) == value and fields[0] != "Z":
            out.append(int(p.name))
    return out


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    return _live(2, pgid)


def children(pid: int) -> list[int]:
    """Live child processes of ``pid``."""
    return _live(1, pid)


def default_signals() -> None:
    """In the child, before exec: SIGINT, SIGTERM and SIGHUP at their defaults, whatever the test runner
    inherited (``nohup``, a non-interactive shell's background job ignore some): the CLI is started as from
    an interactive shell, where a signal sent is a signal meant."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def start_cli(argv: list[str], cwd: Path, env: Optional[dict] = None) -> subprocess.Popen:
    """``python -m primus_launch ARGV`` in its own session (process group = its pid), returned once
    its own code runs (:func:`handles_signals`)."""
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "primus_launch", *argv], cwd=cwd, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=default_signals)
    t0 = time.monotonic()
    while not handles_signals(proc.pid) and proc.poll() is None and time.monotonic() - t0 < 60:
        time.sleep(0.002)
    return proc


@dataclass
class Stopped:
    rc: Optional[int]
    after_signal_s: Optional[float]     # signal to exit (None: it had ended before the signal)
    stdout: str
    stderr: str
    left: list[int] = field(default_factory=list)   # processes of its group alive, and not dying, after it ended
    waited_s: float = 0.0               # of after_signal_s, the time the CLI waited for a CPU (schedstat)

    @property
    def own_s(self) -> Optional[float]:
        """Signal to exit without the time the CLI was runnable and waited for a CPU: what the CLI itself took
        (its work and its waits on other processes), the same on an idle and a busy machine."""
        return None if self.after_signal_s is None else max(0.0, self.after_signal_s - self.waited_s)

    @property
    def lines(self) -> list[str]:
        return [ln.split("\r")[-1] for ln in self.stderr.splitlines() if ln.strip()]


def signal_at(proc: subprocess.Popen, delay_s: float, signum: int, grace_s: float = 30.0) -> Stopped:
    """Send ``signum`` ``delay_s`` after :func:`start_cli` returned (0: at once, e.g. after :func:`wait_cpu` or
    another handshake); wait for the end (at most ``grace_s``, then kill the group); report how it ended."""
    if delay_s > 0:
        time.sleep(delay_s)
    sent = None
    before = None
    if proc.poll() is None:
        before = schedstat(proc.pid)
        proc.send_signal(signum)
        sent = time.monotonic()
    result: dict[str, object] = {}

    def talk() -> None:
        tid = threading.get_native_id()
        result["reader_before"] = schedstat(f"{os.getpid()}/task/{tid}")
        try:
            result["out"] = proc.communicate(timeout=grace_s)
        except subprocess.TimeoutExpired:
            result["timeout"] = True
        result["ended"] = time.monotonic()
        result["reader_after"] = schedstat(f"{os.getpid()}/task/{tid}")

    reader = threading.Thread(target=talk, daemon=True)
    reader.start()
    last = before
    while reader.is_alive():  # the CLI's scheduler counters until it is reaped (the last read is its end)
        now = schedstat(proc.pid)
        last = now or last
        reader.join(0.005)
    if result.get("timeout"):
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    else:
        out, err = result["out"]  # type: ignore[misc]
        rc = proc.returncode
    took = None if sent is None else float(result["ended"]) - sent  # type: ignore[arg-type]
    # the time waiting for a CPU on the way from the signal to its end being seen: the CLI's, and this reader's
    # (it notices the end only once it runs again)
    waited = 0.0
    if took is not None:
        for a, b in ((before, last), (result.get("reader_before"), result.get("reader_after"))):
            if a is not None and b is not None:
                waited += b[1] - a[1]  # type: ignore[index]
    # the CLI's pipes are closed once every process holding them ended (a forked worker holds them): what is
    # still in the group must already be dying; anything else outlived the CLI
    left = [p for p in group_members(proc.pid) if not doomed(p)]
    if group_members(proc.pid):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return Stopped(rc, took, out.decode(errors="replace"), err.decode(errors="replace"), left, max(0.0, waited))


def complete_or_absent(path: Path) -> Optional[str]:
    """None when the output file is absent or whole (HTML closed, JSON parseable); else why not."""
    if not path.exists():
        return None
    text = path.read_text(errors="replace")
    if path.suffix == ".html" and not text.rstrip().endswith("</html>"):
        return f"{path.name}: HTML not closed"
    if path.suffix == ".json":
        try:
            json.loads(text)
        except ValueError:
            return f"{path.name}: not whole JSON"
    return None
