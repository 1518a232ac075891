"""Probe (issue 28, sw2502): are the two NeMo 25.02 DGX-B200 rows projected fast because that container's early
Blackwell software was slower than the kernels the B200 curves are priced on?

    PYTHONPATH=. python scripts/probe_nemo2502_stack.py [--mirror /work/.mirror/NVIDIA+cudnn-frontend/repo]

Part 1 -- kernel level.  cudnn-frontend's SDPA training benchmark published BF16 results at several cuDNN versions
(``benchmark/sdpa_benchmark*_training/artifacts/*.csv`` in the commits of :data:`CFE_CSVS`: B200 at cuDNN 9.10.2 and
9.13.1, GB300 at 9.13.1 and 9.17.0, GB200 at 9.17.0; b1, 128 query / 8 KV heads, d128, causal, seq = q = kv). The
script reads those CSVs from the git mirror (skipped when absent) and prints each beside the model's price of the same
shape (``cost/compute.py attention_time`` on that GPU): measured / model < 1 means the kernel ran faster than the
model prices it.  The mirror holds no B200 figure at cuDNN 9.7 / 9.8 (the NeMo 25.02 era).

Part 2 -- the same recipes on the later stack.  The model's projection of the two 25.02 plans on B200 and on GB200
(the plan's GPU swapped: 4 GPUs per tray, one 72-GPU NVLink domain as the 25.04 row) beside the published 25.02
DGX-B200 figures and the 25.04 DGX-GB200 figures of the same layouts (``TABLE_2502_B200`` / ``TABLE_2504_GB200``, NeMo
performance summary pages), and the published 25.04-GB200 / 25.02-B200 ratio of every recipe the two tables share.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIRROR = "/work/.mirror/NVIDIA+cudnn-frontend/repo"
# (label, gpu, cuDNN, commit, path, backend column value)
CFE_CSVS = [
    ("B200 cuDNN 9.10.2 (pytorch:25.05)", "b200", "9.10.2", "f937055",
     "benchmark/sdpa_benchmark_bf16_training/artifacts/sdpa_benchmark_results_NVIDIA_B200.csv", "pyt_cudnn"),
    ("B200 cuDNN 9.10.2 (pytorch:25.06)", "b200", "9.10.2", "9793df5",
     "benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv", "pyt_cudnn"),
    ("B200 cuDNN 9.13.1 (pytorch:25.09)", "b200", "9.13.1", "0b1577c",
     "benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv", "pyt_cudnn"),
    ("GB300 cuDNN 9.13.1 (pytorch:25.09)", "gb300", "9.13.1", "0b1577c",
     "benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_GB300.csv", "pyt_cudnn"),
    ("GB300 cuDNN 9.17.0 (pytorch:25.11)", "gb300", "9.17.0", "b372d39",
     "benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_GB300.csv", "cudnn_fe"),
    ("GB200 cuDNN 9.17.0 (pytorch:25.11)", "gb200", "9.17.0", "b372d39",
     "benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_GB200.csv", "cudnn_fe"),
]

PAGE_2502 = "https://docs.nvidia.com/nemo-framework/user-guide/latest/performance/performance_summary.html"
PAGE_2504 = ("https://docs.nvidia.com/nemo-framework/user-guide/latest/performance/archive/"
             "25.04-performance-summary.html")
# tokens/s/GPU of the recipes both tables run with the same GPU count and layout ('Container: NeMo 25.02, System:
# DGX-B200' FP8 table; 'Container: NeMo 25.04, System: DGX-GB200' FP8 table, FSDP 0 rows)
TABLE_2502_B200 = {"LLAMA3-8B": 26006, "LLAMA3-405B": 625, "Nemotron-15B": 14760, "Nemotron-340B": 602,
                   "Mixtral-8x7B": 15457, "Mixtral-8x22B": 2232}
TABLE_2504_GB200 = {"LLAMA3-8B": 33099, "LLAMA3-405B": 665, "Nemotron-15B": 17809, "Nemotron-340B": 737,
                    "Mixtral-8x7B": 19275, "Mixtral-8x22B": 2731}
ROWS = {"nemo2502_b200_fp8ds_mixtral_8x7b_64gpu": "Mixtral-8x7B",
        "nemo2502_b200_fp8ds_mixtral_8x22b_256gpu_seq64k": "Mixtral-8x22B"}


def read_cfe_csv(mirror: str, commit: str, path: str, backend: str) -> dict[int, tuple[float, float]]:
    """{seq: (forward ms, backward ms)} of one cudnn-frontend result CSV at ``commit`` (empty when unreadable)."""
    try:
        out = subprocess.run(["git", "-C", mirror, "show", f"{commit}:{path}"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    rows: dict[int, tuple[float, float]] = {}
    for line in out.splitlines()[1:]:
        p = line.split(",")
        if len(p) > 9 and p[7] == backend and p[5] == "128" and p[3] == "128" and p[4] == "8" and p[0] == "1":
            rows[int(p[1])] = (float(p[8]), float(p[9]))
    return rows


def part1(mirror: str) -> None:
    from primus_launch.projection.cost.compute import attention_time

    print("Part 1: cudnn-frontend SDPA BF16 (b1 h128/kv8 d128 causal) measured / model time, fwd | bwd")
    seqs = (2048, 4096, 8192, 16384, 32768, 65536)
    print(f"  {'source':40}" + "".join(f"{'s' + str(s):>14}" for s in seqs))
    for label, gpu, _ver, commit, path, backend in CFE_CSVS:
        rows = read_cfe_csv(mirror, commit, path, backend)
        if not rows:
            print(f"  {label:40} (not readable from {mirror} @{commit})")
            continue
        cells = []
        for s in seqs:
            if s not in rows:
                cells.append(f"{'-':>14}")
                continue
            mf, mb = attention_time(1, 128, s, s, 128, 128, True, gpu)
            cells.append(f"{rows[s][0] / (mf * 1e3):>7.2f}|{rows[s][1] / (mb * 1e3):<6.2f}")
        print(f"  {label:40}" + "".join(cells))
    print("  (pyt_cudnn rows include PyTorch's per-call overhead: 0.10-0.16 ms fwd, 0.16-0.57 ms bwd at s512)")


def part2() -> None:
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    runs = {r["id"]: r for r in json.loads((ROOT / "scripts" / "validation" / "runs.json").read_text())["rows"]}
    print("\nPart 2: the 25.02 plans projected on B200 and on GB200 (tokens/s/GPU) vs the published tables")
    print(f"  {'row':50} {'B200 model':>10} {'25.02 B200':>10} {'GB200 model':>11} {'25.04 GB200':>11}")
    for rid, name in ROWS.items():
        if rid not in runs:
            print(f"  {rid}: not in runs.json")
            continue
        plan = Plan.model_validate(runs[rid]["plan"])
        b = project_dry_run(plan).tokens_per_sec_per_gpu
        g = project_dry_run(plan.with_changes(cluster={"gpu": "gb200", "gpus_per_node": 4, "nvlink_domain": 72,
                                                       "num_nodes": plan.world_size // 4})).tokens_per_sec_per_gpu
        print(f"  {rid:50} {b:>10,.0f} {TABLE_2502_B200[name]:>10,} {g:>11,.0f} {TABLE_2504_GB200[name]:>11,}"
              f"   B200 {b / TABLE_2502_B200[name] - 1:+.1%}, GB200 {g / TABLE_2504_GB200[name] - 1:+.1%}")
    print(f"\n  published 25.04 DGX-GB200 / 25.02 DGX-B200 tokens/s/GPU, same recipe and layout ({PAGE_2502};"
          f" {PAGE_2504}):")
    for k in TABLE_2502_B200:
        print(f"    {k:14} {TABLE_2504_GB200[k] / TABLE_2502_B200[k]:.3f}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", default=MIRROR)
    a = ap.parse_args(argv)
    part1(a.mirror)
    part2()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
