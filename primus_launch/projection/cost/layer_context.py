"""What every layer kind of one roofline build reads: the model, the sharding and micro-batch, the plan's
cost-relevant settings (``roofline._cfg``'s tuple, unpacked by name), the token counts derived from them, and
the factory of the per-kind :class:`~primus_launch.projection.cost.layer_ops.LayerOps` accumulators.

Token counts: ``T = b s / cp`` tokens on this CP rank (GEMMs see all ``T`` after the SP all-gather), ``Tn = T / tp``
with sequence parallel, else ``T`` (norms, residuals).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from primus_launch.plan import ModelArch
from primus_launch.projection.cost import fp8 as fp8m
from primus_launch.projection.cost.bias_dropout_add import te_grouped_mlp_bias
from primus_launch.projection.cost.compute import arch_of
from primus_launch.projection.cost.framework import Profile
from primus_launch.projection.cost.layer_ops import LayerOps
from primus_launch.projection.layer_times import PassTimes
from primus_launch.projection.memory.params import arch_from_key


@dataclass
class LayerContext:
    """One build's inputs (module doc); ``ops`` (a dict, or None) collects each kind's op list, ``made`` the
    accumulators by kind, ``shares`` the per-module / per-scope shares (``LayerTimes.parts``)."""

    m: ModelArch
    tp: int
    cp: int
    ep: int
    etp: int
    sp: bool
    b: int
    gpu: str
    prof: Profile
    recipe: str | None
    fmt: str
    wq_div: float
    host: float
    graphs: frozenset
    grouped: bool
    dispatcher: str
    cp_type: str
    prec: str
    insitu: float
    ub: tuple | None
    router: tuple
    expert_gemm: str
    sync_free: bool
    glue_eager: bool
    router_pad: bool
    bwd_sync: bool
    f8g: bool
    bf16_lin: frozenset
    fp8_attn: bool
    mx_dim1: str
    wacc_bytes: float
    ops: dict | None
    made: dict[str, LayerOps] = field(default_factory=dict)
    shares: dict[str, PassTimes] = field(default_factory=dict)
    #: (training.loss_impl, FLA chunks asked): the output head + loss implementation (cost/stage_extras.py)
    loss: tuple = ("framework", 1)

    @classmethod
    def build(cls, key: tuple, tp: int, cp: int, ep: int, etp: int, sp: bool, b: int, gpu: str, cfg: tuple,
              ops: dict | None) -> LayerContext:
        """The context of ``roofline._build_layers``'s arguments (``cfg``: ``roofline._cfg``'s tuple)."""
        prof, recipe, fmt, wq_div, host, graphs, grouped, dispatcher, cp_type, prec, insitu, ub, router, moe_impl, \
            f8g, bf16_lin, fp8_attn, mx_dim1, loss, wacc_bytes = cfg
        expert_gemm, sync_free, glue_eager, router_pad, bwd_sync = moe_impl
        return cls(arch_from_key(key), tp, cp, ep, etp, sp, b, gpu, prof, recipe, fmt, wq_div, host, graphs, grouped,
                   dispatcher, cp_type, prec, insitu, ub, router, expert_gemm, sync_free, glue_eager, router_pad,
                   bwd_sync, f8g, bf16_lin, fp8_attn, mx_dim1, wacc_bytes, ops, loss=loss)

    def new(self, kind: str) -> LayerOps:
        """A fresh accumulator for layer kind ``kind``, its op list kept in ``ops[kind]``."""
        lst = self.ops.setdefault(kind, []) if self.ops is not None else None
        acc = LayerOps(self.gpu, self.prec, self.prof, self.fmt, self.recipe, self.wq_div, lst, self.insitu, self.ub)
        self.made[kind] = acc
        acc.expert_gemm = self.expert_gemm
        acc.fp8_gather = self.f8g
        acc.bf16 = self.bf16_lin
        acc.f8a = (arch_of(self.gpu), self.recipe, self.m.softmax_type != "vanilla") if self.fp8_attn else None
        acc.dim1x = fp8m.mx_dim1_extra_bytes(self.mx_dim1)
        acc.wacc = self.wacc_bytes
        return acc

    @property
    def s(self) -> int:
        """The sequence length."""
        return self.m.seq_length

    @property
    def h(self) -> int:
        """The hidden size."""
        return self.m.hidden_size

    @property
    def T(self) -> int:
        """``b s / cp``: the tokens of one micro-batch on this CP rank (what the GEMMs see after SP's all-gather)."""
        return self.b * self.s // self.cp

    @property
    def Tn(self) -> int:
        """``T / tp`` with sequence parallel, else ``T``: the tokens the norms and residual adds see."""
        return self.T // self.tp if self.sp else self.T

    @property
    def fused_in(self) -> bool:
        """The norm writes the next GEMM's (quantised) input (TE LayerNormLinear)."""
        return self.prof.norm_linear

    @property
    def bda_unfused(self) -> bool:
        """Every bias-dropout-add unfused (``bias_dropout_add.te_grouped_mlp_bias``)."""
        return te_grouped_mlp_bias(self.m, self.prof, self.grouped)

    @property
    def cp_a2a(self) -> bool:
        """All-to-all context parallelism (``cp_comm_type`` a2a or a2a+p2p): s x s attention over a/cp heads."""
        return self.cp_type in ("a2a", "a2a+p2p")

    @property
    def titan_glue(self) -> bool:
        """TorchTitan v0.2's MoE glue as its eager ATen kernels (cost/titan_moe.py) instead of the generic permutes."""
        return self.glue_eager and self.prof.name.startswith("torchtitan")

    @property
    def router_mode(self) -> tuple:
        """Router mode of the routing-imbalance term (cost/moe_imbalance.py): forced balance, aux loss, expert bias."""
        return (self.router[0], self.router[2], bool(self.m.moe_router_bias) and self.prof.name == "megatron-te")
