"""The import structure of ``primus_launch/``, read from the source with :mod:`ast` (nothing imported).

Every ``.py`` file of the package is one node (a package's ``__init__.py`` is the node of the package's
name). Its edges are every ``import`` / ``from ... import`` statement anywhere in the file (module
level, inside functions, under ``if TYPE_CHECKING``), resolved to a file of the package:

- ``import a.b.c`` imports the file ``a/b/c.py`` (or ``a/b/c/__init__.py``); ``from a.b import x``
  imports the file ``a.b`` names (``a/b/__init__.py`` for a package) and, where ``x`` is a submodule
  of ``a.b``, the file ``a/b/c.py`` of that submodule too.  Relative imports are resolved against the
  importing file's package.  The parent packages Python runs on the way to a dotted name
  (``a/__init__`` for ``import a.b.c`` or ``from a.b.c import x``) are not edges: a package's
  ``__init__`` re-exporting its modules would otherwise close a circle with each of them.

The rules (the project brief: one plan at the centre, adapters translate, projection and tuner see only
the plan; no import circles, no module reaching around that):

1. no circle between files (a strongly connected component of more than one file);
2. the layers' arrows point one way: ``adapters/`` never imports ``launch/`` (the launcher reads recipes
   through the adapters, not the reverse); ``tuner/`` never imports ``adapters/`` (framework rules that
   constrain a plan live in ``plan/legality.py``); ``projection/hardware/`` never imports
   ``projection/cost/`` (the hardware database is data the cost model reads); ``plan/``, the centre,
   imports none of the layers around it; ``projection/`` imports neither the adapters (it sees only the
   plan) nor the tuner, the reports, the launcher or the CLI (a library call returning a typed result the
   CLI renders); ``tuner/`` imports neither the reports, the launcher nor the CLI; the adapters import
   neither the tuner, the reports nor the CLI, and the reports (which render results) neither the adapters,
   the launcher nor the CLI; ``projection/cost/`` imports none of the steps built on it (``steps/``,
   ``iteration``, ``dryrun``, ``api``, ``explain``).  An arrow that breaks a rule for a stated reason is
   listed in ``KNOWN_ARROWS`` (and the list is checked to stay current);
3. no file imports a private name (``_x``, not a dunder) of another file, neither by ``from m import _x``
   nor by reading ``m._x`` off an imported module: what another module needs is public.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "primus_launch"

# (importer's folder, imported folder): an arrow that must not exist
FORBIDDEN_ARROWS: tuple[tuple[str, str], ...] = (
    ("primus_launch.adapters", "primus_launch.launch"),
    ("primus_launch.tuner", "primus_launch.adapters"),
    ("primus_launch.projection.hardware", "primus_launch.projection.cost"),
    *(("primus_launch.plan", f"primus_launch.{up}")
      for up in ("adapters", "projection", "tuner", "report", "launch", "cli", "frameworks")),
    *(("primus_launch.projection", f"primus_launch.{up}") for up in ("adapters", "tuner", "report", "launch", "cli")),
    *(("primus_launch.tuner", f"primus_launch.{up}") for up in ("report", "launch", "cli")),
    *(("primus_launch.adapters", f"primus_launch.{up}") for up in ("tuner", "report", "cli")),
    # adapters translate recipes to the plan; the cost model's facts they need live in plan/ (userbuffers)
    ("primus_launch.adapters", "primus_launch.projection.cost"),
    *(("primus_launch.report", f"primus_launch.{up}") for up in ("adapters", "launch", "cli")),
    # the cost models sit under the steps that use them (layer -> stage -> schedule -> iteration)
    *(("primus_launch.projection.cost", f"primus_launch.projection.{up}")
      for up in ("steps", "iteration", "dryrun", "api", "explain")),
)
# (importing file, imported file) -> why this one arrow stands against FORBIDDEN_ARROWS
KNOWN_ARROWS: dict[tuple[str, str], str] = {
    ("primus_launch.projection.measure.build_titan", "primus_launch.adapters.torchtitan_arch"):
        "the measured path builds torchtitan's own model: model_spec reads torchtitan's registry by the plan's "
        "model name, and its flavour list lives with the TorchTitan adapter's registry snapshot",
}


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: set[str] = field(default_factory=set)  # files of the package this one imports
    private: list[tuple[str, str]] = field(default_factory=list)  # (file it is read from, "line N: what")


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _read_modules(pkg: Path = PKG) -> dict[str, Module]:
    """Every file of the package at ``pkg`` (its parent is the import root) with its imports."""
    mods = {}
    for path in sorted(pkg.rglob("*.py")):
        name, is_pkg = _module_name(path, pkg.parent)
        mods[name] = Module(name, path, is_pkg)
    for m in mods.values():
        _read_imports(m, mods)
    return mods


def _resolve_from(m: Module, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = m.name.split(".") if m.is_package else m.name.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _read_imports(m: Module, mods: dict[str, Module]) -> None:
    tree = ast.parse(m.path.read_text(), filename=str(m.path))
    aliases: dict[str, str] = {}  # local name -> module of the package it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in mods:
                    m.imports.add(a.name)
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:  # `import a.b.c` binds `a`; attribute chains are resolved below
                        aliases.setdefault(a.name.split(".")[0], a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            src = _resolve_from(m, node)
            if src.split(".")[0] != m.name.split(".")[0]:
                continue
            if src in mods and src != m.name:  # the module (or package __init__) the statement names
                m.imports.add(src)
            for a in node.names:
                sub = f"{src}.{a.name}"
                if sub in mods:  # a submodule: imported itself
                    m.imports.add(sub)
                    aliases[a.asname or a.name] = sub
                    if _is_private(a.name) and sub.rsplit(".", 1)[0] != m.name.rsplit(".", 1)[0]:
                        m.private.append((sub, f"line {node.lineno}: private module {sub}"))
                elif _is_private(a.name) and src != m.name:
                    m.private.append((src, f"line {node.lineno}: from {src} import {a.name}"))
    # `mod._x` read off a module imported under a local name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            chain = []
            v = node.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id in aliases:
                target = ".".join([aliases[v.id]] + chain[::-1])
                if target in mods and target != m.name:
                    m.private.append((target, f"line {node.lineno}: {target}.{node.attr}"))


def _cycles(mods: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(mods[v].imports):
            if w == v:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(mods)))
    try:
        for v in sorted(mods):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def _within(name: str, folder: str) -> bool:
    return name == folder or name.startswith(folder + ".")


@pytest.fixture(scope="module")
def modules() -> dict[str, Module]:
    return _read_modules()


def test_the_reader_sees_the_package(modules):
    """The reader resolves the kinds of import the package uses (a check of the checker, on files
    whose imports are known): a package's ``__init__`` re-exporting its submodules, ``from pkg import
    submodule``, and function-level imports."""
    assert len(modules) > 100
    plan = modules["primus_launch.plan"]
    assert plan.is_package and "primus_launch.plan.schema" in plan.imports
    cli = modules["primus_launch.cli"]
    # `from primus_launch.plan import Plan` (a name of plan/__init__) and, inside a function,
    # `from primus_launch.launch import emit` (a submodule)
    assert {"primus_launch.plan", "primus_launch.launch.emit", "primus_launch.projection.api"} <= cli.imports


def test_the_checks_find_what_they_look_for(tmp_path):
    """On a small package written here: a circle through a package's ``__init__`` (``from pkg import
    sub``), a function-level import and a relative import, a forbidden arrow, and a private name read
    both ways are all found; the clean files are not reported."""
    files = {
        "p/__init__.py": "",
        "p/a/__init__.py": "def load():\n    from p.a import reader\n    return reader\n",
        "p/a/reader.py": "from p.a import helpers\n",
        "p/a/helpers.py": "from p import a\n",  # back to p/a/__init__: a 3-file circle
        "p/b.py": "from . import c\n",
        "p/c.py": "def f():\n    from p.b import g\n",  # b <-> c, relative and function-level
        "p/hw/__init__.py": "",
        "p/hw/gpus.py": "import p.cost.model\n",  # forbidden arrow
        "p/cost/__init__.py": "",
        "p/cost/model.py": "_x = 1\ny = 2\n",
        "p/d.py": "from p.cost.model import _x, y\nimport p.cost.model as mm\nz = mm._x + mm.y\n",
        "p/e.py": "from p.cost import model\n",  # clean
    }
    for rel, text in files.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    mods = _read_modules(tmp_path / "p")
    assert sorted(_cycles(mods)) == [["p.a", "p.a.helpers", "p.a.reader"], ["p.b", "p.c"]]
    assert mods["p.e"].imports == {"p.cost", "p.cost.model"} and not mods["p.e"].private
    assert "p.cost.model" in mods["p.hw.gpus"].imports
    assert [src for src, _ in mods["p.d"].private] == ["p.cost.model", "p.cost.model"]
    assert all(not m.private for name, m in mods.items() if name != "p.d")


def test_no_import_circles(modules):
    circles = _cycles(modules)
    assert not circles, "import circles between files:\n" + "\n".join(" <-> ".join(c) for c in circles)


def _forbidden(modules: dict[str, Module]) -> list[tuple[str, str]]:
    return [(m.name, t) for m in modules.values() for src, dst in FORBIDDEN_ARROWS
            if _within(m.name, src) for t in sorted(m.imports) if _within(t, dst)]


def test_no_arrow_back_up(modules):
    bad = [f"{a} imports {b}" for a, b in _forbidden(modules) if (a, b) not in KNOWN_ARROWS]
    assert not bad, "forbidden arrows:\n" + "\n".join(bad)


def test_known_arrows_still_exist(modules):
    """An exception in ``KNOWN_ARROWS`` whose import is gone is taken off the list."""
    gone = sorted(set(KNOWN_ARROWS) - set(_forbidden(modules)))
    assert not gone, "KNOWN_ARROWS no longer imported (remove them):\n" + "\n".join(f"{a} -> {b}" for a, b in gone)


def test_no_private_names_across_files(modules):
    bad = [f"{m.name}: {what}" for m in modules.values() for src, what in m.private]
    assert not bad, "private names imported across files:\n" + "\n".join(bad)
