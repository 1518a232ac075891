"""What a measured piece is built from, and what the build had to substitute.

:class:`BuildSpec` holds every input of a reduced-model build -- the framework's own model config
object, the remaining constructor arguments, the input shapes, the measured dtype -- computed from
the plan without allocating a tensor.  The builders build from it and nothing else, so its
canonical form (:func:`cache.canonical`) is the cache key: a plan field that changes a piece changes
the spec, hence the key, with no hand-kept list.

:class:`Substitution` records one way the measured piece differs from the plan's run, and why
(FP8 timed in BF16 because the device or the framework's local path has none, the MoE dispatcher
the CPU can run, the attention core, ...); the result lists them per piece.
:func:`common_substitutions` are those both builders make; each adds its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from primus_launch.plan import Plan
from primus_launch.projection.measure.device import gcn_base, props_gcn_arch

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
        """Whether it applies to ``piece`` (by kind; ``layer`` covers every decoder-layer kind, ``attn_core``
        the windowed core too)."""
        kind = piece.split("#")[0]
        return "*" in self.pieces or kind in self.pieces or ("layer" in self.pieces and kind.endswith("_layer")) \
            or ("attn_core" in self.pieces and kind == "attn_core_window")

    def to_dict(self) -> dict[str, Any]:
        """``what`` / ``why`` / ``model`` for the result's report."""
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
        """The substitutions that apply to ``piece``."""
        return [s for s in self.substitutions if s.applies(piece)]


#: torchao float8 training recipes (``Float8LinearConfig.from_recipe_name``), what torchtitan's
#: ``float8`` converter accepts; None = its default (tensorwise)
TORCHAO_FP8_RECIPES = (None, "tensorwise", "rowwise", "rowwise_with_gw_hp")


#: ROCm architectures with FP8 matrix cores (``torch._scaled_mm``): CDNA3 MI300X / MI325X (gfx942) and
#: CDNA4 MI350X / MI355X (gfx950); CDNA2 (MI250X, gfx90a) has none
ROCM_FP8_ARCHS = ("gfx942", "gfx950")


def no_fp8_gemm(capability: tuple[int, int], rocm: bool, gcn_arch: str = "") -> Optional[str]:
    """Why a GPU has no FP8 GEMM for ``torch._scaled_mm``, or None when it has one: CUDA compute
    capability >= 8.9 (Ada, Hopper, Blackwell); on ROCm an architecture of :data:`ROCM_FP8_ARCHS`
    (``gcnArchName``; the capability torch reports there is not NVIDIA's)."""
    if rocm:
        arch = gcn_base(gcn_arch)
        return None if arch in ROCM_FP8_ARCHS else (
            f"ROCm architecture {arch or '(unknown)'} has no FP8 GEMM ({' / '.join(ROCM_FP8_ARCHS)} have)")
    if tuple(capability) < (8, 9):
        return f"CUDA compute capability {capability[0]}.{capability[1]} < 8.9 has no FP8 GEMM"
    return None


def fp8_support(framework: str, device: str, recipe: Optional[str] = None) -> tuple[bool, Optional[str]]:
    """Whether the measured path can time the plan's FP8 recipe here, else why not.

    megatron-core: FP8 GEMMs exist only in its Transformer Engine modules; the measured path builds
    the local (torch) spec, so FP8 is never timed there.  torchtitan: its ``float8`` converter is
    torchao's ``convert_to_float8_training`` with one of :data:`TORCHAO_FP8_RECIPES`; it needs
    torchao and a device with FP8 GEMMs (``torch._scaled_mm``: CUDA compute capability >= 8.9, or
    ROCm MI300-class).
    """
    import importlib.util

    dev = torch.device(device)
    if framework != "torchtitan":
        return False, ("megatron-core's FP8 runs only in its Transformer Engine modules and the measured path "
                       "builds the local (torch) spec")
    if recipe not in TORCHAO_FP8_RECIPES:
        return False, (f"the {recipe} recipe is not one of torchao's float8 training recipes (tensorwise, rowwise, "
                       "rowwise_with_gw_hp) that torchtitan's float8 converter runs")
    if dev.type != "cuda":
        return False, f"the {dev.type.upper()} has no FP8 GEMM (torch._scaled_mm needs a CUDA/ROCm GPU with FP8)"
    props = torch.cuda.get_device_properties(dev)
    why = no_fp8_gemm((props.major, props.minor), getattr(torch.version, "hip", None) is not None,
                      props_gcn_arch(props))
    if why:
        return False, why
    if importlib.util.find_spec("torchao") is None:
        return False, "torchao (torchtitan's float8 converter) is not installed"
    return True, None


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": torch.bfloat16,
          "fp4": torch.bfloat16}
FP8_DEFAULT_RECIPE = {"megatron": "delayed", "torchtitan": "tensorwise"}


def torch_dtype(plan: Plan) -> torch.dtype:
    """Parameter/activation dtype measured for the plan's precision (fp8 / fp4 measured as bf16)."""
    return DTYPES[plan.training.precision]


def torch_dtype_name(plan: Plan, device: str, framework: str) -> str:
    """The dtype the pieces are timed in: the plan's, except fp8 where the device or the
    framework's measured path has none (:func:`fp8_support`) and fp4, then bf16."""
    t = plan.training
    if t.precision == "fp8":
        ok, _ = fp8_support(framework, device, t.fp8_recipe)
        return "fp8" if ok else "bf16"
    if t.precision == "fp4":
        return "bf16"
    return t.precision


def low_precision_label(plan: Plan) -> Optional[str]:
    """``"fp8 (delayed recipe)"`` / ``"fp4 (nvfp4 recipe)"`` for a low-precision plan (the recipe the
    framework uses when the plan names none), else None."""
    t = plan.training
    if t.precision == "fp8":
        return f"fp8 ({t.fp8_recipe or FP8_DEFAULT_RECIPE[plan.framework]} recipe)"
    if t.precision == "fp4":
        return f"fp4 ({t.fp4_recipe or 'nvfp4'} recipe)"
    return None


def common_substitutions(plan: Plan, device: str, framework: str = "megatron") -> list[Substitution]:
    """How a world-size-1 build of the plan's per-rank model differs from its run, for either
    framework (module docstring): low precision timed in bf16, sequence parallelism, the other CP
    ranks' K / V, CUDA graphs; each builder adds its own."""
    p, t = plan.parallel, plan.training
    out: list[Substitution] = []
    low = low_precision_label(plan)
    if low:
        ok, why = fp8_support(framework, device, t.fp8_recipe) if t.precision == "fp8" else (
            False, "no measured path runs FP4 GEMMs (Transformer Engine NVFP4 needs a Blackwell GPU)")
        if not ok:
            out.append(Substitution(
                ("*",), f"timed in bf16 instead of {low}", why or "",
                f"forward / backward of each piece scaled by the dry-run roofline's {low} / bf16 time ratio of "
                f"the same piece kind on {plan.cluster.gpu} (GEMM curves of the recipe, quantisation traffic)",
                keyed=False, alt={"training": {"precision": "bf16", "fp8_recipe": None, "fp4_recipe": None,
                                               "fp8_param_gather": False}}))
    if p.sequence_parallel:
        out.append(Substitution(("layer",), "norms and residuals on the full sequence (no sequence parallelism)",
                                "world size 1 has no tensor-parallel group to shard the sequence over",
                                "SP all-gather / reduce-scatter added analytically; the norms' compute is an upper bound"))
    if p.cp > 1:
        out.append(Substitution(("layer", "attn_core"), f"the other {p.cp - 1} context-parallel rank(s)' keys and "
                                "values are stand-in tensors (this rank's 2 load-balanced chunks attend the whole "
                                "sequence, causal)", "world size 1 has no context-parallel group to gather them from",
                                "the K/V exchange added analytically, overlapped with the measured core"))
    if t.cuda_graph_impl != "none":
        on_cpu = torch.device(device).type == "cpu"
        out.append(Substitution(
            ("*",), f"no CUDA graph capture (plan: cuda_graph_impl={t.cuda_graph_impl}"
                    + (f", scope {','.join(t.cuda_graph_scope)}" if t.cuda_graph_scope else "") + ")",
            "CUDA graphs need a GPU" + (" (the CPU has no kernel-launch overhead for them to remove)" if on_cpu else
                                        " and the framework's graph runner, which the piece-wise measurement does not use"),
            "not corrected: the measured times carry this device's launch overhead" + (" (none on the CPU)" if on_cpu
                                                                                       else " (an upper bound)"),
            keyed=False))
    return out
