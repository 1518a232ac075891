"""The tune's answer shows the lines the tuned recipe changed (user11: ``changes: parallel.tp=1,
parallel.dp_sharding=optimizer_grads, ...`` while ``diff`` of the two scripts also showed
``CUDA_DEVICE_MAX_CONNECTIONS=8`` and ``--ckpt-format fsdp_dtensor``, the settings Megatron-FSDP needs to start,
which the answer never named).

Truth: GNU ``diff`` of the original and the written file (its ``<`` / ``>`` lines), and the written recipe read
back by the tool to the tuned plan's projection.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from primus_launch.cli import main
from primus_launch.report.recipe_diff import MAX_SHOWN, change_counts, changed_lines, diff_lines

ROOT = Path(__file__).resolve().parents[1]


def _gnu_diff(a: Path, b: Path) -> tuple[list[str], list[str]]:
    out = subprocess.run(["diff", str(a), str(b)], capture_output=True, text=True).stdout.splitlines()
    return [ln[2:] for ln in out if ln.startswith("< ")], [ln[2:] for ln in out if ln.startswith("> ")]


@pytest.mark.skipif(shutil.which("diff") is None, reason="needs diff")
def test_tune_answer_lists_the_lines_diff_finds(tmp_path, capsys, monkeypatch):
    src = tmp_path / "llama3.1_8b.sh"
    shutil.copy(ROOT / "recipes/megatron/llama3.1_8b.sh", src)
    monkeypatch.chdir(tmp_path)
    assert main(["--tune", str(src), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    tuned = tmp_path / "llama3.1_8b.tuned.sh"
    old, new = _gnu_diff(src, tuned)
    i = next(k for k, ln in enumerate(out) if ln.startswith("lines that differ from "))
    said = dict((w.split()[1], int(w.split()[0])) for w in out[i].split(": ", 1)[1].split(", "))
    changed = said.get("changed", 0)
    assert changed + said.get("removed", 0) == len(old) and changed + said.get("added", 0) == len(new)
    shown = out[i + 1:i + 1 + len(old) + len(new)]
    assert sorted(ln[4:] for ln in shown if ln.startswith("  - ")) == sorted(s.strip() for s in old)
    assert sorted(ln[4:] for ln in shown if ln.startswith("  + ")) == sorted(s.strip() for s in new)
    # more lines than the plan's fields: the written recipe carries what Megatron-FSDP needs to start
    changes = next(ln for ln in out if ln.startswith("changes:"))
    if "dp_sharding=optimizer_grads" in changes or "dp_sharding=full" in changes:
        assert any("fsdp_dtensor" in ln for ln in shown)
    # the written recipe is read back to the tuned plan: the same projection as the tune's best
    best = next(ln for ln in out if ln.startswith("best:")).split()[1]
    assert main(["--project", str(tuned), "--dry-run", "--json"]) == 0
    assert f"{json.loads(capsys.readouterr().out)['iteration_time_s']:.3f}" == best


def test_long_diffs_are_counted_and_name_the_command():
    a = "\n".join(f"line {k}" for k in range(40))
    b = "\n".join(f"line {k}" + ("!" if k % 2 else "") for k in range(40))
    ch = changed_lines(a, b)
    assert len(ch) == 40 and {s for s, _ in ch} == {"-", "+"}
    lines = diff_lines(a, b, "x.sh", "x.tuned.sh")
    assert len(lines) == 1 + MAX_SHOWN + 1 and lines[-1] == f"  ... {40 - MAX_SHOWN} more: diff x.sh x.tuned.sh"
    assert diff_lines(a, a, "x.sh", "x.tuned.sh")[0].startswith("the tuned recipe is the same text")


def test_counts_name_changed_added_and_removed():
    assert change_counts("a\nb\nc", "a\nB\nc\nd") == {"changed": 1, "added": 1, "removed": 0}
    assert change_counts("a\nb\nc", "a\nc") == {"changed": 0, "added": 0, "removed": 1}
    assert diff_lines("a\nb", "a\nb\nx", "o", "t")[0] == "lines that differ from o: 1 added"


@pytest.mark.skipif(shutil.which("diff") is None, reason="needs diff")
def test_a_long_changed_line_is_shown_whole_within_80_columns(tmp_path, capsys):
    """user14: the TorchTitan launch script's tuned line was cut at 76 columns, "... --training.local_batch_size 1
    --co...", hiding the ``activation-checkpoint:none`` the tune added at its end; a long line is wrapped (at most
    WRAPPED_LINES lines).  Truth: GNU diff's lines, every word of each found in the answer's block."""
    from primus_launch.report.recipe_diff import WRAPPED_LINES

    src = tmp_path / "launch.sh"
    shutil.copy(ROOT / "recipes/torchtitan/llama3_8b_launch.sh", src)
    assert main(["--tune", str(src), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    old, new = _gnu_diff(src, tmp_path / "launch.tuned.sh")
    assert any(len(s.strip()) > 76 for s in old + new)   # the case: a line longer than the answer's room
    i = next(k for k, ln in enumerate(out) if ln.startswith("lines that differ from "))
    block = out[i + 1:next(k for k in range(i + 1, len(out)) if not out[k].startswith("    ")
                          and not out[k].startswith("  - ") and not out[k].startswith("  + "))]
    assert all(len(ln) <= 80 for ln in block)
    for sign, lines in (("-", old), ("+", new)):
        starts = [k for k, ln in enumerate(block) if ln.startswith(f"  {sign} ")]
        assert len(starts) == len(lines)
        for k, line in zip(starts, lines):
            shown = [block[k]] + list(itertools.takewhile(lambda ln: ln.startswith("    "),
                                                          block[k + 1:k + WRAPPED_LINES]))
            assert " ".join(ln[4:].strip() for ln in shown).split() == line.split()
