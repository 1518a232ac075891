"""Record every collective a real 2-process gloo training iteration issues (test helper, CPU only).

    python tests/real_run_trace.py '[<plan json>, ...]'

Starts 2 processes (``torch.multiprocessing`` spawn, gloo), and for each plan runs one iteration of
``gloo_lab.realrun.train_iterations`` (``scripts/validation/gloo_lab/``) -- the run
``scripts/validation/measure_gloo.py`` compares the projection with: megatron-core's model and
schedule, the data-parallel gradient reduction, Adam
-- while ``torch.distributed``'s collectives (and megatron's ``dist_all_gather_func`` /
``dist_reduce_scatter_func`` aliases) are wrapped.  Prints, as JSON, per plan rank 0's calls: phase
(``fwd``; ``bwd`` inside autograd's backward; ``dp`` inside the gradient reduction), op (megatron's
``all_gather_into_tensor`` / ``reduce_scatter_tensor`` as ``all_gather`` / ``reduce_scatter``, the
others by their torch name), bytes by the NCCL convention (all-gather: the gathered output;
reduce-scatter: the input; all-reduce: the tensor), dtype, group (``tp`` / ``cp`` / ``dp`` /
``ep`` by identity with megatron's process groups, else ``other``) and group size.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
# the validation harness (gloo_lab) lives with the validation scripts
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "validation"))

RECORDS: list[dict] = []
PHASE = ["fwd"]
NAMES = {"all_gather_into_tensor": "all_gather", "_all_gather_base": "all_gather",
         "reduce_scatter_tensor": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter"}
WRAPPED = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "_all_gather_base",
           "_reduce_scatter_base", "all_gather", "reduce_scatter", "all_to_all_single", "all_to_all", "scatter",
           "gather", "broadcast", "send", "recv", "isend", "irecv")


def _size(x) -> int:
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_size(y) for y in x)
    return 0


def _group_name(g) -> str:
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    g = g if g is not None else dist.group.WORLD
    for name, get in (("tp", ps.get_tensor_model_parallel_group), ("cp", ps.get_context_parallel_group),
                      ("ep", ps.get_expert_model_parallel_group),
                      ("dp", lambda: ps.get_data_parallel_group(with_context_parallel=True))):
        try:
            if get() is g:
                return name
        except Exception:  # a group this layout does not build
            pass
    return "other"


def _install() -> None:
    import torch
    import torch.distributed as dist
    from megatron.core.tensor_parallel import layers, mappings

    def wrap(name, fn):
        @functools.wraps(fn)
        def w(*a, **k):
            g = k.get("group")
            if name in ("all_gather_into_tensor", "_all_gather_base", "all_gather"):
                nbytes = _size(a[0])
            elif name in ("reduce_scatter_tensor", "_reduce_scatter_base", "reduce_scatter", "all_to_all_single",
                          "all_to_all"):
                nbytes = _size(a[1])
            else:
                nbytes = _size(a[0]) if a else 0
            x = a[1] if name in ("reduce_scatter_tensor", "_reduce_scatter_base") else (a[0] if a else None)
            phase = PHASE[0] if PHASE[0] == "dp" else ("bwd" if torch._C._current_graph_task_id() != -1 else "fwd")
            RECORDS.append(dict(phase=phase, op=NAMES.get(name, name), nbytes=float(nbytes),
                                dtype=str(getattr(x, "dtype", "")).replace("torch.", ""),
                                group=_group_name(g), group_size=dist.get_world_size(g)))
            return fn(*a, **k)
        return w

    for n in WRAPPED:
        if hasattr(dist, n):
            setattr(dist, n, wrap(n, getattr(dist, n)))
    for mod in (mappings, layers):
        for n, torch_name in (("dist_all_gather_func", "all_gather_into_tensor"),
                              ("dist_reduce_scatter_func", "reduce_scatter_tensor")):
            if hasattr(mod, n):
                setattr(mod, n, getattr(dist, torch_name))


def _trace(rank: int, port: int, plans_json: str) -> list:
    from megatron.core import parallel_state as ps

    from primus_launch.plan import Plan
    from gloo_lab import realrun

    realrun.init_rank(rank, 2, port, "cpu", 1, pin=False)
    _install()
    orig = realrun.grad_reducer

    def tagged(model, *a, **k):
        red = orig(model, *a, **k)

        def run() -> None:
            PHASE[0] = "dp"
            try:
                red()
            finally:
                PHASE[0] = "fwd"
        return run

    realrun.grad_reducer = tagged
    out = []
    for pj in json.loads(plans_json):
        plan = Plan.model_validate(pj)
        if ps.model_parallel_is_initialized():
            ps.destroy_model_parallel()
        RECORDS.clear()
        realrun.train_iterations(plan, "cpu", iters=1, warmup=0)
        out.append([r for r in RECORDS if r["op"] != "barrier"])
    return out


def _entry(rank: int, port: int, payload: str, q, body) -> None:
    """One spawned rank: ``body(rank, port, payload)``, rank 0's result to ``q``; an exception is
    reported (never hangs the parent) and raised."""
    try:
        out = body(rank, port, payload)
        if rank == 0:
            q.put(("ok", out))
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:
        q.put(("error", f"rank {rank}: {type(exc).__name__}: {exc}"))
        raise


def run_two(body, payload: str, timeout_s: float = 300):
    """``body(rank, port, payload)`` in 2 spawned processes (a free local port for their
    rendezvous; ``body`` initialises the process group, :func:`_entry` tears it down): rank 0's
    return value, or a rank's exception raised as ``RuntimeError``."""
    import torch.multiprocessing as mp

    from gloo_lab.realrun import free_port, wait_result

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(r, port, payload, q, body), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    try:
        status, res = wait_result(q, procs, timeout_s)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    if status != "ok":
        raise RuntimeError(res)
    return res


def main(plans_json: str) -> list:
    return run_two(_trace, plans_json)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(json.dumps(main(sys.argv[1])))
