"""Wall time and peak memory of one ``primus-launch --project --dry-run`` call per recipe format.

    python scripts/bench_cli.py [--repeat 3] [--json]

Each bundled recipe format is run as its own process (``python -m primus_launch``), ``--repeat``
times; the best wall time and the largest max RSS (``resource.getrusage(RUSAGE_CHILDREN)``, Linux
KiB) are printed with their ratio to the target of issue 13: under 1 s and 150 MB per call.  Both
text and ``--json`` output are timed (text first).  Nothing is cached between runs but what the
tool caches itself (the torchtitan / torchrun snapshots).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S, TARGET_MB = 1.0, 150.0

CASES: list[tuple[str, list[str]]] = [
    ("Megatron-LM .sh", ["recipes/megatron/llama3.1_70b.sh"]),
    ("Megatron-LM YAML", ["recipes/megatron/llama3.1_8b.yaml"]),
    ("TorchTitan TOML (v0.2)", ["recipes/torchtitan/llama3.1_8b.toml"]),
    ("TorchTitan launch script (0.3)", ["recipes/torchtitan/llama3_8b_launch.sh"]),
    ("TorchTitan launch line (0.3)", ["--", "torchrun", "--nnodes", "2", "--nproc-per-node", "8", "-m",
                                      "torchtitan.train", "--module", "llama3", "--config", "llama3_70b",
                                      "--parallelism.tensor_parallel_degree", "8"]),
    ("Megatron-LM command line", ["--", "torchrun", "--nnodes", "4", "--nproc-per-node", "8", "pretrain_gpt.py",
                                  "--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32",
                                  "--seq-length", "4096", "--max-position-embeddings", "4096", "--micro-batch-size",
                                  "1", "--global-batch-size", "256", "--padded-vocab-size", "128256", "--bf16",
                                  "--tensor-model-parallel-size", "2"]),
    ("Primus YAML", ["recipes/primus/MI355X/llama3.1_8b.yaml"]),
    ("wrapper TOML", ["recipes/llama3.1_8b_mi355x.primus.toml"]),
]


def _run(args: list[str], as_json: bool) -> tuple[float, float, int]:
    """(wall s, max RSS MB, exit code) of one call in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    recipe, cmd = (args, []) if "--" not in args else (args[:args.index("--")], args[args.index("--"):])
    argv = [sys.executable, "-m", "primus_launch", "--project", *recipe, "--dry-run", *(["--json"] if as_json else []),
            *cmd]
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if r.returncode != 0:
        print(f"  {' '.join(args[:3])}: exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: measure each case's max separately
    return wall, max(rss, before) / 1024, r.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    a = ap.parse_args()
    rows = []
    for name, args in CASES:
        walls, rss, rc = [], 0.0, 0
        for i in range(a.repeat):
            # each measurement in its own grandchild so RUSAGE_CHILDREN's max is this case's own
            out = subprocess.run([sys.executable, __file__, "--one", json.dumps(args), str(i % 2)], cwd=ROOT,
                                 capture_output=True, text=True)
            w, m, c = json.loads(out.stdout)
            walls.append(w)
            rss = max(rss, m)
            rc = rc or c
        best = min(walls)
        rows.append({"format": name, "wall_s": round(best, 3), "max_rss_mb": round(rss, 1),
                     "time_ratio": round(best / TARGET_S, 2), "rss_ratio": round(rss / TARGET_MB, 2),
                     "exit": rc, "meets": best < TARGET_S and rss < TARGET_MB and rc == 0})
    if a.json:
        print(json.dumps({"target_s": TARGET_S, "target_mb": TARGET_MB, "rows": rows}))
        return 0
    print(f"target: under {TARGET_S:.1f} s and {TARGET_MB:.0f} MB per call (ratio < 1 meets it); best of {a.repeat}")
    print(f"{'format':32s} {'wall s':>7s} {'x target':>8s} {'max RSS MB':>10s} {'x target':>8s}  meets")
    for r in rows:
        print(f"{r['format']:32s} {r['wall_s']:7.3f} {r['time_ratio']:8.2f} {r['max_rss_mb']:10.1f} "
              f"{r['rss_ratio']:8.2f}  {'yes' if r['meets'] else 'NO'}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        print(json.dumps(_run(json.loads(sys.argv[2]), sys.argv[3] == "1")))
        sys.exit(0)
    sys.exit(main())
