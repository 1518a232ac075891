"""Shims that let megatron-core 0.16.1 run real training steps on a CPU-only torch (gloo).

megatron-core assumes CUDA in a handful of places that have nothing to do with the maths of a
layer.  Each shim below replaces exactly one of them and leaves the framework's own modules
(``GPTModel``, ``TransformerLayer``, ``MoELayer``, ``get_forward_backward_func``) unchanged.
Facts behind each shim: /work/shared/notes/frameworks-on-cpu.md.

Usage (in every process, before building a model)::

    import torch.distributed as dist
    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install()                      # idempotent; no-op patches on a CUDA device
    dist.init_process_group("gloo", ...)     # or mcore_cpu.init_single_process()
    from megatron.core import parallel_state as ps
    ps.initialize_model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=1)
    mcore_cpu.seed_rng_tracker(1234)         # replaces model_parallel_cuda_manual_seed on CPU
    cfg = TransformerConfig(..., **mcore_cpu.config_overrides())
    # build GPTModel(..., get_gpt_layer_local_spec(...)), run forward/backward as usual.
    # For PP: get_forward_backward_func() works after install() (its "cuda" token counter and
    # torch.cuda.synchronize are redirected); pass config_overrides() (batch_p2p_sync=False).

What :func:`install` patches (``device="cpu"``; on ``"cuda"`` only the no-TE fixes 5 and 7 apply):

1. ``torch.cuda.current_device()`` (about 50 call sites in RoPE, the global memory buffer, MoE,
   pipeline p2p) returns ``torch.device("cpu")`` so that ``device=`` arguments land on the CPU.
2. ``torch.cuda.synchronize()`` becomes a no-op (p2p communication calls it after batched
   isend/irecv).
3. ``megatron.core.fusions.fused_softmax.get_default_causal_mask`` and
   ``get_sliding_window_causal_mask`` hard-code ``device="cuda"``: replaced by the same masks built
   on the CPU (cached per shape).
4. The CUDA RNG tracker (``tensor_parallel.random``) stores CUDA generator states; attention forks
   it even with dropout 0.  :class:`CpuRNGStatesTracker` keeps CPU generator states with the same
   interface and :func:`seed_rng_tracker` seeds it as ``model_parallel_cuda_manual_seed`` would
   (data-parallel seed, model-parallel seed ``seed + 2718 + tp_rank``, expert seed
   ``seed + 1024 + 100 * ep_rank + etp_rank``).
5. megatron-core 0.16.1 without Transformer Engine leaves ``te_general_gemm`` undefined in
   ``transformer.moe.moe_utils`` and the MoE router raises ``NameError`` (fixed upstream in 0.19):
   define it as ``None`` so the router takes its ``torch.mm`` branch.
6. ``pipeline_parallel.schedules`` allocates its token counter with ``device="cuda"``, and the
   optimizer wrappers their loss-scale / grad-norm scalars (``optimizer/optimizer.py``,
   ``optimizer/clip_grads.py``, ``utils.py``); the MoE ``alltoall`` token dispatcher creates a
   ``torch.cuda.Stream`` for its device-to-host copies of the split sizes
   (``transformer/moe/token_dispatcher.py``): those modules' global ``torch`` is replaced by a
   proxy whose tensor factories map ``"cuda"`` to the CPU and whose ``torch.cuda`` streams and
   events are synchronous stand-ins while the shim is active.

8. ``models.common.embeddings.rope_utils.get_pos_emb_on_this_cp_rank`` (context parallelism)
   builds its chunk index with ``pin_memory=True`` and ``.cuda()``: replaced by
   :func:`cp_rank_pos_emb`, the same slicing on the table's device.

9. The MoE ``alltoall`` token dispatcher hands its split sizes to ``all_to_all_single`` after
   ``moe_utils.maybe_move_tensor_to_cpu(..., as_numpy=True)``, which makes host numpy arrays of CUDA
   tensors only; a CPU tensor stays a tensor, and gloo's ``all_to_all_single`` binding refuses
   tensors as split sizes (``incompatible function arguments``): the dispatcher's copy of the
   function (:func:`_host_splits`) also makes host arrays of CPU tensors, so the dispatcher runs
   over gloo with EP > 1 as it does over NCCL.

7. Also without Transformer Engine: ``transformer.multi_latent_attention`` imports ``TELinear``
   from megatron's TE extension, which then is a ``MagicMock`` placeholder, yet sets ``HAVE_TE =
   True`` and calls ``isinstance(linear_proj, <mock>)`` (TypeError building any MLA layer):
   ``HAVE_TE`` is set False there.

Configuration that must differ on CPU (:func:`config_overrides`): no fused kernels
(``bias_activation_fusion``, ``masked_softmax_fusion``, ``gradient_accumulation_fusion``, rope
fusion off); ``batch_p2p_sync=False``.  Sequence parallel requires a non-torch LayerNorm and is not
supported by the local spec on CPU.
"""

from __future__ import annotations

import contextlib
import os
import types
from typing import Any, Optional

import torch

_INSTALLED: set[str] = set()
_ORIG_CURRENT_DEVICE = torch.cuda.current_device
_ORIG_SYNCHRONIZE = torch.cuda.synchronize


def _cpu_current_device() -> torch.device:
    return torch.device("cpu")


def _noop_synchronize(device: Any = None) -> None:
    return None


_MASKS: dict[tuple[int, int], torch.Tensor] = {}


def causal_mask(sq: int, sk: Optional[int] = None, device: str | torch.device = "cpu") -> torch.Tensor:
    """Boolean [sq, sk] mask, True above the diagonal (masked), as megatron's
    ``transformer.utils.get_default_causal_mask`` builds it (there on "cuda")."""
    sk = sq if sk is None else sk
    key = (sq, sk)
    m = _MASKS.get(key)
    if m is None or m.device != torch.device(device):
        m = torch.triu(torch.ones(sq, sk, dtype=torch.bool, device=device), diagonal=1)
        _MASKS[key] = m
    return m


_WINDOW_MASKS: dict[tuple, torch.Tensor] = {}


def sliding_window_mask(sq: int, skv: int, window_size) -> torch.Tensor:
    """megatron's ``transformer.utils.get_sliding_window_causal_mask`` (True = masked) on the CPU
    (upstream builds it on "cuda"), cached per shape and window."""
    dev = "cpu" if _shim_active() else "cuda"
    key = (sq, skv, tuple(window_size), dev)
    if key not in _WINDOW_MASKS:
        m = torch.ones(sq, skv, dtype=torch.bool, device=dev)
        mu = torch.triu(m, diagonal=skv - sq - window_size[0])
        _WINDOW_MASKS[key] = ~torch.tril(mu, diagonal=skv - sq + window_size[1])
    return _WINDOW_MASKS[key]


def _shim_active() -> bool:
    return torch.cuda.current_device is _cpu_current_device


def _default_causal_mask(sq: int) -> torch.Tensor:
    return causal_mask(sq, device="cpu" if _shim_active() else "cuda")


class _CpuEvent:
    """Stand-in for a ``torch.cuda.Event`` on the CPU: work is synchronous, nothing to wait for."""

    def record(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def wait(self, stream: Any = None) -> None:
        return None


class _CpuStream:
    """Stand-in for a ``torch.cuda.Stream`` on the CPU (one stream: the calling thread)."""

    def wait_stream(self, other: Any) -> None:
        return None

    def wait_event(self, event: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> _CpuEvent:
        return _CpuEvent()

    def synchronize(self) -> None:
        return None


_CPU_STREAM = _CpuStream()


class _CpuCuda(types.ModuleType):
    """Proxy for ``torch.cuda`` seen from a proxied megatron module: while the CPU shim is active,
    streams and events are the synchronous :class:`_CpuStream` / :class:`_CpuEvent`; everything else
    is ``torch.cuda`` itself."""

    def __init__(self) -> None:
        super().__init__("torch.cuda")

    def __getattr__(self, name: str) -> Any:
        if _shim_active():
            if name in ("Stream", "current_stream", "default_stream"):
                return lambda *a, **k: _CPU_STREAM
            if name == "Event":
                return lambda *a, **k: _CpuEvent()
            if name == "stream":
                return lambda *a, **k: contextlib.nullcontext()
        return getattr(torch.cuda, name)


class _CpuFactoryTorch(types.ModuleType):
    """Proxy for the ``torch`` module inside one megatron module: while the CPU shim is active,
    tensor factories called with ``device="cuda"`` allocate on the CPU and ``torch.cuda``'s streams
    and events are synchronous stand-ins (:class:`_CpuCuda`); everything else (and everything
    after :func:`uninstall`) is torch itself."""

    _FACTORIES = ("zeros", "ones", "empty", "full", "tensor", "arange")

    def __init__(self) -> None:
        super().__init__("torch")
        self._cuda = _CpuCuda()

    def __getattr__(self, name: str) -> Any:
        if name == "cuda":
            return self._cuda
        attr = getattr(torch, name)
        if name in self._FACTORIES:
            def factory(*args: Any, **kwargs: Any) -> Any:
                dev = kwargs.get("device")
                if dev is not None and _shim_active() and torch.device(dev).type == "cuda":
                    kwargs["device"] = "cpu"
                return attr(*args, **kwargs)

            return factory
        return attr


class CpuRNGStatesTracker:
    """CPU stand-in for megatron's ``CudaRNGStatesTracker`` (same methods: ``reset``,
    ``get_states``, ``set_states``, ``add``, ``fork``, ``is_initialized``).

    ``fork(name)`` swaps the CPU default generator to the named state and back, as the CUDA
    tracker does with the CUDA generator (megatron/core/tensor_parallel/random.py).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.reset()

    def is_initialized(self) -> bool:
        return self._is_initialized

    def reset(self) -> None:
        self._is_initialized = False
        self.states_: dict[str, torch.Tensor] = {}
        self.seeds_: set[int] = set()

    def get_states(self) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in self.states_.items()}

    def set_states(self, states: dict[str, torch.Tensor]) -> None:
        self._is_initialized = True
        self.states_ = states

    def add(self, name: str, seed: int) -> None:
        self._is_initialized = True
        if seed in self.seeds_:
            raise Exception(f"seed {seed} already exists")
        self.seeds_.add(seed)
        if name in self.states_:
            raise Exception(f"rng state {name} already exists")
        orig = torch.get_rng_state()
        torch.manual_seed(seed)
        self.states_[name] = torch.get_rng_state()
        torch.set_rng_state(orig)

    @contextlib.contextmanager
    def fork(self, name: str = "model-parallel-rng"):
        if name not in self.states_:
            raise Exception(f"rng state {name} is not added")
        orig = torch.get_rng_state()
        torch.set_rng_state(self.states_[name])
        try:
            yield
        finally:
            self.states_[name] = torch.get_rng_state()
            torch.set_rng_state(orig)


def seed_rng_tracker(seed: int = 1234, tp_rank: Optional[int] = None, ep_rank: Optional[int] = None,
                     etp_rank: Optional[int] = None) -> None:
    """Seed the RNG tracker like ``tensor_parallel.model_parallel_cuda_manual_seed`` does
    (random.py: dp seed = seed, tp seed = seed + 2718 + tp_rank, expert seed = seed + 1024 +
    100 * ep_rank + etp_rank), with CPU generator states.  Needs ``initialize_model_parallel`` first
    when ranks are not given."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel import random as r

    if tp_rank is None:
        tp_rank = ps.get_tensor_model_parallel_rank()
    if ep_rank is None:
        ep_rank = ps.get_expert_model_parallel_rank()
    if etp_rank is None:
        etp_rank = ps.get_expert_tensor_parallel_rank()
    tracker = CpuRNGStatesTracker()
    r._CUDA_RNG_STATE_TRACKER = tracker
    r._CUDA_RNG_STATE_TRACKER_INITIALIZED = True
    offset = seed + 2718
    torch.manual_seed(seed)
    tracker.add(r._DATA_PARALLEL_RNG_TRACKER_NAME, seed)
    tracker.add(r._MODEL_PARALLEL_RNG_TRACKER_NAME, offset + tp_rank)
    tracker.add(r._EXPERT_PARALLEL_RNG_TRACKER_NAME, seed + 1024 + 100 * ep_rank + etp_rank)


def cp_rank_pos_emb(pos_emb: torch.Tensor, seq_dim: int, cp_group: Any) -> torch.Tensor:
    """``rope_utils.get_pos_emb_on_this_cp_rank`` without its pinned-memory ``.cuda()`` index:
    the rotary table of this context-parallel rank's two load-balanced chunks (r and 2cp-1-r)."""
    if cp_group is None:
        raise ValueError("cp_group must be provided to get positional embedding per CP rank")
    cp_size, cp_rank = cp_group.size(), cp_group.rank()
    idx = torch.tensor([cp_rank, 2 * cp_size - cp_rank - 1], device=pos_emb.device)
    pos_emb = pos_emb.view(*pos_emb.shape[:seq_dim], 2 * cp_size, -1, *pos_emb.shape[seq_dim + 1:])
    pos_emb = pos_emb.index_select(seq_dim, idx)
    return pos_emb.view(*pos_emb.shape[:seq_dim], -1, *pos_emb.shape[seq_dim + 2:])


def _host_splits(tensor: Any, as_numpy: bool = False, record_stream: bool = False) -> Any:
    """megatron's ``moe_utils.maybe_move_tensor_to_cpu`` (shim 9): a CUDA tensor as upstream; with
    ``as_numpy`` a CPU tensor also becomes a host numpy array (what upstream returns for a CUDA one)."""
    from megatron.core.transformer.moe.moe_utils import maybe_move_tensor_to_cpu

    if as_numpy and torch.is_tensor(tensor) and tensor.device.type == "cpu":
        return tensor.numpy()
    return maybe_move_tensor_to_cpu(tensor, as_numpy=as_numpy, record_stream=record_stream)


def install(device: str | torch.device = "cpu") -> None:
    """Apply the shims (idempotent).  On a CUDA device only the ``te_general_gemm`` / MLA fixes apply,
    and the CPU shims of an earlier CPU install in the process are lifted first (:func:`uninstall`):
    with them, ``torch.cuda.current_device()`` would place megatron's tensors on the CPU and
    ``torch.cuda.synchronize()`` would not wait for the device, so CUDA events would time nothing."""
    dev = torch.device(device).type
    if dev != "cpu" and _shim_active():
        uninstall()
    if dev in _INSTALLED:
        return
    import megatron.core.transformer.moe.moe_utils as moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None
    import megatron.core.transformer.multi_latent_attention as mla

    if mla.HAVE_TE and not isinstance(mla.TELinear, type):
        mla.HAVE_TE = False
    if dev == "cpu":
        torch.cuda.current_device = _cpu_current_device
        torch.cuda.synchronize = _noop_synchronize
        import megatron.core.fusions.fused_softmax as fused_softmax
        import megatron.core.optimizer.clip_grads as clip_grads
        import megatron.core.optimizer.optimizer as optimizer_mod
        import megatron.core.pipeline_parallel.schedules as schedules
        import megatron.core.transformer.moe.token_dispatcher as token_dispatcher
        import megatron.core.transformer.utils as tutils
        import megatron.core.utils as mcore_utils

        fused_softmax.get_default_causal_mask = _default_causal_mask
        tutils.get_default_causal_mask = _default_causal_mask
        fused_softmax.get_sliding_window_causal_mask = sliding_window_mask
        tutils.get_sliding_window_causal_mask = sliding_window_mask
        import megatron.core.models.common.embeddings.rope_utils as rope_utils
        import megatron.core.models.common.embeddings.rotary_pos_embedding as rotary

        token_dispatcher.maybe_move_tensor_to_cpu = _host_splits
        rope_utils.get_pos_emb_on_this_cp_rank = cp_rank_pos_emb
        rotary.get_pos_emb_on_this_cp_rank = cp_rank_pos_emb
        route_factories_to_cpu((schedules, optimizer_mod, clip_grads, mcore_utils, token_dispatcher))
    _INSTALLED.add(dev)


def route_factories_to_cpu(modules) -> None:
    """Give each of ``modules`` (megatron modules that call ``torch.*(device="cuda")`` factories) the
    ``torch`` proxy of :class:`_CpuFactoryTorch`: while the shim is active their CUDA tensor factories
    allocate on the CPU; otherwise they are torch's own."""
    for mod in modules:
        if not isinstance(mod.torch, _CpuFactoryTorch):
            mod.torch = _CpuFactoryTorch()


def uninstall() -> None:
    """Restore ``torch.cuda.current_device`` / ``synchronize``; the module proxies and the mask
    then behave as upstream again (they check whether the shim is active)."""
    torch.cuda.current_device = _ORIG_CURRENT_DEVICE
    torch.cuda.synchronize = _ORIG_SYNCHRONIZE
    _INSTALLED.discard("cpu")


def config_overrides(device: str | torch.device = "cpu") -> dict[str, Any]:
    """``TransformerConfig`` keyword arguments needed to run on ``device`` without TE/Apex."""
    out: dict[str, Any] = {
        "use_cpu_initialization": torch.device(device).type == "cpu",
        "moe_token_dispatcher_type": "allgather",
        "bias_activation_fusion": False,
        "masked_softmax_fusion": False,
        "gradient_accumulation_fusion": False,
        "apply_rope_fusion": False,
        "persist_layer_norm": False,
        "bias_dropout_fusion": False,
        "batch_p2p_sync": False,
    }
    return out


@contextlib.contextmanager
def eager_fusions(device: str | torch.device = "cpu"):
    """On the CPU, run megatron's ``jit_fuser`` functions (``torch.compile``-wrapped fused bias-SwiGLU,
    bias-GeLU, ...) eagerly: ``torch._dynamo.config.disable`` for the block (compiling them for the
    CPU needs a C++ toolchain and seconds per shape, and changes neither what they compute nor
    what they keep for backward).  On CUDA they stay compiled when triton (inductor's GPU backend)
    is importable, else they run eagerly too."""
    import importlib.util

    if torch.device(device).type != "cpu" and importlib.util.find_spec("triton") is not None:
        yield
        return
    from torch._dynamo import config as dynamo_config

    with dynamo_config.patch(disable=True):
        yield


def init_single_process(port: Optional[int] = None) -> None:
    """A gloo process group of world size 1 (rank 0) if none exists, for single-process
    measurement.  Rendezvous goes through an in-process ``HashStore`` (no TCP port, so parallel
    processes cannot collide); with ``port`` a TCP store on that port is used instead."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if port is not None:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=0, world_size=1)
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
