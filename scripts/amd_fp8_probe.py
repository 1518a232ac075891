"""Where the AMD MI355X MoE rows' error sits against the one calibrated ROCm host constant (issue 28, AMD FP8).

    python scripts/amd_fp8_probe.py [--host-us 196 118 23 10]

For every MI355X Primus row of ``scripts/validation/runs.json`` (the MoE package blog's BF16 rows, 2025-12, and the
MoE package 2.0 blog's FP8 rows, 2026-08) prints the projection error at several host seconds per expert GEMM of
the legacy ``grouped_gemm`` loop (``calibration.ROCM_LEGACY_GEMM_HOST_S``, fitted on one BF16 row: 196 us; 118 us:
hipBLASLt's own client, a heuristic query 109.6 us + a launch 8.6 us, record ``hipblaslt1754-api-overhead-hot``;
23 us: the same client on a cached problem, 15.1 + 7.8 us, record ``rocmlibs3103-api-overhead-hot``; 10 us: the
per-GEMM price of every other expert loop, ``moe_host.TE_GEMM_HOST_S``), the number of local experts each row's
loop launches, and the one same-run ratio the 2.0 blog publishes (Qwen3-30B-A3B, 8 GPUs: 'best configuration' with
the legacy loop against 'Turbo-accelerated' with Primus-Turbo's one-kernel FP8 grouped GEMM).  Nothing is fitted:
the probe shows which rows a value of the constant moves, and that no one value fits both blogs' rows.

    python scripts/amd_fp8_probe.py --ep-host-slack

What-if, not in the model (Known gaps, AMD FP8): the MoE layer's exposed EP seconds less the GPU-idle time of a
host-bound pass (the dispatch and combine are GPU work the host launches without waiting for, but the forward's
token-count sync): backward ``max(0, c_b - (H_b - G_b))``, forward the dispatch half ``min(c_f / 2, H_f - G_f)``
off (``roofline.layer_op_times(plan)["_host"]``: host and GPU seconds per pass).  Prints every judged row it
moves by more than 0.1 point, AMD or not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

PAIR = ("primus_moe2_mi355x_qwen3_30b_a3b_fp8_best_8gpu", "primus_moe2_mi355x_qwen3_30b_a3b_fp8_turbo_8gpu")


def _clear() -> None:
    from primus_launch.projection.cost import roofline

    for name in dir(roofline):
        fn = getattr(roofline, name)
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host-us", type=float, nargs="+", default=[196.0, 118.0, 23.0, 10.0],
                    help="host microseconds per legacy expert GEMM to try (default: 196 118 23 10)")
    ap.add_argument("--ep-host-slack", action="store_true",
                    help="what-if: EP hidden in a host-bound MoE layer's GPU-idle time; rows it moves")
    a = ap.parse_args(argv)
    import validate

    if a.ep_host_slack:
        return _ep_host_slack(validate)
    from primus_launch.projection.cost import calibration as cal

    rows = [r for r in validate.load_rows() if r["id"].startswith("primus_") and r["plan"]["cluster"]["gpu"] == "mi355x"]
    if not rows:
        print("amd_fp8_probe: error: no MI355X Primus rows in scripts/validation/runs.json", file=sys.stderr)
        return 2
    committed = cal.ROCM_LEGACY_GEMM_HOST_S
    table = {}
    try:
        for us in a.host_us:
            cal.ROCM_LEGACY_GEMM_HOST_S = us * 1e-6
            _clear()
            table[us] = {r["id"]: r for r in validate.evaluate(rows)}
    finally:
        cal.ROCM_LEGACY_GEMM_HOST_S = committed
        _clear()
    head = "".join(f"{u:>9.0f}us" for u in a.host_us)
    print(f"{'row':58s} {'prec':5s} {'gemm':7s} {'local':>5s} {'measured':>9s}{head}")
    for r in rows:
        p = r["plan"]
        local = p["model"]["num_experts"] // max(1, p["parallel"]["ep"])
        errs = "".join(f"{table[u][r['id']]['err'] * 100:+10.1f}%" for u in a.host_us)
        print(f"{r['id']:58s} {p['training']['precision']:5s} {p['training']['moe_expert_gemm']:7s} {local:5d} "
              f"{r['measured_tokens_per_sec_per_gpu']:9.1f}{errs}")
    if all(i in table[a.host_us[0]] for i in PAIR):
        meas = table[a.host_us[0]][PAIR[1]]["measured"] / table[a.host_us[0]][PAIR[0]]["measured"]
        mods = " ".join(f"{table[u][PAIR[1]]['projected'] / table[u][PAIR[0]]['projected']:.3f}" for u in a.host_us)
        print(f"Qwen3-30B-A3B Turbo / best (legacy loop): measured {meas:.3f}, projected {mods} (at the values above)")
    return 0


def _ep_host_slack(validate) -> int:
    """The ``--ep-host-slack`` what-if (module doc): every row before and with the EP hidden in host slack."""
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.steps import layer as step

    rows = validate.load_rows()
    before = {r["id"]: r["err"] for r in validate.evaluate(rows)}
    orig = step.ep_exposed

    def hidden(plan, raw, lt, spec, tp=(0.0, 0.0)):
        f, b = orig(plan, raw, lt, spec, tp)
        hs = layer_op_times(plan).get("_host", {}).get("moe")
        if plan.training.overlap_moe_expert_parallel_comm or hs is None:
            return f, b
        hf, hb, gf, gb = hs
        return f - min(f / 2, max(0.0, hf - gf)), max(0.0, b - max(0.0, hb - gb))

    step.ep_exposed = hidden
    try:
        _clear()
        after = {r["id"]: r["err"] for r in validate.evaluate(rows)}
    finally:
        step.ep_exposed = orig
        _clear()
    print(f"{'row':70s} {'now':>7s} {'hidden':>7s}")
    for rid, e in before.items():
        if abs(after[rid] - e) > 1e-3:
            print(f"{rid:70s} {100 * e:+6.1f}% {100 * after[rid]:+6.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
