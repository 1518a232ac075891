"""The scripts that print a row per bundled recipe (RESULTS.md's recipe and tuning tables) list every
bundled recipe: truth is the ``recipes/`` tree itself, walked to any depth (the Primus experiment lives
one level deeper, ``recipes/primus/MI355X/``, and was once missing from the projection table)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ON_DISK = sorted(p for p in (ROOT / "recipes").rglob("*") if p.is_file() and p.suffix in (".sh", ".yaml", ".toml"))


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"_script_{name}", ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("script,fn", [("project_recipes", "recipe_files"), ("tune_recipes", "recipes")])
def test_script_lists_every_bundled_recipe(script, fn):
    listed = getattr(_script(script), fn)()
    assert len(listed) == len(set(listed)), "a recipe listed twice"
    assert sorted(listed) == ON_DISK
