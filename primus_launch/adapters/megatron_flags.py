"""Every Megatron-LM training flag, and what primus-launch does with it: the one classification that
the Megatron reader uses and that docs/megatron-flags.md is generated from
(``scripts/megatron_flags_doc.py``; a test keeps the two in sync).

The inventory (``_INVENTORY``: option strings, dest, kind, nargs, default, versions, argument group) is
the output of ``scripts/megatron_flag_inventory.py`` run on Megatron-LM ``core_r0.16.0`` and ``main``
(commit d98e8a6, 2026-08-22): Megatron-LM's own argparse parser, including the groups generated from
its config dataclasses; plus the rows marked ``dev``, from the same script run on the ``dev`` branch
(d48bd6be, 2026-08-21): every option dev's parser has that core_r0.16.0 and main do not (chunked
optimizer-state offload, hyper-connections, dynamic context parallelism and THD packing, compressed sparse
attention, ...), each classified from its help text and its use in dev's megatron-core.  Each flag is in one class:

- ``modelled``: read into a plan field (named);
- ``neutral``: no effect on the time or memory of a training iteration (why);
- ``not modelled``: changes time or memory but the projection does not model it; when a recipe sets
  it to a value other than Megatron's default, the reader appends an
  :class:`~primus_launch.plan.UnmodelledFlag` (flag, value, effect) to ``plan.source.unmodelled``;
- ``refused``: selects a model family or training mode the projection does not model (hybrid Mamba,
  linear / sparse attention variants, heterogeneous layers, RL, vision, BERT/T5 heads): the reader
  refuses the recipe with one line naming the family.

A flag in no table (a typo, a fork's own flag, a newer Megatron-LM) is reported in
``plan.source.notes`` as unknown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from primus_launch.plan import PlanError

VERSIONS = {"both": "core_r0.16.0, main", "0.16": "core_r0.16.0 only", "main": "main only",
            "dev": "dev only (d48bd6be, 2026-08-21)", "config": "TransformerConfig field (YAML configs)",
            "rocm": "ROCm/Megatron-LM forks only (megatron/arguments.py of renwuli/disable_te_qwen*, guihong_dev, ...)",
            "0.12-0.14": "core_r0.12.0 .. core_v0.14.0rc0 (renamed in af28b5a, 2025-08-21)"}

MODELLED, NEUTRAL, NOT_MODELLED, REFUSED = "modelled", "neutral", "not modelled", "refused"

_INVENTORY = """\
--account-for-embedding-in-pipeline-split	account_for_embedding_in_pipeline_split	true	0	false	both	transformer configuration
--account-for-loss-in-pipeline-split	account_for_loss_in_pipeline_split	true	0	false	both	transformer configuration
--accumulate-allreduce-grads-in-fp32	accumulate_allreduce_grads_in_fp32	true	0	false	both	mixed precision
--activation-func-clamp-value	activation_func_clamp_value	float			both	transformer configuration
--activation-offload-fraction	activation_offload_fraction	float		1.0	main	transformer configuration
--adam-beta1	adam_beta1	float		0.9	both	regularization
--adam-beta2	adam_beta2	float		0.999	both	regularization
--adam-eps	adam_eps	float		1e-08	both	regularization
--add-qkv-bias	add_qkv_bias	true	0	false	both	transformer configuration
--adlr-autoresume	adlr_autoresume	true	0	false	both	autoresume
--adlr-autoresume-interval	adlr_autoresume_interval	int		1000	both	autoresume
--allow-ambiguous-pad-tokens	allow_ambiguous_pad_tokens	true	0	false	both	data and dataloader
--app-tag-run-name	app_tag_run_name	str			both	one logger
--app-tag-run-version	app_tag_run_version	str		"0.0.0"	both	one logger
--apply-layernorm-1p	layernorm_zero_centered_gamma	true	0	false	both	transformer configuration
--apply-query-key-layer-scaling	apply_query_key_layer_scaling	true	0	false	both	transformer configuration
--apply-residual-connection-post-layernorm	apply_residual_connection_post_layernorm	true	0	false	both	transformer configuration
--apply-wd-to-qk-layernorm	apply_wd_to_qk_layernorm	true	0	false	both	regularization
--async-ckpt-cpu-priority	async_ckpt_cpu_priority	int		10	main	checkpointing
--async-ckpt-io-priority	async_ckpt_io_priority	int		3	main	checkpointing
--async-ckpt-use-cpu-shm	async_ckpt_use_cpu_shm	true	0	false	main	checkpointing
--async-save	async_save	true	0	false	both	checkpointing
--async-strategy	async_strategy	str		"nvrx"	main	checkpointing
--attention-backend	attention_backend	str		"auto"	both	transformer configuration
--attention-dropout	attention_dropout	float		0.1	both	transformer configuration
--attention-output-gate	attention_output_gate	true	0	false	both	transformer configuration
--attention-softmax-in-fp32	attention_softmax_in_fp32	true	0	false	both	mixed precision
--auto-detect-ckpt-format	auto_detect_ckpt_format	true	0	false	both	checkpointing
--batch-invariant-backend	batch_invariant_backend	str		"te_native"	main	transformer configuration
--batch-invariant-mode	batch_invariant_mode	true	0	false	both	transformer configuration
--batch-size	batch_size	int			both	training
--bert-embedder-type	bert_embedder_type	str		"megatron"	both	inference
--bert-load	bert_load	str			both	biencoder
--bert-no-binary-head	bert_binary_head	false	0	true	both	network size
--bf16	bf16	true	0	false	both	transformer configuration
--biencoder-projection-dim	biencoder_projection_dim	int		0	both	biencoder
--biencoder-shared-query-context-model	biencoder_shared_query_context_model	true	0	false	both	biencoder
--block-data-path	block_data_path	str			both	biencoder
--cache-mla-latents	cache_mla_latents	true	0	false	both	mla
--calc-ft-timeouts	calc_ft_timeouts	true	0	false	both	ft_package
--calculate-per-token-loss	calculate_per_token_loss	true	0	false	both	transformer configuration
--chat-template	chat_template	str			main	tokenizer
--check-for-large-grads	check_for_large_grads	true	0	false	both	training
--check-for-spiky-loss	check_for_spiky_loss	true	0	false	both	rerun engine
--check-weight-hash-across-dp-replicas-interval	check_weight_hash_across_dp_replicas_interval	int			both	training
--checkpoint-activations	checkpoint_activations	true	0	false	both	training
--chunked-optimizer-state-offload	chunked_optimizer_state_offload	true	0	false	dev	training
--ckpt-assume-constant-structure	ckpt_assume_constant_structure	true	0	false	both	checkpointing
--ckpt-convert-format	ckpt_convert_format	str			both	checkpointing
--ckpt-convert-save	ckpt_convert_save	str			both	checkpointing
--ckpt-convert-update-legacy-dist-opt-format	ckpt_convert_update_legacy_dist_opt_format	true	0	false	both	checkpointing
--ckpt-drop-redundant-extra-state	ckpt_drop_redundant_extra_state	true	0	false	main	checkpointing
--ckpt-format	ckpt_format	str		"torch_dist"	both	checkpointing
--ckpt-fully-parallel-load	ckpt_fully_parallel_load	true	0	false	both	checkpointing
--ckpt-fully-parallel-load-exchange-algo	ckpt_fully_parallel_load_exchange_algo	str		"broadcast"	main	checkpointing
--ckpt-fully-parallel-load-per-rank-objects	ckpt_fully_parallel_load_per_rank_objects	true	0	false	main	checkpointing
--ckpt-fully-parallel-load-process-group	ckpt_fully_parallel_load_process_group	str		"dp"	main	checkpointing
--ckpt-fully-parallel-save	ckpt_fully_parallel_save_deprecated	true	0	false	both	checkpointing
--ckpt-fully-parallel-save-process-group	ckpt_fully_parallel_save_process_group	str		"dp"	main	checkpointing
--ckpt-pg-tensors-cache-create	ckpt_pg_tensors_cache_create	true	0	false	main	checkpointing
--ckpt-pg-tensors-cache-path	ckpt_pg_tensors_cache_path	str			main	checkpointing
--ckpt-step	ckpt_step	int			both	checkpointing
--classes-fraction	classes_fraction	float		1.0	both	vision
--clip-grad	clip_grad	float		1.0	both	regularization
--config-logger-dir	config_logger_dir	str		""	both	transformer configuration
--context-parallel-size	context_parallel_size	int		1	both	transformer configuration
--cp-comm-type	cp_comm_type	str	+	["p2p"]	both	distributed init
--cp-partition-mode	cp_partition_mode	str		"zigzag"	dev	transformer configuration
--cpu-offloading-num-layers	cpu_offloading_num_layers	int		0	both	transformer configuration
--cpu-offloading-retain-pinned-cpu-buffers	cpu_offloading_retain_pinned_cpu_buffers	true	0	false	main	transformer configuration
--create-all-gather-group	create_all_gather_group	true	0	false	both	distributed init
--cross-entropy-fusion-impl	cross_entropy_fusion_impl	str		"native"	both	transformer configuration
--cross-entropy-loss-fusion	cross_entropy_loss_fusion	true	0	false	both	transformer configuration
--csa-compress-ratios	csa_compress_ratios	str			dev	experimental_attention_variant
--csa-compress-rotary-base	csa_compress_rotary_base	float		40000.0	dev	transformer configuration
--csa-dense-mode	csa_dense_mode	true	0	false	dev	transformer configuration
--csa-window-size	csa_window_size	int		128	dev	transformer configuration
--cuda-graph-dynamic-microbatches	cuda_graph_dynamic_microbatches	true	0	false	dev	transformer configuration
--cuda-graph-impl	cuda_graph_impl	str		"none"	both	transformer configuration
--cuda-graph-modules	cuda_graph_modules	str	+	[]	main	inference
--cuda-graph-scope	cuda_graph_scope	str	+		both	inference
--cuda-graph-warmup-steps	cuda_graph_warmup_steps	int		3	both	transformer configuration
--data-args-path	data_args_path	str			both	data and dataloader
--data-cache-path	data_cache_path	str			both	data and dataloader
--data-parallel-random-init	data_parallel_random_init	true	0	false	both	RNG and initialization
--data-parallel-sharding-strategy	data_parallel_sharding_strategy	str		"optim_grads_params"	both	distributed init
--data-path	data_path	str	*		both	data and dataloader
--data-per-class-fraction	data_per_class_fraction	float		1.0	both	vision
--dataloader-defer-npy-index-mmap	dataloader_defer_npy_index_mmap	true	0	false	both	data and dataloader
--dataloader-fast-cache-load	dataloader_fast_cache_load	true	0	false	both	data and dataloader
--dataloader-inter-document-masking	dataloader_inter_document_masking	true	0	false	main	data and dataloader
--dataloader-type	dataloader_type	str			both	training
--ddp-average-in-collective	ddp_average_in_collective	true	0	false	both	distributed init
--ddp-bucket-size	ddp_bucket_size	int			both	distributed init
--ddp-num-buckets	ddp_num_buckets	int			both	distributed init
--ddp-pad-buckets-for-high-nccl-busbw	ddp_pad_buckets_for_high_nccl_busbw	true	0	false	both	distributed init
--ddp-param-name-patterns-for-fp32-local-accumulation	ddp_param_name_patterns_for_fp32_local_accumulation	str	+	[]	main	distributed init
--ddp-reduce-scatter-with-fp32-accumulation	ddp_reduce_scatter_with_fp32_accumulation	true	0	false	both	distributed init
--decode-only-cuda-graphs	decode_only_cuda_graphs	true	0	false	both	inference
--decoder-first-pipeline-num-layers	decoder_first_pipeline_num_layers	int			both	distributed init
--decoder-last-pipeline-num-layers	decoder_last_pipeline_num_layers	int			both	distributed init
--decoder-num-layers	decoder_num_layers	int			both	network size
--decoder-seq-length	decoder_seq_length	int			both	data and dataloader
--decoupled-lr	decoupled_lr	float			both	learning rate and weight decay
--decoupled-min-lr	decoupled_min_lr	float			both	learning rate and weight decay
--decrease-batch-size-if-needed	decrease_batch_size_if_needed	true	0	false	both	training
--defer-embedding-wgrad-compute	defer_embedding_wgrad_compute	true	0	false	both	transformer configuration
--delay-offload-until-cuda-graph	delay_offload_until_cuda_graph	true	0	false	main	transformer configuration
--delay-wgrad-compute	delay_wgrad_compute	true	0	false	both	transformer configuration
--delta-offload-bytes-across-pp-ranks	delta_offload_bytes_across_pp_ranks	int		0	main	transformer configuration
--dense-grouped-gemm	dense_grouped_gemm	true	0	false	dev	transformer configuration
--deterministic-mode	deterministic_mode	true	0	false	both	transformer configuration
--dino-bottleneck-size	dino_bottleneck_size	int		256	both	vision
--dino-freeze-last-layer	dino_freeze_last_layer	float		1	both	vision
--dino-head-hidden-size	dino_head_hidden_size	int		2048	both	vision
--dino-local-crops-number	dino_local_crops_number	int		10	both	vision
--dino-local-img-size	dino_local_img_size	int		96	both	vision
--dino-norm-last-layer	dino_norm_last_layer	true	0	false	both	vision
--dino-teacher-temp	dino_teacher_temp	float		0.07	both	vision
--dino-warmup-teacher-temp	dino_warmup_teacher_temp	float		0.04	both	vision
--dino-warmup-teacher-temp-epochs	dino_warmup_teacher_temp_epochs	int		30	both	vision
--disable-bf16-reduced-precision-matmul	disable_bf16_reduced_precision_matmul	true	0	false	both	transformer configuration
--disable-bias-linear	add_bias_linear	false	0	true	both	transformer configuration
--disable-chunked-prefill	disable_chunked_prefill	true	0	false	0.16	inference
--disable-gloo-process-groups	enable_gloo_process_groups	false	0	true	both	distributed init
--disable-grad-buffers-cpu-backup	disable_grad_buffers_cpu_backup	true	0	false	dev	distributed init
--disable-jit-fuser	disable_jit_fuser	true	0	false	both	distributed init
--disable-mamba-mem-eff-path	use_mamba_mem_eff_path	false	0	true	both	transformer configuration
--disable-msc	enable_msc	true	0	false	both	msc
--disable-param-buffers-cpu-backup	disable_param_buffers_cpu_backup	true	0	false	dev	distributed init
--disable-straggler-on-startup	disable_straggler_on_startup	true	0	false	both	straggler
--disable-symmetric-registration	disable_symmetric_registration	true	0	false	both	distributed init
--dist-ckpt-format	dist_ckpt_format_deprecated	str			both	checkpointing
--dist-ckpt-optim-fully-reshardable	dist_ckpt_optim_fully_reshardable	true	0	false	both	checkpointing
--dist-ckpt-save-pre-mcore-014	dist_ckpt_save_pre_mcore_014	true	0	false	both	checkpointing
--dist-ckpt-strictness	dist_ckpt_strictness	str		"assume_ok_unexpected"	both	checkpointing
--dist-ckpt-workers	dist_ckpt_workers	int		1	main	checkpointing
--distrib-optim-fully-reshardable-mem-efficient	distrib_optim_fully_reshardable_mem_efficient	true	0	false	both	checkpointing
--distribute-saved-activations	distribute_saved_activations	true	0	false	both	transformer configuration
--distributed-backend	distributed_backend	str		"nccl"	both	distributed init
--distributed-timeout-minutes	distributed_timeout_minutes	int		10	both	distributed init
--distributed-timeout-seconds-after-init	distributed_timeout_seconds_after_init	int			both	distributed init
--dsa-indexer-head-dim	dsa_indexer_head_dim	int			both	transformer configuration
--dsa-indexer-k-norm-epsilon	dsa_indexer_k_norm_epsilon	float			main	transformer configuration
--dsa-indexer-k-norm-fp32	dsa_indexer_k_norm_fp32	true	0	false	main	transformer configuration
--dsa-indexer-loss-coeff	dsa_indexer_loss_coeff	float			both	transformer configuration
--dsa-indexer-n-heads	dsa_indexer_n_heads	int			both	transformer configuration
--dsa-indexer-rope-interleaved	dsa_indexer_rope_interleaved	true	0	false	main	transformer configuration
--dsa-indexer-skip-topk-offset	dsa_indexer_skip_topk_offset	int		0	main	transformer configuration
--dsa-indexer-topk	dsa_indexer_topk	int			both	transformer configuration
--dsa-indexer-topk-freq	dsa_indexer_topk_freq	int		1	main	transformer configuration
--dsa-indexer-use-sparse-loss	dsa_indexer_use_sparse_loss	true	0	false	both	transformer configuration
--dsa-kernel-backend	dsa_kernel_backend	str		"none"	main	transformer configuration
--dump-param-to-param-group-map	dump_param_to_param_group_map	str			both	training
--dynamic-context-parallel	dynamic_context_parallel	true	0	false	dev	transformer configuration
--embedding-init-method-std	embedding_init_method_std	float			both	transformer configuration
--embedding-path	embedding_path	str			both	biencoder
--empty-unused-memory-level	empty_unused_memory_level	int		0	both	training
--enable-chunked-prefill	disable_chunked_prefill	true	0	false	both	inference
--enable-cuda-graph	enable_cuda_graph	true	0	false	both	transformer configuration
--enable-hyper-connections	enable_hyper_connections	true	0	false	dev	transformer configuration
--enable-experimental	enable_experimental	true	0	false	both	experimental
--enable-ft-package	enable_ft_package	true	0	false	both	ft_package
--enable-full-sharding-in-hsdp	enable_full_sharding_in_hsdp	true	0	false	both	distributed init
--enable-mhc-connections	enable_mhc_connections	true	0	false	main	transformer configuration
--enable-msc	enable_msc	true	0	false	main	msc
--encoder-num-layers	encoder_num_layers	int			both	network size
--encoder-seq-length	encoder_seq_length	int			both	data and dataloader
--end-weight-decay	end_weight_decay	float			both	learning rate and weight decay
--eod-mask-loss	eod_mask_loss	true	0	false	both	data and dataloader
--ep-overlap-early-attn-memory-release	ep_overlap_early_attn_memory_release	true	0	false	both	transformer configuration
--error-injection-rate	error_injection_rate	int		0	both	rerun engine
--error-injection-type	error_injection_type	str		"transient_error"	both	rerun engine
--eval-global-batch-size	eval_global_batch_size	int			main	validation
--eval-interval	eval_interval	int			both	validation
--eval-iters	eval_iters	int		100	both	validation
--eval-micro-batch-size	eval_micro_batch_size	int			main	validation
--evidence-data-path	evidence_data_path	str			both	biencoder
--exit-duration-in-mins	exit_duration_in_mins	int			both	training
--exit-interval	exit_interval	int			both	training
--exit-on-missing-checkpoint	exit_on_missing_checkpoint	true	0	false	both	checkpointing
--exit-signal	exit_signal	str		15	both	training
--exit-signal-handler	exit_signal_handler	true	0	false	both	training
--exit-signal-handler-for-dataloader	exit_signal_handler_for_dataloader	true	0	false	both	training
--exit-signal-handler-for-training	exit_signal_handler_for_training	true	0	false	main	training
--exp-avg-dtype	exp_avg_dtype	str		"fp32"	both	experimental
--exp-avg-sq-dtype	exp_avg_sq_dtype	str		"fp32"	both	experimental
--experimental-attention-variant	experimental_attention_variant	str			both	transformer configuration
--expert-model-parallel-size	expert_model_parallel_size	int		1	both	transformer configuration
--expert-tensor-parallel-num-weight-shards	expert_tensor_parallel_num_weight_shards	int			main	transformer configuration
--expert-tensor-parallel-size	expert_tensor_parallel_size	int			both	transformer configuration
--external-cuda-graph	external_cuda_graph	true	0	false	both	transformer configuration
--fake-process-group	fake_process_group	true	0	false	both	distributed init
--fallback-to-eager-attn	fallback_to_eager_attn	true	0	false	dev	transformer configuration
--fault-injector-delay-start-iteration	fault_injector_delay_start_iteration	int			main	fault injector
--fault-injector-fault-delay	fault_injector_fault_delay	float			main	fault injector
--fault-injector-fault-probabilities	fault_injector_fault_probabilities	str			main	fault injector
--fault-injector-fault-types	fault_injector_fault_types	str			main	fault injector
--fault-injector-mtti-seconds	fault_injector_mtti_seconds	float			main	fault injector
--fault-injector-num-ranks	fault_injector_num_ranks	int			main	fault injector
--fault-injector-offset-seconds	fault_injector_offset_seconds	float			main	fault injector
--fault-injector-ranks	fault_injector_ranks	str			main	fault injector
--fault-injector-seed	fault_injector_seed	int			main	fault injector
--ffn-hidden-size	ffn_hidden_size	int			both	transformer configuration
--fim-data	fim_data	true	0	false	both	data and dataloader
--fim-eod-token	fim_eod_token	str		"<|endoftext|>"	both	data and dataloader
--fim-fragment-rate	fim_fragment_rate	float			both	data and dataloader
--fim-middle-token	fim_middle_token	str		"<fim_middle>"	both	data and dataloader
--fim-no-prefix	fim_no_prefix	str			both	data and dataloader
--fim-pad-token	fim_pad_token	str		"<fim_pad>"	both	data and dataloader
--fim-prefix-token	fim_prefix_token	str		"<fim_prefix>"	both	data and dataloader
--fim-rate	fim_rate	float		0.5	both	data and dataloader
--fim-split-sample	fim_split_sample	str			both	data and dataloader
--fim-spm-rate	fim_spm_rate	float		0.5	both	data and dataloader
--fim-suffix-token	fim_suffix_token	str		"<fim_suffix>"	both	data and dataloader
--fine-grained-activation-offloading	fine_grained_activation_offloading	true	0	false	both	transformer configuration
--fine-grained-offloading-max-inflight-offloads	fine_grained_offloading_max_inflight_offloads	int			main	transformer configuration
--finetune	finetune	true	0	false	both	checkpointing
--first-last-layers-bf16	first_last_layers_bf16	true	0	false	both	transformer configuration
--flash-attention-version	flash_attention_version	int			main	transformer configuration
--flash-decode	flash_decode	true	0	false	both	transformer configuration
--flight-recorder-dump-path	flight_recorder_dump_path	str			main	distributed init
--flight-recorder-include-stack-trace	flight_recorder_include_stack_trace	true	0	false	main	distributed init
--flight-recorder-trace-buffer-size	flight_recorder_trace_buffer_size	int		2000	main	distributed init
--fp16	fp16	true	0	false	both	transformer configuration
--fp16-lm-cross-entropy	fp16_lm_cross_entropy	true	0	false	both	mixed precision
--fp32-residual-connection	fp32_residual_connection	true	0	false	both	transformer configuration
--fp4-format	fp4	str			both	transformer configuration
--fp4-param-gather	fp4_param	true	0	false	both	Transformer-Engine
--fp4-quantizer-factory	fp4_quantizer_factory	str			both	transformer configuration
--fp4-recipe	fp4_recipe	str		"nvfp4"	both	transformer configuration
--fp8-amax-compute-algo	fp8_amax_compute_algo	str		"most_recent"	both	transformer configuration
--fp8-amax-history-len	fp8_amax_history_len	int		1	both	transformer configuration
--fp8-format	fp8	str			both	transformer configuration
--fp8-interval	fp8_interval	int		1	both	transformer configuration
--fp8-margin	fp8_margin	int		0	both	transformer configuration
--fp8-output-proj	fp8_output_proj	true	0	false	main	transformer configuration
--fp8-param-gather	fp8_param_gather	true	0	false	both	Transformer-Engine
--fp8-quantizer-factory	fp8_quantizer_factory	str			both	transformer configuration
--fp8-recipe	fp8_recipe	str		"delayed"	both	transformer configuration
--freeze-all-layers	freeze_all_layers	true	0	false	main	learning rate and weight decay
--fsdp-db-use-persist-buf-on-alloc-fail	fsdp_db_use_persist_buf_on_alloc_fail	true	0	false	main	experimental
--fsdp-double-buffer	fsdp_double_buffer	true	0	false	both	distributed init
--fsdp-manual-registration	fsdp_manual_registration	true	0	false	both	distributed init
--ft-num-warmup-iters	ft_num_warmup_iters	int		5	both	ft_package
--full-validation	full_validation	true	0	false	both	validation
--fused-residual-rmsnorm	fused_residual_rmsnorm	true	0	false	main	transformer configuration
--gdn-conv-pad-alignment	gdn_conv_pad_alignment	int			dev	transformer configuration
--gdn-pre-gated-delta-rule-fusion	gdn_pre_gated_delta_rule_fusion	true	0	false	dev	transformer configuration
--gdp-cutedsl-kernel	gdp_cutedsl_kernel	true	0	false	main	transformer configuration
--gdp-num-chunk-states-to-recompute	gdp_num_chunk_states_to_recompute	int		2	main	transformer configuration
--gdp-num-householder	gdp_num_householder	int		3	main	transformer configuration
--global-batch-size	global_batch_size	int			both	training
--glu-linear-offset	glu_linear_offset	float		0.0	both	transformer configuration
--gpu-sniff-test-interval	gpu_sniff_test_interval	int			main	training
--grad-reduce-in-bf16	grad_reduce_in_bf16	true	0	false	both	mixed precision
--group-query-attention	group_query_attention	true	0	false	both	network size
--grpo-clamp-eps-lower	grpo_clamp_eps_lower	float		0.01	both	rl
--grpo-clamp-eps-upper	grpo_clamp_eps_upper	float		0.01	both	rl
--grpo-entropy-term-weight	grpo_entropy_term_weight	float		0.0	both	rl
--grpo-filter-groups-with-same-reward	grpo_filter_groups_with_same_reward	true	0	false	both	rl
--grpo-group-size	grpo_group_size	int		2	both	rl
--grpo-iterations	grpo_iterations	int		2	both	rl
--grpo-kl-beta	grpo_kl_beta	float		0.001	both	rl
--grpo-prompts-per-step	grpo_prompts_per_step	int		32	both	rl
--gtp-expert-remat-nccl-ub	gtp_expert_remat_nccl_ub	true	0	false	main	distributed init
--gtp-remat-nccl-ub	gtp_remat_nccl_ub	true	0	false	main	distributed init
--gtp-remat-opt-in-modules	gtp_remat_opt_in_modules	str	+	[]	main	transformer configuration
--gtp-remat-reduce-scatter-with-fp32-accumulation	gtp_remat_reduce_scatter_with_fp32_accumulation	true	0	false	main	distributed init
--head-lr-mult	head_lr_mult	float		1.0	both	vision
--head-wise-attn-gate	head_wise_attn_gate	true	0	false	dev	transformer configuration
--heterogeneous-layers-config-encoded-json	heterogeneous_layers_config_encoded_json	str			both	heterogeneous architecture
--heterogeneous-layers-config-path	heterogeneous_layers_config_path	str			both	heterogeneous architecture
--hidden-dropout	hidden_dropout	float		0.1	both	transformer configuration
--hidden-size	hidden_size	int			both	transformer configuration
--hierarchical-context-parallel-sizes	hierarchical_context_parallel_sizes	int	+		both	transformer configuration
--high-priority-a2a-comm-stream	high_priority_a2a_comm_stream	true	0	false	main	transformer configuration
--high-priority-stream-groups	high_priority_stream_groups	str	+	[]	both	distributed init
--hybrid-attention-ratio	hybrid_attention_ratio	float		0.0	0.16	experimental
--hybrid-context-parallel	hybrid_context_parallel	true	0	false	both	transformer configuration
--hybrid-layer-pattern	hybrid_layer_pattern	str			main	experimental
--hybrid-mlp-ratio	hybrid_mlp_ratio	float		0.0	0.16	experimental
--hybrid-override-pattern	hybrid_override_pattern	str			both	experimental
--hysteresis	hysteresis	int		2	both	mixed precision
--ict-head-size	ict_head_size	int			both	biencoder
--ict-load	ict_load	str			both	biencoder
--img-h	img_h	int		224	both	vision
--img-w	img_w	int		224	both	vision
--indexer-batch-size	indexer_batch_size	int		128	both	biencoder
--indexer-log-interval	indexer_log_interval	int		1000	both	biencoder
--inference-batch-times-seqlen-threshold	inference_batch_times_seqlen_threshold	int		-1	both	inference
--inference-coordinator-port	inference_coordinator_port	int			both	inference
--inference-cuda-graph-all-prefills	inference_cuda_graph_all_prefills	true	0	false	main	inference
--inference-cuda-graph-max-tokens	inference_cuda_graph_max_tokens	int		512	main	inference
--inference-cuda-graph-scope	inference_cuda_graph_scope	str			main	transformer configuration
--inference-disable-ep-consensus --no-inference-disable-ep-consensus	inference_disable_ep_consensus	boolopt	0	false	main	inference
--inference-disable-triton-nvls-kernels	inference_disable_triton_nvls_kernels	true	0	false	main	transformer configuration
--inference-dynamic-batching	inference_dynamic_batching	true	0	false	both	inference
--inference-dynamic-batching-async-sched-mode	inference_dynamic_batching_async_sched_mode	str		"legacy"	main	inference
--inference-dynamic-batching-block-size	inference_dynamic_batching_block_size	int		256	both	inference
--inference-dynamic-batching-buffer-size-gb	inference_dynamic_batching_buffer_size_gb	float		40.0	both	inference
--inference-dynamic-batching-cuda-graph-max-tokens	inference_dynamic_batching_cuda_graph_max_tokens	int		16384	0.16	inference
--inference-dynamic-batching-cuda-graph-mixed-prefill-count	inference_dynamic_batching_cuda_graph_mixed_prefill_count	int		16	both	inference
--inference-dynamic-batching-cuda-graph-sizing-distribution	inference_dynamic_batching_cuda_graph_sizing_distribution	str		"exponential"	main	inference
--inference-dynamic-batching-logprobs-mode	inference_dynamic_batching_logprobs_mode	str		"raw_logprobs"	main	inference
--inference-dynamic-batching-mamba-memory-ratio	inference_dynamic_batching_mamba_memory_ratio	float			main	inference
--inference-dynamic-batching-max-requests	inference_dynamic_batching_max_requests	int			both	inference
--inference-dynamic-batching-max-tokens	inference_dynamic_batching_max_tokens	int			both	inference
--inference-dynamic-batching-num-cuda-graphs	inference_dynamic_batching_num_cuda_graphs	int		16	both	inference
--inference-dynamic-batching-paused-buffer-size-gb	inference_dynamic_batching_paused_buffer_size_gb	float			both	inference
--inference-dynamic-batching-prefix-caching --no-inference-dynamic-batching-prefix-caching	inference_dynamic_batching_enable_prefix_caching	boolopt	0	false	main	inference
--inference-dynamic-batching-prefix-caching-coordinator-policy	inference_dynamic_batching_prefix_caching_coordinator_policy	str		"load_balanced"	main	inference
--inference-dynamic-batching-prefix-caching-eviction-policy	inference_dynamic_batching_prefix_caching_eviction_policy	str		"ref_zero"	main	inference
--inference-dynamic-batching-prefix-caching-mamba-gb	inference_dynamic_batching_prefix_caching_mamba_gb	float			main	inference
--inference-dynamic-batching-prefix-caching-routing-alpha	inference_dynamic_batching_prefix_caching_routing_alpha	float		0.5	main	inference
--inference-dynamic-batching-sampling-backend	inference_dynamic_batching_sampling_backend	str		"torch"	main	inference
--inference-dynamic-batching-track-generated-token-events	inference_dynamic_batching_track_generated_token_events	true	0	false	main	inference
--inference-dynamic-batching-track-paused-request-events	inference_dynamic_batching_track_paused_request_events	true	0	false	both	inference
--inference-dynamic-batching-unified-memory-level	inference_dynamic_batching_unified_memory_level	int		0	both	inference
--inference-fuse-tp-communication	inference_fuse_tp_communication	true	0	false	both	transformer configuration
--inference-grouped-gemm-backend	inference_grouped_gemm_backend	str		"vllm"	main	transformer configuration
--inference-logging-step-interval	inference_logging_step_interval	int		0	both	inference
--inference-max-batch-size	inference_max_batch_size	int			0.16	inference
--inference-max-requests	inference_max_batch_size	int		8	both	inference
--inference-max-seq-length	inference_max_seq_length	int		2560	both	inference
--inference-moe-disable-fused-quant-kernels	inference_moe_disable_fused_quant_kernels	true	0	false	main	transformer configuration
--inference-moe-token-dispatcher-type	inference_moe_token_dispatcher_type	str		"nvls"	main	transformer configuration
--inference-rng-tracker	inference_rng_tracker	true	0	false	both	RNG and initialization
--inference-shards	inference_shards	str			main	inference
--inference-text-gen-server-logging --no-inference-text-gen-server-logging	inference_text_gen_server_logging	boolopt	0	false	main	inference
--inference-use-synchronous-zmq-collectives --no-inference-use-synchronous-zmq-collectives	inference_use_synchronous_zmq_collectives	boolopt	0	false	main	inference
--inference-wandb-logging --no-inference-wandb-logging	inference_wandb_logging	boolopt	0	false	both	inference
--init-method-std	init_method_std	float		0.02	both	transformer configuration
--init-method-xavier-uniform	init_method_xavier_uniform	true	0	false	both	RNG and initialization
--init-model-with-meta-device	init_model_with_meta_device	true	0	false	both	transformer configuration
--initial-loss-scale	initial_loss_scale	float		4294967296	both	mixed precision
--inprocess-active-world-size	inprocess_active_world_size	int		1	both	In-process restart
--inprocess-barrier-timeout	inprocess_barrier_timeout	float		120	both	In-process restart
--inprocess-completion-timeout	inprocess_completion_timeout	float		120	both	In-process restart
--inprocess-empty-cuda-cache	inprocess_empty_cuda_cache	true	0	false	both	In-process restart
--inprocess-granularity	inprocess_granularity	str		"node"	both	In-process restart
--inprocess-hard-timeout	inprocess_hard_timeout	float		90	both	In-process restart
--inprocess-heartbeat-interval	inprocess_heartbeat_interval	float		30	both	In-process restart
--inprocess-heartbeat-timeout	inprocess_heartbeat_timeout	float		60	both	In-process restart
--inprocess-last-call-wait	inprocess_last_call_wait	float		1	both	In-process restart
--inprocess-max-iterations	inprocess_max_iterations	int			both	In-process restart
--inprocess-monitor-process-interval	inprocess_monitor_process_interval	float		1.0	both	In-process restart
--inprocess-monitor-thread-interval	inprocess_monitor_thread_interval	float		1.0	both	In-process restart
--inprocess-progress-watchdog-interval	inprocess_progress_watchdog_interval	float		1.0	both	In-process restart
--inprocess-restart	inprocess_restart	true	0	false	both	In-process restart
--inprocess-soft-timeout	inprocess_soft_timeout	float		60	both	In-process restart
--inprocess-termination-grace-time	inprocess_termination_grace_time	float		1	both	In-process restart
--is-hybrid-model	is_hybrid_model	true	0	false	both	transformer configuration
--iter-per-epoch	iter_per_epoch	int		1250	both	vision
--iterations-to-skip	iterations_to_skip	int	+	[]	both	training
--keep-fp8-transpose-cache	keep_fp8_transpose_cache	true	0	false	both	distributed init
--kitchen-attention-backend	kitchen_attention_backend	str		"sdpa"	both	transformer configuration
--kv-channels	kv_channels	int			both	transformer configuration
--kv-lora-rank	kv_lora_rank	int		32	both	mla
--langrl-env-config	langrl_env_config	str			both	rl
--langrl-external-server --no-langrl-external-server	langrl_external_server	boolopt	0	false	0.16	rl
--langrl-inference-server-conversation-template	langrl_inference_server_conversation_template	str			0.16	rl
--langrl-inference-server-type	langrl_inference_server_type	str		"inplace_megatron"	0.16	rl
--lazy-mpu-init	lazy_mpu_init	true	0	false	both	distributed init
--legacy-tokenizer	legacy_tokenizer	true	0	false	0.16	tokenizer
--linear-attention-freq	linear_attention_freq	str			both	experimental_attention_variant
--linear-attention-type	linear_attention_type	str			dev	transformer configuration
--linear-conv-kernel-dim	linear_conv_kernel_dim	int		4	both	transformer configuration
--linear-cp-mode	linear_cp_mode	str		"chunkwise"	dev	transformer configuration
--linear-key-head-dim	linear_key_head_dim	int		128	both	transformer configuration
--linear-num-key-heads	linear_num_key_heads	int		16	both	transformer configuration
--linear-num-value-heads	linear_num_value_heads	int		32	both	transformer configuration
--linear-value-head-dim	linear_value_head_dim	int		128	both	transformer configuration
--lion-beta1	lion_beta1	float		0.95	main	regularization
--lion-beta2	lion_beta2	float		0.98	main	regularization
--load	load	str			both	checkpointing
--load-main-params-from-ckpt	load_main_params_from_ckpt	true	0	false	both	checkpointing
--local-rank	local_rank	int		0	both	distributed init
--log-device-memory-used	log_device_memory_used	true	0	false	both	logging
--log-energy	log_energy	true	0	false	both	logging
--log-interval	log_interval	int		100	both	logging
--log-max-attention-logit	log_max_attention_logit	true	0	false	both	logging
--log-memory-interval	log_memory_interval	int			both	logging
--log-memory-to-tensorboard	log_memory_to_tensorboard	true	0	false	both	logging
--log-moe-overload-factor	log_moe_overload_factor	true	0	false	dev	transformer configuration
--log-num-zeros-in-grad	log_num_zeros_in_grad	true	0	false	both	logging
--log-params-norm	log_params_norm	true	0	false	both	logging
--log-progress	log_progress	true	0	false	both	logging
--log-straggler	log_straggler	true	0	false	both	straggler
--log-throughput	log_throughput	true	0	false	both	logging
--log-timers-to-tensorboard	log_timers_to_tensorboard	true	0	false	both	logging
--log-validation-ppl-to-tensorboard	log_validation_ppl_to_tensorboard	true	0	false	both	logging
--log-world-size-to-tensorboard	log_world_size_to_tensorboard	true	0	false	both	logging
--logging-level	logging_level	int			both	logging
--logits-load-decode-threads	logits_load_decode_threads	int		4	main	Logits Distillation
--logits-load-dir	logits_load_dir	str			main	Logits Distillation
--logits-load-ignore-errors	logits_load_ignore_errors	true	0	false	main	Logits Distillation
--logits-load-kd-loss-alpha	logits_load_kd_loss_alpha	float		1.0	main	Logits Distillation
--logits-load-msc-prefetch-depth	logits_load_msc_prefetch_depth	int		2	main	Logits Distillation
--logits-load-prefetch-factor	logits_load_prefetch_factor	int		3	main	Logits Distillation
--logits-save-dir	logits_save_dir	str			main	Logits Distillation
--logits-save-dtype	logits_save_dtype	str		"fp16"	main	Logits Distillation
--logits-save-top-k	logits_save_top_k	int			main	Logits Distillation
--logits-save-top-p	logits_save_top_p	float			main	Logits Distillation
--logits-save-top-p-min-k	logits_save_top_p_min_k	int		1	main	Logits Distillation
--loss-scale	loss_scale	float			both	mixed precision
--loss-scale-window	loss_scale_window	float		1000	both	mixed precision
--lr	lr	float			both	learning rate and weight decay
--lr-decay-iters	lr_decay_iters	int			both	learning rate and weight decay
--lr-decay-samples	lr_decay_samples	int			both	learning rate and weight decay
--lr-decay-style	lr_decay_style	str		"linear"	both	learning rate and weight decay
--lr-warmup-fraction	lr_warmup_fraction	float			both	learning rate and weight decay
--lr-warmup-init	lr_warmup_init	float		0.0	both	learning rate and weight decay
--lr-warmup-iters	lr_warmup_iters	int		0	both	learning rate and weight decay
--lr-warmup-samples	lr_warmup_samples	int		0	both	learning rate and weight decay
--lr-wsd-decay-iters	lr_wsd_decay_iters	int			both	learning rate and weight decay
--lr-wsd-decay-samples	lr_wsd_decay_samples	int			both	learning rate and weight decay
--lr-wsd-decay-style	lr_wsd_decay_style	str		"exponential"	both	learning rate and weight decay
--main-grads-dtype	main_grads_dtype	str		"fp32"	both	experimental
--main-params-dtype	main_params_dtype	str		"fp32"	both	experimental
--make-vocab-size-divisible-by	make_vocab_size_divisible_by	int		128	both	network size
--mamba-head-dim	mamba_head_dim	int		64	both	transformer configuration
--mamba-inference-conv-states-dtype	mamba_inference_conv_states_dtype	str		"bf16"	main	inference
--mamba-inference-ssm-states-dtype	mamba_inference_ssm_states_dtype	str		"bf16"	main	inference
--mamba-num-groups	mamba_num_groups	int		8	both	transformer configuration
--mamba-num-heads	mamba_num_heads	int			both	transformer configuration
--mamba-state-dim	mamba_state_dim	int		128	both	transformer configuration
--mamba-training-ssm-states-dtype	mamba_training_ssm_states_dtype	str			main	mixed precision
--manual-gc	manual_gc	true	0	false	both	training
--manual-gc-interval	manual_gc_interval	int		0	both	training
--mask-factor	mask_factor	float		1.0	both	vision
--mask-prob	mask_prob	float		0.15	both	data and dataloader
--mask-type	mask_type	str		"random"	both	vision
--max-position-embeddings	max_position_embeddings	int			both	network size
--max-seqlen-per-dp-cp-rank	max_seqlen_per_dp_cp_rank	int			both	transformer configuration
--max-tokens-to-oom	max_tokens_to_oom	int		12000	both	inference
--megatron-fsdp-cache-param-bucket-views	megatron_fsdp_cache_param_bucket_views	true	0	false	dev	experimental
--megatron-fsdp-enable-fine-grained-param-gather	megatron_fsdp_enable_fine_grained_param_gather	true	0	false	main	experimental
--megatron-fsdp-grad-comm-dtype	megatron_fsdp_grad_comm_dtype	str		"auto"	main	experimental
--megatron-fsdp-main-grads-dtype	megatron_fsdp_main_grads_dtype	str		"auto"	main	experimental
--megatron-fsdp-main-params-dtype	megatron_fsdp_main_params_dtype	str		"fp32"	main	experimental
--megatron-fsdp-max-pool-double-buffer	megatron_fsdp_max_pool_double_buffer	true	0	false	main	experimental
--megatron-fsdp-prefetch-recompute-forward-weights	megatron_fsdp_prefetch_recompute_forward_weights	true	0	false	dev	experimental
--megatron-fsdp-version	megatron_fsdp_version	int		1	main	distributed init
--memory-snapshot-path	memory_snapshot_path	str		"snapshot.pickle"	both	profiling
--merge-file	merge_file	str			both	tokenizer
--mhc-init-gating-factor	mhc_init_gating_factor	float		0.01	main	transformer configuration
--mhc-num-residual-streams	mhc_num_residual_streams	int		4	main	transformer configuration
--mhc-recompute-layer-num	mhc_recompute_layer_num	int			main	transformer configuration
--mhc-sinkhorn-iterations	mhc_sinkhorn_iterations	int		20	main	transformer configuration
--micro-batch-size	micro_batch_size	int			both	training
--microbatch-group-size-per-virtual-pipeline-stage	microbatch_group_size_per_vp_stage	int			both	transformer configuration
--mid-level-dataset-surplus	mid_level_dataset_surplus	float		0.005	both	data and dataloader
--min-dynamic-context-parallel-size	min_dynamic_context_parallel_size	int		1	dev	transformer configuration
--min-loss-scale	min_loss_scale	float		1.0	both	mixed precision
--min-lr	min_lr	float		0.0	both	learning rate and weight decay
--min-offloaded-tensor-size	min_offloaded_tensor_size	int		1048576	both	transformer configuration
--mla-down-proj-fusion	mla_down_proj_fusion	true	0	false	main	mla
--mlp-chunks-for-prefill	mlp_chunks_for_prefill	int		1	both	transformer configuration
--mlp-chunks-for-training	mlp_chunks_for_training	int		1	main	transformer configuration
--mock-data	mock_data	true	0	false	both	data and dataloader
--model-parallel-size	model_parallel_size	int			both	distributed init
--moe-apply-probs-on-input	moe_apply_probs_on_input	true	0	false	both	transformer configuration
--moe-aux-loss-coeff	moe_aux_loss_coeff	float	+	0.0	both	moe
--moe-combine-bwd-dtype	moe_combine_bwd_dtype	str		"bf16"	main	transformer configuration
--moe-deepep-num-sms	moe_deepep_num_sms	int			both	transformer configuration
--moe-dispatch-fwd-dtype	moe_dispatch_fwd_dtype	str		"bf16"	main	transformer configuration
--moe-enable-deepep	moe_enable_deepep	true	0	false	both	transformer configuration
--moe-enable-routing-replay	moe_enable_routing_replay	true	0	false	both	transformer configuration
--moe-expert-capacity-factor	moe_expert_capacity_factor	float			both	transformer configuration
--moe-expert-rank-capacity-factor	moe_expert_rank_capacity_factor	float			main	transformer configuration
--moe-extended-tp	moe_extended_tp	true	0	false	0.16	transformer configuration
--moe-ffn-hidden-size	moe_ffn_hidden_size	int			both	transformer configuration
--moe-flex-dispatcher-backend	moe_flex_dispatcher_backend	str		"deepep"	both	transformer configuration
--moe-flex-dispatcher-num-sms	moe_flex_dispatcher_num_sms	int			main	transformer configuration
--moe-grouped-gemm	moe_grouped_gemm	true	0	false	both	transformer configuration
--moe-hybridep-num-blocks-permute	moe_hybridep_num_blocks_permute	int			main	transformer configuration
--moe-hybridep-num-blocks-unpermute	moe_hybridep_num_blocks_unpermute	int			main	transformer configuration
--moe-hybridep-num-sms	moe_hybridep_num_sms	int			both	transformer configuration
--moe-hybridep-num-sms-preprocessing	moe_hybridep_num_sms_preprocessing	int		108	main	transformer configuration
--moe-hybridep-pad-uneven-dispatch-inputs	moe_hybridep_pad_uneven_dispatch_inputs	true	0	false	main	transformer configuration
--moe-hybridep-pad-variable-tokens	moe_hybridep_pad_variable_tokens	true	0	false	dev	transformer configuration
--moe-input-jitter-eps	moe_input_jitter_eps	float			both	transformer configuration
--moe-latent-size	moe_latent_size	int			both	transformer configuration
--moe-layer-freq	moe_layer_freq	str		1	both	moe
--moe-layer-recompute	moe_layer_recompute	true	0	false	both	transformer configuration
--moe-mlp-glu-interleave-size	moe_mlp_glu_interleave_size	int			main	transformer configuration
--moe-n-hash-layers	moe_n_hash_layers	int		0	dev	transformer configuration
--moe-ncclep-static-shape	moe_ncclep_static_shape	true	0	false	dev	transformer configuration
--moe-ncclep-use-symm-mem	moe_ncclep_use_symm_mem	true	0	false	dev	transformer configuration
--moe-ncclep-zero-copy	moe_ncclep_zero_copy	true	0	false	main	transformer configuration
--moe-pad-expert-input-to-capacity	moe_pad_expert_input_to_capacity	true	0	false	both	transformer configuration
--moe-pad-experts-for-cuda-graph-inference	moe_pad_experts_for_cuda_graph_inference	true	0	false	both	transformer configuration
--moe-paged-stash	moe_paged_stash	true	0	false	main	transformer configuration
--moe-paged-stash-buffer-size-factor-cpu	moe_paged_stash_buffer_size_factor_cpu	float		0.0	main	transformer configuration
--moe-paged-stash-buffer-size-factor-cuda	moe_paged_stash_buffer_size_factor_cuda	float		1.1	main	transformer configuration
--moe-paged-stash-page-size	moe_paged_stash_page_size	int		64	main	transformer configuration
--moe-per-layer-logging	moe_per_layer_logging	true	0	false	both	transformer configuration
--moe-permute-fusion	moe_permute_fusion	true	0	false	both	transformer configuration
--moe-permute-fusion-into-hybridep	moe_permute_fusion_into_hybridep	true	0	false	main	transformer configuration
--moe-router-bias-update-rate	moe_router_bias_update_rate	float		0.001	both	transformer configuration
--moe-router-dtype	moe_router_dtype	str			both	transformer configuration
--moe-router-enable-expert-bias	moe_router_enable_expert_bias	true	0	false	both	transformer configuration
--moe-router-force-biased	moe_router_force_biased	float			main	transformer configuration
--moe-router-force-load-balancing	moe_router_force_load_balancing	true	0	false	both	transformer configuration
--moe-router-fusion	moe_router_fusion	true	0	false	both	transformer configuration
--moe-router-group-topk	moe_router_group_topk	int			both	transformer configuration
--moe-router-load-balancing-type	moe_router_load_balancing_type	str	+	"aux_loss"	both	moe
--moe-router-num-groups	moe_router_num_groups	int			both	transformer configuration
--moe-router-padding-for-fp8	moe_router_padding_for_fp8	true	0	false	both	transformer configuration
--moe-router-padding-for-quantization	moe_router_padding_for_quantization	true	0	false	both	transformer configuration
--moe-router-pre-softmax	moe_router_pre_softmax	true	0	false	both	transformer configuration
--moe-router-quantile-balancing-ema	moe_router_quantile_balancing_ema	float		0.0	main	transformer configuration
--moe-router-score-function	moe_router_score_function	str		"softmax"	both	transformer configuration
--moe-router-topk	moe_router_topk	int		2	both	transformer configuration
--moe-router-topk-scaling-factor	moe_router_topk_scaling_factor	float			both	transformer configuration
--moe-routing-trace-capture-hidden-states	moe_routing_trace_capture_hidden_states	true	0	false	main	logging
--moe-routing-trace-capture-logits	moe_routing_trace_capture_logits	true	0	false	main	logging
--moe-routing-trace-dump-weights	moe_routing_trace_dump_weights	true	0	false	main	logging
--moe-routing-trace-max-training-iters	moe_routing_trace_max_training_iters	int			main	logging
--moe-routing-trace-path	moe_routing_trace_path	str			main	logging
--moe-shared-expert-gate	moe_shared_expert_gate	true	0	false	both	transformer configuration
--moe-shared-expert-glu-interleave-size	moe_shared_expert_glu_interleave_size	int			main	transformer configuration
--moe-shared-expert-intermediate-size	moe_shared_expert_intermediate_size	int			both	transformer configuration
--moe-shared-expert-overlap	moe_shared_expert_overlap	true	0	false	both	transformer configuration
--moe-single-grouped-bias	moe_single_grouped_bias	true	0	false	main	transformer configuration
--moe-single-grouped-weight	moe_single_grouped_weight	true	0	false	main	transformer configuration
--moe-token-dispatcher-type	moe_token_dispatcher_type	str		"allgather"	both	transformer configuration
--moe-token-drop-policy	moe_token_drop_policy	str		"probs"	both	transformer configuration
--moe-upcycling-granularity	moe_upcycling_granularity	int		1	both	moe
--moe-use-grouped-tensor	moe_use_grouped_tensor	true	0	false	main	transformer configuration
--moe-use-legacy-grouped-gemm	moe_use_legacy_grouped_gemm	true	0	false	0.16	transformer configuration
--moe-use-upcycling	moe_use_upcycling	true	0	false	both	moe
--moe-z-loss-coeff	moe_z_loss_coeff	float			both	transformer configuration
--mrope-interleaved	mrope_interleaved	true	0	false	dev	transformer configuration
--mrope-section	mrope_section	int	+		both	transformer configuration
--mscale	mscale	float		1.0	both	mla
--mscale-all-dim	mscale_all_dim	float		0.0	both	mla
--mtp-detach-heads	mtp_detach_heads	true	0	false	main	transformer configuration
--mtp-hsm	mtp_hsm	true	0	false	main	transformer configuration
--mtp-hybrid-override-pattern	mtp_hybrid_override_pattern	str			main	transformer configuration
--mtp-loss-scaling-factor	mtp_loss_scaling_factor	float		0.1	both	transformer configuration
--mtp-num-layers	mtp_num_layers	int			both	transformer configuration
--mtp-standalone	mtp_standalone	true	0	false	both	transformer configuration
--mtp-use-repeated-layer	mtp_use_repeated_layer	true	0	false	main	transformer configuration
--multi-latent-attention	multi_latent_attention	true	0	false	both	transformer configuration
--multiple-validation-sets	multiple_validation_sets	true	0	false	both	validation
--muon-coefficient-type	muon_coefficient_type	str		"quintic"	main	regularization
--muon-extra-scale-factor	muon_extra_scale_factor	float		1.0	both	regularization
--muon-fp32-matmul-prec	muon_fp32_matmul_prec	str		"medium"	both	regularization
--muon-momentum	muon_momentum	float		0.9	both	regularization
--muon-nesterov	muon_nesterov	true	0	false	main	regularization
--muon-no-split-qkv	muon_split_qkv	false	0	true	both	regularization
--muon-num-ns-steps	muon_num_ns_steps	int		5	both	regularization
--muon-scalar-optimizer	muon_scalar_optimizer	str		"adam"	main	regularization
--muon-scale-mode	muon_scale_mode	str		"spectral"	both	regularization
--muon-tp-mode	muon_tp_mode	str		"duplicated"	both	regularization
--muon-use-nesterov	muon_use_nesterov	true	0	false	0.16	regularization
--muon-use-syrk	muon_use_syrk	true	0	false	main	regularization
--mup-attn-scale-power	mup_attn_scale_power	float		1.0	main	transformer configuration
--mup-base-head-dim	mup_base_head_dim	float			main	transformer configuration
--mup-base-hidden-size	mup_base_hidden_size	int			main	transformer configuration
--mup-embedding-mult	mup_embedding_mult	float		1.0	main	transformer configuration
--mup-output-mult	mup_output_mult	float		1.0	main	transformer configuration
--mup-width-mult	mup_width_mult	float		1.0	main	transformer configuration
--nccl-all-reduce-for-prefill	nccl_all_reduce_for_prefill	true	0	false	both	transformer configuration
--nccl-communicator-config-path	nccl_communicator_config_path	str			both	distributed init
--no-align-grad-reduce --disable-align-grad-reduce	align_grad_reduce	false	0	true	both	distributed init
--no-align-param-gather	align_param_gather	false	0	true	both	distributed init
--no-async-tensor-model-parallel-allreduce --disable-async-tensor-model-parallel-allreduce	async_tensor_model_parallel_allreduce	false	0	true	0.16	transformer configuration
--no-barrier-with-level-1-timing	barrier_with_L1_time	false	0	true	both	logging
--no-bias-dropout-fusion	bias_dropout_fusion	false	0	true	both	training
--no-bias-gelu-fusion	bias_gelu_fusion	false	0	true	both	training
--no-bias-swiglu-fusion	bias_swiglu_fusion	false	0	true	both	training
--no-check-for-nan-in-loss-and-grad	check_for_nan_in_loss_and_grad	false	0	true	both	training
--no-ckpt-fully-parallel-save --disable-ckpt-fully-parallel-save	ckpt_fully_parallel_save	false	0	true	both	checkpointing
--no-ckpt-load-validate-sharding-integrity --disable-ckpt-load-validate-sharding-integrity	ckpt_load_validate_sharding_integrity	false	0	true	main	checkpointing
--no-clone-scatter-output-in-embedding --disable-clone-scatter-output-in-embedding	clone_scatter_output_in_embedding	false	0	true	both	transformer configuration
--no-create-attention-mask-in-dataloader	create_attention_mask_in_dataloader	false	0	true	both	data and dataloader
--no-data-sharding	data_sharding	false	0	true	both	vision
--no-dsa-indexer-rotate-activation --disable-dsa-indexer-rotate-activation	dsa_indexer_rotate_activation	false	0	true	main	transformer configuration
--no-dsa-indexer-scoring-relu --disable-dsa-indexer-scoring-relu	dsa_indexer_scoring_relu	false	0	true	main	transformer configuration
--no-dsa-kernel-fusion	apply_dsa_kernel_fusion	false	0		dev	experimental_attention_variant
--no-flight-recorder-dump-on-timeout --disable-flight-recorder-dump-on-timeout	flight_recorder_dump_on_timeout	false	0	true	main	distributed init
--no-flight-recorder-extra-dump-on-exec --disable-flight-recorder-extra-dump-on-exec	flight_recorder_extra_dump_on_exec	false	0	true	main	distributed init
--no-flight-recorder-include-only-active --disable-flight-recorder-include-only-active	flight_recorder_include_only_active	false	0	true	main	distributed init
--no-fp8-wgrad --disable-fp8-wgrad	fp8_wgrad	false	0	true	both	transformer configuration
--no-gradient-accumulation-fusion	gradient_accumulation_fusion	false	0	true	both	training
--no-gradient-reduce-div-fusion	gradient_reduce_div_fusion	false	0	true	both	distributed init
--no-initialization	perform_initialization	false	0	true	both	transformer configuration
--no-load-optim	no_load_optim	true	0		both	checkpointing
--no-load-rng	no_load_rng	true	0		both	checkpointing
--no-log-loss-scale-to-tensorboard --disable-log-loss-scale-to-tensorboard	log_loss_scale_to_tensorboard	false	0	true	both	logging
--no-manual-gc-eval --disable-manual-gc-eval	manual_gc_eval	false	0	true	both	training
--no-masked-softmax-fusion	masked_softmax_fusion	false	0	true	both	training
--no-mmap-bin-files	mmap_bin_files	false	0	true	both	data and dataloader
--no-one-logger	enable_one_logger	false	0	true	both	one logger
--no-overlap-p2p-communication	overlap_p2p_comm	false	0	true	both	distributed init
--no-pad-vocab-size --disable-pad-vocab-size	pad_vocab_size	false	0	true	main	tokenizer
--no-persist-layer-norm	no_persist_layer_norm	true	0	false	both	training
--no-pin-cpu-grads	pin_cpu_grads	false	0	true	both	training
--no-pin-cpu-params	pin_cpu_params	false	0	true	both	training
--no-position-embedding	add_position_embedding	false	0	true	both	network size
--no-rope-freq	no_rope_freq	str			both	network size
--no-rope-fusion	apply_rope_fusion	false	0	true	both	training
--no-save-optim	no_save_optim	true	0		both	checkpointing
--no-save-rng	no_save_rng	true	0		both	checkpointing
--no-save-tokenizer-assets --disable-save-tokenizer-assets	save_tokenizer_assets	false	0	true	main	checkpointing
--no-scatter-gather-tensors-in-pipeline	scatter_gather_tensors_in_pipeline	false	0	true	0.16	distributed
--no-strict-fsdp-dtensor-load --disable-strict-fsdp-dtensor-load	strict_fsdp_dtensor_load	false	0	true	both	checkpointing
--no-tokenizer-sentencepiece-ignore-extra-whitespaces --disable-tokenizer-sentencepiece-ignore-extra-whitespaces	tokenizer_sentencepiece_ignore_extra_whitespaces	false	0	true	main	tokenizer
--no-tp-comm-bulk-dgrad --disable-tp-comm-bulk-dgrad	tp_comm_bulk_dgrad	false	0	true	both	transformer configuration
--no-tp-comm-bulk-wgrad --disable-tp-comm-bulk-wgrad	tp_comm_bulk_wgrad	false	0	true	both	transformer configuration
--no-tp-comm-overlap-ag --disable-tp-comm-overlap-ag	tp_comm_overlap_ag	false	0	true	both	transformer configuration
--no-tp-comm-overlap-rs --disable-tp-comm-overlap-rs	tp_comm_overlap_rs	false	0	true	both	transformer configuration
--no-tp-comm-split-ag --disable-tp-comm-split-ag	tp_comm_split_ag	false	0	true	both	transformer configuration
--no-tp-comm-split-rs --disable-tp-comm-split-rs	tp_comm_split_rs	false	0	true	both	transformer configuration
--no-use-layer-wise-param-layout	use_layer_wise_param_layout	false	0	true	main	distributed init
--no-use-tokenizer-model-from-checkpoint-args --disable-use-tokenizer-model-from-checkpoint-args	use_tokenizer_model_from_checkpoint_args	false	0	true	both	checkpointing
--no-weight-decay-cond-type	no_weight_decay_cond_type	str			both	regularization
--no-yarn-correction-range-round-to-int	yarn_correction_range_round_to_int	false	0	true	main	network size
--non-persistent-ckpt-type	non_persistent_ckpt_type	str			both	checkpointing
--non-persistent-global-ckpt-dir	non_persistent_global_ckpt_dir	str			both	checkpointing
--non-persistent-local-ckpt-algo	non_persistent_local_ckpt_algo	str		"fully_parallel"	both	checkpointing
--non-persistent-local-ckpt-dir	non_persistent_local_ckpt_dir	str			both	checkpointing
--non-persistent-save-interval	non_persistent_save_interval	int			both	checkpointing
--norm-epsilon	layernorm_epsilon	float		1e-05	both	transformer configuration
--normalization	normalization	str		"LayerNorm"	both	transformer configuration
--null-tokenizer-eod-id	null_tokenizer_eod_id	int			main	tokenizer
--null-tokenizer-pad-id	null_tokenizer_pad_id	int		-1	main	tokenizer
--num-attention-heads	num_attention_heads	int			both	transformer configuration
--num-channels	num_channels	int		3	both	vision
--num-classes	num_classes	int		1000	both	vision
--num-dataset-builder-threads	num_dataset_builder_threads	int		1	both	data and dataloader
--num-distributed-optimizer-instances	num_distributed_optimizer_instances	int		1	both	distributed init
--num-experts	num_experts	int			both	moe
--num-layers	num_layers	int			both	transformer configuration
--num-layers-at-end-in-bf16	num_layers_at_end_in_bf16	int		1	both	transformer configuration
--num-layers-at-start-in-bf16	num_layers_at_start_in_bf16	int		1	both	transformer configuration
--num-layers-per-virtual-pipeline-stage	num_layers_per_virtual_pipeline_stage	int			both	distributed init
--num-query-groups	num_query_groups	int		1	both	transformer configuration
--num-residual-streams	num_residual_streams	int		4	dev	transformer configuration
--num-speculative-tokens	num_speculative_tokens	int		0	main	inference
--num-virtual-stages-per-pipeline-rank	num_virtual_stages_per_pipeline_rank	int			both	distributed init
--num-workers	num_workers	int		2	both	data and dataloader
--nvtx-ranges	nvtx_ranges	true	0	false	main	profiling
--o-groups	o_groups	int		8	dev	mla
--o-lora-rank	o_lora_rank	int		1024	dev	mla
--object-storage-cache-path	object_storage_cache_path	str			both	data and dataloader
--offload-modules	offload_modules	str	+	[]	both	transformer configuration
--offload-optimizer-states	offload_optimizer_states	true	0	false	dev	training
--one-logger-async	one_logger_async	true	0	false	both	one logger
--one-logger-project	one_logger_project	str		"megatron-lm"	both	one logger
--one-logger-run-name	one_logger_run_name	str			both	one logger
--onnx-safe	onnx_safe	str			both	network size
--openai-gelu	openai_gelu	true	0	false	both	network size
--optimizer	optimizer	str		"adam"	both	training
--optimizer-cpu-offload	optimizer_cpu_offload	true	0	false	both	training
--optimizer-cuda-graph	optimizer_cuda_graph	true	0	false	main	training
--optimizer-offload-fraction	optimizer_offload_fraction	float		1.0	both	training
--optimizer-state-offload-chunk-size-mb	optimizer_state_offload_chunk_size_mb	int		0	dev	training
--optimizer-state-offload-fraction	optimizer_state_offload_fraction	float		1.0	dev	training
--original-max-position-embeddings	original_max_position_embeddings	int		4096	dev	mla
--otel-enabled	otel_enabled	true	0	false	main	opentelemetry
--otel-service-name	otel_service_name	str			main	opentelemetry
--otel-span-groups	otel_span_groups	str			main	opentelemetry
--outer-dp-sharding-strategy	outer_dp_sharding_strategy	str		"no_shard"	both	distributed init
--output-bert-embeddings	output_bert_embeddings	true	0	false	both	inference
--output-logit-dtype	logit_dtype	str			main	mixed precision
--overlap-cpu-optimizer-d2h-h2d	overlap_cpu_optimizer_d2h_h2d	true	0	false	both	training
--overlap-dispatch-backward-with-experts-wgrad	overlap_dispatch_backward_with_experts_wgrad	true	0	false	main	transformer configuration
--overlap-grad-reduce	overlap_grad_reduce	true	0	false	both	distributed init
--overlap-moe-expert-parallel-comm	overlap_moe_expert_parallel_comm	true	0	false	both	transformer configuration
--overlap-p2p-communication-warmup-flush	overlap_p2p_comm_warmup_flush	true	0	false	both	transformer configuration
--overlap-param-gather	overlap_param_gather	true	0	false	both	distributed init
--overlap-param-gather-with-optimizer-step	overlap_param_gather_with_optimizer_step	true	0	false	both	distributed init
--override-ckpt-iteration	override_ckpt_iteration	int			main	checkpointing
--override-opt_param-scheduler --override-opt-param-scheduler	override_opt_param_scheduler	true	0	false	both	learning rate and weight decay
--pad-packed-seq-alignment	pad_packed_seq_alignment	str			dev	transformer configuration
--padded-vocab-size	padded_vocab_size	int			both	tokenizer
--patch-dim	patch_dim	int		16	both	vision
--per-dataset-sequences-path	per_dataset_sequences_path	str			both	data and dataloader
--per-split-data-args-path	per_split_data_args_path	str			both	data and dataloader
--perform-rl-step	perform_rl_step	true	0	false	both	rl
--phase-transition-iterations	phase_transition_iterations	str			both	data and dataloader
--pipeline-model-parallel-comm-backend	pipeline_model_parallel_comm_backend	str			both	transformer configuration
--pipeline-model-parallel-layout	pipeline_model_parallel_layout	str			both	distributed init
--pipeline-model-parallel-size	pipeline_model_parallel_size	int		1	both	transformer configuration
--position-embedding-type	position_embedding_type	str		"learned_absolute"	both	network size
--pretrained-checkpoint	pretrained_checkpoint	str			both	checkpointing
--profile	profile	true	0	false	both	profiling
--profile-ranks	profile_ranks	int	+	[]	both	profiling
--profile-step-end	profile_step_end	int		12	both	profiling
--profile-step-start	profile_step_start	int		10	both	profiling
--pytorch-profiler-collect-callstack	pytorch_profiler_collect_callstack	true	0	false	main	profiling
--pytorch-profiler-collect-chakra	pytorch_profiler_collect_chakra	true	0	false	main	profiling
--pytorch-profiler-collect-shapes	pytorch_profiler_collect_shapes	true	0	false	main	profiling
--q-lora-rank	q_lora_rank	int			both	mla
--qk-clip	qk_clip	true	0	false	both	transformer configuration
--qk-clip-alpha	qk_clip_alpha	float		0.5	both	transformer configuration
--qk-clip-threshold	qk_clip_threshold	float		100	both	transformer configuration
--qk-head-dim	qk_head_dim	int		128	both	mla
--qk-l2-norm	qk_l2_norm	true	0	false	both	transformer configuration
--qk-layernorm	qk_layernorm	true	0	false	both	transformer configuration
--qk-pos-emb-head-dim	qk_pos_emb_head_dim	int		64	both	mla
--query-in-block-prob	query_in_block_prob	float		0.1	both	biencoder
--quick-geglu	quick_geglu	true	0	false	both	network size
--rampup-batch-size	rampup_batch_size	int	3		both	training
--recompute-activations	recompute_activations	true	0	false	both	training
--recompute-granularity	recompute_granularity	str			both	transformer configuration
--recompute-method	recompute_method	str			both	transformer configuration
--recompute-modules	recompute_modules	str	+		both	transformer configuration
--recompute-num-layers	recompute_num_layers	int			both	transformer configuration
--record-memory-history	record_memory_history	true	0	false	both	profiling
--record-shapes	record_shapes	true	0	false	main	profiling
--refit-method	refit_method	str		"gloo"	both	rl
--relative-attention-max-distance	relative_attention_max_distance	int		128	both	network size
--relative-attention-num-buckets	relative_attention_num_buckets	int		32	both	network size
--replication	replication	true	0	false	both	checkpointing
--replication-factor	replication_factor	int		2	both	checkpointing
--replication-jump	replication_jump	int			both	checkpointing
--rerun-mode	rerun_mode	str		"validate_results"	both	rerun engine
--reset-attention-mask	reset_attention_mask	true	0	false	both	data and dataloader
--reset-position-ids	reset_position_ids	true	0	false	both	data and dataloader
--result-rejected-tracker-filename	result_rejected_tracker_filename	str			both	training
--retriever-report-topk-accuracies	retriever_report_topk_accuracies	int	+	[]	both	biencoder
--retriever-score-scaling	retriever_score_scaling	true	0	false	both	biencoder
--reuse-grad-buf-for-mxfp8-param-ag	reuse_grad_buf_for_mxfp8_param_ag	true	0	false	both	mixed precision
--rl-consumption-granularity	rl_consumption_granularity	str		"B"	main	rl
--rl-default-temperature	rl_default_temperature	float		1.0	both	rl
--rl-default-top-k	rl_default_top_k	int		-1	both	rl
--rl-default-top-p	rl_default_top_p	float		0	both	rl
--rl-durable-rollout-bank	rl_durable_rollout_bank	true	0	false	main	rl
--rl-generation-lag	rl_generation_lag	float			main	rl
--rl-importance-sampling-truncation-coef	rl_importance_sampling_truncation_coef	float			both	rl
--rl-inference-expert-model-parallel-size	rl_inference_expert_model_parallel_size	int			both	rl
--rl-inference-expert-tensor-model-parallel-size	rl_inference_expert_tensor_model_parallel_size	int			both	rl
--rl-inference-logprobs-is-correction --no-rl-inference-logprobs-is-correction	rl_inference_logprobs_is_correction	boolopt	0	false	both	rl
--rl-inference-model-unified-memory-level	rl_inference_model_unified_memory_level	int		0	both	rl
--rl-inference-parsers	rl_inference_parsers	str	*	[]	main	rl
--rl-inference-pipeline-model-parallel-size	rl_inference_pipeline_model_parallel_size	int			both	rl
--rl-inference-tensor-model-parallel-size	rl_inference_tensor_model_parallel_size	int			both	rl
--rl-kv-cache-management-mode	rl_kv_cache_management_mode	str		"persist"	main	rl
--rl-max-inflight-requests	rl_max_inflight_requests	int			main	rl
--rl-offload-inference-model-weights-when-idle --no-rl-offload-inference-model-weights-when-idle	rl_offload_inference_model_weights_when_idle	boolopt	0	false	both	rl
--rl-offload-kv-cache-during-training --no-rl-offload-kv-cache-during-training	rl_offload_kv_cache_during_training	boolopt	0	false	0.16	rl
--rl-offload-optimizer-during-inference	rl_offload_optimizer_during_inference	true	0	false	both	rl
--rl-parallel-generation-tasks	rl_parallel_generation_tasks	int		512	0.16	rl
--rl-partial-rollouts --no-rl-partial-rollouts	rl_partial_rollouts	boolopt	0	false	both	rl
--rl-persist-cuda-graphs --no-rl-persist-cuda-graphs	rl_persist_cuda_graphs	boolopt	0	false	main	rl
--rl-profile	rl_profile	true	0	false	main	rl
--rl-profile-dir	rl_profile_dir	str			main	rl
--rl-prompts-per-eval	rl_prompts_per_eval	int		32	both	rl
--rl-remove-kv-cache-during-training --no-rl-remove-kv-cache-during-training	rl_remove_kv_cache_during_training	boolopt	0	false	0.16	rl
--rl-reset-cuda-graphs --no-rl-reset-cuda-graphs	rl_reset_cuda_graphs	boolopt	0	false	0.16	rl
--rl-rollout-bank-dir	rl_rollout_bank_dir	str			main	rl
--rl-rollout-bank-max-bytes	rl_rollout_bank_max_bytes	int		0	main	rl
--rl-sequence-packing-algo	rl_sequence_packing_algo	str		"fifo"	both	rl
--rl-sequence-packing-max-sequences-per-bin	rl_sequence_packing_max_sequences_per_bin	int		50	both	rl
--rl-skip-bos-token --no-rl-skip-bos-token	rl_skip_bos_token	boolopt	0	false	both	rl
--rl-submission-granularity	rl_submission_granularity	str		"B"	main	rl
--rl-training-cuda-graphs --no-rl-training-cuda-graphs	rl_training_cuda_graphs	boolopt	0	false	both	rl
--rl-use-sequence-packing --no-rl-use-sequence-packing	rl_use_sequence_packing	boolopt	0	false	both	rl
--rl-verify-model-weights-swap --no-rl-verify-model-weights-swap	rl_verify_model_weights_swap	boolopt	0	false	both	rl
--rope-scaling-factor	rope_scaling_factor	float		8.0	both	network size
--rope-type	rope_type	str			both	training
--rotary-base	rotary_base	int		10000	both	network size
--rotary-base-per-layer	rotary_base_per_layer	float	+		dev	transformer configuration
--rotary-interleaved	rotary_interleaved	true	0	false	both	transformer configuration
--rotary-percent	rotary_percent	float		1.0	both	network size
--rotary-scaling-factor	rotary_scaling_factor	float		1.0	both	mla
--rotary-seq-len-interpolation-factor	rotary_seq_len_interpolation_factor	int			both	network size
--run-workload-inspector-server	run_workload_inspector_server	true	0	false	both	workload inspector
--sample-rate	sample_rate	float		1.0	both	data and dataloader
--save	save	str			both	checkpointing
--save-activations-interval	save_activations_interval	int			main	checkpointing
--save-dgrads-interval	save_dgrads_interval	int			both	checkpointing
--save-interval --persistent-save-interval	save_interval	int			both	checkpointing
--save-params-interval	save_params_interval	int			main	checkpointing
--save-retain-interval	save_retain_interval	int			both	checkpointing
--save-tokens-per-expert-interval	save_tokens_per_expert_interval	int			main	checkpointing
--save-wgrads-interval	save_wgrads_interval	int			both	checkpointing
--seed	seed	int		1234	both	RNG and initialization
--seq-length	seq_length	int			both	data and dataloader
--sequence-packing-scheduler	sequence_packing_scheduler	str			dev	transformer configuration
--sequence-parallel	sequence_parallel	true	0	false	both	transformer configuration
--sft	sft	true	0	false	both	sft
--sft-mock-dataset-config-json	sft_mock_dataset_config_json	str			dev	sft
--sft-tokenizer-prompt-format	sft_tokenizer_prompt_format	str		"nemotron-h-aligned"	both	sft
--sgd-momentum	sgd_momentum	float		0.9	both	regularization
--sharp-enabled-group	sharp_enabled_group	str			both	distributed init
--short-seq-prob	short_seq_prob	float		0.1	both	data and dataloader
--skip-train	skip_train	true	0	false	both	validation
--softmax-type	softmax_type	str		"vanilla"	both	transformer configuration
--spec	spec	str	*		both	experimental
--split	split	str			both	data and dataloader
--squared-relu	squared_relu	true	0	false	both	network size
--start-eval-at-iter	start_eval_at_iter	int			main	validation
--start-weight-decay	start_weight_decay	float			both	learning rate and weight decay
--step-batch-size-schedule	step_batch_size_schedule	str			main	training
--straggler-ctrlr-port	straggler_ctrlr_port	int		65535	both	straggler
--straggler-minmax-count	straggler_minmax_count	int		1	both	straggler
--suggested-communication-unit-size	suggested_communication_unit_size	int			both	distributed init
--swiglu	swiglu	true	0	false	both	network size
--swin-backbone-type	swin_backbone_type	str		"tiny"	both	vision
--symmetric-ar-type	symmetric_ar_type	str			both	transformer configuration
--te-precision-config-file	te_precision_config_file	str			both	Transformer-Engine
--te-rng-tracker	te_rng_tracker	true	0	false	both	RNG and initialization
--tensor-model-parallel-size	tensor_model_parallel_size	int		1	both	transformer configuration
--tensor-parallel-num-weight-shards	tensor_parallel_num_weight_shards	int			main	transformer configuration
--tensorboard-dir	tensorboard_dir	str			both	logging
--tensorboard-log-interval	tensorboard_log_interval	int		1	both	logging
--tensorboard-queue-size	tensorboard_queue_size	int		1000	both	logging
--test-data-path	test_data_path	str	*		both	data and dataloader
--test-mode	test_mode	true	0	false	both	validation
--thd-max-packed-sequences	thd_max_packed_sequences	int			dev	transformer configuration
--thd-tail-padding-policy	thd_tail_padding_policy	str			dev	transformer configuration
--tiktoken-num-special-tokens	tiktoken_num_special_tokens	int		1000	both	tokenizer
--tiktoken-pattern	tiktoken_pattern	str			both	tokenizer
--tiktoken-special-tokens	tiktoken_special_tokens	str	+		0.16	tokenizer
--timing-log-level	timing_log_level	int		0	both	logging
--timing-log-option	timing_log_option	str		"minmax"	both	logging
--titles-data-path	titles_data_path	str			both	biencoder
--tokenizer-hf-include-special-tokens	tokenizer_hf_include_special_tokens	true	0	false	0.16	tokenizer
--tokenizer-hf-no-include-special-tokens	tokenizer_hf_no_include_special_tokens	true	0	false	main	tokenizer
--tokenizer-hf-no-use-fast	tokenizer_hf_no_use_fast	true	0	false	main	tokenizer
--tokenizer-hf-use-fast	tokenizer_hf_use_fast	true	0	false	0.16	tokenizer
--tokenizer-metadata	tokenizer_metadata	str			both	tokenizer
--tokenizer-model	tokenizer_model	str			both	tokenizer
--tokenizer-sentencepiece-legacy	tokenizer_sentencepiece_legacy	true	0	false	both	tokenizer
--tokenizer-special-tokens	tokenizer_special_tokens	str	+		both	tokenizer
--tokenizer-type	tokenizer_type	str			both	tokenizer
--torch-fsdp2-no-reshard-after-forward	torch_fsdp2_reshard_after_forward	false	0	true	both	distributed init
--tp-comm-bootstrap-backend	tp_comm_bootstrap_backend	str		"nccl"	both	transformer configuration
--tp-comm-overlap	tp_comm_overlap	true	0	false	both	transformer configuration
--tp-comm-overlap-cfg	tp_comm_overlap_cfg	str			both	training
--tp-comm-overlap-rs-dgrad	tp_comm_overlap_rs_dgrad	true	0	false	both	transformer configuration
--train-data-path	train_data_path	str	*		both	data and dataloader
--train-iters	train_iters	int			both	training
--train-samples	train_samples	int			both	training
--train-sync-interval	train_sync_interval	int			both	training
--transformer-impl	transformer_impl	str		"transformer_engine"	both	transformer configuration
--trust-remote-code	trust_remote_code	true	0	false	both	tokenizer
--untie-embeddings-and-output-weights	untie_embeddings_and_output_weights	true	0	false	both	network size
--use-checkpoint-args	use_checkpoint_args	true	0	false	both	checkpointing
--use-checkpoint-opt_param-scheduler --use-checkpoint-opt-param-scheduler	use_checkpoint_opt_param_scheduler	true	0	false	both	learning rate and weight decay
--use-cpu-initialization	use_cpu_initialization	true	0		both	transformer configuration
--use-dist-ckpt	use_dist_ckpt_deprecated	true	0	false	both	checkpointing
--use-distributed-optimizer	use_distributed_optimizer	true	0	false	both	distributed init
--use-flash-attn	use_flash_attn	true	0	false	both	training
--use-fused-mhc	use_fused_mhc	true	0	false	dev	transformer configuration
--use-fused-weighted-squared-relu	use_fused_weighted_squared_relu	true	0	false	both	transformer configuration
--use-gigatoken	use_gigatoken	true	0	false	main	tokenizer
--use-grouped-gemm-for-dense-mlp	use_grouped_gemm_for_dense_mlp	true	0	false	main	transformer configuration
--use-grouped-gemm-for-shared-expert	use_grouped_gemm_for_shared_expert	true	0	false	main	transformer configuration
--use-kitchen-attention	use_kitchen_attention	true	0	false	both	transformer configuration
--use-layer-wise-param-layout	use_layer_wise_param_layout	true	0	false	dev	distributed init
--use-legacy-models	use_legacy_models	true	0	false	0.16	training
--use-legacy-static-engine	use_legacy_static_engine	true	0	false	both	inference
--use-mcore-models	deprecated_use_mcore_models	true	0	false	both	training
--use-megatron-fsdp	use_megatron_fsdp	true	0	false	both	distributed init
--use-mp-args-from-checkpoint-args	use_mp_args_from_checkpoint_args	true	0	false	both	checkpointing
--use-mup	use_mup	true	0	false	main	transformer configuration
--use-nccl-ub	nccl_ub	true	0	false	both	distributed init
--use-one-sent-docs	use_one_sent_docs	true	0	false	both	biencoder
--use-persistent-ckpt-worker	use_persistent_ckpt_worker	true	0	false	both	checkpointing
--use-precision-aware-optimizer	use_precision_aware_optimizer	true	0	false	both	experimental
--use-pytorch-profiler	use_pytorch_profiler	true	0	false	both	profiling
--use-ring-exchange-p2p	use_ring_exchange_p2p	true	0	false	both	transformer configuration
--use-rope-scaling	use_rope_scaling	true	0	false	both	network size
--use-rotary-position-embeddings	use_rotary_position_embeddings	true	0	false	both	network size
--use-same-sampling-seed-across-dp-ranks	offset_sampling_seed_by_dp_rank	false	0	true	main	inference
--use-sharp	use_sharp	true	0	false	both	distributed init
--use-te-activation-func	use_te_activation_func	true	0	false	both	transformer configuration
--use-torch-fsdp2	use_torch_fsdp2	true	0	false	both	distributed init
--use-torch-optimizer-for-cpu-offload	use_torch_optimizer_for_cpu_offload	true	0	false	both	training
--use-tp-pp-dp-mapping	use_tp_pp_dp_mapping	true	0	false	both	distributed init
--use-transformer-engine-op-fuser	use_transformer_engine_op_fuser	true	0	false	main	transformer configuration
--use-varlen-dataset	use_varlen_dataset	true	0	false	dev	varlen dataset
--v-head-dim	v_head_dim	int		128	both	mla
--valid-data-path	valid_data_path	str	*		both	data and dataloader
--validation-set-names	validation_set_names	str	+		main	validation
--varlen-mock-dataset-config-json	varlen_mock_dataset_config_json	str			dev	varlen dataset
--varlen-sbhd-validation	varlen_sbhd_validation	true	0	false	dev	varlen dataset
--verify-integrity	verify_integrity	true	0	false	main	checkpointing
--vision-backbone-type	vision_backbone_type	str		"vit"	both	vision
--vision-pretraining	vision_pretraining	true	0	false	both	vision
--vision-pretraining-type	vision_pretraining_type	str		"classify"	both	vision
--vocab-extra-ids	vocab_extra_ids	int		0	both	tokenizer
--vocab-file	vocab_file	str			both	tokenizer
--vocab-size	vocab_size	int			both	tokenizer
--wandb-entity	wandb_entity	str			both	logging
--wandb-exp-name	wandb_exp_name	str			both	logging
--wandb-project	wandb_project	str			both	logging
--wandb-save-dir	wandb_save_dir	str			both	logging
--warmup	warmup	int			both	learning rate and weight decay
--weight-decay	weight_decay	float		0.01	both	regularization
--weight-decay-incr-style	weight_decay_incr_style	str		"constant"	both	learning rate and weight decay
--wgrad-deferral-limit	wgrad_deferral_limit	int		0	both	transformer configuration
--window-attn-skip-freq	window_attn_skip_freq	str			both	network size
--window-size	window_size	str			both	network size
--yaml-cfg	yaml_cfg	str			both	experimental
--yarn-beta-fast	yarn_beta_fast	float			main	network size
--yarn-beta-slow	yarn_beta_slow	float			main	network size
--yarn-correction-range-round-to-int	yarn_correction_range_round_to_int	true	0		main	network size
--yarn-original-max-position-embeddings	yarn_original_max_position_embeddings	int			main	network size
"""

# --------------------------------------------------------------------------- classification
# flag -> plan field it is read into
MODELLED_FLAGS: dict[str, str] = {
    # architecture
    "--num-layers": "model.num_layers", "--hidden-size": "model.hidden_size",
    "--ffn-hidden-size": "model.ffn_hidden_size (default 4h, int(8h/3/64)*64 with --swiglu)",
    "--num-attention-heads": "model.num_attention_heads",
    "--group-query-attention": "model.num_query_groups (None = MHA)", "--num-query-groups": "model.num_query_groups",
    "--kv-channels": "model.head_dim", "--max-position-embeddings": "model.max_position_embeddings",
    "--position-embedding-type": "model.position_embedding (learned_absolute, rope, mrope -> rope, yarn, none)",
    "--use-rotary-position-embeddings": "model.position_embedding = rope",
    "--no-position-embedding": "model.position_embedding = none (with learned_absolute)",
    "--make-vocab-size-divisible-by": "model.make_vocab_size_divisible_by",
    "--normalization": "model.normalization", "--swiglu": "model.swiglu + activation silu",
    "--quick-geglu": "model.swiglu (gated) + activation quick_gelu",
    "--activation-func-clamp-value": "model.activation_clamp (gated activations: the unfused clamp + cat before the "
                                     "fused weighted quick-GeGLU)",
    "--squared-relu": "model.activation squared_relu", "--openai-gelu": "model.activation gelu (same cost as gelu)",
    "--untie-embeddings-and-output-weights": "model.untie_embeddings_and_output_weights",
    "--disable-bias-linear": "model.add_bias_linear", "--add-qkv-bias": "model.add_qkv_bias",
    "--add-qkv-bias-linear": "model.add_qkv_bias (the ROCm forks' spelling: a bias on the QKV projection only, "
                             "ParallelAttention query_key_value bias=add_bias_linear or add_qkv_bias_linear; "
                             "Megatron-LM's own parser exits 'unrecognized arguments')",
    "--qk-layernorm": "model.qk_layernorm", "--softmax-type": "model.softmax_type",
    "--window-size": "model.window_size (the left window of 'L,0')",
    "--window-attn-skip-freq": "model.window_layer_pattern (Megatron is_layer_window_attention)",
    "--attention-dropout": "model.attention_dropout (Megatron default 0.1)",
    "--hidden-dropout": "model.hidden_dropout (Megatron default 0.1)",
    "--multi-latent-attention": "model.multi_latent_attention", "--q-lora-rank": "model.q_lora_rank",
    "--kv-lora-rank": "model.kv_lora_rank", "--qk-head-dim": "model.qk_head_dim",
    "--qk-pos-emb-head-dim": "model.qk_pos_emb_head_dim", "--v-head-dim": "model.v_head_dim",
    "--mtp-num-layers": "model.mtp_num_layers", "--seq-length": "model.seq_length",
    # hybrid Mamba-2 / attention stacks (pretrain_mamba.py, pretrain_hybrid.py: Nemotron-H, Nemotron 3)
    "--hybrid-override-pattern": "model.hybrid_pattern (one of M * - E per layer; pipeline '|' separators refused; "
                                 "'/<mtp>' depths: model.hybrid_mtp_pattern)",
    "--hybrid-layer-pattern": "model.hybrid_pattern (main's spelling; its length sets --num-layers; "
                              "'<main>/<mtp>/<mtp>': model.hybrid_mtp_pattern and model.mtp_num_layers)",
    "--mtp-hybrid-override-pattern": "model.hybrid_mtp_pattern (legacy spelling of one MTP depth's layers)",
    "--use-fused-weighted-squared-relu": "model.moe_fused_weighted_squared_relu (memory: no act(x) copy kept; time: "
                                         "priced as the unfused activation and multiply)",
    "--moe-latent-size": "model.moe_latent_size (latent MoE: experts, dispatch and combine on l-wide tokens, "
                         "fc1/fc2_latent_proj GEMMs)",
    "--hybrid-attention-ratio": "model.hybrid_pattern (megatron-core's even allocation of attention layers)",
    "--hybrid-mlp-ratio": "model.hybrid_pattern (megatron-core's even allocation of MLP layers)",
    "--is-hybrid-model": "model.hybrid_pattern (a hybrid stack; the pattern from the flags above)",
    "--mamba-state-dim": "model.mamba_state_dim", "--mamba-head-dim": "model.mamba_head_dim",
    "--mamba-num-groups": "model.mamba_num_groups", "--mamba-num-heads": "model.mamba_num_heads",
    "--encoder-seq-length": "model.seq_length (when --seq-length is absent)",
    "--vocab-size": "model.vocab_size", "--padded-vocab-size": "model.vocab_size (already padded)",
    "--tokenizer-type": "model.vocab_size (GPT2BPETokenizer 50257; NullTokenizer +1 EOD)",
    "--tokenizer-model": "model.vocab_size (local tokenizer file or the table of public tokenizers)",
    "--vocab-file": "model.vocab_size (a local vocab file's entries)",
    # MoE
    "--num-experts": "model.num_experts", "--moe-router-topk": "model.moe_router_topk",
    "--moe-ffn-hidden-size": "model.moe_ffn_hidden_size",
    "--moe-shared-expert-intermediate-size": "model.moe_shared_expert_intermediate_size",
    "--moe-layer-freq": "model.moe_layer_pattern (layer i is MoE when i % N == 0, or the list)",
    "--moe-router-enable-expert-bias": "model.moe_router_bias",
    "--moe-router-num-groups": "model.moe_router_num_groups", "--moe-router-group-topk": "model.moe_router_group_topk",
    "--moe-token-dispatcher-type": "training.moe_token_dispatcher",
    "--moe-enable-deepep": "training.moe_token_dispatcher = deepep",
    "--moe-flex-dispatcher-backend": "training.moe_token_dispatcher (deepep / hybridep)",
    "--moe-grouped-gemm": "training.moe_grouped_gemm (Megatron default off)",
    "--moe-use-legacy-grouped-gemm": "training.moe_expert_gemm = legacy (grouped_gemm library, BF16 experts)",
    "--use-transformer-engine-op-fuser": "training.moe_expert_gemm = te_fused (with --moe-grouped-gemm: TE op-fuser "
                                         "grouped MLP, CuTeDSL kernels with the activation and biases in their "
                                         "epilogues; dense layers not modelled)",
    "--moe-permute-fusion": "training.moe_permute_fusion (Megatron default off)",
    "--moe-router-padding-for-quantization": "training.moe_router_padding_for_quantization (no TE Fp8Padding copies "
                                             "around the experts; the padded routed tokens themselves not priced)",
    "--moe-router-padding-for-fp8": "training.moe_router_padding_for_quantization (alias)",
    "--moe-flex-dispatcher-num-sms": "training.moe_dispatcher_num_sms (SMs DeepEP / HybridEP take beside compute)",
    "--moe-deepep-num-sms": "training.moe_dispatcher_num_sms (deprecated, routed as Megatron does)",
    "--moe-hybridep-num-sms": "training.moe_dispatcher_num_sms (deprecated, routed as Megatron does)",
    "--moe-router-force-load-balancing": "training.moe_router_force_load_balancing",
    "--moe-router-fusion": "training.moe_router_fusion (Megatron default off)",
    "--moe-router-load-balancing-type": "training.moe_router_aux_loss (none = no aux-loss kernels)",
    "--moe-router-dtype": "training.moe_router_fp32",
    "--overlap-moe-expert-parallel-comm": "training.overlap_moe_expert_parallel_comm",
    "--delay-wgrad-compute": "training.delay_wgrad_compute",
    "--moe-shared-expert-overlap": "training.moe_shared_expert_overlap",
    "--moe-layer-recompute": "training.recompute (selective, module moe)",
    # parallelism
    "--tensor-model-parallel-size": "parallel.tp", "--pipeline-model-parallel-size": "parallel.pp",
    "--num-layers-per-virtual-pipeline-stage": "parallel.vpp = layers/pp/N",
    "--num-virtual-stages-per-pipeline-rank": "parallel.vpp",
    "--microbatch-group-size-per-virtual-pipeline-stage": "parallel.microbatch_group (interleaved schedule order, warm-up)",
    "--decoder-first-pipeline-num-layers": "parallel.pipeline_layers_first_stage",
    "--decoder-last-pipeline-num-layers": "parallel.pipeline_layers_last_stage",
    "--pipeline-model-parallel-layout": "parallel.pipeline_layout (vpp = stages / pp)",
    "--account-for-embedding-in-pipeline-split": "parallel.account_for_embedding_in_pipeline_split",
    "--account-for-loss-in-pipeline-split": "parallel.account_for_loss_in_pipeline_split",
    "--context-parallel-size": "parallel.cp", "--cp-comm-type": "parallel.cp_comm_type",
    "--expert-model-parallel-size": "parallel.ep", "--expert-tensor-parallel-size": "parallel.etp",
    "--sequence-parallel": "parallel.sequence_parallel (off at TP=1)",
    "--use-distributed-optimizer": "parallel.dp_sharding = optimizer",
    "--num-distributed-optimizer-instances": "parallel.dp_replicate (optimizer state sharded over dp x cp / N; the "
                                             "instances' all-reduce reported as not priced)",
    "--use-torch-fsdp2": "parallel.dp_sharding = full, parallel.fsdp_impl = torch_fsdp2", "--use-megatron-fsdp": "parallel.dp_sharding",
    "--use-custom-fsdp": "parallel.dp_sharding (the spelling of --use-megatron-fsdp before af28b5a; with "
                         "optim_grads_params / optim_grads its validate_args sets training.overlap_grad_reduce / "
                         "overlap_param_gather)",
    "--data-parallel-sharding-strategy": "parallel.dp_sharding (no_shard, optim, optim_grads, optim_grads_params)",
    "--torch-fsdp2-no-reshard-after-forward": "parallel.fsdp_reshard_after_forward = never",
    "--tp-comm-overlap": "training.tp_comm_overlap",
    "--defer-embedding-wgrad-compute": "training.defer_embedding_wgrad (memory: the last stage keeps each deferred "
                                       "micro-batch's logits gradient and output-layer input until the flush; "
                                       "time: reported as not modelled)",
    "--wgrad-deferral-limit": "training.wgrad_deferral_limit",
    "--tp-comm-overlap-cfg": "training.tp_comm_overlap_cfg (per-GEMM userbuffers method, num_sm, set_sm_margin)",
    "--no-async-tensor-model-parallel-allreduce": "training.tp_async_backward",
    "--no-gradient-accumulation-fusion": "training.gradient_accumulation_fusion (time: an add / copy kernel into "
                                         "main_grad per weight and micro-batch; memory: the weight's fresh "
                                         "gradient: cost/wgrad_accumulation.py)",
    "--overlap-grad-reduce": "training.overlap_grad_reduce", "--overlap-param-gather": "training.overlap_param_gather",
    "--ddp-bucket-size": "training.ddp_bucket_size (parameters per DDP gradient bucket: NCCL calls)",
    "--ddp-num-buckets": "training.ddp_num_buckets (bucket = the rank's parameters // N: NCCL calls)",
    "--no-align-grad-reduce": "training.align_grad_reduce", "--no-align-param-gather": "training.align_param_gather",
    # batch / schedule / optimizer
    "--micro-batch-size": "training.micro_batch_size", "--global-batch-size": "training.global_batch_size",
    "--rampup-batch-size": "training.global_batch_size (the steady batch; stated in source.notes)",
    "--step-batch-size-schedule": "training.global_batch_size (the last, steady batch; stated in source.notes)",
    "--train-iters": "training.train_iters", "--optimizer": "training.optimizer (adam, sgd; muon / dist_muon: muon, "
                                                                    "training.muon_layer_wise for dist_muon or muon "
                                                                    "with --use-distributed-optimizer)",
    # Muon (memory/muon.py, cost/muon.py); momentum, Nesterov, scale mode / factor and the coefficient set are
    # neutral (NEUTRAL_FLAGS): they change the update's values, not its kernels or state
    "--muon-num-ns-steps": "training.muon_num_ns_steps", "--muon-tp-mode": "training.muon_tp_mode",
    "--muon-fp32-matmul-prec": "training.muon_fp32_matmul_prec",
    "--muon-no-split-qkv": "training.muon_split_qkv = False",
    "--muon-scalar-optimizer": "training.muon_scalar_optimizer (adam: two moments, lion: one)",
    # logging groups, but computed every iteration (cost/optimizer.py stat_bytes_per_param)
    "--log-params-norm": "training.log_params_norm (a read of the main parameters every iteration)",
    "--log-num-zeros-in-grad": "training.log_num_zeros_in_grad (a read of the main gradients every step)",
    # a full Python garbage collection every N iterations (cost/manual_gc.py)
    "--manual-gc": "training.manual_gc (automatic GC off, full collections on a schedule)",
    "--manual-gc-interval": "training.manual_gc_interval (iterations between full collections)",
    # per-iteration passes over the gradient buffer / optimizer shard (cost/step_extras.py)
    "--clip-grad": "training.clip_grad (0: no gradient-norm read in the optimizer step)",
    "--no-check-for-nan-in-loss-and-grad": "training.check_for_nan_in_grad (the per-bucket gradient norm skipped)",
    "--ddp-average-in-collective": "training.ddp_average_in_collective (no 1/DP pass over the gradient buffer)",
    "--calculate-per-token-loss": "training.calculate_per_token_loss (a 1/tokens pass over the gradient buffer)",
    "--recompute-activations": "training.recompute.granularity = selective",
    "--checkpoint-activations": "training.recompute = full uniform 1 (deprecated spelling)",
    "--recompute-granularity": "training.recompute.granularity", "--recompute-method": "training.recompute.method",
    "--recompute-num-layers": "training.recompute.num_layers", "--recompute-modules": "training.recompute.modules",
    "--cpu-offloading-num-layers": "training.offload.activation_layers",
    "--cpu-offloading": "training.offload (TransformerConfig)", "--cpu-offloading-weights": "training.offload.weights",
    "--cpu-offloading-activations": "training.offload.activation_layers (off: weights only)",
    "--fine-grained-activation-offloading": "training.offload.activation_modules",
    "--offload-modules": "training.offload.activation_modules",
    "--optimizer-cpu-offload": "training.offload.optimizer_fraction",
    "--optimizer-offload-fraction": "training.offload.optimizer_fraction",
    # Megatron-LM dev 9050d4c5fb (chunked optimizer-state and master-weight offload): memory.mcore, cost.optimizer
    "--chunked-optimizer-state-offload": "training.offload.optimizer_state_fraction (state and masters on the host "
                                         "between steps; GPU step over chunks)",
    "--offload-optimizer-states": "training.offload.optimizer_state_fraction (deprecated spelling of "
                                  "--chunked-optimizer-state-offload)",
    "--optimizer-state-offload-fraction": "training.offload.optimizer_state_fraction",
    "--optimizer-state-offload-chunk-size-mb": "training.offload.optimizer_state_chunk_mb",
    # precision
    "--bf16": "training.precision", "--fp16": "training.precision", "--fp8-format": "training.precision = fp8",
    "--fp8-recipe": "training.fp8_recipe (without --fp8-format: training.optimizer_fp8_recipe, the precision-aware "
                    "optimizer's master copy)", "--fp8-param-gather": "training.fp8_param_gather",
    "--first-last-layers-bf16": "training.bf16_layers_start / bf16_layers_end (the layers run outside the FP8 / FP4 "
                                "context: BF16 GEMMs and saved tensors, BF16 weights)",
    "--num-layers-at-start-in-bf16": "training.bf16_layers_start (with --first-last-layers-bf16; default 1)",
    "--num-layers-at-end-in-bf16": "training.bf16_layers_end (with --first-last-layers-bf16; default 1)",
    # a TransformerConfig field (no Megatron-LM argument: arguments.py copies it only from a config); YAML
    # configs and Megatron-Bridge recipes set it (26.06 / 26.08 full-iteration MXFP8 perf recipes)
    "--fp8-dot-product-attention": "training.fp8_attention (with --fp8-format: TE FP8 fused attention, "
                                   "cost/fp8_attention.py)",
    "--fp4-format": "training.precision = fp4", "--fp4-recipe": "training.fp4_recipe",
    "--fp4-param-gather": "training.fp8_param_gather (low-precision weights gathered)",
    "--grad-reduce-in-bf16": "training.grad_reduce_in_fp32",
    "--accumulate-allreduce-grads-in-fp32": "training.grad_reduce_in_fp32",
    "--use-precision-aware-optimizer": "training.precision_aware_optimizer",
    "--main-grads-dtype": "training.main_grads_dtype", "--main-params-dtype": "training.main_params_dtype",
    "--exp-avg-dtype": "training.exp_avg_dtype", "--exp-avg-sq-dtype": "training.exp_avg_sq_dtype",
    # kernels
    "--attention-backend": "training.attention_backend", "--transformer-impl": "training.attention_backend",
    "--cross-entropy-loss-fusion": "training.cross_entropy_loss_fusion",
    "--cross-entropy-fusion-impl": "training.cross_entropy_fusion_impl",
    "--no-rope-fusion": "training.rope_fusion",
    "--no-create-attention-mask-in-dataloader": "training.dataloader_attention_mask",
    "--cuda-graph-impl": "training.cuda_graph_impl", "--cuda-graph-scope": "training.cuda_graph_scope",
    "--cuda-graph-modules": "training.cuda_graph_scope", "--enable-cuda-graph": "training.cuda_graph_impl = local",
    "--external-cuda-graph": "training.cuda_graph_impl = transformer_engine",
    "--cuda-graph-warmup-steps": "training.cuda_graph_warmup_steps",
    # static-shape MoE (main / dev): memory.paged_stash
    "--moe-expert-rank-capacity-factor": "training.moe_expert_rank_capacity_factor",
    "--moe-paged-stash": "training.moe_paged_stash",
    # token drop (NeMo's MegatronTokenDropCallback): cost/moe_imbalance.py capacity bound, no dispatcher sync when padded
    "--moe-expert-capacity-factor": "training.moe_expert_capacity_factor",
    "--moe-pad-expert-input-to-capacity": "training.moe_pad_expert_input_to_capacity",
    "--moe-paged-stash-buffer-size-factor-cuda": "training.moe_paged_stash_buffer_factor",
}

# flag -> what it changes (time / memory) that the projection does not model
NOT_MODELLED_FLAGS: dict[str, str] = {
    # a "logging" flag that is not neutral: megatron-core 0.16.1 timers.py Timer.start / stop call
    # torch.cuda.synchronize(); timers of log_level <= --timing-log-level are live (training.py: level 1 around the
    # step's phases, with a barrier under --barrier-with-L1-time; level 2 around each micro-batch's forward / backward)
    # "rerun engine" flags that are not neutral (megatron-core 0.16.1 rerun_state_machine.py): report_determinism_stats
    # sets rerun_requested in every validate_result call, so every iteration is run again in place
    "--rerun-mode": "time: report_determinism_stats runs every iteration twice (the step re-run in place to compare "
                    "results: about double the step); disabled drops the per-iteration all-reduce of the rerun flag",
    "--error-injection-rate": "time: every N-th validated result is faked wrong, and validate_results re-runs that "
                              "iteration (persistent errors stop the job)",
    "--bias-activation-fusion": "time: unfused bias + activation (--yaml-cfg language_model: field; Megatron-LM's "
                                "arguments fuse them by default)",
    "--persist-layer-norm": "time: non-persistent LayerNorm kernel (--yaml-cfg language_model: field)",
    "--deallocate-pipeline-outputs": "memory: each pipeline stage's output tensors kept whole until their backward "
                                     "(--yaml-cfg language_model: field; Megatron-LM's arguments always deallocate)",
    "--timing-log-level": "time: device synchronisations (and barriers) around the timed phases -- level 1 each "
                          "iteration's phases, level 2 each micro-batch's forward and backward",
    "--moe-token-drop-policy": "time: which tokens are dropped at capacity",
    "--moe-use-upcycling": "time: dense checkpoint upcycled at start (not per iteration)",
    "--moe-paged-stash-buffer-size-factor-cpu": "memory: paged stash host buffer",
    "--moe-shared-expert-gate": "time: a gate on the shared expert output (small)",
    "--moe-apply-probs-on-input": "time: router probabilities applied before the experts",
    "--moe-extended-tp": "time, memory: experts sharded with tensor parallelism over EP",
    "--moe-input-jitter-eps": "time: jitter noise on expert inputs (small)",
    "--moe-z-loss-coeff": "time: router z-loss (small)",
    "--moe-router-score-function": "time: sigmoid vs softmax scores (small)",
    "--moe-enable-routing-replay": "time, memory: routing decisions recorded and replayed",
    "--moe-dispatch-fwd-dtype": "time: dispatch all-to-all in a lower precision halves its bytes",
    "--moe-combine-bwd-dtype": "time: combine backward all-to-all precision",
    "--moe-permute-fusion-into-hybridep": "time: permutation fused into HybridEP",
    "--overlap-dispatch-backward-with-experts-wgrad": "time: dispatch backward overlapped with expert wgrad",
    "--ep-overlap-early-attn-memory-release": "memory: attention activations released early with EP overlap",
    "--high-priority-a2a-comm-stream": "time: all-to-all on a high-priority stream",
    "--use-grouped-gemm-for-dense-mlp": "time: dense MLP as a grouped GEMM",
    "--use-grouped-gemm-for-shared-expert": "time: shared expert inside the grouped GEMM",
    "--moe-single-grouped-weight": "time, memory: experts' weights in one buffer",
    "--moe-single-grouped-bias": "time: experts' biases in one buffer",
    "--moe-use-grouped-tensor": "time: grouped tensor representation of expert weights",
    "--moe-router-force-biased": "time: forced routing bias (benchmarks)",
    "--moe-router-quantile-balancing-ema": "time: quantile balancing of the router",
    "--moe-mlp-glu-interleave-size": "time: interleaved GLU layout of expert FC1",
    "--moe-shared-expert-glu-interleave-size": "time: interleaved GLU layout of shared-expert FC1",
    "--moe-hybridep-num-blocks-permute": "time: HybridEP permute blocks",
    "--moe-hybridep-num-blocks-unpermute": "time: HybridEP unpermute blocks",
    "--moe-hybridep-num-sms-preprocessing": "time: HybridEP preprocessing SMs",
    "--moe-hybridep-pad-uneven-dispatch-inputs": "memory: HybridEP pads uneven inputs",
    "--moe-ncclep-zero-copy": "time: NCCL EP zero-copy buffers",
    "--moe-paged-stash-page-size": "memory: paged stash page size",
    "--no-scatter-gather-tensors-in-pipeline": "time: full (not scatter-gathered) pipeline activations sent",
    "--mtp-loss-scaling-factor": "none on time (loss weight) - listed for MTP recipes",
    "--mtp-standalone": "time: MTP layers on their own pipeline stage",
    "--mtp-detach-heads": "time: MTP heads detached from the main graph",
    "--mtp-hsm": "time: MTP hidden-state mixing",
    "--mtp-use-repeated-layer": "memory: one MTP layer's weights reused",
    "--disable-mamba-mem-eff-path": "time, memory: the Mamba mixer's unfused path (conv1d, SSD scan and gated norm "
                                    "as separate autograd ops; priced as the fused mamba_split_conv1d_scan_combined)",
    "--mamba-training-ssm-states-dtype": "time, memory: the SSD chunk states' dtype in training (priced as fp32)",
    "--no-bias-dropout-fusion": "time: unfused bias+dropout+add",
    "--no-bias-gelu-fusion": "time: unfused bias+GeLU (a bias-free GeLU is never fused: its experts' memory is modelled)",
    "--no-bias-swiglu-fusion": "time: unfused bias+SwiGLU; memory: the unfused GLU keeps 3 more [tokens, F] tensors",
    "--no-masked-softmax-fusion": "time: unfused masked softmax",
    "--no-persist-layer-norm": "time: non-persistent LayerNorm kernel",
    "--no-gradient-reduce-div-fusion": "time: gradient scaling as a separate kernel",
    "--disable-jit-fuser": "time: torch JIT fusions off",
    "--no-overlap-p2p-communication": "time: pipeline send/recv not overlapped",
    "--overlap-p2p-communication-warmup-flush": "time: p2p overlapped in warm-up/flush phases",
    "--overlap-param-gather-with-optimizer-step": "time: first bucket's param all-gather overlapped with the optimizer step",
    "--ddp-bucket-size": "time: gradient bucket size (overlap granularity)",
    "--ddp-num-buckets": "time: number of gradient buckets",
    "--ddp-pad-buckets-for-high-nccl-busbw": "time: buckets padded for NCCL bus bandwidth",
    "--ddp-reduce-scatter-with-fp32-accumulation": "time: reduce-scatter accumulating in fp32",
    "--ddp-param-name-patterns-for-fp32-local-accumulation": "memory: fp32 local accumulation for matched params",
    "--outer-dp-sharding-strategy": "time, memory: HSDP outer sharding",
    "--enable-full-sharding-in-hsdp": "time, memory: HSDP full sharding",
    "--fsdp-double-buffer": "memory: Megatron-FSDP double buffers", "--fsdp-manual-registration": "time: NCCL buffer registration",
    "--use-nccl-ub": "time: NCCL user buffers", "--use-sharp": "time: SHARP in-network reductions",
    "--sharp-enabled-group": "time: SHARP group", "--disable-symmetric-registration": "time: symmetric memory off",
    "--create-all-gather-group": "time: separate all-gather communicator",
    "--keep-fp8-transpose-cache": "memory: FP8 transposes kept with Megatron-FSDP",
    "--use-tp-pp-dp-mapping": "time: rank order tp-pp-dp instead of tp-cp-ep-dp-pp",
    "--hierarchical-context-parallel-sizes": "time: a2a+p2p context-parallel group sizes",
    "--hybrid-context-parallel": "time: hybrid context parallelism", "--max-seqlen-per-dp-cp-rank": "time, memory: packed sequence cap",
    "--megatron-fsdp-enable-fine-grained-param-gather": "time: Megatron-FSDP fine-grained all-gather",
    "--megatron-fsdp-grad-comm-dtype": "time: Megatron-FSDP gradient communication dtype",
    "--megatron-fsdp-main-grads-dtype": "memory: Megatron-FSDP main gradients dtype",
    "--megatron-fsdp-main-params-dtype": "memory: Megatron-FSDP main parameters dtype",
    "--megatron-fsdp-max-pool-double-buffer": "memory: Megatron-FSDP buffer pool", "--megatron-fsdp-version": "time, memory: Megatron-FSDP version",
    "--fsdp-db-use-persist-buf-on-alloc-fail": "memory: Megatron-FSDP persistent buffers",
    "--no-use-layer-wise-param-layout": "time, memory: distributed-optimizer parameter layout",
    "--gtp-remat-nccl-ub": "time: GTP remat NCCL buffers", "--gtp-expert-remat-nccl-ub": "time: GTP expert remat NCCL buffers",
    "--gtp-remat-reduce-scatter-with-fp32-accumulation": "time: GTP remat reduce-scatter in fp32",
    "--gtp-remat-opt-in-modules": "time, memory: GTP weight rematerialisation", "--tensor-parallel-num-weight-shards": "time, memory: TP weight sharding rematerialised",
    "--expert-tensor-parallel-num-weight-shards": "time, memory: expert TP weight sharding rematerialised",
    "--pipeline-model-parallel-comm-backend": "time: pipeline p2p backend (nccl / ucc)",
    "--use-ring-exchange-p2p": "time: ring-exchange p2p",
    "--tp-comm-overlap-rs-dgrad": "time: reduce-scatter overlapped with dgrad",
    "--no-tp-comm-overlap-ag": "time: TP all-gather overlap off", "--no-tp-comm-overlap-rs": "time: TP reduce-scatter overlap off",
    "--no-tp-comm-split-ag": "time: TP all-gather not split", "--no-tp-comm-split-rs": "time: TP reduce-scatter not split",
    "--no-tp-comm-bulk-dgrad": "time: bulk dgrad overlap off", "--no-tp-comm-bulk-wgrad": "time: bulk wgrad overlap off",
    "--tp-comm-bootstrap-backend": "time: userbuffer bootstrap (start-up only)",
    "--symmetric-ar-type": "time: symmetric-memory all-reduce kernels",
    "--distribute-saved-activations": "memory: saved activations split over TP with full recompute",
    "--fp8-amax-history-len": "time, memory: delayed-scaling amax history",
    "--fp8-amax-compute-algo": "time: delayed-scaling amax reduction", "--fp8-margin": "none on time/memory (scale margin)",
    "--fp8-interval": "time: scale update interval", "--no-fp8-wgrad": "time: weight-gradient GEMMs in higher precision",
    "--fp8-output-proj": "time: attention output projection in FP8",
    "--fp8-quantizer-factory": "time: custom FP8 quantizers", "--fp4-quantizer-factory": "time: custom FP4 quantizers",
    "--te-precision-config-file": "time: per-module precision from a file",
    "--reuse-grad-buf-for-mxfp8-param-ag": "memory: gradient buffer reused for the MXFP8 parameter all-gather",
    "--fp16-lm-cross-entropy": "memory: cross entropy in fp16", "--attention-softmax-in-fp32": "time: softmax in fp32 (unfused path)",
    "--output-logit-dtype": "memory: output logits dtype",
    "--apply-query-key-layer-scaling": "time: QK layer scaling (unfused softmax path)",
    "--fp32-residual-connection": "memory: residual stream in fp32",
    "--disable-bf16-reduced-precision-matmul": "time: BF16 GEMMs with full-precision reductions",
    "--empty-unused-memory-level": "time: torch.cuda.empty_cache calls each iteration",
    "--train-sync-interval": "time: CPU-GPU synchronisation interval",
    "--check-for-large-grads": "time: gradient checks each iteration", "--check-weight-hash-across-dp-replicas-interval": "time: weight hash checks",
    "--deterministic-mode": "time: deterministic kernels (slower attention / scatter-add)",
    "--batch-invariant-mode": "time: batch-invariant kernels", "--batch-invariant-backend": "time: batch-invariant kernel backend",
    "--use-te-activation-func": "time: TE activation kernels",
    "--fused-residual-rmsnorm": "time: fused residual + RMSNorm",
    "--mla-down-proj-fusion": "time: fused MLA down projections", "--cache-mla-latents": "memory: MLA latents cached (inference)",
    "--use-legacy-models": "time: legacy (non-core) GPT model",
    "--use-kitchen-attention": "time: Kitchen attention kernels", "--kitchen-attention-backend": "time: Kitchen attention backend",
    "--flash-attention-version": "time: FlashAttention version",
    "--optimizer-cuda-graph": "time: optimizer step captured in a CUDA graph",
    "--muon-use-syrk": "time: Muon's Triton SYRK kernels for X X^T and A A (priced as plain GEMMs)",
    "--delay-offload-until-cuda-graph": "time: offload delayed until graph capture",
    "--activation-offload-fraction": "memory: fraction of activations offloaded",
    "--fine-grained-offloading-max-inflight-offloads": "memory, time: in-flight offload copies",
    "--min-offloaded-tensor-size": "memory: smallest offloaded tensor", "--delta-offload-bytes-across-pp-ranks": "memory: offload bytes per PP rank",
    # TransformerConfig fields (megatron/core/transformer/transformer_config.py); Megatron-LM's arguments.py has
    # no argument for them, YAML configs and Megatron-Bridge recipes set them (Bridge 26.08's full-iteration
    # MXFP8 perf recipes: mixed_precision.fp8_dot_product_attention = True)
    "--fp8-multi-head-attention": "time and memory: FP8 tensors between the QKV projection, core attention and "
                                  "the output projection (TE fp8_mha; with MXFP8 TE turns FusedAttention off for it); "
                                  "priced and sized as BF16",
    "--cpu-offloading-retain-pinned-cpu-buffers": "memory: pinned host buffers kept", "--cpu-offloading-double-buffering": "memory: offload double buffers",
    "--use-torch-optimizer-for-cpu-offload": "time: torch optimizer for the offloaded part",
    "--overlap-cpu-optimizer-d2h-h2d": "time: host optimizer copies overlapped",
    "--no-pin-cpu-grads": "time: unpinned host gradients", "--no-pin-cpu-params": "time: unpinned host parameters",
    "--high-priority-stream-groups": "time: communicators on high-priority streams",
    "--mlp-chunks-for-training": "memory, time: MLP computed in sequence chunks",
    "--rotary-percent": "time: RoPE applied to a fraction of the head dimension (small)",
    "--apply-layernorm-1p": "time: zero-centred LayerNorm (negligible)",
    "--apply-residual-connection-post-layernorm": "time: residual after the norm (negligible)",
    "--attention-output-gate": "time, memory: a gate on the attention output (extra projection)",
    "--glu-linear-offset": "time: offset in the GLU (negligible)",
    "--qk-l2-norm": "time: L2 norm of Q and K (small)", "--qk-clip": "time: QK-clip weight updates in the optimizer",
    "--rotary-interleaved": "time: interleaved RoPE kernel", "--init-model-with-meta-device": "time: initialisation (start-up)",
    "--use-cpu-initialization": "time: initialisation on the CPU (start-up)",
    "--no-initialization": "time: no weight initialisation (start-up)",
    "--no-clone-scatter-output-in-embedding": "memory: embedding scatter output not cloned",
    "--use-mup": "time: muP scaling (negligible)", "--enable-mhc-connections": "time, memory: manifold hyper-connections (several residual streams)",
    "--mhc-num-residual-streams": "memory: residual streams of hyper-connections", "--mhc-recompute-layer-num": "memory: hyper-connection recompute",
    "--mhc-sinkhorn-iterations": "time: Sinkhorn iterations of hyper-connections",
    # Megatron-LM dev spelling (transformer/hyper_connection.py): not modelled -- the residual stream is
    # [s, b, n h] (n = --num-residual-streams) between layers and across pipeline sends, each layer adds
    # [s b, n h] x [n h, n^2 + 2n] mixing GEMMs and Sinkhorn iterations; the saved tensors depend on mhc recompute
    "--enable-hyper-connections": "time, memory: hyper-connections (n residual streams: n x wider residual "
                                  "activations and pipeline sends, small mixing GEMMs per layer)",
    "--num-residual-streams": "memory, time: residual streams of hyper-connections (n x the residual width)",
    "--use-fused-mhc": "time: fused hyper-connection kernels",
    # Megatron-LM dev (d48bd6be) options, from their help text and their use in dev's megatron-core (file named)
    # dynamic context parallelism and THD sequence packing (model_parallel_config.py, datasets/data_schedule.py,
    # packed_seq_params.py, context_parallel_layout/): the plan projects fixed --seq-length SBHD micro-batches
    "--dynamic-context-parallel": "time, memory: dynamic context parallelism (variable-size CP groups formed from "
                                  "the DP x CP ranks for each packed batch of variable-length sequences)",
    "--min-dynamic-context-parallel-size": "time: smallest CP group of dynamic context parallelism",
    "--sequence-packing-scheduler": "time, memory: packed variable-length sequences scheduled over the DP (x CP) "
                                    "ranks (micro-batch count and tokens per micro-batch vary)",
    "--pad-packed-seq-alignment": "time, memory: packed THD micro-batches padded (to --max-seqlen-per-dp-cp-rank "
                                  "or to a multiple of N tokens)",
    "--thd-tail-padding-policy": "time: the THD padding tail attended as part of the last packed sequence "
                                 "(extend_last) instead of a dummy sequence (small)",
    "--thd-max-packed-sequences": "time: cap on sequences per packed THD micro-batch (too small: more, smaller packs)",
    "--cp-partition-mode": "time: THD rows split contiguously over the CP ranks (causal attention work unbalanced "
                           "across ranks) instead of zigzag",
    "--cuda-graph-dynamic-microbatches": "memory, time: CUDA graphs captured for an upper bound of packed "
                                         "micro-batches (cuda_graphs.py)",
    "--use-varlen-dataset": "time, memory: variable-length packed (THD) samples instead of fixed --seq-length ones "
                            "(tokens and attention work per micro-batch vary; a packing scheduler)",
    # attention / MLP / MoE kernels and shapes
    "--head-wise-attn-gate": "time, memory: per-head sigmoid output gate (num_attention_heads extra rows of "
                             "linear_qkv, a gate multiply on the attention output; attention.py)",
    "--fallback-to-eager-attn": "time, memory: megatron-core's eager DotProductAttention (materialised s x s "
                                "scores) inside Transformer Engine layers (transformer_engine_spec_provider.py)",
    "--dense-grouped-gemm": "time: dense MLP as a grouped GEMM (dev spelling of --use-grouped-gemm-for-dense-mlp: "
                            "the TE op-fuser's CuTe MXFP8 SwiGLU MLP; gpt_layer_specs.py)",
    "--moe-n-hash-layers": "time: the first N MoE layers route by a token-id hash table (no learned router, a "
                           "static per-token expert load; moe/router.py)",
    "--moe-hybridep-pad-variable-tokens": "time, memory: an all-reduce MAX of token counts and a host sync per MoE "
                                          "layer, uneven inputs padded to the HybridEP group maximum (dev spelling "
                                          "of --moe-hybridep-pad-uneven-dispatch-inputs; token_dispatcher.py)",
    "--moe-ncclep-static-shape": "time, memory: the NCCL-EP dispatcher feeds the experts its full fixed-size receive "
                                 "buffer (no device-to-host sync; allows CUDA graphs and the EP overlap)",
    # data-parallel buffers and Megatron-FSDP
    "--use-layer-wise-param-layout": "time, memory: layer-wise (Muon) optimizer buffers in the padded shard-aligned "
                                     "distributed-optimizer layout instead of dev's compact all-reduce layout",
    "--megatron-fsdp-prefetch-recompute-forward-weights": "time: Megatron-FSDP prefetches the weights recomputation "
                                                          "needs before the backward's",
    "--megatron-fsdp-cache-param-bucket-views": "time: Megatron-FSDP caches parameter bucket views (host overhead)",
    "--spec": "time, memory: a custom layer spec (e.g. local instead of Transformer Engine); the stock hybrid "
              "stack a hybrid run names (hybrid_stack_spec, mamba_stack_spec: STANDARD_VALUES) is what is modelled",
    "--rope-type": "time: RoPE variant", "--mrope-section": "time: multimodal RoPE sections",
    "--yarn-original-max-position-embeddings": "none on time (YaRN scaling)",
    "--init-method-std": "none", "--decrease-batch-size-if-needed": "time: the global batch is reduced when it does not divide",
    "--train-samples": "none per iteration (run length in samples)",
    "--memory-snapshot-path": "none",
}

# flag -> why it has no effect on the time or memory of a training iteration
NEUTRAL_FLAGS: dict[str, str] = {
    "--init-method-std": "initialisation value", "--embedding-init-method-std": "initialisation value",
    "--norm-epsilon": "numerical constant", "--rotary-base": "RoPE constant", "--rotary-scaling-factor": "RoPE constant",
    "--rope-scaling-factor": "RoPE constant", "--use-rope-scaling": "RoPE frequencies (same cost)",
    "--rotary-seq-len-interpolation-factor": "RoPE constant", "--mscale": "YaRN constant", "--mscale-all-dim": "YaRN constant",
    "--yarn-beta-fast": "YaRN constant", "--yarn-beta-slow": "YaRN constant",
    "--yarn-correction-range-round-to-int": "YaRN constant", "--no-yarn-correction-range-round-to-int": "YaRN constant",
    "--yarn-original-max-position-embeddings": "YaRN constant", "--no-rope-freq": "RoPE constant",
    "--mtp-loss-scaling-factor": "loss weight", "--moe-aux-loss-coeff": "loss weight",
    "--moe-router-bias-update-rate": "router bias update constant", "--moe-router-topk-scaling-factor": "routing weight scale",
    "--moe-router-pre-softmax": "softmax before or after top-k (same cost)",
    "--use-flash-attn": "legacy models only; megatron-core picks kernels by --attention-backend",
    "--no-manual-gc-eval": "evaluation only", "--nccl-all-reduce-for-prefill": "inference only",
    "--moe-per-layer-logging": "logging", "--moe-upcycling-granularity": "checkpoint conversion at start",
    "--moe-pad-experts-for-cuda-graph-inference": "inference only",
    "--train-samples": "run length (the plan projects one iteration)", "--train-iters": "run length",
    "--exit-duration-in-mins": "run length", "--exit-interval": "run length", "--exit-signal": "run control",
    "--exit-signal-handler": "run control", "--exit-signal-handler-for-dataloader": "run control",
    "--exit-signal-handler-for-training": "run control", "--iterations-to-skip": "run control",
    "--dataloader-type": "data pipeline", "--use-mcore-models": "the default model (megatron-core GPT)",
    "--batch-size": "deprecated alias, unused", "--result-rejected-tracker-filename": "logging",
    "--dump-param-to-param-group-map": "logging", "--gpu-sniff-test-interval": "health check outside the step",
    "--disable-gloo-process-groups": "process groups at start-up",
    "--distributed-backend": "nccl (the only backend priced)", "--distributed-timeout-minutes": "timeout",
    "--distributed-timeout-seconds-after-init": "timeout", "--local-rank": "set by the launcher",
    "--lazy-mpu-init": "start-up", "--fake-process-group": "testing", "--nccl-communicator-config-path": "communicator tuning file",
    "--model-parallel-size": "deprecated alias", "--flight-recorder-dump-path": "debugging",
    "--flight-recorder-include-stack-trace": "debugging", "--flight-recorder-trace-buffer-size": "debugging",
    "--no-flight-recorder-dump-on-timeout": "debugging", "--no-flight-recorder-extra-dump-on-exec": "debugging",
    "--no-flight-recorder-include-only-active": "debugging", "--suggested-communication-unit-size": "Megatron-FSDP bucket hint",
    "--hysteresis": "fp16 loss-scale constant", "--initial-loss-scale": "fp16 loss-scale constant",
    "--loss-scale": "fp16 loss-scale constant", "--loss-scale-window": "fp16 loss-scale constant",
    "--min-loss-scale": "fp16 loss-scale constant", "--enable-experimental": "gate for experimental features",
    "--yaml-cfg": "another way to pass the same arguments", "--config-logger-dir": "logging",
    "--fp8-margin": "FP8 scale constant", "--qk-clip-alpha": "QK-clip constant", "--qk-clip-threshold": "QK-clip constant",
    "--mup-attn-scale-power": "muP constant", "--mup-base-head-dim": "muP constant", "--mup-base-hidden-size": "muP constant",
    "--mup-embedding-mult": "muP constant", "--mup-output-mult": "muP constant", "--mup-width-mult": "muP constant",
    "--mhc-init-gating-factor": "initialisation value", "--profile": "profiling of chosen steps",
    "--memory-snapshot-path": "profiling output", "--seq-length": "", "--relative-attention-num-buckets": "T5 only",
    "--relative-attention-max-distance": "T5 only", "--onnx-safe": "export only", "--bert-no-binary-head": "BERT only",
    "--encoder-num-layers": "encoder-decoder models only", "--decoder-num-layers": "encoder-decoder models only",
    "--decoder-seq-length": "encoder-decoder models only", "--encoder-seq-length": "alias of --seq-length in old scripts",
    "--use-cpu-initialization": "start-up only", "--init-model-with-meta-device": "start-up only",
    "--no-initialization": "start-up only",
    "--use-torch-optimizer-for-cpu-offload": "", "--inference-cuda-graph-scope": "inference only",
    "--inference-fuse-tp-communication": "inference only", "--inference-disable-triton-nvls-kernels": "inference only",
    "--inference-grouped-gemm-backend": "inference only", "--inference-moe-disable-fused-quant-kernels": "inference only",
    "--inference-moe-token-dispatcher-type": "inference only", "--flash-decode": "inference only",
    "--mlp-chunks-for-prefill": "inference only", "--mamba-inference-conv-states-dtype": "inference only",
    "--mamba-inference-ssm-states-dtype": "inference only", "--decode-only-cuda-graphs": "inference only",
    "--tiktoken-num-special-tokens": "tokenizer detail (vocab from --vocab-size)",
    # Megatron-LM dev (d48bd6be) options
    "--rotary-base-per-layer": "RoPE constant per layer (each attention layer builds its own frequency table: same "
                               "kernels and shapes)",
    "--mrope-interleaved": "multimodal RoPE frequency layout (same kernels and shapes)",
    "--original-max-position-embeddings": "YaRN constant (MLA RoPE scaling)",
    "--log-moe-overload-factor": "logging (token counts per MoE layer kept on the device, reduced when logged)",
    "--moe-ncclep-use-symm-mem": "rejected by dev's NCCL-EP dispatcher (not implemented at d48bd6be)",
    "--disable-grad-buffers-cpu-backup": "torch_memory_saver pause without a host copy (RL offload between phases; "
                                         "ignored without torch_memory_saver)",
    "--disable-param-buffers-cpu-backup": "torch_memory_saver pause without a host copy (RL offload between phases; "
                                          "ignored without torch_memory_saver)",
    "--varlen-sbhd-validation": "correctness check: --use-varlen-dataset samples as SBHD padded to --seq-length "
                                "(the layout projected)",
    "--varlen-mock-dataset-config-json": "mock sequence lengths of --use-varlen-dataset (which is reported)",
}
for _k in ("--use-torch-optimizer-for-cpu-offload", "--use-cpu-initialization",
           "--init-model-with-meta-device", "--no-initialization", "--train-samples", "--memory-snapshot-path",
           "--init-method-std", "--fp8-margin", "--yarn-original-max-position-embeddings", "--mtp-loss-scaling-factor"):
    NOT_MODELLED_FLAGS.pop(_k, None)
NEUTRAL_FLAGS["--use-torch-optimizer-for-cpu-offload"] = "with --optimizer-cpu-offload (which is reported)"
for _k in ("--muon-momentum", "--muon-use-nesterov", "--muon-nesterov", "--muon-scale-mode", "--muon-extra-scale-factor",
           "--muon-coefficient-type"):
    # Emerging-Optimizers v0.1.0 orthogonalized_optimizer.py / muon_utils.py: the same kernels and state whatever
    # the value (the coefficient set only picks a, b, c of each Newton-Schulz step)
    NEUTRAL_FLAGS[_k] = "Muon update value only (same kernels and state)"

# flag -> the model family / training mode it selects (the recipe is refused, naming it)
REFUSED_FLAGS: dict[str, str] = {
    "--experimental-attention-variant": "experimental attention variant (linear / gated delta net / sparse attention)",
    "--encoder-num-layers": "T5 (encoder-decoder, pretrain_t5.py)",
    "--decoder-num-layers": "T5 (encoder-decoder, pretrain_t5.py)",
    "--decoder-seq-length": "T5 (encoder-decoder, pretrain_t5.py)",
    "--heterogeneous-layers-config-path": "heterogeneous layers (per-layer block specs)",
    "--heterogeneous-layers-config-encoded-json": "heterogeneous layers (per-layer block specs)",
    "--linear-attention-type": "experimental attention variant (deprecated spelling of --experimental-attention-variant)",
}

# flags outside Megatron-LM's own parser that only a vision-language run passes: Megatron-LM's
# examples/multimodal/multimodal_args.py (add_multimodal_extra_args, main d98e8a64dd) and the Qwen-VL /
# LLaVA scripts of Pai-Megatron-Patch (examples/qwen2_vl, qwen2_5_vl, qwen3_vl, llava_mcore, a098ca5), whose
# language model alone would be projected (the vision encoder, projector and image tokens left out)
MULTIMODAL_FLAGS: frozenset[str] = frozenset((
    "--disable-vision-class-token", "--freeze-ViT", "--freeze-LM", "--vision-model-type", "--language-model-type",
    "--use-tiling", "--max-num-tiles", "--use-thumbnail", "--pixel-shuffle", "--image-tag-type", "--class-token-len",
    "--recompute-vision", "--use-vision-backbone-fp8-arch", "--freeze-vision-projection", "--dynamic-resolution",
    "--video-max-num-frames", "--sound-model-type",
))
MULTIMODAL_FAMILY = "multimodal (vision encoder + language model; Megatron-LM examples/multimodal)"

# argument groups whose flags are all of one class unless listed above
GROUP_CLASS: dict[str, tuple[str, str]] = {
    "logging": (NEUTRAL, "logging / monitoring"), "checkpointing": (NEUTRAL, "checkpoint save/load, outside the iteration"),
    "In-process restart": (NEUTRAL, "fault tolerance"), "ft_package": (NEUTRAL, "fault tolerance"),
    "straggler": (NEUTRAL, "monitoring"), "workload inspector": (NEUTRAL, "monitoring"), "one logger": (NEUTRAL, "logging"),
    "rerun engine": (NEUTRAL, "fault detection (off by default)"), "autoresume": (NEUTRAL, "job control"),
    "msc": (NEUTRAL, "storage client"), "opentelemetry": (NEUTRAL, "monitoring"), "fault injector": (NEUTRAL, "testing"),
    "learning rate and weight decay": (NEUTRAL, "learning-rate schedule value"),
    "RNG and initialization": (NEUTRAL, "seeds and initialisation"),
    "validation": (NEUTRAL, "evaluation, outside the projected training iteration"),
    "inference": (NEUTRAL, "inference / generation only"), "data and dataloader": (NEUTRAL, "data pipeline (assumed not to stall)"),
    "tokenizer": (NEUTRAL, "tokenizer detail (vocabulary size is read from --vocab-size or the tokenizer)"),
    "profiling": (NEUTRAL, "profiling of chosen steps"), "regularization": (NEUTRAL, "optimizer / regularisation constant"),
    "rl": (REFUSED, "reinforcement-learning loop (train_rl.py)"), "biencoder": (REFUSED, "biencoder / retriever model"),
    "vision": (REFUSED, "vision model (pretrain_vision_*.py)"), "sft": (REFUSED, "supervised fine-tuning loop"),
    "Logits Distillation": (REFUSED, "logits distillation (teacher model)"),
    "heterogeneous architecture": (REFUSED, "heterogeneous layers (per-layer block specs)"),
    "experimental_attention_variant": (REFUSED, "experimental attention variant"),
}
# flags of families that stay neutral although their group is refused (they do nothing for GPT)
for _k in ("--linear-conv-kernel-dim",
           "--linear-key-head-dim", "--linear-num-key-heads", "--linear-num-value-heads", "--linear-value-head-dim",
           "--gdp-cutedsl-kernel", "--gdp-num-chunk-states-to-recompute", "--gdp-num-householder",
           "--dsa-indexer-head-dim", "--dsa-indexer-k-norm-epsilon", "--dsa-indexer-k-norm-fp32", "--dsa-indexer-loss-coeff",
           "--dsa-indexer-n-heads", "--dsa-indexer-rope-interleaved", "--dsa-indexer-skip-topk-offset", "--dsa-indexer-topk",
           "--dsa-indexer-topk-freq", "--dsa-indexer-use-sparse-loss", "--dsa-kernel-backend",
           "--no-dsa-indexer-rotate-activation", "--no-dsa-indexer-scoring-relu",
           # dev: compressed sparse attention and DeepSeek-V4 hybrid attention (experimental_attention_variant/csa.py,
           # deepseek_v4_hybrid_attention.py), Gated Delta Net (ssm/gated_delta_net/)
           "--csa-window-size", "--csa-compress-rotary-base", "--csa-dense-mode", "--csa-compress-ratios",
           "--no-dsa-kernel-fusion", "--o-groups", "--o-lora-rank", "--gdn-pre-gated-delta-rule-fusion",
           "--gdn-conv-pad-alignment", "--linear-cp-mode"):
    NEUTRAL_FLAGS[_k] = "used only by hybrid / experimental attention models, which are refused"

# dataclass-generated groups: flags not listed are conservatively "not modelled"
_DEFAULT_EFFECT = "may change time or memory; not modelled"

# TransformerConfig field names read from YAML configs that have no command-line flag
CONFIG_ONLY = """\
--cpu-offloading\tcpu_offloading\ttrue\t\tfalse\tconfig\ttransformer configuration
--cpu-offloading-weights\tcpu_offloading_weights\ttrue\t\tfalse\tconfig\ttransformer configuration
--cpu-offloading-activations\tcpu_offloading_activations\ttrue\t\ttrue\tconfig\ttransformer configuration
--cpu-offloading-double-buffering\tcpu_offloading_double_buffering\ttrue\t\tfalse\tconfig\ttransformer configuration
--fp8-dot-product-attention\tfp8_dot_product_attention\ttrue\t\tfalse\tconfig\ttransformer configuration
--fp8-multi-head-attention\tfp8_multi_head_attention\ttrue\t\tfalse\tconfig\ttransformer configuration
--bias-activation-fusion\tbias_activation_fusion\ttrue\t\ttrue\tconfig\ttransformer configuration
--persist-layer-norm\tpersist_layer_norm\ttrue\t\ttrue\tconfig\ttransformer configuration
--deallocate-pipeline-outputs\tdeallocate_pipeline_outputs\ttrue\t\ttrue\tconfig\ttransformer configuration
"""
# (the last three: their defaults are what Megatron-LM's arguments give the TransformerConfig -- bias_gelu_fusion /
# bias_swiglu_fusion, not no_persist_layer_norm, deallocate_pipeline_outputs=True in core_transformer_config_from_args;
# only the experimental --yaml-cfg layout, which builds TransformerConfig from its language_model: section, sets them)
# flags of other parsers that set a plan field:
# - a fork's: ROCm/Megatron-LM branches renwuli/disable_te_qwen, renwuli/disable_te_qwen1.5, guihong_dev, rebeclee_dev,
#   hanl/llama2, ... (``megatron/arguments.py`` _add_training_args: store_true, "use bias in the qkv linear layers";
#   ``megatron/model/transformer.py`` ParallelAttention: query_key_value ColumnParallelLinear
#   bias=args.add_bias_linear or args.add_qkv_bias_linear), which their train_qwen*.sh pass;
# - an older Megatron-LM's: ``--use-custom-fsdp`` (d165a85, 2025-02-26, to af28b5a, 2025-08-21, which renamed it
#   --use-megatron-fsdp; core_r0.12.0 .. core_v0.14.0rc0, branches training-moe-june2025 and chcui/gpt_oss), whose
#   validate_args also turned on --overlap-grad-reduce (and --overlap-param-gather) with optim_grads(_params)
OTHER_PARSERS = """\
--add-qkv-bias-linear\tadd_qkv_bias_linear\ttrue\t0\tfalse\trocm\ttraining
--use-custom-fsdp\tuse_custom_fsdp\ttrue\t0\tfalse\t0.12-0.14\tdistributed init
"""


# --------------------------------------------------------------------------- API
@dataclass(frozen=True)
class MegatronFlag:
    """One Megatron-LM argument with its classification."""

    flags: tuple[str, ...]  # option strings, the canonical one first
    dest: str
    kind: str  # true | false | boolopt | int | float | str | const
    nargs: str  # "" (one value or none), "+", "*", or a count
    default: Any
    versions: str  # key of VERSIONS
    group: str
    cls: str  # modelled | neutral | not modelled | refused
    note: str  # plan field (modelled), why (neutral), effect (not modelled), family (refused)

    @property
    def flag(self) -> str:
        return self.flags[0]

    @property
    def takes_value(self) -> bool:
        return self.kind not in ("true", "false", "boolopt", "const")


def _classify(flags: tuple[str, ...], group: str) -> tuple[str, str]:
    for table, cls in ((REFUSED_FLAGS, REFUSED), (MODELLED_FLAGS, MODELLED), (NOT_MODELLED_FLAGS, NOT_MODELLED),
                       (NEUTRAL_FLAGS, NEUTRAL)):
        for f in flags:
            if f in table:
                return cls, table[f]
    if group in GROUP_CLASS:
        return GROUP_CLASS[group]
    return NOT_MODELLED, _DEFAULT_EFFECT


@lru_cache(maxsize=1)
def all_flags() -> tuple[MegatronFlag, ...]:
    """Every flag of the inventory (sorted by canonical option string)."""
    out = []
    for line in (_INVENTORY + CONFIG_ONLY + OTHER_PARSERS).splitlines():
        if not line.strip():
            continue
        opts, dest, kind, nargs, default, versions, group = line.split("\t")
        flags = tuple(opts.split())
        cls, note = _classify(flags, group)
        out.append(MegatronFlag(flags, dest, kind, nargs, json.loads(default) if default else None, versions, group,
                                cls, note))
    return tuple(sorted(out, key=lambda f: f.flag))


@lru_cache(maxsize=1)
def by_option() -> dict[str, MegatronFlag]:
    """Option string (every spelling, ``--no-x`` of boolean options too) -> flag."""
    out: dict[str, MegatronFlag] = {}
    for f in all_flags():
        for o in f.flags:
            out.setdefault(o, f)
        if f.kind == "boolopt":
            out.setdefault("--no-" + f.flag[2:], f)
    return out


@lru_cache(maxsize=1)
def by_dest() -> dict[str, MegatronFlag]:
    out: dict[str, MegatronFlag] = {}
    for f in all_flags():
        out.setdefault(f.dest, f)
    return out


def lookup(key: str) -> MegatronFlag | None:
    """The flag a recipe key names: ``--flag``, ``flag_with_underscores`` (NVIDIA YAMLs) or a dest."""
    k = key.strip()
    if k.startswith("-"):
        return by_option().get(k)
    hit = by_option().get("--" + k.replace("_", "-"))
    return hit if hit is not None else by_dest().get(k)


# flag -> values that select what the projection models anyway (not a custom choice): megatron-core's own
# Transformer Engine hybrid stack, which a hybrid run must name (Megatron-LM ``hybrid_builders.py`` raises 'You must
# provide a valid hybrid layer spec via --spec' without it; ``examples/mamba/train.sh`` passes it;
# ``mamba_layer_specs.py`` re-exports ``hybrid_layer_specs``: TENorm, TELayerNormColumnParallelLinear,
# TERowParallelLinear; Megatron-LM main of 2026-08-22)
STANDARD_VALUES: dict[str, tuple[tuple[str, ...], ...]] = {
    "--spec": (("megatron.core.models.hybrid.hybrid_layer_specs", "hybrid_stack_spec"),
               ("megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"),
               # Primus's copy (its v26.2-compatible MambaStack) with the same TE modules per layer
               # (AMD-AGI/Primus primus/backends/megatron/core/models/mamba/mamba_layer_specs.py, 2026-08-22)
               ("primus.backends.megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec")),
}


def is_default(flag: MegatronFlag, value: Any) -> bool:
    """Whether ``value`` (as read: bool for switches, text or number otherwise) is Megatron's default, or a value
    of ``STANDARD_VALUES`` (what the projection models when the flag is not set)."""
    if flag.flag in STANDARD_VALUES and value is not None:
        words = tuple(str(v) for v in (value if isinstance(value, (list, tuple)) else str(value).split()))
        if words in STANDARD_VALUES[flag.flag]:
            return True
    d = flag.default
    if flag.kind in ("true", "false", "boolopt", "const"):
        return bool(value) == bool(d) if isinstance(value, bool) else False
    if value is None:
        return True
    if isinstance(d, list) or isinstance(value, (list, tuple)):
        def norm(x: Any) -> list[str]:
            xs = x if isinstance(x, (list, tuple)) else str(x).replace(",", " ").split()
            return [str(v) for v in xs]
        return norm(value) == norm(d if d is not None else [])
    try:
        return float(value) == float(d)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value) == str(d)


def config_only_flags() -> frozenset[str]:
    """Canonical option strings of ``CONFIG_ONLY``: TransformerConfig fields with no Megatron-LM argument."""
    return frozenset(f.flag for f in all_flags() if f.versions == "config")


def config_only_notes(options: Any) -> list[str]:
    """One note per option string of ``options`` that names a TransformerConfig field Megatron-LM keeps off its
    command line (``CONFIG_ONLY``: ``megatron/training/arguments.py`` lists them among the config fields that get
    no argument, core_r0.16.0 and main; ``parse_args`` has ``allow_abbrev=False`` and calls ``parser.parse_args()``,
    so ``pretrain_gpt.py`` exits with "unrecognized arguments").  The reader still reads the setting as the
    recipe writes it (YAML configs and Megatron-Bridge set these fields)."""
    out: list[str] = []
    for o in dict.fromkeys(options):
        f = by_option().get(o) if isinstance(o, str) else None
        if f is not None and f.versions == "config":
            out.append(f"{o}: not a Megatron-LM command-line argument (a TransformerConfig field, set from YAML or "
                       f"Megatron-Bridge); pretrain_gpt.py would exit with 'unrecognized arguments' (read as written)")
    return out


# options a fork's own parser has that are prefixes of Megatron-LM flags: read as that fork's (an unknown flag,
# noted), not refused as an abbreviation.  ROCm/Megatron-LM branches guihong_dev, rebeclee_dev,
# yushengsu-dev-databricks(-rocm6.2) add ``_add_tasks_args`` (``--task``, ``--train-data``, ``--valid-data``) to the
# main parser (``megatron/arguments.py`` parse_args) and feed ``--train-data`` to their ChatDataset (pretrain_gpt.py)
FORK_OPTIONS = frozenset({"--train-data", "--valid-data"})


def abbreviated(option: str) -> tuple[str, ...]:
    """The Megatron-LM option strings ``option`` abbreviates (starts, and is not itself one of), TransformerConfig-only
    names (``CONFIG_ONLY``) left out.  Megatron-LM's parser is built with ``allow_abbrev=False``
    (``megatron/training/arguments.py`` ``parse_args``, core_r0.16.0 and main) and ends with ``parser.parse_args()``:
    ``--num-layer 32`` exits with "unrecognized arguments" instead of setting ``--num-layers``.  A flag spelling of a
    dest (``--overlap-p2p-comm``, from a YAML key) is no abbreviation here: it stays an unknown flag, noted."""
    if not option.startswith("--") or len(option) < 3 or option in by_option() or option in FORK_OPTIONS \
            or option[2:].replace("-", "_") in by_dest():  # a dest spelled as a flag (--overlap-p2p-comm): noted
        return ()
    return tuple(sorted(o for o, f in by_option().items() if o.startswith(option) and f.versions != "config"))


def abbreviation_problem(option: str, value: Any = None) -> PlanError | None:
    """The one-line refusal (:class:`~primus_launch.plan.PlanError`) of an option that abbreviates Megatron-LM flags
    (:func:`abbreviated`), else None."""
    hits = abbreviated(option)
    if not hits:
        return None
    from primus_launch.plan import PlanError

    shown = option if value in (None, True, "") else f"{option} {value_text(value)}"
    fix = f"write {hits[0]}" if len(hits) == 1 else "write the whole flag (" + ", ".join(hits[:4]) + \
        (", ..." if len(hits) > 4 else "") + ")"
    return PlanError("argument", shown, "not a Megatron-LM flag: it abbreviates " + (hits[0] if len(hits) == 1 else
                     f"{len(hits)} flags") + ", and Megatron-LM's parser takes no abbreviations (allow_abbrev=False: "
                     f"'unrecognized arguments'); {fix}")


def value_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --------------------------------------------------------------------------- value types
#: the words a Megatron switch reads as true / false from a YAML or a command line (lower-cased, stripped)
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0", "none", "null", "")
INT64 = 2**63  # Megatron's integers reach torch / numpy (seeds, iteration counters): 64-bit


def _shell_text(v: Any) -> bool:
    """A value that still holds shell syntax the reader did not expand (``$(...)``, `` `...` ``, an
    unresolved ``${VAR}``): its value is only known when the script runs."""
    return isinstance(v, str) and ("$" in v or "`" in v)


def _scalar_problem(kind: str, v: Any) -> str | None:
    """What is wrong with one value for an argparse ``type=int`` / ``type=float`` argument or a
    switch, as Megatron-LM's parser (or the config dataclass a YAML key fills) would take it; None
    when it is fine."""
    import math

    if kind == "int":
        if isinstance(v, float) and math.isfinite(v) and v.is_integer():
            v = int(v)  # a YAML `1000000.0`: Megatron takes the YAML's value as it is, and it is whole
        if isinstance(v, bool) or isinstance(v, (list, tuple, dict)) or isinstance(v, float):
            return "an integer"
        if isinstance(v, str):
            try:
                v = int(v.strip())
            except ValueError:
                return "an integer"
        if isinstance(v, int) and not -INT64 <= v < INT64:
            return "an integer of at most 64 bits (|value| < 2**63)"
        return None
    if kind == "float":
        if isinstance(v, bool) or isinstance(v, (list, tuple, dict)):
            return "a number"
        if isinstance(v, str):
            try:
                v = float(v.strip())
            except ValueError:
                return "a number"
        if isinstance(v, (int, float)) and not math.isfinite(float(v)):
            return "a finite number (not nan or inf)"
        return None
    if kind in ("true", "false", "boolopt", "const"):
        if isinstance(v, bool) or v is None:
            return None
        if isinstance(v, (int, str)) and str(v).strip().lower() in TRUE_WORDS + FALSE_WORDS:
            return None
        return "true or false"
    if kind == "str" and isinstance(v, dict):
        return "a single value, not a mapping"
    return None


def value_problem(flag: MegatronFlag, value: Any) -> str | None:
    """What Megatron-LM would refuse in ``value`` for ``flag`` (argparse ``type=int`` / ``type=float``
    and ``nargs``; a switch given something other than true / false; a list or a mapping where one
    number belongs; nan / inf where a number belongs; an integer past 64 bits), or None.  Values the
    reader could not expand (shell syntax left in them) are not judged."""
    if value is None or _shell_text(value):
        return None
    many = flag.nargs in ("+", "*") or (flag.nargs.isdigit() and int(flag.nargs) > 1)
    if many:
        # a list, or its text as a YAML / the NVIDIA test configs write it (`[2, 2]`, `2 2`)
        items = value if isinstance(value, (list, tuple)) else \
            [x for x in re.split(r"[\s,]+", value.strip().strip("[]")) if x] if isinstance(value, str) else [value]
        if flag.kind in ("int", "float"):
            for x in items:
                if _shell_text(x):
                    continue
                why = _scalar_problem(flag.kind, x)
                if why:
                    return f"{'integers' if flag.kind == 'int' else 'numbers'} ({x!r} is not {why})"
        return None
    return _scalar_problem(flag.kind, value)


def check_value(flag: MegatronFlag, value: Any, shown: str | None = None) -> None:
    """Raise the one-line :class:`~primus_launch.plan.PlanError` for a value Megatron-LM would refuse
    (:func:`value_problem`); ``shown``: the key as the recipe spells it (default: the flag)."""
    why = value_problem(flag, value)
    if why:
        from primus_launch.plan import PlanError

        raise PlanError(shown or flag.flag, list(value) if isinstance(value, tuple) else value, why)
