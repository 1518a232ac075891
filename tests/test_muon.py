"""Muon (Megatron ``--optimizer muon`` / ``dist_muon``): the parameter tensors and their Muon / scalar split
against megatron-core 0.16.1 models built on the meta device, the layer-wise owner deal against megatron-core's
own ``LayerWiseDistributedOptimizer.shard_params``, the Newton-Schulz FLOPs against Emerging-Optimizers v0.1.0's
``newton_schulz`` traced by torch's FLOP counter, and the reader on the Kimi-K2 Bridge rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from primus_launch.plan import Plan, PlanError
from primus_launch.projection.memory.muon import _deal, owner_shares, stage_tensors, state_bytes
from primus_launch.projection.memory.params import arch_key

ROOT = Path(__file__).resolve().parents[1]
EO = Path(os.environ.get("EMERGING_OPTIMIZERS_MIRROR", "/work/.mirror/NVIDIA-NeMo+Emerging-Optimizers/repo"))


def _tiny(moe: bool) -> Plan:
    """A small MLA + MoE (shared expert, first layer dense) or GQA dense plan, PP 2 with the embedding on stage 0."""
    if moe:
        model = dict(num_layers=4, hidden_size=256, ffn_hidden_size=512, num_attention_heads=4, vocab_size=1024,
                     seq_length=128, num_experts=8, moe_router_topk=2, moe_ffn_hidden_size=64,
                     moe_shared_expert_intermediate_size=64, moe_dense_first_layers=1, multi_latent_attention=True,
                     q_lora_rank=96, kv_lora_rank=64, qk_head_dim=32, qk_pos_emb_head_dim=16, v_head_dim=32,
                     untie_embeddings_and_output_weights=True)
    else:
        model = dict(num_layers=4, hidden_size=256, ffn_hidden_size=512, num_attention_heads=8, num_query_groups=2,
                     vocab_size=1024, seq_length=128, untie_embeddings_and_output_weights=True)
    return Plan.model_validate(dict(model=model, parallel=dict(tp=1, pp=2, ep=2 if moe else 1),
                                    training=dict(micro_batch_size=1, global_batch_size=8, optimizer="muon"),
                                    cluster=dict(gpus_per_node=8)))


@pytest.mark.parametrize("moe", [True, False])
def test_tensors_and_split_equal_megatron_core(moe):
    """Per stage, the (shape, Muon-or-scalar, expert) multiset of :func:`stage_tensors` is megatron-core 0.16.1's:
    ``optimizer/muon.py`` sends a parameter to Muon when it is 2-D and not ``is_embedding_or_output_parameter``,
    and marks it expert when ``'experts' in name and 'shared' not in name``."""
    from mcore_meta import build_stage

    plan = _tiny(moe)
    p = plan.parallel
    for rank in range(p.pp):
        want = Counter()
        for chunk in build_stage(plan, rank):
            for name, prm in chunk.named_parameters():
                matrix = prm.dim() == 2 and not getattr(prm, "is_embedding_or_output_parameter", False)
                expert = "experts" in name and "shared" not in name
                want[(tuple(prm.shape) if prm.dim() == 2 else (prm.numel(), 0), matrix, expert)] += 1
        got = Counter(((t.rows, t.cols), t.matrix, t.expert)
                      for t in stage_tensors(arch_key(plan.model), p.tp, p.expert_tp, p.ep, plan.chunk_layout(), rank))
        assert got == want, (rank, got - want, want - got)


def test_owner_deal_equals_layer_wise_optimizer():
    """:func:`_deal` hands every owner the tensors megatron-core 0.16.1's ``LayerWiseDistributedOptimizer.
    shard_params`` lists for it (numel-sorted ping-pong over the DP x CP ranks), on the stage's real parameters."""
    import torch
    from megatron.core.optimizer.layer_wise_optimizer import LayerWiseDistributedOptimizer
    from mcore_meta import build_stage

    plan = _tiny(False)
    params = [prm for chunk in build_stage(plan, 0) for prm in chunk.parameters()]
    matrix = [q for q in params if q.dim() == 2 and not getattr(q, "is_embedding_or_output_parameter", False)]
    scalar = [q for q in params if not any(q is m for m in matrix)]
    assert torch.distributed.is_initialized()

    class Group:  # what shard_params reads of a process group
        def __init__(self, n):
            self.n = n

        def size(self):
            return self.n

        def rank(self):
            return 0

    n = 3
    opt = object.__new__(LayerWiseDistributedOptimizer)
    opt.pg_collection = types.SimpleNamespace(dp_cp=Group(n), expt_dp=Group(1))
    fake = [types.SimpleNamespace(param_groups=[{"params": list(matrix)}]),
            types.SimpleNamespace(param_groups=[{"params": list(scalar)}])]
    opt.shard_params(fake)
    theirs = [sorted(q.numel() for q in owned) for owned in opt.dp_cp_params_list]
    p = plan.parallel
    ours = owner_shares(arch_key(plan.model), p.tp, p.expert_tp, p.ep, plan.chunk_layout(), 0, n, 1, True)[0]
    assert [sorted(t.numel for t in s.tensors) for s in ours] == theirs
    # the Muon / scalar split of each owner, hence its state bytes (fp32 master + momentum, or + Adam's moments)
    mine = [state_bytes(s, precision="bf16", scalar_optimizer="adam") for s in ours]
    real = [sum(q.numel() * (8 if any(q is m for m in matrix) else 12) for q in owned) for owned in opt.dp_cp_params_list]
    assert mine == real


def test_deal_ping_pong_order():
    """The example of ``shard_params``' comment: 4 ranks, 10 parameters -> [[p0, p7, p8], [p1, p6, p9], [p2, p5],
    [p3, p4]]."""
    from primus_launch.projection.memory.muon import Tensor

    ts = [Tensor(i + 1, 0, matrix=False) for i in range(10)]
    assert [[t.rows - 1 for t in s.tensors] for s in _deal(ts, 4)] == [[0, 7, 8], [1, 6, 9], [2, 5], [3, 4]]


def _eo_muon_utils() -> dict:
    """The globals of Emerging-Optimizers v0.1.0 ``muon_utils.py`` (read from the mirror, run with its logging /
    Triton imports stubbed); skips without the mirror."""
    if not (EO / "HEAD").exists() and not (EO / ".git").exists():
        pytest.skip("no Emerging-Optimizers mirror")
    src = subprocess.run(["git", "-C", str(EO), "show", "v0.1.0:emerging_optimizers/orthogonalized_optimizers/"
                          "muon_utils.py"], capture_output=True, text=True)
    if src.returncode:
        pytest.skip("mirror lacks v0.1.0")
    stubs = {"absl": types.ModuleType("absl"), "emerging_optimizers": types.ModuleType("emerging_optimizers")}
    stubs["absl"].logging = types.SimpleNamespace(log_first_n=lambda *a, **k: None, INFO=0)
    stubs["emerging_optimizers"].triton_kernels = types.SimpleNamespace()
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    try:
        ns: dict = {}
        exec(compile(src.stdout, "muon_utils.py", "exec"), ns)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return ns


def test_newton_schulz_flops_equal_emerging_optimizers(tmp_path):
    """:func:`cost.muon.ns_flops` (``s (4 m^2 n + 2 m^3)``, ``m <= n``) equals the matmul FLOPs torch's
    ``FlopCounterMode`` counts in Emerging-Optimizers v0.1.0 ``muon_utils.newton_schulz`` on a tall 96 x 40
    matrix, which the code transposes."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from primus_launch.projection.cost.muon import ns_flops

    ns = _eo_muon_utils()
    prec = torch.get_float32_matmul_precision()
    try:
        for p in ("medium", "highest"):
            torch.set_float32_matmul_precision(p)
            with FlopCounterMode(display=False) as fc:
                out = ns["newton_schulz"](torch.randn(96, 40), steps=5, coefficient_type="quintic")
            assert out.shape == (96, 40)
            assert fc.get_total_flops() == ns_flops(96, 40, 5) == 5 * (4 * 40 * 40 * 96 + 2 * 40 ** 3)
    finally:
        torch.set_float32_matmul_precision(prec)


def test_distributed_tp_mode_whitens_the_unsharded_dim():
    """``--muon-tp-mode distributed``: Emerging-Optimizers v0.1.0 ``newton_schulz_tp`` calls ``newton_schulz`` on the
    local shard with ``transpose = partition_dim == 0``, so the whitened dimension (``A = X X^T``) is the unsharded
    one even where it is the larger.  :func:`memory.muon.ns_dims` gives that ``m`` (its transient bytes hold
    ``A``, ``B`` of ``m x m``), and ``s (4 m^2 n + 2 m^3)`` with it equals the FLOPs ``FlopCounterMode`` counts in the
    code (no TP group: the same local GEMMs, no all-reduce); blockwise whitens the smaller dimension."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from primus_launch.projection.memory.muon import Tensor, ns_dims, ns_transient_bytes

    ns = _eo_muon_utils()
    for part, local in ((0, (40, 96)), (1, (96, 40))):   # a column-parallel shard [40, 96], a row-parallel [96, 40]
        t = Tensor(*local, part)
        m, n = ns_dims(t, 2, "distributed")
        with FlopCounterMode(display=False) as fc:
            ns["newton_schulz"](torch.randn(*local), steps=5, coefficient_type="quintic", transpose=part == 0)
        assert (m, n) == (96, 40)
        assert fc.get_total_flops() == 5 * (4 * m * m * n + 2 * m ** 3)
        assert ns_dims(t, 2, "blockwise") == (40, 96)
        assert ns_transient_bytes(m, n, "medium") - ns_transient_bytes(n, m, "medium") == 2 * 2 * (m * m - n * n)


def _kimi_plan(rid: str = "mbridge260401_gb300_fp8_mx_kimi_k2_256gpu", extra: tuple[str, ...] = ()):
    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.plan import Cluster

    rows = json.loads((ROOT / "scripts" / "validation" / "current_runs.json").read_text())
    row = next(r for r in rows if r["id"] == rid)
    argv = ["pretrain_gpt.py"] + [x for f in row["megatron_flags"] for x in f.split()] + list(extra)
    return plan_from_argv(argv, cluster=Cluster(gpu="gb300", num_nodes=64, gpus_per_node=4, nvlink_domain=72))


def test_reader_on_kimi_k2_bridge_row():
    """The Kimi-K2 GB300 perf recipe's flags (Bridge v0.4.2 distributed_muon_with_cosine_annealing + the Kimi
    recipe's muon branch) read as layer-wise Muon without the distributed optimizer."""
    plan = _kimi_plan()
    t, p = plan.training, plan.parallel
    assert (t.optimizer, t.muon_layer_wise, t.muon_tp_mode, t.muon_num_ns_steps, t.muon_fp32_matmul_prec,
            t.muon_scalar_optimizer, t.muon_split_qkv) == ("muon", True, "blockwise", 5, "medium", "adam", True)
    assert p.dp_sharding == "none" and plan.dp == 64 and plan.expert_dp == 1
    assert not any("--optimizer" in u for u in plan.source.unmodelled)


def test_reader_refuses_what_megatron_asserts():
    """Megatron-LM validate_args: plain muon with overlapped grad reduce; an unknown TP mode."""
    with pytest.raises(PlanError, match="--overlap-grad-reduce"):
        _kimi_plan(extra=("--optimizer", "muon"))
    with pytest.raises(PlanError, match="--muon-tp-mode"):
        _kimi_plan(extra=("--muon-tp-mode", "sharded"))


def test_muon_with_the_distributed_optimizer_is_layer_wise():
    """Megatron-LM d98e8a64dd ``arguments.py`` ('emerging optimizer check'): ``dist_muon`` is deprecated for
    ``--optimizer muon --use-distributed-optimizer``; either sets ``use_layer_wise_distributed_optimizer`` and turns
    ``use_distributed_optimizer`` off (2edffadb52 asserted instead).  Both spellings read as the same plan; the
    command line renders back unchanged."""
    from primus_launch.adapters.megatron import render_argv

    dist = _kimi_plan()
    for extra in (("--use-distributed-optimizer",), ("--optimizer", "muon", "--use-distributed-optimizer")):
        plan = _kimi_plan(extra=extra)
        assert (plan.training.optimizer, plan.training.muon_layer_wise, plan.parallel.dp_sharding) == ("muon", True, "none")
        assert plan.training == dist.training and plan.parallel == dist.parallel
    rows = json.loads((ROOT / "scripts" / "validation" / "current_runs.json").read_text())
    row = next(r for r in rows if r["id"] == "mbridge260401_gb300_fp8_mx_kimi_k2_256gpu")
    argv = ["pretrain_gpt.py"] + [x for f in row["megatron_flags"] for x in f.split()] + ["--optimizer", "muon",
                                                                                          "--use-distributed-optimizer"]
    assert render_argv(_kimi_plan(extra=tuple(argv[-3:])), argv) == argv


@pytest.mark.parametrize("opt", ["muon", "dist_muon"])
def test_layer_wise_muon_overlaps_the_param_gather(opt):
    """``--optimizer muon|dist_muon --use-distributed-optimizer``: what Megatron-LM main (d98e8a64dd; since
    5b512b45d1, core_v0.18.0) parse_args + validate_args make of it, run by ``scripts/reader_vs_megatron.py`` on
    the functional test ``moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_muon``: optimizer 'muon',
    use_layer_wise_distributed_optimizer True, use_distributed_optimizer False (the reader refused the pair, as
    core_v0.17 asserts), with --overlap-param-gather, which main allows for the layer-wise optimizer
    (plan/legality.py refused it without ZeRO sharding).  The unchanged plan writes the flags back as they were."""
    from primus_launch.adapters.megatron import plan_from_argv, render_argv
    from primus_launch.plan import Cluster

    argv = ["pretrain_gpt.py", "--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "8",
            "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "1",
            "--global-batch-size", "8", "--bf16", "--vocab-size", "1024", "--optimizer", opt,
            "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
    plan = plan_from_argv(argv, Cluster(num_nodes=1, gpus_per_node=8))
    assert (plan.training.optimizer, plan.training.muon_layer_wise, plan.parallel.dp_sharding) == ("muon", True, "none")
    assert plan.training.overlap_param_gather  # "or args.optimizer == 'dist_muon'" (main arguments.py)
    assert render_argv(plan, argv) == argv


def test_kimi_k2_memory_and_step_terms():
    """Kimi-K2 GB300 (PP 4 VP 4, EP 64, DP 64, expert-DP 1): every GPU owns all its 6 x ~15 local experts'
    weights (expert-DP 1) -- 8 bytes each (fp32 master + momentum) -- and a 1/64 layer-wise share of the rest; the
    stage-0 owner of the 163,840 x 7,168 word embedding carries its fp32 master and Adam moments (12 bytes each)."""
    from primus_launch.projection.dryrun import project_dry_run

    plan = _kimi_plan()
    p = plan.parallel
    dense, expert = owner_shares(arch_key(plan.model), p.tp, p.expert_tp, p.ep, plan.chunk_layout(), 0, 64, 1, True)
    assert len(dense) == 64 and len(expert) == 1
    emb = 163840 * 7168
    holder = [s for s in dense if any(t.numel == emb for t in s.tensors)]
    assert len(holder) == 1 and state_bytes(holder[0], precision="bf16", scalar_optimizer="adam") >= 12 * emb
    experts_0 = 6 * 16 * 3 * 2048 * 7168  # stage 0: layers 0-3 and 16-27 ... 16 layers, the first dense
    assert expert[0].matrix == experts_0 - 6 * 3 * 2048 * 7168
    res = project_dry_run(plan)
    opt = res.time_breakdown["optimizer"]
    assert 0.05 < opt < 1.0   # Newton-Schulz of ~90 local experts' 4096 x 7168 and 2048 x 7168 matrices, 5 steps
    s0 = res.memory.stages[0]
    assert s0.optimizer_bytes >= 8 * expert[0].matrix + 12 * emb


def test_bridge_run_config_reads_muon(tmp_path):
    """A Megatron-Bridge run_config.yaml with ``optimizer.optimizer: dist_muon`` and its muon_* fields (the
    OptimizerConfig names, as Bridge saves them) reads as the same plan fields as the Megatron-LM flags."""
    import yaml
    from test_adapter_bridge_yaml import CLUSTER, FIXTURE

    from primus_launch.adapters import load_recipe

    doc = yaml.safe_load(FIXTURE.read_text())
    doc["optimizer"].update(optimizer="dist_muon", muon_tp_mode="duplicated", muon_num_ns_steps=3,
                            use_distributed_optimizer=False, muon_momentum=0.95)
    doc["ddp"].update(use_distributed_optimizer=False, overlap_param_gather=False)
    p = tmp_path / "run_config.yaml"
    p.write_text(yaml.safe_dump(doc))
    plan = load_recipe(p, CLUSTER)
    t = plan.training
    assert (t.optimizer, t.muon_layer_wise, t.muon_tp_mode, t.muon_num_ns_steps) == ("muon", True, "duplicated", 3)
    assert plan.parallel.dp_sharding == "none"


def test_primus_passes_muon_through(tmp_path):
    """A Primus Megatron experiment with ``optimizer: dist_muon`` in its overrides (Primus hands its module keys to
    Megatron-LM's args) reads as layer-wise Muon; Primus' own per-head Muon (``muon_per_head``, Kimi K3) is
    reported as not modelled."""
    from test_adapter_primus import MEGATRON_EXP, _meg, _tree

    from primus_launch.adapters.primus_yaml import load_primus_yaml
    from primus_launch.plan import Cluster

    exp = _meg(_tree(tmp_path))
    exp.write_text(MEGATRON_EXP.replace("      lr: 1.0e-5\n", "      lr: 1.0e-5\n      optimizer: dist_muon\n"
                                        "      use_distributed_optimizer: false\n      overlap_param_gather: false\n"
                                        "      muon_per_head: true\n      muon_num_ns_steps: 4\n"))
    plan = load_primus_yaml(exp, Cluster(gpu="mi355x", num_nodes=1, gpus_per_node=8), env={})
    t = plan.training
    assert (t.optimizer, t.muon_layer_wise, t.muon_num_ns_steps, plan.parallel.dp_sharding) == ("muon", True, 4, "none")
    assert [u.flag for u in plan.source.unmodelled if "muon" in u.flag] == ["muon_per_head"]


def test_torchtitan_muon_is_reported_not_priced_silently(tmp_path):
    """TorchTitan's DistMuon (FlexShard, past 0.3.0) is not modelled: a job naming it is priced as AdamW and says
    so in ``source.unmodelled``."""
    from primus_launch.adapters import load_recipe

    text = (ROOT / "recipes" / "torchtitan" / "llama3.1_70b.toml").read_text().replace('name = "AdamW"',
                                                                                     'name = "DistMuon"')
    p = tmp_path / "job.toml"
    p.write_text(text)
    plan = load_recipe(p, {"gpu": "h100-sxm", "num_nodes": 8, "gpus_per_node": 8})
    assert plan.training.optimizer == "adam"
    assert [u.value for u in plan.source.unmodelled if u.flag == "optimizer.name"] == ["DistMuon"]


@pytest.mark.parametrize("layer_wise", [True, False])
def test_tuner_space_keeps_what_megatron_accepts_for_muon(layer_wise):
    """The tuner's space for a Muon plan offers only the unsharded DP (Megatron: no distributed optimizer / FSDP
    with Muon) and, for plain muon, no DP overlaps; every candidate breaks no rule (``rules.knob_problems``)."""
    from tuner_helpers import small_moe_plan

    from primus_launch.tuner.space import Space, SpaceConfig, problems_of

    plan = small_moe_plan()
    plan = plan.model_copy(update={
        "training": plan.training.model_copy(update=dict(optimizer="muon", muon_layer_wise=layer_wise,
                                                         overlap_grad_reduce=layer_wise)),
        "parallel": plan.parallel.model_copy(update=dict(dp_sharding="none"))})
    sp = Space(plan, SpaceConfig(max_mbs=1, max_cp=1))
    assert len(sp) > 10
    for i in range(0, len(sp), max(1, len(sp) // 300)):
        k = sp[i]
        assert k.dp_sharding == "none" and problems_of(plan, k) == [], k
        if not layer_wise:
            assert not k.overlap_grad_reduce and not k.overlap_param_gather


def test_state_bytes_equal_megatron_core_muon_after_a_step(tmp_path):
    """:func:`state_bytes` of every owned tensor (not layer-wise) equals the optimizer state megatron-core 0.16.1's
    own ``get_megatron_muon_optimizer`` holds after one step on a tiny bf16 MLA + MoE model on the CPU
    (``tests/muon_real_state.py``, with Emerging-Optimizers v0.1.0 from its mirror): fp32 masters, Muon's fp32
    momentum on the 2-D weights (router, experts, shared experts, MLA projections, dense MLP), AdamW's two fp32
    moments on the embedding, output head and norms."""
    if not (EO / "HEAD").exists() and not (EO / ".git").exists():
        pytest.skip("no Emerging-Optimizers mirror")
    arch = subprocess.run(f"git -C {EO} archive v0.1.0 emerging_optimizers | tar -x -C {tmp_path}", shell=True,
                          capture_output=True, text=True)
    if arch.returncode:
        pytest.skip("mirror lacks v0.1.0")
    from muon_real_state import real_muon_state

    names, real = real_muon_state(str(tmp_path), True)
    assert names == ["TensorParallelMuon", "AdamW"]
    plan = _tiny(True)
    plan = plan.model_copy(update={"parallel": plan.parallel.model_copy(update=dict(pp=1, ep=1))})
    dense, expert = owner_shares(arch_key(plan.model), 1, 1, 1, plan.chunk_layout(), 0, 1, 1, False)
    assert real == sum(state_bytes(s, precision="bf16", scalar_optimizer="adam") for s in dense + expert) == 23_742_976


def test_layer_wise_all_gather_buffers():
    """``allgather_params`` (megatron-core 0.16.1 ``layer_wise_optimizer.py``): the flat copy of the own share and
    one receive buffer per other owner of the DP x CP group add up to every dense parameter of the stage in the
    parameter dtype; with one owner nothing is gathered."""
    from primus_launch.projection.memory.muon import gather_transient_bytes
    from primus_launch.projection.memory.params import stage_split_for_key

    plan = _tiny(False)
    p, key, lay = plan.parallel, arch_key(plan.model), plan.chunk_layout()
    dense = stage_split_for_key(key, p.tp, p.expert_tp, p.ep, lay, "te")[0].dense
    assert gather_transient_bytes(key, p.tp, p.expert_tp, p.ep, lay, 0, 3, 1, 2) == 2 * dense
    assert gather_transient_bytes(key, p.tp, p.expert_tp, p.ep, lay, 0, 1, 1, 2) == 0


def test_tp_modes_shapes_and_step():
    """``--muon-tp-mode`` (Emerging-Optimizers v0.1.0 ``newton_schulz_tp``, megatron-core ``TensorParallelMuon``):
    blockwise orthogonalises the local shard, duplicated the whole matrix after an all-gather of the shards along
    ``partition_dim``; distributed keeps the shard (its step prices an all-reduce of ``A`` per iteration).  At TP 2
    the duplicated step is the slowest (twice the Newton-Schulz work of the largest matrices plus the gathers), and
    every mode prices a positive step with expert TP 2 too."""
    from primus_launch.projection.cost.muon import muon_step_s
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.memory.muon import Tensor, ns_shape

    col, row = Tensor(512, 256, 0), Tensor(256, 256, 1)
    assert ns_shape(col, 2, "blockwise") == (512, 256) and ns_shape(col, 2, "duplicated") == (1024, 256)
    assert ns_shape(row, 2, "duplicated") == (256, 512) and ns_shape(row, 2, "distributed") == (256, 256)
    base = _tiny(True)
    base = base.model_copy(update={"parallel": base.parallel.model_copy(update=dict(tp=2, etp=2, ep=2,
                                                                                    sequence_parallel=True))})
    out = {}
    for mode in ("blockwise", "duplicated", "distributed"):
        plan = base.model_copy(update={"training": base.training.model_copy(update=dict(muon_tp_mode=mode))})
        out[mode] = muon_step_s(plan, get_gpu(plan.cluster.gpu), layout(plan), 0)
    assert all(v > 0 for v in out.values())
    assert out["duplicated"] > out["blockwise"]


def test_muon_with_sharding_is_reported():
    """A plan with Muon and the distributed optimizer (Megatron refuses it: the readers never build one) is projected
    with a warning, not silently as if Muon were modelled there."""
    from primus_launch.projection.dryrun import project_dry_run

    plan = _tiny(False)
    plan = plan.model_copy(update={"parallel": plan.parallel.model_copy(update=dict(dp_sharding="optimizer"))})
    res = project_dry_run(plan)
    assert any(w.flag == "training.optimizer" for w in res.warnings if hasattr(w, "flag"))


def test_fp32_matmul_prec_low_runs_at_torchs_default(recwarn):
    """Megatron-LM's parser offers ``--muon-fp32-matmul-prec`` low / medium / high (``arguments.py`` at 2edffadb52 and
    core_r0.16.0); Emerging-Optimizers v0.1.0 passes it to ``torch.set_float32_matmul_precision``, which ignores
    'low' with a warning and keeps the precision it had (torch's default 'highest').  The reader takes 'low' as
    highest and says so, not a refusal."""
    import torch

    from primus_launch.adapters.megatron_choices import CHOICES

    assert "low" in CHOICES["--muon-fp32-matmul-prec"]
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("low")
    assert torch.get_float32_matmul_precision() == before
    plan = _kimi_plan(extra=("--muon-fp32-matmul-prec", "low"))
    assert plan.training.muon_fp32_matmul_prec == "highest"
    assert any(u.flag == "--muon-fp32-matmul-prec" and "low" in str(u.value) for u in plan.source.unmodelled)
