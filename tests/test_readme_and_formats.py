"""One run's figures agree wherever they are shown: README.md's quotes, the text answer, ``--json`` and the
HTML report.

The figures README.md quotes from an answer are the ones the command prints (user11: the README's
memory band of the 70B wrapper, "36.4-39.1 GiB (-2/+5 %)" with "(0.978 .. 1.053)", and the DeepSeek-V3
FP8 MFU "18.8 %" had gone stale when the bands were regenerated).

Truth: the CLI's own answer (``main``, dry-run) and its ``--json`` for the recipe the README names; the
README's text is read, not copied here, so that a regenerated band or calibration that changes a quoted
figure fails this test until the README is updated with it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from primus_launch.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
W70 = "recipes/llama3.1_70b_h100_1024gpu.primus.toml"
DSV3 = "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml"
TT8 = "recipes/torchtitan/llama3.1_8b.toml"


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _answer(capsys, recipe: str, *extra: str) -> str:
    assert main(["--project", str(ROOT / recipe), "--dry-run", *extra]) == 0
    return capsys.readouterr().out


def _readme_quote(pattern: str) -> re.Match:
    m = re.search(pattern, _flat(README))
    assert m, f"README no longer has {pattern!r}"
    return m


@pytest.mark.parametrize("pattern,recipe", [
    (r'e\.g\. "(\S+ % \([\d.]+ \.\. [\d.]+ %\) of the FP8 dense peak \([\d,]+ TFLOP/s\))" for `' + re.escape(DSV3),
     DSV3),
    (r'e\.g\. "([\d.]+ s, expected [\d.]+ \.\. [\d.]+ s on \d+ judged rows like it)" \(`'
     + re.escape(TT8), TT8),
    (r'"(\d[\d.]* GiB peak) \.\.\., band', W70),
    (r'band ([\d.]+-[\d.]+ GiB \(\S+ %\))" is \(', W70),
])
def test_quoted_answer_text_is_what_the_command_prints(pattern, recipe, capsys):
    quote = _readme_quote(pattern).group(1)
    assert quote in _flat(_answer(capsys, recipe)), quote


def test_memory_band_formula_is_the_json_band(capsys):
    """README: the band is (peak - outside) x (1 + low .. 1 + high) + outside, in GiB to 2 / 3 decimals."""
    m = _readme_quote(r"is \(([\d.]+) - ([\d.]+)\) x \(([\d.]+) \.\. ([\d.]+)\) \+ ([\d.]+) GiB")
    peak, outside, lo, hi, outside2 = map(float, m.groups())
    mem = json.loads(_answer(capsys, W70, "--json"))["memory"]
    gib = 2 ** 30
    assert peak == round(mem["peak_bytes_per_gpu"] / gib, 2)
    assert outside == outside2 == round(mem["outside_allocator_bytes"] / gib, 2)
    assert (lo, hi) == (round(1 + mem["band"]["low"], 3), round(1 + mem["band"]["high"], 3))


def test_group_quoted_for_h100_moe_is_the_deepseek_band(capsys):
    """README: the H100 MoE group "hopper / MoE >= 64 experts / sequence < 32k" is the DeepSeek-V3 FP8 recipe's
    band group; "the Megatron H100 dense BF16 group of `recipes/megatron/llama3.1_8b.sh`: +4% .. +11%" is that
    recipe's band, all slower than projected, and the answer says so in the quoted words."""
    band = json.loads(_answer(capsys, DSV3, "--json"))["band"]
    assert band["group"] in _flat(README)
    m = _readme_quote(r"group of `(\S+)`: (\S+) \.\. (\S+)\) the point estimate lies above its range, and the answer "
                      r"says why: \"(they ran [^\"]+)\"")
    recipe, lo, hi, words = m.groups()
    band = json.loads(_answer(capsys, recipe, "--json"))["band"]
    assert (lo, hi) == (f"{100 * band['low']:+.0f}%", f"{100 * band['high']:+.0f}%")
    assert band["low"] > 0
    assert words in _flat(_answer(capsys, recipe))


@pytest.mark.parametrize("recipe", [W70, TT8])
def test_text_json_and_html_report_give_the_same_ranges(recipe, capsys, tmp_path):
    """user11: the answer's "tokens/s/GPU 708 (expected 640 .. 686)" was in the text and the HTML report only:
    ``--json`` had the band's fractions and left the inversion to the reader.  Its ``band`` now carries both
    ranges; the text, the JSON and the report of one run give the same figures, and the ranges are the band's
    definition (iteration time x (1 + low .. 1 + high); tokens/s the same band inverted)."""
    report = tmp_path / "r.html"
    text = _flat(_answer(capsys, recipe, "--report", str(report)))
    d = json.loads(_answer(capsys, recipe, "--json"))
    b, t, tps = d["band"], d["iteration_time_s"], d["tokens_per_sec_per_gpu"]
    assert b["iteration_time_s"] == pytest.approx([t * (1 + b["low"]), t * (1 + b["high"])])
    assert b["tokens_per_sec_per_gpu"] == pytest.approx([tps / (1 + b["high"]), tps / (1 + b["low"])])
    lo, hi = b["tokens_per_sec_per_gpu"]
    shown = f"{tps:,.0f} (expected {lo:,.0f} .. {hi:,.0f})"
    assert f"tokens/s/GPU {shown}" in text
    assert shown in report.read_text()
    lo_s, hi_s = b["iteration_time_s"]
    assert f"{t:.3f} s, expected {lo_s:.3f} .. {hi_s:.3f} s on {b['n']} judged rows like it ({b['group']})" in text


@pytest.mark.parametrize("recipe", [W70, DSV3])
def test_html_report_says_what_was_not_modelled(recipe, capsys, tmp_path):
    """user11: the projection's HTML report had the summary, the pictures and the projection's notes, but not the
    settings left unmodelled nor the reader's notes (the assumed vocabulary) that the text answer lists: a report
    passed on lost them.  Its "Not modelled" section holds each of ``--json``'s ``warnings`` (or says none), and
    its notes the reader's."""
    from html import escape

    from primus_launch.report.text import NO_WARNINGS

    report = tmp_path / "r.html"
    _answer(capsys, recipe, "--report", str(report))
    page = report.read_text()
    d = json.loads(_answer(capsys, recipe, "--json"))
    assert "<h2>Not modelled</h2>" in page
    for w in d["warnings"]:
        assert escape(f"{w['flag']}={w['value']}: {w['effect']}") in page
    assert (escape(NO_WARNINGS) in page) == (not d["warnings"])
    for n in d["plan"]["source"]["notes"]:
        assert escape(n) in page


def test_readme_percent_band_of_the_titan_example_is_its_json_band(capsys):
    lo, hi = _readme_quote(r"judged rows like it\" \(`" + re.escape(TT8) + r"`\): (\S+) \.\. (\S+) \(").groups()
    band = json.loads(_answer(capsys, TT8, "--json"))["band"]
    assert (lo, hi) == (f"{100 * band['low']:+.0f}%", f"{100 * band['high']:+.0f}%")


def test_report_memory_verdict_is_the_answers_for_a_tight_plan(tmp_path):
    """user11: the report's memory picture was titled "(fits)" for a plan the text answer calls TIGHT (it read
    ``memory.fits``, true for tight too).  The Megatron 8B script at TP 1 with Megatron-FSDP (the plan its tune
    picks) is tight on an H100; its report says so, as the answer does."""
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.api import project
    from primus_launch.report.html import write_projection_report
    from primus_launch.report.text import render_text

    plan = load_recipe(ROOT / "recipes/megatron/llama3.1_8b.sh")
    plan = plan.model_copy(update={
        "parallel": plan.parallel.model_copy(update={"tp": 1, "sequence_parallel": False,
                                                     "dp_sharding": "optimizer_grads"}),
        "training": plan.training.model_copy(update={"gradient_accumulation_fusion": False})})
    res = project(plan, dry_run=True, record_timeline=True)
    assert res.memory.verdict == "tight" and ": TIGHT, band" in render_text(res)
    page = write_projection_report(res, tmp_path / "r.html").read_text()
    assert "GiB (tight)" in page and "GiB (fits)" not in page


@pytest.mark.parametrize("recipe", [W70, DSV3, TT8])
def test_point_outside_its_expected_range_says_why(recipe, capsys, tmp_path):
    """user12: "1.447 s, expected 1.494 .. 1.601 s" printed the point estimate outside its own range without a
    word (the judged rows like it all ran slower than projected), and ``--explain`` had no note on the band although
    the answer's comment and README sent the reader there.  Where the band lies wholly on one side of zero the
    iteration row says so with the band's own fractions (``--json`` ``band.low`` / ``high``); where it holds zero it
    adds nothing; ``--explain`` and the report carry the band's definition and the model FLOPs behind TFLOP/s."""
    from html import escape

    d = json.loads(_answer(capsys, recipe, "--json"))
    b = d["band"]
    text = _flat(_answer(capsys, recipe))
    row = text.split("iteration time ")[1].split(" tokens/s/GPU")[0]
    assert (b["iteration_time_s"][0] > d["iteration_time_s"]) == (b["low"] > 0)
    if b["low"] > 0:
        assert row.endswith(f": they ran {100 * b['low']:.0f} .. {100 * b['high']:.0f} % slower than projected")
    else:
        assert "than projected" not in row
    explain = _flat(_answer(capsys, recipe, "--explain"))
    assert f"note: expected error of the iteration time: {100 * b['low']:+.0f}% .. {100 * b['high']:+.0f}%" in explain
    assert "(+ slower than projected, - faster)" in explain
    pflop = d["model_flops_per_iteration"] / 1e15
    # TFLOP/s/GPU is those FLOPs over the time and the GPUs: the note's figure gives the answer's back
    assert pflop / d["iteration_time_s"] / d["num_gpus"] * 1e3 == pytest.approx(d["model_tflops_per_gpu"])
    assert f"the model's FLOPs per iteration ({pflop:,.4g} PFLOP" in explain
    report = tmp_path / "r.html"
    _answer(capsys, recipe, "--report", str(report))
    page = report.read_text()
    assert escape("expected error of the iteration time:") in page and escape(row.split(": they")[-1]) in page


def test_tune_report_words_the_gain_counts_and_changes_as_the_text(capsys, tmp_path):
    """user12: the tune's HTML report said "projected gain +18.4 %" (of what?), "3 scored of 174315 legal
    (0.0 %)" and "training.recompute.modules=('layernorm',)" where the text answer says "+18.4 % tokens/s/GPU
    (iteration time -15.5 %)", counts with separators and "modules=layernorm".  One run's text and report agree."""
    from html import escape

    report = tmp_path / "t.html"
    assert main(["--tune", str(ROOT / W70), "--dry-run", "--out", str(tmp_path / "t.sh"), "--report", str(report),
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    page = report.read_text()
    gain = d["gain"]
    assert escape(f"{100 * gain:+.1f} % tokens/s/GPU (iteration time {100 * (1 / (1 + gain) - 1):+.1f} %)") in page
    assert f"{d['scored']:,} scored of {d['legal_candidates']:,} legal" in page
    assert "(&#x27;" not in page and "('" not in page  # no Python tuple reprs in the changes



def test_readme_amd_dense_group_is_the_answers(capsys):
    """README: an MI355X dense plan takes "the AMD rows, all of them MoE: "AMD, none of them dense"" -- the group the
    MI355X wrapper's answer prints (user12: it printed "(AMD)", read as dense rows like it)."""
    quoted = _readme_quote(r'all of them MoE: "([^"]+)"').group(1)
    band = json.loads(_answer(capsys, "recipes/llama3.1_8b_mi355x.primus.toml", "--json"))["band"]
    assert band["group"] == quoted and "kind" in band["relaxed"]
    assert f"judged rows like it ({quoted})" in _flat(_answer(capsys, "recipes/llama3.1_8b_mi355x.primus.toml"))
