"""Timing and memory of one model piece: forward, backward and its input-grad / weight-grad split.

Protocol (:class:`TimingPolicy`; the same code on every device, only the clock differs):

- clock: ``torch.cuda.Event`` pairs on CUDA (the product's path: kernels timed on the device,
  independent of the host); on the CPU -- a functional check of the path, not a performance
  figure -- ``time.thread_time`` (the default, ``cpu_clock="thread"``: CPU seconds of the measuring
  thread, measured with ONE torch thread so that the ops run inline on it), ``time.process_time``
  (``"process"``) or ``time.perf_counter`` (``"wall"``);
- ``warmup`` untimed iterations, then samples until the **relative inter-quartile range** of the
  per-sample total (forward + backward) is at most ``target_spread`` (after ``min_repeats``), or
  ``max_repeats`` / ``max_piece_s`` (the time cap) is reached (then ``converged=False``, and the
  report says so).  On the CPU a sample averages ``inner`` iterations, chosen in the warm-up so
  that one sample lasts at least ``min_sample_s`` (sub-millisecond pieces are otherwise timer and
  interpreter noise; up to ``max_inner``); on CUDA each sample is one iteration between two events.
  Each figure is the **median** over samples -- or, for a piece whose work is drawn afresh each
  pass (``statistic="mean"``: an MoE layer whose router draws each token's experts at random each
  pass, megatron's ``--moe-router-force-load-balancing``, so every pass has other per-expert row
  counts, as every step of the run has), the **mean**: a run of many steps pays the mean over its
  routings; such a piece samples one pass at a time (``inner`` = 1);
- pieces measured together (every piece of a plan) are sampled **round-robin**
  (:func:`time_pieces`), one sample of each in turn, for at least ``min_window_s`` of wall time
  and until each has reached its spread target or cap, so that a change of the device's speed
  (clocks, thermals, other work on a shared host) hits every piece alike;
- caches (``flush_cache``, CUDA): before each timed pass (forward, backward; with the split, B and
  W) an untimed update of a buffer of ``max(2 x L2, 256 MiB)`` evicts what the previous pass left
  in the L2 (:func:`flush_buffer`, ``triton.testing.do_bench``'s L2 flush): in a step, a layer's
  weights and saved activations are cold when its forward and backward run.  The CPU path times
  warm (its caches are no target of the projection);
- forward: the piece's forward callable; backward: ``torch.autograd.backward`` into the
  parameters' and inputs' ``.grad`` (what a training step does);
- input-grad / weight-grad split, per piece (:attr:`Piece.split`):

  * ``"autograd"`` (torchtitan: plain ``nn.Linear`` underneath): the framework's own split, the one
    torchtitan's zero-bubble schedules run -- ``torch.distributed.pipelining._backward.
    stage_backward_input`` (input gradients, intermediate gradients kept) then
    ``stage_backward_weight`` (weight gradients from them).  Timed in the SAME sample loop as the
    plain backward (each inner iteration runs forward + backward, then forward + B + W), so both
    see the same device state; the measured share ``r = B / (B + W)`` splits the plain backward:
    ``bwd_input = r * bwd``, ``bwd_weight = (1 - r) * bwd`` (the split's own bookkeeping -- graph
    walk, hooks -- is not charged to a schedule that does not split).  The raw B and W figures
    are kept (``bwd_input_raw_s``, ``bwd_weight_raw_s``);
  * ``"flop-ratio"`` (megatron-core: ``LinearWithGradAccumulationAndAsyncCommunication.backward``
    computes the weight gradient in the same autograd node as the input gradient, so no
    autograd pass can time them apart): the measured backward split by the FLOP ratio the
    builder gives (``Piece.flop_split``);
  * ``"no-weights"`` (the attention core): all of the backward is input-grad;
  * ``"no-input"`` (the embedding: token ids have no gradient): all of it is weight-grad.

- memory (two extra, untimed iterations, :func:`measure_memory`): on CUDA the caching allocator's
  own counters -- ``torch.cuda.memory_allocated`` / ``max_memory_allocated`` and
  ``torch.cuda.memory_stats()["reserved_bytes.all.current" / ".peak"]``, the cached blocks released
  (``empty_cache``) and the peaks reset before each pass, so each figure is this piece's own; on the
  CPU torch's ``torch.distributed._tools.mem_tracker.MemTracker`` (a dispatch-mode tracker of live
  tensor storages; no allocator, so no reserved figure).  ``activation_bytes``: what the piece keeps
  for its backward -- the forward runs on non-leaf copies of its inputs, the output is dropped and
  its autograd graph held, so an input the piece saves counts and an output nobody saved does not
  (in a stack of layers each layer then counts exactly what it keeps); ``peak_bytes``: the highest
  allocated bytes above the start during forward + backward with the parameters' gradients
  preallocated (a framework's grad buffer), i.e. kept activations plus the backward's
  temporaries; ``reserved_bytes`` (CUDA): the reserved bytes the allocator added above the start
  in that pass -- ``peak_bytes`` plus what its caching and rounding cost (segments of 2 MiB and up,
  blocks split but not merged across segments; ``c10/cuda/CUDACachingAllocator.cpp``).
"""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Optional, Sequence

import torch

from primus_launch.projection.measure.cache import MeasureCache
from primus_launch.projection.measure.device import gcn_base, props_gcn_arch
from primus_launch.projection.measure.spec import BuildSpec

CpuClock = str  # "thread" | "process" | "wall"
CPU_CLOCKS = {"thread": time.thread_time, "process": time.process_time, "wall": time.perf_counter}
SPLITS = ("autograd", "flop-ratio", "no-weights", "no-input")
#: how a piece's samples are summarized (module docstring): ``median`` for a piece whose work is
#: the same every pass, ``mean`` for one whose work is drawn afresh each pass (random routing)
STATISTICS = ("median", "mean")


@dataclass(frozen=True)
class TimingPolicy:
    """Warm-up / repeat policy and clock (see the module docstring)."""

    warmup: int = 2
    min_repeats: int = 5
    max_repeats: int = 30
    target_spread: float = 0.05  # relative IQR of the per-sample total that ends sampling
    min_sample_s: float = 0.02  # CPU: iterations per sample so that one sample lasts at least this
    max_piece_s: float = 30.0  # time cap of one piece's samples (after min_repeats)
    threads: int = 1  # torch intra-op threads of the measuring process (CPU)
    cpu_clock: CpuClock = "thread"
    max_inner: int = 5000
    flush_cache: bool = True  # CUDA: evict the L2 before each timed pass
    min_window_s: float = 4.0  # pieces measured together are sampled round-robin over at least this

    def __post_init__(self) -> None:
        if self.cpu_clock not in CPU_CLOCKS:
            raise ValueError(f"cpu_clock={self.cpu_clock!r}: one of {', '.join(CPU_CLOCKS)}")
        if self.min_repeats < 3 or self.max_repeats < self.min_repeats:
            raise ValueError("min_repeats >= 3 and max_repeats >= min_repeats")

    def describe(self) -> str:
        """The policy in words, for the result's notes (and its cache key)."""
        return (f"{self.warmup} warm-up, then samples until the relative IQR of fwd+bwd <= "
                f"{self.target_spread:.0%} (min {self.min_repeats}, max {self.max_repeats} samples, CPU samples of >= "
                f"{self.min_sample_s * 1e3:.0f} ms, time cap {self.max_piece_s:.0f} s per piece), median (mean "
                f"for a piece routed afresh each pass); the pieces sampled round-robin over >= {self.min_window_s:g} s"
                + ("; L2 evicted before each timed pass (CUDA)" if self.flush_cache else ""))

    def key(self) -> dict[str, object]:
        """What of the policy changes a measurement (the cache key's part)."""
        return {"warmup": self.warmup, "min_repeats": self.min_repeats, "max_repeats": self.max_repeats,
                "target_spread": self.target_spread, "min_sample_s": self.min_sample_s,
                "max_piece_s": self.max_piece_s, "min_window_s": self.min_window_s, "flush_cache": self.flush_cache}


@dataclass
class PieceTiming:
    """Seconds of one piece for one micro-batch (the median over samples, or their mean:
    ``statistic``), their spread, and its measured memory."""

    fwd_s: float
    bwd_s: float
    bwd_input_s: float
    bwd_weight_s: float
    split: str
    split_ratio: float  # input-grad share of the backward used for the split
    spread: dict[str, float]  # relative IQR per figure: fwd, bwd, total (bwd_input/weight raw)
    repeats: int
    inner: int
    converged: bool
    activation_bytes: int
    output_bytes: int
    peak_bytes: int
    reserved_bytes: int
    param_count: int
    param_bytes: int
    bwd_input_raw_s: Optional[float] = None
    bwd_weight_raw_s: Optional[float] = None
    clock: str = ""
    threads: int = 0
    samples: dict[str, list[float]] = field(default_factory=dict)
    # memory-only variants of the piece (untimed): e.g. ``kept_ac_full`` / ``kept_ac_op``, the bytes a
    # torchtitan block keeps under its framework's full / per-op activation checkpointing
    variant_bytes: dict[str, int] = field(default_factory=dict)
    statistic: str = "median"  # how the samples are summarized (STATISTICS)

    @property
    def total_s(self) -> float:
        """Forward + backward seconds."""
        return self.fwd_s + self.bwd_s

    def to_dict(self) -> dict:
        """Every field, for the cache record."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PieceTiming":
        """The timing of a cache record (:meth:`to_dict`)."""
        return cls(**d)


@dataclass
class Measured:
    """The measured pieces of one plan: records, cache hits, the build spec and the protocol."""

    timings: dict[str, PieceTiming]
    hits: dict[str, bool]
    spec: BuildSpec
    policy: TimingPolicy
    device: str
    cache: Optional[MeasureCache] = None
    notes: list[str] = field(default_factory=list)


def rel_iqr(xs: Sequence[float]) -> float:
    """(Q3 - Q1) / median; 0 for fewer than 2 values or a zero median."""
    if len(xs) < 2:
        return 0.0
    med = statistics.median(xs)
    if med <= 0:
        return 0.0
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return (q[2] - q[0]) / med


class Clock:
    """Elapsed seconds of a region: CUDA events on a CUDA device; on the CPU thread time
    (``cpu_clock="thread"``), process time (``"process"``) or perf_counter (``"wall"``)."""

    def __init__(self, device: torch.device, cpu_clock: CpuClock = "thread"):
        self.cuda = device.type == "cuda"
        if cpu_clock not in CPU_CLOCKS:
            raise ValueError(f"cpu_clock={cpu_clock!r}: one of {', '.join(CPU_CLOCKS)}")
        self.name = "cuda-events" if self.cuda else cpu_clock
        self._now = CPU_CLOCKS[cpu_clock]

    def start(self) -> float | torch.cuda.Event:
        """A start token: a recorded CUDA event after a synchronize, else the CPU clock's reading."""
        if self.cuda:
            torch.cuda.synchronize()
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return self._now()

    def stop(self, token: float | torch.cuda.Event) -> float:
        """Seconds since :meth:`start` gave ``token`` (CUDA: event to event, synchronized)."""
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            ev.synchronize()
            return token.elapsed_time(ev) / 1e3
        return self._now() - token


#: the smallest L2 flush buffer on CUDA: triton's ``do_bench`` zeroes a 256 MB buffer before each run
MIN_FLUSH_BYTES = 256 << 20


def flush_bytes(l2_bytes: int) -> int:
    """Bytes of the L2 flush buffer: ``max(2 x l2_bytes, MIN_FLUSH_BYTES)`` (twice the cache, so an
    update of it leaves nothing of the previous pass there; at least triton's 256 MB)."""
    return max(2 * int(l2_bytes), MIN_FLUSH_BYTES)


#: AMD Instinct parts (``gcnArchName``) whose last-level cache is the 256 MB Infinity Cache (MALL)
#: behind the L2 that ``L2_cache_size`` reports (4 MB per XCD): CDNA3 MI300X / MI325X (gfx942, AMD
#: CDNA 3 white paper) and CDNA4 MI350X / MI355X (gfx950, AMD CDNA 4 white paper)
INFINITY_CACHE_BYTES = {"gfx942": 256 << 20, "gfx950": 256 << 20}


def last_level_cache_bytes(l2_bytes: int, gcn_arch: str = "") -> int:
    """The device's last-level cache, which the flush must evict: ``L2_cache_size`` on NVIDIA; on an
    AMD part of :data:`INFINITY_CACHE_BYTES` (``gcn_arch``, e.g. ``"gfx942:sramecc+:xnack-"``) the
    larger of its L2 and its Infinity Cache."""
    return max(int(l2_bytes), INFINITY_CACHE_BYTES.get(gcn_base(gcn_arch), 0))


_FLUSH: dict[str, torch.Tensor] = {}


def flush_buffer(device: torch.device) -> torch.Tensor:
    """A CUDA buffer of :func:`flush_bytes` of the device's last-level cache (``L2_cache_size``;
    :func:`last_level_cache_bytes` on AMD) (one per device per
    process) whose in-place update, untimed, before every timed pass evicts what the previous pass
    left in the L2 -- ``triton.testing.do_bench``'s L2 flush.  In a training step a layer's forward
    finds its weights cold (the other layers ran since its last use) and its backward finds its
    saved activations cold (every later layer's forward and backward ran in between); a piece timed
    in a loop would find both hot."""
    if device.type != "cuda":
        raise ValueError(f"flush_buffer: the L2 flush is for CUDA devices, not {device}")
    key = str(device)
    buf = _FLUSH.get(key)
    if buf is None:
        props = torch.cuda.get_device_properties(device)
        l2 = last_level_cache_bytes(int(getattr(props, "L2_cache_size", 0) or (64 << 20)),
                                    props_gcn_arch(props))
        buf = _FLUSH[key] = torch.zeros(flush_bytes(l2) // 4, dtype=torch.int32, device=device)
    return buf


def _zero_grads(tensors: Sequence[torch.Tensor]) -> None:
    for t in tensors:
        t.grad = None


def _grad_like(out: torch.Tensor) -> torch.Tensor:
    if out.numel() == 1:
        return torch.ones_like(out)
    g = torch.Generator(device=out.device).manual_seed(7)
    return torch.randn(out.shape, dtype=out.dtype, device=out.device, generator=g) * 1e-3


@contextlib.contextmanager
def torch_threads(n: Optional[int]) -> Iterator[None]:
    """``torch.set_num_threads(n)`` for the block, restored after (None: unchanged)."""
    if not n:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------- memory

class _Tracker:
    """Live / peak bytes of one pass: the CUDA caching allocator's counters (cached blocks released
    and peaks reset on entry, so the peaks are this pass's) or torch's MemTracker on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._mt = None
        self._reserved0 = 0

    def __enter__(self) -> "_Tracker":
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            self._reserved0 = int(torch.cuda.memory_stats().get("reserved_bytes.all.current", 0))
        else:
            from torch.distributed._tools.mem_tracker import MemTracker

            self._mt = MemTracker()
            self._mt.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._mt is not None:
            self._mt.__exit__(*exc)

    def _dynamic(self, kind: str, exclude: tuple[str, ...]) -> int:
        snap = self._mt.get_tracker_snapshot(kind)
        total = 0
        for per_dev in snap.values():
            total += int(per_dev.get("Total", 0))
            for k, v in per_dev.items():
                if getattr(k, "value", None) in exclude:
                    total -= int(v)
        return total

    def current(self, grads: bool = True) -> int:
        """Live bytes; on the CPU without parameters and buffers (MemTracker registers a module's
        when its forward runs), and without gradients when ``grads`` is False."""
        if self.cuda:
            torch.cuda.synchronize()
            return int(torch.cuda.memory_allocated())
        return self._dynamic("current", ("Parameter", "Buffer") + (() if grads else ("Gradient",)))

    def grads(self) -> int:
        """Bytes of the gradients MemTracker registered (0 on CUDA, where the baseline holds them)."""
        if self.cuda:
            return 0
        return self.current(grads=True) - self.current(grads=False)

    def peak(self) -> int:
        """The highest allocated bytes since entry (``torch.cuda.max_memory_allocated`` on CUDA)."""
        if self.cuda:
            torch.cuda.synchronize()
            return int(torch.cuda.max_memory_allocated())
        return self._dynamic("peak", ("Parameter", "Buffer"))

    def reserved_growth(self) -> int:
        """Reserved bytes the caching allocator added above the entry's since entry
        (``memory_stats()["reserved_bytes.all.peak"]`` less the entry's ``.current``); 0 on the CPU."""
        if not self.cuda:
            return 0
        torch.cuda.synchronize()
        return int(torch.cuda.memory_stats().get("reserved_bytes.all.peak", 0)) - self._reserved0


def measure_memory(forward: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
                   params: Sequence[torch.Tensor], device: torch.device) -> dict[str, int]:
    """``activation_bytes``, ``output_bytes``, ``peak_bytes``, ``reserved_bytes`` of one
    forward + backward (module docstring)."""
    everything = list(inputs) + list(params)
    _zero_grads(everything)
    with _Tracker(device) as tr:
        base = tr.current()
        xs = [x.clone() if x.requires_grad else x for x in inputs]  # non-leaf copies: freed unless kept
        out = forward(*xs)
        del xs
        with_out = tr.current()
        fn = out.grad_fn
        del out
        kept = tr.current() - base
        output = with_out - base - kept
        del fn
    _zero_grads(everything)
    for p in params:  # a framework's grad buffer exists before the step
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    with _Tracker(device) as tr:
        base = tr.current()
        out = forward(*inputs)
        static_grads = tr.grads()  # the preallocated gradients, registered with their modules
        torch.autograd.backward(out, _grad_like(out))
        del out
        peak = tr.peak() - base - static_grads
        reserved = tr.reserved_growth()
    _zero_grads(everything)
    return {"activation_bytes": int(max(0, kept)), "output_bytes": int(max(0, output)),
            "peak_bytes": int(max(0, peak)), "reserved_bytes": int(max(0, reserved))}


# ---------------------------------------------------------------- timing

class PieceSampler:
    """One piece's timing state under a :class:`TimingPolicy` (module docstring), one sample at a
    time: the constructor runs the warm-up and picks ``inner``; :meth:`sample` appends one sample;
    :meth:`done` says when the spread target, ``max_repeats`` or the piece's own time cap
    ``max_piece_s`` (wall seconds spent in its samples) is reached; :meth:`result` gives the
    :class:`PieceTiming` (medians, or means with ``statistic="mean"``, spreads, the split, and the
    memory passes).  :func:`time_pieces` samples one or several round-robin."""

    def __init__(self, forward: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
                 params: Sequence[torch.Tensor], device: torch.device, *, split: str,
                 flop_split: Optional[float] = None, policy: TimingPolicy = TimingPolicy(),
                 memory_forward: Optional[Callable[..., torch.Tensor]] = None, statistic: str = "median",
                 name: str = ""):
        self.name = name
        if split not in SPLITS:
            raise ValueError(f"split={split!r}: one of {SPLITS}")
        if statistic not in STATISTICS:
            raise ValueError(f"statistic={statistic!r}: one of {STATISTICS}")
        if split == "flop-ratio" and flop_split is None:
            raise ValueError("split='flop-ratio' needs flop_split")
        self.statistic = statistic
        self.forward, self.device, self.split, self.flop_split = forward, device, split, flop_split
        self.policy, self.memory_forward = policy, memory_forward
        self.clock = clock = Clock(device, policy.cpu_clock)
        self.inputs, self.params = list(inputs), [p for p in params if p.requires_grad]
        self.everything = self.inputs + self.params
        self._grad: Optional[torch.Tensor] = None
        self.autograd_split = split == "autograd" and bool(self.inputs) and bool(self.params)
        # the L2 evicted before each timed pass on CUDA; the CPU path times warm (module docstring)
        self._flush: Optional[torch.Tensor] = flush_buffer(device) if clock.cuda and policy.flush_cache else None
        last = 0.0
        for _ in range(max(1, policy.warmup)):
            f, b = self._plain()
            last = f + b
            if self.autograd_split:
                f2, bi, bw = self._split_pass()
                last += f2 + bi + bw
        self.inner = 1
        # a routed piece (statistic "mean") samples one pass at a time: its samples' spread is then
        # the per-pass one the run's ranks see (the pass-to-pass routing), not an average's
        if not clock.cuda and last < policy.min_sample_s and statistic != "mean":
            self.inner = min(policy.max_inner, max(1, math.ceil(policy.min_sample_s / max(last, 1e-7))))
        self.fs: list[float] = []
        self.bs: list[float] = []
        self.bis: list[float] = []
        self.bws: list[float] = []
        self.tot: list[float] = []
        self.spent_s = 0.0  # wall seconds in this piece's samples (its time cap)

    def _cold(self) -> None:
        """Evict the L2 before a timed pass (untimed; :func:`flush_buffer`)."""
        if self._flush is not None:
            self._flush.add_(1)

    def _plain(self) -> tuple[float, float]:
        clock = self.clock
        _zero_grads(self.everything)
        self._cold()
        t0 = clock.start()
        out = self.forward(*self.inputs)
        f = clock.stop(t0)
        if self._grad is None:
            self._grad = _grad_like(out)
        self._cold()
        t0 = clock.start()
        torch.autograd.backward(out, self._grad)
        b = clock.stop(t0)
        del out
        return f, b

    def _split_pass(self) -> tuple[float, float, float]:
        from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

        clock = self.clock
        _zero_grads(self.everything)
        self._cold()
        t0 = clock.start()
        out = self.forward(*self.inputs)
        f = clock.stop(t0)
        self._cold()
        t0 = clock.start()
        _, groups = stage_backward_input([out], [self._grad], self.inputs, iter(self.params))
        bi = clock.stop(t0)
        self._cold()
        t0 = clock.start()
        stage_backward_weight(iter(self.params), groups)
        bw = clock.stop(t0)
        del out, groups
        return f, bi, bw

    @property
    def n(self) -> int:
        """Samples taken."""
        return len(self.tot)

    def sample(self) -> None:
        """One sample: ``inner`` iterations of forward + backward (and of the split pass)."""
        w0 = time.perf_counter()
        inner = self.inner
        sf = sb = sbi = sbw = 0.0
        for _ in range(inner):
            f, b = self._plain()
            sf, sb = sf + f, sb + b
            if self.autograd_split:
                f2, bi, bw = self._split_pass()
                sf, sbi, sbw = sf + f2, sbi + bi, sbw + bw
        nf = inner * (2 if self.autograd_split else 1)
        self.fs.append(sf / nf)
        self.bs.append(sb / inner)
        self.tot.append(sf / nf + sb / inner)
        if self.autograd_split:
            self.bis.append(sbi / inner)
            self.bws.append(sbw / inner)
        self.spent_s += time.perf_counter() - w0

    def converged(self) -> bool:
        """At least ``min_repeats`` samples and their fwd+bwd relative IQR within ``target_spread``."""
        pol = self.policy
        return self.n >= pol.min_repeats and rel_iqr(self.tot) <= pol.target_spread

    def capped(self) -> bool:
        """``max_repeats`` samples, or ``min_repeats`` and more than ``max_piece_s`` spent."""
        pol = self.policy
        return self.n >= pol.max_repeats or (self.n >= pol.min_repeats and self.spent_s > pol.max_piece_s)

    def done(self) -> bool:
        """Converged or capped."""
        return self.converged() or self.capped()

    def result(self, measure_mem: bool = True) -> PieceTiming:
        """The :class:`PieceTiming` of the samples (median, or mean under ``statistic="mean"``), the backward
        split and, with ``measure_mem``, the memory passes."""
        fs, bs, bis, bws, tot = self.fs, self.bs, self.bis, self.bws, self.tot
        converged = self.converged()
        _zero_grads(self.everything)
        stat = statistics.mean if self.statistic == "mean" else statistics.median
        fwd, bwd = stat(fs), stat(bs)
        spread = {"fwd": rel_iqr(fs), "bwd": rel_iqr(bs), "total": rel_iqr(tot)}
        bi_raw = bw_raw = None
        split, params, inputs = self.split, self.params, self.inputs
        if self.autograd_split:
            bi_raw, bw_raw = stat(bis), stat(bws)
            spread.update(bwd_input_raw=rel_iqr(bis), bwd_weight_raw=rel_iqr(bws))
            ratio = bi_raw / (bi_raw + bw_raw) if bi_raw + bw_raw > 0 else 0.5
            used_split = "autograd"
        elif split == "no-weights" or not params:
            ratio, used_split = 1.0, "no-weights"
        elif split == "no-input" or not inputs:
            ratio, used_split = 0.0, "no-input"
        else:
            ratio, used_split = float(self.flop_split if self.flop_split is not None else 0.5), "flop-ratio"
        mem = measure_memory(self.memory_forward or self.forward, inputs, params, self.device) if measure_mem else \
            {"activation_bytes": 0, "output_bytes": 0, "peak_bytes": 0, "reserved_bytes": 0}
        return PieceTiming(
            fwd_s=fwd, bwd_s=bwd, bwd_input_s=ratio * bwd, bwd_weight_s=(1.0 - ratio) * bwd, split=used_split,
            split_ratio=ratio, spread=spread, repeats=len(tot), inner=self.inner, converged=converged,
            param_count=int(sum(p.numel() for p in params)),
            param_bytes=int(sum(p.numel() * p.element_size() for p in params)),
            bwd_input_raw_s=bi_raw, bwd_weight_raw_s=bw_raw, clock=self.clock.name,
            threads=torch.get_num_threads() if not self.clock.cuda else 0,
            samples={"fwd": fs, "bwd": bs, "total": tot, **({"bwd_input_raw": bis, "bwd_weight_raw": bws}
                                                              if self.autograd_split else {})},
            statistic=self.statistic, **mem)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The young generations collected, then the collector off for the block: a collection inside a
    sample is an outlier of the interpreter, not of the piece (a full collection of a process
    holding megatron + torchtitan takes 0.5 s)."""
    gc_was = gc.isenabled()
    gc.collect(1)
    gc.disable()
    try:
        yield
    finally:
        if gc_was:
            gc.enable()


def time_pieces(samplers: Sequence[PieceSampler], policy: TimingPolicy, window_s: Optional[float] = None) -> None:
    """Sample several pieces **round-robin** (one sample of each in turn): a change of the device's
    speed then hits every piece alike, and each piece's median is taken over the same stretch of
    time.  Rounds go on until every piece is :meth:`~PieceSampler.done` and at least
    ``policy.min_window_s`` of wall time has passed since the first (within the window a piece
    samples on until ``max_repeats`` or its time cap).  ``window_s``: the window instead of the
    policy's (0: each piece only until it is done).  Call
    :meth:`PieceSampler.result` after."""
    from primus_launch import interrupt

    window = policy.min_window_s if window_s is None else window_s
    wall0 = time.perf_counter()
    with _no_gc():
        while True:
            in_window = time.perf_counter() - wall0 < window
            todo = [sp for sp in samplers if not (sp.capped() if in_window else sp.done())]
            if not todo:  # in the window: every piece capped; after it: every piece done
                break
            for sp in todo:
                interrupt.check()
                try:
                    sp.sample()
                except torch.OutOfMemoryError as e:  # name the piece for the one-line report
                    e.piece = sp.name or None
                    raise
