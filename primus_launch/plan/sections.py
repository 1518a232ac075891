"""The sections of a :class:`~primus_launch.plan.schema.Plan`: the model architecture, the parallel
layout, the training settings, the target cluster and where the plan was read from, with the named
choices they allow and the one-line :class:`PlanError`.  Field semantics follow Megatron-LM's argument
names where one exists (``megatron/training/arguments.py`` and
``megatron/core/transformer/transformer_config.py``); fields that only one framework has say so.

:class:`PlanSections` is what the layout (:mod:`.layout`) and the legality rules (:mod:`.legality`)
read of a plan, so that they depend on the sections and the plan on them, never the reverse.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Mapping, Optional, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

Precision = Literal["bf16", "fp16", "fp8", "fp4", "fp32"]
Fp8Recipe = Literal["delayed", "tensorwise", "rowwise", "rowwise_with_gw_hp", "blockwise", "mxfp8"]
RecomputeGranularity = Literal["none", "selective", "full", "op"]
RecomputeMethod = Literal["uniform", "block", "every_n", "layer_ids"]
PipelineSchedule = Literal["1f1b", "interleaved_1f1b", "zb_h1", "zbv", "gpipe"]
DPSharding = Literal["none", "optimizer", "optimizer_grads", "full"]
Framework = Literal["megatron", "torchtitan"]
StateDtype = Literal["fp32", "bf16", "fp16", "fp8"]
#: bytes per element of an optimizer state held in each :data:`StateDtype`
STATE_DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}

# Megatron --recompute-modules choices (megatron/core/transformer/transformer_config.py)
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")
# the --recompute-modules that act in a layer's attention block (megatron-core 0.16.1 ``transformer/attention.py``
# ``core_attn`` checkpointing, ``multi_latent_attention.py`` ``mla_up_proj``); the others act in its MLP / MoE part
ATTENTION_RECOMPUTE_MODULES = frozenset({"core_attn", "mla_up_proj"})
# Megatron --cuda-graph-scope / --cuda-graph-modules choices (megatron/training/arguments.py)
CUDA_GRAPH_SCOPES = ("full_iteration", "attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba",
                     "full_iteration_inference")
# Megatron --offload-modules choices of fine-grained activation offloading
OFFLOAD_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act")

GPU_NAMES = (  # the CLI contract's names; projection.hardware.gpus holds their specs
    "a100-sxm-80gb", "a100-sxm-40gb", "h100-sxm", "h100-sxm-96gb-500w", "h200", "b200", "b300", "gb200",
    "gb300", "mi300x", "mi325x", "mi350x", "mi355x")

#: other spellings of the GPU names (a key: lower case, letters and digits only) -> the name: the bare model
#: names NVIDIA / AMD recipes and folders use (``H100``, ``A100``, ``MI355X``) and the SXM form factor spelt out
GPU_ALIASES: dict[str, str] = {
    **{"".join(ch for ch in g if ch.isalnum()): g for g in GPU_NAMES},
    "h100": "h100-sxm", "h100sxm5": "h100-sxm", "h100sxm80gb": "h100-sxm", "h10080gb": "h100-sxm",
    "a100": "a100-sxm-80gb", "a10080gb": "a100-sxm-80gb", "a100sxm": "a100-sxm-80gb", "a10040gb": "a100-sxm-40gb",
    "h200sxm": "h200", "b200sxm": "b200", "b300sxm": "b300",
}


def normalize_gpu(name: str) -> str:
    """The GPU name for a spelling of it (``H100``, ``h100_sxm``, ``MI355X`` -> ``h100-sxm``, ``h100-sxm``,
    ``mi355x``): case, ``-``, ``_``, spaces and dots aside, one of :data:`GPU_ALIASES`.  Any other name is
    returned as given (a GPU a ``--gpu-file`` adds keeps its own spelling; an unknown one is refused where its
    spec is looked up, with the allowed names).  The one normaliser of every reader, the CLI and the plan."""
    if not isinstance(name, str):
        return name
    return GPU_ALIASES.get("".join(ch for ch in name.lower() if ch.isalnum()), name)


class PlanError(ValueError):
    """A user-facing error naming the field, its value and what is allowed (one line)."""

    def __init__(self, field: str, value: object, allowed: str):
        self.field = field
        self.value = value
        self.allowed = allowed
        shown = repr(value)
        if len(shown) > 200:  # a 5,000-digit number or a pasted file: its head and its size, on one readable line
            shown = f"{shown[:60]}... ({len(shown):,} characters)"
        super().__init__(f"{field}={shown}: {allowed}")


# Upper bounds of the sizes and counts a plan may hold: each far above any run trained or planned
# (the largest published models have ~130 layers, hidden 25,600, 262k vocabularies, 10M-token
# contexts, 384 experts; clusters ~100k GPUs), low enough that every per-layer, per-stage and
# per-micro-batch table of the projection stays small.  A value above its bound is refused by
# name when its section is built, before anything allocates in proportion to it; nan / inf are
# refused in every float field.
LIMITS: dict[str, int] = {
    "model.num_layers": 10_000, "model.hidden_size": 2**20, "model.ffn_hidden_size": 2**22,
    "model.num_attention_heads": 2**16, "model.num_query_groups": 2**16, "model.head_dim": 2**16,
    "model.vocab_size": 2**24, "model.make_vocab_size_divisible_by": 2**16, "model.seq_length": 2**24,
    "model.max_position_embeddings": 2**31, "model.window_size": 2**24, "model.num_experts": 2**16,
    "model.moe_router_topk": 2**16, "model.moe_ffn_hidden_size": 2**22,
    "model.moe_shared_expert_intermediate_size": 2**24, "model.moe_dense_first_layers": 10_000,
    "model.moe_router_num_groups": 2**16, "model.moe_router_group_topk": 2**16, "model.q_lora_rank": 2**16,
    "model.kv_lora_rank": 2**16, "model.qk_head_dim": 2**16, "model.qk_pos_emb_head_dim": 2**16,
    "model.v_head_dim": 2**16, "model.mtp_num_layers": 64,
    "model.mamba_state_dim": 2**16, "model.mamba_head_dim": 2**16, "model.mamba_num_heads": 2**20,
    "model.mamba_num_groups": 2**16, "model.moe_latent_size": 2**20,
    "parallel.tp": 2**20, "parallel.pp": 2**20, "parallel.vpp": 10_000, "parallel.microbatch_group": 2**31,
    "parallel.cp": 2**20, "parallel.ep": 2**20, "parallel.etp": 2**20, "parallel.dp_replicate": 2**20,
    "parallel.pipeline_layers_first_stage": 10_000, "parallel.pipeline_layers_last_stage": 10_000,
    "training.global_batch_size": 2**31, "training.micro_batch_size": 2**20, "training.train_iters": 2**62,
    "training.wgrad_deferral_limit": 2**31, "training.muon_num_ns_steps": 10_000,
    "training.bf16_layers_start": 10_000, "training.bf16_layers_end": 10_000,
    "training.recompute.num_layers": 10_000, "training.offload.activation_layers": 10_000,
    "training.offload.optimizer_state_chunk_mb": 2**31,
    "cluster.num_nodes": 2**17, "cluster.gpus_per_node": 2**10, "cluster.nvlink_domain": 2**20,
    "cluster.power_limit_w": 100_000,
}
LIMIT_PATTERN_CHARS = 200_000   # a string field (a Megatron layout string before it is expanded)
LIMIT_ENTRIES = 10_064          # a tuple field (per-layer patterns, recompute ids: layers + MTP depths)


def _check_limits(obj: BaseModel, section: str) -> None:
    """Refuse a field of ``obj`` above its :data:`LIMITS` bound (or a negative count), a tuple
    longer than :data:`LIMIT_ENTRIES` or a layout string longer than :data:`LIMIT_PATTERN_CHARS`."""
    for name in type(obj).model_fields:
        key = f"{section}.{name}"
        v = getattr(obj, name)
        if isinstance(v, tuple) and len(v) > LIMIT_ENTRIES:
            raise PlanError(key, f"{len(v):,} entries", f"at most {LIMIT_ENTRIES:,}")
        if isinstance(v, str) and len(v) > LIMIT_PATTERN_CHARS:
            raise PlanError(key, f"{len(v):,} characters", f"at most {LIMIT_PATTERN_CHARS:,}")
        hi = LIMITS.get(key)
        if hi is None or v is None or isinstance(v, bool):
            continue
        if v > hi:
            raise PlanError(key, v, f"at most {hi:,} (the projection's bound; far above any real run)")
        if v < 0:
            raise PlanError(key, v, "must be >= 0")


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False, allow_inf_nan=False)


class BoundedSection(StrictModel):
    """A plan section whose fields are held to :data:`LIMITS` (:func:`_check_limits`) once validated;
    ``limits_section`` is the section its fields' keys start with (``"training.recompute"``)."""

    limits_section: ClassVar[str]

    @model_validator(mode="after")
    def _bounded(self) -> "BoundedSection":
        _check_limits(self, self.limits_section)
        return self


class ModelArch(BoundedSection):
    """Transformer architecture (decoder-only GPT family, optionally MoE, MLA, MTP, sliding window)."""

    limits_section: ClassVar[str] = "model"

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
    swiglu: bool = Field(default=True, description="gated linear unit (Megatron gated_linear_unit: SwiGLU, GeGLU, "
                                                   "quick-GeGLU): FC1 is twice as wide; the gate's function is "
                                                   "`activation`")
    activation: Literal["silu", "gelu", "quick_gelu", "relu", "squared_relu"] = Field(
        default="silu", description="MLP activation (Megatron activation_func; --swiglu = gated silu, --quick-geglu = "
                                    "gated quick_gelu, --squared-relu)")
    activation_clamp: Optional[float] = Field(
        default=None, gt=0, description="clamp of the gated activation's inputs (Megatron --activation-func-clamp-value; "
                                        "GPT-OSS 7.0): the glu half to <= c, the linear half to [-c, c]")
    untie_embeddings_and_output_weights: bool = True
    normalization: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    add_bias_linear: bool = False
    add_qkv_bias: bool = False
    qk_layernorm: bool = False
    position_embedding: Literal["rope", "yarn", "learned", "none"] = "rope"
    softmax_type: Literal["vanilla", "off-by-one", "learnable"] = Field(
        default="vanilla", description="attention softmax (Megatron --softmax-type; learnable = per-head sinks, GPT-OSS)")
    window_size: Optional[int] = Field(
        default=None, gt=0, description="sliding-window attention: keys attended to the left of each query "
                                        "(Megatron --window-size L,0); None = full causal attention")
    window_layer_pattern: Optional[tuple[int, ...]] = Field(
        default=None, description="1 = sliding-window layer, 0 = full attention, one per decoder layer "
                                  "(Megatron --window-attn-skip-freq); None = every layer windowed when window_size")
    attention_dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Megatron default 0.1; the mask is memory")
    hidden_dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Megatron default 0.1; the masks are memory")
    # --- MoE ---
    num_experts: Optional[int] = Field(default=None, gt=0)
    moe_router_topk: int = Field(default=2, gt=0)
    moe_ffn_hidden_size: Optional[int] = Field(default=None, gt=0)
    moe_shared_expert_intermediate_size: int = Field(default=0, ge=0, description="total FFN size of shared experts")
    moe_dense_first_layers: int = Field(default=0, ge=0, description="leading dense layers (DeepSeek first_k_dense)")
    moe_layer_pattern: Optional[tuple[int, ...]] = Field(
        default=None, description="1 = MoE layer, 0 = dense, one per decoder layer (Megatron --moe-layer-freq as a "
                                  "list or every-N); None = MoE after moe_dense_first_layers")
    moe_latent_size: Optional[int] = Field(
        default=None, gt=0, description="latent MoE (Megatron --moe-latent-size; Nemotron 3 Super / Ultra): the routed "
                                        "experts run in a width-l latent space -- fc1_latent_proj h -> l before the "
                                        "dispatch, fc2_latent_proj l -> h after the combine (megatron-core "
                                        "moe/moe_layer.py), dispatch / combine carry l-wide tokens; shared experts "
                                        "stay h-wide. None = experts on the hidden size")
    moe_fused_weighted_squared_relu: bool = Field(
        default=False, description="Megatron --use-fused-weighted-squared-relu (megatron-core 0.16.1 "
                                   "fusions/fused_weighted_squared_relu.py): the experts' squared ReLU and routing-"
                                   "probability multiply in one autograd function that saves its input and the "
                                   "probabilities only (no act(x) copy kept)")
    moe_router_bias: bool = False
    moe_score_before_experts: bool = Field(
        default=False, description="TorchTitan MoEArgs.score_before_experts: the routing scores multiply the "
                                   "routed tokens before the experts (torchtitan v0.2 llama4 flavors) instead of "
                                   "weighting the experts' outputs (DeepSeek-V3, Qwen3, Megatron)")
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
    # --- multi-token prediction (DeepSeek-V3; Megatron --mtp-num-layers) ---
    mtp_num_layers: int = Field(default=0, ge=0, description="MTP modules after the decoder (each: a transformer "
                                                            "layer, its projection, and its own output head + loss)")
    # --- hybrid Mamba-2 / attention stacks (Megatron pretrain_mamba.py / HybridModel; Nemotron-H, Nemotron 3) ---
    hybrid_pattern: Optional[str] = Field(
        default=None, description="one symbol per decoder layer (Megatron --hybrid-override-pattern, megatron-core "
                                  "ssm/mamba_hybrid_layer_allocation.py Symbols): M = Mamba-2 mixer, * = self-attention, "
                                  "- = dense MLP, E = MoE; each symbol is a whole layer (its own norm and residual). "
                                  "None = a GPT stack (every layer attention + MLP / MoE)")
    mamba_state_dim: int = Field(default=128, gt=0, description="SSM state size N (Megatron --mamba-state-dim)")
    mamba_head_dim: int = Field(default=64, gt=0, description="Mamba-2 head dim P (Megatron --mamba-head-dim)")
    mamba_num_heads: Optional[int] = Field(
        default=None, gt=0, description="Mamba-2 heads H (Megatron --mamba-num-heads); None = 2 * hidden / head_dim "
                                        "(MambaMixer expand = 2)")
    mamba_num_groups: int = Field(default=8, gt=0, description="B / C groups G (Megatron --mamba-num-groups)")
    hybrid_mtp_pattern: Optional[str] = Field(
        default=None, description="a hybrid stack's MTP layer symbols per depth (Megatron --hybrid-layer-pattern "
                                  "'<main>/<mtp>/<mtp>', megatron-core models/hybrid/hybrid_layer_allocation.py "
                                  "parse_hybrid_pattern; Nemotron 3 Super '*E'); mtp_num_layers depths of it")

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    @property
    def is_hybrid(self) -> bool:
        """A hybrid Mamba / attention stack (``hybrid_pattern`` set)."""
        return self.hybrid_pattern is not None

    def layer_symbol(self, layer: int) -> str:
        """The hybrid symbol of decoder layer ``layer`` (0-based; ``M`` / ``*`` / ``-`` / ``E``), or ``T`` for a
        GPT transformer layer (attention + MLP / MoE) when the stack is not hybrid."""
        return self.hybrid_pattern[layer] if self.hybrid_pattern is not None else "T"

    @property
    def mamba_heads(self) -> int:
        """Mamba-2 heads H: ``mamba_num_heads`` or ``2 * hidden / head_dim`` (megatron-core 0.16.1
        ``ssm/mamba_mixer.py``: ``d_inner = expand * d_model``, ``nheads = d_inner // headdim``, expand 2)."""
        return self.mamba_num_heads or 2 * self.hidden_size // self.mamba_head_dim

    @property
    def mamba_d_inner(self) -> int:
        """Mamba-2 inner width ``H * P`` (megatron-core 0.16.1 ``MambaMixer.d_inner``)."""
        return self.mamba_heads * self.mamba_head_dim

    @property
    def kv_heads(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def kv_channels(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    def is_moe_layer(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` (0-based) has routed experts (Megatron ``moe_layer_freq``; a hybrid
        stack's ``E`` layers)."""
        if not self.is_moe:
            return False
        if self.hybrid_pattern is not None:
            return self.hybrid_pattern[layer] == "E"
        if self.moe_layer_pattern is not None:
            return bool(self.moe_layer_pattern[layer])
        return layer >= self.moe_dense_first_layers

    def is_window_layer(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` (0-based) uses sliding-window attention (Megatron
        ``transformer/utils.py is_layer_window_attention``)."""
        if self.window_size is None:
            return False
        return True if self.window_layer_pattern is None else bool(self.window_layer_pattern[layer])

    @property
    def num_moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        if self.hybrid_pattern is not None:
            return self.hybrid_pattern.count("E")
        if self.moe_layer_pattern is not None:
            return sum(1 for x in self.moe_layer_pattern if x)
        return self.num_layers - self.moe_dense_first_layers

    @property
    def num_window_layers(self) -> int:
        return sum(1 for i in range(self.num_layers) if self.is_window_layer(i))

    @property
    def expert_hidden(self) -> int:
        """The width the routed experts see and the dispatcher moves: ``moe_latent_size`` or ``hidden_size``."""
        return self.moe_latent_size or self.hidden_size

    @property
    def expert_ffn(self) -> int:
        return self.moe_ffn_hidden_size or self.ffn_hidden_size

    def padded_vocab_size(self, tp: int) -> int:
        """Megatron ``_vocab_size_with_padding``: round up to ``divisible_by * tp``."""
        m = self.make_vocab_size_divisible_by * tp
        return -(-self.vocab_size // m) * m if self.make_vocab_size_divisible_by > 1 else self.vocab_size


class Parallelism(BoundedSection):
    """Parallel degrees; DP is derived from the cluster's world size."""

    limits_section: ClassVar[str] = "parallel"

    tp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    vpp: int = Field(default=1, gt=0, description="virtual pipeline stages per PP rank (model chunks)")
    microbatch_group: Optional[int] = Field(
        default=None, gt=0, description="Megatron --microbatch-group-size-per-virtual-pipeline-stage: consecutive "
                                        "micro-batches each rank runs through one model chunk before the next "
                                        "(interleaved schedule; None = pp)")
    cp: int = Field(default=1, gt=0)
    ep: int = Field(default=1, gt=0)
    etp: Optional[int] = Field(default=None, gt=0, description="expert TP; None = same as tp")
    sequence_parallel: bool = False
    cp_comm_type: Literal["p2p", "a2a", "allgather", "a2a+p2p"] = Field(
        default="p2p", description="context-parallel attention: p2p ring (Megatron default), a2a (Ulysses), "
                                   "allgather of K/V (TorchTitan / Megatron allgather), hierarchical a2a+p2p")
    dp_sharding: DPSharding = Field(
        default="none", description="none | optimizer (Megatron distributed optimizer, ZeRO-1) | optimizer_grads "
                                    "(Megatron-FSDP optim_grads, ZeRO-2) | full (FSDP / ZeRO-3)")
    dp_replicate: int = Field(default=1, gt=0, description="HSDP replicate groups (torchtitan), or Megatron's "
                                                      "--num-distributed-optimizer-instances (partial distributed "
                                                      "optimizer); shard group = dp / dp_replicate")
    fsdp_impl: Literal["megatron_fsdp", "torch_fsdp2"] = Field(
        default="megatron_fsdp", description="Megatron plans with dp_sharding full: Megatron-FSDP (--use-megatron-fsdp, "
                                             "gradients in its main-grad buffers) or torch FSDP2 (--use-torch-fsdp2: "
                                             "gradients in the parameters' dtype, fp32 copies made at the optimizer "
                                             "step); TorchTitan plans always run torch FSDP2 (memory only)")
    fsdp_reshard_after_forward: Literal["default", "always", "never"] = Field(
        default="default", description="FSDP2 reshard_after_forward policy (torchtitan parallelism."
                                       "fsdp_reshard_after_forward: default = reshard unless pipeline parallel)")
    fsdp_pp_grad_sync: Literal["schedule", "microbatch"] = Field(
        default="schedule", description="FSDP2 under torch pipelining (pp > 1, dp_sharding full): 'schedule' = the "
                                        "stage module is the FSDP root, so torch.distributed.pipelining's "
                                        "backward_maybe_with_nosync turns gradient sync and reshard-after-backward "
                                        "off and the stage's gradients are reduce-scattered once per schedule "
                                        "(TorchTitan); 'microbatch' = it is not (NeMo AutoModel's MoE parallelizer "
                                        "shards model.model, blocks, experts, embedding, lm_head but not the stage "
                                        "module), so FSDP2's defaults run on every micro-batch: gradients "
                                        "reduce-scattered and parameters resharded in each backward, gathered again "
                                        "in the next forward (priced in time; the memory estimate does not "
                                        "distinguish the two)")
    # where layers sit in the pipeline (plan.layout resolves these; at most one way is used)
    pipeline_layout: Optional[str] = Field(
        default=None, description="Megatron --pipeline-model-parallel-layout: one entry per virtual stage "
                                  "(pp*vpp, '|'-separated) of E (embedding), t (decoder layer), m (MTP layer), "
                                  "L (loss); '*N' repeats, parentheses group. Also how uneven TorchTitan splits "
                                  "are stated.")
    pipeline_layers_first_stage: Optional[int] = Field(default=None, description="--decoder-first-pipeline-num-layers")
    pipeline_layers_last_stage: Optional[int] = Field(default=None, description="--decoder-last-pipeline-num-layers")
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False

    @property
    def expert_tp(self) -> int:
        return self.etp if self.etp is not None else self.tp


class Recompute(BoundedSection):
    """Activation recomputation (Megatron ``--recompute-*``; TorchTitan ``activation_checkpoint``).

    - ``selective``: Megatron's selective recompute of ``modules`` (default core attention);
    - ``full``: whole layers, ``uniform`` (groups of ``num_layers``: every layer recomputed), ``block``
      (the first ``num_layers`` of each chunk; more than the chunk holds = all of it, as Megatron
      accepts), ``every_n`` (every ``num_layers``-th layer, TorchTitan ``selective_ac_option = "N"``) or
      ``layer_ids`` (AMD Primus ``recompute_layer_ids``: exactly the layers whose global 0-based id is in
      ``layer_ids``, each its own checkpoint; ids ``num_layers .. num_layers + mtp_num_layers - 1`` are the
      MTP depths; Primus ``primus/backends/megatron/patches/recompute_layer_patches.py``);
    - ``op``: TorchTitan's per-op selective checkpointing (``selective_ac_option = "op"``): saves the
      outputs on its save list (matmuls except every second one, attention, reductions) and
      recomputes the rest.
    """

    limits_section: ClassVar[str] = "training.recompute"

    granularity: RecomputeGranularity = "none"
    method: RecomputeMethod = "uniform"
    num_layers: Optional[int] = Field(default=None, ge=0, description="full: group size (uniform), layers per chunk "
                                                                      "(block) or the period (every_n)")
    modules: tuple[str, ...] = Field(default=("core_attn",), description="selective: Megatron --recompute-modules")
    layer_ids: tuple[int, ...] = Field(default=(), description="full with method layer_ids: the recomputed layers' "
                                                               "global 0-based ids, sorted and unique (Primus "
                                                               "recompute_layer_ids; MTP depth d = num_layers + d)")


class Offload(BoundedSection):
    """Host offloading (Megatron ``--cpu-offloading*``, ``--fine-grained-activation-offloading``,
    ``--optimizer-cpu-offload``, ``--chunked-optimizer-state-offload``)."""

    limits_section: ClassVar[str] = "training.offload"

    activation_layers: int = Field(default=0, ge=0, description="--cpu-offloading-num-layers: layers whose "
                                                                "activations go to host memory")
    weights: bool = Field(default=False, description="--cpu-offloading-weights")
    activation_modules: tuple[str, ...] = Field(default=(), description="--offload-modules of fine-grained "
                                                                        "activation offloading")
    optimizer_fraction: float = Field(default=0.0, ge=0.0, le=1.0, description="--optimizer-cpu-offload with "
                                                                              "--optimizer-offload-fraction")
    optimizer_state_fraction: float = Field(
        default=0.0, ge=0.0, le=1.0,
        description="--chunked-optimizer-state-offload (Megatron-LM dev, or its deprecated spelling "
                    "--offload-optimizer-states) with --optimizer-state-offload-fraction: the byte fraction of "
                    "the optimizer's (master weight, Adam moments) bundles kept in pinned host memory between "
                    "steps; the update still runs on the GPU, chunk by chunk (memory/mcore.py, cost/optimizer.py)")
    optimizer_state_chunk_mb: int = Field(
        default=0, ge=0,
        description="--optimizer-state-offload-chunk-size-mb: target MiB of one GPU staging window of offloaded "
                    "optimizer tensor state (0 = all selected state restored at once); the master weights are "
                    "always restored in one full window")


class Training(BoundedSection):
    limits_section: ClassVar[str] = "training"

    global_batch_size: int = Field(gt=0)
    micro_batch_size: int = Field(default=1, gt=0)
    precision: Precision = "bf16"
    fp8_recipe: Optional[Fp8Recipe] = Field(
        default=None, description="with precision fp8: delayed / tensorwise (current scaling) / blockwise / "
                                  "mxfp8 (TE, Megatron --fp8-recipe), rowwise (torchao); None = the framework's "
                                  "default (Megatron delayed, TorchTitan tensorwise)")
    fp8_param_gather: bool = Field(default=False, description="FP8 weights all-gathered / kept (Megatron --fp8-param-gather)")
    fp8_attention: bool = Field(
        default=False, description="with precision fp8: core attention in FP8 / MXFP8 (Megatron TransformerConfig "
                                   "fp8_dot_product_attention, TE fp8_dpa): priced from cudnn-frontend's FP8 / BF16 "
                                   "kernel-time ratios (cost/fp8_attention.py)")
    bf16_linears: tuple[Literal["wq", "wk", "wv", "wo", "experts"], ...] = Field(
        default=(), description="linears the low-precision recipe leaves in BF16: attention linears (TorchTitan "
                                "float8 / MX converters' filter_fqns, e.g. attention.wk / attention.wv) and "
                                "experts = the routed experts' grouped GEMMs (TorchTitan float8 / MX without a "
                                "grouped-experts converter: torch._grouped_mm in BF16, no quantize kernels)")
    mx_dim1_cast_kernel: Literal["cuda", "triton", "torch"] = Field(
        default="cuda", description="torchao MXFP8 linears (TorchTitan v0.1 / v0.2 MX converter): the kernel of the "
                                    "dim1 (column-wise) casts of the backward (mxfp8_dim1_cast_kernel_choice, default "
                                    "triton there; torchao's recipes and TorchTitan 0.3: cuda); triton / torch run "
                                    "slower (cost/fp8.py mx_dim1_extra_bytes)")
    fp8_weight_transpose_cache: bool = Field(
        default=True, description="Transformer Engine keeps each linear's transposed (columnwise) fp8 weight in its "
                                  "workspace across micro-batches; False = ROCm TE keep_fp8_weight_transpose_cache="
                                  "False (Primus no_fp8_weight_transpose_cache): the transpose is made in each "
                                  "backward and freed (memory only)")
    lowp_params_dtype: Optional[Literal["fp16", "fp32"]] = Field(
        default=None, description="with precision fp8 / fp4: the dtype of the parameters and of the activations "
                                  "between the low-precision GEMMs when it is not bf16 (Megatron params_dtype: fp16 "
                                  "with --fp16, fp32 with neither --bf16 nor --fp16; None = bf16)")
    fp4_recipe: Optional[Literal["nvfp4"]] = Field(default=None, description="with precision fp4 (Megatron --fp4-recipe)")
    fp4_layer_pattern: Optional[tuple[int, ...]] = Field(
        default=None, description="with precision fp4: 1 = the decoder layer's linears run in fp4, 0 = in bf16, one per "
                                  "decoder layer (torchtitan NVFP4LinearConverter fqns 'layers.N.'); None = every layer")
    bf16_layers_start: int = Field(
        default=0, ge=0, description="with precision fp8 / fp4 (Megatron): the first N decoder layers run outside the "
                                     "FP8 / FP4 context, in BF16 (--first-last-layers-bf16 with "
                                     "--num-layers-at-start-in-bf16 N; megatron-core fp8_utils.py "
                                     "is_first_last_bf16_layer, global layer ids)")
    bf16_layers_end: int = Field(
        default=0, ge=0, description="with precision fp8 / fp4 (Megatron): the last M decoder layers run in BF16 "
                                     "(--num-layers-at-end-in-bf16 M); MTP layers keep the global FP8 context")
    recompute: Recompute = Field(default_factory=Recompute)
    offload: Offload = Field(default_factory=Offload)
    pipeline_schedule: PipelineSchedule = "1f1b"
    overlap_grad_reduce: bool = False
    overlap_param_gather: bool = False
    align_grad_reduce: bool = Field(default=True, description="Megatron-LM's interleaved schedule launches each model "
                                    "chunk's gradient reduce-scatter after its last backward, all PP stages together "
                                    "(config.grad_sync_func); False = --no-align-grad-reduce: buckets as their "
                                    "gradients are ready in that backward")
    align_param_gather: bool = Field(default=True, description="Megatron-LM's interleaved schedule dispatches model "
                                     "chunk q's parameter all-gather ahead of its first forward (config.param_sync_func); "
                                     "False = --no-align-param-gather: at its first forward's pre-hook")
    tp_comm_overlap: bool = Field(default=False, description="Megatron --tp-comm-overlap (TE userbuffers) / "
                                                             "TorchTitan async TP")
    tp_comm_overlap_cfg: tuple[tuple[str, str, int, bool], ...] = Field(
        default=(), description="TE userbuffers settings that differ from TE's defaults, per layer GEMM: "
                                "(name e.g. qkv_dgrad / proj_fprop, method ring_exchange / pipeline / bulk, "
                                "num_sm, set_sm_margin) (Megatron --tp-comm-overlap-cfg YAML; Megatron-Bridge "
                                "CommOverlapConfig.tp_comm_overlap_cfg); () = TE's defaults")
    tp_async_backward: bool = Field(default=True, description="Megatron's column-parallel linears run their "
                                    "backward TP collectives asynchronously behind the dgrad / wgrad GEMMs (Megatron-LM "
                                    "since 2021-09, TE); False = --no-async-tensor-model-parallel-allreduce or an "
                                    "older Megatron")
    gradient_accumulation_fusion: bool = Field(
        default=True, description="Megatron's linears accumulate their weight gradient into main_grad inside the "
                                  "wgrad GEMM (APEX fused_weight_gradient_mlp_cuda / TE fuse_wgrad_accumulation, "
                                  "the default); False = --no-gradient-accumulation-fusion: the GEMM writes a fresh "
                                  "gradient that the DDP / Megatron-FSDP hook adds (copies) into main_grad, one "
                                  "kernel per weight and micro-batch (cost/wgrad_accumulation.py)")
    attention_backend: Literal["auto", "flash", "fused", "unfused", "local"] = Field(
        default="auto", description="Megatron --attention-backend: flash (FlashAttention), fused (cuDNN via TE), "
                                    "unfused (materialised s x s scores), local (megatron-core local spec)")
    cuda_graph_impl: Literal["none", "local", "transformer_engine"] = Field(
        default="none", description="Megatron --cuda-graph-impl (--enable-cuda-graph = local; "
                                    "--external-cuda-graph = transformer_engine)")
    cuda_graph_scope: tuple[str, ...] = Field(default=(), description="Megatron --cuda-graph-scope / --cuda-graph-"
                                                                      "modules; () = whole layers")
    cuda_graph_warmup_steps: int = Field(
        default=3, ge=0, description="Megatron --cuda-graph-warmup-steps: eager steps before the capture; 0 = captured "
                                     "before the first step, so the ungraphed peak never runs (memory.te_graphs)")
    compile: bool = Field(default=False, description="torch.compile of the model (TorchTitan compile.enable)")
    compile_loss: bool = Field(default=False, description="TorchTitan: the loss torch.compile'd too (0.3 compile.components "
                                                          "'loss'; v0.2 training.compile; memory only)")
    loss_chunks: int = Field(default=1, ge=1, description="TorchTitan: sequence chunks the lm_head + loss run in, "
                                                         "each with its own backward (0.3 ChunkedLossWrapper "
                                                         "num_chunks); 1 = one full-sequence loss; memory only.  "
                                                         "loss_impl fla_linear: the num_chunks asked of FLA's "
                                                         "FusedLinearCrossEntropyLoss (token chunks; FLA caps it "
                                                         "at ceil(V / h) and rounds the chunk to a power of 2)")
    loss_impl: Literal["framework", "fla_linear", "fla"] = Field(
        default="framework",
        description="the output layer + loss implementation: framework = the trainer's own (Megatron: "
                    "cross_entropy_loss_fusion / cross_entropy_fusion_impl say which); fla_linear = "
                    "flash-linear-attention's FusedLinearCrossEntropyLoss (output GEMM, loss and both gradients "
                    "computed in the forward, loss_chunks token chunks, fp32 weight-gradient accumulator; Primus "
                    "MambaModel fused_ce_mode 1); fla = FLA's FusedCrossEntropyLoss on materialised bf16 logits, "
                    "gradient written into them (Primus fused_ce_mode 2); memory.activations / cost.stage_extras")
    moe_glue_eager: bool = Field(
        default=False, description="TorchTitan v0.2's MoE: MoE.forward's routing glue and the expert-parallel "
                                   "permute / unpermute run eager, with compile.enable too (an MoE block is "
                                   "compiled submodule by submodule, torchtitan PR #1895; cost/titan_moe.py); "
                                   "torchtitan 0.3 compiles the whole block")
    moe_a2a_collective: Literal["functional", "c10d"] = Field(
        default="functional", description="TorchTitan: the collective its eager all-to-all dispatcher sends the EP "
                                          "tokens with: functional (_c10d_functional.all_to_all_single, on per-op "
                                          "SAC's save list: v0.1 / v0.2, and 0.3 with parallelism.spmd_backend "
                                          "partial_dtensor / full_dtensor) or c10d (0.3's default spmd_types backend: "
                                          "torch.distributed.all_to_all inside spmd_types' autograd Function, not "
                                          "on the list: per-op SAC keeps neither all-to-all output and re-runs "
                                          "the layer's forward exchanges in its backward; also the spelling of a "
                                          "torchtitan build whose save list has no all-to-all: main before "
                                          "ab95c7031 / c4e229115, 2025-09-06, whose token exchange was until "
                                          "093347271, 2025-08-29, an autograd.Function over "
                                          "torch.distributed.all_to_all_single); a compiled block always "
                                          "traces the functional one (cost/titan_sac.py op_sac_keeps_ep_a2a)")
    moe_token_dispatcher: Literal["alltoall", "allgather", "deepep", "hybridep"] = Field(
        default="alltoall", description="EP token dispatcher: alltoall (one copy per routed expert), allgather, "
                                        "deepep / hybridep (Megatron flex dispatcher backends: one copy per "
                                        "destination rank, one RDMA copy per destination node)")
    moe_grouped_gemm: bool = Field(default=True, description="experts as one grouped GEMM (Megatron --moe-grouped-gemm; "
                                                             "off = one GEMM per local expert)")
    moe_expert_gemm: Literal["te", "legacy", "turbo", "te_fused"] = Field(
        default="te", description="how the grouped experts' GEMMs run (with moe_grouped_gemm): te = Transformer "
                                  "Engine GroupedLinear (TE / TE-ROCm: one BLAS GEMM per local expert on four "
                                  "streams); legacy = the grouped_gemm library of Megatron's GroupedMLP "
                                  "(--moe-use-legacy-grouped-gemm: one cuBLAS / hipBLAS GEMM per local expert on four "
                                  "streams, BF16 only); turbo = Primus-Turbo's grouped GEMM (use_turbo_grouped_gemm: "
                                  "one CK / hipBLASLt kernel over all experts, group sizes on the device); te_fused = "
                                  "Megatron's TE op-fuser grouped MLP (--use-transformer-engine-op-fuser with "
                                  "NVTE_CUTEDSL_FUSED_GROUPED_MLP=1: FC1 / activation / FC2 as cudnn-frontend's "
                                  "CuTeDSL grouped GEMM kernels, the activation, its clamp, the router-probability "
                                  "scale and the biases in their epilogues)")
    moe_sync_free: bool = Field(
        default=False, description="the MoE token dispatcher never waits on the host for routed-token counts "
                                   "(Primus-Turbo sync-free MoE stage >= 2: DeepEP with device token counts and a "
                                   "worst-case token budget, grouped GEMM with device group sizes); False = "
                                   "Megatron's dispatchers, which synchronise once per MoE layer forward")
    moe_permute_fusion: bool = Field(default=True, description="fused token permutation (Megatron --moe-permute-fusion)")
    moe_router_padding_for_quantization: bool = Field(
        default=False, description="Megatron --moe-router-padding-for-quantization (or its alias "
                                   "--moe-router-padding-for-fp8): the routing map is padded so every expert's token "
                                   "count is a multiple of the FP8 / FP4 GEMM alignment; off = TEGroupedMLP pads and "
                                   "unpads the experts' input and output with TE Fp8Padding where the dispatcher left "
                                   "them unaligned (all-to-all / all-gather)")
    moe_dispatcher_num_sms: Optional[int] = Field(
        default=None, ge=1, description="SMs the DeepEP / HybridEP dispatch and combine kernels take (Megatron "
                                        "--moe-flex-dispatcher-num-sms, or the deprecated --moe-deepep-num-sms / "
                                        "--moe-hybridep-num-sms it routes); None: the library default (DeepEP 20; "
                                        "HybridEP 24 inside one NVLink domain, 8 across)")
    moe_hybridep_combine_chunk: Optional[int] = Field(
        default=None, ge=1, description="tokens per chunk of HybridEP's combine kernel (DeepEP hybrid-ep's "
                                        "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API in the launch environment; Megatron "
                                        "passes none): 128 before DeepEP a0d27f1 (2026-03-31), 64 from it on, "
                                        "Megatron-Bridge's launcher sets 128 on its HybridEP recipes; None: DeepEP's "
                                        "current default, 64.  The unfused combine runs up to 1.66x slower at 64 "
                                        "(cost/hybridep_chunk.py)")
    moe_router_force_load_balancing: bool = Field(
        default=False, description="balanced routing forced (benchmarks): no busiest-EP-rank excess in the time "
                                   "(cost/moe_imbalance.py prices it otherwise); the memory model takes the "
                                   "average rank in every mode")
    moe_force_round_robin: bool = Field(
        default=False, description="with moe_router_force_load_balancing and the deepep dispatcher: the forced "
                                   "routing is Primus-Turbo's DeepEP dispatcher's round robin, token i to the k "
                                   "consecutive experts from i*k mod E (Primus core/extensions/primus_turbo.py "
                                   "PrimusTurboDeepEPTokenDispatcher.dispatch_preprocess, since 627b2454: "
                                   "token_indices = arange(T*k).view(T, k) % E; since 253b3322 only with "
                                   "moe_router_force_load_balancing_type even, its default), not Megatron's random "
                                   "logits")
    moe_router_fusion: bool = Field(default=False, description="TE fused router top-k / score / aux-loss kernels "
                                                               "(Megatron --moe-router-fusion, default off)")
    moe_router_aux_loss: bool = Field(default=True, description="router adds a load-balancing loss (Megatron "
                                                                "--moe-router-load-balancing-type other than none; "
                                                                "default aux_loss)")
    moe_router_fp32: bool = Field(default=False, description="router GEMM / scores in fp32 (Megatron "
                                                             "--moe-router-dtype fp32 or fp64)")
    overlap_moe_expert_parallel_comm: bool = Field(
        default=False, description="EP all-to-all overlapped with another micro-batch's compute (Megatron "
                                   "--overlap-moe-expert-parallel-comm)")
    delay_wgrad_compute: bool = Field(default=False, description="Megatron --delay-wgrad-compute")
    defer_embedding_wgrad: bool = Field(
        default=False, description="Megatron --defer-embedding-wgrad-compute (PP > 1): the output layer's weight-"
                                   "gradient GEMMs wait for the pipeline flush, so the last stage keeps each "
                                   "deferred micro-batch's logits gradient and output-layer input until then")
    wgrad_deferral_limit: int = Field(default=0, ge=0, description="Megatron --wgrad-deferral-limit: micro-batches "
                                                                  "per iteration whose output-layer wgrad is "
                                                                  "deferred (0 = all)")
    moe_expert_rank_capacity_factor: Optional[float] = Field(
        default=None, gt=0, description="Megatron --moe-expert-rank-capacity-factor (main / dev): static-shape MoE "
                                        "dispatch, each EP rank receives at most this factor x the balanced count of "
                                        "routed tokens (HybridEP budget); None = dropless, routed-token-sized buffers")
    moe_expert_capacity_factor: Optional[float] = Field(
        default=None, gt=0, description="Megatron --moe-expert-capacity-factor (NeMo's MegatronTokenDropCallback): "
                                        "each expert keeps at most ceil(factor x the balanced count) of a rank's "
                                        "routed tokens (the rest dropped, moe_utils.topk_routing_with_score_function"
                                        "); None = dropless")
    moe_pad_expert_input_to_capacity: bool = Field(
        default=False, description="Megatron --moe-pad-expert-input-to-capacity (needs the capacity factor): every "
                                   "expert's input padded to exactly its capacity (the alltoall dispatcher's "
                                   "drop_and_pad: static counts, no host-device sync)")
    moe_paged_stash: bool = Field(default=False, description="Megatron --moe-paged-stash (main / dev): the fused "
                                                             "grouped experts' saved tensors kept in paged CUDA buffers")
    moe_paged_stash_buffer_factor: float = Field(
        default=1.10, description="Megatron --moe-paged-stash-buffer-size-factor-cuda: the paged stash's CUDA "
                                  "buffer over the balanced in-flight tokens (negative: over the measured maximum)")
    moe_shared_expert_overlap: bool = Field(default=False, description="Megatron --moe-shared-expert-overlap")
    dataloader_attention_mask: bool = Field(
        default=True, description="the dataloader's batch carries the [1, s, s] causal mask of each sample "
                                  "(megatron-core GPTDatasetConfig create_attention_mask, default True; Megatron "
                                  "--no-create-attention-mask-in-dataloader = False): kept on the GPU for every "
                                  "micro-batch by a full-iteration CUDA graph")
    cross_entropy_loss_fusion: bool = Field(default=False, description="Megatron --cross-entropy-loss-fusion")
    cross_entropy_fusion_impl: Literal["native", "te"] = Field(
        default="native", description="Megatron --cross-entropy-fusion-impl: native (megatron's fused kernel keeps "
                                      "the fp32 softmax) or te (TE's kernel writes the gradient into the logits)")
    rope_fusion: bool = Field(default=True, description="fused RoPE kernel in the Megatron / TE profile (Megatron "
                                                        "apply_rope_fusion; --no-rope-fusion = False); False = the "
                                                        "eager fp32 complex-multiply RoPE")
    optimizer: Literal["adam", "sgd", "muon"] = Field(
        default="adam", description="adam | sgd | muon (Megatron --optimizer muon / dist_muon: Newton-Schulz "
                                    "orthogonalised momentum on the 2-D weights, --muon-scalar-optimizer on the "
                                    "rest; projection/memory/muon.py, projection/cost/muon.py)")
    muon_layer_wise: bool = Field(
        default=False, description="Megatron --optimizer dist_muon: LayerWiseDistributedOptimizer, whole "
                                   "parameters dealt to the DP x CP (experts: expert-DP) ranks by size, updated "
                                   "by their owner and all-gathered after the step; False = every rank updates "
                                   "every parameter (--optimizer muon)")
    muon_num_ns_steps: int = Field(default=5, ge=1, description="Megatron --muon-num-ns-steps: "
                                   "Newton-Schulz iterations per 2-D weight and step")
    muon_tp_mode: Literal["blockwise", "duplicated", "distributed"] = Field(
        default="blockwise", description="Megatron --muon-tp-mode: blockwise (each TP rank orthogonalises its "
                                         "shard), duplicated (the shards all-gathered, every TP rank runs the whole "
                                         "matrix), distributed (X X^T all-reduced over TP every iteration)")
    muon_fp32_matmul_prec: Literal["medium", "high", "highest"] = Field(
        default="medium", description="Megatron --muon-fp32-matmul-prec: torch float32 matmul precision of the "
                                      "Newton-Schulz GEMMs (medium: bf16 operands; high: TF32; highest: fp32)")
    muon_split_qkv: bool = Field(default=True, description="Megatron --muon-split-qkv (default; "
                                 "--muon-no-split-qkv = False): the fused linear_qkv weight orthogonalised as its "
                                 "Q, K and V blocks")
    muon_scalar_optimizer: Literal["adam", "lion"] = Field(
        default="adam", description="Megatron --muon-scalar-optimizer: the optimizer of the non-matrix "
                                    "parameters (embeddings, output head, norms, biases): adam (two moments) or "
                                    "lion (one)")
    grad_reduce_in_fp32: bool = True
    expert_grad_reduce_in_fp32: Optional[bool] = Field(
        default=None, description="FSDP reduce-scatter dtype of the expert gradients (None = as grad_reduce_in_fp32); "
                                  "NeMo AutoModel's MoE parallelizer shards the experts with no MixedPrecisionPolicy, "
                                  "so they reduce in their bf16 parameter dtype while the blocks reduce in fp32")
    precision_aware_optimizer: bool = Field(default=False, description="Megatron --use-precision-aware-optimizer")
    optimizer_fp8_recipe: Optional[Fp8Recipe] = Field(
        default=None, description="without fp8: the fp8_recipe Megatron's OptimizerConfig still holds (Megatron-LM "
                                  "--fp8-recipe given without --fp8-format; Megatron-Bridge copies its "
                                  "MixedPrecisionConfig default 'tensorwise' into BF16 runs), read with the "
                                  "precision-aware optimizer off too (a tuned plan turning it on keeps the file's "
                                  "recipe); with fp32 main params a "
                                  "recipe other than delayed keeps the precision-aware optimizer's master weights in "
                                  "Megatron (4 bytes, fp32 grad copies at the step) instead of TE's FusedAdam. "
                                  "None = Megatron-LM's default (delayed)")
    main_grads_dtype: StateDtype = "fp32"
    main_params_dtype: StateDtype = "fp32"
    exp_avg_dtype: StateDtype = "fp32"
    exp_avg_sq_dtype: StateDtype = "fp32"
    train_iters: Optional[int] = None
    ddp_bucket_size: Optional[int] = Field(default=None, gt=0, description="Megatron --ddp-bucket-size: parameters "
                                           "per DDP gradient bucket (None = max(40M, 1M x dp))")
    ddp_num_buckets: Optional[int] = Field(default=None, gt=0, description="Megatron --ddp-num-buckets: the bucket "
                                           "size is the rank's parameters // N (Megatron-LM training.py get_model)")
    log_params_norm: bool = Field(default=False, description="Megatron --log-params-norm: the L2 norm of the "
                                                             "parameters (fp32 main copies) computed every iteration")
    log_num_zeros_in_grad: bool = Field(default=False, description="Megatron --log-num-zeros-in-grad: the zeros of "
                                                                   "the main gradients counted every optimizer step")
    manual_gc: bool = Field(default=False, description="Megatron --manual-gc: Python's automatic garbage collector "
                            "off, a full gc.collect() every manual_gc_interval iterations instead "
                            "(cost/manual_gc.py)")
    manual_gc_interval: int = Field(default=0, ge=0, description="Megatron --manual-gc-interval: iterations between "
                                    "two full collections under manual_gc (0: none after the first)")
    clip_grad: float = Field(default=1.0, description="Megatron --clip-grad: the global gradient-norm clip; "
                                                      "<= 0 = no norm computed in the optimizer step (core_v0.16.1 "
                                                      "optimizer.py: 'if self.config.clip_grad > 0.0')")
    check_for_nan_in_grad: bool = Field(default=True, description="Megatron --check-for-nan-in-loss-and-grad "
                                        "(default; --no-check-for-nan-in-loss-and-grad = False): an L2 norm of every "
                                        "gradient bucket before its data-parallel collective")
    ddp_average_in_collective: bool = Field(default=False, description="Megatron --ddp-average-in-collective: the "
                                            "1/DP scaling done by the collective (AVG) instead of a pass over the "
                                            "gradient buffer")
    calculate_per_token_loss: bool = Field(default=False, description="Megatron --calculate-per-token-loss: the "
                                           "gradient buffer scaled by 1 / tokens after the gradient sync")

    @property
    def storage_precision(self) -> Precision:
        """The dtype the parameters and activations are kept in: ``precision``, except fp8 / fp4 GEMMs over fp32
        or fp16 parameters (``lowp_params_dtype``; Megatron-LM d98e8a64dd ``training/arguments.py``:
        ``args.params_dtype = torch.float`` unless ``--fp16`` / ``--bf16``, whatever ``--fp8-format`` says)."""
        if self.precision in ("fp8", "fp4") and self.lowp_params_dtype is not None:
            return self.lowp_params_dtype
        return self.precision


class Cluster(BoundedSection):
    limits_section: ClassVar[str] = "cluster"

    gpu: str = "h100-sxm"
    num_nodes: int = Field(default=1, gt=0)
    gpus_per_node: int = Field(default=8, gt=0)
    nvlink_domain: Optional[int] = Field(
        default=None, gt=0, description="GPUs in one scale-up (NVLink / xGMI) domain; None = gpus_per_node "
                                        "(GB200/GB300 NVL72: 72 with 4 GPUs per node)")
    power_limit_w: Optional[float] = Field(
        default=None, gt=0, description="board power cap the GPUs run at (nvidia-smi --power-limit), W; None = "
                                        "the GPU's rated power. A cap below it lowers the sustained tensor clock "
                                        "(projection.cost.calibration.power_cap_factor)")

    @model_validator(mode="before")
    @classmethod
    def _gpu_spelling(cls, data: Any) -> Any:
        """``gpu`` in any accepted spelling (:func:`normalize_gpu`): ``H100`` is ``h100-sxm``."""
        if isinstance(data, dict) and isinstance(data.get("gpu"), str):
            data = {**data, "gpu": normalize_gpu(data["gpu"])}
        return data

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def scaleup_domain(self) -> int:
        """GPUs reachable over the scale-up fabric from one GPU (capped by the world size)."""
        return min(self.nvlink_domain or self.gpus_per_node, self.world_size)

    def completed(self, overrides: Mapping[str, Any], world: Optional[int] = None) -> "Cluster":
        """This cluster with ``overrides`` (some of its fields: the CLI's ``--gpu`` / ``--nodes`` /
        ``--gpus-per-node``, a wrapper's ``[cluster]``) put in, validated: the cluster a recipe states,
        completed by partial cluster flags.  ``world``: the GPU count the recipe states (not its node count,
        which the reader then derived at some GPUs per node): a ``gpus_per_node`` override without
        ``num_nodes`` keeps that count (``world / gpus_per_node`` nodes, when it divides)."""
        o = dict(overrides)
        gpn = o.get("gpus_per_node")
        if world is not None and gpn and o.get("num_nodes") is None and world % gpn == 0:
            o["num_nodes"] = max(1, world // gpn)
        return type(self)(**{**self.model_dump(), **o})

    @staticmethod
    def uncovered(fields: tuple[str, ...], overrides: Optional[Mapping[str, Any]]) -> bool:
        """Whether some of ``fields`` is not set by ``overrides`` (partial cluster flags): a reader's note on
        how it found (or defaulted) those fields is then still due."""
        return any((overrides or {}).get(f) is None for f in fields)


class UnmodelledFlag(StrictModel):
    """A recipe setting that changes time or memory but that the projection does not model."""

    flag: str
    value: str
    effect: str = Field(description="what it changes, e.g. 'time: ...'")


class Source(StrictModel):
    """Where the plan came from, so that writers can edit the native file in place, and what the
    reader could not express."""

    framework: Framework
    path: Optional[str] = None
    wrapper_path: Optional[str] = None
    format: Optional[str] = Field(default=None, description="reader used: megatron-bash, megatron-yaml, "
                                                            "megatron-argv, bridge-yaml, primus-yaml, torchtitan-toml, "
                                                            "torchtitan-argv, ...")
    script_args: list[str] = Field(default_factory=list, description="positional parameters ($1..$N) the recipe "
                                                                      "script was read with")
    unmodelled: list[UnmodelledFlag] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="stated guesses and substitutions of the reader")
    nodes_fitted: bool = Field(default=False, description="cluster.num_nodes was chosen by the reader, not stated "
                                                          "by the recipe or the user (a Primus experiment, a "
                                                          "TorchTitan job without a header or explicit shard "
                                                          "degree: the fewest nodes the parallel degrees fit; a "
                                                          "Megatron recipe on the default single node); "
                                                          "projection.node_fit then searches the fewest nodes "
                                                          "the plan fits on when it does not fit")
    program: Optional[str] = Field(default=None, description="the training program the recipe runs, as written "
                                                             "(pretrain_gpt.py, -m pkg.module); None when unknown")
    fixed: list[str] = Field(default_factory=list, description="plan fields the training program cannot change "
                                                               "(its argument parser has no flag for them, or its "
                                                               "device cannot run them), and 'field=value' entries "
                                                               "for single values it cannot take: the tuner keeps "
                                                               "them at the recipe's value "
                                                               "(adapters/program_limits.py)")


class PlanSections(Protocol):
    """What the layout and the legality rules read of a plan (a :class:`~primus_launch.plan.schema.Plan`)."""

    @property
    def model(self) -> ModelArch: ...

    @property
    def parallel(self) -> Parallelism: ...

    @property
    def training(self) -> Training: ...

    @property
    def cluster(self) -> Cluster: ...

    @property
    def source(self) -> Optional[Source]: ...

    @property
    def framework(self) -> Framework: ...

    @property
    def world_size(self) -> int: ...

    @property
    def dp(self) -> int: ...
