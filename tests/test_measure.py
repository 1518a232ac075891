"""Tests of the framework CPU shims and the measure-and-upscale projection (issue 5).

The measured path's product is the GPU; on the CPU these tests check that it builds, runs, caches
and upscales, and hold its pieces to independent truth (parameter counts of megatron's layout,
full causal attention, closed-form identities).  No assertion depends on the machine's speed."""

from __future__ import annotations


import pytest
import torch


@pytest.fixture
def mcore_world1():
    """A world-size-1 gloo group with megatron-core model parallel state (tp=pp=1), built afresh for each
    test: a file that ran before on the same pytest-xdist worker may have left a fake multi-rank world
    (``mcore_meta``, ``titan_trace``) or megatron groups of a process group destroyed since, which
    ``init_single_process`` would keep (it returns when a group exists)."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install()
    if ps.model_parallel_is_initialized():
        ps.destroy_model_parallel()
    if dist.is_initialized():
        dist.destroy_process_group()
    mcore_cpu.init_single_process()  # in-process store: no port to race for
    ps.initialize_model_parallel(1, 1)
    mcore_cpu.seed_rng_tracker(1234)
    return mcore_cpu


def test_cpu_rng_tracker_fork_is_reproducible(mcore_world1):
    from megatron.core.tensor_parallel import get_cuda_rng_tracker

    tr = get_cuda_rng_tracker()
    before = torch.get_rng_state()
    with tr.fork():
        a = torch.rand(4)
    assert torch.equal(torch.get_rng_state(), before)  # outer state restored
    mcore_world1.seed_rng_tracker(1234)
    with get_cuda_rng_tracker().fork():
        b = torch.rand(4)
    assert torch.equal(a, b)  # same seed -> same stream


def test_mcore_gpt_moe_trains_on_cpu(mcore_world1):
    """A real megatron-core GPTModel with a MoE layer runs fwd+bwd on CPU: initial loss near
    ln(vocab), gradient reaches the router (te_general_gemm shim), and the shimmed causal mask
    is causal (earlier logits independent of a later token)."""
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    cfg = TransformerConfig(num_layers=1, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4,
                            hidden_dropout=0.0, attention_dropout=0.0, num_moe_experts=4, moe_router_topk=2,
                            normalization="RMSNorm", gated_linear_unit=True, add_bias_linear=False,
                            **mcore_world1.config_overrides())
    m = GPTModel(cfg, get_gpt_layer_local_spec(num_experts=4), vocab_size=128, max_sequence_length=32)
    ids = torch.randint(0, 128, (2, 32))
    pos = torch.arange(32).unsqueeze(0).expand(2, -1)
    loss = m(ids, pos, None, labels=ids).float().mean()
    loss.backward()
    assert torch.isfinite(loss) and abs(loss.item() - torch.log(torch.tensor(128.0)).item()) < 1.0
    router = m.decoder.layers[0].mlp.router.weight
    assert router.grad is not None and router.grad.abs().sum() > 0
    # causality: changing the last token must not change the logits of earlier positions
    with torch.no_grad():
        a = m(ids, pos, None)
        ids2 = ids.clone()
        ids2[:, -1] = (ids2[:, -1] + 1) % 128
        b = m(ids2, pos, None)
    assert torch.allclose(a[:, :-1], b[:, :-1], atol=1e-5)
    assert not torch.allclose(a[:, -1], b[:, -1])


# ---------------------------------------------------------------- measure-and-upscale projection

def _tiny_plan(**over):
    from primus_launch.plan import Plan

    model = dict(num_layers=8, hidden_size=256, ffn_hidden_size=768, num_attention_heads=8,
                 num_query_groups=4, vocab_size=1024, seq_length=256)
    model.update(over.pop("model", {}))
    data = {"model": model, "parallel": over.pop("parallel", {}),
            "training": {**dict(global_batch_size=4, micro_batch_size=2, precision="bf16"), **over.pop("training", {})},
            "cluster": {"gpus_per_node": 1, **over.pop("cluster", {})}}
    return Plan.model_validate(data)


def test_per_rank_shard_has_the_parameters_of_one_tp_rank(mcore_world1):
    """The world-size-1 'TP-shard equivalent' layer holds exactly the parameters one rank of a real
    TP=2 / EP=2 model holds (independent truth: projection.memory.params' count of megatron's layout)."""
    from primus_launch.projection.measure.build_mcore import build_gpt
    from primus_launch.projection.memory.params import layer_parameter_counts

    plan = _tiny_plan(model=dict(num_layers=2, num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=384,
                                 moe_dense_first_layers=1),
                      parallel=dict(tp=2, ep=2), cluster=dict(gpus_per_node=4))
    m = build_gpt(plan, num_dense=1, num_moe=1, per_rank=True)
    dense_layer, moe_layer = m.decoder.layers
    want_dense = layer_parameter_counts(plan.model, 2, 2, 2, False, spec="local")
    assert sum(p.numel() for p in dense_layer.parameters()) == want_dense.total
    want_moe = layer_parameter_counts(plan.model, 2, 2, 2, True, spec="local")
    experts = sum(p.numel() for n, p in moe_layer.named_parameters() if ".experts." in f".{n}")
    assert experts == want_moe.expert
    # vocabulary: padded to the TP multiple, one rank's share
    assert m.embedding.word_embeddings.weight.shape[0] == plan.model.padded_vocab_size(2) // 2


def test_piece_shapes_key_changes_with_sharding():
    from primus_launch.projection.measure.piece import piece_shapes

    a = piece_shapes(_tiny_plan())
    b = piece_shapes(_tiny_plan(parallel=dict(tp=2), cluster=dict(gpus_per_node=2)))
    assert a["dense_layer#0"]["ffn"] == 768 and b["dense_layer#0"]["ffn"] == 384
    assert b["dense_layer#0"]["heads"] == 4 and b["dense_layer#0"]["kv_heads"] == 2
    assert a["embedding"] != b["embedding"] or a["embedding"]["vocab_per_rank"] == 1024


def test_bwd_input_fraction_identities():
    from primus_launch.projection.measure.piece import bwd_input_fraction

    assert bwd_input_fraction(1000.0, 10, 0.0) == pytest.approx(0.5)  # pure GEMMs: dgrad == wgrad
    assert bwd_input_fraction(0.0, 10, 5.0) == pytest.approx(1.0)  # attention core only
    assert 0.5 < bwd_input_fraction(1000.0, 10, 5000.0) < 1.0


def test_cache_hit_and_typed_result(mcore_world1, tmp_path, monkeypatch):
    from primus_launch.projection.measure import build_mcore
    from primus_launch.projection.measure.upscale import project_measured
    from primus_launch.projection.result import ProjectionResult

    plan = _tiny_plan(model=dict(num_layers=4, hidden_size=128, ffn_hidden_size=256, seq_length=64),
                      cluster=dict(gpu="h100-sxm"))
    r1 = project_measured(plan, device="cpu", cache_dir=tmp_path, repeats=2)
    assert isinstance(r1, ProjectionResult) and r1.mode == "measured"
    assert r1.measurement.cache_hits == 0
    assert any("CPU timings only check the path" in n for n in r1.notes)
    assert len(list(tmp_path.glob("megatron-*.json"))) == len(r1.measurement.pieces)

    def no_build(*a, **k):
        raise AssertionError("model rebuilt despite a warm cache")

    monkeypatch.setattr(build_mcore, "pieces", no_build)
    r2 = project_measured(plan, device="cpu", cache_dir=tmp_path, repeats=2)
    assert r2.measurement.cache_hits == len(r2.measurement.pieces)
    assert {pc.source for pc in r2.measurement.pieces.values()} == {"cached"}
    assert r2.iteration_time_s == r1.iteration_time_s
    # a different sharding is a different measurement (miss -> needs a build)
    with pytest.raises(AssertionError, match="rebuilt"):
        project_measured(plan.with_changes(training={"micro_batch_size": 1}), device="cpu",
                         cache_dir=tmp_path, repeats=2)


def test_torchtitan_pieces_are_the_tp_shard_and_split_is_measured(tmp_path):
    """torchtitan llama3 debugmodel at tp=2: the per-rank layer has exactly one TP rank's
    parameters (independent count from projection.memory.params), and the projection runs with the
    input-/weight-grad split measured by autograd."""
    from primus_launch.adapters.torchtitan_arch import arch_from_flavor
    from primus_launch.plan import Plan
    from primus_launch.projection.measure import build_titan
    from primus_launch.projection.measure.upscale import project_measured
    from primus_launch.projection.memory.params import layer_parameter_counts

    arch = arch_from_flavor("llama3", "debugmodel", seq_len=64)
    plan = Plan.model_validate({"model": arch.model_dump(), "parallel": {"tp": 2},
                                "training": {"global_batch_size": 8, "micro_batch_size": 1},
                                "cluster": {"gpus_per_node": 8}, "source": {"framework": "torchtitan"}})
    model, nd, nm = build_titan.build(plan, "cpu", measure_layers=1)
    assert (nd, nm) == (1, 0)
    want = layer_parameter_counts(plan.model, 2, 2, 1, False, spec="local").total
    assert sum(p.numel() for p in model.layers["0"].parameters()) == want
    assert model.tok_embeddings.weight.shape[0] == arch.vocab_size // 2
    r = project_measured(plan, device="cpu", cache_dir=tmp_path, repeats=2, measure_layers=1)
    assert r.mode == "measured" and r.measurement.framework == "torchtitan"
    pc = r.measurement.pieces["dense_layer#0"]
    assert pc.split == "autograd"  # torch's stage_backward_input / stage_backward_weight
    assert 0 < pc.bwd_input_s < pc.bwd_s and pc.bwd_weight_s > 0 and pc.bwd_weight_raw_s > 0
    assert pc.bwd_input_s + pc.bwd_weight_s == pytest.approx(pc.bwd_s)
    assert not any("megatron" in n.lower() for n in r.notes + r.memory.notes)


def _llama70b_tp8():
    from primus_launch.plan import Plan

    return Plan.model_validate({"model": dict(num_layers=80, hidden_size=8192, ffn_hidden_size=28672,
                                              num_attention_heads=64, num_query_groups=8, vocab_size=128256,
                                              seq_length=8192),
                                "parallel": {"tp": 8}, "training": {"global_batch_size": 64},
                                "cluster": {"gpus_per_node": 8, "num_nodes": 8}})


def test_cpu_measurement_of_a_huge_layer_is_refused_in_one_line(tmp_path, monkeypatch):
    """Llama-3-70B-shaped pieces on the CPU: a one-line UserError before any build (the CPU's GEMM
    rate fixed at 1 TFLOP/s, above any CPU's bf16 rate, so the refusal does not hang on this one's)."""
    from primus_launch.errors import UserError
    from primus_launch.projection.measure import upscale
    from primus_launch.projection.measure.upscale import project_measured

    monkeypatch.setattr(upscale, "cpu_gemm_rate", lambda *a, **k: 1e12)
    plan = _llama70b_tp8()
    with pytest.raises(UserError, match="--dry-run") as ei:
        project_measured(plan, device="cpu", cache_dir=tmp_path, max_cpu_seconds=60)
    assert "\n" not in str(ei.value)


def test_cpu_factory_proxy_only_redirects_while_installed(mcore_world1):
    import megatron.core.pipeline_parallel.schedules as schedules

    assert isinstance(schedules.torch, mcore_world1._CpuFactoryTorch)
    assert schedules.torch.zeros([], device="cuda").device.type == "cpu"
    mcore_world1.uninstall()
    try:
        if not torch.cuda.is_available():
            with pytest.raises((RuntimeError, AssertionError)):
                schedules.torch.zeros([], device="cuda")
    finally:
        mcore_world1.install()
    assert schedules.torch.zeros([], device="cuda").device.type == "cpu"


# ---------------------------------------------------------------- issue 14: tied head, cache, signals

def test_tied_head_multiplies_by_the_word_embedding(mcore_world1):
    """Megatron's default (tied embeddings): the head piece builds and its backward reaches the
    word-embedding weight (GPTModel passes shared_embedding_or_output_weight() to the output layer);
    the tied and untied builds have different cache keys, recompute does not change the key."""
    from primus_launch.projection.measure.build_mcore import build_spec, pieces

    tied = _tiny_plan(model=dict(num_layers=2, untie_embeddings_and_output_weights=False))
    untied = _tiny_plan(model=dict(num_layers=2))
    pcs, model = pieces(tied, "cpu", measure_layers=1)
    head = next(p for p in pcs if p.name == "head_loss")
    emb = model.embedding.word_embeddings.weight
    assert any(p is emb for p in head.params) and model.output_layer.weight is None
    out = head.forward(*head.inputs)
    out.backward()
    assert emb.grad is not None and emb.grad.abs().sum() > 0
    st, su = build_spec(tied, "cpu"), build_spec(untied, "cpu")
    assert st.material() != su.material()
    for n in ("embedding", "head_loss"):  # the pieces that read the tie have their own keys ...
        assert st.material(n) != su.material(n)
    for n in ("dense_layer#0", "attn_core"):  # ... the layers measured for one serve the other
        assert st.material(n) == su.material(n)
    rc = tied.with_changes(training={"recompute": {"granularity": "full", "method": "uniform", "num_layers": 1}})
    assert build_spec(rc, "cpu").material() == build_spec(tied, "cpu").material()
    fp32 = tied.with_changes(training={"precision": "fp32"})
    assert build_spec(fp32, "cpu").material() != build_spec(tied, "cpu").material()


def test_plan_fields_reach_the_megatron_build_and_its_key():
    """The plan's dropout, activation, softmax type, sliding window, MoE pattern and dispatcher, MTP
    reach megatron-core's TransformerConfig of the measured build (hence the cache key); corrections
    applied after measuring (FP8 recipes timed in BF16, CUDA graphs) leave the key as it is."""
    from megatron.core.fusions.fused_bias_geglu import quick_gelu

    from primus_launch.projection.measure.build_mcore import build_spec

    base = _tiny_plan(model=dict(num_layers=4))
    plan = _tiny_plan(model=dict(num_layers=4, hidden_dropout=0.1, attention_dropout=0.1, activation="quick_gelu",
                                 softmax_type="learnable", window_size=64, window_layer_pattern=(1, 1, 0, 0),
                                 num_experts=4, moe_router_topk=2, moe_layer_pattern=(0, 1, 0, 1), mtp_num_layers=1),
                      training=dict(moe_token_dispatcher="allgather"))
    sp = build_spec(plan, "cpu")
    c = sp.config
    assert (c.hidden_dropout, c.attention_dropout, c.softmax_type) == (0.1, 0.1, "learnable")
    assert c.activation_func is quick_gelu and c.gated_linear_unit and not c.bias_activation_fusion
    assert c.window_size == (64, 0) and c.moe_token_dispatcher_type == "allgather" and c.mtp_num_layers == 1
    # reduced model: dense full, dense window, MoE full, MoE window (one each at measure_layers=1)
    assert c.window_attn_skip_freq == [0, 1, 0, 1] and c.moe_layer_freq == [0, 0, 1, 1]
    assert {"dense_layer#0", "dense_window_layer#1", "moe_layer#2", "moe_window_layer#3", "attn_core_window",
            "mtp"} <= set(sp.piece_names)
    b = build_spec(base, "cpu")
    for field, value in (("hidden_dropout", 0.1), ("activation", "relu"), ("softmax_type", "off-by-one")):
        assert build_spec(base.with_changes(model={field: value}), "cpu").material("dense_layer#0") \
            != b.material("dense_layer#0"), field
    for training in ({"precision": "fp8", "fp8_recipe": "blockwise"}, {"cuda_graph_impl": "local"}):
        other = build_spec(base.with_changes(training=training), "cpu")
        assert other.material("dense_layer#0") == b.material("dense_layer#0"), training
        assert any(not s.keyed for s in other.substitutions)


def test_unusable_cache_degrades_to_uncached_with_one_warning(tmp_path):
    from primus_launch.projection.measure.cache import MeasureCache

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    c = MeasureCache(blocker / "cache")  # cannot be created: its parent is a file
    key = {"framework": "megatron", "piece": "embedding", "x": 1}
    assert c.get(key) is None
    with c.locked([key]) as held:
        assert held is False
    assert c.put(key, {"v": 1}) is None and c.put(key, {"v": 2}) is None
    assert c.warning is not None and "PRIMUS_LAUNCH_CACHE" in c.warning and not c.enabled


def test_cache_lock_is_one_writer_per_key(tmp_path):
    """A second process cannot take a key's writer lock while the first holds it."""
    import subprocess
    import sys

    from primus_launch.projection.measure.cache import MeasureCache

    key = {"framework": "megatron", "piece": "embedding", "x": 1}
    c = MeasureCache(tmp_path)
    code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
            "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('got')\n"
            "except BlockingIOError:\n    print('busy')\n")
    lock = str(c.path(key)) + ".lock"
    with c.locked([key]) as held:
        assert held
        busy = subprocess.run([sys.executable, "-c", code, lock], capture_output=True, text=True).stdout.strip()
    free = subprocess.run([sys.executable, "-c", code, lock], capture_output=True, text=True).stdout.strip()
    assert (busy, free) == ("busy", "got")


def test_pieces_are_sampled_round_robin_over_the_window():
    """``time_pieces`` interleaves the pieces' samples (one of each in turn, so that a change of the
    device's speed hits every piece alike) and goes on until ``min_window_s`` of wall time has
    passed: the forward calls after the warm-ups alternate a, b, a, b, ..., the rounds last at least
    the window, and each piece holds as many samples as the rounds made (the counts depend on the
    machine's speed, their order and the window do not)."""
    import time

    from primus_launch.projection.measure.timing import PieceSampler, TimingPolicy, time_pieces, torch_threads

    order: list[str] = []
    w = torch.randn(64, 64, requires_grad=True)

    def piece(tag: str):
        def fwd(x):
            order.append(tag)
            return (x @ w).tanh().sum()
        return fwd, torch.randn(64, 64, requires_grad=True)

    # every spread meets the target, no cap: the samples go on exactly until the window has passed
    pol = TimingPolicy(warmup=1, min_repeats=3, max_repeats=10**6, min_sample_s=0.0, max_inner=1,
                       target_spread=1e9, min_window_s=0.2, max_piece_s=10**6)
    cpu = torch.device("cpu")
    with torch_threads(1):
        (fa, xa), (fb, xb) = piece("a"), piece("b")
        sa = PieceSampler(fa, [xa], [w], cpu, split="flop-ratio", flop_split=0.5, policy=pol)
        sb = PieceSampler(fb, [xb], [w], cpu, split="flop-ratio", flop_split=0.5, policy=pol)
        order.clear()
        t0 = time.perf_counter()
        time_pieces([sa, sb], pol)
        took = time.perf_counter() - t0
    assert took >= 0.2
    assert sa.n >= 3 and sa.n == sb.n, (sa.n, sb.n)  # the window ends a round, never inside one
    assert order == ["a", "b"] * sa.n
    res = sa.result(measure_mem=False)
    assert res.repeats == sa.n and res.total_s > 0 and res.bwd_input_s == pytest.approx(0.5 * res.bwd_s)


def test_refusal_estimate_is_passes_times_flops_over_the_gemm_rate():
    """The too-large-model estimate on the CPU is the closed form its docstring states -- passes x
    the pieces' FLOPs per pass / the GEMM rate + the round-robin window -- at a given rate (the
    machine's own rate is the only measured input, so nothing here depends on its speed); the
    refusal names --dry-run in one line exactly when the estimate exceeds the limit."""
    from primus_launch.errors import UserError
    from primus_launch.projection.measure.piece import measurement_flops_estimate
    from primus_launch.projection.measure.timing import TimingPolicy
    from primus_launch.projection.measure.upscale import check_cpu_budget, cpu_measurement_seconds, measurement_passes

    plan, pol = _llama70b_tp8(), TimingPolicy()
    assert plan.framework == "megatron" and measurement_passes(plan, pol) == pol.warmup + pol.min_repeats + 2
    titan = plan.model_validate({**plan.model_dump(), "source": {"framework": "torchtitan"}})
    assert measurement_passes(titan, pol) == 2 * (pol.warmup + pol.min_repeats) + 2  # the autograd split's pass
    flops = measurement_flops_estimate(plan, 2)
    est = cpu_measurement_seconds(plan, 2, pol, gemm_rate=1e11)
    assert est == pytest.approx(flops * measurement_passes(plan, pol) / 1e11 + pol.min_window_s, rel=1e-12)
    assert cpu_measurement_seconds(plan, 2, pol, gemm_rate=2e11) - pol.min_window_s == pytest.approx(
        (est - pol.min_window_s) / 2, rel=1e-12)
    check_cpu_budget(plan, 2, pol, est * 1.01, gemm_rate=1e11)  # under the limit: no error
    with pytest.raises(UserError, match="--dry-run") as ei:
        check_cpu_budget(plan, 2, pol, est * 0.99, gemm_rate=1e11)
    assert "\n" not in str(ei.value)


def test_l2_flush_is_for_cuda_and_sized_from_its_l2():
    """The cache eviction before each timed pass is the GPU's L2 flush (triton's ``do_bench``: at
    least 256 MB, here twice the L2): a sampler on the CPU times warm and never allocates it, and
    ``flush_buffer`` refuses a CPU device; the policy's key says whether the flush is on."""
    from primus_launch.projection.measure.timing import (
        MIN_FLUSH_BYTES, PieceSampler, TimingPolicy, flush_buffer, flush_bytes, torch_threads)

    assert flush_bytes(50 << 20) == MIN_FLUSH_BYTES == 256 << 20  # H100: 50 MiB L2 -> triton's 256 MB
    assert flush_bytes(200 << 20) == 400 << 20  # a larger L2: twice it
    with pytest.raises(ValueError, match="CUDA"):
        flush_buffer(torch.device("cpu"))
    w = torch.randn(32, 32, requires_grad=True)
    x = torch.randn(32, 32, requires_grad=True)
    pol = TimingPolicy(warmup=1, min_repeats=3, max_repeats=3)
    with torch_threads(1):
        sp = PieceSampler(lambda x: (x @ w).sum(), [x], [w], torch.device("cpu"), split="flop-ratio",
                          flop_split=0.5, policy=pol)
    assert sp._flush is None
    assert pol.key()["flush_cache"] is True and TimingPolicy(flush_cache=False).key()["flush_cache"] is False


def test_reserved_bytes_upscale_as_the_allocated_ones():
    """The GPU's reserved bytes per piece are upscaled with the allocator's measured overhead:
    (sum of the pieces' reserved growth) / (sum of their allocated peaks) - 1, applied to a stage's
    dynamic bytes on top of its allocated peak; no overhead (None) where no piece has a reserved
    figure (the CPU); never negative."""
    from types import SimpleNamespace

    from primus_launch.projection.measure.timing import PieceTiming
    from primus_launch.projection.measure.measured_memory import allocator_overhead, measured_reserved

    def piece(peak: int, reserved: int) -> PieceTiming:
        return PieceTiming(fwd_s=1e-3, bwd_s=2e-3, bwd_input_s=1e-3, bwd_weight_s=1e-3, split="flop-ratio",
                           split_ratio=0.5, spread={"total": 0.0}, repeats=3, inner=1, converged=True,
                           activation_bytes=peak // 2, output_bytes=0, peak_bytes=peak, reserved_bytes=reserved,
                           param_count=1, param_bytes=2)

    gpu = {"a": piece(100 << 20, 120 << 20), "b": piece(300 << 20, 330 << 20)}
    assert allocator_overhead(gpu) == pytest.approx(450 / 400 - 1)
    assert allocator_overhead({"a": piece(100 << 20, 0)}) is None
    assert allocator_overhead({"a": piece(100 << 20, 90 << 20)}) == 0.0
    stage = SimpleNamespace(allocated_bytes=10 << 30, activations_bytes=4 << 30, transient_bytes=1 << 30,
                            workspace_bytes=0)
    assert measured_reserved(stage, 0.125) == (10 << 30) + int(0.125 * (5 << 30))
    # GEMM workspaces (inside the transient) are allocated once and kept, as the static parts: no overhead
    stage.workspace_bytes = 256 << 20
    assert measured_reserved(stage, 0.125) == (10 << 30) + int(0.125 * ((5 << 30) - (256 << 20)))


def test_measure_package_has_no_import_circle():
    """``projection/measure/`` imports form no circle between its files and no file imports another's
    private name (the builders share ``piece`` / ``spec`` instead of importing each other)."""
    import ast
    from pathlib import Path

    pkg = Path(__file__).resolve().parents[1] / "primus_launch" / "projection" / "measure"
    prefix = "primus_launch.projection.measure"
    graph: dict[str, set[str]] = {}
    for f in pkg.glob("*.py"):
        mod = f.stem
        deps = graph.setdefault(mod, set())
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [a.name for a in node.names]
                if node.module == prefix:
                    deps.update(names)
                elif node.module.startswith(prefix + "."):
                    deps.add(node.module[len(prefix) + 1:].split(".")[0])
                    assert not any(n.startswith("_") for n in names), (mod, node.module, names)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith(prefix + "."):
                        deps.add(a.name[len(prefix) + 1:].split(".")[0])
    assert {"piece", "spec", "build_mcore", "build_titan", "timing", "upscale"} <= set(graph)

    def reaches(a: str, b: str, seen: set) -> bool:
        return any(d == b or (d not in seen and not seen.add(d) and reaches(d, b, seen)) for d in graph.get(a, ()))

    circles = sorted(m for m in graph if reaches(m, m, set()))
    assert not circles, {m: sorted(graph[m]) for m in circles}


def test_titan_memory_model_takes_the_measured_blocks():
    """The hook of TorchTitan's memory model: measured blocks equal to the model's own give the model's
    stages exactly; a measured block that keeps twice as much raises the stage's activations and peak
    by what the extra bytes of the blocks in flight and the head add."""
    from primus_launch.adapters.torchtitan_arch import arch_from_flavor
    from primus_launch.plan import Plan
    from primus_launch.projection.memory.estimate import estimate_memory
    from primus_launch.projection.memory.activations import LayerActivations
    from primus_launch.projection.memory.titan import TITAN, TitanLayer, head_kept_bytes, layer_activation_bytes
    from primus_launch.projection.measure.measured_memory import MeasuredTitanActivations

    arch = arch_from_flavor("llama3", "debugmodel", seq_len=2048)
    plan = Plan.model_validate({"model": arch.model_dump(), "parallel": {"dp_sharding": "full"},
                                "training": {"global_batch_size": 4, "micro_batch_size": 2},
                                "cluster": {"gpus_per_node": 2}, "source": {"framework": "torchtitan"}})
    la = layer_activation_bytes(plan.model, seq=2048, mbs=2, tp=1, impl=TITAN)
    head = sum(head_kept_bytes(plan.model, seq=2048, mbs=2, tp=1, impl=TITAN))

    def acts(k: float) -> MeasuredTitanActivations:
        tl = TitanLayer(kept=k * la.full, full=k * la.full, layer_input=la.layer_input)
        dense = LayerActivations(full=tl.full, core_attention=0.0, layer_input=tl.layer_input, backward_temp=0.0)
        return MeasuredTitanActivations(dense=dense, moe=None, output=(k * head, 0.0), note="measured",
                                        blocks=((False, tl, tl),), head_kept=k * head)

    model = estimate_memory(plan)
    same = estimate_memory(plan, acts=acts(1.0))
    double = estimate_memory(plan, acts=acts(2.0))
    assert same.notes[0] == "measured" and [s.total_bytes for s in same.stages] == [s.total_bytes for s in model.stages]
    w, w2 = model.stages[model.worst_stage], double.stages[double.worst_stage]
    assert w2.activations_bytes == pytest.approx(2 * w.activations_bytes - 8.0 * 2048 * 2, rel=1e-6)  # ids kept once
    assert double.peak_bytes_per_gpu > model.peak_bytes_per_gpu


# a cheap timing policy for the subprocess tests ($PRIMUS_LAUNCH_MEASURE_POLICY, upscale.make_policy)
QUICK = "min_repeats=3,max_repeats=4,min_sample_s=0.005"

_TIED_SCRIPT = """torchrun --nproc-per-node 1 pretrain_gpt.py --num-layers 2 --hidden-size 64 --ffn-hidden-size 128 \\
  --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --vocab-size 1024 --micro-batch-size 2 \\
  --global-batch-size 4 --swiglu --normalization RMSNorm --disable-bias-linear --bf16
"""


def _cli(tmp_path, cache, *extra, script_text: str = _TIED_SCRIPT):
    import os
    import subprocess
    import sys

    script = tmp_path / "tied.sh"
    script.write_text(script_text)
    env = dict(os.environ, PRIMUS_LAUNCH_CACHE=str(cache), PYTHONWARNINGS="ignore", PRIMUS_LAUNCH_MEASURE_POLICY=QUICK)
    return subprocess.Popen([sys.executable, "-m", "primus_launch", "--project", str(script), "--measure-device",
                             "cpu", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.usefixtures("no_fake_world")
def test_cli_tied_recipe_with_unwritable_cache_warns_once(tmp_path, monkeypatch):
    """The issue's repro (2 layers, vocab 1024, tied): projected from measured pieces; a cache
    directory that cannot be created gives one warning naming PRIMUS_LAUNCH_CACHE, exit 0.  The CLI's
    ``main`` in this process (``tests/cli_run.py``): what is checked is its answer, not the process boundary
    (the signal tests below run ``python -m primus_launch``), and a fresh interpreter would pay torch's and
    megatron-core's imports again."""
    import json

    from cli_run import run_cli

    blocker = tmp_path / "file"
    blocker.write_text("x")
    (tmp_path / "tied.sh").write_text(_TIED_SCRIPT)
    for k, v in dict(PRIMUS_LAUNCH_CACHE=str(blocker / "cache"), PRIMUS_LAUNCH_MEASURE_POLICY=QUICK).items():
        monkeypatch.setenv(k, v)
    rc, out, err, _ = run_cli(["--project", "tied.sh", "--measure-device", "cpu", "--json"], tmp_path)
    assert rc == 0, err[-2000:]
    lines = [ln for ln in err.splitlines() if "PRIMUS_LAUNCH_CACHE" in ln]
    assert len(lines) == 1 and lines[0].startswith("primus-launch: warning:"), err[-2000:]
    res = json.loads(out)
    assert res["mode"] == "measured" and res["measurement"]["pieces"]["head_loss"]["source"] == "measured"
    assert res["memory_check"]["measured_peak_bytes_per_gpu"] == res["memory"]["peak_bytes_per_gpu"]


@pytest.mark.parametrize("sig,code,word", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
def test_cli_signal_during_measurement_ends_in_one_line(tmp_path, sig, code, word):
    """SIGINT / SIGTERM while pieces are being measured: one line on stderr, exit 130 / 143, no
    traceback, and every cache file left behind is a complete record."""
    import json
    import signal
    import time

    cache = tmp_path / "cache"
    # wide enough that measuring lasts seconds: the signal lands while pieces are being timed
    wide = _TIED_SCRIPT.replace("--hidden-size 64", "--hidden-size 512").replace("--seq-length 32", "--seq-length 512")
    pr = _cli(tmp_path, cache, script_text=wide.replace("--max-position-embeddings 32", "--max-position-embeddings 512"))
    deadline = time.monotonic() + 120
    while not list(cache.glob("*.lock")) and time.monotonic() < deadline and pr.poll() is None:
        time.sleep(0.05)
    assert pr.poll() is None, "finished before it could be interrupted"
    pr.send_signal(getattr(signal, sig))
    out, err = pr.communicate(timeout=120)
    assert pr.returncode == code, err[-2000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"primus-launch: {word} ({sig})"
    for f in cache.glob("*.json"):
        assert "value" in json.loads(f.read_text())
    assert not list(cache.glob(".*.tmp"))


def test_cp_core_attention_is_the_full_causal_attention_of_its_chunks(mcore_world1):
    """The context-parallel core (load-balanced chunks r and 2cp-1-r attending the whole
    sequence under the causal mask), given the other rank's true K/V as its stand-ins, returns
    exactly the rows of full-sequence causal attention at its positions (independent truth: the
    cp=1 core on the whole sequence)."""
    from megatron.core.transformer.enums import AttnMaskType

    from primus_launch.projection.measure.build_mcore import _sdpa_core_attention_class, cp_positions, mcore_config

    cfg = mcore_config(_tiny_plan(model=dict(num_layers=1)), num_dense=1, num_moe=0, per_rank=True)
    kw = dict(layer_number=1, attn_mask_type=AttnMaskType.causal, attention_type="self")
    full = _sdpa_core_attention_class(1)(cfg, **kw)
    cp = _sdpa_core_attention_class(2, "emulate")(cfg, **kw)
    s, b, heads, groups, d = 64, 2, 8, 4, 32
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(s, b, n, d, generator=g) for n in (heads, groups, groups))
    mine, other = cp_positions(s, 2, 0), cp_positions(s, 2, 1)
    assert sorted(mine + other) == list(range(s))
    for name, t in (("k", k), ("v", v)):
        cp._standin[(name, (s // 2, b, groups, d), t.dtype, t.device)] = [t[other]]
    got = cp(q[mine], k[mine], v[mine], None)
    want = full(q, k, v, None)[mine]
    assert torch.allclose(got, want, atol=1e-5)


def test_two_concurrent_runs_measure_each_piece_once(tmp_path):
    """Two processes projecting the same plan into the same cache at once: every piece is measured
    by exactly one of them (one writer per key), the other reads its record; every file is whole."""
    import json
    import os
    import subprocess
    import sys

    plan = _tiny_plan(model=dict(num_layers=2, untie_embeddings_and_output_weights=False))
    code = ("import json, sys\n"
            "from primus_launch.plan import Plan\n"
            "from primus_launch.projection.measure.upscale import project_measured\n"
            "r = project_measured(Plan.model_validate_json(sys.argv[1]), device='cpu', cache_dir=sys.argv[2], "
            "measure_layers=1)\n"
            "print(json.dumps({n: p.source for n, p in r.measurement.pieces.items()}))\n")
    env = dict(os.environ, PYTHONWARNINGS="ignore", PRIMUS_LAUNCH_MEASURE_POLICY=QUICK)
    procs = [subprocess.Popen([sys.executable, "-c", code, plan.model_dump_json(), str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = []
    for pr in procs:
        out, err = pr.communicate(timeout=300)
        assert pr.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert outs[0].keys() == outs[1].keys()
    for name in outs[0]:
        assert sorted(o[name] for o in outs) == ["cached", "measured"], (name, outs)
    files = list(tmp_path.glob("megatron-*.json"))
    assert len(files) == len(outs[0]) and all("value" in json.loads(f.read_text()) for f in files)




@pytest.mark.usefixtures("no_fake_world")
def test_gpu_check_runs_in_its_cpu_smoke_mode(capsys, monkeypatch):
    """``scripts/gpu_check.py --smoke`` (the prepared GPU check on the CPU, the default recipe at
    tiny size) runs and prints measured vs dry-run per piece kind, per layer kind and per stage,
    with the iteration time's ratio, so the GPU check is known to work where no GPU is lent."""
    import importlib.util
    from pathlib import Path

    from primus_launch.projection.measure.upscale import POLICY_ENV

    monkeypatch.setenv(POLICY_ENV, "")  # the script sets its smoke policy; restored after the test
    path = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--smoke"]) == 0
    out = capsys.readouterr().out.splitlines()
    kinds = {ln.split()[0] for ln in out if ln[:1].isalpha()}
    assert {"embedding", "dense_layer", "attn_core", "head_loss", "activations", "total"} <= kinds, out
    it = next(ln for ln in out if ln.startswith("iteration time: measured"))
    assert float(it.rsplit("ratio ", 1)[1]) > 0
