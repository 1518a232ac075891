"""Fit the framework constants of the dry-run cost model on the CALIBRATION rows only.

Kernel efficiencies are not fitted here: they are curves fitted to kernel-level measurements
(``scripts/fit_kernels.py``).  What no kernel figure pins down is fitted here, on the rows of
``scripts/validation/runs.json`` with ``role == "calibration"`` (every third of the older published
rows, in file order; see ``scripts/validation/build_runs.py``). Loss: root-mean-square of
log(projected / measured) tokens/s/GPU. Search: coordinate descent with shrinking multiplicative
steps inside bounds (deterministic). Free constants (``primus_launch/projection/cost/calibration.py``):
FRAMEWORK_EFF[megatron|torchtitan], SUSTAINED_CLOCK[power_limited] (one value for every power-limited
architecture), ASYNC_TP_OVERLAP.  Then, with those fixed, SOURCE_STEP_OVERHEAD_S[machine]: the per-step
time a validation source's machine spent outside what the model prices, in closed form on that source's one
calibration row (``calibration.POWER_LIMIT_ROWS``; the row is left out of the framework fit) at the
machine's stated cap (``calibration.SOURCE_POWER_LIMIT_W``, fixed; ``build_runs.py`` writes it into every row
of that source); ``validate.py`` adds it to every row of that source.  Then ROCM_LEGACY_GEMM_HOST_S: the host
seconds per expert GEMM of the legacy ``grouped_gemm`` library on ROCm (``cost/moe_host.py`` item 2), by bisection
on its one calibration row (``calibration.ROCM_LEGACY_GEMM_ROW``, left out of the framework fit) so that the row
projects its measured tokens/s/GPU; ``--rocm-legacy-only`` refits that constant alone, keeping the committed others.
Then MAMBA_SSD_TRAIN_FACTOR: the Mamba-2 SSD scan's training time over its price from the H100 forward record
(``cost/mamba.py``), by bisection on its stated rows (``calibration.MAMBA_SSD_ROWS``, the two H100 Nemotron 3 Nano
rows, left out of the framework fit) so that their mean log(projected / measured) is zero; ``--mamba-ssd-only``
refits that constant alone, keeping the committed others.
``--write`` rewrites the CALIBRATED block of calibration.py atomically; judge rows (and the held-out
current production rows) are never looked at.

    python scripts/calibrate.py [--write]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from primus_launch.projection.cost import calibration as cal  # noqa: E402
from primus_launch.projection.cost.moe_host import TE_GEMM_HOST_S  # noqa: E402
from primus_launch.projection.cost.roofline import clear_caches  # noqa: E402
from validate import evaluate, load_rows  # noqa: E402

# name, getter/setter path, start, lower, upper
PARAMS = [
    ("FRAMEWORK_EFF.megatron", 0.90, 0.50, 1.00),
    ("FRAMEWORK_EFF.torchtitan", 0.90, 0.40, 1.00),
    ("SUSTAINED_CLOCK.power_limited", 0.90, 0.50, 1.00),
    ("ASYNC_TP_OVERLAP", 0.60, 0.05, 1.00),
]


def _set(name: str, value: float) -> None:
    if "." in name:
        d, k = name.split(".", 1)
        getattr(cal, d)[k] = value
    else:
        setattr(cal, name, value)


def apply(x: list[float]) -> None:
    for (name, *_), v in zip(PARAMS, x):
        _set(name, v)
    clear_caches()


def loss(x: list[float], rows: list[dict]) -> float:
    apply(x)
    res = evaluate(rows)
    return math.sqrt(sum(math.log(r["projected"] / r["measured"]) ** 2 for r in res) / len(res))


def fit(rows: list[dict], rounds: int = 6) -> tuple[list[float], float]:
    x = [p[1] for p in PARAMS]
    best = loss(x, rows)
    step = 0.16
    for _ in range(rounds):
        improved = True
        while improved:
            improved = False
            for i, (_, _, lo, hi) in enumerate(PARAMS):
                for direction in (1 + step, 1 / (1 + step)):
                    y = list(x)
                    y[i] = min(hi, max(lo, x[i] * direction))
                    if y[i] == x[i]:
                        continue
                    val = loss(y, rows)
                    if val < best - 1e-6:
                        x, best, improved = y, val, True
        step /= 2
    apply(x)
    return x, best


def fit_step_overheads(rows: list[dict]) -> dict[str, float]:
    """Each machine's unpriced per-step time (``calibration.SOURCE_STEP_OVERHEAD_S``), in closed form on its
    calibration row (``calibration.POWER_LIMIT_ROWS``) at the machine's stated cap: ``t x (projected /
    measured - 1)`` seconds, ``t`` the projected iteration time, so that the row projects its measured
    tokens/s/GPU; a machine whose row is missing, or projects at or below its measurement, gets none."""
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    by_id = {r["id"]: r for r in rows}
    out: dict[str, float] = {}
    for machine, rid in cal.POWER_LIMIT_ROWS.items():
        row = by_id.get(rid)
        if row is None:
            continue
        res = project_dry_run(Plan.model_validate(row["plan"]))
        meas = row["measured_tokens_per_sec_per_gpu"]
        if res.tokens_per_sec_per_gpu <= meas:
            continue
        out[machine] = round(res.iteration_time_s * (res.tokens_per_sec_per_gpu / meas - 1.0), 4)
    return out


def fit_rocm_legacy_gemm_host(rows: list[dict], lo: float = 1e-6, hi: float = 2e-3) -> float | None:
    """``calibration.ROCM_LEGACY_GEMM_HOST_S`` by bisection on its calibration row (``calibration.ROCM_LEGACY_GEMM_ROW``):
    the host seconds per expert GEMM at which the row projects its measured tokens/s/GPU (the projection falls
    monotonically as the per-GEMM host cost grows); None when the row is missing or is already slower than measured
    at ``lo`` (then nothing is to be attributed to the loop)."""
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    row = next((r for r in rows if r["id"] == cal.ROCM_LEGACY_GEMM_ROW), None)
    if row is None:
        return None
    plan, meas = Plan.model_validate(row["plan"]), row["measured_tokens_per_sec_per_gpu"]
    old = cal.ROCM_LEGACY_GEMM_HOST_S

    def tps(h: float) -> float:
        cal.ROCM_LEGACY_GEMM_HOST_S = h
        clear_caches()
        return project_dry_run(plan).tokens_per_sec_per_gpu

    try:
        if tps(lo) <= meas:
            return None
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if tps(mid) > meas else (lo, mid)
        return round(0.5 * (lo + hi), 7)
    finally:
        cal.ROCM_LEGACY_GEMM_HOST_S = old
        clear_caches()


def fit_mamba_ssd_factor(rows: list[dict], lo: float = 0.25, hi: float = 16.0) -> float | None:
    """``calibration.MAMBA_SSD_TRAIN_FACTOR`` by bisection on its stated rows (``calibration.MAMBA_SSD_ROWS``, looked
    up by id whatever their role): the factor at which their mean log(projected / measured) tokens/s/GPU is zero (the
    projection falls monotonically as the SSD scan's time grows); None when a row is missing."""
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    by_id = {r["id"]: r for r in rows}
    if any(i not in by_id for i in cal.MAMBA_SSD_ROWS):
        return None
    cases = [(Plan.model_validate(by_id[i]["plan"]), by_id[i]["measured_tokens_per_sec_per_gpu"])
             for i in cal.MAMBA_SSD_ROWS]
    old = cal.MAMBA_SSD_TRAIN_FACTOR

    def bias(k: float) -> float:
        cal.MAMBA_SSD_TRAIN_FACTOR = k
        clear_caches()
        return sum(math.log(project_dry_run(p).tokens_per_sec_per_gpu / meas) for p, meas in cases) / len(cases)

    try:
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if bias(mid) > 0 else (lo, mid)
        return round(math.sqrt(lo * hi), 4)
    finally:
        cal.MAMBA_SSD_TRAIN_FACTOR = old
        clear_caches()


def write_block(x: list[float], score: float, ids: list[str], overheads: dict[str, float],
                rocm_gemm_host: float | None = None, ssd_factor: float | None = None) -> None:
    path = Path(cal.__file__)
    text = path.read_text()
    meg, tt, clk, atp = (round(v, 4) for v in x)
    block = (
        "# BEGIN CALIBRATED\n"
        f"FRAMEWORK_EFF = {{\"megatron\": {meg}, \"torchtitan\": {tt}}}\n"
        f"SUSTAINED_CLOCK = {{\"power_limited\": {clk}}}\n"
        f"ASYNC_TP_OVERLAP = {atp}\n"
        f"CALIBRATION_ROWS: list[str] = {ids!r}\n"
        f"CALIBRATION_SCORE = {round(score, 5)}  # rms of log(projected/measured) on CALIBRATION_ROWS\n"
        f"SOURCE_STEP_OVERHEAD_S: dict[str, float] = {overheads!r}\n"
        f"ROCM_LEGACY_GEMM_HOST_S = {rocm_gemm_host if rocm_gemm_host is not None else TE_GEMM_HOST_S!r}"
        f"  # s per expert GEMM, fitted on ROCM_LEGACY_GEMM_ROW\n"
        f"MAMBA_SSD_TRAIN_FACTOR = {ssd_factor if ssd_factor is not None else cal.MAMBA_SSD_TRAIN_FACTOR!r}"
        f"  # SSD training time / its H100-record price, fitted on MAMBA_SSD_ROWS\n"
        "# END CALIBRATED"
    )
    new = re.sub(r"# BEGIN CALIBRATED.*?# END CALIBRATED", lambda _m: block, text, flags=re.S)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(new)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the CALIBRATED block of calibration.py")
    ap.add_argument("--show", action="store_true", help="print the committed constants and their rows; no fit")
    ap.add_argument("--rocm-legacy-only", action="store_true",
                    help="refit ROCM_LEGACY_GEMM_HOST_S alone on its row, keeping the committed framework constants")
    ap.add_argument("--mamba-ssd-only", action="store_true",
                    help="refit MAMBA_SSD_TRAIN_FACTOR alone on MAMBA_SSD_ROWS, keeping the committed others")
    args = ap.parse_args(argv)
    every = load_rows()
    calib = [r for r in every if r["role"] == "calibration"]
    cap_rows = [r for r in calib if r["id"] in cal.POWER_LIMIT_ROWS.values()]
    own = set(cal.POWER_LIMIT_ROWS.values()) | {cal.ROCM_LEGACY_GEMM_ROW} | set(cal.MAMBA_SSD_ROWS)
    rows = [r for r in calib if r["id"] not in own]
    if args.show:
        for name, *_ in PARAMS:
            d, _, k = name.partition(".")
            v = getattr(cal, d)[k] if k else getattr(cal, d)
            print(f"{name:40s} {v:.4f}")
        groups: dict[str, int] = {}
        for r in rows:
            groups[r["source_group"]] = groups.get(r["source_group"], 0) + 1
        print(f"fitted on {len(cal.CALIBRATION_ROWS)} calibration rows (rms log err {cal.CALIBRATION_SCORE}): "
              + ", ".join(f"{g} {n}" for g, n in sorted(groups.items())))
        for machine, d in cal.SOURCE_STEP_OVERHEAD_S.items():
            print(f"SOURCE_STEP_OVERHEAD_S.{machine:25s} {d:.4f} s at {cal.SOURCE_POWER_LIMIT_W.get(machine)} W "
                  f"(on {cal.POWER_LIMIT_ROWS[machine]})")
        print(f"ROCM_LEGACY_GEMM_HOST_S {1e6 * cal.ROCM_LEGACY_GEMM_HOST_S:.1f} us per expert GEMM "
              f"(on {cal.ROCM_LEGACY_GEMM_ROW})")
        print(f"MAMBA_SSD_TRAIN_FACTOR {cal.MAMBA_SSD_TRAIN_FACTOR} (on {', '.join(cal.MAMBA_SSD_ROWS)})")
        return 0
    committed = [cal.FRAMEWORK_EFF["megatron"], cal.FRAMEWORK_EFF["torchtitan"], cal.SUSTAINED_CLOCK["power_limited"],
                 cal.ASYNC_TP_OVERLAP]
    if args.mamba_ssd_only:
        k = fit_mamba_ssd_factor(every)
        print(f"MAMBA_SSD_TRAIN_FACTOR {k} (on {', '.join(cal.MAMBA_SSD_ROWS)})")
        if args.write and k is not None:
            write_block(committed, cal.CALIBRATION_SCORE, list(cal.CALIBRATION_ROWS), dict(cal.SOURCE_STEP_OVERHEAD_S),
                        cal.ROCM_LEGACY_GEMM_HOST_S, k)
            print("wrote primus_launch/projection/cost/calibration.py")
        return 0
    if args.rocm_legacy_only:
        h = fit_rocm_legacy_gemm_host(calib)
        print(f"ROCM_LEGACY_GEMM_HOST_S {h} s per expert GEMM (on {cal.ROCM_LEGACY_GEMM_ROW})")
        if args.write:
            write_block(committed, cal.CALIBRATION_SCORE, list(cal.CALIBRATION_ROWS), dict(cal.SOURCE_STEP_OVERHEAD_S), h)
            print("wrote primus_launch/projection/cost/calibration.py")
        return 0
    x, score = fit(rows)
    for (name, *_), v in zip(PARAMS, x):
        print(f"{name:40s} {v:.4f}")
    print(f"calibration rows: {len(rows)}; rms log err {score:.4f}")
    overheads = fit_step_overheads(cap_rows)
    for machine, d in overheads.items():
        print(f"SOURCE_STEP_OVERHEAD_S.{machine:25s} {d:.4f} s at {cal.SOURCE_POWER_LIMIT_W.get(machine)} W "
              f"(on {cal.POWER_LIMIT_ROWS[machine]})")
    h = fit_rocm_legacy_gemm_host(calib)
    print(f"ROCM_LEGACY_GEMM_HOST_S {h} s per expert GEMM (on {cal.ROCM_LEGACY_GEMM_ROW})")
    k = fit_mamba_ssd_factor(every)
    print(f"MAMBA_SSD_TRAIN_FACTOR {k} (on {', '.join(cal.MAMBA_SSD_ROWS)})")
    if args.write:
        write_block(x, score, [r["id"] for r in rows], overheads, h, k)
        print("wrote primus_launch/projection/cost/calibration.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
