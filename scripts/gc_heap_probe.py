"""Count the Python objects a full ``gc.collect()`` traverses in a Megatron training process, at the least.

Imports what every Megatron-Core GPT / MoE training process imports -- ``torch`` and megatron-core's GPT model,
MoE layer, optimizer and DDP packages -- runs one full collection and prints ``len(gc.get_objects())`` (the
objects the collector tracks) with the versions, the figure ``cost/manual_gc.py`` ``HEAP_TRACKED_OBJECTS`` states.
A lower bound on a real run: Transformer Engine, Megatron-Bridge / Hugging Face ``transformers``, the data
pipeline and the model's own modules are not imported here.  Counts objects, not time: the seconds per object are
the published figure of ``cost/manual_gc.py`` (sgl-project/sglang PR #28067).

    python scripts/gc_heap_probe.py [--json]
"""

from __future__ import annotations

import gc
import json
import sys
import warnings


def count() -> dict:
    """The tracked-object count after the imports of the module doc, with the versions it was taken at."""
    warnings.filterwarnings("ignore")
    import torch
    import megatron.core
    import megatron.core.distributed  # noqa: F401
    import megatron.core.models.gpt  # noqa: F401
    import megatron.core.optimizer  # noqa: F401
    import megatron.core.transformer.moe.moe_layer  # noqa: F401

    gc.collect()
    return {"tracked_objects": len(gc.get_objects()), "python": sys.version.split()[0], "torch": torch.__version__,
            "megatron_core": getattr(megatron.core, "__version__", "?")}


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    res = count()
    if argv[:1] == ["--json"]:
        print(json.dumps(res))
    else:
        print(f"{res['tracked_objects']:,} tracked objects (python {res['python']}, torch {res['torch']}, "
              f"megatron-core {res['megatron_core']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
