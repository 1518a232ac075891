#!/usr/bin/bash
# TorchTitan 0.3 launch of Llama 3.1 8B on one node of 8 H100, as torchtitan's run_train.sh starts it
# (`-m torchtitan.train --module M --config C` plus command-line overrides; BSD-3-Clause upstream).
set -ex
NGPU=${NGPU:-"8"}
export LOG_RANK=${LOG_RANK:-0}
MODULE=${MODULE:-"llama3"}
CONFIG=${CONFIG:-"llama3_8b"}

PYTORCH_ALLOC_CONF="expandable_segments:True" \
torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --rdzv_endpoint="localhost:0" \
--local-ranks-filter ${LOG_RANK} --role rank --tee 3 \
-m torchtitan.train --module ${MODULE} --config ${CONFIG} \
--parallelism.tensor_parallel_degree 2 --training.local_batch_size 2 --compile.enable "$@"
