"""Host (CPU) seconds per launched ATen op: Megatron-Core 0.16.1 layers vs an HF-style eager Llama decoder layer.

The projection prices a layer's host (launch) time as ``kernels x t_launch`` (``cost/framework.py``), with
``t_launch`` fitted on HF Llama-3.2-1B eager on a B200 (``cost/host_fit.py``).  Megatron's MoE layer's kernels
are counted from its real ``MoELayer`` (``tests/moe_host_trace.py``).  That prices a Megatron op at the host cost
of an HF op.  This benchmark measures whether that holds, as a ratio on this CPU (machine speed cancels to first
order): with tiny tensors every ATen op executes in about a microsecond, so a layer's forward + backward time is
Python, autograd and PyTorch's dispatcher -- the host path a GPU run pays per launched kernel.

Workloads (bf16, one thread, forward + backward, the same op counter for all):
- ``hf_llama``: a minimal faithful copy of HF transformers' ``LlamaDecoderLayer`` (``modeling_llama.py``: RMSNorm in
  fp32, q/k/v/o projections, ``apply_rotary_pos_emb`` with ``rotate_half``, ``repeat_kv``, SDPA, SwiGLU MLP,
  residual adds); ``hf_llama_ckpt``: the same under ``torch.utils.checkpoint`` (the fitted benchmark ran with
  gradient checkpointing).  ``transformers`` is not installed here.
- ``mc_dense``: megatron-core's ``TransformerLayer`` (``get_gpt_layer_local_spec``) with RoPE.
- ``mc_moe_epN``: megatron's ``MoELayer`` (local spec: router, all-to-all token dispatcher, ``SequentialMLP``
  experts), built on torch's fake process group as ``tests/moe_host_trace.py`` does, ``all_to_all_single`` a no-op.
- ``mc_moe_rd_epN``: the same with the experts replaced by a pass-through (what ``cost/moe_host.py`` counts:
  router + dispatcher; the experts' GEMMs are priced elsewhere).
- ``mc_moe_layer_epN``: a whole megatron ``TransformerLayer`` with the MoE MLP (attention + router + dispatcher
  + experts).

Every step starts with the parameters' gradients unset (``zero_grad(set_to_none=True)``), as a fresh micro-batch
of a single-GPU step does (Megatron's DDP would add one ``main_grad`` accumulation per parameter; not built here).

Counted ops: every non-view ATen op that is not an allocation or a host read, skipping host arithmetic on 0-dim
integer tensors -- the rule of ``tests/moe_host_trace.py`` (on the GPU each such op is one kernel launch).
Timing: interleaved rounds (each round times every workload back to back, counter off), per-round ratios to
``hf_llama``, median and the 10-90 % spread over rounds, and the ratio of each workload's fastest sample.  ``ops``:
the step's ATen calls (recorded by the counter with their arguments) replayed alone from a bare loop -- PyTorch's
dispatcher and the kernels -- as a share of the step; the rest (``btw``) is the framework's Python and autograd
between the ops.  The ``mid`` size is there to show where the premise ends: its ops take most of the step.

The model's ``t_launch`` is per kernel of the dry-run's own decomposition, not per ATen op: :func:`units` prints
how many ATen kernels of this counter one decomposition kernel of the fitted step stands for.

Run: ``PYTHONPATH=$PWD python scripts/host_overhead_ratio.py [--rounds 30] [--sizes tiny small] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from primus_launch.frameworks import mcore_cpu  # noqa: E402

_NO_KERNEL = {torch.ops.aten.empty.memory_format, torch.ops.aten.new_empty.default, torch.ops.aten.empty_like.default,
              torch.ops.aten.empty_strided.default, torch.ops.aten._local_scalar_dense.default}

SIZES = {  # name: (tokens, hidden)
    "tiny": (8, 32),
    "small": (32, 64),
    "mid": (128, 256),
}
DTYPE = {"bf16": torch.bfloat16, "fp32": torch.float32}


class Counter(TorchDispatchMode):
    """Counts launched ops (module doc) and all ATen calls; records each call with its (detached) arguments for
    :func:`replay`."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels = 0
        self.calls = 0
        self.log: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.calls += 1
        det = torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.detach(), (args, kwargs or {}))
        self.log.append((func, det[0], det[1]))
        if func.is_view or func in _NO_KERNEL:
            return out
        ts = [a for a in torch.utils._pytree.tree_leaves((args, kwargs or {})) if isinstance(a, torch.Tensor)]
        if ts and all(t.dim() == 0 and not t.is_floating_point() for t in ts):
            return out
        self.kernels += 1
        return out


# ---------------------------------------------------------------------------------------------- HF Llama (eager)
class RMSNorm(torch.nn.Module):
    """transformers ``LlamaRMSNorm``."""

    def __init__(self, h: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n: int):
    b, kv, s, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


class HFLlamaLayer(torch.nn.Module):
    """transformers ``LlamaDecoderLayer`` (sdpa attention, no bias, SiLU MLP)."""

    def __init__(self, h: int, heads: int = 4, kv_heads: int = 2) -> None:
        super().__init__()
        self.hd, self.nh, self.nkv = h // heads, heads, kv_heads
        self.input_layernorm = RMSNorm(h)
        self.post_attention_layernorm = RMSNorm(h)
        self.q_proj = torch.nn.Linear(h, heads * self.hd, bias=False)
        self.k_proj = torch.nn.Linear(h, kv_heads * self.hd, bias=False)
        self.v_proj = torch.nn.Linear(h, kv_heads * self.hd, bias=False)
        self.o_proj = torch.nn.Linear(heads * self.hd, h, bias=False)
        self.gate_proj = torch.nn.Linear(h, 4 * h, bias=False)
        self.up_proj = torch.nn.Linear(h, 4 * h, bias=False)
        self.down_proj = torch.nn.Linear(4 * h, h, bias=False)

    def attn(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = (q * cos) + (rotate_half(q) * sin)
        k = (k * cos) + (rotate_half(k) * sin)
        k = repeat_kv(k, self.nh // self.nkv)
        v = repeat_kv(v, self.nh // self.nkv)
        o = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True, scale=self.hd ** -0.5)
        o = o.transpose(1, 2).contiguous().reshape(b, s, -1).contiguous()
        return self.o_proj(o)

    def forward(self, x, cos, sin):
        r = x
        x = self.input_layernorm(x)
        x = r + self.attn(x, cos, sin)
        r = x
        x = self.post_attention_layernorm(x)
        x = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return r + x


def rope_tables(s: int, hd: int, dtype):
    """transformers ``LlamaRotaryEmbedding`` (computed once per model forward, shared by the layers)."""
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    pos = torch.arange(s, dtype=torch.float32)
    f = torch.outer(pos, inv)
    emb = torch.cat((f, f), dim=-1)[None]
    return emb.cos().to(dtype), emb.sin().to(dtype)


def hf_workload(tokens: int, h: int, ckpt: bool, dtype=torch.bfloat16):
    layer = HFLlamaLayer(h).to(dtype)
    cos, sin = rope_tables(tokens, h // 4, dtype)
    x0 = torch.randn(1, tokens, h, dtype=dtype)

    params = list(layer.parameters())

    def step():
        for p in params:   # zero_grad(set_to_none=True): every step is a fresh micro-batch, no accumulation
            p.grad = None
        x = x0.detach().requires_grad_(True)
        if ckpt:
            out = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=True)
        else:
            out = layer(x, cos, sin)
        out.backward(torch.ones_like(out))
    return step


class HFLlamaModel(torch.nn.Module):
    """transformers ``LlamaForCausalLM`` at Llama-3.2-1B's structure (16 layers, tied embeddings), tiny widths:
    the op count of the fitted benchmark's step (batch 1, gradient checkpointing per layer, fp32 loss)."""

    def __init__(self, h: int = 32, layers: int = 16, vocab: int = 64) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, h)
        self.layers = torch.nn.ModuleList(HFLlamaLayer(h) for _ in range(layers))
        self.norm = RMSNorm(h)
        self.h = h

    def forward(self, ids, labels):
        x = self.embed(ids)
        cos, sin = rope_tables(ids.shape[1], self.h // 4, x.dtype)
        for layer in self.layers:
            x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=True)
        logits = F.linear(self.norm(x), self.embed.weight).float()   # tied lm_head; HF upcasts the logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)


def hf_step_kernels(dtype=torch.bfloat16) -> int:
    """Counted kernels of the fitted benchmark's forward + backward (:class:`HFLlamaModel`)."""
    torch.manual_seed(0)
    m = HFLlamaModel().to(dtype)
    ids = torch.randint(0, 64, (1, 16))
    labels = torch.randint(0, 64, (1, 16))
    c = Counter()
    with c:
        m(ids, labels).backward()
    return c.kernels


# ---------------------------------------------------------------------------------------------- megatron-core
class _PassExperts(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, probs):
        ctx.pshape = probs.shape
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g.clone(), torch.zeros(ctx.pshape, dtype=torch.float32)


def _init_pg(ep: int, world: int) -> None:
    """Megatron's parallel state for expert parallelism ``ep`` on a fake process group of ``world`` ranks.
    The layers keep the groups they were built with (megatron-core 0.16.1 reads its process groups at
    construction), so layers of several EP sizes live side by side on one default group."""
    from megatron.core import parallel_state as ps

    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
        dist.all_to_all_single = lambda *a, **k: None   # the collective as a no-op (its output is preallocated)
    ps.destroy_model_parallel()
    ps.initialize_model_parallel(1, 1, expert_model_parallel_size=ep, expert_tensor_parallel_size=1,
                                 create_gloo_process_groups=False)
    mcore_cpu.seed_rng_tracker(1234)


def _conf(h: int, ep: int, experts: int | None, topk: int, dtype=torch.bfloat16):
    from megatron.core.transformer.transformer_config import TransformerConfig

    moe = dict(num_moe_experts=experts, moe_router_topk=topk, moe_ffn_hidden_size=2 * h, moe_grouped_gemm=False,
               expert_model_parallel_size=ep, moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3,
               moe_token_dispatcher_type="alltoall") if experts else {}
    ov = {**mcore_cpu.config_overrides(), **({"moe_token_dispatcher_type": "alltoall"} if experts else {})}
    return TransformerConfig(num_layers=1, hidden_size=h, ffn_hidden_size=4 * h, num_attention_heads=4,
                             num_query_groups=2, params_dtype=dtype, bf16=dtype == torch.bfloat16, add_bias_linear=False,
                             gated_linear_unit=True, activation_func=F.silu, normalization="RMSNorm",
                             hidden_dropout=0.0, attention_dropout=0.0, **{**ov, **moe})


def mc_workload(tokens: int, h: int, kind: str, ep: int, world: int, experts: int = 8, topk: int = 2,
                dtype=torch.bfloat16):
    """``kind``: dense | moe | moe_rd (experts pass-through) | moe_layer (TransformerLayer with MoE)."""
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.moe.moe_layer import MoELayer
    from megatron.core.transformer.transformer_layer import TransformerLayer

    mcore_cpu.install()
    _init_pg(ep, world)
    moe = kind != "dense"
    conf = _conf(h, ep, experts if moe else None, topk, dtype)
    spec = get_gpt_layer_local_spec(num_experts=experts if moe else None, moe_grouped_gemm=False)
    x0 = torch.randn(tokens, 1, h, dtype=dtype)
    if kind in ("moe", "moe_rd"):
        layer = MoELayer(conf, spec.submodules.mlp.submodules).to(dtype)
        if kind == "moe_rd":
            layer.experts.forward = lambda x, tpe, probs: (_PassExperts.apply(x, probs), None)

        params = list(layer.parameters())

        def step():
            for p in params:
                p.grad = None
            x = x0.detach().requires_grad_(True)
            out, _ = layer(x)
            out.backward(torch.ones_like(out))
        return step
    layer = TransformerLayer(conf, spec.submodules, layer_number=1).to(dtype)
    rope = RotaryEmbedding(kv_channels=h // 4, rotary_percent=1.0)
    emb = rope(tokens)

    params = list(layer.parameters())

    def step():
        for p in params:
            p.grad = None
        x = x0.detach().requires_grad_(True)
        out, _ = layer(x, attention_mask=None, rotary_pos_emb=emb)
        out.backward(torch.ones_like(out))
    return step


# ---------------------------------------------------------------------------------------------- measurement
def count(step) -> tuple[int, int, list]:
    """(kernels, ATen calls, the calls with their arguments) of one step."""
    c = Counter()
    with c:
        step()
    return c.kernels, c.calls, c.log


def warm_count(step) -> int:
    """Counted kernels of ``step`` after three warm-up steps (the first steps initialise state lazily)."""
    for _ in range(3):
        step()
    return count(step)[0]


def replay(log: list, n: int) -> tuple[float, int]:
    """Seconds to run the step's ATen calls alone, in order, from a bare Python loop (no framework Python, no
    autograd, no modules): PyTorch's dispatcher and the kernels; and how many calls could not be replayed."""
    ok = []
    with torch.no_grad():
        for f, a, k in log:
            try:
                f(*a, **k)
                ok.append((f, a, k))
            except Exception:   # noqa: BLE001 - e.g. an in-place op on a view that now aliases differently
                pass
        t0 = time.perf_counter()
        for _ in range(n):
            for f, a, k in ok:
                f(*a, **k)
    return (time.perf_counter() - t0) / n, len(log) - len(ok)


def timed(step, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t0) / n


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def workloads(tokens: int, h: int, eps: list[int], experts: int, topk: int, dtype) -> dict:
    out = {"hf_llama": hf_workload(tokens, h, False, dtype), "hf_llama_ckpt": hf_workload(tokens, h, True, dtype)}
    w = max(eps)
    out["mc_dense"] = mc_workload(tokens, h, "dense", 1, w, dtype=dtype)
    for ep in eps:
        out[f"mc_moe_ep{ep}"] = mc_workload(tokens, h, "moe", ep, w, experts, topk, dtype)
        out[f"mc_moe_rd_ep{ep}"] = mc_workload(tokens, h, "moe_rd", ep, w, experts, topk, dtype)
        out[f"mc_moe_layer_ep{ep}"] = mc_workload(tokens, h, "moe_layer", ep, w, experts, topk, dtype)
    return out


def measure(size: str, dtype, rounds: int, iters: int, eps: list[int], experts: int, topk: int) -> dict:
    tokens, h = SIZES[size]
    torch.manual_seed(0)
    res: dict[str, dict] = {}
    wl = workloads(tokens, h, eps, experts, topk, dtype)
    with mcore_cpu.eager_fusions():
        for name, step in wl.items():
            k = warm_count(step)
            _, calls, log = count(step)
            res[name] = dict(kernels=k, aten_calls=calls, t=[], r=[], log=log)
        for _ in range(rounds):
            for name, step in wl.items():
                res[name]["t"].append(timed(step, iters))
                rt, bad = replay(res[name]["log"], iters)
                res[name]["r"].append(rt)
                res[name]["replay_failed"] = bad
    base = dict(res["hf_llama"])
    for name, r in res.items():
        per = [t / r["kernels"] for t in r["t"]]
        ratio = [(t / r["kernels"]) / (tb / base["kernels"]) for t, tb in zip(r["t"], base["t"])]
        # Python / autograd between the ops: the step's time less its ATen calls replayed alone
        btw = [max(0.0, t - rt) / r["kernels"] for t, rt in zip(r["t"], r["r"])]
        btw_b = [max(0.0, t - rt) / base["kernels"] for t, rt in zip(base["t"], base["r"])]
        bratio = [a / b for a, b in zip(btw, btw_b) if b > 0]
        med_t = statistics.median(r["t"])
        r.update(min_ratio=(min(r["t"]) / r["kernels"]) / (min(base["t"]) / base["kernels"]),
                 min_per_kernel_s=min(r["t"]) / r["kernels"], step_s=med_t, per_kernel_s=statistics.median(per), per_call_s=med_t / r["aten_calls"],
                 ratio=statistics.median(ratio), ratio_p10=pct(ratio, 0.1), ratio_p90=pct(ratio, 0.9),
                 in_op_share=statistics.median([rt / t for t, rt in zip(r["t"], r["r"])]),
                 between_per_kernel_s=statistics.median(btw),
                 between_ratio=statistics.median(bratio) if bratio else float("nan"),
                 between_p10=pct(bratio, 0.1) if bratio else float("nan"),
                 between_p90=pct(bratio, 0.9) if bratio else float("nan"))
    for r in res.values():
        del r["t"], r["r"], r["log"]
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--iters", type=int, default=5, help="steps per timed sample")
    ap.add_argument("--sizes", nargs="+", default=["tiny", "small"], choices=list(SIZES))
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=list(DTYPE))
    ap.add_argument("--ep", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--topk", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = {}
    for dt in a.dtypes:
        for size in a.sizes:
            out[f"{size}/{dt}"] = measure(size, DTYPE[dt], a.rounds, a.iters, a.ep, a.experts, a.topk)
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"torch {torch.__version__}, 1 thread, {a.rounds} interleaved rounds x {a.iters} steps; "
          f"MoE: {a.experts} experts, top-{a.topk}, alltoall dispatcher, fake PG")
    for key, res in out.items():
        tokens, h = SIZES[key.split("/")[0]]
        print(f"\n[{key}: {tokens} tokens, hidden {h}]")
        print(f"{'workload':20s} {'kernels':>7s} {'aten':>5s} {'step ms':>8s} {'us/kern':>8s} {'us/aten':>8s} "
              f"{'ratio/HF':>8s} {'p10..p90':>11s} {'min/HF':>6s} {'ops':>5s} {'btw us/k':>8s} {'btw/HF':>6s} "
              f"{'p10..p90':>11s}")
        for name, r in res.items():
            print(f"{name:20s} {r['kernels']:7d} {r['aten_calls']:5d} {r['step_s'] * 1e3:8.3f} "
                  f"{r['per_kernel_s'] * 1e6:8.2f} {r['per_call_s'] * 1e6:8.2f} {r['ratio']:8.2f} "
                  f"{r['ratio_p10']:5.2f}..{r['ratio_p90']:4.2f} {r['min_ratio']:6.2f} {r['in_op_share']:5.0%} "
                  f"{r['between_per_kernel_s'] * 1e6:8.2f} {r['between_ratio']:6.2f} "
                  f"{r['between_p10']:5.2f}..{r['between_p90']:4.2f}")
    print("\nratio/HF: host seconds per counted kernel over hf_llama's, per round (median, 10-90 %); min/HF: the same "
          "from each workload's fastest sample (least disturbed by other load); ops: share of the step in its ATen calls "
          "replayed alone (dispatcher + kernels; near 100 % the sizes are too large for a host measurement); btw: the "
          "rest (Python, autograd) per kernel, over hf_llama's")
    units()
    return 0


def units() -> None:
    """What the model's ``t_launch`` is per: the fit divides the measured step by the dry-run's own kernel list
    (``cost/host_fit.py``), while ``cost/moe_host.py`` counts Megatron's router / dispatcher in traced ATen ops."""
    from primus_launch.projection.cost.host_fit import host_fit_workload

    fit = host_fit_workload().get("eager")
    if not fit:
        return
    real = hf_step_kernels()
    per_real = fit["step_s"] / real
    print(f"\nfitted benchmark (HF Llama-3.2-1B, bs1 s512, grad ckpt, fwd+bwd, {fit['step_s'] * 1e3:.1f} ms): "
          f"{fit['kernels']} kernels by the dry-run's decomposition -> t_launch {fit['t_launch'] * 1e6:.1f} us; "
          f"{real} counted ATen kernels by this counter (HFLlamaModel) -> {per_real * 1e6:.1f} us per ATen kernel "
          f"({real / fit['kernels']:.2f} ATen kernels per decomposition kernel).")
    print(f"Traced Megatron MoE ops (cost/moe_host.py) are priced at t_launch = {fit['t_launch'] / per_real:.2f}x "
          f"the HF per-ATen-kernel host time: the ratio/HF above is to be compared with that, not with 1.")
    with mcore_cpu.eager_fusions():
        hf, mc = (warm_count(w) for w in (hf_workload(8, 32, False), mc_workload(8, 32, "dense", 1, 1)))
    dec = {fw: _decomposition_per_layer(fw) for fw in ("torchtitan", "megatron")}
    print(f"Per layer, forward + backward (Llama-3.2-1B shape, no recompute): the decomposition prices "
          f"{dec['torchtitan']} kernels (eager profile) / {dec['megatron']} (megatron-te profile); counted ATen kernels: "
          f"HF {hf} ({hf / dec['torchtitan']:.2f} per decomposition kernel), megatron local-spec dense {mc} "
          f"({mc / dec['megatron']:.2f}; TE's fused modules launch fewer, not measurable on a CPU).")


def _decomposition_per_layer(framework: str) -> int:
    """Kernels the dry-run's decomposition prices for one Llama-3.2-1B layer's forward + backward (16 vs 15 layers)."""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Source, Training
    from primus_launch.projection.cost.roofline import kernels_per_step

    def k(layers: int) -> int:
        m = ModelArch(name="llama3.2-1b", num_layers=layers, hidden_size=2048, ffn_hidden_size=8192,
                      num_attention_heads=32, num_query_groups=8, head_dim=64, vocab_size=128256, seq_length=512,
                      untie_embeddings_and_output_weights=False)
        return kernels_per_step(Plan(model=m, parallel=Parallelism(),
                                     training=Training(global_batch_size=1, micro_batch_size=1),
                                     cluster=Cluster(gpu="b200", num_nodes=1, gpus_per_node=1),
                                     source=Source(framework=framework)))
    return k(16) - k(15)


if __name__ == "__main__":
    sys.exit(main())
