"""The framework-neutral training plan: the one object every part of primus-launch speaks.

Adapters (``primus_launch.adapters``) translate native recipes (TorchTitan job TOML, Megatron-LM
launch scripts / argument YAML) into a :class:`Plan` and back; projection and tuner only see the
plan.  Field semantics follow Megatron-LM's argument names where one exists
(``megatron/training/arguments.py``), so that a reader who knows either framework can map them.

Rank layout (Megatron ``parallel_state.initialize_model_parallel``, order "tp-cp-ep-dp-pp"):
TP is innermost (adjacent ranks), then CP, then DP (EP is carved out of DP x CP for the experts),
then PP outermost.

Derived degrees (Megatron-LM ``parallel_state``):

- ``dp = world / (tp * cp * pp)``
- expert data parallel ``edp = world / (etp * ep * pp)``
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

Precision = Literal["bf16", "fp16", "fp8", "fp32"]
RecomputeGranularity = Literal["none", "selective", "full"]
RecomputeMethod = Literal["uniform", "block"]
PipelineSchedule = Literal["1f1b", "interleaved_1f1b", "zb_h1", "zbv", "gpipe"]
DPSharding = Literal["none", "optimizer", "full"]
Framework = Literal["megatron", "torchtitan"]

GPU_NAMES = (  # the CLI contract's names; projection.hardware holds their specs
   "a100-sxm-80gb", "h100-sxm", "h200", "b200", "mi300x", "mi325x", "mi355x")


class PlanError(ValueError):
    """A user-facing error naming the field, its value and what is allowed (one line)."""

    def __init__(self, field: str, value: object, allowed: str):
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={value!r}: {allowed}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class ModelArch(_Strict):
    """Transformer architecture (decoder-only GPT family, optionally MoE and/or MLA)."""

    name: str = "gpt"
    num_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    ffn_hidden_size: int = Field(gt=0, description="dense MLP intermediate size")
    num_attention_heads: int = Field(gt=0)
    num_query_groups: Optional[int] = Field(default=None, gt=0, description="KV heads (GQA); None = MHA")
    head_dim: Optional[int] = Field(default=None, gt=0, description="kv_channels; None = hidden/heads")
    vocab_size: int = Field(gt=0, description="tokenizer vocabulary (before framework padding)")
    make_vocab_size_divisible_by: int = Field(default=1, gt=0, description="Megatron pads vocab to a multiple of this x TP")
    seq_length: int = Field(gt=0)
    max_position_embeddings: Optional[int] = None
    swiglu: bool = True
    untie_embeddings_and_output_weights: bool = True
    normalization: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    add_bias_linear: bool = False
    add_qkv_bias: bool = False
    qk_layernorm: bool = False
    position_embedding: Literal["rope", "learned", "none"] = "rope"
    # --- MoE ---
    num_experts: Optional[int] = Field(default=None, gt=0)
    moe_router_topk: int = Field(default=2, gt=0)
    moe_ffn_hidden_size: Optional[int] = Field(default=None, gt=0)
    moe_shared_expert_intermediate_size: int = Field(default=0, ge=0, description="total FFN size of shared experts")
    moe_dense_first_layers: int = Field(default=0, ge=0, description="leading dense layers (DeepSeek first_k_dense)")
    moe_router_bias: bool = False
    moe_router_num_groups: Optional[int] = Field(
        default=None, gt=0, description="expert groups of group-limited routing (Megatron --moe-router-num-groups; "
                                        "DeepSeek-V3 n_group); None = no group limit")
    moe_router_group_topk: Optional[int] = Field(
        default=None, gt=0, description="groups one token may route to (Megatron --moe-router-group-topk; "
                                        "DeepSeek-V3 topk_group)")
    # --- MLA (DeepSeek-V2/V3) ---
    multi_latent_attention: bool = False
    q_lora_rank: Optional[int] = None
    kv_lora_rank: int = 512
    qk_head_dim: int = 128
    qk_pos_emb_head_dim: int = 64
    v_head_dim: int = 128

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    @property
    def kv_heads(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def kv_channels(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.moe_dense_first_layers if self.is_moe else 0

    @property
    def expert_ffn(self) -> int:
        return self.moe_ffn_hidden_size or self.ffn_hidden_size

    def padded_vocab_size(self, tp: int) -> int:
        """Megatron ``_vocab_size_with_padding``: round up to ``divisible_by * tp``."""
        m = self.make_vocab_size_divisible_by * tp
        return -(-self.vocab_size // m) * m if self.make_vocab_size_divisible_by > 1 else self.vocab_size


class Parallelism(_Strict):
    """Parallel degrees; DP is derived from the cluster's world size."""

    tp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    vpp: int = Field(default=1, gt=0, description="virtual pipeline stages per PP rank (model chunks)")
    cp: int = Field(default=1, gt=0)
    ep: int = Field(default=1, gt=0)
    etp: Optional[int] = Field(default=None, gt=0, description="expert TP; None = same as tp")
    sequence_parallel: bool = False
    dp_sharding: DPSharding = Field(default="none", description="none | optimizer (Megatron distributed optimizer, ZeRO-1) | full (FSDP / ZeRO-3)")
    dp_replicate: int = Field(default=1, gt=0, description="HSDP replicate groups (torchtitan); shard group = dp / dp_replicate")
    # explicit pipeline layout (layers per stage, first and last may differ); None = even split
    pipeline_layers_first_stage: Optional[int] = None
    pipeline_layers_last_stage: Optional[int] = None

    @property
    def expert_tp(self) -> int:
        return self.etp if self.etp is not None else self.tp


class Recompute(_Strict):
    """Activation recomputation (Megatron ``--recompute-*``; TorchTitan ``[activation_checkpoint]``)."""

    granularity: RecomputeGranularity = "none"
    method: RecomputeMethod = "uniform"
    num_layers: Optional[int] = Field(default=None, ge=0, description="full: layers per chunk (uniform) or per stage (block)")


class Training(_Strict):
    global_batch_size: int = Field(gt=0)
    micro_batch_size: int = Field(default=1, gt=0)
    precision: Precision = "bf16"
    recompute: Recompute = Field(default_factory=Recompute)
    pipeline_schedule: PipelineSchedule = "1f1b"
    overlap_grad_reduce: bool = False
    overlap_param_gather: bool = False
    tp_comm_overlap: bool = False
    moe_token_dispatcher: Literal["alltoall", "deepep"] = Field(
        default="alltoall", description="EP token dispatcher: alltoall (Megatron --moe-token-dispatcher-type alltoall: "
                                        "one copy per routed expert) or deepep (flex + --moe-enable-deepep: one copy per "
                                        "destination rank, one RDMA copy per destination node)")
    optimizer: Literal["adam", "sgd"] = "adam"
    grad_reduce_in_fp32: bool = True
    train_iters: Optional[int] = None


class Cluster(_Strict):
    gpu: str = "h100-sxm"
    num_nodes: int = Field(default=1, gt=0)
    gpus_per_node: int = Field(default=8, gt=0)

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.gpus_per_node


class Source(_Strict):
    """Where the plan came from, so that writers can edit the native file in place."""

    framework: Framework
    path: Optional[str] = None
    wrapper_path: Optional[str] = None


class Plan(_Strict):
    model: ModelArch
    parallel: Parallelism = Field(default_factory=Parallelism)
    training: Training
    cluster: Cluster = Field(default_factory=Cluster)
    source: Optional[Source] = None

    # ----- derived -----
    @property
    def world_size(self) -> int:
        return self.cluster.world_size

    @property
    def dp(self) -> int:
        p = self.parallel
        return self.world_size // (p.tp * p.cp * p.pp)

    @property
    def expert_dp(self) -> int:
        p = self.parallel
        return self.world_size // (p.expert_tp * p.ep * p.pp)

    @property
    def num_microbatches(self) -> int:
        return self.training.global_batch_size // (self.training.micro_batch_size * self.dp)

    @property
    def tokens_per_iteration(self) -> int:
        return self.training.global_batch_size * self.model.seq_length

    def parallel_summary(self) -> str:
        """One line of the layout, e.g. ``TP=8 PP=4 VPP=5 DP=32 MBS=1 GBS=1024`` (VPP/CP shown when
        above 1, EP for MoE models)."""
        p, t = self.parallel, self.training
        parts = [f"TP={p.tp}", f"PP={p.pp}"] + ([f"VPP={p.vpp}"] if p.vpp > 1 else []) \
            + ([f"CP={p.cp}"] if p.cp > 1 else []) + ([f"EP={p.ep}"] if self.model.is_moe or p.ep > 1 else [])
        return " ".join(parts + [f"DP={self.dp}", f"MBS={t.micro_batch_size}", f"GBS={t.global_batch_size}"])

    def layers_per_stage(self) -> list[int]:
        """Decoder layers on each PP rank (all virtual chunks of that rank summed)."""
        p, L = self.parallel, self.model.num_layers
        if p.pp == 1:
            return [L]
        first, last = p.pipeline_layers_first_stage, p.pipeline_layers_last_stage
        rest = L - (first or 0) - (last or 0)
        middle = p.pp - (first is not None) - (last is not None)
        each = rest // middle if middle else 0
        out = [each] * p.pp
        if first is not None:
            out[0] = first
        if last is not None:
            out[-1] = last
        return out

    @model_validator(mode="after")
    def _check(self) -> "Plan":
        problems = legality_problems(self)
        if problems:
            raise PlanError(*problems[0])
        return self

    def with_changes(self, **section_updates: dict) -> "Plan":
        """A validated copy with fields of sections replaced, e.g. ``parallel={"tp": 4}``."""
        data = self.model_dump()
        for section, upd in section_updates.items():
            if isinstance(upd, dict) and isinstance(data.get(section), dict):
                for k, v in upd.items():
                    if isinstance(v, dict) and isinstance(data[section].get(k), dict):
                        data[section][k].update(v)
                    else:
                        data[section][k] = v
            else:
                data[section] = upd
        return Plan.model_validate(data)


def legality_problems(plan: Plan) -> list[tuple[str, object, str]]:
    """Divisibility rules of Megatron-LM / TorchTitan, as (field, value, what is allowed).

    Sources: megatron/training/arguments.py ``validate_args``, megatron/core/parallel_state.py,
    megatron/core/transformer/transformer_config.py ``__post_init__``.
    """
    m, p, t, c = plan.model, plan.parallel, plan.training, plan.cluster
    out: list[tuple[str, object, str]] = []
    W = c.world_size
    mp = p.tp * p.cp * p.pp
    if W % mp:
        out.append(("parallel", f"tp*cp*pp={mp}", f"must divide world size {W} (nodes x gpus_per_node)"))
        return out
    dp = W // mp
    if m.num_attention_heads % p.tp:
        out.append(("parallel.tp", p.tp, f"must divide num_attention_heads={m.num_attention_heads}"))
    if not m.multi_latent_attention and m.kv_heads % p.tp:
        out.append(("parallel.tp", p.tp, f"must divide num_query_groups={m.kv_heads}"))
    if m.ffn_hidden_size % p.tp:
        out.append(("parallel.tp", p.tp, f"must divide ffn_hidden_size={m.ffn_hidden_size}"))
    if p.sequence_parallel and p.tp == 1:
        out.append(("parallel.sequence_parallel", True, "requires tp > 1"))
    if m.seq_length % (p.cp * (2 if p.cp > 1 else 1)):
        out.append(("parallel.cp", p.cp, f"2*cp must divide seq_length={m.seq_length}"))
    if p.sequence_parallel and (m.seq_length // p.cp) % p.tp:
        out.append(("parallel.tp", p.tp, f"with sequence parallel must divide seq_length/cp={m.seq_length // p.cp}"))
    if m.is_moe:
        if m.num_experts % p.ep:
            out.append(("parallel.ep", p.ep, f"must divide num_experts={m.num_experts}"))
        etp = p.expert_tp
        if W % (etp * p.ep * p.pp):
            out.append(("parallel.ep", p.ep, f"etp*ep*pp={etp * p.ep * p.pp} must divide world size {W}"))
        if (m.expert_ffn % etp):
            out.append(("parallel.etp", etp, f"must divide moe_ffn_hidden_size={m.expert_ffn}"))
        if m.moe_router_topk > m.num_experts:
            out.append(("model.moe_router_topk", m.moe_router_topk, f"must be <= num_experts={m.num_experts}"))
        G, g = m.moe_router_num_groups, m.moe_router_group_topk
        if (G is None) != (g is None):
            out.append(("model.moe_router_group_topk", g, "set together with moe_router_num_groups"))
        elif G is not None:
            if m.num_experts % G:
                out.append(("model.moe_router_num_groups", G, f"must divide num_experts={m.num_experts}"))
            elif g > G or g * (m.num_experts // G) < m.moe_router_topk:
                out.append(("model.moe_router_group_topk", g,
                            f"<= num_groups={G} with group_topk x experts per group >= topk={m.moe_router_topk}"))
    elif p.ep != 1:
        out.append(("parallel.ep", p.ep, "must be 1 for a dense model"))
    if p.vpp > 1 and p.pp == 1:
        out.append(("parallel.vpp", p.vpp, "requires pp > 1"))
    stages = p.pp * p.vpp
    if p.pipeline_layers_first_stage is None and p.pipeline_layers_last_stage is None:
        if m.num_layers % stages:
            out.append(("parallel.pp", p.pp, f"pp*vpp={stages} must divide num_layers={m.num_layers}"))
    else:
        lps = plan.layers_per_stage()
        if sum(lps) != m.num_layers or min(lps) < 0 or any(x % p.vpp for x in lps):
            out.append(("parallel.pipeline_layers_first_stage", p.pipeline_layers_first_stage,
                        f"uneven layout {lps} must sum to num_layers={m.num_layers} with each stage divisible by vpp={p.vpp}"))
    if t.pipeline_schedule == "interleaved_1f1b" and p.vpp == 1 and p.pp > 1:
        out.append(("training.pipeline_schedule", t.pipeline_schedule, "needs vpp > 1"))
    if t.pipeline_schedule == "zbv" and p.pp > 1 and p.vpp != 2:
        out.append(("training.pipeline_schedule", t.pipeline_schedule, "ZBV needs vpp == 2 (two chunks per rank in a V)"))
    # megatron/training/arguments.py validate_args: param-gather overlap needs a sharded optimizer and
    # grad-reduce overlap; TP communication overlap needs sequence parallelism
    if t.overlap_param_gather and (p.dp_sharding == "none" or not t.overlap_grad_reduce):
        out.append(("training.overlap_param_gather", True,
                    "needs dp_sharding optimizer/full and overlap_grad_reduce"))
    if t.tp_comm_overlap and not p.sequence_parallel:
        out.append(("training.tp_comm_overlap", True, "needs sequence_parallel (and tp > 1)"))
    if p.dp_replicate > 1 and dp % p.dp_replicate:
        out.append(("parallel.dp_replicate", p.dp_replicate, f"must divide dp={dp}"))
    if t.global_batch_size % (t.micro_batch_size * dp):
        out.append(("training.global_batch_size", t.global_batch_size,
                    f"must be divisible by micro_batch_size x dp = {t.micro_batch_size} x {dp}"))
    else:
        nmb = t.global_batch_size // (t.micro_batch_size * dp)
        if p.pp > 1 and p.vpp > 1 and t.pipeline_schedule == "interleaved_1f1b" and nmb % p.pp:
            out.append(("training.global_batch_size", t.global_batch_size,
                        f"interleaved schedule needs micro-batches ({nmb}) divisible by pp={p.pp}"))
    r = t.recompute
    if r.granularity == "full" and r.method == "block" and r.num_layers is not None:
        per_chunk = max(plan.layers_per_stage()) // p.vpp
        if r.num_layers > per_chunk:
            out.append(("training.recompute.num_layers", r.num_layers,
                        f"block recompute needs <= layers per model chunk ({per_chunk})"))
    return out


def check_plan(plan: Plan) -> list[str]:
    """Human-readable legality problems (empty when legal)."""
    return [str(PlanError(*p)) for p in legality_problems(plan)]
