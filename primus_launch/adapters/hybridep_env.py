"""HybridEP's combine chunk size as a recipe sets it: the launch environment, else the DeepEP build it pins.

DeepEP's ``hybrid-ep`` branch reads ``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API`` from the environment itself
(``csrc/hybrid_ep/config.cuh`` ``Configurer``; before a0d27f1 ``deep_ep/hybrid_ep_buffer.py``); Megatron-core
passes it no chunk size (``fused_a2a.HybridEPDispatch``, Megatron-LM dev @d98e8a64).  Its default: 128 tokens
before DeepEP PR #588 (a0d27f1, 2026-03-31), 64 from it on.  Where a recipe does not set the variable the chunk
is the default of the DeepEP it builds: Megatron-LM's ``examples/moe_recipes`` YAMLs build DeepEP in their
``DEPENDENCIES`` Dockerfile (``git clone --branch hybrid-ep .../DeepEP.git`` then ``git checkout <sha>``); the
commits they pin at dev @d48bd6be, placed against a0d27f1 in DeepEP's history (:data:`PINNED_DEFAULT`).  A
Megatron-Bridge config without the variable takes 128: Bridge's performance launcher sets it on every HybridEP
recipe (``scripts/performance/perf_plugins.py``, 797a11418 of 2026-04-03, in v0.4.2; its later
``perf_recipes`` state it in their ``env_vars``; before a0d27f1 DeepEP's default was 128 anyway).  Anything
else: DeepEP's current default, 64.  The chunk is priced by ``projection/cost/hybridep_chunk.py``.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional

VAR = "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API"
CURRENT_DEFAULT = 64
BRIDGE_DEFAULT = 128
# DeepEP hybrid-ep commits pinned by Megatron-LM dev @d48bd6be examples/moe_recipes -> the combine chunk default
# they build (a0d27f1 an ancestor: 64; not: 128), read from DeepEP's history (git merge-base --is-ancestor)
PINNED_DEFAULT: dict[str, int] = {
    "7febc6e25660af0f54d95dd781ecdcd62265ecca": 128,   # 2026-02-09
    "cf78085241ebfdd809da8f169b41fa08e589b316": 64,    # 2026-04-13
    "1b8f467965bb818bf2f6511e06993f5607e1721f": 64,    # 2026-04-16
    "d28bd676c2120573c9f1425f0c16c39faa4117e6": 64,    # 2026-04-29
}
_PIN = re.compile(r"DeepEP(?:\.git)?\b[\s\S]{0,600}?git\s+checkout\s+([0-9a-fA-F]{7,40})\b")


def deepep_pin(text: str) -> Optional[str]:
    """The DeepEP commit a recipe's text builds (``git checkout <sha>`` after a DeepEP clone), or None."""
    m = _PIN.search(text or "")
    return m.group(1).lower() if m else None


def pinned_default(pin: str) -> Optional[int]:
    """The combine chunk default of DeepEP commit ``pin`` (full or abbreviated), None where not known."""
    hits = {v for k, v in PINNED_DEFAULT.items() if k.startswith(pin.lower()) or pin.lower().startswith(k)}
    return hits.pop() if len(hits) == 1 else None


def combine_chunk(env: Mapping[str, str], pin: Optional[str], bridge: bool = False,
                  hybridep: bool = True) -> tuple[Optional[int], Optional[str]]:
    """The HybridEP combine chunk a recipe states and a note saying where it came from.  ``env``: its launch
    environment; ``pin``: the DeepEP commit it builds (:func:`deepep_pin`); ``bridge``: a Megatron-Bridge config;
    ``hybridep``: the recipe runs the HybridEP dispatcher (else no note, and no Bridge default).  None where the
    recipe states nothing: DeepEP's current default (the plan's None).  A variable that is not a positive integer
    is a one-line :class:`~primus_launch.plan.PlanError`."""
    raw = env.get(VAR)
    if raw is not None:
        from primus_launch.plan import PlanError

        try:
            v = int(str(raw).strip())
        except ValueError:
            v = 0
        if v < 1:
            raise PlanError(VAR, raw, "a positive whole number of tokens (DeepEP hybrid-ep's combine chunk)")
        return v, (f"{VAR}={v} in the launch environment: HybridEP's combine runs {v}-token chunks"
                   if hybridep else None)
    if pin:
        d = pinned_default(pin)
        if d is not None:
            return d, (f"HybridEP combine chunk {d} tokens: the default of the DeepEP hybrid-ep commit the recipe "
                       f"builds ({pin[:7]}; 128 before a0d27f1 of 2026-03-31, 64 from it on); {VAR} not set"
                       if hybridep else None)
        return None, (f"HybridEP combine chunk {CURRENT_DEFAULT} tokens assumed: DeepEP's current default; the recipe "
                      f"builds DeepEP {pin[:7]}, whose default is not known here (128 before a0d27f1 of 2026-03-31); "
                      f"{VAR} not set" if hybridep else None)
    if not hybridep:
        return None, None
    if bridge:
        return BRIDGE_DEFAULT, (f"HybridEP combine chunk {BRIDGE_DEFAULT} tokens assumed: Megatron-Bridge's "
                                f"performance launcher sets {VAR}=128 on every HybridEP recipe (797a11418); "
                                "the config sets none")
    return None, (f"HybridEP combine chunk {CURRENT_DEFAULT} tokens assumed: DeepEP's current default (since "
                  f"a0d27f1 of 2026-03-31; 128 before); the recipe neither sets {VAR} nor pins a DeepEP build")
