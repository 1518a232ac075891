"""The measurement of a plan's distinct pieces fanned out over an executor's workers (a Ray cluster,
``--tune --measure-device cuda --ray-address ADDR``): one piece per task, one GPU per task.

Before a plan is scored with the measured projection, its pieces' cache keys are computed here
(:func:`upscale.piece_keys`: the build spec only, nothing built); each piece whose record the cache
(:class:`.cache.MeasureCache`, the directory local measurement uses) does not hold is sent to a worker
(:func:`measure_piece_task`, ``gpus=1`` on CUDA: Ray gives each task a GPU of its own), which builds
the plan's reduced per-rank model, times that piece alone with the same protocol and policy
(:func:`upscale.measure_piece_records`) and returns its key and record; the records are put in the
cache here, so the projection that follows reads every piece from the cache (``measurement cache:
N/N pieces``) and a later local run re-uses them.  A worker's key differs from this machine's only
when its device does (another GPU model): the record is then stored under the worker's key and the
local projection measures that piece itself.

The plan travels to the workers as an object (the executor's shared state): they never read the
recipe, and everything they build comes from the plan; the timing policy is this process's
(``$PRIMUS_LAUNCH_MEASURE_POLICY`` read here, not on the workers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from primus_launch.plan import Plan
from primus_launch.projection.measure.cache import MeasureCache
from primus_launch.projection.measure.timing import TimingPolicy
from primus_launch.projection.result import ProjectionResult


def measure_piece_task(job: tuple, name: str) -> tuple[str, dict, dict]:
    """An executor's task: ``(name, key, record)`` of piece ``name`` of the job's plan (``job``:
    ``(plan, device, measure_layers, policy)``)."""
    from primus_launch.projection.measure.upscale import measure_piece_records

    plan, device, measure_layers, policy = job
    key, rec = measure_piece_records(plan, device, [name], measure_layers=measure_layers, policy=policy)[name]
    return name, key, rec


def prefetch_pieces(plan: Plan, device: str, executor: Any, cache: MeasureCache, *, measure_layers: int = 2,
                    policy: Optional[TimingPolicy] = None,
                    max_cpu_seconds: Optional[float] = 600.0) -> dict[str, bool]:
    """Measure the plan's pieces missing from ``cache`` on ``executor``'s workers, one per task (one
    GPU each on CUDA), and put them in ``cache``.  Returns name -> whether the worker's key is this
    machine's (False: the local projection will not find it; see the module doc); pieces already
    cached are not in it."""
    from primus_launch.projection.measure.upscale import check_cpu_budget, make_policy, piece_keys

    pol = make_policy(policy)
    keys = piece_keys(plan, device, measure_layers=measure_layers, policy=pol)
    missing = [n for n, k in keys.items() if cache.peek(k) is None]
    if not missing:
        return {}
    cuda = not device.startswith("cpu")
    if not cuda and max_cpu_seconds is not None:
        check_cpu_budget(plan, measure_layers, pol, max_cpu_seconds)
    out: dict[str, bool] = {}
    finished = False
    executor.start((plan, device, measure_layers, pol))
    try:
        tickets = [executor.submit(measure_piece_task, n, gpus=1 if cuda else 0) for n in missing]
        for t in tickets:   # in the plan's piece order: the cache holds the same records whatever finished first
            name, key, rec = executor.result(t)
            cache.put(key, rec)
            out[name] = key == keys[name]
        finished = True
    finally:
        executor.stop(finished)
    return out


class FannedOut:
    """A scoring function for the tuner: ``score(plan)`` (the measured projection) after the plan's
    missing pieces were measured on ``executor``'s workers into the cache (:func:`prefetch_pieces`).
    ``foreign``: pieces whose worker measured them on another device than this machine's."""

    def __init__(self, score: Callable[[Plan], ProjectionResult], executor: Any, device: str, *,
                 cache_dir: Optional[Path] = None, measure_layers: int = 2):
        self.score, self.executor, self.device = score, executor, device
        self.cache = MeasureCache(cache_dir)
        self.measure_layers = measure_layers
        self.fanned = 0
        self.foreign = 0

    def __call__(self, plan: Plan) -> ProjectionResult:
        from primus_launch.projection.hardware.gpus import resolve_power_cap

        got = prefetch_pieces(resolve_power_cap(plan), self.device, self.executor, self.cache,
                              measure_layers=self.measure_layers)
        self.fanned += len(got)
        self.foreign += sum(1 for same in got.values() if not same)
        return self.score(plan)
