"""Megatron's manual garbage collection (cost/manual_gc.py): reader, price, and the facts it stands on.

Independent truths: the published per-object traversal time (sgl-project/sglang PR #28067: 41.17 s for 74.8 M
tracked objects, the evidence record), CPython's own collector (``gc.collect()`` without an argument is a
generation-2 collection), TorchTitan 0.3.0's ``GarbageCollection`` (installed: generation 1, so not priced) and the
tracked-object count of the imports ``scripts/gc_heap_probe.py`` makes (a count, not a time).
"""

from __future__ import annotations

import gc
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.adapters.megatron_flags import by_option
from primus_launch.plan import Cluster
from primus_launch.projection.cost import evidence as ev
from primus_launch.projection.cost import manual_gc as mg
from primus_launch.projection.cost.framework import HOST_CPU_FACTOR

ROOT = Path(__file__).resolve().parents[1]


def _plan(*flags: str, gpu: str = "h100-sxm", framework_flags: tuple[str, ...] = ()):
    argv = ["pretrain_gpt.py", "--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16",
            "--seq-length", "2048", "--max-position-embeddings", "2048", "--micro-batch-size", "1",
            "--global-batch-size", "64", "--bf16", "--vocab-size", "32000", "--use-distributed-optimizer",
            *framework_flags, *flags]
    return plan_from_argv(argv, cluster=Cluster(gpu=gpu, num_nodes=1, gpus_per_node=8 if gpu != "gb200" else 4))


def test_per_object_cost_is_the_published_measurement():
    rec = next(r for r in ev.all_records() if r["id"] == "sglang28067-gc-gen2-traversal")
    assert rec["value"] == 41.17 and rec["shape"]["tracked_objects"] == 74_800_000
    assert mg.GC_S_PER_OBJECT == pytest.approx(rec["value"] / rec["shape"]["tracked_objects"])
    assert 0.5e-6 < mg.GC_S_PER_OBJECT < 0.6e-6


def test_gc_collect_without_argument_is_a_full_collection():
    """CPython: ``gc.collect()`` collects the oldest generation (what Megatron-LM / Bridge call)."""
    seen = []

    def cb(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(cb)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(cb)
    assert seen == [2]


def test_torchtitan_collects_the_young_generations_only():
    utils = pytest.importorskip("torchtitan.tools.utils")
    sig = inspect.signature(utils.GarbageCollection.collect)
    assert sig.parameters["generation"].default == 1
    assert "self.collect(\"Performing periodic GC collection\")" in inspect.getsource(utils.GarbageCollection.run)


def test_flags_are_read_into_the_plan():
    for f in ("--manual-gc", "--manual-gc-interval"):
        assert by_option()[f].cls == "modelled"
    t = _plan("--manual-gc", "--manual-gc-interval", "5").training
    assert (t.manual_gc, t.manual_gc_interval) == (True, 5)
    t = _plan().training   # Megatron-LM's defaults: automatic GC, interval 0
    assert (t.manual_gc, t.manual_gc_interval) == (False, 0)


def test_price_per_iteration():
    pause = mg.HEAP_TRACKED_OBJECTS * mg.GC_S_PER_OBJECT
    assert mg.manual_gc_s(_plan("--manual-gc", "--manual-gc-interval", "5")) == pytest.approx(pause / 5)
    assert mg.manual_gc_s(_plan("--manual-gc", "--manual-gc-interval", "1")) == pytest.approx(pause)
    assert mg.manual_gc_s(_plan("--manual-gc", "--manual-gc-interval", "0")) == 0.0   # no periodic collection
    assert mg.manual_gc_s(_plan("--manual-gc-interval", "5")) == 0.0                  # automatic GC
    # the same Python on a Grace host: HOST_CPU_FACTOR x the x86 time
    gb = mg.manual_gc_s(_plan("--manual-gc", "--manual-gc-interval", "5", gpu="gb200"))
    assert gb == pytest.approx(pause / 5 * HOST_CPU_FACTOR["grace"])


def test_iteration_carries_the_collection():
    from primus_launch.projection.dryrun import project_dry_run

    base = project_dry_run(_plan()).iteration_time_s
    with_gc = project_dry_run(_plan("--manual-gc", "--manual-gc-interval", "2")).iteration_time_s
    assert with_gc - base == pytest.approx(mg.gc_pause_s() / 2, rel=1e-6)


def test_torchtitan_plans_pay_nothing():
    p = _plan("--manual-gc", "--manual-gc-interval", "1")
    titan = p.model_copy(update={"source": p.source.model_copy(update={"framework": "torchtitan"})})
    assert titan.framework == "torchtitan" and mg.manual_gc_s(titan) == 0.0


@pytest.mark.slow
def test_heap_count_is_the_probes():
    """The constant is what ``scripts/gc_heap_probe.py`` counts with this environment's torch / megatron-core
    (within 10 %: a torch or megatron-core upgrade that moves it needs the constant re-counted)."""
    pytest.importorskip("megatron.core")
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gc_heap_probe.py"), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=True)
    n = json.loads(out.stdout.strip().splitlines()[-1])["tracked_objects"]
    assert n == pytest.approx(mg.HEAP_TRACKED_OBJECTS, rel=0.10)
