#!/usr/bin/env python
"""What the measuring process's conditions do to a piece's time on this CPU: glibc's allocator and
the caches.

The pieces are those ``scripts/validate_measure.py`` measures (megatron-core GPT, hidden 256, FFN
768, 8 heads / 4 groups, sequence 256, micro-batch 2, bf16), built by the measured path's own
builder, one torch thread, pinned to one core.

1. Allocator (``projection.measure.cpu_alloc``): the dense layer in a fresh process with glibc's
   defaults, then in another with freed memory kept (``keep_freed_memory``), alternating
   ``--rounds`` times; median per forward + backward over ``--iters`` iterations of the thread's
   user time, system time and minor page faults (``getrusage(RUSAGE_THREAD)``).  How many the
   defaults fault depends on what the process freed before (glibc's dynamic thresholds), so a
   third process fixes glibc's initial thresholds (128 KiB, ``GLIBC_INITIAL_BYTES``: the dynamic
   rule off), where every activation above them is mmapped afresh: the faults without reuse.
2. Caches (``projection.measure.timing.flush_buffer``): in one process (freed memory kept), each
   piece's forward + backward timed ``--iters`` times as interleaved pairs by the measured path's
   own sampler (``timing.PieceSampler``) -- warm caches, then with the eviction buffer updated
   before the forward and before the backward (untimed) -- and the median of the pairs' ratios.

    python scripts/piece_conditions.py [--rounds 2] [--iters 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pieces():
    import torch

    sys.path.insert(0, str(ROOT / "scripts"))
    from validate_measure import _plan

    from primus_launch.projection.measure import build_mcore
    from primus_launch.projection.measure.cpu_pin import pin_rank

    torch.set_num_threads(1)
    pin_rank(0)  # rank 0's core, as the measuring process (cpu_pin)
    return build_mcore, _plan(world=1)


def _sampler(pc, flush: bool):
    """The measured path's own sampler (``timing.PieceSampler``) for one piece, one forward +
    backward per sample (3 warm-ups, no reference workload), caches evicted before each pass or
    not."""
    import torch

    from primus_launch.projection.measure.timing import PieceSampler, TimingPolicy

    pol = TimingPolicy(warmup=3, min_sample_s=0.0, max_inner=1, noise_probe=False, flush_cache=flush)
    return PieceSampler(pc.forward, pc.inputs, pc.params, torch.device("cpu"), split=pc.split,
                        flop_split=pc.flop_split, policy=pol)


def _allocator_child(mode: str, iters: int) -> dict:
    """``mode``: "default" (glibc's defaults), "keep" (``keep_freed_memory``) or "fresh" (glibc's
    initial thresholds fixed)."""
    import resource

    from primus_launch.projection.measure.cpu_alloc import GLIBC_INITIAL_BYTES, keep_freed_memory, set_thresholds

    applied = {"default": lambda: False, "keep": keep_freed_memory,
               "fresh": lambda: set_thresholds(GLIBC_INITIAL_BYTES, GLIBC_INITIAL_BYTES)}[mode]()
    build_mcore, plan = _pieces()
    with build_mcore.world_size_one("cpu"):
        pieces, _ = build_mcore.pieces(plan, "cpu", 2)
        sp = _sampler(next(p for p in pieces if p.name.startswith("dense_layer")), flush=False)
        xs = []
        for _ in range(iters):
            r0 = resource.getrusage(resource.RUSAGE_THREAD)
            sp.sample()
            r1 = resource.getrusage(resource.RUSAGE_THREAD)
            xs.append((r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt))
    return {"applied": applied, "user_ms": statistics.median(x[0] for x in xs) * 1e3,
            "sys_ms": statistics.median(x[1] for x in xs) * 1e3, "minflt": statistics.median(x[2] for x in xs)}


def _cache_child(iters: int) -> dict:
    import torch

    from primus_launch.projection.measure.cpu_alloc import keep_freed_memory
    from primus_launch.projection.measure.timing import flush_buffer

    keep_freed_memory()
    build_mcore, plan = _pieces()
    buf = flush_buffer(torch.device("cpu"))
    out = {}
    with build_mcore.world_size_one("cpu"):
        pieces, _ = build_mcore.pieces(plan, "cpu", 2)
        for pc in pieces:
            if pc.name == "embedding" or pc.name.endswith("#1"):
                continue
            warm, cold = _sampler(pc, flush=False), _sampler(pc, flush=True)
            for _ in range(iters):  # interleaved pairs
                warm.sample()
                cold.sample()
            out[pc.name] = {"warm_ms": statistics.median(warm.tot) * 1e3, "evicted_ms": statistics.median(cold.tot) * 1e3,
                            "ratio": statistics.median(c / w for w, c in zip(warm.tot, cold.tot)),
                            "buffer_mib": buf.numel() * buf.element_size() / 2 ** 20}
    return out


def _run(*args: str) -> dict:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--child", choices=("default", "keep", "fresh", "cache"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        r = _cache_child(args.iters) if args.child == "cache" else _allocator_child(args.child, args.iters)
        print(json.dumps(r))
        return 0
    print(f"1. allocator: dense layer forward + backward, a fresh process each, median of {args.iters} "
          f"iterations (thread user ms, system ms, minor faults)")
    for i in range(args.rounds):
        for mode in ("default", "keep", "fresh"):
            r = _run("--child", mode, "--iters", str(args.iters))
            label = {"default": "glibc defaults   ", "keep": "freed memory kept", "fresh": "initial, fixed   "}[mode]
            if mode != "default" and not r["applied"]:
                label = "mallopt refused  "
            print(f"  round {i + 1} {label}: user {r['user_ms']:5.1f}  system {r['sys_ms']:4.1f}  "
                  f"faults {r['minflt']:6.0f}")
    r = _run("--child", "cache", "--iters", str(args.iters))
    mib = next(iter(r.values()))["buffer_mib"] if r else 0
    print(f"2. caches: forward + backward, warm vs evicted ({mib:.0f} MiB buffer updated before each pass), "
          f"{args.iters} interleaved pairs, medians")
    for name, v in r.items():
        print(f"  {name:14s}: warm {v['warm_ms']:6.2f} ms, evicted {v['evicted_ms']:6.2f} ms, "
              f"ratio {v['ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
