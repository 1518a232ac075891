"""Field-by-field reading audit (the eleventh round, read11): the fields that change time or memory, read from each
recipe by a second, independent reader (this file: plain ``yaml.safe_load`` of the recipe and of the presets it
names, Megatron-LM's argument semantics applied by hand) and compared with the plan primus-launch makes.

    python scripts/audit_recipe_fields.py                 # both corpora, this checkout
    python scripts/audit_recipe_fields.py --wt OTHER      # another checkout (e.g. main before a change)
    python scripts/audit_recipe_fields.py -v              # every refusal too

Corpora (local mirrors, fetched with the session's ``fetch`` tool; ``git archive`` into a temporary folder):

- ``mlm-ft``: Megatron-LM main (d98e8a6, 2026-08-22) ``tests/functional_tests/test_cases/**/model_config.yaml``
  (GPT / MoE families; hybrid, BERT/T5, multimodal, inference, RL, NeMo-launcher cases left out), run on the
  cluster they state, else 1 x 8, else the smallest of 2 / 4 / 8 / 16 nodes of 8 that reads.  Fields: TP, PP, VPP
  (``--num-virtual-stages-per-pipeline-rank`` or layers per virtual stage), CP, EP, ETP, micro / global batch,
  layers, hidden, sequence, experts, top-k, shared expert, recompute (granularity, modules, layers), precision and
  FP8 recipe, CUDA graphs (impl, scope / modules), MoE dispatcher (``flex`` -> its backend), grad-reduce overlap,
  TP comm overlap.
- ``primus-meg``: Primus (fd1eeab) ``examples/megatron/configs/*/*.yaml`` pretraining experiments (SFT, LoRA, Mamba /
  hybrid, LFM, diffusion left out), resolved here as Primus merges them (``primus/configs/modules/megatron/<config>``
  and ``models/megatron/<model>`` with their ``extends:`` chains, then ``overrides``; ``${VAR:default}`` -> default).
  Fields as above plus MTP layers, Primus-Turbo DeepEP (``use_turbo_deepep`` / sync-free stage >= 2 -> deepep),
  sequence parallel, and the precision-aware optimizer's dtypes.

A recipe is ``right`` (every field equal), ``DIFF`` (a field differs: printed), or ``refused`` (one line).
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

import yaml

ROOT = Path(__file__).resolve().parents[1]
MLM = Path("/work/.mirror/NVIDIA+Megatron-LM/repo")
PRIMUS = Path("/work/.mirror/AMD-AGI+Primus/repo")
SKIP_FT = re.compile(r"mamba|hybrid|bert|t5|multimodal|inference|mimo|/rl|gpt-nemo|ckpt_converter|nemotron")
SKIP_PRIMUS = re.compile(r"sft|lora|mamba|zebra|lfm|flux|diffusion")


def _plan(wt: Path, recipe: Path, extra: list[str]) -> tuple[int, dict | str]:
    # run from the recipe's folder: `python -m` puts the working folder first on sys.path, so running from a
    # checkout would import that checkout's primus_launch instead of --wt's
    r = subprocess.run([sys.executable, "-m", "primus_launch", "--project", str(recipe), "--dry-run", "--json", *extra],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(wt)},
                       cwd=recipe.parent)
    if r.returncode:
        return r.returncode, (r.stderr.strip().splitlines() or ["?"])[-1]
    return 0, json.loads(r.stdout)["plan"]


def _true(v) -> bool:
    return v is True or str(v).lower() == "true"


def _words(v) -> list[str]:
    if isinstance(v, list):
        return [str(x) for x in v]
    return [x for x in re.split(r"[ ,]+", str(v).strip().strip('"').strip("[]")) if x]


def _got(plan: dict, keys) -> dict:
    m, p, t = plan["model"], plan["parallel"], plan["training"]
    out = {}
    for k in keys:
        if k.startswith("recompute."):
            out[k] = t["recompute"][k.split(".")[1]]
        else:
            out[k] = next((d[k] for d in (p, m, t, plan["cluster"]) if k in d), None)
        if k in ("recompute.modules", "cuda_graph_scope") and out[k] is not None:
            out[k] = sorted(out[k])
    return out


def _common(g, tp_key, pp_key, cp_key, ep_key, etp_key) -> dict:
    """The fields both corpora share, from a getter of argument values (``g(name, default)``)."""
    e: dict = {"tp": int(g(tp_key, 1) or 1), "pp": int(g(pp_key, 1) or 1), "cp": int(g(cp_key, 1) or 1),
               "ep": int(g(ep_key, 1) or 1)}
    if g(etp_key) is not None:
        e["etp"] = int(g(etp_key))
    return e


def mlm_ft(wt: Path, tmp: Path) -> list[tuple[str, str, str]]:
    subprocess.run(f"git --git-dir {MLM} archive HEAD tests/functional_tests/test_cases | tar -x -C {tmp}", shell=True,
                   check=True)
    rows = []
    for f in sorted((tmp / "tests/functional_tests/test_cases").rglob("model_config.yaml")):
        name = str(f.relative_to(tmp / "tests/functional_tests/test_cases"))
        if SKIP_FT.search(name):
            continue
        a = (yaml.safe_load(f.read_text()) or {}).get("MODEL_ARGS") or {}
        g = a.get
        for extra in ([], ["--nodes", "2"], ["--nodes", "4"], ["--nodes", "8"], ["--nodes", "16"]):
            rc, plan = _plan(wt, f, extra)
            if rc == 0:
                break
        if rc:
            rows.append((name, "refused", str(plan)))
            continue
        e = _common(g, "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
                    "--expert-model-parallel-size", "--expert-tensor-parallel-size")
        e["micro_batch_size"] = int(g("--micro-batch-size", 1))
        for k, flag in (("global_batch_size", "--global-batch-size"), ("num_layers", "--num-layers"),
                        ("hidden_size", "--hidden-size"), ("seq_length", "--seq-length"),
                        ("num_experts", "--num-experts"), ("moe_router_topk", "--moe-router-topk"),
                        ("moe_shared_expert_intermediate_size", "--moe-shared-expert-intermediate-size")):
            if g(flag) is not None:
                e[k] = int(g(flag))
        rg = g("--recompute-granularity")
        e["recompute.granularity"] = rg or "none"
        if rg == "selective" and g("--recompute-modules"):
            e["recompute.modules"] = sorted(_words(g("--recompute-modules")))
        if rg == "full" and g("--recompute-num-layers"):
            e["recompute.num_layers"] = int(g("--recompute-num-layers"))
        fmt, fp4 = g("--fp8-format"), g("--fp4-format")
        e["precision"] = "fp4" if fp4 else "fp8" if fmt else "fp16" if _true(g("--fp16")) else "bf16"
        if fmt and g("--fp8-recipe"):
            e["fp8_recipe"] = g("--fp8-recipe")
        ci = g("--cuda-graph-impl") or ("local" if _true(g("--enable-cuda-graph")) else
                                        "transformer_engine" if _true(g("--external-cuda-graph")) else "none")
        e["cuda_graph_impl"] = ci
        scope = g("--cuda-graph-scope") or g("--cuda-graph-modules")
        if scope and ci != "none":
            e["cuda_graph_scope"] = sorted(_words(scope))
        d = g("--moe-token-dispatcher-type")
        if d and g("--num-experts"):
            e["moe_token_dispatcher"] = "deepep" if _true(g("--moe-enable-deepep")) else \
                (g("--moe-flex-dispatcher-backend", "deepep") if d == "flex" else d)
        e["overlap_grad_reduce"] = _true(g("--overlap-grad-reduce"))
        e["tp_comm_overlap"] = _true(g("--tp-comm-overlap"))
        if g("--num-virtual-stages-per-pipeline-rank"):
            e["vpp"] = int(g("--num-virtual-stages-per-pipeline-rank"))
        elif g("--num-layers-per-virtual-pipeline-stage") and g("--num-layers"):
            e["vpp"] = int(g("--num-layers")) // e["pp"] // int(g("--num-layers-per-virtual-pipeline-stage"))
        got = _got(plan, e)
        diff = {k: (v, got[k]) for k, v in e.items() if v != got[k]}
        rows.append((name, "DIFF", str(diff)) if diff else (name, "right", ""))
    return rows


def _env_default(v):
    if isinstance(v, str):
        m = re.fullmatch(r"\$\{[A-Za-z_0-9]+:(.*)\}", v.strip())
        if m:
            try:
                return yaml.safe_load(m.group(1))
            except yaml.YAMLError:
                return m.group(1)
    return v


def _preset(p: Path) -> dict:
    d = yaml.safe_load(p.read_text()) or {}
    out: dict = {}
    for base in d.get("extends", []) or []:
        out.update(_preset(p.parent / base))
    out.update({k: _env_default(v) for k, v in d.items() if k != "extends"})
    return out


def primus_meg(wt: Path, tmp: Path) -> list[tuple[str, str, str]]:
    subprocess.run(f"git --git-dir {PRIMUS} archive HEAD examples/megatron/configs primus/configs | tar -x -C {tmp}",
                   shell=True, check=True)
    rows = []
    for f in sorted((tmp / "examples/megatron/configs").glob("*/*.yaml")):
        name = str(f.relative_to(tmp / "examples/megatron/configs"))
        if SKIP_PRIMUS.search(name):
            continue
        pt = ((yaml.safe_load(f.read_text()) or {}).get("modules") or {}).get("pre_trainer") or {}
        model = tmp / "primus/configs/models/megatron" / str(_env_default(pt.get("model", "")))
        if pt.get("framework") != "megatron" or not model.is_file():
            continue
        cfg = _preset(tmp / "primus/configs/modules/megatron" / pt.get("config", "pre_trainer.yaml"))
        cfg.update(_preset(model))
        cfg.update({k: _env_default(v) for k, v in (pt.get("overrides") or {}).items()})
        rc, plan = _plan(wt, f, [])
        if rc:
            rows.append((name, "refused", str(plan)))
            continue
        g = cfg.get
        e = _common(g, "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                    "expert_model_parallel_size", "expert_tensor_parallel_size")
        e.update(micro_batch_size=int(g("micro_batch_size") or 1), global_batch_size=int(g("global_batch_size") or 1),
                 num_layers=g("num_layers"), hidden_size=g("hidden_size"), seq_length=g("seq_length"))
        if g("num_experts"):
            e.update(num_experts=g("num_experts"), moe_router_topk=g("moe_router_topk"))
            if g("moe_shared_expert_intermediate_size"):
                e["moe_shared_expert_intermediate_size"] = g("moe_shared_expert_intermediate_size")
            dsp = g("moe_token_dispatcher_type") or "allgather"
            dsp = (g("moe_flex_dispatcher_backend") or "deepep") if dsp == "flex" else dsp
            turbo = _true(g("enable_primus_turbo"))
            if _true(g("moe_enable_deepep")) or (turbo and (_true(g("use_turbo_deepep"))
                                                             or int(g("turbo_sync_free_moe_stage") or 0) >= 2)):
                dsp = "deepep"
            e["moe_token_dispatcher"] = dsp
        if g("mtp_num_layers"):
            e["mtp_num_layers"] = g("mtp_num_layers")
        rg = g("recompute_granularity")
        e["recompute.granularity"] = rg or "none"
        if rg == "full" and g("recompute_num_layers") is not None:
            e["recompute.num_layers"] = int(g("recompute_num_layers"))
            e["recompute.method"] = g("recompute_method") or "uniform"
        if rg == "selective" and g("recompute_modules"):
            e["recompute.modules"] = sorted(_words(g("recompute_modules")))
        fp4, fp8 = g("fp4"), g("fp8")
        e["precision"] = "fp4" if fp4 else "fp8" if fp8 else "fp16" if _true(g("fp16")) else "bf16"
        if fp8 and not fp4:
            e["fp8_recipe"] = g("fp8_recipe") or "delayed"
        if g("virtual_pipeline_model_parallel_size") or g("num_virtual_stages_per_pipeline_rank"):
            e["vpp"] = int(g("virtual_pipeline_model_parallel_size") or g("num_virtual_stages_per_pipeline_rank"))
        elif g("num_layers_per_virtual_pipeline_stage"):
            e["vpp"] = int(g("num_layers")) // e["pp"] // int(g("num_layers_per_virtual_pipeline_stage"))
        elif not g("pipeline_model_parallel_layout"):
            e["vpp"] = 1
        e["cuda_graph_impl"] = g("cuda_graph_impl") or ("local" if _true(g("enable_cuda_graph")) else
                                                        "transformer_engine" if _true(g("external_cuda_graph"))
                                                        else "none")
        e["overlap_grad_reduce"] = _true(g("overlap_grad_reduce"))
        e["sequence_parallel"] = _true(g("sequence_parallel")) and e["tp"] > 1
        if _true(g("use_precision_aware_optimizer")):
            e.update({k: g(k) for k in ("main_grads_dtype", "exp_avg_dtype", "exp_avg_sq_dtype") if g(k)})
        got = _got(plan, e)
        diff = {k: (v, got[k]) for k, v in e.items() if v is not None and v != got[k]}
        rows.append((name, "DIFF", str(diff)) if diff else (name, "right", ""))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wt", default=str(ROOT), help="checkout whose primus_launch runs (default: this one)")
    ap.add_argument("--only", choices=["mlm-ft", "primus-meg"], action="append")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    wt = Path(args.wt).resolve()
    for name, fn in (("mlm-ft", mlm_ft), ("primus-meg", primus_meg)):
        if args.only and name not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix="fields-") as td:
            rows = fn(wt, Path(td))
        counts = collections.Counter(c for _, c, _ in rows)
        print(f"{name}: {len(rows)} recipes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for key, cls, why in rows:
            if args.verbose or cls == "DIFF":
                print(f"  {cls:7s} {key}: {why[:220]}")


if __name__ == "__main__":
    main()
