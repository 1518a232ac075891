#!/usr/bin/env python
"""THE prepared GPU check of the measured path: measured vs dry-run, per piece, time and memory.

On a GPU (``--device cuda``, the default when one is visible) it measures the real framework
pieces of a bundled recipe (default ``recipes/megatron/llama3.1_8b.sh``: Llama 3.1 8B, TP 2, 8192
tokens) at world size 1 with CUDA events and the caching allocator's counters, projects the run on
the GPU it runs on (``--gpu``: default from the device's name), prices the same plan in dry-run,
and prints, per piece kind, the measured forward / backward milliseconds beside the dry-run's
(``cost.roofline.layer_times_roofline``) and their ratio; per layer kind the bytes kept for the
backward (measured vs the dry-run's tensor-list model) and, on a GPU, the pieces' allocated and
reserved peaks; the worst stage's activations, allocated and reserved peak (measured pieces
upscaled vs the dry-run's memory model); the iteration time.  Budget: under 10 minutes on one H100
(one recipe: the build, a few seconds of samples per piece, two memory passes).

``--smoke``: the same check on the CPU at tiny size (the recipe through
``scripts/validation/tiny_plans.py``, three one-pass samples per piece), so that the script is
known to run where no GPU is lent; its ratios say nothing about a GPU.  Without a GPU (a CPU-only
torch build, or none visible) and without ``--device``, the script says why in one line and runs
the smoke check instead.  Failures end with one line on stderr: exit 2 for a bad argument or
recipe, ``--device cuda`` without a GPU, or a piece that does not fit the device (out of memory);
exit 1 for anything else, or a piece without a positive finite time.  ``--gpu``: the database GPU
both projections use; by default the device's own (``measure.device.gpu_of_device``: name, memory,
``gcnArchName``), else the recipe's, with a note.

    python scripts/gpu_check.py [--recipe R] [--gpu h100-sxm] [--out results.json]
    python scripts/gpu_check.py --smoke
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "validation"))
DEFAULT_RECIPE = "recipes/megatron/llama3.1_8b.sh"
KINDS = ("embedding", "dense_layer", "moe_layer", "dense_window_layer", "moe_window_layer", "attn_core",
         "mtp_extra", "head_loss")


def device_gpu() -> str | None:
    """The hardware database's name of the visible CUDA / ROCm device, if it has one
    (:func:`primus_launch.projection.measure.device.gpu_of_device`)."""
    from primus_launch.projection.measure.device import local_device_gpu

    return local_device_gpu()[1]


def bad_pieces(meas) -> list[str]:
    """Measured pieces whose time is not a positive finite number (a broken measurement)."""
    import math

    return [n for n, pc in meas.measurement.pieces.items()
            if not all(math.isfinite(v) and v > 0 for v in (pc.fwd_s, pc.bwd_s))]


def _ratio(a: float, b: float) -> str:
    return f"{a / b:6.2f}" if b else "     -"


def report(meas, dry, plan) -> list[str]:
    """The per-piece, per-layer and per-stage comparison lines (module docstring)."""
    from primus_launch.projection.cost.roofline import layer_times_roofline

    out = [f"{'piece kind':20s} {'measured fwd':>12s} {'bwd':>9s} | {'dry-run fwd':>11s} {'bwd':>9s} | "
           f"{'ratio fwd':>9s} {'bwd':>6s}   (ms, one micro-batch, one GPU)"]
    roof = layer_times_roofline(plan)
    lt = meas.measurement.layer_times
    for kind in KINDS:
        m, d = lt.get(kind), getattr(roof, kind, None)
        if m is None or d is None:
            continue
        mb, db = m["bwd_input_s"] + m["bwd_weight_s"], d.bwd_input_s + d.bwd_weight_s
        out.append(f"{kind:20s} {m['fwd_s'] * 1e3:12.3f} {mb * 1e3:9.3f} | {d.fwd_s * 1e3:11.3f} {db * 1e3:9.3f} | "
                   f"{_ratio(m['fwd_s'], d.fwd_s):>9s} {_ratio(mb, db)}")
    chk = meas.memory_check
    mib = 2 ** 20
    out.append("")
    out.append(f"{'layer kind':20s} {'kept measured':>13s} {'dry-run':>9s} {'ratio':>6s} | "
               f"{'peak alloc':>10s} {'reserved':>9s}   (MiB, one micro-batch; peak/reserved: forward + backward)")
    for kind, v in chk.per_layer.items():
        model = v.get("model_TE", v.get("model_TITAN", 0.0))
        peak, res = v.get("measured_peak"), v.get("measured_reserved")
        out.append(f"{kind:20s} {v['measured'] / mib:13.2f} {model / mib:9.2f} {_ratio(v['measured'], model):>6s} | "
                   + (f"{peak / mib:10.1f} {res / mib:9.1f}" if peak is not None else f"{'-':>10s} {'-':>9s}"))
    out.append("")
    out.append(f"{'worst stage':20s} {'measured':>9s} {'dry-run':>9s} {'ratio':>6s}   (GiB per GPU)")
    for comp in ("activations", "total", "reserved"):
        c = chk.components.get(comp)
        if c is not None:
            out.append(f"{comp:20s} {c['measured'] / 2**30:9.2f} {c['analytic'] / 2**30:9.2f} "
                       f"{_ratio(c['measured'], c['analytic']):>6s}")
    out.append(f"{'peak (verdict basis)':20s} {meas.memory.peak_bytes_per_gpu / 2**30:9.2f} "
               f"{dry.memory.peak_bytes_per_gpu / 2**30:9.2f} "
               f"{_ratio(meas.memory.peak_bytes_per_gpu, dry.memory.peak_bytes_per_gpu):>6s}")
    out.append("")
    out.append(f"iteration time: measured {meas.iteration_time_s:.3f} s, dry-run {dry.iteration_time_s:.3f} s, "
               f"ratio {meas.iteration_time_s / dry.iteration_time_s:.3f}")
    return out


def main(argv: list[str] | None = None) -> int:
    """The check; every failure ends with one line on stderr: exit 2 for a bad argument or recipe or a
    measurement the device cannot hold (out of memory), 1 for anything else (set
    ``PRIMUS_LAUNCH_TRACEBACK=1`` for the traceback)."""

    from primus_launch.errors import UserError, one_line
    from primus_launch.plan import PlanError

    try:
        return _check(argv)
    except (UserError, PlanError) as e:
        print(f"gpu_check: error: {one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:
        if os.environ.get("PRIMUS_LAUNCH_TRACEBACK"):
            raise
        print(f"gpu_check: failed: {type(e).__name__}: {' '.join(str(e).split())[:300]} "
              "(PRIMUS_LAUNCH_TRACEBACK=1 for the traceback)", file=sys.stderr)
        return 1


def _check(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default=DEFAULT_RECIPE, help=f"bundled recipe to check (default {DEFAULT_RECIPE})")
    ap.add_argument("--device", default=None, choices=["cuda", "cpu"], help="cuda (default when visible) or cpu")
    ap.add_argument("--gpu", help="GPU kind of both projections (default: the device's, else the recipe's)")
    ap.add_argument("--smoke", action="store_true", help="tiny plan on the CPU: checks that the script runs")
    ap.add_argument("--out", help="write both results as JSON here")
    a = ap.parse_args(argv)

    import torch

    from primus_launch.adapters import load_recipe
    from primus_launch.errors import UserError
    from primus_launch.projection.api import project
    from primus_launch.projection.measure.device import local_device_gpu, no_gpu_reason
    from primus_launch.projection.measure.upscale import POLICY_ENV

    smoke = a.smoke
    if not smoke and not torch.cuda.is_available():
        if a.device == "cuda":
            raise UserError(f"--device=cuda: {no_gpu_reason()}")
        if a.device is None:  # nothing to measure a GPU on: say why, and check the path instead
            print(f"gpu_check: no GPU: {no_gpu_reason()}; running the --smoke check on the CPU instead "
                  "(its ratios say nothing about a GPU)", file=sys.stderr)
            smoke = True
    device = "cpu" if smoke else (a.device or "cuda")
    dev_name, dev_gpu = local_device_gpu() if device == "cuda" else ("", None)
    gpu = a.gpu or dev_gpu
    plan = load_recipe(ROOT / a.recipe, {"gpu": gpu} if gpu else None)
    if device == "cuda" and not a.gpu and dev_gpu is None:
        print(f"gpu_check: note: the device {dev_name!r} is no GPU of the hardware database; projecting on the "
              f"recipe's {plan.cluster.gpu} (pass --gpu to choose)", file=sys.stderr)
    if smoke:
        from tiny_plans import tiny

        plan = tiny(plan)
        # three one-pass samples per piece, no round-robin window (the measured path's policy override)
        os.environ[POLICY_ENV] = "warmup=1,min_repeats=3,max_repeats=3,min_sample_s=0,max_piece_s=1,min_window_s=0"
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else (
        f"ROCm {torch.version.hip}" if getattr(torch.version, "hip", None) else "CPU-only build")
    print(f"torch {torch.__version__} ({build}), measuring on "
          + (f"{dev_name} ({dev_gpu or 'not in the hardware database'})" if device == "cuda" else "the CPU")
          + (" (--smoke: a tiny plan, the ratios say nothing about a GPU)" if smoke else ""))
    print(f"{a.recipe}: {plan.model.name}, {plan.parallel_summary()}, projected on {plan.cluster.gpu}")
    t0 = time.perf_counter()
    dry = project(plan, dry_run=True)
    meas = project(plan, dry_run=False, measure_device=device,
                   cache_dir=Path(tempfile.mkdtemp(prefix="primus-gpu-check-")))  # as the CLI projects it
    took = time.perf_counter() - t0
    for line in report(meas, dry, plan):
        print(line)
    ms = meas.measurement
    print(f"measured {len(ms.pieces)} pieces in {took:.0f} s ({ms.clock}); substitutions per piece: --out JSON")
    for n in meas.memory_check.notes:
        print(f"note: {n}")
    if a.out:
        from primus_launch.fileio import atomic_write_text

        atomic_write_text(a.out, json.dumps({"measured": meas.to_json_dict(), "dry_run": dry.to_json_dict(),
                                             "seconds": took}, indent=1, default=str))
    bad = bad_pieces(meas)
    if bad:
        print(f"gpu_check: failed: pieces without a positive finite time: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
