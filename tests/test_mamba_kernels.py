"""The Mamba layer's kernel and memory terms (``cost/mamba.py``) against their sources.

Truths, each independent of the formulas under test:

- saved tensors and backward temporaries: the tensors the code allocates, listed one by one with the shape and
  dtype the code gives them (mamba_ssm @e9594ce ``ops/triton/ssd_combined.py`` ``MambaSplitConv1dScanCombinedFn``
  and ``_mamba_chunk_scan_combined_bwd``, ``ssd_chunk_scan.py``, ``ssd_chunk_state.py``, ``ssd_state_passing.py``,
  ``layernorm_gated.py``; megatron-core 0.16.1 ``ssm/mamba_mixer.py`` ``_ssm_training``), built on the meta device
  and summed;
- MI300X: Zyphra's MI300X Mamba-2 backward kernel, 1.04 / 1.05 / 1.06x an H100 at 2k / 4k / 8k tokens (ROCm
  blogs PR #25, Zyphra blog "Training transformers and hybrid models on AMD MI300X");
- causal_conv1d's backward kernel: Dao-AILab/causal-conv1d PR #88 (``tests/benchmark_determinism_kernels.py``,
  RTX PRO 6000 Blackwell Workstation, batch 4, dim 4128, width 4, bf16, bias, SiLU, contiguous layout):
  1.085 ms at seqlen 16384 (0.275 ms at 4096);
- the SSD forward: vLLM PR #27299 (comment of 2025-10-25, H100, 'Original' = mamba_ssm's five Triton kernels,
  granite-4.0-h-small shapes 128 heads x 64 x state 128, 1 group): 1.07e7 .. 1.29e7 tokens/s from 4k to 262k tokens.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_hybrid_mamba import NANO  # noqa: E402

from primus_launch.projection.cost import calibration as cal  # noqa: E402
from primus_launch.projection.cost import mamba  # noqa: E402
from primus_launch.projection.hardware.gpus import get_gpu  # noqa: E402

#: Primus's examples/megatron/configs/MI300X/mamba_370M-pretrain.yaml model (primus/configs/models/megatron/
#: mamba_370M.yaml): 48 Mamba layers, hidden 1024, head dim 64, state 16, 8 groups (d_i = 2h, 32 heads)
M370 = NANO.model_copy(update=dict(name="mamba-370m", num_layers=48, hidden_size=1024, hybrid_pattern="M" * 48,
                                   mamba_num_heads=None, mamba_state_dim=16, mamba_num_groups=8, num_experts=None,
                                   moe_router_topk=None, moe_ffn_hidden_size=None,
                                   moe_shared_expert_intermediate_size=None))
BF16, FP32 = torch.bfloat16, torch.float32


def _bytes(*tensors: tuple[tuple[int, ...], torch.dtype]) -> int:
    return sum(torch.empty(shape, dtype=dt, device="meta").nbytes for shape, dt in tensors)


def _dims(m, b: int, s: int, tp: int):
    H, P, N, G = m.mamba_heads // tp, m.mamba_head_dim, m.mamba_state_dim, m.mamba_num_groups // tp
    return H, P, N, G, H * P, 2 * H * P + 2 * G * N + H, H * P + 2 * G * N, -(-s // mamba.CHUNK)


CASES = [(NANO, 1, 8192, 1), (NANO, 2, 8192, 2), (M370, 52, 2048, 1)]


@pytest.mark.parametrize("m,b,s,tp", CASES)
def test_saved_tensors_equal_the_code(m, b, s, tp):
    """What one Mamba layer keeps for its backward (no SP): TE's in_proj keeps its input, its norm output and rstd;
    ``MambaSplitConv1dScanCombinedFn.forward`` ``ctx.save_for_backward(zxbcdt, ..., out_x, ...)`` (the conv output,
    ``dt``, ``dA_cumsum`` and the chunk states are recomputed in the backward, not saved); the mixer's
    ``RMSNormGated`` (``LayerNormFn``) keeps its input and ``rstd`` of ``ngroups * M`` floats; TE's out_proj keeps
    its input."""
    H, P, N, G, di, W, C, c = _dims(m, b, s, tp)
    T, h = b * s, m.hidden_size
    code = _bytes(((T, h), BF16), ((T, h), BF16), ((T,), FP32),          # in_proj: inputmat, ln_out, rsigma
                  ((b, s, W), BF16), ((b, s, H, P), BF16),              # zxbcdt, out_x
                  ((T, di), BF16), ((G * T,), FP32),                     # RMSNormGated: x, rstd
                  ((T, di), BF16))                                       # out_proj input
    assert mamba.mamba_activation_bytes(m, T, tp, sp=False) == pytest.approx(code, rel=1e-12)


@pytest.mark.parametrize("m,b,s,tp", CASES)
def test_backward_temporaries_equal_the_code(m, b, s, tp):
    """The largest set of tensors alive at once in ``MambaSplitConv1dScanCombinedFn.backward`` /
    ``_mamba_chunk_scan_combined_bwd`` (every local kept until the function returns), plus the layer's output
    gradient, at its three candidate moments."""
    H, P, N, G, di, W, C, c = _dims(m, b, s, tp)
    T, h, Q = b * s, m.hidden_size, mamba.CHUNK
    always = [((T, h), BF16),                                    # the layer's output gradient
              ((b, s, di), BF16),                                # dout (the scan's gated output's gradient)
              ((b, s, C), BF16),                                 # xBC_conv: causal_conv1d_fwd recomputed
              ((b, s, W), BF16), ((b, s, C), BF16),              # dzxbcdt, dxBC
              ((b, s, H), BF16),                                 # dt_in = dt.clone()
              ((b, H, c, Q), FP32), ((b, H, c, Q), FP32),        # _chunk_cumsum_fwd: dA_cumsum, dt
              ((b, c, G, Q, Q), FP32),                           # CB = _bmm_chunk_fwd(..., output_dtype=float32)
              ((b, s, H, P), BF16)]                              # dout_x (_chunk_scan_bwd_dz)
    st = (b, c, H, P, N)
    passing = [(st, FP32), (st, FP32), (st, BF16), (st, BF16)]   # states, dstates fp32; their bf16 outputs
    later = [(st, BF16), (st, BF16),                             # states, dstates (bf16)
             ((b, H, c, Q), FP32),                               # ddt (_chunk_scan_chunk_state_bwd_dx)
             ((b, s, 1, G, N), FP32), ((b, H, c, Q), FP32),      # dB (one split), ddA_next
             ((b, s, 1, G, N), FP32), ((b, H, c, Q), FP32)]      # dC, ddA_cumsum_prev
    dcb = later + [((b, c, 1, G, Q, Q), FP32), ((b, c, G, Q, Q), FP32)]   # dcb and dcb.sum(2)
    ddacs = later + [((b, c, G, Q, Q), FP32), ((b, H, c, Q), FP32),       # dCB, ddA_prev
                     ((b, H, c, -(-Q // 32), Q), FP32)]                   # _chunk_scan_bwd_ddAcs_stable partials
    code = _bytes(*always) + max(_bytes(*passing), _bytes(*dcb), _bytes(*ddacs))
    assert mamba.mamba_backward_temp_bytes(m, T, tp, sp=False) == pytest.approx(code, rel=1e-12)


def test_one_split_at_training_sizes():
    """``_chunk_scan_bwd_dcb`` / ``_chunk_state_bwd_db`` / ``_chunk_scan_bwd_dC`` allocate ``nsplits`` fp32 copies,
    ``nsplits = ceil((H/G) / nheads_per_program)``, ``nheads_per_program = max(min(ceil(b c H / SMs), H/G), 1)``:
    one at the smallest training micro-batch here (Nano at TP 2, one 8k sequence) on the largest GPU (148 SMs)."""
    H, G, c, sms = NANO.mamba_heads // 2, NANO.mamba_num_groups // 2, 8192 // mamba.CHUNK, 148
    per_program = max(min(-(-c * H // sms), H // G), 1)
    assert -(-(H // G) // per_program) == 1


def test_ssd_forward_reproduces_its_h100_record():
    """The forward at the record's own shape on the H100 runs the record's 1.07e7 .. 1.29e7 tokens/s."""
    rec = NANO.model_copy(update=dict(mamba_num_heads=128, mamba_head_dim=64, mamba_state_dim=128,
                                      mamba_num_groups=1))
    h100 = get_gpu("h100-sxm")
    f, bwd = mamba.ssd_record_seconds(rec, 65536, 1, h100.hbm_bw, h100.name)
    assert 1.07e7 <= 65536 / f <= 1.29e7
    assert bwd == pytest.approx(mamba.SSD_BWD_OVER_FWD * f)
    # a training step: the record's price times the one calibrated factor, forward and backward alike
    tf, tb = mamba.ssd_scan_seconds(rec, 65536, 1, h100.hbm_bw, h100.name)
    assert (tf, tb) == pytest.approx((cal.MAMBA_SSD_TRAIN_FACTOR * f, cal.MAMBA_SSD_TRAIN_FACTOR * bwd))


def test_mi300x_ssd_no_faster_than_its_public_kernel():
    """The HBM ratio would make the MI300X's SSD 1.58x an H100's; the best public MI300X Mamba-2 backward kernel
    runs 1.04-1.06x; GPUs without such a record keep the HBM ratio."""
    mi, h100, b200 = get_gpu("mi300x"), get_gpu("h100-sxm"), get_gpu("b200")
    assert mi.hbm_bw / h100.hbm_bw > 1.5
    assert 1.04 <= mamba.ssd_speed_over_h100(mi.name, mi.hbm_bw) <= 1.06
    assert mamba.ssd_speed_over_h100(b200.name, b200.hbm_bw) == pytest.approx(b200.hbm_bw / mamba.SSD_REF_HBM_BW)
    f_mi, _ = mamba.ssd_scan_seconds(M370, 106496, 1, mi.hbm_bw, mi.name)
    f_h, _ = mamba.ssd_scan_seconds(M370, 106496, 1, h100.hbm_bw, h100.name)
    assert f_h / f_mi == pytest.approx(1.05)


@pytest.mark.parametrize("seqlen,ms", [(4096, 0.275), (16384, 1.085)])
def test_causal_conv1d_backward_kernel_is_bandwidth_bound(seqlen, ms):
    """The conv's backward kernel moves what ``CONV_BWD_OVER_FWD`` charges it beyond the recomputed forward (read x
    and dy, write dx: 1.5x the forward's read + write, bf16): at causal-conv1d PR #88's shape that is
    3 x 2 B x 4 x 4128 x L, which its measured time puts at 78-84 % of the card's 1.79 TB/s GDDR7 -- a
    bandwidth-bound kernel, as the model prices it (its Blackwell streaming efficiency is 73-74 %)."""
    conv_m = NANO.model_copy(update=dict(mamba_num_heads=64, mamba_head_dim=64, mamba_num_groups=1,
                                         mamba_state_dim=16))
    assert mamba.conv_channels(conv_m) == 4128
    kernel = (mamba.CONV_BWD_OVER_FWD - 1.0) * mamba.conv1d_bytes(conv_m, 4 * seqlen, 1)
    assert kernel == 3 * 2 * 4 * 4128 * seqlen
    frac = kernel / (ms * 1e-3) / 1.792e12
    assert 0.75 <= frac <= 0.90


@pytest.mark.parametrize("m,b,s,tp", CASES)
def test_ssd_gate_bytes_equal_the_code(m, b, s, tp):
    """The ``z`` gate the H100 record (no ``z``) does not carry, tensor by tensor from mamba_ssm @e9594ce
    ``ssd_chunk_scan.py``: ``_chunk_scan_fwd_kernel`` with ``HAS_Z`` also loads ``z`` and stores ``out_x`` (allocated
    ``torch.empty(batch, seqlen, nheads, headdim, dtype=x.dtype)``); ``_chunk_scan_bwd_dz_kernel`` loads ``dout``,
    ``out``, ``z`` and ``x`` (``HAS_D``: megatron-core passes ``D``) and stores ``dz`` and ``dout_x``
    (``torch.empty_like(dout)``), all bf16 ``(b, s, H, P)``."""
    H, P, *_ = _dims(m, b, s, tp)
    t = ((b, s, H, P), BF16)
    fwd, bwd = mamba.ssd_gate_bytes(m, b * s, tp)
    assert fwd == _bytes(t, t)
    assert bwd == _bytes(t, t, t, t, t, t)


def test_ssd_factor_is_its_stated_fit():
    """``calibration.MAMBA_SSD_TRAIN_FACTOR`` is what ``scripts/calibrate.py``'s bisection gives on its stated rows
    (``calibration.MAMBA_SSD_ROWS``: the two H100 Nemotron 3 Nano rows of Megatron-Bridge's 26.04.01 / 26.06 tables,
    the record's GPU), and those rows are that: H100, Nano (52 layers, 64 Mamba heads), in current_runs.json."""
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import calibrate  # noqa: E402
    import validate  # noqa: E402

    cur = {r["id"]: r for r in json.loads((Path(validate.ROOT) / "scripts/validation/current_runs.json").read_text())}
    for rid in cal.MAMBA_SSD_ROWS:
        r = cur[rid]
        assert r["hardware"]["gpu"].startswith("H100") and r["architecture"]["mamba_num_heads"] == 64
    committed = cal.MAMBA_SSD_TRAIN_FACTOR
    assert calibrate.fit_mamba_ssd_factor(validate.load_rows()) == pytest.approx(committed, rel=0.005)
    assert cal.MAMBA_SSD_TRAIN_FACTOR == committed   # the fit restores the constant
