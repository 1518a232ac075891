"""The backward's host run-ahead across layers (cost/host_runahead.py), checked against the launch-queue
recurrence itself and against Megatron-Bridge PR #6056's pinned / unpinned A/B."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from primus_launch.plan import Plan
from primus_launch.projection.cost import host_runahead
from primus_launch.projection.cost.host_sync import backward_syncs, launch_bound_seconds
from primus_launch.projection.layer_times import PassTimes

ROOT = Path(__file__).resolve().parents[1]


def test_pooled_backward_is_the_launch_queue_walk_of_an_alternating_pass():
    # backward of ... M E M E: E (host 3.9 ms over 300 launches, GPU 3.0 ms) then a CUDA-graphed M (one launch,
    # GPU 3.3 ms), 40 times; the recurrence over the whole pass (no sync) against the pooled form
    t_launch = 3.9e-3 / 300
    seq = []
    for _ in range(40):
        seq.append(["moe", 3.0e-3, 300, 0.0, 0])
        seq.append(["mamba", 3.3e-3, 1, 0.0, 0])
    walked = launch_bound_seconds(seq, t_launch)
    e = (1, PassTimes(0.0, 2.0e-3, 1.0e-3), 3.9e-3, 0.9e-3)
    m = (1, PassTimes(0.0, 2.2e-3, 1.1e-3), t_launch, 0.0)
    bi = host_runahead.pooled_backward({"E": (40, *e[1:]), "M": (40, *m[1:])})
    pooled = 40 * (bi["E"] + 1.0e-3 + bi["M"] + 1.1e-3)
    per_layer = 40 * (3.9e-3 + 3.3e-3)
    assert abs(walked - pooled) < 1.0e-3 < per_layer - walked   # the walk pools; one layer's lead at the start


def test_pooled_backward_keeps_gpu_floor_and_host_bound_sum():
    t = PassTimes(0.0, 1.0, 1.0)
    # every kind host-bound: the pooled excess is the per-layer one
    out = host_runahead.pooled_backward({"a": (2, t, 3.0, 1.0), "b": (1, t, 4.0, 2.0)})
    assert out == {"a": 2.0, "b": 3.0}
    # slack in a GPU-heavy kind hides all of it; no kind drops below its GPU work
    out = host_runahead.pooled_backward({"a": (2, t, 3.0, 1.0), "b": (2, PassTimes(0.0, 3.0, 1.0), 0.1, 0.0)})
    assert out == {"a": 1.0, "b": 3.0}


def _row(rid: str) -> dict:
    return next(r for r in json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"] if r["id"] == rid)


def test_backward_syncs_where_the_moe_forward_reruns():
    nano_h100 = Plan.model_validate(_row("mbridge2606_h100_fp8_cs_nemotron3_nano_16gpu")["plan"])
    assert backward_syncs(nano_h100)   # selective recompute of 'moe' re-runs the dispatcher's sync
    p = _row("mbridge2606_b300_fp8_mx_nemotron3_super_64gpu")["plan"]
    assert not backward_syncs(Plan.model_validate(p))
    q = copy.deepcopy(p)
    q["training"]["recompute"]["granularity"] = "full"
    # a hybrid (Mamba) stack: megatron-core 0.16.1's MambaStack recomputes no layer under full, so nothing re-runs
    # the dispatcher (cost/recompute.py full_recompute_inert; tests/test_hybrid_full_recompute.py)
    assert not backward_syncs(Plan.model_validate(q))
    qwen = _row("mlm_moe_qwen3_30b_h100_bf16_32gpu_tp1pp1ep8")["plan"]
    assert not backward_syncs(Plan.model_validate(qwen))
    qwen["training"]["recompute"] = {"granularity": "full"}
    assert backward_syncs(Plan.model_validate(qwen))   # a GPT MoE stack: full recompute re-runs the MoE forward


def test_pct_pinning_ab_of_megatron_bridge_6056():
    """PR #6056: Super BF16 on 64 B300, priority cores (4.6 GHz) vs unpinned (2.3 GHz base): 744 / 684 TFLOP/s,
    1.088 for twice the host time per launch.  The per-layer backward read 1.441; pooled it must stay a slope,
    not a cliff (within the unpinned run's looser bound: it also spreads threads over more cores)."""
    import scripts.b300_super_probe as probe
    (k, _, _, ratio, _), = probe.host_sweep((1.0,))
    assert 1.0 <= ratio < 1.25


def test_tuner_pass_times_of_a_hybrid_stack_are_keyed_by_the_backward_sync():
    """The tuner's offload bound reads each node's pass times from a cache keyed by the layer axes and the pass
    flags (``tuner/bounds.py`` ``_pass_times``); a hybrid stack's backward host time also follows whether the
    backward re-runs the dispatcher's sync (recompute of 'moe', full recompute, the 1F1B EP overlap), so two
    plans differing only there shared one entry.  Each now gets the roofline's own times."""
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.hardware.gpus import resolve_power_cap
    from primus_launch.tuner.bounds import BoundModel
    from primus_launch.tuner.space import Knobs, Space, apply_knobs

    plan = Plan.model_validate(_row("mbridge2606_gb200_fp8_mx_nemotron3_super_64gpu")["plan"])
    sp = Space(plan)
    bm = BoundModel(plan, sp)
    s = next(i for i, h in enumerate(sp.structs) if Knobs(*h, *sp.tables[sp.ctx[i]][0]).rc_granularity == "none")
    h, f = sp.structs[s], sp.tables[sp.ctx[s]][0]
    hf = Knobs(*h, *f)
    kinds = []
    for ep_overlap in (False, True):
        k = hf._replace(ep_overlap=ep_overlap)
        hh, ff = tuple(k)[:len(h)], tuple(k)[len(h):]
        run = resolve_power_cap(apply_knobs(plan, k))
        kinds.append(backward_syncs(run))
        assert bm._pass_times(hh, ff) == layer_times_roofline(bm._run(hh, ff))
    assert kinds == [False, True]
