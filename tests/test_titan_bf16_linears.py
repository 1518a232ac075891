"""Attention linears a TorchTitan float8 / MX converter leaves in BF16 (``filter_fqns``) are priced in BF16.

Truth: torchtitan's own ``components/quantization/utils.py`` ``module_filter_fn`` (installed 0.3.0; the same
substring rule as v0.2.1's) decides which of a block's ``attention.wq / wk / wv / wo`` FQNs a filter list keeps in
high precision; the roofline's QKV then splits into a low-precision and a BF16 GEMM of the same total width.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from primus_launch.adapters.torchtitan import plan_from_text
from primus_launch.plan import Cluster

BASE = """[model]
name = "llama4"
flavor = "17bx16e"
converters = ["quantize.linear.mx", "quantize.grouped_mm.mx"]
[training]
seq_len = 8192
local_batch_size = 1
[parallelism]
data_parallel_shard_degree = 16
expert_parallel_degree = 16
[compile]
enable = true
[quantize.linear.mx]
recipe_name = "mxfp8_cublas"
filter_fqns = FILTER
[quantize.grouped_mm.mx]
recipe_name = "mxfp8"
fqns = ["experts"]
"""
CL = Cluster(gpu="b200", num_nodes=2, gpus_per_node=8)


@pytest.mark.parametrize("filt", [["output", "router.gate", "attention.wk", "attention.wv"], ["output", "wq"],
                                  ["output", "attention"], ["output", "router.gate"], ["output", "feed_forward"]])
def test_filter_fqns_map_as_torchtitan_filters(filt):
    utils = pytest.importorskip("torchtitan.components.quantization.utils")
    p = plan_from_text(BASE.replace("FILTER", str(filt).replace("'", '"')), CL)
    linear = SimpleNamespace(in_features=5120, out_features=1024)
    kept = tuple(r for r in ("wq", "wk", "wv", "wo")
                 if not utils.module_filter_fn(linear, f"layers.3.attention.{r}", filt))
    assert p.training.bf16_linears == kept
    warned = [u.value for u in p.source.unmodelled if u.flag.endswith("filter_fqns")]
    # what the plan does not price stays a warning (feed_forward here); attention filters do not
    assert bool(warned) == ("feed_forward" in filt)


def test_qkv_splits_into_low_precision_and_bf16_gemms():
    from primus_launch.projection.cost.compute import gemm_time
    from primus_launch.projection.cost.roofline import layer_op_times

    p = plan_from_text(BASE.replace("FILTER", '["output", "router.gate", "attention.wk", "attention.wv"]'), CL)
    rows = {r[0].split(" [")[0]: r for r in layer_op_times(p)["moe"]}
    m = p.model
    T, h, d = m.seq_length, m.hidden_size, m.kv_channels
    q, kv = rows["QKV (wq)"], rows["QKV (wk, wv, bf16)"]
    assert q[4][1] != kv[4][1] and "bf16" in kv[4][1] and "mxfp8" in q[4][1]
    ratio = kv[1] / q[1]
    # the same in-situ factors apply to both rows: their ratio is the two GEMM curves' ratio
    want = gemm_time(T, 2 * m.kv_heads * d, h, "b200", "bf16", 1, "bf16") / \
        gemm_time(T, m.num_attention_heads * d, h, "b200", "bf16", 1, "mxfp8")
    assert ratio == pytest.approx(want, rel=1e-6)
    bf = plan_from_text(BASE.replace("FILTER", '["output", "router.gate"]'), CL)
    assert "QKV" in {r[0].split(" [")[0] for r in layer_op_times(bf)["moe"]}
