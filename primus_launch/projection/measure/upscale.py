"""Hybrid projection: measure real framework pieces on the local device, upscale analytically.

1. Build the plan's model at reduced depth with the framework of its recipe
   (:mod:`.build_mcore` for Megatron, :mod:`.build_titan` for TorchTitan): embedding, up to
   ``measure_layers`` layers of every kind the plan has (dense / MoE, full / sliding-window
   attention), the attention core (and a windowed one), an MTP module's own part (Megatron), the
   head with its loss -- each the *per-GPU shard* of the target (TP/CP/EP applied to the shapes,
   world size 1), built with the plan's settings (dropout, activation, softmax type, dispatcher,
   attention backend, compile, ...).  What the build cannot reproduce at world size 1 on this
   device is a :class:`~.spec.Substitution`, listed per piece in the result with its reason and
   the correction applied.
2. Time each piece for one micro-batch (:mod:`.timing`: CUDA events on a GPU, the thread's CPU
   time on the CPU; warm-up, samples until the stated spread or the time cap, all pieces
   round-robin over a minimum window, median; input-/weight-grad split in the same loop) and
   measure its memory -- on a GPU the caching allocator's allocated and reserved peaks, on the CPU
   torch's MemTracker (and, for a TorchTitan block, its memory under torchtitan's own FullAC /
   SelectiveAC);
   cache each piece's record on disk (:mod:`.cache`: keyed by what its build reads, one writer
   per key, atomic writes; an unusable cache directory degrades to uncached with one warning).
3. ``LayerTimes`` = median over the built layers of each kind, corrected for the substitutions
   that have a model (:func:`corrected_layer_times`: window layers' masked core -> the causal core
   x the dry-run's window ratio; FP8 / FP4 timed in BF16, per-expert GEMMs, unfused permutation, a
   flex dispatcher -> x the dry-run roofline's ratio of the plan to what was measured);
   :func:`iteration.assemble` then places them by ``Plan.chunk_layout()`` (embedding, layers, MTP
   layers, loss per chunk), simulates the schedule, and restores what a world size of 1 cannot
   show -- TP/SP, CP, EP and DP collectives, PP sends, their overlap, the optimizer step --
   analytically on the plan's GPU spec (``cluster.gpu``).
4. Memory: the measured bytes each layer kind keeps for its backward, its backward temporaries and
   the head's, upscaled like time by the memory model of the plan's framework (Megatron:
   :class:`memory.MeasuredActivations` in the tensor-list model's stage structure; TorchTitan:
   :class:`~.measured_memory.MeasuredTitanActivations` in :mod:`memory_titan`'s FSDP2 walk); weights, gradients and
   optimizer state from the exact parameter counts.  The analytic model is the check: the result's
   ``memory_check`` holds both and their difference.  On a GPU the pieces' reserved bytes are
   upscaled too (:func:`.measured_memory.measured_reserved`): the allocator's measured overhead on the pieces'
   dynamic bytes applied to the stage's dynamic bytes, beside the model's reserved estimate.

The compute times are those of the *measuring* device; projecting a target GPU other than the
local one needs a measurement on that GPU kind (the result's notes say which device measured).
On the CPU the path is a functional check (every plan builds, runs and upscales), not a figure of
GPU performance; ``scripts/validation/measure_gloo.py`` sets one CPU projection beside a real
2-process gloo run with a stated band.
"""

from __future__ import annotations

import contextlib
import platform
import statistics
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

import torch

from primus_launch.errors import UserError
from primus_launch.plan import Plan
from primus_launch.projection.iteration import assemble
from primus_launch.projection.layer_times import LayerTimes, PassTimes
from primus_launch.projection.measure.cache import MeasureCache, cache_key
from primus_launch.projection.measure.device import no_gpu_reason, props_gcn_arch
from primus_launch.projection.measure.measured_memory import memory_check
from primus_launch.projection.measure.piece import measurement_flops_estimate
from primus_launch.projection.measure.spec import BuildSpec
from primus_launch.projection.measure.timing import (
    Measured,
    PieceSampler,
    PieceTiming,
    TimingPolicy,
    measure_memory,
    time_pieces,
    torch_threads,
)
from primus_launch.projection.result import (
    MeasurementReport,
    PieceReport,
    ProjectionResult,
    SubstitutionReport,
)

#: part of every piece's cache key; raised when how a piece is timed changes (6: a randomly routed MoE
#: layer's figure is the mean of its samples, timing.STATISTICS; 7: such a piece samples one pass at a
#: time; 8: the CPU path without the gloo lab's conditions -- no core binding, no glibc thresholds, no
#: blocks at the collectives, no cache eviction, no noise floor -- and the reserved bytes per piece on CUDA)
PROTOCOL_VERSION = 8
DEFAULT_POLICY = TimingPolicy()
CPU_NOTE = "measured on the CPU: CPU timings only check the path, not GPU performance"


def device_label(device: str) -> str:
    """What identifies the measuring hardware in the cache key."""
    d = torch.device(device)
    if d.type == "cuda":  # some ROCm releases name no part: its architecture and memory then tell it
        name = torch.cuda.get_device_name(d)
        if not name.strip():
            props = torch.cuda.get_device_properties(d)
            name = f"{props_gcn_arch(props) or 'unnamed'}:{props.total_memory >> 30}GiB"
        return f"cuda:{name}"
    return f"cpu:{platform.processor() or platform.machine()}:{torch.get_num_threads()}threads"


def _builder(framework: str):
    if framework == "torchtitan":
        from primus_launch.projection.measure import build_titan as b
    else:
        from primus_launch.projection.measure import build_mcore as b
    return b


def _framework_version(framework: str) -> str:
    from importlib.metadata import version

    return version("torchtitan" if framework == "torchtitan" else "megatron-core")


def resolve_cpu_clock(cpu_clock: Optional[str], threads: Optional[int] = None) -> str:
    """None -> "thread" when the measuring process runs one torch thread (the ops run inline on
    the calling thread, so its CPU time is the compute time, robust to other jobs on the cores and
    to other threads of the process), else "wall" (CPU time would add up the threads' seconds)."""
    if cpu_clock is None:
        n = threads if threads else torch.get_num_threads()
        return "thread" if n == 1 else "wall"
    return cpu_clock


POLICY_ENV = "PRIMUS_LAUNCH_MEASURE_POLICY"


def _env_overrides(pol: TimingPolicy) -> TimingPolicy:
    """``$PRIMUS_LAUNCH_MEASURE_POLICY`` (``field=value,...`` of :class:`TimingPolicy`, e.g.
    ``min_repeats=3,max_repeats=4,min_sample_s=0.005``): a cheaper policy for CI and tests; the
    result's ``measurement.policy`` states the policy used, and it is part of the cache key."""
    import dataclasses
    import os

    text = os.environ.get(POLICY_ENV, "").strip()
    if not text:
        return pol
    types = {f.name: f.type for f in dataclasses.fields(TimingPolicy)}
    upd = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in types:
            raise UserError(f"{POLICY_ENV}={text!r}: {name!r} is not one of {', '.join(types)}")
        cur = getattr(pol, name)
        try:
            upd[name] = value.strip().lower() in ("1", "true", "yes") if isinstance(cur, bool) else type(cur)(value)
        except ValueError:
            raise UserError(f"{POLICY_ENV}={text!r}: {name} needs a {type(cur).__name__}") from None
    return replace(pol, **upd)


def make_policy(policy: Optional[TimingPolicy] = None, *, repeats: Optional[int] = None,
                cpu_clock: Optional[str] = None, threads: Optional[int] = None) -> TimingPolicy:
    """The timing policy (default :data:`DEFAULT_POLICY` with ``$PRIMUS_LAUNCH_MEASURE_POLICY``
    applied) with the keyword overrides applied (``repeats``: the minimum number of samples, at
    least 3)."""
    pol = policy or _env_overrides(DEFAULT_POLICY)
    if threads is not None:
        pol = replace(pol, threads=threads)
    if repeats is not None:
        r = max(3, repeats)
        pol = replace(pol, min_repeats=r, max_repeats=max(r, pol.max_repeats))
    return replace(pol, cpu_clock=resolve_cpu_clock(cpu_clock, pol.threads))


def measure_pieces(plan: Plan, device: str, *, cache: Optional[MeasureCache] = None,
                   measure_layers: int = 2, policy: Optional[TimingPolicy] = None,
                   repeats: Optional[int] = None, cpu_clock: Optional[str] = None,
                   max_cpu_seconds: Optional[float] = 600.0) -> Measured:
    """Time every piece of the plan's per-rank model (or read it from ``cache``).

    The model is built only when some piece is missing; a missing piece is measured while this
    process holds its cache key's writer lock (a concurrent run waiting on it then reads the
    record).  On the CPU, refuses (one line) when the estimated measurement time exceeds
    ``max_cpu_seconds`` (None: no limit); torch runs ``policy.threads`` threads meanwhile."""
    fw = plan.framework
    b = _builder(fw)
    pol = make_policy(policy, repeats=repeats, cpu_clock=cpu_clock)
    cpu = torch.device(device).type == "cpu"
    with torch_threads(pol.threads if cpu else None):
        spec, label, keys = _spec_keys(b, plan, device, measure_layers, pol)
        out: dict[str, PieceTiming] = {}
        hit: dict[str, bool] = {}
        if cache is not None:
            for n, k in keys.items():
                rec = cache.get(k)
                if rec is not None:
                    out[n] = PieceTiming.from_dict(rec)
                    hit[n] = True
        missing = [n for n in spec.piece_names if n not in out]
        if missing and cpu and max_cpu_seconds is not None:
            check_cpu_budget(plan, measure_layers, pol, max_cpu_seconds)
        if missing:
            locks = cache.locked([keys[n] for n in missing]) if cache is not None else contextlib.nullcontext(False)
            with locks as held:
                if held:  # another writer may have measured them while we waited
                    for n in missing:
                        rec = cache.peek(keys[n])
                        if rec is not None:
                            out[n] = PieceTiming.from_dict(rec)
                            hit[n] = True
                    missing = [n for n in missing if n not in out]
                if missing:
                    _measure(b, plan, device, measure_layers, spec, pol, missing, out, hit,
                             cache if held else None, keys)
    return Measured(timings={n: out[n] for n in spec.piece_names}, hits=hit, spec=spec, policy=pol,
                    device=label, cache=cache)


def _spec_keys(b, plan: Plan, device: str, measure_layers: int, pol: TimingPolicy) -> tuple[BuildSpec, str, dict]:
    """The build spec, the device label and every piece's cache key (under the policy's torch threads:
    the CPU label counts them)."""
    fw = plan.framework
    spec = b.build_spec(plan, device, measure_layers)
    label = device_label(device)
    extra = {"framework_version": _framework_version(fw), "protocol": PROTOCOL_VERSION, "policy": pol.key()}
    if torch.device(device).type == "cpu":
        extra["cpu_clock"] = pol.cpu_clock
    keys = {n: cache_key(fw, n, spec.material(n), label, **extra) for n in spec.piece_names}
    return spec, label, keys


def piece_keys(plan: Plan, device: str, *, measure_layers: int = 2,
               policy: Optional[TimingPolicy] = None) -> dict[str, dict]:
    """Every piece of the plan's per-rank model by name -> its cache key on ``device`` (what
    :func:`measure_pieces` looks up; nothing is built or timed)."""
    pol = make_policy(policy)
    cpu = torch.device(device).type == "cpu"
    with torch_threads(pol.threads if cpu else None):
        return _spec_keys(_builder(plan.framework), plan, device, measure_layers, pol)[2]


def measure_piece_records(plan: Plan, device: str, names: list[str], *, measure_layers: int = 2,
                          policy: Optional[TimingPolicy] = None) -> dict[str, tuple[dict, dict]]:
    """Measure only the pieces ``names`` of the plan's per-rank model on ``device``, uncached: name ->
    (cache key, record), the record :meth:`MeasureCache.put` stores (a worker's part of a fan-out,
    :mod:`.fanout`: the caller puts them in its cache).  The same build, protocol and policy as
    :func:`measure_pieces`; the pieces are timed round-robin among themselves only."""
    b = _builder(plan.framework)
    pol = make_policy(policy)
    cpu = torch.device(device).type == "cpu"
    out: dict[str, PieceTiming] = {}
    with torch_threads(pol.threads if cpu else None):
        spec, _, keys = _spec_keys(b, plan, device, measure_layers, pol)
        unknown = [n for n in names if n not in keys]
        if unknown:
            raise ValueError(f"pieces {unknown} are not pieces of this plan ({', '.join(keys)})")
        _measure(b, plan, device, measure_layers, spec, pol, list(names), out, {}, None, keys)
    return {n: (keys[n], out[n].to_dict()) for n in names}


def _measure(b, plan: Plan, device: str, measure_layers: int, spec: BuildSpec, pol: TimingPolicy,
             missing: list[str], out: dict, hit: dict, cache: Optional[MeasureCache], keys: dict) -> None:
    from primus_launch import interrupt

    dev = torch.device(device)
    piece = "the model build"   # what was running, for the one line of an out-of-memory
    try:
        with b.world_size_one(device):
            pieces, model = b.pieces(plan, device, measure_layers, spec=spec)
            try:
                todo = [pc for pc in pieces if pc.name in missing]
                samplers = []
                for pc in todo:  # warm-up and inner count, piece by piece
                    interrupt.check()
                    piece = pc.name
                    samplers.append(PieceSampler(pc.forward, pc.inputs, pc.params, dev, split=pc.split,
                                                 flop_split=pc.flop_split, policy=pol,
                                                 memory_forward=pc.memory_forward,
                                                 statistic="mean" if pc.routed else "median", name=pc.name))
                piece = "the timed samples"
                time_pieces(samplers, pol)  # then the samples, round-robin over the window
                for pc, sp in zip(todo, samplers):
                    interrupt.check()
                    piece = pc.name
                    out[pc.name] = sp.result()
                    for vname, vfwd in pc.memory_variants.items():
                        out[pc.name].variant_bytes[vname] = measure_memory(vfwd, pc.inputs, pc.params,
                                                                           dev)["activation_bytes"]
                    hit[pc.name] = False
                    interrupt.check()  # never cache a piece timed across a swallowed interrupt
                    if cache is not None:
                        cache.put(keys[pc.name], out[pc.name].to_dict())
            finally:
                del pieces, model
    except torch.OutOfMemoryError as e:
        piece = getattr(e, "piece", None) or piece
    else:
        return
    # raised outside the handler: the OOM's traceback (the frames holding the pieces' tensors) is gone,
    # so its device memory is free again when the error is reported
    raise out_of_memory_error(plan, device, piece)


def out_of_memory_error(plan: Plan, device: str, piece: str) -> UserError:
    """The one line of a device out-of-memory during a measurement (``torch.OutOfMemoryError``): the
    piece, the device and its capacity, what to do; the cached blocks released first so that the
    process can go on (the dry run needs no device memory)."""
    cap = ""
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        torch.cuda.empty_cache()
        total = torch.cuda.get_device_properties(torch.device(device)).total_memory
        cap = f" ({total / 2**30:.1f} GiB)"
    return UserError(f"--measure-device={device}: {plan.model.name} ran out of device memory measuring {piece} on "
                     f"{device_label(device)}{cap}: one GPU's shard of a micro-batch (tp={plan.parallel.tp}, "
                     f"cp={plan.parallel.cp}, ep={plan.parallel.ep}, micro-batch {plan.training.micro_batch_size}) "
                     "does not fit it; use --dry-run, or measure on a larger GPU")


# ---------------------------------------------------------------- CPU refusal

@lru_cache(maxsize=8)
def cpu_gemm_rate(dtype: str = "bf16", threads: int = 1, n: int = 384, repeats: int = 7) -> float:
    """FLOP/s of an ``n``-cube GEMM on this CPU with ``threads`` torch threads: the best of
    ``repeats`` runs after a warm-up, in the thread's CPU time with one thread (other jobs on the
    cores do not lengthen it, so the figure holds still on a loaded machine); cached for the
    process."""
    import time

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": torch.bfloat16}[dtype]
    with torch_threads(threads):
        a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
        a @ b
        now = time.thread_time if threads == 1 else time.perf_counter
        best = float("inf")
        for _ in range(repeats):
            t0 = now()
            a @ b
            best = min(best, now() - t0)
    return 2.0 * n ** 3 / max(best, 1e-9)


def measurement_passes(plan: Plan, policy: TimingPolicy) -> int:
    """Forward + backward passes of every piece in a measurement at the policy's minimum: warm-up
    and the minimum samples (twice for TorchTitan, whose autograd split runs a second pass per
    iteration) and two memory passes."""
    per = 2 if plan.framework == "torchtitan" else 1
    return policy.warmup * per + policy.min_repeats * per + 2


def cpu_measurement_seconds(plan: Plan, measure_layers: int, policy: TimingPolicy,
                            gemm_rate: Optional[float] = None) -> float:
    """Estimated CPU seconds to measure the plan's pieces: :func:`measurement_passes` x (fwd+bwd
    FLOPs of the pieces, :func:`.piece.measurement_flops_estimate`) / ``gemm_rate`` (default
    :func:`cpu_gemm_rate` in the plan's dtype) -- a lower bound, since whole layers reach a fraction
    of the GEMM rate; plus the round-robin window ``min_window_s``."""
    rate = gemm_rate if gemm_rate is not None else cpu_gemm_rate(plan.training.precision, policy.threads)
    return (measurement_flops_estimate(plan, measure_layers) * measurement_passes(plan, policy) / rate
            + policy.min_window_s)


def check_cpu_budget(plan: Plan, measure_layers: int, policy: TimingPolicy, max_s: float,
                     gemm_rate: Optional[float] = None) -> None:
    """UserError (one line) when :func:`cpu_measurement_seconds` exceeds ``max_s``."""
    est = cpu_measurement_seconds(plan, measure_layers, policy, gemm_rate)
    if est > max_s:
        flops = measurement_flops_estimate(plan, measure_layers)
        mins = est / 60
        shown = f"{mins:.2g}" if mins < 100 else f"{round(mins, -1):.0f}"
        gpu = "a GPU (--measure-device cuda)" if torch.cuda.is_available() else f"a GPU ({no_gpu_reason()})"
        raise UserError(f"--measure-device=cpu: measuring {plan.model.name} pieces would take about {shown} min "
                        f"or more on this CPU ({flops / 1e12:.1f} TFLOP per pass, {policy.threads} thread(s)); use "
                        f"--dry-run or {gpu}")


# ---------------------------------------------------------------- upscaling

def _median_pass(timings: list[PieceTiming]) -> PassTimes:
    return PassTimes(fwd_s=statistics.median(t.fwd_s for t in timings),
                     bwd_input_s=statistics.median(t.bwd_input_s for t in timings),
                     bwd_weight_s=statistics.median(t.bwd_weight_s for t in timings))


# LayerTimes field -> the piece kind it is measured from
FIELD_KIND = {"dense_layer": "dense_layer", "moe_layer": "moe_layer", "dense_window_layer": "dense_window_layer",
              "moe_window_layer": "moe_window_layer", "embedding": "embedding", "head_loss": "head_loss",
              "attn_core": "attn_core", "mtp_extra": "mtp"}


def _kind_median(timings: dict[str, PieceTiming], kind: str) -> Optional[PassTimes]:
    ts = [t for n, t in timings.items() if n.split("#")[0] == kind]
    return _median_pass(ts) if ts else None


def layer_times(timings: dict[str, PieceTiming]) -> LayerTimes:
    """Median per kind of the measured pieces -> ``iteration.LayerTimes`` (an all-MoE model has no
    dense layer, an all-window model no full-attention one: the nearest measured kind stands in)."""
    k = {f: _kind_median(timings, kind) for f, kind in FIELD_KIND.items()}
    moe = k["moe_layer"] or k["moe_window_layer"]
    dense = k["dense_layer"] or k["dense_window_layer"] or moe
    return LayerTimes(dense_layer=dense, moe_layer=moe, embedding=k["embedding"], head_loss=k["head_loss"],
                      attn_core=k["attn_core"], dense_window_layer=k["dense_window_layer"],
                      moe_window_layer=k["moe_window_layer"], mtp_extra=k["mtp_extra"])


def _scaled(pt: Optional[PassTimes], num: Optional[PassTimes], den: Optional[PassTimes]) -> Optional[PassTimes]:
    if pt is None or num is None or den is None:
        return pt

    def r(a: float, b: float) -> float:
        return a / b if b > 0 else 1.0

    return PassTimes(pt.fwd_s * r(num.fwd_s, den.fwd_s), pt.bwd_input_s * r(num.bwd_input_s, den.bwd_input_s),
                     pt.bwd_weight_s * r(num.bwd_weight_s, den.bwd_weight_s))


def _merge(a: dict, b: dict) -> dict:
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in a.items()}
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def window_corrected_times(plan: Plan, timings: dict[str, PieceTiming]) -> tuple[dict[str, PassTimes], str]:
    """Window layers measured with a masked core (every score computed) -> what flash-style window
    kernels do: per pass, ``layer - core_window + core_full x r`` with ``core_window`` / ``core_full``
    the measured ``attn_core_window`` / ``attn_core`` pieces and ``r`` the dry-run roofline's window /
    full core-attention time ratio (``(core + window_layer - full_layer) / core`` of
    ``dryrun.layer_times_roofline``); weight gradients unchanged.  Returns the corrected medians per
    window kind and the description."""
    from primus_launch.projection.cost.roofline import layer_times_roofline

    cw, cf = _kind_median(timings, "attn_core_window"), _kind_median(timings, "attn_core")
    if cw is None or cf is None:
        return {}, ""
    roof = layer_times_roofline(plan)
    out: dict[str, PassTimes] = {}
    ratios = []
    for kind, full_f, win_f in (("dense_window_layer", "dense_layer", "dense_window_layer"),
                                ("moe_window_layer", "moe_layer", "moe_window_layer")):
        pt = _kind_median(timings, kind)
        full, win, core = getattr(roof, full_f), getattr(roof, win_f), roof.attn_core
        if pt is None or full is None or win is None or core is None:
            continue
        rf = (core.fwd_s + win.fwd_s - full.fwd_s) / core.fwd_s if core.fwd_s > 0 else 1.0
        rb = (core.bwd_input_s + win.bwd_input_s - full.bwd_input_s) / core.bwd_input_s if core.bwd_input_s > 0 else 1.0
        rf, rb = min(1.0, max(0.0, rf)), min(1.0, max(0.0, rb))
        out[kind] = PassTimes(max(0.0, pt.fwd_s - cw.fwd_s + cf.fwd_s * rf),
                              max(0.0, pt.bwd_input_s - cw.bwd_input_s + cf.bwd_input_s * rb), pt.bwd_weight_s)
        ratios.append(f"{kind}: r = {rf:.2f} fwd / {rb:.2f} bwd")
    return out, ("window layers: measured masked core replaced by the measured causal core x the dry-run's window / "
                 "full core-attention ratio (" + "; ".join(ratios) + ")") if ratios else ""


def corrected_layer_times(plan: Plan, timings: dict[str, PieceTiming],
                          spec: BuildSpec) -> tuple[LayerTimes, dict[str, list[str]]]:
    """:func:`layer_times` with the substitutions' corrections: window layers
    (:func:`window_corrected_times`), then per LayerTimes field the substitutions with an ``alt``
    that apply to its piece kind (FP8 / FP4 timed in BF16, the dispatcher and expert GEMMs the local
    build runs, ...) as one ratio ``roofline(plan) / roofline(plan with their alts)`` per pass
    (``dryrun.layer_times_roofline`` on the plan's GPU).  Returns the times and, per piece kind,
    the adjustments applied (for the report)."""
    from primus_launch.projection.cost.roofline import layer_times_roofline

    adj: dict[str, list[str]] = {}
    win, how = window_corrected_times(plan, timings)
    lt = layer_times(timings)
    if win:
        upd = {f: win[f] for f in ("dense_window_layer", "moe_window_layer") if f in win}
        if lt.dense_layer is lt.dense_window_layer or _kind_median(timings, "dense_layer") is None:
            upd["dense_layer"] = win.get("dense_window_layer", lt.dense_layer)
        if _kind_median(timings, "moe_layer") is None and "moe_window_layer" in win:
            upd["moe_layer"] = win["moe_window_layer"]
        lt = replace(lt, **upd)
        for f in upd:
            adj.setdefault(FIELD_KIND[f], []).append(how)
    roof = None
    alts: dict[str, Plan] = {}
    upd = {}
    for f, kind in FIELD_KIND.items():
        subs = [sb for sb in spec.substitutions if sb.alt and sb.applies(f"{kind}#0")]
        pt = getattr(lt, f)
        if not subs or pt is None:
            continue
        alt: dict = {}
        for sb in subs:
            alt = _merge(alt, sb.alt)
        key = repr(sorted((k, sorted(v.items())) for k, v in alt.items()))
        if key not in alts:
            alts[key] = plan.with_changes(**alt)
        roof = roof or layer_times_roofline(plan)
        ralt = layer_times_roofline(alts[key])
        num, den = getattr(roof, f), getattr(ralt, f)
        if num is None or den is None:
            continue
        upd[f] = _scaled(pt, num, den)
        rf = num.fwd_s / den.fwd_s if den.fwd_s > 0 else 1.0
        rb = (num.bwd_input_s + num.bwd_weight_s) / (den.bwd_input_s + den.bwd_weight_s) \
            if den.bwd_input_s + den.bwd_weight_s > 0 else 1.0
        adj.setdefault(kind, []).append(
            f"scaled by the dry-run roofline's ratio for {'; '.join(sb.what for sb in subs)}: "
            f"fwd x{rf:.3f}, bwd x{rb:.3f} on {plan.cluster.gpu}")
    if upd:
        lt = replace(lt, **upd)
    return lt, adj


# ---------------------------------------------------------------- entry point

def project_measured(plan: Plan, *, device: str | None = None, memory_margin: float = 0.0,
                     record_timeline: bool = False, cache_dir: Path | None = None,
                     measure_layers: int = 2, repeats: Optional[int] = None,
                     cpu_clock: Optional[str] = None, max_cpu_seconds: Optional[float] = 600.0,
                     policy: Optional[TimingPolicy] = None, threads: Optional[int] = None,
                     use_cache: bool = True, memory_basis: str = "reserved") -> ProjectionResult:
    """Measure the plan's pieces on ``device`` ("cuda" | "cpu"; default cuda when available,
    else cpu with a note) and assemble the iteration on the plan's GPU spec (module docstring).

    ``cache_dir``: where piece measurements are cached (default :func:`cache.default_cache_dir`);
    ``use_cache=False`` measures without one.  ``policy``: the timing policy (default
    :data:`DEFAULT_POLICY`: one torch thread, thread CPU time, 5 % relative IQR); ``repeats``,
    ``cpu_clock``, ``threads`` override its minimum samples, CPU clock and thread count.
    ``max_cpu_seconds``: refuse a CPU measurement estimated to take longer (None: no limit).
    """
    notes: list[str] = []
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise UserError(f"--measure-device={device!r}: one of cpu, cuda")
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--measure-device={device!r}: {no_gpu_reason()}; use --dry-run, or cpu (a check of the path)")
    pol = make_policy(policy, repeats=repeats, cpu_clock=cpu_clock, threads=threads)
    cpu = torch.device(device).type == "cpu"
    if cpu:
        notes.append(CPU_NOTE)
    cache = MeasureCache(cache_dir) if use_cache else None
    meas = measure_pieces(plan, device, cache=cache, measure_layers=measure_layers, policy=pol,
                          max_cpu_seconds=max_cpu_seconds)
    timings, hits, spec = meas.timings, meas.hits, meas.spec
    lt, adjustments = corrected_layer_times(plan, timings, spec)
    res = assemble(plan, lt, "measured", record_timeline=record_timeline, memory_margin=memory_margin)
    mem, check = memory_check(plan, meas, device, memory_margin, memory_basis)
    p = plan.parallel
    fw = plan.framework
    clock = "CUDA events" if not cpu else f"{pol.cpu_clock} time, {pol.threads} torch thread(s)"
    notes.append(f"measured {fw} pieces on {meas.device} at world size 1 with per-GPU shard shapes "
                 f"(tp={p.tp}: heads/ffn/vocab divided; cp={p.cp}: sequence divided; ep={p.ep}: local experts); "
                 f"TP/CP/EP/DP/PP communication and the optimizer step added analytically on {plan.cluster.gpu}")
    notes.append(f"timing: {clock}; {pol.describe()}")
    unconverged = [n for n, t in timings.items() if not t.converged]
    if unconverged:
        notes.append(f"{len(unconverged)} piece(s) did not reach the {pol.target_spread:.0%} spread target within "
                     f"{pol.max_repeats} samples / {pol.max_piece_s:.0f} s: "
                     + ", ".join(f"{n} {timings[n].spread['total']:.0%}" for n in unconverged)
                     + " (spreads per piece in measurement.pieces)")
    if fw == "megatron":
        notes.append("backward split into input-grad / weight-grad by the FLOP ratio (megatron's linear computes "
                     "its weight gradient in the input-gradient autograd node)")
    else:
        notes.append("backward split into input-grad / weight-grad measured with torch's pipelining split "
                     "(stage_backward_input / stage_backward_weight, as torchtitan's zero-bubble schedules run it), "
                     "timed in the same loop as the plain backward")
    subs = sorted({s.what for s in spec.substitutions})
    if subs:
        notes.append("substituted (per piece in measurement.pieces): " + "; ".join(subs))
    n_hit = sum(hits.values())
    cache_dir_s = str(cache.dir) if cache is not None else "(off)"
    if cache is not None and cache.warning:
        notes.append(cache.warning)
    notes.append(f"measurement cache: {n_hit}/{len(hits)} pieces from {cache_dir_s}")
    notes.append(f"memory from the measured pieces: peak {mem.peak_bytes_per_gpu / 2**30:.2f} GiB per GPU, analytic "
                 f"model {check.analytic_peak_bytes_per_gpu / 2**30:.2f} GiB ({check.relative_difference:+.1%})")
    notes += [n for n in check.notes[1:]]  # the reserved bytes' upscale (a GPU measurement)
    pieces: dict[str, PieceReport] = {}
    for n, t in timings.items():
        adj = list(adjustments.get(n.split("#")[0], []))
        pieces[n] = PieceReport(
            source="cached" if hits.get(n) else "measured", fwd_s=t.fwd_s, bwd_s=t.bwd_s, bwd_input_s=t.bwd_input_s,
            bwd_weight_s=t.bwd_weight_s, split=t.split, split_ratio=t.split_ratio,
            bwd_input_raw_s=t.bwd_input_raw_s, bwd_weight_raw_s=t.bwd_weight_raw_s, spread=t.spread,
            repeats=t.repeats, statistic=t.statistic, converged=t.converged, measured_dtype=spec.dtype,
            activation_bytes=t.activation_bytes, output_bytes=t.output_bytes, peak_bytes=t.peak_bytes,
            reserved_bytes=t.reserved_bytes, param_count=t.param_count,
            substitutions=[SubstitutionReport(**s.to_dict()) for s in spec.substitutions_for(n)], adjustments=adj)
    report = MeasurementReport(
        device=meas.device, framework=fw, policy=pol.describe(), clock=pol.cpu_clock if cpu else "cuda-events",
        threads=pol.threads if cpu else 0,
        cache_dir=cache_dir_s, cache_hits=n_hit,
        cache_warning=cache.warning if cache is not None else None, pieces=pieces,
        layer_times={k: (None if v is None else {"fwd_s": v.fwd_s, "bwd_input_s": v.bwd_input_s,
                                                 "bwd_weight_s": v.bwd_weight_s})
                     for k, v in vars(lt).items()})
    return res.model_copy(update={"notes": notes + res.notes, "measurement": report, "memory": mem,
                                  "memory_check": check})

