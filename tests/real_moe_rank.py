"""What rank 0 of a real 2-process expert-parallel MoE layer computes on (test helper, CPU only).

    python tests/real_moe_rank.py '[<plan json>, ...]'

Starts 2 processes (``torch.multiprocessing`` spawn, gloo, ``gloo_lab.realrun.init_rank``), builds for each plan
megatron-core's real EP=2 model of one MoE layer (``build_mcore.build_gpt(per_rank=False)`` inside
``initialize_model_parallel(expert_model_parallel_size=2)``), gives both ranks the same router
weights and the same input (:func:`same_on_every_rank`) and runs the layer forward and backward.
Prints, as JSON, per plan rank 0's router weight shape, local expert count, the rows each of its
experts received (``tokens_per_expert``, ``expert_rows``) and the output shape -- the truth
``tests/test_mirror_ranks.py`` holds the world-size-1 piece to.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
# the validation harness (gloo_lab) lives with the validation scripts
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "validation"))


def same_on_every_rank(layer, seq: int, mbs: int, hidden: int):
    """Set ``layer``'s router weight and return an input [seq, mbs, hidden], both from fixed seeds,
    so that every rank (and the world-size-1 piece) routes the same tokens the same way."""
    import torch

    g = torch.Generator().manual_seed(7)
    w = layer.mlp.router.weight
    with torch.no_grad():
        w.copy_(torch.randn(w.shape, generator=g, dtype=torch.float32).to(w.dtype))
    return torch.randn(seq, mbs, hidden, generator=g, dtype=torch.float32).to(w.dtype)


def observe(layer, x) -> dict:
    """Run ``layer`` forward and backward on ``x``; what its experts and dispatcher saw."""
    seen: dict = {}
    experts = layer.mlp.experts
    forward = experts.forward

    def record(tokens, tokens_per_expert, probs):
        seen["tokens_per_expert"] = [int(n) for n in tokens_per_expert]
        seen["expert_rows"] = int(tokens.shape[0])
        return forward(tokens, tokens_per_expert, probs)

    experts.forward = record
    try:
        x = x.detach().clone().requires_grad_(True)
        y, _ = layer(x, attention_mask=None)
        y.float().sum().backward()
    finally:
        del experts.forward
    seen.update(router=list(layer.mlp.router.weight.shape), local_experts=layer.mlp.num_local_experts,
                output=list(y.shape), input_grad=bool(x.grad is not None and x.grad.abs().sum() > 0))
    return seen


def _ranks(rank: int, port: int, plans_json: str) -> list:
    from megatron.core import parallel_state as ps

    from primus_launch.frameworks import mcore_cpu
    from primus_launch.plan import Plan
    from gloo_lab import realrun

    from primus_launch.projection.measure import build_mcore

    realrun.init_rank(rank, 2, port, "cpu", 1, pin=False)
    out = []
    for pj in json.loads(plans_json):
        plan = Plan.model_validate(pj)
        ps.initialize_model_parallel(1, 1, expert_model_parallel_size=plan.parallel.ep)
        mcore_cpu.seed_rng_tracker(1234)
        with mcore_cpu.eager_fusions("cpu"):
            model = build_mcore.build_gpt(plan, num_dense=0, num_moe=1, per_rank=False, device="cpu")
            layer = model.decoder.layers[0]
            m = plan.model
            out.append(observe(layer, same_on_every_rank(layer, m.seq_length, plan.training.micro_batch_size,
                                                         m.hidden_size)))
        ps.destroy_model_parallel()
    return out


def main(plans_json: str) -> list:
    from real_run_trace import run_two

    return run_two(_ranks, plans_json, 600)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
