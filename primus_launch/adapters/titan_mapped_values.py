"""The values TorchTitan allows for the job-TOML keys primus-launch maps into the plan, checked before they are read.

TorchTitan's ``ConfigManager`` builds its ``JobConfig`` dataclasses from the TOML without checking the values
(torchtitan v0.2.2 ``torchtitan/config/manager.py:160-180`` ``_dict_to_dataclass``: ``cls(**result)``; checked on
the CPU with that tag's ``config`` package and tyro 1.0.17: ``converters = "float8"``, ``recipe_name =
"colwise"``, ``selective_ac_option = 2`` all come back as written), so a wrong value fails in the trainer or does
something else than meant, where the reader would project a run TorchTitan never makes.  The rules below are
the fields' annotations at the release that introduced them (the reader takes v0.1 and v0.2 TOMLs) and the
checks of the code that reads them:

- ``model.converters``: ``list[str]`` (v0.2.2 ``config/job_config.py:118``, v0.1.0 ``config_manager.py:106``),
  each a registered converter name (``protocols/model_converter.py:62``: ``_registry_model_converter_cls[name]``,
  a KeyError for any other; v0.2.x registers ``quantize.linear.float8``, ``quantize.grouped_mm.float8``
  (``components/quantization/float8.py:238-239``), ``quantize.linear.mx``, ``quantize.grouped_mm.mx``
  (``mx.py:171-172``); v0.1.0 ``float8``, ``mx``); a string iterates as its letters, so ``"float8"`` is refused;
  a job that imports its own module (``experimental.custom_import``) may register more names;
- ``quantize.linear.float8.recipe_name``: ``Literal["tensorwise", "rowwise", "rowwise_with_gw_hp"] | None``
  (v0.2.2 ``job_config.py:738``; ``[float8] recipe_name`` v0.1.0 ``config_manager.py:491``);
- ``quantize.linear.mx.mxfp8_dim1_cast_kernel_choice``: ``Literal["triton", "cuda", "torch"]`` (v0.2.2
  ``job_config.py:768``, v0.2.0 ``:686``); ``[mx] use_fp8_dim1_cast_triton_kernel``: ``bool`` (v0.1.0 ``:511``);
- ``quantize.linear.mx.recipe_name``: ``str`` (v0.2.2 ``job_config.py:777``; torchao's ``from_recipe_name``
  judges the name); ``quantize.grouped_mm.mx.recipe_name``: ``Literal["mxfp8"]`` (``:795``);
- ``quantize.grouped_mm.{float8,mx}.fqns``: ``list[str] | str`` (``:757``, ``:802``);
- ``activation_checkpoint.selective_ac_option``: ``str`` (``job_config.py:655``), ``"op"`` or digits
  (``distributed/activation_checkpoint.py:177-183``: ``.isdigit()`` -- an integer 2 raises AttributeError there,
  ``" 2 "`` ValueError "Invalid selective AC option");
- ``parallelism.module_fqns_per_model_part``: ``list[list[str]] | None`` (``job_config.py:367``).
"""

from __future__ import annotations

from typing import Any, Optional

from primus_launch.adapters.titan_job_types import Kind, job_data, job_get, type_problem
from primus_launch.plan import PlanError

_FP8_RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")
_DIM1_KERNELS = ("triton", "cuda", "torch")

#: the converter names torchtitan registers (v0.2.x, v0.1.0), and those the reader knows from other sources
#: (``float8_linear`` / ``mx_linear``: the adapter's early names; ``primus_turbo``: Primus's converter)
CONVERTERS = ("quantize.linear.float8", "quantize.grouped_mm.float8", "quantize.linear.mx", "quantize.grouped_mm.mx",
              "float8", "mx", "float8_linear", "mx_linear", "primus_turbo")

MAPPED_TYPES: dict[str, Kind] = {
    "model.converters": "strs",
    "quantize.linear.float8.recipe_name": _FP8_RECIPES,
    "float8.recipe_name": _FP8_RECIPES,
    "quantize.linear.mx.mxfp8_dim1_cast_kernel_choice": _DIM1_KERNELS,
    "mx.mxfp8_dim1_cast_kernel_choice": _DIM1_KERNELS,
    "mx.use_fp8_dim1_cast_triton_kernel": "bool",
    "quantize.linear.mx.recipe_name": "str",
    "mx.recipe_name": "str",
    "quantize.grouped_mm.mx.recipe_name": ("mxfp8",),
    "activation_checkpoint.selective_ac_option": "str",
}

_STRS_OR_STR = ("quantize.grouped_mm.float8.fqns", "quantize.grouped_mm.mx.fqns")


def _problem(job: dict, path: str, v: Any) -> Optional[str]:
    """What TorchTitan allows for the mapped key ``path`` when ``v`` breaks it, else None."""
    if path in MAPPED_TYPES:
        why = type_problem(MAPPED_TYPES[path], v)
        if why:
            return 'a list of converter names (e.g. ["quantize.linear.float8"])' if path == "model.converters" else why
    if path == "model.converters":
        if job_get(job, "experimental.custom_import"):
            return None
        bad = [c for c in v if c not in CONVERTERS]
        return f"converter names torchtitan registers ({', '.join(CONVERTERS[:6])})" if bad else None
    if path == "activation_checkpoint.selective_ac_option":
        return None if v == "op" or v.isdigit() else "'op' or a non-negative integer in quotes (every N-th layer)"
    if path in _STRS_OR_STR:
        ok = isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
        return None if ok else 'a list of module names (e.g. ["experts"]) or one name'
    if path == "parallelism.module_fqns_per_model_part":
        ok = isinstance(v, list) and all(isinstance(p, list) and all(isinstance(x, str) for x in p) for p in v)
        return None if ok else 'a list of lists of module names (e.g. [["tok_embeddings", "layers.0"], ...])'
    return None


def check_mapped_values(job: dict) -> None:
    """Raise the one-line :class:`PlanError` (``table.key=value: what is allowed``) for the first key the reader
    maps into the plan whose value TorchTitan does not allow (see the module docstring); absent keys pass."""
    for path in (*MAPPED_TYPES, *_STRS_OR_STR, "parallelism.module_fqns_per_model_part"):
        v = job_get(job, path)
        if v is None:
            continue
        why = _problem(job, path, v)
        if why:
            raise PlanError(path, v, why)


def earlier_names() -> frozenset[str]:
    """The keys of torchtitan v0.1.0 / v0.2.0 / v0.2.1's ``JobConfig`` that v0.2.2's does not hold
    (``primus_launch/data/torchtitan-0.2.2-job.json`` ``earlier_names``, built by ``scripts/build_titan_job_types.py``):
    a job of those releases may set them (``[checkpoint] last_save_model_weights_only``, ``[job] print_args``)."""
    return frozenset(job_data().get("earlier_names", ()))


#: torchtitan main's names after 0.3.0 (pytorch/torchtitan 73aed7f6c "fold batch dim" (#4121), 2026-08-20,
#: torchtitan/config/configs.py): counts of tokens and micro-batches where 0.3.0 has sequences and a micro-batch
#: size; not a rename a reader may apply (the units differ), so a key of them is refused with the 0.3.0 field to give
LATER_NAMES = {
    "training.num_tokens_per_microbatch_per_dp_rank": "training.local_batch_size (sequences, = these tokens / seq_len)",
    "training.num_tokens_per_train_step": "training.global_batch_size (sequences, = these tokens / seq_len)",
    "training.max_context_length": "training.seq_len",
    "parallelism.num_pp_microbatches": "parallelism.pipeline_parallel_microbatch_size (sequences per pipeline "
                                       "micro-batch, = local_batch_size / these micro-batches)",
}


def later_name_hint(path: str) -> Optional[str]:
    """For a key of torchtitan main that 0.3.0 does not know (:data:`LATER_NAMES`): what to give instead."""
    instead = LATER_NAMES.get(path)
    return None if instead is None else (f"a torchtitan main name (after 0.3.0: pytorch/torchtitan#4121, 2026-08-20); "
                                         f"0.3.0, which this reader follows, takes {instead}")


def unknown_key_table(path: str, known: "set[str] | frozenset[str]") -> str:
    """The table TorchTitan names for the unknown key ``path``: the longest of its parent tables that holds a
    known key (v0.2.2 ``config/manager.py:164-170`` refuses it from the dataclass of that (sub-)table:
    "Invalid field names in <class ...DataLoader>" for ``[training.dataloader] num_wrokers``)."""
    parts = path.split(".")
    for n in range(len(parts) - 1, 0, -1):
        table = ".".join(parts[:n])
        if any(k.startswith(table + ".") for k in known):
            return table
    return parts[0]
