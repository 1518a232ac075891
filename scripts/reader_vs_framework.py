"""Probe: the plan a reader makes against the configuration the framework's own config parser builds.

Two sources (read14), each field that changes time or memory compared one by one:

- ``--primus DIR``: every Primus experiment YAML under ``DIR/examples/{megatron,torchtitan}/configs``, merged by
  Primus's own ``primus.core.launcher.parser.PrimusParser`` (presets, ``overrides``, ``${VAR:default}``; run
  from ``DIR``, a ``git archive HEAD primus examples`` of AMD-AGI/Primus) against ``load_primus_yaml``.
  Megatron trainers: layers, hidden, FFN, heads, query groups, experts / top-k / expert FFN / shared expert,
  dispatcher (``use_turbo_deepep`` -> deepep), grouped GEMM, sequence, SwiGLU, untied embeddings, norm, QK
  norm, MLA ranks, MTP, TP / PP / VPP (``num_virtual_stages_per_pipeline_rank``, a layout's stages) / CP / EP /
  ETP / SP, micro / global batch, precision and FP8 recipe, recompute granularity / method / layers,
  distributed optimizer / FSDP, overlap of grad reduce / param gather, CPU offloading, CUDA graphs, TP comm
  overlap, optimizer.  TorchTitan trainers: degrees, sequence, batch, AC mode, compile, low precision,
  CPU offload, pipeline schedule.
- ``--titan``: every config function of the installed torchtitan 0.3.0's registry (and ``--titan-lines FILE``:
  one launch line's trainer arguments per line) parsed by torchtitan's ``ConfigManager`` against
  ``plan_from_command`` on a one-node, 8-GPU ``torchrun`` line: degrees, sequence parallel, sequence, batch,
  AC kind, compile of model / loss, CPU offload, parameter dtype, fp32 gradient reduce, CUDA graphs, layers,
  width.  The converters' GPU-capability checks are bypassed (this machine has no GPU).
- ``--titan-experiments`` (read20): every config function of torchtitan 0.3.0's integration-test recipes
  (``torchtitan_recipes.tests.*``, launched as ``MODULE=... CONFIG=... ./run_train.sh``) and of the registries
  its ConfigManager resolves beyond the snapshot (``graph_trainer.*``, ``torchft.llama3``, ``muse_glimmer``), as
  ``--titan`` compares them, each on the world its explicit degrees need.
- ``--titan-main TREE`` (read22): every config function of a torchtitan main tree (``git archive main torchtitan
  torchtitan_recipes``: model / experiment registries and ``torchtitan_recipes.tests.*``) built by that tree's own
  ``ConfigManager`` in a child process (``grain`` stood in, the converters' GPU checks bypassed) against the reader's
  plan of ``--module M --config C``: main's token budget in sequences (``num_tokens_per_microbatch_per_dp_rank /
  max_context_length``, ``num_pp_microbatches``), degrees, AC, compile, CPU offload, dtype, CUDA graphs, layers, width.
- ``--titan02 DIR``: every job TOML of a torchtitan <= 0.2 source tree (``git archive v0.2.2 torchtitan``), and
  ``--titan02-lines FILE`` (a ``--job.config_file ...`` command's trainer arguments per line), parsed by that
  tree's ``ConfigManager`` (a child process with DIR first on ``sys.path``) against ``plan_from_job_command``
  on 8 H100s: degrees, sequence, batch, AC (selective option), compile, CPU offload, low precision and FP8
  recipe, async TP.
- ``--titan-tags REPO`` (read18): every distinct job TOML blob of every ref (tags, branches, PR heads) of the
  torchtitan mirror, each parsed by the ConfigManager (or, before v0.1.0, ``JobConfig.parse_args``) of a commit
  holding it -- the fewest commits covering all blobs -- against ``load_torchtitan`` on the world its explicit
  degrees need (8 H100s where they divide it): flavor (layers / dim from that tree's registry where it imports),
  degrees, batch / sequence, AC mode / selective option, compile, float8 / MX and the float8 recipe, FSDP
  reshard, optimizer, steps.  The torchtrain trees of early 2024 have no torchtitan package (NO-FRAMEWORK).
- ``--bridge REPO`` (read18): every distinct ConfigContainer-shaped YAML (top-level ``model:`` and ``train:``) of
  every ref of the Megatron-Bridge mirror: override files (no model stated) counted, full configs read by
  ``load_bridge_yaml`` and compared with the values the file writes.

Prints one line per file (SAME / DIFF field: framework, plan / REF reason) and the counts.  Nothing upstream
is copied; Primus's code runs from DIR.

    git -C /work/.mirror/AMD-AGI+Primus/repo archive HEAD primus examples | tar -x -C /tmp/primus_src
    python scripts/reader_vs_framework.py --primus /tmp/primus_src --titan
    git -C /work/.mirror/pytorch+torchtitan/repo archive v0.2.2 torchtitan | tar -x -C /tmp/tt022
    python scripts/reader_vs_framework.py --titan02 /tmp/tt022
    python scripts/reader_vs_framework.py --titan-tags /work/.mirror/pytorch+torchtitan/repo   # ~10 min
    python scripts/reader_vs_framework.py --bridge /work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo
    git -C /work/.mirror/pytorch+torchtitan/repo archive HEAD torchtitan torchtitan_recipes | tar -x -C /tmp/tt_main
    python scripts/reader_vs_framework.py --titan-main /tmp/tt_main
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import logging
import math
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def tally(counts: collections.Counter, label: Any, diffs: dict[str, tuple[Any, Any]], show: bool = True) -> None:
    """Count one file ``same`` / ``different`` and print its line: ``DIFF label {field: [reader, framework]}``,
    or ``SAME label`` when ``show``."""
    counts["different" if diffs else "same"] += 1
    if diffs or show:
        print(("DIFF " if diffs else "SAME ") + str(label) +
              (" " + json.dumps({k: [str(a), str(b)] for k, (a, b) in diffs.items()}) if diffs else ""))


def _ns2d(x: Any) -> Any:
    if isinstance(x, SimpleNamespace):
        return {k: _ns2d(v) for k, v in vars(x).items()}
    return [_ns2d(v) for v in x] if isinstance(x, list) else x


def _int(c: dict, k: str) -> Optional[int]:
    v = c.get(k)
    return None if v is None or isinstance(v, bool) else int(v)


def megatron_diffs(c: dict, p: Any) -> dict[str, tuple[Any, Any]]:
    """Fields of a Primus-merged Megatron module config ``c`` that plan ``p`` reads otherwise."""
    m, par, t = p.model, p.parallel, p.training
    out: dict[str, tuple[Any, Any]] = {}

    def chk(name: str, want: Any, got: Any) -> None:
        if want is not None and want != got:
            out[name] = (want, got)

    for k, got in (("num_layers", m.num_layers), ("hidden_size", m.hidden_size), ("ffn_hidden_size", m.ffn_hidden_size),
                   ("num_attention_heads", m.num_attention_heads), ("seq_length", m.seq_length),
                   ("tensor_model_parallel_size", par.tp), ("pipeline_model_parallel_size", par.pp),
                   ("micro_batch_size", t.micro_batch_size), ("global_batch_size", t.global_batch_size)):
        chk(k, _int(c, k), got)
    if c.get("group_query_attention"):
        chk("num_query_groups", _int(c, "num_query_groups"), m.num_query_groups)
    chk("num_experts", _int(c, "num_experts"), m.num_experts)
    if c.get("num_experts"):
        chk("moe_router_topk", _int(c, "moe_router_topk"), m.moe_router_topk)
        chk("moe_ffn_hidden_size", _int(c, "moe_ffn_hidden_size"), m.moe_ffn_hidden_size)
        chk("moe_shared_expert_intermediate_size", _int(c, "moe_shared_expert_intermediate_size") or 0,
            m.moe_shared_expert_intermediate_size)
        # Turbo DeepEP is patched in only with enable_primus_turbo (moe_dispatcher_patches._is_turbo_deepep_can_patch)
        turbo_deepep = c.get("use_turbo_deepep") and c.get("enable_primus_turbo")
        chk("dispatcher", "deepep" if turbo_deepep else c.get("moe_token_dispatcher_type"),
            t.moe_token_dispatcher)
        chk("moe_grouped_gemm", bool(c.get("moe_grouped_gemm")), t.moe_grouped_gemm)
    chk("swiglu", bool(c.get("swiglu")), m.swiglu)
    chk("untie_embeddings", bool(c.get("untie_embeddings_and_output_weights")), m.untie_embeddings_and_output_weights)
    chk("normalization", {"RMSNorm": "rmsnorm", "LayerNorm": "layernorm"}.get(c.get("normalization")), m.normalization)
    chk("qk_layernorm", bool(c.get("qk_layernorm")), m.qk_layernorm)
    chk("multi_latent_attention", bool(c.get("multi_latent_attention")), m.multi_latent_attention)
    if c.get("multi_latent_attention"):
        chk("q_lora_rank", c.get("q_lora_rank"), m.q_lora_rank)
        chk("kv_lora_rank", _int(c, "kv_lora_rank"), m.kv_lora_rank)
    chk("mtp_num_layers", _int(c, "mtp_num_layers") or 0, m.mtp_num_layers)
    chk("context_parallel_size", _int(c, "context_parallel_size") or 1, par.cp)
    chk("expert_model_parallel_size", _int(c, "expert_model_parallel_size") or 1, par.ep)
    if c.get("expert_tensor_parallel_size") is not None:
        chk("expert_tensor_parallel_size", _int(c, "expert_tensor_parallel_size"),
            par.etp if par.etp is not None else par.tp)
    if (_int(c, "tensor_model_parallel_size") or 1) > 1:
        chk("sequence_parallel", bool(c.get("sequence_parallel")), par.sequence_parallel)
    pp = _int(c, "pipeline_model_parallel_size") or 1
    vpp = _int(c, "virtual_pipeline_model_parallel_size") or _int(c, "num_virtual_stages_per_pipeline_rank")
    if vpp is None and c.get("num_layers_per_virtual_pipeline_stage"):
        vpp = _int(c, "num_layers") // pp // _int(c, "num_layers_per_virtual_pipeline_stage")
    if vpp is None and c.get("pipeline_model_parallel_layout"):
        vpp = (_expand_layout(str(c["pipeline_model_parallel_layout"])).count("|") + 1) // pp  # stages / PP ranks
    if pp > 1:
        chk("vpp", vpp or 1, par.vpp)
    prec = ("fp4" if c.get("fp4") else "fp8" if c.get("fp8") else "bf16" if c.get("bf16") else
            "fp16" if c.get("fp16") else "fp32")
    chk("precision", prec, t.precision)
    if c.get("fp8"):
        chk("fp8_recipe", c.get("fp8_recipe"), t.fp8_recipe)
    chk("recompute_granularity", c.get("recompute_granularity"),
        t.recompute.granularity if t.recompute.granularity != "none" else None)
    if c.get("recompute_granularity") == "full":
        chk("recompute_method", c.get("recompute_method"), t.recompute.method)
        chk("recompute_num_layers", c.get("recompute_num_layers"), t.recompute.num_layers)
    chk("distributed_optimizer / FSDP", bool(c.get("use_distributed_optimizer") or c.get("use_torch_fsdp2")
                                              or c.get("use_megatron_fsdp")), par.dp_sharding != "none")
    chk("overlap_grad_reduce", bool(c.get("overlap_grad_reduce")), t.overlap_grad_reduce)
    chk("overlap_param_gather", bool(c.get("overlap_param_gather")) and bool(c.get("use_distributed_optimizer")),
        t.overlap_param_gather)
    chk("cpu_offloading", bool(c.get("cpu_offloading")), t.offload.activation_layers > 0 or t.offload.weights)
    cg = c.get("cuda_graph_impl") or ("local" if c.get("enable_cuda_graph") else
                                      "transformer_engine" if c.get("external_cuda_graph") else "none")
    chk("cuda_graph_impl", cg, t.cuda_graph_impl)
    chk("tp_comm_overlap", bool(c.get("tp_comm_overlap")), t.tp_comm_overlap)
    chk("optimizer", c.get("optimizer"), t.optimizer)
    return out


def titan_module_diffs(c: dict, p: Any) -> dict[str, tuple[Any, Any]]:
    """Fields of a Primus-merged TorchTitan module config ``c`` that plan ``p`` reads otherwise."""
    par, tr, ac, t = c.get("parallelism", {}), c.get("training", {}), c.get("activation_checkpoint", {}), p.training
    out: dict[str, tuple[Any, Any]] = {}

    def chk(name: str, want: Any, got: Any) -> None:
        if want is not None and want != got:
            out[name] = (want, got)

    for k, got in (("tensor_parallel_degree", p.parallel.tp), ("pipeline_parallel_degree", p.parallel.pp),
                   ("context_parallel_degree", p.parallel.cp), ("expert_parallel_degree", p.parallel.ep)):
        chk(k, par.get(k), got)
    chk("seq_len", tr.get("seq_len"), p.model.seq_length)
    dp = p.cluster.num_nodes * p.cluster.gpus_per_node // (p.parallel.tp * p.parallel.pp * p.parallel.cp)
    lbs, gbs = tr.get("local_batch_size", tr.get("batch_size")), tr.get("global_batch_size", -1)  # <= 0.1: batch_size
    chk("global_batch", gbs if gbs and gbs > 0 else lbs * dp, t.global_batch_size)
    chk("micro_batch", par.get("pipeline_parallel_microbatch_size") if (par.get("pipeline_parallel_degree") or 1) > 1
        else lbs, t.micro_batch_size)
    g = t.recompute.granularity
    chk("activation_checkpoint", ac.get("mode", "none"), "selective" if g in ("op", "layer") else g)
    comp = c.get("compile", {})
    chk("compile", (bool(comp.get("enable")) and "model" in comp.get("components", ["model"]))
        or bool(tr.get("compile")), t.compile)  # torchtitan <= 0.1 (Primus's older trainer): training.compile
    conv = (c.get("model", {}) or {}).get("converters") or []
    want = ("mxfp8" if any("quantize.linear.mx" in x for x in conv) else
            "fp8" if any("float8" in x for x in conv) else "bf16")
    chk("precision", want, "mxfp8" if t.fp8_recipe == "mxfp8" else t.precision)
    chk("enable_cpu_offload", bool(tr.get("enable_cpu_offload")),
        t.offload.optimizer_fraction > 0 or t.offload.weights)
    return out


def _expand_layout(text: str) -> str:
    """A Megatron-LM ``--pipeline-model-parallel-layout`` with its ``(...)*N`` groups written out (megatron-core
    ``PipelineParallelLayerLayout.from_str``: a group repeated N times), innermost first."""
    while True:
        new = re.sub(r"\(([^()]*)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
        if new == text:
            return text
        text = new


_PRIMUS_FRAMEWORK = re.compile(r"^\s*framework:\s*(megatron|torchtitan|megatron_bridge)\s*$", re.M)


def primus(root: Path, everywhere: bool = False) -> collections.Counter:
    """Every Primus experiment under ``root/examples/{megatron,torchtitan}/configs`` (see the module docstring);
    ``everywhere`` (read21): every YAML under ``root/examples`` naming a Megatron, Megatron-Bridge or TorchTitan
    module (``mlperf/``, ``moe_package/``, ``megatron_bridge/``, ... beside the two ``configs`` trees)."""
    from primus_launch.adapters.primus_yaml import load_primus_yaml

    sys.path.insert(0, str(root))
    from primus.core.launcher.parser import PrimusParser  # type: ignore[import-not-found]

    counts: collections.Counter = collections.Counter()
    files = sorted(p for d in ("megatron", "torchtitan") for p in (root / "examples" / d / "configs").rglob("*.yaml"))
    if everywhere:
        files = sorted(p for p in (root / "examples").rglob("*.yaml")
                       if _PRIMUS_FRAMEWORK.search(p.read_text(errors="replace")))
    with tempfile.TemporaryDirectory() as work:
        here = os.getcwd()
        os.chdir(work)  # PrimusConfig creates the experiment's output folder
        try:
            for f in files:
                rel = f.relative_to(root)
                try:
                    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                        exp = PrimusParser().parse(SimpleNamespace(config=str(f)))._exp
                    mods = _ns2d(exp.modules)
                    c = mods[next(k for k in mods if "trainer" in k)]
                except Exception as e:  # noqa: BLE001 -- Primus's own parser refuses the file
                    counts["primus refuses"] += 1
                    print(f"PRIMUS-REFUSES {rel}: {type(e).__name__}: {str(e)[:100]}")
                    continue
                try:
                    plan = load_primus_yaml(f, primus_root=root, env={})
                except Exception as e:  # noqa: BLE001
                    counts["refused"] += 1
                    print(f"REF {rel}: {str(e)[:140]}")
                    continue
                diffs = (megatron_diffs if c.get("framework") == "megatron" else titan_module_diffs)(c, plan)
                tally(counts, rel, diffs)
        finally:
            os.chdir(here)
    return counts


def _titan_shape_diffs(c: Any, p: Any, world: int, sp: bool) -> tuple[dict[str, tuple[Any, Any]], Any]:
    """(the differences so far, ``chk(name, framework's, reader's)`` adding to them) after the checks both torchtitan
    versions' configs share: the parallel degrees (and, with ``sp``, sequence parallelism under TP), the sequence
    length, the global batch (``local_batch_size x dp`` where unset) and the micro-batch."""
    P, T, t = c.parallelism, c.training, p.training
    out: dict[str, tuple[Any, Any]] = {}

    def chk(name: str, want: Any, got: Any) -> None:
        if want != got:
            out[name] = (want, got)

    chk("tp", P.tensor_parallel_degree, p.parallel.tp)
    chk("pp", P.pipeline_parallel_degree, p.parallel.pp)
    chk("cp", P.context_parallel_degree, p.parallel.cp)
    chk("ep", P.expert_parallel_degree, p.parallel.ep)
    if sp and P.tensor_parallel_degree > 1:
        chk("sequence_parallel", P.enable_sequence_parallel, p.parallel.sequence_parallel)
    chk("seq_len", T.seq_len, p.model.seq_length)
    dp = world // (P.tensor_parallel_degree * P.pipeline_parallel_degree * P.context_parallel_degree)
    chk("global_batch", T.global_batch_size if T.global_batch_size > 0 else T.local_batch_size * dp,
        t.global_batch_size)
    chk("micro_batch", P.pipeline_parallel_microbatch_size if P.pipeline_parallel_degree > 1 else T.local_batch_size,
        t.micro_batch_size)
    return out, chk


def _titan_diffs(c: Any, p: Any, ngpu: int) -> dict[str, tuple[Any, Any]]:
    T, t = c.training, p.training
    out, chk = _titan_shape_diffs(c, p, ngpu, sp=True)
    kind = {"SelectiveAC.Config": "selective", "FullAC.Config": "full"}.get(
        type(c.activation_checkpoint).__qualname__, "none" if c.activation_checkpoint is None else "other")
    g = t.recompute.granularity
    chk("activation_checkpoint", kind, "selective" if g in ("op", "layer") else g)
    chk("compile", c.compile.enable and "model" in c.compile.components, t.compile)
    chk("compile_loss", c.compile.enable and "loss" in c.compile.components, t.compile_loss)
    chk("enable_cpu_offload", T.enable_cpu_offload, t.offload.optimizer_fraction > 0 or t.offload.weights)
    bf16 = T.dtype == "bfloat16" or T.mixed_precision_param == "bfloat16"
    chk("param dtype", "bf16" if bf16 else "fp32", "fp32" if t.precision == "fp32" else "bf16")
    chk("grad reduce fp32 (FSDP2 reduce_dtype)", True, t.grad_reduce_in_fp32)
    chk("disable_cuda_graphs", T.disable_cuda_graphs, t.cuda_graph_impl == "none")
    arch = c.model_spec.model
    layers = getattr(arch, "layers", None)
    if isinstance(layers, list):
        chk("layers", len(layers), p.model.num_layers)
    if getattr(arch, "dim", None):
        chk("dim", arch.dim, p.model.hidden_size)
    return out


def titan(lines: list[list[str]], ngpu: int = 8) -> collections.Counter:
    """Each torchtitan 0.3 launch line's trainer arguments (see the module docstring)."""
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torchtitan.components.quantization.float8 as f8
    import torchtitan.components.quantization.mx as mx
    import torchtitan.components.quantization.nvfp4 as nv
    from torchtitan.config.manager import ConfigManager

    from primus_launch.adapters.command_recipe import plan_from_command

    for mod in (f8, mx, nv):
        if hasattr(mod, "has_cuda_capability"):
            mod.has_cuda_capability = lambda major, minor: True
    counts: collections.Counter = collections.Counter()
    return _compare_lines(lines, ConfigManager, counts, lambda args: plan_from_command(
        ["torchrun", "--nnodes", "1", "--nproc-per-node", str(ngpu), "-m", "torchtitan.train", *args]),
        lambda cfg, plan: _titan_diffs(cfg, plan, ngpu))


def _titan02_diffs(c: Any, p: Any) -> dict[str, tuple[Any, Any]]:
    P, T, t = c.parallelism, c.training, p.training
    out, chk = _titan_shape_diffs(c, p, p.cluster.num_nodes * p.cluster.gpus_per_node, sp=False)
    ac, g = c.activation_checkpoint, t.recompute.granularity
    if ac.mode == "selective":
        n = ac.selective_ac_option
        chk("activation_checkpoint", "op" if n == "op" else "full" if int(n) <= 1 else "every_n",
            g if g == "op" else "every_n" if t.recompute.method == "every_n" else g)
    else:
        chk("activation_checkpoint", "op" if ac.mode == "memory_budget" else ac.mode, g)
    chk("compile", c.compile.enable and "model" in c.compile.components, t.compile)
    chk("compile_loss", c.compile.enable and "loss" in c.compile.components, t.compile_loss)
    chk("enable_cpu_offload", T.enable_cpu_offload, t.offload.optimizer_fraction > 0 or t.offload.weights)
    conv = list(c.model.converters)
    mx = any(x in ("mx", "quantize.linear.mx") for x in conv)
    fp8 = any(x in ("float8", "quantize.linear.float8") for x in conv)
    fp32 = T.mixed_precision_param == "float32" and T.dtype == "float32"
    chk("precision", "mxfp8" if mx else "fp8" if fp8 else "fp32" if fp32 else "bf16",
        "mxfp8" if t.fp8_recipe == "mxfp8" else t.precision)
    if fp8 and not mx:
        chk("fp8_recipe", c.quantize.linear.float8.recipe_name or "tensorwise", t.fp8_recipe)
    chk("async_tp", P.enable_async_tensor_parallel and P.tensor_parallel_degree > 1, t.tp_comm_overlap)
    return out


def titan02_child(lines: list[list[str]]) -> collections.Counter:
    """Run in a child process whose ``sys.path`` starts with the torchtitan <= 0.2 tree."""
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from torchtitan.config import ConfigManager

    from primus_launch.adapters.titan_job_argv import plan_from_job_command

    counts: collections.Counter = collections.Counter()
    cluster = {"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 8}
    return _compare_lines(lines, ConfigManager, counts, lambda args: plan_from_job_command(
        ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "-m", "torchtitan.train", *args], cluster),
        _titan02_diffs)


def _compare_lines(lines, config_manager, counts: collections.Counter, read, diffs_of) -> collections.Counter:
    """Each override line parsed by torchtitan's own ``config_manager`` and read by ``read``: counted and printed
    as both refuse / refused / read where torchtitan refuses / same / different (``diffs_of(cfg, plan)``)."""
    for args in lines:
        label = " ".join(args)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                cfg = config_manager().parse_args(list(args))
        except BaseException as e:  # noqa: BLE001 -- tyro exits on a bad line
            cfg, why = None, f"{type(e).__name__}: {str(e)[:80]}"
        try:
            plan = read(args)
        except Exception as e:  # noqa: BLE001
            counts["both refuse" if cfg is None else "refused"] += 1
            print(f"{'BOTH-REFUSE' if cfg is None else 'REF'} {label}: {str(e)[:140]}")
            continue
        if cfg is None:
            counts["read, torchtitan refuses"] += 1
            print(f"TORCHTITAN-REFUSES {label}: {why}")
            continue
        diffs = diffs_of(cfg, plan)
        tally(counts, label, diffs)
    return counts


def titan02(tree: Path, lines_file: Optional[Path]) -> collections.Counter:
    """The TOMLs of ``tree`` (and the lines of ``lines_file``) in a child process on ``tree``'s torchtitan."""
    import subprocess

    lines = [f"--job.config_file {p}" for p in sorted(tree.rglob("*.toml"))]
    if lines_file:
        lines += [ln for ln in lines_file.read_text().splitlines() if ln.strip()]
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(repo)])}
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--titan02-child"], input="\n".join(lines),
                              capture_output=True, text=True, env=env, cwd=work)
    counts: collections.Counter = collections.Counter()
    for ln in done.stdout.splitlines():
        print(ln)
        head = ln.split(" ", 1)[0]
        counts[{"SAME": "same", "DIFF": "different", "REF": "refused", "BOTH-REFUSE": "both refuse",
                "TORCHTITAN-REFUSES": "read, torchtitan refuses"}.get(head, "other")] += 1
    if done.returncode:
        print(done.stderr[-2000:])
    return counts


def _get(c: Any, *paths: str, default: Any = None) -> Any:
    """The first of ``paths`` (dotted) that torchtitan config ``c`` of some release has (their layouts moved keys
    between tables: ``training.tensor_parallel_degree`` -> ``parallelism.``, ``training.batch_size`` ->
    ``local_batch_size``, ``training.compile`` -> ``compile.enable``)."""
    for path in paths:
        o: Any = c
        for part in path.split("."):
            o = getattr(o, part, _MISSING)
            if o is _MISSING:
                break
        if o is not _MISSING:
            return o
    return default


_MISSING = object()


def _tag_world(path: str) -> tuple[int, int]:
    """(nodes, GPUs per node) that the job TOML's explicit degrees fit (any layout's keys): 8 GPUs a node where
    they divide it."""
    import tomllib

    try:
        d = tomllib.loads(Path(path).read_text())
    except Exception:  # noqa: BLE001 -- the reader says why
        return 1, 8

    def deg(*keys: str, default: int = 1) -> int:
        for k in keys:
            sec, _, name = k.partition(".")
            v = (d.get(sec) or {}).get(name)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return default

    other = (deg("parallelism.tensor_parallel_degree", "training.tensor_parallel_degree")
             * deg("parallelism.pipeline_parallel_degree", "experimental.pipeline_parallel_degree")
             * deg("parallelism.context_parallel_degree", "experimental.context_parallel_degree")
             * deg("parallelism.data_parallel_replicate_degree", "training.data_parallel_replicate_degree"))
    other = max(other, 1)
    shard = deg("parallelism.data_parallel_shard_degree", "training.data_parallel_shard_degree",
                "training.data_parallel_degree", default=-1)
    world = other * shard if shard > 0 else math.lcm(other, 8)
    return (world // 8, 8) if world % 8 == 0 else (1, world)


def _tag_diffs(c: Any, p: Any, dims: Optional[tuple[int, int]]) -> dict[str, tuple[Any, Any]]:
    """Fields of a job TOML as the ConfigManager of its own commit parsed it (any layout, v0.1.0's and older
    included) that plan ``p`` reads otherwise: model flavor (layers / dim from that tree's registry where it
    imports), degrees, batch / sequence, AC mode / selective option, compile, float8 / MX and the float8 recipe,
    FSDP reshard, optimizer, steps."""
    t, par = p.training, p.parallel
    out: dict[str, tuple[Any, Any]] = {}

    def chk(name: str, want: Any, got: Any) -> None:
        if want is not None and want != got:
            out[name] = (want, got)

    tp = int(_get(c, "parallelism.tensor_parallel_degree", "training.tensor_parallel_degree", default=1))
    pp = int(_get(c, "parallelism.pipeline_parallel_degree", "experimental.pipeline_parallel_degree", default=1))
    cp = int(_get(c, "parallelism.context_parallel_degree", "experimental.context_parallel_degree", default=1))
    chk("tp", tp, par.tp)
    chk("pp", pp, par.pp)
    chk("cp", cp, par.cp)
    chk("ep", int(_get(c, "parallelism.expert_parallel_degree", default=1)), par.ep)
    chk("seq_len", _get(c, "training.seq_len"), p.model.seq_length)
    lbs = int(_get(c, "training.local_batch_size", "training.batch_size"))
    gbs = int(_get(c, "training.global_batch_size", default=-1) or -1)
    dp = p.cluster.num_nodes * p.cluster.gpus_per_node // (tp * pp * cp)
    chk("global_batch", gbs if gbs > 0 else lbs * dp, t.global_batch_size)
    chk("micro_batch", _get(c, "parallelism.pipeline_parallel_microbatch_size", default=1) if pp > 1 else lbs,
        t.micro_batch_size)
    mode = _get(c, "activation_checkpoint.mode", default="none")
    g = t.recompute.granularity
    if mode == "selective":
        n = str(_get(c, "activation_checkpoint.selective_ac_option", default="2"))
        chk("activation_checkpoint", "op" if n == "op" else "full" if int(n) <= 1 else f"every {n}",
            "op" if g == "op" else f"every {t.recompute.num_layers}" if t.recompute.method == "every_n" else g)
    else:
        chk("activation_checkpoint", "op" if mode == "memory_budget" else mode, g)
    comps = _get(c, "compile.components", default=["model", "loss"])
    comp = bool(_get(c, "compile.enable", default=False))
    chk("compile", (comp and "model" in comps) or bool(_get(c, "training.compile", default=False)), t.compile)
    conv = [str(x) for x in (_get(c, "model.converters", default=[]) or [])]
    mx = any(x in ("mx", "quantize.linear.mx", "mxfp8") for x in conv)
    fp8 = any(x in ("float8", "quantize.linear.float8") for x in conv) or \
        bool(_get(c, "float8.enable_float8_linear", "training.enable_float8_linear", "training.fp8_linear",
                  default=False))
    chk("precision", "mxfp8" if mx else "fp8" if fp8 else None, "mxfp8" if t.fp8_recipe == "mxfp8" else t.precision)
    if fp8 and not mx:
        chk("fp8_recipe", _get(c, "quantize.linear.float8.recipe_name", "float8.recipe_name", default=None)
            or "tensorwise", t.fp8_recipe)
    chk("fsdp_reshard_after_forward", _get(c, "parallelism.fsdp_reshard_after_forward", default="default"),
        par.fsdp_reshard_after_forward)
    opt = str(_get(c, "optimizer.name", default="AdamW")).lower()
    chk("optimizer", "sgd" if "sgd" in opt else "adam", t.optimizer)
    chk("steps", _get(c, "training.steps"), t.train_iters)
    if dims:
        chk("layers", dims[0], p.model.num_layers)
        chk("dim", dims[1], p.model.hidden_size)
    return out


def _tree_dims(name: str, flavor: str) -> Optional[tuple[int, int]]:
    """(layers, dim) of ``name``'s ``flavor`` in the imported tree's model registry, where its module imports and
    keeps a ``*_configs`` dict of model args with ``n_layers`` and ``dim``; else None."""
    import importlib

    try:
        mod = importlib.import_module(f"torchtitan.models.{name}")
    except BaseException:  # noqa: BLE001 -- a model's dependencies absent here
        try:
            mod = importlib.import_module(f"torchtitan.experiments.{name}")
        except BaseException:  # noqa: BLE001
            return None
    for k, v in vars(mod).items():
        if k.endswith("_configs") and isinstance(v, dict) and flavor in v:
            a = v[flavor]
            if hasattr(a, "n_layers") and hasattr(a, "dim"):
                return int(a.n_layers), int(a.dim)
    return None


def _load_tree(tree: str) -> Callable[[list[str]], Any]:
    """A parser of job arguments with the ConfigManager (or older JobConfig) of the torchtitan tree ``tree``,
    imported fresh (the package's ``__init__``, which imports every model, is skipped)."""
    import importlib
    import types

    for k in [k for k in sys.modules if k == "torchtitan" or k.startswith("torchtitan.")]:
        del sys.modules[k]
    pkg = types.ModuleType("torchtitan")
    pkg.__path__ = [str(Path(tree) / "torchtitan")]  # type: ignore[attr-defined]
    sys.modules["torchtitan"] = pkg
    for name in ("torchtitan.config", "torchtitan.config_manager"):
        try:
            m = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name in (name, "torchtitan.config"):
                continue
            raise
        if hasattr(m, "ConfigManager"):
            return lambda args: m.ConfigManager().parse_args(list(args))
        jc_cls = m.JobConfig

        def parse(args: list[str]) -> Any:
            jc = jc_cls()
            jc.parse_args(list(args))
            return jc
        return parse
    raise ImportError(f"no torchtitan config manager under {tree}")


def titan_tags_child(items: list[tuple[str, str, str]]) -> None:
    """Run in a child process: ``items`` = (tree, TOML path, label); one line per TOML."""
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch  # noqa: F401 -- loaded once for every tree

    from primus_launch.adapters.torchtitan import load_torchtitan
    from primus_launch.plan import Cluster

    plans: dict[str, Any] = {}  # read first: the reader finds the installed torchtitan, not a stub tree
    for tree, toml, label in items:
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                nodes, gpn = _tag_world(toml)
                plans[label] = ("ok", load_torchtitan(toml, Cluster(gpu="h100-sxm", num_nodes=nodes,
                                                                    gpus_per_node=gpn)))
        except Exception as e:  # noqa: BLE001
            plans[label] = ("ref", e)
        except BaseException as e:  # noqa: BLE001 -- SystemExit from the reader is a crash
            plans[label] = ("crash", e)
    tree_now, parse = None, None
    for tree, toml, label in items:
        if tree != tree_now:
            tree_now = tree
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    parse = _load_tree(tree)
            except BaseException as e:  # noqa: BLE001
                parse = None
                why_tree = f"{type(e).__name__}: {str(e)[:80]}"
        if parse is None:
            print(f"NO-FRAMEWORK {label}: {why_tree}", flush=True)
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                cfg = parse(["--job.config_file", toml])
        except BaseException as e:  # noqa: BLE001 -- tyro / argparse exit on a bad file
            cfg, why = None, f"{type(e).__name__}: {str(e)[:80]}"
        kind, plan = plans[label]
        if kind == "crash":
            print(f"CRASH {label}: {type(plan).__name__}: {str(plan)[:120]}", flush=True)
            continue
        if kind == "ref":
            print(f"{'BOTH-REFUSE' if cfg is None else 'REF'} {label}: {str(plan)[:160]}", flush=True)
            continue
        if cfg is None:
            print(f"TORCHTITAN-REFUSES {label}: {why}", flush=True)
            continue
        try:
            diffs = _tag_diffs(cfg, plan, _tree_dims(str(_get(cfg, "model.name")), str(_get(cfg, "model.flavor"))))
        except Exception as e:  # noqa: BLE001
            print(f"PROBE-ERROR {label}: {type(e).__name__}: {str(e)[:120]}", flush=True)
            continue
        print(("DIFF " if diffs else "SAME ") + label +
              (" " + json.dumps({k: [str(a), str(b)] for k, (a, b) in diffs.items()}) if diffs else ""), flush=True)


_NOT_JOBS = re.compile(r"(^|/)pyproject\.toml$|^\.github/|(^|/)(rl|grpo)/|ruff|\.pre-commit")


def titan_tags(repo: Path, limit: Optional[int]) -> collections.Counter:
    """Every distinct job TOML of every ref of the torchtitan mirror ``repo``, each parsed by the config manager
    of a commit holding it: the fewest commits that cover all distinct TOML blobs (greedy), each commit's
    ``torchtitan`` package and TOMLs extracted with ``git archive``; one child process imports torch once and
    swaps the trees."""
    import subprocess

    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True, check=True).stdout

    commits = sorted(set(git("for-each-ref", "--format=%(objectname)").split()))
    tomls: dict[str, dict[str, str]] = {}
    for c in commits:
        rows = [ln.split(None, 3) for ln in git("ls-tree", "-r", c).splitlines()]
        got = {r[2]: r[3] for r in rows if r[3].endswith(".toml") and not _NOT_JOBS.search(r[3])}
        if got:
            tomls[c] = got
    left = {b for got in tomls.values() for b in got}
    chosen: list[tuple[str, dict[str, str]]] = []
    while left:
        c = max(tomls, key=lambda c: len(left & tomls[c].keys()))
        new = {b: p for b, p in tomls[c].items() if b in left}
        chosen.append((c, new))
        left -= new.keys()
    if limit:
        chosen = chosen[:limit]
    items: list[tuple[str, str, str]] = []
    counts: collections.Counter = collections.Counter()
    with tempfile.TemporaryDirectory() as work:
        for c, new in chosen:
            tree = Path(work) / c[:12]
            tree.mkdir()
            paths = sorted(set(new.values()))
            want = [r.split(None, 3) for r in git("ls-tree", "-r", c).splitlines()]
            want = [(o, q) for _, kind, o, q in want if kind == "blob" and
                    ((q.startswith("torchtitan/") and q.endswith(".py")) or q in paths)]
            blobs = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input="\n".join(o for o, _ in want)
                                   .encode(), capture_output=True, check=True).stdout  # (a missing blob: skipped)
            at = 0
            for o, q in want:
                head, _, rest = blobs[at:].partition(b"\n")
                at += len(head) + 1
                if head.endswith(b"missing"):
                    continue
                n = int(head.split()[2])
                (tree / q).parent.mkdir(parents=True, exist_ok=True)
                (tree / q).write_bytes(blobs[at:at + n])
                at += n + 1
            items += [(str(tree), str(tree / p), f"{c[:10]}:{p}") for p in paths]
        repo_root = Path(__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONPATH": str(repo_root)}
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--titan-tags-child"],
                              input="\n".join("\t".join(x) for x in items), capture_output=True, text=True,
                              env=env, cwd=work)
    for ln in done.stdout.splitlines():
        print(ln)
        head = ln.split(" ", 1)[0]
        counts[{"SAME": "same", "DIFF": "different", "REF": "refused", "BOTH-REFUSE": "both refuse",
                "TORCHTITAN-REFUSES": "read, torchtitan refuses", "CRASH": "crashed",
                "NO-FRAMEWORK": "framework does not import", "PROBE-ERROR": "probe error"}.get(head, "other")] += 1
    if done.returncode:
        print(done.stderr[-2000:])
    print(f"({len(items)} distinct TOMLs from {len(chosen)} commits of {len(commits)} refs' heads)")
    return counts


#: Bridge ConfigContainer field (section.key) -> how the plan holds it (a function of the plan)
_BRIDGE_FIELDS: dict[str, Callable[[Any], Any]] = {
    "model.num_layers": lambda p: p.model.num_layers, "model.hidden_size": lambda p: p.model.hidden_size,
    "model.ffn_hidden_size": lambda p: p.model.ffn_hidden_size,
    "model.num_attention_heads": lambda p: p.model.num_attention_heads,
    "model.seq_length": lambda p: p.model.seq_length,
    "model.num_moe_experts": lambda p: p.model.num_experts,
    "model.moe_router_topk": lambda p: p.model.moe_router_topk if p.model.num_experts else None,
    "model.tensor_model_parallel_size": lambda p: p.parallel.tp,
    "model.pipeline_model_parallel_size": lambda p: p.parallel.pp,
    "model.virtual_pipeline_model_parallel_size": lambda p: p.parallel.vpp if p.parallel.vpp > 1 else None,
    "model.context_parallel_size": lambda p: p.parallel.cp,
    "model.expert_model_parallel_size": lambda p: p.parallel.ep,
    "model.sequence_parallel": lambda p: p.parallel.sequence_parallel if p.parallel.tp > 1 else None,
    "model.recompute_granularity": lambda p: (None if p.training.recompute.granularity == "none"
                                              else p.training.recompute.granularity),
    "model.recompute_num_layers": lambda p: p.training.recompute.num_layers if p.training.recompute.granularity
    == "full" else None,
    "train.micro_batch_size": lambda p: p.training.micro_batch_size,
    "train.global_batch_size": lambda p: p.training.global_batch_size,
    "train.train_iters": lambda p: p.training.train_iters,
    "ddp.use_distributed_optimizer": lambda p: p.parallel.dp_sharding != "none",
    "ddp.overlap_grad_reduce": lambda p: p.training.overlap_grad_reduce,
    "ddp.overlap_param_gather": lambda p: p.training.overlap_param_gather,
}


def _bridge_diffs(d: dict, p: Any) -> dict[str, tuple[Any, Any]]:
    """Each field of ``_BRIDGE_FIELDS`` a Bridge ConfigContainer YAML ``d`` writes (``model.transformer`` for the
    GPTModelConfig layout) that plan ``p`` holds otherwise; a field the file leaves out is not compared (its
    dataclass default is what the reader applies, from the same field list)."""
    out: dict[str, tuple[Any, Any]] = {}
    model = d.get("model") or {}
    if isinstance(model.get("transformer"), dict):
        model = {**model, **model["transformer"]}
    secs = {"model": model, "train": d.get("train") or {}, "ddp": d.get("ddp") or {}}
    for key, got in _BRIDGE_FIELDS.items():
        sec, k = key.split(".")
        want = secs[sec].get(k)
        if want is None or isinstance(want, (dict, list)) or (isinstance(want, str) and "${" in want):
            continue
        if key == "ddp.overlap_param_gather" and not secs["ddp"].get("use_distributed_optimizer"):
            continue  # without the distributed optimizer there is no parameter all-gather to overlap
        if key == "model.sequence_parallel" and (model.get("tensor_model_parallel_size") or 1) <= 1:
            continue
        if key == "model.recompute_num_layers" and model.get("recompute_granularity") != "full":
            continue
        have = got(p)
        if have != want:
            out[key] = (want, have)
    if model.get("share_embeddings_and_output_weights") is not None:
        want = not model["share_embeddings_and_output_weights"]
        if want != p.model.untie_embeddings_and_output_weights:
            out["model.share_embeddings_and_output_weights"] = (model["share_embeddings_and_output_weights"],
                                                                not p.model.untie_embeddings_and_output_weights)
    return out


def bridge(repo: Path) -> collections.Counter:
    """Every distinct YAML blob of every ref of the Megatron-Bridge mirror ``repo`` that is a ConfigContainer
    (top-level ``model:`` and ``train:``): full run configs (stating the model) read by ``load_bridge_yaml`` and
    compared field by field with the file's own values (``yaml.safe_load``); override files (applied over a
    recipe function, whose values the file does not hold) counted, not compared."""
    import subprocess

    import yaml

    from primus_launch.adapters.bridge_yaml import is_bridge_run_config, load_bridge_yaml
    from primus_launch.plan import Cluster

    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True, check=True).stdout

    seen: dict[str, str] = {}
    for c in sorted(set(git("for-each-ref", "--format=%(objectname)").split())):
        for ln in git("ls-tree", "-r", c).splitlines():
            meta, q = ln.split("\t", 1)
            if q.endswith((".yaml", ".yml")) and not q.startswith((".github/", "docs/")):
                seen.setdefault(meta.split()[2], q)
    counts: collections.Counter = collections.Counter()
    with tempfile.TemporaryDirectory() as work:
        for blob, q in sorted(seen.items(), key=lambda x: x[1]):
            text = git("cat-file", "-p", blob)
            if not (re.search(r"^model:", text, re.M) and re.search(r"^train:", text, re.M)):
                continue
            label = f"{blob[:10]}:{q}"
            if not is_bridge_run_config(text):
                counts["override file (not compared)"] += 1
                print(f"OVERRIDE {label}")
                continue
            f = Path(work) / "run_config.yaml"
            f.write_text(text)
            try:
                d = yaml.safe_load(text)
            except Exception:  # noqa: BLE001 -- tags of the dump (python objects): the reader's own loader only
                d = yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    plan = load_bridge_yaml(f, Cluster(gpu="h100-sxm", num_nodes=_bridge_nodes(d), gpus_per_node=8))
            except Exception as e:  # noqa: BLE001
                counts["refused"] += 1
                print(f"REF {label}: {str(e)[:160]}")
                continue
            except BaseException as e:  # noqa: BLE001
                counts["crashed"] += 1
                print(f"CRASH {label}: {type(e).__name__}: {str(e)[:120]}")
                continue
            diffs = _bridge_diffs(d, plan)
            tally(counts, label, diffs)
    return counts


def _bridge_nodes(d: dict) -> int:
    """Nodes of 8 GPUs the file's model-parallel sizes need (at least 1)."""
    m = d.get("model") or {}
    if isinstance(m.get("transformer"), dict):
        m = {**m, **m["transformer"]}
    n = 1
    for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"):
        v = m.get(k)
        n *= v if isinstance(v, int) and v > 0 else 1
    ep = m.get("expert_model_parallel_size")
    n = math.lcm(n, ep if isinstance(ep, int) and ep > 0 else 1)
    return max(1, -(-n // 8))


def registry_lines() -> list[list[str]]:
    from primus_launch.adapters.titan_snapshot import snapshot

    return [["--module", m, "--config", c] for m, cs in snapshot()["configs"].items() for c in cs]


# torchtitan 0.3.0's integration-test recipes (``tests/integration_tests/run_tests.py`` launches each as
# ``MODULE=<module> CONFIG=<function> ./run_train.sh``); importable ones only (flux / the HF backend need packages
# this machine lacks: their lines are counted as refused by both)
TITAN_RECIPE_MODULES = ("torchtitan_recipes.tests.features", "torchtitan_recipes.tests.models",
                        "torchtitan_recipes.tests.h100", "torchtitan_recipes.tests.flux",
                        "torchtitan_recipes.tests.transformers_modeling_backend")


def experiment_lines() -> list[tuple[int, list[str]]]:
    """(GPUs, launch-line arguments) of every config function of torchtitan 0.3.0's integration-test recipes and
    of the config registries its ConfigManager resolves that the snapshot does not hold (``_supported_experiments``:
    ``graph_trainer.*``, ``torchft.llama3``, ...; model registries outside ``_supported_models``' snapshot entries).
    GPUs: the world its explicit degrees need (replicate x shard x cp x tp x pp; 8 where shard is -1), as the
    integration tests' ``ngpu`` gives it."""
    import importlib
    import inspect

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from torchtitan.experiments import _supported_experiments

    from primus_launch.adapters.titan_snapshot import snapshot

    mods: list[tuple[str, Any]] = []
    for name in TITAN_RECIPE_MODULES:
        try:
            mods.append((name, importlib.import_module(name)))
        except Exception:  # noqa: BLE001 -- an optional dependency missing here
            continue
    snap = snapshot()
    for name in sorted(_supported_experiments | set(snap["models"])):
        if name in snap["configs"]:
            continue
        for prefix in ("torchtitan.models", "torchtitan.experiments", "torchtitan.experiments.rl.examples"):
            try:
                mods.append((name, importlib.import_module(f"{prefix}.{name}.config_registry")))
                break
            except Exception:  # noqa: BLE001
                continue
    out: list[tuple[int, list[str]]] = []
    for name, mod in mods:
        for fn_name, fn in vars(mod).items():
            if not (inspect.isfunction(fn) and fn.__module__ == mod.__name__ and not fn_name.startswith("_")
                    and not inspect.signature(fn).parameters):
                continue
            ngpu = 8
            try:
                par = fn().parallelism
                other = (par.data_parallel_replicate_degree * par.context_parallel_degree * par.tensor_parallel_degree
                         * par.pipeline_parallel_degree)
                if par.data_parallel_shard_degree > 0:
                    ngpu = other * par.data_parallel_shard_degree
            except Exception:  # noqa: BLE001 -- torchtitan cannot load it: its parser says so on the line
                pass
            out.append((ngpu, ["--module", name, "--config", fn_name]))
    logging.disable(logging.NOTSET)
    return out


def titan_experiments() -> collections.Counter:
    """:func:`titan` over :func:`experiment_lines`, one world size at a time."""
    counts: collections.Counter = collections.Counter()
    by_world: dict[int, list[list[str]]] = collections.defaultdict(list)
    for ngpu, args in experiment_lines():
        by_world[ngpu].append(args)
    for ngpu in sorted(by_world):
        counts += titan(by_world[ngpu], ngpu)
    return counts


# ----------------------------------------------------------------------------- torchtitan main (read22)
def _grain_stand_in() -> None:
    """torchtitan main's data modules (``torchtitan/components/data``, PR #4088) import ``grain``, absent here: a
    stand-in whose dataset classes can be subclassed (the configs never build a loader)."""
    import types
    from unittest import mock

    g = types.ModuleType("grain")
    for n in ("MapDataset", "IterDataset", "DatasetIterator", "ReadOptions"):
        setattr(g, n, type(n, (), {"__init__": lambda self, *a, **k: None,
                                   "__class_getitem__": classmethod(lambda c, i: c)}))
    g.experimental = mock.MagicMock(name="grain.experimental")
    g.python = g
    sys.modules.update({"grain": g, "grain.python": g, "grain.experimental": g.experimental})


def titan_main_child() -> None:
    """Run with a torchtitan main tree first on ``sys.path``: every config function of its model registries,
    experiment registries and ``torchtitan_recipes.tests.*`` parsed by its own ``ConfigManager``; one JSON line
    each with the fields ``--titan`` compares, in that tree's key space (tokens per micro-batch, max context
    length, pipeline micro-batch count)."""
    import importlib
    import inspect

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    _grain_stand_in()
    from torchtitan.config.manager import ConfigManager
    from torchtitan.experiments import _supported_experiments
    from torchtitan.models import _supported_models

    for qual in ("float8", "mx", "nvfp4"):  # as --titan: the converters' GPU-capability checks (no GPU here)
        try:
            q = importlib.import_module(f"torchtitan.components.quantization.{qual}")
        except Exception:  # noqa: BLE001
            continue
        if hasattr(q, "has_cuda_capability"):
            q.has_cuda_capability = lambda major, minor: True

    mods: list[tuple[str, Any]] = []
    for name in sorted(_supported_models) + sorted(_supported_experiments):
        for prefix in ("torchtitan.models", "torchtitan.experiments", "torchtitan.experiments.rl.examples"):
            try:
                mods.append((name, importlib.import_module(f"{prefix}.{name}.config_registry")))
                break
            except ModuleNotFoundError:
                continue
            except Exception as e:  # noqa: BLE001 -- an optional dependency missing here
                print(json.dumps({"module": name, "error": f"{type(e).__name__}: {str(e)[:100]}"}))
                break
    for name in TITAN_RECIPE_MODULES:
        try:
            mods.append((name, importlib.import_module(name)))
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"module": name, "error": f"{type(e).__name__}: {str(e)[:100]}"}))
    for name, mod in mods:
        for fn_name, fn in vars(mod).items():
            if not (inspect.isfunction(fn) and fn.__module__ == mod.__name__ and not fn_name.startswith("_")
                    and not inspect.signature(fn).parameters):
                continue
            row: dict[str, Any] = {"module": name, "config": fn_name}
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    c = ConfigManager().parse_args(["--module", name, "--config", fn_name])
            except BaseException as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:100]}"
                print(json.dumps(row))
                continue
            P, T = c.parallelism, c.training
            ac = c.activation_checkpoint
            arch = c.model_spec.model
            layers = getattr(arch, "layers", None)
            row.update({
                "trainer": f"{type(c)._owner.__module__}.{type(c)._owner.__qualname__}"
                if getattr(type(c), "_owner", None) else None,
                "tp": P.tensor_parallel_degree, "pp": P.pipeline_parallel_degree, "cp": P.context_parallel_degree,
                "ep": P.expert_parallel_degree, "sp": P.enable_sequence_parallel,
                "replicate": P.data_parallel_replicate_degree, "shard": P.data_parallel_shard_degree,
                "tokens_per_mb": T.num_tokens_per_microbatch_per_dp_rank, "tokens_per_step": T.num_tokens_per_train_step,
                "ctx": T.max_context_length, "pp_mbs": P.num_pp_microbatches,
                "ac": {"SelectiveAC.Config": "selective", "FullAC.Config": "full"}.get(
                    type(ac).__qualname__, "none" if ac is None else "other"),
                "compile": c.compile.enable and "model" in c.compile.components,
                "compile_loss": c.compile.enable and "loss" in c.compile.components,
                "cpu_offload": T.enable_cpu_offload, "dtype": T.dtype, "param": T.mixed_precision_param,
                "cuda_graphs_off": T.disable_cuda_graphs,
                "layers": len(layers) if isinstance(layers, list) else None, "dim": getattr(arch, "dim", None),
                "converters": sorted(type(x).__qualname__ for x in (getattr(c.model_spec, "converters", None) or [])),
            })
            print(json.dumps(row))


def _titan_main_diffs(r: dict, p: Any, world: int) -> dict[str, tuple[Any, Any]]:
    """torchtitan main's config (``titan_main_child``'s row) against the plan: main's token budget in sequences
    (``trainer.py``: a pipeline micro-batch of ``num_tokens_per_microbatch_per_dp_rank`` token slots, packed
    rows of ``max_context_length``; ``num_pp_microbatches`` of them per DP rank and accumulation step under PP;
    the step ``num_tokens_per_train_step``, default the DP ranks' sum)."""
    t = p.training
    out: dict[str, tuple[Any, Any]] = {}

    def chk(name: str, want: Any, got: Any) -> None:
        if want != got:
            out[name] = (want, got)

    chk("tp", r["tp"], p.parallel.tp)
    chk("pp", r["pp"], p.parallel.pp)
    chk("cp", r["cp"], p.parallel.cp)
    chk("ep", r["ep"], p.parallel.ep)
    if r["tp"] > 1:
        chk("sequence_parallel", r["sp"], p.parallel.sequence_parallel)
    chk("seq_len (max_context_length)", r["ctx"], p.model.seq_length)
    micro = r["tokens_per_mb"] / r["ctx"]
    nmb = r["pp_mbs"] if r["pp"] > 1 else 1
    dp = world // (r["tp"] * r["pp"] * r["cp"])
    step = r["tokens_per_step"] if r["tokens_per_step"] > 0 else r["tokens_per_mb"] * nmb * dp
    chk("micro_batch (tokens_per_mb / ctx)", micro, t.micro_batch_size)
    chk("global_batch (tokens_per_step / ctx)", step / r["ctx"], t.global_batch_size)
    g = t.recompute.granularity
    chk("activation_checkpoint", r["ac"], "selective" if g in ("op", "layer") else g)
    chk("compile", r["compile"], t.compile)
    chk("compile_loss", r["compile_loss"], t.compile_loss)
    chk("enable_cpu_offload", r["cpu_offload"], t.offload.optimizer_fraction > 0 or t.offload.weights)
    bf16 = r["dtype"] == "bfloat16" or r["param"] == "bfloat16"
    chk("param dtype", "bf16" if bf16 else "fp32", "fp32" if t.precision == "fp32" else "bf16")
    chk("disable_cuda_graphs", r["cuda_graphs_off"], t.cuda_graph_impl == "none")
    if r["layers"]:
        chk("layers", r["layers"], p.model.num_layers)
    if r["dim"]:
        chk("dim", r["dim"], p.model.hidden_size)
    return out


def titan_main(tree: Path) -> collections.Counter:
    """Each config function of a torchtitan main tree (``git archive <main> torchtitan torchtitan_recipes``), as
    that tree's own ``ConfigManager`` builds it (a child process on the tree), against the plan the reader makes of
    the launch line naming it (``--module M --config C`` on the world its explicit degrees need, 8 where the
    shard degree is -1): what a launch line written for torchtitan main gives the reader."""
    import subprocess

    from primus_launch.adapters.command_recipe import plan_from_command

    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(repo)])}
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--titan-main-child"],
                              capture_output=True, text=True, env=env, cwd=work)
    if done.returncode:
        print(done.stderr[-2000:])
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    counts: collections.Counter = collections.Counter()
    for ln in done.stdout.splitlines():
        if not ln.startswith("{"):
            continue
        r = json.loads(ln)
        if "config" not in r:
            print(f"NO-IMPORT {r['module']}: {r['error']}")
            counts["module not importable here"] += 1
            continue
        label = f"--module {r['module']} --config {r['config']}"
        world = 8
        if "error" not in r and r["shard"] > 0:
            world = r["replicate"] * r["shard"] * r["cp"] * r["tp"] * r["pp"]
        try:
            plan = plan_from_command(["torchrun", "--nnodes", "1", "--nproc-per-node", str(world), "-m",
                                      "torchtitan.train", "--module", r["module"], "--config", r["config"]])
        except Exception as e:  # noqa: BLE001
            both = "error" in r or (r.get("trainer") not in (None, "torchtitan.trainer.Trainer"))
            counts["both refuse" if "error" in r else "refused"] += 1
            print(f"{'BOTH-REFUSE' if 'error' in r else 'REF'} {label}: {' '.join(str(e).split())[:160]}"
                  + (f" [torchtitan: {r['error']}]" if "error" in r else "") + (" [other trainer]" if both else ""))
            continue
        if "error" in r:
            counts["read, torchtitan refuses"] += 1
            print(f"TORCHTITAN-REFUSES {label}: {r['error']}")
            continue
        tally(counts, label, _titan_main_diffs(r, plan, world))
    return counts


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--primus", type=Path, help="a `git archive HEAD primus examples` of AMD-AGI/Primus")
    ap.add_argument("--primus-everywhere", action="store_true",
                    help="with --primus: every experiment YAML under examples/ naming a megatron / torchtitan module")
    ap.add_argument("--titan", action="store_true", help="every torchtitan 0.3.0 registry config function")
    ap.add_argument("--titan-lines", type=Path, help="a file of torchtitan 0.3 trainer argument lines")
    ap.add_argument("--titan-experiments", action="store_true",
                    help="torchtitan 0.3.0's integration-test recipes and experiment registries (read20)")
    ap.add_argument("--titan02", type=Path, help="a torchtitan <= 0.2 source tree (git archive v0.2.2 torchtitan)")
    ap.add_argument("--titan02-lines", type=Path, help="a file of --job.config_file command argument lines")
    ap.add_argument("--titan02-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--titan-tags", type=Path, help="the torchtitan git mirror: every distinct job TOML of its refs")
    ap.add_argument("--titan-tags-limit", type=int, help="only the first N commits of --titan-tags (a quick check)")
    ap.add_argument("--bridge", type=Path, help="the Megatron-Bridge git mirror: every distinct ConfigContainer YAML")
    ap.add_argument("--titan-tags-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--titan-main", type=Path,
                    help="a torchtitan main tree (git archive main torchtitan torchtitan_recipes): its config "
                         "functions by its own ConfigManager against the reader's launch-line plans (read22)")
    ap.add_argument("--titan-main-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.titan_main_child:
        titan_main_child()
        return 0
    if a.titan02_child:
        titan02_child([ln.split() for ln in sys.stdin.read().splitlines() if ln.strip()])
        return 0
    if a.titan_tags_child:
        titan_tags_child([tuple(ln.split("\t")) for ln in sys.stdin.read().splitlines() if ln.strip()])
        return 0
    runs: list[tuple[str, Callable[[], collections.Counter]]] = []
    if a.primus:
        runs.append(("Primus examples vs PrimusParser", lambda: primus(a.primus.resolve(), a.primus_everywhere)))
    if a.titan or a.titan_lines:
        lines = registry_lines() if a.titan else []
        if a.titan_lines:
            lines += [ln.split() for ln in a.titan_lines.read_text().splitlines() if ln.strip()]
        runs.append(("torchtitan 0.3 launch lines vs ConfigManager", lambda: titan(lines)))
    if a.titan_experiments:
        runs.append(("torchtitan 0.3 integration-test recipes and experiments vs ConfigManager", titan_experiments))
    if a.titan02:
        runs.append(("torchtitan <= 0.2 job commands vs ConfigManager",
                     lambda: titan02(a.titan02.resolve(), a.titan02_lines)))
    if a.bridge:
        runs.append(("Megatron-Bridge ConfigContainer YAMLs of every ref vs their own fields",
                     lambda: bridge(a.bridge.resolve())))
    if a.titan_tags:
        runs.append(("torchtitan job TOMLs of every ref vs that commit's ConfigManager",
                     lambda: titan_tags(a.titan_tags.resolve(), a.titan_tags_limit)))
    if a.titan_main:
        runs.append(("torchtitan main config functions (its ConfigManager) vs the reader's launch-line plans",
                     lambda: titan_main(a.titan_main.resolve())))
    for title, run in runs:
        counts = run()
        print(f"== {title}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
