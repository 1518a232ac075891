"""FP8 / MXFP8 dot-product attention (Megatron ``fp8_dot_product_attention``, ``training.fp8_attention``).

Truth: the ``cfe26fp8-*`` records of ``projection/data/kernel_evidence.json`` (cudnn-frontend's published
SDPA benchmark CSVs, FP8 / MXFP8 time beside BF16 time of the same case), Transformer Engine's backend
filter and save-for-backward (read at d0067d0, cited in ``cost/fp8_attention.py`` / ``memory/fp8.py``), and
the Megatron reader's own round trip.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from primus_launch.plan import Plan
from primus_launch.projection.cost import evidence as ev
from primus_launch.projection.cost import fp8_attention as f8

ROOT = Path(__file__).resolve().parents[1]
GPTOSS_GB300 = "mbridge2608_gb300_fp8_mx_gpt_oss_120b_64gpu"


def _record_ratio(key: tuple, pas: str, seq: int) -> float:
    arch, case, mask, fmt = key
    win = "-w128" if case == "window" else ""
    pre = f"cfe26fp8-{f8.RECORD_GPU[arch]}-cudnn"
    tail = f"-{f8.RECORD_MODEL[case]}-{fmt}-{'c' if mask == 'causal' else 'nc'}{win}-s{seq}-{pas}"
    recs = ev.select("attention_fp8", lambda r: r["id"].startswith(pre) and r["id"].endswith(tail))
    assert len(recs) == 1, (key, pas, seq)
    r = recs[0]
    assert "cudnn-frontend" in r["source"] and r["unit"] == "ms" and r["dtype"] == fmt
    return r["value"] / r["shape"]["bf16_ms"]


def test_ratio_table_is_the_records():
    """Every ratio of the table is its record's FP8 (MXFP8) time over the BF16 time of the same case, and the
    interpolation returns it at the record's sequence."""
    assert len(f8.RATIOS) == 44
    for (arch, case, mask, fmt, pas), pts in f8.RATIOS.items():
        assert [p[0] for p in pts] == [2048, 4096, 8192, 16384, 32768]
        for seq, r in pts:
            assert r == pytest.approx(_record_ratio((arch, case, mask, fmt), pas, seq), abs=6e-4)
            w = 128 if case == "window" else None
            assert f8.ratio((arch, case, mask, fmt), pas, seq, w) == r


def test_interpolation_between_and_beyond_records():
    key = ("blackwell_ultra", "d128", "causal", "mxfp8")
    lo, hi = dict(f8.RATIOS[key + ("bwd",)])[4096], dict(f8.RATIOS[key + ("bwd",)])[8192]
    assert f8.ratio(key, "bwd", int(4096 * math.sqrt(2))) == pytest.approx((lo + hi) / 2, abs=1e-4)
    assert f8.ratio(key, "bwd", 512) == dict(f8.RATIOS[key + ("bwd",)])[2048]
    assert f8.ratio(key, "bwd", 131072) == dict(f8.RATIOS[key + ("bwd",)])[32768]
    # another window reads the table at s x 128 / w: window 256 at 8k is window 128 at 4k
    wk = ("blackwell", "window", "causal", "fp8")
    assert f8.ratio(wk, "bwd", 8192, 256) == f8.ratio(wk, "bwd", 4096, 128)


def test_window_fp8_backward_does_not_skip_the_window():
    """The records' own shape: the FP8 backward with a 128-key window grows ~4x per doubled sequence (the
    whole causal triangle), while the BF16 one grows ~2x (the band) -- why the ratio rises as s / 128."""
    for gpu in ("gb200", "gb300"):
        recs = {r["shape"]["seqlen"]: r for r in ev.select(
            "attention_fp8", lambda r: r["id"].startswith(f"cfe26fp8-{gpu}-") and "-gpt_oss-fp8-" in r["id"]
            and r["id"].endswith("-bwd"))}
        for s in (8192, 16384, 32768):
            assert 3.4 < recs[s]["value"] / recs[s // 2]["value"] < 4.1
            assert 1.8 < recs[s]["shape"]["bf16_ms"] / recs[s // 2]["shape"]["bf16_ms"] < 2.2


def test_kimi_mla_records_agree_with_the_dsv3_ratios():
    """The d192 case is fitted on DeepSeek-V3's 128-head MLA shape; Kimi-K2.6's 64-head MLA records (not in the
    table) give the same ratios within 0.06 at 4k-32k on both GPUs and formats."""
    n = 0
    for r in ev.select("attention_fp8", lambda r: "-kimiK26-" in r["id"] and r["shape"]["causal"]
                       and r["shape"]["seqlen"] >= 4096):
        arch = {"gb200": "blackwell", "gb300": "blackwell_ultra"}[r["gpu"]]
        want = f8.ratio((arch, "d192", "causal", r["dtype"]), r["shape"]["pass"], r["shape"]["seqlen"])
        assert r["value"] / r["shape"]["bf16_ms"] == pytest.approx(want, abs=0.06), r["id"]
        n += 1
    assert n == 32


@pytest.mark.parametrize("arch,recipe,window,sinks,covered", [
    ("blackwell_ultra", "mxfp8", 128, True, True),
    ("blackwell", "tensorwise", None, False, True),
    ("hopper", "delayed", None, False, True),
    ("hopper", "tensorwise", None, False, False),      # TE: current scaling FP8 attention needs sm100
    ("hopper", "mxfp8", None, False, False),
    ("hopper", "delayed", 4096, False, False),        # TE: FP8 sliding window needs sm100 + cuDNN 9.21
    ("blackwell", "blockwise", None, False, False),   # TE disables FusedAttention for Float8BlockScaling
    ("cdna3", "delayed", None, False, False),         # no record (AMD)
])
def test_backend_filter_and_coverage(arch, recipe, window, sinks, covered):
    key, why = f8.fp8_attention_case(arch, recipe, 128, True, window, sinks)
    assert (key is not None) is covered and (why == "") is covered


@pytest.fixture(scope="module")
def gptoss_plans():
    rows = {r["id"]: r for r in json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"]}
    on = Plan.model_validate(rows[GPTOSS_GB300]["plan"])
    assert on.training.fp8_attention and on.training.fp8_recipe == "mxfp8"
    off = on.model_copy(update={"training": on.training.model_copy(update={"fp8_attention": False})})
    return on, off


def _core(ops: list) -> tuple:
    return next(o for o in ops if o[0].startswith("core attention"))


def test_projection_applies_the_record_ratios(gptoss_plans):
    """GPT-OSS 120B on GB300 (26.08, MXFP8, s4096, window 128 on every other layer, sinks): the core attention's
    forward / backward under fp8_attention are the BF16 ones times the GB300 MXFP8 records' ratios at s4096 --
    window 128: 0.866 / 4.233, full causal (d64 takes the d128 records): 0.749 / 1.093 -- and TE's quantise
    kernels appear as their own op.  The plan's window is 127 keys left of the diagonal (Megatron's (127, 0)), the
    records' 128: the table is read at s x 128 / 127, 0.9 % higher on the steep windowed backward."""
    from primus_launch.projection.cost.roofline import layer_op_times

    on, off = (layer_op_times(p) for p in gptoss_plans)
    for kind, (rf, rb) in (("moe_window", (0.866, 4.233)), ("moe", (0.749, 1.093))):
        c_on, c_off = _core(on[kind]), _core(off[kind])
        assert c_on[1] / c_off[1] == pytest.approx(rf, rel=1e-3)
        assert c_on[2] / c_off[2] == pytest.approx(rb, rel=1e-2)
        if kind == "moe_window":
            w = gptoss_plans[0].model.window_size
            assert c_on[2] / c_off[2] == pytest.approx(
                f8.ratio(("blackwell_ultra", "window", "causal", "mxfp8"), "bwd", 4096, w), rel=1e-9)
        assert "mxfp8" in c_on[0] and "mxfp8" not in c_off[0]
        assert any(o[0].startswith("FP8 attention quantise") for o in on[kind])
        assert not any(o[0].startswith("FP8 attention quantise") for o in off[kind])


def test_uncovered_case_keeps_bf16_time_with_a_note(gptoss_plans):
    """The same plan on H100 (TE runs no MXFP8 / windowed FP8 attention before sm100): BF16 time, and the op
    names why."""
    from primus_launch.projection.cost.roofline import layer_op_times

    on, off = (p.model_copy(update={"cluster": p.cluster.model_copy(update={"gpu": "h100-sxm"})})
               for p in gptoss_plans)
    a, b = layer_op_times(on), layer_op_times(off)
    c_on, c_off = _core(a["moe_window"]), _core(b["moe_window"])
    assert (c_on[1], c_on[2]) == (c_off[1], c_off[2])
    assert "fp8_attention not applied" in c_on[0] and "sm100" in c_on[0]


def test_megatron_reader_and_writer_round_trip(tmp_path):
    """The YAML key and the CLI spelling set ``training.fp8_attention`` (only with --fp8-format); it is no longer
    reported as not modelled; the writer puts it back and takes it away."""
    from primus_launch.adapters import load_recipe, render_recipe
    from primus_launch.adapters import megatron_flags as mf
    from primus_launch.plan.legality import legality_problems

    assert mf.lookup("--fp8-dot-product-attention").cls == mf.MODELLED
    assert mf.lookup("--fp8-multi-head-attention").cls == mf.NOT_MODELLED
    src = ROOT / "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml"
    base = src.read_text()
    on = tmp_path / "on.yaml"
    on.write_text(base + "\nfp8_dot_product_attention: true\n")
    p_on, p_base = load_recipe(on), load_recipe(src)
    assert p_on.training.fp8_attention and not p_base.training.fp8_attention
    assert not any("dot-product" in u.flag for u in p_on.source.unmodelled)
    # writer: off -> on and on -> off, each reading back as written
    flip = p_base.model_copy(update={"training": p_base.training.model_copy(update={"fp8_attention": True})})
    out = tmp_path / "w.yaml"
    out.write_text(render_recipe(flip, base))
    assert load_recipe(out).training.fp8_attention
    back = p_on.model_copy(update={"training": p_on.training.model_copy(update={"fp8_attention": False})})
    out.write_text(render_recipe(back, on.read_text()))
    assert not load_recipe(out).training.fp8_attention
    # a Megatron-LM command line has no argument for it: the writer refuses to add it (one line, the field named)
    from primus_launch.errors import UserError

    sh = ROOT / "recipes/megatron/deepseek_v3_671b.sh"
    p_sh = load_recipe(sh)
    fp8 = p_sh.model_copy(update={"training": p_sh.training.model_copy(
        update={"precision": "fp8", "fp8_recipe": "mxfp8", "fp8_attention": True})})
    with pytest.raises(UserError, match="training.fp8_attention"):
        render_recipe(fp8, sh.read_text())
    # bf16 recipe: the field is meaningless (Megatron puts fp8_dpa in the FP8 recipe) and refused in a plan
    bad = p_base.model_copy(update={"training": p_base.training.model_copy(
        update={"fp8_attention": True, "precision": "bf16", "fp8_recipe": None})})
    assert any(f == "training.fp8_attention" for f, _, _ in legality_problems(bad))


def test_memory_saves_quantized_qkv():
    """TE d0067d0 ``FusedAttnFunc``: q / k / v saved quantized with both usages (MXFP8: two copies of 1 + 1/32
    bytes; tensorwise on Blackwell: one byte) and O in FP8 only under delayed."""
    from primus_launch.projection.memory.activations import layer_activation_bytes
    from primus_launch.projection.memory.fp8 import fp8_attention_saved_bytes

    assert fp8_attention_saved_bytes("mxfp8", non_tn=True) == (2 * (1 + 1 / 32), None)
    assert fp8_attention_saved_bytes("tensorwise", non_tn=True) == (1.0, None)
    assert fp8_attention_saved_bytes("delayed", non_tn=False) == (2.0, 2.0)
    assert fp8_attention_saved_bytes("delayed", non_tn=True) == (1.0, 1.0)
    rows = {r["id"]: r for r in json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"]}
    m = Plan.model_validate(rows[GPTOSS_GB300]["plan"]).model
    kw = dict(seq=4096, mbs=4, tp=1, sp=False, moe=True, fp8="tensorwise", fp8_non_tn=True)
    d = layer_activation_bytes(m, fp8_dpa=False, **kw).full - layer_activation_bytes(m, fp8_dpa=True, **kw).full
    assert d == pytest.approx(4 * 4096 * (m.num_attention_heads + 2 * m.kv_heads) * m.kv_channels * (2 - 1))
    kw["fp8"] = "delayed"
    d = layer_activation_bytes(m, fp8_dpa=False, **kw).full - layer_activation_bytes(m, fp8_dpa=True, **kw).full
    qkv, o = 4 * 4096 * (m.num_attention_heads + 2 * m.kv_heads) * m.kv_channels, 4 * 4096 * m.num_attention_heads * m.kv_channels
    assert d == pytest.approx(qkv + o)


@pytest.mark.parametrize("gpu, runs_fp8", [("h100-sxm", True), ("mi355x", False), ("mi300x", False)])
def test_memory_fp8_attention_only_where_te_runs_it(gpu: str, runs_fp8: bool):
    """Delayed scaling: FP8 attention's quantized saves on NVIDIA parts; TE-ROCm disables its FusedAttention under
    fp8_dpa (attention.py get_attention_backend: "rocm fused attention backends does not support fp8 yet"), and the
    time side keeps BF16 there (fp8_attention_case), so the memory keeps the BF16 saves too."""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Training
    from primus_launch.projection.memory.mcore import mcore_opts

    m = ModelArch(num_layers=4, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_query_groups=8,
                  vocab_size=128256, seq_length=8192, swiglu=True)
    t = Training(global_batch_size=64, micro_batch_size=1, precision="fp8", fp8_attention=True)
    plan = Plan(model=m, parallel=Parallelism(), training=t, cluster=Cluster(gpu=gpu, num_nodes=1))
    assert mcore_opts(plan).fp8_dpa is runs_fp8
