"""Which op torch's SelectiveAC policy sees for torchtitan's token all-to-all (memory rounds 36, 38).

torchtitan 0.3.0's op-SAC save list (``distributed/activation_checkpoint.py``) holds
``torch.ops._c10d_functional.all_to_all_single.default``.  Its ``AllToAllTokenDispatcher``
(``models/common/token_dispatcher.py``) sends the tokens through ``torch.distributed._functional_collectives``'
``all_to_all_single`` when compiling or when ``parallelism.spmd_backend`` is ``partial_dtensor`` /
``full_dtensor`` (v0.1 / v0.2: ``all_to_all_single_autograd``, the same op), and through spmd_types'
``all_to_all`` (``torch.distributed.all_to_all``: ``c10d.alltoall_``) eager under the default ``spmd_types``.
The MoE ``op`` term of ``projection/memory/titan.py`` keeps both all-to-all outputs (``2 a Tk h`` per MoE layer)
where the policy saves them (``a2a_rows``), and ``steps/stage.py`` re-runs the forward exchanges in the backward
where it does not (``cost/titan_sac.py``).  Checked against torch and torchtitan themselves: a one-rank gloo
group, the autograd all-to-all inside a non-reentrant selective checkpoint; torchtitan's own dispatcher under its
own ``SelectiveAC`` (``tests/titan_a2a_trace.py``) for each backend, eager and compiled, against the plan the
launch-line reader makes of the same settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
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


# ---------------------------------------------------------------- torchtitan 0.3.0's dispatcher, per SPMD backend
HERE = Path(__file__).resolve().parent
CONFIGS = ("spmd_types:eager", "partial_dtensor:eager", "full_dtensor:eager", "spmd_types:compile")
LINE = ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "qwen3",
        "--config", "qwen3_30b_a3b", "--parallelism.expert_parallel_degree", "8", "--training.disable_cuda_graphs"]


@pytest.fixture(scope="module")
def traced() -> dict:
    """``tests/titan_a2a_trace.py`` over :data:`CONFIGS` in a fresh process (its process group, dynamo settings
    and torchtitan's SPMD backend are process-wide)."""
    pytest.importorskip("torchtitan")
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    run = subprocess.run([sys.executable, str(HERE / "titan_a2a_trace.py"), *CONFIGS], capture_output=True,
                         text=True, timeout=600, env=env)
    line = next((x for x in run.stdout.splitlines() if x.startswith("JSON")), None)
    assert line is not None, run.stderr[-3000:]
    return json.loads(line[4:])


def _plan_of(config: str):
    """The plan the launch-line reader makes of a per-op SAC qwen3 30B-A3B run at EP 8 with ``config``'s backend
    and compile setting."""
    from primus_launch.adapters.torchtitan_argv import plan_from_launch
    from primus_launch.plan import Cluster

    backend, mode = config.split(":")
    extra = ["--parallelism.spmd_backend", backend, "--compile.enable" if mode == "compile" else "--compile.no-enable"]
    return plan_from_launch(LINE + extra + ["activation-checkpoint:selective"],
                            Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))


@pytest.mark.parametrize("config", CONFIGS)
def test_policy_keeps_the_all_to_alls_where_the_plan_says(traced, config):
    """torchtitan's own policy saves every all-to-all output of its dispatcher, or none; the plan read from the
    same launch settings says which (``op_sac_keeps_ep_a2a``), and the memory model keeps the two token
    exchanges' outputs -- the bytes the policy's saved outputs have, ``2 a Tk h`` at the traced shape -- exactly
    then."""
    from primus_launch.projection.cost.titan_sac import op_sac_a2a_rows, op_sac_keeps_ep_a2a
    from primus_launch.projection.memory.titan import layer_activation_bytes
    from titan_a2a_trace import HIDDEN, TOKENS, TOP_K

    got = traced[config]["decisions"]
    assert got, config
    kinds = {d for _, d, _ in got}
    assert len(kinds) == 1, (config, got)
    saved = kinds == {"MUST_SAVE"}
    plan = _plan_of(config)
    assert plan.training.recompute.granularity == "op" and plan.parallel.ep == 8
    assert op_sac_keeps_ep_a2a(plan) == saved, (config, plan.training.moe_a2a_collective, plan.training.compile)
    if config.endswith("eager"):
        token_bytes = sorted(n for _, _, n in got)[-2:]   # the two token exchanges (the third: the counts)
        assert token_bytes == [2 * TOKENS * TOP_K * HIDDEN] * 2
    m = plan.model
    kw = dict(seq=m.seq_length, mbs=1, tp=1, ac="op", moe=True, ep=8)
    diff = (layer_activation_bytes(m, a2a_rows=op_sac_a2a_rows(plan), **kw).kept
            - layer_activation_bytes(m, a2a_rows=0.0, **kw).kept)
    from primus_launch.projection.memory.titan import moe_tokens
    assert diff == pytest.approx(2 * 2 * moe_tokens(m.seq_length, tp=1, ep=8) * m.moe_router_topk * m.hidden_size
                                 if saved else 0.0)


@pytest.mark.parametrize("config", CONFIGS)
def test_backward_reruns_the_forward_exchanges_where_the_plan_says(traced, config):
    """The block's backward runs its two gradient all-to-alls, plus -- where the policy recomputed them -- every
    forward exchange again; the cost model re-runs the plan's forward dispatcher collectives
    (``cost/moe_dispatch.py``: counts, tokens, combine) exactly then, and mirrors the two gradient ones."""
    from primus_launch.projection.cost.moe_dispatch import dispatcher_collectives
    from primus_launch.projection.cost.titan_sac import op_sac_reruns_ep_forward

    t = traced[config]
    plan = _plan_of(config)
    fwd, bwd = dispatcher_collectives(plan)
    assert len(bwd) == 2
    if t["forward"] is not None:
        assert t["forward"] == len(fwd)
    rerun = t["backward"] - len(bwd)
    assert op_sac_reruns_ep_forward(plan) == (rerun > 0), (config, t)
    assert rerun in (0, len(fwd))


def test_launch_line_round_trips_the_collective():
    """A plan whose all-to-all collective is changed renders ``--parallelism.spmd_backend`` (spmd_types for the
    c10d collective, partial_dtensor for the functional one) and reads back to the same plan; a dense model's
    line is left alone."""
    from primus_launch.adapters.torchtitan_argv import plan_from_launch, render_launch
    from primus_launch.plan import Cluster

    cl = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)
    argv = LINE + ["activation-checkpoint:selective"]
    plan = plan_from_launch(argv, cl)
    assert plan.training.moe_a2a_collective == "c10d"
    out = render_launch(plan.with_changes(training={"moe_a2a_collective": "functional"}), argv)
    assert out[out.index("--parallelism.spmd_backend") + 1] == "partial_dtensor"
    assert plan_from_launch(out, cl).training.moe_a2a_collective == "functional"
    back = render_launch(plan_from_launch(out, cl).with_changes(training={"moe_a2a_collective": "c10d"}), out)
    assert plan_from_launch(back, cl).training.moe_a2a_collective == "c10d"
    dense = ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "llama3",
             "--config", "llama3_8b", "--training.disable_cuda_graphs"]
    assert plan_from_launch(dense, cl).training.moe_a2a_collective == "functional"
