"""TorchTitan v0.2's eager MoE glue (cost/titan_moe.py) against torchtitan v0.2.1's own MoE module, traced.

The module is torchtitan v0.2.1 ``torchtitan/models/moe/{moe,utils,kernels}.py`` read from the local git mirror
of pytorch/torchtitan (``/work/.mirror/pytorch+torchtitan``, or ``$TORCHTITAN_MIRROR``), run on the CPU in
bf16 with its router, reorderer and shared expert replaced by fixed outputs (they are compiled in v0.2 and priced
as their own rows) and its compiled ``_run_experts_grouped_mm`` by a one-copy stand-in; every ATen kernel of the
forward and of the autograd backward is recorded under a dispatch mode with the bytes of its [*, h] operands.
The priced glue (forward and backward bytes, launches) must match the trace.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from primus_launch.projection.cost import titan_moe

MIRROR = Path(os.environ.get("TORCHTITAN_MIRROR", "/work/.mirror/pytorch+torchtitan/repo"))
TAG = "v0.2.1"


def _source(path: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(MIRROR), "show", f"{TAG}:{path}"], check=True, capture_output=True,
                              text=True, timeout=30).stdout
    except Exception:   # noqa: BLE001 - no mirror, no git, no tag
        return None


@pytest.fixture(scope="module")
def tt_moe(tmp_path_factory):
    """torchtitan v0.2.1's ``models/moe`` package, imported from the mirror under a private name."""
    torch = pytest.importorskip("torch")
    srcs = {n: _source(f"torchtitan/models/moe/{n}.py") for n in ("moe", "utils", "kernels")}
    if any(v is None for v in srcs.values()):
        pytest.skip(f"torchtitan {TAG} sources not available from {MIRROR}")
    pytest.importorskip("triton")
    import torchtitan.tools.utils as tu

    d = tmp_path_factory.mktemp("tt021") / "tt021_moe"
    d.mkdir()
    for n, text in srcs.items():
        (d / f"{n}.py").write_text(text)
    (d / "__init__.py").write_text("")
    added = not hasattr(tu, "_round_up")
    if added:   # v0.2.1's helper (torchtitan/tools/utils.py), gone from 0.3
        tu._round_up = lambda x, y: ((x + y - 1) // y) * y
    sys.path.insert(0, str(d.parent))
    try:
        import importlib

        utils = importlib.import_module("tt021_moe.utils")
        moe = importlib.import_module("tt021_moe.moe")
        # the Triton permute-index kernel has a CPU twin in the same file (use_cpu=True)
        gen = utils.generate_permute_indices
        utils.generate_permute_indices = lambda *a, **k: gen(*a, **{**k, "use_cpu": True})
        yield torch, moe
    finally:
        if str(d.parent) in sys.path:
            sys.path.remove(str(d.parent))
        for n in [m for m in sys.modules if m.startswith("tt021_moe")]:
            del sys.modules[n]
        if added:
            del tu._round_up


def _trace(torch, moe, score_before: bool, top_k: int, T: int = 256, h: int = 64, E: int = 4):
    """(forward bytes, backward bytes, forward kernels, backward kernels) of the glue, [*, h] operands only."""
    from aten_row_bytes import NO_BYTES, RowBytes

    torch.manual_seed(0)
    args = moe.MoEArgs(num_experts=E, num_shared_experts=1, top_k=top_k, score_before_experts=score_before,
                       load_balance_coeff=None)
    layer = moe.MoE(args, dim=h, hidden_dim=2 * h).to(torch.bfloat16)
    ids = torch.randint(0, E, (T, top_k))
    ids = torch.stack([torch.randperm(E)[:top_k] for _ in range(T)]) if top_k > 1 else ids
    scores = torch.rand(T, top_k, dtype=torch.float32, requires_grad=True)
    counts = torch.bincount(ids.view(-1), minlength=E)   # the router's histc, as integers (CPU twin)
    order = torch.argsort(ids.view(-1), stable=True)
    shared = torch.randn(T, h, dtype=torch.bfloat16)   # its gradient goes to the compiled shared expert

    layer.router.forward = lambda *a: (scores, ids, counts)
    layer.reorderer.forward = lambda *a: (scores.view(-1)[order], order, counts)
    layer.shared_experts.forward = lambda *a: shared
    moe._run_experts_grouped_mm = lambda w1, w2, w3, x, n: x.clone()   # compiled in v0.2: not glue
    x = torch.randn(1, T, h, dtype=torch.bfloat16, requires_grad=True)
    # [*, h]-sized operands (routed or token rows); indices and scores are not counted; allocations write only
    # what they initialise (zeros), nothing for empty; an in-place op's output is its first input
    rec_mode = RowBytes(T * h // 8, NO_BYTES + ("aten::squeeze", "aten::unsqueeze", "aten::permute"))
    rec = rec_mode.rec

    with rec_mode:
        y = layer(x)
        rec_mode.phase = "bwd"
        y.backward(torch.ones_like(y))
    # the stand-in's clone (read + write 2 B per routed element) is the experts', not the glue's
    fwd = [r for r in rec["fwd"] if r[0] != "aten::clone"]
    bwd = [r for r in rec["bwd"] if r[0] not in ("aten::ones_like", "aten::fill_")]
    return (sum(b for _, b in fwd), sum(b for _, b in bwd), len(fwd), len(bwd), T * top_k, T, h)


@pytest.mark.parametrize("score_before,top_k", [(True, 1), (False, 4)])
def test_priced_glue_matches_torchtitan_v021_trace(tt_moe, score_before, top_k):
    torch, moe = tt_moe
    fb, bb, nf, nb, R, T, h = _trace(torch, moe, score_before, top_k)
    pf, pb = titan_moe.glue_bytes(score_before, R, T, h)
    # the padding rows of _permute (each expert's group rounded up to TOKEN_GROUP_ALIGN_SIZE_M = 8) and the
    # permute's appended zero row are the difference: a few percent of the routed rows here
    assert pf == pytest.approx(fb, rel=0.04)
    assert pb == pytest.approx(bb, rel=0.04)
    assert pf <= fb and pb <= bb


UPSTREAM = Path(__file__).resolve().parents[1].parent / "shared" / "upstream-recipes" / "torchtitan-v0.2.2"
SCOUT = """[model]
name = "llama4"
flavor = "17bx16e"
[training]
seq_len = 8192
local_batch_size = 1
[parallelism]
data_parallel_shard_degree = 16
expert_parallel_degree = 16
[compile]
enable = true
"""


def test_v02_reader_sets_the_eager_glue_and_llama4_scores_before_experts():
    """A v0.2 job TOML of an MoE model runs torchtitan v0.2's MoE (glue eager, compile or not); Llama 4's
    MoEArgs keep ``score_before_experts=True`` (torchtitan v0.2.1 ``models/moe/moe.py`` default; the
    deepseek_v3 / qwen3 flavors set False); a 0.3 launch line compiles the whole block; a dense job has none."""
    from primus_launch.adapters.torchtitan import plan_from_text
    from primus_launch.plan import Cluster

    cl = Cluster(gpu="b200", num_nodes=2, gpus_per_node=8)
    p = plan_from_text(SCOUT, cl)
    assert p.training.moe_glue_eager and p.model.moe_score_before_experts and p.training.compile
    dense = plan_from_text(SCOUT.replace('"llama4"', '"llama3"').replace('"17bx16e"', '"8B"')
                           .replace("expert_parallel_degree = 16\n", ""), cl)
    assert not dense.training.moe_glue_eager
    from primus_launch.adapters.torchtitan_argv import plan_from_launch

    p3 = plan_from_launch(["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "-m", "torchtitan.train",
                           "--module", "qwen3", "--config", "qwen3_30b_a3b", "--parallelism.expert_parallel_degree",
                           "8", "--training.disable_cuda_graphs", "--compile.enable"], cl)
    assert p3.model.is_moe and not p3.training.moe_glue_eager and not p3.model.moe_score_before_experts


def test_roofline_prices_the_counted_glue():
    """The MoE layer's glue rows are the counted bytes at streaming speed: their forward and backward times
    equal :func:`titan_moe.glue_bytes` through the roofline's element-wise curve, and they replace the generic
    permute rows only for the v0.2 glue."""
    from primus_launch.adapters.torchtitan import plan_from_text
    from primus_launch.plan import Cluster
    from primus_launch.projection.cost.compute import elementwise_time
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.cost.calibration import framework_eff

    p = plan_from_text(SCOUT, Cluster(gpu="b200", num_nodes=2, gpus_per_node=8))
    rows = [r for r in layer_op_times(p)["moe"] if r[0].endswith("(eager)")]
    assert len(rows) == 7 and not [r for r in layer_op_times(p)["moe"] if r[0].startswith("permute")]
    m = p.model
    T = p.training.micro_batch_size * m.seq_length
    slow = 1.0 / framework_eff("torchtitan")
    h = m.hidden_size
    for r, o in zip(rows, titan_moe.glue_ops(True, 1)):   # Llama 4: top-1, one routed row per token
        f, b = (o.fwd_routed + o.fwd_token) * T * h, (o.bwd_routed + o.bwd_token) * T * h
        assert r[1] == pytest.approx((elementwise_time(f, "b200") + (o.kernels[0] - 1) * 2e-6) * slow, rel=1e-6)
        assert r[2] == pytest.approx(elementwise_time(b, "b200") * slow if b else 0.0, rel=1e-6)
    assert sum(o.fwd_routed + o.fwd_token for o in titan_moe.glue_ops(True, 1)) == 52.0
    q = p.model_copy(update={"training": p.training.model_copy(update={"moe_glue_eager": False})})
    assert not [r for r in layer_op_times(q)["moe"] if r[0].endswith("(eager)")]


def test_k_groups_rearrange_reproduces_torchaos_kernel_breakdown():
    """One ``triton_mx_block_rearrange_2d_K_groups`` call at torchao's kernel-breakdown shapes (DeepSeek-V3: 131072
    tokens over 8 groups = 128 serial iterations of 128 tokens) against its two records, and the loop's length
    scaling: a group twice as long takes twice as long, a partial block one more iteration."""
    from primus_launch.projection.cost import evidence as ev

    one = titan_moe.k_groups_rearrange_seconds(131072 // 8) / titan_moe.K_GROUPS_PER_GEMM
    for rid in ("ao-b200-moe-wgrad-triton_mx_block_rearrange_2d_K_groups-(2048,4096)",
                "ao-b200-moe-wgrad-triton_mx_block_rearrange_2d_K_groups-(7168,4096)"):
        rec = ev.record(rid)
        assert rec is not None and rec["unit"] == "us"
        assert one == pytest.approx(rec["value"] * 1e-6, rel=0.03)
    assert titan_moe.k_groups_rearrange_seconds(32768) == pytest.approx(2 * titan_moe.k_groups_rearrange_seconds(16384))
    assert titan_moe.k_groups_rearrange_seconds(129) == 2 * titan_moe.k_groups_rearrange_seconds(128)


def test_roofline_charges_the_rearranges_to_torchtitan_mxfp8_experts_only():
    """TorchTitan's experts run three grouped GEMMs (w1, w3, w2), each with two K-groups rearranges in its weight
    gradient, over the tokens of one local expert; BF16 experts have none."""
    from primus_launch.adapters.torchtitan import plan_from_text
    from primus_launch.plan import Cluster
    from primus_launch.projection.cost.calibration import framework_eff
    from primus_launch.projection.cost.roofline import layer_op_times

    cl = Cluster(gpu="b200", num_nodes=2, gpus_per_node=8)
    mx = SCOUT.replace('flavor = "17bx16e"\n', 'flavor = "17bx16e"\nconverters = ["quantize.linear.mx", '
                       '"quantize.grouped_mm.mx"]\n') + '[quantize.grouped_mm.mx]\nfqns = ["experts"]\n'
    p = plan_from_text(mx, cl)
    assert p.training.fp8_recipe == "mxfp8"
    rows = [r for r in layer_op_times(p)["moe"] if "rearrange" in r[0]]
    assert len(rows) == 1 and rows[0][1] == rows[0][2] == 0.0
    tokens = p.model.seq_length   # local batch 1, top-1, 16 experts over EP 16: one expert of all routed tokens
    want = titan_moe.k_groups_rearrange_seconds(tokens, 3) / framework_eff("torchtitan")
    assert rows[0][3] == pytest.approx(want, rel=1e-9)
    assert not [r for r in layer_op_times(plan_from_text(SCOUT, cl))["moe"] if "rearrange" in r[0]]
