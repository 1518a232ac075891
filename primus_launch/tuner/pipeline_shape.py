"""The shape of a plan for the branch and bound's level-1 time bound: per pipeline rank, the coefficients of the
floor features (``floors.FEATURES``) in the pipeline makespan's lower bound ``max_r (head_r + m busy_r + tail_r)``
(:func:`~primus_launch.projection.pipeline.simulate.makespan_lower_bound`).  The counts are ``steps/stage.py``'s:
per chunk, each layer kind's forward and backward passes, its TP / CP / EP / FSDP communication terms, the
recomputed layers' re-run forwards (``cost/recompute.py`` ``recomputed_layers``), selective recompute's module
re-runs, offload copies, the MTP, embedding and output-head passes; every coefficient is a count (>= 0), so the
bound is non-decreasing in every feature (``bounds.py``'s monotonicity argument).  ``tests/test_tuner_bounds.py``
checks ``C . x`` against the stage costs' compute on sampled plans."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from primus_launch.plan import Plan
from primus_launch.projection.pipeline.simulate import SPLIT_BACKWARD
from primus_launch.tuner.floors import K, KIND, X


@dataclass(frozen=True)
class Shape:
    """The coefficients of one plan shape (module doc): per pipeline rank the makespan bound's
    ``head`` + ``tail`` rows (``ends``) and ``busy`` row per micro-batch, each (pp, K)."""

    ends: np.ndarray
    busy: np.ndarray

    def makespan_lb(self, x: np.ndarray, nmb: np.ndarray) -> np.ndarray:
        """``max_r (ends_r + m busy_r) . x`` for the rows of ``x`` (n, K) with ``nmb`` (n,)."""
        return (x @ self.ends.T + np.asarray(nmb, dtype=np.float64)[:, None] * (x @ self.busy.T)).max(axis=1)


def build_shape(plan: Plan) -> Shape:
    """The :class:`Shape` of ``plan``: ``steps/stage.py``'s layer and recompute counts per chunk as
    coefficients of the features (:func:`chunk_coefficients`; ``tests/test_tuner_bounds.py`` checks ``C . x``
    against the stage costs' compute on sampled plans), summed per rank into ``busy`` (one micro-batch's
    forward and backward, plus the combined all-to-all walk's ``epx*`` floor per MoE layer), and the pipeline's
    fill and drain before each rank into ``ends`` (the earlier ranks' first chunks' forwards, and their
    backwards where the schedule runs them fused)."""
    m, p = plan.model, plan.parallel
    pp, vpp = p.pp, p.vpp
    chunks = plan.chunk_layout()
    last = (m.is_moe_layer(m.num_layers - 1), m.is_window_layer(m.num_layers - 1))
    fw, bk = chunk_coefficients(plan)
    busy = (fw + bk).sum(axis=1)
    for r in range(pp):
        for c in range(vpp):
            ch = chunks[r][c]
            for kk in [(m.is_moe_layer(i), m.is_window_layer(i)) for i in ch.layers] + [last] * ch.mtp:
                if kk[0]:
                    busy[r, X["epxw" if kk[1] else "epx"]] += 1
    ends = np.zeros((pp, K))
    fused = pp <= 1 or plan.training.pipeline_schedule not in SPLIT_BACKWARD
    head = np.zeros(K)
    tail = np.zeros(K)
    for r in range(pp):
        ends[r] = head + (tail if fused else 0.0)
        head = head + fw[r, 0]
        tail = tail + bk[r, 0]
    return Shape(ends=ends, busy=busy)


def chunk_coefficients(plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) coefficient rows of every chunk, each (pp, vpp, K): per layer of the chunk its kind's
    passes and communication terms (:func:`_count_layer`), per recomputed layer its re-run forward
    (``cost/recompute.py`` ``recomputed_layers``, :func:`_count_recomputed`), and the chunk's MTP, embedding and
    output-head passes (:func:`_count_ends`)."""
    from primus_launch.projection.cost.recompute import recomputed_layers

    m, p = plan.model, plan.parallel
    pp, vpp = p.pp, p.vpp
    r_ = plan.training.recompute
    sel = ([f"_{mod}" for mod in r_.modules] if r_.granularity == "selective" else
           ["_op"] if r_.granularity == "op" else [])
    chunks = plan.chunk_layout()
    mtp_ids = plan.chunk_mtp_ids() if (r_.granularity == "full" and r_.method == "layer_ids") else None
    last = (m.is_moe_layer(m.num_layers - 1), m.is_window_layer(m.num_layers - 1))
    fw = np.zeros((pp, vpp, K))
    bk = np.zeros((pp, vpp, K))
    for r in range(pp):
        for c in range(vpp):
            ch = chunks[r][c]
            kinds = [(m.is_moe_layer(i), m.is_window_layer(i)) for i in ch.layers] + [last] * ch.mtp
            rec = recomputed_layers(plan, kinds, ch, mtp_ids[r][c] if mtp_ids is not None else ())
            f, b = fw[r, c], bk[r, c]
            for kk, n in Counter(kinds).items():  # once per kind: a 9,984-layer chunk walked 5.6M calls of a tune
                _count_layer(f, b, kk, sel, n)
            for kk in rec:
                _count_recomputed(b, kk)
            _count_ends(f, b, ch.mtp, ch.embedding, int(ch.loss) + ch.mtp)
    return fw, bk


def _count_layer(f: np.ndarray, b: np.ndarray, kk: tuple[bool, bool], sel: list[str], n: int = 1) -> None:
    """``n`` layers of kind ``kk`` (MoE, window) in a chunk's forward ``f`` and backward ``b`` rows: their forward,
    input- and weight-gradient passes, their TP, EP (and the unpaired share under 1F1B overlap), selective
    recompute (``sel``), fine-grained offload copy, FSDP and CP terms."""
    at = KIND[kk]
    f[at] += n
    b[at + 1] += n
    b[at + 2] += n
    f[X["tpm_f" if kk[0] else "tp_f"]] += n
    b[X["tpm_b" if kk[0] else "tp_b"]] += n
    if kk[0]:
        f[X["ep_f"]] += n
        b[X["ep_b"]] += n
        f[X["epu_f"]] += n
        b[X["epu_b"]] += n
    for mod in sel:
        b[X["sel_" + ("m" if kk[0] else "d") + mod]] += n
    # fine-grained offloading copies every layer's modules (steps/stage.py: n_off = n)
    f[X["off_m_f" if kk[0] else "off_d_f"]] += n
    b[X["off_m_b" if kk[0] else "off_d_b"]] += n
    fk = "fsdp_" + ("m" if kk[0] else "d") + ("w" if kk[1] else "")
    f[X[fk + "f"]] += n
    b[X[fk + "b"]] += n
    f[X["cp_f"]] += n
    b[X["cp_b"]] += n


def _count_recomputed(b: np.ndarray, kk: tuple[bool, bool]) -> None:
    """One fully recomputed layer of kind ``kk`` in a chunk's backward row ``b``: its forward re-run with its TP,
    CP and EP forward terms."""
    b[KIND[kk]] += 1
    b[X["tpm_f" if kk[0] else "tp_f"]] += 1
    b[X["cp_f"]] += 1
    if kk[0]:
        b[X["ep_f"]] += 1
        b[X["epu_f"]] += 1


def _count_ends(f: np.ndarray, b: np.ndarray, mtp: int, embedding: bool, heads: int) -> None:
    """A chunk's MTP layers' extra passes, its embedding's and its output heads' (the loss's and each MTP
    layer's) passes and TP terms, in its forward ``f`` and backward ``b`` rows."""
    if mtp:
        f[X["mtp_f"]] += mtp
        b[X["mtp_bi"]] += mtp
        b[X["mtp_bw"]] += mtp
    if embedding:
        f[X["emb_f"]] += 1
        b[X["emb_bi"]] += 1
        b[X["emb_bw"]] += 1
        f[X["embtp_f"]] += 1
        b[X["embtp_b"]] += 1
    if heads:
        f[X["head_f"]] += heads
        b[X["head_bi"]] += heads
        b[X["head_bw"]] += heads
        f[X["headtp_f"]] += heads
        b[X["headtp_b"]] += heads
