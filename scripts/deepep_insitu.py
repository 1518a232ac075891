"""DeepEP's normal kernels inside a real training step: their durations in DeepSeek's public profile of
DeepSeek-V3 pre-training, against DeepEP's own benchmark of the same workload at the same time.

Source of the durations: github.com/deepseek-ai/profile-data ``train.json`` (@4496024, 2025-03-21; a
PyTorch-profiler trace of "a pair of individual forward and backward chunks in DualPipe", 4 MoE layers
each, "EP64, TP1 with 4K sequence length", H800 with CX7 400 Gb/s InfiniBand, balanced routing
simulated).  Its kernels ``dpsk::ep::internode::dispatch`` and ``::combine`` (20 SMs each, grid
``[20, 1, 1]``) move the DeepSeek-V3 workload DeepEP's benchmark moves (4096 tokens, hidden 7168,
top-8 of 256 experts within 4 of 8 node groups, FP8 dispatch with 1x128 scales, BF16 combine):
DeepEP's README at its initial commit (ebfe47e, 2025-02-24, the week of the trace) gives the same
kernels, measured alone with ``tests/test_internode.py`` (kineto kernel time, notify excluded), 46 GB/s
(dispatch) and 45 GB/s (combine) of "logical" RDMA bandwidth at EP64 -- bytes counted per (token,
destination node) pair, the source's own node included.  Both times count the same bytes, so the
in-situ fraction is their ratio:

    insitu = sum_i T D b_i / BW_i  /  sum_i t_i      (i over the trace's 8 dispatch and 8 combine kernels)

``T`` 4096 tokens, ``D`` the expected distinct destination nodes of a token
(:func:`primus_launch.projection.cost.moe_routing.expected_units_hit`), ``b`` 7168 * (1 + 4/128)
bytes (FP8 + scales, the benchmark's ``fp8_factor``) or 2 * 7168 (BF16), ``BW`` the release README's
figure.  The notify kernels (``notify_dispatch``, ``cached_notify``: 0.75-3.8 ms here, mostly waiting
for the other ranks) are left out, as the benchmark leaves them out.

Also the trace's compute per MoE layer (:func:`layer_compute`: every kernel of the two compute streams,
4 layers' forward + backward + weight gradients; DeepGEMM's kernels run on 112 of the 132 SMs, grid
``[*, 112]`` / ``[112, *]``, leaving 20 to DeepEP), the record ``dsprofile-v3-train-h800-moe-layer-compute``
that tests the dry-run's MoE layer on Hopper.

Prints the per-kernel durations, the records ``kernel_evidence.json`` keeps (kind ``deepep_insitu``)
and the in-situ fraction.  Needs the trace (3 MB, not in this repository):

    python scripts/deepep_insitu.py [--trace PATH]   # default: git show HEAD:train.json of a local
                                                     # mirror of github.com/deepseek-ai/profile-data
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path("/work/.mirror/deepseek-ai+profile-data/repo")
RELEASE_GBPS = {"dispatch": 46.0, "combine": 45.0}   # DeepEP README @ebfe47e, internode EP64 (RDMA)
TOKENS, HIDDEN = 4096, 7168


def load_trace(path: str | None) -> dict:
    if path:
        return json.loads(Path(path).read_text())
    out = subprocess.run(["git", "-C", str(MIRROR), "show", "HEAD:train.json"], capture_output=True, check=True)
    return json.loads(out.stdout)


def kernel_durations(trace: dict) -> dict[str, list[int]]:
    """Durations (us) of the trace's DeepEP internode data kernels, in time order, by op."""
    out: dict[str, list[int]] = {"dispatch": [], "combine": []}
    for e in sorted((e for e in trace["traceEvents"] if e.get("cat") == "kernel"), key=lambda e: e["ts"]):
        m = re.match(r"void dpsk::ep::internode::(dispatch|combine)<", e["name"])
        if m:
            out[m.group(1)].append(int(e["dur"]))
    return out


def layer_compute(trace: dict) -> dict[str, float]:
    """Compute-stream kernel seconds of the trace per MoE layer (forward + backward + weight gradients):
    ``total``, ``deepgemm`` (its GEMM kernels, on 112 SMs), ``flash`` (FlashAttention-3 forward / backward)."""
    ks = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["args"]["stream"] != 27]
    tot = sum(e["dur"] for e in ks)
    dg = sum(e["dur"] for e in ks if "dpsk::grouped_gemm::cuda::" in e["name"] and "GemmKernel" in e["name"])
    fa = sum(e["dur"] for e in ks if "flash::" in e["name"])
    return {"total": tot * 1e-6 / 4, "deepgemm": dg * 1e-6 / 4, "flash": fa * 1e-6 / 4}


def insitu_fraction(durations: dict[str, list[float]], release: dict[str, float] = RELEASE_GBPS) -> float:
    """Benchmark seconds of the trace's kernels over their measured seconds (module doc)."""
    sys.path.insert(0, str(ROOT))
    from primus_launch.projection.cost.moe_routing import expected_units_hit

    d = expected_units_hit(256, 8, 32, 8, 4)   # 8 nodes of 32 experts, top-8 within 4 of 8 groups
    per = {"dispatch": HIDDEN * (1 + 4 / 128), "combine": 2.0 * HIDDEN}
    bench = sum(TOKENS * d * per[op] / (release[op] * 1e9) * len(ts) for op, ts in durations.items())
    meas = sum(t * 1e-6 for ts in durations.values() for t in ts)
    return bench / meas


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", help="path of train.json (default: the local mirror)")
    args = ap.parse_args(argv)
    trace = load_trace(args.trace)
    durs = kernel_durations(trace)
    lc = layer_compute(trace)
    print("compute per MoE layer (fwd + bwd + wgrad), ms: " + ", ".join(f"{k} {1e3 * v:.2f}" for k, v in lc.items())
          + f"; DeepGEMM on all 132 SMs: total {1e3 * (lc['total'] - lc['deepgemm'] * (1 - 112 / 132)):.2f}")
    for op, ts in durs.items():
        print(f"{op:8s} {len(ts)} kernels, us: {ts}  mean {sum(ts) / len(ts):.0f}")
    print(f"in-situ fraction of the release benchmark: {insitu_fraction(durs):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
