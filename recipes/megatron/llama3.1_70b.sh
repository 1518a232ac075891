#!/bin/bash
# Llama 3.1 70B pre-training with Megatron-LM on 8 nodes x 8 GPUs (64 GPUs).
# Architecture from meta-llama/Llama-3.1-70B config.json. Run on every node with NODE_RANK set
# (e.g. from SLURM_NODEID) and MASTER_ADDR pointing at node 0.
# primus-launch: gpu=h100-sxm

set -euo pipefail
export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=8
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}

# Parallelism: TP within a node, interleaved pipeline across nodes (5 layers per virtual stage)
TP=${TP:-8}
PP=${PP:-4}
LAYERS_PER_VP_STAGE=5
MBS=1
GBS=128
SEQ_LEN=8192

CHECKPOINT_DIR=${CHECKPOINT_DIR:-checkpoints/llama3.1_70b}
DATA_PREFIX=${DATA_PREFIX:-/data/llama3/tokenized_text_document}

torchrun \
    --nproc-per-node ${GPUS_PER_NODE} \
    --nnodes ${NNODES} \
    --node-rank ${NODE_RANK} \
    --master-addr ${MASTER_ADDR} \
    --master-port ${MASTER_PORT} \
    pretrain_gpt.py \
    --num-layers 80 \
    --hidden-size 8192 \
    --ffn-hidden-size 28672 \
    --num-attention-heads 64 \
    --group-query-attention \
    --num-query-groups 8 \
    --kv-channels 128 \
    --seq-length ${SEQ_LEN} \
    --max-position-embeddings 131072 \
    --position-embedding-type rope \
    --rotary-base 500000 \
    --use-rope-scaling \
    --normalization RMSNorm \
    --swiglu \
    --untie-embeddings-and-output-weights \
    --disable-bias-linear \
    --attention-dropout 0.0 \
    --hidden-dropout 0.0 \
    --tensor-model-parallel-size ${TP} \
    --pipeline-model-parallel-size ${PP} \
    --num-layers-per-virtual-pipeline-stage ${LAYERS_PER_VP_STAGE} \
    --sequence-parallel \
    --use-distributed-optimizer \
    --overlap-grad-reduce \
    --overlap-param-gather \
    --micro-batch-size ${MBS} \
    --global-batch-size ${GBS} \
    --train-iters 250000 \
    --lr 1.5e-4 \
    --min-lr 1.5e-5 \
    --lr-decay-style cosine \
    --lr-warmup-iters 2000 \
    --weight-decay 0.1 \
    --adam-beta1 0.9 \
    --adam-beta2 0.95 \
    --clip-grad 1.0 \
    --bf16 \
    --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model meta-llama/Llama-3.1-70B \
    --data-path ${DATA_PREFIX} \
    --split 99,1,0 \
    --log-interval 10 \
    --eval-interval 1000 \
    --eval-iters 10 \
    --save-interval 2000 \
    --save ${CHECKPOINT_DIR} \
    --load ${CHECKPOINT_DIR}
