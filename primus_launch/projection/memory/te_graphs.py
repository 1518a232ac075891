"""What Transformer Engine-scoped CUDA graphs hold beyond the eager schedule's saved tensors.

``--cuda-graph-impl transformer_engine`` (megatron-core 0.16.1 and Megatron-LM 3758b54b2, the one
Megatron-Bridge 02b574d28 pins, ``transformer/cuda_graphs.py`` ``TECudaGraphHelper``; Transformer Engine
2.13 / 2.14 ``pytorch/graph.py`` ``make_graphed_callables`` with ``_order`` and
``_reuse_graph_input_output_buffers=True``) captures one graph per graphable (layer, micro-batch) of the
rank's schedule, all in one private pool, in the schedule's own order: a forward graph's saved tensors and
static outputs stay allocated in the pool until its backward graph is captured (TE then weak-refs the
static outputs), so the pool holds, per (layer, micro-batch) in flight, what the eager layer keeps, plus:

- **static outputs eager would free**: the graph returns ``o.detach()`` of its static outputs, which
  keep their pool blocks until the backward.  With ``moe_router`` in the scope (and no ``moe`` scope) the
  MoE layer returns early from inside the graph (``moe_layer.py`` ``MoECudaGraphPartialCaptureSignal
  .get_early_return_outputs``) with the shared expert's output among the outputs when shared experts run
  there (``--moe-shared-expert-intermediate-size`` without ``--moe-shared-expert-overlap``): ``a T h``
  that eager adds to the combined tokens and frees.  Its other outputs (the pre-MLP norm's output and
  input, routing probabilities and map) are tensors eager keeps too.  When a layer's whole MLP / MoE (or
  the whole layer: empty scope) is in the graph its output is a static output, and the next graph copies
  it into its own static input (the last layer's is sent to the next stage): ``a T h`` more;
- **static inputs** (``_get_sample_arguments``: one set per (layer, micro-batch), reused once the
  chunk's backward consumed it, so as many sets as (layer, micro-batch) pairs in flight; allocated at
  capture and kept): the hidden states ``[s/cp (/tp under SP), b, h]`` bf16, which stand for the layer input
  eager's first norm keeps, and, when the attention is in the graph, ``transformer_layer.py``
  ``get_layer_static_inputs``' attention mask ``[b, 1, s/cp, s]`` bool: ``b s^2 / cp`` bytes eager does
  not have (the eager step passes ``attention_mask=None``; the replay builds a zero mask and copies it in);
- **the chunk input twice**: the graphed autograd function saves none of its inputs and copies them into
  the static input; a chunk's first layer gets the tensor received from the previous stage, which
  Megatron's schedule keeps for that chunk's backward (``input_tensors``), so with the attention (the
  layer input) in the graph the received tensor and its static copy are both alive: ``a T h`` per chunk
  and micro-batch in flight (not on the embedding chunk, whose embedding output nothing else keeps).

**Allocated vs reserved: what runs inside a graph is not allocated at replay.**  TE captures every graph
into the private pool through the caching allocator, so the capture's own peak counts in
``torch.cuda.max_memory_allocated``; then, once a backward graph is captured, autograd frees the forward
graph's saved tensors into the pool and TE weak-refs its static outputs (``graph.py`` ``make_graphed_callables``,
TE 2.11 .. 2.18, the ``_order`` branch: "These two type of tensors are both in cudagraph mempool, so we just
deallocate them"); a replay writes into those addresses without calling the allocator.  So at replay the
allocated bytes hold the eager part only (the MLP / MoE outside the scope, the static inputs, the schedule's
tensors), while the pool stays *reserved* at the capture's peak of graphed tensors.  The allocated peak of a
graphed rank is the larger of (a) the capture -- the in-flight (layer, micro-batch) graphs' saved tensors
in the schedule's order (``_order``: the same walk as the eager schedule), the static inputs, and one
graphed backward's temporaries (TE 2.11 .. 2.16 warm up each callable's forward and backward back to back,
``del outputs, grad_inputs``, a single callable's worth) -- and (b) the replayed steps: the eager part's
saved tensors in flight and its transients (the loss, the MoE dispatch, the MLP backward).  The reserved
peak is the replay's plus the pool (:func:`graphed_kept_bytes` walked over the schedule, plus the graphed
backward's temporaries).  Megatron's ``TECudaGraphHelper.create_cudagraphs`` (Megatron-LM d98e8a64dd) calls
it before the first step under ``--cuda-graph-warmup-steps 0``, after the warm-up steps otherwise; the
warm-up steps run eagerly and their peak is the ungraphed one (not modelled: the published peaks here are
all of capture-first runs or logged after the warm-up).

``T`` = tokens of the rank's sequence shard (``s/cp x b``, ``/tp`` under sequence parallelism), ``a`` = 2
(the static hidden states are bf16).  Not counted: after eager warm-up steps (``--cuda-graph-warmup-steps``
> 0), that the temporaries of the graphed part (its backward's input gradients) and of the eager part peak in
two pools (the private pool is sized by its own peak; captured first, the graphed backward's temporaries are
the pool's, ``memory.mcore`` ``_graph_backward_split``); the pool's fragmentation (no expandable segments inside
a private pool).
"""

from __future__ import annotations

MOE_SCOPES = ("moe", "moe_router", "moe_preprocess")


def graphed_layer(scope: tuple[str, ...], *, moe: bool) -> bool:
    """megatron ``cuda_graphs.py`` ``_layer_is_graphable`` for a GPT decoder layer (it has attention)."""
    if not scope or "attn" in scope:
        return True
    if moe:
        return any(s in scope for s in MOE_SCOPES)
    return "mlp" in scope


def attention_in_graph(scope: tuple[str, ...]) -> bool:
    """The graph starts at the layer input (``attn`` in the scope, or the whole layer)."""
    return not scope or "attn" in scope


def te_graph_layer_bytes(scope: tuple[str, ...], *, moe: bool, shared_in_graph: bool, tokens: float, hidden: int,
                         mbs: int, seq: int, cp: int = 1, a: int = 2) -> float:
    """Bytes one graphed layer holds per micro-batch in flight beyond the eager layer's saved tensors
    (module docstring): the static attention mask, the shared expert's static output or the layer's
    static output.  ``shared_in_graph``: shared experts computed inside the MoE graph (not overlapped)."""
    if not graphed_layer(scope, moe=moe):
        return 0.0
    out = 0.0
    if attention_in_graph(scope):
        out += float(mbs * (seq // cp) * seq)  # bool [b, 1, s/cp, s]
    whole_mlp = not scope or ("moe" in scope if moe else "mlp" in scope)
    if whole_mlp:
        out += a * tokens * hidden  # the layer output: static output + the next graph's static input
    elif moe and "moe_router" in scope and shared_in_graph:
        out += a * tokens * hidden  # the shared expert's output among the early-return outputs
    return out


def te_graph_chunk_input_bytes(scope: tuple[str, ...], *, receives: bool, tokens: float, hidden: int,
                               a: int = 2) -> float:
    """The received chunk input the schedule keeps beside its static copy (module docstring), per chunk
    and micro-batch in flight; 0 for the embedding chunk or when the graph does not start at the input
    (a scope with the attention graphs every layer, dense or MoE: :func:`graphed_layer`)."""
    if not receives or not attention_in_graph(scope):
        return 0.0
    return a * tokens * hidden


def graphed_kept_bytes(scope: tuple[str, ...], *, moe: bool, attention: float, rest: float) -> float:
    """Bytes of one layer's saved tensors (one micro-batch) that live in the graphs' private pool, so are
    not allocated at replay (module docstring): the attention block's (``attention``) when the graph starts at
    the layer input, the MLP / MoE's (``rest``) when the whole MLP / MoE is in the graph too (an empty scope,
    ``mlp`` on a dense layer, ``moe`` on an MoE layer).  A partial MoE scope (``moe_router`` /
    ``moe_preprocess``) is counted eager: its pre-MLP norm and routing tensors, small beside the experts'."""
    if not graphed_layer(scope, moe=moe):
        return 0.0
    out = attention if attention_in_graph(scope) else 0.0
    if not scope or ("moe" in scope if moe else "mlp" in scope):
        out += rest
    return out


def hybrid_graph_bytes(scope: tuple[str, ...], symbol: str, *, kept: float, shared_in_graph: bool, tokens: float,
                       hidden: int, mbs: int, seq: int, cp: int = 1, a: int = 2) -> tuple[float, float]:
    """(bytes of the saved tensors in the graphs' private pool, static bytes beyond the eager layer's) of one layer
    of a hybrid Mamba stack (``symbol`` M / * / - / E, ``kept`` its saved bytes) under TE-scoped graphs.
    megatron-core 0.16.1 ``transformer/cuda_graphs.py`` ``_layer_is_graphable``: every layer with an empty scope; a
    ``MambaLayer`` with ``mamba``; an attention layer with ``attn``; an MoE layer with ``moe`` / ``moe_router`` /
    ``moe_preprocess``; an MLP layer with ``mlp``.  A graphed layer is one whole graph (each symbol is its own
    layer): its saved tensors in the pool and its static output (``a tokens hidden``), the attention layer's
    static mask too (as :func:`te_graph_layer_bytes`); an MoE layer under a partial scope (``moe_router`` /
    ``moe_preprocess``) keeps its saved tensors eager (as :func:`graphed_kept_bytes`), the shared expert's output
    static when it runs in the router's graph."""
    full = not scope
    out = a * tokens * hidden
    if symbol == "M":
        return (kept, out) if full or "mamba" in scope else (0.0, 0.0)
    if symbol == "*":
        return (kept, out + float(mbs * (seq // cp) * seq)) if full or "attn" in scope else (0.0, 0.0)
    if symbol == "-":
        return (kept, out) if full or "mlp" in scope else (0.0, 0.0)
    if full or "moe" in scope:
        return kept, out
    if "moe_router" in scope and shared_in_graph:
        return 0.0, out
    return 0.0, 0.0
