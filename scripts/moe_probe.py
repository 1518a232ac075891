"""Probe the held-out MoE rows (issue 28): what one switch of a row's plan does to its dry-run projection, and
how busy DeepSeek's public DualPipe training profile keeps its compute streams.

Diagnostics only: nothing here changes the model or the validation rows.

1. ``--row ID``: the row's projection as built, then with one plan field switched at a time
   (``overlap_moe_expert_parallel_comm`` off, recompute off, forced-balance routing off); with
   ``--as-mxfp8`` the row projected with ``training.precision = fp8`` and ``fp8_recipe = mxfp8`` (e.g. the
   TorchTitan Llama 4 Scout MXFP8 row, whose plan the builder leaves in BF16: its ``quantization`` entry is a
   note, not a config key the TorchTitan adapter reads).  Each line: tokens/s/GPU, iteration seconds and the
   error against the row's measured tokens/s/GPU.
2. ``--dualpipe``: DeepSeek's ``train.json`` (github.com/deepseek-ai/profile-data, a pair of DualPipe
   forward / backward chunks of 4 DeepSeek-V3 MoE layers, EP64, H800): the trace's span, the union of its
   compute-stream kernels (every stream but DeepEP's, 27) and the gaps longer than 50 us between them --
   how much of the step a best-case two-chunk overlap leaves the compute idle.  Reads the trace from the
   local mirror (``/work/.mirror/deepseek-ai+profile-data/repo``) or ``--trace PATH``.

    python scripts/moe_probe.py --row mlm_moe_qwen3_235b_h100_bf16_256gpu_tp2pp8ep32
    python scripts/moe_probe.py --row torchtitan_gb200_llama4_scout_mxfp8 --as-mxfp8
    python scripts/moe_probe.py --dualpipe
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "scripts" / "validation" / "runs.json"
MIRROR = Path("/work/.mirror/deepseek-ai+profile-data/repo")
DEEPEP_STREAM = 27


def _project(plan: dict) -> tuple[float, float]:
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    res = project_dry_run(Plan.model_validate(plan))
    return res.tokens_per_sec_per_gpu, res.iteration_time_s


def probe_row(row_id: str, as_mxfp8: bool) -> int:
    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    if row_id not in rows:
        print(f"--row: {row_id!r} is not a row of {RUNS.relative_to(ROOT)}", file=sys.stderr)
        return 2
    row = rows[row_id]
    meas = row["measured_tokens_per_sec_per_gpu"]

    def switched(**fields) -> dict:
        p = copy.deepcopy(row["plan"])
        for k, v in fields.items():
            if k == "recompute":
                p["training"]["recompute"]["granularity"] = v
            else:
                p["training"][k] = v
        return p

    cases = [("as built", row["plan"]),
             ("EP overlap off", switched(overlap_moe_expert_parallel_comm=False)),
             ("recompute off", switched(recompute="none")),
             ("forced balance off", switched(moe_router_force_load_balancing=False))]
    if as_mxfp8:
        cases.append(("as MXFP8 (precision fp8, recipe mxfp8)", switched(precision="fp8", fp8_recipe="mxfp8")))
    print(f"{row_id}: measured {meas:.1f} tokens/s/GPU")
    for name, plan in cases:
        tok, it = _project(plan)
        print(f"  {name:40s} {tok:9.1f} tokens/s/GPU  {it:8.3f} s/iter  {100 * (tok - meas) / meas:+6.1f}%")
    return 0


def _union(intervals: list[tuple[int, int]]) -> tuple[int, list[tuple[int, int]]]:
    """Total covered length of ``intervals`` and the gaps between them (start, length)."""
    iv = sorted(intervals)
    total, gaps = 0, []
    s, e = iv[0]
    for a, b in iv[1:]:
        if a > e:
            total += e - s
            gaps.append((e, a - e))
            s, e = a, b
        else:
            e = max(e, b)
    return total + e - s, gaps


def probe_dualpipe(trace_path: str | None) -> int:
    if trace_path:
        trace = json.loads(Path(trace_path).read_text())
    else:
        out = subprocess.run(["git", "-C", str(MIRROR), "show", "HEAD:train.json"], capture_output=True, check=True)
        trace = json.loads(out.stdout)
    ks = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    t0 = min(e["ts"] for e in ks)
    t1 = max(e["ts"] + e["dur"] for e in ks)
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in ks if e["args"]["stream"] != DEEPEP_STREAM]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in ks if e["args"]["stream"] == DEEPEP_STREAM]
    busy, gaps = _union(comp)
    cbusy, _ = _union(comm)
    long_gaps = [g for g in gaps if g[1] > 50]
    span = t1 - t0
    print(f"DualPipe chunk pair (4 MoE layers forward + 4 backward): span {span / 1e3:.2f} ms")
    print(f"  compute streams busy {busy / 1e3:.2f} ms ({100 * busy / span:.1f}% of the span); DeepEP stream busy "
          f"{cbusy / 1e3:.2f} ms (notify waits included)")
    print(f"  compute idle gaps > 50 us: {len(long_gaps)}, {sum(g[1] for g in long_gaps) / 1e3:.2f} ms in all")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row", help="a row id of scripts/validation/runs.json")
    ap.add_argument("--as-mxfp8", action="store_true", help="also project the row's plan as MXFP8")
    ap.add_argument("--dualpipe", action="store_true", help="compute-stream occupancy of DeepSeek's DualPipe profile")
    ap.add_argument("--trace", help="path of train.json (default: the local mirror)")
    a = ap.parse_args(argv)
    if not a.row and not a.dualpipe:
        ap.print_help()
        return 2
    rc = probe_row(a.row, a.as_mxfp8) if a.row else 0
    if a.dualpipe and rc == 0:
        rc = probe_dualpipe(a.trace)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
