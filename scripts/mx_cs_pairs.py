"""MXFP8 against FP8 current scaling: every same-table pair of runs.json rows whose ids differ only in the
recipe (``<src>_<gpu>_fp8_cs_<rest>`` / ``<src>_<gpu>_fp8_mx_<rest>``), measured vs modelled MX / CS throughput,
and the model's per-layer GEMM / quantisation time and DP communication of each side.

    python scripts/mx_cs_pairs.py            # the pairs, their ratios and the geometric mean of modelled / measured
    python scripts/mx_cs_pairs.py --terms    # plus each row's dense-layer GEMM, quantisation and all-op ms (fwd +
                                             # bwd) and the unmodelled norm-output cast (NORM_CAST_BYTES)

Only the rows of a pair are projected (a few seconds).  The recipes of a pair may differ beyond the recipe where
the table's configs do (Llama 3 70B GB300 / GB200: FSDP + offload for CS, PP 4 VP 5 for MX).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def pairs(rows: list[dict]) -> list[tuple[str, str]]:
    """(CS id, MX id) of every pair of rows whose ids differ only in ``_fp8_cs_`` / ``_fp8_mx_``."""
    ids = {r["id"] for r in rows}
    return sorted((i, i.replace("_fp8_cs_", "_fp8_mx_")) for i in ids
                  if "_fp8_cs_" in i and i.replace("_fp8_cs_", "_fp8_mx_") in ids)


# Not modelled (scripts/validation/README.md, mxcs): the cast of the QKV / FC1 input after the norm under TE v2.9's
# own norm kernels (csrc/extensions/normalization.cpp): current scaling fuses norm + amax, then casts (read 2 + write
# 1 B on Blackwell); MXFP8 runs the norm unfused, then casts row- and column-wise (read 2 + write 1 + 1 B)
NORM_CAST_BYTES = {"tensorwise": 3.0, "mxfp8": 4.0}


def _terms(plan) -> tuple[float, float, float, float]:
    """(GEMM ms, quantisation ms, all ops' GPU ms, unmodelled norm-output cast ms) of one dense layer, forward +
    backward, per micro-batch; the cast over the 2 norm outputs of ``T / tp`` (sequence parallel) x h elements."""
    from primus_launch.projection.cost.compute import quant_time
    from primus_launch.projection.cost.fp8 import recipe_of
    from primus_launch.projection.cost.roofline import layer_op_times

    g = q = tot = 0.0
    for name, f, b, w, *_ in layer_op_times(plan)["dense"]:
        tot += f + b + w
        if name.startswith("FP8 quantisation"):
            q += f + b + w
        elif "[" in name and "x" in name.split("[", 1)[1]:
            g += f + b + w
    p, m, t = plan.parallel, plan.model, plan.training
    tokens = t.micro_batch_size * m.seq_length // p.cp // (p.tp if p.sequence_parallel else 1)
    rec = recipe_of(plan)
    cast = quant_time(2 * tokens * m.hidden_size * NORM_CAST_BYTES.get(rec, 0.0), plan.cluster.gpu, rec)
    return g * 1e3, q * 1e3, tot * 1e3, cast * 1e3


def main(argv: list[str]) -> int:
    import validate

    from primus_launch.plan import Plan

    rows = validate.load_rows()
    ps = pairs(rows)
    want = {i for p in ps for i in p}
    sub = [r for r in rows if r["id"] in want]
    res = {r["id"]: r for r in validate.evaluate(sub)}
    plans = {r["id"]: Plan.model_validate(r["plan"]) for r in sub}
    logs = []
    print(f"{'pair':42s} {'measured':>8s} {'modelled':>8s} {'mod/meas':>8s} {'CS err':>7s} {'MX err':>7s}")
    for cs, mx in ps:
        m = res[mx]["measured"] / res[cs]["measured"]
        p = res[mx]["projected"] / res[cs]["projected"]
        logs.append(math.log(p / m))
        print(f"{cs.replace('_fp8_cs', ''):42s} {m:8.3f} {p:8.3f} {p / m:8.3f} {res[cs]['err'] * 100:+6.1f}% "
              f"{res[mx]['err'] * 100:+6.1f}%")
        if "--terms" in argv:
            for rid in (cs, mx):
                g, q, tot, cast = _terms(plans[rid])
                print(f"    {rid.split('_fp8_')[1][:2]}: dense layer GEMMs {g:7.3f} ms, quantisation {q:6.3f} ms, "
                      f"all ops {tot:7.3f} ms; not modelled: norm-output cast {cast:6.3f} ms "
                      f"({cast / tot * 100:.1f} %)")
    print(f"geometric mean of modelled / measured over {len(ps)} pairs: {math.exp(sum(logs) / len(logs)):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
