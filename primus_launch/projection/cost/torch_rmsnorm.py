"""What eager ``torch.nn.RMSNorm`` (``F.rms_norm``) runs on the GPU, by torch release.

TorchTitan's models use ``nn.RMSNorm``; under ``torch.compile`` inductor fuses it, in eager mode ATen runs:

- **Composite** (torch < 2.9): ``aten::rms_norm`` was CompositeImplicitAutograd, decomposed into
  ``_to_copy`` (bf16 -> fp32), ``pow``, ``mean``, ``add_``, ``rsqrt``, ``mul``, ``mul`` (weight), ``_to_copy``
  back: :data:`~primus_launch.projection.cost.elementwise_bytes.RMSNORM_EAGER` (36 B per element forward, 6
  kernels; autograd's backward of each op, 10 kernels, twice the bytes).
- **Fused** (torch >= 2.9): pytorch/pytorch PR #153666 ("Fused RMSNorm implementation") added
  ``aten::_fused_rms_norm`` with a CUDA kernel (``native_functions.yaml``: ``CUDA: _fused_rms_norm_cuda``,
  ``CompositeImplicitAutograd: rms_norm_composite`` for every other device) and a fused backward
  ``_fused_rms_norm_backward`` (``derivatives.yaml``: used when grad mode is off in backward, i.e. every ordinary
  ``.backward()``); ``rms_norm_symint`` (``aten/src/ATen/native/layer_norm.cpp``) calls ``_fused_rms_norm`` unless
  the input is channels-last / complex or the weight's dtype differs from the input's (then the composite; under
  FSDP2's bf16 ``param_dtype`` the weight is bf16).  The CUDA kernels are ``layer_norm_kernel.cu``'s layer-norm
  kernels with a ``bool rms_norm`` template switch: forward one row kernel (``vectorized_layer_norm_kernel``)
  reading X and writing Y (the fp32 rstd per row is negligible): **4 B per element, 1 kernel**; backward the
  grad-input kernel (``layer_norm_grad_input_kernel[_vectorized]``) reading dY and X and writing dX (6 B) and the
  weight-grad reduction reading dY and X again (4 B; partial sums + final reduce, 2 kernels for >= 128 rows):
  **10 B per element, 3 kernels** (:data:`RMSNORM_TORCH_FUSED`).

Which release first has it: the PR (opened 2025-05-15) had not landed on 2025-07-09 (pytorch/pytorch issue
#157345, albanD: "will be solved by #153666 when it lands") and was in the nightlies by mid-August 2025 (same
thread, 2025-08-13); torch 2.8.0 (2025-08-06) was cut from its release branch before that, so 2.9.0 (2025-10) is
the first release with it (:data:`FIRST_RELEASE`).  2.9 pre-releases (``2.9.0.devYYYYMMDD``, ``2.9.0a0+git...``)
count as having it: the kernel landed during the 2.9 cycle, so the few nightlies of July 2025 are priced fused.

Verified against the installed torch 2.13 by ``tests/test_torch_rmsnorm.py`` (the dispatch table of
``aten::_fused_rms_norm`` / ``_fused_rms_norm_backward`` and the CPU composite traced under a dispatch mode).
The memory model already keeps the fused kernel's saved tensors (``memory/titan.py`` ``norm_bytes``).
"""

from __future__ import annotations

from typing import Optional

from packaging.version import Version

# first torch release whose eager F.rms_norm runs the fused CUDA kernel (module doc)
FIRST_RELEASE = Version("2.9.0.dev0")
# (bytes per element forward, bytes per element backward, kernels forward, kernels backward) of the fused
# kernel (module doc: layer_norm_kernel.cu's rms_norm specialisation)
RMSNORM_TORCH_FUSED = (4.0, 10.0, 1, 3)


def torch_fuses_rms_norm(torch_version: Optional[str]) -> bool:
    """Whether eager ``nn.RMSNorm`` runs PyTorch's fused CUDA kernel on the run's torch (``plan.software.torch``;
    None: the current stack, which has it): ``version >= 2.9`` pre-releases included (module doc)."""
    if torch_version is None:
        return True
    from primus_launch.plan import parse_torch_version

    return parse_torch_version(torch_version) >= FIRST_RELEASE
