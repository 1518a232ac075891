"""The optional Ray backend of :class:`primus_launch.executor.Executor` (``--ray-address``).

``pip install 'primus-launch[ray]'`` (ray 2.60.0) on the machine that runs ``primus-launch`` and on
every node of the cluster (the same primus-launch, torch and framework versions: the workers import
the package and run the same projection).  :func:`connect` joins a running cluster
(``HOST:PORT`` of its head, ``ray start --head`` prints it; ``ray://HOST:PORT`` for Ray Client) or
starts a local instance (``local``; ``auto``: a cluster already running on this machine, else a
local instance).  A job's shared state (the plan, the space, the scoring function) is put in the
object store once and each worker process deserialises it once per job (:func:`_call`): the workers
never read the recipe from disk, and every topology they use is the plan's.

Nothing here is imported unless ``--ray-address`` is given: the default path never imports ray.
Mistakes are one line naming the option (``--ray-address``), the value and what is allowed: Ray not
installed, an address of the wrong form, or no head answering within :data:`CONNECT_TIMEOUT_S`
(checked with a plain TCP connection first: Ray's own client retries an unreachable head for
minutes).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from typing import Any, Callable, Optional

from primus_launch.errors import UserError
from primus_launch.executor import Executor

OPTION = "--ray-address"
#: the Ray release the ``ray`` extra pins (pyproject.toml)
RAY_VERSION = "2.60.0"
#: seconds to wait for a Ray head's port to accept a TCP connection
CONNECT_TIMEOUT_S = 10.0
ALLOWED = "HOST:PORT of a running Ray head (ray start --head), ray://HOST:PORT (Ray Client), auto or local"

_JOBS: dict[str, Any] = {}   # in a Ray worker: the shared state of the job last seen, by object id


def _call(fn: Callable[..., Any], boxed: list, *args: Any) -> Any:
    """A Ray task: ``fn(shared, *args)``, the job's shared state fetched from the object store once
    per worker process (``boxed``: ``[ObjectRef]``, so that Ray does not resolve it for every task)."""
    import ray

    ref = boxed[0]
    key = ref.hex()
    if key not in _JOBS:
        _JOBS.clear()
        _JOBS[key] = ray.get(ref)
    return fn(_JOBS[key], *args)


def parse_address(address: str) -> tuple[str, Optional[str], Optional[int]]:
    """``(kind, host, port)``: kind ``local``, ``auto``, ``head`` (HOST:PORT) or ``client``
    (ray://HOST:PORT); a value of another form is the user's mistake (one line)."""
    a = address.strip()
    if a in ("local", "auto"):
        return a, None, None
    kind = "head"
    rest = a
    if a.startswith("ray://"):
        kind, rest = "client", a[len("ray://"):]
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in host:
        raise UserError(f"{OPTION}={address!r}: one of {ALLOWED}")
    return kind, host, int(port)


def _reachable(address: str, host: str, port: int, timeout_s: float) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        raise UserError(f"{OPTION}={address!r}: no Ray head answers at {host}:{port} within {timeout_s:g} s "
                        f"({type(e).__name__}: {e}); allowed: {ALLOWED}") from None


@contextlib.contextmanager
def _stderr_muted():
    """File descriptor 2 to /dev/null meanwhile (Ray's C++ core writes there, past Python's logging)."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _same_host(a: str, b: str) -> bool:
    try:
        return socket.gethostbyname(a) == socket.gethostbyname(b)
    except OSError:
        return a == b


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UserError(f"{OPTION}: Ray is not installed; install it with pip install 'primus-launch[ray]' "
                        f"(ray=={RAY_VERSION}), or leave {OPTION} out to search on this machine") from None
    return ray


def connect(address: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> "RayExecutor":
    """A :class:`RayExecutor` on the cluster at ``address`` (module doc); a Ray already initialised in
    this process (a test's local instance) is used as it is."""
    kind, host, port = parse_address(address)
    ray = _import_ray()
    if host is not None:
        _reachable(address, host, port, timeout_s)
    if ray.is_initialized() and host is not None:
        have = ray.get_runtime_context().gcs_address
        if have.rpartition(":")[2] != str(port) or not _same_host(have.rpartition(":")[0], host):
            raise UserError(f"{OPTION}={address!r}: this process is already connected to the Ray cluster at {have}; "
                            f"allowed: that address, auto or local")
    if not ray.is_initialized():
        quiet = dict(logging_level=logging.ERROR, log_to_driver=False)
        try:
            if kind == "local":
                ray.init(include_dashboard=False, **quiet)
            elif kind == "auto":
                try:
                    ray.init(address="auto", **quiet)
                except ConnectionError:   # no cluster on this machine: a local instance
                    ray.init(include_dashboard=False, **quiet)
            else:
                with _stderr_muted():   # Ray's core logs each failed try at the head on stderr
                    ray.init(address=address.strip(), **quiet)
        except Exception as e:  # Ray's own refusal (version mismatch, not a head, ...): one line
            raise UserError(f"{OPTION}={address!r}: Ray could not join it ({type(e).__name__}: "
                            f"{' '.join(str(e).split())[:300]}); allowed: {ALLOWED}") from None
    cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
    gpus = int(ray.cluster_resources().get("GPU", 0))
    return RayExecutor(address, cpus, gpus)


class RayExecutor(Executor):
    """Tasks on a Ray cluster (module doc): ``workers`` is the cluster's CPU count; a task asking for
    ``gpus`` is placed by Ray on a node with that many free GPUs (``num_gpus``)."""

    name = "Ray"

    def __init__(self, address: str, workers: int, gpus: int = 0):
        self.address, self.workers, self.gpus = address, max(1, workers), gpus
        self._box: Optional[list] = None
        self._remote = None

    def start(self, shared: Any) -> None:
        import ray

        if self._remote is None:
            self._remote = ray.remote(_call)
        self._box = [ray.put(shared)]

    def submit(self, fn: Callable[..., Any], *args: Any, gpus: float = 0) -> Any:
        return self._remote.options(num_cpus=1 if not gpus else 0, num_gpus=gpus).remote(fn, self._box, *args)

    def result(self, ticket: Any) -> Any:
        import ray

        return ray.get(ticket)

    def cancel(self, tickets: list[Any]) -> None:
        import ray

        for t in tickets:
            try:
                ray.cancel(t)
            except Exception:  # already finished or gone: nothing to drop
                pass

    def stop(self, finished: bool = True) -> None:
        self._box = None

    def describe(self) -> str:
        where = "a local Ray instance" if self.address in ("local", "auto") else f"the Ray cluster at {self.address}"
        return f"{where} ({self.workers} CPUs{f', {self.gpus} GPUs' if self.gpus else ''})"
