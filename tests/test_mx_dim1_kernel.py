"""TorchTitan v0.1 / v0.2's MX linear converter picks the dim1 cast kernel (``training.mx_dim1_cast_kernel``).

Truth: torchtitan v0.2.1 components/quantization/mx.py overrides the torchao recipe's kernel with
``quantize.linear.mx.mxfp8_dim1_cast_kernel_choice`` (config/job_config.py default "triton"; v0.1.0
``mx.use_fp8_dim1_cast_triton_kernel = True``); torchao's mx_formats README: the CUDA kernel 5404.46 GB/s, the Triton
kernel "up to 3.9 TB/s" on B200; torchtitan PR #1427: CUDA over Triton +1.5-2.5 % tokens/s for Llama 3 8B (FSDP 4 / 8).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primus_launch.adapters.torchtitan import plan_from_text
from primus_launch.plan import PlanError
from primus_launch.plan import Cluster, Plan
from primus_launch.projection.cost.fp8 import mx_dim1_extra_bytes
from primus_launch.projection.dryrun import project_dry_run

RUNS = Path(__file__).resolve().parents[1] / "scripts" / "validation" / "runs.json"
B200 = Cluster(gpu="b200", num_nodes=1, gpus_per_node=8)
BASE = ('[model]\nname = "llama3"\nflavor = "8B"\nconverters = ["quantize.linear.mx"]\n{extra}\n'
        '[training]\nseq_len = 8192\nlocal_batch_size = 1\ncompile = true\n')


def _kernel(extra: str) -> str:
    return plan_from_text(BASE.format(extra=extra), cluster=B200).training.mx_dim1_cast_kernel


def test_extra_bytes_from_the_two_kernels_bandwidths() -> None:
    assert mx_dim1_extra_bytes("cuda") == 0.0
    assert mx_dim1_extra_bytes("triton") == pytest.approx(3.0 * (5404.46 / 3900.0 - 1.0))
    assert mx_dim1_extra_bytes("torch") == mx_dim1_extra_bytes("triton")


def test_reader_defaults_and_keys() -> None:
    assert _kernel("") == "triton"
    assert _kernel('[quantize.linear.mx]\nmxfp8_dim1_cast_kernel_choice = "cuda"') == "cuda"
    assert _kernel('[mx]\nuse_fp8_dim1_cast_triton_kernel = false') == "torch"
    with pytest.raises(PlanError, match=r"mxfp8_dim1_cast_kernel_choice=.cutedsl.: one of triton, cuda, torch"):
        _kernel('[quantize.linear.mx]\nmxfp8_dim1_cast_kernel_choice = "cutedsl"')


def test_cuda_over_triton_gain_on_torchaos_llama3_8b_row() -> None:
    """The torchao Llama 3 8B MXFP8 row (torchtitan @6fc499f6, no dim1 key: triton) against the same plan on the CUDA
    kernel: faster, by no more than PR #1427's measured upper end (2.5 %); the "up to 3.9 TB/s" Triton figure is a
    best case, so the modelled gain sits below the PR's lower end (1.5 %) rather than above its upper one."""
    row = next(r for r in json.loads(RUNS.read_text())["rows"] if r["id"] == "torchao_b200_llama3_8b_8gpu_mxfp8_cublas")
    plan = Plan.model_validate(row["plan"])
    assert plan.training.mx_dim1_cast_kernel == "triton"
    d = plan.model_dump()
    d["training"]["mx_dim1_cast_kernel"] = "cuda"
    gain = project_dry_run(Plan.model_validate(d)).tokens_per_sec_per_gpu / project_dry_run(plan).tokens_per_sec_per_gpu
    assert 1.005 < gain <= 1.025


def test_explanation_row_names_the_slow_dim1_kernel() -> None:
    """The layer's quantisation row says when the MX linears' dim1 casts run on Triton / torch, and only its backward
    grows (torchao mx_mm.backward casts input, weight and output gradient along dim1)."""
    from primus_launch.projection.cost.roofline import layer_op_times

    row = next(r for r in json.loads(RUNS.read_text())["rows"] if r["id"] == "torchao_b200_llama3_8b_8gpu_mxfp8_cublas")
    plan = Plan.model_validate(row["plan"])
    d = plan.model_dump()
    d["training"]["mx_dim1_cast_kernel"] = "cuda"
    slow = next(o for o in layer_op_times(plan)["dense"] if o[0].startswith("FP8 quantisation"))
    fast = next(o for o in layer_op_times(Plan.model_validate(d))["dense"] if o[0].startswith("FP8 quantisation"))
    assert "Triton/torch dim1" in slow[0] and "dim1" not in fast[0]
    assert slow[1] == fast[1] and slow[2] > fast[2]
