"""Per-iteration work outside the micro-batches (cost/step_extras.py, cost/optimizer.py).

The passes over the gradient buffer are counted by running megatron-core 0.16.1's own code (installed here) on a
CPU tensor under a dispatch recorder: ``_ParamAndGradBuffer.reset`` (``zero_grad_buffer``),
``_ParamAndGradBucketGroup.start_grad_sync`` up to its collective (the NaN-check norm and the 1/DP scaling) and
``_ParamAndGradBuffer.scale_gradients`` (``finalize_model_grads`` with ``--calculate-per-token-loss``); each
``zero_`` is one pass (a write), each norm one (a read), each in-place multiply two (a read and a write).  The
scaling factors are the ones ``DistributedDataParallel.__init__`` hands the buffers (core_v0.16.1
``distributed_data_parallel.py``: 1 with per-token loss; with ``average_in_collective`` 1 for dense and
expert-DP / DP for expert buffers; else 1 / DP).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import Cluster
from primus_launch.projection.cost import step_extras
from primus_launch.projection.cost.optimizer import optimizer_bytes_per_param

torch = pytest.importorskip("torch")
pgb = pytest.importorskip("megatron.core.distributed.param_and_grad_buffer")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

_PASSES = {"zero_": 1, "linalg_vector_norm": 1, "norm": 1, "mul_": 2}


class _Passes(TorchDispatchMode):
    """Passes over tensors of ``n`` elements, by aten op (``_PASSES``)."""

    def __init__(self, n: int):
        super().__init__()
        self.n, self.passes, self.ops = n, 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if args and isinstance(args[0], torch.Tensor) and args[0].numel() == self.n and name in _PASSES:
            self.passes += _PASSES[name]
            self.ops.append(name)
        return func(*args, **(kwargs or {}))


def _megatron_passes(nan: bool, avg: bool, per_token: bool, dp: int, expert_dp: int | None) -> int:
    """Passes megatron-core's own code makes over a bucket's gradients in one iteration."""
    n = 1024
    grad = torch.ones(n)
    if per_token:
        factor = 1.0
    elif avg:
        factor = 1.0 if expert_dp is None else expert_dp / dp
    else:
        factor = 1.0 / dp
    buf = pgb._ParamAndGradBuffer.__new__(pgb._ParamAndGradBuffer)
    buf.grad_data = grad
    group = pgb._ParamAndGradBucketGroup.__new__(pgb._ParamAndGradBucketGroup)
    group.is_first_batch, group.grad_reduce_handle = False, None
    # no overlap_grad_reduce: start_grad_sync stops (AttributeError) where it would launch the collective
    group.ddp_config = SimpleNamespace(check_for_nan_in_grad=nan, check_for_large_grads=False,
                                       average_in_collective=avg)
    group.buckets = [SimpleNamespace(grad_data=grad, gradient_scaling_factor=factor)]
    with _Passes(n) as rec:
        pgb._ParamAndGradBuffer.reset(buf)                 # DistributedDataParallel.zero_grad_buffer
        with pytest.raises(AttributeError, match="overlap_grad_reduce"):
            group.start_grad_sync()
        if per_token:                                      # finalize_model_grads: scale_gradients(1 / num_tokens)
            pgb._ParamAndGradBuffer.scale_gradients(buf, 1.0 / 4096)
    return rec.passes


def _plan(*flags: str, gpus: int = 64):
    argv = ["pretrain_gpt.py", "--num-layers", "8", "--hidden-size", "1024", "--num-attention-heads", "16",
            "--seq-length", "2048", "--max-position-embeddings", "2048", "--micro-batch-size", "1",
            "--global-batch-size", "128", "--tensor-model-parallel-size", "2", "--bf16", "--vocab-size", "32000",
            "--use-distributed-optimizer", *flags]
    return plan_from_argv(argv, cluster=Cluster(gpu="h100-sxm", num_nodes=gpus // 8))


@pytest.mark.parametrize("nan", [True, False])
@pytest.mark.parametrize("avg,per_token", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("dp,expert_dp", [(8, None), (1, None), (8, 2), (8, 8)])
def test_gradient_buffer_passes_equal_megatron(nan, avg, per_token, dp, expert_dp):
    flags = (["--ddp-average-in-collective"] * avg + ["--calculate-per-token-loss"] * per_token
             + ["--no-check-for-nan-in-loss-and-grad"] * (not nan))
    plan = _plan(*flags)
    assert step_extras.grad_buffer_passes(plan, dp, expert_dp) == _megatron_passes(nan, avg, per_token, dp,
                                                                                   expert_dp)


def test_flags_read_and_defaults():
    """Megatron-LM core_v0.16.1 arguments.py defaults: --clip-grad 1.0, the NaN check on, the 1/DP pass by a
    separate kernel, the mean loss per micro-batch; fp32 gradient reduction with --bf16."""
    p = _plan()
    t = p.training
    assert (t.clip_grad, t.check_for_nan_in_grad, t.ddp_average_in_collective, t.calculate_per_token_loss) == (
        1.0, True, False, False)
    assert step_extras.grad_bytes(p) == 4 and step_extras.grad_bytes(_plan("--grad-reduce-in-bf16")) == 2
    q = _plan("--clip-grad", "0", "--no-check-for-nan-in-loss-and-grad", "--ddp-average-in-collective")
    assert (q.training.clip_grad, q.training.check_for_nan_in_grad, q.training.ddp_average_in_collective) == (
        0.0, False, True)
    assert _plan("--calculate-per-token-loss").training.calculate_per_token_loss


def test_optimizer_bytes_follow_clip_and_copy():
    """clip_grads.get_grad_norm_fp32 reads the main gradients once when --clip-grad > 0; without the
    precision-aware optimizer Megatron's _copy_main_params_to_model_params reads the fp32 master again (4 B) and
    writes bf16 (2 B, already counted); with it TE's FusedAdam writes the bf16 parameter in the kernel."""
    p = _plan()
    assert optimizer_bytes_per_param(p) == 4 + 4 + 8 + 8 + 8 + 2 + 4
    assert optimizer_bytes_per_param(_plan("--clip-grad", "0")) == optimizer_bytes_per_param(p) - 4
    pao = _plan("--use-precision-aware-optimizer")
    assert optimizer_bytes_per_param(pao) == 4 + 4 + 8 + 8 + 8 + 2


def test_step_extras_priced_in_the_iteration():
    """The NaN check's one read of the stage's gradient buffer is what the optimizer term loses without it
    (stage parameters x 4 B at the HBM rate the optimizer streams at)."""
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.projection.cost.compute import hbm_eta
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.memory.params import stage_parameter_split

    p = _plan()
    q = _plan("--no-check-for-nan-in-loss-and-grad")
    spec = get_gpu(p.cluster.gpu)
    per_gpu = stage_parameter_split(p)[0].total
    want = per_gpu * 4 / (spec.hbm_bw * hbm_eta(spec.arch)[0])
    got = project_dry_run(p).time_breakdown["optimizer"] - project_dry_run(q).time_breakdown["optimizer"]
    assert got == pytest.approx(want, rel=1e-6)
    # Megatron's DDP buffers only: not TorchTitan's FSDP2 / DDP, not Megatron FSDP
    assert not step_extras.applies(SimpleNamespace(framework="torchtitan", parallel=p.parallel))
    assert not step_extras.applies(p.with_changes(parallel={"dp_sharding": "full"}))
    assert step_extras.applies(p)


def test_scalar_collectives_follow_the_groups():
    """The gradient norm's all-reduce spans the world with the distributed optimizer (distrib_optimizer.py
    get_grad_stats_parallel_group) and TP x PP without it; --clip-grad 0 drops it."""
    from primus_launch.projection.hardware.placement import layout

    p = _plan(gpus=256)
    lay = layout(p)
    dist = step_extras.scalar_collectives_s(p, lay, last_stage=False)
    no_clip = step_extras.scalar_collectives_s(_plan("--clip-grad", "0", gpus=256), lay, last_stage=False)
    assert dist > no_clip > 0
    assert step_extras.scalar_collectives_s(p, lay, last_stage=True) > dist   # + the loss all-reduce over DP x CP


def _fsdp_src(name: str) -> str:
    import megatron.core.distributed.fsdp.src.megatron_fsdp as mf

    return (Path(mf.__file__).parent / name).read_text()


def test_megatron_fsdp_passes_follow_its_buffer_code():
    """Megatron-FSDP (megatron-core 0.16.1 ``megatron_fsdp/param_and_grad_buffer.py``): its buffer zeroes the
    rank's shard, scales a bf16 bucket by ``mul_`` (premul_sum / AVG otherwise) and has no NaN check; the plan's
    ``full`` / ``optimizer_grads`` get those passes, not DDP's (before: none at all, so a one-rank Megatron-FSDP
    plan read faster than the same run on DDP by the DDP buffer's passes)."""
    import inspect
    import re

    buf = _fsdp_src("param_and_grad_buffer.py")
    assert "check_grads" not in buf and "check_for_nan" not in buf          # no NaN / Inf pass
    zero = re.search(r"def zero_grad\(self\):(.*?)\n    def ", buf, re.S).group(1)
    assert "main_grad_buffer.data.zero_()" in zero
    pre = re.search(r"def gradient_reduce_preprocessing\(.*?\):(.*?)\n\ndef ", buf, re.S).group(1)
    assert "gradient_reduce_div_fusion and grad_data.dtype != torch.bfloat16" in pre and "grad_data.mul_" in pre
    base = _plan("--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params", gpus=8)
    assert base.parallel.dp_sharding == "full" and not step_extras.applies(base)
    assert step_extras.megatron_fsdp_passes(base) == (1.0, 0)                # fp32 grads: premul_sum
    bf16 = _plan("--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params",
                 "--grad-reduce-in-bf16", gpus=8)
    assert step_extras.megatron_fsdp_passes(bf16) == (1.0, 2)                # mul_ over the bucket
    assert step_extras.megatron_fsdp_passes(_plan(gpus=8)) == (0.0, 0)       # DDP: grad_buffer_passes instead
    assert "def megatron_fsdp_passes" in inspect.getsource(step_extras)


def test_megatron_fsdp_at_one_rank_costs_what_ddp_does_without_the_nan_check():
    """At DP 1 with fp32 gradients Megatron-FSDP zeroes its whole buffer (one pass) and DDP zeroes it and, with
    ``--no-check-for-nan-in-loss-and-grad``, nothing more (the 1 / DP scaling is skipped at factor 1): the same
    seconds; with the NaN check DDP pays one read more."""
    from primus_launch.plan import ModelArch, Parallelism, Plan, Source, Training
    from primus_launch.projection.dryrun import project_dry_run

    m = ModelArch(name="toy", num_layers=8, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8,
                  num_query_groups=8, vocab_size=32000, seq_length=2048)
    ddp = Plan(model=m, parallel=Parallelism(dp_sharding="none"),
               training=Training(global_batch_size=8, micro_batch_size=1, check_for_nan_in_grad=False),
               cluster=Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=1), source=Source(framework="megatron"))
    fsdp = ddp.with_changes(parallel={"dp_sharding": "full"})
    assert project_dry_run(ddp).iteration_time_s == pytest.approx(project_dry_run(fsdp).iteration_time_s, rel=1e-12)
    nan = ddp.with_changes(training={"check_for_nan_in_grad": True})
    assert project_dry_run(nan).iteration_time_s > project_dry_run(ddp).iteration_time_s


def test_a_negative_clip_is_no_clip():
    """Megatron-LM takes any --clip-grad (core_v0.16.1 arguments.py: type=float, no check) and computes the norm
    only 'if self.config.clip_grad > 0.0' (optimizer.py MixedPrecisionOptimizer.step / FP32Optimizer.step): a
    negative clip is read (it was refused: 'Input should be greater than or equal to 0') and priced as 0."""
    import inspect

    from megatron.core.optimizer import optimizer as mcore_optimizer

    assert "if self.config.clip_grad > 0.0:" in inspect.getsource(mcore_optimizer.MixedPrecisionOptimizer.step)
    neg, off = _plan("--clip-grad", "-1"), _plan("--clip-grad", "0")
    assert neg.training.clip_grad == -1.0
    assert optimizer_bytes_per_param(neg) == optimizer_bytes_per_param(off) < optimizer_bytes_per_param(_plan())
    lay = SimpleNamespace(tp=SimpleNamespace(gpus_per_node=8), dp=SimpleNamespace(size=32, nodes=4))
    assert step_extras.scalar_collectives_s(neg, lay, True) == step_extras.scalar_collectives_s(off, lay, True)
