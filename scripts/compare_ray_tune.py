"""Tune one recipe locally and on Ray (``--ray-address``), and compare: plan, certificate, wall time.

    python scripts/compare_ray_tune.py RECIPE [--ray-address local|HOST:PORT]

Prints one line per backend (certificate, best s/iter, wall seconds of the tune alone -- Ray's start
or connection timed apart) and whether the tuned plans, certificates and trial lists are identical.
"""

from __future__ import annotations

import argparse
import time

from primus_launch.adapters import load_recipe
from primus_launch.ray_cluster import connect
from primus_launch.tuner.search import tune


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe")
    ap.add_argument("--ray-address", default="local")
    a = ap.parse_args()
    plan = load_recipe(a.recipe)
    out = {}
    t = time.perf_counter()
    ex = connect(a.ray_address)
    print(f"ray: connected to {ex.describe()} in {time.perf_counter() - t:.1f} s")
    for name, executor in (("local", None), ("ray", ex)):
        t = time.perf_counter()
        r = tune(plan, executor=executor)
        dt = time.perf_counter() - t
        out[name] = (r.best_plan.model_dump_json(), r.certificate.model_dump_json(),
                     [(t.changes, t.iteration_time_s, t.status, t.reason) for t in r.trials])
        print(f"{name}: {dt:.1f} s, best {r.best.iteration_time_s:.4f} s/iter, {r.certificate.text}")
    same = [k for k, i in (("plan", 0), ("certificate", 1), ("trials", 2)) if out["local"][i] == out["ray"][i]]
    print(f"identical: {', '.join(same) or 'nothing'}")


if __name__ == "__main__":
    main()
