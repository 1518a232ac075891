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

# pieces a substitution applies to: "*" every piece, or a kind: embedding, layer (every decoder
# layer kind), dense_layer, moe_layer, dense_window_layer, moe_window_layer, attn_core,
# attn_core_window, mtp (an MTP module's norms, embedding and projection), head_loss
PIECE_KINDS = ("embedding", "dense_layer", "moe_layer", "dense_window_layer", "moe_window_layer", "attn_core",
               "attn_core_window", "mtp", "head_loss")


@dataclass(frozen=True)
class Substitution:
    """``pieces``: the piece kinds it applies to (``"*"``: all); ``what``: what was measured
    instead of the plan's setting; ``why``: the reason; ``model``: how the projection corrects
    for it, if it does ("" = the measured figure is used as is); ``keyed``: False when the build is
    the same with or without the plan's setting (the key then leaves it out: e.g. an FP8 plan's
    BF16 pieces are the BF16 plan's); ``alt``: the plan changes that describe what was measured
    (``Plan.with_changes`` sections), for a correction by the dry-run roofline's time ratio
    ``roofline(plan) / roofline(plan with alt)`` of the same piece kind."""

    pieces: tuple[str, ...]
    what: str
    why: str
    model: str = ""
    keyed: bool = True
    alt: Optional[dict] = None

    def applies(self, piece: str) -> bool:
        kind = piece.split("#")[0]
        return "*" in self.pieces or kind in self.pieces or ("layer" in self.pieces and kind.endswith("_layer")) \
            or ("attn_core" in self.pieces and kind == "attn_core_window")

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
    # per piece kind, the ``model_args`` its build does not read (left out of its key, so that e.g.
    # a decoder layer measured for an untied recipe serves the tied one)
    args_not_for: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def material(self, piece: Optional[str] = None) -> dict[str, Any]:
        """The key material of ``piece`` (None: of the whole build): everything but the
        builder-private extras and the ``model_args`` the piece does not read; of the
        substitutions, those that change the build (``keyed``) and apply to the piece -- implied by
        the config they produced, and listed for readability."""
        from primus_launch.projection.measure.cache import canonical

        kind = piece.split("#")[0] if piece else None
        drop = set(self.args_not_for.get(kind, ())) if kind else set()
        subs = self.substitutions_for(piece) if piece else self.substitutions
        return canonical({"config": self.config,
                          "model_args": {k: v for k, v in self.model_args.items() if k not in drop},
                          "inputs": self.inputs, "layers": list(self.layers), "dtype": self.dtype,
                          "substitutions": [s.what for s in subs if s.keyed]})

    def substitutions_for(self, piece: str) -> list[Substitution]:
        return [s for s in self.substitutions if s.applies(piece)]


#: torchao float8 training recipes (``Float8LinearConfig.from_recipe_name``), what torchtitan's
#: ``float8`` converter accepts; None = its default (tensorwise)
TORCHAO_FP8_RECIPES = (None, "tensorwise", "rowwise", "rowwise_with_gw_hp")


def fp8_support(framework: str, device: str, recipe: Optional[str] = None) -> tuple[bool, Optional[str]]:
    """Whether the measured path can time the plan's FP8 recipe here, else why not.

    megatron-core: FP8 GEMMs exist only in its Transformer Engine modules; the measured path builds
    the local (torch) spec, so FP8 is never timed there.  torchtitan: its ``float8`` converter is
    torchao's ``convert_to_float8_training`` with one of :data:`TORCHAO_FP8_RECIPES`; it needs
    torchao and a device with FP8 GEMMs (``torch._scaled_mm``: CUDA compute capability >= 8.9, or
    ROCm MI300-class).
    """
    import importlib.util

    import torch

    dev = torch.device(device)
    if framework != "torchtitan":
        return False, ("megatron-core's FP8 runs only in its Transformer Engine modules and the measured path "
                       "builds the local (torch) spec")
    if recipe not in TORCHAO_FP8_RECIPES:
        return False, (f"the {recipe} recipe is not one of torchao's float8 training recipes (tensorwise, rowwise, "
                       "rowwise_with_gw_hp) that torchtitan's float8 converter runs")
    if dev.type != "cuda":
        return False, f"the {dev.type.upper()} has no FP8 GEMM (torch._scaled_mm needs a CUDA/ROCm GPU with FP8)"
    cap = torch.cuda.get_device_capability(dev)
    rocm = getattr(torch.version, "hip", None) is not None
    if not rocm and cap < (8, 9):
        return False, f"CUDA compute capability {cap[0]}.{cap[1]} < 8.9 has no FP8 GEMM"
    if importlib.util.find_spec("torchao") is None:
        return False, "torchao (torchtitan's float8 converter) is not installed"
    return True, None
