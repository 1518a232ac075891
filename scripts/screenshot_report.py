"""Render the HTML reports of a bundled recipe and of a dry-run tune, and save Chromium
screenshots of both for a human to look at.

    python scripts/screenshot_report.py [OUT_DIR]      (default: out/report)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from primus_launch.report.browser_check import probe, screenshot

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "out" / "report")
    out.mkdir(parents=True, exist_ok=True)
    recipe = out / "llama3.1_8b.sh"  # tune a copy, so the tuned recipe lands here, not in recipes/
    shutil.copy(ROOT / "recipes" / "megatron" / "llama3.1_8b.sh", recipe)
    jobs = {
        "projection": ["--project", str(ROOT / "recipes" / "megatron" / "llama3.1_70b.sh"), "--dry-run"],
        "tune": ["--tune", str(recipe), "--dry-run", "--budget", "60"],
    }
    for name, args in jobs.items():
        html = out / f"{name}.html"
        subprocess.run([sys.executable, "-m", "primus_launch", *args, "--report", str(html)], check=True,
                       stdout=subprocess.DEVNULL)
        seen = probe(html)
        png = screenshot(html, out / f"{name}.png", height=2600 if name == "tune" else 1500)
        print(f"{name}: {html} -> {png}; requests {len(seen['resources'])}, failed {len(seen['failed'])}, "
              f"pictures {len(seen['svgs'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
