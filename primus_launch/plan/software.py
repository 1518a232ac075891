"""The software stack a run used, where it differs from the stack the projection models.

Framework-neutral: a version a recipe cannot state (the recipe names no torch release) but which changes
which kernels run, so a cost model can price the kernels of that release.  ``None`` means "the current stack":
the versions the projection's cost and memory models were written against (torch 2.13, torchtitan 0.3.0;
``primus_launch/data``).  Set from a wrapper TOML's ``[software]`` table (``adapters/primus_toml.py``) or a
validation row whose source states or dates the run's torch (``scripts/validation``).

The torch version is a PEP 440 version as ``torch.__version__`` prints it: a release (``2.8.0``, ``2.9.1+cu128``),
a nightly (``2.9.0.dev20250801+cu126``) or a source build (``2.6.0a0+git1963fc8``: the version main carried
between two releases).

The torchtitan version is a PEP 440 version as its ``assets/version.txt`` / ``torchtitan.__version__`` gives it
(``0.1.0`` -- every main-branch build from 2025-06-05 to 2025-10-17 carried it --, ``0.2.0``, ``0.3.0``, a nightly
``0.2.0.dev20251020``).  It decides behaviour that differs between torchtitan builds of the same recipe format
(``cost/titan_qk_norm.py``: Qwen3's q / k norm TP plan before torchtitan PR #1870).
"""

from __future__ import annotations

from typing import Optional

from packaging.version import InvalidVersion, Version
from pydantic import ValidationInfo, field_validator

from primus_launch.plan.sections import PlanError, StrictModel

_TORCH_ALLOWED = ("a torch version as torch.__version__ prints it (2.8.0, 2.9.1+cu128, 2.9.0.dev20250801, "
                  "2.6.0a0+git1963fc8), or leave it out for the current stack")


def _parse_version(text: str, field: str, allowed: str) -> Version:
    """``text`` as a :class:`packaging.version.Version` with at least major.minor; a :class:`PlanError` naming
    ``field`` and ``allowed`` otherwise."""
    try:
        v = Version(text.strip())
    except InvalidVersion:
        raise PlanError(field, text, allowed) from None
    if len(v.release) < 2 or v.epoch:
        raise PlanError(field, text, allowed)
    return v


def parse_torch_version(text: str, field: str = "software.torch") -> Version:
    """``text`` as a torch version (:func:`_parse_version`)."""
    return _parse_version(text, field, _TORCH_ALLOWED)


_TITAN_ALLOWED = ("a torchtitan version as its assets/version.txt gives it (0.1.0, 0.2.0, 0.3.0, "
                  "0.2.0.dev20251020), or leave it out for the current stack")


def parse_torchtitan_version(text: str, field: str = "software.torchtitan") -> Version:
    """``text`` as a torchtitan version (:func:`_parse_version`)."""
    return _parse_version(text, field, _TITAN_ALLOWED)


#: the versions the cost and memory models were written against (the installed stack, module doc)
MODELLED_TORCH = "2.13"
MODELLED_TORCHTITAN = "0.3.0"


def software_notes(software: "Software", framework: str) -> list[str]:
    """Notes for versions the models cannot price as stated: a release newer than the modelled stack (torch
    ``MODELLED_TORCH``, torchtitan ``MODELLED_TORCHTITAN``; its kernels and rules are unknown here, so it is priced
    as the modelled one) and a torchtitan version on a recipe of another framework (nothing of it is read)."""
    out = []
    torch_newer = (software.torch is not None
                   and parse_torch_version(software.torch).release[:2] > Version(MODELLED_TORCH).release[:2])
    if torch_newer:
        out.append(f"software.torch={software.torch!r}: newer than torch {MODELLED_TORCH}, the release the cost "
                   f"models were written against; priced as torch {MODELLED_TORCH}")
    if software.torchtitan is not None:
        if framework != "torchtitan":
            out.append(f"software.torchtitan={software.torchtitan!r}: not read (a {framework} recipe)")
        elif parse_torchtitan_version(software.torchtitan).release > Version(MODELLED_TORCHTITAN).release:
            out.append(f"software.torchtitan={software.torchtitan!r}: newer than torchtitan {MODELLED_TORCHTITAN}, "
                       f"the release the reader and models follow; priced as torchtitan {MODELLED_TORCHTITAN}")
    return out


class Software(StrictModel):
    """Versions of the run's software stack (module doc); ``None``: the current stack."""

    torch: Optional[str] = None
    torchtitan: Optional[str] = None

    @field_validator("torch", "torchtitan")
    @classmethod
    def _version(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        """A version :func:`parse_torch_version` / :func:`parse_torchtitan_version` reads (at most 100 characters),
        stripped; None stays None."""
        if v is None:
            return None
        parse, allowed = _PARSERS[info.field_name]
        if not isinstance(v, str) or len(v) > 100:
            raise PlanError(f"software.{info.field_name}", v, allowed)
        parse(v)
        return v.strip()


#: each version field's parser and what it allows
_PARSERS = {"torch": (parse_torch_version, _TORCH_ALLOWED), "torchtitan": (parse_torchtitan_version, _TITAN_ALLOWED)}
