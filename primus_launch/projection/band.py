"""Expected error of a dry-run projection: the spread of the judged validation rows like it.

``projection/data/error_bands.json`` is written by ``python scripts/validate.py --write-bands`` from
the dry-run's own validation: for every JUDGED row of ``scripts/validation/runs.json`` (the judge
rows of the published set and the held-out current production rows; the calibration rows are left
out: the constants were fitted to them) its :func:`band_dims` and its error ``err`` =
projected / measured tokens/s - 1.  For one plan of the same shape, projected / measured tokens/s =
measured / projected iteration time, so ``err`` is also how much longer the run took than projected
(-0.06 = it ran 6 % faster than projected).

:func:`band_for` picks the rows "like" a plan: those with all of its :func:`band_dims` (framework,
GPU family, dense / MoE with fewer than 64 experts ("coarse") / MoE with 64 or more ("fine-grained"),
precision, long sequence, token mixer: attention-only stacks or hybrid Mamba-2 stacks), and where fewer
than :data:`MIN_ROWS` rows match, drops the dimensions one at a time in :data:`RELAX` order (framework,
precision, GPU family to its vendor, long sequence, MoE granularity, dense / MoE, vendor, mixer) until
enough match.  The mixer goes last: a hybrid stack's error comes mostly from its Mamba kernels (their own
Known-gaps entry), so attention-only plans do not take it on, nor hybrid plans the attention rows' spread.  The band is the
:data:`LOW_Q` .. :data:`HIGH_Q` quantile (linear interpolation) of those rows' ``err``, with their
median and count, and the group it used.  Quantiles of a handful of rows are themselves uncertain:
the count is part of the answer.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Optional

from primus_launch.plan import Plan
from primus_launch.projection.result import ErrorBand

BANDS = Path(__file__).resolve().parent / "data" / "error_bands.json"

MIN_ROWS = 8
LOW_Q, HIGH_Q = 0.10, 0.90
FINE_GRAINED_EXPERTS = 64      # the issue-28 judging groups: MoE with >= 64 experts is "fine-grained"
LONG_SEQUENCE = 32768          # scripts/validation/build_runs.py groups_of: cp > 1 or seq >= 32k

# the dimensions dropped, in order, while fewer than MIN_ROWS rows match (each step keeps the earlier
# drops); dropping "family" keeps the vendor, dropping "moe" pools coarse and fine-grained MoE
RELAX: tuple[str, ...] = ("framework", "precision", "family", "long_seq", "moe", "kind", "vendor", "mixer")

KIND_NAMES = {"dense": "dense", "moe_coarse": "MoE < 64 experts", "moe_fine": "MoE >= 64 experts"}


def band_dims(plan: Plan) -> dict[str, str]:
    """The plan's judging dimensions: framework, GPU family (architecture), vendor, kind (``dense`` /
    ``moe_coarse`` / ``moe_fine``), precision (``bf16`` / ``fp8`` / ``fp4``; fp16 and fp32 as bf16) and
    long sequence (``long`` for CP > 1 or a sequence of 32k or more, else ``short``), mixer (``mamba`` for a
    hybrid stack with Mamba-2 layers, else ``attention``)."""
    from primus_launch.projection.hardware.gpus import get_gpu

    m, p, t = plan.model, plan.parallel, plan.training
    arch = get_gpu(plan.cluster.gpu).arch or "custom"
    if not m.is_moe:
        kind = "dense"
    else:
        kind = "moe_fine" if (m.num_experts or 0) >= FINE_GRAINED_EXPERTS else "moe_coarse"
    prec = t.precision if t.precision in ("fp8", "fp4") else "bf16"
    long_seq = "long" if (p.cp > 1 or m.seq_length >= LONG_SEQUENCE) else "short"
    return {"framework": plan.framework, "family": arch, "vendor": "amd" if arch.startswith("cdna") else "nvidia",
            "kind": kind, "precision": prec, "long_seq": long_seq,
            "mixer": "mamba" if m.hybrid_pattern and "M" in m.hybrid_pattern else "attention"}


def _matches(dims: dict[str, str], row: dict[str, str], dropped: tuple[str, ...]) -> bool:
    for key in ("framework", "precision", "family", "long_seq", "kind", "vendor", "mixer"):
        if key in dropped:
            continue
        if key == "mixer":   # rows written before the dimension existed: attention-only stacks
            if dims.get("mixer", "attention") != row.get("mixer", "attention"):
                return False
            continue
        if key == "kind" and "moe" in dropped:
            # MoE granularity dropped: dense stays dense, coarse and fine-grained MoE pool
            if (dims["kind"] == "dense") != (row["kind"] == "dense"):
                return False
            continue
        if dims[key] != row[key]:
            return False
    return True


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by linear interpolation between order statistics."""
    v = sorted(values)
    if not v:
        raise ValueError("quantile of no values")
    x = q * (len(v) - 1)
    i = int(x)
    j = min(i + 1, len(v) - 1)
    return v[i] + (v[j] - v[i]) * (x - i)


def describe(dims: dict[str, str], dropped: tuple[str, ...]) -> str:
    """The group a band was taken from, in words (the dimensions kept)."""
    parts = []
    if "framework" not in dropped:
        parts.append(dims["framework"])
    if "family" not in dropped:
        parts.append(dims["family"])
    elif "vendor" not in dropped:
        parts.append(dims["vendor"].upper() if dims["vendor"] == "amd" else "NVIDIA")
    if "kind" not in dropped:
        parts.append("MoE" if ("moe" in dropped and dims["kind"] != "dense") else KIND_NAMES[dims["kind"]])
    if "precision" not in dropped:
        parts.append(dims["precision"].upper())
    if "long_seq" not in dropped:
        parts.append("long sequence" if dims["long_seq"] == "long" else "sequence < 32k")
    if "mixer" not in dropped and dims.get("mixer") == "mamba":
        parts.append("hybrid Mamba-2")
    return " / ".join(parts) or "all judged rows"


def band_from_rows(dims: dict[str, str], rows: list[dict]) -> Optional[ErrorBand]:
    """The band of a plan with :func:`band_dims` ``dims`` from judged ``rows`` (each ``{"dims", "err"}``;
    module doc); None when there are no rows at all."""
    dropped: tuple[str, ...] = ()
    steps = [()] + [RELAX[:i + 1] for i in range(len(RELAX))]
    for dropped in steps:
        picked = [r for r in rows if _matches(dims, r["dims"], dropped)]
        if len(picked) >= MIN_ROWS:
            break
    else:
        picked = list(rows)
    sel = [r["err"] for r in picked]
    if not sel:
        return None
    group = describe(dims, dropped)
    # "judged rows like it (AMD)" of a dense plan read as dense rows: the AMD rows are all MoE (user12)
    if "kind" in dropped and not any(r["dims"].get("kind") == dims["kind"] for r in picked):
        group += f", none of them {KIND_NAMES[dims['kind']]}"
    return ErrorBand(low=quantile(sel, LOW_Q), high=quantile(sel, HIGH_Q), median=quantile(sel, 0.5), n=len(sel),
                     group=group, relaxed=list(dropped),
                     statistic=f"{round(100 * LOW_Q)}th .. {round(100 * HIGH_Q)}th percentile of measured / projected "
                               "iteration time - 1 over the judged validation rows of the group")


@lru_cache(maxsize=1)
def _rows(path: str = str(BANDS)) -> tuple[dict, ...]:
    p = Path(path)
    if not p.exists():
        return ()
    return tuple(json.loads(p.read_text())["rows"])


@lru_cache(maxsize=256)
def _band_of(dims: tuple[tuple[str, str], ...]) -> Optional[ErrorBand]:
    """:func:`band_from_rows` over the bands file, once per group (a tune asks for the same few groups
    for every plan it scores)."""
    rows = list(_rows())
    if not rows:
        return None
    return band_from_rows(dict(dims), rows)


def band_for(plan: Plan) -> Optional[ErrorBand]:
    """The expected error of ``plan``'s dry-run projection (module doc); None without a bands file.  An FP16 /
    FP32 plan is judged in the ``bf16`` group (:func:`band_dims`); its label says so rather than "BF16".  A GPU whose
    spec ``--gpu-file`` added or overrode takes its architecture's rows, and the group says none of them ran on
    that spec (its figures' own error is not in the band)."""
    band = _band_of(tuple(sorted(band_dims(plan).items())))
    if band is None:
        return None
    band = band.model_copy(deep=True)
    from primus_launch.projection.hardware.gpus import from_gpu_file

    if from_gpu_file(plan.cluster.gpu):  # the rows ran on built-in specs: the file's figures are not judged (user18)
        band.group += f", none of them on {plan.cluster.gpu.split('@', 1)[0]}'s --gpu-file spec"
    prec = plan.training.precision
    if prec not in ("bf16", "fp8", "fp4") and "precision" not in band.relaxed:
        band.group = " / ".join(f"{prec.upper()} (pooled with BF16 rows)" if part == "BF16" else part
                                for part in band.group.split(" / "))
    return band


def bands_overlap(a: ErrorBand | None, ta: float, b: ErrorBand | None, tb: float) -> bool:
    """Whether two projected iteration times ``ta`` and ``tb`` cannot be ranked apart by the model's
    demonstrated accuracy: their expected ranges ``t (1 + lo) .. t (1 + hi)`` overlap, so either run could
    be the faster (:func:`ranges_overlap`).  A plan without a band has the point estimate alone."""
    return ranges_overlap(ta, None if a is None else a.iteration_range(ta),
                          tb, None if b is None else b.iteration_range(tb))


def ranges_overlap(ta: float, ra: tuple[float, float] | None, tb: float, rb: tuple[float, float] | None) -> bool:
    """:func:`bands_overlap` on the ranges themselves (seconds ``(low, high)`` of each projected time ``t``;
    None: the point ``t`` alone): ``max(low_a, low_b) <= min(high_a, high_b)``.  Not "each range holds the
    other's point": a band entirely above zero (a group the model is optimistic on) need not hold its own
    point, and two equal projections would then count as told apart."""
    la, ha = ra if ra is not None else (ta, ta)
    lb, hb = rb if rb is not None else (tb, tb)
    return max(la, lb) <= min(ha, hb)
