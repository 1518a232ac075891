"""The measured path's device handling that a GPU box exercises, checked where the CPU can check it:
the device name -> hardware database mapping, the no-GPU reason, a device out-of-memory during a
measurement as one line, and ``scripts/gpu_check.py``'s one-line failures."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

GiB = 2 ** 30


@pytest.mark.parametrize("name, mem_gib, arch, want", [
    # torch.cuda.get_device_name() strings of shipped parts (and their total_memory)
    ("NVIDIA H100 80GB HBM3", 79.2, "", "h100-sxm"),
    ("NVIDIA H100", 95.0, "", "h100-sxm-96gb-500w"),  # Grand Teton's 96 GB part
    ("NVIDIA H100 NVL", 93.1, "", None),  # 400 W PCIe card: other clocks and bandwidth than the SXM
    ("NVIDIA H100 PCIe", 79.2, "", None),
    ("NVIDIA H200", 139.8, "", "h200"),
    ("NVIDIA GH200 480GB", 94.5, "", None),  # contains "H200" but is a Grace-Hopper H100-class part
    ("NVIDIA H800", 79.2, "", None),
    ("NVIDIA A100-SXM4-80GB", 79.2, "", "a100-sxm-80gb"),
    ("NVIDIA A100-SXM4-40GB", 39.5, "", "a100-sxm-40gb"),
    ("NVIDIA A100-PCIE-40GB", 39.4, "", None),
    ("NVIDIA B200", 178.4, "", "b200"),
    ("NVIDIA GB200", 184.0, "", "gb200"),
    ("AMD Instinct MI300X", 191.5, "gfx942:sramecc+:xnack-", "mi300x"),
    ("AMD Instinct MI300X VF", 191.5, "gfx942:sramecc+:xnack-", "mi300x"),
    ("AMD Instinct MI325X", 255.98, "gfx942:sramecc+:xnack-", "mi325x"),
    ("AMD Instinct MI300A", 128.0, "gfx942:sramecc+:xnack-", None),
    ("AMD Instinct MI355X", 287.6, "gfx950:sramecc+:xnack-", "mi355x"),
    ("", 191.5, "gfx942:sramecc+:xnack-", "mi300x"),  # a ROCm release reporting no marketing name
    ("", 255.98, "gfx942", "mi325x"),
    ("", 287.6, "gfx950", None),  # MI350X or MI355X: one die, other power
    ("NVIDIA GeForce RTX 4090", 23.6, "", None),
])
def test_device_name_maps_to_the_hardware_database(name, mem_gib, arch, want):
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.measure.device import gpu_of_device

    got = gpu_of_device(name, int(mem_gib * GiB), arch)
    assert got == want
    if got is not None:  # a database part whose capacity is the device's
        assert abs(get_gpu(got).hbm_bytes / GiB - mem_gib) < 0.1 * mem_gib


def test_no_gpu_reason_names_a_cpu_only_build():
    from primus_launch.projection.measure.device import no_gpu_reason

    assert "CPU-only build" in no_gpu_reason("2.13.0+cpu", "", "")
    assert "CUDA 12.8" in no_gpu_reason("2.13.0+cu128", "12.8", "") and "CPU-only" not in no_gpu_reason(
        "2.13.0+cu128", "12.8", "")
    assert "ROCm 6.4" in no_gpu_reason("2.13.0+rocm6.4", "", "6.4")
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        assert "CPU-only build" in no_gpu_reason()


@pytest.mark.parametrize("fail_at, piece", [(1, "dense_layer#0"), (5, "dense_layer#1")])
def test_device_out_of_memory_during_a_measurement_is_one_line(monkeypatch, fail_at, piece, no_fake_world):
    """A ``torch.OutOfMemoryError`` raised inside a real megatron layer's forward -- in the warm-up of
    the first layer (call 1) or in the round-robin samples (call 5: the warm-ups of the two layers and
    the attention core call SDPA 3 times, then round 1 runs dense_layer#0, dense_layer#1) -- ends as
    one :class:`UserError` line naming that piece and the way out, the world-size-1 state is torn
    down, and the error does not hold the OOM's traceback (whose frames keep the device memory)."""
    from megatron.core import parallel_state as ps

    from primus_launch.errors import UserError, one_line
    from primus_launch.plan import Plan
    from primus_launch.projection.measure.timing import TimingPolicy
    from primus_launch.projection.measure.upscale import project_measured

    plan = Plan.model_validate({"model": dict(num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4,
                                              num_query_groups=2, vocab_size=256, seq_length=32),
                                "training": dict(global_batch_size=2, micro_batch_size=1, precision="bf16"),
                                "cluster": {"gpus_per_node": 1, "gpu": "h100-sxm"}})
    sdpa = torch.nn.functional.scaled_dot_product_attention
    calls = []

    def oom_at(*a, **k):
        calls.append(1)
        if len(calls) == fail_at:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB.\nGPU 0 has ...")
        return sdpa(*a, **k)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", oom_at)
    pol = TimingPolicy(warmup=1, min_repeats=3, max_repeats=3, min_sample_s=0.0, max_inner=1, min_window_s=0.0)
    ps_before = ps.model_parallel_is_initialized()
    with pytest.raises(UserError) as ei:
        project_measured(plan, device="cpu", use_cache=False, policy=pol)
    line = one_line(ei.value)
    assert line == str(ei.value) and "\n" not in str(ei.value)
    assert f"ran out of device memory measuring {piece} on cpu:" in line and "--dry-run" in line
    assert ps.model_parallel_is_initialized() == ps_before
    assert ei.value.__context__ is None  # the OOM's traceback (its frames' tensors) is not kept alive


def _gpu_check():
    path = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check_dev", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a torch that sees no GPU")
def test_gpu_check_refuses_cuda_without_a_gpu_in_one_line(capsys):
    mod = _gpu_check()
    assert mod.main(["--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpu_check: error: --device=cuda: torch ")


def test_gpu_check_failures_are_one_line(capsys):
    mod = _gpu_check()
    assert mod.main(["--recipe", "recipes/no/such/recipe.sh", "--smoke"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpu_check: error: ") and "no/such/recipe.sh" in err[0]


def test_a_cuda_install_lifts_the_cpu_shims():
    """After a CPU measurement in the same process, a CUDA one must see torch's own
    ``torch.cuda.current_device`` / ``synchronize`` (else megatron allocates on the CPU and the CUDA
    events' synchronize waits for nothing); a later CPU install applies them again."""
    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install("cpu")
    try:
        assert torch.cuda.current_device() == torch.device("cpu")
        mcore_cpu.install("cuda")
        assert torch.cuda.current_device is mcore_cpu._ORIG_CURRENT_DEVICE
        assert torch.cuda.synchronize is mcore_cpu._ORIG_SYNCHRONIZE
    finally:
        mcore_cpu.install("cpu")
    assert torch.cuda.current_device() == torch.device("cpu")


def test_flush_evicts_the_last_level_cache_amd_infinity_cache_included():
    """NVIDIA reports its last-level cache as ``L2_cache_size`` (H100: 50 MiB -> triton's 256 MB
    flush); an MI300X reports its 4 MB L2 while 256 MB of Infinity Cache sit behind it, so its flush
    must be twice that, not the 256 MB minimum (which would leave part of the previous pass cached)."""
    from primus_launch.projection.measure.timing import flush_bytes, last_level_cache_bytes

    assert flush_bytes(last_level_cache_bytes(50 << 20, "")) == 256 << 20
    assert last_level_cache_bytes(4 << 20, "gfx942:sramecc+:xnack-") == 256 << 20
    assert flush_bytes(last_level_cache_bytes(4 << 20, "gfx942:sramecc+:xnack-")) == 512 << 20
    assert last_level_cache_bytes(4 << 20, "gfx950") == 256 << 20
    assert last_level_cache_bytes(8 << 20, "gfx90a:sramecc+:xnack-") == 8 << 20  # MI250X: no MALL


def test_fp8_gemm_needs_ada_hopper_blackwell_or_cdna3_cdna4():
    from primus_launch.projection.measure.spec import no_fp8_gemm

    assert no_fp8_gemm((9, 0), False) is None and no_fp8_gemm((8, 9), False) is None  # H100, L40S
    assert no_fp8_gemm((10, 0), False) is None  # B200
    assert "8.0 < 8.9" in no_fp8_gemm((8, 0), False)  # A100
    assert no_fp8_gemm((9, 4), True, "gfx942:sramecc+:xnack-") is None  # MI300X
    assert no_fp8_gemm((9, 5), True, "gfx950") is None  # MI355X
    assert "gfx90a" in no_fp8_gemm((9, 0), True, "gfx90a:sramecc+:xnack-")  # MI250X: no FP8 cores


def test_a_cuda_install_gives_torchtitan_its_cuda_device_type_back():
    """torchtitan's ``device_type`` (its token dispatcher's buffers, the device mesh) is pointed at the
    CPU by a CPU measurement; a GPU one later in the process must see ``"cuda"`` again."""
    import torchtitan.models.common.token_dispatcher as td
    import torchtitan.tools.utils as tutils

    from primus_launch.frameworks import titan_cpu

    was_cpu = titan_cpu._INSTALLED
    titan_cpu.install("cpu")
    try:
        assert tutils.device_type == "cpu" and td.device_type == "cpu" and td.device_module is torch.cpu
        titan_cpu.install("cuda")
        assert tutils.device_type == "cuda" and td.device_type == "cuda" and td.device_module is torch.cuda
    finally:
        if was_cpu:
            titan_cpu.install("cpu")
