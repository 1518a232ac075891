"""The kernel curves of the cost model against the public kernel measurements they are fitted to.

Truth: the records of ``primus_launch/projection/data/kernel_evidence.json`` (each with its source).
Every curve of ``projection/cost/fitted/`` is re-evaluated here at each of its records' shapes,
through the same model functions the dry-run calls, and must stay within the stated tolerance;
``scripts/fit_kernels.py`` run on the evidence reproduces the committed table.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import fit_kernels as fk  # noqa: E402

from primus_launch.projection.cost import evidence as ev  # noqa: E402
from primus_launch.projection.cost.fitted import FITTED  # noqa: E402
from primus_launch.projection.cost.kernels import AttnCurve, GemmCurve  # noqa: E402

# per-record bound (|log(model/measured)|) and per-curve rms bound; the looser ones are stated:
# AMD square sweeps (hipBLASLt's dips at 16k^3) and the CDNA4 aiter MHA forward/backward mix
RECORD_TOL = {"default": math.log(1.45), "cdna3/fp8": math.log(1.6), "cdna3/bf16": math.log(1.6)}
RMS_TOL = 0.25


def _lr(a: float, b: float) -> float:
    return abs(math.log(a / b))


@pytest.fixture(scope="module")
def refit():
    return fk.fit_all()


def test_evidence_file_has_every_kind():
    kinds = {r["kind"] for r in ev.all_records()}
    assert {"gemm", "gemm_fp8", "attention", "grouped_gemm", "collective", "deepep", "hbm", "fp8_cast",
            "host_overhead"} <= kinds
    for rid in FITTED["gemm"]["hopper/bf16"]["records"]:
        r = ev.record(rid)
        assert r is not None and r["source"]


def test_fitted_table_is_what_the_evidence_gives(refit):
    """The committed curves equal a fresh fit of the evidence (``fit_kernels.py --write`` was run)."""
    for sec in ("hbm", "gemm", "grouped_gemm", "fp8_quant", "attention", "collectives", "deepep"):
        assert set(refit[sec]) == set(FITTED[sec]), sec
        for key, c in refit[sec].items():
            for k, v in c.items():
                if isinstance(v, float):
                    assert FITTED[sec][key][k] == pytest.approx(v, rel=1e-6, abs=1e-12), (sec, key, k)
                elif k == "records":
                    assert FITTED[sec][key][k] == v, (sec, key)


@pytest.mark.parametrize("key", sorted(FITTED["gemm"]))
def test_gemm_curve_within_tolerance_of_its_records(key):
    arch, fmt = key.split("/")
    c = FITTED["gemm"][key]
    curve = GemmCurve(c["eff"], c["k0"], c["t0"])
    eta = FITTED["hbm"].get(arch, FITTED["hbm"]["hopper"])["eta"]
    recs = fk.gemm_records(arch, fmt)
    assert [r["id"] for r, _ in recs] == c["records"]
    errs = []
    for r, gemms in recs:
        model = fk._gemm_model_s(r, gemms, fmt, curve, eta)
        meas = sum(2.0 * m * n * k for m, n, k in gemms) / (r["value"] * 1e12)
        errs.append(_lr(model, meas))
        assert errs[-1] <= RECORD_TOL.get(key, RECORD_TOL["default"]), (r["id"], model, meas)
    assert math.sqrt(sum(e * e for e in errs) / len(errs)) <= RMS_TOL


def _attn_curve(c: dict) -> AttnCurve:
    return AttnCurve(c["fwd"], c["bwd"], c["s0"], c["d0"], c["tc"], c["t0"], dp=c.get("dp", 1.0))


@pytest.mark.parametrize("key", sorted(k for k, v in FITTED["attention"].items() if v["rms"] is not None))
def test_attention_curve_within_tolerance_of_its_records(key):
    """Each record within log(1.5), the curve's rms within RMS_TOL; another SKU's records (``sku``: B300 beside
    GB300) at the curve's rate times their fitted factor."""
    c = FITTED["attention"][key]
    curve = _attn_curve(c)
    sku = c.get("sku", {})
    errs = []
    for rid in c["records"]:
        r = ev.record(rid)
        model, meas = fk._attn_pred_meas(r, curve)
        model /= sku.get(r["gpu"], 1.0)
        errs.append(_lr(model, meas))
        assert errs[-1] <= math.log(1.5), (rid, model, meas)
    assert math.sqrt(sum(e * e for e in errs) / len(errs)) <= RMS_TOL


def test_attention_facts_the_curves_keep():
    """FA3 > cuDNN > FA2 on Hopper at head dim 128 (FA3 paper figures); backward slower per FLOP
    than forward; causal costs most at short sequences."""
    from primus_launch.projection.cost.compute import attention_time

    t = {impl: attention_time(1, 16, 16384, 16384, 128, 128, False, "h100-sxm", impl) for impl in ("fa2", "fa3", "cudnn")}
    assert t["fa3"][0] < t["cudnn"][0] < t["fa2"][0]
    for impl in ("fa2", "fa3", "cudnn"):
        f, b = t[impl]
        assert 2.5 < b / f < 4.0
    short_c, short_n = (attention_time(32, 16, 512, 512, 128, 128, c, "h100-sxm", "fa3")[0] for c in (True, False))
    long_c, long_n = (attention_time(1, 16, 16384, 16384, 128, 128, c, "h100-sxm", "fa3")[0] for c in (True, False))
    assert short_c / short_n > long_c / long_n > 0.5 - 1e-9


@pytest.mark.parametrize("key", sorted(FITTED["grouped_gemm"]))
def test_grouped_gemm_curves(key):
    from primus_launch.projection.cost.kernels import gemm_seconds
    from primus_launch.projection.hardware.gpus import get_gpu

    parts = key.split("/")
    arch, fmt, lib = parts[0], parts[1], (parts[2] if len(parts) > 2 else "any")
    curve = _grouped(key)
    eta = FITTED["hbm"].get(arch, FITTED["hbm"]["hopper"])["eta"]
    for r, probs in fk.grouped_records(arch, fmt, lib):
        model = fk.grouped_model_seconds(r, probs, fmt, curve, eta)
        meas = fk.grouped_measured_seconds(r, probs, fmt, eta)
        assert _lr(model, meas) <= math.log(1.6), (r["id"], model, meas)


def _grouped(key: str) -> GemmCurve:
    c = FITTED["grouped_gemm"][key]
    return GemmCurve(c["eff"], c["k0"], c["t0"], k0_wgrad=c.get("k0_wgrad"))


def _speedup_pairs(key: str, held: bool) -> list[tuple[str, float, float]]:
    """(id, modelled, measured) of the torch low-precision curve's records: absolute autograd figures (seconds,
    quantisation off) and GEMM-only speed-ups over the BF16 twin (each sweep at its fitted level, ``sweep_level``)."""
    import re

    arch, fmt, lib = key.split("/")
    c, twin, fit = _grouped(key), _grouped(f"{arch}/bf16/{lib}"), FITTED["grouped_gemm"][key]
    eta = FITTED["hbm"][arch]["eta"]
    out = [(r["id"], fk.grouped_model_seconds(r, p, fmt, c, eta), fk.grouped_measured_seconds(r, p, fmt, eta))
           for r, p in fk.grouped_records(arch, fmt, lib) if fk.grouped_held_out(r) == held]
    for r, p in fk.grouped_ratio_records(arch, fmt, lib):
        if fk.grouped_held_out(r) == held:
            m = fk.grouped_model_seconds(r, p, "bf16", twin, eta) / fk.grouped_model_seconds(r, p, fmt, c, eta)
            out.append((r["id"], m * fit["sweep_level"][re.sub(r"-M[0-9]+-", "-", r["id"])], r["value"]))
    return out


def test_torch_mxfp8_grouped_curve_reproduces_its_records_and_the_held_out_ones():
    """torch._scaled_grouped_mm MXFP8 (B200): the curve reproduces the records it was fitted to within its stated
    rms / worst error, and the held-out ones (the M = 32768 point of each torchao roofline sweep, the G = 2 / 4 rows
    of the autograd table) within theirs; the weight-gradient term K0_wgrad stands (the efficiency alone leaves
    the speed-ups at 2048-16384 tokens per group a larger error, on the fitted and on the held-out records)."""
    key = "blackwell/mxfp8/torch"
    fit = FITTED["grouped_gemm"][key]
    for held, rms_key, max_key in ((False, "rms", "max_err"), (True, "rms_holdout", "max_err_holdout")):
        pairs = _speedup_pairs(key, held)
        errs = [math.log(m / v) for _, m, v in pairs]
        assert len(pairs) == (16 if not held else 8)
        assert math.sqrt(sum(e * e for e in errs) / len(errs)) == pytest.approx(fit[rms_key], abs=2e-3)
        assert max(map(abs, errs)) <= fit[max_key] + 1e-3
        assert fit[rms_key] < 0.12 and fit[max_key] < math.log(1.25)
    assert fit["k0_wgrad"] > 4 * fit["k0"]
    assert fit["rms"] < fit["rms_eff_only"] and fit["rms_holdout_speedups"] < fit["rms_holdout_speedups_eff_only"]
    # the speed-up of the weight gradient at 2048 tokens per group over the one at 16384: torchao measured
    # 1.51 / 1.96 = 0.77 (DeepSeek-V3 shapes) and 1.47 / 2.06 = 0.71 (Llama 4); the flat curve gave 1.0
    c, twin = _grouped(key), _grouped("blackwell/bf16/torch")
    eta = FITTED["hbm"]["blackwell"]["eta"]
    r = {"gpu": "b200", "shape": {"pass": "wgrad"}}
    sp = {m: fk.grouped_model_seconds(r, [(7168, 2048, m, 8)], "bf16", twin, eta)
          / fk.grouped_model_seconds(r, [(7168, 2048, m, 8)], "mxfp8", c, eta) for m in (2048, 16384)}
    assert 1.474 / 2.064 * 0.95 < sp[2048] / sp[16384] < 1.513 / 1.961 * 1.05


def test_torch_grouped_mxfp8_forward_and_dgrad_share_one_k_term():
    """torchao's kernel breakdown (README @36027d82, B200 1000 W, DeepSeek-V3 671B shapes, 8 groups of 16384 tokens)
    times the MXFP8 2D x 3D forward (K = 7168) at 1671.2 us and the data gradient (K = 2048) at 1683.4 us: the
    curve's forward / data-gradient times stay within 10 % of that ratio (a 2D x 3D K0 as large as the weight
    gradient's would make the data gradient 1.3x the forward)."""
    c = _grouped("blackwell/mxfp8/torch")
    eta = FITTED["hbm"]["blackwell"]["eta"]
    r = {"gpu": "b200", "shape": {"pass": "fwd"}}
    f = fk.grouped_model_seconds(r, [(16384, 2048, 7168, 8)], "mxfp8", c, eta)
    d = fk.grouped_model_seconds(r, [(16384, 7168, 2048, 8)], "mxfp8", c, eta)
    assert d / f == pytest.approx(1683.4 / 1671.2, rel=0.10)


def test_torch_mxfp8_net_speedup_follows_torchaos_figures_with_tokens_per_group():
    """Held-out check with the projection's own quantisation: torchao's net speed-up of the MXFP8 autograd function
    over BF16 (roofline figures @95120b1f2, G = 8, 2048-16384 tokens per group; casts and scale layouts included)
    against the fitted pair + six casts at streaming speed + the weight gradient's K-groups rearranges.  The
    projected speed-up rises with the tokens per group like the figures', and stays above them by at most the
    stated gap (+31 %: the GEMM levels are the 2025-10 table's, the figures' kernels are of 2026-01)."""
    from primus_launch.projection.cost.titan_moe import k_groups_rearrange_seconds
    from primus_launch.projection.hardware.gpus import get_gpu

    g, eta = get_gpu("b200"), FITTED["hbm"]["blackwell"]["eta"]
    c, twin = _grouped("blackwell/mxfp8/torch"), _grouped("blackwell/bf16/torch")
    by_model: dict[str, list[tuple[int, float, float]]] = {}
    for r in ev.select("grouped_gemm", lambda r: r["id"].endswith("-fwdbwd")):
        p, sh = fk._grouped_probs(r), r["shape"]
        mq, n, k, gr = sh["total_m"], sh["n"], sh["k"], sh["groups"]
        q = 6.0 * (mq * k + mq * n + gr * n * k) / (g.hbm_bw * eta) + k_groups_rearrange_seconds(mq // gr)
        sp = fk.grouped_model_seconds(r, p, "bf16", twin, eta) / (fk.grouped_model_seconds(r, p, "mxfp8", c, eta) + q)
        by_model.setdefault(r["id"].split("-G8-")[0], []).append((mq, sp, r["value"]))
    assert len(by_model) == 2
    for rows in by_model.values():
        rows.sort()
        assert all(a[1] < b[1] for a, b in zip(rows, rows[1:]))          # rises with tokens per group
        for _, model, meas in rows:
            assert 0.95 < model / meas < 1.32


def test_torch_grouped_mxfp8_over_bf16_within_torchaos_own_table():
    """The B200 torch._grouped_mm MXFP8 and BF16 curves come from one torchao table (autograd function, README
    @ff163084): with the projection's own quantisation bytes added back, MXFP8 over BF16 at each of its shapes
    stays inside the table's measured 1.19x-1.81x (+-15%), not the 2.6x two tables of different dates gave."""
    from primus_launch.projection.hardware.gpus import get_gpu

    eta = FITTED["hbm"]["blackwell"]["eta"]
    g = get_gpu("b200")

    def t(fmt, r, probs):
        return fk.grouped_model_seconds(r, probs, fmt, _grouped(f"blackwell/{fmt}/torch"), eta)

    recs = {r["id"]: (r, p) for r, p in fk.grouped_records("blackwell", "bf16", "torch")}
    assert len(recs) == 8   # G = 1, 2, 4, 8 at Llama 4 and DeepSeek-V3 shapes
    for rid, (r, probs) in recs.items():
        q = fk.mxfp8_autograd_quant_bytes(r) / (g.hbm_bw * eta)
        speedup = t("bf16", r, probs) / (t("mxfp8", r, probs) + q)
        assert 1.19 / 1.15 < speedup < 1.81 * 1.15, (rid, speedup)


def test_hbm_efficiency_from_streaming_records():
    for arch, v in FITTED["hbm"].items():
        if not v.get("records"):
            continue
        assert 0.3 < v["eta"] <= 1.0
    assert FITTED["hbm"]["hopper"]["eta"] == pytest.approx(0.83, abs=0.06)   # STREAM 2.9-2.97 of 3.35 TB/s


def test_fp8_recipe_ordering_matches_te_layer_benchmarks():
    """Transformer Engine's layer figures (te-h200-layer-autocast-*, te-b300-layer-autocast-*): on
    Hopper delayed > current (tensorwise) > block scaling > BF16 in throughput; on Blackwell delayed >
    MXFP8 ~ current (2% apart) > BF16.  The dry-run's GEMM + quantisation time of the same 12 GEMMs
    keeps the Hopper order and Blackwell's delayed-first, and on the B300 each recipe's speed-up over
    BF16 is within 15% of the record's."""
    from primus_launch.projection.cost.compute import arch_of, gemm_time, quant_time
    from primus_launch.projection.cost import fp8 as fp8m

    def layer(gpu: str, recipe: str | None) -> float:
        t, h, f = 15872, 4096, 16384
        arch = arch_of(gpu)
        fmt = fp8m.gemm_format(recipe, arch) if recipe else "bf16"
        gemms = fk._layer_gemms({"tokens": t, "hidden": h, "ffn": f})
        s = sum(gemm_time(m, n, k, gpu, fmt=fmt) for m, n, k in gemms)
        if recipe:
            s += quant_time(fp8m.quant_bytes_te_layer(recipe, t, h, f, arch.startswith("blackwell")), gpu, recipe)
        return s

    for gpu, order, names in (("h200", ("delayed", "tensorwise", "blockwise"), ("FP8DelayedScaling", "FP8CurrentScaling",
                                                                                "FP8BlockScaling")),
                              ("b300", ("delayed", "mxfp8", "tensorwise"), ("FP8DelayedScaling", "MXFP8",
                                                                           "FP8CurrentScaling"))):
        bf16 = layer(gpu, None)
        times = [layer(gpu, r) for r in order]
        assert times[0] == min(times) and max(times) < bf16, (gpu, times, bf16)
        if gpu == "h200":
            assert times == sorted(times)
        ref = ev.record(f"te-{gpu}-layer-autocast-BF16")["value"]
        for rec, name, t in zip(order, names, times):
            meas = ev.record(f"te-{gpu}-layer-autocast-{name}")["value"] / ref
            if gpu == "h200":
                continue   # H200 NVL (600 W card) figures: the ordering holds, the absolute ratio is not the SXM's
            assert bf16 / t == pytest.approx(meas, rel=0.15), (gpu, rec)


def test_fp8_param_gather_and_weight_caching():
    """Megatron + TE quantises weights once per optimizer step (and not at all with FP8 parameter
    all-gather); TorchTitan (torchao) on every micro-batch: more quantisation time per layer."""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Source, Training
    from primus_launch.projection.cost.roofline import layer_op_times

    m = ModelArch(num_layers=4, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_query_groups=8,
                  vocab_size=128256, seq_length=8192)

    def quant(**kw) -> float:
        fw = kw.pop("framework", "megatron")
        p = Plan(model=m, parallel=Parallelism(), training=Training(global_batch_size=64, precision="fp8", **kw),
                 cluster=Cluster(gpu="h100-sxm", num_nodes=1), source=Source(framework=fw))
        return sum(f for name, f, *_ in layer_op_times(p)["dense"] if name.startswith("FP8 quantisation"))

    cached, pg = quant(fp8_recipe="tensorwise"), quant(fp8_recipe="tensorwise", fp8_param_gather=True)
    titan = quant(framework="torchtitan", fp8_recipe="tensorwise")
    assert pg < cached < titan


def test_attention_long_sequence_crosscheck():
    """The Hopper curves stand on H100 figures up to 16k keys; cudnn-frontend's H200 sweeps (4k-64k
    keys, clocks locked) check them at long sequences: PyTorch's FlashAttention-2 lies within 15% of
    the H100 FA2 curve at every length (no loss beyond 16k), cuDNN 9.1 / 9.19 run at or above the
    H100 cuDNN curve (newer library, locked clock; at most 10% below it) and never 30% above."""
    for key, lo, hi in (("hopper/fa2", 0.85, 1.15), ("hopper/cudnn", 0.70, 1.10)):
        c = FITTED["attention"][key]
        curve = _attn_curve(c)
        recs = fk.attn_crosscheck_records(*key.split("/"))
        assert len(recs) >= 20 and max(int(r["shape"]["seqlen"]) for r in recs) >= 32768
        for r in recs:
            model, meas = fk._attn_pred_meas(r, curve)
            assert lo <= meas / model <= hi, (r["id"], meas / model)


def test_blackwell_attention_from_its_own_sweeps():
    """Blackwell and Blackwell Ultra cuDNN curves stand on the GB200 / GB300 sweeps (no H100 ratio);
    GB300 (Blackwell Ultra, twice the SFU exp rate) runs full attention faster than GB200 at the same
    BF16 peak, and a 128-token window runs far below full attention per FLOP (tile waste)."""
    from primus_launch.projection.cost.compute import attention_time

    assert all(ev.record(r)["gpu"] == "gb200" for r in FITTED["attention"]["blackwell/cudnn"]["records"])
    assert {ev.record(r)["gpu"] for r in FITTED["attention"]["blackwell_ultra/cudnn"]["records"]} == {"gb300", "b300"}
    assert set(FITTED["attention"]["blackwell_ultra/cudnn"]["sku"]) == {"b300"}   # B300 at a rate of its own
    f200, b200 = attention_time(2, 64, 16384, 16384, 128, 128, True, "gb200")
    f300, b300 = attention_time(2, 64, 16384, 16384, 128, 128, True, "gb300")
    assert f300 < f200 and b300 < b200
    full = attention_time(2, 64, 16384, 16384, 64, 64, True, "gb200")[0] / (16384 / 2)
    win = attention_time(2, 64, 16384, 16384, 64, 64, True, "gb200", window=128)[0] / 128
    assert win > 4 * full   # seconds per key of each query


def test_head_dim_factor_form():
    """``g(d) = (1 + (D0/d)^p)^(-1/p)``: p = 1 is the earlier ``d/(d + D0)``; a large p a soft min(1, d/D0)."""
    from primus_launch.projection.cost.kernels import head_dim_factor

    for d, d0 in ((64, 40.8), (128, 12.5), (80, 101.6)):
        assert head_dim_factor(d, d0, 1.0) == pytest.approx(d / (d + d0))
    assert head_dim_factor(64, 100.0, 8.0) == pytest.approx(0.64, abs=0.01)
    assert head_dim_factor(200, 100.0, 8.0) > 0.99


def test_blackwell_ultra_head_dim_80_from_the_b300_sweep():
    """cudnn-frontend's B300 sweeps (records cfe26-b300-*): Qwen3-VL ViT attention at head dim 80 (cuDNN 9.25,
    16 heads, no mask, forward) runs at 1215-1269 TFLOP/s, 0.63-0.66x the 1876-1929 of the Kimi-K3 d192/128
    sweep on the same part (cuDNN 9.24) at 4k-16k keys; the refit blackwell_ultra/cudnn curve reproduces each
    d80 record within 10% (at the B300 rate factor it fitted), and prices head dim 80 at 0.6-0.85x head dim
    128 (0.79 at this fit, between the records' own 0.63-0.66 and the compromise with the backward sweeps; before:
    0.95x, d0 at the fit's lower bound)."""
    from primus_launch.projection.cost.kernels import head_dim_factor

    c = FITTED["attention"]["blackwell_ultra/cudnn"]
    curve, k = _attn_curve(c), c["sku"]["b300"]
    d80 = [r for r in ev.select("attention") if r["id"].startswith("cfe26-b300-cudnn92500-qwen3vl_vit-nc-d80-")]
    assert len(d80) == 6 and all(r["id"] in c["records"] for r in d80)
    for r in d80:
        model, meas = fk._attn_pred_meas(r, curve)
        assert abs(math.log(model / k / meas)) <= math.log(1.10), r["id"]
    assert 0.6 <= head_dim_factor(80, c["d0"], c["dp"]) / head_dim_factor(128, c["d0"], c["dp"]) <= 0.85


# Dao-AILab/flash-attention PR #2605 (2026; "Bump nvidia-cutlass-dsl to >=4.5.2 and quack-kernels to >=0.5.0"),
# description, benchmarks/benchmark_attn.py table "FWD (ms / TFLOPS / MFU% / TBs / BW%)", cuDNN column, BF16,
# head dim 64, 32 heads (the script's default for d <= 64), batch x seqlen = 32k: TFLOP/s per (causal, seqlen).
# Its MFU column (977 TF = 39.1%) puts the part at 2.5 PF: GB200 or GB300 in that script's get_peak_flops table;
# the cuDNN version is not stated.  Not a fit record (the part is not named): a cross-check.
FA2605_CUDNN_D64 = {False: {1024: 980, 2048: 1072, 4096: 1118, 8192: 1147, 16384: 1157},
                    True: {1024: 627, 2048: 826, 4096: 977, 8192: 1071, 16384: 1115}}


def test_blackwell_head_dim_64_against_a_public_cudnn_table():
    """PR #2605's cuDNN head-dim-64 forward lies within [0.8, 1.25] of both 2.5 PF parts' refit curves (GB200
    1.00-1.13x, GB300 0.86-0.93x the curve rate at this fit); the curves before the B300 records priced head dim
    64 at 1.3-1.6x this table's rate (d0 at the fit's lower bound: head dim 64 at head dim 128's rate)."""
    from primus_launch.projection.cost.kernels import attention_flops, attention_seconds
    from primus_launch.projection.hardware.gpus import get_gpu

    for gpu, key in (("gb200", "blackwell/cudnn"), ("gb300", "blackwell_ultra/cudnn")):
        curve, peak = _attn_curve(FITTED["attention"][key]), get_gpu(gpu).peak_flops_bf16
        for causal, by_s in FA2605_CUDNN_D64.items():
            for s, tflops in by_s.items():
                b = 32768 // s
                t = attention_seconds(b, 32, s, s, 64, 64, causal, None, peak, curve, False)
                rate = attention_flops(b, 32, s, s, 64, 64, causal) / t / 1e12
                assert 0.8 <= tflops / rate <= 1.25, (gpu, causal, s, tflops, rate)


def test_blackwell_ultra_shares_blackwell_tensor_core_curves():
    """Blackwell Ultra keeps Blackwell's BF16 / FP8 / MXFP8 tensor cores (same dense peaks per package;
    NVFP4 is what changed): one curve per format over both parts' records (B200 / GB200 and B300 / GB300
    records both in it), NVFP4 its own; and TE's 'pre-quantized' FP8 DelayedScaling layer figure,
    which TE's benchmark runs in autocast mode (its gemm_profiling doc), is in no GEMM-only curve."""
    g = FITTED["gemm"]
    for fmt in ("bf16", "fp8", "mxfp8"):
        bw, bu = g[f"blackwell/{fmt}"], g[f"blackwell_ultra/{fmt}"]
        assert (bw["eff"], bw["k0"], bw["t0"], bw["records"]) == (bu["eff"], bu["k0"], bu["t0"], bu["records"])
        gpus = {ev.by_id(r)["gpu"] for r in bw["records"]} if hasattr(ev, "by_id") else {
            r["gpu"] for r in ev.all_records() if r["id"] in bw["records"]}
        assert gpus & {"b200", "gb200"} and gpus & {"b300", "gb300"}
    assert "blackwell/fp4" not in g or g["blackwell/fp4"]["records"] != g["blackwell_ultra/fp4"]["records"]
    for key, c in g.items():
        assert not any("pre-quantized-FP8DelayedScaling" in r for r in c["records"]), key


def test_te_layer_benchmark_quantises_input_and_weight_of_each_of_its_12_calls():
    """TE's benchmark_gemm.py (model-config mode) runs each of the 12 GEMM shapes as its own forward
    te.Linear(K, N)(x[M, K]) under autocast: every call quantises x [M, K] and W [K, N], so the bytes
    are twice (fprop inputs + output gradients + weights) of the layer; and no recipe's fitted
    quantisation bandwidth exceeds its architecture's streaming efficiency."""
    from primus_launch.projection.cost import fp8 as fp8m

    t, h, f = 15872, 4096, 16384
    x = t * (h + h + h + f)
    dy = t * (3 * h + h + f + h)
    w = h * 3 * h + h * h + h * f + f * h
    for recipe in ("tensorwise", "delayed", "mxfp8"):
        for bw in (False, True):
            bpe = fp8m.bytes_per_element(recipe, "blackwell" if bw else "hopper")
            assert fp8m.quant_bytes_te_layer(recipe, t, h, f, bw) == 2 * bpe * (x + dy + w)
    for recipe, c in FITTED["fp8_quant"].items():
        for arch, eff in c.get("per_arch", {}).items():
            assert eff <= FITTED["hbm"][arch]["eta"] + 1e-9, (recipe, arch)


def test_sliding_window_priced_no_cheaper_than_cudnn_ran_it():
    """cuDNN's SDPA backward with a causal sliding window (cudnn-frontend PR 505, SM120; records
    cudnnfe505-*): the window's time over the full causal time of the same shape.  The cost model's cuDNN
    curves (H100, B200) must not price a window cheaper than that (their key-span penalty makes them
    dearer): a window is no source of over-projection."""
    from primus_launch.projection.cost.compute import attention_time

    recs = {r["id"]: r for r in ev.all_records() if r["id"].startswith("cudnnfe505-")}
    assert len(recs) == 6
    for rid, r in recs.items():
        w = r["shape"]["window_left"]
        if w is None:
            continue
        s = r["shape"]["seq_q"]
        full = recs[rid.rsplit("-w", 1)[0]]
        measured = r["value"] / full["value"]
        for gpu in ("h100-sxm", "b200"):
            model = (attention_time(1, 16, s, s, 64, 64, True, gpu, "cudnn", w)[1]
                     / attention_time(1, 16, s, s, 64, 64, True, gpu, "cudnn", None)[1])
            assert model >= 0.9 * measured, (rid, gpu, model, measured)


def test_torch_mxfp8_net_speedup_falls_with_groups_at_fixed_tokens():
    """torchao PR 3271's benchmark (B200, Llama 4 shapes, 16384 tokens split over G = 1-8 groups, quantisation
    included): the MXFP8 / BF16 speed-up drops from 1.337x at G = 2 to 1.115x at G = 8 (x0.83).  The fitted pair with
    the projection's own casts drops by at least 8 % over the same groups (the flat curve: 3.4 %)."""
    from primus_launch.projection.cost.titan_moe import k_groups_rearrange_seconds
    from primus_launch.projection.hardware.gpus import get_gpu

    g, eta = get_gpu("b200"), FITTED["hbm"]["blackwell"]["eta"]
    c, twin = _grouped("blackwell/mxfp8/torch"), _grouped("blackwell/bf16/torch")
    sp, meas = {}, {}
    for r in ev.select("grouped_gemm", lambda r: r["id"].startswith("ao3271-b200-ggnet-Llama4-M16384-")):
        p, sh = fk._grouped_probs(r), r["shape"]
        mq, n, k, gr = sh["total_m"], sh["n"], sh["k"], sh["groups"]
        q = 6.0 * (mq * k + mq * n + gr * n * k) / (g.hbm_bw * eta) + k_groups_rearrange_seconds(mq // gr)
        sp[gr] = fk.grouped_model_seconds(r, p, "bf16", twin, eta) / (fk.grouped_model_seconds(r, p, "mxfp8", c, eta) + q)
        meas[gr] = r["value"]
    assert sorted(sp) == [1, 2, 4, 8]
    assert meas[8] / meas[2] < 0.85
    assert sp[8] / sp[2] < 0.92
    assert all(1.0 < sp[x] / meas[x] < 1.35 for x in sp)
