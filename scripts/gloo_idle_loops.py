#!/usr/bin/env python
"""How much of a real run's core the idle gloo event loops take: the CPU stand-in's share of the
time ``scripts/validate_measure.py`` reports as the wait outside the calls.

Every ``ProcessGroupGloo`` has its own TCP device, whose event-loop thread waits in ``epoll_wait``
with a 10 ms timeout (gloo ``transport/tcp/loop.cc``, ``Loop::run``): idle, it still wakes 100
times a second, on the core its rank is bound to.  megatron-core makes one process group per
parallel dimension and combination (``parallel_state.initialize_model_parallel``), and on the CPU
every one of them is gloo.

For each validation case (``validate_measure._plan``: TP=2, EP=2, CP=2, PP=2), 2 processes set up
as the real runs' ranks (``realrun._init``: gloo, one core each, freed memory kept) count their
``gloo_tcp_loop`` threads before and after ``realrun.init_model_parallel`` (the groups the real run
makes).  In the EP=2 world each rank then times the same bf16 GEMM loop (``--gemms`` 256^3 GEMMs,
``--repeats`` times, medians) with only the default group alive, with megatron's groups, and with
as many idle groups again (``dist.new_group``), in wall and main-thread CPU time, with the
run-queue wait (``realrun.run_queue_wait_s``) and the involuntary context switches: wall / CPU - 1
is the share of the core the other threads took while the loop computed (the machine's speed
drifts alike for both clocks); and, as ``localhw.measure_links`` times the links (after a cache
eviction and a few GEMMs), a 4 KiB and a 512 KiB all-gather in each of the three states.  Nothing
is priced from it: a GPU's compute does not share its
cores with the host's event loops.

    python scripts/gloo_idle_loops.py [--gemms 200] [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CASES = ("tp2", "ep2", "cp2", "pp2")


def _loops() -> int:
    """This process's gloo TCP event-loop threads (their thread name, ``/proc/self/task/*/comm``)."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                n += f.read().strip() == "gloo_tcp_loop"
        except OSError:
            continue
    return n


def _involuntary_switches() -> int:
    with open("/proc/thread-self/status") as f:
        for line in f:
            if line.startswith("nonvoluntary_ctxt_switches"):
                return int(line.split()[1])
    return 0


def _gemm_loop(gemms: int, repeats: int) -> dict:
    """Medians of ``repeats`` runs of ``gemms`` 256^3 bf16 GEMMs: wall, CPU, run-queue ms and the
    involuntary context switches per run."""
    import torch

    from primus_launch.projection.measure.realrun import run_queue_wait_s

    a = torch.randn(256, 256, dtype=torch.bfloat16)
    for _ in range(10):
        a @ a
    rows = []
    for _ in range(repeats):
        w, c, q, n = time.perf_counter(), time.thread_time(), run_queue_wait_s(), _involuntary_switches()
        for _ in range(gemms):
            a @ a
        rows.append((time.perf_counter() - w, time.thread_time() - c, run_queue_wait_s() - q,
                     _involuntary_switches() - n))
    wall, cpu, runq, sw = (statistics.median(x) for x in zip(*rows))
    return dict(wall_ms=wall * 1e3, cpu_ms=cpu * 1e3, runq_ms=runq * 1e3, switches=sw)


def _call_loop(repeats: int) -> dict:
    """Trimmed-mean ms of a 4 KiB and a 512 KiB all-gather (the gathered size, bf16, the default
    group) in situ, as ``localhw.measure_links`` times them: after a cache eviction and 8 GEMMs of
    256^3, ``repeats`` calls each, interleaved."""
    import torch.distributed as dist

    from primus_launch.projection.measure.localhw import _op_call, in_situ_work, trimmed_mean

    work = in_situ_work(8)
    calls = {nb: _op_call("all_gather", dist.get_rank(), nb) for nb in (4 << 10, 512 << 10)}
    ts: dict = {nb: [] for nb in calls}
    for _ in range(repeats + 2):
        for nb, call in calls.items():
            work()
            t0 = time.perf_counter()
            call()
            ts[nb].append(time.perf_counter() - t0)
    return {nb: trimmed_mean(v[2:]) * 1e3 for nb, v in ts.items()}


def _worker(rank: int, port: int, case: str, gemms: int, repeats: int, q) -> None:
    import torch.distributed as dist

    from primus_launch.projection.measure.realrun import _init, init_model_parallel
    from validate_measure import _plan

    plan = {"tp2": lambda: _plan(tp=2), "ep2": lambda: _plan(ep=2, moe=True), "cp2": lambda: _plan(cp=2),
            "pp2": lambda: _plan(pp=2)}[case]()
    _init(rank, 2, port, "cpu", 1, pin=True)
    timed = case == "ep2" and gemms > 0
    out = {"loops_default": _loops()}
    if timed:
        dist.barrier()
        out["default"] = _gemm_loop(gemms, repeats) | {"calls": _call_loop(4 * repeats)}
    init_model_parallel(plan)
    out["loops_megatron"] = _loops()
    if timed:
        dist.barrier()
        out["megatron"] = _gemm_loop(gemms, repeats) | {"calls": _call_loop(4 * repeats)}
        extra = [dist.new_group([0, 1], backend="gloo") for _ in range(out["loops_megatron"])]
        for g in extra:
            dist.barrier(group=g)
        out["loops_doubled"] = _loops()
        dist.barrier()
        out["doubled"] = _gemm_loop(gemms, repeats) | {"calls": _call_loop(4 * repeats)}
    q.put((rank, out))
    dist.barrier()
    dist.destroy_process_group()


def _run(case: str, gemms: int, repeats: int) -> dict:
    import torch.multiprocessing as mp

    from primus_launch.projection.measure.realrun import _free_port, wait_result

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, port, case, gemms, repeats, q), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    try:
        res = dict(wait_result(q, procs, 600) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemms", type=int, default=200, help="256^3 bf16 GEMMs per timed run (0: count only)")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args(argv)
    for case in CASES:
        res = _run(case, args.gemms, args.repeats)
        print(f"[{case}] gloo event loops per rank: " + " | ".join(
            f"rank {r}: {res[r]['loops_default']} with the default group, {res[r]['loops_megatron']} with megatron's"
            for r in sorted(res)))
        if "megatron" in res[0]:
            for key, what in (("default", "default group only"), ("megatron", "megatron's groups"),
                              ("doubled", "as many idle groups again")):
                print(f"  {args.gemms} GEMMs, {what}: " + " | ".join(
                    f"rank {r}: {res[r].get('loops_' + key, res[r]['loops_default'])} loops, wall {res[r][key]['wall_ms']:.1f} "
                    f"CPU {res[r][key]['cpu_ms']:.1f} ms (wall / CPU - 1 {res[r][key]['wall_ms'] / res[r][key]['cpu_ms'] - 1:+.1%}), "
                    f"run-queue {res[r][key]['runq_ms']:.2f} ms, {res[r][key]['switches']:.0f} involuntary switches"
                    for r in sorted(res)))
                print(f"    all-gather in situ (rank 0, trimmed mean of {4 * args.repeats}): " + ", ".join(
                    f"{nb // 1024} KiB {t:.3f} ms" for nb, t in res[0][key]["calls"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
