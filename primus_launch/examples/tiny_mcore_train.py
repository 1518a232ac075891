"""A tiny, real megatron-core GPT pretraining run on the CPU (gloo), driven by Megatron-LM flags.

Run it like Megatron-LM's ``pretrain_gpt.py``::

    torchrun --nnodes 1 --nproc-per-node 2 primus_launch/examples/tiny_mcore_train.py \\
        --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 \\
        --micro-batch-size 2 --global-batch-size 8 --tensor-model-parallel-size 1 \\
        --pipeline-model-parallel-size 2 --train-iters 5 --lr 3e-3

Everything that trains is megatron-core's own: ``parallel_state.initialize_model_parallel``
(TP/PP/DP groups), ``GPTModel`` built from ``get_gpt_layer_local_spec``, megatron's
``DistributedDataParallel`` (gradient buffers, DP all-reduce through ``finalize_model_grads``),
``get_forward_backward_func`` (no-pipelining or 1F1B schedule with p2p), ``get_megatron_optimizer``
(Adam, gradient clipping) and ``OptimizerParamScheduler``.  The CUDA assumptions of megatron-core
0.16.1 are removed by :mod:`primus_launch.frameworks.mcore_cpu`.

Data is synthetic and learnable: each sample is an affine recurrence ``t[i+1] = (a*t[i] + c) mod V``
from a random start, so the loss falls from about ``ln V`` as the model learns the bigram map.
Samples are drawn from a generator seeded by ``(seed, global sample index)``, so every TP rank and
both ends of the pipeline see the same micro-batch and each DP rank its own slice of the batch.

Each iteration prints one line in Megatron-LM's ``training_log`` format (``iteration  k/  N |
... | lm loss: ... | grad norm: ... |``) from the last pipeline stage's first DP/TP rank.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from functools import partial
from typing import Iterator, Optional

import torch


# megatron-core announces each missing optional CUDA library (Apex, Transformer Engine) once per
# module and process; on a CPU run they are expected, so keep the training log readable.
warnings.filterwarnings("ignore", message=r".*(Apex|Transformer Engine|TransformerEngine).*")


#: the device this program trains on (gloo process groups, CPU tensors): read by primus-launch's reader
#: (``adapters/program_limits.py``) so that a tuned recipe asks nothing of it a CPU cannot run
DEVICE = "cpu"


def build_parser() -> argparse.ArgumentParser:
    """The Megatron-LM arguments this program honours (names and defaults from
    ``megatron/training/arguments.py``, except dropout defaults which are 0 here)."""
    ap = argparse.ArgumentParser(prog="tiny_mcore_train", allow_abbrev=False,
                                 description="tiny megatron-core GPT training on CPU (gloo)")
    g = ap.add_argument_group("model")
    g.add_argument("--num-layers", type=int, required=True)
    g.add_argument("--hidden-size", type=int, required=True)
    g.add_argument("--ffn-hidden-size", type=int, default=None, help="default 4 x hidden")
    g.add_argument("--num-attention-heads", type=int, required=True)
    g.add_argument("--group-query-attention", action="store_true")
    g.add_argument("--num-query-groups", type=int, default=1)
    g.add_argument("--kv-channels", type=int, default=None)
    g.add_argument("--seq-length", type=int, required=True)
    g.add_argument("--max-position-embeddings", type=int, default=None)
    g.add_argument("--vocab-size", type=int, default=512, help="synthetic tokenizer vocabulary")
    g.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    g.add_argument("--swiglu", action="store_true")
    g.add_argument("--disable-bias-linear", action="store_true")
    g.add_argument("--untie-embeddings-and-output-weights", action="store_true")
    g.add_argument("--normalization", choices=["LayerNorm", "RMSNorm"], default="LayerNorm")
    g.add_argument("--position-embedding-type", choices=["learned_absolute", "rope"], default="learned_absolute")
    g.add_argument("--hidden-dropout", type=float, default=0.0)
    g.add_argument("--attention-dropout", type=float, default=0.0)
    g.add_argument("--num-experts", type=int, default=None)
    g.add_argument("--moe-router-topk", type=int, default=2)
    g.add_argument("--moe-ffn-hidden-size", type=int, default=None)
    g = ap.add_argument_group("parallelism")
    g.add_argument("--tensor-model-parallel-size", type=int, default=1)
    g.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    g.add_argument("--expert-model-parallel-size", type=int, default=1)
    g.add_argument("--context-parallel-size", type=int, default=1)
    g.add_argument("--sequence-parallel", action="store_true")
    g.add_argument("--use-distributed-optimizer", action="store_true")
    g.add_argument("--overlap-grad-reduce", action="store_true")
    g.add_argument("--overlap-param-gather", action="store_true")
    g.add_argument("--recompute-granularity", choices=["full", "selective"], default=None)
    g.add_argument("--recompute-method", choices=["uniform", "block"], default=None)
    g.add_argument("--recompute-num-layers", type=int, default=None)
    g = ap.add_argument_group("training")
    g.add_argument("--micro-batch-size", type=int, required=True)
    g.add_argument("--global-batch-size", type=int, required=True)
    g.add_argument("--train-iters", type=int, required=True)
    g.add_argument("--lr", type=float, default=3e-3)
    g.add_argument("--min-lr", type=float, default=0.0)
    g.add_argument("--lr-decay-style", choices=["constant", "linear", "cosine"], default="constant")
    g.add_argument("--lr-warmup-iters", type=int, default=0)
    g.add_argument("--weight-decay", type=float, default=0.01)
    g.add_argument("--clip-grad", type=float, default=0.0,
                   help="0 = off (default here: megatron-core 0.16.1 clip_grads.py asserts CUDA grads when "
                        "it actually clips); the grad norm is logged either way")
    g.add_argument("--adam-beta1", type=float, default=0.9)
    g.add_argument("--adam-beta2", type=float, default=0.999)
    g.add_argument("--seed", type=int, default=1234)
    g.add_argument("--log-interval", type=int, default=1)
    g.add_argument("--threads", type=int, default=None, help="torch threads per process (default: OMP_NUM_THREADS)")
    return ap


#: flags that change memory or speed but not the maths of a step, which megatron-core 0.16.1 cannot
#: honour on a CPU; the run says so at start-up and trains without them (same losses).
NOT_ON_CPU = {
    "use_distributed_optimizer": "DistributedOptimizer accepts only torch.cuda tensors "
                                 "(optimizer/distrib_optimizer.py _build_model_and_main_param_groups)",
    "overlap_param_gather": "needs the distributed optimizer",
    "recompute_granularity": "activation checkpointing saves the CUDA RNG state "
                             "(tensor_parallel/random.py CheckpointFunction)",
    "sequence_parallel": "needs a LayerNorm with sequence_parallel support (TE/Apex), not torch's",
}


def cpu_adjustments(args: argparse.Namespace) -> list[str]:
    """Turn off the :data:`NOT_ON_CPU` flags that were given; return one notice per flag."""
    notes = []
    for dest, why in NOT_ON_CPU.items():
        if getattr(args, dest):
            notes.append(f"--{dest.replace('_', '-')} not applied on CPU: {why}")
            setattr(args, dest, None if dest == "recompute_granularity" else False)
    if args.recompute_granularity is None:
        args.recompute_method = args.recompute_num_layers = None
    return notes


def padded_vocab(vocab: int, divisible_by: int, tp: int) -> int:
    """Megatron ``_vocab_size_with_padding``: round up to a multiple of ``divisible_by * tp``."""
    m = divisible_by * tp
    return -(-vocab // m) * m


def synthetic_sample(index: int, seq_length: int, vocab: int, seed: int) -> torch.Tensor:
    """``seq_length + 1`` tokens of ``t[i+1] = (a*t[i] + c) mod vocab`` from a seeded random start."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + index)
    start = int(torch.randint(0, vocab, (1,), generator=g))
    a, c = 5, 3  # a coprime-ish affine map: every token has exactly one successor
    out = torch.empty(seq_length + 1, dtype=torch.long)
    t = start
    for i in range(seq_length + 1):
        out[i] = t
        t = (a * t + c) % vocab
    return out


def batches(args: argparse.Namespace, dp_rank: int, dp_size: int, num_microbatches: int,
            ) -> Iterator[dict[str, torch.Tensor]]:
    """Micro-batches of this DP rank, iteration after iteration (global sample index order)."""
    mbs, s = args.micro_batch_size, args.seq_length
    it = 0
    position_ids = torch.arange(s).unsqueeze(0).expand(mbs, -1)
    while True:
        for mb in range(num_microbatches):
            first = it * args.global_batch_size + (dp_rank * num_microbatches + mb) * mbs
            rows = torch.stack([synthetic_sample(first + j, s, args.vocab_size, args.seed) for j in range(mbs)])
            yield {"tokens": rows[:, :-1].contiguous(), "labels": rows[:, 1:].contiguous(),
                   "loss_mask": torch.ones(mbs, s), "position_ids": position_ids}
        it += 1


def loss_func(loss_mask: torch.Tensor, output_tensor: torch.Tensor):
    """Token-summed loss with its token count (megatron ``pretrain_gpt.loss_func`` convention:
    the schedule divides by the count and the number of micro-batches)."""
    losses = output_tensor.float().view(-1)
    mask = loss_mask.view(-1).float()
    loss = torch.sum(losses * mask)
    num_tokens = mask.sum().to(torch.int)
    report = torch.stack([loss.detach(), mask.sum()])
    return loss, num_tokens, {"lm loss": report}


def forward_step(data_iterator, model):
    from primus_launch.frameworks.mcore_cpu import causal_mask

    batch = next(data_iterator)
    s = batch["tokens"].shape[1]
    mask = causal_mask(s).view(1, 1, s, s)
    out = model(batch["tokens"], batch["position_ids"], mask, labels=batch["labels"])
    return out, partial(loss_func, batch["loss_mask"])


def _optimizer_on_cpu() -> None:
    """megatron-core 0.16.1's optimizer wrappers allocate their loss-scale / norm scalars with
    ``device='cuda'`` (optimizer/optimizer.py ``FP32Optimizer.__init__``, optimizer/clip_grads.py
    ``get_grad_norm_fp32``, utils.py ``local_multi_tensor_l2_norm``); :func:`mcore_cpu.install` does not cover these modules yet, so route
    their tensor factories to the CPU with the same proxy it uses for the pipeline schedules."""
    import megatron.core.optimizer.clip_grads as clip_grads
    import megatron.core.optimizer.optimizer as optimizer_mod
    import megatron.core.utils as mcore_utils

    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.route_factories_to_cpu((optimizer_mod, clip_grads, mcore_utils))


def _init_distributed() -> tuple[int, int]:
    import torch.distributed as dist

    from primus_launch.frameworks import mcore_cpu

    if "WORLD_SIZE" in os.environ and "RANK" in os.environ:
        dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    else:
        mcore_cpu.init_single_process()
    return dist.get_rank(), dist.get_world_size()


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.context_parallel_size != 1:
        raise SystemExit("tiny_mcore_train: --context-parallel-size > 1 needs Transformer Engine attention "
                         "(not available on CPU)")
    if args.pipeline_model_parallel_size > 1 and not args.untie_embeddings_and_output_weights:
        raise SystemExit("tiny_mcore_train: pipeline parallelism on CPU needs "
                         "--untie-embeddings-and-output-weights (megatron-core moves the tied word "
                         "embedding with .cuda(): language_module.py setup_embeddings_and_output_layer)")
    if args.num_experts and not args.disable_bias_linear and args.expert_model_parallel_size == 1:
        raise SystemExit("tiny_mcore_train: MoE with linear biases at expert-parallel size 1 fails in "
                         "megatron-core 0.16.1 (transformer/mlp.py:247 in-place add on a view); "
                         "pass --disable-bias-linear")
    notes = cpu_adjustments(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    import torch.distributed as dist
    import torch.nn.functional as F

    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install()
    rank, world = _init_distributed()
    tp, pp, ep = args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.expert_model_parallel_size
    if world % (tp * pp):
        raise SystemExit(f"tiny_mcore_train: tp*pp={tp * pp} must divide world size {world}")
    dp = world // (tp * pp)
    if args.global_batch_size % (args.micro_batch_size * dp):
        raise SystemExit(f"tiny_mcore_train: global batch {args.global_batch_size} must be divisible by "
                         f"micro batch x dp = {args.micro_batch_size} x {dp}")
    num_microbatches = args.global_batch_size // (args.micro_batch_size * dp)

    from megatron.core import parallel_state as ps
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig, finalize_model_grads
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.transformer.transformer_config import TransformerConfig

    ps.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                                 expert_model_parallel_size=ep)
    mcore_cpu.seed_rng_tracker(args.seed)

    cfg = TransformerConfig(
        num_layers=args.num_layers, hidden_size=args.hidden_size,
        ffn_hidden_size=args.ffn_hidden_size or 4 * args.hidden_size,
        num_attention_heads=args.num_attention_heads,
        num_query_groups=args.num_query_groups if args.group_query_attention else None,
        kv_channels=args.kv_channels, hidden_dropout=args.hidden_dropout,
        attention_dropout=args.attention_dropout, normalization=args.normalization,
        gated_linear_unit=args.swiglu, activation_func=F.silu if args.swiglu else F.gelu,
        add_bias_linear=not args.disable_bias_linear,
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, expert_model_parallel_size=ep,
        pipeline_dtype=torch.float32, params_dtype=torch.float32,
        num_moe_experts=args.num_experts, moe_router_topk=args.moe_router_topk,
        moe_ffn_hidden_size=args.moe_ffn_hidden_size,
        recompute_granularity=args.recompute_granularity, recompute_method=args.recompute_method,
        recompute_num_layers=args.recompute_num_layers,
        **mcore_cpu.config_overrides())
    model = GPTModel(
        cfg, get_gpt_layer_local_spec(num_experts=args.num_experts, normalization=args.normalization),
        vocab_size=padded_vocab(args.vocab_size, args.make_vocab_size_divisible_by, tp),
        max_sequence_length=args.max_position_embeddings or args.seq_length,
        pre_process=ps.is_pipeline_first_stage(), post_process=ps.is_pipeline_last_stage(),
        share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
        position_embedding_type=args.position_embedding_type)
    ddp_cfg = DistributedDataParallelConfig(grad_reduce_in_fp32=False, overlap_grad_reduce=args.overlap_grad_reduce,
                                            overlap_param_gather=args.overlap_param_gather,
                                            use_distributed_optimizer=args.use_distributed_optimizer)
    model = DistributedDataParallel(cfg, ddp_cfg, model)
    cfg.finalize_model_grads_func = finalize_model_grads
    cfg.no_sync_func = model.no_sync

    opt_cfg = OptimizerConfig(optimizer="adam", lr=args.lr, min_lr=args.min_lr, weight_decay=args.weight_decay,
                              adam_beta1=args.adam_beta1, adam_beta2=args.adam_beta2, clip_grad=args.clip_grad,
                              bf16=False, fp16=False, params_dtype=torch.float32,
                              use_distributed_optimizer=args.use_distributed_optimizer)
    _optimizer_on_cpu()
    optimizer = get_megatron_optimizer(opt_cfg, [model])
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=0.0 if args.lr_warmup_iters else args.lr, max_lr=args.lr, min_lr=args.min_lr,
        lr_warmup_steps=args.lr_warmup_iters, lr_decay_steps=args.train_iters, lr_decay_style=args.lr_decay_style,
        start_wd=args.weight_decay, end_wd=args.weight_decay, wd_incr_steps=args.train_iters,
        wd_incr_style="constant")

    n_params = sum(p.numel() for p in model.parameters())
    reporter = (ps.is_pipeline_last_stage() and ps.get_tensor_model_parallel_rank() == 0
                and ps.get_data_parallel_rank() == 0)
    if rank == 0:
        print(f"tiny_mcore_train: world {world} = TP {tp} x PP {pp} x DP {dp}, {num_microbatches} micro-batches "
              f"of {args.micro_batch_size} x {args.seq_length} tokens, {n_params:,} parameters on rank 0 "
              f"(megatron-core GPTModel, gloo, CPU)", flush=True)
        for note in notes:
            print(f"tiny_mcore_train: note: {note}", file=sys.stderr, flush=True)
    dist.barrier()

    data = batches(args, ps.get_data_parallel_rank(), dp, num_microbatches)
    forward_backward = get_forward_backward_func()
    last_loss = math.nan
    for it in range(1, args.train_iters + 1):
        t0 = time.perf_counter()
        model.zero_grad_buffer()
        optimizer.zero_grad()
        losses = forward_backward(forward_step_func=forward_step, data_iterator=data, model=[model],
                                  num_microbatches=num_microbatches, seq_length=args.seq_length,
                                  micro_batch_size=args.micro_batch_size, forward_only=False)
        ok, grad_norm, _ = optimizer.step()
        if grad_norm is None:  # no clipping: megatron's own norm (TP-deduplicated, model-parallel reduced)
            grad_norm = optimizer.get_grad_norm()
        scheduler.step(increment=1)
        # loss over the whole global batch: token-weighted, summed over micro-batches and DP ranks
        if ps.is_pipeline_last_stage():
            tot = torch.stack([x["lm loss"] for x in losses]).sum(0)
            dist.all_reduce(tot, group=ps.get_data_parallel_group())
            last_loss = float(tot[0] / tot[1])
        ms = (time.perf_counter() - t0) * 1e3
        if reporter and (it % args.log_interval == 0 or it == args.train_iters):
            print(f" iteration {it:8d}/{args.train_iters:8d} | consumed samples: {it * args.global_batch_size:12d}"
                  f" | elapsed time per iteration (ms): {ms:.1f} | learning rate: "
                  f"{optimizer.param_groups[0]['lr']:.6E} | global batch size: {args.global_batch_size:5d} | "
                  f"lm loss: {last_loss:.6E} | grad norm: {float(grad_norm or 0.0):.3f} | "
                  f"number of skipped iterations: {0 if ok else 1:3d} |", flush=True)
        if reporter and not math.isfinite(last_loss):
            print(f"tiny_mcore_train: loss is {last_loss} at iteration {it}", file=sys.stderr, flush=True)
            return 1
    if reporter:
        print(f"tiny_mcore_train: done, {args.train_iters} iterations, final lm loss {last_loss:.4f}", flush=True)
    dist.barrier()
    ps.destroy_model_parallel()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
