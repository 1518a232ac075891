"""Memory verdicts and peaks against what published runs did: ran, ran out of memory, or measured a peak.

Judges (nothing here tunes the model) three sets, each plan built as a user's would be, through the
project's adapters:

- every row of ``scripts/validation/current_runs.json`` (current production runs, all of which ran):
  Megatron flags through ``build_runs.flag_row``, TorchTitan jobs through ``build_runs.titan_row``, flattened Primus modules through ``build_runs.primus_row`` (the
  builders of ``runs.json``, imported);
- every bundled recipe that reproduces a published run (``recipes/megatron/*gpu*.{sh,yaml}``,
  ``recipes/torchtitan/*.toml`` and its launch script): ran;
- ``scripts/validation/memory_cases.json`` (``build_memory_cases.py``; Megatron flags, a TorchTitan job table, or a
  flattened Primus module through the Primus reader, or a torchtitan 0.3 launch line): published out-of-memory reports
  (``oom``: must be ``does not fit``; ``oom_borderline``, OOM in part of the runs: ``tight`` or ``does not
  fit``), runs reported to run near the limit, and published peaks (pytorch/torchtitan benchmark reserved
  peaks, Megatron-LM functional-test allocated peaks, Megatron-Bridge and TorchTitan reports).

A run that ran must come out ``fits`` or ``tight``.  The verdict is the memory report's ``verdict`` where
the projection gives one (``fits`` / ``tight`` / ``does not fit``), else ``fits`` -> fits and not ->
does not fit.  A published peak is compared with the projected peak of the same basis (allocated =
``torch.cuda.max_memory_allocated``; reserved = allocated + the allocator model) on the same rank (the
last stage for Megatron's tensorboard writer, rank 0, or the max over stages); peaks a source states only
roughly ("almost 96%") are listed but left out of the error statistics.  GPUs the hardware DB lacks come
from ``scripts/validation/memory_gpus.toml`` (the ``--gpu-file`` way).

Prints one table per framework and group (dense BF16, dense FP8, MoE, MLA, long sequence: CP > 1 or
sequence >= 32k) with fits / tight / does-not-fit counts of the runs that ran and of the OOMs, the wrong
verdicts with the terms of the worst stage, and the peak error median / max.

    python scripts/validate_memory.py [--json OUT] [--only current|recipe|case] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT / "scripts" / "validation"
CASES = VALIDATION / "memory_cases.json"
CURRENT = VALIDATION / "current_runs.json"
GPU_FILE = VALIDATION / "memory_gpus.toml"
GiB = 1024**3

FITS, TIGHT, DNF = "fits", "tight", "does not fit"
VERDICTS = (FITS, TIGHT, DNF)
#: what each reported outcome allows
ALLOWED = {"ran": (FITS, TIGHT), "oom": (DNF,), "oom_borderline": (TIGHT, DNF)}
GROUPS = ("dense_bf16", "dense_fp8", "moe", "mla", "long_seq")
TERMS = ("parameters", "gradients", "optimizer", "activations", "transient", "reserve")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(VALIDATION) not in sys.path:
    sys.path.insert(0, str(VALIDATION))


@dataclass
class Item:
    """One configuration to judge: its plan (or why there is none), what happened, what was measured."""

    id: str
    kind: str  # current | recipe | case
    expect: str  # ran | oom | oom_borderline
    framework: str
    source: str
    plan: Any = None
    skip: Optional[str] = None
    measured: Optional[dict] = None
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- verdict logic
def verdict_of(report: Any) -> str:
    """``fits`` / ``tight`` / ``does not fit`` of a memory report: its ``verdict`` where it has one
    (any spelling: ``does_not_fit``, ``DOES NOT FIT``), else its boolean ``fits``."""
    v = getattr(report, "verdict", None)
    if v is not None:
        s = str(getattr(v, "value", v)).strip().lower().replace("_", " ").replace("-", " ")
        s = " ".join(s.split())
        if s in VERDICTS:
            return s
        if s in ("no fit", "oom", "not fit", "doesn't fit"):
            return DNF
        raise ValueError(f"memory verdict {v!r}: expected one of {', '.join(VERDICTS)}")
    return FITS if report.fits else DNF


def is_right(expect: str, verdict: str) -> bool:
    """Whether ``verdict`` agrees with what the source reports (:data:`ALLOWED`)."""
    return verdict in ALLOWED[expect]


def stage_peak_bytes(stages: list[Any], basis: str, rank: str) -> int:
    """Projected peak of ``basis`` (allocated | reserved) on ``rank`` (first | last | max over stages)."""
    def one(st: Any) -> int:
        alloc = int(st.allocated_bytes)
        return alloc if basis == "allocated" else alloc + int(getattr(st, "allocator_reserve_bytes", 0) or 0)

    if rank == "first":
        return one(stages[0])
    if rank == "last":
        return one(stages[-1])
    return max(one(s) for s in stages)


def peak_error(projected_gib: float, measured_gib: float) -> float:
    """Signed relative error of the projected peak, ``(projected - measured) / measured``."""
    return (projected_gib - measured_gib) / measured_gib


def group_of(plan: Any) -> str:
    """dense_bf16 | dense_fp8 | moe | mla | long_seq (CP > 1 or sequence >= 32k first, then MLA, MoE, FP8)."""
    if plan.parallel.cp > 1 or plan.model.seq_length >= 32768:
        return "long_seq"
    if plan.model.multi_latent_attention:
        return "mla"
    if plan.model.is_moe:
        return "moe"
    return "dense_fp8" if plan.training.precision in ("fp8", "fp4") else "dense_bf16"


# ----------------------------------------------------------------------------- loading
_GPUS_LOADED = False


def load_gpus() -> None:
    """Register the GPUs of ``memory_gpus.toml`` (as ``--gpu-file`` does), once."""
    global _GPUS_LOADED
    if not _GPUS_LOADED:
        from primus_launch.projection.hardware.gpus import load_gpu_file

        load_gpu_file(GPU_FILE)
        _GPUS_LOADED = True


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:220]


def current_items(path: Path = CURRENT) -> list[Item]:
    """The rows of ``current_runs.json`` as plans, through ``build_runs``'s flag / TorchTitan readers.

    A row whose flags leave the global batch out (the published table gives none) gets ``2 x PP``
    micro-batches per data-parallel rank: enough for the schedule's steady state, which is all the
    memory peak depends on (stated in the item's notes).
    """
    from build_runs import flag_row, primus_row, titan_row

    from primus_launch.plan import Plan

    out = []
    for r in json.loads(path.read_text()):
        fw = "torchtitan" if r.get("torchtitan_config") or r.get("torchtitan_launch") else "megatron"
        it = Item(id=r["id"], kind="current", expect="ran", framework=fw, source=r.get("source", ""))
        notes: list[str] = []
        if r.get("memory_not_judged"):  # the row's own data says why its memory cannot be judged
            it.skip = r["memory_not_judged"]
            out.append(it)
            continue
        if r.get("megatron_flags"):
            row, why = flag_row(r, "judge", "current")
            if row is None and "global-batch-size" in why and r["training"].get("global_batch_size") is None:
                p = r["parallelism"]
                dp = r["hardware"]["num_gpus"] // ((p.get("tp") or 1) * (p.get("pp") or 1) * (p.get("cp") or 1))
                gbs = (r["training"].get("micro_batch_size") or 1) * dp * 2 * (p.get("pp") or 1)
                r2 = dict(r, megatron_flags=list(r["megatron_flags"]) + [f"--global-batch-size {gbs}"])
                row, why = flag_row(r2, "judge", "current")
                notes.append(f"global batch not published: --global-batch-size {gbs} (2 x PP micro-batches per DP "
                             "rank) assumed; the memory peak does not depend on it beyond the schedule's warm-up")
        elif r.get("torchtitan_config") or r.get("torchtitan_launch"):
            row, why = titan_row(r, "judge", "current")
        elif r.get("primus_config"):
            row, why = primus_row(r, "judge", "current")
        else:
            unknown = "; ".join(str(u) for u in (r.get("flags_unknown") or [])[:3])
            row, why = None, f"no flags or job published ({unknown})"
        if row is None:
            it.skip = why
        else:
            it.plan = Plan.model_validate(row["plan"])
            notes += [a for a in row.get("assumptions", []) if a.startswith("adapter: not modelled")][:4]
        it.notes = notes
        out.append(it)
    return out


RECIPE_GLOBS = ("megatron/*gpu*.sh", "megatron/*gpu*.yaml", "torchtitan/*.toml", "torchtitan/*_launch.sh")


def recipe_items(root: Path = ROOT) -> list[Item]:
    """Bundled recipes that reproduce a published run (all ran), read by ``adapters.load_recipe``."""
    from primus_launch.adapters import load_recipe

    out = []
    for pat in RECIPE_GLOBS:
        for f in sorted((root / "recipes").glob(pat)):
            rel = str(f.relative_to(root))
            fw = "torchtitan" if rel.startswith("recipes/torchtitan") else "megatron"
            head = " ".join(line.lstrip("# ").strip() for line in f.read_text().splitlines()[:4] if line.startswith("#"))
            it = Item(id=rel, kind="recipe", expect="ran", framework=fw, source=head[:200])
            try:
                it.plan = load_recipe(f)
            except Exception as e:  # a recipe the reader refuses is reported, not hidden
                it.skip = f"reader: {_one_line(e)}"
            out.append(it)
    return out


def plan_of_case(case: dict) -> Any:
    """A case's plan through the Megatron or TorchTitan adapter on its stated cluster, with the case's
    ``plan_changes`` (fields its configuration cannot state but its build fixes, ``build_memory_cases.py``)."""
    plan = _adapter_plan_of_case(case)
    return plan.with_changes(**case["plan_changes"]) if case.get("plan_changes") else plan


def _adapter_plan_of_case(case: dict) -> Any:
    """A case's plan through the Megatron or TorchTitan adapter on its stated cluster."""
    from build_runs import _cluster_for

    hw = case["hardware"]
    cluster = _cluster_for(hw["plan_gpu"], hw["num_gpus"], hw.get("gpus_per_node"))
    if case.get("megatron_flags"):
        from primus_launch.adapters.megatron import plan_from_argv

        argv = ["pretrain_gpt.py"] + [t for f in case["megatron_flags"] for t in f.split()]
        plan = plan_from_argv(argv, cluster=cluster)
        if case.get("primus_settings"):  # Primus-only keys of a Primus experiment, as the Primus reader reads them
            from primus_launch.adapters.primus_yaml import primus_training_changes

            plan = plan.with_changes(training=primus_training_changes(case["primus_settings"]))
        return plan
    if case.get("primus_config"):
        # a flattened Primus module (``{"framework": ..., "overrides": {...}}``, as the Primus reader exports it): read by
        # the Primus reader, as build_runs.primus_row reads current_runs' Primus rows -- a TorchTitan module then runs
        # Primus's own attention (Primus-Turbo's drops torchtitan's repeat_kv), not the TOML path's
        import yaml

        from primus_launch.adapters.primus_yaml import plan_from_text as primus_plan

        text = yaml.safe_dump({"modules": {"pre_trainer": case["primus_config"]}}, sort_keys=False)
        return primus_plan(text, f"{case.get('primus_model_preset') or case['id']}.yaml", env={}, cluster=cluster)
    if case.get("torchtitan_config"):
        import tomli_w

        from primus_launch.adapters.torchtitan import plan_from_text

        return plan_from_text(tomli_w.dumps(case["torchtitan_config"]), cluster=cluster)
    if case.get("torchtitan_launch"):  # a torchtitan 0.3 launch line (--module / --config plus overrides)
        from primus_launch.adapters.torchtitan_argv import plan_from_launch

        return plan_from_launch(list(case["torchtitan_launch"]), cluster)
    raise ValueError(f"case {case['id']}: none of megatron_flags, primus_config, torchtitan_config, torchtitan_launch")


def case_items(path: Path = CASES) -> list[Item]:
    """The cases of ``memory_cases.json``; a case with a ``skip_reason`` is kept and not judged."""
    out = []
    for c in json.loads(path.read_text())["cases"]:
        src = c.get("source") or {}
        it = Item(id=c["id"], kind="case", expect=c["outcome"], framework=c["framework"],
                  source=src.get("url") or src.get("ref", ""), measured=c.get("measured_peak"))
        if c.get("skip_reason"):
            it.skip = c["skip_reason"]
        else:
            try:
                it.plan = plan_of_case(c)
            except Exception as e:
                it.skip = f"adapter: {_one_line(e)}"
        out.append(it)
    return out


def collect(kinds: tuple[str, ...] = ("current", "recipe", "case")) -> list[Item]:
    load_gpus()
    items: list[Item] = []
    if "current" in kinds:
        items += current_items()
    if "recipe" in kinds:
        items += recipe_items()
    if "case" in kinds:
        items += case_items()
    return items


# ----------------------------------------------------------------------------- judging
def evaluate(it: Item) -> dict:
    """Project one item's memory; its verdict, whether that is right, peak error, the worst stage's terms."""
    out: dict[str, Any] = dict(id=it.id, kind=it.kind, expect=it.expect, framework=it.framework, source=it.source,
                               notes=it.notes)
    if it.plan is None:
        out.update(skipped=it.skip, group=None)
        return out
    from primus_launch.projection.memory.estimate import estimate_memory

    rep = estimate_memory(it.plan)
    v = verdict_of(rep)
    cap = rep.capacity_bytes / GiB
    out.update(group=group_of(it.plan), framework=it.plan.framework if it.framework in ("megatron", "torchtitan")
               else it.framework, parallel=it.plan.parallel_summary(), gpu=it.plan.cluster.gpu,
               verdict=v, right=is_right(it.expect, v), peak_gib=rep.peak_bytes_per_gpu / GiB, capacity_gib=cap,
               oom_peak_gib=rep.verdict_peak_bytes / GiB,
               margin=getattr(rep, "margin_fraction", None), band=getattr(rep, "band", None),
               worst_stage=rep.worst_stage, terms_gib={k: rep.breakdown.get(k, 0) / GiB for k in TERMS},
               allocated_gib=(getattr(rep, "allocated_peak_bytes", 0) or 0) / GiB,
               reserved_gib=(getattr(rep, "reserved_peak_bytes", 0) or 0) / GiB,
               tokens_per_gpu=tokens_per_gpu(it.plan))
    m = it.measured
    if m:
        basis, rank = m.get("basis", "reserved"), m.get("rank", "max")
        meas = m.get("gib")
        if meas is None and m.get("fraction_of_device") is not None:
            meas = float(m["fraction_of_device"]) * cap  # of the device's capacity as the projection knows it
        proj = stage_peak_bytes(rep.stages, basis, rank) / GiB
        out.update(measured_gib=meas, measured_basis=basis, measured_rank=rank, projected_gib=proj,
                   peak_err=peak_error(proj, meas), peak_approx=bool(m.get("approx")))
    return out


def tokens_per_gpu(plan: Any) -> float:
    """Tokens of one micro-batch on one GPU: ``seq x mbs / cp`` (``/ tp`` under sequence parallelism)."""
    m, p, t = plan.model, plan.parallel, plan.training
    return m.seq_length * t.micro_batch_size / max(1, p.cp) / (p.tp if p.sequence_parallel else 1)


def rank_correlation(xs: list[float], ys: list[float]) -> Optional[float]:
    """Spearman's rank correlation (average ranks for ties); None under three points."""
    if len(xs) < 3:
        return None

    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / den if den else None


def _stats(errs: list[float]) -> dict:
    a = [abs(e) for e in errs]
    return {"n": len(a), "median_abs": statistics.median(a) if a else None, "max_abs": max(a) if a else None}


def summarize(results: list[dict]) -> dict:
    """Counts per framework x group and overall; wrong verdicts; peak errors (exact peaks only)."""
    judged = [r for r in results if r.get("verdict")]

    def block(sel: list[dict]) -> dict:
        ran = [r for r in sel if r["expect"] == "ran"]
        oom = [r for r in sel if r["expect"] != "ran"]
        peaks = [r["peak_err"] for r in sel if "peak_err" in r and not r["peak_approx"]]
        return {"ran": {v: sum(r["verdict"] == v for r in ran) for v in VERDICTS},
                "oom": {v: sum(r["verdict"] == v for r in oom) for v in VERDICTS},
                "wrong": sum(not r["right"] for r in sel), "n": len(sel), "peak": _stats(peaks)}

    out: dict[str, Any] = {"all": block(judged), "skipped": sum(1 for r in results if not r.get("verdict"))}
    for kind in ("current", "recipe", "case"):
        out[f"kind:{kind}"] = block([r for r in judged if r["kind"] == kind])
    for fw in sorted({r["framework"] for r in judged}):
        for g in GROUPS:
            sel = [r for r in judged if r["framework"] == fw and r["group"] == g]
            if sel:
                out[f"{fw}:{g}"] = block(sel)
    out["wrong"] = [r["id"] for r in judged if not r["right"]]
    return out


# ----------------------------------------------------------------------------- printing
def _counts(d: dict) -> str:
    return f"{d[FITS]:3d} {d[TIGHT]:3d} {d[DNF]:3d}"


def _pct(x: Optional[float]) -> str:
    return "    -" if x is None else f"{100 * x:5.1f}"


def _terms(r: dict) -> str:
    t = r["terms_gib"]
    return " ".join(f"{k[:5]} {t[k]:.1f}" for k in TERMS)


def report(results: list[dict], s: dict, quiet: bool = False) -> str:
    lines = []
    if not quiet:
        lines.append(f"{'id':62s} {'kind':7s} {'expect':8s} {'verdict':12s} {'peak':>6s} {'cap':>6s}  group       parallel")
        for r in results:
            if not r.get("verdict"):
                lines.append(f"{r['id'][:62]:62s} {r['kind']:7s} {r['expect']:8s} {'(skipped)':12s}  {r['skipped'][:110]}")
                continue
            mark = "" if r["right"] else "  <- WRONG"
            lines.append(f"{r['id'][:62]:62s} {r['kind']:7s} {r['expect']:8s} {r['verdict']:12s} {r['peak_gib']:6.1f} "
                         f"{r['capacity_gib']:6.1f}  {r['group']:11s} {r['parallel'][:64]}{mark}")
        lines.append("")
    lines.append("Verdicts per framework and group (ran: must be fits/tight; OOM: must be does-not-fit; borderline "
                 "OOM: tight/does-not-fit); peak |err| over exactly published peaks")
    lines.append(f"{'':22s} {'n':>3s} | {'ran: fits tight dnf':>19s} | {'OOM: fits tight dnf':>19s} | {'wrong':>5s} | "
                 f"{'peaks':>5s} {'med %':>6s} {'max %':>6s}")
    keys = [k for k in s if ":" in k and not k.startswith("kind:")] + ["kind:current", "kind:recipe", "kind:case", "all"]
    for k in keys:
        b = s[k]
        if not b["n"]:
            continue
        lines.append(f"{k:22s} {b['n']:3d} |      {_counts(b['ran'])} |      {_counts(b['oom'])} | {b['wrong']:5d} | "
                     f"{b['peak']['n']:5d} {_pct(b['peak']['median_abs']):>6s} {_pct(b['peak']['max_abs']):>6s}")
    skipped = [r for r in results if not r.get("verdict")]
    if skipped:
        lines.append(f"Not judged ({len(skipped)}: no plan):")
        lines += [f"  {r['id'][:60]:60s} {r['skipped'][:150]}" for r in skipped]
    wrong = [r for r in results if r.get("verdict") and not r["right"]]
    if wrong:
        lines.append("")
        lines.append(f"Wrong verdicts ({len(wrong)}): peak the verdict compares (reserved less the free cached "
                     "segments released before an OOM) / capacity GiB (over capacity), worst stage's terms GiB")
        for r in wrong:
            held = r.get("oom_peak_gib", r["peak_gib"])
            lines.append(f"  {r['id'][:60]:60s} {r['expect'][:8]:8s} -> {r['verdict']:12s} {held:6.1f}/"
                         f"{r['capacity_gib']:6.1f} ({100 * (held / r['capacity_gib'] - 1):+5.1f}%)  "
                         f"stage {r['worst_stage']}: {_terms(r)}")
    peaks = [r for r in results if "peak_err" in r]
    if peaks:
        lines.append("")
        lines.append("Published peaks: measured vs projected (same basis and rank); ~ = stated roughly, not in the stats")
        for r in peaks:
            lines.append(f"  {r['id'][:60]:60s} {r['measured_basis'][:5]:5s} {r['measured_rank']:5s} measured "
                         f"{r['measured_gib']:6.1f}  projected {r['projected_gib']:6.1f}  {100 * r['peak_err']:+6.1f}%"
                         f"{' ~' if r['peak_approx'] else ''}")
        exact = sorted((r for r in peaks if not r["peak_approx"]), key=lambda r: r["tokens_per_gpu"])
        lines.append("")
        lines.append("Published peak error against tokens per GPU (one micro-batch: seq x mbs / cp, / tp under SP), "
                     "exact peaks")
        for fw in ("megatron", "torchtitan", "all"):
            rows = [r for r in exact if fw == "all" or r["framework"] == fw]
            rho = rank_correlation([r["tokens_per_gpu"] for r in rows], [r["peak_err"] for r in rows])
            buckets: dict[float, list[float]] = {}
            for r in rows:
                buckets.setdefault(r["tokens_per_gpu"], []).append(r["peak_err"])
            cells = "  ".join(f"{int(k)}: {100 * statistics.median(v):+.1f}% (n={len(v)})" for k, v in sorted(buckets.items()))
            lines.append(f"  {fw:10s} Spearman rho {('%+.2f' % rho) if rho is not None else '-':>5s}  median error by "
                         f"tokens: {cells}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write every item's result and the summary to this file")
    ap.add_argument("--only", choices=("current", "recipe", "case"), action="append",
                    help="judge only this set (repeatable)")
    ap.add_argument("--quiet", action="store_true", help="tables only, no per-item lines")
    args = ap.parse_args(argv)
    items = collect(tuple(args.only) if args.only else ("current", "recipe", "case"))
    results = [evaluate(it) for it in items]
    s = summarize(results)
    print(report(results, s, quiet=args.quiet))
    if args.json:
        from primus_launch.fileio import atomic_write_text

        atomic_write_text(Path(args.json), json.dumps({"results": results, "summary": s}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
