"""A recipe with Megatron's EP all-to-all overlap that megatron-core refuses is refused, not projected (user21).

Megatron-LM examples/mixtral/train_mixtral_8x7b_distributed.sh with ``--overlap-moe-expert-parallel-comm
--delay-wgrad-compute`` added, as a team tries the overlap, runs PP 4 without a virtual pipeline: megatron-core's
``TransformerConfig.__post_init__`` asserts "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be
specified when pipeline_model_parallel_size > 1", so the run never starts; the dry-run priced it 1.2 % faster than
without the flags.  Truth: megatron-core 0.16.1's own TransformerConfig, built on the CPU for each combination.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from primus_launch.plan import Plan, ep_overlap_problems, legality_problems

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py \\
    --use-mcore-models --disable-bias-linear --seq-length 4096 --max-position-embeddings 32768 \\
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \\
    --normalization RMSNorm --position-embedding-type rope --swiglu --untie-embeddings-and-output-weights \\
    --group-query-attention --num-query-groups 8 --no-position-embedding --rotary-base 1000000 \\
    --num-experts 8 --moe-router-topk 2 --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2 \\
    --moe-grouped-gemm --moe-token-dispatcher-type alltoall --overlap-param-gather --overlap-grad-reduce \\
    --tokenizer-type NullTokenizer --vocab-size 32000 --mock-data \\
    --micro-batch-size 1 --global-batch-size 256 --lr 1e-4 --train-iters 500 --bf16 \\
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --expert-model-parallel-size 8 \\
    --expert-tensor-parallel-size 1 --use-distributed-optimizer --sequence-parallel {extra}
"""


def _project(tmp_path: Path, extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / "mixtral.sh"
    path.write_text(SCRIPT.format(extra=extra))
    return subprocess.run([sys.executable, "-m", "primus_launch", "--project", str(path), "--dry-run"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_overlap_without_virtual_pipeline_refused(tmp_path: Path) -> None:
    r = _project(tmp_path, "--overlap-moe-expert-parallel-comm --delay-wgrad-compute")
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout[:300])
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith("primus-launch: error: --overlap-moe-expert-parallel-comm=True: needs a virtual pipeline")
    # the same recipe with a virtual pipeline is what megatron-core runs, and it is projected
    ok = _project(tmp_path, "--overlap-moe-expert-parallel-comm --delay-wgrad-compute "
                            "--num-layers-per-virtual-pipeline-stage 4")
    assert ok.returncode == 0, ok.stderr
    assert "VPP=2" in ok.stdout
    # the delayed wgrad alone: megatron-core asserts the overlap
    alone = _project(tmp_path, "--delay-wgrad-compute --num-layers-per-virtual-pipeline-stage 4")
    assert alone.returncode == 2 and "--delay-wgrad-compute=True" in alone.stderr


def _mcore_refuses(pp: int, vpp: int, ep: int, dispatcher: str, full: bool, overlap: bool, delay: bool,
                   fp32: bool, shared_overlap: bool, mtp: int) -> bool:
    """Does megatron-core's TransformerConfig (the installed 0.16.1) raise for these settings?"""
    torch = pytest.importorskip("torch")
    tc = pytest.importorskip("megatron.core.transformer.transformer_config")
    kw = dict(num_layers=8, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_moe_experts=8,
              moe_ffn_hidden_size=128, moe_router_topk=2, moe_grouped_gemm=True,
              moe_token_dispatcher_type=dispatcher, pipeline_model_parallel_size=pp,
              virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None, expert_model_parallel_size=ep,
              bf16=not fp32, params_dtype=torch.float32 if fp32 else torch.bfloat16,
              pipeline_dtype=torch.float32 if fp32 else torch.bfloat16,
              overlap_moe_expert_parallel_comm=overlap, delay_wgrad_compute=delay,
              use_cpu_initialization=True, perform_initialization=False, hidden_dropout=0.0, attention_dropout=0.0)
    if shared_overlap:
        kw.update(moe_shared_expert_intermediate_size=128, moe_shared_expert_overlap=True)
    if mtp:
        kw.update(mtp_num_layers=mtp)
    if full:
        kw.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    try:
        tc.TransformerConfig(**kw)
    except (AssertionError, ValueError):
        return True
    return False


def _plan(base: Plan, pp: int, vpp: int, ep: int, dispatcher: str, full: bool, overlap: bool, delay: bool,
          fp32: bool, shared_overlap: bool, mtp: int) -> Plan:
    data = base.model_dump()
    data["parallel"].update(pp=pp, vpp=vpp, ep=ep)
    data["model"].update(mtp_num_layers=mtp)
    t = data["training"]
    t.update(moe_token_dispatcher={"flex": "deepep"}.get(dispatcher, dispatcher), overlap_moe_expert_parallel_comm=overlap,
             delay_wgrad_compute=delay, moe_shared_expert_overlap=shared_overlap,
             precision="fp32" if fp32 else "bf16",
             pipeline_schedule="interleaved_1f1b" if vpp > 1 else "1f1b")
    t["recompute"].update(granularity="full" if full else "none", method="uniform",
                          num_layers=1 if full else None)
    return Plan.model_construct(**{k: getattr(base, k) for k in type(base).model_fields} |
                                {s: type(getattr(base, s)).model_validate(data[s])
                                 for s in ("model", "parallel", "training")})


def test_rules_match_megatron_core() -> None:
    """Every combination of the settings the rule reads: the plan's EP-overlap problems are non-empty exactly
    where megatron-core 0.16.1's TransformerConfig raises (each rule also holds at Megatron-LM main d98e8a64dd)."""
    from primus_launch.adapters import load_recipe

    base = load_recipe(str(ROOT / "recipes/megatron/qwen3_235b_a22b.sh"))
    assert base.model.is_moe
    checked = refused = 0
    grid = [(pp, vpp, ep, disp, full, overlap, delay, False, False, 0) for pp, vpp, ep, disp, full, overlap, delay
            in itertools.product((1, 2), (1, 2), (1, 2), ("alltoall", "allgather", "flex"), (False, True),
                                 (False, True), (False, True)) if not (vpp > 1 and pp == 1)]
    # the model-side rules at a point the others allow (one MTP layer with PP 1: core_v0.16.1 asserts PP > 1, main
    # does not -- the tuner's rule, not the plan's)
    grid += [(2, 2, 2, "alltoall", False, True, delay, fp32, shared, mtp) for delay in (False, True)
             for fp32, shared, mtp in ((True, False, 0), (False, True, 0), (False, False, 2), (False, False, 1))]
    for case in grid:
        plan = _plan(base, *case)
        ours = bool(ep_overlap_problems(plan))
        theirs = _mcore_refuses(*case)
        assert ours == theirs, (case, ep_overlap_problems(plan))
        checked += 1
        refused += ours
    assert checked == 152 and 0 < refused < checked


def test_rule_is_in_plan_legality() -> None:
    """The rule is the plan's own: a Plan with the overlap on PP 4 without VPP is not built (the adapters, the
    tuner's candidates and the projection all go through it)."""
    from primus_launch.adapters import load_recipe

    base = load_recipe(str(ROOT / "recipes/megatron/qwen3_235b_a22b.sh"))
    assert base.parallel.pp > 1 and base.parallel.vpp == 1 and base.parallel.ep > 1
    with pytest.raises(ValueError, match="virtual pipeline"):
        base.with_changes(training={"overlap_moe_expert_parallel_comm": True,
                                    "recompute": {"granularity": "none", "num_layers": None}})
    bad = _plan(base, base.parallel.pp, 1, base.parallel.ep, "alltoall", False, True, False, False, False, 0)
    assert any(p[0] == "training.overlap_moe_expert_parallel_comm" for p in legality_problems(bad))
