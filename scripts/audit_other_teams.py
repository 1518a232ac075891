"""Held-out reading audit on recipes written by other teams (the tenth reading round): what the tool makes of
each, checked against the fields the recipe runs (read from the recipe by hand; the expectations below).

    python scripts/audit_other_teams.py                 # this checkout
    python scripts/audit_other_teams.py --wt OTHER      # another checkout (e.g. main before the fixes)
    python scripts/audit_other_teams.py -v              # one line per recipe

Corpora (local mirrors, fetched with the session's ``fetch`` tool; extracted with ``git archive`` into a
temporary folder, never into this repository):

- ``pai``: alibaba/Pai-Megatron-Patch ``examples/*/run_mcore_*.sh``, run with the first invocation their
  README gives (``sh run_mcore_X.sh dsw 8B 1 8 ...``; positional arguments), through a two-line wrapper that
  exports what the README exports first (``MP_PP0_LAYERS`` for DeepSeek); ``deepseek_v3/run_mcore_deepseek_lite.sh``
  takes no arguments.  The Moonlight README passes one argument more than its script reads (the script refuses
  ``--save-interval='false'``, as Megatron-LM's parser would): audited with that argument dropped.
- ``pai0`` (read13): Pai-Megatron-Patch's older scripts, ``run_pretrain_{mcore,megatron}_*.sh`` and
  ``run_finetune_{mcore,megatron}_*_withGA.sh`` of ``examples/llama2``, ``llama3``, ``qwen1_5`` (the only READMEs that
  invoke them), run with their README invocation.  ``*_megatron_*`` scripts run Pai's legacy ``megatron.model``
  GPT (``pretrain_megatron_llama.py``): expected reported as not modelled (``legacy_model``).  Two README
  invocations do not fit their script (an argument the script does not read, or one it reads missing: Megatron's
  parser would refuse the shifted value too): expected refused.
- ``rocm``: ROCm/Megatron-LM's branch scripts at the repository root (``train_*.sh``, ``tune_*.sh``, ``run*.sh``)
  of the branches named in ``ROCM_BRANCHES``, on 2 x 8 MI300X.
- ``mlm08``: Megatron-LM core_r0.8.0 ``tests/functional_tests/test_scripts/gpt3/pretrain_gpt3_distributed_test.sh``
  with three KEY=VALUE argument sets of its ``jet_recipes/MR-gpt.yaml`` (a loop over ``"$@"`` exports them).
- ``mlmex``: Megatron-LM ``examples/gpt3`` and ``examples/mixtral`` at core_r0.8.0 .. core_r0.11.0 (positional
  arguments as the scripts' headers name them).
- ``nemo``: NVIDIA/NeMo-Framework-Launcher ``launcher_scripts/conf/training/**.yaml`` (NeMo 1.0 configs; not read:
  the check is that each is refused by name, none read, none a traceback).
- ``launch`` (the eleventh round, read11): the four upstream trees at their 2026-08-22 snapshots (Megatron-LM
  d98e8a6, Megatron-Bridge 067f987, Primus fd1eeab, torchtitan b5bcd76), each run as its README or test runner
  launches it: ``./primus-cli ... -- train pretrain --config X`` and ``EXP=X bash examples/run_pretrain.sh``,
  ``MODULE=M CONFIG=C ./run_train.sh [overrides]``, ``bash examples/.../train_*.sh ARGS``, a functional test's
  ``model_config.yaml``, Megatron-Bridge's ``scripts/training/train.sh --recipe R``; given after ``--`` (the
  command form) unless a file is named.  Expectations (MoE shape, parallel degrees, batch, precision recipe,
  dispatcher, cluster) read from the recipe and the registry / preset it names.

Outcome per recipe: ``right`` (a plan whose checked fields equal the expectation), ``WRONG`` (a plan with another
value: silently wrong), ``refused`` (one ``primus-launch: error:`` line, exit 2), ``TRACEBACK`` (anything else).
An expectation ``refuse:TEXT`` says the recipe is one the projection does not model (a VLM, a hybrid model):
reading it at all is WRONG.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIRRORS = Path("/work/.mirror")
PAI = MIRRORS / "alibaba+Pai-Megatron-Patch" / "repo"
ROCM = MIRRORS / "ROCm+Megatron-LM" / "repo"
MLM = MIRRORS / "NVIDIA+Megatron-LM" / "repo"
NEMO = MIRRORS / "NVIDIA+NeMo-Framework-Launcher" / "repo"
ROCM_BRANCHES = ("hanl/llama2", "renwuli/disable_te_qwen1.5", "renwuli/disable_te_qwen", "hakiymaz/deepseek_v2", "stepyoun/llama2-v2",
                 "yushengsu-dev-databricks")

# fields checked: model / parallel / training values, as the recipe runs them
_F = ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size", "vocab_size",
      "num_experts", "moe_shared_expert_intermediate_size", "multi_latent_attention", "seq_length", "tp", "pp", "ep",
      "micro_batch_size", "global_batch_size", "tp_comm_overlap", "attention_backend")


def _e(*vals) -> dict:
    return dict(zip(_F, vals))


# Pai-Megatron-Patch a098ca5: each script's README invocation, read by hand (model block of its MODEL_SIZE,
# the parallel arguments, FL -> NVTE_FLASH_ATTN=1 NVTE_FUSED_ATTN=0, TP > 1 -> --tp-comm-overlap where the
# script passes comm_overlap_option, vocabulary = Pai's tokenizer base + EXTRA_VOCAB_SIZE or --padded-vocab-size)
PAI_EXPECT = {
    "deepseek_v2/run_mcore_deepseek.sh": _e(27, 2048, 16, None, 10944, 102400, 64, 2816, True, 1024, 1, 4, 2, 1, 8,
                                            False, "flash"),
    "deepseek_v3/run_mcore_deepseek.sh": _e(61, 7168, 128, None, 18432, 129280, 256, 2048, True, 1024, 8, 8, 16, 1, 8,
                                            False, "auto"),
    "deepseek_v3/run_mcore_deepseek_lite.sh": _e(61, 7168, 128, None, 18432, 129280, 256, 2048, True, 4096, 2, 8, 16,
                                                 1, 8192, False, "auto"),
    "llama3_1/run_mcore_llama3_1.sh": _e(32, 4096, 32, 8, 14336, 128256, None, 0, False, 128, 4, 2, 1, 1, 8, True,
                                         "flash"),
    "llava_mcore/run_mcore_llava.sh": "refuse:multimodal",
    "mistral/run_mcore_mistral.sh": _e(32, 4096, 32, 8, 14336, 32000, None, 0, False, 128, 4, 1, 1, 1, 8, True, "flash"),
    "moonlight/run_mcore_moonlight.sh": _e(27, 2048, 16, None, 11264, 163840, 64, 2816, True, 1024, 1, 1, 8, 1, 8,
                                           False, "auto"),
    "qwen2/run_mcore_qwen.sh": _e(24, 896, 14, 2, 4864, 151936, None, 0, False, 128, 1, 1, 1, 1, 8, False, "flash"),
    "qwen2/run_mcore_qwen2_moe.sh": _e(28, 3584, 28, 4, 18944, 151936, 64, 20480, False, 128, 4, 2, 4, 1, 8, False,
                                       "flash"),
    "qwen2_5/run_mcore_qwen.sh": _e(24, 896, 14, 2, 4864, 151936, None, 0, False, 128, 1, 1, 1, 1, 8, False, "flash"),
    "qwen2_5_vl/run_mcore_qwen.sh": "refuse:multimodal",
    "qwen2_vl/run_mcore_qwen.sh": "refuse:multimodal",
    "qwen3/run_mcore_qwen3.sh": _e(48, 2048, 32, 4, 6144, 151936, 128, 0, False, 128, 4, 2, 4, 1, 8, False, "flash"),
    "qwen3_next/run_mcore_qwen3.sh": "refuse:hybrid",
    "qwq/run_mcore_qwen.sh": _e(64, 5120, 40, 8, 27648, 152064, None, 0, False, 128, 4, 1, 1, 1, 8, True, "flash"),
}
# Pai-Megatron-Patch a098ca5, the older scripts (``pai0``): README invocation, model block of its MODEL_SIZE
# (Llama-2 13B, Llama-3 8B, Qwen1.5 0.5B), FL=false (no NVTE variables: attention auto, or local where TE=false writes
# --transformer-impl local: llama3, qwen1_5 mcore), no TP overlap option;
# vocabulary: LLamaTokenizer = the --load checkpoint's tokenizer.vocab_size + EXTRA_VOCAB_SIZE (32000 + 0, 128000 +
# 256), LLama3Tokenizer 128000 + 256, Qwen2Tokenizer 151643 + 293 (megatron_patch/tokenizer/__init__.py)
_L2 = (40, 5120, 40, None, 13824, 32000, None, 0, False, 128, 8, 1, 1, 1)
_L3 = (32, 4096, 32, 8, 14336, 128256, None, 0, False, 128, 4, 1, 1, 1)
_Q15 = (24, 1024, 16, None, 2816, 151936, None, 0, False, 128, 1, 1, 1, 1)
PAI0_EXPECT = {
    "llama2/run_pretrain_mcore_llama.sh": {**_e(*_L2, 8, False, "auto"), "legacy_model": False},
    "llama2/run_pretrain_megatron_llama.sh": {**_e(*_L2, 8, False, "auto"), "legacy_model": True},
    "llama2/run_finetune_mcore_llama_withGA.sh": {**_e(*_L2, 8, False, "auto"), "legacy_model": False},
    "llama2/run_finetune_megatron_llama_withGA.sh": {**_e(*_L2, 32, False, "auto"), "legacy_model": True},
    "llama3/run_pretrain_mcore_llama.sh": {**_e(*_L3, 8, False, "local"), "legacy_model": False},
    "llama3/run_pretrain_megatron_llama.sh": {**_e(*_L3, 8, False, "local"), "legacy_model": True},
    "llama3/run_finetune_megatron_llama_withGA.sh": {**_e(*_L3, 32, False, "local"), "legacy_model": True},
    # the script reads MODEL_SIZE=$2, the README passes the Megatron-Patch path there: --train-iters gets a path
    "llama3/run_finetune_mcore_llama_withGA.sh": "refuse:--train-iters",
    "qwen1_5/run_pretrain_mcore_qwen.sh": {**_e(*_Q15, 8, False, "local"), "legacy_model": False},
    "qwen1_5/run_pretrain_megatron_qwen.sh": {**_e(*_Q15, 8, False, "auto"), "legacy_model": True},
    # the script reads EP=${20}, the README gives no EP: every later argument shifts one place
    "qwen1_5/run_finetune_mcore_qwen_withGA.sh": "refuse:--lr-warmup-iters",
    # LLamaTokenizer from --load .../Qwen1.5-0.5B-hf-to-megatron-tp1-pp1: tokenizer.vocab_size 151643 + 293
    "qwen1_5/run_finetune_megatron_qwen_withGA.sh": {**_e(*_Q15, 32, False, "auto"), "legacy_model": True},
}

PAI_SETUP = {  # script -> (README exports, index of a README argument the script does not read, nodes)
    "deepseek_v2/run_mcore_deepseek.sh": ({"MP_PP0_LAYERS": "6"}, None, 1),
    "deepseek_v3/run_mcore_deepseek.sh": ({"MP_PP0_LAYERS": "5"}, None, 16),
    "moonlight/run_mcore_moonlight.sh": ({}, 16, 1),
    "qwen2/run_mcore_qwen2_moe.sh": ({}, None, 4),
    "deepseek_v3/run_mcore_deepseek_lite.sh": ({}, None, 32),
}

# ROCm/Megatron-LM branch scripts that read (the others need a tokenizer file, a python -c value, ...)
ROCM_EXPECT = {
    "hakiymaz_deepseek_v2/train_deepseekv2.sh": _e(27, 2048, 16, None, 10944, 102400, 64, 2816, True, 2048, 1, 1, 8,
                                                   4, 256, False, "auto"),
    # run.sh: bash tune_basetrain.sh BASHFILE=train70b_acc_loss.sh MODEL_SIZE=20 MBS=8 BS=256 NNODES=2 ...
    "yushengsu-dev-databricks/run.sh": _e(20, 8192, 64, 8, 28672, 32000, None, 0, False, 4096, 8, 1, 1, 8, 256, False,
                                          "auto"),
    # run_databrick.sh: bash tune_basetrain_databrick.sh MBS=5 BS=80 TP=1 PP=1 MODEL_SIZE=8
    "yushengsu-dev-databricks/run_databrick.sh": _e(32, 4096, 32, 8, 14336, 128256, None, 0, False, 4096, 1, 1, 1, 5,
                                                    80, False, "auto"),
    "yushengsu-dev-databricks/train70b_acc_loss.sh": _e(80, 8192, 64, 8, 28672, 32000, None, 0, False, 4096, 8, 1, 1,
                                                        2, 8, False, "auto"),
    "yushengsu-dev-databricks/tune_basetrain_databrick.sh": _e(80, 8192, 64, 8, 28672, 128256, None, 0, False, 4096, 8, 1,
                                                               1, 2, 8, False, "auto"),
    "yushengsu-dev-databricks/tune_basetrain.sh": _e(80, 8192, 64, 8, 28672, 32000, None, 0, False, 4096, 8, 1, 1, 2, 8,
                                                     False, "auto"),
    # read12: GPUS_PER_NODE=`python -c "import torch; print(torch.cuda.device_count())"` (was refused) and the
    # tokenizer the script fetches (wget -O $TOKENIZER_MODEL .../NousResearch/Llama-2-7b-chat-hf/.../tokenizer.model);
    # MODEL_SIZE 70 block (NUM_KV_HEADS=8), TE_FP16=0 (bf16), the MBS / BS defaults
    "stepyoun_llama2-v2/train_70b_n0.sh": _e(80, 8192, 64, 8, 28672, 32000, None, 0, False, 4096, 8, 1, 1, 2, 128, False,
                                             "auto"),
    "stepyoun_llama2-v2/train_llama2.sh": _e(80, 8192, 64, 8, 28672, 32000, None, 0, False, 4096, 8, 1, 1, 1, 8, False,
                                             "auto"),
    # read13: the fork's --tokenizer-type QWen2Tokenizer sets padded_vocab_size = tokenizer.vocab_size (151643) +
    # --extra-vocab-size 293 itself (megatron/tokenizer/tokenizer.py build_tokenizer), for 7B and 14B alike (was
    # refused: Qwen/Qwen1.5-* not in the public table); model blocks Qwen1.5-7B / 14B, MBS / GBS defaults
    "renwuli_disable_te_qwen1.5/train_qwen1.5_7b.sh": _e(32, 4096, 32, None, 11008, 151936, None, 0, False, 2048, 1, 1,
                                                          1, 8, 256, False, "local"),
    "renwuli_disable_te_qwen1.5/tune_qwen1.5_7b.sh": _e(32, 4096, 32, None, 11008, 151936, None, 0, False, 2048, 1, 1,
                                                         1, 8, 256, False, "local"),
    "renwuli_disable_te_qwen1.5/train_qwen1.5_14b.sh": _e(40, 5120, 40, None, 13696, 151936, None, 0, False, 2048, 1, 1,
                                                           1, 4, 256, False, "local"),
    "renwuli_disable_te_qwen1.5/tune_qwen1.5_14b.sh": _e(40, 5120, 40, None, 13696, 151936, None, 0, False, 2048, 1, 1,
                                                          1, 4, 256, False, "local"),
    # read13: the fork's --tokenizer-type QWenTokenizer --vocab-file qwen.tiktoken is 151643 BPE ranks + 208 special
    # tokens = 151851 (megatron/tokenizer/qwen_tokenizer.py; was refused); Qwen 7B / 14B / 72B blocks, TP / PP / MBS /
    # GBS defaults
    "renwuli_disable_te_qwen/train_qwen_7b.sh": _e(32, 4096, 32, None, 11008, 151851, None, 0, False, 2048, 1, 1, 1, 8,
                                                    256, False, "local"),
    "renwuli_disable_te_qwen/train_qewn_14b.sh": _e(40, 5120, 40, None, 13696, 151851, None, 0, False, 2048, 1, 1, 1, 4,
                                                     256, False, "local"),
    "renwuli_disable_te_qwen/train_qwen_72b.sh": _e(80, 8192, 64, None, 24576, 151851, None, 0, False, 2048, 2, 4, 1, 1,
                                                     256, False, "local"),
    "yushengsu-dev-databricks/basetrain70b.sh": _e(80, 8192, 64, 8, 28672, 32000, None, 0, False, 4096, 8, 1, 1, 2, 8,
                                                   False, "auto"),
    "yushengsu-dev-databricks/train70b_throughput.sh": _e(80, 8192, 64, 8, 28672, 32000, None, 0, False, 4096, 8, 1, 1, 2,
                                                          8, False, "auto"),
}

MLM08_SCRIPT = "tests/functional_tests/test_scripts/gpt3/pretrain_gpt3_distributed_test.sh"
MLM08_RUNS = {  # MR-gpt.yaml products (USE_TE / USE_FP8 / MOE_GROUPED_GEMM pick bf16 / fp8; fp16 otherwise)
    "te_8experts2parallel_groupedGEMM": (
        ["NUM_NODES=1", "TP_SIZE=2", "PP_SIZE=1", "EP_SIZE=2", "USE_TE=1", "USE_CORE=1", "MAX_STEPS=50", "MBS=4", "GBS=32",
         "MOE_GROUPED_GEMM=1", "CHECKPOINT_RESUME_TEST=0",
         "ADDITIONAL_PARAMS=--moe-grouped-gemm --disable-bias-linear --sequence-parallel --num-experts 8 "
         "--use-distributed-optimizer --moe-router-load-balancing-type sinkhorn --moe-router-topk 1 --overlap-grad-reduce"],
        dict(num_layers=12, hidden_size=512, num_experts=8, tp=2, ep=2, micro_batch_size=4, global_batch_size=32,
             precision="bf16", sequence_parallel=True)),
    "dist_optimizer_overlap_grad_reduce_untied (legacy, vp)": (
        ["NUM_NODES=1", "TP_SIZE=1", "PP_SIZE=4", "VP_SIZE=1", "USE_CORE=0", "MAX_STEPS=50",
         "ADDITIONAL_PARAMS=--use-distributed-optimizer --overlap-grad-reduce --untie-embeddings-and-output-weights"],
        dict(num_layers=12, pp=4, vpp=3, precision="fp16", untie_embeddings_and_output_weights=True,
             micro_batch_size=4, global_batch_size=32)),
    "fp8 uniform full recompute": (
        ["NUM_NODES=1", "TP_SIZE=1", "PP_SIZE=1", "USE_CORE=1", "USE_FP8=1", "MAX_STEPS=50",
         "ADDITIONAL_PARAMS=--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"],
        dict(precision="fp8", tp=1, pp=1, granularity="full")),
}


def _archive(repo: Path, rev: str, dst: Path, *paths: str) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    data = subprocess.run(["git", "--git-dir", str(repo), "archive", rev, *paths], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dst)], input=data, check=True)


def _run(wt: Path, cwd: Path, recipe: str, args: list[str], cluster: list[str]) -> tuple[int, str, str]:
    cmd = [sys.executable, "-m", "primus_launch", "--project", recipe, "--dry-run", "--json", *cluster]
    if args:
        cmd += ["--", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(wt)})
    return r.returncode, r.stdout, r.stderr


def _fields(plan: dict) -> dict:
    m, p, t = plan["model"], plan["parallel"], plan["training"]
    out = {**plan.get("cluster", {}), **m, **p, **t}
    out["granularity"] = t["recompute"]["granularity"]
    out["tp_comm_overlap"] = bool(t.get("tp_comm_overlap"))
    out["legacy_model"] = any(u["flag"] == "training program" and "legacy" in u["effect"]
                              for u in plan.get("source", {}).get("unmodelled", []))
    return out


def _classify(rc: int, out: str, err: str, want) -> tuple[str, str]:
    errors = [ln for ln in err.splitlines() if ln.startswith("primus-launch: error:")]
    if rc == 2 and len(errors) == 1 and "Traceback" not in err:
        if isinstance(want, str) and want.startswith("refuse:") and want[7:] not in errors[0]:
            return "refused", "(another reason than expected) " + errors[0][22:]
        return "refused", errors[0][22:]
    if rc != 0:
        return "TRACEBACK", (err.strip().splitlines() or ["exit %d" % rc])[-1]
    if isinstance(want, str):
        return "WRONG", f"read as a GPT decoder (expected {want})"
    got = _fields(json.loads(out)["plan"])
    bad = [f"{k}={got.get(k)!r} (recipe: {v!r})" for k, v in want.items() if got.get(k) != v]
    return ("WRONG", "; ".join(bad)) if bad else ("right", "")


def pai(wt: Path, tmp: Path) -> list[tuple[str, str, str]]:
    _archive(PAI, "HEAD", tmp / "pai", "examples")
    ex = tmp / "pai" / "examples"
    inv: dict[str, list[str]] = {}
    for md in sorted(ex.glob("*/README*.md")):
        for m in re.finditer(r"(?:^|\n)\s*(?:ba)?sh\s+(run_mcore_\S+\.sh)\s*\\\n((?:[^\n]*\\\n)*[^\n]*)", md.read_text()):
            key = str(md.parent.relative_to(ex) / m.group(1))
            words = [w for w in re.sub(r"\\\n", " ", m.group(2)).split() if w != "\\"]
            if words and not words[0].startswith("`"):
                inv.setdefault(key, words)
    inv["deepseek_v3/run_mcore_deepseek_lite.sh"] = []
    out = []
    for key, want in PAI_EXPECT.items():
        env, drop, nodes = PAI_SETUP.get(key, ({}, None, 1))
        args = list(inv.get(key, []))
        if drop is not None:
            del args[drop]
        wrap = ex / f"audit_{key.replace('/', '_')}"
        wrap.write_text("#!/bin/bash\n" + "".join(f"export {k}={v}\n" for k, v in env.items())
                        + f"sh {key} {' '.join(args)}\n")
        rc, so, se = _run(wt, ex, wrap.name, [], ["--gpu", "h100-sxm", "--nodes", str(nodes), "--gpus-per-node", "8"])
        out.append((key, *_classify(rc, so, se, want)))
    return out


def pai0(wt: Path, tmp: Path) -> list[tuple[str, str, str]]:
    """Pai's older ``run_{pretrain,finetune}_{mcore,megatron}_*.sh`` (``PAI0_EXPECT``), each run with its README
    invocation through a one-line wrapper."""
    _archive(PAI, "HEAD", tmp / "pai0", "examples")
    ex = tmp / "pai0" / "examples"
    inv: dict[str, list[str]] = {}
    for md in sorted(ex.glob("*/README*.md")):
        pat = r"(?:^|\n)\s*(?:ba)?sh\s+(run_(?:pretrain|finetune)_(?:mcore|megatron)_\S+\.sh)\s*\\\n((?:[^\n]*\\\n)*[^\n]*)"
        for m in re.finditer(pat, md.read_text()):
            words = [w for w in re.sub(r"\\\n", " ", m.group(2)).split() if w != "\\"]
            inv.setdefault(str(md.parent.relative_to(ex) / m.group(1)), words)
    out = []
    for key, want in PAI0_EXPECT.items():
        wrap = ex / f"audit_{key.replace('/', '_')}"
        wrap.write_text(f"#!/bin/bash\nsh {key} {' '.join(inv.get(key, []))}\n")
        rc, so, se = _run(wt, ex, wrap.name, [], ["--gpu", "h100-sxm", "--nodes", "1", "--gpus-per-node", "8"])
        out.append((key, *_classify(rc, so, se, want)))
    return out


def rocm(wt: Path, tmp: Path) -> list[tuple[str, str, str]]:
    out = []
    for b in ROCM_BRANCHES:
        d = tmp / "rocm" / b.replace("/", "_")
        d.mkdir(parents=True, exist_ok=True)
        names = subprocess.run(["git", "--git-dir", str(ROCM), "ls-tree", "--name-only", b], check=True,
                               capture_output=True, text=True).stdout.split()
        for n in names:
            if re.fullmatch(r"(train|tune|basetrain|run)[^/]*\.sh", n):
                (d / n).write_bytes(subprocess.run(["git", "--git-dir", str(ROCM), "show", f"{b}:{n}"], check=True,
                                                   capture_output=True).stdout)
        for f in sorted(d.glob("*.sh")):
            key = f"{d.name}/{f.name}"
            rc, so, se = _run(wt, d.parent, key, [], ["--gpu", "mi300x", "--nodes", "2", "--gpus-per-node", "8"])
            want = ROCM_EXPECT.get(key)
            if want is None and rc == 0:
                out.append((key, "read (not checked)", ""))
                continue
            out.append((key, *_classify(rc, so, se, want or {})))
    return out


def mlm08(wt: Path, tmp: Path) -> list[tuple[str, str, str]]:
    _archive(MLM, "refs/tags/core_r0.8.0", tmp / "mlm08", "tests/functional_tests")
    out = []
    for name, (args, want) in MLM08_RUNS.items():
        rc, so, se = _run(wt, tmp / "mlm08", MLM08_SCRIPT, args, [])
        out.append((name, *_classify(rc, so, se, want)))
    return out


MLM_TAGS = ("core_r0.8.0", "core_r0.9.0", "core_r0.10.0", "core_r0.11.0")
MLMEX = {  # examples at older release tags, with the positional arguments their headers name and a cluster that fits
    "gpt3/train_gpt3_175b_distributed.sh": (["ckpt", "tb", "gpt2-vocab.json", "gpt2-merges.txt", "data"], 16,
                                            _e(96, 12288, 96, None, 49152, 50257, None, 0, False, 2048, 8, 16, 1, 1,
                                               1536, False, "auto")),
    "mixtral/train_mixtral_8x7b_distributed.sh": (["ckpt", "mistralai/Mixtral-8x7B-v0.1", "data"], 4,
                                                  _e(32, 4096, 32, 8, 14336, 32000, 8, 0, False, 4096, 1, 4, 8, 1, 256,
                                                     False, "auto")),
    # tokenizer_type GPTSentencePieceTokenizer, tokenizer_model null: the vocabulary is not stated
    "gpt3/gpt_config.yaml": ([], 1, "refuse:--tokenizer-type"),
}


def mlmex(wt: Path, tmp: Path) -> list[tuple[str, str, str]]:
    out = []
    for tag in MLM_TAGS:
        _archive(MLM, f"refs/tags/{tag}", tmp / "mlmex" / tag, "examples/gpt3", "examples/mixtral")
        for rel, (args, nodes, want) in MLMEX.items():
            rc, so, se = _run(wt, tmp / "mlmex" / tag, f"examples/{rel}", args, ["--nodes", str(nodes)])
            out.append((f"{tag}/{rel}", *_classify(rc, so, se, want)))
    return out


def nemo(wt: Path, tmp: Path) -> list[tuple[str, str, str]]:
    _archive(NEMO, "HEAD", tmp / "nemo", "launcher_scripts/conf/training")
    root = tmp / "nemo" / "launcher_scripts" / "conf" / "training"
    out = []
    for f in sorted(root.rglob("*.yaml")):
        text = f.read_text(errors="replace")
        if not re.search(r"^trainer:", text, re.M) or not re.search(r"^model:", text, re.M):
            continue  # sub-configs (tp_overlap, nerf model parts): not training configs
        rc, so, se = _run(wt, root, str(f.relative_to(root)), [], [])
        if rc == 0:
            out.append((str(f.relative_to(root)), "WRONG", "a NeMo 1.0 config read as Megatron-LM arguments"))
            continue
        cls, why = _classify(rc, so, se, {})
        out.append((str(f.relative_to(root)), cls, why))
    return out


BRIDGE = MIRRORS / "NVIDIA-NeMo+Megatron-Bridge" / "repo"
PRIMUS = MIRRORS / "AMD-AGI+Primus" / "repo"
TITAN = MIRRORS / "pytorch+torchtitan" / "repo"
_Q30 = "examples/megatron/configs/MI355X/qwen3_30B_A3B-FP8-pretrain.yaml"
_MLM_FT = "tests/functional_tests/test_cases"
# name: (tree, command words after -- (or [file, --, args...] with file first), cluster flags, expectation)
LAUNCH = {
    "primus-cli direct qwen3_30B_A3B-FP8": (
        "primus", ["./primus-cli", "direct", "--", "train", "pretrain", "--config", _Q30],
        [], dict(num_layers=48, num_experts=128, moe_router_topk=8, moe_ffn_hidden_size=768, tp=1, pp=1, ep=8,
                 micro_batch_size=6, global_batch_size=48, precision="fp8", fp8_recipe="delayed",
                 moe_token_dispatcher="deepep", moe_expert_gemm="legacy", granularity="full", num_nodes=1)),
    "primus-cli slurm -N 4 qwen3_235B_A22B-FP8": (
        "primus", ["./primus-cli", "slurm", "srun", "-N", "4", "--", "train", "pretrain", "--config",
                   "examples/megatron/configs/MI355X/qwen3_235B_A22B-FP8-pretrain.yaml"],
        [], dict(num_layers=94, num_experts=128, moe_router_topk=8, pp=4, vpp=4, ep=8, micro_batch_size=4,
                 global_batch_size=8192, num_nodes=4, gpus_per_node=8, precision="fp8")),
    "EXP=gpt_oss_20B-FP8-mlperf run_pretrain.sh --micro_batch_size 1": (
        "primus", ["env", "EXP=examples/megatron/configs/MI355X/gpt_oss_20B-FP8-mlperf-pretrain.yaml", "bash",
                   "examples/run_pretrain.sh", "--micro_batch_size", "1"],
        [], dict(num_layers=24, num_experts=32, moe_router_topk=4, window_size=128, micro_batch_size=1,
                 global_batch_size=16, precision="fp8", fp8_recipe="tensorwise", ep=8, moe_expert_gemm="turbo")),
    "primus-cli torchtitan deepseek_v3_16b-FP8 local_batch_size 4": (
        "primus", ["./primus-cli", "direct", "--", "train", "pretrain", "--config",
                   "examples/torchtitan/configs/MI355X/deepseek_v3_16b-FP8-pretrain.yaml",
                   "--training.local_batch_size", "4"],
        [], dict(num_layers=27, num_experts=64, moe_router_topk=6, moe_shared_expert_intermediate_size=2816, ep=8,
                 micro_batch_size=4, precision="fp8", fp8_recipe="tensorwise")),
    "primus-cli deepseek_v4_flash-FP8": (
        "primus", ["./primus-cli", "direct", "--", "train", "pretrain", "--config",
                   "examples/megatron/configs/MI355X/deepseek_v4_flash-FP8-pretrain.yaml"], [], "refuse:DeepSeek-V4"),
    # torchtitan main README / run_train.sh: NGPU 8, MODULE llama3, CONFIG llama3_debugmodel by default, "$@" last
    "MODULE=llama3 CONFIG=llama3_8b run_train.sh": (
        "titan", ["MODULE=llama3", "CONFIG=llama3_8b", "./run_train.sh"],
        [], dict(num_layers=32, hidden_size=4096, seq_length=8192, tp=1, micro_batch_size=1, gpus_per_node=8)),
    "run_train.sh --parallelism.tensor_parallel_degree 2": (
        "titan", ["./run_train.sh", "--parallelism.tensor_parallel_degree", "2"],
        [], dict(num_layers=6, tp=2, gpus_per_node=8)),
    "MODULE=deepseek_v3 CONFIG=deepseek_v3_16b run_train.sh EP 8": (
        "titan", ["NGPU=8", "MODULE=deepseek_v3", "CONFIG=deepseek_v3_16b", "./run_train.sh",
                  "--parallelism.expert_parallel_degree", "8"],
        [], dict(num_layers=27, num_experts=64, moe_router_topk=6, ep=8)),
    # torchtitan's trainer raises: CUDA graphs (on by default) under EP need HybridEP / MinimalAsyncEP
    "MODULE=qwen3 CONFIG=qwen3_30b_a3b run_train.sh EP 4": (
        "titan", ["MODULE=qwen3", "CONFIG=qwen3_30b_a3b", "./run_train.sh", "--parallelism.expert_parallel_degree",
                  "4"], [], "refuse:disable_cuda_graphs"),
    "MODULE=qwen3 CONFIG=qwen3_30b_a3b run_train.sh EP 4, no CUDA graphs": (
        "titan", ["MODULE=qwen3", "CONFIG=qwen3_30b_a3b", "./run_train.sh", "--parallelism.expert_parallel_degree",
                  "4", "--training.disable_cuda_graphs"],
        [], dict(num_layers=48, num_experts=128, moe_router_topk=8, ep=4, cuda_graph_impl="none")),
    "MODULE=llama3 CONFIG=llama3_8b_mxfp8 run_train.sh": (
        "titan", ["MODULE=llama3", "CONFIG=llama3_8b_mxfp8", "./run_train.sh"],
        [], dict(num_layers=32, precision="fp8", fp8_recipe="mxfp8")),
    "MODULE=kimi_k2_7 CONFIG=kimi_k2_5 run_train.sh": (
        "titan", ["MODULE=kimi_k2_7", "CONFIG=kimi_k2_5", "./run_train.sh"], [], "refuse:multimodal"),
    "MODULE=graph_trainer.llama3 run_train.sh": (
        "titan", ["MODULE=graph_trainer.llama3", "CONFIG=graph_trainer_llama3_8b", "./run_train.sh"], [],
        "refuse:--module"),
    # Megatron-LM: examples with their header's positional arguments; functional tests as files
    "examples/llama/train_llama3_8b_h100_fp8.sh ckpt tb MOCK": (
        "mlm", ["bash", "examples/llama/train_llama3_8b_h100_fp8.sh", "ckpt", "tb", "MOCK"],
        [], dict(num_layers=32, seq_length=8192, micro_batch_size=1, global_batch_size=128, precision="fp8",
                 fp8_param_gather=True, grad_reduce_in_fp32=False, gpus_per_node=8)),
    # main's example passes --global-batch-size with --step-batch-size-schedule: validate_args raises (d98e8a6)
    "examples/gpt3/train_gpt3_175b_distributed.sh ARGS": (
        "mlm", ["bash", "examples/gpt3/train_gpt3_175b_distributed.sh", "ckpt", "tb", "vocab.json", "merges.txt",
                "data"], ["--nodes", "16"], "refuse:--step-batch-size-schedule"),
    "examples/gptoss/02_train.sh (PP = 8 GPUs, 12 layers)": (
        "mlm", ["bash", "examples/gptoss/02_train.sh"], [], "refuse:--pipeline-model-parallel-size"),
    "examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh": (
        "mlm", ["bash", "examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh"],
        [], dict(num_layers=32, dp_sharding="full", precision="fp8", fp8_param_gather=True)),
    "functional test gpt3_mcore_reruns_resume_check_grads": (
        "mlm", [f"{_MLM_FT}/gpt/gpt3_mcore_reruns_resume_check_grads/model_config.yaml"],
        [], dict(num_layers=32, gpus_per_node=1, num_nodes=1, micro_batch_size=2, global_batch_size=2)),
    "functional test deepseekv3_proxy_flex gb200 release": (
        "mlm", [f"{_MLM_FT}/mixtral/deepseekv3_proxy_flex_tp2pp2emp16etp1cp1_gb_200_release/model_config.yaml"],
        ["--gpu", "gb200", "--nodes", "8", "--gpus-per-node", "4"],
        dict(num_layers=14, num_experts=64, moe_router_topk=8, moe_shared_expert_intermediate_size=2048,
             mtp_num_layers=1, tp=2, pp=2, ep=8, etp=1, moe_token_dispatcher="hybridep", multi_latent_attention=True)),
    # Megatron-Bridge: recipes built in Python (scripts/training/train.sh -> setup_experiment.py), override YAMLs
    "bridge scripts/training/train.sh --recipe qwen3_30b_a3b_pretrain_config": (
        "bridge", ["./scripts/training/train.sh", "--nodes", "2", "--gpus-per-node", "8", "--recipe",
                   "qwen3_30b_a3b_pretrain_config", "--mode", "pretrain"], [], "refuse:--num-layers"),
    "bridge quantized_llama3_8b_pretrain_override_example.yaml": (
        "bridge", ["examples/quantization/conf/quantized_llama3_8b_pretrain_override_example.yaml"], [],
        "refuse:overrides a recipe"),
}
_LAUNCH_TREES = {"primus": (PRIMUS, ("examples", "primus/configs")), "titan": (TITAN, ("run_train.sh",)),
                 "mlm": (MLM, ("examples", "tests/functional_tests/test_cases")),
                 "bridge": (BRIDGE, ("examples/quantization", "scripts/training"))}


def launch(wt: Path, tmp: Path) -> list[tuple[str, str, str]]:
    for name, (repo, paths) in _LAUNCH_TREES.items():
        _archive(repo, "HEAD", tmp / "launch" / name, *paths)
    out = []
    for key, (tree, words, cluster, want) in LAUNCH.items():
        cwd = tmp / "launch" / tree
        if words[0].endswith((".yaml", ".yml")):  # a recipe file
            rc, so, se = _run(wt, cwd, words[0], [], cluster)
        else:  # the command form: primus-launch --project -- CMD
            cmd = [sys.executable, "-m", "primus_launch", "--project", "--dry-run", "--json", *cluster, "--", *words]
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600,
                               env={**os.environ, "PYTHONPATH": str(wt)})
            rc, so, se = r.returncode, r.stdout, r.stderr
        out.append((key, *_classify(rc, so, se, want)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wt", default=str(ROOT), help="checkout whose primus_launch runs (default: this one)")
    ap.add_argument("--only", choices=["pai", "pai0", "rocm", "mlm08", "mlmex", "nemo", "launch"], action="append")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    wt = Path(args.wt).resolve()
    with tempfile.TemporaryDirectory(prefix="audit-") as td:
        for name, fn in (("pai", pai), ("pai0", pai0), ("rocm", rocm), ("mlm08", mlm08), ("mlmex", mlmex), ("nemo", nemo),
                         ("launch", launch)):
            if args.only and name not in args.only:
                continue
            rows = fn(wt, Path(td))
            counts = collections.Counter(c for _, c, _ in rows)
            print(f"{name}: {len(rows)} recipes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
            for key, cls, why in rows:
                if args.verbose or cls in ("WRONG", "TRACEBACK"):
                    print(f"  {cls:9s} {key}: {why[:200]}")


if __name__ == "__main__":
    main()
