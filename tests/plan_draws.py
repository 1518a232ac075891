"""Generated plans for the property tests: the bundled recipes (every reader's format) and their tuner candidates
(``Space(plan)[i]`` applied with ``apply_knobs`` and checked by ``validated``), each recipe's plan and space built once
per process and shared by the files that draw from them."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from hypothesis import strategies as st

from primus_launch.adapters import load_recipe
from primus_launch.plan import Plan
from primus_launch.tuner.space import Space, apply_knobs, validated

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "recipes").rglob("*") if p.is_file())
#: the Megatron-LM ones (Megatron bash / YAML, Primus experiments and the wrappers of them)
MEGATRON = [r for r in RECIPES if "torchtitan" not in r and "mi300x" not in r]


@lru_cache(maxsize=None)
def recipe(path: str) -> tuple[Plan, Space]:
    """The recipe's plan and its tuner space."""
    plan = load_recipe(ROOT / path)
    return plan, Space(plan)


def draw_plan(data: st.DataObject, recipes: list[str] = RECIPES, own: bool = True) -> Plan:
    """A bundled recipe's plan with one of its tuner candidates applied (``own``: the recipe's plan may be drawn)."""
    path = data.draw(st.sampled_from(recipes), label="recipe")
    plan, sp = recipe(path)
    i = data.draw(st.integers(-1 if own else 0, len(sp) - 1), label="candidate")
    return plan if i < 0 else validated(apply_knobs(plan, sp[i]))
