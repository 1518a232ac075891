"""Static-shape MoE memory (memory.paged_stash) against closed forms read from megatron main's code, and the
full-iteration graph's no-second-copy premise against the installed torch."""

from __future__ import annotations

import inspect

import pytest

from primus_launch.plan import Cluster, PlanError

L, H, FE, K, SEQ, MBS = 4, 2048, 768, 8, 4096, 2
BASE = ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py",
        "--num-layers", str(L), "--hidden-size", str(H), "--ffn-hidden-size", "6144", "--num-attention-heads", "32",
        "--group-query-attention", "--num-query-groups", "4", "--kv-channels", "128", "--swiglu",
        "--normalization", "RMSNorm", "--disable-bias-linear", "--position-embedding-type", "rope",
        "--seq-length", str(SEQ), "--max-position-embeddings", str(SEQ), "--vocab-size", "151936",
        "--num-experts", "128", "--moe-ffn-hidden-size", str(FE), "--moe-router-topk", str(K),
        "--expert-model-parallel-size", "8", "--moe-grouped-gemm", "--moe-token-dispatcher-type", "flex",
        "--moe-flex-dispatcher-backend", "hybridep", "--use-transformer-engine-op-fuser",
        "--micro-batch-size", str(MBS), "--global-batch-size", "64", "--bf16", "--fp8-format", "e4m3",
        "--fp8-recipe", "mxfp8", "--use-distributed-optimizer", "--attention-dropout", "0", "--hidden-dropout", "0"]


def _stage(extra: list[str], vocab: int = 151936):
    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.projection.memory.estimate import stage_memory

    argv = [str(vocab) if a == "151936" else a for a in BASE]
    plan = plan_from_argv(argv + extra, Cluster(gpu="b200", num_nodes=1, gpus_per_node=8))
    return plan, stage_memory(plan)[0]


def _experts_in_flight() -> float:
    """The routed experts' saved tensors of one micro-batch (PP 1, no EP overlap: one in flight): per
    (token, expert) pair under MXFP8 the fc1 input (1 + 1/32 bytes per element), the SwiGLU input in bf16
    (2 x Fe) and fc2's input (1 + 1/32); ``s b k`` pairs per GPU with balanced routing."""
    qb = 1.0 + 1.0 / 32
    return L * SEQ * MBS * K * (qb * H + 2 * 2 * FE + qb * FE)


@pytest.mark.parametrize("factor", [1.2, 0.8])
def test_paged_stash_buffer_replaces_the_in_flight_experts(factor):
    """allocate_stash_buffers: |f| x the in-flight stashed tokens, the originals freed: kept + (|f| - 1) E."""
    _, eager = _stage([])
    plan, st = _stage(["--moe-expert-rank-capacity-factor", "1.5", "--moe-paged-stash",
                       "--moe-paged-stash-buffer-size-factor-cuda", str(factor)])
    assert plan.training.moe_paged_stash and plan.training.moe_paged_stash_buffer_factor == factor
    assert st.activations_bytes - eager.activations_bytes == pytest.approx((factor - 1) * _experts_in_flight(), abs=2)


def test_capacity_without_stash_keeps_the_padded_shape():
    """Without the stash the fused grouped MLP saves its max_num_tokens-row tensors: kept + (c - 1) E.  The
    MoE layer's transient (a small vocabulary so that it is the largest): the permuted tokens and the combine
    output (2 x bf16 h per pair) and the experts' gradients (bf16 2 Fe + Fe + Fe per pair) at c x the pairs."""
    _, eager = _stage([], vocab=1024)
    _, st = _stage(["--moe-expert-rank-capacity-factor", "1.5"], vocab=1024)
    assert st.activations_bytes - eager.activations_bytes == pytest.approx(0.5 * _experts_in_flight(), abs=2)
    pairs = SEQ * MBS * K
    assert st.transient_bytes - eager.transient_bytes == pytest.approx(0.5 * pairs * (2 * 2 * H + 2 * 4 * FE), abs=2)


def test_budget_and_page_rounding_closed_forms():
    from primus_launch.projection.memory.paged_stash import capacity_tokens, stash_buffer_tokens, static_moe_extra

    # _HybridEPManager.setup_metadata: int(n k c) rounded up to the alignment
    assert capacity_tokens(8191, 8, 1.5, 32) == 98304
    assert capacity_tokens(8191, 8, 1.5) == 98292
    # allocate_stash_buffers + PagedStashBuffer: int(T |f|) rounded up to whole pages
    assert stash_buffer_tokens(1000, 1.1, 64) == 1152
    assert stash_buffer_tokens(1000, -1.1, 64) == 1152
    assert static_moe_extra(10.0, 1.0, None, True) == (0.0, 0.0)
    assert static_moe_extra(10.0, 1.0, 1.5, True, 1.0) == (0.0, 1.5)


def test_torch_graph_capture_empties_the_cache_first():
    """The premise that a full-iteration graph's pool is not a second copy of the warm-up's cached blocks:
    torch.cuda.graph.__enter__ returns the cache to the device before capture_begin."""
    import torch

    src = inspect.getsource(torch.cuda.graph.__enter__)
    assert src.index("torch.cuda.empty_cache()") < src.index("capture_begin")


def test_reader_classifies_the_stash_flags():
    plan, _ = _stage(["--moe-expert-rank-capacity-factor", "1.5", "--moe-paged-stash",
                      "--moe-paged-stash-buffer-size-factor-cpu", "1.0"])
    flags = {u.flag for u in plan.source.unmodelled}
    assert "--moe-paged-stash-buffer-size-factor-cpu" in flags  # host memory: reported, not counted
    assert not flags & {"--moe-paged-stash", "--moe-expert-rank-capacity-factor"}
    with pytest.raises(PlanError, match="moe-paged-stash"):
        _stage(["--moe-paged-stash"])


@pytest.mark.parametrize("mask", [True, False])
def test_static_batch_bytes_is_what_megatron_dataset_yields(mask):
    """The full-iteration graph's static copy of a micro-batch (StaticBufferLoader clones every tensor of the
    batch dict) against the batch megatron-core 0.16.1's own MockGPTDataset yields, collated as its
    DataLoader does, with and without ``create_attention_mask``."""
    import numpy as np
    import torch
    from megatron.core.datasets.gpt_dataset import GPTDatasetConfig, MockGPTDataset, MockGPTLowLevelDataset
    from megatron.core.datasets.utils import Split

    from primus_launch.projection.memory.paged_stash import static_batch_bytes

    class _Tok:
        eod, pad, vocab_size, unique_identifiers = 0, -1, 1000, {"class": "_Tok"}

    seq, mbs = 256, 3
    cfg = GPTDatasetConfig(random_seed=1, sequence_length=seq, reset_position_ids=False, reset_attention_mask=False,
                           eod_mask_loss=False, create_attention_mask=mask, tokenizer=_Tok(), split="1,0,0")
    low = MockGPTLowLevelDataset(_Tok())
    ds = MockGPTDataset(low, "mock", np.arange(len(low)), mbs, Split.train, cfg)
    batch = torch.utils.data.default_collate([ds[i] for i in range(mbs)])
    assert ("attention_mask" in batch) is mask
    assert sum(v.nbytes for v in batch.values()) == static_batch_bytes(seq, mbs, mask)


def test_full_graph_keeps_every_micro_batch_mask():
    """Under a full-iteration graph the masks of all GBS / DP samples of the step stay on the GPU (s^2 bytes
    each); --no-create-attention-mask-in-dataloader removes exactly them, eager steps keep none."""
    full = ["--cuda-graph-impl", "local", "--cuda-graph-scope", "full_iteration"]
    plan, with_mask = _stage(full)
    assert plan.training.dataloader_attention_mask
    plan_off, without = _stage(full + ["--no-create-attention-mask-in-dataloader"])
    assert not plan_off.training.dataloader_attention_mask
    samples = 64 // 8  # GBS / DP
    assert with_mask.activations_bytes - without.activations_bytes == pytest.approx(samples * SEQ * SEQ, abs=2)
    _, eager = _stage([])
    _, eager_off = _stage(["--no-create-attention-mask-in-dataloader"])
    assert eager.activations_bytes == eager_off.activations_bytes
