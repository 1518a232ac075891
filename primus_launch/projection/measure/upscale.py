"""Hybrid projection: measure real framework pieces on the local device, upscale analytically.

1. Build the plan's model at reduced depth with the framework of its recipe
   (:mod:`.build_mcore` for Megatron, :mod:`.build_titan` for TorchTitan): embedding, up to
   ``measure_layers`` dense and MoE layers, the attention core, the head with its loss -- each the
   *per-GPU shard* of the target (TP/CP/EP applied to the shapes, world size 1).  What the build
   cannot reproduce at world size 1 on this device is a :class:`~.spec.Substitution`, listed per
   piece in the result with its reason and the correction applied (e.g. FP8 timed in BF16 where
   the device has no FP8 GEMM, then scaled by the dry-run's fp8/bf16 ratio of that piece).
2. Time each piece for one micro-batch (:mod:`.timing`: pinned torch threads, warm-up, samples
   until the stated spread, median; input-/weight-grad split in the same loop) and measure its
   memory; cache each piece's record on disk (:mod:`.cache`: keyed by the build spec, one writer
   per key, atomic writes; an unusable cache directory degrades to uncached with one warning).
3. ``LayerTimes`` = median over the built layers of each kind; :func:`iteration.assemble` then
   adds all layers of each pipeline stage, simulates the schedule, and restores what a world size
   of 1 cannot show -- TP/SP, CP, EP and DP collectives, PP sends, their overlap, the optimizer
   step -- analytically on the plan's GPU spec (``cluster.gpu``).
4. Memory: the measured bytes each layer kind keeps for its backward, its backward temporaries and
   the head's, upscaled like time by the memory model's stage structure (layers per stage,
   recompute, micro-batches in flight; :class:`memory.MeasuredActivations`); weights, gradients
   and optimizer state from the exact parameter counts.  The analytic model is the check: the
   result's ``memory_check`` holds both and their difference.

The compute times are those of the *measuring* device; projecting a target GPU other than the
local one needs a measurement on that GPU kind (the result's notes say which device measured).
"""

from __future__ import annotations

import contextlib
import platform
import statistics
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

import torch

from primus_launch.errors import UserError
from primus_launch.plan import Plan
from primus_launch.projection.iteration import LayerTimes, PassTimes, assemble
from primus_launch.projection.measure.cache import MeasureCache, cache_key
from primus_launch.projection.measure.spec import BuildSpec
from primus_launch.projection.measure.timing import PieceTiming, TimingPolicy, time_piece, torch_threads
from primus_launch.projection.result import (
    MeasurementReport,
    MemoryCheck,
    PieceReport,
    ProjectionResult,
    SubstitutionReport,
)

PROTOCOL_VERSION = 2
DEFAULT_POLICY = TimingPolicy()
CPU_NOTE = "measured on the CPU: CPU timings only check the path, not GPU performance"


def _framework(plan: Plan) -> str:
    return plan.source.framework if plan.source is not None else "megatron"


def device_label(device: str) -> str:
    """What identifies the measuring hardware in the cache key."""
    d = torch.device(device)
    if d.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(d)}"
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


def make_policy(policy: Optional[TimingPolicy] = None, *, repeats: Optional[int] = None,
                cpu_clock: Optional[str] = None, threads: Optional[int] = None) -> TimingPolicy:
    """The timing policy with the keyword overrides applied (``repeats``: the minimum number of
    samples, at least 3)."""
    pol = policy or DEFAULT_POLICY
    if threads is not None:
        pol = replace(pol, threads=threads)
    if repeats is not None:
        r = max(3, repeats)
        pol = replace(pol, min_repeats=r, max_repeats=max(r, pol.max_repeats))
    return replace(pol, cpu_clock=resolve_cpu_clock(cpu_clock, pol.threads))


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


def measure_pieces(plan: Plan, device: str, *, cache: Optional[MeasureCache] = None,
                   measure_layers: int = 2, policy: Optional[TimingPolicy] = None,
                   repeats: Optional[int] = None, cpu_clock: Optional[str] = None,
                   max_cpu_seconds: Optional[float] = 600.0) -> Measured:
    """Time every piece of the plan's per-rank model (or read it from ``cache``).

    The model is built only when some piece is missing; a missing piece is measured while this
    process holds its cache key's writer lock (a concurrent run waiting on it then reads the
    record).  On the CPU, refuses (one line) when the estimated measurement time exceeds
    ``max_cpu_seconds`` (None: no limit).  Torch runs ``policy.threads`` threads meanwhile."""
    fw = _framework(plan)
    b = _builder(fw)
    pol = make_policy(policy, repeats=repeats, cpu_clock=cpu_clock)
    cpu = torch.device(device).type == "cpu"
    with torch_threads(pol.threads if cpu else None):
        spec = b.build_spec(plan, device, measure_layers)
        label = device_label(device)
        extra = {"framework_version": _framework_version(fw), "protocol": PROTOCOL_VERSION, "policy": pol.key()}
        if cpu:
            extra["cpu_clock"] = pol.cpu_clock
        material = spec.material()
        keys = {n: cache_key(fw, n, material, label, **extra) for n in spec.piece_names}
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


def _measure(b, plan: Plan, device: str, measure_layers: int, spec: BuildSpec, pol: TimingPolicy,
             missing: list[str], out: dict, hit: dict, cache: Optional[MeasureCache], keys: dict) -> None:
    from primus_launch import interrupt

    dev = torch.device(device)
    with b.world_size_one(device):
        pieces, model = b.pieces(plan, device, measure_layers, spec=spec)
        try:
            for pc in pieces:
                interrupt.check()
                if pc.name not in missing:
                    continue
                out[pc.name] = time_piece(pc.forward, pc.inputs, pc.params, dev, split=pc.split,
                                          flop_split=pc.flop_split, policy=pol)
                hit[pc.name] = False
                interrupt.check()  # never cache a piece timed across a swallowed interrupt
                if cache is not None:
                    cache.put(keys[pc.name], out[pc.name].to_dict())
        finally:
            del pieces, model


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


def cpu_measurement_seconds(plan: Plan, measure_layers: int, policy: TimingPolicy) -> float:
    """Estimated CPU seconds to measure the plan's pieces: passes x (fwd+bwd FLOPs of the pieces,
    :func:`build_mcore.measurement_flops_estimate`) / :func:`cpu_gemm_rate` -- a lower bound, since
    whole layers reach a fraction of the GEMM rate.  Passes: warm-up + the minimum samples (twice
    for a measured autograd split) + two memory passes."""
    from primus_launch.projection.measure.build_mcore import measurement_flops_estimate

    per = 2 if _framework(plan) == "torchtitan" else 1
    passes = policy.warmup * per + policy.min_repeats * per + 2
    dtype = plan.training.precision
    return measurement_flops_estimate(plan, measure_layers) * passes / cpu_gemm_rate(dtype, policy.threads)


def check_cpu_budget(plan: Plan, measure_layers: int, policy: TimingPolicy, max_s: float) -> None:
    """UserError (one line) when :func:`cpu_measurement_seconds` exceeds ``max_s``."""
    from primus_launch.projection.measure.build_mcore import measurement_flops_estimate

    est = cpu_measurement_seconds(plan, measure_layers, policy)
    if est > max_s:
        flops = measurement_flops_estimate(plan, measure_layers)
        mins = est / 60
        shown = f"{mins:.2g}" if mins < 100 else f"{round(mins, -1):.0f}"
        raise UserError(f"--measure-device=cpu: measuring {plan.model.name} pieces would take about {shown} min "
                        f"or more on this CPU ({flops / 1e12:.1f} TFLOP per pass, {policy.threads} thread(s)); use "
                        f"--dry-run or a GPU (--measure-device cuda)")


# ---------------------------------------------------------------- upscaling

def _median_pass(timings: list[PieceTiming]) -> PassTimes:
    return PassTimes(fwd_s=statistics.median(t.fwd_s for t in timings),
                     bwd_input_s=statistics.median(t.bwd_input_s for t in timings),
                     bwd_weight_s=statistics.median(t.bwd_weight_s for t in timings))


def layer_times(timings: dict[str, PieceTiming]) -> LayerTimes:
    """Median per kind of the measured pieces -> ``iteration.LayerTimes``."""
    dense = [t for n, t in timings.items() if n.startswith("dense_layer")]
    moe = [t for n, t in timings.items() if n.startswith("moe_layer")]
    moe_pt = _median_pass(moe) if moe else None
    dense_pt = _median_pass(dense) if dense else moe_pt  # an all-MoE model has no dense layer
    core = timings.get("attn_core")
    return LayerTimes(dense_layer=dense_pt, moe_layer=moe_pt, embedding=_median_pass([timings["embedding"]]),
                      head_loss=_median_pass([timings["head_loss"]]),
                      attn_core=_median_pass([core]) if core else None)


def _scaled(pt: Optional[PassTimes], num: Optional[PassTimes], den: Optional[PassTimes]) -> Optional[PassTimes]:
    if pt is None or num is None or den is None:
        return pt

    def r(a: float, b: float) -> float:
        return a / b if b > 0 else 1.0

    return PassTimes(pt.fwd_s * r(num.fwd_s, den.fwd_s), pt.bwd_input_s * r(num.bwd_input_s, den.bwd_input_s),
                     pt.bwd_weight_s * r(num.bwd_weight_s, den.bwd_weight_s))


def fp8_substituted_times(plan: Plan, lt: LayerTimes) -> LayerTimes:
    """BF16-measured layer times of an FP8 plan scaled per piece kind and pass by the dry-run
    roofline's fp8 / bf16 time ratio on the plan's GPU (``dryrun.layer_times_roofline``)."""
    from primus_launch.projection.dryrun import layer_times_roofline

    r8 = layer_times_roofline(plan)
    r16 = layer_times_roofline(plan.with_changes(training={"precision": "bf16"}))
    return LayerTimes(dense_layer=_scaled(lt.dense_layer, r8.dense_layer, r16.dense_layer),
                      moe_layer=_scaled(lt.moe_layer, r8.moe_layer, r16.moe_layer),
                      embedding=_scaled(lt.embedding, r8.embedding, r16.embedding),
                      head_loss=_scaled(lt.head_loss, r8.head_loss, r16.head_loss),
                      attn_core=_scaled(lt.attn_core, r8.attn_core, r16.attn_core))


def _fp8_substituted(spec: BuildSpec) -> bool:
    return any("instead of fp8" in s.what for s in spec.substitutions)


# ---------------------------------------------------------------- memory

def _cp_standin_bytes(plan: Plan, abytes: int) -> float:
    """Bytes of the other context-parallel ranks' K and V that the emulated CP core concatenates
    and autograd keeps: (cp - 1) local K and V blocks.  A ring keeps only its own, so they are
    taken out of the measured kept bytes."""
    m, p, t = plan.model, plan.parallel, plan.training
    if p.cp <= 1:
        return 0.0
    sb = m.seq_length // p.cp * t.micro_batch_size
    heads = m.num_attention_heads // p.tp
    if m.multi_latent_attention:
        dq, dv, kvh = m.qk_head_dim + m.qk_pos_emb_head_dim, m.v_head_dim, heads
    else:
        dq = dv = m.kv_channels
        kvh = max(1, m.kv_heads // p.tp)
    return (p.cp - 1) * abytes * sb * kvh * (dq + dv)


def _attn_io_bytes(plan: Plan, abytes: int) -> float:
    """Bytes of the attention core's q, k, v and output for one micro-batch on one rank."""
    m, p, t = plan.model, plan.parallel, plan.training
    sb = m.seq_length // p.cp * t.micro_batch_size
    heads = m.num_attention_heads // p.tp
    if m.multi_latent_attention:
        dq, dv, kvh = m.qk_head_dim + m.qk_pos_emb_head_dim, m.v_head_dim, heads
    else:
        dq = dv = m.kv_channels
        kvh = max(1, m.kv_heads // p.tp)
    return abytes * sb * (heads * dq + kvh * dq + kvh * dv + heads * dv)


def measured_implementation(device: str):
    """The activation-model variant that describes the measured modules: megatron-core's local /
    torchtitan's torch modules on the CPU keep fp32 norm copies and unfused RoPE tables
    (``memory_activations.MCORE_LOCAL``); on a GPU the dry-run's (``TE``)."""
    from primus_launch.projection.memory_activations import MCORE_LOCAL, TE

    return ("MCORE_LOCAL", MCORE_LOCAL) if torch.device(device).type == "cpu" else ("TE", TE)


def measured_activations(plan: Plan, meas: Measured, device: str):
    """:class:`memory.MeasuredActivations` from the pieces: per layer kind the median bytes kept
    (``full``), the attention core's kept bytes beyond its q, k, v and output (what selective
    recompute drops), the backward temporaries (peak - kept - output); the head's kept bytes and
    transient.  Measured without sequence parallelism (world size 1): with SP the model's SP
    difference (same tensor list with and without SP) is added."""
    from primus_launch.projection.memory import MeasuredActivations
    from primus_launch.projection.memory_activations import (
        LayerActivations,
        layer_activation_bytes,
        output_activation_bytes,
    )

    m, p, t = plan.model, plan.parallel, plan.training
    a = 4 if t.precision == "fp32" else 2
    _, impl = measured_implementation(device)
    kw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, cp=p.cp, ep=p.ep, etp=p.expert_tp, abytes=a,
              impl=impl)
    core_t = meas.timings.get("attn_core")
    standin = _cp_standin_bytes(plan, a)
    core = max(0.0, core_t.activation_bytes - _attn_io_bytes(plan, a) - standin) if core_t else 0.0

    def kind(prefix: str, moe: bool) -> Optional[LayerActivations]:
        ts = [tm for n, tm in meas.timings.items() if n.startswith(prefix)]
        if not ts:
            return None
        kept = statistics.median(tm.activation_bytes for tm in ts) - standin
        trans = statistics.median(max(0, tm.peak_bytes - tm.activation_bytes - tm.output_bytes) for tm in ts)
        sp = layer_activation_bytes(m, sp=p.sequence_parallel, moe=moe, **kw)
        nosp = layer_activation_bytes(m, sp=False, moe=moe, **kw)
        return LayerActivations(full=kept + sp.full - nosp.full, core_attention=core, layer_input=sp.layer_input,
                                backward_temp=trans + sp.backward_temp - nosp.backward_temp)

    dense = kind("dense_layer", False)
    moe = kind("moe_layer", True)
    head = meas.timings["head_loss"]
    okw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, cp=p.cp, abytes=a, impl=impl)
    o_sp = output_activation_bytes(m, sp=p.sequence_parallel, **okw)
    o_nosp = output_activation_bytes(m, sp=False, **okw)
    out = (head.activation_bytes + o_sp[0] - o_nosp[0],
           max(0, head.peak_bytes - head.activation_bytes - head.output_bytes) + o_sp[1] - o_nosp[1])
    how = "CUDA allocator" if torch.device(device).type == "cuda" else "torch MemTracker"
    note = (f"activations measured per piece on {meas.device} ({how}: bytes each layer kind keeps for backward, "
            f"backward temporaries, head/loss), upscaled by layers per stage, recompute and micro-batches in flight"
            + ("; sequence parallel applied with the model's SP difference" if p.sequence_parallel else "")
            + ("; the stand-in K/V of the other CP ranks taken out (a ring keeps only its own)" if p.cp > 1 else ""))
    return MeasuredActivations(dense=dense or moe, moe=moe, output=out, note=note)


def memory_check(plan: Plan, meas: Measured, device: str, margin: float, memory_basis: str = "reserved"):
    """(measured MemoryReport, MemoryCheck against the analytic model)."""
    from primus_launch.projection.memory import estimate_memory
    from primus_launch.projection.memory_activations import TE, layer_activation_bytes

    acts = measured_activations(plan, meas, device)
    measured = estimate_memory(plan, margin, memory_basis=memory_basis, acts=acts)
    analytic = estimate_memory(plan, margin, memory_basis=memory_basis)
    m, p, t = plan.model, plan.parallel, plan.training
    a = 4 if t.precision == "fp32" else 2
    impl_name, impl = measured_implementation(device)
    kw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, sp=p.sequence_parallel, cp=p.cp, ep=p.ep,
              etp=p.expert_tp, abytes=a)
    per_layer: dict[str, dict[str, float]] = {}
    for kind, la, moe in (("dense_layer", acts.dense, False), ("moe_layer", acts.moe, True)):
        if la is None or (kind == "dense_layer" and not any(n.startswith("dense_layer") for n in meas.timings)):
            continue
        per_layer[kind] = {"measured": float(la.full),
                           f"model_{impl_name}": layer_activation_bytes(m, moe=moe, impl=impl, **kw).full,
                           "model_TE": layer_activation_bytes(m, moe=moe, impl=TE, **kw).full}
    w_m = measured.stages[measured.worst_stage]
    w_a = analytic.stages[analytic.worst_stage]
    comps = {}
    for c in ("parameters", "gradients", "optimizer", "activations", "transient", "reserve", "total"):
        comps[c] = {"measured": int(getattr(w_m, f"{c}_bytes")), "analytic": int(getattr(w_a, f"{c}_bytes"))}
    diff = measured.peak_bytes_per_gpu / analytic.peak_bytes_per_gpu - 1.0 if analytic.peak_bytes_per_gpu else 0.0
    check = MemoryCheck(
        measured_peak_bytes_per_gpu=measured.peak_bytes_per_gpu,
        analytic_peak_bytes_per_gpu=analytic.peak_bytes_per_gpu, relative_difference=diff,
        analytic_model="projection.memory.estimate_memory (the dry-run's tensor-list model, TE implementation)",
        components=comps, per_layer=per_layer, analytic=analytic,
        notes=[f"measured activations / analytic: worst stage {comps['activations']['measured'] / max(1, comps['activations']['analytic']):.2f}x; "
               f"peak per GPU {diff:+.1%}"])
    return measured, check


# ---------------------------------------------------------------- entry point

def project_measured(plan: Plan, *, device: str | None = None, memory_margin: float = 0.05,
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
        raise UserError(f"--measure-device={device!r}: no CUDA device is visible; use cpu")
    pol = make_policy(policy, repeats=repeats, cpu_clock=cpu_clock, threads=threads)
    cpu = torch.device(device).type == "cpu"
    if cpu:
        notes.append(CPU_NOTE)
    cache = MeasureCache(cache_dir) if use_cache else None
    meas = measure_pieces(plan, device, cache=cache, measure_layers=measure_layers, policy=pol,
                          max_cpu_seconds=max_cpu_seconds)
    timings, hits, spec = meas.timings, meas.hits, meas.spec
    lt = layer_times(timings)
    fp8_sub = _fp8_substituted(spec)
    if fp8_sub:
        lt = fp8_substituted_times(plan, lt)
    res = assemble(plan, lt, "measured", record_timeline=record_timeline, memory_margin=memory_margin)
    mem, check = memory_check(plan, meas, device, memory_margin, memory_basis)
    p = plan.parallel
    fw = _framework(plan)
    clock = "CUDA events" if not cpu else f"{pol.cpu_clock} time, {pol.threads} torch thread(s)"
    notes.append(f"measured {fw} pieces on {meas.device} at world size 1 with per-GPU shard shapes "
                 f"(tp={p.tp}: heads/ffn/vocab divided; cp={p.cp}: sequence divided; ep={p.ep}: local experts); "
                 f"TP/CP/EP/DP/PP communication and the optimizer step added analytically on {plan.cluster.gpu}")
    notes.append(f"timing: {clock}; {pol.describe()}")
    unconverged = [n for n, t in timings.items() if not t.converged]
    if unconverged:
        notes.append(f"{len(unconverged)} piece(s) did not reach the {pol.target_spread:.0%} spread target within "
                     f"{pol.max_repeats} samples: {', '.join(unconverged)} (their spread is in measurement.pieces)")
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
    pieces: dict[str, PieceReport] = {}
    for n, t in timings.items():
        adj = []
        if fp8_sub and any("instead of fp8" in s.what for s in spec.substitutions_for(n)):
            adj.append("layer times scaled by the dry-run's fp8/bf16 ratio before assembly")
        pieces[n] = PieceReport(
            source="cached" if hits.get(n) else "measured", fwd_s=t.fwd_s, bwd_s=t.bwd_s, bwd_input_s=t.bwd_input_s,
            bwd_weight_s=t.bwd_weight_s, split=t.split, split_ratio=t.split_ratio,
            bwd_input_raw_s=t.bwd_input_raw_s, bwd_weight_raw_s=t.bwd_weight_raw_s, spread=t.spread,
            repeats=t.repeats, converged=t.converged, measured_dtype=spec.dtype,
            activation_bytes=t.activation_bytes, output_bytes=t.output_bytes, peak_bytes=t.peak_bytes,
            reserved_bytes=t.reserved_bytes, param_count=t.param_count,
            substitutions=[SubstitutionReport(**s.to_dict()) for s in spec.substitutions_for(n)], adjustments=adj)
    report = MeasurementReport(
        device=meas.device, framework=fw, policy=pol.describe(), clock=pol.cpu_clock if cpu else "cuda-events",
        threads=pol.threads if cpu else 0, cache_dir=cache_dir_s, cache_hits=n_hit,
        cache_warning=cache.warning if cache is not None else None, pieces=pieces,
        layer_times={k: (None if v is None else {"fwd_s": v.fwd_s, "bwd_input_s": v.bwd_input_s,
                                                 "bwd_weight_s": v.bwd_weight_s})
                     for k, v in vars(lt).items()})
    return res.model_copy(update={"notes": notes + res.notes, "measurement": report, "memory": mem,
                                  "memory_check": check})

