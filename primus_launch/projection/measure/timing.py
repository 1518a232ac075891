"""Timing and memory of one model piece: forward, backward (input-grad / weight-grad split).

Protocol (same code on every device; only the clock differs):

- clock: ``torch.cuda.Event(enable_timing=True)`` pairs around each pass on CUDA (after a
  ``synchronize``); on the CPU ``time.perf_counter`` (``cpu_clock="wall"``) or
  ``time.process_time`` (``cpu_clock="process"``, the default: CPU seconds of this process, which
  other processes sharing the cores do not inflate; equal to wall time on an idle machine with
  one torch thread, but the SUM over threads with several, so callers use it with one thread -- on a shared 2-core machine wall-clock medians of the same piece were seen to
  vary 2-3x between runs);
- ``warmup`` untimed forward+backward iterations, then ``repeats`` timed ones; each figure is the
  **median** over repeats;
- forward ``t_f``: the piece's forward callable; full backward ``t_b``:
  ``torch.autograd.backward(out, grad_out)`` into the parameters' ``.grad`` and the inputs' grad
  (what a training step does);
- input-grad backward ``t_bi``: a fresh forward, then ``torch.autograd.grad(out, inputs,
  grad_out)`` -- autograd only runs the ops on the path to the inputs, so the weight-gradient
  GEMMs are skipped (the "B" pass of zero-bubble pipelines, Qi et al. 2023, arXiv 2401.10241);
  weight-grad ``t_bw = max(t_b - t_bi, 0)``.  A piece with no differentiable input (the
  embedding) has ``t_bi = 0`` and ``t_bw = t_b``.
- memory (an extra, untimed iteration): on CUDA ``torch.cuda.memory_allocated`` /
  ``max_memory_allocated`` around forward and forward+backward; on the CPU torch's own
  ``torch.distributed._tools.mem_tracker.MemTracker`` (a dispatch-mode tracker of live tensor
  storages).  ``activation_bytes`` = bytes alive after forward minus before (what the piece
  keeps for backward, its output included); ``peak_bytes`` = peak during forward+backward minus
  the bytes alive before it (parameters excluded, gradients included).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional, Sequence

import torch


@dataclass
class PieceTiming:
    """Median seconds of one piece for one micro-batch, and its measured memory."""

    fwd_s: float
    bwd_s: float
    bwd_input_s: float
    bwd_weight_s: float
    activation_bytes: int
    peak_bytes: int
    param_count: int
    repeats: int
    split: str = "measured"  # how bwd was split into input / weight grad
    samples: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PieceTiming":
        return cls(**d)


CpuClock = str  # "process" | "wall"


class Clock:
    """Elapsed seconds of a region: CUDA events on a CUDA device; on the CPU process time
    (``cpu_clock="process"``) or perf_counter (``"wall"``)."""

    def __init__(self, device: torch.device, cpu_clock: CpuClock = "process"):
        self.cuda = device.type == "cuda"
        if cpu_clock not in ("process", "wall"):
            raise ValueError(f"cpu_clock={cpu_clock!r}: one of process, wall")
        self._now = time.process_time if cpu_clock == "process" else time.perf_counter

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


def _memory(forward: Callable[[], torch.Tensor], inputs: Sequence[torch.Tensor],
            params: Sequence[torch.Tensor], device: torch.device) -> tuple[int, int]:
    """(activation_bytes, peak_bytes) of one forward+backward; see the module docstring."""
    _zero_grads(list(inputs) + list(params))
    if device.type == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = forward()
        torch.cuda.synchronize()
        act = torch.cuda.memory_allocated() - base
        torch.autograd.backward(out, _grad_like(out))
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        del out
        _zero_grads(list(inputs) + list(params))
        return int(act), int(peak)
    from torch.distributed._tools.mem_tracker import MemTracker

    mt = MemTracker()
    with mt:
        before = _snapshot_total(mt, "current")
        out = forward()
        act = _snapshot_total(mt, "current") - before
        torch.autograd.backward(out, _grad_like(out))
        peak = _snapshot_total(mt, "peak") - before
        del out
    _zero_grads(list(inputs) + list(params))
    return int(act), int(peak)


def _snapshot_total(mt, kind: str) -> int:
    snap = mt.get_tracker_snapshot(kind)
    return int(sum(v.get("Total", 0) for v in snap.values()))


def time_piece(forward: Callable[[], torch.Tensor], inputs: Sequence[torch.Tensor],
               params: Sequence[torch.Tensor], device: torch.device, *, warmup: int = 2,
               repeats: int = 5, measure_memory: bool = True,
               flop_split: Optional[float] = None, cpu_clock: CpuClock = "process") -> PieceTiming:
    """Time ``forward()`` (returns the piece's output) and its backward; see the module docstring.

    ``inputs``: tensors that require grad and whose gradient a pipeline sends upstream (the
    hidden states entering a layer); ``params``: the piece's parameters.  ``flop_split``: when
    given, skip the input-only backward and attribute ``t_bi = flop_split * t_b`` (the FLOP
    ratio of input-grad to full backward); the result then says ``split="flop-ratio"``.
    """
    clock = Clock(device, cpu_clock)
    everything = list(inputs) + list(params)
    for _ in range(warmup):
        _zero_grads(everything)
        out = forward()
        torch.autograd.backward(out, _grad_like(out))
        del out
    grad = None
    f, b, bi = [], [], []
    for _ in range(repeats):
        _zero_grads(everything)
        t0 = clock.start()
        out = forward()
        f.append(clock.stop(t0))
        if grad is None:
            grad = _grad_like(out)
        t0 = clock.start()
        torch.autograd.backward(out, grad)
        b.append(clock.stop(t0))
        del out
    split = "measured"
    if inputs and flop_split is None:
        for _ in range(repeats):
            _zero_grads(everything)
            out = forward()
            t0 = clock.start()
            torch.autograd.grad(out, list(inputs), grad)
            bi.append(clock.stop(t0))
            del out
    _zero_grads(everything)
    fwd, bwd = statistics.median(f), statistics.median(b)
    if not inputs:
        bwd_in = 0.0
    elif flop_split is not None:
        bwd_in, split = flop_split * bwd, "flop-ratio"
    else:
        bwd_in = min(statistics.median(bi), bwd)
    act, peak = _memory(forward, inputs, params, device) if measure_memory else (0, 0)
    return PieceTiming(fwd_s=fwd, bwd_s=bwd, bwd_input_s=bwd_in, bwd_weight_s=max(bwd - bwd_in, 0.0),
                       activation_bytes=act, peak_bytes=peak,
                       param_count=int(sum(p.numel() for p in params)), repeats=repeats, split=split,
                       samples={"fwd": f, "bwd": b, "bwd_input": bi})
