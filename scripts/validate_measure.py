#!/usr/bin/env python
"""Check the hybrid (measure-and-upscale) projection against real 2-process runs on this CPU.

1. Measure this machine as a "GPU" (``projection.measure.localhw``): gloo-on-loopback all-reduce,
   all-gather, reduce-scatter, all-to-all and send/recv between 2 processes, each with its own
   alpha-beta fit that the collectives model then prices that op with (``--single-link-fit``: only
   all-reduce and send/recv, every op from the one ``--link-fit``: all_reduce | p2p | joint), the
   Adam step per parameter, a bf16 GEMM rate; registered as ``cpu-gloo-loopback`` through
   ``hardware.load_gpu_file`` (the TOML it writes is printed; ``--gpu-file`` keeps it); a call of
   2 ranks is priced from the measured points themselves, linear in the size between two of them
   (``collectives.measured_time``; ``--link-fits-only``: from the op's fit alone).
2. For each case (8-layer GPT, h=256, s=256, micro-batch 2, bf16; ``ep2``: 4 experts top-2 of
   FFN 384 in every layer): ``project_measured`` at world size 1 -- the per-rank shard of the
   target (TP=2: half the heads and FFN; PP=2: the same layers, PP schedule simulated; EP=2: half
   the experts; CP=2: this rank's two load-balanced sequence chunks attending the whole sequence)
   -- then the real run: 2 processes (``torch.multiprocessing``, gloo, each rank bound to its own
   core unless ``--no-pin``), megatron-core's ``get_forward_backward_func`` (1F1B for PP=2; real
   ``ColumnParallelLinear``/``RowParallelLinear`` for TP=2; megatron's MoE layer with the allgather
   dispatcher over the EP group for EP=2 (the plan names it, with per-expert GEMMs and unfused
   permutation, so the projection prices the dispatcher the run uses); the all-gather context-parallel core attention of
   ``build_mcore`` for CP=2, exchanging what TE's does), the data-parallel gradient all-reduce (over DP x CP; expert
   gradients over expert-DP; fp32 as the plan's ``grad_reduce_in_fp32``), Adam step.  Every TP / CP
   call the real run makes is the one the projection prices (``tests/test_layer_collectives.py``
   checks them against a traced real run; EP: ``tests/test_moe_dispatch.py``).
3. Print projected vs real iteration time and the error, and the real run's per-region accounting
   (``realrun.REGIONS``: main-thread CPU, wall and run-queue wait per iteration, median, each rank)
   beside what the projection prices for the same work: the forward-backward's CPU against the
   measured pieces' ``compute``, ``Adam.step`` against ``optimizer``; forward-backward wall minus
   CPU is the time that rank waited (collectives, the peer's skew, other threads on its core).
   Then each rank's collective calls inside the forward-backward (``realrun.timed_collectives``),
   per op, size and group: calls per iteration, wall per call split into the wait for the later
   rank's entry and the time after it, its CPU, and what the cost model prices one such call at
   on the links just measured (bracketed: the mean of its prices on the links measured before and
   after the run); with the totals per iteration.

Rounds (``--rounds``, default 3): steps 1-3 are repeated, everything measured afresh each round:
each case's pieces in a cache of their own, then the links, then that case's real run (so the
projection and the run it is compared with see the machine within seconds of each other: the link
points printed per case move by 2-3x between the cases of one round; ``--links-per-round``
measures the links once per round instead);
the summary gives every round's error and, per case, their median and range.  On this shared
2-core VM one comparison moves by up to 20 points between rounds (RESULTS.md; the machine's speed
drifts over tens of seconds), so one round alone can neither show nor refute a 15 % agreement.
Bracketing (default; ``--no-bracket``: off): after each case's run the links and its pieces are
measured once more (in the reverse order, so both measurements lie symmetric about the run) and
projected again; the case's projection is the mean of the two, and the
summary gives beside it the error of the projection measured before the run alone and each round's
drift (after / before - 1): how far the machine moved while the comparison was made.

Links (every op) are timed "in situ" by default: both ranks first evict the caches and run the GEMM
work a TP layer does between two all-reduces (half the measured TP=2 dense-layer forward), so the
fitted latency includes the arrival skew of two ranks on this machine and the cold caches a
training step's call meets (``localhw.measure_links``; ``--links-warm``: without the eviction);
``--isolated-links`` times them after a barrier.  The same calls are also fitted from the later
rank's entry (both processes read one monotonic clock), printed with the median gap between the
ranks' entries: how much of each in-situ figure is the wait for the peer (a diagnostic; nothing is
priced from it).

Clocks: pieces are timed in the measuring thread's CPU time (robust to other jobs on the cores); the real
2-process iteration is wall time (its bubbles and communication waits are real time), so on a
loaded machine the real side is inflated -- the script prints the load average next to the result
and ``--wall`` times the pieces in wall time instead.

    python scripts/validate_measure.py [--rounds 3] [--iters 8] [--wall] [--cases pp2,tp2,ep2,cp2,pp1]
                                       [--isolated-links] [--single-link-fit] [--no-bracket]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


MOE = dict(num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=384)
# what the real EP run executes (megatron-core's local spec on the CPU): the allgather token
# dispatcher, one GEMM per local expert (SequentialMLP), unfused permutation -- the plan says so,
# so the projection prices the run it is compared with
# routing forced balanced (megatron's --moe-router-force-load-balancing: random router logits per
# token) as the cost model assumes: an untrained router sends one EP rank more tokens than the
# other every step, and the run then waits on the busier rank
MOE_RUN = dict(moe_token_dispatcher="allgather", moe_grouped_gemm=False, moe_permute_fusion=False,
               moe_router_force_load_balancing=True)


def _plan(tp: int = 1, pp: int = 1, ep: int = 1, cp: int = 1, world: int = 2, gpu: str = "cpu-gloo-loopback",
          layers: int = 8, moe: bool = False):
    from primus_launch.plan import Plan

    return Plan.model_validate({
        "model": dict(num_layers=layers, hidden_size=256, ffn_hidden_size=768, num_attention_heads=8,
                      num_query_groups=4, vocab_size=1024, seq_length=256, **(MOE if moe else {})),
        # CP=2: the real run exchanges K and V as TE's all-gather CP does (build_mcore._KVAllGather:
        # 2 all-gathers forward, 2 re-all-gathers + 2 reduce-scatters backward, per layer): the plan
        # names it, so the projection prices the exchange the run makes (cost/layer_collectives.py)
        "parallel": dict(tp=tp, pp=pp, ep=ep, cp=cp, **(dict(cp_comm_type="allgather") if cp > 1 else {})),
        "training": dict(global_batch_size=8 * world // (tp * pp * cp), micro_batch_size=2, precision="bf16",
                         **(MOE_RUN if moe else {})),
        "cluster": dict(gpu=gpu, gpus_per_node=world),
    })


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3,
                    help="independent rounds (links, pieces and real runs each measured afresh); the summary gives each "
                         "round's error and their median")
    ap.add_argument("--wall", action="store_true", help="time the measured pieces in wall time")
    ap.add_argument("--partner", action="store_true",
                    help="measure the pieces beside a mirror of the other rank on the next core "
                         "(TimingPolicy.partner, through $PRIMUS_LAUNCH_MEASURE_POLICY)")
    ap.add_argument("--cases", default="pp2,tp2,ep2,cp2,pp1")
    ap.add_argument("--link-fit", default="all_reduce", choices=("all_reduce", "p2p", "joint"))
    ap.add_argument("--isolated-links", action="store_true",
                    help="time collectives after a barrier (isolated) instead of in situ after the same "
                         "GEMM work a TP layer does between its all-reduces (half a measured layer forward)")
    ap.add_argument("--single-link-fit", action="store_true",
                    help="time only all-reduce and send/recv and price every collective from the one --link-fit "
                         "(default: each op timed and priced by its own fit)")
    ap.add_argument("--links-warm", action="store_true",
                    help="in situ, time the links after the GEMM work alone, without evicting the caches first")
    ap.add_argument("--link-fits-only", action="store_true",
                    help="price each op from its alpha-beta fit alone (default: 2-rank calls from the measured points, "
                         "linear between two measured sizes; collectives.measured_time)")
    ap.add_argument("--links-per-round", action="store_true",
                    help="measure the links once at the start of each round (default: right before each case's run)")
    ap.add_argument("--no-bracket", action="store_true",
                    help="project each case from the pieces and links measured before its run only (default: "
                         "measured again after it, the projection the mean of the two)")
    ap.add_argument("--no-pin", action="store_true", help="do not bind each real-run rank to its own core")
    ap.add_argument("--gpu-file", type=Path, default=None, help="keep the measured GPU TOML here")
    ap.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    ap.add_argument("--nice", type=int, default=None,
                    help="run this script and its workers at this niceness (e.g. -10 as root on a shared "
                         "machine); inherited by the spawned processes")
    args = ap.parse_args(argv)
    if args.nice is not None:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, args.nice)
        except OSError as exc:
            print(f"--nice {args.nice} not applied: {exc}")

    import torch

    torch.set_num_threads(1)
    clock = "wall" if args.wall else "thread"
    if args.partner:  # the documented policy override, read by measure_pieces and project_measured alike
        from primus_launch.projection.measure.upscale import POLICY_ENV

        os.environ[POLICY_ENV] = ",".join(filter(None, [os.environ.get(POLICY_ENV, ""), "partner=1"]))
    cases = {"pp2": _plan(pp=2), "tp2": _plan(tp=2), "ep2": _plan(ep=2, moe=True), "cp2": _plan(cp=2),
             "pp1": _plan(world=1)}
    names = args.cases.split(",")
    bad = [n for n in names if n not in cases]
    if bad:
        print(f"--cases {args.cases}: {', '.join(bad)} not one of {', '.join(cases)}")
        return 2
    rows, hws = [], []
    for rnd in range(args.rounds):
        if args.rounds > 1:
            print(f"\n===== round {rnd + 1} of {args.rounds} =====")
        hws += _round(args, clock, cases, names, rnd, rows)
    print("\n" + _summary(rows, names, args.rounds))
    if args.json:
        args.json.write_text(json.dumps({"hardware": [{"hw": {k: v for k, v in hw.items() if k != "links"},
                                                     "links": hw["links"]} for hw in hws],
                                         "rows": rows, "clock": clock}, indent=1, default=str))
    return 0


def _summary(rows: list[dict], names: list[str], rounds: int) -> str:
    """One line per case: each round's error and, over several rounds, their median and range; with
    bracketing, the same for the projection measured before the run alone, and each round's drift
    (the projection measured after the run against the one before it)."""
    def stats(errs: list[float]) -> str:
        line = ", ".join(f"{e:+.1%}" for e in errs)
        if rounds > 1:
            line += f"  -> median {statistics.median(errs):+.1%} (range {min(errs):+.1%} .. {max(errs):+.1%})"
        return line

    out = []
    for name in names:
        mine = [r for r in rows if r["case"] == name]
        if not mine:
            continue
        out.append(f"{name} " + stats([r["error"] for r in mine]))
        if all(r.get("drift") is not None for r in mine):
            out.append(f"{' ' * len(name)}   before the run alone: " + stats([r["error_before"] for r in mine])
                       + "; drift after / before " + ", ".join(f"{r['drift']:+.1%}" for r in mine))
    head = "summary (projected / real - 1" + (", each round, median over rounds" if rounds > 1 else "") + "):"
    return head + "\n  " + "\n  ".join(out)


def _call_tables(calls: list[dict], plan, iters: int) -> list[list[dict]]:
    """Each rank's timed collective calls (``realrun.timed_collectives``, rank order), per (op, S,
    group size): calls per iteration, trimmed-mean wall and CPU seconds per call, mean run-queue
    wait per call, what the collectives model prices one such call at on the measured links (raw,
    before any overlap), and,
    for groups of every rank (calls paired in issue order, one clock for both processes), the wall
    split into the wait for the later rank's entry and the time from that entry to this rank's
    exit."""
    from primus_launch.projection.measure.localhw import trimmed_mean

    tables = []
    for rank, mine in enumerate(calls):
        out = []
        for key, v in sorted(mine.items()):
            op, nbytes, n = key.split("|")
            priced = _priced_s(op, int(nbytes), int(n), plan)
            row = dict(op=op, nbytes=int(nbytes), n=int(n), per_iter=len(v) / iters, wall_s=trimmed_mean([c[0] for c in v]),
                       cpu_s=trimmed_mean([c[1] for c in v]), run_queue_s=statistics.mean(c[3] for c in v),
                       wall_mean_s=statistics.mean(c[0] for c in v), cpu_mean_s=statistics.mean(c[1] for c in v),
                       priced_s=priced, switches=statistics.mean(c[4] for c in v))
            peers = [c.get(key, []) for c in calls]
            if int(n) == len(calls) and all(len(q) == len(v) for q in peers):
                later = [max(q[i][2] for q in peers) for i in range(len(v))]
                wait, after = [t - c[2] for c, t in zip(v, later)], [c[2] + c[0] - t for c, t in zip(v, later)]
                row["wait_s"], row["after_s"] = trimmed_mean(wait), trimmed_mean(after)
                row["wait_mean_s"], row["after_mean_s"] = statistics.mean(wait), statistics.mean(after)
            out.append(row)
        tables.append(out)
    return tables


def _priced_s(op: str, nbytes: int, n: int, plan) -> float:
    """What the collectives model prices one ``op`` call of ``nbytes`` over ``n`` ranks of one node
    at, on the links registered now (raw, before any overlap)."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.hardware.placement import place

    return getattr(coll, op)(float(nbytes), place(n, 1, plan.cluster.gpus_per_node), plan.cluster.gpu)


def _per_iter_ms(table: list[dict], key: str) -> float:
    """Milliseconds per iteration of one column of a :func:`_call_tables` table (calls per
    iteration x seconds per call, summed; rows without the column count 0)."""
    return sum(r["per_iter"] * r.get(key, 0.0) for r in table) * 1e3


def _call_lines(table: list[dict]) -> str:
    """Each (op, size) of :func:`_call_tables`: count, real wall (CPU) per call and, where paired,
    its wait for the later rank + the time after that entry, against priced; then the totals per
    iteration."""
    def one(r: dict) -> str:
        split = f" = wait {r['wait_s'] * 1e3:.2f} + {r['after_s'] * 1e3:.2f}" if "wait_s" in r else ""
        return (f"{r['op']} {r['nbytes'] / 1024:.0f} KiB x{r['per_iter']:.0f}: {r['wall_s'] * 1e3:.2f}{split} "
                f"(CPU {r['cpu_s'] * 1e3:.2f}) ms, priced {r['priced_s'] * 1e3:.2f}")

    def tot(k: str) -> float:
        return _per_iter_ms(table, k)

    return ("; ".join(one(r) for r in table) + f"; total wall {tot('wall_s'):.1f} = wait {tot('wait_s'):.1f} + "
            f"{tot('after_s'):.1f} (CPU {tot('cpu_s'):.1f}) ms vs priced {tot('priced_s'):.1f} ms")


def _apart(fb: tuple, table: list[dict], bd_ms: dict) -> str:
    """One rank's forward-backward against the projection's terms: its main-thread CPU less the
    collective calls' own CPU against the pieces' ``compute`` (the calls' wall and CPU per iteration
    are their plain means times their count: the sum the iteration pays, tails included; the
    trimmed means of the per-call lines drop the slowest tenth) and, of the calls on groups of every
    rank, their wait for the later rank's entry (plain means: the peer's lateness at the call, compute
    jitter that the pieces' CPU time does not see); the calls' wall against what they are
    priced at (the plan's TP / CP / EP communication); and the wait outside the calls (wall - CPU -
    (calls' wall - calls' CPU)), which nothing prices, with the part of it the main thread spent
    on the run queue (the region's run-queue wait less the calls'), and the main thread's
    voluntary context switches outside the calls (the times it blocked: the rest of the wait),
    involuntary ones and major page faults (``realrun.thread_switches``), per iteration."""
    cw, cc, cq, priced = (_per_iter_ms(table, k) for k in ("wall_mean_s", "cpu_mean_s", "run_queue_s", "priced_s"))
    split = (f"; waiting in them for the later rank's entry {_per_iter_ms(table, 'wait_mean_s'):.1f}"
             if any("wait_mean_s" in r for r in table) else "")  # the calls on groups of every rank
    trimmed = _per_iter_ms(table, "wall_s")
    cv = _per_iter_ms(table, "switches") / 1e3
    cpu, wall, runq = fb[0] * 1e3, fb[1] * 1e3, fb[2] * 1e3
    comp = bd_ms.get("compute", 0.0)
    return (f"CPU less the calls' {cpu - cc:.1f} vs compute {comp:.1f} ({(cpu - cc) / comp - 1:+.1%}); calls "
            f"{cw:.1f} ({trimmed:.1f} by trimmed means{split}) vs priced {priced:.1f} ({cw / priced - 1 if priced else 0.0:+.1%}); "
            f"wait outside the calls {wall - cpu - (cw - cc):.1f}, of which run-queue {runq - cq:.1f}; "
            f"outside the calls {fb[3] - cv:.0f} voluntary switches, in all {fb[4]:.0f} involuntary, "
            f"{fb[5]:.0f} major faults")


def _links(args, clock: str, link_compute_s: float) -> dict:
    """Measure the links (and the Adam / GEMM rates), register ``cpu-gloo-loopback`` and print the
    points, the calls' percentiles and the fits."""
    from primus_launch.projection.measure.localhw import OPS, measure_local_spec

    t_hw0 = time.perf_counter()
    hw = measure_local_spec("cpu-gloo-loopback", links=True, link_fit=args.link_fit,
                            link_compute_s=link_compute_s, per_op=not args.single_link_fit,
                            link_evict=not args.links_warm, link_points=not args.link_fits_only,
                            out_file=args.gpu_file, clock=clock)
    t_hw = time.perf_counter() - t_hw0
    hw["measure_hw_s"] = t_hw
    lk = hw["links"]
    print(f"local 'GPU' spec: {hw['toml']} (measured in {t_hw:.1f} s)")
    situ = f"in situ after {'' if args.links_warm else 'a cache eviction and '}{link_compute_s * 1e3:.1f} ms of GEMMs per rank"
    print(f"  collectives timed {situ if link_compute_s else 'after a barrier (isolated)'}")
    timed = [k for k in OPS if k in lk]  # the ops measure_links timed (the rest of lk: fits, samples, arrival)
    for kind in timed:
        pts = ", ".join(f"{s / 1024:.0f} KiB {t * 1e3:.3f} ms" for s, t in lk[kind])
        print(f"  gloo {kind:14s}: {pts}")
    smp = lk.get("samples") or {}
    for kind in timed:
        size = int(lk[kind][0][0])
        calls = sorted(smp.get(f"{kind}|{size}", []))
        if len(calls) >= 10:  # the calls behind the smallest point: one bump or several
            q = statistics.quantiles(calls, n=10)
            print(f"  calls {kind:14s} at {size / 1024:.0f} KiB: 10th / 50th / 90th percentile "
                  f"{q[0] * 1e3:.2f} / {statistics.median(calls) * 1e3:.2f} / {q[-1] * 1e3:.2f} ms "
                  f"({len(calls)} calls; the point is their mean)")
    for k, (B, c) in lk["fit"].items():
        print(f"  fit {k:14s}: B = {B / 1e9:.3f} GB/s (bus), constant = {c * 1e6:.0f} us")
    arr = lk.get("arrival")
    if arr:  # the same calls timed from the later rank's entry: the wait for the peer taken out
        for k, (B, c) in arr["fit"].items():
            print(f"  fit {k:14s} from the later rank's entry: B = {B / 1e9:.3f} GB/s, constant = {c * 1e6:.0f} us; "
                  f"median entry gap {arr['entry_gap_s'][k] * 1e6:.0f} us (diagnostic, not priced)")
    spec = hw["spec"]
    print(f"  registered ({args.link_fit}): intra_node_bw {spec['intra_node_bw'] / 1e9:.3f} GB/s, latency "
          f"{spec['intra_node_latency_s'] * 1e6:.0f} us; Adam {hw['adam_s_per_param'] * 1e9:.2f} ns/param -> hbm_bw {hw['spec']['hbm_bw'] / 1e9:.1f} GB/s")
    fab = {k: v for k, v in hw["fabric"].items() if k not in ("points", "points_ranks")}
    print("  per-op fabric: " + (", ".join(f"{k} {v:.4g}" for k, v in fab.items()) if fab
                                 else "none (every op from the one fit)")
          + ("; 2-rank calls priced from the points above (linear between two sizes)" if "points" in hw["fabric"]
             else ""))

    return hw


def _expected_max_excess(xs: list[float], n: int, inner: int) -> float:
    """E[max of n independent passes] - E[one pass] from one piece's samples: each sample's
    deviation from their mean, times sqrt(``inner``) (a sample averages ``inner`` passes, taken as
    independent), is one pass's; over the sorted deviations d_(1..m),
    E[max_n] = sum_i d_(i) ((i / m)^n - ((i - 1) / m)^n) (the empirical distribution's order statistic)."""
    if len(xs) < 2 or n < 2:
        return 0.0
    mean = statistics.mean(xs)
    d = sorted((x - mean) * inner ** 0.5 for x in xs)
    m = len(d)
    return sum(v * (((i + 1) / m) ** n - (i / m) ** n) for i, v in enumerate(d))


def _lockstep_ms(timings: dict, plan) -> tuple[float, float]:
    """What the ranks' lockstep would cost per iteration where the plan's TP / CP / EP groups
    synchronize the ranks inside the layers (``sync_points.blocked_groups``; each piece's pass then
    ends at a synchronizing call, the head's and embedding's at the next layer's), if each rank's
    pass of every piece varied as the piece's own samples do, independently between ranks: per pass
    :func:`_expected_max_excess` over the group's ranks, forward and backward, times the passes per
    iteration (each layer kind's layers x micro-batches, split among its built pieces; the attention
    core once per layer; embedding, head, MTP once per micro-batch).  Returns (from the raw samples,
    from the samples each divided by the reference workload timed after it -- the machine's
    common-mode speed, which slows both real ranks alike, taken out).  A diagnostic: nothing prices it."""
    from collections import Counter

    from primus_launch.projection.measure.build_mcore import layer_piece_name
    from primus_launch.projection.measure.sync_points import blocked_groups

    if not blocked_groups(plan):
        return 0.0, 0.0
    p, m, mb = plan.parallel, plan.model, plan.num_microbatches
    n = max(p.tp, p.cp, p.ep * p.expert_tp)
    layers = Counter(layer_piece_name(i, m.is_moe_layer(i), m.is_window_layer(i)).split("#")[0]
                     for i in range(m.num_layers))  # the model's layers per piece kind
    built = Counter(name.split("#")[0] for name in timings if "_layer#" in name)

    raw = rel = 0.0
    for name, t in timings.items():
        if "_layer#" in name:
            kind = name.split("#")[0]
            passes = layers[kind] * mb / built[kind]
        else:
            passes = (m.num_layers if name == "attn_core" else 1) * mb
        refs = t.samples.get("reference") or []
        for fig in ("fwd", "bwd"):
            xs = t.samples.get(fig) or []
            raw += passes * _expected_max_excess(xs, n, t.inner)
            if len(refs) == len(xs) and refs and all(r > 0 for r in refs):
                scale = statistics.mean(refs)
                rel += passes * _expected_max_excess([x / r * scale for x, r in zip(xs, refs)], n, t.inner)
    return raw * 1e3, rel * 1e3


def _measure_and_project(args, clock: str, plan, name: str, link_compute_s: float, hws: list, after: bool = False):
    """Measure ``plan``'s pieces afresh (a cache directory of their own) and -- unless
    ``--links-per-round`` -- the links, and project from those pieces on those links: before the
    run the pieces first, after it the links first, so the two measurements lie symmetric about the
    run (a drift linear in time cancels in their mean).  Returns ``(projection, seconds spent
    measuring the pieces, their :func:`_lockstep_ms`)``; appends the link measurement to ``hws``."""
    from primus_launch.projection.measure.cache import MeasureCache
    from primus_launch.projection.measure.upscale import measure_pieces, project_measured

    def links() -> None:
        if not args.links_per_round:
            print(f"\n[{name}] links measured right {'after' if after else 'before'} its run")
            hws.append(_links(args, clock, link_compute_s))

    if after:
        links()
    t0 = time.perf_counter()
    cache = Path(tempfile.mkdtemp(prefix="primus-measure-"))
    timings = measure_pieces(plan, "cpu", cache=MeasureCache(cache), cpu_clock=clock).timings
    t_meas = time.perf_counter() - t0
    if not after:
        links()
    for pname, t in timings.items():  # a piece summarized by its mean: how far its mean is from its median
        if t.statistic == "mean":
            print(f"  {pname} (routed afresh each pass, its samples' mean taken), {len(t.samples['fwd'])} samples of "
                  f"{t.inner} pass(es): " + ", ".join(
                      f"{fig} mean {statistics.mean(t.samples[fig]) * 1e3:.2f} ms, median "
                      f"{statistics.median(t.samples[fig]) * 1e3:.2f} "
                      f"({statistics.mean(t.samples[fig]) / statistics.median(t.samples[fig]) - 1:+.1%})"
                      for fig in ("fwd", "bwd")))
    return project_measured(plan, device="cpu", cache_dir=cache, cpu_clock=clock), t_meas, _lockstep_ms(timings, plan)


def _bracketed(before, after) -> tuple[float, dict]:
    """The projection of a case measured before and after its run: the mean of the two iteration
    times and of each term (the machine's speed drifts over tens of seconds on this VM; the mean of
    the measurements on either side of the run is the estimate of what the pieces and the links cost
    while it ran)."""
    if after is None:
        return before.iteration_time_s, dict(before.time_breakdown)
    keys = dict.fromkeys([*before.time_breakdown, *after.time_breakdown])  # the projection's order
    return ((before.iteration_time_s + after.iteration_time_s) / 2,
            {k: (before.time_breakdown.get(k, 0.0) + after.time_breakdown.get(k, 0.0)) / 2 for k in keys})


def _round(args, clock: str, cases: dict, names: list[str], rnd: int, rows: list[dict]) -> list[dict]:
    """One round: for each case measure its pieces afresh (a cache directory of its own), then the
    links, then project from the cached pieces on those links and run the real iterations -- the
    projection and the run it is compared with see the machine within seconds of each other
    (``--links-per-round``: the links once, first) -- then, unless ``--no-bracket``, measure the
    pieces and the links again and project once more: the case's projection is the mean of the two
    (:func:`_bracketed`), and the one measured before the run alone is reported beside it.  Appends
    one row per case; returns each link measurement."""
    from primus_launch.projection.measure.cache import MeasureCache
    from primus_launch.projection.measure.realrun import REGIONS, region_medians, run_real
    from primus_launch.projection.measure.upscale import measure_pieces

    link_compute_s = 0.0
    if not args.isolated_links:  # the compute between two TP all-reduces: half a layer's forward
        tmp = Path(tempfile.mkdtemp(prefix="primus-measure-"))
        t_tp = measure_pieces(cases["tp2"], "cpu", cache=MeasureCache(tmp), cpu_clock=clock).timings
        link_compute_s = t_tp["dense_layer#0"].fwd_s / 2
    hws = [_links(args, clock, link_compute_s)] if args.links_per_round else []
    for name in names:
        plan = cases[name]
        before, t_meas, lockstep = _measure_and_project(args, clock, plan, name, link_compute_s, hws)
        load0 = os.getloadavg()[0]
        regions: list = []
        calls: list = []
        real = run_real(plan, device="cpu", iters=args.iters, warmup=2, threads=1, pin=not args.no_pin,
                        regions=regions, calls=calls)
        load1 = os.getloadavg()[0]
        tables = _call_tables(calls, plan, args.iters)  # priced on the links measured before the run
        after = (None if args.no_bracket else
                 _measure_and_project(args, clock, plan, name, link_compute_s, hws, after=True)[0])
        if after is not None:  # each call priced on both link measurements, their mean
            for row in (r for table in tables for r in table):
                row["priced_s"] = (row["priced_s"] + _priced_s(row["op"], row["nbytes"], row["n"], plan)) / 2
        proj_s, breakdown = _bracketed(before, after)
        reg = [region_medians(r) for r in regions]
        real_med = sorted(real)[len(real) // 2]
        err = proj_s / real_med - 1.0
        err_min = proj_s / min(real) - 1.0
        err_before = before.iteration_time_s / real_med - 1.0
        drift = after.iteration_time_s / before.iteration_time_s - 1.0 if after is not None else None
        p = plan.parallel
        rows.append(dict(case=name, round=rnd + 1, tp=p.tp, pp=p.pp, world=plan.world_size, microbatches=plan.num_microbatches,
                         projected_s=proj_s, projected_before_s=before.iteration_time_s,
                         projected_after_s=after.iteration_time_s if after is not None else None,
                         real_median_s=real_med, real_min_s=min(real),
                         real_s=real, error=err, error_before=err_before, error_vs_min=err_min, drift=drift,
                         breakdown=breakdown, load_avg=(load0, load1), measure_s=t_meas, regions=reg,
                         calls=tables))
        bd = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in breakdown.items() if v > 0)
        print(f"\n[{name}]{f' round {rnd + 1}' if args.rounds > 1 else ''} tp={p.tp} pp={p.pp} world={plan.world_size} micro-batches={plan.num_microbatches}")
        print(f"  projected {proj_s * 1e3:8.1f} ms   ({bd} ms)" + (
            "" if after is None else f"; measured before the run {before.iteration_time_s * 1e3:.1f}, after it "
            f"{after.iteration_time_s * 1e3:.1f} ({drift:+.1%}), the mean of the two"))
        print(f"  real      {real_med * 1e3:8.1f} ms median, {min(real) * 1e3:.1f} min of {len(real)} "
              f"(load avg {load0:.1f} -> {load1:.1f})")
        print(f"  error     {err:+.1%} vs median, {err_min:+.1%} vs min"
              + ("" if after is None else f"; from the measurement before the run alone {err_before:+.1%} vs median"))
        bd_ms = {k: v * 1e3 for k, v in breakdown.items()}
        print("  real main-thread CPU (wall, run-queue wait) ms/iter, median, " + " | ".join(f"rank {i}" for i in range(len(reg)))
              + ": " + "; ".join(f"{k} " + " | ".join(f"{r[k][0] * 1e3:.1f} ({r[k][1] * 1e3:.1f}, {r[k][2] * 1e3:.1f})"
                                                      for r in reg)
                          for k in REGIONS if all(k in r for r in reg)))
        print(f"  priced for that work: compute {bd_ms.get('compute', 0.0):.1f} (forward_backward's CPU), "
              f"optimizer {bd_ms.get('optimizer', 0.0):.1f} (Adam), dp_comm {bd_ms.get('dp_comm', 0.0):.1f} (grad_reduce)")
        for rank, table in enumerate(rows[-1]["calls"]):
            if table:
                print(f"  rank {rank} forward_backward collectives per iteration: " + _call_lines(table))
        if any(rows[-1]["calls"]):
            print("  forward_backward taken apart, ms/iter, " + " | ".join(
                _apart(r["forward_backward"], table, bd_ms) for r, table in zip(reg, rows[-1]["calls"])))
        waits = [_per_iter_ms(table, "wait_mean_s") for table in rows[-1]["calls"]]
        rows[-1].update(lockstep_ms=lockstep, waits_ms=waits)
        if any(lockstep):
            print(f"  lockstep, ms/iter (not priced): the ranks waited in the calls for each other "
                  f"{statistics.mean(waits):.1f} on average (the iteration's cost of it); the pieces' own samples, "
                  f"as independent variation between the ranks, would make it {lockstep[0]:.1f} "
                  f"({lockstep[1]:.1f} with the machine's common-mode speed taken out by the reference)")
    return hws


if __name__ == "__main__":
    sys.exit(main())
