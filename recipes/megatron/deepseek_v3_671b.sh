#!/bin/bash
# DeepSeek-V3 671B (37B active) pre-training with Megatron-LM on 128 nodes x 8 GPUs (1024 GPUs).
# Architecture from deepseek-ai/DeepSeek-V3 config.json: 61 layers (first 3 dense), MLA
# (q_lora 1536, kv_lora 512, qk 128+64 rope, v 128), 256 routed experts top-8 + 1 shared expert,
# sigmoid router with expert bias (aux-loss-free balancing), node-limited routing (8 groups, 4).
# Layout: TP2+SP, EP64 (4 experts per GPU), 16 pipeline stages with 3 layers on the first stage
# (embedding + the dense layers) and 2 on the last (output head), 4 layers on each other stage.
# Multi-token prediction (--mtp-num-layers) is left off.
# primus-launch: gpu=h100-sxm

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=${NNODES:-128}
NODE_RANK=${NODE_RANK:-${SLURM_NODEID:-0}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}

TP=2
PP=16
EP=64
ETP=1
MBS=1
GBS=4096
SEQ_LEN=4096

OUTPUT_DIR=${OUTPUT_DIR:-output/deepseek_v3_671b}
DATA_PATH=${DATA_PATH:-/data/deepseek_v3/tokenized_text_document}

MODEL_ARGS="\
    --num-layers 61 \
    --hidden-size 7168 \
    --ffn-hidden-size 18432 \
    --num-attention-heads 128 \
    --seq-length ${SEQ_LEN} \
    --max-position-embeddings 163840 \
    --position-embedding-type rope \
    --rotary-base 10000 \
    --rotary-scaling-factor 40 \
    --mscale 1.0 \
    --mscale-all-dim 1.0 \
    --normalization RMSNorm \
    --norm-epsilon 1e-6 \
    --swiglu \
    --untie-embeddings-and-output-weights \
    --disable-bias-linear \
    --attention-dropout 0.0 \
    --hidden-dropout 0.0 \
    --init-method-std 0.006"

MLA_ARGS="\
    --multi-latent-attention \
    --q-lora-rank 1536 \
    --kv-lora-rank 512 \
    --qk-head-dim 128 \
    --qk-pos-emb-head-dim 64 \
    --v-head-dim 128 \
    --qk-layernorm"

MOE_ARGS="\
    --num-experts 256 \
    --moe-layer-freq ([0]*3+[1]*58) \
    --moe-ffn-hidden-size 2048 \
    --moe-shared-expert-intermediate-size 2048 \
    --moe-router-topk 8 \
    --moe-router-score-function sigmoid \
    --moe-router-topk-scaling-factor 2.5 \
    --moe-router-num-groups 8 \
    --moe-router-group-topk 4 \
    --moe-router-enable-expert-bias \
    --moe-router-bias-update-rate 1e-3 \
    --moe-router-load-balancing-type seq_aux_loss \
    --moe-aux-loss-coeff 1e-4 \
    --moe-router-dtype fp32 \
    --moe-grouped-gemm \
    --moe-token-dispatcher-type alltoall \
    --moe-permute-fusion"

PARALLEL_ARGS="\
    --tensor-model-parallel-size ${TP} \
    --sequence-parallel \
    --pipeline-model-parallel-size ${PP} \
    --decoder-first-pipeline-num-layers 3 \
    --decoder-last-pipeline-num-layers 2 \
    --expert-model-parallel-size ${EP} \
    --expert-tensor-parallel-size ${ETP} \
    --use-distributed-optimizer \
    --overlap-grad-reduce \
    --overlap-param-gather"

TRAINING_ARGS="\
    --micro-batch-size ${MBS} \
    --global-batch-size ${GBS} \
    --train-iters 100000 \
    --recompute-granularity full \
    --recompute-method uniform \
    --recompute-num-layers 1 \
    --lr 2.2e-4 \
    --min-lr 2.2e-5 \
    --lr-decay-style cosine \
    --lr-warmup-iters 2000 \
    --weight-decay 0.1 \
    --adam-beta1 0.9 \
    --adam-beta2 0.95 \
    --clip-grad 1.0 \
    --bf16"

DATA_ARGS="\
    --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model deepseek-ai/DeepSeek-V3 \
    --padded-vocab-size 129280 \
    --data-path ${DATA_PATH} \
    --split 99,1,0"

LOGGING_ARGS="\
    --log-interval 1 \
    --log-throughput \
    --eval-interval 1000 \
    --eval-iters 10 \
    --save-interval 1000 \
    --save ${OUTPUT_DIR}/checkpoints \
    --load ${OUTPUT_DIR}/checkpoints \
    --tensorboard-dir ${OUTPUT_DIR}/tensorboard"

torchrun \
    --nproc_per_node ${GPUS_PER_NODE} \
    --nnodes ${NNODES} \
    --node_rank ${NODE_RANK} \
    --master_addr ${MASTER_ADDR} \
    --master_port ${MASTER_PORT} \
    pretrain_gpt.py \
    ${MODEL_ARGS} \
    ${MLA_ARGS} \
    ${MOE_ARGS} \
    ${PARALLEL_ARGS} \
    ${TRAINING_ARGS} \
    ${DATA_ARGS} \
    ${LOGGING_ARGS}
