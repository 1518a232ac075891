"""The measured path over the recipe matrix (issue 14) and every bundled recipe at tiny size: each
case runs ``project_measured`` on the CPU (real megatron-core / torchtitan pieces at tiny shapes,
world size 1) -- a functional check that every plan builds, runs and upscales, not a timing
target (no assertion reads how fast this machine is) -- and checks properties against independent
truth:

- the pieces of the model's kinds are all there, measured or read from the cache;
- every time is positive; a piece with weights has a positive weight-gradient time, a piece with
  an input a positive input-gradient time; ``bwd_input + bwd_weight == bwd``; where the split is
  measured (torchtitan: torch's ``stage_backward_input`` / ``stage_backward_weight``) both raw
  parts are positive; the ``converged`` flag is the policy's target applied to the samples' spread;
- memory: the result's memory is the measured one, and (matrix cases) each layer kind's measured
  kept bytes within a stated bound of the tensor-list model of the same implementation
  (``memory_activations.MCORE_LOCAL``: megatron-core's local modules on the CPU): megatron dense
  and MoE within 5 % (equal in most cases; CP keeps the gathered K/V of its all-gather attention:
  +3.5 % here; hidden dropout 0.1: equal, its masks counted), megatron MLA within [1, 1.35] x
  (measured +25 %: the model undercounts the local MLA path), gated quick-GeGLU within [1, 1.35] x
  (+28 %: megatron's dense MLP cannot fuse it and keeps its intermediates, the model counts the
  fused kernel), attention dropout in the SDPA core within [1, 2] x (+68 %: the CPU math kernel
  keeps the s x s probabilities and mask, a stated substitution), megatron's own unfused core
  within [1, 1.1] x (+5.5 %); torchtitan against its own memory model
  (``memory_titan``, ``TITAN_CPU``), without and under torchtitan's FullAC / SelectiveAC wrapped
  around the real block: dense within 2 % (equal here; CP 2: within [1, 1.2] x, the emulated CP
  core keeps ~8 % more here), MoE and MLA within [1, 2] x (the model follows megatron's modules);
  the measured figures are those of the result (Megatron: where the CPU modules keep more than the
  GPU kernels of the analytic model, the result's activations differ from the analytic ones);
- FP8: timed in BF16 and the result says so per piece, with the fp8/bf16 correction applied;
- the bundled recipes (``scripts/validation/tiny_plans.py``: every parallel degree, layer
  pattern, attention and expert setting of the recipe at tiny per-rank shapes) project with the
  pieces their plan implies.

Budget: one module-scoped cache shares the pieces of cases that differ only in what the cost model
adds (PP, VPP, schedules, recompute, DP sharding); one layer of each kind; three one-pass samples
per piece, no round-robin window.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

MEGATRON_MEM_BOUND = 0.05
TITAN_MEM_BOUND = 0.02


def _policy():
    from primus_launch.projection.measure.timing import TimingPolicy

    return TimingPolicy(warmup=1, min_repeats=3, max_repeats=3, min_sample_s=0.0, max_piece_s=1.0, min_window_s=0.0)


def _mcore(tied: bool = False, model: dict | None = None, parallel: dict | None = None,
           training: dict | None = None, gpus: int = 1, cluster_gpu: str = "h100-sxm"):
    from primus_launch.plan import Plan

    m = dict(num_layers=4, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_query_groups=2,
             vocab_size=256, seq_length=32, untie_embeddings_and_output_weights=not tied)
    m.update(model or {})
    return Plan.model_validate({"model": m, "parallel": parallel or {},
                                "training": {"global_batch_size": 4 * gpus, "micro_batch_size": 2, **(training or {})},
                                "cluster": {"gpus_per_node": gpus, "gpu": cluster_gpu}})


MOE = dict(num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=64, moe_dense_first_layers=1)
MLA = dict(multi_latent_attention=True, kv_lora_rank=32, qk_head_dim=16, qk_pos_emb_head_dim=8, v_head_dim=16,
           num_query_groups=None)

MEGATRON = {
    **{f"{'tied' if tied else 'untied'}-tp{tp}-pp{pp}": dict(
        tied=tied, parallel=dict(tp=tp, pp=pp, sequence_parallel=tp > 1), gpus=tp * pp)
       for tied in (False, True) for tp in (1, 2) for pp in (1, 2)},
    "cp2": dict(parallel=dict(cp=2), gpus=2),
    "vpp2": dict(parallel=dict(pp=2, vpp=2), training=dict(pipeline_schedule="interleaved_1f1b"), gpus=2),
    "moe-ep1": dict(model=MOE),
    "moe-ep2": dict(model=MOE, parallel=dict(ep=2), gpus=2),
    "mla": dict(model=MLA),
    "recompute-selective": dict(training=dict(recompute=dict(granularity="selective"))),
    "recompute-full-uniform": dict(training=dict(recompute=dict(granularity="full", method="uniform", num_layers=1))),
    "recompute-full-block": dict(parallel=dict(pp=2), gpus=2,
                                 training=dict(recompute=dict(granularity="full", method="block", num_layers=1))),
    "fp8": dict(training=dict(precision="fp8")),
    # plan fields that reach the build (issue 14 follow-up)
    "mtp": dict(model=dict(mtp_num_layers=1)),
    "layout": dict(parallel=dict(pp=2, pipeline_layout="Et|tttL"), gpus=2),
    "mtp-layout": dict(model=dict(mtp_num_layers=1), parallel=dict(pp=2, pipeline_layout="Ett|ttmL"), gpus=2),
    "fp8-blockwise": dict(training=dict(precision="fp8", fp8_recipe="blockwise")),
    "fp8-mxfp8": dict(training=dict(precision="fp8", fp8_recipe="mxfp8"), cluster_gpu="b200"),
    "moe-allgather": dict(model=MOE, training=dict(moe_token_dispatcher="allgather")),
    "moe-deepep-ep2": dict(model=MOE, parallel=dict(ep=2), gpus=2, training=dict(moe_token_dispatcher="deepep")),
    "window": dict(model=dict(window_size=8, window_layer_pattern=(1, 0, 1, 0))),
    "quick-geglu": dict(model=dict(activation="quick_gelu")),
    "dropout": dict(model=dict(hidden_dropout=0.1, attention_dropout=0.1)),  # Megatron's defaults
    "unfused-sinks": dict(model=dict(softmax_type="learnable"), training=dict(attention_backend="unfused")),
    "cuda-graphs": dict(training=dict(cuda_graph_impl="local")),
}


def _titan(name: str, flavor: str, parallel: dict | None = None, training: dict | None = None, gpus: int = 2,
           seq_len: int = 32, mbs: int = 2):
    from primus_launch.adapters.torchtitan_arch import arch_from_flavor
    from primus_launch.plan import Plan

    arch = arch_from_flavor(name, flavor, seq_len=seq_len)
    par = {"dp_sharding": "full", **(parallel or {})}
    return Plan.model_validate({"model": arch.model_dump(), "parallel": par,
                                "training": {"global_batch_size": mbs * gpus, "micro_batch_size": mbs,
                                             **(training or {})},
                                "cluster": {"gpus_per_node": gpus, "gpu": "h100-sxm"},
                                "source": {"framework": "torchtitan"}})


TITAN = {
    "fsdp": dict(),
    "hsdp": dict(parallel=dict(dp_replicate=2), gpus=4),
    "ddp": dict(parallel=dict(dp_sharding="none")),
    "tp2": dict(parallel=dict(tp=2, sequence_parallel=True)),
    "pp-1f1b": dict(parallel=dict(pp=2), gpus=2),
    "pp-gpipe": dict(parallel=dict(pp=2), training=dict(pipeline_schedule="gpipe"), gpus=2),
    "pp-interleaved": dict(parallel=dict(pp=3, vpp=2), training=dict(pipeline_schedule="interleaved_1f1b"), gpus=3),
    "pp-zbv": dict(parallel=dict(pp=3, vpp=2), training=dict(pipeline_schedule="zbv"), gpus=3),
    "cp2": dict(parallel=dict(cp=2)),
    # DeepSeek-V3's debugmodel (MLA + MoE) at the shapes the bundled torchtitan DeepSeek-V3 recipe has at tiny
    # size (64 tokens, one micro-batch, EP 8): the same pieces, so the module's cache measures them once for both
    # cases (~25 CPU s each: bf16 GEMMs on the CPU); the built model is the same at any EP (every routed expert is
    # built at world size 1, a stated substitution) and this case's checks read no size
    "moe-mla": dict(name="deepseek_v3", parallel=dict(ep=8), gpus=8, seq_len=64, mbs=1),
    "float8": dict(training=dict(precision="fp8")),
    "float8-rowwise": dict(training=dict(precision="fp8", fp8_recipe="rowwise")),
    "compile": dict(training=dict(compile=True)),
    "compile-tp2-cp2": dict(parallel=dict(tp=2, sequence_parallel=True, cp=2), training=dict(compile=True), gpus=4),
    "ac-none": dict(training=dict(recompute=dict(granularity="none"))),
    "ac-selective": dict(training=dict(recompute=dict(granularity="selective"))),
    "ac-full": dict(training=dict(recompute=dict(granularity="full", method="uniform", num_layers=1))),
}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """Every case measured in ONE fresh interpreter (:func:`run_all`): the measurement starts from a
    clean process (no fake process group or megatron parallel state left by earlier tests, one
    import of the frameworks for all cases).  Returns case -> (ProjectionResult, threads restored),
    or the case's error text."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from primus_launch.projection.result import ProjectionResult

    cache = tmp_path_factory.mktemp("measure-matrix-cache")
    here = Path(__file__).resolve().parent
    # compiled TorchTitan blocks through dynamo + AOT autograd without inductor's C++ code generation
    # (a cold inductor compile of a block and the loss takes tens of seconds; the result states the backend)
    env = dict(os.environ, PYTHONWARNINGS="ignore", PRIMUS_LAUNCH_COMPILE_BACKEND="aot_eager",
               PYTHONPATH=os.pathsep.join([str(here), str(here.parent / "scripts" / "validation"),
                                           os.environ.get("PYTHONPATH", "")]))
    code = "import sys, test_measure_matrix as m; m.run_all(sys.argv[1])"
    pr = subprocess.run([sys.executable, "-c", code, str(cache)], capture_output=True, text=True, env=env, timeout=900)
    assert pr.returncode == 0, pr.stderr[-3000:]
    raw = json.loads((cache / "results.json").read_text())
    return {k: (v["error"] if "error" in v else (ProjectionResult.model_validate(v["result"]), v["threads_restored"]))
            for k, v in raw.items()}


def _recipes() -> dict:
    """Case name (the recipe's path under recipes/) -> path of every bundled recipe."""
    from tiny_plans import ROOT, bundled_recipes

    return {str(p.relative_to(ROOT / "recipes")): p for p in bundled_recipes()}


def _recipe_plan(path):
    from tiny_plans import tiny

    from primus_launch.adapters import load_recipe

    return tiny(load_recipe(path))


def _plans() -> dict:
    out = {f"megatron/{c}": _mcore(**kw) for c, kw in MEGATRON.items()}
    for c, kw in TITAN.items():
        kw = dict(kw)
        out[f"torchtitan/{c}"] = _titan(kw.pop("name", "llama3"), "debugmodel", **kw)
    for c, path in _recipes().items():
        out[f"recipe/{c}"] = _recipe_plan(path)
    return out


def run_all(cache_dir: str) -> None:
    """Measure every case (shared cache) and write ``results.json`` into ``cache_dir``: case ->
    the result's JSON, or the error's text."""
    import json
    import traceback
    from pathlib import Path

    import torch

    from primus_launch.projection.measure.upscale import project_measured

    out: dict = {}
    for case, plan in _plans().items():
        threads = torch.get_num_threads()
        try:
            res = project_measured(plan, device="cpu", cache_dir=Path(cache_dir), measure_layers=1, policy=_policy())
            out[case] = {"result": res.to_json_dict(), "threads_restored": torch.get_num_threads() == threads}
        except Exception:  # reported by the case's test
            out[case] = {"error": traceback.format_exc()}
    (Path(cache_dir) / "results.json").write_text(json.dumps(out))


def _check(res, plan, framework: str, memory_model: bool = True) -> None:
    """The checks of the module docstring; ``memory_model``: also hold each layer kind's kept bytes
    to the memory model of the same implementation (the matrix cases)."""
    ms = res.measurement
    assert res.mode == "measured" and ms is not None and ms.framework == framework
    assert ms.threads == 1 and ms.clock == "thread"  # one torch thread, its CPU time
    assert res.iteration_time_s > 0 and res.tokens_per_sec_per_gpu > 0 and res.memory.peak_bytes_per_gpu > 0
    names = set(ms.pieces)
    m = plan.model
    want = {"embedding", "attn_core", "head_loss"}
    if m.num_layers - m.num_moe_layers:
        want.add("dense_layer#0")
    if m.is_moe:
        want.add(next(n for n in names if n.startswith("moe_layer#")))
    assert want <= names, (want, names)
    target = _policy().target_spread
    for n, pc in ms.pieces.items():
        assert pc.fwd_s > 0 and pc.bwd_s > 0, n
        assert pc.bwd_input_s + pc.bwd_weight_s == pytest.approx(pc.bwd_s, rel=1e-9), n
        if n != "embedding":
            assert pc.bwd_input_s > 0, n  # every piece but the embedding has a differentiable input
        if not n.startswith("attn_core"):
            assert pc.bwd_weight_s > 0 and pc.param_count > 0, n  # never a clamped 0
        if pc.split == "autograd":
            assert pc.bwd_input_raw_s > 0 and pc.bwd_weight_raw_s > 0, n
        assert pc.converged == (pc.spread["total"] <= target), n
        assert pc.activation_bytes > 0 or n == "embedding", n
        assert pc.peak_bytes >= pc.activation_bytes, n
    # memory: the result's is the measured one; per layer against the model of the same implementation
    assert res.memory.notes[0].startswith("activations measured per piece")
    chk = res.memory_check
    assert chk is not None and chk.analytic.peak_bytes_per_gpu > 0
    worst = res.memory.stages[res.memory.worst_stage]
    assert worst.activations_bytes > 0 or framework == "torchtitan"  # TorchTitan: peak in a late backward level
    assert chk.components["activations"]["measured"] == worst.activations_bytes
    assert chk.per_layer
    if not memory_model:
        return
    impl = "MCORE_LOCAL" if framework == "megatron" else "TITAN_CPU"
    other = "TE" if framework == "megatron" else "TITAN"
    if framework == "megatron" and not any(v["measured"] == pytest.approx(v[f"model_{other}"], rel=0.02)
                                           for v in chk.per_layer.values()):
        # the CPU modules keep more than the GPU kernels the analytic model describes: the measured
        # figures (not the model's) reached the result (TorchTitan's peak of these tiny models is the
        # embedding's backward, where no activation is left: tests/test_measure.py checks its hook)
        assert chk.components["activations"]["measured"] != chk.components["activations"]["analytic"]
    for kind, v in chk.per_layer.items():
        ratio = v["measured"] / v[f"model_{impl}"]
        if framework == "megatron" and m.multi_latent_attention:
            assert 1.0 <= ratio <= 1.35, (kind, v)  # measured +25 %: see the module docstring
        elif framework == "megatron" and m.attention_dropout and plan.training.attention_backend not in ("unfused",
                                                                                                    "local"):
            assert 1.0 <= ratio <= 2.0, (kind, v)  # the CPU SDPA math kernel keeps s x s probs + mask: +68 % here
        elif framework == "megatron" and m.swiglu and m.activation not in ("silu", "gelu"):
            assert 1.0 <= ratio <= 1.35, (kind, v)  # megatron's unfused quick-GeGLU keeps more: +28 % here
        elif framework == "megatron" and plan.training.attention_backend in ("unfused", "local"):
            assert 1.0 <= ratio <= 1.1, (kind, v)  # megatron's local core: +5.5 % here (+6 % with sinks)
        elif framework == "megatron":
            assert ratio == pytest.approx(1.0, abs=MEGATRON_MEM_BOUND), (kind, v)
        elif kind == "moe_layer" or m.multi_latent_attention:
            assert 1.0 <= ratio <= 2.0, (kind, v)
        else:  # CP included: TITAN_CPU keeps the ring output's contiguous copy (memory_titan.py), -0.2 % here
            assert ratio == pytest.approx(1.0, abs=TITAN_MEM_BOUND), (kind, v)
        ac = [k for k in v if k.startswith("measured_ac_")]
        if framework == "torchtitan" and ac and ac[0] != "measured_ac_none" and not (
                kind == "moe_layer" or m.multi_latent_attention or plan.parallel.cp > 1):
            a = ac[0][len("measured_ac_"):]  # the block under torchtitan's own FullAC / SelectiveAC
            assert v[ac[0]] == pytest.approx(v[f"model_{impl}_ac_{a}"], rel=TITAN_MEM_BOUND), (kind, v)


def _result(matrix, key):
    got = matrix[key]
    assert not isinstance(got, str), got
    res, threads_restored = got
    assert threads_restored  # the caller's torch thread count is back after the measurement
    return res


@pytest.mark.parametrize("case", list(MEGATRON))
def test_megatron_matrix(case, matrix):
    plan = _mcore(**MEGATRON[case])
    res = _result(matrix, f"megatron/{case}")
    _check(res, plan, "megatron")
    pieces = res.measurement.pieces
    subs = {s.what for pc in pieces.values() for s in pc.substitutions}
    lt = res.measurement.layer_times
    t = plan.training
    if t.precision == "fp8":
        recipe = t.fp8_recipe or "delayed"
        for n, pc in pieces.items():
            assert pc.measured_dtype == "bf16"
            assert any(f"instead of fp8 ({recipe} recipe)" in s.what and s.why for s in pc.substitutions), n
            assert any("fp8" in a and "fwd x" in a for a in pc.adjustments), n  # the dry-run's ratio, stated
        assert any("instead of fp8" in n for n in res.notes)
        # the layer time used is the measured one times the roofline's fp8/bf16 ratio (not the raw)
        assert lt["dense_layer"]["fwd_s"] != pytest.approx(pieces["dense_layer#0"].fwd_s, rel=1e-6)
    else:
        assert not any("fp8" in s for s in subs)
    if plan.parallel.sequence_parallel:
        assert any("sequence parallel" in s for s in subs)
    if plan.model.mtp_num_layers:  # megatron's MultiTokenPredictionLayer, priced per chunk_layout mtp slot
        mtp = pieces["mtp"]
        assert lt["mtp_extra"]["fwd_s"] == pytest.approx(mtp.fwd_s) and mtp.param_count > 0
    if plan.parallel.pipeline_layout:  # the layout places embedding / layers / loss: stage 1 holds more
        st = res.memory.stages
        assert len(st) == 2 and st[1].num_parameters > st[0].num_parameters
    if case == "moe-allgather":
        assert "megatron's allgather token dispatcher at world size 1" in subs
    if case == "moe-deepep-ep2":
        assert any("(plan: deepep)" in s for s in subs)
        assert any("token dispatcher" in a for a in pieces["moe_layer#1"].adjustments)
    if plan.model.is_moe:  # grouped GEMMs (plan default) measured as one GEMM per expert, corrected
        assert any("grouped" in a for n, pc in pieces.items() if n.startswith("moe_layer") for a in pc.adjustments)
    if plan.model.window_size:
        assert {"dense_window_layer#1", "attn_core_window"} <= set(pieces)
        assert lt["dense_window_layer"] is not None
        assert any(a.startswith("window layers:") for a in pieces["dense_window_layer#1"].adjustments)
    if case == "unfused-sinks":  # megatron's own local core (materialised scores, sinks): no SDPA stand-in
        assert not any("scaled_dot_product_attention" in s for s in subs)
    if plan.model.softmax_type != "vanilla" and t.attention_backend not in ("unfused", "local"):
        assert any("vanilla softmax" in s for s in subs)
    if t.cuda_graph_impl != "none":
        assert all(any("no CUDA graph capture" in s.what for s in pc.substitutions) for pc in pieces.values())


@pytest.mark.parametrize("case", list(TITAN))
def test_torchtitan_matrix(case, matrix):
    kw = dict(TITAN[case])
    name = kw.pop("name", "llama3")
    plan = _titan(name, "debugmodel", **kw)
    res = _result(matrix, f"torchtitan/{case}")
    _check(res, plan, "torchtitan")
    notes = res.notes + res.memory.notes
    assert not any("megatron" in n.lower() for n in notes), [n for n in notes if "megatron" in n.lower()]
    if plan.training.precision == "fp8":
        recipe = plan.training.fp8_recipe or "tensorwise"
        assert all(pc.measured_dtype == "bf16" and any(f"instead of fp8 ({recipe} recipe)" in s.what
                                                       for s in pc.substitutions) and pc.adjustments
                   for pc in res.measurement.pieces.values())
    layers = [pc for n, pc in res.measurement.pieces.items() if "_layer#" in n]
    subs = {s.what for pc in res.measurement.pieces.values() for s in pc.substitutions}
    if plan.training.compile:  # blocks compiled as torchtitan does (here aot_eager): split by FLOPs, memory eager
        assert all(pc.split == "flop-ratio" for pc in layers)
        assert "memory measured on the eager module (time: compiled)" in subs
        assert any(s.startswith("compiled with the aot_eager backend") for s in subs)
    else:
        assert all(pc.split == "autograd" for pc in layers)


@pytest.mark.parametrize("case", list(_recipes()))
def test_bundled_recipe_at_tiny_size(case, matrix):
    """Every bundled recipe's plan (at tiny per-rank shapes) builds, runs and upscales on the CPU
    with the pieces its layer kinds imply, for its framework."""
    plan = _recipe_plan(_recipes()[case])
    res = _result(matrix, f"recipe/{case}")
    _check(res, plan, plan.framework, memory_model=False)
    m, p = plan.model, plan.parallel
    assert res.plan.parallel.tp == p.tp and res.plan.parallel.pp == p.pp and res.plan.parallel.ep == p.ep
    subs = {s.what for pc in res.measurement.pieces.values() for s in pc.substitutions}
    if plan.training.precision in ("fp8", "fp4") and not any(pc.measured_dtype == "fp8"
                                                             for pc in res.measurement.pieces.values()):
        assert any("timed in bf16 instead of" in s for s in subs)
    if m.mtp_num_layers and plan.framework == "megatron":
        assert "mtp" in res.measurement.pieces
