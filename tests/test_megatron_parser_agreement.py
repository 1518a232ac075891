"""The Megatron-LM reader where ``scripts/reader_vs_megatron.py`` (read15) found it apart from Megatron-LM's own
``parse_args`` + ``validate_args``, each expectation what Megatron-LM's code makes of the same command line."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import Cluster, PlanError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

# Megatron-LM main's functional test hybrid/hybrid_mr_mcore_te_tp1_pp2_vpp2_cp1_dgx_a100_1N8G: 4 '|' segments
PIPED = "M-M-M-M*-M-|M-M-M*-M-M-|M-M*-M-M-M-|M*-M-M-M-M-"


def _hybrid(pattern: str, *extra: str):
    return plan_from_argv(["pretrain_mamba.py", "--hybrid-layer-pattern", pattern, "--hidden-size", "256",
                           "--num-attention-heads", "8", "--seq-length", "128", "--max-position-embeddings", "128",
                           "--micro-batch-size", "1", "--global-batch-size", "8", "--bf16", "--vocab-size", "1024",
                           "--pipeline-model-parallel-size", "2", *extra], Cluster(num_nodes=1, gpus_per_node=8))


def test_hybrid_pattern_with_pipe_separators():
    """Megatron-LM main (d98e8a64dd) validate_args on the functional test's flags: num_layers 44 (the pattern
    without '|'), virtual_pipeline_model_parallel_size 2 (4 segments // PP 2); megatron-core
    ``select_pipeline_segment`` puts segment ``vp * pp + pp_rank`` on each chunk, so PP rank 0's second chunk holds
    segment 2, layers 22-32.  The reader refused the pattern; the tuner now keeps the split the pattern fixes."""
    plan = _hybrid(PIPED)
    assert (plan.model.num_layers, plan.parallel.pp, plan.parallel.vpp) == (44, 2, 2)
    assert plan.model.hybrid_pattern == PIPED.replace("|", "")
    assert plan.chunk_layout()[0][1].layers == tuple(range(22, 33))
    assert {"parallel.pp", "parallel.vpp"} <= set(plan.source.fixed)
    from primus_launch.tuner.knobs import AXES, program_limits

    assert {AXES.index("pp"), AXES.index("vpp")} <= set(program_limits(plan).pinned)  # the tuner keeps the split
    assert any("4 '|' segments" in n for n in plan.source.notes)


@pytest.mark.parametrize("pattern, extra, match", [
    ("M-M*|M-M*|M-M*", (), "must divide by --pipeline-model-parallel-size=2"),   # Megatron asserts
    ("M-M*|M-M*-", (), "uneven '|' segments"),                                    # not modelled
    ("M-M*|M-M*", ("--decoder-first-pipeline-num-layers", "2"), "not with '|' separators"),  # Megatron asserts
    ("M-M*|M-M*", ("--pipeline-model-parallel-size", "1"), "only with --pipeline-model-parallel-size > 1"),
])
def test_hybrid_pipe_refusals(pattern, extra, match):
    with pytest.raises(PlanError, match=re.escape(match)):
        _hybrid(pattern, *extra)


def test_runner_argv_of_a_functional_test():
    """``_run_training.sh`` (Megatron-LM main): ``true`` -> the bare flag, a value with a blank -> one word,
    ``[a, b]`` -> words."""
    from reader_vs_megatron import yaml_argv

    text = ("MODEL_ARGS:\n  --num-layers: 12\n  --bf16: true\n  --hierarchical-context-parallel-sizes: 2 2\n"
            "  --cuda-graph-scope: '[attn moe]'\n  --data-path: ''\n")
    assert yaml_argv(text) == ["--num-layers", "12", "--bf16", "--hierarchical-context-parallel-sizes", "2 2",
                               "--cuda-graph-scope", "attn", "moe"]


def test_attention_variables_megatron_refuses_at_model_build():
    """megatron-core ``language_module.py`` ``_set_attention_backend`` (core_v0.16.1, main): with the default
    ``--attention-backend auto`` each NVTE_*_ATTN must be unset or 1; the weekly FP8 tests' NVTE_FUSED_ATTN=0
    stops the run when the model is built (the reader reads flash, with a note saying so)."""
    from reader_vs_megatron import model_build_refusal

    assert "NVTE_FUSED_ATTN=0" in model_build_refusal({"attention_backend": "auto"}, {"NVTE_FUSED_ATTN": "0"})
    assert model_build_refusal({"attention_backend": "flash"}, {"NVTE_FUSED_ATTN": "0"}) is None
    assert model_build_refusal({"attention_backend": "auto"}, {}) is None


_ROCM_TAIL = """NUM_LAYERS=32
run_cmd="torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers $NUM_LAYERS --hidden-size 4096 \\
        --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 \\
        --global-batch-size 256 --bf16 --vocab-size 32000 {extra} \\
        --log-throughput 2>&1 | tee $TRAIN_LOG"
echo ${{run_cmd}} | tee -a $TRAIN_LOG
eval ${{run_cmd}}
"""


def test_eval_run_cmd_over_its_echo(tmp_path):
    """ROCm/Megatron-LM ``renwuli/disable_te_qwen`` ``train_qwen_7b.sh``: ``echo ${run_cmd} | tee -a $LOG`` then
    ``eval ${run_cmd}``.  The eval runs ``torchrun ... --log-throughput 2>&1 | tee $LOG`` (bash reads the redirection
    and the pipe), so Megatron-LM gets a bare ``--log-throughput``; the reader picked the echo's words (the longer
    command) and refused ``--log-throughput 2>&1``."""
    from primus_launch.adapters.megatron import load_megatron

    f = tmp_path / "train.sh"
    f.write_text(_ROCM_TAIL.format(extra=""))
    plan = load_megatron(f)
    assert (plan.model.num_layers, plan.training.global_batch_size) == (32, 256)


def test_fork_task_flags_are_not_abbreviations(tmp_path):
    """ROCm/Megatron-LM ``guihong_dev`` ``train70b_acc_loss.sh`` passes ``--task GPT-CHAT --train-data FILE``: that
    branch's parser (``megatron/arguments.py`` parse_args adds ``_add_tasks_args``: ``--train-data``, nargs '+')
    takes it; it is no abbreviation of ``--train-data-path`` there.  Read as an unknown flag, noted."""
    from primus_launch.adapters.megatron import load_megatron

    f = tmp_path / "train.sh"
    f.write_text(_ROCM_TAIL.format(extra="--task GPT-CHAT --train-data ../data/openhermes2_5.jsonl"))
    plan = load_megatron(f)
    assert plan.model.num_layers == 32
    assert any("--train-data" in n and "unknown" in n for n in plan.source.notes)


# ---------------------------------------------------------------------------------------------------- read16
def _gpt(*extra: str):
    return plan_from_argv(["pretrain_gpt.py", "--num-layers", "16", "--hidden-size", "256", "--num-attention-heads",
                           "8", "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "1",
                           "--global-batch-size", "8", "--bf16", "--vocab-size", "1024", *extra],
                          Cluster(num_nodes=1, gpus_per_node=8))


@pytest.mark.parametrize("strategy, grad, param", [("optim_grads_params", True, True), ("optim_grads", True, False)])
def test_use_custom_fsdp_is_megatron_fsdp_with_its_forced_overlaps(strategy, grad, param):
    """Megatron-LM chcui/gpt_oss (and training-moe-june2025, core_r0.12.0 .. core_v0.14.0rc0) ``validate_args`` on
    the functional test gpt3_mr_mcore_te_tp2_zp_z3_resume_torch_dist_dgx_a100_1N8G's flags (``--use-custom-fsdp
    --data-parallel-sharding-strategy optim_grads_params --use-distributed-optimizer``, no overlap flag):
    overlap_grad_reduce True, overlap_param_gather True (optim_grads: overlap_grad_reduce only).  The reader took the
    switch for an unknown flag: ZeRO-1, no overlaps."""
    plan = _gpt("--use-custom-fsdp", "--data-parallel-sharding-strategy", strategy, "--use-distributed-optimizer",
                "--tensor-model-parallel-size", "2", "--no-gradient-accumulation-fusion")
    assert plan.parallel.dp_sharding == {"optim_grads_params": "full", "optim_grads": "optimizer_grads"}[strategy]
    assert (plan.training.overlap_grad_reduce, plan.training.overlap_param_gather) == (grad, param)
    assert not any("unknown Megatron-LM flag --use-custom-fsdp" in n for n in plan.source.notes)


def test_use_megatron_fsdp_forces_no_overlap():
    """The renamed switch (af28b5a, 2025-08-21; core_v0.14.0 on) dropped the forcing: main's validate_args leaves
    overlap_grad_reduce False without the flag."""
    plan = _gpt("--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params",
                "--use-distributed-optimizer", "--no-gradient-accumulation-fusion")
    assert plan.parallel.dp_sharding == "full" and not plan.training.overlap_grad_reduce


def test_layout_without_mtp_layer_is_the_old_last_stage_placement():
    """Megatron-LM chcui/gpt_oss functional test moe/gpt3_mr_mcore_te_tp2_pp2_ep4_etp1_selective_recompute_experimental:
    ``--pipeline-model-parallel-layout Et*3|(tt|)*6tL --mtp-num-layers 1`` with PP 2, which that branch's parser and
    validate_args take (virtual_pipeline_model_parallel_size 4: 8 stages / PP 2); its
    ``get_mtp_num_layers_to_build`` builds the MTP layer on the last pipeline stage.  The reader refused it."""
    plan = _gpt("--pipeline-model-parallel-layout", "Et*3|(tt|)*6tL", "--mtp-num-layers", "1",
                "--pipeline-model-parallel-size", "2")
    assert (plan.parallel.pp, plan.parallel.vpp, plan.model.mtp_num_layers) == (2, 4, 1)
    assert plan.parallel.pipeline_layout.split("|")[-1] == "tmL"
    assert any("d7bf5aa" in n for n in plan.source.notes)


def test_rocm_fork_qkv_bias_flag():
    """ROCm/Megatron-LM renwuli/disable_te_qwen train_qwen_7b.sh: ``--disable-bias-linear --add-qkv-bias-linear``;
    that fork's ParallelAttention builds query_key_value with bias=add_bias_linear or add_qkv_bias_linear (True), the
    other linears without."""
    plan = _gpt("--disable-bias-linear", "--add-qkv-bias-linear")
    assert plan.model.add_qkv_bias and not plan.model.add_bias_linear
    assert not any("unknown Megatron-LM flag --add-qkv-bias-linear" in n for n in plan.source.notes)
    assert any("ROCm/Megatron-LM fork" in n for n in plan.source.notes)
    assert not _gpt("--disable-bias-linear").model.add_qkv_bias


@pytest.mark.parametrize("env, flag, text", [
    # Pai-Megatron-Patch FL=true / the weekly FP8 tests: no flag, so Megatron-LM's default auto
    ("NVTE_FLASH_ATTN=1 NVTE_FUSED_ATTN=0", "", "NVTE_FUSED_ATTN set to 0, but expected 1 for attention backend type auto"),
    ("NVTE_FUSED_ATTN=0", "--attention-backend fused",
     "NVTE_FUSED_ATTN set to 0, but expected 1 for attention backend type fused"),
    ("NVTE_FLASH_ATTN=1 NVTE_FUSED_ATTN=1", "--attention-backend flash",
     "NVTE_FUSED_ATTN set to 1, but expected 0 for attention backend type flash"),
])
def test_attention_variables_note_says_megatrons_assertion(tmp_path, env, flag, text):
    """megatron-core ``LanguageModule._set_attention_backend`` (fa0dcc4, 2024-12-07: core_v0.11.0 .. main): each of
    NVTE_FLASH_ATTN, NVTE_FUSED_ATTN, NVTE_UNFUSED_ATTN unset or the backend's value (auto 1 1 1, flash 1 0 0, fused
    0 1 0), else AssertionError f'{var} set to {v}, but expected {e} for attention backend type {name}' when the
    model is built; core_r0.10.0 has neither the flag nor the check (TE's variables choose)."""
    from primus_launch.adapters.megatron import load_megatron

    script = tmp_path / "te.sh"
    script.write_text(f"export {env}\ntorchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
                      "--num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 1 "
                      f"--global-batch-size 8 --bf16 --vocab-size 100 {flag}\n")
    plan = load_megatron(str(script))
    assert any(text in n and "core_v0.11.0" in n for n in plan.source.notes), plan.source.notes
    assert plan.training.attention_backend == (flag.split()[-1] if flag else "flash")


def test_dsv4_hybrid_attention_layers_are_refused_by_name():
    """Megatron-LM branch dsv4 functional test hybrid_mr_mcore_te_tp1_pp2_dsv4_hybrid_mhc_mtp: ``--hybrid-override-pattern
    C-D-``; that branch's ``hybrid_layer_allocation.py`` Symbols: C = CSA_ATTENTION, D = DS_ATTENTION (H = HCA, G =
    GDN), layer kinds the projection does not model: refused naming them, not as an unknown symbol."""
    with pytest.raises(PlanError) as e:
        _hybrid("C-D-", "--pipeline-model-parallel-size", "1")
    msg = str(e.value)
    assert "compressed sparse attention" in msg and "DeepSeek sparse attention" in msg and "\n" not in msg
