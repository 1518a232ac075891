"""Timing and memory of one model piece: forward, backward and its input-grad / weight-grad split.

Protocol (:class:`TimingPolicy`; the same code on every device, only the clock differs):

- clock: ``torch.cuda.Event`` pairs on CUDA; on the CPU ``time.thread_time`` (the default,
  ``cpu_clock="thread"``: CPU seconds of the measuring thread, which neither other jobs sharing
  the cores nor other threads of the same process inflate; measured with ONE torch thread, pinned
  by the caller (``measure_pieces``: one torch thread bound to one core, ``cpu_pin``), so that the ops run inline on this thread and its CPU time is the compute time --
  with the default 2 threads on a loaded 2-core machine one recipe gave 2198 / 135 / 141 ms on
  three runs, with one thread 170 / 170 / 166), ``time.process_time`` (``"process"``: all threads
  of the process) or ``time.perf_counter`` (``"wall"``);
- ``warmup`` untimed iterations, then samples until the **relative inter-quartile range** of the
  per-sample total (forward + backward) is at most ``target_spread`` (after ``min_repeats``), or
  ``max_repeats`` / ``max_piece_s`` (the time cap) is reached (then ``converged=False``, and the
  report says so).  A sample averages ``inner`` iterations, chosen in the warm-up so that one
  sample lasts at least ``min_sample_s`` (sub-millisecond pieces are otherwise timer and
  interpreter noise; up to ``max_inner`` iterations).  Each figure is the **median** over
  samples -- or, for a piece whose work is drawn afresh each pass (``statistic="mean"``: an MoE
  layer whose router draws each token's experts at random each pass, megatron's
  ``--moe-router-force-load-balancing``, so every pass has other per-expert row counts and GEMM
  shapes, as every step of the run has), the **mean**: a run of many steps pays the mean over its
  routings, tail included (the validation's EP=2 MoE layer pieces read their mean -0.2 .. +6.6 %
  from their median, ``scripts/validate_measure.py``'s ``moe_layer`` lines, RESULTS.md block
  VALIDATE_MEASURE; a dense piece's mean and median agree within a few %, and there the median
  keeps the machine's noise out); such a piece samples one pass at a time (``inner`` = 1), so
  its spread is the pass-to-pass one; the spread (relative IQR) of each is recorded;
- pieces measured together (every piece of a plan) are sampled **round-robin**
  (:func:`time_pieces`), one sample of each in turn, for at least ``min_window_s`` of wall time
  and until each has reached its spread target or cap: a change of the machine's speed hits every
  piece alike and every median spans the same window (on a shared 2-core VM the speed moves in
  phases of seconds; a piece timed in a fraction of a second catches one phase, and two pieces of
  the same kind timed one after the other could catch two);
- caches (``flush_cache``): before each timed pass (forward, backward; with the split, B and W)
  an untimed update of a buffer twice the last-level cache evicts what the previous pass left
  (:func:`flush_buffer`, triton's ``do_bench`` L2 flush): in a step, a layer's weights and saved
  activations are cold when its forward and backward run; CPU pieces shorter than
  :data:`FLUSH_MIN_S` per iteration are timed warm.  On the CPU the measuring process also keeps
  freed memory (:mod:`.cpu_alloc`), as the CUDA caching allocator does, so no pass pays page faults
  that depend on the process's history;
- the machine's **noise floor** (CPU, ``noise_probe``): after every sample a fixed reference
  workload (:class:`_Reference`, calibrated in the warm-up to last as long as one sample) is
  timed with the same clock; ``spread["reference"]`` is the relative IQR of those reference
  samples -- what the machine itself adds at that time scale, at the same moments (on a shared
  2-core VM other jobs slow identical work by 10-30 % in phases of seconds, which neither thread
  CPU time nor more samples remove); ``spread["vs_reference"]`` is the relative IQR of the
  piece's samples each divided by the reference sample after it (that common-mode slow-down
  removed); where the piece blocks as the run's collectives do (``blocks``: :mod:`.sync_points`;
  ``probe_blocks``), the reference blocks as often as the sample just did, spread evenly through its work, so the
  floor includes the resumptions after a block, which vary with the machine's state as much as
  the work does (RESULTS.md, block MEASURE_NOISE_FLOOR).  The piece's own spread (:func:`judged_spread`) is the smaller of ``total`` and
  ``vs_reference``; sampling stops when it reaches ``target_spread`` (``converged``), and
  :func:`within_bound` judges it against :func:`spread_bound` = ``max(target, NOISE_FACTOR x
  reference)``;
- forward: the piece's forward callable; backward: ``torch.autograd.backward`` into the
  parameters' and inputs' ``.grad`` (what a training step does);
- input-grad / weight-grad split, per piece (:attr:`Piece.split`):

  * ``"autograd"`` (torchtitan: plain ``nn.Linear`` underneath): the framework's own split, the one
    torchtitan's zero-bubble schedules run -- ``torch.distributed.pipelining._backward.
    stage_backward_input`` (input gradients, intermediate gradients kept) then
    ``stage_backward_weight`` (weight gradients from them).  Timed in the SAME sample loop as the
    plain backward (each inner iteration runs forward + backward, then forward + B + W), so both
    see the same machine state; the measured share ``r = B / (B + W)`` splits the plain backward:
    ``bwd_input = r * bwd``, ``bwd_weight = (1 - r) * bwd`` (the split's own bookkeeping -- graph
    walk, hooks -- is not charged to a schedule that does not split).  The raw B and W medians
    are kept (``bwd_input_raw_s``, ``bwd_weight_raw_s``);
  * ``"flop-ratio"`` (megatron-core: ``LinearWithGradAccumulationAndAsyncCommunication.backward``
    computes the weight gradient in the same autograd node as the input gradient, so no
    autograd pass can time them apart): the measured backward split by the FLOP ratio the
    builder gives (``Piece.flop_split``);
  * ``"no-weights"`` (the attention core): all of the backward is input-grad;
  * ``"no-input"`` (the embedding: token ids have no gradient): all of it is weight-grad.

- memory (two extra, untimed iterations): on CUDA ``torch.cuda.memory_allocated`` /
  ``max_memory_allocated`` / ``max_memory_reserved``; on the CPU torch's own
  ``torch.distributed._tools.mem_tracker.MemTracker`` (a dispatch-mode tracker of live tensor
  storages).  ``activation_bytes``: what the piece keeps for its backward -- the forward runs on
  non-leaf copies of its inputs, the output is dropped and its autograd graph held, so an input
  the piece saves counts and an output nobody saved does not (in a stack of layers each layer
  then counts exactly what it keeps); ``peak_bytes``: the highest live bytes above the start
  during forward + backward with the parameters' gradients preallocated (a framework's grad
  buffer), i.e. kept activations plus the backward's temporaries.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Optional, Protocol, Sequence

import torch

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
    noise_probe: bool = True  # CPU: time a fixed reference workload after every sample (noise floor)
    probe_blocks: bool = True  # CPU: the reference blocks as often as the sample before it did (sync_points)
    partner: bool = False  # CPU: the pieces timed beside a mirror of the run's other rank (partner.partnered)
    max_inner: int = 5000
    flush_cache: bool = True  # evict the caches before each timed pass (pieces of >= FLUSH_MIN_S on the CPU)
    min_window_s: float = 4.0  # pieces measured together are sampled round-robin over at least this

    def __post_init__(self) -> None:
        if self.cpu_clock not in CPU_CLOCKS:
            raise ValueError(f"cpu_clock={self.cpu_clock!r}: one of {', '.join(CPU_CLOCKS)}")
        if self.min_repeats < 3 or self.max_repeats < self.min_repeats:
            raise ValueError("min_repeats >= 3 and max_repeats >= min_repeats")

    def describe(self) -> str:
        return (f"{self.warmup} warm-up, then samples until the relative IQR of fwd+bwd <= "
                f"{self.target_spread:.0%} (min {self.min_repeats}, max {self.max_repeats} samples of >= "
                f"{self.min_sample_s * 1e3:.0f} ms, time cap {self.max_piece_s:.0f} s per piece), median (mean "
                f"for a piece routed afresh each pass); the pieces sampled round-robin over >= {self.min_window_s:g} s"
                + ("; caches evicted before each timed pass" if self.flush_cache else "")
                + (f"; noise floor: a reference workload (a small MLP's forward + backward) timed after every "
                   f"sample (CPU){', blocking as often as the sample did' if self.probe_blocks else ''}; "
                   f"a piece's own spread (of its samples, or of its samples relative to the "
                   f"reference) judged against max(target, {NOISE_FACTOR:g} x the reference's)"
                   if self.noise_probe else "")
                + ("; on the CPU beside a mirror of the run's other rank on the next core" if self.partner else ""))

    def key(self) -> dict[str, Any]:
        """What of the policy changes a measurement (the cache key's part)."""
        return {"warmup": self.warmup, "min_repeats": self.min_repeats, "max_repeats": self.max_repeats,
                "target_spread": self.target_spread, "min_sample_s": self.min_sample_s,
                "max_piece_s": self.max_piece_s, "noise_probe": self.noise_probe, "probe_blocks": self.probe_blocks,
                "partner": self.partner,
                "min_window_s": self.min_window_s, "flush_cache": self.flush_cache}


#: a piece's spread is "at the machine's noise floor" up to this multiple of the reference
#: workload's spread measured at the same moments (the interference is not equally strong for
#: every mix of kernels, and an IQR of 8-10 samples is itself uncertain; ``scripts/measure_noise.py``
#: prints the ratio per piece of the matrix cases on this machine)
NOISE_FACTOR = 3.0


def spread_bound(spread: dict[str, float], target: float) -> float:
    """The spread a piece is judged against: ``max(target, NOISE_FACTOR x spread["reference"])``
    (``target`` alone when no reference was timed, e.g. on CUDA)."""
    return max(target, NOISE_FACTOR * spread.get("reference", 0.0))


def judged_spread(spread: dict[str, float]) -> float:
    """The piece's own spread: the smaller of the relative IQR of its samples (``total``) and that
    of its samples divided by the reference workload timed right after each (``vs_reference``: the
    machine's common-mode slow-down removed; ``scripts/measure_noise.py`` prints both per piece)."""
    return min(spread["total"], spread.get("vs_reference", spread["total"]))


def within_bound(spread: dict[str, float], target: float) -> bool:
    """:func:`judged_spread` <= :func:`spread_bound`."""
    return judged_spread(spread) <= spread_bound(spread, target)


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
    spread: dict[str, float]  # relative IQR per figure: fwd, bwd, total (bwd_input/weight raw; reference)
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
    cores: int = 0  # CPU cores the measuring thread could run on while sampled (1: pinned, cpu_pin); 0 on CUDA
    samples: dict[str, list[float]] = field(default_factory=dict)
    # memory-only variants of the piece (untimed): e.g. ``kept_ac_full`` / ``kept_ac_op``, the bytes a
    # torchtitan block keeps under its framework's full / per-op activation checkpointing
    variant_bytes: dict[str, int] = field(default_factory=dict)
    statistic: str = "median"  # how the samples are summarized (STATISTICS)

    @property
    def total_s(self) -> float:
        return self.fwd_s + self.bwd_s

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PieceTiming":
        return cls(**d)


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

    def start(self):
        if self.cuda:
            torch.cuda.synchronize()
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return self._now()

    def stop(self, token) -> float:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            ev.synchronize()
            return token.elapsed_time(ev) / 1e3
        return self._now() - token


#: CPU pieces shorter than this per iteration are timed with warm caches: their working set is
#: small, and an eviction (writing 2x the last-level cache, ~6 ms here) would cost more than they do
FLUSH_MIN_S = 0.002


def _cache_bytes(device: torch.device) -> int:
    """The device's last-level cache: CUDA ``L2_cache_size``; CPU ``SC_LEVEL3_CACHE_SIZE`` (glibc's
    sysconf; 32 MiB when unknown)."""
    import os

    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (64 << 20))
    try:
        n = os.sysconf("SC_LEVEL3_CACHE_SIZE")
    except (ValueError, OSError, AttributeError):
        n = 0
    return int(n) if n and n > 0 else 32 << 20


_FLUSH: dict[str, torch.Tensor] = {}


def flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer of ``max(2 x last-level cache, 256 MiB on CUDA)`` bytes (one per device per
    process) whose in-place update, untimed, before every timed pass evicts what the previous pass
    left in the caches -- ``triton.testing.do_bench``'s L2 flush (a 256 MB buffer zeroed before each
    run).  In a training step a layer's forward finds its weights cold (the other layers ran since
    its last use) and its backward finds its saved activations cold (every later layer's forward
    and backward ran in between); a piece timed in a loop would find both hot
    (``scripts/piece_conditions.py`` prints, per piece of the validation's 8-layer GPT, the
    forward + backward with warm caches and with the eviction, interleaved pairs)."""
    key = str(device)
    buf = _FLUSH.get(key)
    if buf is None:
        n = 2 * _cache_bytes(device)
        if device.type == "cuda":
            n = max(n, 256 << 20)
        buf = _FLUSH[key] = torch.zeros(n // 4, dtype=torch.int32, device=device)
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
    """Live / peak bytes: CUDA allocator statistics or torch's MemTracker on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._mt = None

    def __enter__(self) -> "_Tracker":
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
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
        if self.cuda:
            torch.cuda.synchronize()
            return int(torch.cuda.max_memory_allocated())
        return self._dynamic("peak", ("Parameter", "Buffer"))

    def reserved_peak(self) -> int:
        return int(torch.cuda.max_memory_reserved()) if self.cuda else 0


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
        reserved = tr.reserved_peak()
    _zero_grads(everything)
    return {"activation_bytes": int(max(0, kept)), "output_bytes": int(max(0, output)),
            "peak_bytes": int(max(0, peak)), "reserved_bytes": reserved}


# ---------------------------------------------------------------- timing

def _own_spread(tot: list[float], refs: Optional[list[float]]) -> float:
    """min(relative IQR of the samples, of the samples / the reference after each)."""
    sp = rel_iqr(tot)
    if refs and len(refs) == len(tot):
        sp = min(sp, rel_iqr([a / b for a, b in zip(tot, refs) if b > 0]))
    return sp


class _Reference:
    """A fixed CPU workload timed with the piece's clock (the noise floor): forward + backward of a
    small bf16 MLP (64 tokens x 128, two linears, SiLU, RMSNorm) -- the mix the pieces run (GEMMs,
    element-wise kernels, autograd and allocator bookkeeping in the interpreter), so the machine's
    interference reaches it as it reaches them."""

    def __init__(self, clock: "Clock"):
        self.clock = clock
        g = torch.Generator().manual_seed(3)
        self.x = torch.randn(64, 128, generator=g).to(torch.bfloat16).requires_grad_(True)
        self.w1 = (torch.randn(128, 256, generator=g) * 0.05).to(torch.bfloat16).requires_grad_(True)
        self.w2 = (torch.randn(256, 128, generator=g) * 0.05).to(torch.bfloat16).requires_grad_(True)
        self.reps = 1
        self._unit()

    def _unit(self) -> None:
        y = torch.nn.functional.rms_norm(torch.nn.functional.silu(self.x @ self.w1) @ self.w2, (128,))
        y.sum().backward()
        self.x.grad = self.w1.grad = self.w2.grad = None

    def calibrate(self, duration_s: float) -> None:
        unit = float("inf")
        for _ in range(3):
            t0 = self.clock.start()
            for _ in range(5):
                self._unit()
            unit = min(unit, self.clock.stop(t0) / 5)
        self.reps = max(1, min(100_000, round(duration_s / max(unit, 1e-7))))

    def __call__(self, blocks: int = 0, block: Optional[Callable[[], None]] = None) -> float:
        """The workload's time; with ``blocks`` > 0 its repetitions split into ``blocks + 1`` near-equal
        runs with ``block()`` between them (untimed in CPU time; the slower resumption after each
        is timed, as it is in a blocked piece)."""
        n = blocks if block is not None else 0
        t0 = self.clock.start()
        for i in range(n + 1):
            for _ in range(self.reps * (i + 1) // (n + 1) - self.reps * i // (n + 1)):
                self._unit()
            if i < n:
                block()
        return self.clock.stop(t0)


class Blocks(Protocol):
    """Where a piece's thread blocks as the run's collectives block (:mod:`.sync_points` on the
    CPU): ``count()`` the blocks made so far, ``block()`` one more of the same kind, ``slept_s()``
    the wall seconds all blocks have slept so far."""

    def count(self) -> int: ...

    def block(self) -> None: ...

    def slept_s(self) -> float: ...


class PieceSampler:
    """One piece's timing state under a :class:`TimingPolicy` (module docstring), one sample at a
    time: the constructor runs the warm-up, picks ``inner`` and calibrates the reference workload;
    :meth:`sample` appends one sample (and the reference after it); :meth:`done` says when the
    spread target, ``max_repeats`` or the piece's own time cap ``max_piece_s`` (the wall seconds
    spent in its samples, less what the blocks slept: a TP=2 embedding or head piece does little
    work between its two or more blocks per pass, so its samples are mostly sleep, and a wall cap
    ended it at ``min_repeats`` where a piece of the same work without blocks samples on) is
    reached; :meth:`result` gives the :class:`PieceTiming` (medians, or means with
    ``statistic="mean"``, spreads, the split, and the memory passes).  :func:`time_piece` samples one piece to the end;
    :func:`time_pieces` samples several round-robin."""

    def __init__(self, forward: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
                 params: Sequence[torch.Tensor], device: torch.device, *, split: str,
                 flop_split: Optional[float] = None, policy: TimingPolicy = TimingPolicy(),
                 memory_forward: Optional[Callable[..., torch.Tensor]] = None, blocks: Optional[Blocks] = None,
                 statistic: str = "median"):
        if split not in SPLITS:
            raise ValueError(f"split={split!r}: one of {SPLITS}")
        if statistic not in STATISTICS:
            raise ValueError(f"statistic={statistic!r}: one of {STATISTICS}")
        self.statistic = statistic
        if split == "flop-ratio" and flop_split is None:
            raise ValueError("split='flop-ratio' needs flop_split")
        self.forward, self.device, self.split, self.flop_split = forward, device, split, flop_split
        self.policy, self.memory_forward = policy, memory_forward
        self.blocks = blocks if policy.probe_blocks else None
        self._sleeps = blocks  # the blocks' sleeps, left out of the time cap (probed or not)
        self.clock = clock = Clock(device, policy.cpu_clock)
        self.inputs, self.params = list(inputs), [p for p in params if p.requires_grad]
        self.everything = self.inputs + self.params
        self._grad: Optional[torch.Tensor] = None
        self.autograd_split = split == "autograd" and bool(self.inputs) and bool(self.params)
        self._flush: Optional[torch.Tensor] = None
        last = 0.0
        for _ in range(max(1, policy.warmup)):
            f, b = self._plain()
            last = f + b
            if self.autograd_split:
                f2, bi, bw = self._split_pass()
                last += f2 + bi + bw
        if policy.flush_cache and (clock.cuda or last >= FLUSH_MIN_S):
            self._flush = flush_buffer(device)
        self.inner = 1
        # a routed piece (statistic "mean") samples one pass at a time: its samples' spread is then
        # the per-pass one the run's ranks see (the pass-to-pass routing), not an average's
        if not clock.cuda and last < policy.min_sample_s and statistic != "mean":
            self.inner = min(policy.max_inner, max(1, math.ceil(policy.min_sample_s / max(last, 1e-7))))
        self.ref: Optional[_Reference] = None
        self.refs: Optional[list[float]] = None
        if not clock.cuda and policy.noise_probe:
            self.ref, self.refs = _Reference(clock), []
            self.ref.calibrate(self.inner * last)
        self.fs: list[float] = []
        self.bs: list[float] = []
        self.bis: list[float] = []
        self.bws: list[float] = []
        self.tot: list[float] = []
        self.spent_s = 0.0  # wall seconds in this piece's samples less the blocks' sleeps (its time cap)
        self.cores = 0 if clock.cuda or not hasattr(os, "sched_getaffinity") else len(os.sched_getaffinity(0))

    def _cold(self) -> None:
        """Evict the caches before a timed pass (untimed; :func:`flush_buffer`)."""
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
        return len(self.tot)

    def sample(self) -> None:
        """One sample: ``inner`` iterations of forward + backward (and of the split pass), then
        the reference workload when the noise probe is on."""
        w0 = time.perf_counter()
        s0 = self._sleeps.slept_s() if self._sleeps is not None else 0.0
        inner = self.inner
        b0 = self.blocks.count() if self.blocks is not None else 0
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
        if self.ref is not None and self.refs is not None:
            if self.blocks is not None:  # as many blocks as the sample made (its resumptions, probed)
                self.refs.append(self.ref(self.blocks.count() - b0, self.blocks.block))
            else:
                self.refs.append(self.ref())
        slept = self._sleeps.slept_s() - s0 if self._sleeps is not None else 0.0
        self.spent_s += time.perf_counter() - w0 - slept

    def converged(self) -> bool:
        pol = self.policy
        return self.n >= pol.min_repeats and _own_spread(self.tot, self.refs) <= pol.target_spread

    def capped(self) -> bool:
        pol = self.policy
        return self.n >= pol.max_repeats or (self.n >= pol.min_repeats and self.spent_s > pol.max_piece_s)

    def done(self) -> bool:
        return self.converged() or self.capped()

    def result(self, measure_mem: bool = True) -> PieceTiming:
        fs, bs, bis, bws, tot, refs = self.fs, self.bs, self.bis, self.bws, self.tot, self.refs
        converged = self.converged()
        _zero_grads(self.everything)
        stat = statistics.mean if self.statistic == "mean" else statistics.median
        fwd, bwd = stat(fs), stat(bs)
        spread = {"fwd": rel_iqr(fs), "bwd": rel_iqr(bs), "total": rel_iqr(tot)}
        if refs:
            spread["reference"] = rel_iqr(refs)
            spread["vs_reference"] = rel_iqr([a / b for a, b in zip(tot, refs) if b > 0])
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
            threads=torch.get_num_threads() if not self.clock.cuda else 0, cores=self.cores,
            samples={"fwd": fs, "bwd": bs, "total": tot, **({"bwd_input_raw": bis, "bwd_weight_raw": bws}
                                                              if self.autograd_split else {}),
                     **({"reference": refs} if refs else {})},
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


def time_piece(forward: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
               params: Sequence[torch.Tensor], device: torch.device, *, split: str,
               flop_split: Optional[float] = None, policy: TimingPolicy = TimingPolicy(),
               measure_mem: bool = True, memory_forward: Optional[Callable[..., torch.Tensor]] = None,
               statistic: str = "median") -> PieceTiming:
    """Time ``forward(*inputs)`` and its backward under ``policy`` (module docstring): samples
    until :meth:`PieceSampler.done`.

    ``inputs``: leaf tensors that require grad (the hidden states entering the piece, whose
    gradient a pipeline sends upstream); ``params``: the piece's parameters; ``split``: one of
    :data:`SPLITS`; ``flop_split``: the input-grad share for ``split="flop-ratio"``;
    ``memory_forward``: what :func:`measure_memory` runs instead of ``forward`` (None: ``forward``);
    ``statistic``: how the samples are summarized (:data:`STATISTICS`).
    """
    sp = PieceSampler(forward, inputs, params, device, split=split, flop_split=flop_split, policy=policy,
                      memory_forward=memory_forward, statistic=statistic)
    time_pieces([sp], policy, window_s=0.0)
    return sp.result(measure_mem)


def time_pieces(samplers: Sequence[PieceSampler], policy: TimingPolicy, window_s: Optional[float] = None) -> None:
    """Sample several pieces **round-robin** (one sample of each in turn, as the link measurement
    interleaves its operations): a change of the machine's speed then hits every piece alike, and
    each piece's median is taken over the same stretch of time.  Rounds go on until every piece is
    :meth:`~PieceSampler.done` and at least ``policy.min_window_s`` of wall time has passed since
    the first (within the window a piece samples on until ``max_repeats`` or its time cap, so the
    medians span the window, as a real iteration of the whole model spans its second: on a shared
    2-core VM the speed moves in phases of seconds).  ``window_s``: the window instead of the
    policy's (0: each piece only until it is done, as :func:`time_piece` samples one piece).  Call
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
                sp.sample()
