"""Ring (P2P) context-parallel attention as the frameworks run it: per-step kernels and helpers.

Load-balanced causal ring attention splits the sequence into ``2 cp`` chunks; rank ``r`` holds
chunks ``r`` and ``2cp-1-r`` (its ``c = s/cp`` tokens).  Transformer Engine
(``AttnFuncWithCP`` in ``transformer_engine/pytorch/attention.py`` @v1.4, the TE of NeMo 24.03;
``AttnFuncWithCPAndKVP2P`` in ``pytorch/attention/dot_product_attention/context_parallel.py`` @d0067d0,
same step structure for BF16 attention) and PyTorch (``_templated_ring_attention`` /
``_templated_ring_attention_backward`` in ``torch/distributed/tensor/experimental/_context_parallel/
_attention.py``, what TorchTitan's ``context_parallel`` runs) both loop over ``cp`` steps, one fused
attention kernel each:

- step 0 (own K,V): a causal ``c x c`` attention;
- steps 1..cp-1 (K,V of another rank), non-causal: ``i <= rank``: all ``c`` queries over the first
  half of the received keys (``c x c/2``); ``i > rank``: the second half of the queries over all
  received keys (``c/2 x c``).  Each rank runs ``rank`` of the first kind and ``cp-1-rank`` of the
  second: priced as ``(cp-1)/2`` of each.  Same FLOPs as one causal ``c x s`` attention, but each
  kernel's key span is ``c/2`` or ``c`` (:func:`ring_steps`).

Around the kernels each framework runs memory-bound helpers (:func:`helper_bytes`; bytes through
HBM, elements ``Eq``/``Eo``/``Ekv`` = query / output / key+value elements of the ``c`` local
tokens, bf16 = 2 B, fp32 = 4 B):

TE (bf16 attention):
  forward: once the K,V concatenation into the P2P buffer (``torch.cat``: read + write, 4 Ekv); per
  off-diagonal step the half ``.contiguous()`` copy (K,V first half: 2 Ekv, or Q second half: 2 Eq;
  mean Ekv + Eq) and the output correction ``out += out_step * exp(lse_step - lse)`` (jit-fused: read
  out_step, read + write out: 6 Eo on full steps, 3 Eo on half steps, mean 4.5 Eo); step 0's
  ``flash_attn_fwd_out_correction_init`` (4 Eo); LSE corrections are per (head, token): negligible.
  backward: once the K,V copy into the P2P buffer (4 Ekv); per off-diagonal step, kv-half branch:
  K,V half copy (2 Ekv), ``dq.add_`` (6 Eq), ``torch.cat(dk_, dv_)`` of the half (2 Ekv),
  ``dkv[:, :, 0].add_`` (3 Ekv); q-half branch: q / out / dout half copies (2 Eq + 4 Eo),
  ``dq[:, 1].add_`` (3 Eq), ``torch.cat`` (4 Ekv), ``dkv.add_`` (6 Ekv); mean 5.5 Eq + 2 Eo + 8.5 Ekv;
  the diagonal step's copies (4 Eq + 10 Ekv).  Accumulation stays bf16 (fp32 only for FP8 attention).
PyTorch (``_cp_options.convert_to_f32 = True``, load balance on, the defaults):
  forward: per step before the last ``torch.cat([key.flatten(), value.flatten()])`` (4 Ekv); the
  ``_SDPAMerger`` in fp32: ``out.to(float32)`` (6 Eo), ``out - sigmoid(lse_b - lse) * (out - out_b)``
  as eager ops (sub 12, mul 8, sub 12 B per element) = 38 Eo per full step; on half steps 19 Eo on
  the half plus ``_partial_update``'s ``torch.cat`` of the whole fp32 output (8 Eo): mean 32.5 Eo;
  step 0 the cast (6 Eo), the end ``.to(bf16)`` (6 Eo).
  backward: fp32 gradient buffers (``zeros_like``: 4 Eq + 4 Ekv once); per step the K,V
  ``torch.cat`` (4 Ekv), ``grad_key/value +=`` a bf16 step gradient into fp32 (10 B per element;
  half steps through ``_partial_update``: 5 + 8 = 13; mean 11.5 Ekv), ``torch.cat`` of the fp32
  dK,dV for the rotation (8 Ekv), ``grad_query +=`` (mean 11.5 Eq); the end casts (6 Eq + 6 Ekv).
  The dK,dV travel the ring in fp32 (``_RotateMethod.ALL_TO_ALL``): ``cost/cp_comm.py`` ``cp_layer_comm``.

Kernel counts per step (host launch time): TE forward 4 (attention, copy, LSE and output
corrections), backward 5; PyTorch forward 7 (cat, attention, cast, sub, sigmoid, mul, sub),
backward 6.
"""

from __future__ import annotations

# (forward, backward) kernels launched per ring step (module doc)
STEP_KERNELS = {"te": (4, 5), "torch": (7, 6)}


def ring_steps(s: int, cp: int) -> list[tuple[int, int, bool, float]]:
    """``(queries, keys, causal, count)`` of the attention kernels one rank runs in load-balanced
    causal ring attention over ``s`` tokens on ``cp`` ranks (module doc)."""
    c = max(1, s // cp)
    h = max(1, c // 2)
    out = [(c, c, True, 1.0)]
    if cp > 1:
        n = (cp - 1) / 2.0
        out += [(c, h, False, n), (h, c, False, n)]
    return out


def helper_bytes(flavor: str, cp: int, eq: float, eo: float, ekv: float) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the ring helpers of one rank for one layer (module doc);
    ``flavor``: ``"te"`` (Transformer Engine) or ``"torch"`` (PyTorch context parallel)."""
    if cp <= 1:
        return 0.0, 0.0
    k = cp - 1
    if flavor == "torch":
        fwd = k * (4.0 * ekv + 32.5 * eo) + 12.0 * eo
        bwd = (4.0 * eq + 4.0 * ekv) + k * (4.0 * ekv) + cp * (11.5 * ekv + 8.0 * ekv + 11.5 * eq) \
            + 6.0 * eq + 6.0 * ekv
        return fwd, bwd
    fwd = 4.0 * ekv + 4.0 * eo + k * (ekv + eq + 4.5 * eo)
    bwd = 4.0 * ekv + (4.0 * eq + 10.0 * ekv) + k * (5.5 * eq + 2.0 * eo + 8.5 * ekv)
    return fwd, bwd
