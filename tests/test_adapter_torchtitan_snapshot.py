"""The TorchTitan registry snapshot the dry run reads instead of importing torchtitan.

Truth: the installed torchtitan itself (its registries read live, its pipeline split functions, torch's
schedule classes), and the process's own module table (no torch import on the dry-run path).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from primus_launch.adapters import titan_snapshot as ts
from primus_launch.plan.torchtitan_split import SINGLE_STAGE, generate_split, stage_ranks

ROOT = Path(__file__).resolve().parents[1]


def test_bundled_snapshot_equals_the_live_registry():
    """scripts/build_titan_snapshot.py output == what the installed torchtitan gives now."""
    assert ts.installed_version() == ts.BUNDLED_VERSION
    bundled = json.loads(ts.bundled_path().read_text())
    live = json.loads(json.dumps(ts.build_snapshot()))
    assert bundled == live
    assert {"llama3", "qwen3", "deepseek_v3", "gpt_oss"} <= set(live["configs"])
    assert live["configs"]["llama3"]["llama3_8b"]["training"]["seq_len"] == 8192


def test_split_and_rank_mapping_equal_torchtitans_own():
    from torchtitan.distributed.pipeline_parallel import (
        _generate_llm_fqn_per_model_part,
        _get_pp_rank_to_stage_indices_mapping,
    )

    for stages in range(1, 9):
        for layers in range(1, 20):
            for iw in range(0, 3):
                for ow in range(0, 3):
                    try:
                        parts = _generate_llm_fqn_per_model_part(stages, layers, iw, ow)
                    except ValueError:
                        with pytest.raises(ValueError):
                            generate_split(stages, layers, iw, ow)
                        continue
                    assert generate_split(stages, layers, iw, ow) == [
                        sum(m.startswith("layers.") for m in p) for p in parts]
    for sched, per_rank in (("1F1B", 1), ("Interleaved1F1B", 2), ("Interleaved1F1B", 3), ("ZBVZeroBubble", 2),
                            ("DualPipeV", 2), ("LoopedBFS", 2)):
        for pp in (2, 3, 4):
            n = pp * per_rank
            ranks = stage_ranks(pp, sched, n)
            for r in range(pp):
                assert tuple(s for s in range(n) if ranks[s] == r) == tuple(
                    sorted(_get_pp_rank_to_stage_indices_mapping(r, pp, sched, n)))


def test_snapshot_schedules_match_torch():
    """The snapshot's single-stage schedules are torch's ``PipelineScheduleSingle`` subclasses, and the
    plan's own table (``plan.torchtitan_split.SINGLE_STAGE``, read by the legality rules) is the same."""
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, get_schedule_class

    for name, single in ts.schedules().items():
        assert issubclass(get_schedule_class(name), PipelineScheduleSingle) == single
    assert SINGLE_STAGE == ts.schedules()


def test_other_version_is_built_once_into_the_cache(tmp_path, monkeypatch):
    """A different installed torchtitan: the snapshot is built on first use, written atomically to
    $PRIMUS_LAUNCH_CACHE and read from there afterwards."""
    calls = []
    bundled = json.loads(ts.bundled_path().read_text())

    def build():
        calls.append(1)
        return {**bundled, "torchtitan": "9.9.9"}

    monkeypatch.setenv("PRIMUS_LAUNCH_CACHE", str(tmp_path))
    monkeypatch.setattr(ts, "installed_version", lambda: "9.9.9")
    monkeypatch.setattr(ts, "build_snapshot", build)
    ts.snapshot.cache_clear()
    try:
        assert ts.snapshot()["torchtitan"] == "9.9.9" and len(calls) == 1
        assert json.loads((tmp_path / "torchtitan-9.9.9.json").read_text())["torchtitan"] == "9.9.9"
        assert not list(tmp_path.glob(".*.tmp"))
        ts.snapshot.cache_clear()
        assert ts.snapshot()["torchtitan"] == "9.9.9" and len(calls) == 1  # from the cache
    finally:
        ts.snapshot.cache_clear()


_NO_TORCH = """
import sys
from primus_launch.cli import main
rc = main({argv!r})
heavy = sorted(m for m in ("torch", "torchtitan", "megatron") if m in sys.modules)
print("HEAVY", heavy, file=sys.stderr)
sys.exit(rc)
"""


@pytest.mark.parametrize("args", [
    ["--project", "recipes/torchtitan/llama3.1_8b.toml", "--dry-run", "--json"],
    ["--project", "--dry-run", "--json", "--", "torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train",
     "--module", "llama3", "--config", "llama3_8b", "--parallelism.tensor_parallel_degree", "2"],
], ids=["toml", "launch-line"])
def test_dry_run_imports_no_framework(args):
    r = subprocess.run([sys.executable, "-c", _NO_TORCH.format(argv=args)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "HEAVY []" in r.stderr


def test_bundled_torchrun_option_table_equals_torchs_parser():
    from primus_launch.adapters.torchrun_argv import BUNDLED_TORCH, TABLE_FILE, live_option_table

    bundled = json.loads((ts.DATA_DIR / TABLE_FILE.format(BUNDLED_TORCH)).read_text())
    assert {k: (v[0], v[1]) for k, v in bundled.items()} == live_option_table()
