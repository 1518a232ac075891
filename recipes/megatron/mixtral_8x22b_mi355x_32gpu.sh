#!/bin/bash
# Mixtral 8x22B BF16 pre-training on 4 MI355X nodes (32 GPUs): the reference configuration of the
# Primus Tuning Agent case study, written as a Megatron-LM launch script.
#   Parallelism and batch as AMD publishes the reference: TP 1, PP 4, VPP 2, EP 8, MBS 1, GBS 512,
#   full recompute (method block, 1 layer per chunk), grouped GEMM.
#   Architecture from mistralai/Mixtral-8x22B-v0.1 config.json (56 layers, hidden 6144, FFN 16384,
#   48 heads, 8 KV heads, 8 experts top-2, rope theta 1e6, RMSNorm eps 1e-5, untied embeddings).
#   Sequence length 8192, alltoall dispatcher, distributed optimizer with overlapped grad reduce /
#   param gather, no gradient-accumulation fusion, TE cross-entropy fusion and forced balanced
#   routing as AMD-AGI/Primus examples/megatron/configs/MI355X/mixtral_8x22B_v0.1-BF16-pretrain.yaml.
# primus-launch: gpu=mi355x

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=${SLURM_NNODES:-4}
NODE_RANK=${SLURM_NODEID:-0}
MASTER_ADDR=${MASTER_ADDR:-"localhost"}
MASTER_PORT=${MASTER_PORT:-"6000"}

TOKENIZER_MODEL=mistralai/Mixtral-8x22B-v0.1
CHECKPOINT_PATH=${CHECKPOINT_PATH:-checkpoints/mixtral_8x22b_mi355x}

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NNODES
    --node_rank $NODE_RANK
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

MODEL_ARGS=(
    --disable-bias-linear
    --seq-length 8192
    --max-position-embeddings 65536
    --num-layers 56
    --hidden-size 6144
    --ffn-hidden-size 16384
    --num-attention-heads 48
    --group-query-attention
    --num-query-groups 8
    --init-method-std 0.008
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --normalization RMSNorm
    --norm-epsilon 1e-5
    --position-embedding-type rope
    --rotary-base 1000000
    --swiglu
    --untie-embeddings-and-output-weights
    --no-masked-softmax-fusion
)

MOE_ARGS=(
    --num-experts 8
    --moe-router-topk 2
    --moe-router-load-balancing-type aux_loss
    --moe-aux-loss-coeff 1e-2
    --moe-grouped-gemm
    --moe-token-dispatcher-type alltoall
    --moe-router-force-load-balancing
)

DATA_ARGS=(
    --tokenizer-type HuggingFaceTokenizer
    --tokenizer-model ${TOKENIZER_MODEL}
    --mock-data
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 512
    --lr 1.0e-5
    --min-lr 0.0
    --train-iters 50
    --lr-warmup-iters 2
    --lr-decay-style cosine
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --clip-grad 1.0
    --bf16
    --recompute-granularity full
    --recompute-method block
    --recompute-num-layers 1
    --no-gradient-accumulation-fusion
    --cross-entropy-loss-fusion
    --cross-entropy-fusion-impl te
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 4
    --num-layers-per-virtual-pipeline-stage 7
    --expert-model-parallel-size 8
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

LOGGING_ARGS=(
    --log-interval 1
    --log-throughput
    --eval-iters 0
    --save-interval 20000
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${MOE_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${LOGGING_ARGS[@]}
