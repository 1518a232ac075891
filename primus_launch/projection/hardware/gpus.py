"""Hardware database: peak compute, HBM, and interconnect of the GPUs primus-launch can target.

All bandwidths are in bytes/s *per direction per GPU*; FLOP/s are dense (no 2:4 sparsity).
Users can add or override GPUs with a TOML or YAML file (:func:`load_gpu_file`) whose tables
carry the same field names as :class:`GPUSpec`, e.g.::

    [gpu.my-gpu]
    peak_flops_bf16 = 1.0e15
    hbm_bytes = 1.0e11
    ...
"""

from __future__ import annotations

import math
import re

from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from primus_launch.plan import Plan, PlanError

GiB = 1024**3
GB = 1e9


# plausible ranges of a GPU file's figures (far outside any GPU made: a typo's 1e30 or 0.001 is
# refused by name instead of projecting an infinite or zero time); nan / inf are refused by the config
_RANGES = {
    "peak_flops_bf16": (1e9, 1e18, "FLOP/s"), "peak_flops_fp8": (1e9, 1e18, "FLOP/s"),
    "peak_flops_fp4": (1e9, 1e18, "FLOP/s"), "hbm_bytes": (2.0**20, 2.0**50, "bytes"),
    "hbm_bw": (1e6, 1e15, "bytes/s"), "intra_node_bw": (1e6, 1e15, "bytes/s"),
    "intra_node_link_bw": (1e6, 1e15, "bytes/s"), "inter_node_bw": (1e6, 1e15, "bytes/s"),
    "host_link_bw": (1e6, 1e15, "bytes/s"), "intra_node_latency_s": (0.0, 1.0, "s"),
    "inter_node_latency_s": (0.0, 1.0, "s"), "tdp_watts": (1.0, 1e5, "W"), "power_limit_w": (1.0, 1e5, "W"),
    "peak_power_w": (1.0, 1e5, "W"),
    # a bound far below any sustained clock (as plan.sections.LIMITS: it keeps a typo from a 10^300 s answer)
    "sustained_clock_fraction": (0.05, 1.0, "(of the boost clock)"),
    "num_sms": (1, 100_000, "SMs"), "gpus_per_node": (1, 4096, "GPUs"), "nvlink_domain": (1, 2**20, "GPUs"),
}


#: the kernel families the cost model has curves for ('' = unknown: its Hopper curves), and the vendors it tells
#: apart (the tuner searches NVIDIA's DeepEP / HybridEP, AMD's own dispatchers): a spelling outside them would
#: be taken silently for the unknown one
ARCHES = ("", "ampere", "hopper", "blackwell", "blackwell_ultra", "cdna3", "cdna4")
VENDORS = ("nvidia", "amd", "custom")


#: the annotations of GPUSpec's numeric fields (``from __future__ import annotations``: resolved by pydantic)
_NUMBER_TYPES = (float, int, Optional[float], Optional[int])


class GPUSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str
    vendor: str
    peak_flops_bf16: float = Field(gt=0, description="dense BF16/FP16 tensor FLOP/s")
    peak_flops_fp8: float = Field(gt=0, description="dense FP8 tensor FLOP/s (= bf16 where unsupported)")
    hbm_bytes: float = Field(gt=0, description="HBM capacity usable by the process")
    hbm_bw: float = Field(gt=0, description="HBM bandwidth, bytes/s")
    intra_node_bw: float = Field(gt=0, description="scale-up link per GPU per direction (NVLink / xGMI), bytes/s")
    intra_node_topology: str = Field(description="'switch' (NVSwitch: any pair at full rate) or 'mesh' (xGMI full mesh)")
    intra_node_link_bw: Optional[float] = Field(default=None, description="one point-to-point link per direction (mesh), bytes/s")
    inter_node_bw: float = Field(gt=0, description="scale-out NIC per GPU per direction, bytes/s")
    intra_node_latency_s: float = 3e-6
    inter_node_latency_s: float = 8e-6
    tdp_watts: Optional[float] = None
    num_sms: int = Field(default=132, gt=0, description="streaming multiprocessors (NVIDIA) / compute units (AMD)")
    sustained_clock_fraction: float = Field(
        default=1.0, gt=0, le=1.0,
        description="fraction of the boost clock sustained under a power cap (1.0 = datasheet); "
                    "scales the achievable tensor FLOP/s in the compute model, not peak_flops()")
    power_limit_w: Optional[float] = Field(
        default=None, gt=0,
        description="board power cap the GPU ran at (nvidia-smi --power-limit), W; None = its rated tdp_watts. "
                    "Below tdp_watts it lowers the sustained clock (calibration.power_cap_factor)")
    peak_power_w: Optional[float] = Field(
        default=None, gt=0,
        description="board power at which the datasheet dense BF16 / FP8 peaks are stated, W; None = tdp_watts. "
                    "A power-limited GPU rated above it (Blackwell Ultra: B200's / GB200's dense peaks at +100 / "
                    "+200 W) sustains more of its peak in training (calibration.power_headroom)")
    arch: str = Field(default="", description="kernel family: ampere, hopper, blackwell, blackwell_ultra, cdna3, "
                                              "cdna4 ('' = unknown: the cost model uses its Hopper curves)")
    peak_flops_fp4: Optional[float] = Field(default=None, gt=0, description="dense FP4 (NVFP4 / MXFP4) FLOP/s; None = "
                                                                            "no FP4 tensor cores")
    gpus_per_node: int = Field(default=8, gt=0, description="GPUs of one node (server / compute tray) of this GPU's "
                                                            "reference system; a reader's default for Cluster.gpus_per_node")
    nvlink_domain: Optional[int] = Field(default=None, gt=0, description="GPUs in one scale-up (NVLink / xGMI) domain "
                                                                         "of the reference system; None = gpus_per_node")
    host_link_bw: float = Field(default=64e9, gt=0, description="GPU <-> host memory per direction (PCIe Gen5 x16 "
                                                                "64 GB/s; NVLink-C2C on Grace systems), bytes/s")
    host_cpu: str = Field(default="x86", description="host CPU of the reference system: 'x86' (DGX / HGX servers) or "
                                                      "'grace' (GB200 / GB300 NVL72 compute trays); scales the host "
                                                      "launch time per kernel (cost/framework.py HOST_CPU_FACTOR)")
    source: str = ""
    hbm_source: str = Field(default="", description="where hbm_bytes comes from (the capacity the device reports)")

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: object) -> object:
        """``true`` / ``false`` where a number belongs is refused (pydantic's lax mode read ``gpus_per_node =
        true`` as 1 and ``sustained_clock_fraction = true`` as 1.0 without a word; the recipes' readers, the
        wrapper's ``[cluster]`` and the ``[collectives]`` tables refuse a boolean there)."""
        if isinstance(data, dict):
            for key, value in data.items():
                info = cls.model_fields.get(key) if isinstance(key, str) else None
                if isinstance(value, bool) and info is not None and info.annotation in _NUMBER_TYPES:
                    raise PlanError(f"gpu.{data.get('name', '?')}.{key}", value, "a number")
        return data

    @model_validator(mode="after")
    def _in_range(self) -> "GPUSpec":
        for name, (lo, hi, unit) in _RANGES.items():
            v = getattr(self, name)
            if v is not None and not lo <= v <= hi:
                raise PlanError(f"gpu.{self.name}.{name}", v, f"between {lo:g} and {hi:g} {unit}")
        if self.power_limit_w is not None and self.tdp_watts and self.power_limit_w < MIN_CAP_FRACTION * self.tdp_watts:
            raise PlanError(f"gpu.{self.name}.power_limit_w", self.power_limit_w, _cap_floor(self.name, self.tdp_watts))
        if self.intra_node_topology not in ("switch", "mesh"):
            raise PlanError(f"gpu.{self.name}.intra_node_topology", self.intra_node_topology, "switch or mesh")
        if self.arch not in ARCHES:
            raise PlanError(f"gpu.{self.name}.arch", self.arch, "one of " + ", ".join(repr(a) for a in ARCHES))
        if self.vendor not in VENDORS:
            raise PlanError(f"gpu.{self.name}.vendor", self.vendor, "one of " + ", ".join(VENDORS))
        if self.host_cpu not in ("x86", "grace"):
            raise PlanError(f"gpu.{self.name}.host_cpu", self.host_cpu, "x86 or grace")
        return self

    @property
    def scaleup_domain(self) -> int:
        """GPUs one GPU reaches over its scale-up fabric in the reference system."""
        return self.nvlink_domain or self.gpus_per_node

    def peak_flops(self, precision: str) -> float:
        """Datasheet dense peak for ``precision`` (fp32 = TF32 tensor rate = bf16/2; fp16 = bf16; fp4 =
        the FP4 peak where the GPU has one, else its FP8 peak: FP4 data then runs on FP8 tensor cores)."""
        if precision == "fp8":
            return self.peak_flops_fp8
        if precision == "fp4":
            return self.peak_flops_fp4 or self.peak_flops_fp8
        if precision == "fp32":
            return self.peak_flops_bf16 / 2
        return self.peak_flops_bf16


_DB: dict[str, GPUSpec] = {}


#: the GPUs ``--gpu-file`` added or overrode (:func:`load_gpu_file`): no judged validation row ran on their spec
_FROM_FILE: set[str] = set()


def _add(spec: GPUSpec) -> None:
    _DB[spec.name] = spec


def from_gpu_file(name: str) -> bool:
    """Whether GPU ``name``'s spec (or, for a power-capped ``"<name>@<W>W"``, its base's) came from ``--gpu-file``:
    the error bands' rows ran on the built-in specs only (``projection/band.py``)."""
    return str(name).split("@", 1)[0] in _FROM_FILE


# NVIDIA A100 SXM4 80GB (108 SMs): 312 TFLOP/s dense BF16, no FP8 (NVIDIA A100 datasheet, 2021);
# 80 GiB HBM2e (nvidia-smi reports 81920 MiB), 2,039 GB/s; NVLink 3: 600 GB/s bidirectional
# = 300 GB/s per direction through NVSwitch; DGX A100: 8x 200 Gb/s HDR IB HCAs = 25 GB/s per GPU;
# PCIe Gen4 x16 = 32 GB/s per direction to the host.
_add(GPUSpec(name="a100-sxm-80gb", vendor="nvidia", arch="ampere", peak_flops_bf16=312e12, peak_flops_fp8=312e12,
             hbm_bytes=79.25 * GiB, hbm_bw=2039e9, intra_node_bw=300e9, intra_node_topology="switch",
             inter_node_bw=25e9, tdp_watts=400, num_sms=108, host_link_bw=32e9,
             source="NVIDIA A100 datasheet; DGX A100 user guide",
             hbm_source="torch: 'CUDA out of memory ... (GPU 0; 79.25 GiB total capacity ...)' on an A100 80GB, "
                        "github.com/levihsu/OOTDiffusion/issues/235"))
# NVIDIA A100 SXM4 40GB: same GA100 compute (312 TF BF16 dense, 108 SMs) and NVLink 3; 40 GB HBM2
# at 1,555 GB/s (NVIDIA A100 datasheet, 40GB column). Same DGX A100 8x HDR 200 Gb/s networking.
_add(GPUSpec(name="a100-sxm-40gb", vendor="nvidia", arch="ampere", peak_flops_bf16=312e12, peak_flops_fp8=312e12,
             hbm_bytes=39.50 * GiB, hbm_bw=1555e9, intra_node_bw=300e9, intra_node_topology="switch",
             inter_node_bw=25e9, tdp_watts=400, num_sms=108, host_link_bw=32e9,
             source="NVIDIA A100 datasheet (40GB SXM4)",
             hbm_source="torch: 'GPU 0 has a total capacity of 39.50 GiB' on an A100 40GB, "
                        "github.com/TianheWu/CoSeR/issues/10"))
# NVIDIA H100 SXM5 80GB (132 SMs): 989.4 TFLOP/s dense BF16, 1,978.9 dense FP8 (H100 datasheet);
# 80 GB HBM3 (nvidia-smi 81559 MiB), 3.35 TB/s; NVLink 4: 900 GB/s bidirectional = 450 per
# direction; DGX H100: 8x 400 Gb/s ConnectX-7 = 50 GB/s per GPU; PCIe Gen5 x16 64 GB/s.
_add(GPUSpec(name="h100-sxm", vendor="nvidia", arch="hopper", peak_flops_bf16=989.4e12, peak_flops_fp8=1978.9e12,
             hbm_bytes=81089 * 1024**2, hbm_bw=3.35e12, intra_node_bw=450e9, intra_node_topology="switch",
             inter_node_bw=50e9, tdp_watts=700, num_sms=132, source="NVIDIA H100 datasheet; DGX H100 user guide",
             hbm_source="torch 2.7 / CUDA 12.8: _CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', ..., "
                        "total_memory=81089MB) in a published NCCL benchmark post (other prints 81082-81090 MiB; "
                        "nvidia-smi's 81559 MiB counts memory the driver keeps)"))
# NVIDIA H100 SXM5 96 GB, 500 W power limit (Meta Grand Teton; the H100 of pytorch/torchtitan's
# docs/performance.md benchmarks): same GH100 die and 132 SMs, so the same datasheet peak, but six
# HBM stacks (96 GB; the torchtitan file calls it HBM2e) and a 500 W cap instead of 700 W.  HBM
# bandwidth is not published for this SKU: 6144-bit x 3.2 Gb/s HBM2e = 2.46 TB/s is our estimate
# from the stack count (GH100 has 12 512-bit controllers, glennklockwood.com/garden/processors/h100).
# The clock sustained under 500 W is not published either: it takes the one sustained-clock fraction
# of every power-limited architecture (calibration.SUSTAINED_CLOCK["power_limited"]; fitted separately
# the first time, it came out within 1% of the 700 W parts' value).
# Usable capacity = what the device reports (torch total_memory), 95.0 GiB: torchtitan's memory log on
# these GPUs prints 48.87GiB(51.44%) (pytorch/torchtitan experiments/graph_trainer/.claude/CLAUDE.md;
# the % is of torch.cuda.get_device_properties().total_memory): 48.87 / 0.5144 = 95.0 GiB.
_add(GPUSpec(name="h100-sxm-96gb-500w", vendor="nvidia", arch="hopper", peak_flops_bf16=989.4e12,
             peak_flops_fp8=1978.9e12, hbm_bytes=95.0 * GiB, hbm_bw=2.46e12, intra_node_bw=450e9,
             intra_node_topology="switch", inter_node_bw=50e9, tdp_watts=500, num_sms=132, sustained_clock_fraction=1.0,
             source="torchtitan docs/performance.md (96GB HBM2e, 500W); H100 datasheet for compute",
             hbm_source="torch total_memory via torchtitan's memory log 48.87GiB(51.44%)"))
# NVIDIA H200 SXM 141GB: same Hopper compute as H100 (989.4 BF16 / 1,978.9 FP8 dense);
# 141 GB HBM3e (nvidia-smi 143771 MiB), 4.8 TB/s; NVLink 4 450 GB/s per direction; 400 Gb/s NICs.
_add(GPUSpec(name="h200", vendor="nvidia", arch="hopper", peak_flops_bf16=989.4e12, peak_flops_fp8=1978.9e12,
             hbm_bytes=143156 * 1024**2, hbm_bw=4.8e12, intra_node_bw=450e9, intra_node_topology="switch",
             inter_node_bw=50e9, tdp_watts=700, num_sms=132, source="NVIDIA H200 datasheet; DGX H200 user guide",
             hbm_source="torch: _CudaDeviceProperties(name='NVIDIA H200', ..., total_memory=143156MB) (= the "
                        "'total capacity of 139.80 GiB' of H200 out-of-memory messages; nvidia-smi 143771 MiB)"))
# NVIDIA B200 (HGX/DGX B200, 1000 W; 148 SMs): 2.25 PFLOP/s dense FP16/BF16, 4.5 PFLOP/s dense FP8,
# 9 PFLOP/s dense FP4 (DGX B200 datasheet: 72 PF FP8 training for 8 GPUs = 9 sparse = 4.5 dense per
# GPU; HGX B200 at 1,000 W: glennklockwood.com/garden/processors/B200); 180 GB HBM3e usable (192 GB
# physical), 7.67 TB/s: the driver reports a 7680-bit bus (not 8192) at 3996 MHz DDR, (7680 / 8) x 3996e6
# x 2 = 7.67e12 (device query in github.com/pytorch/ao/pull/4002, which moved torchao's roofline from
# 8.0 to 7.67 TB/s; Verda's per-GPU table lists 7.7 TB/s for B200, B300 and GB200, 8 for GB300);
# 148 SMs (same device query); NVLink 5: 1.8 TB/s bidirectional = 900 per direction; 8x 400 Gb/s ConnectX-7
# = 50 GB/s per GPU; PCIe Gen5 to the host.
_add(GPUSpec(name="b200", vendor="nvidia", arch="blackwell", peak_flops_bf16=2.25e15, peak_flops_fp8=4.5e15,
             peak_flops_fp4=9e15, hbm_bytes=182631 * 1024**2, hbm_bw=7.67e12, intra_node_bw=900e9, intra_node_topology="switch",
             inter_node_bw=50e9, tdp_watts=1000, num_sms=148,
             source="NVIDIA DGX B200 datasheet; Blackwell architecture brief; glennklockwood.com B200 (HGX 1000 W)",
             hbm_source="torch: _CudaDeviceProperties(name='NVIDIA B200', ..., total_memory=182631MB) = 178.35 GiB "
                        "(the device query of github.com/pytorch/ao/pull/4002: 'Total Global Memory: 178.35 GB')"))
# NVIDIA B300 (HGX/DGX B300, Blackwell Ultra, 1,100 W): BF16 2.25 PF, FP8 4.5 PF dense as B200; dense
# FP4 14 PF (Verda "GB300 NVL72 architecture" per-GPU table, dense column; glennklockwood.com B300:
# HGX B300 dense FP4 13-14 PF); 288 GB HBM3e (270 GB usable per Verda's table), 7.7 TB/s (Verda's table); NVLink 5
# 900 GB/s per direction; ConnectX-8 SuperNIC 800 Gb/s per GPU = 100 GB/s (DGX SuperPOD B300 RA: XDR 800 Gb/s
# InfiniBand or Spectrum-X 800 Gb/s compute fabric; OCI's 2-node HGX B300 alltoall_perf ran at 0.965 of it per GPU,
# record oci-b300-a2a-r16-8589934592; Bridge's 26.02 EP 64 B300 run implies half of it: scripts/b300_ep_probe.py,
# validation README Known gaps, not adopted); PCIe Gen6 x16 128 GB/s.
# peak_power_w = 1000: the dense BF16 / FP8 peaks are B200's, stated at B200's 1,000 W (the 1.5x of
# Blackwell Ultra is NVFP4 only); the extra 100 W is power headroom for a power-bound step.
_add(GPUSpec(name="b300", vendor="nvidia", arch="blackwell_ultra", peak_flops_bf16=2.25e15, peak_flops_fp8=4.5e15,
             peak_flops_fp4=14e15, hbm_bytes=287428771840, hbm_bw=7.7e12, intra_node_bw=900e9, intra_node_topology="switch",
             inter_node_bw=100e9, tdp_watts=1100, peak_power_w=1000, num_sms=148, host_link_bw=128e9,
             source="verda.com/blog/gb300-nvl72-architecture (per-GPU table); glennklockwood.com/garden/processors/B300; "
                    "NVIDIA DGX B300 datasheet (ConnectX-8 800 Gb/s per GPU)",
             hbm_source="a published Megatron trainer log on 8-GPU 288 GB Blackwell Ultra nodes: "
                        "device_total_bytes=287428771840 (= the 'total capacity of 267.69 GiB' of its OOM messages)"))
# NVIDIA GB200 NVL72 (Grace + Blackwell, 1,200 W per GPU): 2.5 PF dense BF16, 5 PF FP8, 10 PF FP4 per
# GPU (NVL72 rack: 360 / 720 / 1,440 PF sparse over 72 GPUs; glennklockwood.com B200 "GB200 variant at
# 1,200 W"); 186 GB HBM3e usable (13.4 TB per rack), 7.7 TB/s (Verda's per-GPU table; the same 7680-bit
# HBM3e bus as B200); 152 SMs, not B200's 148 (github.com/ByteDance-Seed/VeOmni/pull/986: GB200 152 SM x
# 8192 x 2.062 GHz; github.com/facebookexperimental/triton/pull/2768: cuBLASLt's occupancy cap on GB300
# bisects to 152 x 2048 / 32, 'the same as GB200's'); NVLink 5 900 GB/s per direction to all
# 72 GPUs of the rack (NVLink Switch trays); compute tray = 2 Grace + 4 GPUs with 4x ConnectX-7
# 400 Gb/s (50 GB/s per GPU); NVLink-C2C 900 GB/s bidirectional to Grace (450 per direction).
_add(GPUSpec(name="gb200", vendor="nvidia", arch="blackwell", peak_flops_bf16=2.5e15, peak_flops_fp8=5e15,
             peak_flops_fp4=10e15, hbm_bytes=184.31 * GiB, hbm_bw=7.7e12, intra_node_bw=900e9, intra_node_topology="switch",
             inter_node_bw=50e9, tdp_watts=1200, num_sms=152, gpus_per_node=4, nvlink_domain=72, host_link_bw=450e9,
             host_cpu="grace",
             source="NVIDIA GB200 NVL72 datasheet (rack totals / 72); glennklockwood.com/garden/processors/B200",
             hbm_source="torch: 'GPU 0 has a total capacity of 184.31 GiB' in out-of-memory messages on GB200 "
                        "(vLLM DeepSeek decode on GB200, EP 8)"))
# NVIDIA GB300 NVL72 (Grace + Blackwell Ultra, 1,400 W per GPU): 2.5 PF dense BF16, 5 PF FP8, 15 PF
# FP4 per GPU (Verda per-GPU table; rack: 1.08 EF dense FP4, 360 PF FP8 dense); 279 GB HBM3e usable
# (20 TB per rack), 8 TB/s; 152 SMs enabled (the full Blackwell Ultra die has 160, NVIDIA blog 'Inside
# NVIDIA Blackwell Ultra'; the GB300 product: facebookexperimental/triton PR 2768, cuBLASLt occupancy cap
# = 152 x 2048 / 32 measured on GB300); max SM clock 2070 MHz and default = max power limit 1400 W
# (facebookexperimental/triton PR 2023); NVLink 5 domain of 72; 4 GPUs per compute tray with ConnectX-8 800 Gb/s
# per GPU (72 CX-8 per rack) = 100 GB/s; NVLink-C2C to Grace 450 GB/s per direction.
# peak_power_w = 1200: the dense BF16 / FP8 peaks (2.5 / 5 PF) are GB200's, stated at GB200's 1,200 W
# (NVL72 rack 360 PF FP8 dense for both); the extra 200 W is power headroom for a power-bound step.
_add(GPUSpec(name="gb300", vendor="nvidia", arch="blackwell_ultra", peak_flops_bf16=2.5e15, peak_flops_fp8=5e15,
             peak_flops_fp4=15e15, hbm_bytes=287428771840, hbm_bw=8e12, intra_node_bw=900e9, intra_node_topology="switch",
             inter_node_bw=100e9, tdp_watts=1400, peak_power_w=1200, num_sms=152, gpus_per_node=4, nvlink_domain=72,
             host_link_bw=450e9,
             host_cpu="grace",
             source="verda.com/blog/gb300-nvl72-architecture; glennklockwood.com/garden/processors/B300 (GB300 NVL72)",
             hbm_source="no published GB300 device report found: the B300's reported 267.69 GiB (same 288 GB of "
                        "HBM3e); GB200 reports 6 GiB more than B200, so a GB300 may report somewhat more"))
# AMD Instinct MI300X (304 CUs): 1,307.4 TFLOP/s dense BF16, 2,614.9 dense FP8 (AMD MI300X datasheet);
# 192 GB HBM3, 5.3 TB/s; 7 xGMI links per GPU in a full mesh, 64 GB/s per link per direction
# (128 GB/s bidirectional), 448 GB/s per GPU per direction; 400 Gb/s NIC per GPU.
_add(GPUSpec(name="mi300x", vendor="amd", arch="cdna3", peak_flops_bf16=1307.4e12, peak_flops_fp8=2614.9e12,
             hbm_bytes=196592 * 1024**2, hbm_bw=5.3e12, intra_node_bw=448e9, intra_node_topology="mesh",
             intra_node_link_bw=64e9, inter_node_bw=50e9, tdp_watts=750, num_sms=304,
             source="AMD Instinct MI300X datasheet; AMD Instinct MI300X platform brief",
             hbm_source="torch (ROCm): _CudaDeviceProperties(name='AMD Instinct MI300X', ..., total_memory=196592MB), "
                        "github.com/ROCm/ROCm/issues/4203 (rocm-smi: VRAM Total Memory 206141652992 B = 192 GiB)"))
# AMD Instinct MI325X: same CDNA3 compute as MI300X (304 CUs); 256 GB HBM3e, 6 TB/s; same xGMI mesh.
_add(GPUSpec(name="mi325x", vendor="amd", arch="cdna3", peak_flops_bf16=1307.4e12, peak_flops_fp8=2614.9e12,
             hbm_bytes=255.98 * GiB, hbm_bw=6e12, intra_node_bw=448e9, intra_node_topology="mesh",
             intra_node_link_bw=64e9, inter_node_bw=50e9, tdp_watts=1000, num_sms=304, source="AMD Instinct MI325X datasheet",
             hbm_source="torch (ROCm): 'HIP out of memory ... GPU 0 has a total capacity of 255.98 GiB' (vLLM on "
                        "MI325X)"))
# AMD Instinct MI350X (CDNA4, 256 CUs, air-cooled 1,000 W, 2.2 GHz peak engine clock): the MI355X's
# datasheet peaks scaled by 2.2 / 2.4 GHz (AMD Hot Chips 2025: MI350X 2.2 GHz / 1,000 W, MI355X 2.4 GHz /
# 1,400 W; AMD's MI350X datasheet lists 2.3 PF BF16, 4.6 PF FP8, 9.2 PF MXFP4 dense); 288 GB HBM3e,
# 8 TB/s; same 4th-gen Infinity Fabric mesh and 400 Gb/s NIC per GPU as MI355X.
_add(GPUSpec(name="mi350x", vendor="amd", arch="cdna4", peak_flops_bf16=2306.9e12, peak_flops_fp8=4613.8e12,
             peak_flops_fp4=9227.6e12, hbm_bytes=287.98 * GiB, hbm_bw=8e12, intra_node_bw=537.6e9,
             intra_node_topology="mesh", intra_node_link_bw=76.8e9, inter_node_bw=50e9, tdp_watts=1000, num_sms=256,
             source="AMD Instinct MI350X datasheet; AMD Hot Chips 2025 MI350 (wccftech.com report)",
             hbm_source="torch (ROCm): 'GPU 0 has a total capacity of 287.98 GiB' in HIP out-of-memory messages on "
                        "288 GB CDNA4 parts (HBM3e stacks are binary: 8 x 36 GiB)"))
# AMD Instinct MI355X (256 CUs): 2.5 PFLOP/s dense FP16/BF16 (2,516.6 TF), 5.0 dense FP8 (5,033.2 TF),
# 10.1 dense MXFP4 (10,066 TF); 288 GB HBM3e, 8 TB/s; xGMI 4th gen: 7 links x 76.8 GB/s per direction
# (1,075 GB/s bidirectional total); 400 Gb/s (Pollara) NIC per GPU.
_add(GPUSpec(name="mi355x", vendor="amd", arch="cdna4", peak_flops_bf16=2516.6e12, peak_flops_fp8=5033.2e12,
             peak_flops_fp4=10066.3e12, hbm_bytes=287.98 * GiB, hbm_bw=8e12, intra_node_bw=537.6e9,
             intra_node_topology="mesh", intra_node_link_bw=76.8e9, inter_node_bw=50e9, tdp_watts=1400, num_sms=256,
             source="AMD Instinct MI355X datasheet",
             hbm_source="torch (ROCm): 'GPU 0 has a total capacity of 287.98 GiB' in HIP out-of-memory messages on "
                        "MI355X (HBM3e stacks are binary: 8 x 36 GiB)"))


#: the lowest board power cap a GPU takes, as a fraction of its rated power: NVIDIA's DGX B200 User Guide ("Managing
#: Power Capping", the Redfish ``PowerLimitWatts``) shows ``AllowableMin`` 200 W for GPUs of 1000 W and of 700 W
#: ``AllowableMax``: 0.20 and 0.29 of the rated power; nvidia-smi refuses a limit below the board's minimum.  Below
#: it the cap is a mistake (``--power-limit-w 0.7``, kW for W), and the cap's model (``power_cap_factor``, measured at
#: 0.36 .. 0.75 of the rated power) would project a run slower by the ratio: refused, with this floor.
MIN_CAP_FRACTION = 0.2


def _cap_floor(name: str, tdp_watts: float) -> str:
    return (f"at least {MIN_CAP_FRACTION * tdp_watts:g} W ({MIN_CAP_FRACTION:.0%} of {name}'s rated {tdp_watts:g} W: "
            "no board takes a lower cap; the power in W, up to the rated power)")


def power_capped(name: str, watts: float) -> str:
    """The name of ``name``'s spec run at a board power cap of ``watts`` (registered on first use as
    ``"<name>@<watts>W"``: the same silicon with ``power_limit_w`` set, so that every per-GPU cache of
    the cost model keys on it).  A cap at or above the rated ``tdp_watts`` changes nothing and returns
    ``name``; a GPU without a rated power cannot be capped (:class:`PlanError`)."""
    spec = get_gpu(name)
    if spec.power_limit_w is not None:
        raise PlanError("cluster.power_limit_w", watts, f"unset: GPU {name} already states power_limit_w")
    if not spec.tdp_watts:
        raise PlanError("cluster.power_limit_w", watts, f"unset: GPU {name} has no rated tdp_watts to scale from")
    if watts <= 0:
        raise PlanError("cluster.power_limit_w", watts, "a positive power in W")
    if watts < MIN_CAP_FRACTION * spec.tdp_watts:
        raise PlanError("cluster.power_limit_w", watts, _cap_floor(name, spec.tdp_watts))
    if watts >= spec.tdp_watts:
        return name
    capped = f"{name}@{watts:g}W"
    if capped not in _DB:
        _add(spec.model_copy(update={"name": capped, "power_limit_w": float(watts),
                                     "source": spec.source + f"; power cap {watts:g} W stated by the user"}))
    return capped


def has_fp8(spec: GPUSpec) -> bool:
    """Whether ``spec`` has FP8 tensor cores: a ``peak_flops_fp8`` above its BF16 peak (an A100's, or a
    ``--gpu-file`` GPU's left unstated, equals it)."""
    return spec.peak_flops_fp8 > spec.peak_flops_bf16


#: kernel families without MX (block-scaled, 32-element E8M0 scales) tensor-core formats: TE's
#: ``_compute_mxfp8_support`` / ``_compute_nvfp4_support`` (transformer_engine/pytorch/quantization.py at
#: d0067d0: compute capability >= 10.0) and torchao's MX converter in TorchTitan
#: (``components/quantization/mx.py``: "MXFP8 is only supported on SM100 or later architectures"); AMD's MX
#: formats arrive with CDNA4 (MI355X, gfx950), not CDNA3 (MI300X / MI325X, gfx942)
NO_MX_ARCHES = ("ampere", "hopper", "cdna3")


def check_precision(name: str, precision: str, fp8_recipe: Optional[str] = None,
                    fp4_recipe: Optional[str] = None) -> None:
    """:class:`PlanError` for a GPU the run's precision cannot run on: FP8 / FP4 on a GPU without FP8
    tensor cores (``peak_flops_fp8`` equal to its BF16 peak: A100).  Such a plan was priced at the BF16
    rate, its MFU taken against an "FP8 dense peak" equal to the BF16 one, while the run does not start
    (Transformer Engine's ``check_fp8_support`` needs compute capability >= 8.9; ``fp8_autocast``
    asserts it; torchao's float8 needs ``torch._scaled_mm``, the same).  Also MXFP8 (``fp8_recipe`` mxfp8) and
    FP4 (NVFP4) on a GPU of :data:`NO_MX_ARCHES` (no MX block-scaled formats: before Blackwell / CDNA4), refused
    naming ``training.fp8_recipe`` / ``training.precision``.  Unknown GPUs raise as :func:`get_gpu`."""
    spec = get_gpu(name)
    if precision in ("fp8", "fp4") and not has_fp8(spec):
        raise PlanError("training.precision", precision,
                        f"bf16 or fp16 on {name}: it has no FP8 tensor cores (its peak_flops_fp8 is its BF16 peak, "
                        "hardware/gpus.py; Transformer Engine's FP8 needs compute capability >= 8.9; a --gpu-file "
                        "GPU with FP8 states peak_flops_fp8)")
    if spec.arch in NO_MX_ARCHES:  # MXFP8 / NVFP4 do not start there (:data:`NO_MX_ARCHES`)
        if precision in ("fp8", "fp4") and fp8_recipe == "mxfp8":
            raise PlanError("training.fp8_recipe", "mxfp8",
                            f"delayed, tensorwise or blockwise on {name} ({spec.arch}): MXFP8 needs compute "
                            "capability >= 10.0 (Blackwell; Transformer Engine check_mxfp8_support, torchao's MX "
                            "converter) or AMD CDNA4 (MI355X)")
        if precision == "fp4":
            raise PlanError("training.precision", f"fp4 ({fp4_recipe or 'nvfp4'})",
                            f"bf16 or fp8 on {name} ({spec.arch}): NVFP4 needs compute capability >= 10.0 "
                            "(Blackwell; Transformer Engine check_nvfp4_support)")


def resolve_power_cap(plan: Plan) -> Plan:
    """``plan`` with ``cluster.gpu`` replaced by its power-capped spec (:func:`power_capped`) when
    ``cluster.power_limit_w`` is set below the GPU's rated power (and that field cleared, so the call is
    idempotent); else ``plan`` itself."""
    cap = plan.cluster.power_limit_w
    if cap is None:
        return plan
    name = power_capped(plan.cluster.gpu, cap)
    if name == plan.cluster.gpu:  # at or above the rated power: nothing changes
        return plan
    return plan.model_copy(update={"cluster": plan.cluster.model_copy(update={"gpu": name, "power_limit_w": None})})


def known_gpus() -> list[str]:
    """The names of the GPUs in the database (built in, ``--gpu-file`` and power-capped ones), sorted."""
    return sorted(_DB)


def get_gpu(name: str) -> GPUSpec:
    """The spec of GPU ``name``; a :class:`PlanError` naming the allowed names otherwise."""
    from primus_launch.plan.sections import normalize_gpu

    try:
        return _DB[name] if name in _DB else _DB[normalize_gpu(name)]
    except (KeyError, TypeError):
        import difflib

        near = difflib.get_close_matches(str(name).lower(), known_gpus(), n=1, cutoff=0.75) \
            if isinstance(name, str) and len(name) <= 64 else []
        raise PlanError("cluster.gpu", name, (f"did you mean {near[0]}? " if near else "")
                        + f"one of {', '.join(known_gpus())}") from None


def gpu_arch(name: str) -> str:
    """The kernel family (``GPUSpec.arch``) of GPU ``name``; '' when the hardware DB lacks it."""
    try:
        return get_gpu(name).arch
    except PlanError:
        return ""


#: a GPU name: one word (it is written into a tuned recipe's ``# primus-launch: gpu=NAME`` comment and a TorchTitan
#: preset header, and read back as one word; a space or a newline split it, or started a line of the script)
_GPU_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}")


def _check_name(name: str, field: str, path: Path) -> None:
    if not _GPU_NAME.fullmatch(name):
        from primus_launch.errors import UserError

        raise UserError(f"{field}={str(path)!r}: [gpu.{name!r}]: a GPU name is one word of at most 64 letters, digits "
                        "and - _ . @ + (it is written into tuned recipes)")


def _allowed_hint(e, name: str) -> str:
    """What a ``--gpu-file`` entry may hold, appended to its validation error: the GPUSpec field names where a
    field is unknown ("hbm_bandwidth_bytes_per_s: Extra inputs are not permitted" named no field that is), and
    for a new GPU missing fields, that naming a built-in GPU overrides only the fields given."""
    kinds = {err.get("type") for err in e.errors()}
    hint = ""
    if "missing" in kinds and name not in _DB:
        hint += ("; a new GPU states every required field (a table named for a built-in GPU, e.g. [gpu.h100-sxm], "
                 "overrides only the fields it gives)")
    if "extra_forbidden" in kinds:   # last: an over-long error line keeps its end (errors.one_line)
        hint += "; allowed fields: " + ", ".join(f for f in GPUSpec.model_fields if f != "name")
    return hint


def load_gpu_file(path: str | Path, field: str = "--gpu-file") -> list[str]:
    """Add or override GPUs from a TOML or YAML file with ``[gpu.<name>]`` tables.

    An override may give only the fields it changes; the rest come from the existing entry.
    ``[collectives.<name>]`` tables (per-operation link fits, as ``scripts/validation/gloo_lab/localhw.py``
    writes them) are registered with ``hardware.fabric.register_fabric``.  Returns the GPU names loaded.
    The file is read through :mod:`primus_launch.inputs` (size, encoding, structure, types: one-line
    errors naming ``field``); nothing is registered unless every entry is valid.
    """
    from pydantic import ValidationError

    from primus_launch.errors import UserError, one_line
    from primus_launch.inputs import expect, parse_toml, parse_yaml, read_text

    p = Path(path)
    text = read_text(path, field)  # as written: `g.toml/` is refused ("Not a directory"), not read as g.toml
    data = parse_yaml(text, field, str(p)) if p.suffix in (".yaml", ".yml") else parse_toml(text, field, str(p))
    if p.suffix in (".yaml", ".yml"):
        from primus_launch.inputs import duplicate_keys

        for key, a, b in duplicate_keys(text)[:1]:  # a TOML key given twice is refused by its parser: the same here
            raise UserError(f"{field}={str(p)!r}: {key}: given twice in one mapping (lines {a} and {b}); give each GPU "
                            "field once (PyYAML would keep the last without a word)")
    if data is None:
        data = {}
    expect(data, dict, field, "a file of [gpu.<name>] tables")
    table = expect(data.get("gpu", data), dict, f"{field} gpu", "[gpu.<name>] tables")
    specs = []
    for name, fields in table.items():
        if name == "collectives" and "gpu" not in data:
            continue
        expect(fields, dict, f"gpu.{name}", "a table of GPUSpec fields")
        _check_name(str(name), field, p)
        base = _DB[name].model_dump() if name in _DB else {}
        base.update(fields)
        base["name"] = str(name)
        base.setdefault("vendor", "custom")
        bf16 = base.get("peak_flops_bf16")
        # FP8 defaults to the BF16 peak; where that is itself wrong, its own error is the one reported (a
        # placeholder here: "peak_flops_bf16='fast'" was reported twice, once as peak_flops_fp8, a field the
        # file did not give)
        try:
            usable = bf16 is not None and math.isfinite(float(bf16))
        except (TypeError, ValueError):
            usable = False
        base.setdefault("peak_flops_fp8", bf16 if usable else 1e15)
        try:
            specs.append(GPUSpec.model_validate(base))
        except ValidationError as e:  # the entry's fields without its name or file: say both
            raise UserError(f"{field}={str(p)!r}: [gpu.{name}]: {one_line(e)}{_allowed_hint(e, name)}") from None
    coll = data.get("collectives")
    if coll:
        expect(coll, dict, "collectives", "[collectives.<gpu>] tables")
        for gpu, fields in coll.items():
            _check_name(str(gpu), field, p)
            _check_fabric(str(gpu), expect(fields, dict, f"collectives.{gpu}", "a table of fabric fields"))
    for spec in specs:
        _add(spec)
        _FROM_FILE.add(spec.name)
    if coll:
        from primus_launch.projection.hardware.fabric import register_fabric_tables

        register_fabric_tables(coll)
    return [s.name for s in specs]


#: ``[collectives.<gpu>]`` fields that are not one number (``hardware.fabric.Fabric``): per-library
#: efficiencies, the measured ``{op: [[S, t], ...]}`` points and the group size they were timed with
_FABRIC_TABLES = ("e_rdma", "e_nvl")
_POINT_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")  # collectives.measured_time's
_OPTIONAL = ("e_rs", "l_rs", "e_p2p", "l_nic_a2a")  # None: the pair they default to


#: plausible ranges of a fabric's fits (as :data:`_RANGES` for the GPU's own figures: a 1e-300 bandwidth made
#: the projection's times inf and then nan): by the field's first letters / last letters
_FABRIC_RANGES = {"bw": (1e6, 1e15, "bytes/s"), "e": (1e-4, 1e3, "(fitted bandwidth / the link's)"),
                  "latency": (0.0, 1.0, "s"), "S": (0.0, 2.0**50, "bytes"), "t": (0.0, 1e4, "s")}


def _number(where: str, x: object, kind: str) -> None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise PlanError(where, x, "a number")
    lo, hi, unit = _FABRIC_RANGES[kind]
    if not (math.isfinite(x) and lo <= x <= hi) and not (where.endswith(".link_bw") and x == 0):
        raise PlanError(where, x, f"between {lo:g} and {hi:g} {unit}" + (" (or 0: a switch)"
                                                                          if where.endswith(".link_bw") else ""))


def _check_fabric(gpu: str, fields: dict) -> None:
    """A ``[collectives.<gpu>]`` table's fields, each by its ``Fabric`` type (as
    ``scripts/validation/gloo_lab/localhw.py`` writes them): one number in its :data:`_FABRIC_RANGES` range
    for the fits (efficiencies ``e_*``, bandwidths ``*_bw``, latencies ``l_*`` / ``a_*``); ``e_rdma`` /
    ``e_nvl`` a table of efficiencies by library; ``points`` a table ``{op: [[S, t], ...]}`` of the ops
    ``collectives.measured_time`` prices (at least one pair each);
    ``points_ranks`` a whole number >= 2; ``fitted`` true or false (a registered fabric is fitted)."""
    import dataclasses

    from primus_launch.projection.hardware.fabric import Fabric

    names = {f.name for f in dataclasses.fields(Fabric)}
    for k, v in fields.items():
        where = f"collectives.{gpu}.{k}"
        if k not in names:
            raise PlanError(where, v, "a Fabric field: " + ", ".join(sorted(names)))
        if k == "fitted":
            if not isinstance(v, bool):
                raise PlanError(where, v, "true or false")
        elif k == "points_ranks":
            if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= 1_000_000:
                raise PlanError(where, v, "a whole number of ranks from 2 to 1,000,000")
        elif k in _FABRIC_TABLES:
            if not isinstance(v, dict):
                raise PlanError(where, v, "a table of efficiencies by library (deepep = 0.8, hybridep = 0.7)")
            for lib, x in v.items():
                _number(f"{where}.{lib}", x, "e")
        elif k == "points":
            if not isinstance(v, dict):
                raise PlanError(where, v, "a table {op = [[S, t], ...]} of measured sizes (bytes) and seconds")
            for op, pts in v.items():
                if op not in _POINT_OPS:
                    raise PlanError(f"{where}.{op}", pts, "an op of " + ", ".join(_POINT_OPS))
                if not isinstance(pts, list) or not pts or not all(isinstance(q, list) and len(q) == 2 for q in pts):
                    raise PlanError(f"{where}.{op}", pts, "a non-empty list of [S, t] pairs (bytes, seconds)")
                for size, secs in pts:
                    _number(f"{where}.{op}", size, "S")
                    _number(f"{where}.{op}", secs, "t")
        elif not (v is None and k in _OPTIONAL):
            _number(where, v, "e" if k.startswith("e_") else "bw" if k.endswith("_bw") else "latency")
