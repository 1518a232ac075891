"""TorchTitan adapter tests: architecture from torchtitan's registry vs meta-device builds."""

from __future__ import annotations

import pytest
import torch

from primus_launch.adapters.torchtitan import arch_from_flavor
from primus_launch.adapters.torchtitan_arch import model_spec
from primus_launch.plan import PlanError

FLAVORS = [
    ("llama3", "debugmodel"), ("llama3", "8B"), ("llama3", "70B"), ("llama3", "405B"), ("llama3", "1B"),
    ("qwen3", "0.6B"), ("qwen3", "32B"), ("qwen3", "debugmodel_moe"), ("qwen3", "30B-A3B"),
    ("qwen3", "235B-A22B"),
    ("deepseek_v3", "debugmodel"), ("deepseek_v3", "16B"), ("deepseek_v3", "671B"),
    ("gpt_oss", "debugmodel"), ("gpt_oss", "20b"), ("gpt_oss", "120b"),
]


def _simple_count(a) -> int:
    """Closed-form parameter count of a torchtitan decoder (gated MLP, RMSNorm weights; GPT-OSS: QKV,
    output, router and expert biases and one attention-sink logit per head)."""
    h = a.hidden_size
    if a.multi_latent_attention:
        H, qk = a.num_attention_heads, a.qk_head_dim + a.qk_pos_emb_head_dim
        q = h * H * qk if a.q_lora_rank is None else h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * H * qk
        attn = (q + h * (a.kv_lora_rank + a.qk_pos_emb_head_dim) + a.kv_lora_rank
                + a.kv_lora_rank * H * (a.qk_head_dim + a.v_head_dim) + H * a.v_head_dim * h)
    else:
        d = a.kv_channels
        attn = h * (a.num_attention_heads + 2 * a.kv_heads) * d + a.num_attention_heads * d * h
        attn += 2 * d if a.qk_layernorm else 0
        attn += (a.num_attention_heads + 2 * a.kv_heads) * d if a.add_qkv_bias else 0
        attn += h if a.add_bias_linear else 0
        attn += a.num_attention_heads if a.softmax_type == "learnable" else 0
    dense = 3 * h * a.ffn_hidden_size
    bias = a.add_bias_linear
    moe = (a.num_experts * (3 * h * a.expert_ffn + (2 * a.expert_ffn + h if bias else 0)) + h * a.num_experts
           + (a.num_experts if a.moe_router_bias else 0)
           + 3 * h * a.moe_shared_expert_intermediate_size) if a.is_moe else 0
    n_dense = a.moe_dense_first_layers if a.is_moe else a.num_layers
    emb = a.vocab_size * h * (2 if a.untie_embeddings_and_output_weights else 1)
    return n_dense * (attn + dense + 2 * h) + (a.num_layers - n_dense) * (attn + moe + 2 * h) + h + emb


@pytest.mark.parametrize("name,flavor", FLAVORS)
def test_arch_matches_registry_and_meta_build(name, flavor):
    spec = model_spec(name, flavor)
    cfg = spec.model
    a = arch_from_flavor(name, flavor, seq_len=4096)
    assert a.vocab_size == cfg.vocab_size
    assert a.hidden_size == cfg.dim
    assert a.num_layers == len(cfg.layers)
    assert a.seq_length == 4096
    assert a.untie_embeddings_and_output_weights == (not cfg.enable_weight_tying)
    with torch.device("meta"):
        model = cfg.build()
    assert sum(p.numel() for p in model.parameters()) == _simple_count(a)


def test_gpt_oss_from_the_registry():
    g = arch_from_flavor("gpt_oss", "120b", seq_len=8192)
    assert (g.num_layers, g.hidden_size, g.num_attention_heads, g.kv_heads, g.kv_channels) == (36, 2880, 64, 8, 64)
    assert (g.num_experts, g.moe_router_topk, g.moe_ffn_hidden_size, g.moe_router_bias) == (128, 4, 2880, True)
    assert (g.softmax_type, g.position_embedding, g.activation, g.swiglu) == ("learnable", "yarn", "quick_gelu", True)
    # sliding window of 128 tokens (127 keys left of the query) on even layers
    assert g.window_size == 127 and g.window_layer_pattern == tuple(1 - i % 2 for i in range(36))
    assert g.add_qkv_bias and g.add_bias_linear and g.num_window_layers == 18


def test_llama4_from_torchtitan_v022_facts():
    """Llama 4 left torchtitan's registry in 0.3.0; its v0.2.2 args give the FFN sizes Meta's published
    configs state (Hugging Face Llama-4-Scout/Maverick text_config: intermediate_size 8192,
    intermediate_size_mlp 16384, interleave_moe_layer_step 1 / 2, 16 / 128 local experts, vocab 202048)
    and the published totals (Scout 109B with its ~1.7B vision encoder, Maverick 400B)."""
    from primus_launch.projection.memory.params import total_parameters

    scout, mav = arch_from_flavor("llama4", "17bx16e", 8192), arch_from_flavor("llama4", "17bx128e", 8192)
    assert (scout.moe_ffn_hidden_size, scout.moe_shared_expert_intermediate_size, scout.num_moe_layers) == (8192, 8192, 48)
    assert (mav.ffn_hidden_size, mav.moe_ffn_hidden_size, mav.num_moe_layers, mav.is_moe_layer(1)) == (16384, 8192, 24, True)
    assert (scout.vocab_size, scout.kv_heads, scout.kv_channels, mav.num_experts, mav.moe_router_topk) == (
        202048, 8, 128, 128, 1)
    assert 107e9 < total_parameters(scout) < 109e9 and 399e9 < total_parameters(mav) < 402e9
    plan = plan_from_text(BASE.replace('"llama3"', '"llama4"').replace('"8B"', '"17bx16e"'))
    assert any("v0.2.2" in n for n in plan.source.notes)


@pytest.mark.parametrize("family", ["flux", "qwen3_5", "kimi_k2_7", "muse_glimmer", "vlm"])
def test_families_not_modelled_are_refused_by_name(family):
    with pytest.raises(PlanError, match=rf"model\.name='{family}'.*not modelled"):
        arch_from_flavor(family, "debugmodel")


def test_known_values():
    a = arch_from_flavor("llama3", "8B")
    assert (a.num_attention_heads, a.kv_heads, a.ffn_hidden_size, a.kv_channels) == (32, 8, 14336, 128)
    q = arch_from_flavor("qwen3", "235B-A22B")
    assert (q.num_experts, q.moe_router_topk, q.moe_ffn_hidden_size, q.qk_layernorm, q.kv_heads) == (
        128, 8, 1536, True, 4)
    d = arch_from_flavor("deepseek_v3", "671B")
    assert d.multi_latent_attention and (d.q_lora_rank, d.kv_lora_rank, d.moe_dense_first_layers) == (1536, 512, 3)
    assert (d.num_experts, d.moe_router_topk, d.moe_shared_expert_intermediate_size, d.ffn_hidden_size) == (
        256, 8, 2048, 18432)
    assert arch_from_flavor("deepseek_v3", "16B").q_lora_rank is None


def test_unknown_flavor_and_model():
    with pytest.raises(PlanError, match=r"model\.flavor='9B'"):
        arch_from_flavor("llama3", "9B")
    with pytest.raises(PlanError, match=r"model\.name='gpt5'"):
        arch_from_flavor("gpt5", "8B")


# ---------------------------------------------------------------- TOML reader / writer
import difflib  # noqa: E402
from pathlib import Path  # noqa: E402

from primus_launch.adapters.torchtitan import (  # noqa: E402
    cluster_from_header,
    load_torchtitan,
    plan_from_text,
    render_torchtitan,
    write_torchtitan,
)
from primus_launch.errors import UserError  # noqa: E402
from primus_launch.plan import Cluster, Plan, legality_problems, torchtitan_problems  # noqa: E402
from primus_launch.plan.torchtitan_split import plan_placement, rank_layers, stage_layers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = sorted(str(p) for p in (ROOT / "tests" / "data" / "torchtitan-v0.2.2").glob("*.toml"))
RECIPES = sorted(str(p) for p in (ROOT / "recipes" / "torchtitan").glob("*.toml"))
ALL = UPSTREAM + RECIPES
_ids = [Path(p).name for p in ALL]


def test_all_upstream_files_present():
    assert len(UPSTREAM) == 12 and len(RECIPES) == 4


def _changed_keys(before: str, after: str) -> set[str]:
    """Keys (or '#header') of the lines a diff removes or adds."""
    keys = set()
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm=""):
        if line.startswith(("---", "+++", "@@")):
            continue
        body = line[1:].strip()
        keys.add("#header" if body.startswith("#") else body.split("=")[0].strip())
    return keys


def _legal(plan: Plan) -> bool:
    return not legality_problems(plan) and not torchtitan_problems(plan)


def _try(plan: Plan, **changes) -> Plan | None:
    try:
        q = plan.with_changes(**changes)
    except ValueError:
        return None
    return q if _legal(q) else None


def test_recipes_present():
    names = {Path(p).name for p in RECIPES}
    assert {"llama3.1_8b.toml", "llama3.1_70b.toml", "deepseek_v3_671b.toml", "qwen3_235b_a22b.toml"} <= names
    assert len(UPSTREAM) == 12


@pytest.mark.parametrize("path", ALL, ids=_ids)
def test_load_and_render_identity(path):
    text = Path(path).read_text()
    plan = load_torchtitan(path)
    assert plan.source.framework == "torchtitan" and plan.source.path == path
    assert not legality_problems(plan) and not torchtitan_problems(plan)
    assert render_torchtitan(plan, text) == text


def test_recipe_targets():
    want = {"llama3.1_8b.toml": 8, "llama3.1_70b.toml": 64, "deepseek_v3_671b.toml": 1024,
            "qwen3_235b_a22b.toml": 256}
    for path in RECIPES:
        plan = load_torchtitan(path)
        assert plan.world_size == want[Path(path).name]
        assert plan.cluster.gpu == "h100-sxm"
    ds = load_torchtitan(ROOT / "recipes/torchtitan/deepseek_v3_671b.toml")
    assert (ds.parallel.pp, ds.parallel.ep, ds.dp) == (8, 64, 128)
    # the plan's stage layout is exactly torchtitan's own split of 61 layers + embedding + head
    assert ds.layers_per_stage() == [7, 8, 8, 8, 8, 8, 8, 6]
    assert list(rank_layers(61, 8, "1F1B", None, 1, 1)[1]) == ds.layers_per_stage()


def test_mapping_of_upstream_values():
    p70 = load_torchtitan(UPSTREAM[5])  # llama3_70b: 64 A100, tp 8, local 8, full AC
    assert Path(UPSTREAM[5]).name == "models_llama3__llama3_70b.toml"
    assert p70.cluster == Cluster(gpu="a100-sxm-80gb", num_nodes=8, gpus_per_node=8)
    assert (p70.parallel.tp, p70.parallel.sequence_parallel, p70.dp, p70.parallel.dp_sharding) == (8, True, 8, "full")
    assert (p70.training.global_batch_size, p70.training.micro_batch_size) == (64, 8)
    assert p70.training.recompute.granularity == "full" and p70.model.seq_length == 8192
    p405 = load_torchtitan(UPSTREAM[4])
    assert p405.training.precision == "fp8" and p405.world_size == 128  # converters = ["float8"]
    dbg = load_torchtitan(UPSTREAM[3])  # llama3 debug: selective_ac_option '2' -> every 2nd layer
    # selective_ac_option = "2": torchtitan _apply_layer_sac checkpoints every 2nd block
    r = dbg.training.recompute
    assert (r.granularity, r.method, r.num_layers) == ("full", "every_n", 2)
    ds16 = load_torchtitan(UPSTREAM[1])
    # pp = 1: the file's Interleaved1F1B is not run (torchtitan ignores the schedule without PP)
    assert (ds16.parallel.ep, ds16.parallel.expert_tp, ds16.training.pipeline_schedule) == (8, 1, "1f1b")


def _scenarios(plan: Plan) -> list[tuple[str, Plan, set[str]]]:
    """Tuned-value changes legal for this plan, each with the TOML keys it may touch."""
    out = []
    p, t, m = plan.parallel, plan.training, plan.model
    gbs_keys = {"global_batch_size", "local_batch_size"}
    for tp in (2, 4, 8, 1):
        if tp == p.tp:
            continue
        dp = plan.world_size // (tp * p.cp * p.pp)
        G = max(t.global_batch_size // (t.micro_batch_size * dp), 1) * t.micro_batch_size * dp
        q = _try(plan, parallel={"tp": tp, "sequence_parallel": tp > 1}, training={"global_batch_size": G}) or \
            _try(plan, parallel={"tp": tp, "sequence_parallel": tp > 1, "etp": 1}, training={"global_batch_size": G})
        if q:
            out.append(("tp", q, {"tensor_parallel_degree", "expert_tensor_parallel_degree",
                                  "data_parallel_shard_degree"} | gbs_keys))
            break
    titan_name = {"1f1b": "1F1B", "interleaved_1f1b": "Interleaved1F1B", "zbv": "ZBVZeroBubble"}
    for pp, sched, vpp in ((2, "1f1b", 1), (4, "interleaved_1f1b", 2), (2, "zbv", 2)):
        if pp == p.pp:
            continue
        dp = plan.world_size // (p.tp * p.cp * pp)
        if dp == 0:
            continue
        try:  # torchtitan's own split of the layers for this schedule, stated exactly
            place = plan_placement(m.num_layers, pp, titan_name[sched],
                                   stage_layers(m.num_layers, pp, titan_name[sched], None, 1, 1))
        except PlanError:
            continue
        G = max(t.global_batch_size // dp, 1) * dp
        q = _try(plan, parallel={"pp": pp, **place},
                 training={"pipeline_schedule": sched, "micro_batch_size": 1, "global_batch_size": G})
        if q:
            out.append(("pp-" + sched, q, {
                "pipeline_parallel_degree", "pipeline_parallel_schedule",
                "pipeline_parallel_microbatch_size", "pipeline_parallel_layers_per_stage",
                "pipeline_parallel_first_stage_less_layers",
                "pipeline_parallel_last_stage_less_layers"} | gbs_keys))
    for mbs in (1, 2, 4):
        if mbs != t.micro_batch_size:
            G = max(t.global_batch_size // (mbs * plan.dp), 1) * mbs * plan.dp
            q = _try(plan, training={"micro_batch_size": mbs, "global_batch_size": G})
            if q:
                out.append(("mbs", q, {"pipeline_parallel_microbatch_size"} | gbs_keys))
                break
    nxt = {"none": "op", "op": "full", "full": "none"}[t.recompute.granularity]
    rec = {"granularity": nxt, "method": "uniform", "num_layers": 1 if nxt == "full" else None}
    out.append(("ac", plan.with_changes(training={"recompute": rec}), {"mode", "selective_ac_option"}))
    if p.pp > 1:
        place = plan_placement(m.num_layers, p.pp, "Interleaved1F1B",
                               stage_layers(m.num_layers, p.pp, "Interleaved1F1B", None, 1, 1))
        q = _try(plan, parallel=place, training={"pipeline_schedule": "interleaved_1f1b"})
        if q:
            out.append(("schedule", q, {"pipeline_parallel_schedule", "pipeline_parallel_layers_per_stage",
                                        "pipeline_parallel_first_stage_less_layers",
                                        "pipeline_parallel_last_stage_less_layers"}))
    return out


@pytest.mark.parametrize("path", ALL, ids=_ids)
def test_changes_touch_only_tuned_lines_and_reload(path):
    text = Path(path).read_text()
    plan = load_torchtitan(path)
    scen = _scenarios(plan)
    kinds = {k for k, _, _ in scen}
    assert {"ac", "mbs"} <= kinds and ("tp" in kinds or any(k.startswith("pp") for k in kinds))
    for kind, q, allowed in scen:
        out = render_torchtitan(q, text)
        touched = _changed_keys(text, out)
        assert touched and touched <= allowed, (kind, touched)
        again = plan_from_text(out, q.cluster, path=path)
        assert again.model_dump(exclude={"source"}) == q.model_dump(exclude={"source"}), kind
        assert render_torchtitan(again, out) == out


def test_cluster_change_rewrites_header_only(tmp_path):
    path = ROOT / "recipes/torchtitan/llama3.1_70b.toml"
    plan = load_torchtitan(path)
    q = plan.with_changes(cluster={"gpu": "mi300x", "num_nodes": 16}, training={"global_batch_size": 128})
    out = render_torchtitan(q, path.read_text())
    assert _changed_keys(path.read_text(), out) == {"#header"}
    assert cluster_from_header(out) == q.cluster
    assert load_torchtitan(write_torchtitan(q, path, tmp_path / "x.toml")) .model_copy(
        update={"source": q.source}) == q


def test_write_round_trip_and_refuses_original(tmp_path):
    for path in RECIPES:
        plan = load_torchtitan(path)
        q = plan.with_changes(training={"recompute": {"granularity": "op", "method": "uniform",
                                                      "num_layers": None}})
        out = write_torchtitan(q, path, tmp_path / Path(path).name)
        back = load_torchtitan(out)
        assert back.model_copy(update={"source": q.source}) == q
        assert not list(tmp_path.glob(".*.tmp"))
        with pytest.raises(UserError, match="refusing"):
            write_torchtitan(q, path, path)


def test_tp_only_diff_exact():
    path = UPSTREAM[5]  # llama3_70b
    text = Path(path).read_text()
    q = load_torchtitan(path).with_changes(parallel={"tp": 4}, training={"global_batch_size": 128})
    diff = [ln for ln in difflib.unified_diff(text.splitlines(), render_torchtitan(q, text).splitlines(),
                                               n=0, lineterm="") if ln[:1] in "+-" and ln[:3] not in ("---", "+++")]
    assert diff == ["-tensor_parallel_degree = 8  # 8-way TP", "+tensor_parallel_degree = 4  # was 8: 8-way TP"]


BASE = """# NOTE: this toml config is a preset for 8 H100 GPUs.
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 2
seq_len = 4096
[parallelism]
tensor_parallel_degree = 2
"""


@pytest.mark.parametrize("text,field", [
    ("[model\nname = 1", "malformed TOML"),
    (BASE.replace('"8B"', '"9B"'), "model.flavor='9B'"),
    (BASE.replace('"llama3"', '"gpt2"'), "model.name='gpt2'"),
    (BASE.replace("tensor_parallel_degree = 2", "tensor_parallel_degree = 0"), "parallelism.tensor_parallel_degree=0"),
    (BASE.replace("tensor_parallel_degree = 2", 'tensor_parallel_degree = "x"'), "parallelism.tensor_parallel_degree='x'"),
    (BASE.replace("tensor_parallel_degree = 2", "tensor_parallel_degree = 3"), "parallelism"),
    (BASE.replace("tensor_parallel_degree = 2", "data_parallel_shard_degree = 16"), "parallelism.data_parallel_shard_degree=16"),
    (BASE.replace("tensor_parallel_degree = 2", 'pipeline_parallel_degree = 2\npipeline_parallel_schedule = "Fancy"'),
     "parallelism.pipeline_parallel_schedule='Fancy'"),
    (BASE + '[activation_checkpoint]\nmode = "sometimes"\n', "activation_checkpoint.mode='sometimes'"),
    (BASE + "[activation_checkpoint]\nselective_ac_option = 'abc'\n", "activation_checkpoint.selective_ac_option='abc'"),
    (BASE.replace("local_batch_size = 2", "local_batch_size = 2\nglobal_batch_size = 9"), "training.global_batch_size=9"),
    (BASE.replace("tensor_parallel_degree = 2", "pipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 3"),
     "parallelism.pipeline_parallel_microbatch_size=3"),
    (BASE.replace("# NOTE: this toml config is a preset for 8 H100 GPUs.", "# NOTE: preset for 8 V100 GPUs."),
     "header comment GPU='V100'"),
])
def test_errors_are_one_line_naming_the_key(text, field):
    with pytest.raises((UserError, PlanError)) as ei:
        plan_from_text(text, path="job.toml")
    msg = str(ei.value)
    assert "\n" not in msg and field in msg, msg


def test_missing_file_and_moe_rules(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_torchtitan(tmp_path / "nope.toml")
    moe = BASE.replace('"llama3"', '"qwen3"').replace('"8B"', '"debugmodel_moe"')
    with pytest.raises(PlanError, match="parallelism.expert_tensor_parallel_degree=4"):
        plan_from_text(moe.replace("tensor_parallel_degree = 2", "tensor_parallel_degree = 2\n"
                                   "expert_parallel_degree = 2\nexpert_tensor_parallel_degree = 4"))
    with pytest.raises(PlanError, match="parallelism.expert_parallel_degree=8"):  # ep must divide dp_shard*cp = 4 (etp = tp)
        plan_from_text(moe.replace("tensor_parallel_degree = 2", "tensor_parallel_degree = 2\n"
                                   "expert_parallel_degree = 8\nexpert_tensor_parallel_degree = 2"))
    tied = BASE.replace('"llama3"', '"qwen3"').replace('"8B"', '"0.6B"')
    with pytest.raises(PlanError, match="weight tying"):
        plan_from_text(tied.replace("tensor_parallel_degree = 2", "pipeline_parallel_degree = 2"))


def test_cluster_inference():
    assert plan_from_text(BASE).cluster == Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)
    no_header = BASE.split("\n", 1)[1]
    assert plan_from_text(no_header).world_size == 8  # default 1 x 8 h100-sxm
    explicit = no_header.replace("tensor_parallel_degree = 2", "tensor_parallel_degree = 2\ndata_parallel_shard_degree = 16")
    assert plan_from_text(explicit).world_size == 32
    given = Cluster(gpu="mi300x", num_nodes=2, gpus_per_node=8)
    assert plan_from_text(BASE, given).cluster == given


def test_pipeline_layouts():
    # explicit stage lists: rank layers counted from the module names, looped over the ranks
    parts = [["tok_embeddings", "layers.0"], ["layers.1", "layers.2"], ["layers.3", "layers.4"],
             ["layers.5", "norm", "lm_head"]]
    text = (BASE.replace('"8B"', '"debugmodel"').replace("tensor_parallel_degree = 2",
            'pipeline_parallel_degree = 2\npipeline_parallel_schedule = "Interleaved1F1B"\n'
            f"module_fqns_per_model_part = {parts!r}".replace("'", '"')))
    from primus_launch.plan.torchtitan_split import explicit_rank_layers

    assert explicit_rank_layers(2, "Interleaved1F1B", parts) == (2, (3, 3))
    p = plan_from_text(text)
    # E+1 | 2 | 2 | 1+L: Megatron's account-for-embedding-and-loss split is the same placement
    assert p.parallel.vpp == 2 and p.layers_per_stage() == [3, 3]
    assert p.parallel.account_for_embedding_in_pipeline_split and p.parallel.account_for_loss_in_pipeline_split
    assert [[c.layers for c in r] for r in p.chunk_layout()] == [[(0,), (3, 4)], [(1, 2), (5,)]]
    # a V schedule must have 2 stages per rank: layers_per_stage giving 3 is refused by name
    bad = text.replace(f"module_fqns_per_model_part = {parts!r}".replace("'", '"'),
                       "pipeline_parallel_layers_per_stage = 1").replace("Interleaved1F1B", "ZBVZeroBubble")
    with pytest.raises(PlanError, match="pipeline_parallel_layers_per_stage=1"):
        plan_from_text(bad)
    # 1f1b with two chunks per rank is not something torchtitan runs
    ok = plan_from_text(text.replace(f"module_fqns_per_model_part = {parts!r}".replace("'", '"'), ""))
    assert torchtitan_problems(ok.with_changes(training={"pipeline_schedule": "1f1b"}))


def test_uneven_layout_rendered_through_titan_split():
    """DeepSeek-V3 671B (61 layers) from pp=8 to pp=4: the writer picks torchtitan's split keys so
    torchtitan's own split yields the plan's first/last stage sizes."""
    path = ROOT / "recipes/torchtitan/deepseek_v3_671b.toml"
    text = path.read_text()
    plan = load_torchtitan(path)
    q = plan.with_changes(parallel={"pp": 4, "ep": 64, "pipeline_layers_first_stage": 16,
                                    "pipeline_layers_last_stage": 15},
                          training={"global_batch_size": 4096})
    out = render_torchtitan(q, text)
    back = plan_from_text(out, q.cluster, path=str(path))
    # the notes differ by the header's cluster note: q's cluster came from the header comment, back's was given
    same = {"source": {"notes"}}
    assert back.model_dump(exclude=same) == q.model_dump(exclude=same) and back.layers_per_stage() == [16, 15, 15, 15]
    data = __import__("tomllib").loads(out)["parallelism"]
    fl, ll = (data.get(k, 1) for k in ("pipeline_parallel_first_stage_less_layers",
                                        "pipeline_parallel_last_stage_less_layers"))
    assert list(rank_layers(61, 4, "1F1B", data.get("pipeline_parallel_layers_per_stage"), fl, ll)[1]) == \
        [16, 15, 15, 15]
    # torchtitan's split never gives the last stage more layers than the middle ones: the placement
    # is written as explicit stage lists (module_fqns_per_model_part) and reads back exactly
    odd = q.with_changes(parallel={"pipeline_layers_first_stage": 14, "pipeline_layers_last_stage": 17})
    out = render_torchtitan(odd, text)
    assert "module_fqns_per_model_part" in __import__("tomllib").loads(out)["parallelism"]
    back = plan_from_text(out, odd.cluster, path=str(path))
    assert back.layers_per_stage() == [14, 15, 15, 17] and back.chunk_layout() == odd.chunk_layout()


def test_group_limited_routing_from_the_registry():
    ds = arch_from_flavor("deepseek_v3", "671B")
    assert (ds.moe_router_num_groups, ds.moe_router_group_topk) == (8, 4)
    qw = arch_from_flavor("qwen3", "235B-A22B")
    assert (qw.moe_router_num_groups, qw.moe_router_group_topk) == (None, None)


# ---------------------------------------------------------------- DDP and pure TP (issue 11 fix)
@pytest.mark.parametrize("par,want", [
    ("data_parallel_replicate_degree = 8\ndata_parallel_shard_degree = 1", (1, 8, "none", 1)),  # DDP
    ("data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4", (1, 8, "full", 2)),  # HSDP
    ("tensor_parallel_degree = 8", (8, 1, "none", 1)),  # pure TP: nothing left to shard
    ("tensor_parallel_degree = 4\ncontext_parallel_degree = 2", (4, 1, "full", 1)),  # FSDP spans CP
])
def test_ddp_and_pure_tp_plans_project(par, want):
    """What torchtitan runs (ParallelDims.fsdp_enabled = dp_shard > 1 or cp > 1) reads, projects and
    writes back unchanged."""
    from primus_launch.projection.api import project

    text = BASE.replace("tensor_parallel_degree = 2", par)
    plan = plan_from_text(text)
    p, t = plan.parallel, plan.training
    assert (p.tp, plan.dp, p.dp_sharding, p.dp_replicate) == want
    assert t.overlap_param_gather == (p.dp_sharding == "full") and t.overlap_grad_reduce
    res = project(plan, dry_run=True)
    assert res.iteration_time_s > 0
    assert render_torchtitan(plan, text) == text
    if p.tp == 1 and p.cp == 1:  # DDP <-> FSDP both ways, re-read exactly
        other = plan.with_changes(parallel={"dp_sharding": "full" if p.dp_sharding == "none" else "none",
                                            "dp_replicate": 1}, training={"overlap_param_gather": p.dp_sharding == "none"})
        assert plan_from_text(render_torchtitan(other, text)) .model_copy(update={"source": other.source}) == other


# ---------------------------------------------------------------- converter coverage (torchtitan v0.2.1 keys)
def _titan_unmodelled(extra: str) -> dict[str, str]:
    from primus_launch.adapters.torchtitan import plan_from_text
    from primus_launch.plan import Cluster

    text = ('[model]\nname = "llama4"\nflavor = "17bx16e"\n' + extra +
            '\n[training]\nseq_len = 8192\nlocal_batch_size = 1\n[parallelism]\nexpert_parallel_degree = 8\n')
    plan = plan_from_text(text, cluster=Cluster(gpu="b200", num_nodes=1, gpus_per_node=8))
    return {u.flag + "=" + u.value: u.effect for u in plan.source.unmodelled}, plan


def test_titan_mx_linear_only_leaves_experts_bf16_priced():
    """torchtitan v0.2.1 quantize.linear.mx swaps nn.Linear only (components/quantization/mx.py
    MXLinearConverter); the routed experts are 3-D parameters of torch._grouped_mm and stay BF16 without
    quantize.grouped_mm.mx (MXGroupedMMConverter): the plan says so (training.bf16_linears 'experts'), no
    'not modelled' warning."""
    un, plan = _titan_unmodelled('converters = ["quantize.linear.mx"]')
    assert plan.training.fp8_recipe == "mxfp8" and plan.training.bf16_linears == ("experts",)
    assert not un, un
    un2, plan2 = _titan_unmodelled('converters = ["quantize.linear.mx", "quantize.grouped_mm.mx"]\n'
                                   '[quantize.grouped_mm.mx]\nfqns = ["experts"]\nrecipe_name = "mxfp8"')
    assert plan2.training.fp8_recipe == "mxfp8" and not un2  # MXLinear's default filter_fqns is ["output"]
    assert plan2.training.bf16_linears == ()


def test_titan_unconverted_experts_cost_the_bf16_plans_expert_gemms():
    """user16: FP8 / MX linears with the experts left BF16 were priced all-low-precision.  Against the same plan
    all-MXFP8 and all-BF16: the experts' grouped GEMMs cost exactly the BF16 plan's, the attention and shared-expert
    GEMMs exactly the MXFP8 plan's, and the experts' quantize kernels (and torchao's MX scale rearrange) are gone."""
    from primus_launch.projection.cost import roofline as rl

    _, mix = _titan_unmodelled('converters = ["quantize.linear.mx"]')
    low = mix.with_changes(training={"bf16_linears": ()})
    b16 = mix.with_changes(training={"precision": "bf16", "fp8_recipe": None, "bf16_linears": ()})
    rows = [{r[0].split(" [")[0]: r[1:4] for r in rl.layer_op_times(p)["moe"]} for p in (mix, low, b16)]
    rm, rl_, rb = rows
    for name in ("experts (grouped) FC1", "experts (grouped) FC2"):
        assert rm[name] == rb[name] and rm[name][0] > rl_[name][0]
    for name in ("QKV", "attention out-proj", "shared expert FC1", "shared expert FC2"):
        assert rm[name] == rl_[name] and rm[name][0] < rb[name][0]
    quant = "FP8 quantisation"
    assert 0 < sum(rm[quant]) < sum(rl_[quant]) and quant not in rb
    assert not any(n.startswith("torchao MXFP8 wgrad") for n in rm) and any(n.startswith("torchao MXFP8 wgrad")
                                                                            for n in rl_)
    from primus_launch.projection.explain import framework_rows
    assert "BF16 experts" in dict(framework_rows(mix))["MoE expert GEMMs / dispatcher sync"]
    assert "BF16 experts" not in dict(framework_rows(low))["MoE expert GEMMs / dispatcher sync"]
    # torchao's float8 FSDP all-gather wraps Float8Linear weights only: the unconverted experts gather bf16
    from primus_launch.projection.cost.fsdp import fsdp_bytes
    _, f8 = _titan_unmodelled('converters = ["float8"]\n[quantize.linear.float8]\nenable_fsdp_float8_all_gather = true')
    eb = fsdp_bytes(f8)
    assert f8.training.fp8_param_gather and (eb.param, eb.expert_param) == (1.0, 2.0)
    assert fsdp_bytes(f8.with_changes(training={"bf16_linears": ()})).expert_param == 1.0


def test_titan_filter_fqns_reported_against_the_bf16_linears_the_projection_keeps():
    """float8's filter_fqns defaults to [] (job_config.py Float8Linear @v0.2.1): the output layer then runs
    in FP8, which the projection prices in BF16; extra filtered linears stay BF16 (priced FP8), except the
    attention linears, which the plan keeps in BF16."""
    un, _ = _titan_unmodelled('converters = ["float8", "quantize.grouped_mm.float8"]\n'
                              '[quantize.grouped_mm.float8]\nfqns = ["experts"]')
    assert any(k.startswith("quantize.linear.float8.filter_fqns=") and "output layer" in v for k, v in un.items())
    # attention linears are priced in BF16 (training.bf16_linears); other filtered linears stay reported
    un2, p2 = _titan_unmodelled('converters = ["quantize.linear.mx", "quantize.grouped_mm.mx"]\n'
                                '[quantize.linear.mx]\nfilter_fqns = ["output", "router.gate", "attention.wk", '
                                '"attention.wv", "shared_experts"]\n[quantize.grouped_mm.mx]\nfqns = ["experts"]')
    assert list(un2) == ["quantize.linear.mx.filter_fqns=shared_experts"] and p2.training.bf16_linears == ("wk", "wv")


def test_titan_grouped_fqns_without_their_converter_do_nothing():
    """torchtitan v0.2.x builds only the converters model.converters names (protocols/model_converter.py
    ModelConvertersContainer; Float8GroupedMMConverter is registered as "quantize.grouped_mm.float8" and is
    the only reader of quantize.grouped_mm.float8.fqns): the upstream DeepSeek-V3 / Qwen3 TOMLs set the fqns
    with the converters commented out, so they run all-BF16 -- a note, no "experts in FP8" warning."""
    un, plan = _titan_unmodelled('[quantize.grouped_mm.float8]\nfqns = ["experts"]')
    assert plan.training.precision == "bf16" and not un, un
    assert any("grouped_mm.float8.fqns ignored" in n for n in plan.source.notes)
    # with the linear FP8 converter but not the grouped one, the experts stay BF16 under an FP8 plan: priced so
    un2, plan2 = _titan_unmodelled('converters = ["float8"]\n[quantize.grouped_mm.float8]\nfqns = ["experts"]')
    assert plan2.training.precision == "fp8" and plan2.training.bf16_linears == ("experts",)
    assert not any(k.startswith("model.converters=") for k in un2), un2
    # named in the converters, the grouped FP8 of a BF16 plan is the unmodelled mix, as before
    un3, _ = _titan_unmodelled('converters = ["quantize.grouped_mm.float8"]\n[quantize.grouped_mm.float8]\n'
                               'fqns = ["experts"]')
    assert un3.get("model.converters=quantize.grouped_mm.float8", "").startswith("time: MoE expert GEMMs in FP8")


def test_a_comment_naming_the_replaced_value_says_it_was():
    """``tensor_parallel_degree = 8  # 8-way TP`` (recipes/torchtitan/llama3.1_70b.toml) tuned to TP 4 read
    ``= 4  # 8-way TP``; the comment now says the 8 was the old value, and a comment not naming it is kept."""
    from primus_launch.adapters.torchtitan import plan_from_text, render_torchtitan

    text = (Path(__file__).resolve().parents[1] / "recipes/torchtitan/llama3.1_70b.toml").read_text()
    plan = plan_from_text(text, None)
    out = render_torchtitan(plan.with_changes(parallel={"tp": 4},
                                              training={"global_batch_size": 2 * plan.training.global_batch_size}), text)
    assert "tensor_parallel_degree = 4  # was 8: 8-way TP\n" in out
    assert render_torchtitan(plan, text) == text
    assert plan_from_text(out, None).parallel.tp == 4


def test_cluster_from_the_header_comment_is_said(tmp_path, monkeypatch):
    """user15: torchtitan's own TOMLs ('# NOTE: this toml config is a preset for 64 A100 GPUs.') were projected on
    8 x 8 A100s with no note saying where that cluster came from; a launch line naming the TOML
    (``torchrun --nproc_per_node 8 ... --job.config_file X``) took the header's GPU and torchrun's count, silently."""
    from primus_launch.adapters.titan_job_argv import plan_from_job_command

    notes = load_torchtitan(ROOT / "recipes/torchtitan/deepseek_v3_671b.toml").source.notes
    assert notes[0] == ("cluster: 128 x 8 h100-sxm from the file's header comment ('preset for 1024 H100 GPUs'; "
                        "give --gpu / --nodes / --gpus-per-node for another)")
    toml = tmp_path / "llama3_8b.toml"
    toml.write_text("# NOTE: this toml config is a preset for 64 A100 GPUs.\n[model]\nname = \"llama3\"\n"
                    "flavor = \"8B\"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n")
    monkeypatch.chdir(tmp_path)
    plan = plan_from_job_command(["torchrun", "--nproc_per_node", "8", "-m", "torchtitan.train",
                                  "--job.config_file", "llama3_8b.toml"])
    assert (plan.cluster.gpu, plan.cluster.world_size) == ("a100-sxm-80gb", 8)
    assert ("cluster gpu=a100-sxm-80gb: from the TOML's header comment (a preset for 64 GPUs); the GPU count is the "
            "launch's, 8 (give --gpu for another GPU)") in plan.source.notes
