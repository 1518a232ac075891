"""TorchTitan MoE memory (DeepSeek-V3, Qwen3 MoE) vs torchtitan 0.3.0's own ``parallelize`` and step.

Truth: :mod:`titan_trace` -- torchtitan's model classes from its registry at their real sizes (reduced
depth), its sharding configs with expert parallelism, its ``parallelize_deepseekv3`` / ``parallelize_qwen3``
(experts sharded by EP over the ``ep`` mesh and by FSDP2 over ``efsdp = dp_shard x cp x tp / ep``, the other
parameters over ``fsdp``), its pipeline splitter and schedules, its loss; torch's fake process group at the
preset's world size, ``FakeTensorMode``; the EP all-to-all with balanced split sizes
(:func:`titan_trace.use_balanced_all_to_all`).

- the presets' per-rank parameters, gradients (sharded and, as a pipeline stage accumulates them, unsharded)
  and AdamW states equal what ``parallelize`` leaves on a rank of the preset's own mesh (1,024 ranks for
  DeepSeek-V3 671B, 256 for Qwen3 235B-A22B), unit by unit, and the projection's stages are those units;
- the MoE backward's two phases (:func:`memory.titan.moe_backward_phases`) equal the traced ones;
- MoE steps with EP, without and with PP, per term within 3 %; the peak moves with EP and FSDP.

Runtime about 3 minutes on 2 CPU cores (the two preset builds at 1,024 / 256 ranks take most of it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from titan_trace import TitanCase, moe_backward_phases, trace, trace_pp, unit_states
from primus_launch.adapters import load_recipe
from primus_launch.adapters.torchtitan import arch_from_flavor
from primus_launch.plan import Plan
from primus_launch.projection.memory.estimate import titan_args, titan_stage_memory, estimate_memory, titan_stage_parts
from primus_launch.projection.memory.titan import (
    TitanImpl,
    op_sac_mm_outputs,
    fsdp_groups,
    layer_activation_bytes,
    moe_backward_phases as model_phases,
    titan_param_shapes,
)

RECIPES = Path(__file__).resolve().parents[1] / "recipes" / "torchtitan"
PRESETS = {"deepseek_v3_671b": ("deepseek_v3", "671B"), "qwen3_235b_a22b": ("qwen3", "235B-A22B")}
#: the flash-attention op on SelectiveAC's save list, the CPU trace's composite RMSNorm (8 bytes / element)
IMPL = TitanImpl(norm_bytes=8, sdpa_on_save_list=True)
MiB = 2**20


def _cat(snap: dict, name: str) -> int:
    return sum(v for k, v in snap.items() if getattr(k, "value", k) == name)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_preset_params_grads_optimizer_equal_parallelize(preset):
    """Rank 0 of the preset's own mesh (dp_shard x ep x pp as the recipe resolves it), one block of each kind
    (deepseek_v3: its last dense layer and first MoE layer), the embedding and the head: per FSDP2 unit and
    parameter group, torchtitan's fp32 sharded parameters, sharded gradients, unsharded accumulated
    gradients and AdamW states equal :func:`fsdp_groups` (bytes, exactly); each projected stage's parameters,
    optimizer states and gradients are the sum of those units over the layers the stage holds."""
    plan = load_recipe(RECIPES / f"{preset}.toml")
    model, flavor = PRESETS[preset]
    arch, p = plan.model, plan.parallel
    dense = arch.moe_dense_first_layers
    case = TitanCase(model=model, flavor=flavor, layers=2 if dense else 1, first_layer=max(0, dense - 1),
                     seq=arch.seq_length, dp_shard=plan.dp // p.dp_replicate, dp_replicate=p.dp_replicate,
                     tp=p.tp, cp=p.cp, pp=p.pp, ep=p.ep, mbs=1, flash=True)
    assert case.world == plan.world_size
    got = unit_states(case)
    S = case.dp_shard * case.cp
    Se = S * case.tp // case.ep if case.ep > 1 else S
    kinds = {"tok_embeddings": "emb", "lm_head": "head"}
    for i in range(case.layers):
        kinds[f"layers.{i}"] = "moe" if arch.is_moe_layer(case.first_layer + i) else "dense"
    assert set(got) == set(kinds)
    unit = {}
    for name, part in kinds.items():
        want = fsdp_groups(titan_param_shapes(arch, part, tp=case.tp, ep=case.ep), S=S, Se=Se, ep=case.ep,
                           num_experts=arch.num_experts)
        assert [g["shard"] for g in got[name]] == [g.shard for g in want], name
        for g, w in zip(got[name], want):
            assert g["params"] == 4 * w.sharded, (name, g, w)
            assert g["grads"] == 4 * w.sharded, (name, g, w)
            assert g["optimizer"] == 8 * w.sharded, (name, g, w)
            assert g["accumulated"] == 4 * w.grad_elems, (name, g, w)
        unit[part] = {k: sum(g.get(k, 0) for g in got[name]) for k in ("params", "grads", "optimizer", "accumulated",
                                                                      "buffers")}
    # the projection's stages: the traced units over the layers each stage holds
    parts = titan_stage_parts(*titan_args(plan))
    for rank, row in enumerate(plan.chunk_layout()):
        st, terms = parts[rank]
        held = [("emb" if c.embedding else None) for c in row] + [("head" if c.loss else None) for c in row]
        held += ["moe" if arch.is_moe_layer(i) else "dense" for c in row for i in c.layers]
        held = [k for k in held if k]
        total = {k: sum(unit[u][k] for u in held) for k in ("params", "grads", "optimizer", "accumulated", "buffers")}
        assert st.parameters_bytes == total["params"] + total["buffers"], rank
        assert st.optimizer_bytes == total["optimizer"], rank
        assert terms["grads_sharded"] == total["grads"], rank
        assert terms["grads_unsharded"] == total["accumulated"], rank


@pytest.mark.parametrize("case", [
    TitanCase(model="deepseek_v3", flavor="16B", layers=2, first_layer=1, seq=8192, dp_shard=8, ep=4, flash=True),
    TitanCase(model="deepseek_v3", flavor="16B", layers=2, first_layer=1, seq=8192, dp_shard=8, ep=1, flash=True),
    TitanCase(model="deepseek_v3", flavor="16B", layers=2, first_layer=1, seq=8192, dp_shard=4, tp=2, ep=4, flash=True),
], ids=["dsv3-16b-ep4", "dsv3-16b-ep1", "dsv3-16b-tp2-ep4"])
def test_moe_backward_phases_traced(case):
    """The bytes the MoE backward of torchtitan's block allocates beyond what it kept when it began, at the
    highest point of its combine phase and of its grouped experts' backward (titan_trace.moe_backward_phases),
    equal the model's walk of the same code within 0.5 MiB of small tensors (routing indices, counts)."""
    got = moe_backward_phases(case)
    arch = arch_from_flavor(case.model, case.flavor)
    want = model_phases(arch, seq=case.seq, mbs=case.mbs, tp=case.tp, ep=case.ep)
    for phase, (alloc, freed) in want.items():
        assert alloc - freed == pytest.approx(got[phase], abs=MiB * 1.1), (phase, (alloc - freed) / MiB, got[phase] / MiB)


def _moe_plan(c: TitanCase, **parallel) -> Plan:
    from test_memory_titan import plan_of

    p = plan_of(c)
    dense = max(0, arch_from_flavor(c.model, c.flavor).moe_dense_first_layers - c.first_layer)
    return p.model_copy(update={"parallel": p.parallel.model_copy(update={"ep": c.ep, **parallel}),
                                "model": p.model.model_copy(update={"moe_dense_first_layers": dense})})


@pytest.mark.parametrize("case", [
    TitanCase(model="qwen3", flavor="debugmodel_moe", layers=2, seq=512, dp_shard=8, ep=4, flash=True),
    TitanCase(model="deepseek_v3", flavor="debugmodel", layers=3, seq=512, dp_shard=8, ep=4, flash=True),
], ids=["qwen3-ep4", "dsv3-ep4"])
def test_moe_ep_step_within_3pct(case):
    """A step with EP (no PP): parameters and optimizer exact, the peak within 3 % (its moment: the last
    MoE block's backward, where the experts' gradients meet everything kept)."""
    got = trace(case)
    st = titan_stage_memory(*titan_args(_moe_plan(case)), IMPL)[0]
    pk = got["peak_snapshot"]
    assert st.parameters_bytes == pytest.approx(_cat(pk, "Sharded Param") + _cat(pk, "Buffer"), rel=1e-6)
    assert st.optimizer_bytes == pytest.approx(_cat(pk, "OptState"), rel=1e-4)  # + AdamW's scalar steps
    assert st.allocated_bytes == pytest.approx(got["peak"], rel=0.03)


PP_CASES = {
    "qwen3-pp2-ep2": TitanCase(model="qwen3", flavor="debugmodel_moe", pp=2, dp_shard=4, ep=2, layers=2, seq=512,
                               nmb=3, flash=True),
    "dsv3-16b-pp2-ep4-fullac": TitanCase(model="deepseek_v3", flavor="16B", pp=2, dp_shard=4, ep=4, layers=3,
                                         seq=2048, nmb=3, flash=True, ac="full"),
}


@pytest.mark.parametrize("name", list(PP_CASES))
def test_moe_pp_stage_per_term_within_3pct(name):
    """torchtitan's pipelined MoE step with EP (its splitter, ``parallelize_fn``, 1F1B): per stage, the total,
    parameters, optimizer, gradients (sharded + unsharded accumulated), unsharded parameters held, receive
    buffers and the rest (activations in flight, MoE backward, reduce-scatter buffers) within 3 %."""
    from test_memory_titan_pp import pp_plan, terms_of_model, terms_of_trace

    c = PP_CASES[name]
    p = pp_plan(c)
    p = p.model_copy(update={"parallel": p.parallel.model_copy(update={"ep": c.ep})})
    model = titan_stage_parts(*titan_args(p), IMPL)
    for rank in range(c.pp):
        got = terms_of_trace(trace_pp(c, rank))
        want = terms_of_model(*model[rank])
        for term, v in got.items():
            assert want[term] == pytest.approx(v, rel=0.03, abs=MiB), (name, rank, term, want[term] / MiB, v / MiB)


def test_moe_block_activations_with_ep_and_tp():
    """One more MoE block's bytes after the forward with EP (tokens, the permute index), with TP + EP
    (the tokens split over the TP ranks before the router), with EP under SelectiveAC (the all-to-all
    outputs and the router's top-k saved, the grouped GEMMs recomputed) equal the model's block;
    deepseek_v3 (MLA and a TP-sharded shared expert) with TP + EP."""
    for c0 in (TitanCase(model="qwen3", flavor="debugmodel_moe", layers=1, seq=512, dp_shard=8, ep=4, flash=True,
                         ac="op"),
               TitanCase(model="qwen3", flavor="debugmodel_moe", layers=1, seq=512, dp_shard=8, ep=4, flash=True),
               TitanCase(model="deepseek_v3", flavor="debugmodel", layers=1, first_layer=1, seq=512, dp_shard=4,
                         tp=2, ep=2, flash=True)):
        # traces that end once the second step's loss is computed (titan_trace.trace's forward_only: the same bytes)
        one, two = (trace(c, forward_only=True) for c in (c0, TitanCase(**{**c0.__dict__, "layers": 2})))
        per = _cat(two["after_forward"], "Activation") - _cat(one["after_forward"], "Activation")
        arch = arch_from_flavor(c0.model, c0.flavor)
        la = layer_activation_bytes(arch, seq=c0.seq, mbs=1, tp=c0.tp, impl=IMPL, moe=True, attn="sdpa", ep=c0.ep,
                                    ac=c0.ac)
        assert la.kept == pytest.approx(per, rel=1e-3), (c0, la.kept, per)


def test_op_sac_mla_moe_block_saves_every_second_mm_of_attention_and_shared_expert():
    """torchtitan's SelectiveAC on a deepseek_v3 MoE block (MLA without a query LoRA, a shared expert; EP 1, the
    DeepSeek-V3 16B H100 row's layout): the block's mm calls are wq, wkv_a, wkv_b, wo, (the router's gate,
    forced to recompute), the shared expert's w1, w3, w2 -- the policy saves wq, wkv_b, w1 and w2 (traced: one
    more block's bytes after the forward).  The CPU trace's attention stand-in for d_qk != d_v (a custom
    autograd function) is not on the save list, so the model is taken without the attention output
    (``sdpa_on_save_list=False``); on a GPU flex / cuDNN attention is on the list and the output is kept."""
    c0 = TitanCase(model="deepseek_v3", flavor="debugmodel", layers=1, first_layer=1, seq=512, dp_shard=8, ep=1,
                   flash=True, ac="op")
    one, two = (trace(c, forward_only=True) for c in (c0, TitanCase(**{**c0.__dict__, "layers": 2})))
    per = _cat(two["after_forward"], "Activation") - _cat(one["after_forward"], "Activation")
    arch = arch_from_flavor(c0.model, c0.flavor)
    assert not arch.q_lora_rank and arch.moe_shared_expert_intermediate_size
    impl = TitanImpl(norm_bytes=8, sdpa_on_save_list=False)
    la = layer_activation_bytes(arch, seq=c0.seq, mbs=1, tp=1, impl=impl, moe=True, attn="sdpa", ep=1, ac="op")
    assert la.kept == pytest.approx(per, rel=1e-3), (la.kept / MiB, per / MiB)
    mms = op_sac_mm_outputs(arch, sb=c0.seq, tp=1, moe=True, split_qkv=False)
    assert len(mms) == 7  # wq, wkv_a, wkv_b, wo, the shared w1, w3, w2 (no router gate, no grouped mm)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_preset_fits_and_peak_moves_with_ep_and_fsdp(preset):
    """The presets fit their published cluster; their projected peak falls as EP spreads the experts over
    more ranks and rises when HSDP replicates what FSDP sharded (data_parallel_replicate_degree 2)."""
    plan = load_recipe(RECIPES / f"{preset}.toml")
    rep = estimate_memory(plan)
    assert rep.fits, (preset, rep.peak_bytes_per_gpu / 2**30)
    ep0 = plan.parallel.ep
    peaks = []
    for ep in (ep0 // 4, ep0 // 2, ep0):
        q = plan.model_copy(update={"parallel": plan.parallel.model_copy(update={"ep": ep})})
        peaks.append(estimate_memory(q).allocated_peak_bytes)
    assert peaks[0] > peaks[1] > peaks[2], peaks
    hsdp = plan.model_copy(update={"parallel": plan.parallel.model_copy(update={"dp_replicate": 2})})
    assert estimate_memory(hsdp).allocated_peak_bytes > rep.allocated_peak_bytes


def test_compiled_moe_block_keeps_what_inductors_partitioner_saves():
    """torch.compile of a torchtitan qwen3 30B-A3B MoE block (fullgraph with captured scalars, as torchtitan's
    apply_compile; meta device, real sizes, s 512): the tensors inductor's partitioner passes from the
    forward to the backward graph equal the model's compiled MoE block (three [N, F] and two [N, h] routed
    tensors, no fp32 combine copy)."""
    from titan_trace import compiled_block_saved_bytes

    from primus_launch.projection.memory.titan import TITAN

    arch = arch_from_flavor("qwen3", "30B-A3B")
    got = compiled_block_saved_bytes("30B-A3B", seq=512, model="qwen3")
    la = layer_activation_bytes(arch, seq=512, mbs=1, tp=1, compiled=True, impl=TITAN, attn="sdpa", moe=True)
    assert la.full == pytest.approx(got, rel=1e-3)


def test_unit_shards_equal_fsdp2_with_tp():
    """FSDP2 shards of torchtitan's units (no step: ``_sharded_param_data`` per group after ``parallelize``)
    with TP: deepseek_v3 16B TP 2 with EP 4 (experts on efsdp = 8 x 2 / 4) and without EP (experts
    TP-sharded on their FFN dim, the TP-sharded shared expert), llama3 8B TP 4, qwen3 235B FSDP 256 > 128
    experts (experts sharded on dim 1)."""
    from torch.distributed.fsdp import FSDPModule
    from titan_trace import build

    for c in (TitanCase(model="deepseek_v3", flavor="16B", layers=2, seq=4096, dp_shard=8, tp=2, ep=4),
              TitanCase(model="deepseek_v3", flavor="16B", layers=2, seq=4096, dp_shard=8, tp=2, ep=1),
              TitanCase(model="llama3", flavor="8B", layers=1, seq=4096, dp_shard=16, tp=4),
              TitanCase(model="qwen3", flavor="235B-A22B", layers=1, seq=4096, dp_shard=256)):
        net, _ = build(c)
        arch = arch_from_flavor(c.model, c.flavor)
        S = c.dp_shard * c.cp
        Se = S * c.tp // c.ep if c.ep > 1 else S
        for name, mod in net.named_modules():
            if not isinstance(mod, FSDPModule) or not name or name == "norm":
                continue
            part = {"tok_embeddings": "emb", "lm_head": "head"}.get(name) or (
                "moe" if arch.is_moe_layer(c.first_layer + int(name.split(".")[1])) else "dense")
            want = fsdp_groups(titan_param_shapes(arch, part, tp=c.tp, ep=c.ep), S=S, Se=Se, ep=c.ep,
                               num_experts=arch.num_experts or 1)
            got = [(g.mesh_info.shard_mesh_size, sum(fp._sharded_param_data.numel() for fp in g.fsdp_params))
                   for g in mod._get_fsdp_state()._fsdp_param_groups]
            assert got == [(w.shard, w.sharded) for w in want], (c, name)
