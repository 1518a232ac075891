"""Hybrid projection: measure real framework pieces on the local device, upscale analytically.

1. Build the plan's model at reduced depth with the framework of its recipe
   (:mod:`.build_mcore` for Megatron, :mod:`.build_titan` for TorchTitan): embedding, up to
   ``measure_layers`` dense and MoE layers, the attention core, the head with its loss -- each the
   *per-GPU shard* of the target (TP/CP/EP applied to the shapes, world size 1).
2. Time each piece for one micro-batch (:mod:`.timing`: warm-up, median of repeats, CUDA events
   or perf_counter) and record its memory; cache each piece's result on disk (:mod:`.cache`).
3. ``LayerTimes`` = median over the built layers of each kind; :func:`iteration.assemble` then
   adds all layers of each pipeline stage, simulates the schedule, and restores what a world size
   of 1 cannot show -- TP/SP, CP, EP and DP collectives, PP sends, their overlap, the optimizer
   step -- analytically on the plan's GPU spec (``cluster.gpu``).

The compute times are those of the *measuring* device; projecting a target GPU other than the
local one needs a measurement on that GPU kind (the result's notes say which device measured).
"""

from __future__ import annotations

import platform
import statistics
from pathlib import Path
from typing import Optional

import torch

from primus_launch.errors import UserError
from primus_launch.plan import Plan
from primus_launch.projection.iteration import LayerTimes, PassTimes, assemble
from primus_launch.projection.measure.cache import MeasureCache, cache_key
from primus_launch.projection.measure.timing import PieceTiming, time_piece
from primus_launch.projection.result import ProjectionResult

PROTOCOL = {"warmup": 2, "repeats": 5, "version": 1}
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


def measure_pieces(plan: Plan, device: str, *, cache: Optional[MeasureCache] = None,
                   measure_layers: int = 2, warmup: int = PROTOCOL["warmup"],
                   repeats: int = PROTOCOL["repeats"],
                   cpu_clock: Optional[str] = None,
                   max_cpu_seconds: Optional[float] = 600.0) -> tuple[dict[str, PieceTiming], dict[str, bool]]:
    """Time every piece of the plan's per-rank model; returns (name -> timing, name -> cache hit).
    Builds the model only when some piece is missing from the cache.  On the CPU, refuses (one
    line) when the estimated measurement time exceeds ``max_cpu_seconds`` (None: no limit)."""
    fw = _framework(plan)
    b = _builder(fw)
    cpu_clock = resolve_cpu_clock(cpu_clock)
    shapes = b.piece_shapes(plan, measure_layers)
    dtype = plan.training.precision if plan.training.precision != "fp8" else "bf16"
    label = device_label(device)
    extra = {"framework_version": _framework_version(fw), "warmup": warmup, "repeats": repeats,
             "protocol": PROTOCOL["version"]}
    if torch.device(device).type == "cpu":
        extra["cpu_clock"] = cpu_clock
    keys = {n: cache_key(fw, n, sh, dtype, label, **extra) for n, sh in shapes.items()}
    out: dict[str, PieceTiming] = {}
    hit: dict[str, bool] = {}
    if cache is not None:
        for n, k in keys.items():
            rec = cache.get(k)
            if rec is not None:
                out[n] = PieceTiming.from_dict(rec)
                hit[n] = True
    missing = [n for n in shapes if n not in out]
    if missing and torch.device(device).type == "cpu" and max_cpu_seconds is not None:
        _check_cpu_budget(plan, measure_layers, warmup + 2 * repeats + 2, max_cpu_seconds)
    if missing:
        dev = torch.device(device)
        with b.world_size_one(device):
            pieces, _model = b.pieces(plan, device, measure_layers)
            for pc in pieces:
                if pc.name not in missing:
                    continue
                out[pc.name] = time_piece(pc.forward, pc.inputs, pc.params, dev, warmup=warmup,
                                          repeats=repeats, flop_split=pc.flop_split, cpu_clock=cpu_clock)
                hit[pc.name] = False
                if cache is not None:
                    cache.put(keys[pc.name], out[pc.name].to_dict())
            del pieces, _model
    return out, hit


def resolve_cpu_clock(cpu_clock: Optional[str]) -> str:
    """None -> "process" with one torch thread (CPU time = compute time, robust to other jobs),
    else "wall" (process time would add up the threads' CPU seconds)."""
    if cpu_clock is None:
        return "process" if torch.get_num_threads() == 1 else "wall"
    return cpu_clock


def _check_cpu_budget(plan: Plan, measure_layers: int, passes: int, max_s: float) -> None:
    """Estimated seconds = passes x (fwd+bwd FLOPs of the pieces) / this CPU's GEMM rate in the
    plan's dtype (one 512^3 GEMM, ``localhw.gemm_flops``) -- a lower bound, since whole layers
    reach a fraction of the GEMM rate; UserError when above ``max_s``."""
    from primus_launch.projection.measure.build_mcore import measurement_flops_estimate
    from primus_launch.projection.measure.localhw import gemm_flops

    flops = measurement_flops_estimate(plan, measure_layers) * passes
    rate = gemm_flops(torch_dtype_of(plan), n=512, repeats=2)
    est = flops / rate
    if est > max_s:
        raise UserError(f"--measure-device=cpu: measuring {plan.model.name} pieces would take about "
                        f"{est / 60:.0f} min or more on this CPU ({flops / 1e12:.1f} TFLOP); use --dry-run or a GPU "
                        f"(--measure-device cuda)")


def torch_dtype_of(plan: Plan) -> torch.dtype:
    from primus_launch.projection.measure.build_mcore import torch_dtype

    return torch_dtype(plan)


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


def project_measured(plan: Plan, *, device: str | None = None, memory_margin: float = 0.05,
                     record_timeline: bool = False, cache_dir: Path | None = None,
                     measure_layers: int = 2, repeats: int = PROTOCOL["repeats"],
                     cpu_clock: Optional[str] = None, max_cpu_seconds: Optional[float] = 600.0) -> ProjectionResult:
    """Measure the plan's pieces on ``device`` ("cuda" | "cpu"; default cuda when available,
    else cpu with a note) and assemble the iteration on the plan's GPU spec (module docstring).

    ``cache_dir``: where piece measurements are cached (default :func:`cache.default_cache_dir`).
    ``cpu_clock``: on the CPU, "process" (CPU time, robust on a shared machine) or "wall";
    None: "process" with one torch thread, else "wall".
    ``max_cpu_seconds``: refuse a CPU measurement estimated to take longer (None: no limit).
    """
    notes: list[str] = []
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise UserError(f"--measure-device={device!r}: one of cpu, cuda")
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--measure-device={device!r}: no CUDA device is visible; use cpu")
    if torch.device(device).type == "cpu":
        cpu_clock = resolve_cpu_clock(cpu_clock)
        notes.append(CPU_NOTE)
        notes.append(f"CPU clock: {cpu_clock} time, {torch.get_num_threads()} torch thread(s)")
    cache = MeasureCache(cache_dir)
    timings, hits = measure_pieces(plan, device, cache=cache, measure_layers=measure_layers, repeats=repeats,
                                   cpu_clock=cpu_clock, max_cpu_seconds=max_cpu_seconds)
    lt = layer_times(timings)
    res = assemble(plan, lt, "measured", record_timeline=record_timeline, memory_margin=memory_margin)
    p = plan.parallel
    fw = _framework(plan)
    notes.append(f"measured {fw} pieces on {device_label(device)} at world size 1 with per-GPU shard shapes "
                 f"(tp={p.tp}: heads/ffn/vocab divided; cp={p.cp}: sequence divided; ep={p.ep}: local experts); "
                 f"TP/CP/EP/DP/PP communication and the optimizer step added analytically on {plan.cluster.gpu}")
    if p.cp > 1:
        notes.append("cp>1: the attention core was measured on the local sequence chunk only (ring attention's "
                     "extra KV blocks are not in the measured compute)")
    if fw == "torchtitan" and plan.model.is_moe and p.ep > 1:
        notes.append(f"torchtitan MoE: all {plan.model.num_experts} routed experts built at world size 1 (same "
                     f"expert FLOPs per rank as ep={p.ep}, smaller GEMMs)")
    if p.sequence_parallel:
        notes.append("sequence parallel: norms/dropout measured on the full sequence (SP runs them on s/tp)")
    splits = {t.split for n, t in timings.items() if n not in ("embedding", "attn_core")}
    if "flop-ratio" in splits:
        notes.append("backward split into input-grad / weight-grad by the FLOP ratio (megatron's linear "
                     "computes both in one autograd node)" if fw == "megatron" else
                     "backward split into input-grad / weight-grad by the FLOP ratio")
    if "measured" in splits:
        notes.append("backward split into input-grad / weight-grad measured (autograd input-only backward)")
    n_hit = sum(hits.values())
    notes.append(f"measurement cache: {n_hit}/{len(hits)} pieces from {cache.dir}")
    measurement = {
        "device": device_label(device), "framework": fw, "cache_dir": str(cache.dir),
        "cache_hits": n_hit, "pieces": {n: {**{k: v for k, v in t.to_dict().items() if k != "samples"},
                                            "cached": hits[n]} for n, t in timings.items()},
        "layer_times": {k: (None if v is None else {"fwd_s": v.fwd_s, "bwd_input_s": v.bwd_input_s,
                                                    "bwd_weight_s": v.bwd_weight_s})
                        for k, v in vars(lt).items()},
    }
    return res.model_copy(update={"notes": notes + res.notes, "measurement": measurement})
