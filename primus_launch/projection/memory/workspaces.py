"""GEMM workspaces a training process allocates *through* PyTorch's caching allocator: counted by
``torch.cuda.max_memory_allocated`` (unlike the CUDA context and cuBLAS handles of :mod:`memory.outside`),
allocated at the first GEMM and kept for the whole run.

- **torch's cuBLAS workspace**, one per (handle, stream) pair (``aten/src/ATen/cuda/CublasHandlePool.cpp``
  ``setWorkspaceForHandle`` / ``cublas_handle_stream_to_workspace``, allocated with
  ``CUDACachingAllocator::get()->allocate``; handles are per thread, ``DeviceThreadHandlePool``).  A training
  step runs torch GEMMs on two threads on the default stream: the forward on the main thread and the backward
  on the autograd engine's device thread, so two pairs (:data:`TORCH_PAIRS`).  Size
  ``parseChosenWorkspaceSize``: NVIDIA 32 MiB (``4096 * 8 * 1024``) on sm90 and -- since pytorch/pytorch#175344
  (2026-02-19; ``major`` 9, 10, 11 or 12) -- on Blackwell, else ``:4096:2:16:8`` = ``4096 * 1024 * 2 + 16 *
  1024 * 8``; ROCm 128 MiB on gfx942 / gfx950 (CDNA3 / CDNA4), 32 MiB otherwise.  cuBLASLt: unified with the
  cuBLAS workspace by default on CUDA since pytorch/pytorch#168175 / #173002 (2026-01 / 03; before, a separate
  1 MiB per pair, ``CUBLASLT_WORKSPACE_SIZE`` 1024 KiB, not counted); the installed torch 2.13's
  ``torch.backends.cuda.blas_workspace_size`` documents the shared allocation.  ROCm keeps a separate
  hipBLASLt workspace (76 MiB, ``HIPBLASLT_WORKSPACE_SIZE``) which torch's GEMMs may take instead of the
  hipBLAS one there: not counted (either is < 0.1 % of a 192-288 GB part).
  A Megatron stage runs torch GEMMs where it holds the output layer (``tensor_parallel.ColumnParallelLinear``,
  megatron-core ``models/gpt/gpt_model.py``), an MoE router (``router_gating_linear``), unfused / local
  attention (``baddbmm`` / ``bmm``) or the local spec's linears; a stage of Transformer Engine layers with
  fused attention runs none.  A TorchTitan stage runs all its GEMMs through torch: the two pairs on every
  stage (``memory.estimate.titan_gemm_workspaces``: ``gemm_workspaces(arch, te=False)``).
- **Transformer Engine's workspaces** (TE 2.10 .. 2.17.1 ``pytorch/cpp_extensions/gemm.py``
  ``get_cublas_workspace(device, ub, grouped_gemm)``, ``lru_cache``'d: one set per device for the run):
  ``get_cublas_workspace_size_bytes`` = 32 MiB + 1 KiB at compute capability >= 9, 4 MiB before (ROCm TE:
  64 MiB on gfx950, 32 MiB otherwise, ``IS_HIP_EXTENSION``); one for every TE GEMM; ``_NUM_MAX_UB_STREAMS``
  = 3 more for the userbuffers GEMMs of ``--tp-comm-overlap`` (``ub=True``); ``tex.get_num_cublas_streams()``
  = 4 more (``common/util/multi_stream.cpp`` ``num_compute_streams``) for ``GroupedLinear``'s
  ``general_grouped_gemm`` (MoE experts as TE grouped GEMM; its graph-safe grouped-tensor path allocates a
  per-call workspace instead, a transient not counted).  TE <= 2.9 (``module/base.py``) kept one
  ``get_workspace()`` and ``initialize_ub`` replaced it by ``get_workspace().repeat(3)``: three in all with
  userbuffers, not four (the newer layout is counted).

Not counted: GEMMs on other streams (CUDA-graph capture, overlapped MoE communication streams), the
grouped_gemm library's (``--moe-use-legacy-grouped-gemm``) and Primus-Turbo's own stream workspaces; the
caching allocator's 2 MiB rounding of each workspace's segment.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024**2
#: torch's cuBLAS workspace per (handle, stream) pair by kernel family (``hardware.gpus`` ``arch``;
#: '' = unknown: Hopper's)
TORCH_WORKSPACE = {"": 4096 * 8 * 1024, "hopper": 4096 * 8 * 1024, "blackwell": 4096 * 8 * 1024,
                   "blackwell_ultra": 4096 * 8 * 1024, "ampere": 4096 * 1024 * 2 + 16 * 1024 * 8,
                   "cdna3": 1024 * 128 * 1024, "cdna4": 1024 * 128 * 1024}
#: forward (main thread) and backward (autograd device thread), both on the default stream
TORCH_PAIRS = 2
#: TE ``get_cublas_workspace_size_bytes`` by kernel family
TE_WORKSPACE = {"": 32 * MiB + 1024, "hopper": 32 * MiB + 1024, "blackwell": 32 * MiB + 1024,
                "blackwell_ultra": 32 * MiB + 1024, "ampere": 4 * MiB, "cdna3": 32 * MiB, "cdna4": 64 * MiB}
TE_UB_STREAMS = 3  # TE _NUM_MAX_UB_STREAMS
TE_GROUPED_STREAMS = 4  # TE nvte_get_num_compute_streams()

__all__ = ["GemmWorkspaces", "TE_GROUPED_STREAMS", "TE_UB_STREAMS", "TE_WORKSPACE", "TORCH_PAIRS",
           "TORCH_WORKSPACE", "gemm_workspaces"]


@dataclass(frozen=True)
class GemmWorkspaces:
    """The workspaces a plan's processes allocate, by what allocates them (bytes; 0 = none)."""

    torch_pair: float = 0.0  # torch's cuBLAS workspace per (thread, stream) pair
    torch_everywhere: bool = False  # every stage runs torch GEMMs (unfused / local attention, local spec)
    te: float = 0.0  # TE's workspaces (plain + userbuffers) on every stage with TE layers
    te_grouped: float = 0.0  # TE GroupedLinear's multi-stream workspaces, on stages with MoE layers

    def stage_bytes(self, *, layers: bool, loss: bool, moe: bool) -> float:
        """Bytes on a stage that has decoder ``layers``, holds the ``loss`` (output layer) and / or ``moe``
        layers: ``TORCH_PAIRS x torch_pair`` where the stage runs torch GEMMs, TE's where it has layers,
        the grouped ones where it has MoE layers."""
        torch_gemms = loss or moe or (layers and self.torch_everywhere)
        return ((TORCH_PAIRS * self.torch_pair if torch_gemms else 0.0) + (self.te if layers else 0.0)
                + (self.te_grouped if moe else 0.0))


def gemm_workspaces(arch: str, *, te: bool, userbuffers: bool = False, te_grouped: bool = False,
                    torch_everywhere: bool = False) -> GemmWorkspaces:
    """The :class:`GemmWorkspaces` of a Megatron plan on a GPU of kernel family ``arch`` (module doc):
    ``te`` -- Transformer Engine layers; ``userbuffers`` -- ``--tp-comm-overlap`` (TE's 3 userbuffers
    workspaces); ``te_grouped`` -- MoE experts as TE ``GroupedLinear`` (4 more); ``torch_everywhere`` --
    every stage runs torch GEMMs.  ``torch_pair = TORCH_WORKSPACE[arch]``, ``te = (1 + 3 ub) x
    TE_WORKSPACE[arch]``, ``te_grouped = 4 x TE_WORKSPACE[arch]``."""
    arch = arch if arch in TORCH_WORKSPACE else ""
    one = float(TE_WORKSPACE[arch])
    return GemmWorkspaces(torch_pair=float(TORCH_WORKSPACE[arch]), torch_everywhere=torch_everywhere or not te,
                          te=(1 + (TE_UB_STREAMS if userbuffers else 0)) * one if te else 0.0,
                          te_grouped=TE_GROUPED_STREAMS * one if (te and te_grouped) else 0.0)
