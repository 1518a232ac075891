"""Per-kernel GPU time on a target GPU, from curves fitted to public kernel measurements.

Each function picks the curve of the GPU's architecture (``GPUSpec.arch``) and library from
:mod:`primus_launch.projection.cost.fitted` (written by ``scripts/fit_kernels.py``; the model forms
and their sources are in :mod:`primus_launch.projection.cost.kernels`) and returns seconds; the
``*_info`` variants also return the curve's key, so the explanation can name the records behind it:

- :func:`gemm_time`: dense / grouped GEMMs per input format: ``bf16`` (also fp16), ``fp8``
  (per-tensor scaling: delayed, tensorwise / current, rowwise), ``fp8_block`` (Hopper 1x128 /
  128x128 blocks), ``mxfp8`` (Blackwell), ``fp4`` (NVFP4 / MXFP4);
- :func:`attention_time`: fused attention forward and backward per implementation (``cudnn`` =
  TE's FusedAttention, ``fa2``, ``fa3``, ``ck`` = AMD aiter / Composable Kernel);
- :func:`elementwise_time`: bandwidth-bound kernels at the architecture's streaming efficiency;
- :func:`quant_time`: an FP8 / FP4 recipe's cast / amax / transpose traffic at the bandwidth the
  recipe's kernels reach (``cost/fp8.py``).

Fallbacks (stated in the explanation): an architecture without a curve for a format uses its
closest relative (Blackwell Ultra -> Blackwell, CDNA4 -> CDNA3, unknown -> Hopper), a format without
records uses the architecture's per-tensor FP8 curve; GPUs whose power cap lowers the sustained
clock scale compute-bound kernels by ``calibration.sustained_clock``.  All functions are
``lru_cache``-d on their hashable arguments: the tuner asks for the same shapes thousands of times.
"""

from __future__ import annotations

from functools import lru_cache

from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost.fitted import FITTED
from primus_launch.projection.cost.kernels import AttnCurve, GemmCurve, attention_seconds, gemm_seconds, stream_seconds
from primus_launch.projection.cost.kernels import attention_flops  # noqa: F401  (importable from here, as before)
from primus_launch.projection.hardware.gpus import get_gpu

# the GPU-side floor of a tiny kernel (torchao's roofline KERNEL_LAUNCH_OVERHEAD_SEC, record
# ao-kernel-min-duration: 2 us)
KERNEL_MIN_S = 2e-6

_ARCH_FALLBACK = {"blackwell_ultra": "blackwell", "cdna4": "cdna3", "": "hopper", "cdna3": "hopper",
                  "blackwell": "hopper", "ampere": "hopper"}
_FMT_FALLBACK = {"fp8_block": "fp8", "mxfp8": "fp8", "fp4": "fp8", "fp8": "bf16"}
ELEM = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "mxfp8": 1.0, "fp4": 0.5}


def arch_of(gpu: str) -> str:
    """The architecture key (``hardware/gpus.py`` ``GPUSpec.arch``) of ``gpu``."""
    return get_gpu(gpu).arch


def _arch_chain(arch: str) -> list[str]:
    out = [arch]
    while out[-1] in _ARCH_FALLBACK and out[-1] != "hopper":
        out.append(_ARCH_FALLBACK[out[-1]])
    return out


@lru_cache(maxsize=512)
def gemm_curve(arch: str, fmt: str) -> tuple[GemmCurve, str]:
    """(curve, key) for GEMMs of ``fmt`` on ``arch``: along the architecture chain (module doc), the
    first of the format chain (``fmt``, then per-tensor FP8, then BF16) that has a curve.  NVFP4 on Blackwell
    uses the B300 record (the same FP4 tensor cores)."""
    table = FITTED["gemm"]
    fmts = [fmt]
    while fmts[-1] in _FMT_FALLBACK:
        fmts.append(_FMT_FALLBACK[fmts[-1]])
    archs = _arch_chain(arch)
    if fmt == "fp4" and arch.startswith("blackwell"):
        archs = ["blackwell_ultra"] + archs
    for a in archs:
        for f in fmts:
            key = f"{a}/{f}"
            if key in table:
                c = table[key]
                return GemmCurve(c["eff"], c["k0"], c["t0"], tuple(c["records"]), c["rms"], c.get("note", "")), key
    c = table["hopper/bf16"]
    return GemmCurve(c["eff"], c["k0"], c["t0"], tuple(c["records"]), c["rms"]), "hopper/bf16"


@lru_cache(maxsize=512)
def grouped_curve(arch: str, fmt: str, torch_lib: bool = False) -> tuple[GemmCurve, str]:
    """(curve, key) of a grouped GEMM (MoE experts in one kernel): the architecture's grouped-GEMM
    curve for the format (``FITTED['grouped_gemm']``: DeepGEMM, CK records; with ``torch_lib`` first
    PyTorch's own torch._grouped_mm records, what TorchTitan runs) where one was fitted along the
    architecture / format chains, else the dense curve (TE's grouped linear = cuBLAS GEMMs)."""
    table = FITTED.get("grouped_gemm", {})
    fmts = [fmt]
    while fmts[-1] in _FMT_FALLBACK:
        fmts.append(_FMT_FALLBACK[fmts[-1]])
    keys = [f"{a}/{f}" for a in _arch_chain(arch)[:2] for f in fmts]
    if torch_lib:
        keys = [k + "/torch" for k in keys] + keys
    for key in keys:
        if key in table:
            c = table[key]
            return (GemmCurve(c["eff"], c["k0"], c["t0"], tuple(c["records"]), c["rms"], k0_wgrad=c.get("k0_wgrad")),
                    f"grouped/{key}")
    return gemm_curve(arch, fmt)


@lru_cache(maxsize=256)
def hbm_eta(arch: str) -> tuple[float, str]:
    """(streaming efficiency, key) of an architecture's HBM (``FITTED['hbm']``)."""
    t = FITTED["hbm"]
    for a in _arch_chain(arch):
        if a in t and "eta" in t[a]:
            return t[a]["eta"], f"hbm/{a}"
    return cal.HBM_BW_EFFICIENCY, "calibration.HBM_BW_EFFICIENCY"


@lru_cache(maxsize=256)
def _gpu(gpu: str) -> tuple[float, float, int, float, str]:
    """(sustained clock, HBM B/s at the streaming efficiency, SMs, bf16 peak, arch)."""
    g = get_gpu(gpu)
    clk = cal.compute_clock(g.sustained_clock_fraction, g.arch, g.tdp_watts, g.peak_power_w, g.power_limit_w)
    eta, _ = hbm_eta(g.arch)
    return clk, g.hbm_bw * eta, g.num_sms, g.peak_flops_bf16, g.arch


def fmt_peak(gpu: str, fmt: str) -> float:
    """The dense datasheet peak FLOP/s of ``gpu`` a GEMM of format ``fmt`` runs against (``hardware/gpus.py``,
    each with its datasheet): BF16's for ``bf16``, FP4's for ``fp4`` (FP8's where the GPU has none), else FP8's
    (``fp8``, ``fp8_block``, ``mxfp8``)."""
    g = get_gpu(gpu)
    if fmt == "bf16":
        return g.peak_flops_bf16
    if fmt == "fp4":
        return g.peak_flops_fp4 or g.peak_flops_fp8
    return g.peak_flops_fp8


def _fmt(precision: str) -> str:
    return {"fp8": "fp8", "fp4": "fp4"}.get(precision, "bf16")


@lru_cache(maxsize=200_000)
def gemm_time(m: int, n: int, k: int, gpu: str, precision: str = "bf16", batch: int = 1,
              fmt: str | None = None, grouped: str = "", wgrad: bool = False) -> float:
    """Seconds for ``batch`` GEMMs of [m,k]x[k,n] on ``gpu``: ``fmt`` a GEMM format (module doc) or
    from ``precision`` (bf16 / fp16 / fp32 -> bf16 curve; fp8 -> per-tensor FP8; fp4); ``grouped``
    ("any" / "torch"): one grouped-GEMM kernel over the ``batch`` problems (:func:`grouped_curve`);
    "te": Transformer Engine's per-expert cuBLASLt GEMMs on four streams (:mod:`cost.grouped_gemm`).
    ``wgrad``: the grouped weight gradient (``k`` = tokens of a group), priced on the grouped curve's
    K-grouped kernel (``GemmCurve.for_wgrad``; dense curves are unchanged)."""
    f = fmt or _fmt(precision)
    clk, hbm, sms, _, arch = _gpu(gpu)
    if grouped == "te":   # TE GroupedLinear: one cuBLASLt GEMM per expert on four streams (cost/grouped_gemm.py)
        from primus_launch.projection.cost.grouped_gemm import multistream_floor, te_multistream_seconds

        c, _ = gemm_curve(arch, f)
        t = te_multistream_seconds(m, n, k, batch, fmt_peak(gpu, f) * clk, sms, hbm, ELEM.get(f, 2.0), c)
        if multistream_floor(arch):   # never faster than one Primus-Turbo grouped kernel (cost/grouped_gemm.py)
            cg, _ = grouped_curve(arch, f, False)
            t = max(t, gemm_seconds(m, n, k, batch, fmt_peak(gpu, f) * clk, sms, hbm, ELEM.get(f, 2.0), cg))
        return t
    c, _ = grouped_curve(arch, f, grouped == "torch") if grouped else gemm_curve(arch, f)
    if grouped and wgrad:
        c = c.for_wgrad()
    peak = fmt_peak(gpu, f) * clk
    if precision == "fp32" and fmt is None:
        peak /= 2
    return gemm_seconds(m, n, k, batch, peak, sms, hbm, ELEM.get(f, 2.0), c)


_ATTN_DEFAULT = {"ampere": "fa2", "hopper": "cudnn", "blackwell": "cudnn", "blackwell_ultra": "cudnn",
                 "cdna3": "ck", "cdna4": "ck", "": "cudnn"}


@lru_cache(maxsize=512)
def attn_curve(arch: str, impl: str) -> tuple[AttnCurve, str]:
    """(curve, key) for attention implementation ``impl`` on ``arch``: an architecture without that
    implementation's curve uses its default implementation (Blackwell: cuDNN; AMD: CK), then the
    fallback architecture's."""
    t = FITTED["attention"]
    for a in _arch_chain(arch):
        for i in (impl, _ATTN_DEFAULT.get(a, "cudnn")):
            key = f"{a}/{i}"
            if key in t:
                c = t[key]
                return AttnCurve(c["fwd"], c["bwd"], c["s0"], c["d0"], c["tc"], c["t0"], tuple(c["records"]),
                                 c["rms"] or 0.0, c.get("note", ""), c.get("dp", 1.0)), key
    c = t["hopper/cudnn"]
    return AttnCurve(c["fwd"], c["bwd"], c["s0"], c["d0"], c["tc"], c["t0"], tuple(c["records"]), c["rms"],
                     c.get("note", ""), c.get("dp", 1.0)), "hopper/cudnn"


def default_attention_impl(arch: str) -> str:
    """The attention implementation whose fitted curve prices ``attention_backend = auto`` on ``arch``
    (NVIDIA: cuDNN, Ampere FlashAttention-2; AMD: CK)."""
    return _ATTN_DEFAULT.get(arch, "cudnn")


@lru_cache(maxsize=200_000)
def attention_time(b: int, heads: int, sq: int, skv: int, d_qk: int, d_v: int, causal: bool,
                   gpu: str, impl: str = "auto", window: int | None = None) -> tuple[float, float]:
    """(forward, backward) seconds of a fused attention core in BF16 (FP8 recipes keep it BF16 unless
    ``training.fp8_attention``: ``cost/fp8_attention.py`` scales these times, ``attention_kernels.core_attention``)."""
    if b <= 0 or heads <= 0 or sq <= 0 or skv <= 0:
        return 0.0, 0.0
    clk, _, _, peak, arch = _gpu(gpu)
    c, _ = attn_curve(arch, default_attention_impl(arch) if impl == "auto" else impl)
    p = peak * clk
    return (attention_seconds(b, heads, sq, skv, d_qk, d_v, causal, window, p, c, False),
            attention_seconds(b, heads, sq, skv, d_qk, d_v, causal, window, p, c, True))


@lru_cache(maxsize=200_000)
def elementwise_time(nbytes: float, gpu: str) -> float:
    """Seconds for a bandwidth-bound kernel moving ``nbytes`` through HBM (read + write):
    ``nbytes / (B_hbm eta) + t_min`` (:func:`kernels.stream_seconds`; ``eta`` the architecture's fitted
    streaming efficiency, ``t_min`` = :data:`KERNEL_MIN_S`, torchao's roofline kernel floor)."""
    _, hbm, _, _, _ = _gpu(gpu)
    return stream_seconds(nbytes, hbm, KERNEL_MIN_S)


@lru_cache(maxsize=200_000)
def quant_time(nbytes: float, gpu: str, recipe: str) -> float:
    """Seconds of a recipe's quantisation kernels moving ``nbytes`` (their fitted bandwidth
    fraction ``FITTED['fp8_quant'][recipe]``: the architecture's own figure (``per_arch``, along the
    architecture chain) where TE's benchmark was run on it, else the mean; recipes without a figure
    use tensorwise's)."""
    if nbytes <= 0:
        return 0.0
    q = FITTED["fp8_quant"]
    c = q.get(recipe, q.get("tensorwise", {"eff": 0.4}))
    g = get_gpu(gpu)
    return nbytes / (g.hbm_bw * quant_efficiency(c, g.arch)) + KERNEL_MIN_S


def quant_efficiency(fit: dict, arch: str) -> float:
    """HBM fraction of one recipe's quantisation fit ``FITTED['fp8_quant'][recipe]`` on ``arch``: its
    ``per_arch`` figure along the architecture chain where TE's benchmark ran there, else its mean
    ``eff`` (0 for an empty fit)."""
    per = fit.get("per_arch", {})
    return next((per[a] for a in _arch_chain(arch) if a in per), fit.get("eff", 0.0))


def clear_caches() -> None:
    """Forget cached results (after the calibration constants change)."""
    for f in (_gpu, gemm_time, attention_time, elementwise_time, quant_time, gemm_curve, grouped_curve, attn_curve,
              hbm_eta):
        f.cache_clear()
