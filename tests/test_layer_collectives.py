"""The projection prices exactly the TP / CP collectives the real 2-process run issues.

Truth: ``tests/real_run_trace.py`` -- one iteration of ``gloo_lab.realrun.train_iterations`` (megatron-core's
GPTModel with real ``ColumnParallelLinear`` / ``RowParallelLinear``, vocab-parallel embedding and
cross-entropy, the pipeline schedule, the all-gather CP attention of ``build_mcore``) over 2 gloo
processes with ``torch.distributed`` wrapped, both plans in one spawn (about 15-25 s on 2 cores).
The model side: :mod:`primus_launch.projection.cost.layer_collectives`, which
``iteration.assemble`` prices call by call.  Sequence parallelism cannot run on the CPU
(megatron's torch LayerNorm refuses it): its calls are checked against megatron's source below.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from primus_launch.plan import Plan
from primus_launch.projection.cost import layer_collectives as lc

LAYERS = 2


def _plan(tp: int = 1, cp: int = 1, sp: bool = False) -> Plan:
    return Plan.model_validate({
        "model": dict(num_layers=LAYERS, hidden_size=128, ffn_hidden_size=256, num_attention_heads=4,
                      num_query_groups=2, vocab_size=512, seq_length=64),
        "parallel": dict(tp=tp, cp=cp, sequence_parallel=sp, **(dict(cp_comm_type="allgather") if cp > 1 else {})),
        "training": dict(global_batch_size=2 * 2 // (tp * cp), micro_batch_size=2, precision="bf16"),
        "cluster": dict(gpu="h100-sxm", gpus_per_node=2),
    })


PLANS = {"tp2": _plan(tp=2), "cp2": _plan(cp=2)}


@pytest.fixture(scope="module")
def traces() -> dict[str, list[dict]]:
    script = Path(__file__).with_name("real_run_trace.py")
    plans = [json.loads(p.model_dump_json()) for p in PLANS.values()]
    out = subprocess.run([sys.executable, str(script), json.dumps(plans)], capture_output=True, text=True,
                         timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(zip(PLANS, json.loads(out.stdout.strip().splitlines()[-1])))


def _model(plan: Plan) -> Counter:
    """What the projection prices for one iteration of one micro-batch: per layer (x layers), plus
    the embedding, head and loss calls."""
    out: Counter = Counter()
    for c in lc.tp_calls(plan) + lc.cp_calls(plan):
        out[(c.phase, c.op, c.nbytes, c.group)] += LAYERS if c.where == "layer" else 1
    return out


def _real(calls: list[dict]) -> Counter:
    """The real run's calls inside forward / backward that move data (groups of 2 ranks)."""
    return Counter((r["phase"], r["op"], r["nbytes"], r["group"]) for r in calls
                   if r["phase"] != "dp" and r["group_size"] > 1)


@pytest.mark.parametrize("name", list(PLANS))
def test_priced_calls_equal_the_real_runs(traces, name):
    """Per pass, the multiset of (op, bytes, group) priced equals the real run's calls: count, op,
    size by the NCCL convention and group."""
    plan = PLANS[name]
    assert plan.num_microbatches == 1
    assert _model(plan) == _real(traces[name])


def test_tp_calls_include_the_loss_and_async_backward(traces):
    """The vocab-parallel cross-entropy's three fp32 all-reduces are issued (and priced), and the
    column-parallel backward all-reduces are real calls inside autograd's backward."""
    real = traces["tp2"]
    loss = [r for r in real if r["group"] == "tp" and r["dtype"] == "float32"]
    assert len(loss) == 3 and all(r["op"] == "all_reduce" and r["phase"] == "fwd" for r in loss)
    assert sum(1 for c in lc.tp_calls(PLANS["tp2"]) if c.where == "loss") == 3
    bwd = [r for r in real if r["group"] == "tp" and r["phase"] == "bwd"]
    assert len(bwd) == 2 * LAYERS + 1 and {r["op"] for r in bwd} == {"all_reduce"}


def test_cp_run_exchanges_what_te_does(traces):
    """The CPU CP run issues TE's exchange (K and V gathered apart, gathered again in backward,
    dK / dV reduce-scattered), not gloo's all-to-all-by-scatter backward of
    ``torch.distributed.nn.functional.all_gather``; the data-parallel reduction runs once over
    DP x CP, in the dtype and size the cost model prices."""
    real = traces["cp2"]
    ops = Counter((r["phase"], r["op"]) for r in real if r["group"] == "cp")
    assert ops == Counter({("fwd", "all_gather"): 2 * LAYERS, ("bwd", "all_gather"): 2 * LAYERS,
                           ("bwd", "reduce_scatter"): 2 * LAYERS})
    dp = [r for r in real if r["phase"] == "dp"]
    assert [r["op"] for r in dp] == ["all_reduce"]
    # the bytes the cost model prices for it: every dense gradient, fp32 with grad_reduce_in_fp32
    from primus_launch.projection.memory.params import stage_parameter_split

    plan = PLANS["cp2"]
    assert plan.training.grad_reduce_in_fp32 and dp[0]["dtype"] == "float32"
    assert dp[0]["nbytes"] == 4 * stage_parameter_split(plan)[0].dense


def test_sequence_parallel_calls_follow_megatron_source():
    """SP cannot run on the CPU; its per-layer calls against megatron-core's own code: the
    column-parallel backward re-all-gathers its input and reduce-scatters its input gradient
    (``LinearWithGradAccumulationAndAsyncCommunication.backward``), the row-parallel forward
    reduce-scatters (``RowParallelLinear.forward``), the output layer gathers its input
    (``ColumnParallelLinear``)."""
    from megatron.core.tensor_parallel import layers

    bwd = inspect.getsource(layers.LinearWithGradAccumulationAndAsyncCommunication.backward)
    assert "dist_all_gather_func(" in bwd and "dist_reduce_scatter_func(" in bwd
    assert "reduce_scatter_to_sequence_parallel_region(" in inspect.getsource(layers.RowParallelLinear.forward)
    plan = _plan(tp=2, sp=True)
    c = Counter((x.phase, x.op, x.where) for x in lc.tp_calls(plan))
    assert c[("fwd", "all_gather", "layer")] == 2 and c[("fwd", "reduce_scatter", "layer")] == 2
    assert c[("bwd", "all_gather", "layer")] == 4 and c[("bwd", "reduce_scatter", "layer")] == 2
    assert c[("fwd", "all_gather", "head")] == 1 and c[("bwd", "all_gather", "head")] == 1
    assert c[("bwd", "reduce_scatter", "head")] == 1 and c[("fwd", "reduce_scatter", "embedding")] == 1


def test_iteration_prices_the_listed_calls():
    """``cost.tp_comm.tp_layer_comm`` / ``cost.cp_comm.cp_layer_comm`` are the sums of the listed layer
    calls' prices."""
    from primus_launch.projection.cost.cp_comm import cp_layer_comm
    from primus_launch.projection.cost.tp_comm import tp_layer_comm
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    for plan in (PLANS["tp2"], _plan(tp=2, sp=True), PLANS["cp2"]):
        lay = layout(plan)
        groups = {"tp": lay.tp, "cp": lay.cp}
        layer = [c for c in lc.tp_calls(plan) if c.where == "layer"]
        assert tp_layer_comm(plan, get_gpu("h100-sxm"), lay) == pytest.approx(lc.priced(layer, "h100-sxm", groups))
        assert cp_layer_comm(plan, get_gpu("h100-sxm"), lay) == pytest.approx(lc.priced(lc.cp_calls(plan), "h100-sxm", groups))


@pytest.mark.usefixtures("no_fake_world")
def test_force_load_balancing_reaches_megatrons_router():
    """``training.moe_router_force_load_balancing`` (the balanced routing the cost model assumes;
    ``scripts/validation/measure_gloo.py``'s EP case sets it) is built into megatron's config -- the
    measured pieces and the real run alike -- and keys the MoE pieces' cache records."""
    from primus_launch.projection.measure import build_mcore as b

    def moe(force: bool) -> Plan:
        return Plan.model_validate({
            "model": dict(num_layers=1, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, vocab_size=256,
                          seq_length=32, num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=64),
            "parallel": dict(ep=2),
            "training": dict(global_batch_size=4, micro_batch_size=2, moe_token_dispatcher="allgather",
                             moe_router_force_load_balancing=force),
            "cluster": dict(gpu="h100-sxm", gpus_per_node=2)})

    with b.world_size_one("cpu"):
        model = b.build_gpt(moe(True), num_dense=0, num_moe=1, per_rank=True, device="cpu")
    assert model.config.moe_router_force_load_balancing is True
    name = next(n for n in b.build_spec(moe(True)).piece_names if n.startswith("moe_layer"))
    assert b.build_spec(moe(True)).material(name) != b.build_spec(moe(False)).material(name)


def _titan_tp2(model: str, flavor: str, seq: int, layers: int | None = None) -> Plan:
    """TorchTitan's ``model`` / ``flavor`` (``layers`` of its blocks) at TP = 2 with sequence
    parallelism, one micro-batch of ``seq`` tokens."""
    from primus_launch.adapters.torchtitan_arch import arch_from_flavor

    arch = arch_from_flavor(model, flavor, seq_len=seq).model_dump()
    if layers is not None:
        arch["num_layers"] = layers
    return Plan.model_validate({"model": arch, "parallel": {"tp": 2, "sequence_parallel": True},
                                "training": {"global_batch_size": 1, "micro_batch_size": 1},
                                "cluster": {"gpus_per_node": 2, "gpu": "h100-sxm"},
                                "source": {"framework": "torchtitan"}})


@pytest.mark.parametrize("model,flavor", [("llama3", "debugmodel"), ("qwen3", "debugmodel"),
                                          ("qwen3", "debugmodel_moe"), ("deepseek_v3", "debugmodel")])
def test_torchtitan_tp_calls_equal_its_own_step(model, flavor):
    """TorchTitan with TP = 2 and sequence parallelism: every collective of one micro-batch, call by
    call with its size, as torchtitan's own model, sharding config and ``parallelize_fn`` issue them
    in a forward, ``cross_entropy_loss`` and backward (``titan_trace.tp_collectives``: fake process
    group of 2, ``FakeTensorMode``, recorded at torch's functional collective ops): llama3 (norms),
    Qwen3 (q / k norms; MoE without shared experts), DeepSeek-V3 (MLA down-projections, a dense and
    a MoE layer with shared experts and a router gate)."""
    from titan_trace import tp_collectives

    layers, seq = 2, 64
    plan = _titan_tp2(model, flavor, seq, layers)
    calls = lc.tp_calls(plan)
    want: Counter = Counter()
    for i in range(layers):
        want.update((c.phase, c.op, int(c.nbytes)) for c in lc.layer_calls(plan, plan.model.is_moe_layer(i)))
    want.update((c.phase, c.op, int(c.nbytes)) for c in calls if c.where in ("embedding", "head", "loss"))
    got = Counter(tp_collectives(model, flavor, layers=layers, seq=seq))
    assert got == want, (sorted((got - want).items()), sorted((want - got).items()))


def test_moe_layers_priced_by_their_own_list():
    """TorchTitan's MoE layer makes other TP calls than its dense layer (``where="moe_layer"``):
    ``cost.tp_comm.tp_layer_comm(moe=True)`` prices that list, and ``explain``'s communication rows show
    the dense and the MoE layer apart, each at the price of its list; a plan whose MoE layers have
    no list of their own (megatron) keeps one row priced by the layer's."""
    from primus_launch.projection.explain import comm_rows
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.cost.tp_comm import tp_layer_comm
    from primus_launch.projection.hardware.gpus import get_gpu

    plan = _titan_tp2("deepseek_v3", "debugmodel", 64)
    lay, calls = layout(plan), lc.tp_calls(plan)
    price = {w: lc.priced([c for c in calls if c.where == w], "h100-sxm", {"tp": lay.tp}) for w in ("layer", "moe_layer")}
    assert price["moe_layer"] != price["layer"]
    assert tp_layer_comm(plan, get_gpu("h100-sxm"), lay, moe=True) == pytest.approx(price["moe_layer"])
    assert tp_layer_comm(plan, get_gpu("h100-sxm"), lay) == pytest.approx(price["layer"])
    rows = {r[0]: r for r in comm_rows(plan) if r[0].startswith("TP")}
    moe = next(r for w, r in rows.items() if w.endswith("MoE layer"))
    dense = next(r for w, r in rows.items() if w.endswith("dense layer"))
    assert (moe[1], moe[2]) == pytest.approx(tuple(1e3 * x for x in price["moe_layer"]))
    assert (dense[1], dense[2]) == pytest.approx(tuple(1e3 * x for x in price["layer"]))
    mega = _plan(tp=2, sp=True)
    assert [w for w, *_ in comm_rows(mega) if w.startswith("TP")] == ["TP (AG/RS, SP) 2 ranks, 1 domain(s)"]
