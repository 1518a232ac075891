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

``--modules``: where in the forward the CPU goes, module by module -- forward pre / post hooks
accumulate the main thread's CPU time (``time.thread_time``, inclusive of the module's children)
per decoder-layer module (the layer, its children and theirs: ``self_attention``, ``mlp``,
``mlp.router``, ``mlp.experts``, ...) and per call, in the world-size-1 layer pieces run as the
measurement runs them (this process, one core, freed memory kept, the caches evicted before each
forward, blocking where the run's collectives do: ``sync_points``) and in the real ranks' forward-only schedule; prints each
module's CPU and minor page faults per call and the real ranks' ratio to the piece's (medians over
``--rounds`` rounds of pieces and real ranks, with each rank's per-round ratios); then oneDNN's primitive creations
(its kernels JIT-compiled for a GEMM shape not seen before) in one more forward-only iteration
of each real rank and in as many layer forwards of the pieces.  ``--partner none,spin,stream``: the
pieces again while another process on rank 1's core spins (no memory traffic) or streams a
tensor twice the last-level cache from DRAM, as the real run's other rank shares the memory
system; one table each against the same real ranks.

    python scripts/measure_gap.py [--cases tp2,ep2] [--iters 6] [--stand-ins [--sleep 0.001] | --modules [--rounds 3] [--partner none,spin,stream]]
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager, nullcontext
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

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


@contextmanager
def _onednn_creations(out: list) -> Iterator[None]:
    """oneDNN's verbose mode (``torch.backends.mkldnn.verbose(2)``: a line per primitive creation and
    execution) for the block, its lines captured from file descriptor 1; appends ``(creations that
    missed oneDNN's primitive cache, their milliseconds)`` -- a primitive is created (its kernel
    JIT-compiled) for each GEMM shape not seen before."""
    import ctypes
    import os

    import torch

    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+") as f:
        os.dup2(f.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(2):
                yield
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        f.seek(0)
        n, ms = 0, 0.0
        for line in f:
            if line.startswith("onednn_verbose") and ",create:cache_miss," in line:
                n, ms = n + 1, ms + float(line.rsplit(",", 1)[1])
    out.append((n, ms))


def _module_clock(model) -> tuple[dict[str, list[float]], list]:
    """Forward hooks on ``model``'s decoder-layer modules (a layer, its children and grandchildren,
    keyed ``"<path below the layer> (<class>)"``, the layer itself ``"layer (<class>)"``): the
    returned dict gets ``[CPU seconds, calls, minor page faults]`` per key, inclusive of the
    module's children (``time.thread_time``, ``getrusage(RUSAGE_THREAD)``); the second item is the
    hooks' handles."""
    import re

    import resource

    pat = re.compile(r"(?:^|\.)layers\.\d+(?:\.(.+))?$")
    acc: dict[str, list[float]] = {}
    handles = []

    def faults() -> int:
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt

    for name, mod in model.named_modules():
        m = pat.search(name)
        if m is None or (m.group(1) or "").count(".") > 1:
            continue
        key = f"{m.group(1) or 'layer'} ({type(mod).__name__})"
        starts: list[tuple[float, int]] = []

        def pre(mod, args, starts=starts):
            starts.append((time.thread_time(), faults()))

        def post(mod, args, out, key=key, starts=starts):
            t0, f0 = starts.pop()
            a = acc.setdefault(key, [0.0, 0, 0])
            a[0] += time.thread_time() - t0
            a[1] += 1
            a[2] += faults() - f0

        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    return acc, handles


def _partner(kind: str, stop) -> None:
    """What runs on rank 1's core beside the pieces (``--partner``): ``spin``, an integer loop that
    touches no memory; ``stream``, in-place adds over a 64 MiB tensor (twice the last-level cache:
    every pass streams it from DRAM), until ``stop`` is set."""
    import torch

    from primus_launch.projection.measure.cpu_pin import pin_rank

    pin_rank(1)
    torch.set_num_threads(1)
    a = torch.ones(16 << 20) if kind == "stream" else None
    x = 0
    while not stop.is_set():
        if a is not None:
            a.add_(1.0)
        else:
            for i in range(100_000):
                x += i


@contextmanager
def _partnered(kind: str) -> Iterator[None]:
    """:func:`_partner` ``kind`` in a process of its own for the block (``none``: nothing)."""
    import multiprocessing as mp

    if kind == "none":
        yield
        return
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    proc = ctx.Process(target=_partner, args=(kind, stop), daemon=True)
    proc.start()
    time.sleep(1.0)  # its interpreter up and looping
    try:
        yield
    finally:
        stop.set()
        proc.join(timeout=30)


def _piece_modules(plan, iters: int, partner: str = "none") -> tuple[dict[str, list[float]], tuple[int, float]]:
    """:func:`_module_clock` over the world-size-1 layer pieces' forwards, ``iters`` x 10 calls of
    each after 3 warm-ups, as the measurement runs them (one core, freed memory kept, the run's
    blocks, the caches evicted before each forward: ``timing.flush_buffer``); and oneDNN's primitive
    creations (:func:`_onednn_creations`) over as many layer forwards as one forward-only iteration
    of the real run makes (micro-batches x layers), after them; with :func:`_partnered` ``partner``
    running on rank 1's core meanwhile."""
    import torch

    from primus_launch.projection.measure.timing import flush_buffer

    from primus_launch.projection.measure import build_mcore
    from primus_launch.projection.measure.cpu_alloc import keep_freed_memory
    from primus_launch.projection.measure.cpu_pin import pinned
    from primus_launch.projection.measure.sync_points import blocking_collectives

    keep_freed_memory()
    with pinned(1), build_mcore.world_size_one("cpu"), _partnered(partner):
        pieces, model = build_mcore.pieces(plan, "cpu", measure_layers=1)
        layers = [pc for pc in pieces if "layer" in pc.name]
        with blocking_collectives(plan, "cpu", model, "thread"):
            for pc in layers:
                for _ in range(3):
                    pc.forward(*pc.inputs)
            flush = flush_buffer(torch.device("cpu"))
            acc, handles = _module_clock(model)
            with torch.enable_grad():
                for _ in range(iters * 10):
                    for pc in layers:
                        flush.add_(1)
                        pc.forward(*pc.inputs)
            for h in handles:
                h.remove()
            created: list = []
            calls = plan.num_microbatches * plan.model.num_layers
            with torch.enable_grad(), _onednn_creations(created):
                for i in range(calls):
                    pc = layers[i % len(layers)]
                    pc.forward(*pc.inputs)
    return acc, created[0]


def _worker(rank: int, port: int, plan_json: str, iters: int, q, sleep_s: float | None = None,
            modules: bool = False) -> None:
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
        if modules:  # forward-only, the modules' CPU after 2 warm-ups
            for _ in range(2):
                run(True)
            acc, handles = _module_clock(model)
            for _ in range(iters):
                dist.barrier()
                run(True)
            for h in handles:
                h.remove()
            created: list = []
            dist.barrier()
            with _onednn_creations(created):  # one more iteration, its oneDNN primitive creations
                run(True)
            q.put((rank, acc, created[0]))
            dist.barrier()
            dist.destroy_process_group()
            return
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


def _print_modules(name: str, rounds: list, iters: int) -> None:
    """The ``--modules`` table: per module, the median over rounds of the CPU per call of the pieces
    and of each real rank, the rank's ratio of medians and the range of its per-round ratios, and
    the minor page faults per call (medians); then oneDNN's creations per iteration."""
    def per_call(acc: dict, key: str, i: int) -> float:
        a = acc.get(key, (0.0, 0, 0))
        return a[i] / a[1] if a[1] else float("nan")

    print(f"[{name}] forward CPU per call, ms, median of {len(rounds)} rounds [minor page faults per call]: "
          f"world-size-1 piece | rank 0 (ratio, per-round range) | rank 1 (...); calls per forward-only iteration")
    keys = sorted({k for (piece, _), real in rounds for acc in (piece, real[0][1], real[1][1]) for k in acc})
    for key in keys:
        pcs = [per_call(piece, key, 0) for (piece, _), _ in rounds]
        pc = statistics.median(pcs)
        cells = []
        for r in (0, 1):
            rs = [per_call(real[r][1], key, 0) for _, real in rounds]
            ratios = [x / y for x, y in zip(rs, pcs)]
            cells.append(f"{statistics.median(rs) * 1e3:7.3f} [{statistics.median(per_call(real[r][1], key, 2) for _, real in rounds):5.1f}] "
                         f"({statistics.median(rs) / pc:4.2f}, {min(ratios):4.2f}-{max(ratios):4.2f})")
        calls = rounds[0][1][0][1].get(key, (0, 0))[1] / iters
        faults = statistics.median(per_call(piece, key, 2) for (piece, _), _ in rounds)
        print(f"  {key:48s} {pc * 1e3:7.3f} [{faults:5.1f}] | {' | '.join(cells)}; {calls:g}")
    made = " | ".join(f"rank {r} " + ", ".join(f"{real[r][2][0]} ({real[r][2][1]:.1f} ms)" for _, real in rounds)
                      for r in (0, 1))
    pieces = ", ".join(f"{c[0]} ({c[1]:.1f} ms)" for (_, c), _ in rounds)
    print(f"  oneDNN primitive creations (cache misses) per forward-only iteration, each round: pieces {pieces} | {made}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="tp2,ep2")
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--stand-ins", action="store_true",
                    help="alternate gloo's collectives with local stand-ins (and stand-ins after a sleep) instead")
    ap.add_argument("--sleep", type=float, default=0.001, help="seconds each stand-in sleeps in the third mode")
    ap.add_argument("--modules", action="store_true",
                    help="the forward's CPU per decoder-layer module, world-size-1 pieces against the real ranks")
    ap.add_argument("--rounds", type=int, default=3, help="--modules: rounds of pieces and real ranks (medians)")
    ap.add_argument("--partner", default="none",
                    help="--modules: what runs on the other core beside the pieces, one table each, comma-separated "
                         "from none (the measurement's condition), spin (no memory traffic), stream (DRAM traffic)")
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
        sleep_s = args.sleep if args.stand_ins else None

        def real_ranks() -> list:
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            port = _free_port()
            procs = [ctx.Process(target=_worker, args=(r, port, plan.model_dump_json(), args.iters, q, sleep_s,
                                                       args.modules), daemon=True) for r in range(2)]
            for pr in procs:
                pr.start()
            out = sorted((wait_result(q, procs, 600) for _ in range(2)), key=lambda g: g[0])
            for pr in procs:
                pr.join(timeout=30)
            return out

        if args.modules:  # rounds of (pieces under each partner, real ranks), medians over the rounds
            partners = args.partner.split(",")
            rounds = []
            for _ in range(args.rounds):
                pcs = {k: _piece_modules(plan, args.iters, k) for k in partners}
                rounds.append((pcs, real_ranks()))
            for k in partners:
                _print_modules(name if k == "none" else f"{name}, pieces beside a {k} partner",
                               [(pcs[k], real) for pcs, real in rounds], args.iters)
            continue
        if not args.stand_ins:
            tm = measure_pieces(plan, "cpu", cache=MeasureCache(Path(tempfile.mkdtemp(prefix="primus-gap-"))),
                                cpu_clock="thread").timings
            layers = [k for k in tm if "layer" in k]
            mb, n = plan.num_microbatches, plan.model.num_layers

            def total(f) -> float:
                return mb * (f(tm["embedding"]) + n * statistics.mean(f(tm[k]) for k in layers) + f(tm["head_loss"]))

            fwd, full = total(lambda x: x.fwd_s), total(lambda x: x.total_s)
        got = real_ranks()
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
