"""FLA's fused linear cross-entropy as Primus's Mamba models run it: when the Primus reader turns it on
(adapters/primus_fla.py), what it holds (memory/activations.py ``fla_linear_loss_bytes``) and costs
(cost/fla_loss.py).

The memory check re-states flash-linear-attention @bc3b101 ``fla/modules/fused_linear_cross_entropy.py``
``fused_linear_cross_entropy_forward`` (l. 277-410) and ``FusedLinearCrossEntropyFunction`` (l. 458-549) in torch,
line for line with the same tensors referenced at each point; its two Triton kernels (``logsumexp_fwd_kernel``,
``cross_entropy_kernel``) keep their temporaries in registers, so the re-statement computes them with the tracking
paused and only their outputs (the ``[C, ND]`` partial sums, the in-place logit gradient, the loss slice) count.
The storages alive are tracked under a dispatch mode (as tests/titan_trace.py does) on the CPU in bf16, and the
loss and gradients are checked against ``F.cross_entropy`` so the re-statement computes what FLA computes.
"""

from __future__ import annotations

import math

import pytest
import yaml

torch = pytest.importorskip("torch")
F = torch.nn.functional

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402
from torch.utils.weak import WeakIdKeyDictionary  # noqa: E402

from primus_launch.projection.memory.activations import fla_linear_chunk, fla_linear_loss_bytes  # noqa: E402

class _Live(TorchDispatchMode):
    """Every storage an op returns while tracking is on; the peak of their bytes alive."""

    def __init__(self, *inputs):
        super().__init__()
        self.live, self.peak, self.on = WeakIdKeyDictionary(), 0, True
        self.inputs = {t.untyped_storage().data_ptr() for t in inputs}   # views of them allocate nothing

    def now(self) -> int:
        return sum(k.nbytes() for k in self.live.keys())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.on:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    st = t.untyped_storage()
                    if st not in self.live and st.data_ptr() not in self.inputs:
                        self.live[st] = True
            self.peak = max(self.peak, self.now())
        return out


class _Kernel:
    """A Triton kernel's body: its temporaries live in registers, not in the allocator."""

    def __init__(self, mode: _Live):
        self.mode = mode

    def __enter__(self):
        self.mode.on = False

    def __exit__(self, *exc):
        self.mode.on = True


def _forward(x, target, weight, num_chunks, mode, ignore_index=-100):
    """fused_linear_cross_entropy_forward (fla @bc3b101 l. 277-410), reduction mean, fp32 accumulation."""
    N, H, V = *x.shape, weight.shape[0]
    NC = min(num_chunks, math.ceil(V / H))                              # l. 307
    C = 1 << (math.ceil(N / NC) - 1).bit_length()                       # l. 308
    NC = math.ceil(N / C)                                               # l. 309
    dx = torch.zeros_like(x)                                            # l. 312
    grad_dtype = torch.float32
    dw = torch.zeros_like(weight, dtype=grad_dtype)                     # l. 319
    loss = torch.zeros(N, dtype=torch.float)                            # l. 323
    total = target.ne(ignore_index).sum().item()                        # l. 325
    for ic in range(NC):                                                # l. 327
        start, end = ic * C, min((ic + 1) * C, N)
        c_x = x[start:end]
        c_logits = F.linear(c_x, weight)                                # l. 333
        if c_x.dtype != grad_dtype:
            c_x = c_x.to(dtype=grad_dtype)                              # l. 334-335
        c_target = target[start:end]
        # logsumexp_fwd (l. 69-93): z [C, ND] fp32 written by the kernel, then z.logsumexp(-1)
        z = torch.empty(c_logits.shape[0], math.ceil(V / min(1 << (V - 1).bit_length(), 64 * 1024)),
                        dtype=torch.float)
        with _Kernel(mode):
            z.copy_(torch.logsumexp(c_logits.float(), -1, keepdim=True))
        c_lse = z.logsumexp(-1)                                         # l. 339
        del z
        c_loss = loss[start:end]
        with _Kernel(mode):                                             # cross_entropy_kernel (l. 347-361): in place
            lf = c_logits.float()
            p = torch.exp(lf - c_lse[:, None]) / total
            p[torch.arange(p.shape[0]), c_target] -= 1.0 / total
            c_loss.copy_((c_lse - lf.gather(1, c_target[:, None])[:, 0]) / total)
            c_logits.copy_(p)
            del lf, p
        dx[start:end] = torch.mm(c_logits, weight)                     # l. 392
        torch.addmm(input=dw, mat1=c_logits.t().to(dtype=grad_dtype), mat2=c_x, out=dw)   # l. 395-400
    loss = loss.sum()                                                   # l. 405
    dw = dw.to(weight)                                                  # l. 406-407
    return loss, dx, dw


class _FLCE(torch.autograd.Function):
    """FusedLinearCrossEntropyFunction (l. 458-549): saves dx and dw; the backward scales them."""

    @staticmethod
    def forward(ctx, x, target, weight, num_chunks, mode):
        loss, dx, dw = _forward(x, target, weight, num_chunks, mode)
        ctx.save_for_backward(dx.detach(), dw.detach())                 # l. 537-541
        return loss

    @staticmethod
    def backward(ctx, do):
        dx, dw = ctx.saved_tensors
        return dx * do, None, dw * do, None, None


@pytest.mark.parametrize("b,s,h,v,chunks", [(2, 50, 16, 200, 4), (1, 64, 32, 96, 32), (3, 40, 8, 300, 8),
                                             (1, 16, 64, 100, 32)])  # the last: the dw cast at the end is the peak
def test_fla_linear_loss_bytes_match_the_restated_chunk_loop(b, s, h, v, chunks):
    torch.manual_seed(0)
    hidden = torch.randn(s, b, h, dtype=torch.bfloat16, requires_grad=True)   # the final norm's output [s, b, h]
    weight = torch.randn(v, h, dtype=torch.bfloat16, requires_grad=True) / 4
    weight = weight.detach().requires_grad_(True)
    labels = torch.randint(0, v, (b, s))
    saved = []

    def pack(t):
        saved.append(t.untyped_storage().nbytes())
        return t

    mode = _Live(hidden, weight, labels)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), mode:
        # Primus mamba_fused_ce_patches.py l. 99-102
        hs_2d = hidden.permute(1, 0, 2).reshape(b * s, h)
        loss = _FLCE.apply(hs_2d, labels.reshape(b * s), weight, chunks, mode)
        del hs_2d
    n = b * s
    want_saved, want_peak = fla_linear_loss_bytes(n, h, v, chunks, 2)
    x_copy = 2 * n * h if b > 1 else 0   # permute(1, 0, 2).reshape copies unless b == 1
    # the saved-tensor hook sees dx and the bf16 dw (and the reshape's nothing)
    assert sum(saved) == want_saved
    assert 0 <= mode.peak - (x_copy + want_peak) <= 16   # the token count and the scalar loss: a few bytes

    # the re-statement computes FLA's loss and gradients
    loss.backward()
    ref_h = hidden.detach().float().requires_grad_(True)
    ref_w = weight.detach().float().requires_grad_(True)
    ref = F.cross_entropy(ref_h.permute(1, 0, 2).reshape(n, h) @ ref_w.t(), labels.reshape(n))
    ref.backward()
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=2e-2)
    assert torch.allclose(hidden.grad.float(), ref_h.grad, atol=2e-3, rtol=5e-2)
    assert torch.allclose(weight.grad.float(), ref_w.grad, atol=2e-3, rtol=5e-2)


def test_chunk_geometry_is_flas():
    """l. 307-309 on the hylo 1B row (V 128,256, h 2048, 12 x 8192 tokens, 32 chunks asked): 24 chunks of 4096."""
    assert fla_linear_chunk(98304, 2048, 128256, 32) == (4096, 24)
    assert fla_linear_chunk(100, 16, 200, 4) == (32, 4)
    assert fla_linear_chunk(10, 64, 100, 32) == (8, 2)     # ceil(V / h) = 2 caps the chunks asked


# ------------------------------------------------------------------ the Primus reader
_BASE = {"framework": "megatron", "overrides": {
    "model_type": "mamba", "num_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "ffn_hidden_size": 1024,
    "seq_length": 1024, "max_position_embeddings": 1024, "micro_batch_size": 2, "global_batch_size": 16,
    "is_hybrid_model": True, "hybrid_attention_ratio": 0.25, "mamba_state_dim": 64, "mamba_head_dim": 64,
    "mamba_num_groups": 8, "tokenizer_type": "HuggingFaceTokenizer", "tokenizer_model": "meta-llama/Llama-3.2-1B",
    "bf16": True, "fused_ce_mode": None, "fused_ce_chunks": None, "use_fla_fused_swiglu": None}}


def _plan(over=None, launch_env=None, env_block=None, model_type="mamba"):
    from primus_launch.adapters.primus_yaml import plan_from_text
    from primus_launch.plan import Cluster

    cfg = {**_BASE, "overrides": {**_BASE["overrides"], "model_type": model_type, **(over or {})}}
    if model_type != "mamba":
        cfg["overrides"].pop("is_hybrid_model")
    doc = {"modules": {"pre_trainer": cfg}}
    if env_block:
        doc["env"] = env_block
    return plan_from_text(yaml.safe_dump(doc, sort_keys=False), "x.yaml", Cluster(gpu="mi300x", num_nodes=1,
                          gpus_per_node=8), env={}, launch_env=launch_env)


def _loss(p):
    return p.training.loss_impl, p.training.loss_chunks


def test_committed_null_knobs_run_megatrons_loss():
    """mamba_base.yaml's null knobs and no variable: the patch never resolves a mode (fla_runtime_patches.py
    l. 104-112, 131) and MambaModel keeps fused_ce_mode None -> the stock loss (MEMORY.md round 30)."""
    p = _plan()
    assert _loss(p) == ("framework", 1)
    assert not any(u.flag.startswith(("fused_ce", "PRIMUS_")) for u in p.source.unmodelled)


@pytest.mark.parametrize("over,env,block,want", [
    ({}, {"PRIMUS_FUSED_CE": "1"}, None, ("fla_linear", 32)),            # launch_hybrid_faflag.sh
    ({}, {"PRIMUS_FLA_SWIGLU": "1"}, None, ("fla_linear", 32)),          # any knob: the defaults apply
    ({"use_fla_fused_swiglu": True}, {}, None, ("fla_linear", 32)),
    ({"fused_ce_mode": 1, "fused_ce_chunks": 8}, {}, None, ("fla_linear", 8)),
    ({"fused_ce_mode": 1}, {"PRIMUS_FUSED_CE": "0"}, None, ("framework", 1)),      # the variable wins
    ({}, {"PRIMUS_FUSED_CE": "1", "PRIMUS_FUSED_CE_CHUNKS": "16"}, None, ("fla_linear", 16)),
    ({}, {"PRIMUS_FUSED_CE": "1"}, {"PRIMUS_FUSED_CE": 0}, ("framework", 1)),      # env: block over the launch
    ({}, {}, {"PRIMUS_FUSED_CE": 2}, ("fla", 1)),
    ({"fused_ce_mode": 0}, {}, None, ("framework", 1)),
])
def test_primus_resolves_the_knobs(over, env, block, want):
    assert _loss(_plan(over, env, block)) == want


def test_the_kernel_variables_are_reported_and_the_gpt_model_is_not_patched():
    p = _plan({}, {"PRIMUS_FUSED_CE": "1", "PRIMUS_FLA_SWIGLU": "1", "PRIMUS_FLA_NORM": "0"})
    assert [u.flag for u in p.source.unmodelled if u.flag.startswith("PRIMUS_")] == ["PRIMUS_FLA_SWIGLU"]
    g = _plan({"fused_ce_mode": 1}, model_type="gpt")
    assert _loss(g) == ("framework", 1)
    assert any("MambaModel only" in n for n in g.source.notes)


def test_a_bad_variable_is_one_line():
    from primus_launch.plan import PlanError

    with pytest.raises(PlanError, match="PRIMUS_FUSED_CE"):
        _plan({}, {"PRIMUS_FUSED_CE": "yes"})


def test_projection_drops_the_softmax_and_keeps_the_flops():
    """The hybrid plan with FLA: no fp32 softmax of V x tokens in the last stage's bytes, and the head's op list
    carries the output layer's 6 n V h FLOPs, all in the forward."""
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.memory.estimate import estimate_memory

    native, fla = _plan(), _plan({}, {"PRIMUS_FUSED_CE": "1"})
    m = native.model
    v, n, h = m.padded_vocab_size(1), 2 * 1024, m.hidden_size
    drop = estimate_memory(native).peak_bytes_per_gpu - estimate_memory(fla).peak_bytes_per_gpu
    assert drop > 4.0 * n * v   # at least the fp32 softmax
    ops = layer_op_times(fla)["head"]
    gemms = [o for o in ops if o[4][0] == "gemm"]
    assert sum(o[4][2] for o in gemms) == pytest.approx(6.0 * n * v * h)
    assert all(o[2] == 0.0 and o[3] == 0.0 for o in gemms)


def test_a_launch_script_exports_it_and_this_process_does_not(tmp_path, monkeypatch):
    """``tools/hybrid/launch_hybrid_faflag.sh``: ``export PRIMUS_FUSED_CE=1`` then ``EXP=... bash
    examples/run_pretrain.sh``; the same experiment read alone with the variable set in primus-launch's own
    environment stays Megatron's loss (the recipe, not the machine, states the run)."""
    from primus_launch.adapters import load_recipe
    from tests.test_adapter_primus import _tree

    root = _tree(tmp_path)
    exp = root / "examples" / "megatron" / "configs" / "MI300X" / "hylo_tiny.yaml"
    exp.parent.mkdir(parents=True, exist_ok=True)
    exp.write_text(yaml.safe_dump({"modules": {"pre_trainer": _BASE}}, sort_keys=False))
    run = root / "launch.sh"
    run.write_text("#!/bin/bash\nexport PRIMUS_FUSED_CE=1\nexport PRIMUS_FLA_SWIGLU=1\n"
                   f"EXP=examples/megatron/configs/MI300X/hylo_tiny.yaml bash examples/run_pretrain.sh\n")
    assert _loss(load_recipe(run)) == ("fla_linear", 32)
    monkeypatch.setenv("PRIMUS_FUSED_CE", "1")
    assert _loss(load_recipe(exp)) == ("framework", 1)


def test_quoted_mode_in_the_yaml_is_refused():
    """review12: ``fused_ce_mode: "1"`` (quoted) was read as no fused loss; Primus compares the knob with the numbers
    1 / 2 (``mamba_fused_ce_patches.py``), so a quoted mode is refused in one line rather than guessed."""
    import pytest

    from primus_launch.adapters.primus_fla import fla_loss
    from primus_launch.plan import PlanError

    with pytest.raises(PlanError) as e:
        fla_loss({"fused_ce_mode": "1"}, {}, True)
    assert e.value.field == "fused_ce_mode" and "unquoted" in str(e.value)
    assert fla_loss({"fused_ce_mode": 1}, {}, True)[0] == "fla_linear"
