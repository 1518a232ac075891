"""On-disk JSON cache of piece measurements, so the tuner re-uses them across candidates.

Key: everything the measured piece is built and timed from -- the framework's own model
configuration the builder constructs (megatron-core's ``TransformerConfig`` with every field,
torchtitan's ``Decoder.Config`` tree), the extra build arguments (vocabulary, tied / untied
embeddings, position embedding, core-attention substitute), the input shapes, the measured dtype
and precision recipe, the device, the framework and torch versions and the measurement protocol.
:func:`canonical` turns that object tree into JSON (functions by qualified name, partials with their
arguments, dataclasses field by field), so a field added to a framework config or a plan setting
that reaches the build changes the key without a hand-kept list.  Per piece, the build arguments it
does not read are left out (``BuildSpec.args_not_for``: a decoder layer does not read the
vocabulary or the tie of the embeddings, so a tied and an untied recipe share their layers), and so
are substitutions that leave the build as it is (``Substitution.keyed``: an FP8 recipe timed in
BF16 is the BF16 piece, corrected after measuring).

Storage: one JSON file per key, named by the SHA-256 of the canonical key JSON, written atomically
(temp file + ``os.replace``, :mod:`primus_launch.fileio`).  One writer per key: a process measures
a missing piece only while holding an exclusive ``fcntl.flock`` on ``<file>.lock``; a second
process waiting on the same key then reads the first one's record instead of measuring again.

Default directory: ``$PRIMUS_LAUNCH_CACHE`` or ``$XDG_CACHE_HOME/primus-launch/measure``
(``~/.cache/primus-launch/measure``).  A directory that cannot be created or written degrades the
run to uncached measurement with one warning (:attr:`MeasureCache.warning`) naming
``PRIMUS_LAUNCH_CACHE``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from primus_launch.fileio import atomic_write_text

ENV = "PRIMUS_LAUNCH_CACHE"


def default_cache_dir() -> Path:
    """``$PRIMUS_LAUNCH_CACHE``, else ``$XDG_CACHE_HOME`` (or ``~/.cache``) ``/primus-launch/measure``."""
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "primus-launch" / "measure"


def canonical(obj: Any, _depth: int = 0) -> Any:
    """A JSON-able, address-free rendering of a configuration object tree (the cache key's
    material): primitives as is; dataclasses field by field; enums by name; ``functools.partial``
    as its function and arguments; functions / classes by ``module.qualname``; torch dtypes and
    devices by ``str``; mappings and sequences element-wise; anything else by its type name."""
    if _depth > 12:
        return f"<depth>{type(obj).__name__}"
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj and abs(obj) != float("inf") else str(obj)
    if isinstance(obj, enum.Enum):
        return f"{type(obj).__name__}.{obj.name}"
    if isinstance(obj, functools.partial):
        return {"partial": canonical(obj.func, _depth + 1), "args": canonical(list(obj.args), _depth + 1),
                "kwargs": canonical(dict(obj.keywords), _depth + 1)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"__type__": f"{type(obj).__module__}.{type(obj).__qualname__}",
                **{f.name: canonical(getattr(obj, f.name, None), _depth + 1) for f in dataclasses.fields(obj)}}
    if isinstance(obj, dict):
        return {str(k): canonical(v, _depth + 1) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [canonical(v, _depth + 1) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((canonical(v, _depth + 1) for v in obj), key=repr)
    if callable(obj) and hasattr(obj, "__qualname__"):
        return f"{getattr(obj, '__module__', '?')}.{obj.__qualname__}"
    mod = type(obj).__module__
    if mod.startswith("torch") and type(obj).__name__ in ("dtype", "device"):
        return str(obj)
    if hasattr(obj, "model_dump"):  # pydantic
        return canonical(obj.model_dump(), _depth + 1)
    return f"<{type(obj).__module__}.{type(obj).__qualname__}>"


def cache_key(framework: str, piece: str, material: dict[str, Any], device: str, **extra: Any) -> dict[str, Any]:
    """The canonical key (a JSON-able dict): the piece's build material (see the module
    docstring), the device label and ``extra`` (versions, protocol)."""
    import torch

    return canonical({"framework": framework, "piece": piece, "build": material, "device": device,
                      "torch": torch.__version__, **extra})


class MeasureCache:
    """Get/put JSON records by key dict, with per-key writer locks.  ``hits`` / ``misses`` count
    lookups; ``warning`` is set once (and never again) when the directory is not usable, after
    which the cache is off for writing (``enabled`` False) and the run measures uncached."""

    def __init__(self, directory: Optional[Path] = None, *, lock_timeout_s: float = 1800.0):
        self.dir = Path(directory) if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0
        self.enabled = True
        self.warning: Optional[str] = None
        self.lock_timeout_s = lock_timeout_s

    # ---------------------------------------------------------------- degrade
    def _disable(self, what: str, exc: BaseException) -> None:
        if self.warning is None:
            self.warning = (f"measurement cache {str(self.dir)!r} is not usable ({what}: "
                            f"{type(exc).__name__}: {exc}); measuring without a cache -- set {ENV} to a "
                            f"writable directory to keep measurements")
        self.enabled = False

    def _ensure_dir(self) -> bool:
        if not self.enabled:
            return False
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            if not os.access(self.dir, os.W_OK):
                raise PermissionError(f"{self.dir} is read-only")
        except OSError as e:
            self._disable("create", e)
            return False
        return True

    # ---------------------------------------------------------------- records
    @staticmethod
    def digest(key: dict[str, Any]) -> str:
        """32 hex digits of the SHA-256 of the key's canonical JSON (sorted keys, no spaces)."""
        canon = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canon.encode()).hexdigest()[:32]

    def path(self, key: dict[str, Any]) -> Path:
        """The record's file: ``<framework>-<piece>-<digest>.json`` in the cache directory."""
        return self.dir / f"{key.get('framework', 'x')}-{str(key.get('piece', 'x')).replace('#', '_')}-{self.digest(key)}.json"

    def peek(self, key: dict[str, Any]) -> Optional[dict[str, Any]]:
        """The stored value for ``key`` (None when absent, unreadable or for another key); no
        hit / miss counting."""
        try:
            rec = json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(rec, dict) or rec.get("key") != json.loads(json.dumps(key, default=str)):
            return None
        return rec.get("value")

    def get(self, key: dict[str, Any]) -> Optional[dict[str, Any]]:
        """:meth:`peek`, counted as a hit or a miss."""
        v = self.peek(key)
        if v is None:
            self.misses += 1
        else:
            self.hits += 1
        return v

    def put(self, key: dict[str, Any], value: dict[str, Any]) -> Optional[Path]:
        """Write the record atomically; None (and the one warning) when the directory is not
        writable."""
        if not self._ensure_dir():
            return None
        try:
            return atomic_write_text(self.path(key), json.dumps({"key": key, "value": value}, indent=1,
                                                                sort_keys=True, default=str))
        except OSError as e:
            self._disable("write", e)
            return None

    # ---------------------------------------------------------------- writer locks
    @contextlib.contextmanager
    def locked(self, keys: list[dict[str, Any]]) -> Iterator[bool]:
        """Hold the exclusive writer lock of every key (taken in file-name order, so two runs
        never wait on each other crosswise).  Yields True when the locks are held, False when the
        cache is off (then nothing is written and nothing waits)."""
        import fcntl

        if not keys or not self._ensure_dir():
            yield False
            return
        fds: list[int] = []
        try:
            for p in sorted({str(self.path(k)) + ".lock" for k in keys}):
                try:
                    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
                except OSError as e:
                    self._disable("lock", e)
                    break
                fds.append(fd)
                deadline = time.monotonic() + self.lock_timeout_s
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            self._disable("lock", TimeoutError(f"{p} held for over {self.lock_timeout_s:.0f} s"))
                            break
                        time.sleep(0.1)
                if not self.enabled:
                    break
            yield self.enabled
        finally:
            for fd in fds:
                try:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                finally:
                    os.close(fd)
