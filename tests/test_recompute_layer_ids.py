"""AMD Primus ``recompute_layer_ids``: full recompute of exactly the listed layers (global 0-based ids,
MTP depth d = num_layers + d), each layer its own checkpoint
(``primus/backends/megatron/patches/recompute_layer_patches.py``).

Truth: Primus's own normalisation and validation rules (reader tests, on a small Primus-style checkout
written by ``test_adapter_primus``); and closed-form identities with Megatron's own methods, whose
memory is traced against megatron-core in ``test_memory`` -- every layer listed is
``recompute_method uniform, recompute_num_layers 1`` (each layer its own checkpoint), the first N
layers of every chunk are ``block, N`` -- and the per-layer sum for a mixed list of dense and MoE layers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from primus_launch.adapters.primus_yaml import load_primus_yaml, render_primus_yaml
from primus_launch.plan import ModelArch, Plan, PlanError
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.projection.memory.estimate import stage_memory
from primus_launch.tuner.space import apply_knobs, knobs_of
from test_adapter_recipe_gaps import NODE, _exp, _roundtrip
from test_adapter_primus import _tree

# a DeepSeek-V3-shaped MoE (3 dense layers first), cut to 16 layers
ARCH = ModelArch(name="dsv3-16", num_layers=16, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128,
                 vocab_size=129280, seq_length=4096, num_experts=256, moe_router_topk=8, moe_ffn_hidden_size=2048,
                 moe_shared_expert_intermediate_size=2048, moe_dense_first_layers=3, multi_latent_attention=True,
                 q_lora_rank=1536, kv_lora_rank=512, qk_layernorm=True)
MTP = ARCH.model_copy(update=dict(mtp_num_layers=1))


def _plan(arch: ModelArch = ARCH, pp: int = 4, vpp: int = 1, **rc) -> Plan:
    return Plan(model=arch, parallel=dict(tp=2, pp=pp, vpp=vpp, ep=8, sequence_parallel=True,
                                          dp_sharding="optimizer"),
                training=dict(global_batch_size=64, recompute=rc,
                              pipeline_schedule="interleaved_1f1b" if vpp > 1 else "1f1b"), cluster=dict(gpu="mi355x", num_nodes=8))


def _ids(**rc) -> dict:
    return dict(granularity="full", method="layer_ids", **rc)


def _same_projection(a: Plan, b: Plan) -> None:
    sa, sb = stage_memory(a), stage_memory(b)
    assert [s.model_dump() for s in sa] == [s.model_dump() for s in sb]
    assert project_dry_run(a).iteration_time_s == pytest.approx(project_dry_run(b).iteration_time_s, rel=1e-12)


# ----------------------------------------------------------------------------- projection identities
@pytest.mark.parametrize("arch,vpp", [(ARCH, 1), (MTP, 1), (ARCH, 2)], ids=["pp4", "pp4-mtp", "pp4-vpp2"])
def test_every_layer_listed_is_uniform_one(arch, vpp):
    every = tuple(range(arch.num_layers + arch.mtp_num_layers))  # the MTP depth too (uniform recomputes it)
    _same_projection(_plan(arch, vpp=vpp, **_ids(layer_ids=every)),
                     _plan(arch, vpp=vpp, granularity="full", method="uniform", num_layers=1))


@pytest.mark.parametrize("n,vpp", [(1, 1), (2, 1), (1, 2)])
def test_first_n_of_every_chunk_is_block_n(n, vpp):
    block = _plan(vpp=vpp, granularity="full", method="block", num_layers=n)
    first = tuple(sorted(i for row in block.chunk_layout() for ch in row for i in ch.layers[:n]))
    _same_projection(_plan(vpp=vpp, **_ids(layer_ids=first)), block)


def test_mixed_list_activations_are_the_per_layer_sum():
    """Dense and MoE layers, some listed: each listed layer keeps its input, the others everything."""
    from primus_launch.projection.memory.activations import (layer_activation_bytes, output_activation_bytes,
                                                             rope_table_bytes)
    from primus_launch.projection.memory.inflight import in_flight_closed_form as _in_flight

    ids = (0, 2, 5, 6, 11)
    plan = _plan(**_ids(layer_ids=ids))
    kw = dict(seq=4096, mbs=1, tp=2, sp=True, ep=8)
    dense, moe = (layer_activation_bytes(ARCH, moe=x, **kw) for x in (False, True))
    flight = _in_flight("1f1b", 4, 1, plan.num_microbatches)
    for r, (st, row) in enumerate(zip(stage_memory(plan), plan.chunk_layout())):
        per = sum(dense.layer_input if i in ids else (moe if i >= 3 else dense).full for i in row[0].layers)
        per += rope_table_bytes(ARCH, seq=4096) + (8 * 4096 if r == 0 else 0)
        want = flight[r] * per  # (TE gathers the SP input per GEMM: no persistent all-gather buffer)
        if r == 3:
            want += output_activation_bytes(ARCH, seq=4096, mbs=1, tp=2, sp=True)[0]
        assert st.activations_bytes == pytest.approx(want, rel=1e-9, abs=2)
    # more listed layers: less memory, more time (each listed layer's forward runs twice)
    none, more = _plan(), _plan(**_ids(layer_ids=ids + (12, 13)))
    assert stage_memory(more)[3].activations_bytes < stage_memory(plan)[3].activations_bytes
    t = [project_dry_run(p).iteration_time_s for p in (none, plan, more)]
    assert t[0] < t[1] < t[2]


def test_mtp_depth_is_addressed_after_the_decoder():
    """id num_layers = MTP depth 0: listing it recomputes the MTP module (memory and time), as uniform does."""
    dec = tuple(range(16))
    a, b = _plan(MTP, **_ids(layer_ids=dec)), _plan(MTP, **_ids(layer_ids=dec + (16,)))
    assert a.chunk_mtp_ids()[3] == ((16,),)
    assert stage_memory(b)[3].activations_bytes < stage_memory(a)[3].activations_bytes
    assert [x.activations_bytes for x in stage_memory(b)[:3]] == [x.activations_bytes for x in stage_memory(a)[:3]]
    assert project_dry_run(b).iteration_time_s > project_dry_run(a).iteration_time_s


# ----------------------------------------------------------------------------- plan legality
@pytest.mark.parametrize("rc,field", [
    (_ids(layer_ids=()), "training.recompute.layer_ids='[]': must not be empty"),
    (_ids(layer_ids=(0, 16)), "training.recompute.layer_ids=16: between 0 and 15"),
    (_ids(layer_ids=(3, 1)), "sorted unique"),
    (dict(granularity="selective", method="layer_ids", layer_ids=(1,)), "training.recompute.granularity"),
    (dict(granularity="full", method="uniform", num_layers=1, layer_ids=(1,)), "training.recompute.method"),
])
def test_plan_refuses_naming_the_field(rc, field):
    with pytest.raises(ValueError) as ei:  # PlanError (pydantic wraps it in its ValidationError)
        _plan(**rc)
    assert field in str(ei.value), str(ei.value)


def test_torchtitan_plan_refuses_layer_ids():
    with pytest.raises(ValueError, match="training.recompute.method='layer_ids': .*TorchTitan"):
        Plan(model=ARCH.model_copy(update=dict(num_experts=None, moe_router_topk=None, moe_ffn_hidden_size=None,
                                               moe_shared_expert_intermediate_size=None, moe_dense_first_layers=0)),
             parallel=dict(tp=2), training=dict(global_batch_size=8, recompute=_ids(layer_ids=(0,))),
             cluster=dict(gpus_per_node=2), source=dict(framework="torchtitan"))


# ----------------------------------------------------------------------------- Primus reader / writer
@pytest.fixture
def primus(tmp_path):
    return _tree(tmp_path)


# DeepSeek-V3 MI355X configs: recompute_granularity full, recompute_layer_ids a comma-separated string
DSV3_LINES = '      recompute_granularity: full\n      recompute_layer_ids: "0,3,4,7,8,11,12,15,19,23,31"\n'


def test_dsv3_string_form_reads_and_round_trips(primus):
    p = _exp(primus, DSV3_LINES)
    plan = load_primus_yaml(p, NODE, env={})
    r = plan.training.recompute
    assert (r.granularity, r.method, r.num_layers, r.layer_ids) == (
        "full", "layer_ids", None, (0, 3, 4, 7, 8, 11, 12, 15, 19, 23, 31))
    assert "recompute_layer_ids" not in {u.flag for u in plan.source.unmodelled}
    _roundtrip(p, plan)


def test_list_form_is_normalised_and_rewritten_as_a_list(primus):
    p = _exp(primus, "      recompute_granularity: full\n      recompute_method: null\n"
                     "      mtp_num_layers: 1\n      recompute_layer_ids: [5, 1, 5, 32]\n")
    plan = load_primus_yaml(p, NODE, env={})
    assert plan.training.recompute.layer_ids == (1, 5, 32) and plan.model.mtp_num_layers == 1
    text = p.read_text()
    q = plan.with_changes(training={"recompute": {"layer_ids": (0, 2)}})
    out = render_primus_yaml(q, text, p, env={})
    assert "      recompute_layer_ids: [0, 2]" in out.splitlines()
    assert load_primus_yaml(_write(p, out), NODE, env={}).training.recompute.layer_ids == (0, 2)
    # a block-style list too
    p.write_text(text.replace("[5, 1, 5, 32]", "\n        - 5\n        - 1"))
    plan = load_primus_yaml(p, NODE, env={})
    assert render_primus_yaml(plan, p.read_text(), p, env={}) == p.read_text()
    out = render_primus_yaml(plan.with_changes(training={"recompute": {"layer_ids": (0, 2)}}), p.read_text(), p, env={})
    assert "      recompute_layer_ids: [0, 2]\n" in out and "- 1" not in out
    assert load_primus_yaml(_write(p, out), NODE, env={}).training.recompute.layer_ids == (0, 2)


def _write(p: Path, text: str) -> Path:
    out = p.with_name("tuned.yaml")
    out.write_text(text)
    return out


def test_changed_ids_keep_the_string_form_and_a_megatron_method_drops_them(primus):
    p = _exp(primus, DSV3_LINES)
    plan = load_primus_yaml(p, NODE, env={})
    text = p.read_text()
    out = render_primus_yaml(plan.with_changes(training={"recompute": {"layer_ids": (1, 2)}}), text, p, env={})
    assert [ln for ln in out.splitlines() if ln not in text.splitlines()] == ['      recompute_layer_ids: "1,2"']
    blk = plan.with_changes(training={"recompute": {"method": "block", "num_layers": 2, "layer_ids": ()}})
    out = render_primus_yaml(blk, text, p, env={})
    got = load_primus_yaml(_write(p, out), NODE, env={}).training.recompute
    assert (got.method, got.num_layers, got.layer_ids) == ("block", 2, ())
    assert "      recompute_layer_ids: null" in out.splitlines()


@pytest.mark.parametrize("extra,field", [
    ('      recompute_granularity: full\n      recompute_layer_ids: ""\n', "must not be empty"),
    ("      recompute_granularity: full\n      recompute_layer_ids: []\n", "must not be empty"),
    ("      recompute_granularity: full\n      recompute_layer_ids: '0,32'\n",
     "recompute_layer_ids=32: between 0 and 31 (0..31 are decoder layers)"),
    ("      recompute_granularity: full\n      mtp_num_layers: 1\n      recompute_layer_ids: [33]\n",
     "between 0 and 32 (0..31 are decoder layers, 32..32 are the 1 MTP depths)"),
    ("      recompute_granularity: selective\n      recompute_layer_ids: '1'\n",
     "recompute_granularity='selective': full when using recompute_layer_ids"),
    ("      recompute_granularity: full\n      recompute_method: block\n      recompute_layer_ids: '1'\n",
     "recompute_method='block': null when using recompute_layer_ids"),
    ("      recompute_granularity: full\n      recompute_layer_ids: 'a,b'\n", "a comma-separated string"),
])
def test_primus_validation_errors(primus, extra, field):
    with pytest.raises(PlanError) as ei:
        load_primus_yaml(_exp(primus, extra), NODE, env={})
    assert field in str(ei.value) and "\n" not in str(ei.value), str(ei.value)


# ----------------------------------------------------------------------------- tuner
def test_tuner_keeps_ids_only_with_the_recipes_recompute_knobs():
    plan = _plan(**_ids(layer_ids=(0, 5)))
    k = knobs_of(plan)
    assert apply_knobs(plan, k).training.recompute.layer_ids == (0, 5)
    moved = apply_knobs(plan, k._replace(pp=2))
    assert moved.training.recompute.layer_ids == (0, 5)  # global ids: valid for any placement
    other = k._replace(rc_method="uniform", rc_layers=1)
    rc = apply_knobs(plan, other).training.recompute
    assert (rc.method, rc.num_layers, rc.layer_ids) == ("uniform", 1, ())
    Plan.model_validate(apply_knobs(plan, other).model_dump())  # legal


def test_megatron_writer_refuses_primus_layer_ids():
    """Megatron-LM has no recompute_layer_ids: its writer names the field instead of writing a bad flag."""
    from primus_launch.adapters.megatron_args import desired_args

    with pytest.raises(PlanError, match="training.recompute.method='layer_ids': uniform or block in Megatron-LM"):
        desired_args(_plan(**_ids(layer_ids=(0,))), {}, frozenset())
