"""The caps on a tuning space (:class:`SpaceConfig`): how far each axis is searched, which knob families
beyond the structural ones, and which numerics-changing families the user allowed (``rules.ALLOWABLE``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class SpaceConfig:
    """Caps on the search space (the defaults are the tuner's full space).

    ``max_tp=None`` keeps TP inside one node (``gpus_per_node``): Megatron-LM and TorchTitan place
    TP innermost and both recommend TP within the NVLink/xGMI domain.  ``search_sp`` /
    ``search_overlap`` also try sequence parallel off and the grad-reduce / param-gather overlaps
    off (off by default: neither saves time or memory in either framework's design).  ``allow``
    names the numerics-changing knob families the user allowed (:data:`rules.ALLOWABLE`).
    ``execution=False`` keeps every execution knob (CUDA graphs, MoE communication, offloading,
    compile, recompute modules, uneven splits) at the recipe's value: the structural space only.
    """

    max_tp: Optional[int] = None
    max_cp: int = 8
    max_vpp: int = 8
    max_mbs: int = 8
    max_ep: Optional[int] = None
    search_sp: bool = False
    search_overlap: bool = False
    block_recompute_layers: tuple[int, ...] = (1, 2, 4, 8)
    max_dp_replicate_choices: int = 3
    allow: frozenset[str] = field(default_factory=frozenset)
    execution: bool = True

    @classmethod
    def restricted(cls) -> "SpaceConfig":
        """A small structural space for quick comparisons and tests: the execution knobs kept at
        the recipe's values, CP up to 4, micro-batch up to 4, block recompute of 1, 2 or 4 layers,
        HSDP shard group of one node only."""
        return cls(max_cp=4, max_vpp=8, max_mbs=4, block_recompute_layers=(1, 2, 4),
                   max_dp_replicate_choices=2, execution=False)

    def describe(self) -> dict:
        """The caps as a plain dict (``allow`` sorted), for the tune's result and trial log."""
        d = dict(self.__dict__)
        d["allow"] = sorted(self.allow)
        return d
