#!/usr/bin/env python
"""Where the real 2-process runs spend CPU the measured pieces do not: each rank's main-thread CPU
time of megatron-core's forward-only and forward + backward schedule against the sums of the
pieces' forward and forward + backward.

For the TP=2 and EP=2 cases of ``scripts/validate_measure.py`` (8-layer GPT, hidden 256, sequence
256, micro-batch 2, 4 micro-batches): the pieces are measured in this process (``measure_pieces``,
a cache of their own) and summed as the schedule runs them (4 x (embedding + 8 layers + head with
its loss)); then 2 processes (gloo, one core each, freed memory kept as in the real runs) build the
full model and megatron's schedule as the real runs do (``realrun.build_schedule``) and time it
with ``forward_only=True`` and ``False``, alternating, ``--iters`` times after 2 warm-ups, in the main thread's CPU time
(``time.thread_time``: what the pieces are timed in; a wait inside a collective is not CPU time).
Prints each rank's medians and their ratio to the pieces'.

    python scripts/measure_gap.py [--cases tp2,ep2] [--iters 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _worker(rank: int, port: int, plan_json: str, iters: int, q) -> None:
    import torch.distributed as dist

    from primus_launch.frameworks import mcore_cpu
    from primus_launch.plan import Plan
    from primus_launch.projection.measure.realrun import _init, build_schedule

    _init(rank, 2, port, "cpu", 1, pin=True)
    plan = Plan.model_validate_json(plan_json)
    with mcore_cpu.eager_fusions("cpu"):
        model, run = build_schedule(plan, "cpu")
        res: dict[str, list[float]] = {"fwd": [], "full": []}
        for i in range(2 + iters):
            for kind in ("fwd", "full"):
                dist.barrier()
                c0 = time.thread_time()
                run(kind == "fwd")
                if i >= 2:
                    res[kind].append(time.thread_time() - c0)
                for q_ in model.parameters():
                    q_.grad = None
    q.put((rank, statistics.median(res["fwd"]), statistics.median(res["full"])))
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="tp2,ep2")
    ap.add_argument("--iters", type=int, default=6)
    args = ap.parse_args(argv)

    import torch
    import torch.multiprocessing as mp

    from validate_measure import _plan

    from primus_launch.projection.measure.cache import MeasureCache
    from primus_launch.projection.measure.realrun import _free_port, wait_result
    from primus_launch.projection.measure.upscale import measure_pieces

    torch.set_num_threads(1)
    cases = {"tp2": _plan(tp=2), "ep2": _plan(ep=2, moe=True)}
    for name in args.cases.split(","):
        if name not in cases:
            print(f"--cases {args.cases}: {name} not one of {', '.join(cases)}")
            return 2
        plan = cases[name]
        tm = measure_pieces(plan, "cpu", cache=MeasureCache(Path(tempfile.mkdtemp(prefix="primus-gap-"))),
                            cpu_clock="thread").timings
        layers = [k for k in tm if "layer" in k]
        mb, n = plan.num_microbatches, plan.model.num_layers

        def total(f) -> float:
            return mb * (f(tm["embedding"]) + n * statistics.mean(f(tm[k]) for k in layers) + f(tm["head_loss"]))

        fwd, full = total(lambda x: x.fwd_s), total(lambda x: x.total_s)
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        port = _free_port()
        procs = [ctx.Process(target=_worker, args=(r, port, plan.model_dump_json(), args.iters, q), daemon=True)
                 for r in range(2)]
        for pr in procs:
            pr.start()
        got = sorted(wait_result(q, procs, 600) for _ in range(2))
        for pr in procs:
            pr.join(timeout=30)
        print(f"[{name}] pieces: forward {fwd * 1e3:.1f} ms, forward + backward {full * 1e3:.1f} ms per iteration")
        for rank, f, a in got:
            print(f"  rank {rank}: real forward-only CPU {f * 1e3:.1f} ms ({f / fwd - 1:+.1%}), "
                  f"forward + backward CPU {a * 1e3:.1f} ms ({a / full - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
