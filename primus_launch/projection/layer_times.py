"""The per-layer time record of one micro-batch on one GPU, filled by the roofline cost model
(:mod:`primus_launch.projection.cost.roofline`) or by measurement (:mod:`primus_launch.projection.measure`)
and assembled into an iteration by :func:`primus_launch.projection.iteration.assemble`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class PassTimes:
    """Seconds of one micro-batch: forward, input-grad backward, weight-grad backward."""

    fwd_s: float
    bwd_input_s: float
    bwd_weight_s: float

    @property
    def total_s(self) -> float:
        """Forward + input-gradient + weight-gradient seconds."""
        return self.fwd_s + self.bwd_input_s + self.bwd_weight_s


@dataclass(frozen=True)
class LayerTimes:
    """Compute-only times of one micro-batch on one GPU, per layer kind (sharding applied).

    ``attn_core`` (optional) is the core-attention share of a layer (forward, backward): used for
    selective recompute and CP overlap; when absent, :func:`assemble` takes the roofline's
    core-attention share of a dense layer scaled to the given dense-layer time.
    ``dense_window_layer`` / ``moe_window_layer``: layers with sliding-window attention (None = as
    the full-attention ones); ``mtp_extra``: an MTP module's norms, embedding and eh_proj (its
    transformer layer and head are priced as a layer and a head); ``parts``: named shares of a
    layer used by the overlap and selective-recompute models (``gemm``, ``shared_experts``, ``non_matmul``, and
    per recompute module ``core_attn``, ``mlp``, ``moe``, ...), each a :class:`PassTimes`, keyed
    ``"dense:<name>"`` / ``"moe:<name>"``; ``hybrid``: a hybrid Mamba / attention stack's
    layer times by symbol (``M`` / ``*`` / ``-`` / ``E``, :meth:`layer`)."""

    dense_layer: PassTimes
    moe_layer: Optional[PassTimes]
    embedding: PassTimes
    head_loss: PassTimes
    attn_core: Optional[PassTimes] = None
    dense_window_layer: Optional[PassTimes] = None
    moe_window_layer: Optional[PassTimes] = None
    mtp_extra: Optional[PassTimes] = None
    parts: Optional[dict] = field(default=None, compare=False, hash=False)
    hybrid: Optional[dict] = field(default=None, compare=False, hash=False)

    def layer(self, symbol: str) -> Optional[PassTimes]:
        """The times of a hybrid stack's layer of ``symbol``; None when the stack is not hybrid."""
        return (self.hybrid or {}).get(symbol)

    def part(self, kind: str, name: str) -> PassTimes:
        """The named share ``parts["<kind>:<name>"]`` of a layer; zero times where it is not given."""
        z = PassTimes(0.0, 0.0, 0.0)
        return (self.parts or {}).get(f"{kind}:{name}", z)
