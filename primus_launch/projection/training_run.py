"""The planner's answer: how long a whole training run of a given token count takes, and what it costs.

From a projection (:class:`ProjectionResult`: its iteration time, its plan's global batch and sequence
length, its GPU count) and the number of tokens to train on::

    tokens_per_iteration = global_batch_size x seq_length
    iterations           = ceil(tokens / tokens_per_iteration)
    wall_seconds         = iterations x iteration_time_s
    days                 = wall_seconds / 86,400
    gpu_hours            = wall_seconds / 3,600 x num_gpus
    cost                 = gpu_hours x gpu_hour_price            (only with a price)

With the projection's expected error (``ProjectionResult.band``, :mod:`projection.band`: the run took
``(1 + lo) .. (1 + hi)`` times the projected iteration time on the judged validation rows like it)
each figure gets the same range: ``wall_seconds x (1 + lo) .. wall_seconds x (1 + hi)`` (a longer
iteration is more days, GPU-hours and cost; the iteration count does not change).

What it leaves out, stated rather than assumed: steady-state iterations only -- no checkpoint saves,
evaluation, start-up (process launch, data loader, first-iteration compilation), restarts or
failures, and no learning-rate warm-up of the batch size (a constant global batch throughout).
"""

from __future__ import annotations

import math
from typing import Optional

from pydantic import BaseModel, Field

from primus_launch.projection.result import ProjectionResult

SECONDS_PER_DAY = 86_400.0
SECONDS_PER_HOUR = 3_600.0

EXCLUDES = ("steady-state iterations only: excludes checkpointing, evaluation, start-up, restarts and failures; "
            "a constant global batch")


class TrainingRunBand(BaseModel):
    """The run's figures at the bottom (``low``) and top (``high``) of the projection's time band."""

    low: float = Field(description="measured / projected iteration time - 1 at the band's bottom")
    high: float = Field(description="measured / projected iteration time - 1 at the band's top")
    days: tuple[float, float]
    gpu_hours: tuple[float, float]
    cost: Optional[tuple[float, float]] = None


class TrainingRun(BaseModel):
    """A whole training run of ``tokens`` tokens at one projection's iteration time (module doc)."""

    tokens: int = Field(gt=0)
    tokens_per_iteration: int = Field(description="global batch x sequence length")
    iterations: int = Field(description="ceil(tokens / tokens_per_iteration)")
    iteration_time_s: float
    num_gpus: int
    wall_seconds: float
    days: float
    gpu_hours: float
    gpu_hour_price: Optional[float] = Field(default=None, description="USD per GPU-hour (None: no cost)")
    cost: Optional[float] = Field(default=None, description="USD: gpu_hours x gpu_hour_price")
    band: Optional[TrainingRunBand] = Field(default=None, description="the figures across the projection's "
                                                                      "time band (dry-run)")
    excludes: str = EXCLUDES


def training_run(result: ProjectionResult, tokens: int, gpu_hour_price: Optional[float] = None) -> TrainingRun:
    """The run of ``tokens`` tokens at ``result``'s iteration time (formula in the module doc);
    ``gpu_hour_price`` (USD per GPU-hour) adds the cost.  Raises ``ValueError`` for a token count
    below 1 or a price that is not a finite positive number."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"tokens={tokens!r}: a whole number >= 1")
    if gpu_hour_price is not None and not (math.isfinite(gpu_hour_price) and gpu_hour_price > 0):
        raise ValueError(f"gpu_hour_price={gpu_hour_price!r}: a finite number > 0")
    plan = result.plan
    per_iter = plan.training.global_batch_size * plan.model.seq_length
    iterations = -(-tokens // per_iter)  # ceil in integers: exact for any token count
    wall = iterations * result.iteration_time_s

    def figures(seconds: float) -> tuple[float, float, Optional[float]]:
        gh = seconds / SECONDS_PER_HOUR * result.num_gpus
        return seconds / SECONDS_PER_DAY, gh, (gh * gpu_hour_price if gpu_hour_price is not None else None)

    days, gpu_hours, cost = figures(wall)
    band = None
    if result.band is not None:
        d_lo, g_lo, c_lo = figures(wall * (1 + result.band.low))
        d_hi, g_hi, c_hi = figures(wall * (1 + result.band.high))
        band = TrainingRunBand(low=result.band.low, high=result.band.high, days=(d_lo, d_hi), gpu_hours=(g_lo, g_hi),
                               cost=(c_lo, c_hi) if c_lo is not None and c_hi is not None else None)
    return TrainingRun(tokens=tokens, tokens_per_iteration=per_iter, iterations=iterations,
                       iteration_time_s=result.iteration_time_s, num_gpus=result.num_gpus, wall_seconds=wall,
                       days=days, gpu_hours=gpu_hours, gpu_hour_price=gpu_hour_price, cost=cost, band=band)


def compact(x: float) -> str:
    """A figure for a person, three significant digits below 100 and from a million: ``2.47``,
    ``987``, ``12,345``, ``1.00M``, ``12.3M``, ``456B``, ``7.89T``."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if abs(x) >= scale:
            q = x / scale
            return f"{q:.2f}{unit}" if q < 10 else f"{q:.1f}{unit}" if q < 100 else f"{q:,.0f}{unit}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def tokens_text(n: int) -> str:
    """A token count as written on the command line: ``15T``, ``1.5T``, ``300B``, ``12,345``."""
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            q = n / scale
            return f"{q:.4g}{unit}" if q < 10_000 else f"{q:,.0f}{unit}"
    return f"{n:,}"


def duration_text(days: float) -> str:
    """``41.2 days``; under a day in hours (``5.3 hours``), under an hour in minutes, under a minute in seconds
    (a run of one iteration read "0.0 hours (0.0 .. 0.0)")."""
    if days >= 1:
        return f"{days:,.1f} days"
    hours = days * 24
    if hours >= 1:
        return f"{hours:.1f} hours"
    return f"{hours * 60:.1f} minutes" if hours * 60 >= 1 else f"{hours * 3600:.1f} seconds"


def days_text(run: TrainingRun) -> str:
    """``3,576,280 iterations: 41.2 days (expected 38.7 .. 45.0)``: the range is the projection's time band
    where it has one ("expected": the runs like it ran that much longer or shorter than projected, so the range
    need not hold the point)."""
    out = f"{run.iterations:,} iteration{'' if run.iterations == 1 else 's'}: {duration_text(run.days)}"
    b = run.band
    if b is not None:
        lo, hi = duration_text(b.days[0]), duration_text(b.days[1])
        same_unit = lo.split()[1] == hi.split()[1] == duration_text(run.days).split()[1]
        out += f" (expected {lo.split()[0]} .. {hi.split()[0]})" if same_unit else f" (expected {lo} .. {hi})"
    return out


def gpu_text(run: TrainingRun) -> str:
    """``1.23M GPU-hours (1.16M .. 1.35M), $2.47M at $2/GPU-h ($2.32M .. $2.70M)``: ranges as in
    :func:`days_text`."""
    b = run.band
    out = f"{compact(run.gpu_hours)} GPU-hours"
    if b is not None:
        out += f" ({compact(b.gpu_hours[0])} .. {compact(b.gpu_hours[1])})"
    if run.cost is not None:
        out += f", ${compact(run.cost)} at ${run.gpu_hour_price:g}/GPU-h"
        if b is not None and b.cost is not None:
            out += f" (${compact(b.cost[0])} .. ${compact(b.cost[1])})"
    return out


def summary_rows(run: TrainingRun) -> list[tuple[str, str]]:
    """The run as the text answer's and the report's (label, value) rows: ``15T tokens`` with
    :func:`days_text`, ``GPU time`` with :func:`gpu_text`."""
    return [(f"{tokens_text(run.tokens)} tokens", days_text(run)), ("GPU time", gpu_text(run))]
