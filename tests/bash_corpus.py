"""The bash reader's recipe corpus kept in the repository, and the reading compared against it.

``tests/data/bash_corpus.json`` holds every launch script the adapter tests give the Megatron bash
reader (their texts, script arguments and sourced fragments, one entry per distinct script) and
the bundled recipes (by path), each with the reading the hand-written reader gave before the
reader moved to tree-sitter-bash: the commands the script runs with the provenance of every
character, the variables it leaves, the warnings, the training command the adapter picks and its
arguments, or the error line.  ``tests/test_adapter_megatron_bash.py`` checks the current reader
against it.

    PYTHONPATH=OLD_CHECKOUT python tests/bash_corpus.py --write   # rewrite the expectations

(the expectations were written with ``OLD_CHECKOUT`` = commit 29164c4 of ``integ``, whose
``primus_launch/adapters/megatron_bash.py`` is the hand-written lexer/interpreter; the scripts are
those the Megatron adapter, command-recipe, CLI and tuned-recipe tests gave the reader at commits
ae58d46 and 29164c4, recorded by wrapping ``ShellState`` while those tests ran).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "bash_corpus.json"


def entries() -> list[dict[str, Any]]:
    return json.loads(CORPUS.read_text())


def materialize(entry: dict[str, Any], where: Path) -> Path:
    """Write an entry's script (and the fragments it sources) under ``where``; its path."""
    if "recipe" in entry:
        return ROOT / entry["recipe"]
    for rel, text in entry.get("fragments", {}).items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text)
    path = where / entry["name"]
    path.write_text(entry["text"])
    return path


def _runs(values: list[Any], step: bool) -> list[list[Any]]:
    """Run-length form: [first, count] runs of equal values (``step``: of script offsets counting up
    by one, or of one negative code)."""
    out: list[list[Any]] = []
    for v in values:
        if out:
            first, n = out[-1]
            counting = step and first >= 0
            if (counting and v == first + n) or (not counting and v == first):
                out[-1][1] += 1
                continue
        out.append([v, 1])
    return out


def _token(tok: Any, refs: list[Any]) -> list[Any]:
    spans = [[[refs[r].start, refs[r].end, refs[r].nchars] for r in p.refs] for p in tok.pcs]
    return [tok.text, _runs([p.lit for p in tok.pcs], True), _runs(spans, False)]


def reading(path: Path, argv: list[str], shell_only: bool, where: Path) -> dict[str, Any]:
    """What the reader makes of a script: ``commands`` (tokens with provenance), ``scalars``,
    ``arrays``, ``warnings``, or ``error``; and (unless ``shell_only``) the adapter's ``recipe``."""
    from primus_launch.adapters import megatron_script as ms
    from primus_launch.adapters.megatron_bash import ShellState
    from primus_launch.errors import UserError, one_line
    from primus_launch.plan import PlanError

    def norm(s: str) -> str:
        return s.replace(str(where), "<dir>").replace(str(ROOT), "<repo>")

    text = path.read_text()
    name = str(path) if not shell_only else "<script>"
    out: dict[str, Any] = {}
    try:
        st = ShellState(text, name, tuple(argv))
        out["commands"] = [[_token(t, st.refs) for t in c.args] for c in st.commands]
        # the environment each command runs with (exports, VAR=value prefixes), with provenance
        out["env"] = [{k: [_runs([p.lit for p in v], True), "".join(p.ch for p in v)] for k, v in sorted(c.env.items())}
                      for c in st.commands]
        out["scalars"] = {k: "".join(p.ch for p in v) for k, v in sorted(st.scalars.items())}
        out["arrays"] = {k: ["".join(p.ch for p in x) for x in v] for k, v in sorted(st.arrays.items())}
        out["warnings"] = [norm(w) for w in st.warnings]
    except UserError as e:
        out["error"] = norm(one_line(e))
    if shell_only:
        return out
    try:
        rec = ms.from_script(text, name, tuple(argv))
        out["recipe"] = {"program": rec.program, "launcher": [o.flag for o in rec.launcher], "env": rec.env_values(),
                         "args": {k: repr(v) for k, v in sorted(rec.args.items())},
                         "notes": [norm(n) for n in rec.notes]}
    except (UserError, PlanError) as e:
        out["recipe"] = {"error": norm(one_line(e))}
    return out


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(__doc__)
        return 2
    data = entries()
    for entry in data:
        with tempfile.TemporaryDirectory() as d:
            path = materialize(entry, Path(d))
            entry["expect"] = reading(path, entry.get("argv", []), entry.get("shell_only", False), Path(d))
    lines = ",\n".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in data)
    CORPUS.write_text("[\n" + lines + "\n]\n")  # one script a line
    print(f"wrote {CORPUS} ({len(data)} scripts)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
