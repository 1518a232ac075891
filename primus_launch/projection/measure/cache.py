"""On-disk JSON cache of piece measurements, so the tuner re-uses them across candidates.

Key: (framework, piece, shapes, dtype, device, torch version) plus the framework's version and
the measurement protocol (warm-up, repeats, torch threads on the CPU).  One JSON file per key,
named by the SHA-256 of the canonical key JSON; written atomically (primus_launch.fileio).
Default directory: ``$PRIMUS_LAUNCH_CACHE`` or ``$XDG_CACHE_HOME/primus-launch/measure``
(``~/.cache/primus-launch/measure``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional
from primus_launch.fileio import atomic_write_text


def default_cache_dir() -> Path:
    env = os.environ.get("PRIMUS_LAUNCH_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "primus-launch" / "measure"


def cache_key(framework: str, piece: str, shapes: dict[str, Any], dtype: str, device: str,
              **extra: Any) -> dict[str, Any]:
    """The canonical key (a JSON-able dict); ``extra`` holds versions and protocol."""
    import torch

    return {"framework": framework, "piece": piece, "shapes": shapes, "dtype": dtype,
            "device": device, "torch": torch.__version__, **extra}


class MeasureCache:
    """Get/put JSON records by key dict.  ``hits`` / ``misses`` count lookups."""

    def __init__(self, directory: Optional[Path] = None):
        self.dir = Path(directory) if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def digest(key: dict[str, Any]) -> str:
        canon = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canon.encode()).hexdigest()[:32]

    def path(self, key: dict[str, Any]) -> Path:
        return self.dir / f"{key.get('framework', 'x')}-{key.get('piece', 'x')}-{self.digest(key)}.json"

    def get(self, key: dict[str, Any]) -> Optional[dict[str, Any]]:
        p = self.path(key)
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError):
            self.misses += 1
            return None
        if rec.get("key") != json.loads(json.dumps(key, default=str)):
            self.misses += 1
            return None
        self.hits += 1
        return rec["value"]

    def put(self, key: dict[str, Any], value: dict[str, Any]) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        p = self.path(key)
        return atomic_write_text(p, json.dumps({"key": key, "value": value}, indent=1, sort_keys=True, default=str))
