"""torchtitan < 0.2.0's Qwen3 q / k norm gathers under TP (``cost/titan_qk_norm.py``).

Truth: the TP plan of d66b72a6a on a Qwen3-style attention block with torchtitan's own ``NoParallel`` and torch's
DTensor (``tests/titan_qk_norm_trace.py``); what ``NoParallel`` adds over PR #1870's ``SequenceParallel(
sequence_dim=2)`` must be exactly the calls the cost model adds (``where="qk_norm_gather"``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from primus_launch.plan import Plan, PlanError
from primus_launch.projection.cost import layer_collectives as lc
from primus_launch.projection.cost.titan_qk_norm import pre_fix, qk_norm_gathers

SHAPES = {2: dict(tp=2, b=2, s=8, h=64, nq=4, nkv=2, d=16), 4: dict(tp=4, b=1, s=16, h=64, nq=8, nkv=4, d=8)}


def _plan(tp: int, b: int, s: int, h: int, nq: int, nkv: int, d: int, titan: str | None = "0.1.0") -> Plan:
    return Plan.model_validate({
        "source": dict(framework="torchtitan"),
        "model": dict(num_layers=2, hidden_size=h, ffn_hidden_size=2 * h, num_attention_heads=nq, num_query_groups=nkv,
                      head_dim=d, qk_layernorm=True, vocab_size=512, seq_length=s),
        "parallel": dict(tp=tp, sequence_parallel=tp > 1),
        "training": dict(global_batch_size=b, micro_batch_size=b, precision="bf16"),
        "cluster": dict(gpu="h100-sxm", gpus_per_node=tp),
        "software": dict(torchtitan=titan),
    })


ROPE_CASE = {**SHAPES[2], "rope": 1}


@pytest.fixture(scope="module")
def all_traces() -> dict:
    """Every trace of this file -- each TP shape, and TP 2 with the RoPE -- in ONE fresh interpreter (each trace
    builds its own fake group and block; one import of torch and torchtitan for all three)."""
    script = Path(__file__).with_name("titan_qk_norm_trace.py")
    cases = [*SHAPES.values(), ROPE_CASE]
    r = subprocess.run([sys.executable, str(script), json.dumps(cases)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(got) == len(cases)
    return {**dict(zip(SHAPES, got)), "rope": got[-1]}


@pytest.fixture(scope="module")
def traces(all_traces) -> dict[int, dict[str, list]]:
    return {tp: all_traces[tp] for tp in SHAPES}


@pytest.mark.parametrize("tp", sorted(SHAPES))
def test_extra_calls_match_the_trace(traces, tp):
    t = traces[tp]
    extra = Counter(tuple(c) for c in t["noparallel"]) - Counter(tuple(c) for c in t["seqpar"])
    assert Counter(tuple(c) for c in t["seqpar"]) - Counter(tuple(c) for c in t["noparallel"]) == Counter()
    plan = _plan(**SHAPES[tp])
    ops = {"all_gather": "all_gather_into_tensor", "reduce_scatter": "reduce_scatter_tensor"}
    model = Counter((c.phase, ops[c.op], int(c.nbytes // 2)) for c in lc.tp_calls(plan) if c.where == "qk_norm_gather")
    assert extra and model == extra
    # in every layer's list, and absent on the current stack
    assert sum(c.where == "qk_norm_gather" for c in lc.layer_calls(plan)) == sum(extra.values())
    assert not [c for c in lc.tp_calls(_plan(**SHAPES[tp], titan=None)) if c.where == "qk_norm_gather"]


def test_versions():
    assert pre_fix("0.1.0") and pre_fix("0.1.0.dev20250917") and pre_fix("0.2.0.dev20251001")
    assert not any(pre_fix(v) for v in (None, "0.2.0", "0.2.2", "0.3.0", "0.2.0.dev20251015"))
    assert qk_norm_gathers(_plan(**SHAPES[2]))
    assert not qk_norm_gathers(_plan(**{**SHAPES[2], "tp": 1}))
    with pytest.raises((PlanError, ValueError), match="software.torchtitan"):
        _plan(**SHAPES[2], titan="zero")


def test_wrapper_reads_torchtitan(tmp_path):
    from primus_launch.errors import UserError
    from primus_launch.adapters import primus_toml

    w = tmp_path / "w.toml"
    w.write_text('[recipe]\npath = "x.toml"\n[software]\ntorchtitan = "1.x"\n')
    with pytest.raises((UserError, PlanError), match="torchtitan"):
        primus_toml.read_wrapper(w)


def test_rope_runs_on_replicated_q_forward_and_sharded_backward(all_traces):
    """The trace's q at the RoPE (d66b72a6a's ``apply_rotary_emb``): all heads forward under ``NoParallel``, the
    rank's heads in its gradient (and both ways under PR #1870's plan); the cost model's RoPE record moves the
    forward bytes of ``nq + nkv`` heads and the backward bytes of ``(nq + nkv) / t``."""
    from primus_launch.projection.cost.roofline import layer_op_times

    out = all_traces["rope"]
    tp, nq = SHAPES[2]["tp"], SHAPES[2]["nq"]
    places = {st: {c[1]: (c[2], c[3][2]) for c in out[st] if c[1].startswith("rope_in")} for st in out}
    assert places["noparallel"] == {"rope_in_q": ("R", nq), "rope_in_q_grad": ("S(2)", nq // tp)}
    assert places["seqpar"] == {"rope_in_q": ("S(2)", nq // tp), "rope_in_q_grad": ("S(2)", nq // tp)}

    def rope(titan):
        p = _plan(**{**SHAPES[2], "s": 4096}, titan=titan)
        return next(o for o in layer_op_times(p)["dense"] if o[0].startswith("RoPE"))

    old, new = rope("0.1.0"), rope(None)
    assert old[4][3] == pytest.approx(tp * new[4][3])      # forward bytes: every head vs the rank's
    assert old[2] == pytest.approx(new[2]) and old[1] > new[1]   # backward: the same bytes
