"""TorchTitan default-stream fragmentation in the verdict (MEMORY.md round 20, `scripts/probe_unreleasable_frag.py`).

An OOM message's "reserved by PyTorch but unallocated" is taken after ``release_cached_blocks`` has freed every free
unsplit block (pytorch/pytorch ``c10/cuda/CUDACachingAllocator.cpp`` at 001074d2: "at this point free_cached_blocks has
already returned all possible "cached" memory to the driver"), so it is the fragmentation that cannot be released.
The one TorchTitan figure published (AMD-AGI/Primus #349, quoted in ``memory_cases.json``) is checked to sit under the
10 % the verdict holds, and the probe is checked to be the report's own verdict at that 10 %.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from primus_launch.projection.memory.stage import TITAN_DYNAMIC_FRAGMENTATION  # noqa: E402

GiB = 1024**3
CASE = "primus_issue349_mi350x_llama31_8b_bf16_titan_lbs3_noac"


@functools.lru_cache(maxsize=1)
def _case_items():
    from validate_memory import collect

    return tuple(it for it in collect() if it.plan is not None and it.plan.framework == "torchtitan"
            and (it.id == CASE or "dsv3_16b_b200_8gpu_noac" in it.id or "v2511_mi325x_llama31_8b" in it.id))


def test_published_unreleasable_fraction_is_under_the_held_term():
    from primus_launch.projection.memory.estimate import estimate_memory

    cases = json.loads((ROOT / "scripts/validation/memory_cases.json").read_text())
    cases = cases if isinstance(cases, list) else cases.get("cases", cases)
    quote = next(c["quote"] for c in cases if c["id"] == CASE)
    m = re.search(r"Of the allocated memory ([\d.]+) GiB is allocated by PyTorch, and ([\d.]+) GiB is reserved by "
                  r"PyTorch but unallocated", quote)
    allocated, unreleasable = float(m.group(1)), float(m.group(2))
    assert (allocated, unreleasable) == (229.04, 12.46)
    it = next(i for i in _case_items() if i.id == CASE)
    st = estimate_memory(it.plan).stages[0]
    static = (st.parameters_bytes + st.gradients_bytes + st.optimizer_bytes) / GiB  # fp32 shard + AdamW, grads freed
    fraction = unreleasable / (allocated - static)
    assert 0.055 < fraction < 0.059  # 5.7 % of the dynamic bytes at the OOM
    assert fraction < TITAN_DYNAMIC_FRAGMENTATION  # the verdict's held term is on the side of `does not fit`


def test_probe_at_the_model_fraction_is_the_report():
    from probe_unreleasable_frag import verdicts

    rows = verdicts(TITAN_DYNAMIC_FRAGMENTATION, _case_items())
    assert len(rows) == 7  # five DeepSeek-V3 B200 no-AC rows, Primus #349, the MI325X 8B run
    for iid, _exp, old, vd, ob, h, _cap in rows:
        assert vd == old, iid
        assert abs(h - ob) < 1.0, iid
    # and below it the DeepSeek-V3 B200 OOMs leave `does not fit` (why the held term stays whole)
    lower = {r[0]: r[3] for r in verdicts(0.057, _case_items())}
    assert all(v == "tight" for k, v in lower.items() if "dsv3_16b_b200_8gpu_noac_lbs8" in k)
