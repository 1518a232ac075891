"""A "GPU" spec for the local machine, from measured costs, so the projection can be checked
against real runs on it (CPU + gloo on loopback; ``scripts/validation/measure_gloo.py``).

The cost model (:mod:`primus_launch.projection.iteration`, :mod:`~primus_launch.projection.cost.collectives`)
reads the plan's ``cluster.gpu`` spec for everything it adds analytically.  To compare a projection
with a real run on this machine, :func:`measure_local_spec` measures those costs here and
registers a :class:`~primus_launch.projection.hardware.gpus.GPUSpec` under ``name`` through the hardware
DB's own mechanism (``hardware.load_gpu_file`` on a TOML it writes, so the same file can be given
to the CLI later); set ``plan.cluster.gpu = name``:

- links (gloo on loopback, 2 processes, each bound to its own core): every operation the collectives
  model prices -- all-reduce, all-gather, reduce-scatter, all-to-all (the torch.distributed calls
  megatron-core makes) and send/recv -- at eight message sizes (:data:`LINK_SIZES`), all interleaved,
  mean of :data:`LINK_REPEATS` calls (:func:`link_time`), each fitted to its own ``t = b / B + c``
  (``b``: the op's bus bytes, :func:`measure_links`; gloo's ops do not cost alike).  Each fit
  is registered as the op's pair in
  ``collectives.Fabric`` (:func:`fabric_fields`, ``collectives.register_fabric``; reduce-scatter and
  p2p get their own pair), so ``t = busbytes / (e_op B_up) + l_op`` is the op's fit; the measured
  points are registered with them and price a 2-rank group between the measured sizes (gloo's
  points do not lie on one line; ``collectives.measured_time``).  The spec itself
  keeps one fit for files read without the per-op table: the collectives model gives, for 2 ranks on
  one node, ``all_reduce = S / (B_i * eff) + 2 a`` and ``p2p = S / (B_i * eff) + a`` (ring, n = 2),
  so ``intra_node_bw = B / INTRA_NODE_BW_EFFICIENCY`` and ``intra_node_latency_s = c / 2`` (from
  the all-reduce fit, ``link_fit="all_reduce"``) or ``c`` (from the p2p fit, ``link_fit="p2p"``);
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

from .realrun import free_port, pin_rank, wait_result


def link_time(xs: list[float]) -> float:
    """A link point: the plain mean of its calls' times.  A run's communication is the sum of many
    calls, whose expectation is the count times the per-call *mean*, slow tail included (a gloo
    call's time on a shared VM has a long right tail, which the run pays in proportion)."""
    return statistics.mean(xs)


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
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


OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")
# each op's alpha-beta pair in collectives.Fabric (p2p: efficiency e_p2p, latency a_up)
FABRIC_FIELDS = {"all_reduce": ("e_ar", "l_ar"), "all_gather": ("e_g", "l_g"), "reduce_scatter": ("e_rs", "l_rs"),
                 "all_to_all": ("e_a2a", "l_a2a"), "p2p": ("e_p2p", "a_up")}


def _op_call(op: str, rank: int, nbytes: int):
    """A no-argument call running ``op`` once on this rank, with ``nbytes`` the collectives model's
    size ``S`` (all-reduce: the tensor; all-gather: the gathered output; reduce-scatter: the input;
    all-to-all: what one rank sends; p2p: one message), bf16, through the torch.distributed calls
    megatron-core makes (``tensor_parallel/mappings.py``: ``all_gather_into_tensor``,
    ``reduce_scatter_tensor``; ``all_to_all_single``; ``send`` / ``recv``).  p2p is a ping-pong:
    its time is two one-way messages."""
    import torch.distributed as dist

    n = max(2, nbytes // 2)
    n -= n % 2
    full, half = torch.ones(n, dtype=torch.bfloat16), torch.ones(n // 2, dtype=torch.bfloat16)
    out_full, out_half = torch.empty_like(full), torch.empty_like(half)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full)
    if op == "all_gather":
        return lambda: dist.all_gather_into_tensor(out_full, half)
    if op == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(out_half, full)
    if op == "all_to_all":
        return lambda: dist.all_to_all_single(out_full, full)
    if op == "p2p":
        peer = 1 - rank

        def pingpong():
            if rank == 0:
                dist.send(full, peer)
                dist.recv(full, peer)
            else:
                dist.recv(full, peer)
                dist.send(full, peer)
        return pingpong
    raise ValueError(f"op {op!r}: allowed {OPS}")


def in_situ_work(gemms: int):
    """A no-argument call doing the work an in-situ link call follows: ``gemms`` bf16 GEMMs of
    256^3 (:func:`measure_links`)."""
    a = torch.randn(256, 256, dtype=torch.bfloat16)

    def work() -> None:
        for _ in range(gemms):
            a @ a
    return work


def _link_worker(rank: int, port: int, sizes: list[int], repeats: int, compute_s: float, q,
                 ops: tuple[str, ...] = OPS) -> None:
    import torch.distributed as dist

    pin_rank(rank)  # one core per rank, as the real runs' ranks
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
        work = in_situ_work(int(n.item()))
    calls = {(op, nbytes): _op_call(op, rank, nbytes) for nbytes in sizes for op in ops}
    ts: dict[tuple[str, int], list[float]] = {key: [] for key in calls}
    for i in range(repeats + 2):
        for key, call in calls.items():  # interleaved: a change of load hits every op and size alike
            if work is None:
                dist.barrier()
            else:
                work()
            t0 = time.perf_counter()
            call()
            t1 = time.perf_counter()
            ts[key].append((t1 - t0) / (2 if key[0] == "p2p" else 1))  # p2p: one-way
    res = {op: [(float(nbytes), link_time(ts[(op, nbytes)][2:])) for nbytes in sizes] for op in ops}
    res["samples"] = {f"{op}|{nb}": v[2:] for (op, nb), v in ts.items()}
    if rank == 0:
        q.put(res)
    dist.barrier()
    dist.destroy_process_group()


#: message sizes the links are timed at: 4 KiB .. 4 MiB, so each fit's constant is pinned by the small
#: calls a run makes (an MoE dispatcher's routing map and probs: 4-8 KiB) instead of extrapolated
#: from 128 KiB up, and its slope by the gradient all-reduce's megabytes; every power of two from
#: 64 KiB to 1 MiB, where the validation runs' TP / CP / EP calls are (128-512 KiB): the measured
#: points price the calls between them (:func:`fabric_fields`), and gloo's do not lie on one line
LINK_SIZES = (1 << 12, 1 << 14, 1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20, 1 << 22)
#: calls per (op, size): a gloo call's time on a shared VM is bimodal at every size, so the mean of
#: n calls moves by ~1.5 / sqrt(n) ms: 0.15 ms at 100
LINK_REPEATS = 100


def measure_links(sizes: tuple[int, ...] = LINK_SIZES, repeats: int = LINK_REPEATS, compute_s: float = 0.0,
                  ops: tuple[str, ...] = OPS) -> dict:
    """gloo loopback times of each collective the cost model prices, 2 processes:
    ``{op: [(S, t)], "fit": {op: (B, c)}}`` for op in ``ops`` (:data:`OPS`; ``S`` as
    :func:`_op_call` says; p2p one-way).  ``fit[op]`` is the least-squares ``t = b / B + c`` with
    ``b`` the op's NCCL-tests bus bytes (``collectives.bus_bytes``: S for an all-reduce of 2 ranks,
    S/2 for all-gather / reduce-scatter / all-to-all) and ``b = S`` for p2p, so ``B`` is the op's
    bus bandwidth and ``c`` its constant; ``fit["joint"]``: all-reduce and p2p together
    (:func:`_joint_fit`, when both were timed).  Every (op, size) is timed once per round, so a
    change of load on the machine hits them alike; each point is the :func:`link_time` (mean) of
    ``repeats`` rounds after 2 warm-ups (``"samples"``: every call's time, ``{"op|S": [t]}``).

    ``compute_s = 0``: each collective starts after a barrier (the isolated link cost).
    ``compute_s > 0``: "in situ" -- both ranks run the same ``compute_s`` of GEMMs before each call,
    as a TP layer does between its all-reduces, and the collective's time then includes waiting for
    the later rank."""
    import torch.multiprocessing as mp

    from primus_launch.projection.cost.collectives import bus_bytes

    bad = [op for op in ops if op not in OPS]
    if bad:
        raise ValueError(f"measure_links ops {bad}: allowed {OPS}")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_link_worker, args=(r, port, list(sizes), repeats, compute_s, q, tuple(ops)),
                         daemon=True)
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
    samples = res.pop("samples", None)
    res["fit"] = {op: fit_line([(s if op == "p2p" else bus_bytes(op, s, 2), t) for s, t in v])
                  for op, v in res.items()}
    if "all_reduce" in res and "p2p" in res:
        res["fit"]["joint"] = _joint_fit(res)
    if samples is not None:
        res["samples"] = samples
    return res


def fabric_fields(links: dict, up_bw: float, points: bool = True) -> dict:
    """``collectives.Fabric`` fields of each op fitted in ``links`` (a :func:`measure_links` result)
    on a scale-up link of ``up_bw``: ``e_op = B_op / up_bw`` and ``l_op = c_op``, so the fitted
    fabric's ``busbytes / (e_op up_bw) + l_op`` (``collectives.collective_time``; p2p
    ``S / (e_p2p up_bw) + a_up``) is each op's own fit exactly, for 2 ranks in one domain; with
    ``points`` (default) also ``points`` ``{op: [[S, t], ...]}``, the measured times themselves,
    which the collectives model then prices a 2-rank group from (``collectives.measured_time``:
    between two measured sizes, linear in S; the fit's bandwidth only beyond the largest).  Empty
    unless every op of :data:`OPS` was fitted (a partial fabric would leave the others' latency at
    the calibration default 0): the spec's one fit then prices them all."""
    fit = links.get("fit", {})
    if any(op not in fit or not links.get(op) for op in FABRIC_FIELDS):
        return {}
    out: dict = {}
    for op, (e_key, l_key) in FABRIC_FIELDS.items():
        B, c = fit[op]
        out[e_key], out[l_key] = B / up_bw, c
    if points:
        out["points"] = {op: [[float(s), float(t)] for s, t in links[op]] for op in FABRIC_FIELDS}
        out["points_ranks"] = 2
    return out


def load_measured_fabric(path: str | Path) -> list[str]:
    """Register the ``[collectives.<gpu>]`` tables of a TOML :func:`measure_local_spec` wrote (its
    per-op link fits) with ``collectives.register_fabric``; returns the GPU names.  The ``[gpu.*]``
    table of the same file is the spec (``hardware.load_gpu_file``), which alone prices every op with
    the one ``link_fit``."""
    import tomllib

    from primus_launch.projection.cost import collectives

    return collectives.register_fabric_tables(tomllib.loads(Path(path).read_text()).get("collectives", {}))


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
                       link_compute_s: float = 0.0, per_op: bool = True,
                       link_points: bool = True,
                       dtype: torch.dtype = torch.bfloat16, out_file: Optional[Path] = None,
                       clock: str = "process") -> dict:
    """Measure this machine's costs, register them as GPU ``name`` and return what was measured
    (``"toml"``: the file loaded with ``hardware.load_gpu_file``).  ``links``: True = measure
    them, False = placeholders (world size 1), or a :func:`measure_links` result to re-use.

    The spec's ``intra_node_bw`` / ``intra_node_latency_s`` come from the one ``link_fit`` (module
    doc).  ``per_op`` (default): each op timed is also registered with its own fit
    (:func:`fabric_fields` -> ``collectives.register_fabric``, and a ``[collectives.<name>]`` table
    in the TOML, :func:`load_measured_fabric`), so the cost model prices all-reduce, all-gather,
    reduce-scatter, all-to-all and p2p each by what gloo did for that op; ``measured["fabric"]``
    holds those fields, and with ``link_points`` (default) the measured points that price a 2-rank
    group between the measured sizes (:func:`fabric_fields`; False: the fits alone).
    ``per_op=False``: every op from the one fit (the earlier model)."""
    from primus_launch.projection.cost import collectives

    measured: dict = {}
    t_pp = adam_seconds_per_param(dtype=dtype, clock=clock)
    hbm_bw = cal.ADAM_BYTES_PER_PARAM / (t_pp * cal.HBM_BW_EFFICIENCY)
    peak = gemm_flops(dtype)
    fields = {"vendor": "custom", "peak_flops_bf16": peak, "peak_flops_fp8": peak,
              "hbm_bytes": float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
              "hbm_bw": hbm_bw, "intra_node_topology": "switch", "num_sms": 1,
              "source": "measured on this machine by scripts/validation/gloo_lab/localhw.py"}
    measured["adam_s_per_param"] = t_pp
    fab: dict = {}
    if links:
        lk = links if isinstance(links, dict) else measure_links(compute_s=link_compute_s,
                                                                 ops=OPS if per_op else ("all_reduce", "p2p"))
        B, c = lk["fit"][link_fit]
        lat = c / 2 if link_fit == "all_reduce" else c
        bw = B / cal.INTRA_NODE_BW_EFFICIENCY
        fields.update(intra_node_bw=bw, inter_node_bw=bw * cal.INTRA_NODE_BW_EFFICIENCY / cal.INTER_NODE_BW_EFFICIENCY,
                      intra_node_latency_s=lat, inter_node_latency_s=lat)
        measured["links"] = lk
        if per_op:
            fab = fabric_fields(lk, bw, points=link_points)
    else:
        fields.update(intra_node_bw=1e9, inter_node_bw=1e9)
    lines = [f"[gpu.{name}]"]
    for k, v in fields.items():
        lines.append(f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"')
    if fab:
        lines += ["", f"[collectives.{name}]"] + [f"{k} = {v!r}" for k, v in fab.items() if k != "points"]
        if "points" in fab:  # {op: [[S, t], ...]}: TOML arrays of arrays, one key per op
            lines += ["", f"[collectives.{name}.points]"] + [f"{op} = {pts!r}" for op, pts in fab["points"].items()]
    text = "\n".join(lines) + "\n"
    path = Path(out_file) if out_file else Path(tempfile.mkdtemp(prefix="primus-hw-")) / f"{name}.toml"
    atomic_write_text(path, text)
    collectives.register_fabric(name, None)  # a re-measured name keeps no per-op fits of an earlier one
    load_gpu_file(path)   # the spec, and the per-op fits of its [collectives.<name>] table
    _clear_model_caches()
    measured.update(spec=get_gpu(name).model_dump(), toml=str(path), fabric=fab)
    return measured


def _clear_model_caches() -> None:
    """The collectives / compute models ``lru_cache`` per GPU name; a re-registered spec must not
    be shadowed by cached figures of an earlier one with the same name."""
    from primus_launch.projection.cost import collectives, compute

    for mod in (collectives, compute):
        for v in vars(mod).values():
            if hasattr(v, "cache_clear"):
                v.cache_clear()
