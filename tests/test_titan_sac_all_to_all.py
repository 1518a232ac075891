"""Which op torch's SelectiveAC policy sees for torchtitan's token all-to-all (memory round 36).

torchtitan 0.3.0's op-SAC save list (``distributed/activation_checkpoint.py``) holds
``torch.ops._c10d_functional.all_to_all_single.default``; its expert-parallel dispatch and combine send the
tokens through ``torch.distributed._functional_collectives.all_to_all_single_autograd``.  The MoE ``op`` term
of ``projection/memory/titan.py`` keeps both all-to-all outputs (``2 a Tk h`` per MoE layer) on the premise
that the policy sees the autograd collective under the plain functional op's name, so the save-list entry
catches the token exchanges, not only the split-count exchange.  Checked here against torch itself: a
one-rank gloo group, the autograd all-to-all inside a non-reentrant selective checkpoint.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed._functional_collectives import all_to_all_single_autograd
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts


def _ops_seen_by_sac_policy() -> tuple[list[str], list[str]]:
    forward: list[str] = []
    recompute: list[str] = []
    a2a = torch.ops._c10d_functional.all_to_all_single.default

    def policy(ctx, func, *args, **kwargs):  # noqa: ANN001, ANN202 - torch's policy signature
        (recompute if ctx.is_recompute else forward).append(str(func))
        return CheckpointPolicy.MUST_SAVE if func == a2a else CheckpointPolicy.PREFER_RECOMPUTE

    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        group = dist.group.WORLD

        def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            rows = [x.shape[0]]
            y = all_to_all_single_autograd(x @ w, rows, rows, group)
            return (y * 2.0).sum()

        x = torch.randn(8, 4, requires_grad=True)
        w = torch.randn(4, 4, requires_grad=True)
        out = checkpoint(block, x, w, use_reentrant=False,
                         context_fn=lambda: create_selective_checkpoint_contexts(policy))
        out.backward()
    finally:
        if owned:
            dist.destroy_process_group()
    return forward, recompute


def test_token_all_to_all_is_seen_as_the_functional_op_on_the_save_list() -> None:
    forward, _ = _ops_seen_by_sac_policy()
    assert "_c10d_functional.all_to_all_single.default" in forward
    assert not any(op.startswith("_c10d_functional_autograd.") for op in forward)


def test_torchtitan_save_list_names_that_op() -> None:
    from torchtitan.distributed import activation_checkpoint as ac

    src = open(ac.__file__).read()
    assert "torch.ops._c10d_functional.all_to_all_single.default" in src
