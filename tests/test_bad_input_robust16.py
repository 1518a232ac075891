"""Bad-input classes of the robust16 round (``scripts/bad_input_campaign.py --only r16:``): models and clusters so
large that a tune never answered.

- A model whose weights alone overflow every GPU whatever the layout (hidden size 2^20: 5.6e14 parameters on 8
  GPUs, 1.5e17 on 8,192): the tune priced every candidate's memory, layer by layer, before saying that no plan fits
  (a 9,984-layer one on 1,024 nodes: 101K plans, minutes).  Now one line before the search, from a floor every
  plan's memory is at or above (``tuner/memory_floors.py`` ``whole_space_floor``: each parameter stored once, in 4
  bits at least), checked here against the memory model of the bundled recipes.
- Many pipeline stages (PP 2,048 - 8,192 of a 9,984-layer model): the uneven splits' window of first / last stage
  counts was walked pair by pair, O(pp^2) per pipeline shape (8,192 stages: 67M pairs); now O(pp), the same splits.
"""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_run import run_cli
from test_bad_input_robust11 import _refused_writing_nothing as _refused  # refused, nothing written
from test_tuner_space import _uneven_splits_by_every_count

from primus_launch.adapters import load_recipe
from primus_launch.projection.memory.estimate import stage_memory
from primus_launch.tuner import axis_values
from primus_launch.tuner.memory_floors import whole_space_floor, whole_space_out

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
# hidden 2^20 (heads of 128 channels), FFN 4 x hidden: 1.76e13 parameters per layer
HUGE = (BASH.replace("--hidden-size 4096", "--hidden-size 1048576").replace("--ffn-hidden-size 14336",
        "--ffn-hidden-size 4194304").replace("--num-attention-heads 32", "--num-attention-heads 8192"))


# ------------------------------------------------------------------------- weights that fit no layout
def test_tune_of_a_model_whose_weights_fit_no_layout_is_refused_before_the_search(tmp_path, monkeypatch):
    """The floor refuses the tune without searching (the search is replaced by a failure here): one line naming
    the parameters, the floor per GPU and the capacity; nothing written."""
    import primus_launch.tuner.search as search

    def no_search(*a, **k):
        raise AssertionError("searched")

    monkeypatch.setattr(search, "tune", no_search)
    line = _refused(tmp_path, {"r.sh": HUGE}, ["--tune", "r.sh", "--dry-run", "--out", "t.sh", "--report", "t.html"],
                    "--tune=r.sh", "no plan fits in memory on 1 x 8 h100-sxm", "parameters", "per GPU of 79.2 GiB",
                    "nothing searched", "nothing written")
    # Llama's layer by its shapes (GQA of 8 groups of 128 channels, SwiGLU), untied 128,256-token embedding and head
    h, ffn, layers, vocab = 2 ** 20, 2 ** 22, 32, 128256
    params = layers * (2 * h * h + 2 * h * 8 * 128 + 3 * h * ffn) + 2 * vocab * h
    assert f"model's {params:.3g} parameters" in line, line
    assert f"need {params * 0.5 / 8 / 2 ** 30:,.1f} GiB per GPU" in line, line


def test_whole_space_floor_refusal_names_the_margin(tmp_path, monkeypatch):
    line = _refused(tmp_path, {"r.sh": HUGE}, ["--tune", "r.sh", "--dry-run", "--out", "t.sh", "--memory-margin", "0.5"],
                    "--memory-margin=0.5 (39.6 GiB kept free)")
    assert "nothing written" in line


@pytest.mark.parametrize("rel", ["megatron/llama3.1_8b.sh", "megatron/llama3.1_70b.sh", "megatron/mixtral_8x22b.sh",
                                 "megatron/deepseek_v3_h100_1024gpu_fp8.yaml", "megatron/qwen3_235b_a22b.sh",
                                 "torchtitan/llama3.1_8b.toml", "torchtitan/deepseek_v3_671b.toml"])
def test_whole_space_floor_is_at_or_below_the_memory_model(rel):
    """The floor is a floor of the memory model: at most the weights the fullest stage holds (``stage_memory``), so
    a tune it refuses has no plan the projection calls fitting; the bundled recipes are not refused."""
    plan = load_recipe(ROOT / "recipes" / rel)
    weights = max(s.parameters_bytes for s in stage_memory(plan))
    assert 0 < whole_space_floor(plan) <= weights
    assert whole_space_out(plan) is None and whole_space_out(plan, memory_certain=True) is None


# ------------------------------------------------------------------------- many pipeline stages
@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 400), pp=st.integers(3, 200), vpp=st.integers(1, 4))
def test_uneven_splits_equal_every_count_at_many_stages(L, pp, vpp):
    """The same splits as trying every first / last count (``test_tuner_space``'s definition), past the stage
    counts that test samples."""
    assert axis_values.uneven_splits(L, pp, vpp) == _uneven_splits_by_every_count(L, pp, vpp)


@pytest.mark.parametrize("L, pp, vpp", [(9984, 8192, 1), (9984, 4096, 2), (10000, 1000, 1), (4096, 512, 4)])
def test_uneven_splits_walk_a_number_of_counts_linear_in_the_stages(monkeypatch, L, pp, vpp):
    """The counts walked (the sum of the lengths of the ranges ``uneven_splits`` makes) are O(pp): 8,192 stages
    walked every pair of a 16K-wide window (67M), minutes of a tune per pipeline shape."""
    walked = [0]

    def counting_range(*args):
        r = builtins.range(*args)
        walked[0] += len(r)
        return r

    monkeypatch.setattr(axis_values, "range", counting_range, raising=False)
    axis_values.uneven_splits(L, pp, vpp)
    assert walked[0] <= 16 * (pp + 4), walked[0]


# ------------------------------------------------------------------------- thousands of pipeline stages, projected
def test_long_pipeline_of_few_microbatches_is_simulated_whole(monkeypatch):
    """PP 2,048 x 128 micro-batches (past the full-simulation bound): the extrapolation's cyclicity run was 24,588
    micro-batches (100M actions; PP 4,096: 400M, a ``--project`` that never ended) for a schedule of 128.  Now the
    128 are simulated whole, and the makespan is 1F1B's closed form with equal stage costs and free sends:
    ``(m + pp - 1) (f + b)`` (Narayanan et al. 2021, the pipeline bubble of ``pp - 1`` micro-batch slots)."""
    from primus_launch.projection.pipeline import simulate as sim

    runs: list[int] = []
    plan = sim._plan

    def counted(schedule, pp, vpp, m, group=None):
        runs.append(m)
        assert m <= 128, f"a run of {m} micro-batches"  # before it ran, not after it ended
        return plan(schedule, pp, vpp, m, group)

    monkeypatch.setattr(sim, "_plan", counted)
    pp, m = 2048, 128
    res = sim.simulate("1f1b", pp, 1, m, sim.uniform_costs(pp, 1, 1.0, 1.0, 0.5), 0.0)
    assert max(runs) <= m, max(runs)
    assert res.makespan_s == pytest.approx((m + pp - 1) * (1.0 + 1.0 + 0.5), rel=1e-12)


class _CountedEvents(list):
    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


def test_chrome_trace_walks_the_events_a_fixed_number_of_times():
    """The trace's per-stage thread names came from one walk of every event per stage (PP 4,096 x 128 micro-batches:
    4,096 walks of a million events, a ``--trace`` that never ended); the same metadata from one walk."""
    from primus_launch.projection.pipeline.simulate import PipelineResult, chrome_trace
    from primus_launch.projection.result import TimelineEvent

    pp = 64
    ev = _CountedEvents(TimelineEvent(stage=s, kind=k, microbatch=0, start_s=0.0, end_s=1.0)
                        for s in range(pp) for k in (("F", "send") if s % 2 else ("F",)))
    _CountedEvents.walks = 0
    out = chrome_trace(PipelineResult(1.0, [1.0] * pp, [0.0] * pp, events=ev))
    assert _CountedEvents.walks <= 4, _CountedEvents.walks
    threads = {(e["pid"], e["tid"]) for e in out["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {(s, 0) for s in range(pp)} | {(s, 1) for s in range(1, pp, 2)}
