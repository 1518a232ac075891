"""Fine-grained activation offloading (``--fine-grained-activation-offloading --offload-modules``) against
megatron-core's own code (installed 0.16.1, the same logic as Megatron-LM d98e8a64dd
``pipeline_parallel/fine_grained_activation_offload.py``), run on the CPU:

- what a module's offload group moves: the manager's ``saved_tensors_hooks`` take every tensor autograd saves
  inside the module of at least ``min_offloaded_tensor_size`` elements, so for the core attention the unfused
  path's ``s x s`` softmax output goes too, not only q, k, v (megatron's own ``DotProductAttention`` run
  under such a hook);
- what stays: ``PipelineOffloadManager.post_warmup_callback`` marks the last group of each module name in the
  first chunk to run its backward not to offload ("the offload margin"): one layer's groups (the callback
  run on stand-in chunks).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.memory.activations import (
    MCORE_LOCAL,
    OFFLOAD_MIN_ELEMENTS,
    impl_for,
    layer_activation_bytes,
)

mcore = pytest.importorskip("megatron.core")
from mcore_meta import init_fake_parallel, mcore_config  # noqa: E402


def test_min_offloaded_tensor_size_is_megatrons_default():
    from megatron.core.transformer.transformer_config import TransformerConfig

    assert TransformerConfig.__dataclass_fields__["min_offloaded_tensor_size"].default == OFFLOAD_MIN_ELEMENTS


@pytest.fixture
def fake_world():
    """megatron's parallel state on a fake world of one, torn down after the test (another helper may replace
    the default process group later, and megatron's groups must not outlive it)."""
    import mcore_meta
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    init_fake_parallel(1, 1)
    yield
    ps.destroy_model_parallel()
    if dist.is_initialized():
        dist.destroy_process_group()
    mcore_meta._STATE.clear()


def test_core_attn_offload_group_takes_the_unfused_scores(fake_world):
    """The bytes of the distinct storages megatron's unfused ``DotProductAttention`` saves for backward, of
    at least ``min_offloaded_tensor_size`` elements (what the ``core_attn`` group moves to the host): q and
    k (the scores' matmul), the fp32 softmax output and its bf16 copy (CPU: megatron's torch softmax path,
    ``MCORE_LOCAL``), v -- equal to the model's ``core_attn`` offloadable bytes, the s x s term included
    (before round 14 the model moved q, k, v only)."""
    from megatron.core.transformer.dot_product_attention import DotProductAttention
    from megatron.core.transformer.enums import AttnMaskType

    s, b, heads, d = 1024, 1, 8, 128  # q, k, v: 1 Mi elements each; scores 8 Mi
    arch = ModelArch(num_layers=1, hidden_size=heads * d, ffn_hidden_size=4 * heads * d, num_attention_heads=heads,
                     vocab_size=1024, seq_length=s)
    plan = Plan(model=arch, training=dict(global_batch_size=1, attention_backend="unfused"), cluster=dict(gpus_per_node=1))
    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install()  # megatron's CUDA-only causal mask and device calls, on the CPU
    mcore_cpu.seed_rng_tracker(1234)
    cfg = mcore_config(plan, num_layers=1, **mcore_cpu.config_overrides())
    attn = DotProductAttention(cfg, layer_number=1, attn_mask_type=AttnMaskType.causal, attention_type="self")
    q, k, v = (torch.randn(s, b, heads, d, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor):
        if t.numel() >= OFFLOAD_MIN_ELEMENTS:
            st = t.untyped_storage()
            saved[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = attn(q, k, v, attention_mask=None, attn_mask_type=AttnMaskType.causal)
    assert out.shape == (s, b, heads * d)
    la = layer_activation_bytes(arch, seq=s, mbs=b, tp=1, sp=False, impl=impl_for(arch, "unfused", MCORE_LOCAL))
    offloadable = dict(la.offloadable)["core_attn"]
    # + the bool causal mask [s, s] the torch path's in-place masked_fill saves (one cached tensor shared by
    # every layer; the GPU's fused upper-triangular softmax takes no mask): not in the model
    assert sum(saved.values()) == pytest.approx(offloadable + s * s, rel=1e-6)
    assert offloadable > 3 * 2 * s * b * heads * d  # not q, k, v alone
    assert offloadable == pytest.approx(3 * 2 * s * b * heads * d + la.core_attention, rel=1e-9)


def test_offload_margin_keeps_one_layer_of_groups(monkeypatch):
    """megatron's ``post_warmup_callback`` on two chunks of two layers (forward order c0, c1; c1 runs its
    backward first): exactly one group per module name stays on the GPU, all of them the last layer of the
    first chunk to run its backward -- one layer's offloadable tensors, what the model adds."""
    from megatron.core.pipeline_parallel import fine_grained_activation_offload as fgo

    monkeypatch.setattr(torch.cuda, "Event", lambda *a, **k: None)
    monkeypatch.setattr(fgo, "print_offload_summary_table", lambda *a, **k: None)
    names = ["attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm"]

    def chunk(tag: str):
        groups = [fgo.OffloadTensorGroup(n) for _layer in range(2) for n in names]
        c = SimpleNamespace(offload_groups=groups, is_warmup=True, tag=tag)
        c.get_max_deduplicated_groups = lambda c=c: fgo.ChunkOffloadHandler.get_max_deduplicated_groups(c)
        return c

    c0, c1 = chunk("c0"), chunk("c1")
    mgr = object.__new__(fgo.PipelineOffloadManager)
    mgr._is_warmup, mgr._offload_margin = True, 0
    mgr._cached_chunks_forward, mgr._cached_chunks_backward = [c0, c1], [c1, c0]
    mgr.post_warmup_callback()
    kept = [(c.tag, i // len(names), g._name) for c in (c0, c1) for i, g in enumerate(c.offload_groups)
            if not g.offload]
    assert sorted(kept) == sorted(("c1", 1, n) for n in names)


def test_margin_in_the_stage_peak():
    """The plan's stage peak keeps one layer's offloaded bytes on the GPU beside the in-flight activations
    (a PP-1 Llama block: every micro-batch's offloadable bytes leave but one layer's)."""
    from primus_launch.projection.memory.estimate import stage_memory

    arch = ModelArch(num_layers=8, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
                     num_query_groups=8, vocab_size=128256, seq_length=4096)
    base = Plan(model=arch, training=dict(global_batch_size=8, recompute=dict(granularity="none")),
                cluster=dict(gpus_per_node=8))
    mods = ("attn_proj", "core_attn")
    off = base.with_changes(training=dict(offload=dict(activation_modules=mods)))
    la = layer_activation_bytes(arch, seq=4096, mbs=1, tp=1, sp=False)
    d = dict(la.offloadable)
    moved = stage_memory(base)[0].activations_bytes - stage_memory(off)[0].activations_bytes
    assert moved == pytest.approx((8 - 1) * sum(d[m] for m in mods), rel=1e-6)


def test_offload_inside_a_moe_checkpoint_moves_nothing(monkeypatch):
    """Selective ``moe`` recompute runs the MoE forward under megatron's ``tensor_parallel.checkpoint``
    (``moe_layer.py``), which runs it without grad: an offload group's ``saved_tensors_hooks`` inside it (the
    experts' ``expert_fc1`` / ``moe_act`` groups) see no tensor in the forward -- megatron's own
    ``CheckpointFunction`` run on the CPU (its CUDA RNG state read from the CPU generator) -- so the model moves
    nothing for them (``LayerActivations.offloaded``) and a layer keeps no negative bytes; it once subtracted
    the experts' bytes twice (``drops["moe"]`` and ``offloadable``), 10 MiB below zero per layer on the
    Qwen3-235B recipe's space, which made a TE-graphed plan allocate less than its eager twin."""
    from megatron.core import tensor_parallel
    from megatron.core.tensor_parallel import random as tp_random

    monkeypatch.setattr(tp_random, "_get_cuda_rng_state", lambda *a, **k: torch.get_rng_state())
    monkeypatch.setattr(tp_random, "_set_cuda_rng_state", lambda *a, **k: None)
    packed: list[int] = []
    fc1 = torch.nn.Linear(64, 128)

    def experts(x):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t.numel()) or t, lambda t: t):
            return fc1(x)

    x = torch.randn(8, 64, requires_grad=True)
    y = tensor_parallel.checkpoint(experts, False, x)
    assert packed == []  # nothing to offload in the checkpointed forward
    y.sum().backward()
    assert packed  # the recompute saves (and its backward consumes) them
    packed.clear()
    experts(x)
    assert packed  # eager: the group does see fc1's input

    arch = ModelArch(num_layers=4, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32,
                     num_query_groups=4, vocab_size=151936, seq_length=4096, num_experts=64, moe_router_topk=8,
                     moe_ffn_hidden_size=768)
    la = layer_activation_bytes(arch, seq=4096, mbs=1, tp=2, sp=True, cp=8, moe=True, ep=8)
    mods = ("expert_fc1", "moe_act")
    assert la.offloaded(mods) == pytest.approx(sum(b for m, b in la.offloadable if m in mods))
    assert la.offloaded(mods) > 0
    assert la.offloaded(mods, ("moe",)) == 0.0
    assert la.offloaded(("core_attn",) + mods, ("moe",)) == la.offloaded(("core_attn",))
    assert la.selective(("moe",)) - la.offloaded(mods, ("moe",)) > 0
    # the same checkpointed forward saves nothing for a moe_act / shared_experts checkpoint inside it either
    assert la.selective(("moe", "moe_act", "shared_experts")) == la.selective(("moe",)) > 0


def test_offload_groups_a_selective_recompute_already_takes():
    """Every bundled recipe's model, at two shardings, over the tuner's offload sets and every selective module
    set: a layer never keeps negative bytes.  megatron-core 0.16.1 opens the core_attn offload group only
    without ``checkpoint_core_attention`` (``attention.py`` / ``multi_latent_attention.py``), and MLA's
    ``mla_up_proj`` frees the q, k, v the core_attn group copies (once:
    test_mla_up_proj_and_core_attn_group_free_q_k_v_once)."""
    import itertools
    from pathlib import Path

    from primus_launch.adapters import load_recipe
    from primus_launch.plan.legality import RECOMPUTE_MODULES

    root = Path(__file__).resolve().parents[1]
    offs = [("core_attn", "attn_proj"), ("expert_fc1",), ("expert_fc1", "moe_act"), ("attn_norm", "mlp_norm"),
            ("qkv_linear",)]
    seen_mla = False
    for recipe in ("deepseek_v3_671b.sh", "mixtral_8x22b.sh", "qwen3_235b_a22b_h100_256gpu.yaml"):
        m = load_recipe(root / "recipes/megatron" / recipe).model
        for tp, cp, sp, moe in ((1, 1, False, m.is_moe), (2, 8, True, m.is_moe), (8, 1, True, False)):
            la = layer_activation_bytes(m, seq=m.seq_length, mbs=1, tp=tp, sp=sp, cp=cp, moe=moe, ep=8 if moe else 1)
            d = dict(la.offloadable)
            assert la.offloaded(("core_attn",), ("core_attn",)) == 0.0 < d["core_attn"]
            seen_mla |= bool(dict(la.drops).get("mla_up_proj"))
            for k in (1, 2, 3):
                for rc in itertools.combinations(RECOMPUTE_MODULES, k):
                    for off in offs:
                        assert la.selective(rc) - la.offloaded(off, rc) >= 0, (recipe, tp, moe, rc, off)
    assert seen_mla


def test_mla_up_proj_and_core_attn_group_free_q_k_v_once(monkeypatch):
    """MLA's ``mla_up_proj`` recompute with the ``core_attn`` offload group (megatron-core 0.16.1
    ``multi_latent_attention.py``): ``CheckpointWithoutOutput`` returns q, k, v, the core attention saves views of
    them inside the group's ``saved_tensors_hooks``, then ``discard_output_and_register_recompute`` resizes
    their storages to 0.  A real megatron-core MLA layer on the CPU (``mem_measure``, flash-like core attention)
    with the core attention run under an offloading hook (saved tensors of at least a threshold moved off the
    device, like ``tensor_push`` / ``bulk_offload_group``): without recompute the hook frees q, k, v (the model's
    ``offloadable["core_attn"]``); with ``mla_up_proj`` it frees nothing more -- q, k, v go once.  The group
    still copies them (time, reload): ``LayerActivations.copied``."""
    import mcore_meta
    from mem_measure import measure_step

    arch = ModelArch(num_layers=1, hidden_size=256, ffn_hidden_size=512, num_attention_heads=4, vocab_size=1024,
                     seq_length=128, multi_latent_attention=True, q_lora_rank=64, kv_lora_rank=32,
                     qk_head_dim=32, qk_pos_emb_head_dim=16, v_head_dim=32, qk_layernorm=True)
    cut = 4096  # the min_offloaded_tensor_size stand-in: above the log-sum-exp (b heads s), below q, k, v
    plain = mcore_meta.SDPACoreAttention.forward

    def offloaded_forward(self, *a, **k):
        def pack(t):
            return ("host", t.shape, t.dtype) if t.numel() >= cut else t

        def unpack(x):
            return torch.empty(x[1], dtype=x[2]) if isinstance(x, tuple) else x

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            return plain(self, *a, **k)

    kept = {}
    for rc in ((), ("mla_up_proj",)):
        rec = dict(granularity="selective", modules=list(rc)) if rc else dict(granularity="none")
        plan = Plan(model=arch, training=dict(global_batch_size=1, recompute=rec), cluster=dict(gpus_per_node=1))
        for off in (False, True):
            monkeypatch.setattr(mcore_meta.SDPACoreAttention, "forward", offloaded_forward if off else plain)
            kept[rc, off] = measure_step(plan, 1, post_process=False, fused_swiglu=True)["activations"]
    la = layer_activation_bytes(arch, seq=128, mbs=1, tp=1, sp=False, impl=MCORE_LOCAL)
    qkv = dict(la.drops)["mla_up_proj"]
    assert kept[(), False] - kept[(), True] == dict(la.offloadable)["core_attn"] == qkv
    assert kept[("mla_up_proj",), False] - kept[("mla_up_proj",), True] == 0
    assert la.offloaded(("core_attn",), ("mla_up_proj",)) == 0.0
    assert la.copied(("core_attn",), ("mla_up_proj",)) == qkv  # copied to the host and back all the same
    assert la.copied(("core_attn",), ("core_attn",)) == 0.0  # a core_attn recompute opens no group


def test_offload_copy_time_follows_the_recompute():
    """The time side copies what the groups copy under the plan's recompute (``cost/offload.py``): a
    ``core_attn`` recompute leaves the core_attn group nothing, MLA's ``mla_up_proj`` leaves it q, k, v."""
    from primus_launch.projection.cost.offload import module_offload_seconds
    from primus_launch.projection.hardware.gpus import get_gpu

    arch = ModelArch(num_layers=4, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=16, vocab_size=32000,
                     seq_length=4096, multi_latent_attention=True, q_lora_rank=512, kv_lora_rank=256,
                     qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128, qk_layernorm=True)
    spec = get_gpu("h100-sxm")

    def secs(rc):
        rec = dict(granularity="selective", modules=list(rc)) if rc else dict(granularity="none")
        plan = Plan(model=arch, training=dict(global_batch_size=8, recompute=rec,
                                              offload=dict(activation_modules=("core_attn",))),
                    cluster=dict(gpus_per_node=8))
        return module_offload_seconds(plan, spec, False)

    la = layer_activation_bytes(arch, seq=4096, mbs=1, tp=1, sp=False)
    assert secs(()) == pytest.approx(dict(la.offloadable)["core_attn"] / spec.host_link_bw)
    assert secs(("core_attn",)) == 0.0
    assert secs(("mla_up_proj",)) == secs(()) > 0
