"""The verdict's quantity: what torch's caching allocator cannot give back when an allocation fails
(``MemoryReport.oom_peak_bytes``, ``memory.verdict``).

``DeviceCachingAllocator::malloc`` (pytorch/pytorch ``c10/cuda/CUDACachingAllocator.cpp``) raises out of memory only
after ``release_cached_blocks`` has freed every stream's free cached segments and a retry failed, so FSDP2's side-stream
pools, free between their high-water marks, count in the reported reserved peak but not in the verdict.  Their size is
checked against FSDP2's buffers computed here from the Llama 3 8B shapes (torchtitan ``models/llama3`` 8B: vocab 128256,
dim 4096, 32 layers, 32 / 8 heads of 128, FFN 14336): torch ``_fsdp_collectives.py`` allocates the fp32 reduce-scatter
outputs (the sharded gradients, ``4 x params / 8``) on the reduce-scatter stream and the bf16 all-gather outputs of two
consecutive units plus the later one's bf16 copy-in shard on the all-gather copy-in stream.
"""

from __future__ import annotations

import pytest

from primus_launch.adapters.torchtitan import plan_from_text
from primus_launch.plan import Cluster
from primus_launch.projection.memory.estimate import estimate_memory, titan_args, titan_stage_parts
from primus_launch.projection.memory.legality import prefilter
from primus_launch.projection.memory.verdict import verdict
from tuner_helpers import small_dense_plan

GiB = 1024**3
_TOML = """
[model]
name = "llama3"
flavor = "8B"
[optimizer]
name = "AdamW"
lr = 8e-4
[training]
local_batch_size = 2
seq_len = 8192
[parallelism]
data_parallel_shard_degree = -1
[activation_checkpoint]
mode = "none"
[compile]
enable = true
"""


def _plan():
    return plan_from_text(_TOML, cluster=Cluster(gpu="mi300x", num_nodes=1, gpus_per_node=8))


def _fsdp2_pools_llama3_8b(shards: int = 8) -> int:
    """FSDP2's side-stream high-water marks for Llama 3 8B over ``shards`` ranks, from the shapes."""
    h, kv, ffn, vocab, layers = 4096, 8 * 128, 14336, 128256, 32
    layer = h * (2 * h + 2 * kv) + 3 * h * ffn + 2 * h  # wq wk wv wo, w1 w2 w3, two norms
    emb, head = vocab * h, vocab * h + h  # the output projection's unit holds the final norm
    total = emb + layers * layer + head
    reduce_scatter = 4 * total // shards  # every unit's fp32 sharded gradient
    copy_in = 2 * layer + 2 * head + 2 * head // shards  # last block + head flat, head's copy-in shard
    return reduce_scatter + copy_in


def test_oom_peak_leaves_out_the_free_side_stream_pools():
    plan = _plan()
    rep = estimate_memory(plan)
    st = rep.stages[0]
    (_, parts), = titan_stage_parts(*titan_args(plan))
    # at this plan's peak (the loss backward, no AC) neither side stream holds an allocation: both pools are free
    assert parts["side_pools"] == 0
    assert st.releasable_bytes == pytest.approx(_fsdp2_pools_llama3_8b(), abs=64)
    # composition: reserved = allocated + fragmentation + pools (+ outside); the verdict's quantity drops the pools
    assert st.total_bytes == st.allocated_bytes + st.allocator_reserve_bytes + st.outside_allocator_bytes
    assert rep.oom_peak_bytes == st.total_bytes - st.releasable_bytes
    assert rep.peak_bytes_per_gpu == st.total_bytes  # the reported (reserved) peak keeps them
    assert 0 < st.releasable_bytes < st.allocator_reserve_bytes  # the default stream's fragmentation stays
    out = st.outside_allocator_bytes
    assert rep.band.low_bytes == int((rep.oom_peak_bytes - out) * (1 + rep.band.low) + out)


def test_a_free_side_stream_pool_does_not_flip_the_verdict():
    plan = _plan()
    rep = estimate_memory(plan)
    b, out = rep.band, rep.stages[0].outside_allocator_bytes
    # usable memory between the band's bottom on what cannot be released and the band's bottom on the reserved peak
    held_low = (rep.oom_peak_bytes - out) * (1 + b.low) + out
    reserved_low = (rep.peak_bytes_per_gpu - out) * (1 + b.low) + out
    assert held_low < reserved_low
    usable = (held_low + reserved_low) / 2
    margin = 1 - usable / rep.capacity_bytes
    # on the reserved peak (the basis up to MEMORY.md round 17) the pools would make it "does not fit"
    assert verdict(rep.peak_bytes_per_gpu, rep.capacity_bytes, b.low, b.high, margin, outside=out) == "does not fit"
    assert estimate_memory(plan, margin=margin).verdict == "tight"
    assert prefilter(plan, margin=margin) is None  # the tuner keeps it
    # with less room than even what cannot be released, both say no
    tighter = 1 - (held_low - 0.5 * GiB) / rep.capacity_bytes
    assert estimate_memory(plan, margin=tighter).verdict == "does not fit"
    assert prefilter(plan, margin=tighter).startswith("memory:")


def test_megatron_releases_nothing_of_its_measured_reserve():
    rep = estimate_memory(small_dense_plan("megatron"))
    assert all(st.releasable_bytes == 0 for st in rep.stages)
    assert rep.oom_peak_bytes == rep.peak_bytes_per_gpu


def test_a_trial_carries_the_verdicts_quantity_its_band_is_on():
    """A tuner trial's band (``Trial.peak_band_bytes``) is the verdict's, on ``oom_peak_bytes``: the trial carries
    that quantity and the top-N table shows it beside the reported peak, which the band need not contain (free
    side-stream pools are in the peak, not in what the band is on)."""
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.tuner.result import Trial, scored_fields
    from primus_launch.report.tune_text import _memory_cell

    r = project_dry_run(_plan())
    f = scored_fields(r)
    assert f["oom_peak_bytes"] == r.memory.oom_peak_bytes < f["peak_memory_bytes"] == r.memory.peak_bytes_per_gpu
    lo, hi = f["peak_band_bytes"]
    out = r.memory.stages[0].outside_allocator_bytes
    assert lo == int((f["oom_peak_bytes"] - out) * (1 + r.memory.band.low) + out)
    t = Trial(index=0, source="seed", changes={}, status="scored", **f)
    assert f", held {f['oom_peak_bytes'] / GiB:.1f} (" in _memory_cell(t)
