#!/usr/bin/env python
"""How unbalanced is a Megatron run with ``--moe-router-force-load-balancing``?

megatron-core 0.16.1 ``transformer/moe/router.py`` ``TopKRouter.forward`` replaces the router's
logits by ``moe_utils.RandomSTE`` -- fresh N(0, 1) values per token (rank-specific seed) -- before
the top-k, so every token picks k distinct experts uniformly at random.  This script samples that
routing for the held-out MoE rows of ``current_runs.json`` that set the flag (their E, top-k, EP and
tokens per EP rank per micro-batch = micro-batch x sequence / (TP x CP)) and prints, per row, the
mean over samples of (busiest EP rank's routed tokens / mean) and (busiest expert / mean): the
factor by which the slowest rank's grouped GEMM and all-to-all volume exceed the balanced model's.

    python scripts/validation/forced_balance_imbalance.py [--samples 8]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def imbalance(E: int, k: int, ep: int, tokens: int, samples: int, gen: torch.Generator) -> tuple[float, float]:
    """(busiest rank / mean, busiest expert / mean) of uniform top-k routing, averaged over samples."""
    rk = ex = 0.0
    for _ in range(samples):
        idx = torch.randn(ep * tokens, E, generator=gen).topk(k, dim=1).indices.flatten()
        per_e = torch.bincount(idx, minlength=E).double()
        per_r = per_e.view(ep, E // ep).sum(1)
        rk += (per_r.max() / per_r.mean()).item()
        ex += (per_e.max() / per_e.mean()).item()
    return rk / samples, ex / samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=8)
    args = ap.parse_args()
    rows = json.loads(Path(__file__).with_name("current_runs.json").read_text())
    gen = torch.Generator().manual_seed(0)
    print(f"{'row':68s} {'E':>4s} {'k':>2s} {'EP':>3s} {'tok/rank':>8s}  rank max/mean  expert max/mean")
    for r in rows:
        a, p, t = r["architecture"], r["parallelism"], r["training"]
        if not a.get("num_experts") or "--moe-router-force-load-balancing" not in (r.get("megatron_flags") or []):
            continue
        tokens = t["micro_batch_size"] * a["seq_length"] // (p["tp"] * p["cp"])
        rk, ex = imbalance(a["num_experts"], a["moe_topk"], p["ep"], tokens, args.samples, gen)
        print(f"{r['id']:68s} {a['num_experts']:4d} {a['moe_topk']:2d} {p['ep']:3d} {tokens:8d}  {rk:12.4f}  {ex:15.4f}")


if __name__ == "__main__":
    main()
