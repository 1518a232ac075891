"""Stress the measured path's interrupt handling: start ``python -m primus_launch --project
recipes/megatron/tiny_gpt_cpu.sh --measure-device cpu --report p.html`` in a fresh folder, send SIGINT
or SIGTERM after a random delay, and record the exit code and stderr's tail.  One run at a time.

    python scripts/signal_stress.py --runs 150 --min 0.2 --max 4.0 --seed 1 --out /tmp/stress.jsonl [--cold]

``--cold``: each run with a measurement cache of its own (``PRIMUS_LAUNCH_CACHE``), so that it builds the
process group and the layers; without it a run after the first reads every piece from the user's cache.

A run is bad when its exit is not 130 / 143 (or 0: finished first), its stderr is not the one line, or
the report exists half-written (a file other than the finished one, or a temp file left)."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "recipes" / "megatron" / "tiny_gpt_cpu.sh"


def one(delay: float, sig: int, env: dict, cold: bool) -> dict:
    d = Path(tempfile.mkdtemp(prefix="sigstress"))
    try:
        shutil.copy(TINY, d / "r.sh")
        if cold:  # a measurement cache of its own: the run builds and times the layers (else it reads the cache)
            env = dict(env, PRIMUS_LAUNCH_CACHE=str(d / "cache"))
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "primus_launch", "--project", "r.sh", "--measure-device", "cpu",
                              "--report", "p.html"], cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        try:
            p.wait(delay)
        except subprocess.TimeoutExpired:
            p.send_signal(sig)
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        files = sorted(x.name for x in d.iterdir() if x.name not in ("r.sh", "cache"))
        lines = [ln for ln in err.decode(errors="replace").splitlines() if ln.strip()]
        return {"delay": round(delay, 3), "sig": signal.Signals(sig).name, "rc": p.returncode,
                "seconds": round(time.monotonic() - t0, 2), "stderr_lines": len(lines), "tail": lines[-12:],
                "files": files}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def bad(r: dict) -> bool:
    ok_rc = {"SIGINT": 130, "SIGTERM": 143}[r["sig"]]
    if r["rc"] == 0:
        return False
    return r["rc"] != ok_rc or r["stderr_lines"] != 1 or any(f != "p.html" for f in r["files"]) or \
        "p.html" in r["files"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--min", type=float, default=0.2)
    ap.add_argument("--max", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="/tmp/signal_stress.jsonl")
    ap.add_argument("--cold", action="store_true", help="a fresh measurement cache per run (the layers are built)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    counts: dict = {}
    with open(a.out, "w") as f:
        for i in range(a.runs):
            sig = rng.choice([signal.SIGINT, signal.SIGTERM])
            r = one(rng.uniform(a.min, a.max), sig, env, a.cold)
            f.write(json.dumps(r) + "\n")
            f.flush()
            counts[r["rc"]] = counts.get(r["rc"], 0) + 1
            if bad(r):
                print(f"BAD #{i}: {r}", flush=True)
    print(json.dumps({"runs": a.runs, "exit_codes": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
