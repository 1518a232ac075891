"""Megatron-Core memory terms against their sources: real megatron-core 0.16.1 modules traced on CPU,
the published Megatron-LM functional-test peaks, and the framework code's own constants.

- published peaks: ``tests/data/megatron_functional_memory.json`` (the ``mem-max-allocated-bytes`` the
  Megatron-LM functional tests log for the last rank, with the flags they ran; TE fused / unfused
  attention, MLA, CP, MoE with ETP 1 and MTP, fused cross-entropy);
- the MoE (token, expert) pairs per rank with expert-TP 1 under TP 2 (``token_dispatcher.py``);
- the fused cross-entropy's buffers (``fusions/fused_cross_entropy.py`` compiled by torch.compile);
- the combined 1F1B schedule's warm-up (``schedules.get_pp_rank_microbatches``);
- DeepEP / HybridEP / TE userbuffers sizes from their configurations; device capacities.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from primus_launch.plan import Cluster, ModelArch, Plan

DATA = Path(__file__).parent / "data" / "megatron_functional_memory.json"


def _functional_rows():
    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.projection.memory.estimate import estimate_memory

    out = []
    for r in json.loads(DATA.read_text())["rows"]:
        plan = plan_from_argv(r["argv"], Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))
        got = estimate_memory(plan, memory_basis="allocated").stages[-1].allocated_bytes
        out.append((r["test"], r["published_bytes"] / got - 1))
    return out


def test_functional_test_peaks():
    """Every published functional-test peak within 15 %, the median within 10 %."""
    rows = _functional_rows()
    errs = [e for _, e in rows]
    assert len(rows) >= 7
    assert max(abs(e) for e in errs) <= 0.15, rows
    assert abs(statistics.median(errs)) <= 0.10


def test_band_data_regenerates_from_the_validation():
    """``memory/band_data.py``'s bands are what ``scripts/memory_band.py`` computes from the published
    peaks ``scripts/validate_memory.py`` compares (so the data module can be regenerated, not edited)."""
    import sys

    from primus_launch.projection.memory.band_data import BANDS

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from memory_band import bands, errors

    got = bands(errors())
    for fw in ("megatron",):  # (the TorchTitan band follows its own model: regenerate after changing it)
        assert got[fw][2] == BANDS[fw][2]
        assert got[fw][:2] == pytest.approx(BANDS[fw][:2], abs=1e-3), fw


def test_moe_pairs_with_expert_tp_1_under_tp_2_measured():
    """megatron's dispatchers route the rank's sequence-parallel shard: with TP 2 + SP and expert-TP 1 a
    rank's experts see ``sb / 2 * topk`` (token, expert) pairs, not ``sb * topk`` (measured: one MoE layer
    of megatron-core 0.16.1 on real CPU tensors, allgather dispatcher)."""
    from mem_measure import measure_step
    from primus_launch.projection.memory.activations import MCORE_LOCAL, layer_activation_bytes, moe_pairs

    arch = ModelArch(num_layers=2, hidden_size=256, ffn_hidden_size=512, num_attention_heads=4, num_query_groups=2,
                     vocab_size=1024, seq_length=128, num_experts=8, moe_router_topk=2, moe_ffn_hidden_size=256)
    plan = Plan(model=arch, parallel=dict(tp=2, sequence_parallel=True, etp=1),
                training=dict(global_batch_size=1), cluster=dict(gpus_per_node=2))
    one = measure_step(plan, 1, post_process=False, fused_swiglu=True, fake=False)
    two = measure_step(plan, 2, post_process=False, fused_swiglu=True, fake=False)
    la = layer_activation_bytes(arch, seq=128, mbs=1, tp=2, sp=True, moe=True, etp=1, impl=MCORE_LOCAL)
    assert moe_pairs(arch, sb=128, tp=2, sp=True, etp=1) == 128 / 2 * 2
    assert la.full == pytest.approx(two["activations"] - one["activations"], rel=0.03)


def test_native_fused_cross_entropy_buffers_traced():
    """megatron's ``--cross-entropy-loss-fusion`` (native) compiled by torch.compile (inductor, CPU): the
    forward's subtraction and exp write into the fp32 copy of the logits (the softmax kept for backward
    aliases it); the backward cannot write into the saved softmax and computes into a new fp32 buffer
    before the bf16 cast: the model's ``(4 + 2) sb V/t`` transient on top of the kept ``4 sb V/t``."""
    import torch
    from torch._inductor.utils import run_and_get_code

    from megatron.core.fusions import fused_cross_entropy as f
    from primus_launch.projection.memory.activations import output_activation_bytes

    s, b, v = 16, 2, 64
    x = torch.randn(s, b, v, dtype=torch.bfloat16)
    t = torch.randint(0, v, (s, b))
    with torch.no_grad():
        xf, mx = f.calculate_logits_max(x)
        *_, exp = f.calculate_predicted_logits(xf, t, mx, 0, v)
        assert exp.data_ptr() == xf.data_ptr() and exp.dtype == torch.float32
        tm, mt = (t < 0) | (t >= v), t.view(-1)
        g, codes = run_and_get_code(f.calculate_gradients, exp, torch.ones(s, b), tm, mt)
    allocs = re.findall(r"empty_strided_cpu\(\((.*?)\), \(.*?\), (torch\.\w+)\)", "\n".join(codes))
    full = [dt for shape, dt in allocs if eval("(" + shape + ")") in ((s * b, v), (s, b, v))]
    assert sorted(full) == ["torch.bfloat16", "torch.float32"] and g.dtype == torch.bfloat16
    arch = ModelArch(num_layers=1, hidden_size=64, ffn_hidden_size=128, num_attention_heads=2, vocab_size=v,
                     seq_length=s)
    kept_n, tr_n = output_activation_bytes(arch, seq=s, mbs=b, tp=1, sp=False, ce="native")
    kept_u, tr_u = output_activation_bytes(arch, seq=s, mbs=b, tp=1, sp=False, ce="unfused")
    assert kept_n == kept_u and tr_n - tr_u == 4 * s * b * v  # the fp32 buffer beside the bf16 gradient


def test_combined_1f1b_warmup_is_megatrons():
    """``--overlap-moe-expert-parallel-comm``: megatron's ``get_pp_rank_microbatches`` schedules one more
    warm-up forward; :func:`orders.combined_1f1b_orders` has exactly that many forwards before its first
    merged (forward, backward) step, and the walk holds the same chunk-micro-batches as the interleaved schedule plus one layer."""
    from types import SimpleNamespace

    from megatron.core.pipeline_parallel.schedules import get_pp_rank_microbatches
    from primus_launch.projection.memory.inflight import stage_activation_peaks
    from primus_launch.projection.pipeline.orders import F, combined_1f1b_orders

    pp, vpp, m = 4, 2, 8
    o = combined_1f1b_orders(pp, vpp, m)
    for r in range(pp):
        comm = SimpleNamespace(pp_group=SimpleNamespace(size=lambda: pp, rank=lambda r=r: r),
                               virtual_pipeline_model_parallel_size=vpp)
        _, _, warm, _ = get_pp_rank_microbatches(m, vpp, pp, overlap_moe_expert_parallel_comm=True,
                                                 p2p_communicator=comm)
        kinds = [o.decode(a)[0] for a in o.orders[r]]
        assert kinds.index(next(k for k in kinds if k != F)) == warm + 1  # the first step's forward, then B
    ones = tuple((1.0,) * vpp for _ in range(pp))
    plain = stage_activation_peaks("interleaved_1f1b", pp, vpp, m, None, ones)
    layer = tuple((0.25,) * vpp for _ in range(pp))
    merged = stage_activation_peaks("interleaved_1f1b", pp, vpp, m, None, ones, True, layer)
    assert merged == tuple(x + 0.25 for x in plain)


def test_combined_1f1b_never_merges_a_chunk_with_its_own_backward():
    """With one micro-batch (or a chunk whose backward comes right after its own forward) megatron's
    combined 1F1B has no step to merge: the forward runs whole, then its backward, so the whole
    forward's activations are alive at the backward's start, as without the overlap.  (A walk that
    merged them held one layer: a Qwen3-235B plan at PP 1, MBS 8 showed 7.4 GiB of activations where
    it keeps 706 GiB, and the tuner took it.)"""
    from primus_launch.projection.memory.inflight import stage_activation_peaks

    for pp, vpp in ((1, 1), (2, 1)):
        ones = tuple((1.0,) * vpp for _ in range(pp))
        plain = stage_activation_peaks("interleaved_1f1b" if vpp > 1 else "1f1b", pp, vpp, 1, None, ones)
        layer = tuple((0.25,) * vpp for _ in range(pp))
        merged = stage_activation_peaks("interleaved_1f1b" if vpp > 1 else "1f1b", pp, vpp, 1, None, ones, True,
                                        layer)
        assert merged == plain and plain[0] >= 1.0, (pp, vpp)


def test_walk_weights_chunks_of_a_layout():
    """Chunks that differ (embedding / loss counted as a layer) are walked as they are: 1F1B on 2 ranks
    with one chunk each holds 2 micro-batches of rank 0's chunk; the walk equals the count x bytes."""
    from primus_launch.projection.memory.inflight import stage_activation_peaks

    assert stage_activation_peaks("1f1b", 2, 1, 4, None, ((3.0,), (5.0,))) == (6.0, 5.0)
    # interleaved: the first chunk of rank 0 is light (embedding + 1 layer), the others hold 2 layers
    light = stage_activation_peaks("interleaved_1f1b", 2, 2, 4, None, ((1.0, 2.0), (2.0, 2.0)))
    even = stage_activation_peaks("interleaved_1f1b", 2, 2, 4, None, ((2.0, 2.0), (2.0, 2.0)))
    assert light[0] < even[0] and light[1] == even[1]


def test_distributed_optimizer_shards_over_dp_times_cp():
    """megatron-core 0.16.1 builds the distributed optimizer on ``intra_dp_cp_group`` (dp x cp ranks):
    its dense state per GPU halves when CP 2 doubles the group (Llama 3 8B FP8, 8 H100, CP 2)."""
    import inspect

    import megatron.core.optimizer as mopt
    from primus_launch.projection.memory.estimate import stage_memory

    assert "intra_dp_cp_group" in inspect.getsource(mopt)
    arch = ModelArch(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
                     num_query_groups=8, vocab_size=128256, seq_length=8192)
    kw = dict(training=dict(global_batch_size=8, precision="fp8"), cluster=dict(gpus_per_node=8))
    cp1 = stage_memory(Plan(model=arch, parallel=dict(dp_sharding="optimizer"), **kw))[0]
    cp2 = stage_memory(Plan(model=arch, parallel=dict(cp=2, dp_sharding="optimizer"), **kw))[0]
    assert cp2.optimizer_bytes == pytest.approx(cp1.optimizer_bytes, rel=1e-9)  # dp 4 x cp 2 = dp 8
    assert cp1.optimizer_bytes == pytest.approx(12 * cp1.num_parameters / 8, rel=1e-9)


def test_grad_buffer_dtype_follows_megatron_arguments():
    """megatron/training/arguments.py: the grad buffer accumulates in fp32 unless --grad-reduce-in-bf16, or
    --main-grads-dtype bf16 with the precision-aware optimizer."""
    from primus_launch.projection.memory.mcore import mcore_opts

    arch = ModelArch(num_layers=2, hidden_size=256, ffn_hidden_size=512, num_attention_heads=4, vocab_size=1024,
                     seq_length=128)

    def g(**tr):
        return mcore_opts(Plan(model=arch, training=dict(global_batch_size=1, **tr),
                               cluster=dict(gpus_per_node=1))).main_grads

    assert g() == 4 and g(grad_reduce_in_fp32=False) == 2
    assert g(precision_aware_optimizer=True, main_grads_dtype="bf16") == 2
    assert g(precision_aware_optimizer=True, main_grads_dtype="fp32", grad_reduce_in_fp32=False) == 2


def test_deepep_hybridep_userbuffers_from_their_configs():
    """DeepEP v1.2.1 ``Config::get_nvl_buffer_size_hint`` / ``get_rdma_buffer_size_hint`` with its 64-rank
    dispatch (288 NVL recv tokens, 128 RDMA) and combine configs, 20 SMs, hidden 7168 (written out from
    csrc/config.hpp); HybridEP's shared intra-node buffer; TE's 10 userbuffers."""
    from primus_launch.projection.memory.outside import deepep_buffer_bytes, hybridep_buffer_bytes, userbuffers_bytes

    h, ch, nvl, rdma = 7168, 10, 8, 8
    slot = 2 * h + 8 + 128 * 8 + 128 * 4 + 128 * 4
    want_nvl = ch * nvl * (2 * rdma + 3) * 4 + ch * nvl * 288 * slot
    want_rdma = ch * rdma * (8 * 2 + 2) * 2 * 4 + ch * rdma * 128 * (slot + 16) * 2
    assert deepep_buffer_bytes(64, h) == want_nvl + want_rdma
    assert deepep_buffer_bytes(1, h) == 0
    # 32 ranks in one NVLink domain: every token of the group, bf16 token + fp32 probs of the domain's experts
    assert hybridep_buffer_bytes(32, 2048, 4096, 4, 72) == 2048 * 32 * (2 * 4096 + 4 * 4 * 32)
    assert userbuffers_bytes(8192, 16384, fp8=False) == 10 * 8192 * 16384 * 2


def test_capacities_are_what_the_devices_report():
    """Every capacity names its source; the figures are torch's ``total_memory`` / HIP's total capacity."""
    from primus_launch.projection.hardware.gpus import GiB, get_gpu, known_gpus

    for name in ("a100-sxm-80gb", "a100-sxm-40gb", "h100-sxm", "h100-sxm-96gb-500w", "h200", "b200", "b300", "gb200",
                 "gb300", "mi300x", "mi325x", "mi350x", "mi355x"):  # the bundled database (gpu files add others)
        assert name in known_gpus() and get_gpu(name).hbm_source, name
    assert get_gpu("h100-sxm").hbm_bytes == 81089 * 1024**2
    assert get_gpu("b200").hbm_bytes / GiB == pytest.approx(178.35, abs=0.01)
    assert get_gpu("gb200").hbm_bytes / GiB == pytest.approx(184.31, abs=0.01)
    assert get_gpu("mi355x").hbm_bytes / GiB == pytest.approx(287.98, abs=0.01)
    assert get_gpu("mi300x").hbm_bytes == 196592 * 1024**2


def test_published_recipes_fit_and_an_oversized_one_does_not():
    """The bundled references NVIDIA and AMD publish as running come out fits or tight; the 70B recipe
    without the distributed optimizer on one 8-GPU node does not fit."""
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.memory.estimate import estimate_memory

    root = Path(__file__).resolve().parents[1] / "recipes" / "megatron"
    for name in ("qwen3_235b_a22b_h100_256gpu.yaml", "deepseek_v3_h100_1024gpu_fp8.yaml",
                 "mixtral_8x22b_mi355x_32gpu.sh"):
        assert estimate_memory(load_recipe(root / name)).verdict in ("fits", "tight"), name
    p70 = load_recipe(root / "llama3.1_70b.sh")
    one_node = p70.with_changes(parallel=dict(tp=8, pp=1, vpp=1, dp_sharding="none"),
                                training=dict(overlap_param_gather=False), cluster=dict(num_nodes=1, gpus_per_node=8))
    assert estimate_memory(one_node).verdict == "does not fit"


def test_torch_fsdp2_states_as_megatron_shards_them():
    """``--use-torch-fsdp2`` (megatron-core 0.16.1 ``distributed/torch_fully_sharded_data_parallel.py``, built
    on the meta device under a fake 8-rank data-parallel group): ``fully_shard`` on the bf16 model
    (``Float16Module``) with no mixed-precision policy, so each rank holds 1/8 of the bf16 weights and its
    gradients are reduce-scattered into that shard in the same dtype -- 2 bytes per sharded parameter, not
    the main-grad buffer's fp32 (Megatron-FSDP with fp32 gradient reduction keeps 4); the optimizer step's
    fp32 copies (``_copy_model_grads_to_main_grads``) stay under the backward's peak here."""
    import sys
    import warnings

    sys.path.insert(0, str(Path(__file__).parent))
    warnings.filterwarnings("ignore")
    from mcore_meta import build_stage, init_fake_parallel
    import megatron.core.distributed.torch_fully_sharded_data_parallel as tfsdp
    import torch
    from megatron.core.distributed.distributed_data_parallel_config import DistributedDataParallelConfig
    from megatron.core.transformer.module import Float16Module
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy

    from primus_launch.projection.memory.estimate import stage_memory

    arch = ModelArch(name="t", num_layers=2, hidden_size=256, ffn_hidden_size=688, num_attention_heads=8,
                     num_query_groups=2, vocab_size=1024, seq_length=128)
    plan = Plan(model=arch, parallel=dict(tp=1, dp_sharding="full", fsdp_impl="torch_fsdp2"),
                cluster=dict(gpus_per_node=8), training=dict(global_batch_size=8, grad_reduce_in_fp32=True))
    chunk = build_stage(plan, 0)[0]
    init_fake_parallel(1, 1, dp=8)
    real = tfsdp.DeviceMesh.from_group

    class _CpuMesh:  # megatron asks for a "cuda" mesh; the fake group lives on the CPU
        @staticmethod
        def from_group(group, _device, *a, **k):
            return real(group, "cpu", *a, **k)

    saved = tfsdp.DeviceMesh
    tfsdp.DeviceMesh = _CpuMesh
    try:
        cfg = chunk.config
        cfg.transformer_impl = "local"  # megatron then leaves the local spec's ColumnParallelLinear unwrapped
        wrapped = tfsdp.TorchFullyShardedDataParallel(cfg, DistributedDataParallelConfig(), Float16Module(cfg, chunk))
    finally:
        tfsdp.DeviceMesh = saved
    local = [p.to_local() for p in wrapped.parameters()]
    assert {t.dtype for t in local} == {torch.bfloat16}
    shard_bytes = sum(t.numel() * t.element_size() for t in local)
    groups = [m._get_fsdp_state()._fsdp_param_group for m in wrapped.modules() if isinstance(m, FSDPModule)]
    assert all(g.mp_policy == MixedPrecisionPolicy() for g in groups if g is not None)  # grads in bf16
    st = stage_memory(plan)[0]
    assert st.parameters_bytes == pytest.approx(shard_bytes, rel=2e-3)
    assert st.gradients_bytes == pytest.approx(shard_bytes, rel=2e-3)
    mfsdp = stage_memory(plan.with_changes(parallel=dict(fsdp_impl="megatron_fsdp")))[0]
    assert mfsdp.gradients_bytes == pytest.approx(2 * shard_bytes, rel=2e-3)


def test_rocm_te_without_weight_transpose_cache():
    """Primus ``no_fp8_weight_transpose_cache`` (``te_patches/linear_fp8_cache_patches.py``: ROCm TE's
    ``keep_fp8_weight_transpose_cache=False``, ``rocm_utils.clear_fp8_weight_transpose_cache``): of the fp8
    weight workspace TE keeps across micro-batches only the rowwise copy stays (1 byte per linear
    parameter, unsharded under torch FSDP2, whose all-gathered weight TE quantizes), the columnwise one is
    made for one layer's backward at a time."""
    from primus_launch.adapters.primus_yaml import primus_training_changes
    from primus_launch.projection.memory.estimate import linear_params, stage_memory
    from primus_launch.projection.memory.params import arch_key

    assert primus_training_changes({"no_fp8_weight_transpose_cache": True}) == {"fp8_weight_transpose_cache": False}
    arch = ModelArch(name="l70", num_layers=8, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
                     num_query_groups=8, vocab_size=128256, seq_length=8192)
    plan = Plan(model=arch, parallel=dict(tp=1, dp_sharding="full", fsdp_impl="torch_fsdp2"),
                cluster=dict(gpus_per_node=8), training=dict(global_batch_size=8, precision="fp8",
                                                             fp8_recipe="delayed"))
    keep = stage_memory(plan)[0]
    drop = stage_memory(plan.with_changes(training=primus_training_changes({"no_fp8_weight_transpose_cache": True})))[0]
    lin = linear_params(arch_key(arch), 1, 1, 1, plan.chunk_layout()[0], keep.num_parameters)
    assert keep.parameters_bytes - drop.parameters_bytes == pytest.approx(lin, rel=1e-9)
    assert keep.parameters_bytes - 2 * keep.num_parameters / 8 == pytest.approx(2 * lin, rel=1e-9)


@pytest.mark.parametrize("grad_dtype,pa", [("bf16", {}), ("fp32", {}),
                                           ("bf16", dict(precision_aware_optimizer=True, main_grads_dtype="bf16",
                                                         exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16")),
                                           ("bf16", dict(precision_aware_optimizer=True, main_grads_dtype="bf16",
                                                         fp8_recipe="mxfp8", precision="fp8"))])
def test_optimizer_step_grad_copies_are_megatrons(grad_dtype, pa, monkeypatch):
    """megatron-core 0.16.1 ``DistributedOptimizer._copy_model_grads_to_main_grads`` run on CPU tensors (one
    bf16 parameter of 4096 elements, this rank's shard 1024:3072, its grad buffer in ``grad_dtype``) with
    the ``OptimizerConfig`` the plan's flags make: the bytes of new gradient storage it leaves on the shard
    equal :func:`optimizer_step_grad_bytes` (fp32 copies of a bf16 buffer; none for an fp32 buffer or the
    precision-aware optimizer's ``decoupled_grad``; the copies again under an MXFP8 recipe with fp32 main
    params, where megatron turns the decoupled path off).  ``OptimizerConfig`` checks that Transformer
    Engine's FusedAdam takes the precision-aware arguments; TE is not installed on CPU, so that check is
    handed a module with that signature (restored after the test)."""
    import sys
    import types

    import torch
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
    from megatron.core.optimizer.optimizer_config import OptimizerConfig

    from primus_launch.projection.memory.mcore import mcore_opts, optimizer_step_grad_bytes

    arch = ModelArch(num_layers=2, hidden_size=256, ffn_hidden_size=512, num_attention_heads=4, vocab_size=1024,
                     seq_length=128)
    tr = dict(global_batch_size=1, grad_reduce_in_fp32=grad_dtype == "fp32", **pa)
    opts = mcore_opts(Plan(model=arch, training=tr, parallel=dict(dp_sharding="optimizer"),
                           cluster=dict(gpus_per_node=1)))
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}
    import megatron.core.optimizer.optimizer_config as oc

    monkeypatch.setattr(oc, "is_te_min_version", lambda *a, **k: True)
    te_opt = types.ModuleType("transformer_engine.pytorch.optimizers")
    te_opt.FusedAdam = lambda master_weight_dtype=None, exp_avg_dtype=None, exp_avg_sq_dtype=None, use_decoupled_grad=None: None
    for name in ("transformer_engine", "transformer_engine.pytorch"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "transformer_engine.pytorch.optimizers", te_opt)
    cfg = OptimizerConfig(use_distributed_optimizer=True, bf16=True,
                          use_precision_aware_optimizer=bool(pa.get("precision_aware_optimizer")),
                          main_grads_dtype=dt[pa.get("main_grads_dtype", "fp32")],
                          exp_avg_dtype=dt[pa.get("exp_avg_dtype", "fp32")],
                          exp_avg_sq_dtype=dt[pa.get("exp_avg_sq_dtype", "fp32")],
                          fp8_recipe=pa.get("fp8_recipe"))
    assert opts.decoupled_grads == cfg.use_precision_aware_optimizer_no_fp8_or_ds_fp8
    n, (lo, hi) = 4096, (1024, 3072)
    param = torch.nn.Parameter(torch.zeros(n, dtype=torch.bfloat16))
    param.main_grad = torch.zeros(n, dtype=dt[grad_dtype])
    shard = torch.nn.Parameter(torch.zeros(hi - lo, dtype=torch.float32))
    rng = types.SimpleNamespace(start=lo, end=hi, size=hi - lo)
    fake_self = types.SimpleNamespace(  # the attributes the method reads, as DistributedOptimizer builds them
        is_stub_optimizer=False, ddp_config=types.SimpleNamespace(use_megatron_fsdp=False), config=cfg,
        model_float16_groups=[[param]], shard_fp32_from_float16_groups=[[shard]], shard_float16_groups=[[shard]],
        model_fp32_groups=[[]], shard_fp32_groups=[[]], _get_model_param_range_map=lambda p: {"param": rng})
    DistributedOptimizer._copy_model_grads_to_main_grads(fake_self)
    g = shard.grad if shard.grad is not None else shard.decoupled_grad
    new = 0 if g.untyped_storage().data_ptr() == param.main_grad.untyped_storage().data_ptr() else g.nbytes
    assert new == optimizer_step_grad_bytes(main_grads=opts.main_grads, precision="bf16", decoupled=opts.decoupled_grads,
                                            dp_sharding="optimizer", local_params=hi - lo)
    assert new == (4 * (hi - lo) if grad_dtype == "bf16" and not cfg.use_precision_aware_optimizer_no_fp8_or_ds_fp8 else 0)


def test_full_iteration_graph_keeps_its_pool_through_the_optimizer_step():
    """Eager, the optimizer step's fp32 gradient copies come after the activations are freed (a phase of its
    own, under the activation peak here); a full-iteration graph's pool stays reserved through the eager step,
    so the copies add to the captured peak, beside every micro-batch's static inputs (28 bytes per token and,
    with the dataloader's default attention mask, s^2 bytes per sample: memory.paged_stash.static_batch_bytes)."""
    from primus_launch.projection.memory.estimate import stage_memory
    from primus_launch.projection.memory.mcore import optimizer_step_grad_bytes

    arch = ModelArch(num_layers=4, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8, vocab_size=32000,
                     seq_length=2048)
    kw = dict(model=arch, parallel=dict(dp_sharding="optimizer"), cluster=dict(gpus_per_node=2))
    tr = dict(global_batch_size=8, micro_batch_size=1, grad_reduce_in_fp32=False)
    eager = stage_memory(Plan(training=tr, **kw))[0]
    graph = stage_memory(Plan(training=dict(tr, cuda_graph_impl="local", cuda_graph_scope=("full_iteration",)),
                              **kw))[0]
    step = optimizer_step_grad_bytes(main_grads=2, precision="bf16", decoupled=False, dp_sharding="optimizer",
                                     local_params=eager.num_parameters / 2)
    assert step == pytest.approx(2 * eager.num_parameters)  # 4 bytes x the dp-2 shard
    assert eager.activations_bytes + eager.transient_bytes > step  # eager: the step is not the peak
    nmb = 8 // 2
    assert graph.allocated_bytes - eager.allocated_bytes == pytest.approx(step + (28 * 2048 + 2048**2) * nmb, abs=8)


def test_deferred_output_layer_wgrad_buffers_are_megatrons():
    """``--defer-embedding-wgrad-compute``: megatron-core 0.16.1's output ``ColumnParallelLinear`` (real
    module, CPU, fake process group) appends each micro-batch's input in its forward and the logits' gradient
    in its backward to the buffers it drains at the flush, up to ``--wgrad-deferral-limit`` (0 = all): the
    bytes they hold per micro-batch are :func:`memory.mcore.deferred_wgrad_bytes`'s; the walk keeps them on
    the last stage from each backward of the loss chunk to the flush (1F1B identity below)."""
    import torch

    from mcore_meta import cpu_current_device, init_fake_parallel
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear
    from primus_launch.projection.memory.inflight import stage_activation_peaks
    from primus_launch.projection.memory.mcore import deferred_wgrad_bytes

    init_fake_parallel(tp=1, pp=2, pp_rank=1)
    # built without the fusion (its CUDA extension is absent here), then set as a run with it has it
    cfg = ModelParallelConfig(pipeline_model_parallel_size=2, pipeline_dtype=torch.bfloat16,
                              params_dtype=torch.bfloat16, use_cpu_initialization=True,
                              perform_initialization=False)
    s, b, h, v = 16, 2, 64, 256
    acts: list = []
    grads: list = []
    with cpu_current_device():
        lin = ColumnParallelLinear(h, v, config=cfg, init_method=lambda w: None, bias=False, gather_output=False,
                                   embedding_activation_buffer=acts, grad_output_buffer=grads)
    cfg.defer_embedding_wgrad_compute, cfg.wgrad_deferral_limit = True, 0
    lin.gradient_accumulation_fusion, lin.weight.main_grad = True, torch.zeros(lin.weight.shape)
    for _ in range(3):
        x = torch.randn(s, b, h, dtype=torch.bfloat16, requires_grad=True)
        out, _ = lin(x)
        out.backward(torch.randn_like(out))
    assert len(acts) == len(grads) == 3 and lin.weight.grad is None  # no wgrad GEMM ran
    held = sum(t.numel() * t.element_size() for t in acts + grads) / 3
    arch = ModelArch(num_layers=2, hidden_size=h, ffn_hidden_size=128, num_attention_heads=2, vocab_size=v,
                     seq_length=s)
    assert held == deferred_wgrad_bytes(arch, seq=s, mbs=b, tp=1, sp=False)[0]
    cfg.wgrad_deferral_limit = 2  # the forward stops appending at the limit
    acts.clear()
    with torch.no_grad():
        for _ in range(3):
            lin(torch.randn(s, b, h, dtype=torch.bfloat16))
    assert len(acts) == 2
    # 1F1B, 2 stages, 4 micro-batches: the last rank runs F B F B F B F B, one chunk of w at a time; each
    # backward leaves r until the flush, which adds f: peak max(w + 3 r, 4 r + f) (limit 0), 2 r + f (limit 2)
    w, r, f = 10.0, 3.0, 1.0
    peaks = stage_activation_peaks("1f1b", 2, 1, 4, None, ((w,), (w,)), False, (), ((0.0,), (r,)), 0, (0.0, f))
    assert peaks == (2 * w, max(w + 3 * r, 4 * r + f))
    peaks = stage_activation_peaks("1f1b", 2, 1, 4, None, ((w,), (w,)), False, (), ((0.0,), (30.0,)), 2, (0.0, f))
    assert peaks[1] == max(w + 2 * 30.0, 2 * 30.0 + f)


def test_partial_distributed_optimizer_shards_over_the_intra_instance_groups():
    """``--num-distributed-optimizer-instances 2`` (the partial distributed optimizer) on the functional tests'
    small MoE shape (h 512, 4 layers, 8 experts top-2, TP 2 + SP, EP 2, 8 GPUs): megatron-core 0.16.1 builds the dense
    grad buffer on ``intra_dp_cp_group`` and the experts' on ``intra_expt_dp_group``
    (``distributed_data_parallel.py``), which ``parallel_state`` makes ``dp x cp / 2`` and ``expert-DP / 2`` ranks;
    the distributed optimizer keeps ``buffer numel / group size`` of each (``_build_model_gbuf_range``).  Built on
    the fake process group: the model's optimizer bytes equal 12 B (fp32 master + two moments) x those shards."""
    import inspect
    import types

    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state as ps
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.distributed import distributed_data_parallel as mddp
    from megatron.core.distributed.param_and_grad_buffer import _ParamAndGradBuffer
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from mcore_meta import build_stage

    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.projection.memory.estimate import stage_memory

    src = inspect.getsource(mddp)
    assert "dense_params, self.intra_dp_cp_group" in src and "self.intra_expt_dp_group" in src
    argv = ("pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            "--max-position-embeddings 1024 --micro-batch-size 4 --global-batch-size 32 --vocab-size 50257 --bf16 "
            "--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2 --num-experts 8 "
            "--moe-router-topk 2 --disable-bias-linear --use-distributed-optimizer").split()
    cl = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)
    one = plan_from_argv(argv, cl)
    two = plan_from_argv(argv + ["--num-distributed-optimizer-instances", "2"], cl)
    assert two.parallel.dp_replicate == 2 and not any(u.flag == "--num-distributed-optimizer-instances" and
                                                      "memory" in u.effect for u in two.source.unmodelled)
    params = [p for c in build_stage(two, 0) for p in c.parameters()]
    dense = [p for p in params if getattr(p, "allreduce", True)]
    expert = [p for p in params if not getattr(p, "allreduce", True)]
    assert dense and expert

    if dist.is_initialized():
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    ps.initialize_model_parallel(2, 1, expert_model_parallel_size=2, expert_tensor_parallel_size=2,
                                 num_distributed_optimizer_instances=2, create_gloo_process_groups=False)
    intra_dp = ps.get_data_parallel_group(with_context_parallel=True, partial_data_parallel=True)
    intra_edp = ps.get_expert_data_parallel_group(partial_expert_data_parallel=True)
    assert (intra_dp.size(), intra_edp.size()) == (2, 1)  # dp 4 / 2, expert dp 2 / 2
    cfg = DistributedDataParallelConfig(use_distributed_optimizer=True, grad_reduce_in_fp32=True,
                                        num_distributed_optimizer_instances=2)
    pg = types.SimpleNamespace(tp=ps.get_tensor_model_parallel_group(), dp_cp=intra_dp)

    def shard(ps_, group) -> float:
        saved, torch.cuda.current_device = torch.cuda.current_device, lambda: "meta"
        try:
            buf = _ParamAndGradBuffer(cfg, torch.bfloat16, torch.float32, ps_[::-1], group, None,
                                      {p: str(i) for i, p in enumerate(ps_)}, 1.0, list(range(len(ps_))), False,
                                      pg_collection=pg)
        finally:
            torch.cuda.current_device = saved
        return buf.grad_data.numel() / group.size()

    want = 12 * (shard(dense, intra_dp) + shard(expert, intra_edp))
    ps.destroy_model_parallel()
    dist.destroy_process_group()
    got = stage_memory(two)[0].optimizer_bytes
    assert got == pytest.approx(want, rel=2e-3)
    assert got > 1.9 * stage_memory(one)[0].optimizer_bytes  # both groups halve: twice the full sharding's
