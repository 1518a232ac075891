"""Every figure of the answer agrees with the others by closed-form identities, as a user checks them:
tokens/s/GPU = GBS x seq / (iteration time x GPUs); TFLOP/s/GPU = model FLOPs / (time x GPUs); MFU = that
over the GPU's dense peak at the plan's precision (hardware DB); the time components sum to the iteration;
the memory terms sum to each stage's total and the worst stage is the peak; the band's bytes scale the
allocator's part of the verdict's quantity (the peak less the free cached segments released before an OOM)
only; the verdict follows from band vs capacity; the text, --json and --explain agree.
Three bundled recipes cover Megatron dense, Megatron MoE FP8 and a TorchTitan wrapper on an AMD GPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from primus_launch.cli import main
from primus_launch.projection.hardware.gpus import get_gpu

ROOT = Path(__file__).resolve().parents[1]
GiB = 2**30
RECIPES = ["recipes/llama3.1_70b_h100_1024gpu.primus.toml", "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml",
           "recipes/llama3.1_8b_mi300x.primus.toml"]


def _cli(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("recipe", RECIPES)
def test_printed_figures_agree(recipe, capsys):
    path = str(ROOT / recipe)
    d = json.loads(_cli(capsys, "--project", path, "--dry-run", "--json"))
    text = _cli(capsys, "--project", path, "--dry-run")
    explain = _cli(capsys, "--project", path, "--dry-run", "--explain")
    plan, it, n = d["plan"], d["iteration_time_s"], d["num_gpus"]
    gbs, seq = plan["training"]["global_batch_size"], plan["model"]["seq_length"]
    assert n == plan["cluster"]["num_nodes"] * plan["cluster"]["gpus_per_node"]
    assert d["tokens_per_sec_per_gpu"] == pytest.approx(gbs * seq / (it * n), rel=1e-9)
    tflops = d["model_flops_per_iteration"] / (it * n) / 1e12
    assert d["model_tflops_per_gpu"] == pytest.approx(tflops, rel=1e-9)
    peak = get_gpu(plan["cluster"]["gpu"]).peak_flops(plan["training"]["precision"])
    assert d["mfu"] == pytest.approx(tflops * 1e12 / peak, rel=1e-9)
    assert sum(d["time_breakdown"].values()) == pytest.approx(it, rel=1e-3)
    mem = d["memory"]
    assert sum(mem["breakdown"].values()) == mem["peak_bytes_per_gpu"]
    for st in mem["stages"]:
        terms = ("parameters", "gradients", "optimizer", "activations", "transient", "reserve")
        assert sum(st[f"{k}_bytes"] for k in terms) == st["total_bytes"]
        assert st["allocated_bytes"] + st["allocator_reserve_bytes"] + st["outside_allocator_bytes"] == st["total_bytes"]
    worst = max(mem["stages"], key=lambda s: s["total_bytes"])
    assert (worst["stage"], worst["total_bytes"]) == (mem["worst_stage"], mem["peak_bytes_per_gpu"])
    # the breakdown is the worst stage's terms, its transient split from the GEMM workspaces (the description's
    # relation: a reader comparing breakdown.transient with stages[].transient_bytes found them differ)
    bd = mem["breakdown"]
    assert bd["transient"] + bd["workspaces"] == worst["transient_bytes"] and bd["workspaces"] == worst["workspace_bytes"]
    assert bd["reserve"] == worst["reserve_bytes"] and bd.get("gradients", 0) == worst["gradients_bytes"]
    # the verdict's quantity: each stage's total less the free cached segments released before an OOM
    held = max(mem["stages"], key=lambda s: s["total_bytes"] - s["releasable_bytes"])
    assert mem["oom_peak_bytes"] == held["total_bytes"] - held["releasable_bytes"] <= mem["peak_bytes_per_gpu"]
    assert all(0 <= s["releasable_bytes"] <= s["allocator_reserve_bytes"] for s in mem["stages"])
    b, out = mem["band"], held["outside_allocator_bytes"]
    inside = mem["oom_peak_bytes"] - out
    assert b["low_bytes"] == pytest.approx(inside * (1 + b["low"]) + out, abs=2)
    assert b["high_bytes"] == pytest.approx(inside * (1 + b["high"]) + out, abs=2)
    usable = mem["capacity_bytes"] * (1 - mem["margin_fraction"])
    want = "fits" if b["high_bytes"] <= usable else "does not fit" if b["low_bytes"] > usable else "tight"
    assert mem["verdict"] == want and mem["fits"] == (want != "does not fit")
    # the text: the same figures, the iteration band applied to the time and inverted for the throughput
    flat = " ".join(text.split())
    assert (f"{it:.3f} s, expected {it * (1 + d['band']['low']):.3f} .. {it * (1 + d['band']['high']):.3f} s on "
            f"{d['band']['n']} judged rows like it") in flat
    tps = d["tokens_per_sec_per_gpu"]
    assert (f"tokens/s/GPU {tps:,.0f} (expected {tps / (1 + d['band']['high']):,.0f} .. "
            f"{tps / (1 + d['band']['low']):,.0f})") in flat
    assert f"model TFLOP/s/GPU {tflops:,.1f}" in flat and f"MFU {100 * d['mfu']:.1f} %" in flat
    # user18: TFLOP/s and MFU are rates like tokens/s: the same band inverted, in the text and the JSON
    lo, hi = 1 + d["band"]["low"], 1 + d["band"]["high"]
    assert f"model TFLOP/s/GPU {tflops:,.1f} (expected {tflops / hi:,.1f} .. {tflops / lo:,.1f})" in flat
    assert f"MFU {100 * d['mfu']:.1f} % ({100 * d['mfu'] / hi:.1f} .. {100 * d['mfu'] / lo:.1f} %) of the" in flat
    assert d["band"]["mfu"] == pytest.approx([d["mfu"] / hi, d["mfu"] / lo], rel=1e-12)
    assert d["band"]["model_tflops_per_gpu"] == pytest.approx([tflops / hi, tflops / lo], rel=1e-9)
    mline = (f"{mem['peak_bytes_per_gpu'] / GiB:.1f} GiB peak of {mem['capacity_bytes'] / GiB:.1f} GiB: "
             f"{ {'fits': 'fits', 'tight': 'TIGHT', 'does not fit': 'DOES NOT FIT'}[want] }, band "
             f"{b['low_bytes'] / GiB:.1f}-{b['high_bytes'] / GiB:.1f} GiB")
    assert mline in flat
    assert re.search(r"peak\s+" + f"{mem['peak_bytes_per_gpu'] / GiB:.2f}", text)
    # --explain carries the same summary
    eflat = " ".join(explain.split())
    assert mline in eflat and f"{it:.3f} s, expected" in eflat
    assert f"on the allocator's part, the {out / GiB:.1f} GiB outside it as estimated" in eflat
