"""Every dry-run projection states its expected error: the spread of the judged validation rows like it
(issue 28; ``projection/band.py``, ``projection/data/error_bands.json`` written by ``scripts/validate.py
--write-bands``)."""

import json
import statistics
import sys
from pathlib import Path

import pytest

from primus_launch.plan import Plan
from primus_launch.projection import band as bm
from primus_launch.projection.result import ErrorBand

ROOT = Path(__file__).resolve().parents[1]


def _plan(experts=None, precision="bf16", cp=1, seq=4096, gpu="h100-sxm", framework=None) -> Plan:
    model = dict(num_layers=4, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8, vocab_size=32000,
                 seq_length=seq)
    if experts:
        model.update(num_experts=experts, moe_router_topk=2, moe_ffn_hidden_size=512)
    d = {"model": model, "parallel": {"cp": cp, "ep": 1}, "training": {"precision": precision, "global_batch_size": 8,
                                                                     "micro_batch_size": 1},
         "cluster": {"gpu": gpu, "num_nodes": 1, "gpus_per_node": 8}}
    if framework:
        d["source"] = {"framework": framework, "path": "x"}
    return Plan.model_validate(d)


def test_band_dims_follow_the_issue_28_groups():
    assert bm.band_dims(_plan())["kind"] == "dense"
    assert bm.band_dims(_plan(experts=16))["kind"] == "moe_coarse"
    assert bm.band_dims(_plan(experts=64))["kind"] == "moe_fine"          # >= 64 experts: fine-grained
    assert bm.band_dims(_plan(precision="fp8"))["precision"] == "fp8"
    assert bm.band_dims(_plan(cp=2))["long_seq"] == "long"
    assert bm.band_dims(_plan(seq=32768))["long_seq"] == "long"
    assert bm.band_dims(_plan(seq=16384))["long_seq"] == "short"
    d = bm.band_dims(_plan(gpu="mi355x"))
    assert (d["family"], d["vendor"]) == ("cdna4", "amd")


def test_quantile_is_linear_between_order_statistics():
    v = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert bm.quantile(v, 0.1) == pytest.approx(0.1)
    assert bm.quantile(v, 0.5) == pytest.approx(statistics.median(v))
    assert bm.quantile([3.0, 1.0], 0.25) == pytest.approx(1.5)


def _rows(dims: dict, errs: list[float]) -> list[dict]:
    return [{"dims": dict(dims), "err": e} for e in errs]


def test_band_uses_the_exact_group_when_it_has_enough_rows_and_relaxes_in_order():
    d = bm.band_dims(_plan(experts=128, precision="fp8"))
    exact = _rows(d, [0.01 * i for i in range(bm.MIN_ROWS)])
    other_fw = _rows(dict(d, framework="torchtitan"), [0.5] * 20)
    b = bm.band_from_rows(d, exact + other_fw)
    assert b.n == bm.MIN_ROWS and b.relaxed == [] and b.high < 0.1
    # too few exact rows: the framework is dropped first, the kind is kept
    b = bm.band_from_rows(d, exact[:3] + other_fw + _rows(dict(d, kind="dense"), [-0.9] * 50))
    assert b.relaxed == ["framework"] and b.n == 23 and b.low >= 0.0
    assert "MoE >= 64 experts" in b.group and "megatron" not in b.group
    # coarse and fine-grained MoE pool only after framework, precision, family and sequence are dropped
    coarse = _rows(dict(d, kind="moe_coarse"), [0.2] * 10)
    b = bm.band_from_rows(d, exact[:3] + coarse)
    assert b.relaxed == ["framework", "precision", "family", "long_seq", "moe"] and b.n == 13


def test_overlapping_bands():
    b = ErrorBand(low=-0.05, high=0.10, median=0.02, n=10, group="g")
    assert bm.bands_overlap(b, 1.00, b, 1.04)       # 0.95-1.10 and 0.988-1.144 overlap
    assert not bm.bands_overlap(b, 1.00, b, 1.20)   # 0.95-1.10 and 1.14-1.32 do not
    assert bm.bands_overlap(None, 1.0, b, 1.04)     # the point 1.0 lies in 0.988-1.144
    assert not bm.bands_overlap(None, 1.0, b, 1.10)  # ... not in 1.045-1.21
    # a band wholly above zero (the model optimistic on the group) does not hold its own point; two
    # equal projections still cannot be told apart
    up = ErrorBand(low=0.05, high=0.18, median=0.1, n=10, group="g")
    assert bm.bands_overlap(up, 7.034, up, 7.053)
    assert bm.ranges_overlap(1.0, (1.05, 1.18), 1.0, (1.05, 1.18)) and not bm.ranges_overlap(1.0, None, 1.2, None)


@pytest.fixture(scope="module")
def fresh_validation():
    sys.path.insert(0, str(ROOT / "scripts"))
    from validate import evaluate, judged, load_rows

    return judged(evaluate(load_rows()))


def test_bands_file_is_the_current_validation(fresh_validation):
    """The committed bands are the judged rows' errors as the model projects them now: a change to the
    cost model must regenerate them (``python scripts/validate.py --write-bands``)."""
    stored = {r["id"]: r for r in json.loads(bm.BANDS.read_text())["rows"]}
    fresh = {r["id"]: r for r in fresh_validation}
    assert set(stored) == set(fresh), "rerun python scripts/validate.py --write-bands"
    stale = [i for i in fresh if abs(stored[i]["err"] - fresh[i]["err"]) > 0.015 or stored[i]["dims"] != fresh[i]["dims"]]
    assert not stale, f"error bands out of date for {stale[:5]}: rerun python scripts/validate.py --write-bands"


def test_dry_run_result_states_its_band(fresh_validation):
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.report.text import summary_rows

    plan = load_recipe(str(ROOT / "recipes" / "megatron" / "qwen3_235b_a22b_h100_256gpu.yaml"))
    res = project_dry_run(plan)
    b = res.band
    assert b is not None and b.n >= bm.MIN_ROWS and b.low <= b.median <= b.high
    # the band is the spread of the judged rows it names: recomputed from the validation directly
    d = bm.band_dims(plan)
    sel = [r["err"] for r in fresh_validation if bm._matches(d, r["dims"], tuple(b.relaxed))]
    assert len(sel) == b.n
    assert b.low == pytest.approx(bm.quantile(sel, 0.1), abs=0.02)
    assert b.high == pytest.approx(bm.quantile(sel, 0.9), abs=0.02)
    assert res.to_json_dict()["band"]["n"] == b.n
    rows = dict(summary_rows(res))
    assert f"on {b.n} judged rows like it" in rows["iteration time"]


def test_a_group_without_the_plans_kind_says_so():
    """user12: an MI300X dense plan printed "expected ... on 21 judged rows like it (AMD)": the AMD rows are all MoE
    runs (the kind dropped to reach enough rows).  Where no row of the group is of the plan's kind, the group says
    so; where some are, it says nothing more."""
    d = bm.band_dims(_plan(gpu="mi355x"))
    assert d["kind"] == "dense"
    moe = _rows(dict(d, kind="moe_fine", framework="torchtitan", precision="fp8"), [0.1] * 12)
    b = bm.band_from_rows(d, moe)
    assert "kind" in b.relaxed and b.group.endswith(", none of them dense")
    b = bm.band_from_rows(d, moe + _rows(dict(d, framework="torchtitan", precision="fp8"), [0.0]))
    assert "kind" in b.relaxed and "none of them" not in b.group


@pytest.mark.parametrize("prec", ["fp16", "fp32"])
def test_a_16_or_32_bit_plan_is_labelled_by_its_dtype_not_bf16(prec):
    """user16: an FP16 recipe's band read "... / BF16 / ..."; the grouping is unchanged (fp16 / fp32 judged with
    the bf16 rows: band_dims), only the label says what the group is."""
    ref, b = bm.band_for(_plan()), bm.band_for(_plan(precision=prec))
    if ref is None:
        pytest.skip("no bands file")
    assert bm.band_dims(_plan(precision=prec)) == bm.band_dims(_plan())
    assert (b.low, b.high, b.median, b.n, b.relaxed) == (ref.low, ref.high, ref.median, ref.n, ref.relaxed)
    assert "precision" not in ref.relaxed   # the exact group (H100 dense megatron): the label carries the dtype
    parts = b.group.split(" / ")
    assert "BF16" in ref.group.split(" / ") and "BF16" not in parts
    assert f"{prec.upper()} (pooled with BF16 rows)" in parts


def test_band_of_a_gpu_file_spec_says_no_row_ran_on_it(tmp_path, monkeypatch):
    """user18: a GPU added with --gpu-file (an H20: the hopper rows) or a built-in GPU it overrides took the rows of
    the built-in specs with no word; the band's group now says none of its rows ran on the file's spec, while a
    built-in GPU's group is as before and the band's figures (the rows') are the same."""
    from primus_launch.projection.hardware import gpus

    monkeypatch.setattr(gpus, "_DB", dict(gpus._DB))
    monkeypatch.setattr(gpus, "_FROM_FILE", set())
    before = bm.band_for(_plan(gpu="h100-sxm"))
    f = tmp_path / "g.toml"
    f.write_text("[gpu.test-h20]\nvendor = 'nvidia'\narch = 'hopper'\npeak_flops_bf16 = 148e12\nhbm_bytes = 96e9\n"
                 "hbm_bw = 4.0e12\nintra_node_bw = 450e9\nintra_node_topology = 'switch'\ninter_node_bw = 50e9\n"
                 "[gpu.h100-sxm]\nhbm_bw = 3.0e12\n")
    assert sorted(gpus.load_gpu_file(f)) == ["h100-sxm", "test-h20"]
    added, overridden = bm.band_for(_plan(gpu="test-h20")), bm.band_for(_plan(gpu="h100-sxm"))
    assert added.group == before.group + ", none of them on test-h20's --gpu-file spec"
    assert overridden.group == before.group + ", none of them on h100-sxm's --gpu-file spec"
    assert (added.low, added.high, added.n) == (before.low, before.high, before.n)
    assert bm.band_for(_plan(gpu="h200")).group == before.group  # a built-in spec the file left alone
