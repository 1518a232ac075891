"""The tuner's LLM loop, driven through the real ``openai`` client against a loopback fake server."""

from __future__ import annotations

import json

import pytest

from fake_openai_server import FakeOpenAI
from pathlib import Path

from primus_launch.adapters import load_recipe
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.projection.memory.legality import prefilter as real_prefilter
from primus_launch.tuner.search import tune
from primus_launch.tuner.space import SpaceConfig

SPACE = SpaceConfig.restricted()
RECIPE = Path(__file__).resolve().parents[1] / "recipes/megatron/llama3.1_8b.sh"  # 8 GPUs, TP=2


def plan():
    return load_recipe(RECIPE)


def _tune(server: FakeOpenAI | None, monkeypatch, **kw):
    if server is not None:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return tune(plan(), score=project_dry_run, llm_model="fake-model", space=SPACE, budget=60, llm_timeout_s=1.0, **kw)


def test_good_candidates_are_scored_with_llm_source(monkeypatch):
    # a cross-axis move (the recipe is TP=2, PP=1, MBS=1); fields the LLM leaves out follow the
    # incumbent, repaired to the nearest legal candidate (here: SP off at TP=1, recompute to fit)
    good = json.dumps({"candidates": [{"tp": 1, "micro_batch_size": 2, "rationale": "no TP comm"},
                                      {"tp": 4, "pp": 1, "cp": 2}]})
    with FakeOpenAI([("reply", good)]) as srv:
        res = _tune(srv, monkeypatch)
    llm = [t for t in res.trials if t.source == "llm"]
    assert any(t.status == "scored" and t.changes.get("parallel.tp") == 1
               and t.changes.get("training.micro_batch_size") == 2 for t in llm)
    assert any(t.status == "scored" and t.changes.get("parallel.tp") == 4 and t.changes.get("parallel.cp") == 2
               for t in llm)
    assert res.warnings == [] or all("LLM" not in w for w in res.warnings)
    # the prompt carried the history with breakdowns and the allowed values
    user = json.loads(srv.requests[0]["messages"][1]["content"])
    assert srv.requests[0]["model"] == "fake-model"
    assert user["scored_trials_fastest_first"] and "time_breakdown_s" in user["scored_trials_fastest_first"][0]
    assert "memory_breakdown_gib" in user["scored_trials_fastest_first"][0]
    assert user["allowed_values"]["tp"] == [1, 2, 4, 8]


def test_malformed_reply_is_fed_back_and_does_not_crash(monkeypatch):
    with FakeOpenAI([("reply", "I think tp=4 would be {great"), ("reply", '{"candidates": []}')]) as srv:
        res = _tune(srv, monkeypatch)
    assert any("not the JSON object" in w for w in res.warnings)
    second = json.loads(srv.requests[1]["messages"][1]["content"])
    assert any("not the JSON object" in f for f in second["rejected_last_round"])
    assert res.best.iteration_time_s <= res.baseline.iteration_time_s


def test_hallucinated_field_is_rejected_with_reason(monkeypatch):
    bad = json.dumps({"candidates": [{"tp": 4, "flash_attention_version": 3}]})
    with FakeOpenAI([("reply", bad), ("reply", '{"candidates": []}')]) as srv:
        res = _tune(srv, monkeypatch)
    rej = [t for t in res.trials if t.source == "llm" and t.status == "rejected"]
    assert rej and "flash_attention_version" in rej[0].reason and "Extra inputs" in rej[0].reason
    second = json.loads(srv.requests[1]["messages"][1]["content"])
    assert any("flash_attention_version" in f for f in second["rejected_last_round"])
    assert not any(t.source == "llm" and t.status == "scored" for t in res.trials)


def test_illegal_candidate_is_rejected_never_scored(monkeypatch):
    # tp=3 does not divide 16 heads / the world size; mbs=3 does not divide GBS/DP
    bad = json.dumps({"candidates": [{"tp": 3}, {"micro_batch_size": 3}, {"pipeline_schedule": "zbv"}]})
    with FakeOpenAI([("reply", bad), ("reply", '{"candidates": []}')]) as srv:
        res = _tune(srv, monkeypatch)
    rej = [t for t in res.trials if t.source == "llm" and t.status == "rejected"]
    assert len(rej) == 3
    assert "illegal" in rej[0].reason and "tp" in rej[0].reason
    assert "global_batch_size" in rej[1].reason
    assert not any(t.source == "llm" and t.status == "scored" for t in res.trials)


def test_memory_illegal_candidate_is_rejected_by_prefilter(monkeypatch):
    # a pre-filter that rejects every tp=1 plan for memory: the LLM's tp=1 proposal is never scored
    def pf(p):
        return "memory: does not fit at tp=1" if p.parallel.tp == 1 else real_prefilter(p)

    big = json.dumps({"candidates": [{"tp": 1, "pp": 1, "cp": 1, "micro_batch_size": 2}]})
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeOpenAI([("reply", big), ("reply", '{"candidates": []}')]) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        res = tune(plan(), score=project_dry_run, prefilter=pf, llm_model="fake-model",
                   space=SPACE, budget=60, llm_timeout_s=1.0)
    rej = [t for t in res.trials if t.source == "llm" and t.status == "rejected"]
    assert rej and "pre-filter" in rej[0].reason and "memory" in rej[0].reason
    assert not any(t.status == "scored" and t.changes.get("parallel.tp") == 1 for t in res.trials)


@pytest.mark.parametrize("behaviour", [("status", 500), ("sleep", 3.0)], ids=["http500", "timeout"])
def test_dead_or_slow_endpoint_degrades_to_planner(monkeypatch, capsys, behaviour):
    with FakeOpenAI([behaviour]) as srv:
        res = _tune(srv, monkeypatch)
        plain = tune(plan(), score=project_dry_run, space=SPACE, budget=60)
    assert any("endpoint failed" in w and "planner" in w for w in res.warnings)
    assert "endpoint failed" in capsys.readouterr().err
    # the planner's result is unchanged by the failed LLM
    assert res.best.iteration_time_s == plain.best.iteration_time_s
    assert [t.changes for t in res.trials] == [t.changes for t in plain.trials]


def test_unreachable_endpoint_degrades(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # discard port: connection refused
    res = _tune(None, monkeypatch)
    assert any("endpoint failed" in w for w in res.warnings)
    assert res.best.iteration_time_s <= res.baseline.iteration_time_s


def test_missing_api_key_degrades(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    res = tune(plan(), score=project_dry_run, llm_model="fake-model", space=SPACE, budget=30, llm_timeout_s=1.0)
    assert any("cannot create the client" in w for w in res.warnings)
    assert res.scored > 1
