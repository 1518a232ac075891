"""Run ``python -m primus_launch`` as a user would, signal it at a chosen moment of its run and
check how it ended (issue 29): one line, exit 130 / 143, nothing left running, no partial file,
no touched input.  Used by ``tests/test_interrupts.py`` and ``scripts/bad_input_campaign.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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


def handles_signals(pid: int) -> bool:
    """Whether ``pid`` catches SIGTERM (``SigCgt``): primus-launch's entry point installs its
    handlers on its first line, so this marks the moment its own code runs -- before it the
    interpreter is still starting, and a signal gets Python's defaults."""
    cgt = _status(pid).get("SigCgt")
    return bool(cgt) and bool(int(cgt.strip(), 16) >> (signal.SIGTERM - 1) & 1)


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
    left: list[int] = field(default_factory=list)   # processes of its group alive after it ended

    @property
    def lines(self) -> list[str]:
        return [ln.split("\r")[-1] for ln in self.stderr.splitlines() if ln.strip()]


def signal_at(proc: subprocess.Popen, delay_s: float, signum: int, grace_s: float = 30.0) -> Stopped:
    """Send ``signum`` ``delay_s`` after :func:`start_cli` returned; wait for the end (at most
    ``grace_s``, then kill the group); report how it ended."""
    time.sleep(delay_s)
    sent = None
    if proc.poll() is None:
        proc.send_signal(signum)
        sent = time.monotonic()
    try:
        out, err = proc.communicate(timeout=grace_s)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    took = None if sent is None else time.monotonic() - sent
    left: list[int] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:  # a worker being reaped at the parent's exit may take a moment
        left = group_members(proc.pid)
        if not left:
            break
        time.sleep(0.02)
    if left:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return Stopped(rc, took, out.decode(errors="replace"), err.decode(errors="replace"), left)


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
