"""A "GPU" spec for the local machine, from measured costs, so the projection can be checked
against real runs on it (e.g. CPU + gloo on loopback).

The cost model (:mod:`primus_launch.projection.iteration`, :mod:`~primus_launch.projection.cost.collectives`)
reads the plan's ``cluster.gpu`` spec for everything it adds analytically.  To compare a projection
with a real run on this machine, :func:`measure_local_spec` measures those costs here and
registers a :class:`~primus_launch.projection.hardware.gpus.GPUSpec` under ``name`` through the hardware
DB's own mechanism (``hardware.load_gpu_file`` on a TOML it writes, so the same file can be given
to the CLI later); set ``plan.cluster.gpu = name``:

- links (gloo on loopback, 2 processes, each bound to its own core): all-reduce and send/recv of two message sizes, median of
  repeats, fitted to ``t = S / B + c``.  The collectives model gives, for 2 ranks on one node,
  ``all_reduce = S / (B_i * eff) + 2 a`` and ``p2p = S / (B_i * eff) + a`` (ring, n = 2), so
  ``intra_node_bw = B / INTRA_NODE_BW_EFFICIENCY`` and ``intra_node_latency_s = c / 2`` (from the
  all-reduce fit, ``link_fit="all_reduce"``) or ``c`` (from the p2p fit, ``link_fit="p2p"``);
  the inter-node figures are set equal (one node);
- optimizer: ``torch.optim.Adam.step`` on ``adam_params`` parameters in the plan's dtype; the model
  charges ``ADAM_BYTES_PER_PARAM / (hbm_bw * HBM_BW_EFFICIENCY)`` per parameter, so
  ``hbm_bw = ADAM_BYTES_PER_PARAM / (t_per_param * HBM_BW_EFFICIENCY)``;
- ``peak_flops_bf16``: best of a few 1024^3 bf16 GEMMs (only MFU uses it);
- ``hbm_bytes``: physical memory (``os.sysconf``).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Optional

import torch

from primus_launch.fileio import atomic_write_text
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.hardware.gpus import get_gpu, load_gpu_file


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``t = S / B + c`` -> (B bytes/s, c seconds); B inf-safe, c >= 0."""
    n = len(points)
    mx = sum(s for s, _ in points) / n
    my = sum(t for _, t in points) / n
    var = sum((s - mx) ** 2 for s, _ in points)
    slope = sum((s - mx) * (t - my) for s, t in points) / var if var else 0.0
    slope = max(slope, 1e-15)
    c = max(0.0, my - slope * mx)
    return 1.0 / slope, c


def _joint_fit(res: dict) -> tuple[float, float]:
    """Least squares of ``t = S x + k a`` (k = 2 all-reduce, 1 p2p) -> (B = 1/x, a)."""
    rows = [(s, 2.0, t) for s, t in res["all_reduce"]] + [(s, 1.0, t) for s, t in res["p2p"]]
    a11 = sum(s * s for s, _, _ in rows)
    a12 = sum(s * k for s, k, _ in rows)
    a22 = sum(k * k for _, k, _ in rows)
    b1 = sum(s * t for s, _, t in rows)
    b2 = sum(k * t for _, k, t in rows)
    det = a11 * a22 - a12 * a12
    x = (b1 * a22 - a12 * b2) / det
    a = (a11 * b2 - a12 * b1) / det
    if a < 0:  # latency cannot be negative: refit the slope alone
        a, x = 0.0, b1 / a11
    return 1.0 / max(x, 1e-15), a


def _link_worker(rank: int, port: int, sizes: list[int], repeats: int, compute_s: float, q) -> None:
    import torch.distributed as dist

    if hasattr(os, "sched_setaffinity"):  # one core per rank, as the real runs (realrun pin=True)
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    work = None
    if compute_s > 0:  # same GEMM work on both ranks before each collective, as in a TP layer
        a = torch.randn(256, 256, dtype=torch.bfloat16)
        t0 = time.perf_counter()
        for _ in range(20):
            a @ a
        per = (time.perf_counter() - t0) / 20
        n = torch.tensor([max(1, round(compute_s / per))])
        dist.all_reduce(n, op=dist.ReduceOp.MAX)  # identical work on both ranks
        n_iter = int(n.item())

        def work():
            for _ in range(n_iter):
                a @ a
    res: dict[str, list[tuple[float, float]]] = {"all_reduce": [], "p2p": []}
    for nbytes in sizes:
        x = torch.ones(nbytes // 2, dtype=torch.bfloat16)
        ar, pt = [], []
        for i in range(repeats + 2):
            if work is None:
                dist.barrier()
            else:
                work()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            ar.append(time.perf_counter() - t0)
            if work is None:
                dist.barrier()
            else:
                work()
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(x, 1)
                dist.recv(x, 1)
            else:
                dist.recv(x, 0)
                dist.send(x, 0)
            pt.append((time.perf_counter() - t0) / 2)  # one-way
        res["all_reduce"].append((float(nbytes), statistics.median(ar[2:])))
        res["p2p"].append((float(nbytes), statistics.median(pt[2:])))
    if rank == 0:
        q.put(res)
    dist.barrier()
    dist.destroy_process_group()


def measure_links(sizes: tuple[int, ...] = (1 << 17, 1 << 18, 1 << 19, 1 << 20, 1 << 21),
                  repeats: int = 15, compute_s: float = 0.0) -> dict:
    """gloo loopback all-reduce and one-way send times, 2 processes: {"all_reduce": [(S, t)],
    "p2p": [(S, t)], "fit": {...: (B, c)}}.

    ``compute_s = 0``: each collective starts after a barrier (the isolated link cost).
    ``compute_s > 0``: "in situ" -- both ranks first run the same ``compute_s`` of GEMMs, as a TP
    layer does between its all-reduces, and the collective's time then includes waiting for the
    later rank: the effective cost of a synchronising collective on this node, whose OS / shared-
    core jitter makes the two ranks arrive apart (on a shared 2-core machine this was 2-3x the
    isolated cost)."""
    import torch.multiprocessing as mp

    from primus_launch.projection.measure.realrun import _free_port, wait_result

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_link_worker, args=(r, port, list(sizes), repeats, compute_s, q), daemon=True)
             for r in range(2)]
    for p in procs:
        p.start()
    try:
        res = wait_result(q, procs, 300)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    res["fit"] = {k: _fit(v) for k, v in res.items()}
    res["fit"]["joint"] = _joint_fit(res)
    return res


def adam_seconds_per_param(n_params: int = 4_000_000, dtype: torch.dtype = torch.bfloat16,
                           tensors: int = 8, repeats: int = 5, clock: str = "process") -> float:
    """Median seconds per parameter of ``torch.optim.Adam.step`` on ``tensors`` equal tensors
    (``clock``: "thread" / "process" CPU time or "wall")."""
    now = {"thread": time.thread_time, "process": time.process_time}.get(clock, time.perf_counter)
    ps = [torch.nn.Parameter(torch.randn(n_params // tensors, dtype=dtype)) for _ in range(tensors)]
    for p in ps:
        p.grad = torch.randn_like(p)
    opt = torch.optim.Adam(ps, lr=1e-5)
    opt.step()
    ts = []
    for _ in range(repeats):
        t0 = now()
        opt.step()
        ts.append(now() - t0)
    return statistics.median(ts) / (n_params // tensors * tensors)


def gemm_flops(dtype: torch.dtype = torch.bfloat16, n: int = 1024, repeats: int = 3) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best


def measure_local_spec(name: str = "cpu-gloo-loopback", *, links: bool | dict = True, link_fit: str = "all_reduce",
                       link_compute_s: float = 0.0,
                       dtype: torch.dtype = torch.bfloat16, out_file: Optional[Path] = None,
                       clock: str = "process") -> dict:
    """Measure this machine's costs, register them as GPU ``name`` and return what was measured
    (``"toml"``: the file loaded with ``hardware.load_gpu_file``).  ``links``: True = measure
    them, False = placeholders (world size 1), or a :func:`measure_links` result to re-use."""
    measured: dict = {}
    t_pp = adam_seconds_per_param(dtype=dtype, clock=clock)
    hbm_bw = cal.ADAM_BYTES_PER_PARAM / (t_pp * cal.HBM_BW_EFFICIENCY)
    peak = gemm_flops(dtype)
    fields = {"vendor": "local", "peak_flops_bf16": peak, "peak_flops_fp8": peak,
              "hbm_bytes": float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
              "hbm_bw": hbm_bw, "intra_node_topology": "switch", "num_sms": 1,
              "source": "measured on this machine by primus_launch.projection.measure.localhw"}
    measured["adam_s_per_param"] = t_pp
    if links:
        lk = links if isinstance(links, dict) else measure_links(compute_s=link_compute_s)
        B, c = lk["fit"][link_fit]
        lat = c / 2 if link_fit == "all_reduce" else c
        bw = B / cal.INTRA_NODE_BW_EFFICIENCY
        fields.update(intra_node_bw=bw, inter_node_bw=bw * cal.INTRA_NODE_BW_EFFICIENCY / cal.INTER_NODE_BW_EFFICIENCY,
                      intra_node_latency_s=lat, inter_node_latency_s=lat)
        measured["links"] = lk
    else:
        fields.update(intra_node_bw=1e9, inter_node_bw=1e9)
    lines = [f"[gpu.{name}]"]
    for k, v in fields.items():
        lines.append(f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"')
    text = "\n".join(lines) + "\n"
    path = Path(out_file) if out_file else Path(tempfile.mkdtemp(prefix="primus-hw-")) / f"{name}.toml"
    atomic_write_text(path, text)
    load_gpu_file(path)
    _clear_model_caches()
    measured.update(spec=get_gpu(name).model_dump(), toml=str(path))
    return measured


def _clear_model_caches() -> None:
    """The collectives / compute models ``lru_cache`` per GPU name; a re-registered spec must not
    be shadowed by cached figures of an earlier one with the same name."""
    from primus_launch.projection.cost import collectives, compute

    for mod in (collectives, compute):
        for v in vars(mod).values():
            if hasattr(v, "cache_clear"):
                v.cache_clear()
