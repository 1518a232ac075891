"""Ground truth for the hybrid projection: real megatron-core training iterations of a plan.

Runs the plan's *full* model (all layers, real TP / PP degrees, no sharding emulation) with
megatron-core's own pipeline schedules (``get_forward_backward_func``: no-pipelining for pp=1,
1F1B for pp>1), then ``torch.optim.Adam.step()`` -- one training iteration of
``plan.num_microbatches`` micro-batches.  On the CPU over gloo (``mcore_cpu`` shims) with
``plan.world_size`` processes started by ``torch.multiprocessing``; the same code runs on CUDA
with NCCL.  Used by ``tests/test_measure.py`` and ``scripts/validate_measure.py`` to check
:func:`~primus_launch.projection.measure.upscale.project_measured`.

Iteration time = wall clock between two barriers around (forward-backward of all micro-batches
+ optimizer step) for each of ``iters`` iterations after ``warmup``, taken on rank 0 (or the
process's CPU time, ``clock="process"``, for a single process on a shared machine).

Per-region accounting (``regions=``): each timed iteration's :data:`REGIONS` -- ``zero_grad``,
``forward_backward`` (megatron's schedule: every micro-batch's forward and backward, TP / CP / EP
collectives and pipeline sends included), ``grad_reduce`` (the data-parallel all-reduce with the
copies into and out of its kept buffer, :func:`_grad_reducer`) and ``optimizer`` (``Adam.step``) -- as main-thread CPU seconds,
wall seconds, main-thread run-queue wait seconds, then the main thread's voluntary and involuntary
context switches and major page faults (:func:`thread_switches`).  The CPU time is the work this rank's
Python thread did (what the measured pieces time); wall minus CPU is time spent waiting
(collectives, a peer's skew, other jobs on the core), of which the run-queue wait
(:func:`run_queue_wait_s`) is the time the thread was runnable while another thread held its core,
and the rest time it was blocked (each block one voluntary switch).
On CUDA these are host-side times (kernels run asynchronously).

Per-call accounting (``calls=``, :func:`timed_collectives`): every torch.distributed collective the
forward-backward issues (megatron's mappings and layers, the CP core's K / V exchange), its wall and
main-thread CPU seconds keyed by op, the collectives model's size ``S`` and the group's size, so a
comparison can set each call against what the cost model prices for it.
"""

from __future__ import annotations

import inspect
import os
import socket
import statistics
import time
from contextlib import contextmanager, nullcontext
from typing import Callable, Iterator, Optional

import torch

from primus_launch.plan import Plan


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank: int, world: int, port: int, device: str, threads: int, pin: bool = False) -> None:
    import torch.distributed as dist

    from primus_launch.frameworks import mcore_cpu
    from primus_launch.projection.measure.cpu_alloc import keep_freed_memory
    from primus_launch.projection.measure.cpu_pin import pin_rank

    if torch.device(device).type == "cpu":  # as the measuring process (cpu_alloc)
        keep_freed_memory()
    if pin:  # one core per rank, as the measuring process (cpu_pin)
        pin_rank(rank, threads)
    torch.set_num_threads(threads)
    mcore_cpu.install(device)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    backend = "nccl" if torch.device(device).type == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world)


def run_queue_wait_s() -> float:
    """Seconds the calling thread has spent runnable but waiting for a core: the second field of
    Linux's ``/proc/thread-self/schedstat`` (nanoseconds; ``Documentation/scheduler/sched-stats``);
    0.0 where the kernel does not expose it."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def thread_switches() -> tuple[float, float, float]:
    """(voluntary context switches, involuntary ones, major page faults) of the calling thread so
    far: ``getrusage(RUSAGE_THREAD)`` (Linux ``getrusage(2)``: a voluntary switch is the thread
    blocking -- on a lock, a futex, a socket, a page read from disk -- an involuntary one its
    preemption); zeros where the OS has no per-thread usage."""
    import resource

    who = getattr(resource, "RUSAGE_THREAD", None)
    if who is None:
        return 0.0, 0.0, 0.0
    u = resource.getrusage(who)
    return float(u.ru_nvcsw), float(u.ru_nivcsw), float(u.ru_majflt)


def _call_clock() -> tuple[float, float, float, float]:
    """(wall, thread CPU, run-queue wait, voluntary switches) of the calling thread now: the
    clocks a timed collective call reads on either side of it (:func:`timed_collectives`)."""
    return time.perf_counter(), time.thread_time(), run_queue_wait_s(), thread_switches()[0]


def _spent(t0: tuple[float, float, float, float], entry: float) -> list[float]:
    """A timed call's record since :func:`_call_clock` ``t0``: ``[wall_s, cpu_s, entry, run_queue_s,
    voluntary_switches]`` (:func:`timed_collectives`; ``entry`` given, not a difference)."""
    t1 = _call_clock()
    return [t1[0] - t0[0], t1[1] - t0[1], entry, t1[2] - t0[2], t1[3] - t0[3]]


REGIONS = ("zero_grad", "forward_backward", "grad_reduce", "optimizer")


#: the torch.distributed functions timed by :func:`timed_collectives` -> (op name of the cost model,
#: the parameter whose bytes are the model's size S: all-reduce its tensor, all-gather its gathered
#: output, reduce-scatter its input, all-to-all what one rank sends)
TIMED_CALLS = {"all_reduce": ("all_reduce", "tensor"), "all_gather_into_tensor": ("all_gather", "output_tensor"),
               "reduce_scatter_tensor": ("reduce_scatter", "input"), "all_to_all_single": ("all_to_all", "input")}


#: megatron-core's aliases of torch.distributed functions, bound at import in
#: ``tensor_parallel/mappings.py`` and ``layers.py``: patching ``torch.distributed`` alone misses them
MEGATRON_ALIASES = ("dist_all_gather_func", "dist_reduce_scatter_func")


@contextmanager
def patched_collectives(wrap: Callable[[str, Callable], Callable],
                        names: tuple[str, ...] = tuple(TIMED_CALLS)) -> Iterator[None]:
    """Within it, each ``torch.distributed`` function in ``names`` -- and each of megatron-core's
    :data:`MEGATRON_ALIASES` bound to one of them -- is ``wrap(name, function)``; restored on exit."""
    import torch.distributed as dist
    from megatron.core.tensor_parallel import layers, mappings

    saved = [(dist, name, getattr(dist, name)) for name in names]
    name_of = {f: name for _, name, f in saved}
    for mod in (mappings, layers):
        for alias in MEGATRON_ALIASES:
            if getattr(mod, alias, None) in name_of:
                saved.append((mod, alias, getattr(mod, alias)))
    try:
        for mod, attr, f in saved:
            setattr(mod, attr, wrap(name_of[f], f))
        yield
    finally:
        for mod, attr, f in saved:
            setattr(mod, attr, f)


@contextmanager
def timed_collectives(record: dict, on: list) -> Iterator[None]:
    """Time every collective call while ``on[0]`` is true: ``record["op|S|n"]`` gets one
    ``(wall_s, cpu_s, entry, run_queue_s, voluntary_switches)`` per call in issue order (``S``: bytes as
    :data:`TIMED_CALLS` says, ``n``: the group's size; ``entry``: ``time.perf_counter()`` at the
    call, CLOCK_MONOTONIC on Linux, one clock for every process of the machine, so the ranks'
    entries into one call can be set side by side; ``run_queue_s``: the calling thread's run-queue
    wait in the call, :func:`run_queue_wait_s`).  Patches ``torch.distributed``'s functions and the
    aliases megatron-core's ``tensor_parallel.mappings`` / ``layers`` bound at import
    (:func:`patched_collectives`); an ``async_op`` call's time is its issue plus its ``wait()`` (the
    compute the caller overlaps in between is not the call's).  Restores them on exit."""
    import torch.distributed as dist

    def timed(name: str, f: Callable) -> Callable:
        op, arg = TIMED_CALLS[name]
        sig = inspect.signature(f)

        def call(*a, **k):
            if not on[0]:
                return f(*a, **k)
            bound = sig.bind(*a, **k).arguments
            t = bound[arg]
            key = f"{op}|{t.numel() * t.element_size()}|{dist.get_world_size(bound.get('group'))}"
            t0 = _call_clock()
            work = f(*a, **k)
            spent = _spent(t0, entry=t0[0])
            if work is None:
                record.setdefault(key, []).append(tuple(spent))
                return None
            return _TimedWork(work, spent, record.setdefault(key, []))
        return call

    with patched_collectives(timed):
        yield


class _TimedWork:
    """An async collective's handle whose ``wait()`` adds to the call's time."""

    def __init__(self, work, spent: list, out: list) -> None:
        self._work, self._spent, self._out = work, spent, out

    def wait(self, *a, **k):
        t0 = _call_clock()
        r = self._work.wait(*a, **k)
        self._out.append(tuple(a + b for a, b in zip(self._spent, _spent(t0, entry=0.0))))
        return r

    def __getattr__(self, name):
        return getattr(self._work, name)


def train_iterations(plan: Plan, device: str = "cpu", iters: int = 5, warmup: int = 2,
                     clock: str = "wall", regions: Optional[dict] = None,
                     calls: Optional[dict] = None) -> list[float]:
    """Seconds of each timed iteration (inside an initialized process group of
    ``plan.world_size`` ranks); every rank must call it.  ``clock="thread"`` / ``"process"``: CPU
    seconds of this thread / process instead of wall time (only meaningful for a single process, where nothing
    waits on a peer).  megatron's fused kernels run eagerly on the CPU (``mcore_cpu.eager_fusions``).
    ``regions``: a dict filled with ``{region: [(cpu_s, wall_s, run_queue_s, voluntary switches,
    involuntary switches, major faults) per timed iteration]}`` for each of :data:`REGIONS` (module
    doc, :func:`thread_switches`).  ``calls``: a dict filled with the timed
    iterations' collective calls inside the forward-backward (:func:`timed_collectives`)."""
    from primus_launch.frameworks import mcore_cpu

    on = [False] if calls is not None else None  # set while a timed iteration's forward-backward runs
    with mcore_cpu.eager_fusions(device), (timed_collectives(calls, on) if on is not None else nullcontext()):
        return _train_iterations(plan, device, iters, warmup, clock, regions, on)


class _Regions:
    """(main-thread CPU, wall, main-thread run-queue wait) seconds and the main thread's
    (voluntary, involuntary context switches, major faults) (:func:`thread_switches`) per named
    region of one iteration."""

    def __init__(self) -> None:
        self.now: dict[str, tuple[float, ...]] = {}

    def mark(self) -> tuple[float, ...]:
        return (time.thread_time(), time.perf_counter(), run_queue_wait_s()) + thread_switches()

    def add(self, name: str, t0: tuple[float, ...]) -> tuple[float, ...]:
        t1 = self.mark()
        self.now[name] = tuple(b - a for a, b in zip(t0, t1))
        return t1


def init_model_parallel(plan: Plan) -> None:
    """megatron-core's process groups for the plan's TP / PP / CP / EP / expert-TP sizes
    (``parallel_state.initialize_model_parallel``, once per process), as the real runs make them."""
    from megatron.core import parallel_state as ps

    p = plan.parallel
    if not ps.model_parallel_is_initialized():
        ps.initialize_model_parallel(tensor_model_parallel_size=p.tp, pipeline_model_parallel_size=p.pp,
                                     context_parallel_size=p.cp, expert_model_parallel_size=p.ep,
                                     expert_tensor_parallel_size=p.expert_tp)


def build_schedule(plan: Plan, device: str = "cpu") -> tuple[torch.nn.Module, Callable[[bool], None]]:
    """This rank's part of the plan's full model and one pass of megatron's schedule over it.

    Initializes megatron's parallel state (when not yet) in the running process group, seeds it,
    builds the model (``build_gpt``: all layers, this rank's TP / PP / EP / CP share) in training
    mode, and returns ``(model, run)``: ``run(forward_only)`` calls ``get_forward_backward_func``
    over ``plan.num_microbatches`` micro-batches of fixed random tokens (under CP this rank's
    load-balanced chunks, megatron's ``get_batch_on_this_cp_rank``), loss = mean of the output.  On
    the CPU call it inside ``mcore_cpu.eager_fusions``.  :func:`train_iterations` and
    ``scripts/measure_gap.py`` run it."""
    from megatron.core import parallel_state as ps
    from megatron.core.pipeline_parallel import get_forward_backward_func

    from primus_launch.frameworks import mcore_cpu
    from primus_launch.projection.measure.build_mcore import build_gpt

    p, m, t = plan.parallel, plan.model, plan.training
    init_model_parallel(plan)
    if torch.device(device).type == "cpu":
        mcore_cpu.seed_rng_tracker(1234)
    else:
        from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

        model_parallel_cuda_manual_seed(1234)
    n_moe = m.num_moe_layers
    model = build_gpt(plan, num_dense=m.num_layers - n_moe, num_moe=n_moe, per_rank=False, device=device,
                      pre_process=ps.is_pipeline_first_stage(), post_process=ps.is_pipeline_last_stage())
    model.train()
    model.config.finalize_model_grads_func = None
    dev = torch.device(device if device != "cuda" else f"cuda:{torch.cuda.current_device()}")
    s, b = m.seq_length, t.micro_batch_size
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, m.vocab_size, (b, s), generator=gen).to(dev)
    labels = torch.randint(0, m.vocab_size, (b, s), generator=gen).to(dev)
    pos = torch.arange(s, device=dev).unsqueeze(0).expand(b, -1)
    if p.cp > 1:  # this rank's load-balanced chunks (megatron get_batch_on_this_cp_rank)
        from primus_launch.projection.measure.build_mcore import cp_positions

        idx = torch.tensor(cp_positions(s, p.cp, ps.get_context_parallel_rank()), device=dev)
        ids, labels, pos = ids[:, idx], labels[:, idx], idx.unsqueeze(0).expand(b, -1)

    def forward_step(data_iterator, model):
        out = model(ids, pos, None, labels=labels)

        def loss_func(output):
            loss = output.float().mean()
            return loss, {"loss": loss.detach()}

        return out, loss_func

    fb = get_forward_backward_func()

    def run(forward_only: bool = False) -> None:
        fb(forward_step_func=forward_step, data_iterator=iter(range(10**6)), model=[model],
           num_microbatches=plan.num_microbatches, seq_length=s, micro_batch_size=b, forward_only=forward_only)

    return model, run


def _train_iterations(plan: Plan, device: str, iters: int, warmup: int, clock: str,
                      regions: Optional[dict] = None, calls_on: Optional[list] = None) -> list[float]:
    import torch.distributed as dist

    t = plan.training
    model, run = build_schedule(plan, device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-5)
    cuda = torch.device(device).type == "cuda"
    reduce_grads = _grad_reducer(model, torch.float32 if t.grad_reduce_in_fp32 else None)
    now = {"thread": time.thread_time, "process": time.process_time}.get(clock, time.perf_counter)
    times = []
    reg = _Regions()
    if regions is not None:
        for name in REGIONS:
            regions.setdefault(name, [])
    for i in range(warmup + iters):
        r0 = reg.mark()
        opt.zero_grad(set_to_none=True)
        reg.add("zero_grad", r0)
        dist.barrier()
        if cuda:
            torch.cuda.synchronize()
        t0 = now()
        r0 = reg.mark()
        if calls_on is not None:
            calls_on[0] = i >= warmup
        run(False)
        if calls_on is not None:
            calls_on[0] = False
        r0 = reg.add("forward_backward", r0)
        reduce_grads()
        r0 = reg.add("grad_reduce", r0)
        opt.step()
        reg.add("optimizer", r0)
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        if i >= warmup:
            times.append(now() - t0)
            if regions is not None:
                for name in REGIONS:
                    regions[name].append(reg.now[name])
    return times


def _grad_reducer(model, reduce_dtype: Optional[torch.dtype] = None):
    """The data-parallel gradient reduction of one iteration, as megatron's DDP does it with one
    contiguous buffer per group: dense gradients summed over the data x context-parallel group,
    expert gradients (``param.allreduce is False``) over the expert data-parallel group; a no-op
    for groups of one rank.  ``reduce_dtype``: the buffer's dtype (``torch.float32`` for the plan's
    ``grad_reduce_in_fp32``, megatron DDP's fp32 ``main_grad`` buffer, so the all-reduce moves the
    bytes the cost model prices); None: the gradients' own dtype.  The buffer is allocated once,
    on the first reduction, and kept, as DDP's ``_ParamAndGradBuffer`` is (megatron-core
    ``distributed/param_and_grad_buffer.py``): each iteration copies the gradients into it and the
    reduced sums back.  (With a buffer allocated per iteration the EP=2 validation run's reduction
    of its ~2 M dense gradients took 14-22 ms of main-thread CPU per iteration, against 5-7 ms for
    the ~3x larger CP=2 one -- RESULTS.md at d53478a -- work megatron's run does not do.)"""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    groups = [(ps.get_data_parallel_group(with_context_parallel=True), lambda q: getattr(q, "allreduce", True)),
              (ps.get_expert_data_parallel_group(), lambda q: not getattr(q, "allreduce", True))]
    params = [q for q in model.parameters() if q.requires_grad]
    buffers: dict[int, tuple[torch.Tensor, list[torch.Tensor]]] = {}

    def reduce() -> None:
        for i, (group, pick) in enumerate(groups):
            if dist.get_world_size(group) <= 1:
                continue
            grads = [q.grad for q in params if pick(q) and q.grad is not None]
            if not grads:
                continue
            size = sum(g.numel() for g in grads)
            if i not in buffers or buffers[i][0].numel() != size:
                flat = torch.empty(size, dtype=reduce_dtype or grads[0].dtype, device=grads[0].device)
                buffers[i] = (flat, list(torch._utils._unflatten_dense_tensors(flat, grads)))
            flat, views = buffers[i]
            for v, g in zip(views, grads):
                v.copy_(g)
            dist.all_reduce(flat, group=group)
            for v, g in zip(views, grads):
                g.copy_(v)

    return reduce


def _worker(rank: int, world: int, port: int, plan_json: str, device: str, iters: int, warmup: int,
            threads: int, queue, pin: bool = False, calls: bool = False) -> None:
    try:
        _init(rank, world, port, device, threads, pin)
        plan = Plan.model_validate_json(plan_json)
        regions: dict = {}
        record: Optional[dict] = {} if calls else None
        times = train_iterations(plan, device, iters, warmup, regions=regions, calls=record)
        import torch.distributed as dist

        every = [None] * world
        dist.all_gather_object(every, (regions, record))
        if rank == 0:
            queue.put(("ok", times, every))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:  # report, never hang the parent
        queue.put(("error", f"rank {rank}: {type(exc).__name__}: {exc}"))
        raise


def run_real(plan: Plan, *, device: str = "cpu", iters: int = 5, warmup: int = 2, threads: int = 1,
             timeout_s: float = 600.0, pin: bool = False, regions: Optional[list] = None,
             calls: Optional[list] = None) -> list[float]:
    """Start ``plan.world_size`` processes (``torch.multiprocessing`` spawn), run
    :func:`train_iterations` and return rank 0's iteration times (seconds).  ``pin``: bind rank
    r to its own core(s) (``os.sched_setaffinity``) so two ranks never time-share one core.
    ``regions``: a list extended with each rank's per-region accounting (rank order;
    :func:`train_iterations`'s ``regions``); ``calls``: a list extended with each rank's timed
    collective calls (rank order; :func:`train_iterations`'s ``calls``)."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    world = plan.world_size
    procs = [ctx.Process(target=_worker, args=(r, world, port, plan.model_dump_json(), device, iters,
                                               warmup, threads, q, pin, calls is not None), daemon=True)
             for r in range(world)]
    for pr in procs:
        pr.start()
    result: Optional[tuple] = None
    try:
        result = wait_result(q, procs, timeout_s)
    finally:
        for pr in procs:
            pr.join(timeout=30 if result and result[0] == "ok" else 1)
            if pr.is_alive():
                pr.terminate()
                pr.join()
    if result[0] != "ok":
        raise RuntimeError(result[1])
    if regions is not None:
        regions.extend(r for r, _ in result[2])
    if calls is not None:
        calls.extend(c for _, c in result[2])
    return result[1]


def region_medians(regions: dict) -> dict[str, tuple[float, ...]]:
    """``{region: (median CPU s, median wall s, median run-queue wait s)}`` over the timed
    iterations of one rank's :func:`train_iterations` ``regions``."""
    return {k: tuple(statistics.median(x) for x in zip(*v)) for k, v in regions.items() if v}


def wait_result(q, procs, timeout_s: float):
    """The first item of ``q``; raises if a process died without reporting or time ran out."""
    import queue as _queue

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return q.get(timeout=1.0)
        except _queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a worker process exited with code {dead[0]} before reporting")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no result within {timeout_s:.0f} s")


def median(xs: list[float]) -> float:
    return statistics.median(xs)
