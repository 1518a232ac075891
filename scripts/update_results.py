"""Fill RESULTS.md's @PLACEHOLDER@ blocks from the outputs of the scripts it cites.

    python scripts/update_results.py                       (runs every script)
    python scripts/update_results.py --only VALIDATE,RECIPES   (reruns these; the others from .results/)
    python scripts/update_results.py --tuner-limit 60      (bench_tuner's --exhaustive-limit)
    python scripts/update_results.py --seed                 (a fresh checkout: .results/ from RESULTS.md)

Reads RESULTS.template.md and writes RESULTS.md atomically; each block is the tail of the command's
own output, verbatim, in a code fence.  Every command's whole output is kept in ``.results/NAME.out``
(not committed) with the commit and time it ran at, so a block can be rerun alone; RESULTS.md lists
the commit each block was produced at.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

from primus_launch.fileio import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".results"

BLOCKS = {
    "VALIDATE": (["scripts/validate.py"], lambda out: out[out.index("\ncalibration "):]),
    "CALIBRATION": (["scripts/calibrate.py", "--show"], lambda out: out),
    # the verdicts per framework and group (its first table); the rows it lists after are the command's
    "VALIDATE_MEMORY": (["scripts/validate_memory.py", "--quiet"],
                        lambda out: re.split(r"\n\s*\n|\nNot judged", out.strip("\n"), maxsplit=1)[0]),
    "RECIPES": (["scripts/project_recipes.py"], lambda out: out),
    "TUNE_RECIPES": (["scripts/tune_recipes.py"], lambda out: out),
    "BENCH_TUNER": (["scripts/bench_tuner.py"], lambda out: out[out.index("recipe    "):]),
    "CASE_STUDY": (["scripts/case_study.py", "--memory-certain"], lambda out: out),
    "BENCH_PROJECTION": (["scripts/bench_projection.py"], lambda out: "\n".join(out.splitlines()[:2])),
    "BENCH_CLI": (["scripts/bench_cli.py"], lambda out: out),
    "BENCH_PREFILTER": (["scripts/bench_prefilter.py"], lambda out: "\n".join(out.splitlines()[-3:])),
    "MEASURE_GLOO": (["scripts/validation/measure_gloo.py"], lambda out: out),
}


def _commit() -> str:
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return rev + ("+changes" if dirty else "")


def _run(name: str, args: list[str]) -> tuple[str, str]:
    """(output, provenance) of one block's command; the output is kept in .results/NAME.out."""
    print(f"running {' '.join(args)}", file=sys.stderr)
    t = time.time()
    rev = _commit()  # the code the command runs is the tree as it starts (an edit during a long run is not)
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    prov = f"{rev}, {time.strftime('%Y-%m-%d %H:%M', time.gmtime(t))} UTC, {time.time() - t:.0f} s"
    CACHE.mkdir(exist_ok=True)
    atomic_write_text(CACHE / f"{name}.out", f"# {' '.join(args)} @ {prov}\n{out}")
    return out, prov


def _cached(name: str) -> tuple[str, str]:
    f = CACHE / f"{name}.out"
    if not f.exists():
        raise SystemExit(f"update_results: --only leaves {name} to .results/{name}.out, which does not exist: "
                         f"rerun it (add it to --only)")
    head, _, out = f.read_text().partition("\n")
    return out, head.split(" @ ", 1)[1]


#: what each block's command printed around the part RESULTS.md shows, for :func:`seed` (the
#: others' part is their whole output, or lines their pick keeps as they are)
_AROUND = {"VALIDATE": ("\n", "")}


def seed() -> list[str]:
    """Write ``.results/NAME.out`` for every block from the committed RESULTS.md, with its
    provenance line, so that ``--only`` works on a fresh checkout (``.results/`` is not committed):
    the template's text between placeholders locates each block; a block is written only when the
    block's own pick gives back exactly what RESULTS.md shows.  Returns the blocks written."""
    template, shown = (ROOT / "RESULTS.template.md").read_text(), (ROOT / "RESULTS.md").read_text()
    parts = re.split(r"@([A-Z_]+)@", template)  # literal, name, literal, name, ..., literal
    bodies, pos = {}, 0
    if not shown.startswith(parts[0]):
        raise SystemExit("update_results --seed: RESULTS.md does not start as RESULTS.template.md does")
    pos = len(parts[0])
    for i in range(1, len(parts), 2):
        last = i + 2 == len(parts)  # the template's closing text: the end of RESULTS.md, not its first match
        end = (len(shown) - len(parts[i + 1]) if last and shown.endswith(parts[i + 1])
               else shown.find(parts[i + 1], pos) if parts[i + 1] else len(shown))
        if end < 0:
            raise SystemExit(f"update_results --seed: the template's text after @{parts[i]}@ is not in RESULTS.md")
        bodies[parts[i]] = shown[pos:end]
        pos = end + len(parts[i + 1])
    prov = dict(line[2:].split(": ", 1) for line in bodies.pop("PROVENANCE").splitlines() if line.startswith("- "))
    written = []
    for name, (args, pick) in BLOCKS.items():
        body = bodies[name]
        if body.startswith("```\n") and body.endswith("\n```"):
            body = body[4:-4]
        before, after = _AROUND.get(name, ("", ""))
        out = before + body + after
        if name not in prov or pick(out).strip("\n") != body.strip("\n"):
            print(f"update_results --seed: {name} not recovered from RESULTS.md; rerun it", file=sys.stderr)
            continue
        CACHE.mkdir(exist_ok=True)
        atomic_write_text(CACHE / f"{name}.out", f"# {' '.join(args)} @ {prov[name]}\n{out}")
        written.append(name)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated block names to rerun (others from .results/)")
    ap.add_argument("--tuner-limit", type=float, default=None, help="bench_tuner.py --exhaustive-limit (s)")
    ap.add_argument("--seed", action="store_true",
                    help="write .results/ from the committed RESULTS.md (a fresh checkout) and stop")
    a = ap.parse_args(argv)
    if a.seed:
        print("seeded .results/ with " + ", ".join(seed()))
        return 0
    only = {x.strip() for x in a.only.split(",") if x.strip()}
    bad = only - set(BLOCKS)
    if bad:
        raise SystemExit(f"update_results: --only={','.join(sorted(bad))}: not a block; blocks: {', '.join(BLOCKS)}")
    text = (ROOT / "RESULTS.template.md").read_text()
    where = []
    for name, (args, pick) in BLOCKS.items():
        if name == "BENCH_TUNER" and a.tuner_limit is not None:
            args = [*args, "--exhaustive-limit", f"{a.tuner_limit:g}"]
        out, prov = _run(name, args) if (not only or name in only) else _cached(name)
        where.append(f"{name}: {prov}")
        body = pick(out).strip("\n")
        fence = "" if name in ("RECIPES", "CASE_STUDY") else "```"
        text = text.replace(f"@{name}@", f"{fence}\n{body}\n{fence}".strip("\n") if fence else body)
    text = text.replace("@PROVENANCE@", "\n".join(f"- {w}" for w in where))
    atomic_write_text(ROOT / "RESULTS.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
