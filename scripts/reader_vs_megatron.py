"""Probe: the plan the Megatron-LM reader makes against the Namespace Megatron-LM's own parser builds (read15).

For each launch script / functional-test ``model_config.yaml`` of a source, the reader's plan (``load_megatron``) is
compared, field by field, with what ``megatron/training/arguments.py`` ``parse_args`` + ``validate_args`` of a
Megatron-LM checkout make of the same command line:

- the command line: a script's training command as the reader's bash evaluator expands it (the words after
  ``pretrain_gpt.py``); a functional test's ``MODEL_ARGS`` as ``tests/functional_tests/shell_test_utils/
  _run_training.sh`` builds it (``true`` -> the bare flag, ``[a, b]`` -> words, a value with a blank or ``| ( )``
  -> one word);
- the parser: the checkout of the file's own ref (``--ref``: Megatron-LM branches / tags; examples/ and
  functional tests, extracted like ``survey_recipes.py`` does) or Megatron-LM ``--other-ref`` (default main) for
  the launch scripts of the other mirrors (``--mirror``: every ``*.sh`` naming ``pretrain_gpt.py`` /
  ``pretrain_mamba.py``), where flags that checkout does not know are listed, not refused (``parse_known_args``).
  It runs in a child process on ``git archive REF megatron`` in a temporary folder (nothing is copied here); the
  modules it imports that are not installed (``six``, ``regex``) are empty stand-ins, ``typing.override`` (3.12)
  is the identity, and the checks of ``validate_args`` that need a GPU see an H100 with Transformer Engine >=
  every version it asks for (``torch.cuda.get_device_capability`` -> (9, 0), ``is_te_min_version`` -> True).
  ``WORLD_SIZE`` is the plan's GPU count.
- the fields: sizes (layers, hidden, FFN, heads, query groups, kv channels, sequence, max positions, vocab
  padding multiple), micro / global batch, TP / PP / VPP / CP / EP / ETP / SP, pipeline layout / first / last
  stage layers, recompute granularity / method / layers / modules, precision / FP8 / FP4 recipe, FP8 param
  gather, distributed optimizer / FSDP, fp32 gradient reduce, overlap of grad reduce / param gather, TP comm
  overlap, MoE (experts, top-k, expert FFN, shared expert, dispatcher and its backend, grouped GEMM, layer
  frequency, router groups, permute fusion), MLA ranks and head dims, MTP, SwiGLU, norm, biases, QK norm,
  untied embeddings, position embedding, attention backend, CUDA graph impl / scope, CPU offloading, optimizer.

One line per file the reader reads otherwise or refuses alone (``DIFF`` field: [megatron, plan] / ``REF`` reason),
Megatron's refusals of files the reader reads grouped by reason, then per source and in all: same / different /
refused / both refuse / read, Megatron refuses / out of scope.  ``-v``: a line per file (``MREF``: both refuse,
``MEGATRON-REFUSES``: read, Megatron refuses).

    python scripts/reader_vs_megatron.py                       # main and core_v0.16.1 examples + functional tests
    python scripts/reader_vs_megatron.py --ref core_r0.14.0 --mirror   # + the other mirrors' launch scripts
    python scripts/reader_vs_megatron.py --yaml-cfg    # the --yaml-cfg examples (gpt_config.yaml) of every ref
    python scripts/reader_vs_megatron.py --forks       # other teams' Megatron-LM forks' own scripts (read19)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import io
import json
import os
import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from reader_vs_framework import tally  # noqa: E402  (scripts/: one DIFF / SAME line per file for both probes)

MIRROR = Path("/work/.mirror/NVIDIA+Megatron-LM/repo")
OTHER_MIRRORS = ("NVIDIA-NeMo+Megatron-Bridge", "NVIDIA+NeMo-Framework-Launcher", "NVIDIA+dgxc-benchmarking",
                 "alibaba+Pai-Megatron-Patch", "ROCm+Megatron-LM", "ROCm+MAD", "AMD-AGI+Primus", "NVIDIA+NeMo")
# forks of Megatron-LM of other teams (read19): their own launch scripts, not a copy of one on a Megatron-LM branch / tag
FORK_MIRRORS = ("microsoft+Megatron-DeepSpeed", "bigscience-workshop+Megatron-DeepSpeed", "databricks+megablocks",
                "epfLLM+Megatron-LLM", "swiss-ai+Megatron-LM", "krafton-ai+Megatron-Dion", "HYGON-AI+Megatron-LM-das")
PROGRAMS = re.compile(r"pretrain_(gpt|mamba|hybrid)\.py")


# --------------------------------------------------------------------------- child: Megatron-LM's parser
def _child(tree: str, strict: bool) -> None:
    """Read jobs ``{"id", "argv", "world"}`` (JSON lines) from stdin; print ``{"id", "status", "msg", "ns"}``."""
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import types
    import typing
    import warnings

    warnings.filterwarnings("ignore")
    sys.path.insert(0, tree)
    stub = {"six", "regex"}

    class _Any(types.ModuleType):
        __path__: list = []

        def __getattr__(self, k: str) -> Any:
            if k.startswith("__"):
                raise AttributeError(k)
            return type(k, (), {"__init__": lambda s, *a, **kw: None})

    class _Stub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):  # noqa: ANN001
            if name.split(".")[0] in stub:
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):  # noqa: ANN001
            return _Any(spec.name)

        def exec_module(self, m):  # noqa: ANN001
            pass

    sys.meta_path.insert(0, _Stub())
    if not hasattr(typing, "override"):
        typing.override = lambda f: f  # type: ignore[attr-defined]
    import builtins

    # training-moe-june2025 (dfc83ce) param_and_grad_buffer.py annotates with Tuple without importing it: that branch
    # head does not import at all (NameError); with the name supplied its parser runs and the recipes compare
    builtins.Tuple = typing.Tuple  # type: ignore[attr-defined]
    # core_r0.8.0 tensor_parallel/random.py: `from pkg_resources import packaging` (setuptools, not installed here;
    # it uses packaging.version only): the packaging module under that name
    if importlib.util.find_spec("pkg_resources") is None:
        import packaging.version

        sys.modules["pkg_resources"] = types.SimpleNamespace(packaging=packaging)  # type: ignore[assignment]
    import torch

    arch = [9]  # the plan's GPU generation, per job (validate_args asks CUDA_DEVICE_MAX_CONNECTIONS below sm100)
    torch.cuda.get_device_capability = lambda *a, **k: (arch[0], 0)
    torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
        major=arch[0], minor=0, name="GPU", total_memory=80 * 2**30, multi_processor_count=132)
    with contextlib.redirect_stdout(sys.stderr):  # not a StringIO: main's coordinator calls faulthandler.enable()
        import megatron.core.utils as mcu
        from megatron.training import arguments as A
    for mod in (mcu, A):
        if hasattr(mod, "is_te_min_version"):
            mod.is_te_min_version = lambda *a, **k: True
    assert A.__file__.startswith(tree), A.__file__
    base_env = dict(os.environ)
    for line in sys.stdin:
        job = json.loads(line)
        arch[0] = int(job.get("arch", 9))
        os.environ.clear()
        os.environ.update({**base_env, **job.get("env", {}), "WORLD_SIZE": str(job["world"]), "RANK": "0",
                           "LOCAL_RANK": "0"})
        sys.argv = ["pretrain_gpt.py", *job["argv"]]
        out: dict[str, Any] = {"id": job["id"], "status": "ok", "msg": ""}
        err = io.StringIO()
        if job.get("yaml_cfg"):  # Megatron-LM's experimental --yaml-cfg: load_yaml, then validate_yaml (initialize)
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                    from megatron.training.yaml_arguments import load_yaml, validate_yaml

                    args = load_yaml(job["yaml_cfg"])
                    args.rank = int(os.getenv("RANK", "0"))  # as parse_args does after load_yaml
                    args.world_size = int(os.getenv("WORLD_SIZE", "1"))
                    flat = dict(vars(copy.deepcopy(args)))
                    for sec in ("language_model", "model_parallel"):  # the nested sections' fields, where not set
                        for k, v in vars(flat.pop(sec, None) or types.SimpleNamespace()).items():
                            flat.setdefault(k, v)
                    try:
                        args = validate_yaml(args, {})
                        for sec in ("language_model", "model_parallel"):  # validated values of the sections
                            flat.update(vars(getattr(args, sec, None) or types.SimpleNamespace()))
                        flat.update({k: v for k, v in vars(args).items() if not isinstance(v, types.SimpleNamespace)})
                    except AttributeError as e:
                        # validate_yaml reads an argument the example no longer writes (the experimental path
                        # trailing the arguments): the file's values over parse_args' defaults, validate_args
                        out["fallback"] = f"validate_yaml: {e}"
                        sys.argv = ["pretrain_gpt.py", "--mock-data", "--tokenizer-type", "NullTokenizer",
                                    "--vocab-size", "32000"]
                        base = A.parse_args()
                        base.yaml_cfg = None
                        for k, v in flat.items():
                            if k != "yaml_cfg":
                                setattr(base, k, v)
                        A.validate_args(base, {})
                        flat = dict(vars(base))
                out["ns"] = {k: _jsonable(v) for k, v in flat.items()}
            except BaseException as e:  # noqa: BLE001
                out.update(status="validate", msg=f"{type(e).__name__}: {str(e)}"[:300])
            print(json.dumps(out), flush=True)
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                if strict:
                    args = A.parse_args()
                else:  # another team's script: flags this checkout does not know are listed, not refused
                    try:
                        args = A.parse_args(ignore_unknown_args=True)
                    except SystemExit:
                        # a fork's own tokenizer class (ROCm branches' HFTokenizer / QWenTokenizer): no plan field
                        # but the vocabulary, which the reader found; parse with NullTokenizer and that vocabulary
                        if "--tokenizer-type: invalid choice" not in err.getvalue() or not job.get("vocab"):
                            raise
                        for i in [i for i, w in enumerate(sys.argv) if w == "--tokenizer-type"]:
                            sys.argv[i + 1] = "NullTokenizer"
                        sys.argv += ["--vocab-size", str(job["vocab"])]
                        err.seek(0)
                        err.truncate(0)
                        args = A.parse_args(ignore_unknown_args=True)
                        out["null_tokenizer"] = True
                    try:  # (argparse exits with SystemExit, no Exception)
                        p = A.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
                        out["unknown"] = [u for u in p.parse_known_args(sys.argv[1:])[1] if u.startswith("-")]
                        # the ROCm forks' own switch (their megatron/arguments.py: store_true, QKV bias)
                        args.add_qkv_bias_linear = "--add-qkv-bias-linear" in out["unknown"]
                    except BaseException:  # noqa: BLE001
                        pass
        except BaseException as e:  # noqa: BLE001 -- argparse exits
            out.update(status="parse", msg=(err.getvalue().strip().splitlines() or [repr(e)])[-1][:300])
            print(json.dumps(out), flush=True)
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                first = copy.deepcopy(args)
                try:
                    A.validate_args(first, {"tokenizer_type": "GPT2BPETokenizer"})
                    args = first
                except AssertionError as e:
                    # another team's data flags (a fork's --train-data) that this checkout does not read: the
                    # run's data source is no plan field, so validate with --mock-data instead
                    if strict or "data source" not in str(e):
                        raise
                    args.mock_data, args.data_path = True, None
                    out["mock_data"] = True
                    A.validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})
        except BaseException as e:  # noqa: BLE001
            where = ""
            if os.environ.get("READER_VS_MEGATRON_TRACE"):
                import traceback

                where = " @ " + " < ".join(f"{fr.filename.rsplit('/', 1)[-1]}:{fr.lineno}"
                                           for fr in reversed(traceback.extract_tb(e.__traceback__)))
            out.update(status="validate", msg=f"{type(e).__name__}: {str(e)}"[:300] + where)
        out["ns"] = {k: _jsonable(v) for k, v in vars(args).items()}
        print(json.dumps(out), flush=True)


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    name = getattr(v, "name", None)  # enums
    return name if isinstance(name, str) and not hasattr(v, "is_floating_point") else str(v)


def parse_with_megatron(tree: Path, jobs: list[dict], strict: bool) -> dict[str, dict]:
    """Megatron-LM's parse of each job, in a child process on ``tree`` (see :func:`_child`)."""
    if not jobs:
        return {}
    env = {**os.environ, "PYTHONPATH": str(tree), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(tree)]
                          + ([] if strict else ["--lenient"]), input="\n".join(json.dumps(j) for j in jobs),
                          capture_output=True, text=True, env=env, cwd=str(tree))
    out = {}
    for ln in done.stdout.splitlines():
        if ln.startswith("{"):
            r = json.loads(ln)
            out[r["id"]] = r
    if len(out) < len(jobs):
        print(f"  (Megatron-LM child stopped after {len(out)} of {len(jobs)}: {done.stderr.strip()[-400:]})")
    return out


# --------------------------------------------------------------------------- argv of a recipe
def yaml_argv(text: str) -> Optional[list[str]]:
    """A functional test's ``MODEL_ARGS`` as the runner (``_run_training.sh``) passes them, or a moe_recipes
    file's ``ARGS`` as flags, or None."""
    import yaml

    from primus_launch.adapters.megatron_yaml import runner_unescaped

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    block = data.get("MODEL_ARGS") if isinstance(data, dict) else None
    flags = False
    if not isinstance(block, dict) and isinstance(data, dict) and isinstance(data.get("ARGS"), dict):
        # NVIDIA's examples/moe_recipes (dev; read20): ``ARGS:`` keys are flag names with underscores, each
        # passed as ``--key-with-dashes`` (true: the bare switch, false: left out)
        block, flags = data["ARGS"], True
    if not isinstance(block, dict):
        return None
    out: list[str] = []
    for k, v in block.items():
        if flags:  # a dest of a store_false switch (overlap_p2p_comm: true) is its default; false passes the switch
            from primus_launch.adapters import megatron_flags

            f = megatron_flags.lookup(str(k))
            if f is not None and f.kind == "false" and str(k) == f.dest and isinstance(v, bool):
                if not v:
                    out.append(f.flags[0])
                continue
            k = "--" + str(k).replace("_", "-")
            if v is False:
                continue
            if isinstance(v, str) and " " in v.strip():  # unquoted in the launch line: bash splits the words
                out += [k, *v.split()]
                continue
        if v is True:
            out.append(k)
        elif v is None or v == "":
            continue
        elif isinstance(v, list):
            out += [k, *(str(x) for x in v)]
        else:
            s = "false" if v is False else str(v)
            s = runner_unescaped(s) if "\\" in s else s
            if re.fullmatch(r"\[[^]]+\]", s):
                out += [k, *s[1:-1].split()]
            else:
                out += [k, s]
    return out


def recipe_argv(path: Path, plan: Any) -> tuple[Optional[list[str]], dict[str, str]]:
    """(the command line Megatron-LM gets, its launch environment): a script's words after the training program
    of the command the reader's bash evaluator picked (its exports and prefixes), a functional test's
    ``MODEL_ARGS`` (:func:`yaml_argv`; its ``ENV_VARS``)."""
    from primus_launch.adapters import megatron_script as ms
    from primus_launch.adapters.megatron import _parse, recipe_env

    text = path.read_text(errors="replace")
    rec, _ = _parse(text, str(path), given=plan.cluster if plan else None,
                    script_args=tuple(plan.source.script_args) if plan else ())
    env = {k: str(v) for k, v in recipe_env(rec).items()}
    if path.suffix in (".yaml", ".yml"):
        return yaml_argv(text), env
    if not isinstance(rec, ms.CommandRecipe) or rec.script_index < 0:
        return None, env
    return [t.text for t in rec.tokens[rec.script_index + 1:]], env


# --------------------------------------------------------------------------- the comparison
_DISPATCH = {"flex": None}


_TE_ENV = {"flash": (1, 0, 0), "fused": (0, 1, 0), "unfused": (0, 0, 1), "local": (0, 0, 0), "auto": (1, 1, 1)}


def model_build_refusal(ns: dict, env: dict[str, str]) -> Optional[str]:
    """Megatron-LM's check when the model is built (>= core_v0.11.0, fa0dcc4: ``language_module.py``
    ``_set_attention_backend``):
    each of NVTE_FLASH_ATTN / NVTE_FUSED_ATTN / NVTE_UNFUSED_ATTN unset or the value ``--attention-backend`` sets."""
    want = _TE_ENV.get(str(ns.get("attention_backend")))
    for name, v in zip(("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN"), want or ()):
        if env.get(name) is not None and env[name].strip() != str(v):
            return (f"AssertionError at model build (language_module _set_attention_backend): {name}={env[name]} "
                    f"with --attention-backend {ns.get('attention_backend')}")
    return None


def megatron_vs_plan(ns: dict, p: Any) -> dict[str, tuple[Any, Any]]:
    """Fields of Megatron-LM's validated Namespace ``ns`` that plan ``p`` reads otherwise."""
    m, par, t = p.model, p.parallel, p.training
    out: dict[str, tuple[Any, Any]] = {}

    def chk(name: str, want: Any, got: Any) -> None:
        if want != got:
            out[name] = (want, got)

    g = ns.get
    for k, got in (("num_layers", m.num_layers), ("hidden_size", m.hidden_size),
                   ("num_attention_heads", m.num_attention_heads), ("seq_length", m.seq_length),
                   ("tensor_model_parallel_size", par.tp), ("pipeline_model_parallel_size", par.pp),
                   ("micro_batch_size", t.micro_batch_size)):
        chk(k, g(k), got)
    sched = g("step_batch_size_schedule")  # Megatron's namespace holds mbs x dp; the schedule's last step is steady
    chk("global_batch_size", int(str(sched).split()[-1].split(":")[-1]) if sched else g("global_batch_size"),
        t.global_batch_size)
    if g("ffn_hidden_size") is not None and not g("is_hybrid_model"):
        chk("ffn_hidden_size", g("ffn_hidden_size"), m.ffn_hidden_size)
    heads = g("num_attention_heads")
    chk("num_query_groups", g("num_query_groups") if g("group_query_attention") else heads,
        m.num_query_groups or heads)
    if g("kv_channels") and not g("multi_latent_attention"):
        chk("kv_channels", g("kv_channels"), m.head_dim or m.hidden_size // m.num_attention_heads)
    chk("make_vocab_size_divisible_by", g("make_vocab_size_divisible_by"), m.make_vocab_size_divisible_by)
    chk("swiglu", bool(g("swiglu")), m.swiglu)
    chk("normalization", {"RMSNorm": "rmsnorm", "LayerNorm": "layernorm"}.get(g("normalization"), g("normalization")),
        m.normalization)
    chk("untie_embeddings", bool(g("untie_embeddings_and_output_weights")), m.untie_embeddings_and_output_weights)
    chk("add_bias_linear", bool(g("add_bias_linear")), m.add_bias_linear)
    chk("add_qkv_bias", bool(g("add_qkv_bias") or g("add_bias_linear") or g("add_qkv_bias_linear")),
        m.add_qkv_bias or m.add_bias_linear)
    chk("qk_layernorm", bool(g("qk_layernorm")), m.qk_layernorm)
    pos = g("position_embedding_type")
    chk("position_embedding_type", "learned" if pos == "learned_absolute" else pos, m.position_embedding)
    # parallel layout
    chk("vpp", g("virtual_pipeline_model_parallel_size") or 1, par.vpp)
    chk("context_parallel_size", g("context_parallel_size") or 1, par.cp)
    chk("expert_model_parallel_size", g("expert_model_parallel_size") or 1, par.ep)
    if g("num_experts"):
        chk("expert_tensor_parallel_size", g("expert_tensor_parallel_size") or g("tensor_model_parallel_size"),
            par.etp if par.etp is not None else par.tp)
    if (g("tensor_model_parallel_size") or 1) > 1:
        chk("sequence_parallel", bool(g("sequence_parallel")), par.sequence_parallel)
    if g("decoder_first_pipeline_num_layers") is not None:
        chk("decoder_first_pipeline_num_layers", g("decoder_first_pipeline_num_layers"), par.pipeline_layers_first_stage)
    if g("decoder_last_pipeline_num_layers") is not None:
        chk("decoder_last_pipeline_num_layers", g("decoder_last_pipeline_num_layers"), par.pipeline_layers_last_stage)
    # recompute
    rg = g("recompute_granularity")
    chk("recompute_granularity", rg or "none", "selective" if t.recompute.granularity == "op" else t.recompute.granularity)
    if rg == "full":
        chk("recompute_method", g("recompute_method") or "uniform",
            t.recompute.method if t.recompute.method in ("uniform", "block") else "uniform")
        chk("recompute_num_layers", g("recompute_num_layers"), t.recompute.num_layers)
    if rg == "selective" and g("recompute_modules") is not None:
        told = {w for u in (p.source.unmodelled if p.source else []) if u.flag == "--recompute-modules"
                for w in str(u.value).replace(",", " ").split()}  # reported as not modelled (hyper-connections' mhc)
        chk("recompute_modules", sorted(set(g("recompute_modules")) - told), sorted(t.recompute.modules))
    # precision
    prec = "fp4" if g("fp4") else "fp8" if g("fp8") else "bf16" if g("bf16") else "fp16" if g("fp16") else "fp32"
    chk("precision", prec, t.precision)
    if g("fp8"):
        chk("fp8_recipe", g("fp8_recipe") or "delayed", t.fp8_recipe or "delayed")  # plan None: Megatron's default
        chk("fp8_param_gather", bool(g("fp8_param_gather")), t.fp8_param_gather)
    if g("bf16") or g("fp8") or g("fp4"):
        chk("grad_reduce_in_fp32", bool(g("accumulate_allreduce_grads_in_fp32")), t.grad_reduce_in_fp32)
    # data parallel
    fsdp = bool(g("use_megatron_fsdp") or g("use_torch_fsdp2") or g("use_custom_fsdp"))
    if not fsdp:
        chk("use_distributed_optimizer", bool(g("use_distributed_optimizer")), par.dp_sharding != "none")
    else:
        chk("fsdp", True, par.dp_sharding == "full" or par.dp_sharding.startswith("optimizer"))
        if not g("use_torch_fsdp2") and g("data_parallel_sharding_strategy") != "no_shard":
            # Megatron-FSDP: its sharding strategy is the plan's dp_sharding (no_shard: the optimizer's, above)
            chk("data_parallel_sharding_strategy", g("data_parallel_sharding_strategy"),
                {"full": "optim_grads_params", "optimizer_grads": "optim_grads", "optimizer": "optim"}.get(
                    par.dp_sharding, "no_shard"))
    chk("overlap_grad_reduce", bool(g("overlap_grad_reduce")), t.overlap_grad_reduce)
    chk("overlap_param_gather", bool(g("overlap_param_gather")), t.overlap_param_gather)
    chk("tp_comm_overlap", bool(g("tp_comm_overlap")), t.tp_comm_overlap)
    chk("optimizer", {"adam": "adam", "sgd": "sgd"}.get(g("optimizer"), "muon" if "muon" in str(g("optimizer")) else
                                                        g("optimizer")), t.optimizer)
    # MoE
    chk("num_experts", g("num_experts"), m.num_experts)
    if g("num_experts"):
        chk("moe_router_topk", g("moe_router_topk"), m.moe_router_topk)
        # before --moe-ffn-hidden-size (core_r0.9.0 and older) the experts are ffn_hidden_size wide (moe/experts.py)
        moe_ffn = g("moe_ffn_hidden_size") if g("moe_ffn_hidden_size") is not None else g("ffn_hidden_size")
        chk("moe_ffn_hidden_size", moe_ffn, m.moe_ffn_hidden_size or m.ffn_hidden_size)
        chk("moe_shared_expert_intermediate_size", g("moe_shared_expert_intermediate_size") or 0,
            m.moe_shared_expert_intermediate_size)
        d = g("moe_token_dispatcher_type")
        if d == "flex":
            d = g("moe_flex_dispatcher_backend") or "deepep"
        if g("moe_enable_deepep"):
            d = "deepep"
        chk("moe_token_dispatcher", d, t.moe_token_dispatcher)
        chk("moe_grouped_gemm", bool(g("moe_grouped_gemm")), t.moe_grouped_gemm)
        chk("moe_permute_fusion", bool(g("moe_permute_fusion")), t.moe_permute_fusion)
        freq = g("moe_layer_freq")
        if isinstance(freq, list):
            pat = tuple(int(x) for x in freq)
            mine = m.moe_layer_pattern or tuple(0 if i < m.moe_dense_first_layers else 1 for i in range(m.num_layers))
            chk("moe_layer_freq", pat, tuple(mine))
        elif isinstance(freq, int) and freq > 1:
            chk("moe_layer_freq", tuple(1 if i % freq == 0 else 0 for i in range(m.num_layers)),
                tuple(m.moe_layer_pattern or ()))
        if g("moe_router_num_groups"):
            chk("moe_router_num_groups", g("moe_router_num_groups"), m.moe_router_num_groups)
            chk("moe_router_group_topk", g("moe_router_group_topk"), m.moe_router_group_topk)
    # MLA, MTP
    chk("multi_latent_attention", bool(g("multi_latent_attention")), m.multi_latent_attention)
    if g("multi_latent_attention"):
        for k, got in (("q_lora_rank", m.q_lora_rank), ("kv_lora_rank", m.kv_lora_rank),
                       ("qk_head_dim", m.qk_head_dim), ("qk_pos_emb_head_dim", m.qk_pos_emb_head_dim),
                       ("v_head_dim", m.v_head_dim)):
            chk(k, g(k), got)
    chk("mtp_num_layers", g("mtp_num_layers") or 0, m.mtp_num_layers)
    # kernels, graphs, offload
    ab = "local" if g("transformer_impl") == "local" else g("attention_backend")  # the local spec: mcore's own
    if isinstance(ab, str) and ab in ("flash", "fused", "unfused", "local", "auto"):
        chk("attention_backend", ab, t.attention_backend)
    cg = g("cuda_graph_impl") or "none"
    if g("enable_cuda_graph"):
        cg = "local"
    if g("external_cuda_graph"):
        cg = "transformer_engine"
    if cg == "full_iteration":  # main / dev's impl (validate_args migrates 'local' + scope full_iteration to it):
        chk("cuda_graph_impl", "local", t.cuda_graph_impl)  # the plan's local impl with the full_iteration scope
        chk("cuda_graph_scope", ["full_iteration"], list(t.cuda_graph_scope))
    else:
        chk("cuda_graph_impl", cg, t.cuda_graph_impl)
    if cg not in ("none", "full_iteration") and g("cuda_graph_scope") not in (None, "full", []):
        sc = g("cuda_graph_scope")
        chk("cuda_graph_scope", sorted([sc] if isinstance(sc, str) else sc), sorted(t.cuda_graph_scope))
    chk("cpu_offloading_num_layers", g("cpu_offloading_num_layers") or 0 if g("cpu_offloading") else 0,
        t.offload.activation_layers)
    if g("optimizer_cpu_offload"):
        chk("optimizer_offload_fraction", g("optimizer_offload_fraction"), t.offload.optimizer_fraction)
    return out


# --------------------------------------------------------------------------- sources
def ref_files(tmp: Path, refs: list[str]) -> list[tuple[str, str, Path, list[Path]]]:
    """(source name, ref, root, files) of each ref's examples/ and functional tests (``survey_recipes.extract``)."""
    import survey_recipes as sr

    out = []
    for name, root, files in sr.extract(tmp, sr.ref_sources(refs)):
        ref = name.split(" ")[1]
        out.append((name, ref, root, files))
    return out


def changed_files(base: str, ref: str, root: Path, files: list[Path]) -> list[Path]:
    """The ``files`` of ``ref``'s extracted ``root`` (``examples`` / ``tests/functional_tests/test_cases``) that ``ref``
    changed since its merge base with ``base`` (a functional test's recipe counts through its folder's
    ``model_config.yaml``)."""
    import survey_recipes as sr

    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(sr.MIRROR), *a], capture_output=True, text=True, check=True).stdout

    mb = git("merge-base", base, ref).strip()
    sub = "examples" if root.name == "examples" else "tests/functional_tests/test_cases"
    changed = {ln[len(sub) + 1:] for ln in git("diff", "--name-only", mb, ref, "--", sub).splitlines()}
    return [f for f in files if str(f.relative_to(root)) in changed]


def fork_files(tmp: Path) -> list[tuple[str, str, Path, list[Path]]]:
    """The forks' launch scripts (:data:`FORK_MIRRORS`, fetched under /work/.mirror): every ``*.sh`` / ``*.slurm``
    / ``*.sbatch`` of their HEAD naming a ``pretrain_{gpt,mamba,hybrid}*.py``, less those whose blob a Megatron-LM
    branch or tag holds (the upstream copies other rounds compared)."""
    upstream: set[str] = set()
    refs = subprocess.run(["git", "-C", str(MIRROR), "for-each-ref", "--format=%(refname)", "refs/heads", "refs/tags"],
                          capture_output=True, text=True).stdout.split()
    for r in refs:
        if "/pull-request/" not in r:
            tree = subprocess.run(["git", "-C", str(MIRROR), "ls-tree", "-r", r], capture_output=True, text=True).stdout
            upstream.update(ln.split()[2] for ln in tree.splitlines() if ln.endswith(".sh"))
    out = []
    for m in FORK_MIRRORS:
        git = Path("/work/.mirror") / m / "repo"
        if not git.is_dir():
            continue
        hits = subprocess.run(["git", "-C", str(git), "grep", "-l", "-E", r"pretrain_(gpt|mamba|hybrid)\w*\.py", "HEAD",
                               "--", "*.sh", "*.slurm", "*.sbatch"], capture_output=True, text=True).stdout.split()
        paths = [h.split(":", 1)[1] for h in hits]
        paths = [p for p in paths if subprocess.run(["git", "-C", str(git), "rev-parse", f"HEAD:{p}"], capture_output=True,
                                                    text=True).stdout.strip() not in upstream]
        if not paths:
            continue
        out.append(_extracted(git, paths, tmp / m, m))
    return out


def _extracted(git: Path, paths: list[str], root: Path, name: str) -> tuple[str, str, Path, list[Path]]:
    """(name, "", root, files): ``paths`` of the mirror ``git``'s HEAD written under ``root`` (git archive | tar)."""
    root.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(git), "archive", "HEAD", *paths], capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return name, "", root, sorted(root / p for p in paths)


def mirror_files(tmp: Path) -> list[tuple[str, str, Path, list[Path]]]:
    """The other mirrors' launch scripts: every ``*.sh`` of their HEAD that names a ``pretrain_*.py`` program, the
    root scripts of every ROCm/Megatron-LM branch (``survey_recipes.extract_rocm_branches``), and Pai-Megatron-Patch's
    ``run_mcore_*.sh`` run with their README invocation (two-line wrappers, ``audit_other_teams.py``'s)."""
    import audit_other_teams as ao
    import survey_recipes as sr

    out = []
    for m in OTHER_MIRRORS:
        git = Path("/work/.mirror") / m / "repo"
        hits = subprocess.run(["git", "-C", str(git), "grep", "-l", "-E", r"pretrain_\w+\.py", "HEAD", "--", "*.sh"],
                              capture_output=True, text=True).stdout.split() if git.is_dir() else []
        paths = [h.split(":", 1)[1] for h in hits]
        if m.startswith("ROCm+Megatron") or not paths:
            continue
        out.append(_extracted(git, paths, tmp / m, m))
    if sr.ROCM_MIRROR.is_dir():
        name, root, files = sr.extract_rocm_branches(tmp)
        out.append((name, "", root, files))
    if ao.PAI.is_dir():
        ao._archive(ao.PAI, "HEAD", tmp / "pai-readme", "examples")
        ex = tmp / "pai-readme" / "examples"
        inv: dict[str, list[str]] = {}
        for md in sorted(ex.glob("*/README*.md")):
            for mt in re.finditer(r"(?:^|\n)\s*(?:ba)?sh\s+(run_mcore_\S+\.sh)\s*\\\n((?:[^\n]*\\\n)*[^\n]*)",
                                  md.read_text()):
                words = [w for w in re.sub(r"\\\n", " ", mt.group(2)).split() if w != "\\"]
                if words and not words[0].startswith("`"):
                    inv.setdefault(str(md.parent.relative_to(ex) / mt.group(1)), words)
        wraps = []
        for key, args in sorted(inv.items()):
            env, drop, _nodes = ao.PAI_SETUP.get(key, ({}, None, 1))
            if drop is not None:
                del args[drop]
            wrap = ex / f"readme_{key.replace('/', '_')}"
            wrap.write_text("#!/bin/bash\n" + "".join(f"export {k}={v}\n" for k, v in env.items())
                            + f"sh {key} {' '.join(args)}\n")
            wraps.append(wrap)
        out.append(("Pai-Megatron-Patch README invocations", "", ex, wraps))
    return out


def extract_tree(tmp: Path, ref: str) -> Path:
    dst = tmp / ("tree-" + ref.replace("/", "_"))
    if not dst.is_dir():
        dst.mkdir()
        archive = subprocess.run(["git", "-C", str(MIRROR), "archive", ref, "megatron"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dst)], input=archive, check=True)
        if importlib.util.find_spec("transformer_engine") is None:
            _guard_te_imports(dst)
    return dst


def _guard_te_imports(tree: Path) -> None:
    """Transformer Engine is not installed here: a module-level ``import transformer_engine as te`` (column 0, so
    in no ``try``; training-moe-june2025 ``megatron/core/transformer/transformer_layer.py``, which uses ``te`` only
    inside functions) is made the guarded import the other modules write (``te = None`` on ImportError), so that
    the parser's imports load.  Nothing of the parse or of ``validate_args`` depends on it.  The Transformer Engine
    extension module itself (``megatron/core/extensions/transformer_engine.py``: module-level classes subclass
    ``te.pytorch``; core_r0.11.0) keeps its import (a one-line ``from transformer_engine... import a, b`` elsewhere
    is guarded the same way, the names None), so it raises ImportError as on a machine without TE, which its
    importers catch (``try: from megatron.core.extensions.transformer_engine import ... except ImportError``)."""
    for f in tree.rglob("*.py"):
        if f.parts[-3:] == ("core", "extensions", "transformer_engine.py"):
            continue
        text = f.read_text()
        if not re.search(r"^(import|from) transformer_engine\b", text, re.M):
            continue
        text = re.sub(r"^import transformer_engine as (\w+)\s*$",
                      lambda m: f"try:\n    {m.group(0).strip()}\nexcept ImportError:\n    {m.group(1)} = None",
                      text, flags=re.M)
        # 25.04-alpha tensor_parallel/layers.py: 'from transformer_engine.pytorch.module.base import get_dummy_wgrad'
        # (used inside functions only): the names None without TE (read20)
        f.write_text(re.sub(r"^from transformer_engine[\w.]* import ([\w, ]+?)\s*$",
                            lambda m: f"try:\n    {m.group(0).strip()}\nexcept ImportError:\n    "
                                      + " = ".join(n.strip() for n in m.group(1).split(",")) + " = None",
                            text, flags=re.M))


def read_plan(f: Path, root: Path, name: str) -> tuple[Any, Optional[str]]:
    """(plan or None, the refusal) as ``survey_recipes.survey`` reads the file (its cluster rules)."""
    import survey_recipes as sr

    from primus_launch.adapters.megatron import load_megatron
    from primus_launch.errors import one_line
    from primus_launch.plan import Cluster, PlanError

    text = f.read_text(errors="replace")
    cluster = None
    if "functional" in name:
        clusters = sr.test_clusters(root)
        n, gpn = clusters.get(f.parent.name, (1, sr.env_gpus(text) or 8))
        cluster = Cluster(num_nodes=n, gpus_per_node=gpn)
    try:
        try:
            return load_megatron(f, cluster, sr.SCRIPT_ARGS.get(f.relative_to(root).as_posix(), ())), None
        except PlanError as e:
            if not re.search(r"world size|micro_batch_size x dp|interleaved schedule", str(e)):
                raise
            return sr._fitting_cluster(f, e), None
    except Exception as e:  # noqa: BLE001 -- a refusal (or a reader bug, printed as such)
        return None, sr._untemp(one_line(e))


def run_source(name: str, ref: str, root: Path, files: list[Path], tree: Path, verbose: bool,
               strict: bool) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    rows: list[tuple[Path, Any, Optional[str], Optional[list[str]], dict]] = []
    jobs = []
    import survey_recipes as sr

    for f in files:
        text = f.read_text(errors="replace")
        family = "functional" in name and any(d in sr.FAMILY_DIRS and d not in ("hybrid", "mamba")
                                               for d in f.relative_to(root).parts[:-1])
        program = PROGRAMS if ref else re.compile(r"pretrain_\w+\.py")  # other teams: their own entry points
        if (f.suffix == ".sh" and not program.search(text) and not f.name.startswith("readme_")) or family:
            counts["out of scope"] += 1  # no GPT / hybrid training program named: a tool, BERT, T5, multimodal
            continue
        plan, why = read_plan(f, root, name)
        if why is not None and sr.classify_error(why).startswith(("not a training", "model family")):
            counts["out of scope"] += 1  # refused by name: another model family or mode, a tool, no arguments
            continue
        try:
            argv, env = recipe_argv(f, plan)
        except Exception:  # noqa: BLE001 -- the reader cannot find a command: no argv
            argv, env = None, {}
        rows.append((f, plan, why, argv, env))
        if argv is not None:
            world = plan.cluster.num_nodes * plan.cluster.gpus_per_node if plan else 8
            gpu = plan.cluster.gpu if plan else ""
            arch = 10 if re.search(r"b[23]00", gpu) else 8 if "a100" in gpu else 9
            jobs.append({"id": str(f), "argv": argv, "world": world, "env": env, "arch": arch,
                         "vocab": plan.model.vocab_size if plan else None})
    parsed = parse_with_megatron(tree, jobs, strict)
    unknown: collections.Counter = collections.Counter()
    why_m: collections.Counter = collections.Counter()
    for f, plan, why, argv, env in rows:
        rel = f.relative_to(root)
        r = parsed.get(str(f))
        build = model_build_refusal(r["ns"], env) if r and r["status"] == "ok" else None
        meg_refuses = r is None or r["status"] != "ok" or build is not None
        mwhy = "no training command" if argv is None else build or (r or {}).get("msg", "not parsed")
        if plan is None:
            counts["both refuse" if meg_refuses else "refused"] += 1
            if verbose or not meg_refuses:
                print(f"{'MREF' if meg_refuses else 'REF '} {rel}: {why[:150]}" + (f"  [megatron: {mwhy[:80]}]"
                                                                                  if meg_refuses else ""))
            continue
        unknown.update(r.get("unknown", []) if r else [])
        if meg_refuses:
            counts["read, Megatron refuses"] += 1
            why_m[re.sub(r"\d+", "N", mwhy.split(" @ ")[0])[:90]] += 1
            if verbose:
                print(f"MEGATRON-REFUSES {rel}: {mwhy[:160]}")
            continue
        diffs = megatron_vs_plan(r["ns"], plan)
        if {"--patch-tokenizer-type", "--extra-vocab-size"} & set(r.get("unknown") or []):
            # Pai-Megatron-Patch's and the ROCm Qwen branches' tokenizers pad their own vocabulary (vocab + extra)
            diffs.pop("make_vocab_size_divisible_by", None)
        tally(counts, rel, diffs, show=verbose)
    for w, k in why_m.most_common(4):
        print(f"  read, Megatron refuses x{k}: {w}")
    if unknown:
        print(f"  flags Megatron-LM {ref or 'main'} does not know (read by parse_known_args): "
              + ", ".join(f"{k} x{v}" for k, v in unknown.most_common(12)))
    return counts


def yaml_cfg_sources() -> list[tuple[str, str]]:
    """(ref, blob) for each distinct ``examples/gpt3/gpt_config.yaml`` (Megatron-LM's ``--yaml-cfg`` example) on
    ``main``, the ``core_r*`` / ``core_v*`` branches and tags and the ``main2dev/*`` branches: the first ref
    holding it."""
    refs = subprocess.run(["git", "-C", str(MIRROR), "for-each-ref", "--format=%(refname:short)", "refs/heads",
                           "refs/tags"], capture_output=True, text=True, check=True).stdout.split()
    seen: dict[str, str] = {}
    for r in sorted(refs):
        if not re.match(r"(main$|core_r|core_v|main2dev/)", r):
            continue
        b = subprocess.run(["git", "-C", str(MIRROR), "rev-parse", "-q", "--verify", f"{r}:examples/gpt3/gpt_config.yaml"],
                           capture_output=True, text=True).stdout.strip()
        if b:
            seen.setdefault(b, r)
    return [(r, b) for b, r in seen.items()]


def run_yaml_cfg(tmp: Path, verbose: bool) -> collections.Counter:
    """Each distinct ``--yaml-cfg`` example read by ``load_megatron`` and by its own ref's ``load_yaml`` +
    ``validate_yaml`` (the tokenizer made ``NullTokenizer`` with ``vocab_size: 32000`` in both: the examples name a
    SentencePiece model they do not ship; ``CUDA_DEVICE_MAX_CONNECTIONS=1``, the launch environment the examples'
    TP overlap asks).  Where ``validate_yaml`` reads an argument the example no longer writes (the experimental path
    trailing the argument list), the file's values over ``parse_args``' defaults go through ``validate_args``."""
    from primus_launch.adapters.megatron import load_megatron
    from primus_launch.plan import Cluster

    counts: collections.Counter = collections.Counter()
    for ref, blob in yaml_cfg_sources():
        text = subprocess.run(["git", "-C", str(MIRROR), "cat-file", "-p", blob], capture_output=True, text=True,
                              check=True).stdout
        text = re.sub(r"^tokenizer_type:.*$", "tokenizer_type: NullTokenizer\nvocab_size: 32000", text, flags=re.M)
        f = tmp / f"gpt_config-{blob[:10]}.yaml"
        f.write_text(text)
        label = f"{ref}:examples/gpt3/gpt_config.yaml ({blob[:10]})"
        tree = extract_tree(tmp, ref)
        r = parse_with_megatron(tree, [{"id": "y", "argv": ["--yaml-cfg", str(f)], "world": 8,
                                        "yaml_cfg": str(f), "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}}], strict=True).get("y")
        try:
            plan, why = load_megatron(f, Cluster(num_nodes=1, gpus_per_node=8)), None
        except Exception as e:  # noqa: BLE001
            plan, why = None, str(e)
        meg_refuses = r is None or r["status"] != "ok"
        if plan is None:
            counts["both refuse" if meg_refuses else "refused"] += 1
            print(f"{'MREF' if meg_refuses else 'REF '} {label}: {why[:200]}")
            continue
        if meg_refuses:
            counts["read, Megatron refuses"] += 1
            print(f"MEGATRON-REFUSES {label}: {(r or {}).get('msg', 'not parsed')[:200]}")
            continue
        diffs = megatron_vs_plan(r["ns"], plan)
        if r.get("fallback"):
            label += f" [Megatron's {r['fallback']}: compared with parse_args' defaults + the file, validate_args]"
        tally(counts, label, diffs)
    return counts


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref", action="append", default=[], help="Megatron-LM branch / tag (default: main, core_v0.16.1)")
    ap.add_argument("--mirror", action="store_true", help="also the other mirrors' launch scripts")
    ap.add_argument("--mirror-only", action="store_true", help="the other mirrors' launch scripts alone (no --ref)")
    ap.add_argument("--forks", action="store_true", help="the forks' own launch scripts alone (FORK_MIRRORS; read19)")
    ap.add_argument("--other-ref", default="main", help="the Megatron-LM checkout that parses the other mirrors' scripts")
    ap.add_argument("--yaml-cfg", action="store_true", help="the --yaml-cfg examples (gpt_config.yaml) of every ref")
    ap.add_argument("--changed-since", metavar="BASE",
                    help="with --ref: only the files each ref changed since its merge base with BASE (read21)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--lenient", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        _child(a.child, not a.lenient)
        return 0
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    total: collections.Counter = collections.Counter()
    with tempfile.TemporaryDirectory(prefix="survey-") as d:
        tmp = Path(d)
        if a.yaml_cfg:
            counts = run_yaml_cfg(tmp, a.verbose)
            print("== --yaml-cfg examples vs their refs' load_yaml + validate_yaml: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
            return 0
        sources = [] if a.mirror_only or a.forks else ref_files(tmp, a.ref or ["main", "core_v0.16.1"])
        if a.forks:
            sources += fork_files(tmp)
        if a.mirror or a.mirror_only:
            sources += mirror_files(tmp)
        if a.changed_since:
            sources = [(name, ref, root, changed_files(a.changed_since, ref, root, files)) if ref else (name, ref, root, files)
                       for name, ref, root, files in sources]
        for name, ref, root, files in sources:
            if not files:
                print(f"== {name}: no file changed since {a.changed_since}")
                continue
            tree = extract_tree(tmp, ref or a.other_ref)
            counts = run_source(name, ref or a.other_ref, root, files, tree, a.verbose, strict=bool(ref))
            total += counts
            print(f"== {name} ({len(files)} files) vs Megatron-LM {ref or a.other_ref}: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print("== all: " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
