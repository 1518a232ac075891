"""Why the GPT-OSS 120B Megatron-Bridge rows split into "right" and "+25..+36 % too fast" (issue 28): a
differential study of the eight rows of ``scripts/validation/runs.json`` (Bridge 26.04 BF16 on five systems,
26.06 MXFP8 B300 EP 8, 26.08 MXFP8 GB300 EP 16 / GB200 EP 64).

Diagnostics only: nothing here changes the model or the validation rows.

1. Per row: the plan's switches that differ between the rows (precision, MBS, EP, dispatcher, CUDA graphs,
   recompute, the 1F1B EP overlap, whether the row runs TE's op fuser, the host), the measured and projected
   iteration time, the residual and the residual per (layer x sequence of 4,096 tokens) on the busiest stage.
2. Same system, two tables: the measured throughput step against the modelled one.
3. The rows that run ``--use-transformer-engine-op-fuser`` (the 26.06 / 26.08 GB200 / GB300 full-iteration
   recipes; the perf recipe also sets ``NVTE_CUTEDSL_FUSED_GROUPED_MLP=1``), projected with
   ``training.moe_expert_gemm`` = ``te`` (the unfused ``TEGroupedMLP`` path: eager clamp + cat, separate
   quick-GeGLU pass, per-expert ``_apply_bias`` loop -- how the dry-run priced them while the flag was "not
   modelled") and ``te_fused`` (what they run: Megatron-LM cd4afffa ``experts.py`` ``_fused_forward``, TE's
   CuTeDSL grouped GEMMs with the activation in their epilogues; ``tests/test_fused_grouped_mlp.py``), and the
   seconds per iteration the ``te`` pricing charges to the three rows the fused path does not run.
4. The residual over the modelled seconds per iteration of each op class (attention, GEMM, grouped GEMM,
   elementwise, head): a term every row misses in the same proportion would show as a constant ratio.
5. A public measurement of the fused kernel's weight in these runs: Megatron-Bridge's performance archive
   (``docs/performance-summary-archive.md``) has the same GB300 EP 16 / GB200 EP 64 MXFP8 recipes at 26.06
   (33,166 / 28,947 tokens/s/GPU) and 26.06.01 (20,288 / 18,304), the drop footnoted as cudnn-frontend issue #256
   (``grouped_gemm_dglu_wrapper_sm100`` "became 10x slower between 1.23.0 and 1.24.0"): the extra seconds per
   (layer x micro-batch) it implies, beside the modelled backward of the FC2 grouped GEMM (the GEMM of
   ``grouped_gemm_dglu``).

    python scripts/gptoss_diff.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROWS = (
    "mbridge2604_gb300_bf16_gpt_oss_120b_64gpu",
    "mbridge2604_gb200_bf16_gpt_oss_120b_64gpu",
    "mbridge2604_b300_bf16_gpt_oss_120b_64gpu",
    "mbridge2604_b200_bf16_gpt_oss_120b_64gpu",
    "mbridge2604_h100_bf16_gpt_oss_120b_64gpu",
    "mbridge2606_b300_fp8_mx_gpt_oss_120b_64gpu",
    "mbridge2608_gb300_fp8_mx_gpt_oss_120b_64gpu",
    "mbridge2608_gb200_fp8_mx_gpt_oss_120b_64gpu",
)
STEPS = (   # (from, to): same system, two tables
    ("mbridge2604_gb300_bf16_gpt_oss_120b_64gpu", "mbridge2608_gb300_fp8_mx_gpt_oss_120b_64gpu"),
    ("mbridge2604_gb200_bf16_gpt_oss_120b_64gpu", "mbridge2608_gb200_fp8_mx_gpt_oss_120b_64gpu"),
    ("mbridge2604_b300_bf16_gpt_oss_120b_64gpu", "mbridge2606_b300_fp8_mx_gpt_oss_120b_64gpu"),
)
# Rows of the experts' MLP that the CuTeDSL fused grouped MLP does not run as separate kernels (module doc, 3)
FUSED_AWAY = ("activation clamp", "quick-GeGLU", "FC2 bias x probs")
# Megatron-Bridge docs/performance-summary-archive.md (repo 067f987df): GPT OSS 120B, 64 GPUs, MXFP8, GBS 1280,
# MBS 4, seq 4096; '26.06 NeMo Container' vs '26.06.01 NeMo Container' ([^gpt-oss-note]: cudnn-frontend #256)
REGRESSION_2606 = {"gb300": (33166.0, 20288.0), "gb200": (28947.0, 18304.0)}
GRACE = ("gb200", "gb300")


def _rows() -> tuple[dict, dict]:
    runs = {r["id"]: r for r in json.loads((ROOT / "scripts" / "validation" / "runs.json").read_text())["rows"]}
    cur = {r["id"]: r for r in json.loads((ROOT / "scripts" / "validation" / "current_runs.json").read_text())}
    return runs, cur


def study(ids: tuple[str, ...] = ROWS) -> dict[str, dict]:
    """Per row: the plan switches, measured / projected seconds and tokens/s, the modelled seconds per iteration of
    each op class, and (op-fuser rows) the projection with the unfused pricing and the seconds it charges to
    :data:`FUSED_AWAY` per iteration on the busiest stage."""
    from primus_launch.plan import Plan
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.dryrun import project_dry_run

    runs, cur = _rows()
    out: dict[str, dict] = {}
    for rid in ids:
        row = runs[rid]
        plan = Plan.model_validate(row["plan"])
        res = project_dry_run(plan)
        m, p, t = plan.model, plan.parallel, plan.training
        meas = row["measured_tokens_per_sec_per_gpu"]
        t_meas = res.iteration_time_s * res.tokens_per_sec_per_gpu / meas
        ops = layer_op_times(plan)
        n_win = m.num_window_layers
        per_kind = {"moe": (m.num_layers - n_win) / p.pp, "moe_window": n_win / p.pp}
        classes: dict[str, float] = {}
        for kind, v in ops.items():
            if kind.startswith("_"):
                continue
            if kind.startswith("dense") and m.num_moe_layers == m.num_layers:
                continue   # layer_op_times also times the dense kinds; GPT-OSS has none
            n = per_kind.get(kind, 1.0 / p.pp)
            for o in v:
                c = "head" if kind in ("head", "embedding") else o[4][0]
                classes[c] = classes.get(c, 0.0) + plan.num_microbatches * n * (o[1] + o[2] + o[3])
        fc2_dgrad = next((o[2] for o in ops.get("moe", []) if o[0].startswith("experts (grouped) FC2")), 0.0)
        alt = {}
        if t.moe_expert_gemm == "te_fused":   # the same row priced as the unfused TEGroupedMLP path
            unf = plan.model_copy(update={"training": t.model_copy(update={"moe_expert_gemm": "te"})})
            r_unf = project_dry_run(unf)
            ops_u = layer_op_times(unf)
            alt = {"projected": r_unf.tokens_per_sec_per_gpu, "t_proj": r_unf.iteration_time_s,
                   "fused_away_s": plan.num_microbatches * sum(
                       n * sum(o[1] + o[2] + o[3] for o in ops_u.get(kind, []) if any(f in o[0] for f in FUSED_AWAY))
                       for kind, n in per_kind.items())}
        flags = cur[rid]["megatron_flags"]
        seqs = plan.num_microbatches * t.micro_batch_size
        out[rid] = {
            "gpu": plan.cluster.gpu, "host": "grace" if plan.cluster.gpu in GRACE else "x86",
            "precision": t.fp8_recipe or t.precision, "mbs": t.micro_batch_size, "pp": p.pp, "ep": p.ep,
            "dispatcher": t.moe_token_dispatcher,
            "graphs": "+".join(t.cuda_graph_scope) if t.cuda_graph_impl != "none" else "none",
            "recompute": ",".join(t.recompute.modules) if t.recompute.granularity != "none" else "none",
            "ep_overlap": t.overlap_moe_expert_parallel_comm,
            "op_fuser": "--use-transformer-engine-op-fuser" in flags, "expert_gemm": t.moe_expert_gemm,
            "measured": meas, "projected": res.tokens_per_sec_per_gpu,
            "t_meas": t_meas, "t_proj": res.iteration_time_s,
            "resid_ms_per_layer_seq": 1e3 * (t_meas - res.iteration_time_s) / (seqs * m.num_layers / p.pp),
            "unfused": alt, "fc2_dgrad_s": fc2_dgrad,
            "layer_mb": plan.num_microbatches * m.num_layers // p.pp,
            "classes": classes,
        }
    return out


def _err(proj: float, meas: float) -> float:
    return 100.0 * (proj - meas) / meas


def main() -> int:
    s = study()
    print("1. rows (busiest stage; residual = measured - projected iteration time)")
    print(f"{'row':44s} {'host':5s} {'prec':5s} {'MBS':>3s} {'PP':>2s} {'EP':>3s} {'dispatch':8s} {'graphs':28s} "
          f"{'recompute':17s} {'ovl':3s} {'fuser':5s} {'meas s':>6s} {'proj s':>6s} {'err %':>6s} "
          f"{'resid ms/(layer x seq)':>22s}")
    for rid, r in s.items():
        print(f"{rid:44s} {r['host']:5s} {r['precision']:5s} {r['mbs']:3d} {r['pp']:2d} {r['ep']:3d} "
              f"{r['dispatcher']:8s} {r['graphs']:28s} {r['recompute']:17s} {'on' if r['ep_overlap'] else 'off':3s} "
              f"{'on' if r['op_fuser'] else 'off':5s} {r['t_meas']:6.3f} {r['t_proj']:6.3f} "
              f"{_err(r['projected'], r['measured']):+6.1f} {r['resid_ms_per_layer_seq']:22.2f}")
    print("\n2. same system, two tables: throughput step measured vs modelled")
    for a, b in STEPS:
        ra, rb = s[a], s[b]
        sm, sp = rb["measured"] / ra["measured"], rb["projected"] / ra["projected"]
        print(f"{ra['gpu']:6s} {a.split('_')[0]} -> {b.split('_')[0]}: measured x{sm:.3f}, modelled x{sp:.3f} "
              f"(model gets {100 * (sp - 1) / (sm - 1):.0f} % of the step)")
    print("\n3. op-fuser rows priced as the unfused TEGroupedMLP path (moe_expert_gemm te) and as what they run "
          "(te_fused); seconds the te pricing charges to " + ", ".join(FUSED_AWAY))
    for rid, r in s.items():
        u = r["unfused"]
        if not u:
            continue
        print(f"{rid:44s} te {u['projected']:,.0f} tokens/s/GPU ({_err(u['projected'], r['measured']):+.1f} %, "
              f"{u['fused_away_s']:.3f} of {u['t_proj']:.3f} s charged to them); te_fused {r['projected']:,.0f} "
              f"({_err(r['projected'], r['measured']):+.1f} %); measured {r['measured']:,.0f}")
    print("\n4. residual over the modelled "
          "seconds per iteration of each op class (busiest stage; head and embedding counted once per micro-batch "
          "/ PP): the class whose ratio stays constant across the rows is the best candidate for what all miss")
    cls = ("attention", "gemm", "grouped_gemm", "elementwise", "head")
    print(f"{'row':44s} {'resid s':>7s} " + " ".join(f"{c:>14s}" for c in cls))
    for rid, r in s.items():
        resid = r["t_meas"] - r["t_proj"]
        print(f"{rid:44s} {resid:7.3f} " + " ".join(
            f"{r['classes'].get(c, 0.0):6.3f} x{resid / r['classes'][c]:5.2f}" if r["classes"].get(c) else
            f"{'-':>14s}" for c in cls))
    print("\n5. Bridge 26.06 -> 26.06.01, same MXFP8 recipes (cudnn-frontend #256: grouped_gemm_dglu ~10x slower)")
    for gpu, (good, bad) in REGRESSION_2606.items():
        r = next(v for v in s.values() if v["gpu"] == gpu and v["op_fuser"])
        tok_per_it = r["projected"] * r["t_proj"]
        extra = tok_per_it / bad - tok_per_it / good
        n = r["layer_mb"]
        print(f"{gpu:6s} {good:,.0f} -> {bad:,.0f} tokens/s/GPU: +{extra:.3f} s per iteration, "
              f"{1e3 * extra / n:.2f} ms per (layer x micro-batch); at exactly 10x the kernel took "
              f"{1e3 * extra / n / 9:.2f} ms before; the modelled FC2 grouped GEMM backward (dgrad) "
              f"{1e3 * r['fc2_dgrad_s']:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
