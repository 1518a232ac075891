"""Megatron's Muon optimizer: which parameters one GPU's optimizer owns, and their state bytes.

Read from megatron-core at Megatron-Bridge v0.4.2's Megatron-LM pin (2edffadb52, the 26.04.01 container;
``core_r0.16.0`` ``b0cc2706dd`` the same) and Emerging-Optimizers v0.1.0 (Bridge's ``uv.lock``):

- ``optimizer/muon.py`` ``get_megatron_muon_optimizer``: every parameter that is 2-D and not
  ``is_embedding_or_output_parameter`` (the word embeddings and the output head,
  ``language_module.py``) goes to ``TensorParallelMuon``; the rest (embeddings, output head, norms,
  biases) to ``--muon-scalar-optimizer`` (Adam: ``exp_avg`` + ``exp_avg_sq``; Lion: ``exp_avg``).
  ``--use-distributed-optimizer`` raises ("muon with dist optimizer is not supported"), so the DDP gradient
  buffer is whole and all-reduced; fp16 raises too.
- The state: ``Float16OptimizerWithFloat16Params`` keeps an fp32 master of every bf16 parameter it owns
  (``FP32Optimizer`` under fp32: none), the Muon ``momentum_buffer`` is ``zeros_like`` of that fp32 master
  (``muon_init_state_fn``; Emerging-Optimizers ``orthogonalized_optimizer.py`` ``step``: ``zeros_like(grad)``
  of the fp32 main grad) -- 4 + 4 bytes per matrix parameter, 4 + 8 (Adam) / 4 + 4 (Lion) per scalar one.
  The precision-aware optimizer's dtypes are not read ("TODO(boxiangw): support precision aware optimizer").
- ``--optimizer muon``: one ChainedOptimizer on every rank, every parameter owned by every rank.
  ``--optimizer dist_muon`` (``training.py``: ``layer_wise_distributed_optimizer='dist' in
  config.optimizer``): ``layer_wise_optimizer.py`` ``LayerWiseDistributedOptimizer.shard_params`` lists the
  parameters of all chunks of the rank (all param groups, Muon's then the scalar optimizer's), sorts them by
  ``numel`` (stable) and deals them whole, in a ping-pong loop ``0..n-1, n-1..0``, over the DP x CP ranks,
  the expert-parallel ones separately over expert-DP.  Each owner keeps the master and state of its own
  parameters only (the Float16 wrapper is built after sharding) and updates them; ``allgather_params`` then
  all-gathers the updated bf16 parameters (uneven sizes) over each group.  With the ping-pong deal the owners'
  bytes are uneven (one rank gets the whole word embedding): :func:`owner_shares` returns every rank's share
  and the memory takes the largest (dense owner + expert owner: an upper bound where both groups are > 1).  The
  all-gather's flat buffers (``w`` x the group's parameters on the stage) are a step transient
  (:func:`gather_transient_bytes`).

Parameter tensors per GPU (:func:`stage_tensors`) follow :mod:`memory.params`' counts with Transformer
Engine layers (MLA down projections replicated over TP), one tensor per module weight: a TE grouped
expert MLP holds ``weight{i}`` per local expert (2-D each).  TP sharding is recorded (``part``: 0 column-,
1 row-parallel, -1 replicated) for the Newton-Schulz modes (:mod:`cost.muon`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from primus_launch.plan import ModelArch
from primus_launch.projection.memory.params import ArchKey, arch_from_key


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor on one GPU: ``rows x cols`` (``cols = 0``: 1-D of ``rows`` elements)."""

    rows: int
    cols: int
    part: int = -1  # TP partition dim (0 column-parallel, 1 row-parallel, -1 not TP-sharded)
    expert: bool = False  # routed-expert weight (reduced over expert-DP, dealt over expert-DP)
    matrix: bool = True  # Muon-updated (2-D, not the word embedding / output head)
    qkv: bool = False  # the fused GQA linear_qkv weight (split into Q, K, V under --muon-split-qkv)

    @property
    def numel(self) -> int:
        """Elements of the tensor."""
        return self.rows * (self.cols or 1)


def _norm(arch: ModelArch, n: int) -> list[Tensor]:
    if arch.normalization == "rmsnorm":
        return [Tensor(n, 0, matrix=False)]
    return [Tensor(n, 0, matrix=False), Tensor(n, 0, matrix=False)]


def _vec(n: int, expert: bool = False) -> Tensor:
    return Tensor(n, 0, expert=expert, matrix=False)


def _attention(arch: ModelArch, tp: int) -> list[Tensor]:
    h, nq = arch.hidden_size, arch.num_attention_heads
    out = _norm(arch, h)
    if arch.multi_latent_attention:
        qhd = arch.qk_head_dim + arch.qk_pos_emb_head_dim
        if arch.q_lora_rank is None:
            out.append(Tensor(nq * qhd // tp, h, 0))
        else:
            ql = arch.q_lora_rank
            out += [Tensor(ql, h)] + _norm(arch, ql) + [Tensor(nq * qhd // tp, ql, 0)]
        kvl = arch.kv_lora_rank
        out += [Tensor(kvl + arch.qk_pos_emb_head_dim, h)] + _norm(arch, kvl)
        out += [Tensor(nq * (arch.qk_head_dim + arch.v_head_dim) // tp, kvl, 0), Tensor(h, nq * arch.v_head_dim // tp, 1)]
        if arch.add_bias_linear:
            out.append(_vec(h))
        return out
    d = arch.kv_channels
    qkv = (nq + 2 * arch.kv_heads) * d
    out.append(Tensor(qkv // tp, h, 0, qkv=True))
    if arch.add_bias_linear or arch.add_qkv_bias:
        out.append(_vec(qkv // tp))
    if arch.qk_layernorm:
        out += _norm(arch, d) + _norm(arch, d)
    out.append(Tensor(h, nq * d // tp, 1))
    if arch.add_bias_linear:
        out.append(_vec(h))
    return out


def _mlp(arch: ModelArch, ffn: int, tp: int, bias: bool, expert: bool = False) -> list[Tensor]:
    h, g = arch.hidden_size, 2 if arch.swiglu else 1
    out = [Tensor(g * ffn // tp, h, 0 if tp > 1 else -1, expert), Tensor(h, ffn // tp, 1 if tp > 1 else -1, expert)]
    if bias:
        out += [_vec(g * ffn // tp, expert), _vec(h, expert)]
    return out


@lru_cache(maxsize=4096)
def layer_tensors(key: ArchKey, tp: int, etp: int, ep: int, moe: bool) -> tuple[Tensor, ...]:
    """The parameter tensors of one decoder layer on one GPU (module doc; their elements sum to
    :func:`memory.params.layer_params_for_key` with the TE spec)."""
    arch = arch_from_key(key)
    h = arch.hidden_size
    out = _attention(arch, tp) + _norm(arch, h)  # + pre_mlp_layernorm
    if not moe:
        return tuple(out + _mlp(arch, arch.ffn_hidden_size, tp, arch.add_bias_linear))
    E = arch.num_experts or 0
    out.append(Tensor(E, h))  # router weight: 2-D, replicated
    if arch.add_bias_linear or arch.moe_router_bias:
        out.append(_vec(E))
    if arch.moe_shared_expert_intermediate_size:
        out += _mlp(arch, arch.moe_shared_expert_intermediate_size, tp, False)
    for _ in range(E // ep):
        out += _mlp(arch, arch.expert_ffn, etp, arch.add_bias_linear, expert=True)
    return tuple(out)


@lru_cache(maxsize=4096)
def stage_tensors(key: ArchKey, tp: int, etp: int, ep: int, layout: tuple, rank: int) -> tuple[Tensor, ...]:
    """Every parameter tensor one GPU of PP rank ``rank`` holds, over all its chunks (the module doc; the stage
    extras as :func:`memory.params.stage_split_for_key`: word embedding, MTP modules, final norm, output head)."""
    m = arch_from_key(key)
    h = m.hidden_size
    emb_rank = next(r for r, row in enumerate(layout) if any(c.embedding for c in row))
    out: list[Tensor] = []
    vocab = m.padded_vocab_size(tp) // tp
    for chunk in layout[rank]:
        if chunk.embedding or chunk.mtp:
            out.append(Tensor(vocab, h, matrix=False))  # word embeddings (is_embedding_or_output_parameter)
            if m.position_embedding == "learned":
                out.append(Tensor(m.max_position_embeddings or m.seq_length, h))
        for i in chunk.layers:
            out += layer_tensors(key, tp, etp, ep, m.is_moe_layer(i))
        for _ in range(chunk.mtp):
            last_moe = m.is_moe_layer(m.num_layers - 1)
            out += _norm(m, h) + _norm(m, h) + [Tensor(h // tp, 2 * h, 0)]
            out += layer_tensors(key, tp, etp, ep, last_moe) + tuple(_norm(m, h))
        if chunk.loss:
            out += _norm(m, h)
            if m.untie_embeddings_and_output_weights or rank != emb_rank:
                out.append(Tensor(vocab, h, matrix=False))
    return tuple(out)


@dataclass(frozen=True)
class Share:
    """The tensors one owner (a DP x CP or expert-DP rank) updates."""

    tensors: tuple[Tensor, ...]

    @property
    def matrix(self) -> int:
        """Muon-updated elements."""
        return sum(t.numel for t in self.tensors if t.matrix)

    @property
    def scalar(self) -> int:
        """Elements the scalar optimizer updates."""
        return sum(t.numel for t in self.tensors if not t.matrix)


def _deal(tensors: list[Tensor], n: int) -> tuple[Share, ...]:
    """``LayerWiseDistributedOptimizer.shard_params``: stable sort by numel, ping-pong over ``n`` owners."""
    if n <= 1:
        return (Share(tuple(tensors)),)
    loop = list(range(n)) + list(range(n))[::-1]
    owned: list[list[Tensor]] = [[] for _ in range(n)]
    for i, t in enumerate(sorted(tensors, key=lambda t: t.numel)):
        owned[loop[i % len(loop)]].append(t)
    return tuple(Share(tuple(o)) for o in owned)


@lru_cache(maxsize=4096)
def owner_shares(key: ArchKey, tp: int, etp: int, ep: int, layout: tuple, rank: int, dpcp: int, edp: int,
                 layer_wise: bool) -> tuple[tuple[Share, ...], tuple[Share, ...]]:
    """(dense owners' shares over DP x CP, expert owners' shares over expert-DP) of PP rank ``rank``
    (module doc); without the layer-wise optimizer one share each holding everything.  The param-group
    order is Muon's (matrices) then the scalar optimizer's, which decides only ties of equal size."""
    tensors = stage_tensors(key, tp, etp, ep, layout, rank)
    ordered = [t for t in tensors if t.matrix] + [t for t in tensors if not t.matrix]
    dense = [t for t in ordered if not t.expert]
    expert = [t for t in ordered if t.expert]
    if not layer_wise:
        return (Share(tuple(dense)),), (Share(tuple(expert)),)
    return _deal(dense, dpcp), _deal(expert, edp)


def state_bytes(share: Share, *, precision: str, scalar_optimizer: str) -> float:
    """Optimizer bytes of one owner (module doc): an fp32 master of every owned bf16 / fp16 parameter (none
    under fp32), the fp32 momentum of each matrix, two fp32 Adam moments (Lion: one) of each scalar."""
    master = 0 if precision == "fp32" else 4
    scalar_states = 8 if scalar_optimizer == "adam" else 4
    return float(share.matrix * (master + 4) + share.scalar * (master + scalar_states))


def worst_owners(key: ArchKey, tp: int, etp: int, ep: int, layout: tuple, rank: int, dpcp: int, edp: int,
                 layer_wise: bool, precision: str, scalar_optimizer: str) -> tuple[Share, Share]:
    """(dense share, expert share) of the GPU of PP rank ``rank`` that owns the most optimizer bytes: the
    largest dense share and the largest expert share (module doc: an upper bound when both groups have more than
    one owner)."""
    dense, expert = owner_shares(key, tp, etp, ep, layout, rank, dpcp, edp, layer_wise)

    def best(shares: tuple[Share, ...]) -> Share:
        return max(shares, key=lambda s: (state_bytes(s, precision=precision, scalar_optimizer=scalar_optimizer),
                                          s.matrix + s.scalar))

    return best(dense), best(expert)


def gather_transient_bytes(key: ArchKey, tp: int, etp: int, ep: int, layout: tuple, rank: int, dpcp: int,
                           edp: int, w: int) -> float:
    """Bytes ``LayerWiseDistributedOptimizer.allgather_params`` allocates after the step (``_allgather_helper``,
    once for DP x CP, then for expert-DP, its buffers freed in between): the flat copy of the rank's own
    parameters and one receive buffer per other owner -- ``w`` bytes x every parameter of the group on the stage."""
    dense, expert = owner_shares(key, tp, etp, ep, layout, rank, dpcp, edp, True)
    out = 0.0
    for shares, n in ((dense, dpcp), (expert, edp)):
        if n > 1:
            out = max(out, float(w * sum(s.matrix + s.scalar for s in shares)))
    return out


def muon_stage_bytes(key: ArchKey, tp: int, etp: int, ep: int, layout: tuple, rank: int, dpcp: int, edp: int, *,
                     layer_wise: bool, precision: str, scalar_optimizer: str, tp_mode: str, prec: str,
                     split_qkv: bool) -> tuple[float, float, float]:
    """(optimizer state bytes, parameters owned, largest step transient) of the worst GPU of PP rank ``rank``
    (:func:`worst_owners`): :func:`state_bytes` of its shares, their elements (the fp32 gradient copies the
    Float16 wrapper makes at the step: ``memory.mcore.optimizer_step_grad_bytes``), and the larger of the biggest
    :func:`ns_transient_bytes` of the matrices it orthogonalises and, under ``dist_muon``, the all-gather's
    buffers after the step (:func:`gather_transient_bytes`; the gradient copies are still held then)."""
    arch = arch_from_key(key)
    shares = worst_owners(key, tp, etp, ep, layout, rank, dpcp, edp, layer_wise, precision, scalar_optimizer)
    opt = sum(state_bytes(s, precision=precision, scalar_optimizer=scalar_optimizer) for s in shares)
    owned = float(sum(s.matrix + s.scalar for s in shares))
    trans = 0.0
    for s in shares:
        for t in s.tensors:
            if not t.matrix:
                continue
            size = etp if t.expert else tp
            for piece in ns_pieces(t, arch, tp, split_qkv):
                m, n = ns_dims(piece, size, tp_mode)
                gathered = size if (tp_mode == "duplicated" and piece.part >= 0) else 0
                trans = max(trans, ns_transient_bytes(m, n, prec, gathered))
    if layer_wise:
        w = 4 if precision == "fp32" else 2
        trans = max(trans, gather_transient_bytes(key, tp, etp, ep, layout, rank, dpcp, edp, w))
    return opt, owned, trans


def ns_shape(t: Tensor, tp_size: int, tp_mode: str) -> tuple[int, int]:
    """(rows, cols) of the matrix the Newton-Schulz iteration of ``t`` sees on one GPU: the local shard
    (blockwise, or not TP-sharded), the whole matrix (duplicated: ``newton_schulz_tp`` all-gathers the shards
    along ``partition_dim``), the local shard along the partitioned dim (distributed)."""
    if t.part < 0 or tp_size <= 1 or tp_mode != "duplicated":
        return t.rows, t.cols
    return (t.rows * tp_size, t.cols) if t.part == 0 else (t.rows, t.cols * tp_size)


def ns_dims(t: Tensor, tp_size: int, tp_mode: str) -> tuple[int, int]:
    """(m, n): the dimension the Newton-Schulz iteration of ``t`` whitens on one GPU (``A = X X^T`` is ``m x m``) and
    the other, of :func:`ns_shape`'s matrix.  ``newton_schulz`` transposes to whiten the smaller dimension
    (``transpose = rows > cols``: ``m <= n``), except under the distributed mode on a TP-sharded tensor:
    ``newton_schulz_tp`` fixes ``transpose = partition_dim == 0``, so ``m`` is the unsharded dimension (whole on
    every rank, ``A`` all-reduced) and ``n`` the local shard's, whichever is larger (Emerging-Optimizers v0.1.0
    ``muon_utils.py``; its docstring warns that this "wastes compute" when the partition dim is the smaller)."""
    r, c = ns_shape(t, tp_size, tp_mode)
    if tp_mode == "distributed" and t.part >= 0 and tp_size > 1:
        return (c, r) if t.part == 0 else (r, c)
    m, n = sorted((r, c))
    return m, n


def ns_pieces(t: Tensor, arch: ModelArch, tp: int, split_qkv: bool) -> tuple[Tensor, ...]:
    """The matrices ``t`` is orthogonalised as: a fused GQA ``linear_qkv`` under ``--muon-split-qkv``
    (``muon.py`` ``TensorParallelMuon.orthogonalize``: viewed ``[groups, q + k + v, h]`` and split) as its Q,
    K and V blocks (``groups x q`` / ``groups x d`` rows each, local groups ``rows // (q + 2d)``); else itself."""
    if not (t.qkv and split_qkv):
        return (t,)
    d = arch.kv_channels
    q = arch.num_attention_heads // arch.kv_heads * d
    groups = t.rows // (q + 2 * d)
    return (Tensor(groups * q, t.cols, t.part), Tensor(groups * d, t.cols, t.part), Tensor(groups * d, t.cols, t.part))


def ns_transient_bytes(m: int, n: int, prec: str, gathered_from: int = 0) -> float:
    """Bytes the step of one matrix allocates beside its state (Emerging-Optimizers v0.1.0
    ``orthogonalized_optimizer.step`` / ``muon_utils.newton_schulz``): the Nesterov ``grad.lerp`` (fp32), the
    normalised fp32 copy, the iterate ``X`` (bf16 under ``medium``, else fp32) and the next one, ``A = X X^T``
    and ``B`` (``m x m``, same dtype), the fp32 result; ``gathered_from`` TP shards under the duplicated mode
    add the gathered fp32 shards and their concatenation (``2 x 4 m n``).  ``m`` the whitened dimension, ``n`` the
    other (:func:`ns_dims`: the smaller and the larger, as the code transposes, but for the distributed mode)."""
    e = 2 if prec == "medium" else 4
    out = 4 * m * n + 4 * m * n + 2 * e * m * n + 2 * e * m * m + 4 * m * n
    if gathered_from > 1:
        out += 2 * 4 * m * n
    return float(out)
