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

``--stand-ins``: no pieces; each real rank's forward + backward iterations alternate between
gloo's collectives, local stand-ins (no call: an all-gather copies this rank's part into every
slot, a reduce-scatter keeps its slice, an all-reduce leaves the tensor), the same stand-ins
after a sleep of ``--sleep`` seconds, and the same stand-ins while two helper threads of the rank
move the call's bytes (what this rank sends and receives) through a local socket pair on its core,
as gloo's threads move them through loopback TCP, the caller waiting -- in the same two
processes, so the machine's drift hits the four alike; prints each rank's median main-thread CPU
per mode.  The gloo figure includes the calls' own main-thread CPU (``validate_measure.py`` prints
it per call; the links' times include it); what the collectives add to the compute around them is
what ``projection/measure/sync_points.py`` keeps in the measured pieces.

    python scripts/measure_gap.py [--cases tp2,ep2] [--iters 6] [--stand-ins [--sleep 0.001]]
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


class _Done:
    """What a stand-in returns for ``async_op=True``."""

    def wait(self) -> bool:
        return True


class _Traffic:
    """A loopback transfer on this process's core(s): two threads push ``n`` bytes through an
    AF_UNIX socket pair (one writes, one reads, as gloo's TCP pair does for a peer's share)
    while the caller waits; the caller's own thread does no work meanwhile."""

    def __init__(self) -> None:
        import queue
        import socket
        import threading

        self.a, self.b = socket.socketpair()
        self.todo_w, self.todo_r = queue.Queue(), queue.Queue()
        self.done = threading.Event()
        self.src, self.dst = bytearray(1 << 23), bytearray(1 << 23)
        threading.Thread(target=self._write, daemon=True).start()
        threading.Thread(target=self._read, daemon=True).start()

    def _write(self) -> None:
        while True:
            n = self.todo_w.get()
            self.a.sendall(memoryview(self.src)[:n])

    def _read(self) -> None:
        while True:
            n = self.todo_r.get()
            view, got = memoryview(self.dst), 0
            while got < n:
                got += self.b.recv_into(view[got:n])
            self.done.set()

    def move(self, n: int) -> None:
        n = max(1, min(int(n), len(self.src)))
        self.done.clear()
        self.todo_r.put(n)
        self.todo_w.put(n)
        self.done.wait()


def _stand_ins(mode: list, sleep_s: float):
    """A context in which megatron's collectives go through stand-ins while ``mode[0]`` is
    "local", "sleep" or "traffic" (module docstring): ``torch.distributed``'s all-reduce, all-gather
    and reduce-scatter and the aliases megatron's mappings and layers bound at import
    (``realrun.patched_collectives``)."""
    from primus_launch.projection.measure.realrun import patched_collectives

    traffic = _Traffic()

    def standing_in(nbytes: int = 0) -> bool:
        if mode[0] == "sleep":
            time.sleep(sleep_s)
        elif mode[0] == "traffic":
            traffic.move(nbytes)
        return mode[0] != "gloo"

    def ar(_f):
        def call(t, *a, **k):
            if standing_in(t.numel() * t.element_size()):
                return _Done() if k.get("async_op") else None
            return _f(t, *a, **k)
        return call

    def ag(_f):
        def call(out, inp, *a, **k):
            if standing_in(inp.numel() * inp.element_size()):  # the peer's share, as large as this rank's
                flat, n = out.view(-1), inp.numel()
                for i in range(out.numel() // n):
                    flat[i * n:(i + 1) * n].copy_(inp.reshape(-1))
                return _Done() if k.get("async_op") else None
            return _f(out, inp, *a, **k)
        return call

    def rs(_f):
        def call(out, inp, *a, **k):
            if standing_in(out.numel() * out.element_size()):
                out.view(-1).copy_(inp.reshape(-1)[:out.numel()])
                return _Done() if k.get("async_op") else None
            return _f(out, inp, *a, **k)
        return call

    stand_in = {"all_reduce": ar, "all_gather_into_tensor": ag, "reduce_scatter_tensor": rs}
    return patched_collectives(lambda name, f: stand_in[name](f), tuple(stand_in))


def _worker(rank: int, port: int, plan_json: str, iters: int, q, sleep_s: float | None = None) -> None:
    import torch.distributed as dist

    from primus_launch.frameworks import mcore_cpu
    from primus_launch.plan import Plan
    from primus_launch.projection.measure.realrun import _init, build_schedule

    _init(rank, 2, port, "cpu", 1, pin=True)
    plan = Plan.model_validate_json(plan_json)
    mode = ["gloo"]
    kinds = ("fwd", "full") if sleep_s is None else ("gloo", "local", "sleep", "traffic")
    with mcore_cpu.eager_fusions("cpu"), (_stand_ins(mode, sleep_s) if sleep_s is not None else nullcontext()):
        model, run = build_schedule(plan, "cpu")
        res: dict[str, list[float]] = {k: [] for k in kinds}
        for i in range(2 + iters):
            for kind in kinds:
                dist.barrier()
                mode[0] = kind if sleep_s is not None else "gloo"
                c0 = time.thread_time()
                run(kind == "fwd")
                if i >= 2:
                    res[kind].append(time.thread_time() - c0)
                mode[0] = "gloo"
                for q_ in model.parameters():
                    q_.grad = None
    q.put((rank, *(statistics.median(res[k]) for k in kinds)))
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="tp2,ep2")
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--stand-ins", action="store_true",
                    help="alternate gloo's collectives with local stand-ins (and stand-ins after a sleep) instead")
    ap.add_argument("--sleep", type=float, default=0.001, help="seconds each stand-in sleeps in the third mode")
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
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        port = _free_port()
        sleep_s = args.sleep if args.stand_ins else None
        if not args.stand_ins:
            tm = measure_pieces(plan, "cpu", cache=MeasureCache(Path(tempfile.mkdtemp(prefix="primus-gap-"))),
                                cpu_clock="thread").timings
            layers = [k for k in tm if "layer" in k]
            mb, n = plan.num_microbatches, plan.model.num_layers

            def total(f) -> float:
                return mb * (f(tm["embedding"]) + n * statistics.mean(f(tm[k]) for k in layers) + f(tm["head_loss"]))

            fwd, full = total(lambda x: x.fwd_s), total(lambda x: x.total_s)
        procs = [ctx.Process(target=_worker, args=(r, port, plan.model_dump_json(), args.iters, q, sleep_s),
                             daemon=True) for r in range(2)]
        for pr in procs:
            pr.start()
        got = sorted(wait_result(q, procs, 600) for _ in range(2))
        for pr in procs:
            pr.join(timeout=30)
        if args.stand_ins:
            print(f"[{name}] forward + backward main-thread CPU per iteration, median of {args.iters}")
            for rank, g, loc, slp, trf in got:
                print(f"  rank {rank}: gloo collectives {g * 1e3:.1f} ms, local stand-ins {loc * 1e3:.1f} ms "
                      f"({g / loc - 1:+.1%} with gloo), stand-ins after a {args.sleep * 1e3:g} ms sleep {slp * 1e3:.1f} ms "
                      f"({slp / loc - 1:+.1%}), stand-ins moving the call's bytes through a local socket pair "
                      f"{trf * 1e3:.1f} ms ({trf / loc - 1:+.1%})")
            continue
        print(f"[{name}] pieces: forward {fwd * 1e3:.1f} ms, forward + backward {full * 1e3:.1f} ms per iteration")
        for rank, f, a in got:
            print(f"  rank {rank}: real forward-only CPU {f * 1e3:.1f} ms ({f / fwd - 1:+.1%}), "
                  f"forward + backward CPU {a * 1e3:.1f} ms ({a / full - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
