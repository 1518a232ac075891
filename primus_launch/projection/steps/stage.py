"""Step 3: per pipeline stage and model chunk, one micro-batch's forward / backward seconds split by
kind.

Per (stage, chunk) the layers of that chunk (:mod:`primus_launch.plan.layout`: Megatron's layout
string and offsets, account-for-embedding/loss, uneven first/last stage, ZB-V's "V") sum their
compute times (:class:`~primus_launch.projection.layer_times.LayerTimes`) and the exposed
communication of :class:`~.layer.LayerCosts`; full recompute (``cost/recompute.py``) re-runs the
recomputed layers' forward, their TP / CP / EP communication included, in the backward; selective
recompute adds its modules' forward per layer (TorchTitan's per-op SAC, where it keeps no EP all-to-all
output, every MoE layer's forward EP seconds too: ``cost/titan_sac.py``); offloaded layers their exposed host-link
time.  MTP
layers (with the loss unless the layout string places them) are priced as decoder layers of the last
layer's kind plus their norms / eh_proj and their own output head + loss.  The chunk holding the
embedding adds it and its TP calls, the one holding the loss (and each MTP layer) the final norm,
output layer and loss.  FSDP synced every micro-batch adds the chunk-end exposure
(``cost/fsdp.py`` ``fsdp_microbatch_edges``); Megatron's combined 1F1B with PP adds the activation
sends each paired step waits for (``cost/ep_comm.py`` ``combined_step_p2p``).  The decoder layers the plan keeps
out of the FP8 / FP4 context (``Plan.bf16_layer_ids``: ``--first-last-layers-bf16``, global layer ids, so only the
stages / chunks holding the first and last layers) take their BF16 times (``steps/setup.py`` ``bf16_layer_times``)
in their forward, backward and recomputed forward; their communication and selective-recompute shares stay
the FP8 layer's.
"""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import layer_collectives as lc
from primus_launch.projection.cost.ep_comm import combined_step_p2p
from primus_launch.projection.cost.offload import module_offload_inert
from primus_launch.projection.cost.recompute import recomputed_layers
from primus_launch.projection.cost.titan_sac import op_sac_reruns_ep_forward
from primus_launch.projection.layer_times import LayerTimes, PassTimes
from primus_launch.projection.pipeline.simulate import ChunkCost
from primus_launch.projection.steps.layer import LayerCosts
from primus_launch.projection.steps.setup import Setup


@dataclass(frozen=True)
class ChunkCosts:
    """Seconds of one micro-batch through one model chunk on one stage: ``fwd`` / ``bwd_input`` /
    ``bwd_weight`` as the pipeline runs them (communication included), and the exposed communication
    inside them by kind (``tp``, ``cp``, ``ep``, ``dp``: FSDP, ``pp``: the combined-1F1B step's wait
    for its neighbours' sends) for the breakdown."""

    fwd: float
    bwd_input: float
    bwd_weight: float
    tp: float
    cp: float
    ep: float
    dp: float
    pp: float

    def cost(self) -> ChunkCost:
        """The pipeline simulator's view of the chunk."""
        return ChunkCost(self.fwd, self.bwd_input, self.bwd_weight)


@dataclass(frozen=True)
class StageCosts:
    """``chunks[stage][chunk]``; ``p2p_s``: one activation send between adjacent stages;
    ``step_p2p_s``: what each combined-1F1B step waits for its neighbours' sends (0 without it)."""

    chunks: tuple[tuple[ChunkCosts, ...], ...]
    p2p_s: float
    step_p2p_s: float


class _Acc:
    """Per-micro-batch seconds of one chunk being summed (same order of additions as the model)."""

    __slots__ = ("f", "bi", "bw", "tp", "cp", "ep", "dp", "pp")

    def __init__(self) -> None:
        self.f = self.bi = self.bw = self.tp = self.cp = self.ep = self.dp = self.pp = 0.0

    def freeze(self) -> ChunkCosts:
        return ChunkCosts(self.f, self.bi, self.bw, self.tp, self.cp, self.ep, self.dp, self.pp)


def kind_times(lt: LayerTimes, moe: bool, win: bool | str) -> PassTimes:
    """One micro-batch's times of a decoder layer of kind (``moe``, ``win``) in ``lt``: a hybrid stack's symbol
    (``win`` a string) its own, else the MoE / dense layer, windowed where it has its own times; each missing kind
    falls back to the MoE layer's, then the dense layer's."""
    d0 = lt.dense_layer
    if isinstance(win, str):   # a hybrid stack's layer: its symbol's times
        return lt.layer(win) or d0
    if moe:
        mo0 = lt.moe_layer or d0
        return (lt.moe_window_layer or mo0) if win else mo0
    return (lt.dense_window_layer or d0) if win else d0


def stage_costs(s: Setup, layer: LayerCosts) -> StageCosts:
    """The :class:`StageCosts` of ``s`` with the per-layer terms ``layer`` (module doc)."""
    plan, lay, lt = s.plan, s.lay, s.lt
    m, p, t = plan.model, plan.parallel, plan.training
    pp, vpp = p.pp, p.vpp
    r = t.recompute
    chunks = plan.chunk_layout()
    mtp_ids = plan.chunk_mtp_ids() if (r.granularity == "full" and r.method == "layer_ids") else None
    last_moe = m.is_moe_layer(m.num_layers - 1)
    hyb = m.is_hybrid
    last_win = m.layer_symbol(m.num_layers - 1) if hyb else m.is_window_layer(m.num_layers - 1)
    # one MTP depth's layers: a GPT MTP module's transformer layer is of the last decoder layer's kind; a hybrid
    # stack's depth holds the layers of its hybrid_mtp_pattern (megatron-core models/hybrid: '<main>/<mtp>')
    mtp_kinds = ([(c == "E" and m.is_moe, c) for c in m.hybrid_mtp_pattern] if hyb and m.hybrid_mtp_pattern
                 else [(last_moe, last_win)])
    tp_f, tp_b = layer.tp
    tpm_f, tpm_b = layer.tp_moe
    cp_f, cp_b = layer.cp
    ep_f, ep_b = layer.ep
    fsdp_dense, fsdp_moe = layer.fsdp_dense, layer.fsdp_moe
    sync_mb = layer.fsdp and pp > 1 and p.fsdp_pp_grad_sync == "microbatch"
    nic = layer.fsdp_ep_nic if (sync_mb and m.is_moe) else (0.0, 0.0)
    rec_dense_sel, rec_moe_sel = (layer.recompute_fwd.get(False, 0.0), layer.recompute_fwd.get(True, 0.0))
    sac_a2a = op_sac_reruns_ep_forward(plan)
    emb_tp2, head_tp2 = layer.embedding_tp, layer.head_tp

    # the decoder layers kept out of the FP8 / FP4 context (Plan.bf16_layer_ids): their BF16 times (Setup.lt_bf16)
    lt16 = s.lt_bf16
    ids16 = plan.bf16_layer_ids() if lt16 is not None else frozenset()

    def pt_of(j: int, kk: tuple, bf16: list[bool]) -> PassTimes:
        return kind_times(lt16 if bf16[j] else lt, *kk)

    act = lc.rank_tokens(plan) * m.hidden_size * 2
    if p.sequence_parallel:
        act //= p.tp
    p2p_s = coll.p2p(float(act), lay.pp.nodes > 1, s.spec.name) if pp > 1 else 0.0
    step_p2p = combined_step_p2p(plan, lt, p2p_s)

    rows = []
    for rank in range(pp):
        row = []
        for c in range(vpp):
            chunk = chunks[rank][c]
            kinds = [(m.is_moe_layer(i), m.layer_symbol(i) if hyb else m.is_window_layer(i)) for i in chunk.layers] \
                + mtp_kinds * chunk.mtp
            bf16 = [i in ids16 for i in chunk.layers] + [False] * (len(kinds) - len(chunk.layers))  # MTP: never
            n = len(kinds)
            n_moe = sum(1 for k_, _ in kinds if k_)
            n_dense = n - n_moe
            # a hybrid stack: each layer has one TP-split block (one column- and one row-parallel linear: half a
            # GPT layer's TP calls, cost/tp_comm.py), attention (CP) only in its '*' layers, none in its '-' / 'E'
            # (an E layer's own TP calls: the MoE layer's less the attention half)
            n_tp_half = sum(1 for k_, w in kinds if w in ("M", "*", "-")) if hyb else 0
            n_cp = sum(1 for _, w in kinds if w == "*") if hyb else n
            n_mamba = sum(1 for _, w in kinds if w == "M") if hyb else 0   # their own CP all-to-alls
            rec_j = recomputed_layers(plan, list(range(len(kinds))), chunk,
                                      mtp_ids[rank][c] if mtp_ids is not None else ())
            rec = [kinds[j] for j in rec_j]
            rec_moe = sum(1 for k_, _ in rec if k_)
            rec_dense = len(rec) - rec_moe
            q = _Acc()
            for j, kk in enumerate(kinds):
                pt = pt_of(j, kk, bf16)
                q.f += pt.fwd_s
                q.bi += pt.bwd_input_s
                q.bw += pt.bwd_weight_s
            # recompute (compute part)
            for j in rec_j:
                q.bi += pt_of(j, kinds[j], bf16).fwd_s
            if hyb:   # selective recompute per layer symbol (cost/recompute.py)
                q.bi += sum(layer.recompute_fwd.get(w, 0.0) for _, w in kinds)
            else:
                q.bi += n_dense * rec_dense_sel + n_moe * rec_moe_sel
            n_off = min(t.offload.activation_layers, n) if t.offload.activation_layers else \
                (n if t.offload.activation_modules and not module_offload_inert(plan) else 0)
            if n_off:
                for kk in kinds[:n_off]:
                    of, ob = layer.offload[kk[0]]
                    q.f += of
                    q.bi += ob
            if chunk.mtp and lt.mtp_extra is not None:
                q.f += chunk.mtp * lt.mtp_extra.fwd_s
                q.bi += chunk.mtp * lt.mtp_extra.bwd_input_s
                q.bw += chunk.mtp * lt.mtp_extra.bwd_weight_s
            # communication inside the layers
            if hyb:
                tpl_f = n_tp_half * tp_f / 2 + n_moe * max(0.0, tpm_f - tp_f / 2)
                tpl_b = n_tp_half * tp_b / 2 + n_moe * max(0.0, tpm_b - tp_b / 2)
                tpl_r = rec_dense * tp_f / 2 + rec_moe * max(0.0, tpm_f - tp_f / 2)
            else:
                tpl_f = n_dense * tp_f + n_moe * tpm_f  # the chunk's layers' TP seconds, forward / backward
                tpl_b = n_dense * tp_b + n_moe * tpm_b
                tpl_r = rec_dense * tp_f + rec_moe * tpm_f  # recomputed forwards
            q.tp = tpl_f + tpl_b + tpl_r
            q.cp = n_cp * (cp_f + cp_b) + (rec_dense + rec_moe) * cp_f + n_mamba * sum(layer.cp_mamba)
            # per-op SAC that does not keep the EP all-to-alls (torchtitan 0.3 spmd_types, eager) re-runs every MoE
            # layer's forward exchanges in its backward (cost/titan_sac.py op_sac_reruns_ep_forward)
            sac_moe = n_moe if sac_a2a else 0
            q.ep = n_moe * (ep_f + ep_b) + (rec_moe + sac_moe) * ep_f
            q.dp = n_dense * sum(fsdp_dense) + n_moe * sum(fsdp_moe)
            if sync_mb and kinds:
                # the chunk's first FSDP units wait (fsdp_microbatch_edges) in place of the first layer's
                # prefetched share (its NIC-sharing part stays: the next layer's gathers still meet its
                # combine); the last MoE layer's combine meets no gather (the next chunk's root
                # pre-forward orders its gathers after compute)
                first_moe = kinds[0][0]
                ef, eb = layer.fsdp_edges[(bool(first_moe), bool(chunk.embedding), bool(chunk.loss))]
                per = fsdp_moe if first_moe else fsdp_dense
                nf, nb = nic if first_moe else (0.0, 0.0)
                ef = max(0.0, ef - (per[0] - nf)) - (nic[0] if kinds[-1][0] else 0.0)
                eb = max(0.0, eb - (per[1] - nb))
                q.f += ef
                q.bi += eb
                q.dp += ef + eb
            q.f += (tpl_f + n_cp * cp_f + n_mamba * layer.cp_mamba[0] + n_moe * ep_f + n_dense * fsdp_dense[0]
                    + n_moe * fsdp_moe[0])
            q.bi += (tpl_b + n_cp * cp_b + n_mamba * layer.cp_mamba[1] + n_moe * ep_b + n_dense * fsdp_dense[1]
                     + n_moe * fsdp_moe[1] + tpl_r + (rec_dense + rec_moe) * cp_f + (rec_moe + sac_moe) * ep_f)
            if chunk.embedding:
                q.f += lt.embedding.fwd_s + emb_tp2[0]
                q.bi += lt.embedding.bwd_input_s + emb_tp2[1]
                q.bw += lt.embedding.bwd_weight_s
                q.tp += sum(emb_tp2)
            heads = int(chunk.loss) + chunk.mtp
            if heads:
                q.f += heads * (lt.head_loss.fwd_s + head_tp2[0])
                q.bi += heads * (lt.head_loss.bwd_input_s + head_tp2[1])
                q.bw += heads * lt.head_loss.bwd_weight_s
                q.tp += heads * sum(head_tp2)
            if step_p2p > 0.0 and n_moe:
                q.pp = step_p2p
                q.bi += step_p2p
            row.append(q.freeze())
        rows.append(tuple(row))
    return StageCosts(chunks=tuple(rows), p2p_s=p2p_s, step_p2p_s=step_p2p)
