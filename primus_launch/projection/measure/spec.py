"""What a measured piece is built from, and what the build had to substitute.

:class:`BuildSpec` holds every input of a reduced-model build -- the framework's own model config
object, the remaining constructor arguments, the input shapes, the measured dtype -- computed from
the plan without allocating a tensor.  The builders build from it and nothing else, so its
canonical form (:func:`cache.canonical`) is the cache key: a plan field that changes a piece changes
the spec, hence the key, with no hand-kept list.

:class:`Substitution` records one way the measured piece differs from the plan's run, and why
(FP8 timed in BF16 because the device or the framework's local path has none, the MoE dispatcher
the CPU can run, the attention core, ...); the result lists them per piece.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

# pieces a substitution applies to: "*" every piece, or a kind: embedding, layer (dense and MoE
# layers), dense_layer, moe_layer, attn_core, head_loss
PIECE_KINDS = ("embedding", "dense_layer", "moe_layer", "attn_core", "head_loss")


@dataclass(frozen=True)
class Substitution:
    """``pieces``: the piece kinds it applies to (``"*"``: all); ``what``: what was measured
    instead of the plan's setting; ``why``: the reason; ``model``: how the projection corrects
    for it, if it does ("" = the measured figure is used as is)."""

    pieces: tuple[str, ...]
    what: str
    why: str
    model: str = ""

    def applies(self, piece: str) -> bool:
        kind = piece.split("#")[0]
        return "*" in self.pieces or kind in self.pieces or ("layer" in self.pieces and kind.endswith("_layer"))

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "why": self.why, "model": self.model}


@dataclass
class BuildSpec:
    """Every input of one reduced-model build (see the module docstring)."""

    framework: str
    config: Any  # megatron-core TransformerConfig / torchtitan Decoder.Config
    model_args: dict[str, Any]  # constructor arguments besides the config
    inputs: dict[str, Any]  # per-rank input shapes: seq, mbs, hidden, vocab
    layers: tuple[int, int]  # (dense, MoE) layers built
    dtype: str  # measured dtype name: bf16 | fp16 | fp32 | fp8
    piece_names: list[str]
    substitutions: list[Substitution] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # builder-private (not part of the key)

    def material(self) -> dict[str, Any]:
        """The key material (everything but the builder-private extras; substitutions are implied
        by the config they produced, and listed for readability)."""
        from primus_launch.projection.measure.cache import canonical

        return canonical({"config": self.config, "model_args": self.model_args, "inputs": self.inputs,
                          "layers": list(self.layers), "dtype": self.dtype,
                          "substitutions": [s.what for s in self.substitutions]})

    def substitutions_for(self, piece: str) -> list[Substitution]:
        return [s for s in self.substitutions if s.applies(piece)]


def fp8_support(framework: str, device: str) -> tuple[bool, Optional[str]]:
    """Whether the measured path can time the plan's FP8 recipe here, else why not.

    megatron-core: FP8 GEMMs exist only in its Transformer Engine modules; the measured path builds
    the local (torch) spec, so FP8 is never timed there.  torchtitan: its ``float8`` converter is
    torchao's ``convert_to_float8_training``; it needs torchao and a device with FP8 GEMMs
    (``torch._scaled_mm``: CUDA compute capability >= 8.9, or ROCm MI300-class).
    """
    import importlib.util

    import torch

    dev = torch.device(device)
    if framework != "torchtitan":
        return False, ("megatron-core's FP8 runs only in its Transformer Engine modules and the measured path "
                       "builds the local (torch) spec")
    if dev.type != "cuda":
        return False, f"the {dev.type.upper()} has no FP8 GEMM (torch._scaled_mm needs a CUDA/ROCm GPU with FP8)"
    cap = torch.cuda.get_device_capability(dev)
    rocm = getattr(torch.version, "hip", None) is not None
    if not rocm and cap < (8, 9):
        return False, f"CUDA compute capability {cap[0]}.{cap[1]} < 8.9 has no FP8 GEMM"
    if importlib.util.find_spec("torchao") is None:
        return False, "torchao (torchtitan's float8 converter) is not installed"
    return True, None
