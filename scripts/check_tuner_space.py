#!/usr/bin/env python
"""Run a random sample of the tuner's candidates for each bundled Megatron recipe through Megatron-LM's own
start-up validation: each candidate (``tuner.space.Space`` with every numerics family allowed) is applied to
the recipe's plan, rendered in the recipe's own format (``render_recipe``) and checked as
``scripts/check_tuned_recipes.py`` checks a tuned recipe (:mod:`primus_launch.frameworks.mlm_validate`:
``parse_args`` + ``validate_args``, the parallel state, the TransformerConfig) on the tag tree and on the dev
tree; a candidate counts against the tree its original recipe passes on.  Prints each refused candidate with
Megatron's message and its knobs.  (The tuner must never write a recipe the framework refuses.)

    git -C /work/.mirror/NVIDIA+Megatron-LM/repo archive core_v0.16.1 megatron | tar -x -C /tmp/mlm016
    git -C /work/.mirror/NVIDIA+Megatron-LM/repo archive d48bd6be0a megatron | tar -x -C /tmp/mlmdev
    python scripts/check_tuner_space.py --mlm /tmp/mlm016 --mlm-dev /tmp/mlmdev --per-recipe 14 --seed 2
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from check_tuned_recipes import Item, megatron_launch  # noqa: E402
from primus_launch.adapters import load_recipe, render_recipe  # noqa: E402
from primus_launch.frameworks.mlm_validate import validate_launches  # noqa: E402
from primus_launch.tuner import rules  # noqa: E402
from primus_launch.tuner.space import AXES, Space, SpaceConfig, apply_knobs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlm", required=True, help="Megatron-LM tree at the pinned tag")
    ap.add_argument("--mlm-dev", required=True, help="Megatron-LM dev tree")
    ap.add_argument("--per-recipe", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("recipes", nargs="*", help="recipes/megatron file names (default: all but the CPU toy)")
    a = ap.parse_args()
    names = a.recipes or [p.name for p in sorted((REPO / "recipes/megatron").iterdir())
                          if p.suffix in (".sh", ".yaml") and "tiny" not in p.name]
    work = Path(tempfile.mkdtemp(prefix="space-check-"))
    cases, knobs = [], {}
    for name in names:
        src = REPO / "recipes/megatron" / name
        plan, text = load_recipe(src), src.read_text()
        sp = Space(plan, SpaceConfig(allow=frozenset(rules.ALLOWABLE)))
        rng = random.Random(a.seed)
        item = Item(name, src)
        cases.append(megatron_launch(item, src, f"{name}::orig"))
        for i in sorted({rng.randrange(len(sp)) for _ in range(a.per_recipe)}):
            cand = apply_knobs(plan, sp[i]).model_copy(update={"source": plan.source})
            out = work / f"{src.stem}.{i}{src.suffix}"
            out.write_text(render_recipe(cand, text))
            launch = megatron_launch(item, out, f"{name}::{i}")
            knobs[launch.name] = sp[i]
            cases.append(launch)
    t0 = time.time()
    res = {tree: {v.name: v for v in validate_launches(path, cases)} for tree, path in (("tag", a.mlm),
                                                                                         ("dev", a.mlm_dev))}
    print(f"{len(cases)} launches validated on two trees in {time.time() - t0:.0f} s")
    refused = 0
    for name in names:
        tree = next((t for t in ("tag", "dev") if res[t][f"{name}::orig"].ok), None)
        checked = [n for n in knobs if n.startswith(name + "::")]
        print(f"{name}: original passes on {tree or 'neither (candidates not judged)'}; {len(checked)} candidates")
        for n in checked if tree else ():
            v = res[tree][n]
            if not v.ok:
                refused += 1
                print(f"  REFUSED {n} [{v.stage}] {v.error[:220]}\n    knobs: {dict(zip(AXES, knobs[n]))}")
    print(f"{refused} refused")
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
