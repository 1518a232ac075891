#!/bin/bash
# Qwen3-235B-A22B pre-training with Megatron-LM on 32 nodes x 8 GPUs (256 GPUs).
# Architecture from Qwen/Qwen3-235B-A22B config.json: 94 layers, hidden 4096, 64 query / 4 KV
# heads of 128, QK-norm, 128 experts top-8 of size 1536 in every layer, no shared expert,
# untied embeddings of 151936 rows.
# Layout: TP2+SP, EP16 (8 experts per GPU), 8 pipeline stages of 11/12x6/11 layers; full
# recompute, since the top-8 expert activations of 8 in-flight micro-batches do not fit in 80 GB.
# primus-launch: gpu=h100-sxm

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NUM_NODES=32
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}

CHECKPOINT_PATH=${CHECKPOINT_PATH:-checkpoints/qwen3_235b_a22b}
DATA_PATH=${DATA_PATH:-/data/qwen3/tokenized_text_document}

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --node_rank $NODE_RANK
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

MODEL_ARGS=(
    --num-layers 94
    --hidden-size 4096
    --ffn-hidden-size 12288
    --num-attention-heads 64
    --group-query-attention
    --num-query-groups 4
    --kv-channels 128
    --qk-layernorm
    --seq-length 4096
    --max-position-embeddings 40960
    --position-embedding-type rope
    --rotary-base 1000000
    --normalization RMSNorm
    --norm-epsilon 1e-6
    --swiglu
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --attention-dropout 0.0
    --hidden-dropout 0.0
)

MOE_ARGS=(
    --num-experts 128
    --moe-ffn-hidden-size 1536
    --moe-router-topk 8
    --moe-router-load-balancing-type aux_loss
    --moe-aux-loss-coeff 1e-3
    --moe-router-dtype fp32
    --moe-grouped-gemm
    --moe-token-dispatcher-type alltoall
    --moe-permute-fusion
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 2
    --sequence-parallel
    --pipeline-model-parallel-size 8
    --decoder-first-pipeline-num-layers 11
    --decoder-last-pipeline-num-layers 11
    --expert-model-parallel-size 16
    --expert-tensor-parallel-size 1
)
MODEL_PARALLEL_ARGS+=(
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 1024
    --train-iters 200000
    --recompute-granularity full
    --recompute-method uniform
    --recompute-num-layers 1
    --lr 3.0e-4
    --min-lr 3.0e-5
    --lr-decay-style cosine
    --lr-warmup-iters 2000
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --clip-grad 1.0
    --bf16
)

DATA_ARGS=(
    --tokenizer-type HuggingFaceTokenizer
    --tokenizer-model Qwen/Qwen3-235B-A22B
    --padded-vocab-size 151936
    --data-path $DATA_PATH
    --split 99,1,0
)

LOGGING_ARGS=(
    --log-interval 1
    --log-throughput
    --eval-interval 1000
    --eval-iters 10
    --save-interval 1000
    --save $CHECKPOINT_PATH
    --load $CHECKPOINT_PATH
)

torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py \
    "${MODEL_ARGS[@]}" \
    "${MOE_ARGS[@]}" \
    "${MODEL_PARALLEL_ARGS[@]}" \
    "${TRAINING_ARGS[@]}" \
    "${DATA_ARGS[@]}" \
    "${LOGGING_ARGS[@]}"
