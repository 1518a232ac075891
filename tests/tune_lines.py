"""Launch lines the tuner property tests share (test helper)."""

#: torchtitan 0.3.0 qwen3 30B-A3B on 2 x 8 GPUs, EP 2 x TP 4 x PP 2 interleaved, no activation checkpointing: a
#: TorchTitan MoE space with plans outside the normal form (EP taking TP ranks)
TITAN_QWEN3_MOE_LINE = [
    "torchrun", "--nnodes", "2", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "qwen3",
    "--config", "qwen3_30b_a3b", "--parallelism.expert_parallel_degree", "2",
    "--parallelism.tensor_parallel_degree", "4", "--training.disable_cuda_graphs",
    "--parallelism.pipeline_parallel_degree", "2", "--parallelism.pipeline_parallel_schedule",
    "Interleaved1F1B", "--training.local-batch-size=1", "--training.global_batch_size", "64",
    "activation-checkpoint:none"]
