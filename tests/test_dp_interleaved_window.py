"""DP communication under Megatron's interleaved schedule, launched per model chunk (cost/dp_comm.py).

megatron-core 0.16.1 ``pipeline_parallel/schedules.py`` ``forward_backward_pipelining_with_interleaving`` calls
``config.grad_sync_func[j]`` (Megatron-LM's default ``align_grad_reduce``: each chunk's ``start_grad_sync``) after
the rank's backward number ``k_j + r`` and ``config.param_sync_func[q]`` (``align_param_gather``) for chunks 0 and
1 at the start and for chunk ``q >= 2`` before the forward number ``f_{q-1} - r``.  The first test runs Megatron's
own schedule for every rank with recorders in place of the steps and of those two hooks, and checks that
``dp_comm.interleaved_sync_points`` puts every launch where Megatron does (as the steps after / before it).  The
second checks the exposed seconds against closed forms on uniform chunk costs (rank 0, cool-down all backwards).
"""

from __future__ import annotations

import contextlib

import pytest

from mcore_schedule_run import megatron_rank_order
from primus_launch.projection.cost.dp_comm import _sync_points, interleaved_sync_points

CASES = [(2, 2, 4, None), (4, 2, 8, None), (4, 3, 8, None), (2, 3, 6, None), (4, 2, 10, 5), (3, 2, 7, 4)]


def _megatron_events(monkeypatch, pp: int, vpp: int, m: int, rank: int, group: int | None, align: bool = True):
    """Megatron's interleaved schedule for one rank: ('F' | 'B', chunk) steps and ('G' | 'P', chunk) hook calls,
    in the order it runs them (P2P and the steps replaced by recorders); ``align=False``: no grad / param sync
    functions (``--no-align-*``), and ('E', -1) where the schedule lifts DDP's ``no_sync``."""

    def configure(cfg, rec):
        @contextlib.contextmanager
        def no_sync():
            yield
            rec.append(("E", -1))

        cfg.no_sync_func = [no_sync] + [contextlib.nullcontext for _ in range(vpp - 1)]
        if align:
            cfg.grad_sync_func = [lambda params, j=j: rec.append(("G", j)) for j in range(vpp)]
            cfg.param_sync_func = [lambda params, j=j: rec.append(("P", j)) for j in range(vpp)]

    return [e[:2] for e in megatron_rank_order(monkeypatch, pp, vpp, m, rank, group, configure)]


def _counts(events, vpp: int) -> tuple[int, ...]:
    c = [0] * (2 * vpp)
    for kind, ch in events:
        if kind in ("F", "B"):
            c[(0 if kind == "F" else vpp) + ch] += 1
    return tuple(c)


@pytest.mark.parametrize("pp,vpp,m,group", CASES)
def test_launch_points_equal_megatron_schedule(monkeypatch, pp, vpp, m, group):
    for r in range(pp):
        ev = _megatron_events(monkeypatch, pp, vpp, m, r, group)
        grad, param, free = interleaved_sync_points(pp, vpp, m, group, r)
        want_grad = tuple((ch,) + _counts(ev[i + 1:], vpp) for i, (k, ch) in enumerate(ev) if k == "G")
        assert grad == want_grad, (pp, vpp, m, group, r)
        p_at = {ch: i for i, (k, ch) in enumerate(ev) if k == "P"}
        first_f = {}
        for i, (k, ch) in enumerate(ev):
            if k == "F":
                first_f.setdefault(ch, i)
        assert sorted(p_at) == list(range(vpp))
        want_param = tuple((_counts(ev[:p_at[q]], vpp), _counts(ev[:first_f[q]], vpp)) for q in range(vpp))
        assert param == want_param, (pp, vpp, m, group, r)
        # --no-align-grad-reduce: no_sync lifted just before each chunk's last backward
        ev = _megatron_events(monkeypatch, pp, vpp, m, r, group, align=False)
        lifted = [i for i in range(len(ev) - 1) if ev[i][0] == "E" and ev[i + 1][0] == "B"]
        want_free = tuple((ev[i + 1][1], _counts(ev[i + 1:], vpp), _counts(ev[i + 2:], vpp)) for i in lifted)
        assert free == want_free, (pp, vpp, m, group, r)


@pytest.mark.parametrize("pp,vpp,group", [(2, 3, None), (4, 2, None), (3, 2, 4), (4, 3, 5)])
def test_long_schedules_reduced_by_whole_groups(pp, vpp, group):
    """The launch points of a long schedule (its middle micro-batch groups dropped and counted back) equal those
    of its whole order."""
    g = group or pp
    for m in range(3 * g, 7 * g + 3):
        if 0 < m % g < pp:
            continue
        for r in range(pp):
            assert interleaved_sync_points(pp, vpp, m, group, r) == _sync_points(pp, vpp, m, group, r), (m, r)


def test_exposed_equals_closed_form_on_uniform_chunks():
    """Rank 0, m a multiple of pp: its cool-down is backward-only, so chunk ``j``'s reduce-scatter is launched
    ``j pp`` chunk backwards before the end and the stream ends at ``max_j ((j + 1) c - j pp b)``; its warm-up is
    forward-only and reaches every chunk's first forward, so with each chunk's all-gather ``a <= f`` only the first
    chunk's first bucket waits: ``a / buckets``; without alignment every chunk's first bucket waits.  (The model before: ``max(v c / B, v c - v b)`` and
    ``max(v a / B, v a - v f)`` over the stage's ``B`` buckets.)"""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
    from primus_launch.projection.cost.dp_comm import interleaved_exposed

    for pp, v, m in [(4, 3, 8), (8, 6, 16), (2, 4, 4)]:
        plan = Plan(model=ModelArch(name="t", num_layers=pp * v, hidden_size=64, ffn_hidden_size=128,
                                    num_attention_heads=4, vocab_size=128, seq_length=32),
                    parallel=Parallelism(pp=pp, vpp=v),
                    training=Training(micro_batch_size=1, global_batch_size=m, pipeline_schedule="interleaved_1f1b"),
                    cluster=Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=pp))
        f, b = 0.01, 0.02
        for c in (0.005, 0.03, 0.2):
            g, _ = interleaved_exposed(plan, 0, [(f, b)] * v, c, 0.0, 4, 4)
            assert g == pytest.approx(max((j + 1) * c - j * pp * b for j in range(v)), rel=1e-12)
        for a, nb in ((0.004, 4), (0.01, 2)):
            _, ag = interleaved_exposed(plan, 0, [(f, b)] * v, 0.0, a, nb, nb)
            assert ag == pytest.approx(a / nb, rel=1e-12)
        # --no-align-*: chunk j's buckets go out during its last backward (the last one at its end); each chunk's
        # all-gather starts at its first forward and shows its first bucket
        free = plan.with_changes(training={"align_grad_reduce": False, "align_param_gather": False})
        for c, nb in ((0.005, 4), (0.03, 4), (0.2, 8)):
            g, _ = interleaved_exposed(free, 0, [(f, b)] * v, c, 0.0, nb, nb)
            t = float("-inf")
            for j in range(v - 1, -1, -1):
                t = max(max(t, -(j * pp + 1) * b) + c, -j * pp * b + c / nb)
            assert g == pytest.approx(max(0.0, t), rel=1e-12)
        _, ag = interleaved_exposed(free, 0, [(f, b)] * v, 0.0, 0.004, 4, 4)
        assert ag == pytest.approx(v * 0.004 / 4, rel=1e-12)
