"""Per-rank action orders of the pipeline schedules, as compact integer codes.

Each pipeline rank executes a fixed sequence of actions ``(kind, chunk, microbatch)`` where kind is
``F`` (forward), ``B`` (backward: input-grad only in zero-bubble schedules, input+weight grad
fused otherwise) or ``W`` (weight-grad, zero-bubble schedules only).  The orders reproduce the
frameworks' own schedules (tests compare them action by action):

- ``1f1b``: Megatron ``forward_backward_pipelining_without_interleaving``
  (megatron/core/pipeline_parallel/schedules.py): ``min(pp - r - 1, m)`` warm-up forwards, then
  ``F, B`` pairs, then the cool-down backwards.  Same order as torch ``Schedule1F1B``.
- ``interleaved_1f1b``: Megatron ``forward_backward_pipelining_with_interleaving`` with
  ``microbatch_group_size_per_vp_stage = g`` (``--microbatch-group-size-per-virtual-pipeline-stage``,
  default ``pp``): the virtual micro-batch table of ``get_schedule_table`` (groups of ``g``
  consecutive micro-batches through every chunk, the last group taking the remainder) and the
  warm-up count of ``get_pp_rank_microbatches`` (``(pp - r - 1) * 2 + (vpp - 1) * g``, capped at
  ``m * vpp``); the steady state runs forward ``k + warmup`` then backward ``k``; backward chunk =
  ``vpp - 1 - chunk(k)``.  For ``g = pp`` and ``m % pp == 0`` this equals torch
  ``ScheduleInterleaved1F1B``.
- ``zb_h1``: ZB-H1 of Qi et al. 2023 (arXiv 2401.10241 sec. 3) as torch
  ``ScheduleInterleavedZeroBubble`` builds it for one chunk per rank: 1F1B warm-up, then
  ``F, B(input)`` pairs where rank ``r`` defers its weight-grads by ``r`` steps (``W(k - r)``
  follows the ``k``-th ``B``), the deferred ``W`` filling the cool-down bubble.
- ``zbv``: ZB-V (arXiv 2401.10241 sec. 6) as torch ``ScheduleZBVZeroBubble`` builds it: two
  chunks per rank in a V (rank ``r`` holds global stages ``r`` and ``2 pp - 1 - r``).
- ``gpipe``: all forwards then all (fused) backwards, torch ``ScheduleGPipe``.

Encoding (what the simulator consumes): action slot ``ci = (kind * pp + rank) * vpp + chunk`` and
action id ``a = microbatch * (3 * pp * vpp + 1) + ci`` (micro-batch major, so that the actions in
flight at any time have nearby ids; slot ``3 * pp * vpp`` is reserved for the simulator's
"no dependency" entries).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from primus_launch.plan import PlanError

F, B, W = 0, 1, 2
KIND_NAMES = ("F", "B", "W")
SCHEDULES = ("1f1b", "interleaved_1f1b", "zb_h1", "zbv", "gpipe")


@dataclass(frozen=True)
class ScheduleOrders:
    """The per-rank action orders of one (schedule, pp, vpp, m)."""

    schedule: str          # the schedule actually generated (after pp == 1 / vpp == 1 reductions)
    pp: int
    vpp: int
    m: int
    split_backward: bool   # True: B is input-grad only and W actions exist
    v_shape: bool          # True: chunk 1 of rank r is global stage 2*pp - 1 - r (ZB-V)
    orders: tuple[tuple[int, ...], ...]   # [rank] -> action ids (see module docstring)

    @property
    def stride(self) -> int:
        """Ids per micro-batch: 3 kinds x pp x vpp slots + 1 reserved slot."""
        return 3 * self.pp * self.vpp + 1

    def decode(self, a: int) -> tuple[int, int, int, int]:
        """Action id -> (kind, rank, chunk, microbatch)."""
        mb, ci = divmod(a, self.stride)
        kr, c = divmod(ci, self.vpp)
        kind, r = divmod(kr, self.pp)
        return kind, r, c, mb

    def global_stage(self, rank: int, chunk: int) -> int:
        """The global pipeline stage of ``rank``'s model chunk ``chunk``: ``chunk x pp + rank``, or on the
        V shape (ZB-V) ``2 pp - 1 - rank`` for chunk 1."""
        if self.v_shape and chunk == 1:
            return 2 * self.pp - 1 - rank
        return chunk * self.pp + rank

    def rank_chunk(self, g: int) -> tuple[int, int]:
        """Global stage -> (rank, chunk)."""
        if self.v_shape:
            return (g, 0) if g < self.pp else (2 * self.pp - 1 - g, 1)
        return g % self.pp, g // self.pp


def _normalize(schedule: str, pp: int, vpp: int, m: int, group: int | None = None) -> str:
    if schedule not in SCHEDULES:
        raise PlanError("training.pipeline_schedule", schedule, f"one of {', '.join(SCHEDULES)}")
    if pp < 1:
        raise PlanError("parallel.pp", pp, "must be >= 1")
    if m < 1:
        raise PlanError("num_microbatches", m, "must be >= 1")
    if schedule == "interleaved_1f1b" and vpp == 1:
        return "1f1b"   # Megatron runs the non-interleaved function without virtual stages
    if schedule == "zbv" and pp == 1 and vpp == 1:
        return "zb_h1"  # no pipeline: F, B, W per micro-batch
    need = {"1f1b": 1, "zb_h1": 1, "gpipe": 1, "zbv": 2}.get(schedule)
    if need is not None and vpp != need:
        raise PlanError("parallel.vpp", vpp, f"schedule {schedule} needs vpp == {need}")
    if schedule == "interleaved_1f1b":
        if vpp < 1:
            raise PlanError("parallel.vpp", vpp, "must be >= 1")
        # megatron schedules.py: group size (default pp) must lie in [pp, m] and the final group
        # must be empty or >= pp; with the default group size that is m % pp == 0.
        g = pp if group is None else group
        if not pp <= g <= m:
            raise PlanError("parallel.microbatch_group", g, f"between pp={pp} and the micro-batches ({m})")
        if 0 < m % g < pp:
            raise PlanError("num_microbatches", m, f"Megatron's interleaved schedule needs a multiple of the "
                                                   f"micro-batch group {g} or a last group of at least pp={pp}")
    return schedule


def _ids(pp: int, vpp: int, rank: int, seq) -> tuple[int, ...]:
    """(kind, chunk, mb) triples -> action ids for one rank."""
    ns = 3 * pp * vpp + 1
    return tuple(mb * ns + (k * pp + rank) * vpp + c for k, c, mb in seq)


def _steady(fwd: list[int], bwd: list[int], w: int) -> tuple[int, ...]:
    """``w`` warm-up forwards, then (forward, backward) pairs, then the remaining backwards."""
    n = len(fwd) - w
    mid: list[int] = [0] * (2 * n)
    mid[0::2] = fwd[w:]
    mid[1::2] = bwd[:n]
    return tuple(fwd[:w] + mid + bwd[n:])


def _one_f_one_b(p: int, m: int, r: int) -> tuple[int, ...]:
    ns = 3 * p + 1
    fwd = list(range(F * p + r, m * ns, ns))
    bwd = list(range(B * p + r, m * ns, ns))
    return _steady(fwd, bwd, min(p - 1 - r, m))


def _gpipe(p: int, m: int, r: int) -> tuple[int, ...]:
    ns = 3 * p + 1
    return tuple(range(F * p + r, m * ns, ns)) + tuple(range(B * p + r, m * ns, ns))


def megatron_schedule_table(m: int, vpp: int, group: int) -> list[tuple[int, int]]:
    """Virtual micro-batch id -> (microbatch, chunk), as Megatron ``get_schedule_table``:
    groups of ``group`` consecutive micro-batches run through every chunk before the next group;
    the last group absorbs the remainder."""
    table: list[tuple[int, int]] = []
    start = 0
    while start < m:
        stop = m if start + group >= m else start + group
        table.extend((mb, c) for c in range(vpp) for mb in range(start, stop))
        start = stop
    return table


def megatron_interleaved_warmup(p: int, vpp: int, m: int, r: int, group: int | None = None) -> int:
    """Megatron ``get_pp_rank_microbatches`` warm-up forwards (chunk-micro-batches) of rank r."""
    group = p if group is None else group
    return min((p - r - 1) * 2 + (vpp - 1) * group, m * vpp)


def _interleaved(p: int, v: int, m: int, r: int, group: int) -> tuple[int, ...]:
    table = megatron_schedule_table(m, v, group)
    ns = 3 * p * v + 1
    f0 = (F * p + r) * v
    b0 = (B * p + r) * v + v - 1
    fwd = [mb * ns + f0 + c for mb, c in table]
    bwd = [mb * ns + b0 - c for mb, c in table]     # backward chunk = v - 1 - forward chunk
    return _steady(fwd, bwd, megatron_interleaved_warmup(p, v, m, r, group))


def _zb_h1(p: int, m: int, r: int) -> list[tuple[int, int, int]]:
    w = min(p - 1 - r, m)
    seq = [(F, 0, i) for i in range(w)]
    nw = 0
    for k in range(m):           # k-th input-grad backward
        if k < m - w:
            seq.append((F, 0, w + k))
        seq.append((B, 0, k))
        if k >= r:               # weight-grads run r steps behind their input-grads
            seq.append((W, 0, nw))
            nw += 1
    seq.extend((W, 0, i) for i in range(nw, m))
    return seq


def _zbv(p: int, m: int, r: int) -> list[tuple[int, int, int]]:
    """ZB-V (arXiv 2401.10241 fig. 8): warm-up forwards on chunk 0, then chunk 1 forwards
    interleaved with chunk 1's (B, W); steady state ``F0 B0 W0 F1 B1 W1``; cool-down backwards
    with the deferred weight-grads last.  Runs with at least 2p-1 micro-batches and drops the
    surplus ones, as torch ``ScheduleZBVZeroBubble`` does."""
    n = max(2 * p - 1, m)
    seq: list[tuple[int, int, int]] = []
    f0 = f1 = b0 = b1 = 0
    for _ in range(2 * (p - r) - 1):
        seq.append((F, 0, f0)); f0 += 1
    for _ in range(r):
        seq.append((F, 1, f1)); f1 += 1
        seq.append((F, 0, f0)); f0 += 1
    for _ in range(p - r):
        seq.append((F, 1, f1)); f1 += 1
        seq.append((B, 1, b1)); seq.append((W, 1, b1)); b1 += 1
    while f1 < f0 or f0 < n:
        if f0 < n:
            seq.append((F, 0, f0)); f0 += 1
        seq.append((B, 0, b0)); seq.append((W, 0, b0)); b0 += 1
        seq.append((F, 1, f1)); f1 += 1
        seq.append((B, 1, b1)); seq.append((W, 1, b1)); b1 += 1
    w0, w1 = b0, b1
    for _ in range(r):
        seq.append((B, 0, b0)); b0 += 1
        seq.append((B, 1, b1)); b1 += 1
    for _ in range(p - r):
        seq.append((B, 0, b0)); b0 += 1
        seq.append((W, 0, w0)); w0 += 1
    seq.extend((W, 1, i) for i in range(w1, b1))
    seq.extend((W, 0, i) for i in range(w0, b0))
    return [x for x in seq if x[2] < m]


@lru_cache(maxsize=64)
def schedule_orders(schedule: str, pp: int, vpp: int, num_microbatches: int,
                    group: int | None = None) -> ScheduleOrders:
    """The per-rank orders of a schedule (cached per arguments); ``group``: Megatron's micro-batch
    group of the interleaved schedule (None = pp; ignored by the other schedules)."""
    m = num_microbatches
    sched = _normalize(schedule, pp, vpp, m, group)
    gen = {
        "1f1b": lambda r: _one_f_one_b(pp, m, r),
        "gpipe": lambda r: _gpipe(pp, m, r),
        "interleaved_1f1b": lambda r: _interleaved(pp, vpp, m, r, pp if group is None else group),
        "zb_h1": lambda r: _ids(pp, vpp, r, _zb_h1(pp, m, r)),
        "zbv": lambda r: _ids(pp, vpp, r, _zbv(pp, m, r)),
    }[sched]
    orders = tuple(gen(r) for r in range(pp))
    return ScheduleOrders(schedule=sched, pp=pp, vpp=vpp, m=m,
                          split_backward=sched in ("zb_h1", "zbv"), v_shape=sched == "zbv",
                          orders=orders)


def rank_actions(o: ScheduleOrders, rank: int) -> list[tuple[str, int, int]]:
    """Readable order of one rank: (kind letter, chunk, microbatch); B is input-grad only when
    ``o.split_backward``."""
    out = []
    for a in o.orders[rank]:
        k, _, c, mb = o.decode(a)
        out.append((KIND_NAMES[k], c, mb))
    return out


@lru_cache(maxsize=64)
def combined_1f1b_orders(pp: int, vpp: int, num_microbatches: int, group: int | None = None) -> ScheduleOrders:
    """Megatron's combined 1F1B (``--overlap-moe-expert-parallel-comm``, megatron-core 0.16.1
    ``pipeline_parallel/combined_1f1b.py``): the interleaved order with one more warm-up forward
    (``get_pp_rank_microbatches``: "we schedule one extra micro-batch forward step before the 1f1b
    stages"; megatron requires virtual stages with PP > 1), or without a pipeline one forward ahead
    of the backwards; each steady-state (F, B) pair then runs as one merged step, the forward's layers
    interleaved with the backward's (``model_chunk_schedule_plan.py``).  Same encoding as
    :func:`schedule_orders`; the pairs are the actions at the odd positions after the warm-up."""
    m = num_microbatches
    if pp == 1:
        ns = 3 * vpp + 1
        fwd = [mb * ns + F * vpp + c for mb in range(m) for c in range(vpp)]
        bwd = [mb * ns + B * vpp + vpp - 1 - c for mb in range(m) for c in range(vpp)]
        orders: tuple[tuple[int, ...], ...] = (_steady(fwd, bwd, min(vpp, m * vpp)),)
    else:
        sched = _normalize("interleaved_1f1b", pp, vpp, m, group)
        if sched != "interleaved_1f1b":
            raise PlanError("parallel.vpp", vpp, "the combined 1F1B schedule needs virtual stages with pp > 1")
        g = pp if group is None else group
        table = megatron_schedule_table(m, vpp, g)
        orders = tuple(
            _steady([mb * (3 * pp * vpp + 1) + (F * pp + r) * vpp + c for mb, c in table],
                    [mb * (3 * pp * vpp + 1) + (B * pp + r) * vpp + vpp - 1 - c for mb, c in table],
                    min(megatron_interleaved_warmup(pp, vpp, m, r, g) + 1, m * vpp))
            for r in range(pp))
    return ScheduleOrders(schedule="combined_1f1b", pp=pp, vpp=vpp, m=m, split_backward=False, v_shape=False,
                          orders=orders)
