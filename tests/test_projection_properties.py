"""Properties of the projection over generated plans: the bundled recipes (every reader's format) with
their tuner-space candidates drawn at random (``Space(plan)[i]``, applied with ``apply_knobs`` and checked by
``validated``: the Plan's own constructors and the framework rules), and single fields varied through
``Plan.with_changes`` (a change the plan refuses is skipped, never forced).

What must hold, and where it comes from:

- identities of the result (``projection/result.py``): a stage's terms sum to its allocated bytes and, with
  the reserve, to its total; the breakdown sums to the peak, which is the worst stage's total; the memory
  band's bottom <= the verdict's peak <= its top (the band's low <= 0 <= high, ``memory/band_data.py``); the
  time breakdown sums to the iteration time; tokens/s/GPU x GPUs x iteration = global batch x sequence;
  TFLOP/s/GPU = FLOPs / (iteration x GPUs); MFU = TFLOP/s / the GPU's peak of the plan's precision;
- FLOPs are model FLOPs (Megatron-LM ``training.py`` ``num_floating_point_operations``): independent of the
  parallel layout except through the padded vocabulary (``6 h V_padded`` per token, V padded to
  ``make_vocab_size_divisible_by x TP``, Megatron's own ``padded_vocab_size``);
- memory: recomputation frees (none >= selective core_attn >= full, Megatron-LM, without fine-grained
  offloading: megatron-core 0.16.1 ``attention.py`` opens the ``core_attn`` offload group only on the path
  without ``checkpoint_core_attention``, so recomputing the core attention puts its offloaded q, k, v back on
  the GPU; TorchTitan: none >= op, none >= full); a sharded DP (distributed optimizer / FSDP) that grows
  (DP and expert DP already >= 2, so no communicator is added) never raises the peak; TP / CP that grow at a
  fixed DP (already >= 2) never raise it; EP that grows never raises a Megatron stage's parameters,
  gradients and optimizer states (experts sharded over EP, their optimizer over expert DP); without a
  pipeline a smaller micro-batch never raises the peak (with one, more and smaller micro-batches can: the
  first stage frees one micro-batch before its embedding gradient, a TorchTitan stage accumulates its
  gradients while more are in flight); activations grow with the micro-batch (micro-batches per step held)
  and with the sequence; the verdict is monotone in ``--memory-margin`` and in the capacity;
- time: more layers are never faster; a GPU with a higher peak FLOP/s (all else equal) is never slower.
"""

from __future__ import annotations

from functools import lru_cache

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from plan_draws import MEGATRON, RECIPES, ROOT, draw_plan, recipe

from primus_launch.adapters import load_recipe
from primus_launch.plan import Plan, PlanError
from primus_launch.projection.cost.flops import model_flops_per_iteration
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.projection.hardware import gpus
from primus_launch.projection.memory.verdict import verdict
from primus_launch.tuner.space import apply_knobs, validated

VERDICTS = ("fits", "tight", "does not fit")
REL = 1e-9
SETTINGS = settings(max_examples=25, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


def changed(plan: Plan, **sections: dict) -> Plan | None:
    """``plan`` with fields changed through its validated constructor, or None where the plan refuses it."""
    try:
        return plan.with_changes(**sections).model_copy(update={"source": plan.source})
    except (PlanError, ValidationError):
        return None


@lru_cache(maxsize=4096)
def _project(plan_json: str):
    return project_dry_run(Plan.model_validate_json(plan_json))


def project(plan: Plan):
    try:
        return _project(plan.model_dump_json())
    except PlanError:   # a refusal of the projection (an unmodelled hybrid, a precision the GPU lacks)
        return None


def peak(r) -> int:
    return r.memory.peak_bytes_per_gpu


def no_higher(a: float, b: float) -> bool:
    return a <= b * (1 + REL) + 1


# --------------------------------------------------------------------------- identities of one result
@SETTINGS
@given(data=st.data())
def test_result_identities(data):
    p = draw_plan(data)
    r = project(p)
    assume(r is not None)
    m = r.memory
    for s in m.stages:
        assert s.parameters_bytes + s.gradients_bytes + s.optimizer_bytes + s.activations_bytes \
            + s.transient_bytes == s.allocated_bytes, s
        assert s.allocated_bytes + s.reserve_bytes == s.total_bytes, s
    assert sum(m.breakdown.values()) == m.peak_bytes_per_gpu
    assert m.peak_bytes_per_gpu == max(s.total_bytes for s in m.stages) == m.stages[m.worst_stage].total_bytes
    assert m.band is not None and m.band.low <= 0 <= m.band.high
    assert m.band.low_bytes <= m.verdict_peak_bytes <= m.band.high_bytes
    it = r.iteration_time_s
    assert sum(r.time_breakdown.values()) == pytest.approx(it, rel=1e-9), r.time_breakdown
    assert all(v >= 0 for v in r.time_breakdown.values()), r.time_breakdown
    assert r.tokens_per_sec_per_gpu * r.num_gpus * it == pytest.approx(
        p.training.global_batch_size * p.model.seq_length, rel=1e-12)
    assert r.num_gpus == p.world_size
    assert r.model_tflops_per_gpu == pytest.approx(r.model_flops_per_iteration / (it * r.num_gpus) / 1e12, rel=1e-12)
    peak_flops = gpus.get_gpu(p.cluster.gpu).peak_flops(p.training.precision)
    assert r.mfu == pytest.approx(r.model_tflops_per_gpu * 1e12 / peak_flops, rel=1e-12)


@SETTINGS
@given(data=st.data())
def test_flops_per_token_depend_only_on_the_padded_vocabulary(data):
    """Model FLOPs of a candidate = the recipe's + 6 h (V_padded' - V_padded) per token (Megatron's logit term;
    nothing else of the layout enters ``num_floating_point_operations``)."""
    path = data.draw(st.sampled_from(RECIPES), label="recipe")
    plan, sp = recipe(path)
    p = validated(apply_knobs(plan, sp[data.draw(st.integers(0, len(sp) - 1), label="candidate")]))
    m = plan.model
    dv = m.padded_vocab_size(p.parallel.tp) - m.padded_vocab_size(plan.parallel.tp)
    want = model_flops_per_iteration(plan) + plan.tokens_per_iteration * 6 * m.hidden_size * dv \
        * (1 + (m.mtp_num_layers if m.is_hybrid else 0))
    assert model_flops_per_iteration(p) == pytest.approx(want, rel=1e-12)
    if dv == 0:
        assert model_flops_per_iteration(p) == model_flops_per_iteration(plan)


# --------------------------------------------------------------------------- memory
MEGATRON_RC = ({"granularity": "none"}, {"granularity": "selective", "modules": ("core_attn",)},
               {"granularity": "full", "method": "uniform", "num_layers": 1})


@SETTINGS
@given(data=st.data())
def test_megatron_recompute_never_raises_the_peak(data):
    p = draw_plan(data, MEGATRON)
    assume(not p.training.offload.activation_modules and not p.training.offload.activation_layers)
    peaks = []
    for rc in MEGATRON_RC:
        q = changed(p, training={"recompute": rc})
        r = q and project(q)
        peaks.append(None if r is None else (rc["granularity"], peak(r), r.memory.breakdown))
    got = [x for x in peaks if x is not None]
    assume(len(got) >= 2)
    for a, b in zip(got, got[1:]):
        assert no_higher(b[1], a[1]), (p.parallel_summary(), a, b)


@SETTINGS
@given(data=st.data())
def test_torchtitan_recompute_never_raises_the_peak(data):
    p = draw_plan(data, [r for r in RECIPES if r not in MEGATRON])
    q0 = changed(p, training={"recompute": {"granularity": "none"}})
    r0 = q0 and project(q0)
    assume(r0 is not None)
    for g in ("op", "full"):
        q = changed(p, training={"recompute": {"granularity": g}})
        r = q and project(q)
        if r is not None:
            assert no_higher(peak(r), peak(r0)), (p.parallel_summary(), g, r.memory.breakdown, r0.memory.breakdown)


@SETTINGS
@given(data=st.data())
def test_a_larger_sharded_data_parallel_never_raises_the_peak(data):
    p = draw_plan(data)
    assume(p.parallel.dp_sharding != "none" and p.dp >= 2 and (not p.model.is_moe or p.expert_dp >= 2))
    q = changed(p, cluster={"num_nodes": 2 * p.cluster.num_nodes})
    assume(q is not None)
    r, rq = project(p), project(q)
    assume(r is not None and rq is not None)
    assert q.dp == 2 * p.dp
    assert no_higher(peak(rq), peak(r)), (p.parallel_summary(), r.memory.breakdown, rq.memory.breakdown)


@SETTINGS
@given(data=st.data(), axis=st.sampled_from(["tp", "cp"]))
def test_a_larger_tp_or_cp_at_a_fixed_dp_never_raises_the_peak(data, axis):
    p = draw_plan(data)
    v = getattr(p.parallel, axis)
    assume(v >= 2)
    q = changed(p, parallel={axis: 2 * v}, cluster={"num_nodes": 2 * p.cluster.num_nodes})
    assume(q is not None and q.dp == p.dp and (not p.model.is_moe or q.expert_dp >= p.expert_dp))
    r, rq = project(p), project(q)
    assume(r is not None and rq is not None)
    assert no_higher(peak(rq), peak(r)), (axis, p.parallel_summary(), r.memory.breakdown, rq.memory.breakdown)


@SETTINGS
@given(data=st.data())
def test_a_larger_ep_never_raises_a_megatron_stage_s_states(data):
    p = draw_plan(data, [r for r in MEGATRON if any(k in r for k in ("deepseek", "qwen", "mixtral"))])
    assume(p.parallel.dp_sharding != "full")
    q = changed(p, parallel={"ep": 2 * p.parallel.ep})
    assume(q is not None)
    r, rq = project(p), project(q)
    assume(r is not None and rq is not None)
    for a, b in zip(r.memory.stages, rq.memory.stages):
        assert no_higher(b.parameters_bytes + b.gradients_bytes + b.optimizer_bytes,
                         a.parameters_bytes + a.gradients_bytes + a.optimizer_bytes), (p.parallel_summary(), a, b)
        assert no_higher(b.parameters_bytes, a.parameters_bytes), (p.parallel_summary(), a, b)


@SETTINGS
@given(data=st.data())
def test_without_a_pipeline_a_smaller_micro_batch_never_raises_the_peak(data):
    p = draw_plan(data)
    assume(p.parallel.pp == 1 and p.training.micro_batch_size > 1)
    q = changed(p, training={"micro_batch_size": p.training.micro_batch_size // 2})
    assume(q is not None)
    r, rq = project(p), project(q)
    assume(r is not None and rq is not None)
    assert no_higher(peak(rq), peak(r)), (p.parallel_summary(), r.memory.breakdown, rq.memory.breakdown)


def _activations(r) -> int:
    return sum(s.activations_bytes for s in r.memory.stages)


@SETTINGS
@given(data=st.data(), what=st.sampled_from(["mbs", "seq"]))
def test_activations_grow_with_the_micro_batch_and_the_sequence(data, what):
    p = draw_plan(data)
    t = p.training
    q = (changed(p, training={"micro_batch_size": 2 * t.micro_batch_size, "global_batch_size": 2 * t.global_batch_size})
         if what == "mbs" else changed(p, model={"seq_length": 2 * p.model.seq_length}))
    assume(q is not None and q.num_microbatches == p.num_microbatches)
    r, rq = project(p), project(q)
    assume(r is not None and rq is not None)
    assert _activations(rq) >= _activations(r), (what, p.parallel_summary())
    assert peak(rq) >= peak(r) * (1 - REL), (what, p.parallel_summary(), r.memory.breakdown, rq.memory.breakdown)


@SETTINGS
@given(data=st.data())
def test_the_verdict_is_monotone_in_the_margin(data):
    p = draw_plan(data)
    margins = sorted(data.draw(st.lists(st.floats(0.0, 0.95), min_size=2, max_size=4), label="margins"))
    try:
        got = [VERDICTS.index(project_dry_run(p, memory_margin=m).memory.verdict) for m in margins]
    except PlanError:
        assume(False)
    assert got == sorted(got), (margins, got)


@settings(max_examples=200, derandomize=True, deadline=None, database=None)
@given(peak_=st.floats(1e6, 1e12), cap=st.floats(1e6, 1e12), more=st.floats(0, 1e12), margin=st.floats(0, 0.99),
       more_margin=st.floats(0, 0.99), out=st.floats(0, 1), low=st.floats(-0.5, 0), high=st.floats(0, 0.5))
def test_the_verdict_is_monotone_in_capacity_and_margin(peak_, cap, more, margin, more_margin, out, low, high):
    outside = out * peak_
    v = VERDICTS.index(verdict(peak_, cap, low, high, margin, outside=outside))
    assert VERDICTS.index(verdict(peak_, cap + more, low, high, margin, outside=outside)) <= v
    assert VERDICTS.index(verdict(peak_, cap, low, high, min(0.99, margin + more_margin), outside=outside)) >= v


@pytest.fixture
def gpu_db():
    """The GPU database restored after the test (a test swaps a GPU's spec for one that differs in one field)."""
    saved = dict(gpus._DB)
    yield gpus._DB
    gpus._DB.clear()
    gpus._DB.update(saved)


@settings(max_examples=15, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(data=st.data(), factor=st.sampled_from([1.25, 2.0]))
def test_more_hbm_never_worsens_the_verdict_and_more_flops_never_slow(gpu_db, data, factor):
    """The plan's GPU copied under new names (the kernel curves are the architecture's; the cost functions cache
    by GPU name, so a spec swapped under the same name would be read from their caches): once as it is -- the same
    projection as the original's --, once with ``factor`` x the HBM and every peak FLOP/s."""
    p = draw_plan(data)
    r = project(p)
    assume(r is not None)
    spec = gpus.get_gpu(p.cluster.gpu)
    runs = []
    for f in (1.0, factor):
        name = f"{spec.name}-props16-x{f:g}"
        gpu_db[name] = spec.model_copy(update=dict(
            name=name, hbm_bytes=spec.hbm_bytes * f, peak_flops_bf16=spec.peak_flops_bf16 * f,
            peak_flops_fp8=spec.peak_flops_fp8 * f, peak_flops_fp4=spec.peak_flops_fp4 and spec.peak_flops_fp4 * f))
        runs.append(project_dry_run(p.model_copy(update={"cluster": p.cluster.model_copy(update={"gpu": name})})))
    same, more = runs
    assert same.iteration_time_s == pytest.approx(r.iteration_time_s, rel=1e-12)
    assert same.memory.peak_bytes_per_gpu == r.memory.peak_bytes_per_gpu and same.memory.verdict == r.memory.verdict
    assert more.memory.capacity_bytes > same.memory.capacity_bytes
    assert VERDICTS.index(more.memory.verdict) <= VERDICTS.index(same.memory.verdict)
    assert more.memory.peak_bytes_per_gpu == same.memory.peak_bytes_per_gpu
    assert more.iteration_time_s < same.iteration_time_s, (p.parallel_summary(), same.time_breakdown,
                                                           more.time_breakdown)


# --------------------------------------------------------------------------- time
@SETTINGS
@given(data=st.data())
def test_more_layers_are_never_faster(data):
    p = draw_plan(data)
    step = p.parallel.pp * p.parallel.vpp
    q = changed(p, model={"num_layers": p.model.num_layers + step})
    assume(q is not None)
    r, rq = project(p), project(q)
    assume(r is not None and rq is not None)
    assert rq.iteration_time_s >= r.iteration_time_s * (1 - REL), (p.parallel_summary(), r.time_breakdown,
                                                                  rq.time_breakdown)


def test_time_breakdown_sums_to_the_iteration_under_the_combined_1f1b():
    """Regression: with the EP-overlap (combined 1F1B) schedule each steady step's wait for its neighbours' sends
    is inside the busy time of the stage; the bubble subtracted it a second time, so the breakdown summed short of
    the iteration (Mixtral 8x22B on 32 MI355X, TP 2 PP 2 VPP 2 CP 2 EP 2: 51.865 of 51.885 s)."""
    from primus_launch.tuner.space import knobs_of

    plan = load_recipe(ROOT / "recipes/megatron/mixtral_8x22b_mi355x_32gpu.sh")
    k = knobs_of(plan)._replace(tp=2, pp=2, vpp=2, cp=2, ep=2, etp=1, sp=True, mbs=8, rc_granularity="selective",
                                rc_method="uniform", rc_layers=None, rc_modules=("core_attn",), ep_overlap=True)
    p = validated(apply_knobs(plan, k))
    r = project_dry_run(p)
    assert r.time_breakdown["pp_comm"] > 0
    assert sum(r.time_breakdown.values()) == pytest.approx(r.iteration_time_s, rel=1e-12)
    off = project_dry_run(validated(apply_knobs(plan, k._replace(ep_overlap=False))))
    assert sum(off.time_breakdown.values()) == pytest.approx(off.iteration_time_s, rel=1e-12)
