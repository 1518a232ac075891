"""GEMM workspaces inside the caching allocator (:mod:`memory.workspaces`) against their sources.

- Transformer Engine: ``pytorch/cpp_extensions/gemm.py`` and ``common/util/multi_stream.cpp`` read from the
  TransformerEngine mirror (``/work/.mirror/NVIDIA+TransformerEngine/repo`` or ``$TRANSFORMER_ENGINE_MIRROR``)
  at the commit Megatron-LM @d98e8a64dd's ``uv.lock`` pins (TE 2.17.1+4329ff84) and at v2.13;
- torch: the installed torch's ``ATen/cuda/CUDAContextLight.h`` (one cached workspace per (handle, stream)
  key) and ``torch.backends.cuda`` docs (the cuBLASLt workspace reuses the cuBLAS one), and the
  ``CUBLAS_WORKSPACE_CONFIG`` grammar (``:SIZE_KiB:COUNT``) of torch's default configurations;
- the report: the bytes land on the stages that run the GEMMs, inside the allocated peak, named in the
  breakdown.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import torch

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.memory.estimate import estimate_memory, stage_memory
from primus_launch.projection.memory.workspaces import (TE_GROUPED_STREAMS, TE_UB_STREAMS, TE_WORKSPACE, TORCH_PAIRS,
                                                        TORCH_WORKSPACE, gemm_workspaces)

TE_MIRROR = Path(os.environ.get("TRANSFORMER_ENGINE_MIRROR", "/work/.mirror/NVIDIA+TransformerEngine/repo"))
TE_REVS = ("4329ff84bfbdaa778a33cba02a15fb0807c64689", "v2.13")
MiB = 2**20


def _te_show(rev: str, path: str) -> str:
    if not TE_MIRROR.exists():
        pytest.skip("no TransformerEngine mirror")
    r = subprocess.run(["git", "-C", str(TE_MIRROR), "show", f"{rev}:{path}"], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"mirror lacks {rev}:{path}")
    return r.stdout


def _arith(expr: str) -> int:
    assert re.fullmatch(r"[0-9_ *+]+", expr), expr
    return int(eval(expr))  # digits, '*', '+' only


@pytest.mark.parametrize("rev", TE_REVS)
def test_te_workspace_constants_match_the_source(rev):
    src = _te_show(rev, "transformer_engine/pytorch/cpp_extensions/gemm.py")
    body = src.split("def get_cublas_workspace_size_bytes", 1)[1].split("\ndef ", 1)[0]
    sizes = [_arith(e.strip()) for e in re.findall(r"return ([0-9_ *+]+)\n", body)]
    assert sizes == [TE_WORKSPACE["hopper"], TE_WORKSPACE["ampere"]]  # major >= 9, else
    assert "major >= 9" in body
    assert int(re.search(r"_NUM_MAX_UB_STREAMS = (\d+)", src).group(1)) == TE_UB_STREAMS
    # one set per device for the run, the grouped one per compute stream
    head = src.split("def get_cublas_workspace(", 1)[0]
    assert head.rstrip().endswith("@functools.lru_cache(maxsize=None)")
    assert "range(tex.get_num_cublas_streams())" in src
    ms = _te_show(rev, "transformer_engine/common/util/multi_stream.cpp")
    assert int(re.search(r"num_compute_streams = (\d+);", ms).group(1)) == TE_GROUPED_STREAMS


def _workspace_config_bytes(config: str) -> int:
    """torch ``parseChosenWorkspaceSize``: every ``:SIZE:COUNT`` of ``CUBLAS_WORKSPACE_CONFIG`` adds SIZE KiB x COUNT."""
    return sum(int(s) * 1024 * int(c) for s, c in re.findall(r":([0-9]+):([0-9]+)", config))


def test_torch_workspace_sizes_and_caching():
    # the sm90 / Blackwell default is cuBLAS's recommended ':4096:8' (what torch's deterministic tests set,
    # torch/testing/_internal/common_utils.py); other NVIDIA parts ':4096:2:16:8'
    common = Path(torch.__file__).parent / "testing" / "_internal" / "common_utils.py"
    assert "':4096:8'" in common.read_text()
    assert _workspace_config_bytes(":4096:8") == TORCH_WORKSPACE["hopper"] == TORCH_WORKSPACE["blackwell"] == 32 * MiB
    assert _workspace_config_bytes(":4096:2:16:8") == TORCH_WORKSPACE["ampere"]
    # one cached workspace (DataPtr, size) per (handle, stream) key, the handles per thread
    header = Path(torch.__file__).parent / "include" / "ATen" / "cuda" / "CUDAContextLight.h"
    if not header.exists():
        pytest.skip("torch without ATen headers")
    text = header.read_text()
    assert "std::map<std::tuple<void*, void*>, std::pair<at::DataPtr, size_t>> map;" in text
    assert "cublas_handle_stream_to_workspace()" in text
    # cuBLASLt shares the cuBLAS allocation (no term of its own on CUDA)
    import torch.backends.cuda as tbc

    assert "physically reuses the same allocation" in " ".join(tbc.blas_workspace_size.__doc__.split())


ARCH = ModelArch(name="tiny", num_layers=4, hidden_size=512, ffn_hidden_size=2048, num_attention_heads=8,
                 num_query_groups=8, vocab_size=32000, seq_length=1024)
MOE = ARCH.model_copy(update=dict(name="tiny-moe", num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=1024))


def _plan(arch=ARCH, gpu="h100-sxm", tp=1, pp=2, **training) -> Plan:
    par = dict(tp=tp, pp=pp, sequence_parallel=tp > 1)
    if arch.num_experts:
        par["ep"] = 1
    return Plan(model=arch, parallel=par, cluster=dict(gpu=gpu, gpus_per_node=tp * pp),
                training=dict(global_batch_size=8, micro_batch_size=1, **training))


def test_workspaces_by_stage_in_the_allocated_peak():
    te, pair = TE_WORKSPACE["hopper"], TORCH_WORKSPACE["hopper"]
    first, last = stage_memory(_plan(attention_backend="flash"))
    assert first.workspace_bytes == te  # TE layers with fused attention: no torch GEMM
    assert last.workspace_bytes == te + TORCH_PAIRS * pair  # the output layer's forward and backward
    assert last.transient_bytes >= last.workspace_bytes
    # unfused attention runs torch bmm on every stage; --tp-comm-overlap adds TE's three userbuffers workspaces
    assert stage_memory(_plan(attention_backend="unfused"))[0].workspace_bytes == te + TORCH_PAIRS * pair
    ub = stage_memory(_plan(tp=2, attention_backend="flash", tp_comm_overlap=True))
    assert [s.workspace_bytes for s in ub] == [(1 + TE_UB_STREAMS) * te, (1 + TE_UB_STREAMS) * te + TORCH_PAIRS * pair]
    # MoE experts as TE GroupedLinear: four more, with the router's torch GEMMs
    moe = stage_memory(_plan(MOE, attention_backend="flash"))
    assert moe[0].workspace_bytes == (1 + TE_GROUPED_STREAMS) * te + TORCH_PAIRS * pair
    # A100: torch's ':4096:2:16:8', TE's 4 MiB
    a100 = stage_memory(_plan(gpu="a100-sxm-80gb", attention_backend="flash"))
    assert a100[1].workspace_bytes == TE_WORKSPACE["ampere"] + TORCH_PAIRS * TORCH_WORKSPACE["ampere"]
    assert gemm_workspaces("cdna4", te=True).te == 64 * MiB  # ROCm TE on gfx950


def test_breakdown_names_the_workspaces():
    plan = _plan(attention_backend="flash")
    r = estimate_memory(plan)
    worst = r.stages[r.worst_stage]
    assert r.breakdown["workspaces"] == worst.workspace_bytes > 0
    assert r.breakdown["transient"] == worst.transient_bytes - worst.workspace_bytes
    assert any("GEMM workspaces" in n for n in r.notes)


_TITAN_TOML = """
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 2
seq_len = 4096
[parallelism]
data_parallel_shard_degree = -1
pipeline_parallel_degree = {pp}
[activation_checkpoint]
mode = "full"
"""


@pytest.mark.parametrize("pp", [1, 2])
def test_torchtitan_stages_hold_torchs_two_workspaces(pp):
    """A TorchTitan step runs every GEMM through torch: the forward's (main thread) and the backward's (autograd
    device thread) cuBLAS workspace, default stream, ':4096:8' each on sm90, in the allocated peak of every
    stage (the pipeline-parallel walk too); the CPU-trace model (no ``gemm_ws``) keeps none."""
    from primus_launch.adapters.torchtitan import plan_from_text
    from primus_launch.plan import Cluster
    from primus_launch.projection.memory.estimate import titan_args, titan_stage_memory

    plan = plan_from_text(_TITAN_TOML.format(pp=pp), cluster=Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))
    with_ws = stage_memory(plan)
    bare = titan_stage_memory(*titan_args(plan))
    assert len(with_ws) == len(bare) == pp
    two = 2 * _workspace_config_bytes(":4096:8")
    for a, b in zip(with_ws, bare):
        assert a.workspace_bytes == two and b.workspace_bytes == 0
        assert a.allocated_bytes - b.allocated_bytes == two
        # allocated once at the first GEMM: not part of the dynamic pool's fragmentation
        assert a.allocator_reserve_bytes == b.allocator_reserve_bytes
    assert estimate_memory(plan).breakdown["workspaces"] == two
