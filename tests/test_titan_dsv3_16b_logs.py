"""The TorchTitan DeepSeek-V3 16B memory cases against what their own logs and torchtitan's own policy say.

Four published rank-0 logs of the 16B flavor (``scripts/validation/build_memory_cases.py``): PR #1610's
FlexAttention run (2025-08-20), PR #1672's 'before' and 'after' runs (2025-09-01) and issue #1789's run after
lowering ``local_batch_size`` (2025-10-02).  Each log line gives ``tps`` (tokens per second per GPU,
``components/metrics.py``: the local tokens since the last log over the seconds since it) and ``tflops`` (``tps`` x
the flavor's ``num_flops_per_token``).  So each log states, independently of any memory figure:

- the tokens per GPU and step: ``tps`` x the seconds between the step-1 and step-10 lines / 9 steps;
- the sequence length: ``tflops / tps`` is torchtitan's per-token flops of that date
  (``models/deepseek_v3/model/args.py`` ``get_nparams_and_flops`` at f738a03bf and c4e229115 alike:
  ``6 x (non-embedding dense + router + shared experts + routed experts x top_k / E) + 12 x layers x heads x
  (dim / heads) x seq_len``).

The cases' plans must reproduce both.  And the all-to-all policy of each build: PR #1672's 'before' runs the save list
without ``_c10d_functional.all_to_all_single`` (added by that PR), PR #1610's build sends the tokens with an
autograd.Function over ``torch.distributed.all_to_all_single`` (c10d); torchtitan 0.3.0's own ``SelectiveAC`` with
that op dropped from its save ops (``tests/titan_a2a_trace.py`` ``:unlisted``) recomputes every exchange, and the
memory model keeps no all-to-all bytes for those plans -- and ``2 a Tk h`` per MoE layer for the 'after' run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "scripts" / "validation" / "memory_cases.json"

#: case id -> (step-1 line time, step-10 line time, tps, tflops) as the logs print them
LOGS = {
    "titan_pr1610_dsv3_16b_h100_96gb_8gpu_ep8_lbs8": ("22:16:59,699", "22:17:32,228", 9066, 157.99),
    "titan_pr1672_dsv3_16b_h100_4gpu_ep4_seq512_sac_before": ("16:03:30,779", "16:04:22,882", 708, 10.65),
    "titan_pr1672_dsv3_16b_h100_4gpu_ep4_seq512_sac_after": ("16:01:39,691", "16:02:25,603", 803, 12.08),
    "titan_dsv3_16b_h100_8gpu_lbs4_ep8": ("20:23:53,470", "20:24:06,144", 11636, 202.78),
}


def _case(cid: str) -> dict:
    return next(c for c in json.loads(CASES.read_text())["cases"] if c["id"] == cid)


def _plan(cid: str):
    for d in (ROOT / "scripts" / "validation", ROOT / "scripts"):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    import validate_memory as vm

    vm.load_gpus()
    return vm.plan_of_case(_case(cid))


def _flops_per_token(plan) -> float:
    """torchtitan's ``get_nparams_and_flops`` of 2025-08/09 for the plan's model and sequence (module doc), the
    parameters counted from the per-unit shapes of ``memory.titan.titan_param_shapes`` (checked against torchtitan's
    modules in tests/test_memory_titan_moe.py)."""
    from primus_launch.projection.memory.titan import titan_param_shapes

    m = plan.model

    def count(part: str, routed_share: float = 1.0) -> float:
        return sum(math.prod(s) * (routed_share if routed else 1.0)
                   for s, routed in titan_param_shapes(m, part, tp=1, ep=1))

    moe_layers = m.num_moe_layers
    dense_layers = m.num_layers - moe_layers
    active = (dense_layers * count("dense") + moe_layers * count("moe", m.moe_router_topk / m.num_experts)
              + count("head"))
    h, heads = m.hidden_size, m.num_attention_heads
    return 6 * active + 12 * m.num_layers * heads * (h // heads) * m.seq_length


@pytest.mark.parametrize("cid", sorted(LOGS))
def test_case_plan_reproduces_its_logs_tokens_and_flops(cid):
    t1, t10, tps, tflops = LOGS[cid]
    fmt = "%H:%M:%S,%f"
    seconds = (datetime.strptime(t10, fmt) - datetime.strptime(t1, fmt)).total_seconds()
    plan = _plan(cid)
    tokens = plan.model.seq_length * plan.training.micro_batch_size
    assert tps * seconds / 9 == pytest.approx(tokens, rel=0.02), (cid, tps * seconds / 9, tokens)
    assert _flops_per_token(plan) == pytest.approx(tflops * 1e12 / tps, rel=0.01), cid


def test_flops_formula_tells_the_sequences_apart():
    """The check above can fail: the 'before' plan at the job table's own seq_len 4096 is 16 % off its log."""
    plan = _plan("titan_pr1672_dsv3_16b_h100_4gpu_ep4_seq512_sac_before")
    at4096 = plan.with_changes(model={"seq_length": 4096})
    assert abs(_flops_per_token(at4096) / (10.65e12 / 708) - 1) > 0.1


@pytest.fixture(scope="module")
def traced() -> dict:
    pytest.importorskip("torchtitan")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "titan_a2a_trace.py"), "partial_dtensor:eager",
                          "partial_dtensor:eager:unlisted"], capture_output=True, text=True, timeout=600, env=env)
    line = next((x for x in run.stdout.splitlines() if x.startswith("JSON")), None)
    assert line is not None, run.stderr[-3000:]
    return json.loads(line[4:])


@pytest.mark.parametrize("cid,kept", [("titan_pr1610_dsv3_16b_h100_96gb_8gpu_ep8_lbs8", False),
                                      ("titan_pr1672_dsv3_16b_h100_4gpu_ep4_seq512_sac_before", False),
                                      ("titan_pr1672_dsv3_16b_h100_4gpu_ep4_seq512_sac_after", True)])
def test_all_to_all_kept_as_the_builds_save_list_says(traced, cid, kept):
    """torchtitan's own SelectiveAC saves the functional token exchanges with its save list and recomputes them
    (re-running all three forward exchanges in the backward) without that op on it; the case plans' memory keeps
    ``2 a Tk h`` of all-to-all output per MoE layer exactly where the build's list had the op."""
    from primus_launch.projection.cost.titan_sac import op_sac_a2a_rows
    from primus_launch.projection.memory.titan import layer_activation_bytes, moe_tokens

    listed, unlisted = traced["partial_dtensor:eager"], traced["partial_dtensor:eager:unlisted"]
    assert {d for _, d, _ in listed["decisions"]} == {"MUST_SAVE"}
    assert {d for _, d, _ in unlisted["decisions"]} == {"PREFER_RECOMPUTE"}
    assert unlisted["backward"] == listed["backward"] + listed["forward"]
    plan = _plan(cid)
    m, t = plan.model, plan.training
    assert t.recompute.granularity in ("op", "selective") and plan.parallel.ep > 1 and not t.compile
    kw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=1, ac="op", moe=True, ep=plan.parallel.ep)
    diff = (layer_activation_bytes(m, a2a_rows=op_sac_a2a_rows(plan), **kw).kept
            - layer_activation_bytes(m, a2a_rows=0.0, **kw).kept)
    tk = moe_tokens(m.seq_length * t.micro_batch_size, tp=1, ep=plan.parallel.ep) * m.moe_router_topk
    assert diff == pytest.approx(2 * 2 * tk * m.hidden_size if kept else 0.0)
