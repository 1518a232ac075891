"""TorchTitan names newer than torchtitan 0.3.0: a recipe written for torchtitan main, refused by name.

The TorchTitan readers read torchtitan 0.3.0 (the bundled registry snapshot, ``titan_snapshot``) and the
v0.2 job TOMLs.  torchtitan main moved on after 0.3.0 (``pytorch/torchtitan``, read at b5bcd76c6,
2026-08-21):

- PR #4121 "fold batch dim" (73aed7f6c, 2026-08-20) renamed the batch fields of ``config/configs.py`` and
  changed their unit: ``training.local_batch_size`` (sequences per DP rank and accumulation step) became
  ``training.num_tokens_per_microbatch_per_dp_rank`` (token slots of ONE model forward, i.e. of one pipeline
  micro-batch), ``training.global_batch_size`` became ``training.num_tokens_per_train_step`` (tokens),
  ``training.seq_len`` became ``training.max_context_length``, and ``parallelism.pipeline_parallel_microbatch_size``
  (a size) became ``parallelism.num_pp_microbatches`` (a count; ``trainer.py``: the DP rank's tokens per
  accumulation step are ``num_tokens_per_microbatch_per_dp_rank * num_pp_microbatches``);
- PR #4088 (1b04fc1c3, 2026-08-19) replaced ``torchtitan.components.dataloader`` / ``hf_datasets`` loaders with
  ``torchtitan.components.data`` (Grain: ``GrainDataLoader``, packing configs).

torchtitan 0.3.0's parser refuses those names (tyro: unrecognized options; ``TrainingConfig`` takes no such
keyword).  The reader refuses them too, saying the recipe was written for a torchtitan newer than 0.3.0 and what
0.3.0 calls the field: a token budget is not a batch of sequences (main's micro-batch may be shorter than its
context), so no value is translated.
"""

from __future__ import annotations

import re
from typing import Optional

#: main's option -> (torchtitan 0.3.0's field, what differs)
RENAMED_AFTER_030: dict[str, tuple[str, str]] = {
    "training.num_tokens_per_microbatch_per_dp_rank": (
        "training.local_batch_size", "main counts token slots of one pipeline micro-batch, 0.3.0 sequences per DP rank"),
    "training.num_tokens_per_train_step": ("training.global_batch_size", "main counts tokens, 0.3.0 sequences"),
    "training.max_context_length": ("training.seq_len", "the same length, renamed"),
    "parallelism.num_pp_microbatches": (
        "parallelism.pipeline_parallel_microbatch_size", "main gives the number of pipeline micro-batches, 0.3.0 "
                                                         "their size in sequences"),
}

#: modules torchtitan main has and 0.3.0 lacks -> where 0.3.0 keeps that
MODULES_AFTER_030: dict[str, str] = {
    "torchtitan.components.data": "torchtitan.components.dataloader / torchtitan.hf_datasets (Grain loaders: "
                                  "main PR #4088)",
}

NEWER = "written for a torchtitan newer than 0.3.0 (torchtitan main, PR #4121 'fold batch dim', 73aed7f6c)"


def renamed_hint(path: str) -> Optional[str]:
    """The refusal's allowed-part for ``path`` (``training.max_context_length``, a dotted option or TOML path)
    when torchtitan main has it and 0.3.0 has it under another name; None otherwise."""
    hit = RENAMED_AFTER_030.get(path.lstrip("-").replace("-", "_"))
    if hit is None:
        return None
    old, why = hit
    return f"{NEWER}; torchtitan 0.3.0's parser refuses it; 0.3.0 calls it {old} ({why}); not translated"


def newer_in_error(text: str) -> Optional[str]:
    """A note for an error torchtitan 0.3.0 raised loading a user's config module (``TypeError: ...
    unexpected keyword argument 'max_context_length'``, ``AttributeError: ... 'num_pp_microbatches'``,
    ``ModuleNotFoundError: No module named 'torchtitan.components.data'``) when it names a torchtitan-main-only
    field or module; None otherwise."""
    for path, (old, _) in RENAMED_AFTER_030.items():
        leaf = path.split(".", 1)[1]
        if re.search(rf"\b{leaf}\b", text):
            return f"{NEWER}: {path} is 0.3.0's {old}"
    for mod, old in MODULES_AFTER_030.items():
        if re.search(rf"'{re.escape(mod)}(\.\w+)*'", text):
            return f"written for a torchtitan newer than 0.3.0: {mod} is main's (0.3.0: {old})"
    return None


def check_registry_version(stated: str, registry: str) -> None:
    """Refuse a run a wrapper's ``[software] torchtitan`` states newer than the torchtitan whose config registry the
    reader reads (``registry``: the snapshot's version, 0.3.0 bundled) for a ``--module`` / ``--config`` launch: the
    same config function name holds other values there (torchtitan main's
    ``torchtitan_recipes.tests.models.gpt_oss_debugmodel_fsdp4_pp2_ep4_sac`` sets 1,024 tokens per micro-batch where
    0.3.0's sets sequences; PR #4121), so reading 0.3.0's would misread it silently."""
    from packaging.version import Version

    from primus_launch.plan import PlanError
    from primus_launch.plan.software import parse_torchtitan_version

    if parse_torchtitan_version(stated) > Version(registry):
        raise PlanError("software.torchtitan", stated,
                        f"a torchtitan no newer than {registry}: the launch's --module / --config is read from "
                        f"torchtitan {registry}'s config registry, and a newer torchtitan's functions of the same name "
                        f"set other fields and values ({NEWER}); run primus-launch where that torchtitan is installed "
                        "(its registry is read on first use), or state the run's own version")
