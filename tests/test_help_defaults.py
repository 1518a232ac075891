"""``--help`` states the defaults the code uses (user11: ``--top`` and ``--measure-device`` gave none,
``--dry-run`` read "pure CPU simulation" though it simulates the target GPU, and ``--gpu`` / ``--nodes`` did
not say what happens when they are left out).

Truth: the parser's own defaults, the constants the tuner and the plan use (``DEFAULT_MAX_WORK``, the
``Cluster`` section's default GPU) and the result of leaving ``--gpu`` out on a recipe that names none.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from primus_launch.cli import main
from primus_launch.cli_flags import parser as _parser
from primus_launch.plan.sections import Cluster
from primus_launch.tuner.branch_bound import DEFAULT_MAX_WORK

ROOT = Path(__file__).resolve().parents[1]


def _helps() -> dict[str, tuple[argparse.Action, str]]:
    ap = _parser()
    return {a.option_strings[-1]: (a, " ".join((a.help or "").split())) for a in ap._actions if a.option_strings}


def test_every_valued_default_is_stated_in_the_help():
    """An option whose parser default is a value (not off / unset) names that value after "default"."""
    for flag, (a, text) in _helps().items():
        d = a.default
        if d is None or isinstance(d, bool) or d == [] or d is argparse.SUPPRESS:
            continue
        shown = f"{d:g}" if isinstance(d, float) else str(d)
        assert "default" in text and shown in text, (flag, d, text)


def test_stated_defaults_are_the_codes():
    helps = _helps()
    work = re.search(r"default ([\d,]+)", helps["--max-work"][1]).group(1)
    assert int(work.replace(",", "")) == DEFAULT_MAX_WORK
    assert f"else {Cluster.model_fields['gpu'].default}" in helps["--gpu"][1]
    for flag in ("--nodes", "--gpus-per-node", "--measure-device", "--top"):
        assert "default" in helps[flag][1], flag
    assert "pure CPU" not in helps["--dry-run"][1] and "target GPU" in helps["--dry-run"][1]


def test_gpu_left_out_is_the_stated_default_and_said(tmp_path, capsys):
    """A Megatron script that names no GPU is projected on the default the help states, with a note."""
    src = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
    rec = tmp_path / "nogpu.sh"
    rec.write_text("\n".join(ln for ln in src.splitlines() if "primus-launch:" not in ln) + "\n")
    assert main(["--project", str(rec), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    gpu = Cluster.model_fields["gpu"].default
    assert "= 8 GPUs" in out and f" {gpu} " in out and f"gpu={gpu}: the default" in out


def test_readme_usage_names_every_option():
    """README's "What it does" usage block lists every option the parser takes (user11: ``--gpu-file``,
    ``--primus-root``, ``--top``, ``--memory-certain``, ``--log`` and ``--out`` were missing from it)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## What it does", 1)[1].split("```", 2)[1]
    named = set(re.findall(r"--[\w-]+", block))
    opts = {o for a in _parser()._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
    assert opts <= named, sorted(opts - named)


def test_budget_and_llm_say_they_run_the_planner(tmp_path, capsys):
    """user14: ``--budget N`` read "at most this many scored candidates" and ``--llm`` "also ask this model", but
    either one replaces the certified branch and bound with the planner (README: "--planner / --budget / --llm run
    the planner"); truth: a tune with --budget reports the planner's search and no certificate."""
    import json

    helps = _helps()
    for flag in ("--budget", "--llm"):
        assert "planner" in helps[flag][1] and "no certificate" in helps[flag][1], helps[flag][1]
    src = ROOT / "recipes/torchtitan/llama3.1_8b.toml"
    rec = tmp_path / "t.toml"
    rec.write_text(src.read_text())
    assert main(["--tune", str(rec), "--dry-run", "--budget", "3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["search"] == "planner" and not (d["certificate"] or {}).get("certified")


def test_version_is_the_distributions(capsys):
    """``--version`` prints pyproject.toml's version (user14: a user expects it) and exits 0, before any mode
    check; the installed distribution is the truth, read independently through tomllib."""
    import tomllib

    import pytest

    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"primus-launch {want}"
