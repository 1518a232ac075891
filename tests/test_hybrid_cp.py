"""Context parallelism on a hybrid Mamba stack (``cost/mamba.py`` module doc, Context parallelism) against
megatron-core 0.16.1's own ``ssm/mamba_context_parallel.py``.

Truths, independent of the formulas under test:

- the framework's ``MambaContextParallel`` run on CPU for a fake CP group of size c (its ``all_to_all`` is the real
  ``tensor_parallel._AllToAll``; only ``torch.distributed.all_to_all_single`` is replaced by a local copy of equal
  size, which an equal-split all-to-all is): the scan input's width, the conv channels and groups per rank, the
  number and size of the all-to-alls in the forward and in the backward, and the tensors autograd saves (none);
- the tensors the scan saves and allocates in its backward, listed with the shapes the framework gives them on a CP
  rank (the full sequence, the rank's heads and groups), as ``tests/test_mamba_kernels.py`` lists them at cp 1;
- megatron-core's ``__init__`` asserts for the legal CP sizes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_hybrid_mamba import NANO, _plan  # noqa: E402

from primus_launch.plan import PlanError  # noqa: E402
from primus_launch.projection.cost import mamba  # noqa: E402

mcp = pytest.importorskip("megatron.core.ssm.mamba_context_parallel")

BF16, FP32 = torch.bfloat16, torch.float32
#: Nemotron 3 Super's mixer (the current_runs row: 128 heads of 64, 8 groups, state 128) beside Nano's (64 heads)
SUPER_MIXER = NANO.model_copy(update=dict(hidden_size=4096, mamba_num_heads=128))
#: (model, tp, cp): groups per TP rank above, equal to and below cp (B / C repeated over ranks)
CASES = [(NANO, 1, 2), (NANO, 2, 4), (NANO, 2, 8), (SUPER_MIXER, 1, 4), (SUPER_MIXER, 4, 4), (SUPER_MIXER, 1, 8)]


class _Group:
    def __init__(self, size: int, rank: int = 0) -> None:
        self._size, self._rank = size, rank

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank


def _mixer_cp(m, tp: int, cp: int):
    return mcp.MambaContextParallel(
        cp_group=_Group(cp), d_inner_local_tp=m.mamba_d_inner // tp, nheads_local_tp=m.mamba_heads // tp,
        ngroups_local_tp=m.mamba_num_groups // tp, d_state=m.mamba_state_dim, conv1d_cp1=None, dt_bias_cp1=None,
        A_log_cp1=None, D_cp1=None, D_has_hdim=False)


def _run(monkeypatch, m, tp: int, cp: int, l_local: int = 8, b: int = 1):
    """pre_conv_ssm then post_conv_ssm (and their backward) on one rank; returns (pre output shape, conv channels,
    groups per rank, forward all-to-all input bytes, backward ones, tensors saved for the backward)."""
    calls: list[int] = []

    def a2a_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None):
        calls.append(input.numel() * input.element_size())
        output.copy_(input)

    monkeypatch.setattr(torch.distributed, "all_to_all_single", a2a_single)
    cpm = _mixer_cp(m, tp, cp)
    w = (2 * m.mamba_d_inner + 2 * m.mamba_num_groups * m.mamba_state_dim + m.mamba_heads) // tp
    x = torch.randn(l_local, b, w, dtype=BF16, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        pre = cpm.pre_conv_ssm(x)
        y = pre[..., : cpm.d_inner_local_tpcp].contiguous()   # stands for the scan's output (its own saves apart)
        out = cpm.post_conv_ssm(y)
    fwd = list(calls)
    calls.clear()
    out.float().sum().backward()
    return pre.shape, cpm.conv1d_channels(), cpm.ngroups_local_tpcp, fwd, list(calls), saved, out.shape


@pytest.mark.parametrize("m,tp,cp", CASES)
def test_widths_and_all_to_alls_equal_megatron_core(monkeypatch, m, tp, cp):
    l_local, b = 8, 1
    pre, conv, groups, fwd, bwd, saved, out = _run(monkeypatch, m, tp, cp, l_local, b)
    assert pre[0] == cp * l_local and pre[-1] == mamba.scan_width(m, tp, cp)
    assert conv == mamba.scan_conv_channels(m, tp, cp) and groups == mamba.cp_groups(m, tp, cp)
    assert out == (l_local, b, m.mamba_d_inner // tp)
    want = mamba.cp_all_to_all_bytes(m, l_local * b, tp, cp)
    assert fwd == pytest.approx(want, rel=1e-12)              # 5 before the scan, 1 after, in that order
    assert sorted(bwd) == pytest.approx(sorted(want), rel=1e-12)   # _AllToAll.backward: the same six
    assert saved == []                                          # split / repeat / cat / all-to-all keep no tensor


def test_no_all_to_all_without_cp():
    assert mamba.cp_all_to_all_bytes(NANO, 4096, 1, 1) == [] and mamba.cp_copy_bytes(NANO, 4096, 1, 1) == 0.0
    assert mamba.scan_width(NANO, 2) == mamba.in_proj_width(NANO) / 2
    assert mamba.scan_conv_channels(NANO, 2) == mamba.conv_channels(NANO) / 2


def _bytes(*tensors) -> int:
    return sum(torch.empty(shape, dtype=dt, device="meta").nbytes for shape, dt in tensors)


def _rank_dims(m, tp: int, cp: int):
    cpm = _mixer_cp(m, tp, cp)
    H, P, N, G = cpm.nheads_local_tpcp, m.mamba_head_dim, m.mamba_state_dim, cpm.ngroups_local_tpcp
    W = 2 * cpm.d_inner_local_tpcp + 2 * G * N + H           # _ssm_training's zxBCdt after pre_conv_ssm
    return H, P, N, G, H * P, W, cpm.conv1d_channels()


@pytest.mark.parametrize("m,tp,cp", CASES)
def test_saved_tensors_on_a_cp_rank_equal_the_code(m, tp, cp):
    """As ``test_mamba_kernels.test_saved_tensors_equal_the_code``, on a CP rank: ``zxbcdt`` and ``out_x`` are the
    scan's, over the full sequence s and the rank's features; in_proj, the gated norm and out_proj see s / cp."""
    b, s = 1, 16384
    H, P, N, G, di, W, C = _rank_dims(m, tp, cp)
    T, h, dt_ = b * s // cp, m.hidden_size, m.mamba_d_inner // tp
    code = _bytes(((T, h), BF16), ((T, h), BF16), ((T,), FP32),     # in_proj: inputmat, ln_out, rsigma
                  ((b, s, W), BF16), ((b, s, H, P), BF16),         # zxbcdt, out_x (full sequence, rank's heads)
                  ((T, dt_), BF16), ((m.mamba_num_groups // tp * T,), FP32),   # RMSNormGated after post_conv_ssm
                  ((T, dt_), BF16))                                 # out_proj input
    assert mamba.mamba_activation_bytes(m, T, tp, sp=False, cp=cp) == pytest.approx(code, rel=1e-12)


@pytest.mark.parametrize("m,tp,cp", CASES)
def test_backward_temporaries_on_a_cp_rank_equal_the_code(m, tp, cp):
    """``test_mamba_kernels.test_backward_temporaries_equal_the_code``'s three moments with the scan's shapes on a
    CP rank, and the moment after it (the received gradient, the parts already sent back, z's copy + output)."""
    b, s, Q = 1, 16384, mamba.CHUNK
    H, P, N, G, di, W, C = _rank_dims(m, tp, cp)
    T, h, c = b * s // cp, m.hidden_size, -(-s // Q)
    always = [((T, h), BF16), ((b, s, di), BF16), ((b, s, C), BF16), ((b, s, W), BF16), ((b, s, C), BF16),
              ((b, s, H), BF16), ((b, H, c, Q), FP32), ((b, H, c, Q), FP32), ((b, c, G, Q, Q), FP32),
              ((b, s, H, P), BF16)]
    st = (b, c, H, P, N)
    passing = [(st, FP32), (st, FP32), (st, BF16), (st, BF16)]
    later = [(st, BF16), (st, BF16), ((b, H, c, Q), FP32), ((b, s, 1, G, N), FP32), ((b, H, c, Q), FP32),
             ((b, s, 1, G, N), FP32), ((b, H, c, Q), FP32)]
    dcb = later + [((b, c, 1, G, Q, Q), FP32), ((b, c, G, Q, Q), FP32)]
    ddacs = later + [((b, c, G, Q, Q), FP32), ((b, H, c, Q), FP32), ((b, H, c, -(-Q // 32), Q), FP32)]
    scan = _bytes(*always) + max(_bytes(*passing), _bytes(*dcb), _bytes(*ddacs))
    wt, dz = mamba.in_proj_width(m) // tp, m.mamba_d_inner // tp
    back = _bytes(((T, h), BF16),                 # the layer's output gradient
                  ((s, b, W), BF16),              # the scan input's gradient, received back in l-b-d order
                  ((T, b, wt), BF16),             # bound on the parts already sent back ([T, b, w / t] each)
                  ((T * dz,), BF16), ((T * dz,), BF16))   # z's part: _AllToAll's contiguous copy and its output
    assert mamba.mamba_backward_temp_bytes(m, T, tp, sp=False, cp=cp) == pytest.approx(max(scan, back), rel=1e-12)


def test_legal_cp_sizes_follow_megatron_core_asserts():
    """``MambaContextParallel.__init__`` asserts (heads per TP rank divisible by cp; groups per TP rank divisible by
    cp or dividing it): the plan refuses the sizes the framework would assert on, names parallel.cp (pydantic's
    ValidationError is a ValueError, as PlanError)."""
    for arch, tp, cp in ((NANO.model_copy(update=dict(mamba_num_heads=40)), 1, 16),   # 40 heads % 16
                         (NANO.model_copy(update=dict(mamba_num_heads=96, mamba_num_groups=12)), 1, 8)):  # 12 % 8
        with pytest.raises(AssertionError):
            _mixer_cp(arch, tp, cp)
        with pytest.raises((PlanError, ValueError), match="parallel.cp"):
            _plan(arch, tp=tp, cp=cp, ep=1)
        _plan(arch, tp=tp, cp=2 if cp == 16 else 4, ep=1)   # a legal size of the same model
    for _, tp, cp in CASES[:3]:
        _mixer_cp(NANO, tp, cp)    # no assert


def test_cp_prices_the_mixer_all_to_alls():
    """A hybrid plan with CP projects; the Mamba layers' all-to-alls add CP seconds the attention-only CP term
    (``cp_layer_comm``) does not hold; the scan's per-GPU work is unchanged by CP for the same tokens per rank."""
    from primus_launch.projection.cost.cp_comm import cp_layer_comm, mamba_cp_comm
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.hardware.placement import layout

    plan = _plan(cp=2).with_changes(model={"seq_length": 16384})
    res = project_dry_run(plan)
    assert res.tokens_per_sec_per_gpu > 0 and res.memory.peak_bytes_per_gpu > 0
    spec, lay = get_gpu(plan.cluster.gpu), layout(plan)
    f, b = mamba_cp_comm(plan, spec, lay)
    assert f > 0 and b == f
    assert mamba_cp_comm(_plan(), spec, layout(_plan())) == (0.0, 0.0)
    assert cp_layer_comm(plan, spec, lay)[0] > 0
    # the same tokens per rank (16k / cp 2 vs 8k / cp 1): the scan over 2 x T tokens and H / 2 heads costs the
    # same; CP adds its copies
    ops2 = {op[0]: op[1:4] for op in layer_op_times(plan)["hybrid_mamba"]}
    ops1 = {op[0]: op[1:4] for op in layer_op_times(_plan())["hybrid_mamba"]}
    ssd = next(k for k in ops1 if "SSD chunk scan" in k)
    assert ops2[ssd] == pytest.approx(ops1[ssd], rel=1e-12)
    assert any("Mamba CP copies" in k for k in ops2) and not any("Mamba CP copies" in k for k in ops1)


def test_mixer_all_to_alls_are_on_the_step_not_only_in_the_breakdown(monkeypatch):
    """The Mamba layers' CP all-to-alls run in line on the compute stream (``mamba_cp_comm``): at PP 1 the
    iteration time grows by exactly what they add to the CP component, not only the breakdown (found on re-read:
    they were in ``q.cp`` but not in the pipeline's forward / backward times)."""
    import primus_launch.projection.steps.layer as steps_layer
    from primus_launch.projection.dryrun import project_dry_run

    plan = _plan(cp=2).with_changes(model={"seq_length": 16384})
    with_a2a = project_dry_run(plan)
    monkeypatch.setattr(steps_layer, "mamba_cp_comm", lambda *a: (0.0, 0.0))
    without = project_dry_run(plan)
    added = with_a2a.time_breakdown["cp_comm"] - without.time_breakdown["cp_comm"]
    assert added > 0
    assert with_a2a.iteration_time_s - without.iteration_time_s == pytest.approx(added, rel=1e-6)
