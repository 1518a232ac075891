"""What-if probe (not the model): Megatron's non-interleaved 1F1B pipeline sends blocking their sender.

Megatron-LM / Megatron-Bridge force ``overlap_p2p_comm = False`` without virtual pipeline stages, so
``batch_p2p_comm`` and ``batch_p2p_sync`` stay on and ``P2PCommunicator._communicate``
(megatron-core ``pipeline_parallel/p2p_communication.py`` at Megatron-LM 2edffadb) waits on every request
and calls ``torch.cuda.synchronize()``: a middle stage's forward and backward are each followed by one
activation transfer on that rank's own critical path.  The projection's simulator lets the sender go on
(``pipeline/simulate.py``: transfers delay the consumer only).  This probe re-runs the validation rows with
the transfer folded into each pass of those plans (the forward's send on every stage but the last, the
backward's on every stage but the first; the simulator's own P2P delay set to 0, the receiver taking the
data when the exchange ends) and prints the rows that move and the summary lines, against the model as it
is.  Why it is a probe and not the model: scripts/validation/README.md ("Quantisation padding ..." item).

    PYTHONPATH=$PWD python scripts/p2p_blocking_probe.py [--min-move 0.05]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def _blocking(plan) -> bool:
    p, t = plan.parallel, plan.training
    return (plan.framework == "megatron" and p.pp > 1 and p.vpp == 1 and t.pipeline_schedule == "1f1b"
            and not t.overlap_moe_expert_parallel_comm)


def _patch() -> None:
    from primus_launch.projection.steps import flow

    orig = flow.stage_costs

    def stage_costs(s, layer):
        st = orig(s, layer)
        if not _blocking(s.plan) or st.p2p_s <= 0.0:
            return st
        pp, p = s.plan.parallel.pp, st.p2p_s
        rows = []
        for rank, row in enumerate(st.chunks):
            pf = p if rank < pp - 1 else 0.0
            pb = p if rank > 0 else 0.0
            rows.append(tuple(dataclasses.replace(q, fwd=q.fwd + pf, bwd_input=q.bwd_input + pb, pp=q.pp + pf + pb)
                              for q in row))
        return dataclasses.replace(st, chunks=tuple(rows), p2p_s=0.0)

    flow.stage_costs = stage_costs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-move", type=float, default=0.05, help="points of error a row must move to be listed")
    a = ap.parse_args(argv)
    import validate

    rows = validate.load_rows()
    base = validate.evaluate(rows)
    _patch()
    alt = validate.evaluate(rows)
    moved = [(b, c) for b, c in zip(base, alt) if abs(c["err"] - b["err"]) * 100 >= a.min_move]
    for b, c in moved:
        print(f"  {b['id']:70s} {b['role']:11s} {100 * b['err']:+6.1f} -> {100 * c['err']:+6.1f} %")
    print(f"{len(moved)} rows move by >= {a.min_move} points")
    sb, sa = validate.summary(base), validate.summary(alt)
    for k in ("calibration", "judge", "held_out_current", "judge_all", "judge:dense_bf16", "held_out:moe"):
        print(f"  {k:20s} median |err| {sb[k]['median_abs_pct']:4.1f} -> {sa[k]['median_abs_pct']:4.1f} %"
              f"  mean {sb[k]['mean_signed_pct']:+5.1f} -> {sa[k]['mean_signed_pct']:+5.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
