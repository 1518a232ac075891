"""The tuning case studies: published reference recipes tuned in dry-run.

For each case-study recipe (the Primus Tuning Agent's Mixtral 8x22B reference on 4 MI355X nodes,
NVIDIA's DeepSeek-V3 FP8 recipe on 1,024 H100 and Qwen3-235B-A22B recipe on 256 H100; bundled
under ``recipes/megatron/``), ``tune()`` with its defaults (the full space, exhaustive when it fits
the time limit, else the planner), the tuned recipe written next to a copy of the original, and:

- a markdown table: reference and tuned projection, projected gain, candidates scored of the
  legal ones, search kind and wall time, next to the published figures read from
  ``scripts/validation/current_runs.json`` (measured tokens/s/GPU of the reference, where published);
- per case, the unified diff between the reference recipe and the tuned one.

Usage: ``python scripts/case_study.py [--only NAME] [--allow fp8,...] [--memory-basis allocated]``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (name, recipe, current_runs.json id of the published measurement or None, what was published)
CASES = [
    ("Mixtral 8x22B, 32 MI355X", "recipes/megatron/mixtral_8x22b_mi355x_32gpu.sh",
     "primus_blog_mi355x_mixtral_8x22b_bf16_64gpu",
     "Primus Tuning Agent: +27 % over this reference in under 30 minutes (as issue 13 quotes the paper)"),
    ("DeepSeek-V3 FP8, 1,024 H100", "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml", None,
     "NVIDIA's recipe index lists no throughput for this recipe"),
    ("Qwen3-235B-A22B, 256 H100", "recipes/megatron/qwen3_235b_a22b_h100_256gpu.yaml",
     "mlm_moe_qwen3_235b_h100_bf16_256gpu_tp2pp8ep32", "NVIDIA recipe index: median TFLOP/s/GPU"),
]


def published(run_id: str | None) -> tuple[str, str]:
    """(measured tokens/s/GPU as text, where) from current_runs.json."""
    if run_id is None:
        return "-", ""
    rows = json.loads((ROOT / "scripts/validation/current_runs.json").read_text())
    row = next(r for r in rows if r["id"] == run_id)
    tok = row.get("measured_tokens_per_sec_per_gpu_for_judging") or row["measured"].get("tokens_per_sec_per_gpu")
    hw = row["hardware"]
    p = row["parallelism"]
    what = (f"{hw['num_gpus']} GPUs, TP {p['tp']} PP {p['pp']} VPP {p['vpp'] or 1} EP {p['ep']}, "
            f"MBS {row['training']['micro_batch_size']}")
    if row["measured"].get("tokens_per_sec_per_gpu") is None and row["measured"].get("tflops_per_gpu"):
        what += f"; {row['measured']['tflops_per_gpu']} TFLOP/s/GPU, tokens/s derived"
    return f"{tok:,.0f}", what


def _proof(cert) -> str:
    """What the search proved: the optimum, or how far from it the answer may be (work limit)."""
    if cert is None:
        return ""
    if cert.certified:
        return " (certificate)"
    return f" (work limit: at most {100 * cert.gap:.0f} % from the optimum)"


def _gib(r) -> str:
    """A projection's peak per GPU and its memory verdict (``fits`` / ``tight`` / ``does not fit``)."""
    return f"{r.memory.peak_bytes_per_gpu / 2**30:.1f} ({r.memory.verdict})"


def main(argv=None) -> int:
    from primus_launch.adapters import load_recipe, write_recipe
    from primus_launch.tuner.search import tune

    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--allow", default="")
    ap.add_argument("--memory-basis", default="reserved", choices=["reserved", "allocated"])
    ap.add_argument("--memory-certain", action="store_true",
                    help="only tuned plans that fit by their whole memory error band (primus-launch --memory-certain)")
    a = ap.parse_args(argv)
    rows, diffs = [], []
    tmp = Path(tempfile.mkdtemp(prefix="case_study_"))
    try:
        for name, recipe, run_id, paper in CASES:
            if a.only and a.only.lower() not in name.lower():
                continue
            src = ROOT / recipe
            copy = tmp / src.name
            shutil.copy(src, copy)
            plan = load_recipe(copy)
            t = time.perf_counter()
            res = tune(plan, allow=[x for x in a.allow.split(",") if x], memory_basis=a.memory_basis,
                       memory_certain=a.memory_certain)
            wall = time.perf_counter() - t
            out = write_recipe(res.best_plan, tmp / f"tuned{src.suffix}")
            diff = list(difflib.unified_diff(src.read_text().splitlines(), out.read_text().splitlines(),
                                             f"{recipe}", f"{recipe} (tuned)", lineterm="", n=0))
            b, o = res.best, res.baseline
            meas, where = published(run_id)
            rows.append((name, f"{plan.world_size:,} x {plan.cluster.gpu}",
                         f"{o.tokens_per_sec_per_gpu:,.0f}" + ("" if o.memory.fits else " (does not fit)"),
                         f"{b.tokens_per_sec_per_gpu:,.0f}", _gib(o), _gib(b), f"{100 * res.gain:+.1f} %",
                         f"{res.scored:,} of {'' if res.legal_exact else '~'}{res.legal_candidates:,}",
                         res.search + _proof(res.certificate), f"{wall:.0f} s",
                         meas + (f" ({where})" if where else ""), paper))
            diffs.append((name, plan.parallel_summary(), res.best_plan.parallel_summary(), diff))
            print(f"# {name}: {100 * res.gain:+.1f} %, {wall:.0f} s", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    head = ("case", "GPUs", "reference tok/s/GPU (projected)", "tuned tok/s/GPU", "reference GiB (verdict)",
            "tuned GiB (verdict)", "projected gain",
            "scored of legal", "search", "wall", "reference measured tok/s/GPU", "published")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    for name, before, after, diff in diffs:
        print(f"\n{name}: {before} -> {after}\n\n```diff")
        print("\n".join(diff))
        print("```")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
