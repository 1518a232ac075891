"""The CDNA4 grouped-GEMM curve against the public MI355X kernel measurements, and what the AMD rows ask of it
(issue 28, AMD group).

    python scripts/amd_grouped_gemm_probe.py [--rows] [--t0-us 167 40 10]

Prints, at the benchmarks' clock (no sustained-clock or in-situ factor: the curve as ``scripts/fit_kernels.py``
fits it):

1. Primus-Turbo PR #284 (2026-04-14, MI355X, BF16, DeepSeek-V3 shapes, 16 experts, balanced): the fitted
   records' hipBLASLt column (``kernel_evidence.json`` ``pt284-mi355x-gg-*``) and the same rows' Triton and
   tgale96/grouped_gemm ("GMM": the legacy ``GroupedMLP`` library, one hipBLAS GEMM per expert) columns, read
   from the records' notes, against the ``cdna4/bf16`` grouped curve and the model's legacy loop
   (``cost/grouped_gemm.py``: per-expert GEMMs on the dense curve over 4 streams, floored at the grouped curve).
   PR #284's benchmark (``benchmark/ops/training/bench_grouped_gemm_gmm.py``) times GMM with
   ``torch.utils.benchmark.Timer.timeit(200)``: host wall time of 200 back-to-back calls, so each GMM figure
   also bounds the host time of its 16 per-expert launches (column ``host<=``), against the calibrated
   ``calibration.ROCM_LEGACY_GEMM_HOST_S``.
2. Primus-Turbo's Triton FP8 tensorwise grouped GEMM, forward, MI355X (gfx950), the 24-shape table of
   ``analysis/_notes/round-1-fp8-grouped-24-shape-baseline-and-lever-roadmap.md`` @771d7d58 (2026-05-02, column
   ``trt_TF``, records ``pt-r1-mi355x-ggfp8-triton-*``, kept, not fitted; timed by ``scripts/_metric_hk_ratio.py``
   ``_bench_grouped_fp8``: ``turbo.ops.grouped_gemm_fp8``
   with the A and B casts inside the op, CUDA events, 20th percentile), against the FP8 price of the same curve
   (CDNA4 has no FP8 grouped records: ``compute.grouped_curve`` takes ``cdna4/bf16`` at the FP8 peak).
3. The expert GEMMs of the AMD MoE rows (Qwen3-30B-A3B, Mixtral 8x22B, DeepSeek-V3) at the curve.

``--rows``: what-if, the judged MI355X rows' error at other ``t0`` values of ``cdna4/bf16`` (the only free
constant the FP8 table contradicts: see the Known-gaps entry); nothing is written.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

# expert GEMMs of the AMD MoE rows, per GPU and micro-batch (m per expert, n, k, local experts); from
# scripts/explain_projection.py on each row
ROW_SHAPES = [
    ("Qwen3-30B-A3B FC1 (EP 8, MBS 8)", 16384, 1536, 2048, 16),
    ("Qwen3-30B-A3B FC2", 16384, 2048, 768, 16),
    ("Mixtral 8x22B FC1 (EP 8, MBS 2)", 32768, 32768, 6144, 1),
    ("Mixtral 8x22B FC2", 32768, 6144, 16384, 1),
]


def _curve_s(m: int, n: int, k: int, b: int, fmt: str, wgrad: bool = False) -> float:
    from primus_launch.projection.cost.compute import ELEM, fmt_peak, grouped_curve, hbm_eta
    from primus_launch.projection.cost.kernels import gemm_seconds
    from primus_launch.projection.hardware.gpus import get_gpu

    g = get_gpu("mi355x")
    c, _ = grouped_curve("cdna4", fmt, False)
    if wgrad:
        c = c.for_wgrad()
    return gemm_seconds(m, n, k, b, fmt_peak("mi355x", fmt), g.num_sms, g.hbm_bw * hbm_eta("cdna4")[0],
                        ELEM[fmt], c)


def _legacy_gpu_s(m: int, n: int, k: int, b: int) -> float:
    """The model's legacy loop (BF16 per-expert GEMMs on 4 streams, floored at the grouped curve), GPU only."""
    from primus_launch.projection.cost.compute import ELEM, fmt_peak, gemm_curve, hbm_eta
    from primus_launch.projection.cost.grouped_gemm import te_multistream_seconds
    from primus_launch.projection.hardware.gpus import get_gpu

    g = get_gpu("mi355x")
    c, _ = gemm_curve("cdna4", "bf16")
    t = te_multistream_seconds(m, n, k, b, fmt_peak("mi355x", "bf16"), g.num_sms, g.hbm_bw * hbm_eta("cdna4")[0],
                               ELEM["bf16"], c)
    return max(t, _curve_s(m, n, k, b, "bf16"))


def pr284_rows() -> list[dict]:
    """PR #284's rows from the evidence file: shape, pass, the three measured columns (TF)."""
    from primus_launch.projection.cost import evidence as ev

    out = []
    for r in ev.select("grouped_gemm", lambda r: r["id"].startswith("pt284-mi355x-gg-")):
        sh = r["shape"]
        tri = re.search(r"Triton (\d+)", r["note"])
        gmm = re.search(r"grouped_gemm (\d+)", r["note"])
        out.append(dict(id=r["id"], g=int(sh["groups"]), m=int(sh["m_per_group"]), n=int(sh["n"]), k=int(sh["k"]),
                        p=sh["pass"], hipblaslt=float(r["value"]), triton=float(tri.group(1)) if tri else None,
                        gmm=float(gmm.group(1)) if gmm else None, excluded=bool(r.get("excluded"))))
    return out


def _problem(m: int, n: int, k: int, p: str) -> tuple[int, int, int]:
    """(m, n, k) of a pass of the layer [m, k] x [k, n] (fit_kernels._grouped_probs)."""
    return {"fwd": (m, n, k), "dgrad": (m, k, n), "wgrad": (k, n, m)}[p]


def _tf(flops: float, s: float) -> float:
    return flops / s / 1e12


def print_pr284() -> None:
    from primus_launch.projection.cost import calibration as cal

    print("1. PR #284, MI355X BF16, DeepSeek-V3 shapes, 16 experts (TFLOP/s; model at the benchmark clock)")
    print(f"   {'layer':30s} {'pass':5s} {'hipBLASLt':>9s} {'curve':>6s} {'Triton':>6s} {'GMM':>5s} {'loop':>5s}"
          f" {'host<=':>7s}")
    for r in pr284_rows():
        m, n, k = _problem(r["m"], r["n"], r["k"], r["p"])
        fl = 2.0 * m * n * k * r["g"]
        curve = _tf(fl, _curve_s(m, n, k, r["g"], "bf16", wgrad=r["p"] == "wgrad"))
        loop = _tf(fl, _legacy_gpu_s(m, n, k, r["g"]))
        host = fl / (r["gmm"] * 1e12) / r["g"] * 1e6 if r["gmm"] else float("nan")
        name = f"B{r['g']} M{r['m']} N{r['n']} K{r['k']}" + (" (excluded)" if r["excluded"] else "")
        print(f"   {name:30s} {r['p']:5s} {r['hipblaslt']:9.0f} {curve:6.0f} {r['triton'] or 0:6.0f} "
              f"{r['gmm'] or 0:5.0f} {loop:5.0f} {host:5.0f}us")
    print(f"   host<=: GMM figure's wall time / 16 expert GEMMs; calibration.ROCM_LEGACY_GEMM_HOST_S = "
          f"{cal.ROCM_LEGACY_GEMM_HOST_S * 1e6:.0f} us")


def triton_fp8_records() -> list[tuple[str, str, int, int, int, int, float]]:
    """(model, layer, B, M per group, N, K, TF) of the Triton FP8 table (``kernel_evidence.json``
    ``pt-r1-mi355x-ggfp8-triton-*``, kept, not fitted)."""
    from primus_launch.projection.cost import evidence as ev

    out = []
    for r in ev.select("grouped_gemm", lambda r: r["id"].startswith("pt-r1-mi355x-ggfp8-triton-")):
        sh = r["shape"]
        model, layer = sh["model"].rsplit("-", 1)
        out.append((model, layer, int(sh["groups"]), int(sh["m_per_group"]), int(sh["n"]), int(sh["k"]),
                    float(r["value"])))
    return out


def triton_fp8_ratios() -> list[tuple[tuple, float]]:
    """(record, model GEMM-only TF / measured TF with the in-op casts) for the Triton FP8 table."""
    out = []
    for rec in triton_fp8_records():
        _, _, b, m, n, k, tf = rec
        out.append((rec, _tf(2.0 * b * m * n * k, _curve_s(m, n, k, b, "fp8")) / tf))
    return out


def cast_floor_s(b: int, m: int, n: int, k: int) -> float:
    """Physical floor of the Triton op: tensorwise casts of A [b m, k] and B [b, n, k] (amax read 2 B, cast read
    2 B + write 1 B per element) at the datasheet 8 TB/s, plus the GEMM at the datasheet FP8 peak."""
    from primus_launch.projection.hardware.gpus import get_gpu

    g = get_gpu("mi355x")
    return 5.0 * (b * m * k + b * n * k) / g.hbm_bw + 2.0 * b * m * n * k / g.peak_flops_fp8


def print_triton_fp8() -> None:
    import statistics

    print("\n2. Primus-Turbo Triton FP8 tensorwise grouped GEMM forward, MI355X (TFLOP/s, casts inside the op)")
    print(f"   {'shape':42s} {'measured':>8s} {'curve':>6s} {'curve/meas':>10s} {'floor/meas':>10s}")
    rat = triton_fp8_ratios()
    for (model, layer, b, m, n, k, tf), q in sorted(rat, key=lambda x: x[1]):
        print(f"   {model + ' ' + layer + f' B{b} M{m} N{n} K{k}':42s} {tf:8.0f} {tf * q:6.0f} {q:10.2f} "
              f"{cast_floor_s(b, m, n, k) * tf * 1e12 / (2.0 * b * m * n * k):10.2f}")
    qs = [q for _, q in rat]
    print(f"   median curve/measured {statistics.median(qs):.2f}, range {min(qs):.2f} .. {max(qs):.2f} "
          "(the measured time includes the op's two tensorwise casts: the curve's GEMM alone should be faster, > 1)")
    print("   floor/meas: both casts at the full 8 TB/s plus the GEMM at the full FP8 peak, over the measured time; "
          "near 1 the figure cannot hold both casts whole (read as an op time, not a GEMM time)")


def print_rows_shapes() -> None:
    print("\n3. The AMD rows' expert GEMMs at the curve (benchmark clock; TFLOP/s and % of the format's peak)")
    for name, m, n, k, b in ROW_SHAPES:
        fl = 2.0 * m * n * k * b
        bf = _tf(fl, _curve_s(m, n, k, b, "bf16"))
        f8 = _tf(fl, _curve_s(m, n, k, b, "fp8"))
        print(f"   {name:34s} [{m}x{n}x{k}] x{b}: BF16 {bf:5.0f} ({bf / 2516.6 * 100:3.0f}%), "
              f"FP8 {f8:5.0f} ({f8 / 5033.2 * 100:3.0f}%)")


def print_rows_whatif(t0s: list[float]) -> None:
    import validate

    from primus_launch.projection.cost import compute, roofline
    from primus_launch.projection.cost.fitted import FITTED

    def clear() -> None:
        compute.clear_caches()
        for name in dir(roofline):
            fn = getattr(roofline, name)
            if hasattr(fn, "cache_clear"):
                fn.cache_clear()

    rows = [r for r in validate.load_rows() if r["plan"]["cluster"]["gpu"] == "mi355x"]
    cur = FITTED["grouped_gemm"]["cdna4/bf16"]
    keep = cur["t0"]
    table = {}
    try:
        for us in t0s:
            cur["t0"] = us * 1e-6
            clear()
            table[us] = {r["id"]: r["err"] for r in validate.evaluate(rows)}
    finally:
        cur["t0"] = keep
        clear()
    print(f"\nwhat-if: MI355X rows' error at cdna4/bf16 grouped t0 = {', '.join(f'{u:g} us' for u in t0s)} "
          f"(committed {keep * 1e6:.1f} us)")
    for r in rows:
        errs = "".join(f"{table[u][r['id']] * 100:+8.1f}%" for u in t0s)
        print(f"   {r['id']:60s}{errs}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true", help="what-if: MI355X rows' error at other grouped t0 values")
    ap.add_argument("--t0-us", type=float, nargs="+", default=[167.1, 40.0, 10.0],
                    help="grouped-curve t0 values to try with --rows (default: 167.1 40 10)")
    a = ap.parse_args(argv)
    print_pr284()
    print_triton_fp8()
    print_rows_shapes()
    if a.rows:
        print_rows_whatif(a.t0_us)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
