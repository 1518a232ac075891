"""The planner's answer (issue 30, item 4): ``--train-tokens N [--gpu-hour-price USD]`` adds the whole
run's iterations, days, GPU-hours and cost to the projection and to the tune's original-vs-best.

Truth: closed-form arithmetic by hand on a bundled recipe (Llama 3.1 70B, Megatron: GBS 128 x
sequence 8192 = 2**20 tokens per iteration, so 15T tokens are ceil(15e12 / 2**20) = 14,305,115
iterations), the projection's own throughput (tokens / (tokens/s/GPU x GPUs) is the same wall time),
and the CLI's refusals.  Nothing here depends on the machine's speed.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from primus_launch.adapters import load_recipe
from primus_launch.cli import main
from primus_launch.inputs import token_count
from primus_launch.projection.api import project
from primus_launch.projection.training_run import training_run
from primus_launch.report.text import MAX_LINES, WIDTH

ROOT = Path(__file__).resolve().parents[1]
LLAMA70 = ROOT / "recipes/megatron/llama3.1_70b.sh"
TINY = ROOT / "recipes/megatron/tiny_gpt_cpu.sh"


@pytest.fixture(scope="module")
def llama70():
    return project(load_recipe(str(LLAMA70), {}), dry_run=True)


def test_closed_form_on_a_bundled_recipe(llama70):
    r = llama70
    assert (r.plan.training.global_batch_size, r.plan.model.seq_length, r.num_gpus) == (128, 8192, 64)  # the recipe
    run = training_run(r, 15 * 10**12, gpu_hour_price=2.5)
    assert run.tokens_per_iteration == 2**20
    assert run.iterations == 14_305_115            # 15e12 / 1,048,576 = 14,305,114.7 -> rounded up
    t = r.iteration_time_s
    assert run.days == pytest.approx(14_305_115 * t / 86_400, rel=1e-12)
    assert run.gpu_hours == pytest.approx(14_305_115 * t / 3_600 * 64, rel=1e-12)
    assert run.cost == pytest.approx(run.gpu_hours * 2.5, rel=1e-12)
    # the same wall time from the projection's throughput: tokens trained / (tokens/s/GPU x GPUs)
    trained = run.iterations * run.tokens_per_iteration
    assert run.wall_seconds == pytest.approx(trained / (r.tokens_per_sec_per_gpu * r.num_gpus), rel=1e-9)
    # the time band (dry-run): (1 + lo) .. (1 + hi) of every figure; a longer iteration is more days
    assert r.band is not None and run.band is not None
    lo, hi = r.band.low, r.band.high
    assert run.band.days == pytest.approx((run.days * (1 + lo), run.days * (1 + hi)), rel=1e-12)
    assert run.band.gpu_hours == pytest.approx((run.gpu_hours * (1 + lo), run.gpu_hours * (1 + hi)), rel=1e-12)
    assert run.band.cost == pytest.approx((run.cost * (1 + lo), run.cost * (1 + hi)), rel=1e-12)
    # the band is the group's spread of measured / projected, which need not hold 0 (a group projected fast
    # on nine rows in ten has lo > 0): the point lies inside it exactly when lo < 0 < hi
    assert run.band.days[0] < run.band.days[1]
    assert (run.band.days[0] < run.days < run.band.days[1]) == (lo < 0 < hi)


def test_iterations_round_up_only_past_a_whole_batch(llama70):
    per = 2**20
    assert training_run(llama70, 10 * per).iterations == 10
    assert training_run(llama70, 10 * per + 1).iterations == 11
    assert training_run(llama70, 1).iterations == 1
    no_price = training_run(llama70, 10 * per)
    assert no_price.cost is None and no_price.band.cost is None
    with pytest.raises(ValueError, match="tokens"):
        training_run(llama70, 0)
    with pytest.raises(ValueError, match="gpu_hour_price"):
        training_run(llama70, per, gpu_hour_price=float("nan"))


@pytest.mark.parametrize("text, tokens", [("15T", 15 * 10**12), ("1.5T", 15 * 10**11), ("1.5e12", 15 * 10**11),
                                          ("300B", 3 * 10**11), ("300b", 3 * 10**11), ("20M", 2 * 10**7),
                                          ("8k", 8000), ("15000000000000", 15 * 10**12), ("15_000", 15000)])
def test_token_suffixes(text, tokens):
    assert token_count()(text) == tokens


@pytest.mark.parametrize("text", ["0", "-1T", "1.5", "0.0001K", "nan", "inf", "1e19", "2000000T", "15X", "T", "",
                                  "1e999999999999"])
def test_token_count_refusals(text):
    with pytest.raises(argparse.ArgumentTypeError, match="whole number of tokens"):
        token_count()(text)


def _one_error(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as e:
        rc = main(list(args))
        raise SystemExit(rc)
    assert e.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("primus-launch: error: "), err
    return err[0]


@pytest.mark.parametrize("args, words", [
    (["--train-tokens", "15X"], ["--train-tokens", "'15X'", "K, M, B or T"]),
    (["--train-tokens", "0"], ["--train-tokens", "'0'", "from 1"]),
    (["--train-tokens", "1T", "--gpu-hour-price", "-2"], ["--gpu-hour-price", "'-2'", "> 0"]),
    (["--train-tokens", "1T", "--gpu-hour-price", "inf"], ["--gpu-hour-price", "'inf'", "> 0"]),
    (["--gpu-hour-price", "2"], ["--gpu-hour-price=2", "needs --train-tokens"]),
])
def test_cli_refusals_are_one_line(capsys, args, words):
    line = _one_error(capsys, "--project", str(LLAMA70), "--dry-run", *args)
    for w in words:
        assert w in line, line


def test_train_tokens_needs_project_or_tune(capsys):
    line = _one_error(capsys, "--train-tokens", "1T", "--", "true")
    assert "--train-tokens" in line and "--project or --tune" in line


def _num(s: str) -> float:
    m = re.fullmatch(r"\$?([\d,.]+)([MBT]?)", s)
    assert m, s
    return float(m.group(1).replace(",", "")) * {"": 1, "M": 1e6, "B": 1e9, "T": 1e12}[m.group(2)]


def test_json_and_text_and_report_agree(capsys, tmp_path):
    args = ["--project", str(LLAMA70), "--dry-run", "--train-tokens", "15T", "--gpu-hour-price", "2.5"]
    assert main(args + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    tr = d["training_run"]
    assert tr["tokens"] == 15 * 10**12 and tr["iterations"] == 14_305_115 and tr["num_gpus"] == d["num_gpus"]
    assert tr["days"] == pytest.approx(tr["iterations"] * d["iteration_time_s"] / 86_400, rel=1e-12)
    assert tr["cost"] == pytest.approx(tr["gpu_hours"] * 2.5, rel=1e-12)
    assert tr["band"]["low"] == d["band"]["low"] and tr["band"]["high"] == d["band"]["high"]
    assert "checkpointing" in tr["excludes"] and "failures" in tr["excludes"]

    report = tmp_path / "r.html"
    assert main(args + ["--report", str(report)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= MAX_LINES and all(len(ln) <= WIDTH for ln in lines)
    text = " ".join(" ".join(lines).split())
    m = re.search(r"15T tokens 14,305,115 iterations: ([\d,.]+) days \(expected ([\d,.]+) \.\. ([\d,.]+)\)", text)
    assert m, text
    assert [float(x.replace(",", "")) for x in m.groups()] == pytest.approx(
        [tr["days"], *tr["band"]["days"]], abs=0.051)
    m = re.search(r"GPU time (\S+) GPU-hours \((\S+) \.\. (\S+)\), (\S+) at \$2.5/GPU-h \((\S+) \.\. (\S+)\)", text)
    assert m, text
    want = [tr["gpu_hours"], *tr["band"]["gpu_hours"], tr["cost"], *tr["band"]["cost"]]
    assert [_num(x) for x in m.groups()] == pytest.approx(want, rel=0.006)  # three significant digits
    html = report.read_text()
    assert "15T tokens" in html and "14,305,115 iterations" in html and "GPU-hours" in html


def test_tune_original_and_best_runs(capsys, tmp_path):
    out = tmp_path / "t.sh"
    args = ["--tune", str(TINY), "--dry-run", "--out", str(out), "--train-tokens", "2B", "--gpu-hour-price", "3"]
    assert main(args + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    log = json.loads(out.with_name(out.name + ".trials.json").read_text())
    assert log["training_run"] == d["training_run"]
    runs = d["training_run"]
    for key, res in (("original", d["baseline"]), ("best", d["best"])):
        tr = runs[key]
        per = res["plan"]["training"]["global_batch_size"] * res["plan"]["model"]["seq_length"]
        assert tr["iterations"] == -(-2 * 10**9 // per)
        assert tr["iteration_time_s"] == res["iteration_time_s"]
        assert tr["days"] == pytest.approx(tr["iterations"] * res["iteration_time_s"] / 86_400, rel=1e-12)
        assert tr["gpu_hours"] == pytest.approx(tr["days"] * 24 * res["num_gpus"], rel=1e-12)
        assert tr["cost"] == pytest.approx(tr["gpu_hours"] * 3, rel=1e-12)
    # the best plan's run is as much shorter as its iteration: days ratio = iteration time ratio
    o, b = runs["original"], runs["best"]
    assert b["days"] / o["days"] == pytest.approx(
        (b["iterations"] * d["best"]["iteration_time_s"]) / (o["iterations"] * d["baseline"]["iteration_time_s"]))
    assert b["days"] <= o["days"] * (1 + 1e-12)

    out2 = tmp_path / "u.sh"
    assert main(["--tune", str(TINY), "--dry-run", "--out", str(out2), "--train-tokens", "2B", "--gpu-hour-price",
                 "3", "--report", str(tmp_path / "t.html")]) == 0
    text = capsys.readouterr().out
    said = " ".join(text.split())  # the text answer wraps at 80 columns
    orig = said[said.index("original: ", said.index("run of 2B tokens")):said.index(" best: ", said.index("run of 2B"))]
    best = said[said.index(" best: ", said.index("run of 2B tokens")):]
    assert f"{o['iterations']:,} iterations" in orig and f"{b['iterations']:,} iterations" in best
    assert "at $3/GPU-h" in orig and "at $3/GPU-h" in best.split(" search")[0]
    assert "run of 2B tokens" in text
    html = (tmp_path / "t.html").read_text()
    assert "baseline (user&#x27;s recipe): 2B tokens" in html and "best: 2B tokens" in html


def test_short_runs_are_worded_in_their_own_unit(capsys):
    """user12: ``--train-tokens 1000`` on the TorchTitan 8B job (65,536 tokens an iteration) printed "1 iterations:
    0.0 hours (0.0 .. 0.0)".  One iteration of the projected time is said in seconds, singular."""
    from primus_launch.projection.training_run import duration_text

    assert duration_text(2.5) == "2.5 days" and duration_text(0.25) == "6.0 hours"
    assert duration_text(30 / 1440) == "30.0 minutes" and duration_text(1.5 / 86400) == "1.5 seconds"
    assert main(["--project", str(ROOT / "recipes/torchtitan/llama3.1_8b.toml"), "--dry-run", "--json",
                 "--train-tokens", "1000"]) == 0
    t = json.loads(capsys.readouterr().out)["iteration_time_s"]
    assert main(["--project", str(ROOT / "recipes/torchtitan/llama3.1_8b.toml"), "--dry-run",
                 "--train-tokens", "1000"]) == 0
    assert f"1K tokens 1 iteration: {t:.1f} seconds (" in " ".join(capsys.readouterr().out.split())
