"""Pipeline placement (primus_launch.plan.layout) against megatron-core 0.16.1's own code:
``PipelineParallelLayerLayout`` (layout strings) and ``get_num_layers_to_build`` /
``get_transformer_layer_offset`` (account-for-embedding/loss, uneven first/last, interleaving)."""

from __future__ import annotations

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training, format_layout, parse_layout

torch = pytest.importorskip("torch")
from megatron.core.transformer.enums import LayerType  # noqa: E402
from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout  # noqa: E402

_CH = {LayerType.embedding: "E", LayerType.decoder: "t", LayerType.mtp: "m", LayerType.loss: "L"}

LAYOUTS = ["Et*3|(tt|)*29m|L", "Et*4|(t*4|)*14tmL", "Ettt|(tt|)*29,m|L", "E|t*8|t*8|tL", "(t|)*3", "E(tt|)*2L",
           "Et|(tt|)*30mL"]


@pytest.mark.parametrize("text", LAYOUTS)
def test_parse_equals_megatron(text):
    ours = parse_layout(text)
    theirs = tuple("".join(_CH[x] for x in st) for st in PipelineParallelLayerLayout.parse_str_to_list(text))
    assert ours == theirs
    assert parse_layout(format_layout(ours)) == ours


def _plan(L, pp, vpp, mtp=0, **par) -> Plan:
    return Plan(model=ModelArch(num_layers=L, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4,
                                vocab_size=128, seq_length=32, mtp_num_layers=mtp),
                parallel=Parallelism(pp=pp, vpp=vpp, **par),
                training=Training(global_batch_size=pp * 4, pipeline_schedule="interleaved_1f1b" if vpp > 1 else "1f1b"),
                cluster=Cluster(gpus_per_node=pp))


def _megatron_ids(L, pp, vpp, **cfg) -> list[list[list[int]]]:
    """Layer ids per (rank, chunk) from megatron-core's functions (no process groups needed)."""
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset

    c = TransformerConfig(num_layers=L, hidden_size=64, num_attention_heads=4, pipeline_model_parallel_size=pp,
                          virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None,
                          pipeline_dtype=torch.float32, **cfg)
    out = []
    for r in range(pp):
        row = []
        for v in range(vpp):
            vs = v if vpp > 1 else None
            n = get_num_layers_to_build(c, vp_stage=vs, pp_rank=r)
            off = get_transformer_layer_offset(c, vp_stage=vs, pp_rank=r)
            row.append(list(range(off, off + n)))
        out.append(row)
    return out


CASES = [
    (126, 8, 8, dict(account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True)),
    (30, 4, 1, dict(account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True)),
    (31, 4, 2, dict(account_for_embedding_in_pipeline_split=True)),
    (31, 4, 1, dict(account_for_loss_in_pipeline_split=True)),
    (61, 16, 1, dict(num_layers_in_first_pipeline_stage=3, num_layers_in_last_pipeline_stage=2)),
    (62, 4, 2, dict(num_layers_in_first_pipeline_stage=14, num_layers_in_last_pipeline_stage=16)),
    (32, 4, 4, {}),
]
_PLAN_KEYS = {"num_layers_in_first_pipeline_stage": "pipeline_layers_first_stage",
              "num_layers_in_last_pipeline_stage": "pipeline_layers_last_stage"}


@pytest.mark.parametrize("L,pp,vpp,cfg", CASES)
def test_chunk_layer_ids_equal_megatron(L, pp, vpp, cfg):
    plan = _plan(L, pp, vpp, **{_PLAN_KEYS.get(k, k): v for k, v in cfg.items()})
    ours = [[list(ch.layers) for ch in row] for row in plan.chunk_layout()]
    assert ours == _megatron_ids(L, pp, vpp, **cfg)
    lay = plan.chunk_layout()
    assert lay[0][0].embedding and lay[-1][-1].loss


def test_layout_string_placement_with_mtp():
    # DeepSeek-V3 (Megatron-LM examples/moe_recipes h100 fp8): PP 8 x VPP 4 over 61 layers + MTP
    text = "Et*3|(tt|)*29m|L"
    plan = _plan(61, 8, 4, mtp=1, pipeline_layout=text)
    lay = PipelineParallelLayerLayout(text, 8)
    from megatron.core import parallel_state

    parallel_state.set_virtual_pipeline_model_parallel_world_size(4)  # else megatron reads vp_stage as 0
    try:
        _check_against(plan, lay)
    finally:
        parallel_state.set_virtual_pipeline_model_parallel_world_size(None)
    assert plan.chunk_layout()[6][3].mtp == 1 and plan.chunk_layout()[7][3].loss
    assert plan.layers_per_stage()[0] == 3 + 2 * 3


def _check_against(plan, lay):
    for r in range(8):
        for v in range(4):
            ch = plan.chunk_layout()[r][v]
            assert list(ch.layers) == lay.get_layer_id_list(LayerType.decoder, vp_stage=v, pp_rank=r)
            assert ch.mtp == lay.get_num_layers_to_build(LayerType.mtp, vp_stage=v, pp_rank=r)


def test_bad_layouts_name_the_field():
    with pytest.raises(ValueError, match="pipeline_layout.*must equal num_layers"):
        _plan(8, 2, 1, pipeline_layout="Ettt|tttL")
    with pytest.raises(ValueError, match="pipeline_layout.*pp\\*vpp"):
        _plan(8, 2, 1, pipeline_layout="Etttt|tt|ttL")
    with pytest.raises(ValueError, match="pipeline_layout"):
        _plan(8, 2, 1, pipeline_layout="Ett-tt|ttttL")


def test_mtp_defaults_to_the_loss_chunk():
    plan = _plan(8, 2, 2, mtp=2)
    assert [c.mtp for row in plan.chunk_layout() for c in row] == [0, 0, 0, 2]
