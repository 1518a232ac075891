"""Megatron-LM's own start-up validation of a launch, run on the CPU at the target world size.

A Megatron-LM source tree (``megatron/training`` is not in the megatron-core wheel) is put first
on ``sys.path`` of a child process, which then runs, for each case, what ``pretrain_gpt.py`` runs
before the first step (``megatron/training/initialize.py`` ``initialize_megatron`` and
``pretrain_gpt.py`` ``model_provider``):

1. ``parse_args`` (``megatron/training/arguments.py``) on the launch's argv, with the launch's
   environment variables and ``WORLD_SIZE`` / ``RANK=0`` set as torchrun sets them;
2. ``validate_args(args, {'tokenizer_type': 'GPT2BPETokenizer'})`` (pretrain_gpt.py's defaults);
3. the micro-batch calculator (``init_num_microbatches_calculator``, as ``set_global_variables``);
4. the parallel state: ``_initialize_distributed`` on torch's fake process group
   (``args.fake_process_group``, Megatron's own switch, with the gloo groups off as
   ``validate_args`` turns them off for it) -- ``initialize_model_parallel`` builds every group of
   rank 0 at the full world size;
5. ``core_transformer_config_from_args`` (TransformerConfig / MLATransformerConfig ``__post_init__``).

What is patched to run without a GPU (and nothing else):

- ``megatron.training.arguments.get_device_arch_version`` returns the target GPU's compute
  capability major (H100 9, B200 10, ...; ROCm reports 9 for gfx942/gfx950) instead of reading
  ``cuda:0``;
- ``megatron.core.utils._te_version`` is set to the assumed Transformer Engine version (TE is not
  installed here), so ``is_te_min_version`` answers as on the target, and TE kernels that
  TransformerConfig checks for by presence (``rope_utils.fused_apply_rotary_pos_emb[_thd]``,
  ``moe_utils.fused_permute`` & co.) are stand-ins that raise if called;
- ``torch.cuda.get_device_capability`` returns (that major, 0) (validate_args checks it for grouped
  GEMM), ``torch.cuda.device_count`` the GPUs per node (``_initialize_distributed`` then sets up the
  model-parallel groups), and ``torch.cuda.set_device`` / ``set_stream`` / ``Stream`` do nothing;
  ``parallel_state.get_nccl_options`` returns None (NCCL communicator options, e.g. the
  high-priority streams FSDP asks for, need ``ProcessGroupNCCL``, absent from a CPU build, and tune
  nothing on the fake group);
- modules missing from this environment that ``megatron.training`` imports only for tokenizers
  (``six``, ``regex``, ...) are empty stand-ins; ``typing.override`` (Python 3.12) is
  ``typing_extensions.override`` on Python 3.11 (Megatron-LM main/dev).

Run ``python -m primus_launch.frameworks.mlm_validate --mlm DIR`` with a JSON list of cases on
stdin; it prints one JSON list of results.  :func:`validate_launches` does that from Python.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# environment variables a launch may set that Megatron-LM's validation reads; cleared before a case
_ENV_READ = ("CUDA_DEVICE_MAX_CONNECTIONS", "NVTE_CPU_OFFLOAD_V1", "PYTORCH_CUDA_ALLOC_CONF",
             "NCCL_GRAPH_REGISTER", "NCCL_ALGO", "WORLD_SIZE", "RANK", "LOCAL_RANK")
# top-level modules megatron/training imports at import time only for tokenizers / logging
_STAND_INS = ("six", "regex", "sentencepiece", "tiktoken", "nltk", "wandb", "tensorboard",
              "flask", "flask_restful", "einops", "nvtx", "tensorstore", "zarr", "datasets")

# compute-capability major of each GPU of the hardware DB (torch.cuda.get_device_properties().major)
ARCH_MAJOR = {"a100-sxm-80gb": 8, "a100-sxm-40gb": 8, "h100-sxm": 9, "h100-sxm-96gb-500w": 9, "h200": 9,
              "b200": 10, "b300": 10, "gb200": 10, "gb300": 10,
              "mi300x": 9, "mi325x": 9, "mi350x": 9, "mi355x": 9}
# Transformer Engine assumed on the target: the release Megatron-LM's MoE recipes build
# (examples/moe_recipes/*.yaml DEPENDENCIES: TE_TAG=release_v2.14)
DEFAULT_TE_VERSION = "2.14.0"


@dataclass
class Launch:
    """One launch to validate: Megatron arguments (argv after the program, or ``dests``: argument
    destinations and values, as a YAML recipe states them), environment, cluster."""

    name: str
    argv: list[str]
    env: dict[str, str]
    world_size: int
    gpus_per_node: int
    arch_major: int
    te_version: str = DEFAULT_TE_VERSION
    dests: dict[str, Any] | None = None
    # AMD Primus adds its own arguments (and tokenizer types) to Megatron's namespace: with
    # ``primus``, destinations this Megatron-LM's parser does not know are left out (and listed in the
    # verdict's warnings), and a tokenizer type it does not offer is read as HuggingFaceTokenizer
    primus: bool = False


@dataclass
class Verdict:
    """The outcome: ``ok``, or the first stage that rejected the launch and Megatron's message."""

    name: str
    ok: bool
    stage: str = ""
    error: str = ""
    warnings: list[str] = field(default_factory=list)


def validate_launches(mlm: str | Path, launches: list[Launch], timeout: float = 1800.0) -> list[Verdict]:
    """Run Megatron-LM's own validation (tree ``mlm``) on every launch in one child process."""
    env = dict(os.environ)
    for k in _ENV_READ:
        env.pop(k, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                    env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "primus_launch.frameworks.mlm_validate", "--mlm", str(mlm)],
                          input=json.dumps([asdict(x) for x in launches]), capture_output=True, text=True,
                          env=env, timeout=timeout)
    out = proc.stdout.strip().splitlines()
    if proc.returncode or not out:
        raise RuntimeError(f"Megatron-LM validation worker failed (rc {proc.returncode}): "
                           f"{proc.stderr.strip()[-2000:]}")
    return [Verdict(**d) for d in json.loads(out[-1])]


# --------------------------------------------------------------------------- the child process
def _install_stand_ins() -> None:
    import importlib.abc
    import importlib.machinery
    import types
    import typing

    if not hasattr(typing, "override"):
        import typing_extensions

        typing.override = typing_extensions.override  # type: ignore[attr-defined]

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name.split(".")[0] in _STAND_INS:
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec: Any) -> Any:
            m = types.ModuleType(spec.name)
            m.__path__ = []  # type: ignore[attr-defined]
            return m

        def exec_module(self, module: Any) -> None:
            return None

    sys.meta_path.append(_Finder())  # last: only for modules that are really missing


def _last_error(e: BaseException, captured: str) -> str:
    if isinstance(e, SystemExit):  # argparse: "pretrain_gpt.py: error: unrecognized arguments: ..."
        lines = [ln for ln in captured.splitlines() if "error:" in ln]
        return lines[-1].split("error:", 1)[1].strip() if lines else f"exit {e.code}"
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


@contextlib.contextmanager
def _no_cuda_device(gpus_per_node: int, arch_major: int):
    import torch

    saved = (torch.cuda.device_count, torch.cuda.set_device, torch.cuda.set_stream, torch.cuda.Stream,
             torch.cuda.get_device_capability)
    torch.cuda.device_count = lambda: gpus_per_node  # type: ignore[assignment]
    torch.cuda.get_device_capability = lambda *a, **k: (arch_major, 0)  # type: ignore[assignment]
    torch.cuda.set_device = lambda *a, **k: None  # type: ignore[assignment]
    torch.cuda.set_stream = lambda *a, **k: None  # type: ignore[assignment]
    torch.cuda.Stream = lambda *a, **k: None  # type: ignore[assignment,misc]
    from megatron.core import parallel_state

    saved_nccl = parallel_state.get_nccl_options
    parallel_state.get_nccl_options = lambda *a, **k: None  # NCCL tuning: nothing to tune on the fake group
    try:
        yield
    finally:
        parallel_state.get_nccl_options = saved_nccl
        (torch.cuda.device_count, torch.cuda.set_device, torch.cuda.set_stream, torch.cuda.Stream,
         torch.cuda.get_device_capability) = saved


# TE kernels that megatron-core imports when TE is installed and that TransformerConfig.__post_init__
# checks for by presence (apply_rope_fusion, moe_permute_fusion)
_TE_KERNELS = {
    "megatron.core.models.common.embeddings.rope_utils": ("fused_apply_rotary_pos_emb",
                                                          "fused_apply_rotary_pos_emb_thd"),
    "megatron.core.transformer.moe.moe_utils": ("fused_permute", "fused_permute_with_probs", "fused_unpermute",
                                                "fused_sort_chunks_by_index", "fused_sort_chunks_by_index_with_probs",
                                                "fused_topk_with_score_function", "fused_moe_aux_loss",
                                                "fused_compute_score_for_moe_aux_loss"),
}


def _te_kernel_stand_in(*_a: Any, **_k: Any) -> Any:
    raise RuntimeError("Transformer Engine kernel stand-in: validation only, not for running")


def _te_present() -> None:
    """Transformer Engine is on the target: the TE kernels that TransformerConfig checks for by
    presence are stand-ins (never called during validation)."""
    import importlib

    for mod_name, names in _TE_KERNELS.items():
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        for name in names:
            if getattr(mod, name, None) is None:
                setattr(mod, name, _te_kernel_stand_in)


def _argv_of_dests(parser: Any, dests: dict[str, Any], lenient: bool = False,
                   dropped: list[str] | None = None) -> list[str]:
    """The command line Megatron's parser reads as ``dests``: each destination through its own
    action (``store_true`` flag when true, ``store_false`` flag when false, lists as ``nargs``
    values), as NVIDIA's YAML launchers turn ``ARGS`` / ``MODEL_ARGS`` into flags.  A destination
    the parser does not know is passed as ``--name`` so that the parser rejects it."""
    import argparse

    by_dest: dict[str, Any] = {}
    for act in parser._actions:  # noqa: SLF001 - the parser's own table of actions
        if act.option_strings:
            by_dest.setdefault(act.dest, act)
    out: list[str] = []
    for dest, val in dests.items():
        act = by_dest.get(dest)
        if val is None or (isinstance(val, (list, tuple)) and not val):
            continue  # null / [] in a YAML: the argument's default
        if act is None:
            if lenient:
                (dropped if dropped is not None else []).append(dest)
            else:
                out += ["--" + dest.replace("_", "-"), str(val)]
            continue
        if lenient and act.choices is not None and not isinstance(val, (list, tuple)) and val not in act.choices:
            if dest != "tokenizer_type":
                (dropped if dropped is not None else []).append(f"{dest}={val}")
                continue
            val = "HuggingFaceTokenizer"  # Primus's own tokenizer types (Llama3Tokenizer, ...)
        flag = next((o for o in act.option_strings if o.startswith("--")), act.option_strings[0])
        if isinstance(act, argparse.BooleanOptionalAction):
            out += [flag if val else "--no-" + flag[2:]]
        elif isinstance(act, argparse._StoreFalseAction):  # noqa: SLF001
            out += [flag] if not val else []
        elif act.nargs == 0:  # store_true / store_const: the flag when set
            out += [flag] if val else []
        elif isinstance(val, (list, tuple)):
            out += [flag, *(str(v) for v in val)]
        elif isinstance(val, bool):
            out += [flag, str(val).lower()]
        else:
            out += [flag, str(val)]
    return out


def _reset() -> None:
    import torch

    from megatron.core import parallel_state as mpu
    from megatron.core.num_microbatches_calculator import destroy_num_microbatches_calculator
    from megatron.training import global_vars

    with contextlib.suppress(Exception):
        mpu.destroy_model_parallel()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    destroy_num_microbatches_calculator()
    global_vars._GLOBAL_ARGS = None


def _run_one(case: dict) -> dict:
    import argparse
    import warnings

    from packaging.version import Version

    import megatron.core.utils as mcu
    import megatron.training.arguments as margs
    from megatron.core.num_microbatches_calculator import init_num_microbatches_calculator
    from megatron.training import global_vars
    from megatron.training import initialize as minit

    _reset()
    for k in _ENV_READ:
        os.environ.pop(k, None)
    os.environ.update({k: str(v) for k, v in case["env"].items()})
    os.environ["WORLD_SIZE"], os.environ["RANK"], os.environ["LOCAL_RANK"] = str(case["world_size"]), "0", "0"
    margs.get_device_arch_version = lambda: case["arch_major"]
    mcu._te_version = Version(case["te_version"])
    _te_present()
    res = {"name": case["name"], "ok": False, "stage": "", "error": "", "warnings": []}
    buf = io.StringIO()
    stage = "parse_args"
    dropped: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf), \
                    _no_cuda_device(case["gpus_per_node"], case["arch_major"]):
                argv = list(case["argv"])
                if case.get("dests") is not None:
                    parser = margs.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
                    argv += _argv_of_dests(parser, case["dests"], case.get("primus", False), dropped)
                sys.argv = ["pretrain_gpt.py", *argv]
                args = margs.parse_args()
                stage = "validate_args"
                margs.validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})
                stage = "microbatches"
                global_vars.set_args(args)
                init_num_microbatches_calculator(args.rank, args.rampup_batch_size, args.global_batch_size,
                                                 args.micro_batch_size, args.data_parallel_size,
                                                 args.decrease_batch_size_if_needed)
                stage = "parallel_state"
                # what validate_args sets for --fake-process-group (gloo groups cannot form on a fake store)
                args.fake_process_group, args.enable_gloo_process_groups = True, False
                minit._initialize_distributed(None, None, None)
                stage = "transformer_config"
                margs.core_transformer_config_from_args(args)
            res["ok"] = True
        except BaseException as e:  # noqa: BLE001 - every rejection is the answer
            res["stage"], res["error"] = stage, _last_error(e, buf.getvalue())
        res["warnings"] = sorted({" ".join(str(w.message).split())[:200] for w in caught})[:20]
        if dropped:
            res["warnings"].insert(0, "not Megatron-LM arguments here (Primus's own): " + ", ".join(dropped))
    return res


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlm", required=True, help="Megatron-LM source tree (holds megatron/training)")
    a = ap.parse_args(argv)
    cases = json.loads(sys.stdin.read())
    _install_stand_ins()
    sys.path.insert(0, str(Path(a.mlm).resolve()))
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        import megatron.training.arguments  # noqa: F401 - import once, before the cases

        out = [_run_one(c) for c in cases]
    real_stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
