#!/bin/bash
# Tiny GPT pre-training with megatron-core on the CPU: 2 processes over gloo through torchrun.
# A real, launchable recipe: the program is primus_launch/examples/tiny_mcore_train.py (megatron-core
# GPTModel, DistributedDataParallel, get_forward_backward_func, Adam) and takes Megatron-LM flags.
#   primus-launch -- bash recipes/megatron/tiny_gpt_cpu.sh
#   primus-launch --project recipes/megatron/tiny_gpt_cpu.sh --dry-run --launch
# The 2 local processes stand for 1 node x 2 GPUs when the recipe is projected or tuned.
# primus-launch: gpu=h100-sxm

torchrun --nnodes 1 --nproc-per-node 2 --standalone \
    -m primus_launch.examples.tiny_mcore_train \
    --num-layers 4 \
    --hidden-size 64 \
    --ffn-hidden-size 256 \
    --num-attention-heads 4 \
    --seq-length 64 \
    --max-position-embeddings 64 \
    --vocab-size 512 \
    --position-embedding-type rope \
    --normalization RMSNorm \
    --swiglu \
    --disable-bias-linear \
    --untie-embeddings-and-output-weights \
    --micro-batch-size 2 \
    --global-batch-size 8 \
    --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 2 \
    --train-iters 8 \
    --lr 3e-3 \
    --log-interval 1
