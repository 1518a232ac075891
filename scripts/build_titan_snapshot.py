"""Build the bundled TorchTitan registry snapshot (and torchrun's option table) from the installed packages.

    python scripts/build_titan_snapshot.py            # writes primus_launch/data/torchtitan-<version>.json

The dry-run path reads this file instead of importing torchtitan (see
``primus_launch/adapters/titan_snapshot.py``); ``tests/test_adapter_torchtitan_snapshot.py`` checks
that it equals what the live registry gives.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primus_launch.adapters.titan_snapshot import DATA_DIR, build_snapshot  # noqa: E402
from primus_launch.fileio import atomic_write_text  # noqa: E402


def main() -> int:
    t0 = time.time()
    snap = build_snapshot()
    out = DATA_DIR / f"torchtitan-{snap['torchtitan']}.json"
    atomic_write_text(out, json.dumps(snap, indent=1, sort_keys=True) + "\n", mode=0o644)
    from primus_launch.adapters.torchrun_argv import BUNDLED_TORCH, TABLE_FILE, live_option_table

    table = DATA_DIR / TABLE_FILE.format(BUNDLED_TORCH)
    atomic_write_text(table, json.dumps(live_option_table(), indent=1, sort_keys=True) + "\n", mode=0o644)
    print(f"{table}: torchrun's option table")
    n_cfg = sum(len(v) for v in snap["configs"].values())
    n_flv = sum(len(v["flavors"]) for v in snap["models"].values())
    print(f"{out}: torchtitan {snap['torchtitan']}, {len(snap['models'])} families, {n_flv} flavors, "
          f"{n_cfg} config functions ({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
