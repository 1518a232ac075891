"""The values Megatron-LM's parser takes for its flags with ``choices`` (an argparse ``choices=`` list): a value
outside them exits with "argument --lr-decay-style: invalid choice: 'Cosine'".  Derived with
``scripts/megatron_flag_inventory.py`` from Megatron-LM's own parser (``add_megatron_arguments``) at core_r0.16.0,
main and dev (NVIDIA/Megatron-LM snapshots of 2026-08-22): each flag's choices are the union over the three, so a
value one of them takes is read.  Left out: ``--attention-backend`` (an enum the reader checks itself) and
``--exit-signal`` (a ``signal.Signals`` a name or a number selects).

Only command lines are checked (``megatron_script.args_of``): a Primus or ``--yaml-cfg`` config sets the dest without
the parser.  A misspelt choice (``Cosine``) is refused (:func:`choice_problem`); any other value outside the three
versions' choices is noted and read as written (:func:`choice_note`): real runs name values of other versions and
forks (``--optimizer aurora``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from primus_launch.plan import PlanError

#: option string -> the values its ``choices`` allow (text as written on a command line)
CHOICES: dict[str, tuple[str, ...]] = {
    "--async-strategy": ('nvrx', 'mcore'),
    "--batch-invariant-backend": ('te_native', 'deepgemm', 'triton'),
    "--bert-embedder-type": ('megatron', 'huggingface'),
    "--ckpt-convert-format": ('torch', 'torch_dist'),
    "--ckpt-format": ('torch', 'torch_dist', 'torch_dcp', 'fsdp_dtensor'),
    "--ckpt-fully-parallel-load-exchange-algo": ('broadcast', 'gather_rounds', 'gather_object'),
    "--ckpt-fully-parallel-load-process-group": ('dp', 'ep_dp'),
    "--ckpt-fully-parallel-save-process-group": ('dp', 'ep_dp'),
    "--cp-partition-mode": ('zigzag', 'contiguous'),
    "--cross-entropy-fusion-impl": ('native', 'te', 'linear'),
    "--cuda-graph-impl": ('none', 'local', 'transformer_engine', 'full_iteration'),
    "--data-parallel-sharding-strategy": ('no_shard', 'optim', 'optim_grads', 'optim_grads_params'),
    "--dataloader-type": ('single', 'cyclic', 'external'),
    "--dist-ckpt-strictness": ('assume_ok_unexpected', 'log_unexpected', 'log_all', 'raise_unexpected', 'raise_all', 'return_unexpected', 'return_all', 'ignore_all'),
    "--distributed-backend": ('nccl', 'gloo'),
    "--dsa-kernel-backend": ('none', 'tilelang', 'cudnn'),
    "--empty-unused-memory-level": ('0', '1', '2'),
    "--error-injection-type": ('correct_result', 'transient_error', 'persistent_error'),
    "--exp-avg-dtype": ('fp32', 'fp16', 'bf16', 'fp8'),
    "--exp-avg-sq-dtype": ('fp32', 'fp16', 'bf16', 'fp8'),
    "--experimental-attention-variant": ('gated_delta_net', 'dsa', 'gdn', 'gdn2', 'dsv4_hybrid'),
    "--flash-attention-version": ('2', '3', '4'),
    "--fp4-format": ('e2m1',),
    "--fp4-recipe": ('nvfp4', 'custom'),
    "--fp8-amax-compute-algo": ('most_recent', 'max'),
    "--fp8-format": ('e4m3', 'hybrid'),
    "--fp8-recipe": ('tensorwise', 'delayed', 'mxfp8', 'blockwise', 'custom'),
    "--inference-cuda-graph-scope": ('none', 'layer', 'block'),
    "--inference-dynamic-batching-async-sched-mode": ('legacy', 'async', 'serial'),
    "--inference-dynamic-batching-cuda-graph-sizing-distribution": ('exponential', 'linear'),
    "--inference-dynamic-batching-logprobs-mode": ('raw_logprobs', 'processed_logprobs'),
    "--inference-dynamic-batching-prefix-caching-coordinator-policy": ('longest_prefix', 'first_prefix_block', 'load_balanced', 'round_robin'),
    "--inference-dynamic-batching-prefix-caching-eviction-policy": ('ref_zero', 'lru'),
    "--inference-dynamic-batching-sampling-backend": ('torch', 'flashinfer'),
    "--inference-dynamic-batching-unified-memory-level": ('0', '1'),
    "--inference-grouped-gemm-backend": ('flashinfer', 'torch', 'vllm'),
    "--inference-moe-token-dispatcher-type": ('nccl', 'nvls'),
    "--inprocess-granularity": ('node', 'rank'),
    "--kitchen-attention-backend": ('sdpa', 'fa'),
    "--langrl-inference-server-type": ('inplace_megatron', 'inplace_megatron_chat'),
    "--logits-save-dtype": ('fp16', 'bf16', 'fp32'),
    "--lr-decay-style": ('constant', 'linear', 'cosine', 'inverse-square-root', 'WSD'),
    "--lr-wsd-decay-style": ('exponential', 'linear', 'cosine', 'minus_sqrt'),
    "--main-grads-dtype": ('fp32', 'bf16'),
    "--main-params-dtype": ('fp32', 'fp16'),
    "--mamba-inference-conv-states-dtype": ('bf16', 'fp16', 'fp32'),
    "--mamba-inference-ssm-states-dtype": ('bf16', 'fp16', 'fp32'),
    "--mamba-training-ssm-states-dtype": ('fp32', 'bf16'),
    "--mask-type": ('random', 'row'),
    "--megatron-fsdp-grad-comm-dtype": ('fp32', 'fp16', 'bf16', 'auto'),
    "--megatron-fsdp-main-grads-dtype": ('fp32', 'bf16', 'fp16', 'auto'),
    "--megatron-fsdp-main-params-dtype": ('fp32', 'bf16', 'fp16', 'auto'),
    "--megatron-fsdp-version": ('1', '2'),
    "--moe-combine-bwd-dtype": ('bf16', 'mxfp8'),
    "--moe-dispatch-fwd-dtype": ('bf16', 'mxfp8'),
    "--moe-flex-dispatcher-backend": ('deepep', 'hybridep', 'ncclep', 'deepepv2'),
    "--moe-router-dtype": ('fp32', 'fp64'),
    "--moe-router-load-balancing-type": ('aux_loss', 'seq_aux_loss', 'global_aux_loss', 'sinkhorn', 'none', 'quantile_balancing'),
    "--moe-router-score-function": ('softmax', 'sigmoid', 'sqrtsoftplus'),
    "--moe-token-dispatcher-type": ('allgather', 'alltoall', 'flex'),
    "--moe-token-drop-policy": ('probs', 'position'),
    "--muon-fp32-matmul-prec": ('low', 'medium', 'high'),
    "--muon-scalar-optimizer": ('adam', 'lion'),
    "--muon-scale-mode": ('spectral', 'unit_rms_norm', 'shape_scaling'),
    "--muon-tp-mode": ('blockwise', 'duplicated', 'distributed'),
    "--no-weight-decay-cond-type": ('apply_wd_to_qk_layernorm',),
    "--non-persistent-ckpt-type": ('global', 'local', 'in_memory'),
    "--non-persistent-local-ckpt-algo": ('fully_parallel', 'atomic'),
    "--normalization": ('LayerNorm', 'RMSNorm'),
    "--optimizer": ('adam', 'sgd', 'muon', 'dist_muon', 'lion', 'soap', 'adaptive_muon'),
    "--outer-dp-sharding-strategy": ('no_shard', 'optim'),
    "--output-logit-dtype": ('bf16', 'fp32'),
    "--pipeline-model-parallel-comm-backend": ('nccl', 'ucc'),
    "--position-embedding-type": ('learned_absolute', 'rope', 'mrope', 'relative', 'none', 'yarn'),
    "--recompute-granularity": ('full', 'selective'),
    "--recompute-method": ('uniform', 'block'),
    "--refit-method": ('nccl', 'gloo', 'nvshmem'),
    "--rerun-mode": ('disabled', 'validate_results', 'report_stats'),
    "--rl-consumption-granularity": ('R', 'G', 'B'),
    "--rl-inference-model-unified-memory-level": ('0', '1'),
    "--rl-kv-cache-management-mode": ('persist', 'offload', 'recompute'),
    "--rl-sequence-packing-algo": ('fifo', 'round-robin'),
    "--rl-submission-granularity": ('R', 'G', 'B'),
    "--rope-type": ('rope', 'yarn'),
    "--sequence-packing-scheduler": ('dp_balanced', 'default_dynamic_cp'),
    "--sharp-enabled-group": ('dp', 'dp_replica'),
    "--softmax-type": ('vanilla', 'off-by-one', 'learnable'),
    "--swin-backbone-type": ('tiny', 'base', 'h3'),
    "--symmetric-ar-type": ('two_shot', 'one_shot', 'multimem_all_reduce'),
    "--thd-tail-padding-policy": ('append_dummy_seq', 'extend_last'),
    "--tiktoken-pattern": ('v1', 'v2'),
    "--timing-log-level": ('0', '1', '2'),
    "--timing-log-option": ('max', 'minmax', 'all'),
    "--tokenizer-type": ('BertWordPieceLowerCase', 'BertWordPieceCase', 'GPT2BPETokenizer', 'SentencePieceTokenizer', 'GPTSentencePieceTokenizer', 'HuggingFaceTokenizer', 'Llama2Tokenizer', 'TikTokenizer', 'MultimodalTokenizer', 'NullTokenizer', 'NullMultimodalTokenizer', 'SFTTokenizer'),
    "--tp-comm-bootstrap-backend": ('nccl', 'mpi', 'gloo'),
    "--transformer-impl": ('local', 'transformer_engine', 'inference_optimized'),
    "--vision-backbone-type": ('vit', 'mit', 'swin'),
    "--vision-pretraining-type": ('classify', 'inpaint', 'dino'),
    "--weight-decay-incr-style": ('constant', 'linear', 'cosine'),
}
#: flags whose value is converted with ``int`` before it is checked against the choices
INT_CHOICES = frozenset({"--flash-attention-version", "--empty-unused-memory-level", "--megatron-fsdp-version",
                         "--rl-inference-model-unified-memory-level", "--timing-log-level",
                         "--inference-dynamic-batching-unified-memory-level"})


def _norm(v: str) -> str:
    return v.strip().lower().replace("-", "_")


def _outside(flag: str, values: list[str]) -> tuple[str, tuple[str, ...]] | None:
    """(the first of ``values`` outside ``flag``'s choices, the choices), else None."""
    allowed = CHOICES.get(flag)
    if allowed is None:
        return None
    for v in values:
        if flag in INT_CHOICES:
            try:
                ok = str(int(v.strip())) in allowed
            except ValueError:
                ok = False
        else:
            ok = v in allowed
        if not ok:
            return v, allowed
    return None


def choice_problem(flag: str, values: list[str]) -> PlanError | None:
    """The one-line refusal (:class:`~primus_launch.plan.PlanError`) of a value a command line gives ``flag`` (its
    canonical option string) that misspells one of its choices (``Cosine``, ``torch-dist``: case, ``-`` for ``_``):
    no Megatron-LM version takes it, argparse exits with "invalid choice"; else None."""
    hit = _outside(flag, values)
    if hit is None:
        return None
    v, allowed = hit
    near = [c for c in allowed if _norm(c) == _norm(v)]
    if not near:
        return None
    from primus_launch.plan import PlanError

    return PlanError(flag, v, f"one of {', '.join(allowed)} (Megatron-LM's parser refuses any other: 'invalid "
                              f"choice'); did you mean {near[0]}?")


def choice_note(flag: str, values: list[str]) -> str | None:
    """A note for a value outside ``flag``'s choices in core_r0.16.0 / main / dev that misspells none of them
    (``--optimizer aurora`` of a research branch, ``--main-params-dtype bf16`` of a NeMo-era run): another version or
    fork may take it, so it is read as written and said."""
    hit = _outside(flag, values)
    if hit is None or choice_problem(flag, values) is not None:
        return None
    v, allowed = hit
    return (f"{flag} {v}: not among its choices in Megatron-LM core_r0.16.0 / main / dev ({', '.join(allowed)}), "
            "where the parser exits with 'invalid choice'; read as written (another version or fork may take it)")
