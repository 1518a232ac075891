"""The value rules torchtitan 0.3.0's config classes enforce when its parser builds them (their
``__post_init__``), for the sections primus-launch does not read into the plan.

tyro builds each section's dataclass from the command line and the dataclass's ``__post_init__``
refuses some values of the right type ("Error parsing checkpoint: keep_latest_k cannot be negative.",
tyro 1.0.17 over torchtitan 0.3.0, checked on the CPU with ``ConfigManager.parse_args``):

- ``components/checkpointer/base.py`` ``BaseCheckpointManager.Config.__post_init__``: ``folder`` not
  blank, ``interval >= 1``, ``keep_latest_k`` neither negative nor 1 (the last replica may still be
  saving), ``model`` not in ``exclude_from_loading``, ``initial_load_path`` absolute or a remote URI where given (an empty one is none);
- ``components/validate.py`` ``Validator.Config.__post_init__``: ``steps > 0`` or ``-1``.

Rules that tie two fields together (``initial_load_in_hf`` requires ``initial_load_model_only``, ...)
are left to torchtitan: they need the whole section, and the dry run does not read it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from primus_launch.plan import PlanError


def _int_rule(ok: Callable[[int], bool], allowed: str) -> Callable[[Any], Optional[str]]:
    return lambda v: None if not isinstance(v, int) or ok(v) else allowed


RULES: dict[str, Callable[[Any], Optional[str]]] = {
    "checkpoint.folder": lambda v: None if not isinstance(v, str) or v.strip() else "a folder name (not blank)",
    "checkpoint.interval": _int_rule(lambda v: v >= 1, "at least 1 (steps between checkpoints)"),
    "checkpoint.keep_latest_k": _int_rule(lambda v: v == 0 or v >= 2,
                                          "0 (keep all) or at least 2 (the last one may still be saving)"),
    "checkpoint.exclude_from_loading": lambda v: "the names of states other than 'model'" if isinstance(
        v, list) and "model" in v else None,
    "checkpoint.initial_load_path": lambda v: None if not isinstance(v, str) or not v or v.strip().startswith("/")
    or "://" in v else "an absolute path or a remote URI (e.g. gs://...)",   # '' is no path (``if self.initial_load_path``)
    "validator.steps": _int_rule(lambda v: v > 0 or v == -1, "a positive number of steps, or -1 (the whole set)"),
}


def check_option_rule(path: str, value: Any, where: str) -> None:
    """Raise the one-line :class:`PlanError` when ``value`` of option ``path`` breaks its rule (:data:`RULES`)."""
    rule = RULES.get(path)
    why = rule(value) if rule is not None else None
    if why:
        raise PlanError(where, value, f"{why} (torchtitan's config refuses it when the line is parsed)")
