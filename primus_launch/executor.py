"""Where independent pieces of work run: this process, local worker processes, or a Ray cluster.

One abstraction for every fan-out of the project (the tuner's exhaustive sweep over index ranges, its
branch-and-bound's structural candidates, the measurement of distinct pieces): a job's shared state
(the plan, the space, the scoring function) is handed over once with :meth:`Executor.start`, then
tasks ``fn(shared, *args)`` are submitted and their results taken back by ticket, in whatever order
the caller chooses.  The callers merge results in their own deterministic order (index order,
search order), never in completion order, so the answer does not depend on the backend or on how
many workers it has.

- :class:`InProcess`: runs a task when its result is asked for (one worker, the default of a search
  that is sequential by design);
- :class:`LocalProcesses`: a ``fork`` pool of this machine's cores (the workers inherit the shared
  state; SIGINT is the parent's to decide, SIGTERM ends them) -- the exhaustive sweep's default;
- ``primus_launch.ray_cluster.RayExecutor``: tasks on a Ray cluster (``--ray-address``), the shared
  state shipped once with ``ray.put``; optional (``pip install 'primus-launch[ray]'``).

``fn`` must be a module-level function (pickled by reference).  A task's ``gpus`` asks the backend
for that many GPUs while it runs (Ray's ``num_gpus``; the local backends run it on this machine).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from typing import Any, Callable, Optional

_SHARED: Any = None  # the job's shared state, for forked workers (inherited, never pickled)


class Executor:
    """Runs ``fn(shared, *args)`` tasks; see the module doc.  ``workers``: tasks it runs at once."""

    name = "executor"
    workers = 1

    def start(self, shared: Any) -> None:
        """Hand over the job's shared state (before any :meth:`submit`)."""
        raise NotImplementedError

    def submit(self, fn: Callable[..., Any], *args: Any, gpus: float = 0) -> Any:
        """Queue ``fn(shared, *args)``; returns a ticket for :meth:`result`."""
        raise NotImplementedError

    def result(self, ticket: Any) -> Any:
        """The task's return value (blocks until it is done; re-raises its exception)."""
        raise NotImplementedError

    def cancel(self, tickets: list[Any]) -> None:
        """Drop tasks whose results will not be asked for (best effort)."""

    def stop(self, finished: bool = True) -> None:
        """End the job: release its workers and shared state (``finished`` False: after an exception
        or a signal -- nothing is waited for)."""

    def describe(self) -> str:
        return f"{self.name} ({self.workers} worker{'s' if self.workers != 1 else ''})"


class InProcess(Executor):
    """Each task runs in this process when its result is first asked for."""

    name = "in-process"

    def __init__(self) -> None:
        self.shared: Any = None

    def start(self, shared: Any) -> None:
        self.shared = shared

    def submit(self, fn: Callable[..., Any], *args: Any, gpus: float = 0) -> Any:
        return [fn, args, False, None]

    def result(self, ticket: Any) -> Any:
        if not ticket[2]:
            ticket[3] = ticket[0](self.shared, *ticket[1])
            ticket[2] = True
        return ticket[3]

    def stop(self, finished: bool = True) -> None:
        self.shared = None


def _call_local(fn: Callable[..., Any], args: tuple) -> Any:
    return fn(_SHARED, *args)


class LocalProcesses(Executor):
    """A ``fork`` pool of ``workers`` processes on this machine (module doc)."""

    name = "local processes"

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self.pool = None

    def start(self, shared: Any) -> None:
        global _SHARED
        _SHARED = shared
        self.pool = start_pool(self.workers)

    def submit(self, fn: Callable[..., Any], *args: Any, gpus: float = 0) -> Any:
        return self.pool.apply_async(_call_local, (fn, args))

    def result(self, ticket: Any) -> Any:
        return ticket.get()

    def stop(self, finished: bool = True) -> None:
        global _SHARED
        if self.pool is not None:
            end_pool(self.pool, finished)
            self.pool = None
        _SHARED = None


def start_pool(workers: int):
    """A fork pool whose workers ignore SIGINT (the parent decides) and die on SIGTERM; started
    whole or not at all (a signal while forking is raised once every worker exists, so that the
    clean-up knows them all)."""
    from primus_launch import interrupt

    pool = None
    try:
        with interrupt.deferred():
            pool = mp.get_context("fork").Pool(workers, initializer=interrupt.worker_init)
    except BaseException:  # the signal deferred while forking: end the pool before it unwinds further
        if pool is not None:
            end_pool(pool, False)
        raise
    return pool


TERMINATE_WAIT_S = 0.5  # how long an ended pool's own terminate may take before its workers are killed


def end_pool(pool, finished: bool) -> None:
    """Close a finished pool; terminate (SIGTERM, then join) one left by an exception or a signal, so
    that no worker outlives the search and none is waited for.

    ``Pool.terminate`` first takes the task queue's read lock (``_help_stuff_finish``), which an idle
    worker holds while it waits for a task and gives up only when the task handler's end-of-work
    sentinel reaches it; a worker cut at the wrong moment of its start-up (a signal during the fork)
    can leave that lock held for good, and the terminate then waits forever.  So it runs in a daemon
    thread: past :data:`TERMINATE_WAIT_S` the workers are killed (SIGKILL) and the pool is left to
    that thread."""
    if finished:
        pool.close()
        pool.join()
        return
    workers = list(getattr(pool, "_pool", ()))

    def terminate() -> None:
        pool.terminate()
        pool.join()

    ender = threading.Thread(target=terminate, name="primus-launch-pool-end", daemon=True)
    ender.start()
    ender.join(TERMINATE_WAIT_S)
    if ender.is_alive():
        for w in workers:
            try:
                os.kill(w.pid, signal.SIGKILL)
            except (ProcessLookupError, TypeError):
                pass
        deadline = time.monotonic() + TERMINATE_WAIT_S
        for w in workers:
            w.join(max(0.0, deadline - time.monotonic()))


def in_order(ex: Executor, fn: Callable[..., Any], items: list[tuple], window: Optional[int] = None):
    """Yield ``fn(shared, *item)`` for each item, in the items' order, with at most ``window``
    (default ``2 x workers``) tasks in flight; the tasks not yet taken are cancelled when the caller
    stops early."""
    window = window or 2 * ex.workers
    tickets: list[Any] = []
    nxt = 0
    try:
        for i in range(len(items)):
            while nxt < len(items) and nxt - i < window:
                tickets.append(ex.submit(fn, *items[nxt]))
                nxt += 1
            yield ex.result(tickets[i])
            tickets[i] = None
    finally:
        ex.cancel([t for t in tickets if t is not None])
