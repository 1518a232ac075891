"""Ground truth for the measured path on the CPU: real megatron-core training iterations of a plan.

Runs the plan's *full* model (all layers, real TP / PP / CP / EP degrees, no sharding emulation)
with megatron-core's own pipeline schedules (``get_forward_backward_func``: no-pipelining for
pp=1, 1F1B for pp>1), the data-parallel gradient all-reduce, then ``torch.optim.Adam.step()`` --
one training iteration of ``plan.num_microbatches`` micro-batches.  On the CPU over gloo
(``frameworks.mcore_cpu`` shims) with ``plan.world_size`` processes started by
``torch.multiprocessing``, each bound to its own core; the same code runs on CUDA with NCCL.
``scripts/validation/measure_gloo.py`` compares it with ``project_measured``; the collective-call
traces of ``tests/test_layer_collectives.py`` and ``tests/test_mirror_ranks.py`` run on it.

Iteration time = wall clock between two barriers around (forward-backward of all micro-batches +
gradient reduction + optimizer step) for each of ``iters`` iterations after ``warmup``, taken on
rank 0 (or the thread's / process's CPU time, ``clock=``, for a single process).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Callable, Optional

import torch

from primus_launch.plan import Plan


def free_port() -> int:
    """A free TCP port on the loopback interface (the ranks' rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin_rank(rank: int, threads: int = 1) -> None:
    """Bind the calling process to ``threads`` allowed cores after the first ``rank * threads``
    (cyclic), so two ranks never time-share a core; no-op where the OS has no ``sched_setaffinity``."""
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[(rank * threads + i) % len(cpus)] for i in range(max(1, threads))})


def init_rank(rank: int, world: int, port: int, device: str = "cpu", threads: int = 1, pin: bool = True) -> None:
    """This process as rank ``rank`` of ``world``: megatron's CPU shims, ``threads`` torch threads,
    bound to its own core(s) (``pin``), and the default process group (gloo; NCCL on CUDA)."""
    import torch.distributed as dist

    from primus_launch.frameworks import mcore_cpu

    if pin:
        pin_rank(rank, threads)
    torch.set_num_threads(threads)
    mcore_cpu.install(device)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    backend = "nccl" if torch.device(device).type == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world)


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
    builds the model (``build_mcore.build_gpt``: all layers, this rank's TP / PP / EP / CP share)
    in training mode, and returns ``(model, run)``: ``run(forward_only)`` calls
    ``get_forward_backward_func`` over ``plan.num_microbatches`` micro-batches of fixed random
    tokens (under CP this rank's load-balanced chunks, megatron's ``get_batch_on_this_cp_rank``),
    loss = mean of the output.  On the CPU call it inside ``mcore_cpu.eager_fusions``."""
    from megatron.core import parallel_state as ps
    from megatron.core.pipeline_parallel import get_forward_backward_func

    from primus_launch.frameworks import mcore_cpu
    from primus_launch.projection.measure.build_mcore import build_gpt
    from primus_launch.projection.measure.piece import cp_positions

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


def grad_reducer(model, reduce_dtype: Optional[torch.dtype] = None):
    """The data-parallel gradient reduction of one iteration, as megatron's DDP does it with one
    contiguous buffer per group: dense gradients summed over the data x context-parallel group,
    expert gradients (``param.allreduce is False``) over the expert data-parallel group; a no-op
    for groups of one rank.  ``reduce_dtype``: the buffer's dtype (``torch.float32`` for the plan's
    ``grad_reduce_in_fp32``, megatron DDP's fp32 ``main_grad`` buffer, so the all-reduce moves the
    bytes the cost model prices); None: the gradients' own dtype.  The buffer is allocated once,
    on the first reduction, and kept, as DDP's ``_ParamAndGradBuffer`` is (megatron-core
    ``distributed/param_and_grad_buffer.py``)."""
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


def train_iterations(plan: Plan, device: str = "cpu", iters: int = 5, warmup: int = 2,
                     clock: str = "wall") -> list[float]:
    """Seconds of each timed iteration (inside an initialized process group of ``plan.world_size``
    ranks); every rank must call it.  ``clock="thread"`` / ``"process"``: CPU seconds of this thread /
    process instead of wall time (only meaningful for a single process, where nothing waits on a
    peer).  megatron's fused kernels run eagerly on the CPU (``mcore_cpu.eager_fusions``)."""
    import torch.distributed as dist

    from primus_launch.frameworks import mcore_cpu

    with mcore_cpu.eager_fusions(device):
        model, run = build_schedule(plan, device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-5)
        cuda = torch.device(device).type == "cuda"
        reduce_grads = grad_reducer(model, torch.float32 if plan.training.grad_reduce_in_fp32 else None)
        now = {"thread": time.thread_time, "process": time.process_time}.get(clock, time.perf_counter)
        times = []
        for i in range(warmup + iters):
            opt.zero_grad(set_to_none=True)
            dist.barrier()
            if cuda:
                torch.cuda.synchronize()
            t0 = now()
            run(False)
            reduce_grads()
            opt.step()
            if cuda:
                torch.cuda.synchronize()
            dist.barrier()
            if i >= warmup:
                times.append(now() - t0)
    return times


def _worker(rank: int, world: int, port: int, plan_json: str, device: str, iters: int, warmup: int,
            threads: int, queue, pin: bool) -> None:
    try:
        init_rank(rank, world, port, device, threads, pin)
        plan = Plan.model_validate_json(plan_json)
        times = train_iterations(plan, device, iters, warmup)
        import torch.distributed as dist

        if rank == 0:
            queue.put(("ok", times))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:  # report, never hang the parent
        queue.put(("error", f"rank {rank}: {type(exc).__name__}: {exc}"))
        raise


def run_real(plan: Plan, *, device: str = "cpu", iters: int = 5, warmup: int = 2, threads: int = 1,
             timeout_s: float = 600.0, pin: bool = True) -> list[float]:
    """Start ``plan.world_size`` processes (``torch.multiprocessing`` spawn), run
    :func:`train_iterations` and return rank 0's iteration times (seconds).  ``pin``: bind rank r
    to its own core(s) so two ranks never time-share one core."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    world = plan.world_size
    procs = [ctx.Process(target=_worker, args=(r, world, port, plan.model_dump_json(), device, iters,
                                               warmup, threads, q, pin), daemon=True)
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
    return result[1]


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
