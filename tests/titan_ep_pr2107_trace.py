"""Run pytorch/torchtitan's standard expert-parallel token dispatch / combine at PR #2107's commit (test helper).

The code is torchtitan 36a4b6942 ('Integrate DeepEP to torchtitan', PR #2107: the commit whose description logs the
DeepSeek-V3 671B standard / DeepEP runs) ``torchtitan/distributed/expert_parallel.py`` (``ExpertParallel``) and
``torchtitan/models/moe/{utils,kernels}.py`` (``_permute`` / ``_unpermute`` / ``generate_permute_indices``), read
from the local git mirror (``/work/.mirror/pytorch+torchtitan/repo`` or ``$TORCHTITAN_MIRROR``) into a private
package; the Triton permute-index kernel is replaced by the CPU twin the same file ships (``use_cpu=True``).
``ExpertParallel._token_dispatch`` and ``_token_combine`` run on the CPU over a one-rank gloo EP group (every
expert local), around a one-copy stand-in for the experts, under a dispatch mode that records every ATen op that
moves ``[*, h]`` rows (views and allocations without a fill left out) and every all-to-all, forward and backward.

Run as a script it prints one JSON object: ``{"fwd": [[op, bytes], ...], "bwd": [...], "a2a_fwd": n, "a2a_bwd": n,
"rows": R, "h": h, "local_experts": E}`` -- or ``{"skip": reason}`` where the mirror, the commit or triton is absent.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

COMMIT = "36a4b6942"
MIRROR = Path(os.environ.get("TORCHTITAN_MIRROR", "/work/.mirror/pytorch+torchtitan/repo"))
FILES = {"expert_parallel": "torchtitan/distributed/expert_parallel.py", "utils": "torchtitan/models/moe/utils.py",
         "kernels": "torchtitan/models/moe/kernels.py"}
A2A = ("_c10d_functional::all_to_all_single", "c10d::alltoall_base_")
ROWS, H, EXPERTS = 512, 64, 8


def source(path: str, commit: str = COMMIT) -> str | None:
    """``git show commit:path`` from the mirror, or None."""
    try:
        return subprocess.run(["git", "-C", str(MIRROR), "show", f"{commit}:{path}"], check=True,
                              capture_output=True, text=True, timeout=30).stdout
    except Exception:   # noqa: BLE001 - no mirror, no git, no commit
        return None


def trace() -> dict:
    srcs = {k: source(p) for k, p in FILES.items()}
    if any(v is None for v in srcs.values()):
        return {"skip": f"torchtitan {COMMIT} sources not available from {MIRROR}"}
    try:
        import triton  # noqa: F401 - kernels.py imports it at module level
    except ImportError:
        return {"skip": "triton not installed"}
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    sys.path.insert(0, str(Path(__file__).parent))
    from aten_row_bytes import NO_BYTES, RowBytes

    d = Path(tempfile.mkdtemp(prefix="tt2107_")) / "tt2107"
    d.mkdir()
    (d / "__init__.py").write_text("")
    (d / "kernels.py").write_text(srcs["kernels"])
    # the package-relative and torchtitan-absolute imports of the three files, pointed at the private package;
    # _round_up is torchtitan/tools/utils.py's helper of that time (gone from torchtitan 0.3)
    utils = srcs["utils"].replace("from torchtitan.tools.utils import _round_up",
                                  "def _round_up(x, y):\n    return ((x + y - 1) // y) * y")
    (d / "utils.py").write_text(utils)
    ep = re.sub(r"from torchtitan\.models\.moe\.utils import", "from tt2107.utils import", srcs["expert_parallel"])
    (d / "expert_parallel.py").write_text(ep)
    sys.path.insert(0, str(d.parent))
    import tt2107.utils as tu
    from tt2107.expert_parallel import ExpertParallel

    gen = tu.generate_permute_indices
    tu.generate_permute_indices = lambda *a, **k: gen(*a, **{**k, "use_cpu": True})

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("ep",))
    torch.manual_seed(0)
    counts = torch.full((EXPERTS,), ROWS // EXPERTS, dtype=torch.int64)   # balanced (forced round robin)
    x = torch.randn(ROWS, H, dtype=torch.bfloat16, requires_grad=True)
    style = ExpertParallel()
    a2a = {"fwd": 0, "bwd": 0}

    def hook(name: str, phase: str) -> bool:
        """All-to-alls counted apart; wait_tensor and the autograd wrapper move no rows."""
        if any(name.startswith(p) for p in A2A):
            a2a[phase] += 1
            return True
        return name.startswith("_c10d_functional::")

    rec_mode = RowBytes(ROWS * H // 8, NO_BYTES, hook=hook)
    rec = rec_mode.rec

    try:
        with rec_mode:
            routed, _ = style._token_dispatch(None, (x, counts), mesh)
            y = routed.clone()   # the experts' stand-in (not recorded below)
            out = style._token_combine(None, y, mesh)
            rec_mode.phase = "bwd"
            out.backward(torch.ones_like(out))
    finally:
        sys.path.remove(str(d.parent))
    fwd = [r for r in rec["fwd"] if r[0] != "aten::clone"]
    bwd = [r for r in rec["bwd"] if r[0] not in ("aten::ones_like", "aten::fill_", "aten::clone")]
    return {"fwd": fwd, "bwd": bwd, "a2a_fwd": a2a["fwd"], "a2a_bwd": a2a["bwd"], "rows": ROWS, "h": H,
            "local_experts": EXPERTS}


if __name__ == "__main__":
    print(json.dumps(trace()))
