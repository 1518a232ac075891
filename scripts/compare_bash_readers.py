"""Compare two versions of the Megatron bash reader over every bash script at hand.

    git archive OLD_COMMIT primus_launch | tar -x -C /tmp/old_reader
    PYTHONPATH=. python scripts/compare_bash_readers.py --old /tmp/old_reader [--work /tmp/bashcmp] [-v]

The corpus: the bundled recipes (``recipes/**/*.sh``), the launch scripts of the adapter tests
(``tests/data/bash_corpus.json``), ``/work/shared/validation/recipes`` and
``/work/shared/upstream-recipes`` (``*.sh``), and every ``*.sh`` of the Megatron-LM (main and
``dev`` branches), Primus and Megatron-Bridge trees mirrored under ``/work/.mirror`` (read from the
bare git directories).  Each reader (the old one from ``--old``, the new one from this checkout) runs
in its own process over every script and records: the commands the script runs (arguments with the
provenance of every character, environment), the variables it leaves, the warnings, or the error
line; the training command the Megatron adapter picks (program, arguments, launcher options,
notes); and ``load_megatron``'s plan or error.  An exception other than the project's one-line
errors, and a script read for more than 20 s, are recorded as ``TRACEBACK`` / ``TIMEOUT``.

The report: how many scripts read identically, and every script that differs with the sections
that differ (``-v``: the differing commands / variables / warnings, old then new).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MIRRORS = {  # name -> (bare git dir, refs)
    "megatron": ("/work/.mirror/NVIDIA+Megatron-LM/repo", ["HEAD", "refs/heads/dev"]),
    "primus": ("/work/.mirror/AMD-AGI+Primus/repo", ["HEAD"]),
    "bridge": ("/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo", ["HEAD"]),
}
SHARED = ("/work/shared/validation/recipes", "/work/shared/upstream-recipes")


# --------------------------------------------------------------------------- corpus
def collect(work: Path) -> list[dict[str, Any]]:
    """Write every script under ``work/scripts`` (mirror and test scripts) and list them."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(sid: str, path: Path, argv: list[str] | None = None, text_only: bool = False) -> None:
        if sid not in seen:
            seen.add(sid)
            out.append({"id": sid, "path": str(path), "argv": argv or [], "text_only": text_only})

    for p in sorted((ROOT / "recipes").rglob("*.sh")):
        add(f"recipes/{p.relative_to(ROOT / 'recipes')}", p)
    for d in SHARED:
        for p in sorted(Path(d).rglob("*.sh")) if Path(d).is_dir() else []:
            add(f"shared/{Path(d).name}/{p.relative_to(d)}", p)
    sys.path.insert(0, str(ROOT / "tests"))
    from bash_corpus import entries, materialize  # the adapter tests' scripts

    for i, e in enumerate(entries()):
        if "recipe" in e:
            continue
        where = work / "scripts" / "tests" / f"{i:03d}"
        where.mkdir(parents=True, exist_ok=True)
        add(f"tests/{i:03d}/{e['name']}", materialize(e, where), e.get("argv", []), e.get("shell_only", False))
    blobs: dict[str, str] = {}
    for name, (git, refs) in MIRRORS.items():
        if not Path(git).is_dir():
            continue
        for ref in refs:
            ls = subprocess.run(["git", "-C", git, "ls-tree", "-r", ref], capture_output=True, text=True)
            for line in ls.stdout.splitlines():
                meta, path = line.split("\t", 1)
                mode, kind, sha = meta.split()
                if kind != "blob" or not path.endswith(".sh") or mode == "120000":
                    continue
                tag = "" if ref == "HEAD" else "@" + ref.rsplit("/", 1)[-1]
                if sha in blobs:  # the same file in another branch: read once
                    continue
                blobs[sha] = path
                dest = work / "scripts" / f"{name}{tag}" / path
                dest.parent.mkdir(parents=True, exist_ok=True)
                data = subprocess.run(["git", "-C", git, "cat-file", "blob", sha], capture_output=True).stdout
                dest.write_bytes(data)
                add(f"{name}{tag}/{path}", dest)
    return out


# --------------------------------------------------------------------------- one reader's reading
def _tok(t: Any, refs: list[Any]) -> list[Any]:
    return [t.text, [p.lit for p in t.pcs],
            [[[refs[r].start, refs[r].end, refs[r].nchars] for r in p.refs] for p in t.pcs]]


def _pcs(v: list[Any]) -> list[Any]:
    return ["".join(p.ch for p in v), [p.lit for p in v]]


class _Timeout(Exception):
    pass


def _guard(fn: Any) -> Any:
    from primus_launch.errors import UserError, one_line
    from primus_launch.plan import PlanError

    def alarm(*_: Any) -> None:
        raise _Timeout()

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    try:
        return fn()
    except _Timeout:
        return {"error": "TIMEOUT"}
    except (UserError, PlanError) as e:
        return {"error": one_line(e)}
    except BaseException as e:  # noqa: BLE001 - recorded: the point is to find them
        return {"error": f"TRACEBACK {type(e).__name__}: {str(e)[:200]}"}
    finally:
        signal.alarm(0)


def dump(manifest: Path, out: Path) -> None:
    """Record this checkout's reading of every script of ``manifest`` under ``out``."""
    from primus_launch.adapters import megatron_script as ms
    from primus_launch.adapters.megatron import load_megatron
    from primus_launch.adapters.megatron_bash import ShellState

    out.mkdir(parents=True, exist_ok=True)
    for m in json.loads(manifest.read_text()):
        path = Path(m["path"])
        res: dict[str, Any] = {"id": m["id"]}
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            res["read"] = "not UTF-8"
            text = None
        name = "<script>" if m["text_only"] else str(path)
        argv = tuple(m["argv"])

        def shell() -> dict[str, Any]:
            st = ShellState(text, name, argv)
            return {"commands": [{"args": [_tok(a, st.refs) for a in c.args], "start": c.start, "end": c.end,
                                  "env": {k: _pcs(v) for k, v in sorted(getattr(c, "env", {}).items())}}
                                 for c in st.commands],
                    "warnings": st.warnings, "scalars": {k: _pcs(v) for k, v in sorted(st.scalars.items())},
                    "arrays": {k: [_pcs(x) for x in v] for k, v in sorted(st.arrays.items())}}

        def recipe() -> dict[str, Any]:
            rec = ms.from_script(text, name, argv)
            return {"program": rec.program, "args": {k: repr(v) for k, v in sorted(rec.args.items())},
                    "launcher": [o.flag for o in rec.launcher], "notes": rec.notes,
                    "env": {k: _pcs(v) for k, v in sorted(rec.env.items())},
                    "occs": [[o.flag] + [v.text for v in o.vals] for o in rec.occs]}

        if text is not None:
            res["shell"] = _guard(shell)
            if not m["text_only"]:
                res["recipe"] = _guard(recipe)
                if "error" not in res["recipe"]:
                    res["plan"] = _guard(lambda: json.loads(load_megatron(path, script_args=argv).model_dump_json()))
        (out / (m["id"].replace("/", "__") + ".json")).write_text(json.dumps(res, sort_keys=True, default=str))


# --------------------------------------------------------------------------- comparison
def _sections(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict) and "error" not in x and "error" not in y:
            out += [f"{k}.{kk}" for kk in sorted(set(x) | set(y)) if x.get(kk) != y.get(kk)]
        else:
            out.append(f"{k}.error" if isinstance(x, dict) and ("error" in x or "error" in (y or {})) else k)
    return out


def _lines(r: dict[str, Any]) -> list[str]:
    s = r.get("shell", {})
    if "error" in s:
        return ["ERROR " + s["error"]]
    out = [" ".join(repr(t[0]) for t in c["args"])[:240] for c in s.get("commands", [])]
    out += [f"{k}={v[0]!r}"[:200] for k, v in s.get("scalars", {}).items()]
    out += [f"{k}[]={[x[0] for x in v]!r}"[:200] for k, v in s.get("arrays", {}).items()]
    out += ["W " + w for w in s.get("warnings", [])]
    for k in ("recipe", "plan"):
        if "error" in r.get(k, {}):
            out.append(f"{k} ERROR {r[k]['error'][:200]}")
    return out


def _bash_n(path: str) -> str:
    """What ``bash -n`` (parse only) says of a script: "ok" or its first error line."""
    try:
        r = subprocess.run(["bash", "-n", path], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bash -n not run ({e})"
    return "ok" if r.returncode == 0 else r.stderr.strip().split("\n")[0].replace(path, "")


def _texts(r: dict[str, Any]) -> list[str]:
    return [" ".join(t[0] for t in c["args"]) for c in r.get("shell", {}).get("commands", [])]


def _no_spans(r: dict[str, Any]) -> dict[str, Any]:
    r = json.loads(json.dumps(r))
    for c in r.get("shell", {}).get("commands", []):
        c.pop("start", None)
        c.pop("end", None)
    return r


def causes(a: dict[str, Any], b: dict[str, Any], path: str) -> set[str]:
    """Why a script reads differently (old ``a``, new ``b``), as far as these checks tell; ``bash -n``
    judges syntax."""
    out: set[str] = set()
    ea, eb = a.get("shell", {}).get("error"), b.get("shell", {}).get("error")
    if ea or eb:
        said = _bash_n(path)
        m = re.search(r"line (\d+)", said)
        bash_line = m.group(1) if said != "ok" and m else None

        def line(e: str | None) -> str | None:
            m = re.search(r":(\d+): cannot parse", e or "")
            return m.group(1) if m else None
        if ea and not eb:
            out.add(f"old refused, new reads; bash -n: {'ok' if said == 'ok' else 'refuses'}")
        elif eb and not ea:
            out.add(f"old read, new refuses; bash -n {'refuses on the same line' if line(eb) == bash_line else ': ' + said}")
        else:
            out.add(f"both refuse; new on bash's line: {line(eb) == bash_line}, old on bash's line: {line(ea) == bash_line}")
        return out
    if _no_spans(a) == _no_spans(b):
        return {"command spans only"}
    ta, tb = _texts(a), _texts(b)
    gone, new = [x for x in ta if x not in tb], [x for x in tb if x not in ta]
    if any("<(" in x or ">(" in x for x in gone):
        out.add("process substitution after a redirection (< <(cmd), > >(cmd)) is not arguments")
    at = {c["start"]: " ".join(t[0] for t in c["args"]) for c in a["shell"].get("commands", []) if c["start"] >= 0}
    for c in b["shell"].get("commands", []):  # the same command (by where it starts), other words
        x = " ".join(t[0] for t in c["args"])
        if c["start"] in at and at[c["start"]] != x and re.search(r"\$\([^)]*'", x):
            out.add("quotes inside $(...) inside double quotes")
    wa, wb = a["shell"].get("warnings", []), b["shell"].get("warnings", [])
    if any(w.startswith("source") and "not read" in w for w in wb if w not in wa):
        out.add("a sourced file bash cannot parse is skipped")
    if "BASH_REMATCH" in b["shell"].get("arrays", {}) and "BASH_REMATCH" not in a["shell"].get("arrays", {}):
        out.add("[[ x =~ re ]] (branch, BASH_REMATCH)")
    return out or {"other"}


def compare(old: Path, new: Path, verbose: bool) -> int:
    paths = {m["id"].replace("/", "__") + ".json": m["path"] for m in json.loads((old.parent / "manifest.json").read_text())}
    files = sorted(os.listdir(old))
    same, classes, bad, why = 0, defaultdict(list), [], defaultdict(list)
    for f in files:
        a, b = json.loads((old / f).read_text()), json.loads((new / f).read_text())
        text = json.dumps(b)
        if '"error": "TRACEBACK' in text or '"error": "TIMEOUT"' in text:
            bad.append(f)
        if a == b:
            same += 1
            continue
        classes[" ".join(_sections(a, b))].append((f, a, b))
        for c in causes(a, b, paths[f]):
            why[c].append(f[:-5].replace("__", "/"))
    print(f"{len(files)} scripts: {same} read identically, {len(files) - same} differ; "
          f"new reader tracebacks/timeouts: {len(bad)} {bad[:5]}")
    for key, items in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(items):4d}  {key}")
        for f, a, b in items:
            print(f"        {f[:-5].replace('__', '/')}")
            if verbose:
                if "error" in a.get("shell", {}) or "error" in b.get("shell", {}):
                    print(f"            bash -n: {_bash_n(paths[f])}")
                d = list(difflib.unified_diff(_lines(a), _lines(b), lineterm="", n=0))[2:]
                for line in d[:12]:
                    print(f"            {line[:200]}")
    print("by cause (a script may have several):")
    for c, fs in sorted(why.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(fs):4d}  {c}")
        if verbose:
            for f in fs:
                print(f"        {f}")
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", help="a directory holding the old reader's primus_launch package")
    ap.add_argument("--work", default=None, help="where scripts and readings go (default: a temporary folder)")
    ap.add_argument("-v", action="store_true", help="print what differs, old then new")
    ap.add_argument("--compare-only", action="store_true", help="compare the readings already under --work")
    ap.add_argument("--dump", nargs=2, metavar=("MANIFEST", "OUT"), help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.dump:
        dump(Path(ns.dump[0]), Path(ns.dump[1]))
        return 0
    if not ns.old:
        ap.error("--old is required")
    work = Path(ns.work or tempfile.mkdtemp(prefix="bashcmp-"))
    if ns.compare_only:
        return compare(work / "old", work / "new", ns.v)
    manifest = work / "manifest.json"
    manifest.write_text(json.dumps(collect(work)))
    procs = []
    for tag, tree in (("old", Path(ns.old).resolve()), ("new", ROOT)):
        env = dict(os.environ, PYTHONPATH=str(tree))
        procs.append(subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--dump", str(manifest),
                                       str(work / tag)], env=env, cwd=str(tree)))
    if any(p.wait() for p in procs):
        print("a reader's process failed", file=sys.stderr)
        return 1
    return compare(work / "old", work / "new", ns.v)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
