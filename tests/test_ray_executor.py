"""The Ray backend of the tuner (``--ray-address``): a Ray-backed tune of a bundled recipe on a local
Ray instance returns the local tune's plan, certificate and trials; a worker's expansions are a
superset of what the sequential search asks (nothing recomputed at replay); the measured pieces fan
out one task per piece (one GPU each on CUDA) into the measurement cache; the option's mistakes are
one line, exit 2.

Ray is in the ``test`` extra (pyproject.toml), so CI runs these; one local instance serves the module.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
from pathlib import Path

import pytest

from primus_launch.cli import main

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "megatron" / "tiny_gpt_cpu.sh"


@pytest.fixture(scope="module")
def local_ray():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    yield ray
    ray.shutdown()


def _tune_json(tmp_path: Path, name: str, *extra: str, capsys) -> dict:
    out = tmp_path / f"{name}.sh"
    assert main(["--tune", str(RECIPE), "--dry-run", "--json", "--out", str(out), *extra]) == 0
    d = json.loads(capsys.readouterr().out)
    d["tuned_text"] = out.read_text()
    return d


def test_ray_tune_returns_the_local_plan_and_certificate(local_ray, tmp_path, capsys):
    here = _tune_json(tmp_path, "local", capsys=capsys)
    far = _tune_json(tmp_path, "ray", "--ray-address", "local", capsys=capsys)
    assert far["executor"].startswith("a local Ray instance (2 CPUs")
    assert here["certificate"]["certified"] and far["certificate"] == here["certificate"]
    assert far["best_plan"] == here["best_plan"] and far["tuned_text"] == here["tuned_text"]
    assert far["best"]["iteration_time_s"] == here["best"]["iteration_time_s"]
    # every trial, in the same order: the replay is the sequential search
    assert far["trials"] == here["trials"]


def test_ray_workers_answer_every_plan_the_replay_asks(local_ray):
    """The superset argument of ``expansion.expand_ahead``, on the Ray workers: the replay computes
    nothing itself, and its result is the sequential one."""
    from primus_launch.adapters import load_recipe
    from primus_launch.ray_cluster import connect
    from primus_launch.tuner.branch_bound import BranchBound
    from primus_launch.tuner.incumbent import Incumbent
    from primus_launch.tuner.search import default_prefilter, default_score
    from primus_launch.tuner.space import Space

    plan = load_recipe(RECIPE)
    bb = BranchBound(plan, Space(plan), score=default_score(0.0), prefilter=default_prefilter(0.0))
    seq = bb.run(Incumbent())
    par = bb.run(Incumbent(), executor=connect("local"))
    assert par.recomputed == 0 and seq.certificate == par.certificate and par.inc == seq.inc
    assert [(i, r.iteration_time_s) for i, r in par.scored] == [(i, r.iteration_time_s) for i, r in seq.scored]
    assert par.rejected == seq.rejected


def test_ray_exhaustive_sweep_merges_in_index_order(local_ray):
    """``--exhaustive``'s index ranges on the Ray workers (3 ranges of 16 plans): the trials, counts and
    best of the sweep in this process."""
    from primus_launch.adapters import load_recipe
    from primus_launch.ray_cluster import connect
    from primus_launch.tuner.search import tune
    from primus_launch.tuner.space import SpaceConfig

    plan = load_recipe(RECIPE)
    cfg = SpaceConfig(max_cp=1, max_vpp=1, max_mbs=2, block_recompute_layers=(), max_dp_replicate_choices=1,
                      execution=False)
    one = tune(plan, space=cfg, exhaustive=True, workers=1)
    far = tune(plan, space=cfg, exhaustive=True, executor=connect("local"))
    assert far.workers == 2 and far.certificate == one.certificate and far.certificate.certified
    key = [(t.changes, t.status, t.iteration_time_s, t.reason) for t in one.trials]
    assert [(t.changes, t.status, t.iteration_time_s, t.reason) for t in far.trials] == key
    assert far.best_plan == one.best_plan and (far.scored, far.legal_candidates) == (one.scored, one.legal_candidates)


def test_measured_pieces_fan_out_one_task_per_piece_into_the_cache(tmp_path):
    """Each piece missing from the cache is one task (asking for one GPU on CUDA, none on the CPU); its
    record goes into the cache under the key the measured projection looks up, so that projection
    then measures nothing; nothing missing, nothing is sent.  (The executor runs the tasks in this
    process: a Ray worker would import megatron-core afresh; the Ray transport is the tests' above.)"""
    from primus_launch.executor import InProcess
    from primus_launch.plan import Plan
    from primus_launch.projection.measure.cache import MeasureCache
    from primus_launch.projection.measure.fanout import prefetch_pieces
    from primus_launch.projection.measure.timing import TimingPolicy
    from primus_launch.projection.measure.upscale import make_policy, piece_keys, project_measured

    class Recording(InProcess):
        def __init__(self):
            super().__init__()
            self.asked: list[tuple[str, float]] = []

        def submit(self, fn, *args, gpus=0):
            self.asked.append((args[0], gpus))
            return super().submit(fn, *args, gpus=gpus)

    plan = Plan.model_validate({
        "model": dict(num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_query_groups=4,
                      vocab_size=1024, seq_length=32),
        "training": dict(global_batch_size=4, micro_batch_size=2, precision="bf16"),
        "cluster": {"gpus_per_node": 1, "gpu": "h100-sxm"}})
    pol = make_policy(TimingPolicy(warmup=1, min_repeats=3, max_repeats=3, min_sample_s=0.0, max_inner=1,
                                   min_window_s=0.0))
    cache = MeasureCache(tmp_path)
    keys = piece_keys(plan, "cpu", policy=pol)
    first = project_measured(plan, device="cpu", cache_dir=tmp_path, policy=pol)   # every piece measured here
    assert first.measurement.cache_hits == 0 and set(first.measurement.pieces) == set(keys)
    cache.path(keys["attn_core"]).unlink()
    ex = Recording()
    assert prefetch_pieces(plan, "cpu", ex, cache, policy=pol) == {"attn_core": True}
    assert ex.asked == [("attn_core", 0)] and cache.peek(keys["attn_core"]) is not None
    r = project_measured(plan, device="cpu", cache_dir=tmp_path, policy=pol)
    assert r.measurement.cache_hits == len(keys) == len(r.measurement.pieces)
    assert prefetch_pieces(plan, "cpu", ex, cache, policy=pol) == {} and len(ex.asked) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("value, what", [
    ("127.0.0.1:{port}", "no Ray head answers at 127.0.0.1:{port} within"),
    ("head-node", "one of HOST:PORT of a running Ray head"),
    ("10.0.0.1:99999", "one of HOST:PORT of a running Ray head"),
])
def test_bad_ray_address_is_one_line(tmp_path, capsys, value, what):
    port = _free_port()
    value, what = value.format(port=port), what.format(port=port)
    rc = main(["--tune", str(RECIPE), "--dry-run", "--out", str(tmp_path / "t.sh"), "--ray-address", value])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"primus-launch: error: --ray-address={value!r}: ") and what in err
    assert not (tmp_path / "t.sh").exists()


def test_ray_not_installed_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)   # import ray -> ImportError
    rc = main(["--tune", str(RECIPE), "--dry-run", "--out", str(tmp_path / "t.sh"), "--ray-address", "local"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "--ray-address: Ray is not installed" in err and "pip install 'primus-launch[ray]'" in err
    rc = main(["--project", str(RECIPE), "--dry-run", "--ray-address", "local"])
    assert rc == 2 and "--ray-address=local: only with --tune" in capsys.readouterr().err


def test_the_default_tune_does_not_import_ray(tmp_path):
    import subprocess

    code = ("import sys; from primus_launch.cli import main; "
            f"rc = main(['--tune', {str(RECIPE)!r}, '--dry-run', '--json', '--max-work', '50', '--out', "
            f"{str(tmp_path / 't.sh')!r}]); print(rc, 'ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "0 False", out.stderr[-2000:]
