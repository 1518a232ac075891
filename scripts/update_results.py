"""Fill RESULTS.md's @PLACEHOLDER@ blocks from the outputs of the scripts it cites.

    python scripts/update_results.py          (runs every script; a few minutes)

Reads RESULTS.template.md and writes RESULTS.md atomically; each block is the tail of the command's
own output, verbatim, in a code fence.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from primus_launch.fileio import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]

BLOCKS = {
    "VALIDATE": (["scripts/validate.py"], lambda out: out[out.index("\ncalibration "):]),
    "VALIDATE_ROWS": (["scripts/validate.py"], lambda out: out[:out.index("\ncalibration ")]),
    "CALIBRATION": (["scripts/calibrate.py", "--show"], lambda out: out),
    "FIT_KERNELS": (["scripts/fit_kernels.py"], lambda out: out),
    "RECIPES": (["scripts/project_recipes.py"], lambda out: out),
    "BENCH_PROJECTION": (["scripts/bench_projection.py"], lambda out: "\n".join(out.splitlines()[:2])),
    "BENCH_PREFILTER": (["scripts/bench_prefilter.py"], lambda out: "\n".join(out.splitlines()[-3:])),
    "BENCH_TUNER": (["scripts/bench_tuner.py"], lambda out: out[out.index("recipe    "):]),
    "CASE_STUDY": (["scripts/case_study.py"], lambda out: out),
    "VALIDATE_MEASURE": (["scripts/validate_measure.py"], lambda out: out[out.index("\n[") + 1:]),
    "VALIDATE_MEMORY": (["scripts/validate_memory.py"],
                        lambda out: "\n".join(ln for ln in out.splitlines() if ln.startswith(("rows compared", "Megatron-LM",
                                                                                      "gpt/", "moe/", "run ")) or
                                              "published:" in ln)),
    "BENCH_CLI": (["scripts/bench_cli.py"], lambda out: out),
}


def main() -> int:
    text = (ROOT / "RESULTS.template.md").read_text()
    for name, (args, pick) in BLOCKS.items():
        print(f"running {' '.join(args)}", file=sys.stderr)
        out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        body = pick(out).strip("\n")
        fence = "" if name in ("RECIPES", "CASE_STUDY") else "```"
        text = text.replace(f"@{name}@", f"{fence}\n{body}\n{fence}".strip("\n") if fence else body)
    atomic_write_text(ROOT / "RESULTS.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
