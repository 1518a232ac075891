"""The local measuring device in words: why torch sees no GPU, and which GPU of the hardware database
a visible device is (the measured path times pieces on THIS device; projecting them on another GPU
kind mixes two machines, so the default target is the device's own kind when the database has it).

Device names are what ``torch.cuda.get_device_name`` returns -- NVIDIA's marketing names ("NVIDIA
H100 80GB HBM3", "NVIDIA H100 NVL", "NVIDIA A100-SXM4-40GB", "NVIDIA GH200 480GB") and, on ROCm,
"AMD Instinct MI300X" (some ROCm releases and VFs report an empty or generic name; the
``gcnArchName`` property, e.g. ``"gfx942:sramecc+:xnack-"``, and the memory size then tell the part).
A device the database does not hold -- H100 PCIe / NVL (other clocks, memory and power than the SXM
part), GH200, H800, MI300A -- maps to None: the caller says so instead of guessing.
"""

from __future__ import annotations

from typing import Any, Optional

from primus_launch.projection.hardware.gpus import GiB

#: marketing-name keys that are NOT the database part whose key they contain (checked first)
_NOT_IN_DB = ("GH200", "H100NVL", "H100PCIE", "H800", "MI300A", "A100-PCIE", "A100PCIE", "A800")

#: name key -> database GPU, most specific first ("GB200" before "B200")
_BY_NAME = (("GB300", "gb300"), ("GB200", "gb200"), ("B300", "b300"), ("B200", "b200"), ("H200", "h200"),
            ("H100", "h100-sxm"), ("MI355X", "mi355x"), ("MI350X", "mi350x"), ("MI325X", "mi325x"),
            ("MI300X", "mi300x"), ("A100", "a100-sxm-80gb"))


def gcn_base(gcn_arch: str) -> str:
    """The architecture of a ROCm ``gcnArchName`` without its feature flags, lower-case
    (``"gfx942:sramecc+:xnack-"`` -> ``"gfx942"``; ``""`` for none)."""
    return gcn_arch.split(":")[0].lower()


def props_gcn_arch(props: Any) -> str:
    """A device's ``gcnArchName`` from ``torch.cuda.get_device_properties`` (``""`` on CUDA builds and where
    the ROCm release reports none)."""
    return str(getattr(props, "gcnArchName", "") or "")


def gpu_of_device(name: str, total_memory: int = 0, gcn_arch: str = "") -> Optional[str]:
    """The hardware database's GPU of a device named ``name`` (``torch.cuda.get_device_name``) with
    ``total_memory`` bytes (``get_device_properties().total_memory``; 0: unknown) and, on ROCm,
    ``gcn_arch`` (``gcnArchName``); None when the database holds no such part (module docstring).

    Memory separates parts of one name: an A100 under 60 GiB is the 40 GB one; an H100 above 90 GiB
    the 96 GB, 500 W one (``h100-sxm-96gb-500w``).  A ROCm device without a known name: gfx942 with
    more than 224 GiB is an MI325X (256 GB), with more than 160 GiB an MI300X (192 GB); gfx950 (MI350X
    and MI355X: one die, same memory, other power) maps to None."""
    key = name.upper().replace(" ", "").replace("_", "")
    for bad in _NOT_IN_DB:
        if bad in key:
            return None
    for k, gpu in _BY_NAME:
        if k not in key:
            continue
        if gpu == "a100-sxm-80gb" and total_memory and total_memory < 60 * GiB:
            return "a100-sxm-40gb"
        if gpu == "h100-sxm" and total_memory > 90 * GiB:
            return "h100-sxm-96gb-500w"
        return gpu
    arch = gcn_base(gcn_arch)
    if arch == "gfx942" and total_memory:
        if total_memory > 224 * GiB:
            return "mi325x"
        if total_memory > 160 * GiB:
            return "mi300x"
    return None


def local_device_gpu(index: Optional[int] = None) -> tuple[str, Optional[str]]:
    """(device name, database GPU or None) of the visible CUDA / ROCm device ``index`` (None: the
    current one); ("", None) when torch sees no GPU."""
    import torch

    if not torch.cuda.is_available():
        return "", None
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index)
    name = props.name or torch.cuda.get_device_name(index)
    return name, gpu_of_device(name, int(props.total_memory), props_gcn_arch(props))


def no_gpu_reason(version: Optional[str] = None, cuda: Optional[str] = None, hip: Optional[str] = None) -> str:
    """Why torch sees no GPU, in words: a CPU-only torch build (neither ``torch.version.cuda`` nor
    ``torch.version.hip`` set: a GPU on the machine is out of its reach), else a CUDA / ROCm build
    that sees no device (driver, ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES``).  The arguments
    default to the installed torch's (``""`` for "not set")."""
    import torch

    version = torch.__version__ if version is None else version
    cuda = torch.version.cuda if cuda is None else cuda
    hip = getattr(torch.version, "hip", None) if hip is None else hip
    if not cuda and not hip:
        return f"torch {version} is a CPU-only build (no CUDA / ROCm): it cannot use a GPU even where one is installed"
    build = f"CUDA {cuda}" if cuda else f"ROCm {hip}"
    return f"torch {version} ({build}) sees no GPU (driver, CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES)"
