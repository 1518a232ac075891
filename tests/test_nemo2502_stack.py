"""Kernel prices against the software of early-2025 Blackwell containers (issue 28, sw2502: NeMo 25.02 B200 rows).

Attention.  The Blackwell cuDNN curve is fitted on cuDNN 9.22 GB200 records (``cfe26-gb200-cudnn92200-*``). The
question was whether that prices B200 attention faster than the cuDNN of early-2025 containers ran it.  The oldest
public B200 kernel figures found are cudnn-frontend's SDPA training benchmark (BF16, b1, 128 query / 8 KV heads, d128,
causal, forward / backward ms, backend ``pyt_cudnn``: PyTorch's cuDNN SDPA):

- cuDNN 9.10.2, ``nvcr.io/nvidia/pytorch:25.05-py3``: github.com/NVIDIA/cudnn-frontend @f937055
  ``benchmark/sdpa_benchmark_bf16_training/artifacts/sdpa_benchmark_results_NVIDIA_B200.csv``;
- cuDNN 9.13.1, ``pytorch:25.09-py3``: @0b1577c
  ``benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv``.

At the sequence lengths of a context-parallel ring step and above (8k-64k keys) the two releases agree within 4 %, and
the model's B200 price is at or slower than both (measured / model 0.83-1.01).  No public B200 figure at cuDNN 9.7 /
9.8 (the NeMo 25.02 container's era) was found, so nothing version-dependent is priced
(``scripts/probe_nemo2502_stack.py``, scripts/validation/README.md Known gaps "NeMo 25.02 B200 rows").

GEMMs.  The Blackwell FP8 curve already sits on the early-2025 cuBLASLt figures: Azure's ND_GB200_v6 GEMM table
("cuBLASLt (CUDA 12.8)": CUDA 12.8 is the first Blackwell CUDA, of the same season as the
``nvcr.io/nvidia/pytorch:25.01-py3`` base NeMo v2.2.0's ``requirements/manifest.json`` names; that container's own
library versions were not found in a stored source), records ``azure-gb200-fp8_e4m3-*`` of
``data/kernel_evidence.json``; the later mamf-finder figures (torch 2.7 / 2.10) run 1.3-1.4x faster than the price.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primus_launch.projection.cost.compute import attention_time, gemm_time

# seq: (fwd ms, bwd ms), copied from the CSVs named in the module doc
B200_CUDNN_9_10_2 = {8192: (1.816, 5.815), 16384: (6.475, 20.466), 32768: (24.518, 77.677),
                     65536: (98.489, 327.462)}
B200_CUDNN_9_13_1 = {8192: (1.877, 5.833), 16384: (6.602, 20.460), 32768: (24.795, 79.338),
                     65536: (101.812, 327.889)}


@pytest.mark.parametrize("figures", [B200_CUDNN_9_10_2, B200_CUDNN_9_13_1], ids=["cudnn9.10.2", "cudnn9.13.1"])
def test_b200_attention_not_priced_faster_than_2025_cudnn(figures):
    for s, (fwd_ms, bwd_ms) in figures.items():
        f, b = attention_time(1, 128, s, s, 128, 128, True, "b200")
        for measured, model in ((fwd_ms, f * 1e3), (bwd_ms, b * 1e3)):
            assert 0.80 <= measured / model <= 1.05, (s, measured, model)


def test_b200_cudnn_flat_between_9_10_and_9_13_at_long_sequences():
    """The source's own two releases: within 4 % of each other from 8k keys up (no version trend to price)."""
    for s, (f0, b0) in B200_CUDNN_9_10_2.items():
        f1, b1 = B200_CUDNN_9_13_1[s]
        assert abs(f1 / f0 - 1) < 0.04 and abs(b1 / b0 - 1) < 0.04, s


def test_blackwell_fp8_gemm_priced_at_cuda_12_8_cublaslt():
    """Square-ish Azure GB200 FP8 records (cuBLASLt, CUDA 12.8, >= 4096): measured / priced rate within 0.95-1.10."""
    path = Path(__file__).resolve().parents[1] / "primus_launch" / "projection" / "data" / "kernel_evidence.json"
    recs = {r["id"]: r for r in json.loads(path.read_text())}
    ids = [f"azure-gb200-fp8_e4m3-{s}" for s in ("4096x4096x4096", "8192x8192x8192", "16384x16384x16384",
                                                  "6144x12288x12288")]
    for rid in ids:
        r = recs[rid]
        assert r["impl"] == "cuBLASLt (CUDA 12.8)"
        m, n, k = r["shape"]["m"], r["shape"]["n"], r["shape"]["k"]
        rate = 2.0 * m * n * k / gemm_time(m, n, k, "gb200", "fp8") / 1e12
        assert 0.95 <= r["value"] / rate <= 1.10, (rid, r["value"], rate)
