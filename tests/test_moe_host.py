"""Host launches of a Megatron MoE layer (cost/moe_host.py) against megatron-core 0.16.1's own MoELayer.

One subprocess (tests/moe_host_trace.py, ~20 s: it owns a fake process group) runs the real ``MoELayer``
forward + backward under a dispatch mode for several router / dispatcher settings; the model's
per-scope kernel counts must equal the traced ones.  The TE GroupedLinear launches are checked against
TE 2.14.1's code facts (one cuBLASLt GEMM per local expert per pass) and the cited host measurement.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from primus_launch.projection.cost import evidence as ev
from primus_launch.projection.cost import moe_host

CASES = [
    # (trace config, model arguments: dispatcher, ep, fused, aux_loss, router_fp32, force_balance)
    (dict(dispatcher="alltoall", ep=2, num_experts=8, topk=2, lb="aux_loss", force_lb=True, fused=True,
          router_dtype="fp32"), ("alltoall", 2, True, True, True, True)),
    (dict(dispatcher="alltoall", ep=2, num_experts=4, topk=2, lb="aux_loss", force_lb=False, fused=True),
     ("alltoall", 2, True, True, False, False)),
    (dict(dispatcher="alltoall", ep=2, num_experts=8, topk=2, lb="none", force_lb=True, fused=True),
     ("alltoall", 2, True, False, False, True)),
    (dict(dispatcher="alltoall", ep=1, num_experts=8, topk=2, lb="aux_loss", force_lb=False, fused=True),
     ("alltoall", 1, True, True, False, False)),
    (dict(dispatcher="allgather", ep=2, num_experts=8, topk=2, lb="aux_loss", force_lb=False, fused=True),
     ("allgather", 2, True, True, False, False)),
    (dict(dispatcher="alltoall", ep=2, num_experts=8, topk=2, lb="aux_loss", force_lb=False, fused=False),
     ("alltoall", 2, False, True, False, False)),
    (dict(dispatcher="allgather", ep=2, num_experts=8, topk=2, lb="aux_loss", force_lb=False, fused=False),
     ("allgather", 2, False, True, False, False)),
    (dict(dispatcher="alltoall", ep=2, num_experts=16, topk=2, lb="aux_loss", force_lb=False, fused=True),
     ("alltoall", 2, True, True, False, False)),
]


@pytest.fixture(scope="module")
def traces() -> list[dict]:
    script = Path(__file__).with_name("moe_host_trace.py")
    out = subprocess.run([sys.executable, str(script), json.dumps([c for c, _ in CASES])], capture_output=True,
                         text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _scopes(tr: dict) -> dict[str, tuple[int, int]]:
    """Traced (forward, backward) per scope; the backward's input-grad sum ('other': the router and the
    dispatcher both read the pre-MLP norm's output) belongs to the router's count."""
    f, b = dict(tr["fwd_by_scope"]), dict(tr["bwd_by_scope"])
    b["moe_router"] = b.get("moe_router", 0) + b.pop("other", 0)
    assert "other" not in f
    return {sc: (f.get(sc, 0), b.get(sc, 0)) for sc in set(f) | set(b)}


@pytest.mark.parametrize("i", range(len(CASES)))
def test_model_counts_equal_megatron_trace(traces, i):
    cfg, args = CASES[i]
    got = moe_host.framework_kernels(*args)
    want = _scopes(traces[i])
    assert {k: v for k, v in got.items() if v != (0, 0)} == want, (cfg, got, want)


def test_counts_do_not_depend_on_local_experts(traces):
    """Fused permutation: 4 or 16 experts over EP 2 (2 or 8 local) launch the same kernels outside the experts."""
    assert _scopes(traces[1]) == _scopes(traces[-1])
    a = _scopes(traces[1])
    assert a["moe_router"] == (moe_host.ROUTER_BASE[0] + moe_host.ROUTER_AUX[0],
                               moe_host.ROUTER_BASE[1] + moe_host.ROUTER_AUX[1])


def test_te_grouped_linear_host_is_per_expert_gemms():
    """TE 2.14.1 multi_stream_cublas_gemm: one cuBLASLt GEMM per local expert; FC1 + FC2 forward = 2 E,
    backward (dgrad + wgrad) = 4 E, each at the cited per-GEMM host cost."""
    rec = ev.record("raft1736-cublaslt-launch-host")
    assert rec is not None and rec["value"] * 1e-6 == pytest.approx(moe_host.TE_GEMM_HOST_S)
    f, b = moe_host.grouped_linear_host(8, False)
    assert f == pytest.approx(16 * moe_host.TE_GEMM_HOST_S) and b == pytest.approx(32 * moe_host.TE_GEMM_HOST_S)
    f8, b8 = moe_host.grouped_linear_host(8, True)
    assert f8 > f and b8 > b
