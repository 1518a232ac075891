"""What Transformer Engine keeps under FP8 recipes, against closed forms read from TE's source (TE is not
installed here) and against megatron-core 0.16.1's own source (installed) for where it makes a linear save
its original input.  Cheap: no model is built."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.memory.activations import layer_activation_bytes
from primus_launch.projection.memory.estimate import linear_params, stage_memory
from primus_launch.projection.memory.fp8 import non_tn_fp8_gemm, quantized_bytes
from primus_launch.projection.memory.params import arch_key

DENSE = ModelArch(name="dense", num_layers=4, hidden_size=1024, ffn_hidden_size=3584, num_attention_heads=16,
                  num_query_groups=4, vocab_size=32000, seq_length=2048)
MOE = ModelArch(name="moe", num_layers=2, hidden_size=1024, ffn_hidden_size=3584, num_attention_heads=16,
                num_query_groups=4, vocab_size=32000, seq_length=2048, num_experts=16, moe_router_topk=4,
                moe_ffn_hidden_size=512, moe_shared_expert_intermediate_size=768, qk_layernorm=True)


def test_non_tn_fp8_gemm_devices_are_tes():
    """TE 2.13 ``common/transformer_engine.cpp`` ``nvte_is_non_tn_fp8_gemm_supported`` (line 1137):
    compute capability 10.x-11.x or >= 13.0.  B200 / GB200 are sm_100, B300 / GB300 sm_103 (yes);
    H100 / H200 sm_90 (no); AMD parts run ROCm TE (no)."""
    cc = {"b200": 100, "gb200": 100, "b300": 103, "gb300": 103, "h100-sxm": 90, "h200": 90}
    for name, sm in cc.items():
        assert non_tn_fp8_gemm(get_gpu(name).arch) == ((100 <= sm < 120) or sm >= 130), name
    assert not non_tn_fp8_gemm(get_gpu("mi300x").arch)


def test_quantized_copy_bytes():
    """One quantized copy, data + scales: tensorwise 1 byte (one fp32 scale per tensor); MXFP8 1 byte + one
    e8m0 byte per 32-element block (TE ``MXFP8Quantizer``, ``MXFP8_BLOCK_SCALING_SIZE`` 32); blockwise 1
    byte + one fp32 scale per 1x128 block (``Float8BlockQuantizer``)."""
    assert quantized_bytes("tensorwise") == quantized_bytes("delayed") == 1.0
    assert quantized_bytes("mxfp8") == 1 + 1 / 32 and quantized_bytes("blockwise") == 1 + 4 / 128


@pytest.mark.parametrize("gpu,recipe,gather,extra", [
    # (bytes per linear parameter beyond the bf16 weight) TE 2.13 csrc/quantizer.cpp lines 139 / 342
    # (with_transpose = columnwise && !non_tn), module/base.py get_weight_workspace (cached across micro-batches;
    # an fp8 parameter is returned itself, its usages added in place)
    ("h100-sxm", "tensorwise", False, 1 + 1),            # bf16 weight + rowwise workspace + transpose
    ("h100-sxm", "tensorwise", True, -1 + 1),            # fp8 parameter (1) + its transpose (1) - bf16 (2)
    ("b200", "tensorwise", False, 1),                # the one copy runs every GEMM layout
    ("b200", "tensorwise", True, -1),                # the fp8 parameter only
    ("gb300", "delayed", False, 1),
    ("b200", "mxfp8", False, 2 * (1 + 1 / 32)),      # rowwise + columnwise copies, each with its scales
    ("b200", "mxfp8", True, 2 * (1 + 1 / 32) - 2),   # an MXFP8 parameter holds both
])
def test_fp8_weight_copies_follow_te(gpu, recipe, gather, extra):
    kw = dict(model=DENSE, parallel=dict(dp_sharding="optimizer"), cluster=dict(gpu=gpu, gpus_per_node=8))
    bf16 = stage_memory(Plan(training=dict(global_batch_size=8), **kw))[0]
    fp8 = stage_memory(Plan(training=dict(global_batch_size=8, precision="fp8", fp8_recipe=recipe,
                                          fp8_param_gather=gather), **kw))[0]
    lay = Plan(training=dict(global_batch_size=8), **kw).chunk_layout()[0]
    lin = linear_params(arch_key(DENSE), 1, 1, 1, lay, bf16.num_parameters)
    assert lin == DENSE.num_layers * (1024 * (16 + 2 * 4) * 64 + 1024 * 1024 + 3 * 1024 * 3584)
    assert fp8.parameters_bytes - bf16.parameters_bytes == pytest.approx(extra * lin, rel=1e-9)


@pytest.mark.parametrize("recipe", ["tensorwise", "delayed", "mxfp8", "blockwise"])
@pytest.mark.parametrize("tp,sp", [(1, False), (2, True)])
def test_fp8_saved_inputs_follow_te_save_lists(recipe, tp, sp):
    """bf16 minus fp8 bytes of one layer = the linears' saved inputs TE keeps as one quantized copy
    (``layernorm_linear.py`` 418-427: ``ln_out`` of QKV and dense fc1; ``linear.py`` 385-399: dense fc2's
    input and the shared experts' fc2 input; ``grouped_linear.py`` 236-243: each routed expert's fc1 and fc2
    inputs), ``2 - q`` bytes less per element; under ``delayed`` megatron leaves the attention projection and
    the shared experts' fc1 saving a quantized copy beside the bf16 tensor kept anyway (the core attention's
    output, the router's input: +q per element), under the other recipes they save the original.
    Everything else (norm inputs, fc1 outputs kept by the fused SwiGLU, router input, q/k/v/o) stays bf16."""
    seq, q = 2048, quantized_bytes(recipe)
    T = seq / (tp if sp else 1)  # tokens of the rank's sequence shard
    o = seq * 16 * 64 / tp  # core-attention output elements (proj input)
    dense = [layer_activation_bytes(DENSE, seq=seq, mbs=1, tp=tp, sp=sp, fp8=f).full for f in (None, recipe)]
    saved = 2 * T * 1024 + seq * 3584 / tp  # QKV ln_out, fc1 ln_out, fc2 input
    delayed = q * o if recipe == "delayed" else 0.0
    assert dense[0] - dense[1] == pytest.approx((2 - q) * saved - delayed, rel=1e-12)
    moe = [layer_activation_bytes(MOE, seq=seq, mbs=1, tp=tp, sp=sp, moe=True, fp8=f).full for f in (None, recipe)]
    pairs = T * 4 * tp  # (token, expert) pairs of the rank's experts, etp = tp
    saved = T * 1024 + pairs * (1024 + 512 / tp) + seq * 768 / tp  # QKV ln_out; experts' and shared fc2 inputs
    delayed += q * T * 1024 if recipe == "delayed" else 0.0  # shared fc1's quantized copy of the router input
    assert moe[0] - moe[1] == pytest.approx((2 - q) * saved - delayed, rel=1e-12)


def _guards(path: str, cls: str, module_attr: str) -> list[str]:
    """Source of the ``if`` tests under which ``cls.__init__`` of megatron-core's ``path`` (read, not
    imported) calls ``set_save_original_input(self.<module_attr>)``."""
    import importlib.util

    root = Path(importlib.util.find_spec("megatron").submodule_search_locations[0])
    tree = ast.parse((root / "core" / path).read_text())
    init = next(f for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == cls
                for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    out = []
    for node in ast.walk(init):
        if isinstance(node, ast.If):
            for sub in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                if (isinstance(sub, ast.Call) and getattr(sub.func, "id", "") == "set_save_original_input"
                        and ast.unparse(sub.args[0]) == f"self.{module_attr}"):
                    out.append(ast.unparse(node.test))
    return out


def test_megatron_saves_original_inputs_where_the_model_says():
    """megatron-core 0.16.1 (installed; its source parsed): the attention projection saves its original
    input unless the recipe is ``delayed`` (``transformer/attention.py``); routed experts' fc2 only under
    ``moe_act`` recompute and fc1 only under ``expert_fc1`` offloading (``transformer/moe/experts.py``): by
    default both keep TE's quantized copies, which :func:`layer_activation_bytes` charges; the shared
    experts' fc1 saves the original (the router's input) unless the recipe is ``delayed``."""
    proj = _guards("transformer/attention.py", "Attention", "linear_proj")
    assert proj and all("self.config.fp8_recipe != 'delayed'" in g for g in proj)
    fc2 = _guards("transformer/moe/experts.py", "TEGroupedMLP", "linear_fc2")
    assert fc2 == ["self.activation_recompute and (self.config.fp8 or self.config.fp4)"]
    assert _guards("transformer/moe/experts.py", "TEGroupedMLP", "linear_fc1") == ["self.offload_expert_fc1"]
    shared = _guards("transformer/moe/shared_experts.py", "SharedExpertMLP", "linear_fc1")
    assert any("self.config.fp8_recipe != 'delayed'" in g for g in shared)


@pytest.mark.parametrize("gpu,transpose", [("b200", 0), ("h100-sxm", 1)])
def test_fp8_parameters_under_full_sharding(gpu, transpose):
    """Megatron-FSDP with --fp8-param-gather: each rank stores its shard of the fp8 parameters (1 byte per
    linear parameter, the rest bf16); the weight TE runs on is the all-gathered one, whose transpose Hopper
    keeps (``update_usage`` adds it to the parameter in place), Blackwell needs none."""
    kw = dict(model=DENSE, parallel=dict(dp_sharding="full", fsdp_impl="megatron_fsdp"),
              cluster=dict(gpu=gpu, gpus_per_node=8))
    plan = Plan(training=dict(global_batch_size=8, precision="fp8", fp8_recipe="tensorwise",
                              fp8_param_gather=True), **kw)
    st = stage_memory(plan)[0]
    n = st.num_parameters
    lin = linear_params(arch_key(DENSE), 1, 1, 1, plan.chunk_layout()[0], n)
    assert st.parameters_bytes == pytest.approx((2 * (n - lin) + lin) / 8 + transpose * lin, rel=1e-9)


_FP8_ARGV = ["pretrain_gpt.py", "--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16",
             "--seq-length", "2048", "--max-position-embeddings", "2048", "--micro-batch-size", "1",
             "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size", "32000",
             "--fp8-format", "e4m3", "--fp8-recipe", "tensorwise"]


@pytest.mark.parametrize("extra, want", [([], "fp32"), (["--bf16"], None), (["--fp16"], "fp16")])
def test_fp8_without_bf16_reads_fp32_parameters(extra, want):
    """Megatron-LM d98e8a64dd ``training/arguments.py``: ``args.params_dtype = torch.float``, half under
    ``--fp16``, bfloat16 under ``--bf16``; ``--fp8-format`` leaves it.  The reader keeps the fp8 precision and
    records the parameters' dtype (None = bf16); the writer writes back no ``--bf16`` for fp32 parameters; the
    memory model stores parameters and activations in that dtype."""
    from primus_launch.adapters.megatron import plan_from_argv, render_argv

    argv = _FP8_ARGV + extra
    plan = plan_from_argv(argv)
    t = plan.training
    assert (t.precision, t.lowp_params_dtype) == ("fp8", want)
    assert t.storage_precision == (want or "fp8")
    out = render_argv(plan.with_changes(training={"micro_batch_size": 2}), argv)
    assert ("--bf16" in out) == (want is None) and ("--fp16" in out) == (want == "fp16")
    if want == "fp32":
        s32, s16 = stage_memory(plan)[-1], stage_memory(plan_from_argv(argv + ["--bf16"]))[-1]
        # fp32 parameters are their own masters: Adam's two fp32 moments (8 B) against master + moments (12 B)
        assert s32.optimizer_bytes / s16.optimizer_bytes == pytest.approx(8 / 12, rel=1e-6)
        la32, la16 = (layer_activation_bytes(DENSE, seq=2048, mbs=1, tp=1, sp=False, abytes=a, fp8="tensorwise")
                      for a in (4, 2))
        assert s32.activations_bytes > s16.activations_bytes and la32.full > la16.full


def test_tuner_keeps_fp32_parameters_only_under_a_low_precision():
    """A tuner candidate keeps fp8 over fp32 parameters while it stays fp8; a bf16 candidate is ``--bf16``."""
    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.tuner.knobs import apply_knobs, knobs_of, validated

    plan = plan_from_argv(_FP8_ARGV)
    k = knobs_of(plan)
    assert validated(apply_knobs(plan, k)).training.lowp_params_dtype == "fp32"
    bf16 = validated(apply_knobs(plan, k._replace(precision="bf16", fp8_recipe=None)))
    assert (bf16.training.precision, bf16.training.lowp_params_dtype) == ("bf16", None)


def test_fp32_logits_hold_the_cross_entropy_softmax():
    """megatron-core 0.16.1 ``tensor_parallel/cross_entropy.py`` (run here on the CPU): ``calculate_logits_max``'s
    ``.float()`` returns fp32 logits themselves and the softmax is computed in place in them; bf16 logits get a
    new fp32 copy, the bf16 logits staying alive beside it until the loss returns.  So the unfused loss's
    transient (``output_activation_bytes``) has no logits copy when the logits are fp32."""
    import torch
    from megatron.core.tensor_parallel.cross_entropy import VocabParallelCrossEntropy as V

    from primus_launch.projection.memory.activations import output_activation_bytes

    for dtype, in_place in ((torch.float32, True), (torch.bfloat16, False)):
        logits = torch.randn(8, 2, 64, dtype=dtype)
        lg, mx = V.calculate_logits_max(logits)
        _, _, pred, sum_exp, exp_logits = V.calculate_predicted_logits(lg, torch.zeros(8, 2, dtype=torch.long),
                                                                         mx, 0, 64)
        softmax, _ = V.calculate_cross_entropy_loss(exp_logits, pred, sum_exp)
        assert softmax.dtype == torch.float32
        assert (softmax.data_ptr() == logits.data_ptr()) is in_place
    sb, v, h = 2048, 32000, 1024
    _, t32 = output_activation_bytes(DENSE, seq=2048, mbs=1, tp=1, sp=False, abytes=4)
    _, t16 = output_activation_bytes(DENSE, seq=2048, mbs=1, tp=1, sp=False, abytes=2)
    assert t32 == 4 * sb * h  # the output layer's input only
    assert t16 == 2 * sb * v + 2 * sb * h
    _, n32 = output_activation_bytes(DENSE, seq=2048, mbs=1, tp=1, sp=False, abytes=4, ce="native")
    assert n32 == 4 * sb * v + 4 * sb * h  # the compiled backward's new fp32 gradient, no cast


def test_fp8_over_fp32_parameters_published():
    """Megatron-LM d98e8a64dd functional tests ``moe/deepseek_proxy_fsdp_ep2_fsdp2`` (2 GB200 nodes x 4, MBS 32)
    and its ``_1node`` twin (4 GB200, 2 layers, MBS 4): Megatron-FSDP, EP 2 / MLA / unfused attention,
    ``--fp8-format e4m3 --fp8-recipe tensorwise`` without ``--bf16``; golden mem-max-allocated-bytes
    34,308,540,416 / 2,547,948,032 B (iteration 50, last rank).  Read as FP8 over bf16 the projection was 29 % /
    14 % short."""
    import json
    import sys

    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "scripts"), str(root / "scripts" / "validation")]
    import validate_memory as vm

    vm.load_gpus()
    cases = {c["id"]: c for c in json.loads((root / "scripts/validation/memory_cases.json").read_text())["cases"]}
    for cid in ("mlm_functional_moe_deepseek_proxy_fsdp_ep2_fsdp2", "mlm_functional_moe_deepseek_proxy_fsdp_ep2_fsdp2_1node"):
        case = cases[cid]
        plan = vm.plan_of_case(case)
        assert plan.training.lowp_params_dtype == "fp32"
        got = stage_memory(plan)[-1].allocated_bytes / 2**30
        assert got == pytest.approx(case["measured_peak"]["gib"], rel=0.05), cid
