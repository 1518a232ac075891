"""Probe (MEMORY.md round 29): what inductor's partitioner hands from the forward to the backward of one compiled
torchtitan 0.3.0 qwen3 block, against :func:`memory.titan.layer_activation_bytes` (``compiled=True``).

TP 1: ``tests/titan_trace.py`` ``compiled_block_saved_bytes`` (meta device, real sizes, flash attention as on a GPU,
storages deduplicated).  TP > 1: the block as ``parallelize_qwen3`` leaves it under TP + SP (fake process group,
``FakeTensorMode``), compiled with the same recording backend and run on the embedding's sequence-sharded output;
the saved tensors deduplicated by storage, the block's own weights and buffers (by local shape) left out.  Prints
traced bytes, model bytes and their difference (the trace's two uint64 RNG seeds are 24 B).

    PYTHONPATH=. python scripts/probe_titan_compiled_qwen3.py [FLAVOR SEQ TP AC ...]   (default: 0.6B / 14B cases)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

DEFAULT = (("0.6B", 512, 1, "none"), ("14B", 2048, 1, "none"), ("0.6B", 512, 1, "op"), ("14B", 512, 2, "none"),
           ("14B", 512, 2, "op"))


def main(argv: list[str]) -> int:
    from titan_trace import compiled_block_saved_bytes, compiled_tp_block_saved_bytes

    from primus_launch.adapters.torchtitan import arch_from_flavor
    from primus_launch.projection.memory.titan import TITAN, layer_activation_bytes

    cases = DEFAULT if not argv else [(argv[i], int(argv[i + 1]), int(argv[i + 2]), argv[i + 3])
                                      for i in range(0, len(argv), 4)]
    for flavor, seq, tp, ac in cases:
        got = (compiled_block_saved_bytes(flavor, seq=seq, mbs=1, model="qwen3", ac=ac) if tp == 1
               else compiled_tp_block_saved_bytes(flavor, seq=seq, tp=tp, ac=ac, model="qwen3", by_storage=True))
        la = layer_activation_bytes(arch_from_flavor("qwen3", flavor), seq=seq, mbs=1, tp=tp, ac=ac, compiled=True,
                                    impl=TITAN, attn="sdpa")
        print(f"qwen3 {flavor:5s} seq {seq:5d} tp {tp} ac {ac:4s}  traced {got:11d}  model {la.kept:13.0f}  "
              f"model - traced {la.kept - got:+.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
