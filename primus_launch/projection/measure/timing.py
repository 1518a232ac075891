"""Timing and memory of one model piece: forward, backward and its input-grad / weight-grad split.

Protocol (:class:`TimingPolicy`; the same code on every device, only the clock differs):

- clock: ``torch.cuda.Event`` pairs on CUDA; on the CPU ``time.thread_time`` (the default,
  ``cpu_clock="thread"``: CPU seconds of the measuring thread, which neither other jobs sharing
  the cores nor other threads of the same process inflate; measured with ONE torch thread, pinned
  by the caller, so that the ops run inline on this thread and its CPU time is the compute time --
  with the default 2 threads on a loaded 2-core machine one recipe gave 2198 / 135 / 141 ms on
  three runs, with one thread 170 / 170 / 166), ``time.process_time`` (``"process"``: all threads
  of the process) or ``time.perf_counter`` (``"wall"``);
- ``warmup`` untimed iterations, then samples until the **relative inter-quartile range** of the
  per-sample total (forward + backward) is at most ``target_spread`` (after ``min_repeats``), or
  ``max_repeats`` / ``max_piece_s`` is reached (then ``converged=False``, and the report says
  so).  A sample averages ``inner`` iterations, chosen in the warm-up so that one sample lasts at
  least ``min_sample_s`` (sub-millisecond pieces are otherwise timer and interpreter noise).
  Each figure is the **median** over samples; the spread (relative IQR) of each is recorded;
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
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

CpuClock = str  # "thread" | "process" | "wall"
CPU_CLOCKS = {"thread": time.thread_time, "process": time.process_time, "wall": time.perf_counter}
SPLITS = ("autograd", "flop-ratio", "no-weights", "no-input")


@dataclass(frozen=True)
class TimingPolicy:
    """Warm-up / repeat policy and clock (see the module docstring)."""

    warmup: int = 2
    min_repeats: int = 5
    max_repeats: int = 30
    target_spread: float = 0.05  # relative IQR of the per-sample total that ends sampling
    min_sample_s: float = 0.01
    max_piece_s: float = 60.0
    threads: int = 1  # torch intra-op threads of the measuring process (CPU)
    cpu_clock: CpuClock = "thread"

    def __post_init__(self) -> None:
        if self.cpu_clock not in CPU_CLOCKS:
            raise ValueError(f"cpu_clock={self.cpu_clock!r}: one of {', '.join(CPU_CLOCKS)}")
        if self.min_repeats < 3 or self.max_repeats < self.min_repeats:
            raise ValueError("min_repeats >= 3 and max_repeats >= min_repeats")

    def describe(self) -> str:
        return (f"{self.warmup} warm-up, then samples until the relative IQR of fwd+bwd <= "
                f"{self.target_spread:.0%} (min {self.min_repeats}, max {self.max_repeats} samples of >= "
                f"{self.min_sample_s * 1e3:.0f} ms), median")

    def key(self) -> dict[str, Any]:
        """What of the policy changes a measurement (the cache key's part)."""
        return {"warmup": self.warmup, "min_repeats": self.min_repeats, "max_repeats": self.max_repeats,
                "target_spread": self.target_spread, "min_sample_s": self.min_sample_s}


@dataclass
class PieceTiming:
    """Median seconds of one piece for one micro-batch, their spread, and its measured memory."""

    fwd_s: float
    bwd_s: float
    bwd_input_s: float
    bwd_weight_s: float
    split: str
    split_ratio: float  # input-grad share of the backward used for the split
    spread: dict[str, float]  # relative IQR per figure: fwd, bwd, total (and bwd_input/bwd_weight raw)
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

def _sample_loop(plain, split_pass, inner: int, policy: TimingPolicy, fs: list, bs: list, bis: list,
                 bws: list, tot: list, wall0: float) -> None:
    """Append samples until the spread target, ``max_repeats`` or ``max_piece_s`` (module docstring)."""
    from primus_launch import interrupt

    while True:
        interrupt.check()
        sf = sb = sbi = sbw = 0.0
        for _ in range(inner):
            f, b = plain()
            sf, sb = sf + f, sb + b
            if split_pass is not None:
                f2, bi, bw = split_pass()
                sf, sbi, sbw = sf + f2, sbi + bi, sbw + bw
        nf = inner * (2 if split_pass is not None else 1)
        fs.append(sf / nf)
        bs.append(sb / inner)
        tot.append(sf / nf + sb / inner)
        if split_pass is not None:
            bis.append(sbi / inner)
            bws.append(sbw / inner)
        n = len(tot)
        if n >= policy.min_repeats and rel_iqr(tot) <= policy.target_spread:
            return
        if n >= policy.max_repeats or (n >= policy.min_repeats and time.perf_counter() - wall0 > policy.max_piece_s):
            return


def time_piece(forward: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
               params: Sequence[torch.Tensor], device: torch.device, *, split: str,
               flop_split: Optional[float] = None, policy: TimingPolicy = TimingPolicy(),
               measure_mem: bool = True) -> PieceTiming:
    """Time ``forward(*inputs)`` and its backward under ``policy`` (module docstring).

    ``inputs``: leaf tensors that require grad (the hidden states entering the piece, whose
    gradient a pipeline sends upstream); ``params``: the piece's parameters; ``split``: one of
    :data:`SPLITS`; ``flop_split``: the input-grad share for ``split="flop-ratio"``.
    """
    if split not in SPLITS:
        raise ValueError(f"split={split!r}: one of {SPLITS}")
    if split == "flop-ratio" and flop_split is None:
        raise ValueError("split='flop-ratio' needs flop_split")
    clock = Clock(device, policy.cpu_clock)
    inputs, params = list(inputs), [p for p in params if p.requires_grad]
    everything = inputs + params
    grad: list[Optional[torch.Tensor]] = [None]
    autograd_split = split == "autograd" and bool(inputs) and bool(params)

    def plain() -> tuple[float, float]:
        _zero_grads(everything)
        t0 = clock.start()
        out = forward(*inputs)
        f = clock.stop(t0)
        if grad[0] is None:
            grad[0] = _grad_like(out)
        t0 = clock.start()
        torch.autograd.backward(out, grad[0])
        b = clock.stop(t0)
        del out
        return f, b

    def split_pass() -> tuple[float, float, float]:
        from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

        _zero_grads(everything)
        t0 = clock.start()
        out = forward(*inputs)
        f = clock.stop(t0)
        t0 = clock.start()
        _, groups = stage_backward_input([out], [grad[0]], inputs, iter(params))
        bi = clock.stop(t0)
        t0 = clock.start()
        stage_backward_weight(iter(params), groups)
        bw = clock.stop(t0)
        del out, groups
        return f, bi, bw

    last = 0.0
    for _ in range(max(1, policy.warmup)):
        f, b = plain()
        last = f + b
        if autograd_split:
            split_pass()
    inner = 1
    if not clock.cuda and last < policy.min_sample_s:
        inner = min(200, max(1, math.ceil(policy.min_sample_s / max(last, 1e-7))))
    fs, bs, bis, bws, tot = [], [], [], [], []
    wall0 = time.perf_counter()
    gc_was = gc.isenabled()
    gc.collect()
    gc.disable()  # a collection inside a sample is an outlier of the interpreter, not of the piece
    try:
        _sample_loop(plain, split_pass if autograd_split else None, inner, policy, fs, bs, bis, bws, tot, wall0)
    finally:
        if gc_was:
            gc.enable()
    converged = len(tot) >= policy.min_repeats and rel_iqr(tot) <= policy.target_spread
    _zero_grads(everything)
    fwd, bwd = statistics.median(fs), statistics.median(bs)
    spread = {"fwd": rel_iqr(fs), "bwd": rel_iqr(bs), "total": rel_iqr(tot)}
    bi_raw = bw_raw = None
    if autograd_split:
        bi_raw, bw_raw = statistics.median(bis), statistics.median(bws)
        spread.update(bwd_input_raw=rel_iqr(bis), bwd_weight_raw=rel_iqr(bws))
        ratio = bi_raw / (bi_raw + bw_raw) if bi_raw + bw_raw > 0 else 0.5
        used_split = "autograd"
    elif split == "no-weights" or not params:
        ratio, used_split = 1.0, "no-weights"
    elif split == "no-input" or not inputs:
        ratio, used_split = 0.0, "no-input"
    else:
        ratio, used_split = float(flop_split if flop_split is not None else 0.5), "flop-ratio"
    mem = measure_memory(forward, inputs, params, device) if measure_mem else \
        {"activation_bytes": 0, "output_bytes": 0, "peak_bytes": 0, "reserved_bytes": 0}
    return PieceTiming(
        fwd_s=fwd, bwd_s=bwd, bwd_input_s=ratio * bwd, bwd_weight_s=(1.0 - ratio) * bwd, split=used_split,
        split_ratio=ratio, spread=spread, repeats=len(tot), inner=inner, converged=converged,
        param_count=int(sum(p.numel() for p in params)),
        param_bytes=int(sum(p.numel() * p.element_size() for p in params)),
        bwd_input_raw_s=bi_raw, bwd_weight_raw_s=bw_raw, clock=clock.name,
        threads=torch.get_num_threads() if not clock.cuda else 0,
        samples={"fwd": fs, "bwd": bs, "total": tot, **({"bwd_input_raw": bis, "bwd_weight_raw": bws}
                                                          if autograd_split else {})},
        **mem)
