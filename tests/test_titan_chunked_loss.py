"""TorchTitan memory terms checked against torchtitan 0.3.0's own step traced on the CPU (``titan_trace``):
the chunked loss (``ChunkedLossWrapper``), ``fsdp_reshard_after_forward = "never"`` without PP, and
``training.dtype = "bfloat16"`` (parameters, gradients and AdamW states in bf16); and the torchtitan 0.3
launch reader setting them."""

from __future__ import annotations

import pytest
from test_memory_titan import plan_of
from titan_trace import TitanCase, trace

from primus_launch.plan import Cluster, PlanError
from primus_launch.projection.memory.estimate import titan_args, titan_stage_memory
from primus_launch.projection.memory.titan import TITAN_CPU


def _plan(c: TitanCase):
    p = plan_of(c)
    training: dict = {}
    if c.loss_chunks > 1:
        training["loss_chunks"] = c.loss_chunks
    if c.dtype == "bfloat16":
        training.update(main_params_dtype="bf16", main_grads_dtype="bf16", exp_avg_dtype="bf16",
                        exp_avg_sq_dtype="bf16")
    changes: dict = {"training": training} if training else {}
    if c.reshard_after_forward != "default":
        changes["parallel"] = {"fsdp_reshard_after_forward": c.reshard_after_forward}
    return p.with_changes(**changes) if changes else p


CASES = {
    # the last chunk's post-backward holds the peak: lm_head's unsharded weight, its bf16 and fp32-accumulated
    # weight gradients and the reduce-scatter's input and output (Llama 3 8B head, 2,048 tokens)
    "chunks8-head": TitanCase(loss_chunks=8),
    # a chunk's loss backward holds it: one chunk's bf16 logits, fp32 log-probabilities and logits gradients
    "chunks2-logits": TitanCase(loss_chunks=2, seq=8192),
    "chunks2-mbs2-full": TitanCase(loss_chunks=2, seq=4096, mbs=2, ac="full"),
    "chunks4-tp2": TitanCase(loss_chunks=4, seq=8192, tp=2, dp_shard=4),
    "never-full": TitanCase(reshard_after_forward="never", ac="full"),
    "never-noac": TitanCase(reshard_after_forward="never"),
    "bf16-noac": TitanCase(dtype="bfloat16"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_titan_peak_matches_the_traced_step(name):
    c = CASES[name]
    got = trace(c)
    st = titan_stage_memory(*titan_args(_plan(c)), TITAN_CPU)[0]
    assert st.allocated_bytes == pytest.approx(got["peak"], rel=0.01)
    static = got["static"]
    params = sum(v for k, v in static.items() if getattr(k, "value", k) in ("Sharded Param", "Buffer"))
    opt = sum(v for k, v in static.items() if getattr(k, "value", k) == "OptState")
    assert st.parameters_bytes == pytest.approx(params, rel=1e-3)
    assert st.optimizer_bytes == pytest.approx(opt, rel=1e-4)


_LAUNCH = ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "qwen3", "--config", "qwen3_14b",
           "--training.disable_cuda_graphs"]


def test_launch_reads_the_chunked_loss_and_bf16_training():
    from primus_launch.adapters.torchtitan_argv import plan_from_launch

    cl = Cluster(gpu="b200", num_nodes=1, gpus_per_node=8)
    p = plan_from_launch(_LAUNCH + ["--training.dtype", "bfloat16"], cl)
    # qwen3_14b builds ChunkedLossWrapper with its default 8 chunks (torchtitan 0.3.0 components/loss.py)
    assert p.training.loss_chunks == 8
    assert [u.effect.split(":")[0] for u in p.source.unmodelled if u.flag == "loss"] == ["time"]  # memory modelled
    assert (p.training.main_params_dtype, p.training.exp_avg_dtype, p.training.exp_avg_sq_dtype) == ("bf16",) * 3
    with pytest.raises(PlanError, match="training.seq_len"):
        plan_from_launch(_LAUNCH + ["--training.seq_len", "4100"], cl)


@pytest.mark.parametrize("chunks", [2, 4])
def test_launch_reads_a_num_chunks_override(chunks):
    # torchtitan 0.3.0 components/loss.py: ChunkedLossWrapper.Config.num_chunks is the loss's field, set on the
    # command line as --loss.num_chunks; it was reported as not modelled while the memory used the config's 8
    from torchtitan.components.loss import ChunkedLossWrapper

    from primus_launch.adapters.torchtitan_argv import plan_from_launch

    assert ChunkedLossWrapper.Config(num_chunks=chunks).num_chunks == chunks
    cl = Cluster(gpu="b200", num_nodes=1, gpus_per_node=8)
    p = plan_from_launch(_LAUNCH + ["--loss.num_chunks", str(chunks)], cl)
    assert p.training.loss_chunks == chunks
    assert "--loss.num_chunks" not in {u.flag for u in p.source.unmodelled}


@pytest.mark.parametrize("bad", ["0", "-2", "abc"])
def test_launch_refuses_a_num_chunks_that_is_not_a_count(bad):
    # 0 divides the sequence by zero in ChunkedLossWrapper._chunk_local (seq_len % num_chunks); was read as 8
    from primus_launch.adapters.torchtitan_argv import plan_from_launch

    cl = Cluster(gpu="b200", num_nodes=1, gpus_per_node=8)
    with pytest.raises(PlanError, match="num_chunks"):
        plan_from_launch(_LAUNCH + ["--loss.num_chunks", bad], cl)
