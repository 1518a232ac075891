"""Layer-level CPU activation offloading (``--cpu-offloading-num-layers K``) as Transformer Engine runs it.

Transformer Engine 2.13 / 2.14 ``transformer_engine/pytorch/cpu_offload.py`` (the default path; the old
one, ``cpu_offload_v1.py``, only with ``NVTE_CPU_OFFLOAD_V1=1``), driven by megatron-core's
``TransformerBlock`` (``transformer/transformer_block.py``: every layer's forward inside the offload
context, ``model_layers = config.num_layers``, the synchronisation function on its output):
``DefaultOffloadSynchronizer._init_offload_synchronization_dicts`` offloads layers ``0 .. K-1``; layer
``i``'s GPU copy is released when layer ``L - K + i`` starts its forward (``finish_offload_map``) and
reloaded when layer ``L - 1 - K + i`` starts its backward (``start_reload_map``); a layer's tensors are
freed after its backward.  TE's docstring states the result for equal layers: "peak memory usage of
saving activations is ``(num_layers - num_offloaded_layers) * T``".  :func:`te_offload_peak` walks those
maps for layers of any size (a model whose first layers are dense and the rest MoE): during the forward
the GPU holds a window of ``L - K`` consecutive layers, during the backward the same count.
"""

from __future__ import annotations

from typing import Sequence


def te_offload_alive(num_layers: int, num_offloaded: int) -> list[tuple[str, int, frozenset[int]]]:
    """The layers whose saved tensors are on the GPU while each layer runs: ``(pass, layer, alive)`` for
    every forward (``"F"``) and backward (``"B"``) step of one micro-batch, from TE's
    ``finish_offload_map`` / ``start_reload_map`` (module docstring)."""
    L, K = num_layers, max(0, min(num_offloaded, num_layers - 1))
    finish = {L - K + i: i for i in range(K)}
    reload = {L - 1 - K + i: i for i in range(K)}
    alive: set[int] = set()
    out = []
    for j in range(L):  # fwd_step(j): release, then the layer's forward saves its tensors
        if j in finish:
            alive.discard(finish[j])
        alive.add(j)
        out.append(("F", j, frozenset(alive)))
    for b in reversed(range(L)):  # bwd_step(b): the previous layer's tensors freed, reloads started
        alive.discard(b + 1)
        if b in reload:
            alive.add(reload[b])
        out.append(("B", b, frozenset(alive)))
    return out


def te_offload_peak(layer_bytes: Sequence[float], num_offloaded: int) -> float:
    """Largest bytes of saved activations on the GPU during one micro-batch of a block whose layers keep
    ``layer_bytes`` each, the first ``num_offloaded`` of them offloaded (:func:`te_offload_alive`)."""
    if num_offloaded <= 0:
        return float(sum(layer_bytes))
    return max(sum(layer_bytes[i] for i in alive) for _, _, alive in te_offload_alive(len(layer_bytes),
                                                                                        num_offloaded))
