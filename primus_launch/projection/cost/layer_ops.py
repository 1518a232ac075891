"""The per-layer accumulator of the roofline: :class:`LayerOps` prices each op of one layer kind on one GPU (GEMMs,
element-wise ops, norms, the FP8 quantisation of the layer's low-precision GEMMs) and totals forward / input-grad /
weight-grad GPU seconds, launched kernels per graph scope and the host time of launching them.

Formulas (the shapes and sources are in :mod:`primus_launch.projection.cost.roofline`'s module doc):

- GEMM [M, N, K]: forward ``gemm_time(M, N, K)``, input-grad ``gemm_time(M, K, N)``, weight-grad
  ``gemm_time(K, N, M)`` on the recipe's curve (``cost/compute.py``, ``cost/kernels.py``: curves fitted to public
  kernel records), slowed by TE userbuffers' SM contention (``cost/contention.py``); quantised operands add
  ``bytes_per_element x elements`` at the recipe's fitted cast bandwidth (``cost/fp8.py``), floored at
  ``KERNEL_MIN_S`` per quantisation kernel;
- element-wise op of ``n`` bytes: ``elementwise_time(n)`` forward, ``elementwise_time(bwd n)`` backward
  (:mod:`~primus_launch.projection.cost.elementwise_bytes`);
- every kernel time divided by the framework's in-situ efficiency (``calibration.FRAMEWORK_EFF``);
- a pass: ``max(GPU, kernels x t_launch + extra host)`` (``cost/framework.py``), or with the MoE dispatcher's
  sync the walk of :func:`~primus_launch.projection.cost.host_sync.launch_bound_seconds`.
"""

from __future__ import annotations

from primus_launch.plan import ModelArch
from primus_launch.projection.cost import fp8 as fp8m
from primus_launch.projection.cost import moe_host
from primus_launch.projection.cost.compute import KERNEL_MIN_S, arch_of, elementwise_time, gemm_time, quant_time
from primus_launch.projection.cost.contention import ub_factors
from primus_launch.projection.cost.elementwise_bytes import LAYERNORM_EAGER, NORM_FUSED, RMSNORM_EAGER
from primus_launch.projection.cost.torch_rmsnorm import RMSNORM_TORCH_FUSED
from primus_launch.projection.cost.expert_gemm_backend import grouped_backend
from primus_launch.projection.cost.framework import GRAPH_LAUNCH_S, Profile
from primus_launch.projection.cost.host_sync import SYNC_BEFORE, launch_bound_seconds
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.layer_times import PassTimes


class LayerOps:
    """Accumulates forward / input-grad / weight-grad GPU seconds and launched kernels per graph
    scope; with ``ops`` a list, also records each op as ``(name, fwd, bwd_input, bwd_weight, info)``
    (``info``: kind, curve key, forward FLOPs) for :func:`layer_op_times` and the explanation."""

    __slots__ = ("f", "bi", "bw", "kf", "kb", "gpu", "prec", "prof", "fmt", "recipe", "ops", "scope", "qf", "qb",
                 "qw", "nq", "nkf", "nkb", "wq_div", "fused_in", "mods", "sums", "slow", "ub", "gf", "sync", "hsf",
                 "hsb", "seq", "pend", "expert_gemm", "fp8_gather", "bf16", "f8a", "dim1x", "qx", "wacc", "hbx")

    def __init__(self, gpu: str, prec: str, prof: Profile, fmt: str, recipe: str | None, wq_div: float,
                 ops: list | None = None, insitu: float = 1.0, ub: tuple | None = None):
        self.f = self.bi = self.bw = 0.0
        self.kf: dict[str, int] = {}
        self.kb: dict[str, int] = {}
        self.gpu, self.prec, self.prof, self.fmt, self.recipe = gpu, prec, prof, fmt, recipe
        self.ops = ops
        self.scope = "other"
        self.qf = self.qb = self.qw = 0.0   # quantisation bytes: forward inputs, backward dY, weights
        self.nq = 0
        self.nkf = self.nkb = 0    # quantisation kernels on the GPU, forward / backward (quant_flush's floor)
        self.wq_div = wq_div
        self.fused_in = False
        self.mods: tuple[str, ...] = ()
        self.sums: dict[str, list[float]] = {}
        self.slow = 1.0 / insitu   # calibration.FRAMEWORK_EFF: kernels in a step vs the benchmarks
        self.ub = ub               # TE userbuffers TP overlap (None: off): its per-GEMM overrides (cost/contention.py)
        self.gf: dict[str, float] = {}   # forward GPU seconds per graph scope
        self.sync = False          # a host-device sync splits the forward pass (MoE dispatch, :meth:`times`)
        self.hsf: dict[str, float] = {}   # host seconds beyond the counted kernels, per graph scope (cost/moe_host.py)
        self.hsb: dict[str, float] = {}
        # the forward in launch order, one entry per op: [scope, GPU s, kernels, extra host s] (:meth:`times`)
        self.seq: list[list] = []
        self.pend: list | None = None
        self.expert_gemm = "te"   # plan.training.moe_expert_gemm (the grouped experts' GEMM backend)
        self.fp8_gather = False   # plan.training.fp8_param_gather (torchao: FSDP float8 all-gather)
        self.bf16: frozenset[str] = frozenset()   # plan.training.bf16_linears (attention linears left in BF16)
        self.f8a: tuple | None = None   # plan.training.fp8_attention: (arch, recipe, sinks) (cost/fp8_attention.py)
        # torchao MXFP8 linears' slower dim1 cast kernel (plan.training.mx_dim1_cast_kernel): extra streaming bytes
        # per element cast along dim1 (cost/fp8.py mx_dim1_extra_bytes) and their backward sum
        self.dim1x = 0.0
        self.qx = 0.0
        # --no-gradient-accumulation-fusion: HBM bytes per weight element of the add / copy into main_grad after
        # each weight-gradient GEMM (cost/wgrad_accumulation.py bytes_per_weight_element; 0: fused)
        self.wacc = 0.0
        # (backward host s, its excess over the backward GPU s charged alone, index of the host-bound op row)
        # as :meth:`times` left them, for the pass-wide pooling of cost/host_runahead.py
        self.hbx: tuple[float, float, int | None] = (0.0, 0.0, None)

    def add(self, f: float, bi: float, bw: float, cat: str, extra: tuple[str, ...] = ()) -> None:
        """Add to the totals and to the shares of the active modules (recompute, overlap), of the
        op category ``cat``: ``gemm``, ``attention`` (the core-attention kernels) or ``non_matmul``
        (everything else: what TorchTitan's per-op SAC recomputes), and of the scope (``scope:attn``,
        ``scope:moe_router``, ...: where Megatron's fine-grained schedule cuts a layer)."""
        k = self.slow
        f, bi, bw = f * k, bi * k, bw * k
        self.f += f
        self.gf[self.scope] = self.gf.get(self.scope, 0.0) + f
        self._op()[1] += f
        self.bi += bi
        self.bw += bw
        for k in self.mods + extra + (cat, "scope:" + self.scope):
            v = self.sums.setdefault(k, [0.0, 0.0, 0.0])
            v[0] += f
            v[1] += bi
            v[2] += bw

    def _op(self) -> list:
        """The forward entry of the op being priced (closed by :meth:`_rec`): [scope, GPU s, kernels, host s]."""
        if self.pend is None or self.pend[0] != self.scope:
            self._close()
            self.pend = [self.scope, 0.0, 0, 0.0, 0]
        return self.pend

    def _close(self) -> None:
        if self.pend is not None and (self.pend[1] > 0 or self.pend[2] or self.pend[3] > 0):
            self.seq.append(self.pend)
        self.pend = None

    def count(self, nf: int, nb: int) -> None:
        """Count ``nf`` forward and ``nb`` backward kernel launches in the current scope (host time: :meth:`times`)."""
        self.kf[self.scope] = self.kf.get(self.scope, 0) + nf
        self.kb[self.scope] = self.kb.get(self.scope, 0) + nb
        self._op()[2] += nf

    def host(self, f: float, b: float, launches: int = 0) -> None:
        """Host seconds beyond ``kernels x t_launch`` in the current scope (``launches`` kernels launched from a
        C++ loop, e.g. TE GroupedLinear's per-expert GEMMs), part of the next op's launches (:meth:`times`)."""
        self.hsf[self.scope] = self.hsf.get(self.scope, 0.0) + f
        self.hsb[self.scope] = self.hsb.get(self.scope, 0.0) + b
        e = self._op()
        e[3] += f
        e[4] += launches

    def record(self, name: str, f: float, bi: float, bw: float, info: tuple, close: bool = True) -> None:
        """Close the op being priced (``close``) and, with an op list, append ``(name, forward s, input-grad s,
        weight-grad s, info)`` to it."""
        if close:
            self._close()
        if self.ops is not None:
            self.ops.append((name, f, bi, bw, info))

    def gemm(self, m: int, n: int, k: int, batch: int = 1, lowp: bool = True, name: str = "gemm",
             separate: bool = False, input_fused: bool = False, ub: str | None = None, col: bool = False,
             grouped_kernel: bool = False, main_grad: bool = True) -> None:
        """A GEMM [m,n,k] x ``batch`` (``separate``: ``batch`` independent kernels, not grouped) with
        its backward; ``lowp``: in the plan's FP8/FP4 recipe (else bf16); ``ub``: the layer GEMM it is
        for TE userbuffers (``qkv`` / ``proj`` / ``fc1`` / ``fc2``), slowed by the SMs its overlapped
        communication holds when the plan overlaps TP communication (``cost/contention.py``);
        ``grouped_kernel``: the framework runs it through its grouped-GEMM kernel even when
        ``batch`` is 1 (TorchTitan's ``GroupedExperts`` calls ``torch._grouped_mm`` for any number of
        local experts: torchtitan v0.2.1 ``models/moe/moe.py`` ``_run_experts_grouped_mm``, 0.3.0
        ``models/common/moe.py`` ``GroupedExperts._grouped_mm``); ``main_grad``: its weight runs Megatron's
        gradient-accumulation fusion path (not the MoE router's plain autograd gate), so without the fusion
        one bandwidth-bound kernel per weight (``batch`` of them) moves ``k n wacc`` bytes after the weight-gradient
        GEMM (``cost/wgrad_accumulation.py``)."""
        g = self.gpu
        fmt = self.fmt if lowp and self.recipe else "bf16"
        f, bi, bw, kern = self._gemm_seconds(m, n, k, batch, fmt, separate, grouped_kernel)
        if ub and self.ub is not None:
            cf, cb, cw = ub_factors(ub, get_gpu(g).num_sms, self.ub)
            f, bi, bw = f * cf, bi * cb, bw * cw
        acc_kernels = batch if (self.wacc and main_grad) else 0
        if acc_kernels:
            bw += batch * elementwise_time(float(k * n) * self.wacc, g)
        # column-parallel linears (their backward collectives overlap their dgrad / wgrad GEMMs)
        self.add(f, bi, bw, "gemm", ("tp_col",) if ub in ("qkv", "fc1") or col else ())
        f, bi, bw = f * self.slow, bi * self.slow, bw * self.slow
        self.count(kern, 2 * kern + acc_kernels)
        if fmt != "bf16":
            self._quantised_operands(m, n, k, batch, separate, input_fused, grouped_kernel)
        self.record(f"{name} [{m}x{n}x{k}]" + (f" x{batch}" if batch > 1 else ""), f, bi, bw,
                    ("grouped_gemm" if (batch > 1 or grouped_kernel) and not separate else "gemm", fmt,
                     2.0 * m * n * k * batch))

    def _gemm_seconds(self, m: int, n: int, k: int, batch: int, fmt: str, separate: bool,
                      grouped_kernel: bool) -> tuple[float, float, float, int]:
        """(forward, input-grad, weight-grad seconds, kernels per pass) of :meth:`gemm`'s GEMM on the ``fmt``
        curve: ``batch`` separate kernels, or one (grouped where ``batch`` > 1 or ``grouped_kernel``, on the
        framework's grouped backend, ``cost/expert_gemm_backend.py``)."""
        g = self.gpu
        # torchao rowwise_with_gw_hp keeps the weight-gradient GEMM in bf16 (torchao/float8/config.py
        # ROWWISE_WITH_GW_HP: cast_config_input_for_grad_weight / cast_config_grad_output_for_grad_weight disabled)
        fmt_w = "bf16" if self.recipe == "rowwise_with_gw_hp" else fmt
        if separate and batch > 1:
            f = batch * gemm_time(m, n, k, g, "bf16", 1, fmt)
            bi = batch * gemm_time(m, k, n, g, "bf16", 1, fmt)
            bw = batch * gemm_time(k, n, m, g, "bf16", 1, fmt_w)
            return f, bi, bw, batch
        gr = grouped_backend(self.prof.name, self.expert_gemm, self.fmt, arch_of(g)) \
            if batch > 1 or grouped_kernel else ""
        f = gemm_time(m, n, k, g, "bf16", batch, fmt, gr)
        bi = gemm_time(m, k, n, g, "bf16", batch, fmt, gr)
        bw = gemm_time(k, n, m, g, "bf16", batch, fmt_w, gr, wgrad=True)
        return f, bi, bw, 1

    def _quantised_operands(self, m: int, n: int, k: int, batch: int, separate: bool, input_fused: bool,
                            grouped_kernel: bool) -> None:
        """Count a low-precision GEMM's quantised operands (cost/fp8.py) for :meth:`quant_flush`: X forward
        (unless the norm wrote it), dY backward, W per step or per micro-batch; and the quantisation kernels."""
        # kernels per quantised tensor (cost/moe_host.py QUANT_KERNELS_PER_TENSOR: TE current scaling
        # amax + scale + cast = 3, MX / block 1, delayed one fused cast-transpose); TE GroupedLinear
        # quantises each expert's split apart (split_quantize; delayed: one multi-tensor kernel)
        per = moe_host.QUANT_KERNELS_PER_TENSOR.get(self.recipe or "", 1)
        nk = (batch * per if per else 1) if (batch > 1 and not separate and self.prof.name == "megatron-te") \
            else max(1, per) * (batch if separate else 1)
        if not input_fused:
            self.qf += m * k * batch
            self.nq += 1
            self.nkf += nk
        self.qb += m * n * batch
        self.qw += k * n * batch
        self.nq += 1
        self.nkb += nk
        if self.dim1x and batch == 1 and not grouped_kernel:
            # an MX linear's backward casts its input, weight and output gradient along dim1 (torchao
            # mx_formats mx_linear.py mx_mm.backward); the grouped experts' casts stay CUDA (torchao
            # moe_training scaled_grouped_mm.py _MXFP8GroupedMM: cast_kernel_choice=CUDA)
            self.qx += self.dim1x * (m * k + m * n + k * n)

    def elem(self, nbytes: float, name: str, bwd: float = 2.0, kernels: tuple[int, int] = (1, 1)) -> None:
        """A bandwidth-bound op; its backward moves ``bwd`` times the forward bytes."""
        t = elementwise_time(float(nbytes), self.gpu)
        tb = elementwise_time(float(nbytes) * bwd, self.gpu) if bwd > 0 else 0.0
        if kernels[0] > 1:
            t += (kernels[0] - 1) * 2e-6
        self.add(t, tb, 0.0, "non_matmul")
        t, tb = t * self.slow, tb * self.slow
        self.count(*kernels)
        self.record(name, t, tb, 0.0, ("elementwise", "hbm", 0.0, nbytes))

    def norm(self, elems: float, m: ModelArch, name: str) -> None:
        """A norm over ``elems`` elements: streaming bytes and kernels of :data:`NORM_FUSED` (TE / fused),
        else eager PyTorch's: RMSNorm on torch >= 2.9 the fused ATen kernel (``cost/torch_rmsnorm.py``
        ``RMSNORM_TORCH_FUSED``: 4 B per element forward in 1 kernel, 10 B backward in 3), on older torch
        :data:`RMSNORM_EAGER`; LayerNorm :data:`LAYERNORM_EAGER` (backward 2x the forward bytes)."""
        p = self.prof
        if p.fused_norm:
            nb, kf, kb = NORM_FUSED
        elif m.normalization == "rmsnorm" and p.torch_fused_rms:
            fb, bb, kf, kb = RMSNORM_TORCH_FUSED
            self.elem(fb * elems, name, bb / fb, (kf, kb))
            return
        else:
            nb, kf, kb = RMSNORM_EAGER if m.normalization == "rmsnorm" else LAYERNORM_EAGER
        self.elem(nb * elems, name, 2.0, (kf, kb))

    def quant_flush(self, name: str = "FP8 quantisation (casts, amax, transposes)") -> None:
        """Charge the layer's accumulated quantisation bytes (cost/fp8.py) as one op row."""
        if not self.recipe or (self.qf == 0 and self.qb == 0 and self.qw == 0):
            return
        if self.prof.name == "torchtitan-compile":
            # torchao under inductor: per-role bytes of torchao's roofline (activations / output gradients fuse
            # their first read into the producer, weights do not; rowwise adds the wgrad post-scale pass) at
            # streaming speed (cost/fp8.py torchao_compiled_bytes)
            ba, bwt, bpost = fp8m.torchao_compiled_bytes(self.recipe, self.fp8_gather)
            recipe = None
        else:
            ba = bwt = fp8m.bytes_per_element(self.recipe, arch_of(self.gpu))
            bpost, recipe = 0.0, self.recipe
        qt = (lambda nb: elementwise_time(nb, self.gpu)) if recipe is None else (lambda nb: quant_time(nb, self.gpu, recipe))
        f = qt(ba * self.qf + bwt * self.qw / self.wq_div) if (self.qf or self.qw) else 0.0
        b = qt(ba * self.qb + bpost * self.qw) if (self.qb or bpost * self.qw) else 0.0
        if recipe is not None:
            # each quantisation kernel takes at least KERNEL_MIN_S on the GPU (record ao-kernel-min-duration):
            # n kernels sharing the bytes take max(bytes time, n t_min) -- small expert splits are floor-bound
            f = max(f, self.nkf * KERNEL_MIN_S) if f else f
            b = max(b, self.nkb * KERNEL_MIN_S) if b else b
        qx = self.qx
        if qx:   # the MX linears' dim1 casts on a slower kernel than the CUDA one (cost/fp8.py)
            b += elementwise_time(qx, self.gpu)
        self.add(f, b, 0.0, "non_matmul")
        f, b = f * self.slow, b * self.slow
        self.count(self.nq, self.nq)
        self.record((f"FP8 quantisation [{self.recipe}; Triton/torch dim1]" if qx else f"{name} [{self.recipe}]"),
                    f, b, 0.0, ("quant", self.recipe, 0.0,
                                ba * (self.qf + self.qb) + bwt * self.qw / self.wq_div + bpost * self.qw,
                                "te" if recipe else "torchao", qx))
        self.qf = self.qb = self.qw = self.qx = 0.0
        self.nq = 0
        self.nkf = self.nkb = 0

    def times(self, host_s: float, graphs: frozenset) -> PassTimes:
        """GPU times, raised to the host time of the launched kernels where that is longer.

        Without a host-device sync a pass repeats layer after layer with the host running ahead as far as it
        can: ``max(GPU, host)``.  With ``sync`` (an MoE layer whose token dispatcher waits on the host for the
        routed-token counts, :data:`SYNC_BEFORE`) the forward is periodic between two syncs: the host wakes
        (``t_launch``), launches the layer's part after its sync and the next layer's part up to the sync into an
        idle GPU, then waits for the GPU to drain; :func:`launch_bound_seconds` walks those ops kernel by kernel
        (each op's GPU work starts when its first kernel is launched and cannot end before its last one is)."""
        self._close()
        if host_s <= 0:
            return PassTimes(self.f, self.bi, self.bw)
        hf, hb = self._host_seconds(host_s, graphs)
        f = max(self.f, hf)
        if self.sync:
            i1 = next((i for i, e in enumerate(self.seq) if e[0] not in SYNC_BEFORE), len(self.seq))
            f = host_s + launch_bound_seconds(self.seq[i1:] + self.seq[:i1], host_s, graphs)
        bi = self.bi
        if hb > self.bi + self.bw:
            bi = hb - self.bw
        self.hbx = (hb, bi - self.bi, len(self.ops) if self.ops is not None else None)
        self._rec_host_bound(f - self.f - (host_s if self.sync else 0.0), bi - self.bi, hf, hb, graphs)
        return PassTimes(f, bi, self.bw)

    def pool_backward(self, t: PassTimes, bi: float) -> PassTimes:
        """``t`` with the input-grad seconds ``bi`` of the pass-wide host pooling (cost/host_runahead.py), the
        host-bound row of the op list rewritten to match."""
        i = self.hbx[2]
        if self.ops is not None and i is not None and i < len(self.ops) and abs(bi - t.bwd_input_s) > 1e-12:
            name, f, _, w, info = self.ops[i]
            self.ops[i] = (name + " (backward pooled over the pass: cost/host_runahead.py)", f,
                           max(0.0, bi - self.bi), w, info)
        return PassTimes(t.fwd_s, bi, t.bwd_weight_s)

    def _rec_host_bound(self, ef: float, eb: float, hf: float, hb: float, graphs: frozenset) -> None:
        """Name the host on the critical path in the op list: the seconds a pass takes beyond its GPU work
        because the host launches its kernels more slowly than the GPU runs them (:meth:`times`), with the
        host's own time and the CUDA-graph scopes that already remove launches."""
        if self.ops is None or (ef <= 1e-9 and eb <= 1e-9):
            return
        cap = ", ".join(sorted(sc for sc in graphs if sc in self.kf)) or "none"
        self.record(f"host launch-bound: the CPU launches this layer in {1e3 * hf:.2f} / {1e3 * hb:.2f} ms "
                    f"(fwd / bwd) against its GPU work (CUDA-graph scopes captured: {cap})",
                    max(0.0, ef), max(0.0, eb), 0.0,
                    ("host", "cost/framework.py host launch per kernel x the kernels outside CUDA graphs + "
                           "cost/moe_host.py" + ("; forward walked launch by launch from the dispatcher's sync "
                                                 "(host_sync.launch_bound_seconds)" if self.sync else "")
                           + "; on the critical path", 0.0, 0.0))

    def kernels(self) -> int:
        """Kernels launched in both passes of the layer."""
        return sum(self.kf.values()) + sum(self.kb.values())

    def _host_seconds(self, host_s: float, graphs: frozenset) -> tuple[float, float]:
        """Host seconds of the forward and of the backward: the kernels launched outside the captured
        ``graphs`` scopes at ``host_s`` each, the extra host time of :meth:`host`, and one graph replay
        per pass when any scope is captured."""
        hf = sum(n for sc, n in self.kf.items() if sc not in graphs) * host_s
        hb = sum(n for sc, n in self.kb.items() if sc not in graphs) * host_s
        hf += sum(v for sc, v in self.hsf.items() if sc not in graphs)
        hb += sum(v for sc, v in self.hsb.items() if sc not in graphs)
        g = GRAPH_LAUNCH_S if any(sc in graphs for sc in self.kf) else 0.0
        return hf + g, hb + g

    def host_summary(self, host_s: float, graphs: frozenset) -> tuple[float, float, float, float]:
        """(host forward, host backward, GPU forward, GPU backward) seconds of one pass pair (:meth:`times`)."""
        return (*self._host_seconds(host_s, graphs), self.f, self.bi + self.bw)

    def shares(self, kind: str, out: dict[str, PassTimes]) -> None:
        """Store the per-module / per-category / per-scope sums (:meth:`add`) in ``out`` as ``kind:key``."""
        for k, v in self.sums.items():
            out[f"{kind}:{k}"] = PassTimes(*v)
