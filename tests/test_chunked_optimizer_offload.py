"""Megatron-LM dev's chunked optimizer-state and master-weight offload (``--chunked-optimizer-state-offload``,
9050d4c5fb): the reader, the memory model (``memory/optimizer_offload.py``) checked against the framework's own
chunk planner built on the CPU, the time model (``cost/optimizer.py``), and the DeepSeek-V3 GB200 recipe that
uses it; plus dev's hyper-connection flags, reported as not modelled."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from primus_launch.adapters import megatron_flags as mf
from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import Cluster, PlanError
from primus_launch.projection.memory.optimizer_offload import MIB, staging_bytes, step_restore_bytes

ROOT = Path(__file__).resolve().parents[1]
MLM = Path(os.environ.get("MEGATRON_LM_MIRROR", "/work/.mirror/NVIDIA+Megatron-LM/repo"))
DEV = "d48bd6be0a"  # Megatron-LM dev, the MoE recipes' version (has 9050d4c5fb)
GB200_ROW = "mlm_moe_deepseek_v3_gb200_mxfp8_256gpu_tp1pp4ep64"
SMALL = ["pretrain_gpt.py", "--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16",
         "--seq-length", "2048", "--max-position-embeddings", "2048", "--micro-batch-size", "1",
         "--global-batch-size", "64", "--bf16", "--use-distributed-optimizer", "--vocab-size", "32000"]
CLUSTER = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)


@pytest.fixture(scope="module")
def offloader(tmp_path_factory):
    return _offloader_module(tmp_path_factory.mktemp("mlm_dev"))


def _offloader_module(tmp_path):
    """Megatron-LM dev's ``chunked_optimizer_state_offload.py`` (installed megatron-core 0.16.1 has no such
    module), read from the mirror into ``tmp_path`` (not committed here) and imported with torch only."""
    if not (MLM / "HEAD").exists() and not (MLM / ".git").exists():
        pytest.skip("no Megatron-LM mirror")
    src = subprocess.run(["git", "-C", str(MLM), "show",
                          f"{DEV}:megatron/core/optimizer/cpu_offloading/chunked_optimizer_state_offload.py"],
                         capture_output=True, text=True)
    if src.returncode:
        pytest.skip(f"mirror lacks {DEV}")
    f = tmp_path / "chunked_optimizer_state_offload.py"
    # its one megatron import is a rank-0 logger (for the oversized-chunk warning): a plain logger call instead
    # keeps megatron-core's import (seconds) out of the test
    imp = "from megatron.core.utils import log_single_rank"
    assert imp in src.stdout
    f.write_text(src.stdout.replace(imp, "def log_single_rank(logger, level, *args):\n    logger.log(level, *args)"))
    spec = importlib.util.spec_from_file_location("mlm_chunked_offload", f)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve their module
    spec.loader.exec_module(mod)
    return mod


class _Optimizer:
    """The two attributes the offloader's planner reads of an optimizer (``param_groups``, ``state``)."""

    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.state = {}


def _small_model_shards() -> list[torch.Tensor]:
    """The fp32 master shards one rank's DistributedOptimizer steps for a small GPT (h 1024, ffn 4096, 4 layers,
    vocab 32000, untied, TP 1, DP 8): per layer QKV, proj, fc1, fc2 weights and two norms; embedding and
    output layer; each a contiguous 1/8 of the parameter (empty tensors: only numel is read)."""
    h, f, v, dp = 1024, 4096, 32000, 8
    sizes = [v * h, v * h, h]
    for _ in range(4):
        sizes += [3 * h * h, h * h, f * h, f * h, h, h]
    return [torch.empty(-(-n // dp), dtype=torch.float32, device="meta") for n in sizes]


@pytest.mark.parametrize("chunk_mb", [0, 1, 4, 16])
def test_staging_matches_the_framework_chunk_plan(offloader, chunk_mb):
    """Megatron-LM dev ``ChunkedOptimizerStateOffloader._build_chunks`` on the CPU for the small model's shards
    with bf16 Adam moments (``state_dtypes`` bf16, bf16: 4 B per parameter), fraction 1: its two staging slots
    (chunk ``i`` in slot ``i % 2``, each slot's buffer grown to its largest chunk, ``_state_staging_views``)
    hold at most ``staging_bytes([S], C)``, and no less than that minus one shard's state (greedy fill); chunk
    0 = one chunk of all state, exactly S.  Offloaded bytes = masters + moments of every shard."""
    mod = offloader
    shards = _small_model_shards()
    opt = _Optimizer(shards)
    o = mod.ChunkedOptimizerStateOffloader(opt, master_params=shards, chunk_size_bytes=chunk_mb * MIB,
                                           offload_fraction=1.0, state_dtypes=(torch.bfloat16, torch.bfloat16),
                                           d2h_stream=object(), h2d_stream=object())
    per_chunk = [sum(4 * p.numel() for p in c.params) for c in o.chunks]
    code_peak = max(per_chunk[0::2], default=0) + max(per_chunk[1::2], default=0)
    n = sum(p.numel() for p in shards)
    S = 4.0 * n
    model = staging_bytes([S], chunk_mb * MIB)
    biggest = max(4 * p.numel() for p in shards)
    if chunk_mb == 0:
        assert len(o.chunks) == 1 and code_peak == model == S
    else:
        assert biggest <= chunk_mb * MIB or chunk_mb < 16  # the 16 MiB case has no oversized shard
        if biggest <= chunk_mb * MIB:
            assert model - biggest <= code_peak <= model
    assert len(o.selected_params) == len(shards)
    assert sum(o._estimated_bundle_bytes(p) for p in o.selected_params) == 4 * n + S  # fp32 master + moments
    assert step_restore_bytes(fraction=1.0, chunk_mb=chunk_mb, master=4, moments=4, local_params=[n]) == \
        pytest.approx(4 * n + model)


def test_partial_fraction_and_chained_children(offloader):
    """Fraction 0.5: the framework selects whole bundles until half the bytes (``_select_params_for_offload``):
    within one bundle of ``f`` x the total, what the model takes.  A chain of two children (dense, expert):
    while the first steps with two slots the second holds its first prefetched chunk (README: 'can approach
    3 x chunk')."""
    mod = offloader
    shards = _small_model_shards()
    o = mod.ChunkedOptimizerStateOffloader(_Optimizer(shards), master_params=shards, chunk_size_bytes=4 * MIB,
                                           offload_fraction=0.5, state_dtypes=(torch.bfloat16, torch.bfloat16),
                                           d2h_stream=object(), h2d_stream=object())
    total = sum(8 * p.numel() for p in shards)
    sel = sum(8 * p.numel() for p in o.selected_params)
    assert 0.5 * total <= sel <= 0.5 * total + max(8 * p.numel() for p in shards)
    C = 4 * MIB
    assert staging_bytes([100 * C, 100 * C], C) == 3 * C
    assert staging_bytes([0.5 * C, 100 * C], C) == 2 * C  # 0.5 C + C, then the second child's own two slots
    assert staging_bytes([100 * C, 0.5 * C], C) == 2.5 * C  # two slots + the second child's whole (small) state


def test_reader_fields_deprecated_spelling_and_errors():
    p = plan_from_argv(SMALL + ["--chunked-optimizer-state-offload", "--optimizer-state-offload-chunk-size-mb", "256"],
                       cluster=CLUSTER)
    o = p.training.offload
    assert (o.optimizer_state_fraction, o.optimizer_state_chunk_mb, o.optimizer_fraction) == (1.0, 256, 0.0)
    assert not [u for u in p.source.unmodelled if "offload" in u.flag]
    old = plan_from_argv(SMALL + ["--offload-optimizer-states"], cluster=CLUSTER).training.offload
    assert (old.optimizer_state_fraction, old.optimizer_state_chunk_mb) == (1.0, 0)  # dev: chunk 0, fraction 1
    off = plan_from_argv(SMALL + ["--optimizer-state-offload-fraction", "0.5"], cluster=CLUSTER).training.offload
    assert off.optimizer_state_fraction == 0.0  # the fraction alone turns nothing on
    with pytest.raises(PlanError, match="--chunked-optimizer-state-offload.*mutually exclusive"):
        plan_from_argv(SMALL + ["--chunked-optimizer-state-offload", "--optimizer-cpu-offload"], cluster=CLUSTER)
    with pytest.raises(PlanError, match="--optimizer-state-offload-fraction"):
        plan_from_argv(SMALL + ["--chunked-optimizer-state-offload", "--optimizer-state-offload-fraction", "1.5"],
                       cluster=CLUSTER)
    no_distopt = [x for x in SMALL if x != "--use-distributed-optimizer"]
    for argv, why in ((no_distopt, "requires --use-distributed-optimizer"),
                      (SMALL + ["--optimizer", "sgd"], "adam or muon"),
                      (SMALL + ["--cuda-graph-impl", "local", "--cuda-graph-scope", "full_iteration"], "full-iteration")):
        with pytest.raises(PlanError, match=f"--chunked-optimizer-state-offload.*{why}"):
            plan_from_argv(argv + ["--chunked-optimizer-state-offload"], cluster=CLUSTER)
    for flag in ("--chunked-optimizer-state-offload", "--offload-optimizer-states",
                 "--optimizer-state-offload-fraction", "--optimizer-state-offload-chunk-size-mb"):
        f = mf.by_option()[flag]
        assert f.cls == mf.MODELLED and f.versions == "dev" and f.group == "training", flag


def test_hyper_connection_flags_are_reported_not_modelled():
    """dev's ``--enable-hyper-connections`` / ``--num-residual-streams`` (and main's ``--enable-mhc-connections``):
    in the inventory as not modelled, and a recipe setting them gets one unmodelled entry each."""
    for flag in ("--enable-hyper-connections", "--num-residual-streams", "--use-fused-mhc", "--enable-mhc-connections",
                 "--mhc-num-residual-streams"):
        assert mf.by_option()[flag].cls == mf.NOT_MODELLED, flag
    p = plan_from_argv(SMALL + ["--enable-hyper-connections", "--num-residual-streams", "4",
                                "--recompute-granularity", "selective", "--recompute-modules", "core_attn", "mhc"],
                       cluster=CLUSTER)
    got = {u.flag: u.effect for u in p.source.unmodelled}
    assert "--enable-hyper-connections" in got and "residual" in got["--enable-hyper-connections"]
    assert "--recompute-modules" in got  # 'mhc' recompute: not modelled
    # --num-residual-streams 4 is dev's default: nothing to report on its own
    assert "--num-residual-streams" not in got


def _gb200_plan():
    rows = json.loads((ROOT / "scripts/validation/current_runs.json").read_text())
    r = next(x for x in rows if x["id"] == GB200_ROW)
    argv = ["pretrain_gpt.py"] + [w for f in r["megatron_flags"] for w in f.split()]
    return plan_from_argv(argv, cluster=Cluster(gpu="gb200", num_nodes=64, gpus_per_node=4))


def test_deepseek_v3_gb200_recipe_memory_drops_by_the_offloaded_state():
    """NVIDIA's DeepSeek-V3 GB200 recipe (Megatron-LM dev ``examples/moe_recipes/deepseek_v3/gb200/
    mxfp8_256GPU_TP1PP4EP64.yaml``: ``chunked_optimizer_state_offload``, chunk 256 MiB, fp32 masters, bf16
    moments): each stage's optimizer bytes leave the GPU (fraction 1), the step's restore (masters + 3 chunks
    for the dense / expert chain) stays under the activations it replaces, so each stage's allocated peak drops
    by exactly its optimizer bytes without offload; the flag is no longer reported."""
    from primus_launch.projection.memory.estimate import estimate_memory

    plan = _gb200_plan()
    o = plan.training.offload
    assert (o.optimizer_state_fraction, o.optimizer_state_chunk_mb) == (1.0, 256)
    assert not [u for u in plan.source.unmodelled if "optimizer" in u.flag]
    base = plan.model_copy(update={"training": plan.training.model_copy(
        update={"offload": o.model_copy(update={"optimizer_state_fraction": 0.0, "optimizer_state_chunk_mb": 0})})})
    on, off = estimate_memory(plan), estimate_memory(base)
    for a, b in zip(on.stages, off.stages):
        assert b.optimizer_bytes > 10 * 2**30 and a.optimizer_bytes == 0
        # held parameters x (4 B fp32 master + 2 + 2 B bf16 moments)
        restore = b.optimizer_bytes / 8 * 4 + 3 * 256 * MIB
        assert restore < b.activations_bytes
        assert b.allocated_bytes - a.allocated_bytes == pytest.approx(b.optimizer_bytes, abs=2)


def test_gb200_optimizer_time_adds_the_host_link_copies():
    """The step's time with the offload (cost/optimizer.py): max(masters / bw - overlap + GPU step,
    (masters + moments) / bw - overlap) over GB200's NVLink-C2C (450 GB/s per direction, hardware DB)."""
    from primus_launch.projection.cost.optimizer import optimizer_step_s, state_offload_bytes
    from primus_launch.projection.hardware.gpus import get_gpu

    plan = _gb200_plan()
    spec = get_gpu("gb200")
    assert spec.host_link_bw == 450e9
    assert state_offload_bytes(plan) == (4.0, 4.0)
    base = plan.model_copy(update={"training": plan.training.model_copy(update={"offload": plan.training.offload.model_copy(
        update={"optimizer_state_fraction": 0.0})})})
    held = 2.0e9
    gpu = optimizer_step_s(base, spec, held)
    for overlap in (0.0, 0.01):
        want = max(max(0.0, held * 4 / 450e9 - overlap) + gpu, held * 8 / 450e9 - overlap)
        assert optimizer_step_s(plan, spec, held, overlap_s=overlap) == pytest.approx(want)
    assert optimizer_step_s(base, spec, held, overlap_s=0.01) == gpu  # no offload: the overlap changes nothing


@pytest.mark.parametrize("kind", ["script", "yaml"])
def test_writer_round_trip(tmp_path, kind):
    """The tuned-recipe writer expresses the two fields in the recipe's idiom and reads back the same plan:
    a script's deprecated ``--offload-optimizer-states`` kept while the offload stays on, every switch removed
    when it is turned off; an NVIDIA YAML gets ``chunked_optimizer_state_offload: true``."""
    from primus_launch.adapters import load_recipe, write_recipe

    if kind == "script":
        src = tmp_path / "run.sh"
        src.write_text("#!/bin/bash\n# primus-launch: gpu=h100-sxm\ntorchrun --nnodes 1 --nproc-per-node 8 "
                       + " ".join(SMALL) + " --offload-optimizer-states\n")
    else:
        src = tmp_path / "r.yaml"
        src.write_text("ARGS:\n  num_layers: 4\n  hidden_size: 1024\n  num_attention_heads: 16\n  seq_length: 2048\n"
                       "  max_position_embeddings: 2048\n  micro_batch_size: 1\n  global_batch_size: 64\n  bf16: true\n"
                       "  use_distributed_optimizer: true\n  vocab_size: 32000\n")
    p = load_recipe(src)
    assert p.training.offload.optimizer_state_fraction == (1.0 if kind == "script" else 0.0)
    for i, (frac, chunk) in enumerate(((0.5, 64), (0.0, 0), (1.0, 256))):
        o = p.training.offload.model_copy(update={"optimizer_state_fraction": frac, "optimizer_state_chunk_mb": chunk})
        out = write_recipe(p.model_copy(update={"training": p.training.model_copy(update={"offload": o})}),
                           tmp_path / f"out{i}{src.suffix}")
        back = load_recipe(out).training.offload
        assert (back.optimizer_state_fraction, back.optimizer_state_chunk_mb) == (frac, chunk)
        text = out.read_text()
        if frac == 0:
            assert "offload" not in text
        elif kind == "script":
            assert "--offload-optimizer-states" in text and "--chunked-optimizer-state-offload" not in text
        else:
            assert "chunked_optimizer_state_offload: true" in text
