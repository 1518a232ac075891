"""MoE overlap physics of the dry-run against their sources: SM contention per architecture
(cost/contention.py), the Hopper TP launch-order loss under the 1F1B all-to-all overlap, the combined
1F1B's pipeline sends (cost/ep_comm.py) and TorchTitan's grouped-mm experts
(cost/roofline.py), checked on the frameworks' own modules where they exist."""

from __future__ import annotations

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Source, Training
from primus_launch.projection.cost import contention as con
from primus_launch.projection.cost import ep_comm
from primus_launch.projection.cost.tp_comm import cdmc_unordered, tp_exposed, tp_layer_comm
from primus_launch.projection.hardware.gpus import get_gpu


def _qwen3_235b(gpu: str = "h100-sxm", tp: int = 2, pp: int = 8, vpp: int = 4, overlap: bool = True,
                framework: str = "megatron") -> Plan:
    return Plan(model=ModelArch(num_layers=94, hidden_size=4096, ffn_hidden_size=12288, num_attention_heads=64,
                                num_query_groups=4, vocab_size=151936, seq_length=4096, num_experts=128,
                                moe_router_topk=8, moe_ffn_hidden_size=1536),
                parallel=Parallelism(tp=tp, etp=1, pp=pp, vpp=vpp, ep=32, sequence_parallel=tp > 1,
                                     account_for_embedding_in_pipeline_split=True,
                                     account_for_loss_in_pipeline_split=True),
                training=Training(global_batch_size=2048, micro_batch_size=1, moe_token_dispatcher="alltoall",
                                  moe_grouped_gemm=True, overlap_moe_expert_parallel_comm=overlap,
                                  delay_wgrad_compute=overlap),
                cluster=Cluster(gpu=gpu, num_nodes=32, gpus_per_node=8),
                source=Source(framework=framework))


def test_lost_fraction_per_architecture():
    """Hopper: the measured H100 tail (a 132-CTA GEMM at ~80 % MFU fell to ~47 % beside a 24-CTA NCCL
    kernel) whatever the SMs held; dynamic scheduling (Blackwell CLC, Ampere's non-persistent grids):
    the SM share."""
    assert con.lost_fraction(24, 132, "hopper") == pytest.approx(1 - 47 / 80)
    assert con.lost_fraction(2, 132, "hopper") == pytest.approx(1 - 47 / 80)
    assert con.lost_fraction(20, 148, "blackwell") == pytest.approx(20 / 148)
    assert con.lost_fraction(20, 108, "ampere") == pytest.approx(20 / 108)
    assert con.lost_fraction(0, 132, "hopper") == 0.0
    assert con.displaced(2.0, 24, 132, "hopper") == pytest.approx(2.0 * (1 - 47 / 80))
    assert con.displaced(2.0, 20, 148, "blackwell") == pytest.approx(2.0 * 20 / 148)


def test_hopper_tp_order_lost_only_with_the_overlap():
    """Megatron-LM validate_args: TP on arch < 10 wants CUDA_DEVICE_MAX_CONNECTIONS=1, the 1F1B
    all-to-all overlap needs more; Blackwell lifted the requirement."""
    h100, b200 = get_gpu("h100-sxm"), get_gpu("b200")
    assert cdmc_unordered(_qwen3_235b("h100-sxm"), h100)
    assert not cdmc_unordered(_qwen3_235b("b200"), b200)
    assert not cdmc_unordered(_qwen3_235b("h100-sxm", overlap=False), h100)
    tp1 = _qwen3_235b("h100-sxm", tp=1, pp=8)
    assert not cdmc_unordered(tp1, h100)


def test_hopper_tp_backward_exposed_in_full_under_overlap():
    """With the order lost, the column-parallel backward collectives are priced raw (no async credit)."""
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.hardware.placement import layout

    on = _qwen3_235b("h100-sxm")
    off = _qwen3_235b("h100-sxm", overlap=False)
    for plan, want_raw in ((on, True), (off, False)):
        lay = layout(plan)
        spec = get_gpu(plan.cluster.gpu)
        raw = tp_layer_comm(plan, spec, lay)
        exp = tp_exposed(plan, raw, layer_times_roofline(plan), spec, lay)
        assert (exp == raw) is want_raw
        assert exp[1] <= raw[1]


def test_combined_step_p2p_closed_form():
    """Half of each send's exposed part per step: p2p sends of the activation beyond the attn
    backward (forward output) and beyond the delayed attn weight gradient (input gradient), times
    the paired share of the passes; zero without PP or without the overlap."""
    from primus_launch.projection.cost.roofline import layer_times_roofline

    plan = _qwen3_235b("h100-sxm")
    lt = layer_times_roofline(plan)
    mo = lt.moe_layer
    ab = mo.bwd_input_s * ep_comm.attn_share(plan, lt, "bwd_input_s")
    aw = mo.bwd_weight_s * ep_comm.attn_share(plan, lt, "bwd_weight_s")
    p = 10 * (ab + aw)
    u = ep_comm.ep_unpaired_fraction(plan)
    assert ep_comm.combined_step_p2p(plan, lt, p) == pytest.approx((1 - u) * ((p - ab - aw) + (p - aw)) / 2)
    assert ep_comm.combined_step_p2p(plan, lt, 0.5 * aw) == 0.0
    assert ep_comm.combined_step_p2p(_qwen3_235b("h100-sxm", overlap=False), lt, p) == 0.0
    pp1 = _qwen3_235b("h100-sxm", pp=1, vpp=1)
    assert ep_comm.combined_step_p2p(pp1, layer_times_roofline(pp1), p) == 0.0


def test_torchtitan_grouped_experts_call_grouped_mm_with_one_local_expert():
    """TorchTitan's GroupedExperts runs torch._grouped_mm for any number of local experts (traced on
    the meta device), so the dry-run prices a 1-local-expert layer (Llama 4 Scout, 16 experts on
    EP 16) on the torch._grouped_mm curve, not the dense GEMM one."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    moe = pytest.importorskip("torchtitan.models.common.moe")

    class Rec(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    with torch.device("meta"):
        m = moe.GroupedExperts(moe.GroupedExperts.Config(dim=64, hidden_dim=128, num_experts=1))
        x = torch.empty(32, 64, dtype=torch.bfloat16)
        cnt = torch.tensor([32], dtype=torch.int64)
    with Rec() as r:
        m(x, cnt)
    mms = [o for o in r.ops if o.endswith("mm")]
    assert mms == ["aten._grouped_mm"] * 3

    from primus_launch.projection.cost.compute import gemm_time
    from primus_launch.projection.cost.roofline import layer_op_times

    plan = Plan(model=ModelArch(num_layers=4, hidden_size=5120, ffn_hidden_size=16384, num_attention_heads=40,
                                num_query_groups=8, vocab_size=202048, seq_length=8192, num_experts=16,
                                moe_router_topk=1, moe_ffn_hidden_size=8192),
                parallel=Parallelism(ep=16, dp_sharding="full"),
                training=Training(global_batch_size=160, micro_batch_size=10, moe_grouped_gemm=True),
                cluster=Cluster(gpu="gb200", num_nodes=4, gpus_per_node=4), source=Source(framework="torchtitan"))
    ops = {name: (f, info) for name, f, _bi, _bw, info in layer_op_times(plan)["moe"]}
    fc1 = next(v for k, v in ops.items() if k.startswith("experts (grouped) FC1"))
    assert fc1[1][0] == "grouped_gemm"
    T = 10 * 8192
    grouped = gemm_time(T, 2 * 8192, 5120, "gb200", "bf16", 1, "bf16", "torch")
    dense = gemm_time(T, 2 * 8192, 5120, "gb200", "bf16", 1, "bf16", "")
    assert grouped > dense
    assert fc1[0] == pytest.approx(grouped, rel=0.35)


def test_static_tail_is_the_recorded_measurement():
    """STATIC_TAIL['hopper'] is the loss the kernel-evidence record measured (47 % of 80 % MFU kept)."""
    from primus_launch.projection.cost import evidence as ev

    r = ev.record("contention-h100-gemm132cta-nccl-allgather24cta")
    assert r is not None and r["gpu"] == "h100-sxm"
    assert r["value"] == pytest.approx(r["shape"]["gemm_mfu_overlapped"] / r["shape"]["gemm_mfu_alone"])
    assert con.STATIC_TAIL["hopper"] == pytest.approx(1 - r["value"])
    assert "blackwell" not in con.STATIC_TAIL   # dynamic (CLC) scheduling: the SM share only
