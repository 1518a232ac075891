"""Megatron-LM adapter: reading scripts / YAML / argv into plans, and editing them back in place."""

from __future__ import annotations

import difflib
import os
import re
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from primus_launch.adapters.megatron import (load_megatron, plan_from_argv, render_argv, render_megatron,
                                             write_megatron)
from primus_launch.errors import UserError, one_line
from primus_launch.plan import Cluster, Plan, PlanError, legality_problems

RECIPES = Path(__file__).resolve().parents[1] / "recipes" / "megatron"

# Independent truth: the published Hugging Face config.json of each model (and the task's cluster).
EXPECTED = {
    "llama3.1_8b.sh": dict(layers=32, hidden=4096, ffn=14336, heads=32, kv=8, vocab=128256, experts=None,
                           cluster=(1, 8, "h100-sxm")),
    "llama3.1_8b.yaml": dict(layers=32, hidden=4096, ffn=14336, heads=32, kv=8, vocab=128256, experts=None,
                             cluster=(1, 8, "h100-sxm")),
    "tiny_gpt_cpu.sh": dict(layers=4, hidden=64, ffn=256, heads=4, kv=None, vocab=512, experts=None,
                            cluster=(1, 2, "h100-sxm")),
    "llama3.1_70b.sh": dict(layers=80, hidden=8192, ffn=28672, heads=64, kv=8, vocab=128256, experts=None,
                            cluster=(8, 8, "h100-sxm")),
    "mixtral_8x22b.sh": dict(layers=56, hidden=6144, ffn=16384, heads=48, kv=8, vocab=32768, experts=(8, 2, 16384),
                             cluster=(4, 8, "mi300x")),
    "deepseek_v3_671b.sh": dict(layers=61, hidden=7168, ffn=18432, heads=128, kv=None, vocab=129280,
                                experts=(256, 8, 2048), cluster=(128, 8, "h100-sxm")),
    "qwen3_235b_a22b.sh": dict(layers=94, hidden=4096, ffn=12288, heads=64, kv=4, vocab=151936,
                               experts=(128, 8, 1536), cluster=(32, 8, "h100-sxm")),
    # the tuner's case studies (issue 13)
    "mixtral_8x22b_mi355x_32gpu.sh": dict(layers=56, hidden=6144, ffn=16384, heads=48, kv=8, vocab=32768,
                                          experts=(8, 2, 16384), cluster=(4, 8, "mi355x")),
    "deepseek_v3_h100_1024gpu_fp8.yaml": dict(layers=61, hidden=7168, ffn=18432, heads=128, kv=None, vocab=129280,
                                              experts=(256, 8, 2048), cluster=(128, 8, "h100-sxm")),
    "qwen3_235b_a22b_h100_256gpu.yaml": dict(layers=94, hidden=4096, ffn=12288, heads=64, kv=4, vocab=151936,
                                             experts=(128, 8, 1536), cluster=(32, 8, "h100-sxm")),
}

# A legal change of tuned values per recipe, and the words a changed line may contain.
CHANGES = {
    "llama3.1_8b.sh": dict(parallel=dict(tp=4, pp=2, vpp=2, sequence_parallel=False, dp_sharding="none"),
                           training=dict(micro_batch_size=2, pipeline_schedule="interleaved_1f1b",
                                         overlap_param_gather=False,
                                         recompute=dict(granularity="full", method="block", num_layers=2))),
    "llama3.1_8b.yaml": dict(parallel=dict(tp=4, pp=2, vpp=2, sequence_parallel=False, dp_sharding="none"),
                             training=dict(micro_batch_size=2, pipeline_schedule="interleaved_1f1b",
                                           overlap_param_gather=False,
                                           recompute=dict(granularity="full", method="uniform", num_layers=1))),
    "tiny_gpt_cpu.sh": dict(parallel=dict(tp=2, pp=1, sequence_parallel=True, dp_sharding="optimizer"),
                            training=dict(micro_batch_size=4, recompute=dict(granularity="selective", num_layers=None))),
    "llama3.1_70b.sh": dict(parallel=dict(tp=4, pp=2, vpp=1, sequence_parallel=False, dp_sharding="none"),
                            training=dict(micro_batch_size=2, pipeline_schedule="1f1b", overlap_param_gather=False,
                                          recompute=dict(granularity="selective", num_layers=None))),
    "mixtral_8x22b.sh": dict(parallel=dict(tp=4, pp=2, vpp=2, ep=4, sequence_parallel=True),
                             training=dict(micro_batch_size=2, pipeline_schedule="interleaved_1f1b",
                                           recompute=dict(granularity="full", method="uniform", num_layers=1))),
    "deepseek_v3_671b.sh": dict(parallel=dict(tp=4, ep=32, sequence_parallel=False, pipeline_layers_first_stage=5,
                                              pipeline_layers_last_stage=0, dp_sharding="none"),
                                training=dict(micro_batch_size=2, overlap_param_gather=False,
                                              recompute=dict(granularity="selective", num_layers=None))),
    "qwen3_235b_a22b.sh": dict(parallel=dict(pp=2, ep=8, vpp=1, pipeline_layers_first_stage=None,
                                             pipeline_layers_last_stage=None, sequence_parallel=False),
                               training=dict(micro_batch_size=2, recompute=dict(granularity="full", method="block",
                                                                                num_layers=4))),
    "mixtral_8x22b_mi355x_32gpu.sh": dict(parallel=dict(tp=2, ep=4, sequence_parallel=True),
                                          training=dict(micro_batch_size=2,
                                                        recompute=dict(granularity="selective", method="uniform",
                                                                       num_layers=None))),
    "deepseek_v3_h100_1024gpu_fp8.yaml": dict(parallel=dict(tp=4, ep=32), training=dict(micro_batch_size=2)),
    "qwen3_235b_a22b_h100_256gpu.yaml": dict(parallel=dict(pp=4, vpp=4, ep=16), training=dict(micro_batch_size=2)),
}
ALLOWED_WORDS = re.compile(
    r"tensor.model.parallel|pipeline.model.parallel|virtual|\bTP(_SIZE)?=|\bPP(_SIZE)?=|\bMBS=|micro.batch|MICRO_BATCH_SIZE=|"
    r"recompute|sequence.parallel|"
    r"distributed.optimizer|overlap.param.gather|decoder.(first|last)|expert.model.parallel|\bEP=|^[-+]\s*[\"']?\s*$|"
    # the launch environment a changed knob needs (plan/legality.py megatron_env_fixes: TP 1 -> 2 on H100)
    r"^\+export CUDA_DEVICE_MAX_CONNECTIONS=1$")


def _recipes() -> list[str]:
    return sorted(p.name for p in RECIPES.iterdir() if p.suffix in (".sh", ".yaml"))


def _normal(plan: Plan) -> dict:
    d = plan.model_dump(exclude={"source"})
    d["model"].pop("name")
    return d


def test_every_bundled_recipe_is_covered():
    assert set(_recipes()) == set(EXPECTED), "every recipe needs expected values and a change set"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recipe_loads_with_published_architecture_and_renders_identically(name):
    path = RECIPES / name
    plan = load_megatron(path)
    e = EXPECTED[name]
    m = plan.model
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads) == (
        e["layers"], e["hidden"], e["ffn"], e["heads"])
    if e["kv"] is not None:
        assert m.num_query_groups == e["kv"]
    assert m.padded_vocab_size(plan.parallel.tp) >= e["vocab"] and m.vocab_size == e["vocab"]
    if e["experts"]:
        assert (m.num_experts, m.moe_router_topk, m.moe_ffn_hidden_size) == e["experts"]
    else:
        assert m.num_experts is None
    c = plan.cluster
    assert (c.num_nodes, c.gpus_per_node, c.gpu) == e["cluster"]
    assert legality_problems(plan) == []
    assert plan.source.framework == "megatron" and plan.source.path == str(path)
    text = path.read_text()
    assert render_megatron(plan, text) == text


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_changed_plan_edits_only_those_lines_and_reloads(name, tmp_path):
    path = RECIPES / name
    plan = load_megatron(path)
    new = plan.with_changes(**CHANGES[name]).model_copy(update={"source": plan.source})
    text = path.read_text()
    out = render_megatron(new, text)
    assert out != text
    diff = [ln for ln in difflib.unified_diff(text.splitlines(), out.splitlines(), lineterm="", n=0)
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert diff
    for ln in diff:
        assert ALLOWED_WORDS.search(ln), f"unexpected changed line: {ln!r}"
    # lines not in the diff are untouched, and the result reads back as the requested plan
    dst = tmp_path / name
    dst.write_text(out)
    back = load_megatron(dst)
    assert _normal(back) == _normal(new)


def test_deepseek_layout_and_moe_details():
    plan = load_megatron(RECIPES / "deepseek_v3_671b.sh")
    m, p = plan.model, plan.parallel
    assert m.multi_latent_attention and (m.q_lora_rank, m.kv_lora_rank) == (1536, 512)
    assert (m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim) == (128, 64, 128)
    assert m.moe_layer_pattern == (0,) * 3 + (1,) * 58 and m.num_moe_layers == 58  # --moe-layer-freq ([0]*3+[1]*58)
    assert m.moe_shared_expert_intermediate_size == 2048 and m.moe_router_bias and m.qk_layernorm
    assert plan.layers_per_stage() == [3] + [4] * 14 + [2]
    assert (p.tp, p.pp, p.ep, p.expert_tp, plan.dp, plan.expert_dp) == (2, 16, 64, 1, 32, 1)
    assert plan.training.recompute.granularity == "full" and plan.training.recompute.num_layers == 1


def test_interleaved_schedule_and_vpp_from_layers_per_virtual_stage():
    plan = load_megatron(RECIPES / "llama3.1_70b.sh")
    assert (plan.parallel.tp, plan.parallel.pp, plan.parallel.vpp) == (8, 4, 4)  # 80/4/5
    assert plan.training.pipeline_schedule == "interleaved_1f1b"
    assert plan.num_microbatches == 64


# --------------------------------------------------------------------------- bash features
SCRIPT = r'''#!/bin/bash
# primus-launch: gpu=h200
set -e
NNODES=${NNODES:-2}
GPUS=8
TP=${TP:-4}
LAYERS=16
HIDDEN=1024
GBS=$(( 8 * 16 ))
export MBS="1"
MODE=${1:-bf16}
ARCH="--num-layers ${LAYERS} --hidden-size $HIDDEN \
      --num-attention-heads 16"
ARGS=(
    --seq-length 2048      # a comment
    --max-position-embeddings 2048
    "--vocab-size 32000"
)
if [[ "$MODE" == "fp8" ]]; then
    ARGS+=(--fp8-format hybrid --bf16)
elif [ "$MODE" = "bf16" ]; then
    ARGS+=(--bf16)
else
    ARGS+=(--fp16)
fi
for i in 1 2; do echo $i; done
[ -n "$SKIP" ] && ARGS+=(--num-experts 4)
python -m torch.distributed.run --nproc_per_node=$GPUS --nnodes "$NNODES" \
    pretrain_gpt.py $ARCH ${ARGS[@]} \
    --tensor-model-parallel-size $TP \
    --expert-tensor-parallel-size $TP \
    --micro-batch-size ${MBS} --global-batch-size $GBS \
    --save /ckpt/tp${TP}
'''


def _script(tmp_path: Path, text: str = SCRIPT, name: str = "run.sh") -> Path:
    p = tmp_path / name
    p.write_text(text)
    p.chmod(0o755)
    return p


def test_variables_arrays_conditionals_arithmetic(tmp_path):
    plan = load_megatron(_script(tmp_path))
    m, t = plan.model, plan.training
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.seq_length, m.vocab_size) == (16, 1024, 16, 2048, 32000)
    assert m.num_experts is None  # `[ -n "$SKIP" ] && ...` with SKIP unset
    assert t.precision == "bf16"  # elif branch: MODE defaults to bf16
    assert (t.micro_batch_size, t.global_batch_size) == (1, 128)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node, plan.cluster.gpu) == (2, 8, "h200")
    assert (plan.parallel.tp, plan.parallel.etp) == (4, 4)


def test_edit_goes_to_assignment_or_use_site(tmp_path):
    path = _script(tmp_path)
    text = path.read_text()
    plan = load_megatron(path)
    # TP feeds two flags and a path: changing only tp edits the use site, not TP=...
    new = plan.with_changes(parallel={"tp": 2, "etp": 4}).model_copy(update={"source": plan.source})
    out = render_megatron(new, text)
    assert "TP=${TP:-4}" in out and "--tensor-model-parallel-size 2" in out
    assert "--expert-tensor-parallel-size $TP" in out
    # changing both consistently edits the assignment's default
    new = plan.with_changes(parallel={"tp": 8, "etp": 8}).model_copy(update={"source": plan.source})
    out = render_megatron(new, text)
    assert "TP=${TP:-8}" in out and "--tensor-model-parallel-size $TP" in out
    # a computed value ($((...))) is replaced where it is used; cluster edits the NNODES default
    new = plan.with_changes(training={"global_batch_size": 256}, cluster={"num_nodes": 4}).model_copy(
        update={"source": plan.source})
    out = render_megatron(new, text)
    assert "--global-batch-size 256" in out and "NNODES=${NNODES:-4}" in out
    assert "GBS=$(( 8 * 16 ))" in out
    back = load_megatron(_script(tmp_path, out, "back.sh"))
    assert back.training.global_batch_size == 256 and back.cluster.num_nodes == 4


def test_flag_added_and_removed_inside_quoted_and_continued_text(tmp_path):
    path = _script(tmp_path)
    text = path.read_text()
    plan = load_megatron(path)
    new = plan.with_changes(parallel={"sequence_parallel": True, "dp_sharding": "optimizer"},
                            training={"recompute": {"granularity": "selective"}}).model_copy(
        update={"source": plan.source})
    out = render_megatron(new, text)
    added = [ln for ln in difflib.ndiff(text.splitlines(), out.splitlines()) if ln.startswith(("+ ", "- "))]
    assert any("--sequence-parallel" in ln for ln in added)
    removed = [ln[2:] for ln in added if ln.startswith("- ")]
    assert all(any(a[2:].startswith(r.rstrip(" \\")) for a in added if a.startswith("+ ")) for r in removed)  # only appended to
    back = load_megatron(_script(tmp_path, out, "back.sh"))
    assert back.parallel.sequence_parallel and back.parallel.dp_sharding == "optimizer"
    assert back.training.recompute.granularity == "selective"
    # and removed again: byte-identical to the original
    again = render_megatron(plan.model_copy(update={"source": plan.source}), out)
    assert again == text


def test_removing_last_line_of_continued_command_keeps_script_valid(tmp_path):
    text = ("torchrun --nproc-per-node 8 pretrain_gpt.py \\\n    --num-layers 2 --hidden-size 64 \\\n"
            "    --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 \\\n"
            "    --micro-batch-size 1 --vocab-size 1000 --tensor-model-parallel-size 2 \\\n"
            "    --sequence-parallel\necho done\n")
    path = _script(tmp_path, text)
    plan = load_megatron(path)
    assert plan.parallel.sequence_parallel and plan.training.global_batch_size == 4  # mbs x dp
    out = render_megatron(plan.with_changes(parallel={"sequence_parallel": False}).model_copy(
        update={"source": plan.source}), text)
    assert out.endswith("--tensor-model-parallel-size 2\necho done\n")
    assert not load_megatron(_script(tmp_path, out, "b.sh")).parallel.sequence_parallel


def test_sequence_parallel_flag_at_tp1_is_inert_and_kept(tmp_path):
    text = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
            "--num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 "
            "--vocab-size 1000 --sequence-parallel\n")
    plan = load_megatron(_script(tmp_path, text))
    assert not plan.parallel.sequence_parallel  # Megatron validate_args turns it off at TP=1
    up = plan.with_changes(parallel={"tp": 2, "sequence_parallel": True}).model_copy(update={"source": plan.source})
    out = render_megatron(up, text)
    assert out.count("--sequence-parallel") == 1 and "--tensor-model-parallel-size 2" in out


# --------------------------------------------------------------------------- argv and defaults
ARGV = ("torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py --num-layers 24 --hidden-size 2048 "
        "--num-attention-heads 16 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
        "--global-batch-size 256 --tokenizer-type GPT2BPETokenizer --bf16 --tensor-model-parallel-size=2").split()


def test_argv_and_megatron_defaults():
    plan = plan_from_argv(ARGV)
    m, t = plan.model, plan.training
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node, plan.parallel.tp) == (4, 8, 2)
    # megatron/training/arguments.py defaults
    assert m.ffn_hidden_size == 4 * 2048 and m.normalization == "layernorm"
    assert m.position_embedding == "learned" and not m.untie_embeddings_and_output_weights
    assert m.add_bias_linear and m.add_qkv_bias and not m.swiglu and m.num_query_groups is None
    assert m.vocab_size == 50257 and m.make_vocab_size_divisible_by == 128
    assert m.padded_vocab_size(2) == 50432  # next multiple of 128*2
    assert t.grad_reduce_in_fp32 and t.precision == "bf16" and t.pipeline_schedule == "1f1b"
    assert plan.parallel.dp_sharding == "none" and t.optimizer == "adam"


def test_defaults_agree_with_megatron_core_transformer_config():
    from megatron.core.transformer import TransformerConfig

    cfg = TransformerConfig(num_layers=2, hidden_size=2048, num_attention_heads=16)
    plan = plan_from_argv(ARGV)
    assert plan.model.ffn_hidden_size == cfg.ffn_hidden_size
    assert plan.model.kv_channels == cfg.kv_channels
    assert plan.model.add_bias_linear == cfg.add_bias_linear


def test_swiglu_default_ffn_and_gbs_default():
    argv = ["pretrain_gpt.py", "--num-layers", "2", "--hidden-size", "4096", "--num-attention-heads", "32",
            "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
            "--vocab-size", "1000", "--tokenizer-type", "NullTokenizer", "--swiglu"]
    plan = plan_from_argv(argv, Cluster(num_nodes=2, gpus_per_node=8))
    assert plan.model.ffn_hidden_size == int(4 * 4096 * 2 / 3 / 64) * 64 == 10880
    assert plan.model.vocab_size == 1001  # _NullTokenizer adds the EOD token
    assert plan.training.global_batch_size == 2 * 16


def test_render_argv_changes_only_tuned_arguments():
    plan = plan_from_argv(ARGV)
    assert render_argv(plan, ARGV) == ARGV
    new = plan.with_changes(parallel={"tp": 4, "pp": 2, "sequence_parallel": True},
                            training={"micro_batch_size": 2}, cluster={"num_nodes": 8})
    out = render_argv(new, ARGV)
    assert "--tensor-model-parallel-size=4" in out and out[out.index("--nnodes") + 1] == "8"
    assert out[out.index("--micro-batch-size") + 1] == "2"
    assert out[out.index("--pipeline-model-parallel-size") + 1] == "2" and "--sequence-parallel" in out
    expected = list(ARGV)
    expected[expected.index("--nnodes") + 1] = "8"
    expected[expected.index("--micro-batch-size") + 1] = "2"
    expected[-1] = "--tensor-model-parallel-size=4"
    expected += ["--pipeline-model-parallel-size", "2", "--sequence-parallel"]
    assert out == expected
    back = plan_from_argv(out)
    assert _normal(back) == _normal(new)


# --------------------------------------------------------------------------- YAML layouts
# --------------------------------------------------------------------------- errors
def _err_line(exc: BaseException) -> str:
    line = one_line(exc)
    assert "\n" not in line
    return line


def test_errors_are_one_line_and_name_the_flag(tmp_path):
    with pytest.raises(UserError) as e:
        load_megatron(tmp_path / "missing.sh")
    assert "missing.sh" in _err_line(e.value)

    base = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
            "--num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 ")
    with pytest.raises(PlanError) as e:
        load_megatron(_script(tmp_path, base + "--tokenizer-type HuggingFaceTokenizer --tokenizer-model acme/Unknown-7B\n"))
    line = _err_line(e.value)
    assert "--tokenizer-model" in line and "acme/Unknown-7B" in line and "--vocab-size" in line

    with pytest.raises(PlanError) as e:
        load_megatron(_script(tmp_path, base.replace("8", "6") + "--vocab-size 1000 --tensor-model-parallel-size 3\n"))
    line = _err_line(e.value)
    assert line.startswith("--tensor-model-parallel-size=3") and "num_attention_heads=4" in line

    with pytest.raises(PlanError) as e:
        load_megatron(_script(tmp_path, base + "--vocab-size 1000 --num-experts 4 --moe-layer-freq '([0]+[1]*2)'\n"))
    assert "--moe-layer-freq" in _err_line(e.value) and "must equal --num-layers=2" in _err_line(e.value)

    with pytest.raises(PlanError) as e:
        load_megatron(_script(tmp_path, base.replace("--num-layers 2 ", "") + "--vocab-size 1000\n"))
    assert _err_line(e.value).startswith("--num-layers=None")

    with pytest.raises(PlanError) as e:
        load_megatron(_script(tmp_path, base + "--vocab-size 1000 --recompute-granularity full\n"))
    assert "--recompute-method" in _err_line(e.value)

    with pytest.raises(PlanError) as e:
        load_megatron(_script(tmp_path, base + "--vocab-size 1000 --overlap-param-gather --overlap-grad-reduce\n"))
    assert _err_line(e.value).startswith("--overlap-param-gather=True: requires --use-distributed-optimizer")

    with pytest.raises(UserError) as e:
        load_megatron(_script(tmp_path, 'ARGS="--num-layers 2\n'))
    assert "cannot parse" in _err_line(e.value) and "run.sh:1:" in _err_line(e.value)

    with pytest.raises(UserError) as e:
        load_megatron(_script(tmp_path, "echo hello\n"))
    assert "no training command" in _err_line(e.value)

    with pytest.raises(PlanError) as e:
        load_megatron(_script(tmp_path, "# primus-launch: gpu=tpu-v5\n" + base + "--vocab-size 1000\n"))
    assert "gpu='tpu-v5'" in _err_line(e.value)


def test_full_sharding_renders_megatron_fsdp(tmp_path):
    path = RECIPES / "llama3.1_8b.sh"
    plan = load_megatron(path)
    # the fusion off as the tuner turns it off with Megatron-FSDP (tuner/knobs.py apply_knobs)
    new = plan.with_changes(parallel={"dp_sharding": "full"}, training={"gradient_accumulation_fusion": False}
                            ).model_copy(update={"source": plan.source})
    out = render_megatron(new, path.read_text())
    for flag in ("--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads_params",
                 "--no-gradient-accumulation-fusion", "--use-distributed-optimizer", "--ckpt-format fsdp_dtensor"):
        assert flag in out  # the flags Megatron-FSDP's user guide requires
    back = load_megatron(_script(tmp_path, out))
    assert back.parallel.dp_sharding == "full"
    assert render_megatron(plan.model_copy(update={"source": plan.source}), out) != out  # reversible edit
    assert load_megatron(_script(tmp_path, render_megatron(plan, out), "c.sh")).parallel.dp_sharding == "optimizer"


def test_unexpressible_change_is_refused(tmp_path):
    plan = load_megatron(RECIPES / "llama3.1_8b.sh")
    # a combination Megatron's validate_args rejects is not even a plan (plan.legality_problems)
    with pytest.raises(ValidationError) as e:
        plan.with_changes(parallel={"dp_sharding": "none"})
    assert one_line(e.value).startswith("training.overlap_param_gather=True")
    new = plan.with_changes(training={"pipeline_schedule": "zb_h1"}).model_copy(update={"source": plan.source})
    with pytest.raises(PlanError) as e:
        render_megatron(new, (RECIPES / "llama3.1_8b.sh").read_text())
    assert "pipeline_schedule" in _err_line(e.value)


# --------------------------------------------------------------------------- writing
def test_write_is_atomic_keeps_mode_and_refuses_original(tmp_path):
    src = tmp_path / "r.sh"
    src.write_text((RECIPES / "llama3.1_8b.sh").read_text())
    src.chmod(0o750)
    plan = load_megatron(src)
    with pytest.raises(UserError):
        write_megatron(plan, src, src)
    new = plan.with_changes(training={"micro_batch_size": 2})
    out = write_megatron(new, src, tmp_path / "tuned" / "r_tuned.sh")
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o750
    assert load_megatron(out).training.micro_batch_size == 2
    assert src.read_text() == (RECIPES / "llama3.1_8b.sh").read_text()
    assert [p.name for p in out.parent.iterdir()] == ["r_tuned.sh"]  # no temporary left behind


def test_partial_distributed_optimizer_instances_round_trip(tmp_path):
    """--num-distributed-optimizer-instances N reads as parallel.dp_replicate (the optimizer shards over dp x cp / N)
    and is written back; Megatron asserts it needs the distributed optimizer and divides dp x cp (parallel_state)."""
    src = (RECIPES / "llama3.1_8b.sh").read_text()
    plan = load_megatron(RECIPES / "llama3.1_8b.sh")
    assert plan.parallel.dp_replicate == 1 and plan.dp == 4
    two = render_megatron(plan.with_changes(parallel={"dp_replicate": 2}).model_copy(update={"source": plan.source}),
                          src)
    (tmp_path / "two.sh").write_text(two)
    assert load_megatron(tmp_path / "two.sh").parallel.dp_replicate == 2
    with pytest.raises(ValidationError, match="dp_replicate=3: must divide dp\\*cp=4"):
        plan.with_changes(parallel={"dp_replicate": 3})
    argv = ("pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 256 "
            "--max-position-embeddings 256 --micro-batch-size 1 --global-batch-size 8 --vocab-size 512 "
            "--num-distributed-optimizer-instances 2").split()
    with pytest.raises(PlanError, match="--num-distributed-optimizer-instances"):
        plan_from_argv(argv, Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))


# --------------------------------------------------------------------------- launch-script idioms
UPSTREAM_STYLE = r'''#!/bin/bash
# the idioms of Megatron-LM's examples/llama/*.sh: quoted "flag value" array items, +=, [[ ]] || [[ ]]
CHECKPOINT_PATH=${1:-"checkpoints/x"}
TOKENIZER_ARG=${2:-"MOCK"}
mkdir -p "$(dirname "$CHECKPOINT_PATH")"
GPUS_PER_NODE=8
NUM_NODES=2
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))
DTYPE="fp8"
DISTRIBUTED_ARGS=(--nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES)
MODEL_ARGS=(
    --num-layers 8 --hidden-size 1024 --num-attention-heads 8
    --seq-length 1024 --max-position-embeddings 1024
)
TRAINING_ARGS=(--micro-batch-size 1 --global-batch-size 64 --bf16)
DTYPE_ARGS=()
if [[ "$DTYPE" == "fp8" ]]; then
    DTYPE_ARGS+=(
        "--fp8-format hybrid"
        "--fp8-amax-history-len 1024"
    )
fi
DDP_ARGS=(--use-distributed-optimizer --overlap-grad-reduce)
TRAINING_ARGS+=("${DDP_ARGS[@]}")
if [[ "$TOKENIZER_ARG" == "MOCK" ]] || [[ -z "$TOKENIZER_ARG" ]]; then
    DATA_ARGS=("--mock-data" "--tokenizer-type NullTokenizer" "--vocab-size 32000" "--split '99,1,0'")
else
    DATA_ARGS=("--tokenizer-type HuggingFaceTokenizer" "--tokenizer-model $TOKENIZER_ARG")
fi
if [ ! -f "$PRETRAIN_SCRIPT_PATH" ]; then
    echo "missing"
    exit 1
fi
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py ${MODEL_ARGS[@]} ${TRAINING_ARGS[@]} \
    ${DTYPE_ARGS[@]} ${DATA_ARGS[@]} "$@"
'''


def test_upstream_example_idioms(tmp_path):
    path = _script(tmp_path, UPSTREAM_STYLE)
    plan = load_megatron(path)
    assert plan.training.precision == "fp8" and plan.parallel.dp_sharding == "optimizer"
    assert plan.training.overlap_grad_reduce and plan.model.vocab_size == 32001  # NullTokenizer + EOD
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (2, 8)
    # fp8 -> bf16 removes the quoted "--fp8-format hybrid" item, nothing else
    new = plan.with_changes(training={"precision": "bf16"}).model_copy(update={"source": plan.source})
    out = render_megatron(new, UPSTREAM_STYLE)
    diff = [ln for ln in difflib.ndiff(UPSTREAM_STYLE.splitlines(), out.splitlines()) if ln[:2] in ("+ ", "- ")]
    assert diff == ['-         "--fp8-format hybrid"']
    assert load_megatron(_script(tmp_path, out, "b.sh")).training.precision == "bf16"
    # and back to fp8: the flag returns next to the other precision flag
    out2 = render_megatron(plan, out)
    assert load_megatron(_script(tmp_path, out2, "c.sh")).training.precision == "fp8"


def test_megatron_nested_yaml_layout(tmp_path):
    text = """# primus-launch: gpu=a100-sxm-80gb nodes=2 gpus_per_node=8
language_model:
  num_layers: 24
  hidden_size: 1024
  num_attention_heads: 16
  num_query_groups: null
  ffn_hidden_size: null
  add_bias_linear: False
  gated_linear_unit: False
  activation_func: swiglu
  num_moe_experts: null
  recompute_granularity: null
  fp8: null
  normalization: "LayerNorm"
model_parallel:
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 2
  virtual_pipeline_model_parallel_size: null
  sequence_parallel: True
  bf16: True
micro_batch_size: 2
global_batch_size: 128
make_vocab_size_divisible_by: 128
untie_embeddings_and_output_weights: True
position_embedding_type: rope
swiglu: True
max_position_embeddings: 4096
seq_length: 4096
vocab_size: 32000
"""
    path = tmp_path / "gpt.yaml"
    path.write_text(text)
    plan = load_megatron(path)
    m = plan.model
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.add_bias_linear, m.swiglu) == (
        24, 1024, int(4 * 1024 * 2 / 3 / 64) * 64, False, True)
    assert (plan.parallel.tp, plan.parallel.pp, plan.parallel.sequence_parallel) == (2, 2, True)
    assert (plan.cluster.gpu, plan.cluster.num_nodes, plan.cluster.world_size) == ("a100-sxm-80gb", 2, 16)
    new = plan.with_changes(parallel={"vpp": 2, "tp": 4}, training={"pipeline_schedule": "interleaved_1f1b"},
                            cluster={"num_nodes": 4}).model_copy(update={"source": plan.source})
    out = render_megatron(new, text)
    assert "virtual_pipeline_model_parallel_size: 2" in out and "tensor_model_parallel_size: 4" in out
    assert "nodes=4" in out
    assert len([ln for ln in difflib.ndiff(text.splitlines(), out.splitlines()) if ln.startswith("- ")]) == 3


def test_cluster_flags_added_to_torchrun_when_absent():
    argv = ("torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
            "--max-position-embeddings 64 --micro-batch-size 1 --global-batch-size 64 --vocab-size 100").split()
    plan = plan_from_argv(argv)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (1, 1)  # torchrun defaults
    out = render_argv(plan.with_changes(cluster={"num_nodes": 2, "gpus_per_node": 8}), argv)
    assert out[:5] == ["torchrun", "--nnodes", "2", "--nproc-per-node", "8"] and out[5:] == argv[1:]
    back = plan_from_argv(out)
    assert (back.cluster.num_nodes, back.cluster.gpus_per_node) == (2, 8)


def test_unresolvable_launcher_value_needs_a_cluster():
    argv = ("torchrun --nproc-per-node gpu pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
            "--seq-length 64 --micro-batch-size 1 --global-batch-size 64 --vocab-size 100").split()
    with pytest.raises(PlanError) as e:
        plan_from_argv(argv)
    assert _err_line(e.value).startswith("--nproc-per-node='gpu'")
    plan = plan_from_argv(argv, Cluster(num_nodes=1, gpus_per_node=8))
    out = render_argv(plan.with_changes(training={"micro_batch_size": 2}), argv)
    assert out == [("2" if i == argv.index("--micro-batch-size") + 1 else a) for i, a in enumerate(argv)]


def _transformer_config(plan: Plan):
    """The megatron-core config Megatron-LM would build from these arguments (validates them)."""
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer import MLATransformerConfig, TransformerConfig

    m, p, t = plan.model, plan.parallel, plan.training
    kw = dict(num_layers=m.num_layers, hidden_size=m.hidden_size, num_attention_heads=m.num_attention_heads,
              num_query_groups=m.num_query_groups, ffn_hidden_size=m.ffn_hidden_size, kv_channels=m.head_dim,
              tensor_model_parallel_size=p.tp, pipeline_model_parallel_size=p.pp,
              virtual_pipeline_model_parallel_size=p.vpp if p.vpp > 1 else None, context_parallel_size=p.cp,
              expert_model_parallel_size=p.ep, expert_tensor_parallel_size=p.expert_tp,
              sequence_parallel=p.sequence_parallel, num_layers_in_first_pipeline_stage=p.pipeline_layers_first_stage,
              num_layers_in_last_pipeline_stage=p.pipeline_layers_last_stage,
              recompute_granularity=None if t.recompute.granularity == "none" else t.recompute.granularity,
              recompute_method=t.recompute.method if t.recompute.granularity == "full" else None,
              recompute_num_layers=t.recompute.num_layers, num_moe_experts=m.num_experts,
              moe_router_topk=m.moe_router_topk, moe_ffn_hidden_size=m.moe_ffn_hidden_size,
              moe_shared_expert_intermediate_size=m.moe_shared_expert_intermediate_size or None,
              moe_layer_freq=[int(m.is_moe_layer(i)) for i in range(m.num_layers)] if m.is_moe else 1,
              moe_router_enable_expert_bias=m.moe_router_bias,
              moe_router_score_function="sigmoid" if m.moe_router_bias else "softmax",
              gated_linear_unit=m.swiglu, activation_func=F.silu if m.swiglu else F.gelu,
              add_bias_linear=m.add_bias_linear, add_qkv_bias=m.add_qkv_bias, qk_layernorm=m.qk_layernorm,
              normalization="RMSNorm" if m.normalization == "rmsnorm" else "LayerNorm",
              bf16=t.precision in ("bf16", "fp8"), pipeline_dtype=torch.bfloat16)
    if m.multi_latent_attention:
        return MLATransformerConfig(**kw, q_lora_rank=m.q_lora_rank, kv_lora_rank=m.kv_lora_rank,
                                    qk_head_dim=m.qk_head_dim, qk_pos_emb_head_dim=m.qk_pos_emb_head_dim,
                                    v_head_dim=m.v_head_dim)
    return TransformerConfig(**kw)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recipes_pass_megatron_core_config_validation(name):
    plan = load_megatron(RECIPES / name)
    cfg = _transformer_config(plan)
    assert cfg.num_layers == plan.model.num_layers and cfg.ffn_hidden_size == plan.model.ffn_hidden_size


def test_megatron_core_validation_rejects_a_bad_layout():
    # control for the test above: megatron-core does reject illegal arguments
    plan = load_megatron(RECIPES / "llama3.1_8b.sh")
    bad = plan.model_copy(update={"training": plan.training.model_copy(
        update={"recompute": plan.training.recompute.model_copy(update={"granularity": "full", "method": "uniform",
                                                                         "num_layers": None})})})
    with pytest.raises(ValueError):
        _transformer_config(bad)


def test_here_documents_are_skipped(tmp_path):
    text = ("cat > hostfile <<EOF\nnode1 slots=8\nTP=99 \"unbalanced\nEOF\n"
            "cat <<-'END' | tee notes\n\tanything 'unbalanced\n\tEND\n"
            "TP=2\ntorchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
            "--num-attention-heads 4 --seq-length 64 --micro-batch-size 1 --vocab-size 100 "
            "--tensor-model-parallel-size $TP\n")
    plan = load_megatron(_script(tmp_path, text))
    assert plan.parallel.tp == 2
    out = render_megatron(plan.with_changes(parallel={"tp": 4}).model_copy(update={"source": plan.source}), text)
    # the plan keeps its global batch (Megatron's default mbs x dp = 4 at TP=2), so it is now written
    assert out == text.replace("TP=2", "TP=4").replace("--micro-batch-size 1", "--micro-batch-size 1 --global-batch-size 4")


def test_srun_launcher_states_the_cluster(tmp_path):
    text = ("#!/bin/bash\n#SBATCH --nodes=4\nNODES=4\n"
            "srun --nodes=$NODES --ntasks-per-node=8 --container-image nvcr.io/nvidia/pytorch:25.01-py3 \\\n"
            "    python pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 \\\n"
            "    --seq-length 512 --max-position-embeddings 512 --micro-batch-size 1 --global-batch-size 64 \\\n"
            "    --vocab-size 1000\n")
    plan = load_megatron(_script(tmp_path, text))
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (4, 8)
    out = render_megatron(plan.with_changes(cluster={"num_nodes": 8}).model_copy(update={"source": plan.source}), text)
    # the #SBATCH allocation follows (user16: srun --nodes=8 inside a 4-node allocation is refused by srun)
    assert out == text.replace("NODES=4", "NODES=8").replace("#SBATCH --nodes=4", "#SBATCH --nodes=8")


def test_write_into_a_directory_path_is_a_user_error(tmp_path):
    src = tmp_path / "r.sh"
    src.write_text((RECIPES / "llama3.1_8b.sh").read_text())
    (tmp_path / "taken").mkdir()
    with pytest.raises(UserError) as e:
        write_megatron(load_megatron(src), src, tmp_path / "taken")
    assert "taken" in _err_line(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sh", "taken"]


def test_quoted_empty_positional_list_gives_no_argument(tmp_path):
    """bash: ``"$@"`` with no arguments (and ``"${A[@]}"`` of an empty array) expand to no word at
    all; ``""`` stays one empty argument."""
    from primus_launch.adapters.megatron_bash import ShellState

    def argv(src):
        return [str(t) for t in ShellState(src).commands[-1].args]

    assert argv('python x.py --num-layers 2 "$@" --hidden-size 4\n') == argv('python x.py --num-layers 2 --hidden-size 4\n')
    assert len(argv('A=()\npython x.py "${A[@]}" y\n')) == 3
    assert len(argv('python x.py "" y\n')) == 4


def test_moe_dispatcher_and_group_routing_flags():
    """--moe-token-dispatcher-type flex with DeepEP (both spellings Megatron-LM has had) and
    group-limited routing reach the plan; the bundled DeepSeek-V3 recipe routes 4 of 8 groups."""
    moe = ["--num-experts", "64", "--moe-router-topk", "8", "--moe-ffn-hidden-size", "512",
           "--moe-router-num-groups", "8", "--moe-router-group-topk", "4"]
    old = plan_from_argv(ARGV + moe + ["--moe-token-dispatcher-type", "flex", "--moe-enable-deepep"])
    new = plan_from_argv(ARGV + moe + ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "deepep"])
    a2a = plan_from_argv(ARGV + moe + ["--moe-token-dispatcher-type", "alltoall"])
    assert old.training.moe_token_dispatcher == new.training.moe_token_dispatcher == "deepep"
    assert a2a.training.moe_token_dispatcher == "alltoall"
    assert (old.model.moe_router_num_groups, old.model.moe_router_group_topk) == (8, 4)
    ds = load_megatron(RECIPES / "deepseek_v3_671b.sh")
    assert (ds.model.moe_router_num_groups, ds.model.moe_router_group_topk) == (8, 4)
    assert render_megatron(ds, (RECIPES / "deepseek_v3_671b.sh").read_text()) == (RECIPES / "deepseek_v3_671b.sh").read_text()


def test_no_rope_fusion_is_read_written_and_priced():
    """--no-rope-fusion (Megatron dest apply_rope_fusion, default on) is read into
    training.rope_fusion, written back by the argv writer, and prices RoPE with the eager kernels
    (the roofline's ROPE_EAGER byte count instead of ROPE_FUSED)."""
    from primus_launch.adapters.megatron import render_argv
    from primus_launch.projection.cost.elementwise_bytes import ROPE_EAGER, ROPE_FUSED
    from primus_launch.projection.cost.roofline import layer_times_roofline

    argv = ARGV + ["--position-embedding-type", "rope"]
    fused, eager = plan_from_argv(argv), plan_from_argv(argv + ["--no-rope-fusion"])
    assert fused.training.rope_fusion and not eager.training.rope_fusion
    assert "--no-rope-fusion" in render_argv(eager, argv) and "--no-rope-fusion" not in render_argv(fused, argv)
    assert ROPE_EAGER[0] > ROPE_FUSED[0]
    assert layer_times_roofline(eager).dense_layer.fwd_s > layer_times_roofline(fused).dense_layer.fwd_s


@pytest.mark.parametrize("program,tool", [
    ("examples.inference.offline_inference", True),   # Megatron-LM examples/inference/run_offline_inference.sh
    ("tools/run_text_generation_server.py", True), ("pretrain_gpt.py", False),
    ("megatron.training.pretrain_gpt", False), ("torchtitan.train", False)])
def test_a_module_run_with_python_m_is_classified_like_its_file(program, tool):
    """Regression: ``torchrun -m examples.inference.offline_inference`` (an inference script with every
    model flag) was projected as a training run; a module's last component is its file."""
    from primus_launch.adapters.megatron_args import program_family

    fam = program_family(program)
    assert (fam is not None and fam.startswith("tool:")) == tool, fam


def test_a_command_without_megatron_model_flags_says_so(tmp_path):
    """Regression: a Megatron-Bridge launch (the model built in Python, Hydra-style overrides) ended in
    ``--num-layers=None: required (Megatron-LM has no default)`` as if one flag were missing."""
    text = ("#!/bin/bash\ntorchrun --nproc_per_node=8 00_quickstart_pretrain.py --config-file conf/llama3_8b.yaml "
            "model.num_layers=2 train.global_batch_size=8\n")
    with pytest.raises(UserError) as e:  # user18: the file it names and the command that projects it
        load_megatron(_script(tmp_path, text))
    line = _err_line(e.value)
    assert "--config-file conf/llama3_8b.yaml: a Megatron-Bridge run (no Megatron-LM model flag)" in line
    assert "--project conf/llama3_8b.yaml --gpu h100-sxm --nodes 1" in line
    assert line.endswith("first write its override words into it (model.num_layers=2, train.global_batch_size=8)")


_FN_SCRIPT = '''#!/bin/bash
TP=${TP:-2}; PP=${PP:-2}
par_args() { echo "--tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP"; echo --sequence-parallel; }
torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py $(par_args) \\
  --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 \\
  --micro-batch-size 1 --global-batch-size 64 --bf16 --tokenizer-type NullTokenizer --vocab-size 32000 --mock-data \\
  $([ "$MODE" = det ] && echo --deterministic-mode) `# comments run and print nothing` --use-distributed-optimizer
'''


def test_command_output_in_the_arguments_is_read_or_reported(tmp_path):
    """read17: words a command substitution gives the training command where a flag stands.  A function of echoes
    is run (bash passes its words: ``--tensor-model-parallel-size 2 ...``; the reader had dropped them and projected
    Megatron-LM's defaults TP 1 / PP 1 / no SP, with no warning); a backquoted comment prints nothing; any other
    command (``$([ "$MODE" = det ] && echo --deterministic-mode)``, reduced from Megatron-LM main
    tests/performance_tests/shell_test_utils/determinism/perf_breakdown.sh: the flag depends on the run's
    environment) is reported as not modelled instead of silently dropped.  A tuned TP is written back into the
    variable the function prints."""
    src = _script(tmp_path, _FN_SCRIPT)
    plan = load_megatron(src)
    p = plan.parallel
    assert (p.tp, p.pp, p.sequence_parallel, p.dp_sharding) == (2, 2, True, "optimizer")
    (u,) = plan.source.unmodelled
    assert u.flag.startswith("$([") and "not run" in u.value and "time and memory" in u.effect
    tuned = render_megatron(plan.with_changes(parallel={"tp": 4}).model_copy(update={"source": plan.source}),
                            src.read_text())
    assert "TP=${TP:-4}" in tuned and tuned.count("--tensor-model-parallel-size") == 1
