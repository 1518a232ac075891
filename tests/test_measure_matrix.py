"""The measured path over the recipe matrix (issue 14): every case runs ``project_measured`` on the
CPU (real megatron-core / torchtitan pieces at tiny shapes, world size 1) and checks properties
against independent truth:

- the pieces of the model's kinds are all there, measured or read from the cache;
- every time is positive; a piece with weights has a positive weight-gradient time, a piece with
  an input a positive input-gradient time; ``bwd_input + bwd_weight == bwd`` and, where the split
  is measured (torchtitan: torch's ``stage_backward_input`` / ``stage_backward_weight``), the raw
  B + W within [0.8, 2.0] x the plain backward timed in the same loop (the split's bookkeeping is
  a large share of a tiny piece);
- the spread (relative IQR of fwd+bwd) within :data:`SPREAD_BOUND` (one re-measurement into a
  fresh cache allowed, for a burst of load on a shared runner), and the ``converged`` flag
  consistent with the policy's target;
- memory: the result's memory is the measured one, and each layer kind's measured kept bytes
  within a stated bound of the tensor-list model of the same implementation
  (``memory_activations.MCORE_LOCAL``: megatron-core's local modules on the CPU): megatron dense
  and MoE within 5 % (equal in most cases; CP keeps the gathered K/V of its all-gather attention:
  +3.5 % here), megatron MLA within [1, 1.35] x (measured +25 %: the
  model undercounts the local MLA path), torchtitan dense within 10 % (CP 2: within [1, 1.2] x, the
  emulated CP core keeps ~12 % more here), torchtitan's MoE and MLA
  (the model follows megatron's modules) within [1, 2] x;
- FP8: timed in BF16 and the result says so per piece, with the fp8/bf16 correction applied.

Budget: one module-scoped cache shares the pieces of cases that differ only in what the cost model
adds (PP, VPP, schedules, recompute, DP sharding); one layer of each kind; the test policy stops
at 8 samples.  Runtime on the shared 2-core machine: see the final report of issue 14.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

# relative IQR of a piece's fwd+bwd samples: the policy targets 5 % (reached on an idle machine);
# on a shared runner the bound is the larger of SPREAD_BOUND and 3x the spread this machine shows
# for fixed GEMM work timed the same way at the same moment (``machine_noise``)
SPREAD_BOUND = 0.2
MEGATRON_MEM_BOUND = 0.05


def _policy():
    from primus_launch.projection.measure.timing import TimingPolicy

    return TimingPolicy(min_repeats=5, max_repeats=8, min_sample_s=0.01)


def _mcore(tied: bool = False, model: dict | None = None, parallel: dict | None = None,
           training: dict | None = None, gpus: int = 1):
    from primus_launch.plan import Plan

    m = dict(num_layers=4, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_query_groups=2,
             vocab_size=256, seq_length=32, untie_embeddings_and_output_weights=not tied)
    m.update(model or {})
    return Plan.model_validate({"model": m, "parallel": parallel or {},
                                "training": {"global_batch_size": 4 * gpus, "micro_batch_size": 2, **(training or {})},
                                "cluster": {"gpus_per_node": gpus, "gpu": "h100-sxm"}})


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
}


def _titan(name: str, flavor: str, parallel: dict | None = None, training: dict | None = None, gpus: int = 2):
    from primus_launch.adapters.torchtitan_arch import arch_from_flavor
    from primus_launch.plan import Plan

    arch = arch_from_flavor(name, flavor, seq_len=32)
    par = {"dp_sharding": "full", **(parallel or {})}
    return Plan.model_validate({"model": arch.model_dump(), "parallel": par,
                                "training": {"global_batch_size": 2 * gpus, "micro_batch_size": 2,
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
    "moe-mla": dict(name="deepseek_v3", parallel=dict(ep=2)),
    "float8": dict(training=dict(precision="fp8")),
    "ac-none": dict(training=dict(recompute=dict(granularity="none"))),
    "ac-selective": dict(training=dict(recompute=dict(granularity="selective"))),
    "ac-full": dict(training=dict(recompute=dict(granularity="full", method="uniform", num_layers=1))),
}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """Every case measured in ONE fresh interpreter (:func:`run_all`): the measuring process then
    holds only its own threads -- a long pytest process accumulates dozens of native threads from
    earlier tests, which made identical work vary by 40 %.  Returns case -> ProjectionResult."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from primus_launch.projection.result import ProjectionResult

    cache = tmp_path_factory.mktemp("measure-matrix-cache")
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")]))
    code = "import sys, test_measure_matrix as m; m.run_all(sys.argv[1])"
    pr = subprocess.run([sys.executable, "-c", code, str(cache)], capture_output=True, text=True, env=env, timeout=900)
    assert pr.returncode == 0, pr.stderr[-3000:]
    raw = json.loads((cache / "results.json").read_text())
    return {k: (v["error"] if "error" in v else (ProjectionResult.model_validate(v["result"]), v["threads_restored"]))
            for k, v in raw.items()}


def _plans() -> dict:
    out = {f"megatron/{c}": _mcore(**kw) for c, kw in MEGATRON.items()}
    for c, kw in TITAN.items():
        kw = dict(kw)
        out[f"torchtitan/{c}"] = _titan(kw.pop("name", "llama3"), "debugmodel", **kw)
    return out


def run_all(cache_dir: str) -> None:
    """Measure every case (shared cache) and write ``results.json`` into ``cache_dir``: case ->
    the result's JSON, or the error's text."""
    import json
    import traceback
    from pathlib import Path

    import torch

    out: dict = {}
    for case, plan in _plans().items():
        threads = torch.get_num_threads()
        try:
            res = _measure(plan, Path(cache_dir), Path(cache_dir) / case.replace("/", "-"))
            out[case] = {"result": res.to_json_dict(), "threads_restored": torch.get_num_threads() == threads}
        except Exception:  # reported by the case's test
            out[case] = {"error": traceback.format_exc()}
    (Path(cache_dir) / "results.json").write_text(json.dumps(out))


def _machine_noise() -> float:
    """Relative IQR of 15 samples of identical bf16 GEMM work (~5 ms each, one torch thread,
    thread CPU time): the spread the machine itself adds right now."""
    import time

    import torch

    from primus_launch.projection.measure.timing import rel_iqr, torch_threads

    with torch_threads(1):
        a = torch.randn(128, 128, dtype=torch.bfloat16)
        xs = []
        for _ in range(15):
            t0 = time.thread_time()
            for _ in range(40):
                a @ a
            xs.append(time.thread_time() - t0)
    return rel_iqr(xs)


def _spread_bound() -> float:
    return max(SPREAD_BOUND, 3 * _machine_noise())


def _spread_violations(res) -> list[tuple[str, float]]:
    """Pieces whose spread exceeds the bound (see :data:`SPREAD_BOUND`)."""
    bad = [(n, pc.spread["total"]) for n, pc in res.measurement.pieces.items() if pc.spread["total"] > SPREAD_BOUND]
    if bad:
        bound = _spread_bound()
        bad = [(n, sp) for n, sp in bad if sp > bound]
    return bad


def _measure(plan, cache, tmp_path):
    """project_measured; once more into a fresh cache when a spread is out of bound (a burst of
    load on the shared runner), then the bound must hold."""
    from primus_launch.projection.measure.upscale import project_measured

    res = project_measured(plan, device="cpu", cache_dir=cache, measure_layers=1, policy=_policy())
    bad = _spread_violations(res)
    if bad:
        res = project_measured(plan, device="cpu", cache_dir=tmp_path / "retry", measure_layers=1, policy=_policy())
        bad = _spread_violations(res)
    if bad:
        raise AssertionError(f"spread above the bound after one re-measurement: {bad}")
    return res


def _check(res, plan, framework: str) -> None:
    ms = res.measurement
    assert res.mode == "measured" and ms is not None and ms.framework == framework
    assert ms.threads == 1 and ms.clock == "thread"  # pinned: one torch thread, its CPU time
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
        if n != "attn_core":
            assert pc.bwd_weight_s > 0 and pc.param_count > 0, n  # never a clamped 0
        if pc.split == "autograd":
            raw = pc.bwd_input_raw_s + pc.bwd_weight_raw_s
            assert 0.8 <= raw / pc.bwd_s <= 2.0, (n, raw, pc.bwd_s)
        assert pc.converged == (pc.spread["total"] <= target), n
        assert pc.activation_bytes > 0 or n == "embedding", n
        assert pc.peak_bytes >= pc.activation_bytes, n
    # memory: the result's is the measured one; per layer against the model of the same implementation
    assert res.memory.notes[0].startswith("activations measured per piece")
    chk = res.memory_check
    assert chk is not None and chk.analytic.peak_bytes_per_gpu > 0
    assert res.memory.stages[res.memory.worst_stage].activations_bytes > 0
    for kind, v in chk.per_layer.items():
        ratio = v["measured"] / v["model_MCORE_LOCAL"]
        if framework == "megatron" and m.multi_latent_attention:
            assert 1.0 <= ratio <= 1.35, (kind, v)  # measured +25 %: see the module docstring
        elif framework == "megatron":
            assert ratio == pytest.approx(1.0, abs=MEGATRON_MEM_BOUND), (kind, v)
        elif kind == "moe_layer" or m.multi_latent_attention:
            assert 1.0 <= ratio <= 2.0, (kind, v)
        elif plan.parallel.cp > 1:  # the emulated CP core's concatenated K/V and mask: +12 % here
            assert 1.0 <= ratio <= 1.2, (kind, v)
        else:
            assert ratio == pytest.approx(1.0, abs=0.10), (kind, v)


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
    subs = {s.what for pc in res.measurement.pieces.values() for s in pc.substitutions}
    if case == "fp8":
        for n, pc in res.measurement.pieces.items():
            assert pc.measured_dtype == "bf16"
            assert any("instead of fp8" in s.what and s.why for s in pc.substitutions), n
            assert pc.adjustments, n
        assert any("instead of fp8" in n for n in res.notes)
    else:
        assert not any("fp8" in s for s in subs)
    if plan.parallel.sequence_parallel:
        assert any("sequence parallel" in s for s in subs)


@pytest.mark.parametrize("case", list(TITAN))
def test_torchtitan_matrix(case, matrix):
    kw = dict(TITAN[case])
    name = kw.pop("name", "llama3")
    plan = _titan(name, "debugmodel", **kw)
    res = _result(matrix, f"torchtitan/{case}")
    _check(res, plan, "torchtitan")
    notes = res.notes + res.memory.notes
    assert not any("megatron" in n.lower() for n in notes), [n for n in notes if "megatron" in n.lower()]
    if case == "float8":
        assert all(pc.measured_dtype == "bf16" and any("instead of fp8" in s.what for s in pc.substitutions)
                   for pc in res.measurement.pieces.values())
    layers = [pc for n, pc in res.measurement.pieces.items() if "_layer#" in n]
    assert all(pc.split == "autograd" for pc in layers)
