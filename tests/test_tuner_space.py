"""The tuner's space of production knobs: exact against a brute force over the rules, every knob
rendered natively and read back identically, numerics-changing knobs only when allowed.

Truth: :mod:`primus_launch.tuner.rules` (Megatron-LM core_r0.16.0 ``validate_args`` /
``TransformerConfig`` assertions, cited there), the plan's own legality rules, and the readers and
writers of each recipe format (the rendered file is read back by ``load_recipe``).
"""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pytest

from tuner_helpers import small_dense_plan, small_moe_plan

from primus_launch.adapters import load_recipe, write_recipe
from primus_launch.plan import legality_problems
from primus_launch.tuner import rules
from primus_launch.tuner.planner import subspace
from primus_launch.tuner.axis_values import layout_string
from primus_launch.tuner.space import (AXES, N_STRUCT, Knobs, Space, SpaceConfig, apply_knobs, knobs_of, problems_of,
                                       validated)

ROOT = Path(__file__).resolve().parents[1]
FLAGS = AXES[N_STRUCT:]
ALL = frozenset(rules.ALLOWABLE)


def _domains(sp: Space) -> list[list]:
    """Per execution-flag axis, every value the space offers anywhere."""
    return [list(dict.fromkeys(f[j] for t in sp.tables for f in t)) for j in range(len(FLAGS))]


NUMERICS = ("optimizer_offload", "precision", "fp8_recipe", "fp8_param_gather", "moments")


@pytest.mark.parametrize("case", ["megatron-h100", "megatron-mi300x", "torchtitan-h100-allow"])
def test_flag_tables_equal_brute_force_over_the_rules(case):
    """For a structural candidate of each context, the flag tuples the space lists are exactly the
    combinations of the offered values that break no rule (plan legality, rules.knob_problems,
    rules.gpu_problems, torchtitan_problems)."""
    fw, gpu, *allow = case.split("-")
    plan = small_moe_plan(gpu) if fw == "megatron" else small_dense_plan("torchtitan")
    sp = Space(plan, SpaceConfig(allow=ALL if allow else frozenset()))
    dom = _domains(sp)
    assert len(sp) == sum(len(sp.tables[c]) for c in sp.ctx) > 1000
    seen_ctx: set[int] = set()
    for head, c in zip(sp.structs, sp.ctx):
        if c in seen_ctx:
            continue
        seen_ctx.add(c)
        fixed = {(f[0], f[1]) for f in sp.tables[c]}  # grad-reduce / param-gather overlap follow the sharding
        want = {f for f in product(*dom) if (f[0], f[1]) in fixed and not problems_of(plan, Knobs._make(head + f))}
        assert set(sp.tables[c]) == want, (head, sorted(want ^ set(sp.tables[c]))[:3])
        if len(seen_ctx) >= (8 if case == "megatron-h100" else 4):
            break


def test_numerics_axes_equal_brute_force_when_allowed():
    """With every numerics family allowed: for the other flags as listed, the (optimizer offload,
    precision, FP8 recipe, FP8 param gather, moments) combinations listed are exactly the legal ones."""
    plan = small_moe_plan("h100-sxm")
    sp = Space(plan, SpaceConfig(allow=ALL))
    dom = _domains(sp)
    cols = [FLAGS.index(x) for x in NUMERICS]
    seen_ctx: set[int] = set()
    for head, c in zip(sp.structs, sp.ctx):
        if c in seen_ctx:
            continue
        seen_ctx.add(c)
        table = sp.tables[c]
        rest = list(dict.fromkeys(tuple(v for j, v in enumerate(f) if j not in cols) for f in table))
        for o in rest[:: max(1, len(rest) // 6)]:
            got = {tuple(f[j] for j in cols) for f in table if tuple(v for j, v in enumerate(f) if j not in cols) == o}
            want = set()
            for x in product(*(dom[j] for j in cols)):
                f = list(o)
                for j, v in sorted(zip(cols, x)):
                    f.insert(j, v)
                if not problems_of(plan, Knobs._make(head + tuple(f))):
                    want.add(x)
            assert got == want, (head, o, sorted(got ^ want)[:3])
        if len(seen_ctx) >= 6:
            break


def test_structural_candidates_are_legal_and_complete_on_splits():
    """Every candidate breaks no rule; the even / account-for splits are exactly the legal ones."""
    plan = small_moe_plan("h100-sxm")
    sp = Space(plan, SpaceConfig(max_mbs=2, max_cp=2))
    for i in range(0, len(sp), max(1, len(sp) // 1500)):
        assert problems_of(plan, sp[i]) == [], sp[i]
    heads = set(sp.structs)
    own = knobs_of(plan)
    W, L = plan.world_size, plan.model.num_layers
    got = {(h[1], h[2], h[17], h[18]) for h in heads if h[15] is None and h[16] is None and h[19] is None
           and h[0] == own.tp and h[3] == 1 and (h[4], h[5]) == (own.ep, own.etp)}
    want = set()
    for pp, vpp, e, lo in product([1, 2, 4, 8, 16], range(1, 9), (False, True), (False, True)):
        if pp == 1 and (vpp > 1 or e or lo):
            continue
        k = own._replace(pp=pp, vpp=vpp, acc_embedding=e, acc_loss=lo, first_stage_layers=None,
                         last_stage_layers=None, layout=None, mbs=1,
                         schedule="interleaved_1f1b" if vpp > 1 else "1f1b")
        if W % (own.tp * pp) == 0 and not legality_problems(apply_knobs(plan, k)):
            want.add((pp, vpp, e, lo))
    assert got == want


def test_layout_string_is_balanced_and_valid():
    from primus_launch.plan.layout import parse_layout

    s = layout_string(61, 1, 8, 4)  # DeepSeek-V3 on 32 virtual stages
    stages = parse_layout(s)
    assert len(stages) == 32 and "".join(stages).count("t") == 61 and stages[-1].endswith("L")
    assert max(len(x.replace("E", "")) for x in stages) - min(len(x.replace("E", "")) for x in stages) <= 1
    plan = load_recipe(ROOT / "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml")
    sp = Space(plan, SpaceConfig(max_mbs=1, max_cp=1))
    lays = {(h[1], h[2], h[19]) for h in sp.structs if h[19] is not None}
    assert (8, 4, plan.parallel.pipeline_layout) in lays  # the recipe's own
    assert len({pp for pp, _, _ in lays}) > 3  # layout strings at other PP degrees


def test_numerics_knobs_only_when_allowed():
    plan = small_moe_plan("h100-sxm")
    plain = Space(plan, SpaceConfig())
    assert {f[FLAGS.index("precision")] for t in plain.tables for f in t} == {"bf16"}
    assert {f[FLAGS.index("moments")] for t in plain.tables for f in t} == {("fp32", "fp32")}
    fp8 = Space(plan, SpaceConfig(allow=frozenset({"fp8"})))
    recs = {(f[FLAGS.index("precision")], f[FLAGS.index("fp8_recipe")]) for t in fp8.tables for f in t}
    assert recs == {("bf16", None), ("fp8", None), ("fp8", "tensorwise"), ("fp8", "blockwise")}  # Hopper
    assert {f[FLAGS.index("moments")] for t in fp8.tables for f in t} == {("fp32", "fp32")}
    amd = Space(small_moe_plan("mi300x"), SpaceConfig(allow=ALL))
    assert {f[FLAGS.index("fp8_recipe")] for t in amd.tables for f in t} == {None, "tensorwise"}
    assert {f[FLAGS.index("cuda_graph_impl")] for t in amd.tables for f in t} == {"none"}  # NVIDIA-only knobs
    assert {f[FLAGS.index("dispatcher")] for t in amd.tables for f in t} == {"alltoall", "allgather"}


# ----- every knob rendered natively and read back identically -----

FAMILIES = {  # knob family -> Knobs fields
    "layout": ("layout",), "account_for": ("acc_embedding", "acc_loss"),
    "first_last": ("first_stage_layers", "last_stage_layers"), "rc_modules": ("rc_modules",),
    "megatron_fsdp": ("dp_sharding",), "cuda_graph": ("cuda_graph_impl", "cuda_graph_scope"),
    "dispatcher": ("dispatcher",), "ep_overlap": ("ep_overlap",), "delay_wgrad": ("delay_wgrad",),
    "offload": ("offload_layers", "offload_modules"), "optimizer_offload": ("optimizer_offload",),
    "tp_comm_overlap": ("tp_comm_overlap",), "fp8": ("precision", "fp8_recipe", "fp8_param_gather"),
    "moments": ("moments",), "compile": ("compile",),
}


def _variants(sp: Space, own: Knobs, fields: tuple[str, ...], pool: list[Knobs]) -> list[Knobs]:
    """For each value of ``fields`` the space offers around the recipe (every structure with the
    flags nearest the recipe's, every flag combination of the recipe's structure), one candidate
    with it, fewest other axes changed."""
    cols = [AXES.index(f) for f in fields]
    mine = tuple(own[c] for c in cols)
    best: dict[tuple, tuple[int, Knobs]] = {}
    for k in pool:
        v = tuple(k[c] for c in cols)
        if v == mine:
            continue
        d = sum(a != b for a, b in zip(k, own))
        if v not in best or d < best[v][0]:
            best[v] = (d, k)
    if not best:  # only away from the recipe's structure (e.g. EP overlap needs another recompute)
        for s, head in enumerate(sp.structs):
            for f in sp.flag_table(s):
                k = Knobs._make(head + f)
                v = tuple(k[c] for c in cols)
                if v != mine and v not in best:
                    best[v] = (0, k)
            if best:
                break
    return [k for _, k in sorted(best.values(), key=lambda x: x[0])]


@pytest.mark.parametrize("recipe,families", [
    ("recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml",
     ["layout", "account_for", "rc_modules", "cuda_graph", "dispatcher", "ep_overlap", "delay_wgrad",
      "offload", "optimizer_offload", "tp_comm_overlap", "fp8", "moments"]),
    ("recipes/megatron/deepseek_v3_671b.sh", ["first_last", "account_for", "dispatcher", "ep_overlap", "cuda_graph",
                                              "offload", "fp8", "moments"]),
    # Megatron-FSDP (its --no-gradient-accumulation-fusion modelled: training.gradient_accumulation_fusion)
    ("recipes/megatron/mixtral_8x22b_mi355x_32gpu.sh", ["megatron_fsdp"]),
    ("recipes/megatron/llama3.1_8b.yaml", ["cuda_graph", "rc_modules", "account_for", "offload", "fp8"]),
    ("recipes/torchtitan/llama3.1_70b.toml", ["fp8", "compile", "tp_comm_overlap"]),
    ("recipes/torchtitan/llama3_8b_launch.sh", ["compile", "tp_comm_overlap"]),
], ids=["megatron-yaml-moe", "megatron-bash-moe", "megatron-bash-fsdp", "megatron-yaml-dense", "torchtitan-toml", "torchtitan-0.3-launch"])
def test_each_knob_renders_natively_and_reads_back(tmp_path, recipe, families):
    path = ROOT / recipe
    plan = load_recipe(path)
    own = knobs_of(plan)
    sp = Space(plan, SpaceConfig(allow=ALL, max_mbs=1, max_cp=1, max_vpp=4))
    can = rules.knobs_for(plan)
    pool = subspace(sp, own)
    n = 0
    for fam in families:
        assert fam in can or fam in ("delay_wgrad",), fam
        ks = _variants(sp, own, FAMILIES[fam], pool)
        assert ks, f"{fam}: no value other than the recipe's in the space"
        for k in ks[:4]:
            tuned = validated(apply_knobs(plan, k))
            out = write_recipe(tuned, tmp_path / f"t{n}{path.suffix}")
            back = load_recipe(out)
            for f in FAMILIES[fam]:
                assert getattr(knobs_of(back), f) == getattr(k, f), (fam, f, k)
            if plan.framework == "megatron":  # the whole plan reads back (expert TP None = tp)
                assert back.parallel.expert_tp == tuned.parallel.expert_tp
                assert back.parallel.model_dump(exclude={"etp"}) == tuned.parallel.model_dump(exclude={"etp"})
                assert back.training.model_dump() == tuned.training.model_dump(), fam
            n += 1
    assert n >= len(families)


def test_titan_space_has_only_what_its_adapter_expresses():
    plan = load_recipe(ROOT / "recipes/torchtitan/deepseek_v3_671b.toml")
    sp = Space(plan, SpaceConfig(allow=ALL))
    flags = {f for t in sp.tables for f in t}
    for name in ("cuda_graph_impl", "dispatcher", "ep_overlap", "offload_modules", "optimizer_offload", "moments"):
        assert {f[FLAGS.index(name)] for f in flags} == {knobs_of(plan)[AXES.index(name)]}, name
    assert {f[FLAGS.index("precision")] for f in flags} == {"bf16", "fp8"}
    assert {f[FLAGS.index("fp8_recipe")] for f in flags} == {None, "tensorwise", "rowwise"}  # H100: torchao float8
    assert {f[FLAGS.index("compile")] for f in flags} == {False, True}
    assert all(f[FLAGS.index("compile")] for f in flags if f[FLAGS.index("tp_comm_overlap")])  # async TP compiles
    assert {h[8] for h in sp.structs} == {"full"}


def test_recipe_microbatch_group_kept_only_where_megatron_accepts_it():
    """A recipe's --microbatch-group-size-per-virtual-pipeline-stage survives a candidate with the same
    pipeline shape and a batch Megatron accepts with it; any other candidate runs Megatron's default."""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training

    plan = Plan(model=ModelArch(name="t", num_layers=12, hidden_size=512, ffn_hidden_size=2048,
                                num_attention_heads=8, vocab_size=1024, seq_length=1024),
                parallel=Parallelism(pp=4, vpp=3, microbatch_group=5),
                training=Training(micro_batch_size=4, global_batch_size=40, pipeline_schedule="interleaved_1f1b"),
                cluster=Cluster(num_nodes=1, gpus_per_node=8))
    k = knobs_of(plan)
    assert apply_knobs(plan, k).parallel.microbatch_group == 5
    assert legality_problems(apply_knobs(plan, k)) == []
    assert apply_knobs(plan, k._replace(pp=2, vpp=6)).parallel.microbatch_group is None  # another shape
    assert apply_knobs(plan, k._replace(mbs=2)).parallel.microbatch_group == 5  # 10 micro-batches: 2 groups
    assert apply_knobs(plan, k._replace(mbs=1)).parallel.microbatch_group == 5  # 20: 4 groups


def test_divisors_and_micro_batch_values_at_a_huge_global_batch():
    """``divisors`` equals the definition; the micro-batch axis of a global batch of 10^9 (found by
    ``scripts/bad_input_campaign.py --seed 17``: enumerating every divisor by trial took minutes) holds
    the divisors up to ``max_mbs`` and the plan's own micro-batch, found without scanning 10^9 numbers."""
    import random

    from primus_launch.tuner import axis_values as sp_mod

    rng = random.Random(4)
    for n in list(range(1, 200)) + [rng.randrange(1, 10**6) for _ in range(50)] + [2**20, 3**12]:
        assert sp_mod.divisors(n) == [d for d in range(1, n + 1) if n % d == 0], n
    plan = small_dense_plan().with_changes(training={"global_batch_size": 10**9})
    cfg = SpaceConfig()
    vals = sp_mod.mbs_values(plan, 8, cfg, 1)
    per = 10**9 // 8
    assert vals == [d for d in range(1, cfg.max_mbs + 1) if per % d == 0]
    assert sp_mod.mbs_values(plan, 8, cfg, 5**9) == vals + [5**9]   # the plan's own, above max_mbs


def _uneven_splits_by_every_count(L: int, pp: int, vpp: int, limit: int = 2) -> list[tuple[int, int]]:
    """``uneven_splits`` by its definition: every first / last stage count tried (O(L^2): 10,000 layers
    took 98 s of a tune)."""
    if pp <= 2:
        return []
    even = L % (pp * vpp) == 0
    out = []
    for first in range(vpp, L + 1, vpp):
        for last in range(vpp, L - first + 1, vpp):
            rest = L - first - last
            if rest <= 0 or rest % (pp - 2) or (rest // (pp - 2)) % vpp:
                continue
            each = rest // (pp - 2)
            if even:
                if not (first <= each and last <= each and (first, last) != (each, each)):
                    continue
                if first < each - 2 * vpp or last < each - 2 * vpp:
                    continue
                key = (each - first + each - last, abs(first - last), -first)
            else:
                key = (max(each, first, last) - min(each, first, last), abs(last - first), -first)
            out.append((key, (first, last)))
    out.sort()
    return ([out[0][1]] if out else []) if not even else [fl for _, fl in out[:limit]]


def test_uneven_splits_near_the_even_share_equal_every_count():
    """The window around L / pp the splits are searched in loses none: the same splits as trying every
    count (10,000 layers: 50M pairs per pipeline shape, 98 s of a tune)."""
    from primus_launch.tuner.axis_values import uneven_splits

    for pp, vpp in product((3, 4, 5, 7, 8, 16), (1, 2, 3)):
        for L in list(range(1, 70)) + [61, 94, 126, 193, 256]:
            assert uneven_splits(L, pp, vpp) == _uneven_splits_by_every_count(L, pp, vpp), (L, pp, vpp)


def _dev_optimizer_config(monkeypatch):
    """Megatron-LM dev's ``OptimizerConfig`` (d48bd6be0a, the MoE recipes' version; the installed megatron-core
    0.16.1 has no chunked offload), read from the mirror and imported as a module of the installed
    ``megatron.core.optimizer`` (its one import, ``..utils.is_te_min_version``, resolves there); Transformer
    Engine's FusedAdam, whose signature ``__post_init__`` checks for the precision-aware optimizer, is stubbed."""
    import importlib.util
    import os
    import subprocess
    import sys

    from te_stub import stub_te_fused_adam

    mlm = os.environ.get("MEGATRON_LM_MIRROR", "/work/.mirror/NVIDIA+Megatron-LM/repo")
    src = subprocess.run(["git", "-C", mlm, "show", "d48bd6be0a:megatron/core/optimizer/optimizer_config.py"],
                         capture_output=True, text=True)
    if src.returncode:
        pytest.skip("no Megatron-LM mirror with dev d48bd6be0a")
    import megatron.core.optimizer  # noqa: F401 - the package the relative import resolves in

    name = "megatron.core.optimizer._dev_optimizer_config"
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "megatron.core.optimizer"
    monkeypatch.setitem(sys.modules, name, mod)
    exec(compile(src.stdout, "dev/optimizer_config.py", "exec"), mod.__dict__)
    monkeypatch.setattr(mod, "is_te_min_version", lambda *a, **k: True)
    stub_te_fused_adam(monkeypatch)
    return mod.OptimizerConfig


def _dev_refuses(cfg_cls, plan) -> str:
    """What Megatron-LM dev refuses in ``plan``'s optimizer: ``OptimizerConfig.__post_init__`` on the
    plan's fields, plus ``validate_args``' Megatron-FSDP assert of the chunked offload
    (``arguments.py``: "chunked optimizer state offload does not support Megatron-FSDP"); '' if nothing."""
    import torch

    t, p = plan.training, plan.parallel
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.uint8}
    o = t.offload
    if o.optimizer_state_fraction > 0 and p.dp_sharding in ("optimizer_grads", "full"):
        return "chunked optimizer state offload does not support Megatron-FSDP"
    pa = t.precision_aware_optimizer or (t.exp_avg_dtype, t.exp_avg_sq_dtype) != ("fp32", "fp32") or \
        o.optimizer_fraction > 0
    try:
        cfg_cls(optimizer=t.optimizer, bf16=t.precision in ("bf16", "fp8"), use_distributed_optimizer=p.dp_sharding
                != "none", use_precision_aware_optimizer=pa, optimizer_cpu_offload=o.optimizer_fraction > 0,
                optimizer_offload_fraction=o.optimizer_fraction or 1.0,
                chunked_optimizer_state_offload=o.optimizer_state_fraction > 0,
                optimizer_state_offload_fraction=o.optimizer_state_fraction or 1.0,
                main_params_dtype=dt[t.main_params_dtype], exp_avg_dtype=dt[t.exp_avg_dtype],
                exp_avg_sq_dtype=dt[t.exp_avg_sq_dtype],
                main_grads_dtype=dt[t.main_grads_dtype] if pa else torch.float32)
    except AssertionError as e:
        return str(e) or "assert"
    return ""


def test_chunked_optimizer_state_offload_space_is_what_megatron_dev_accepts(monkeypatch):
    """A recipe on Megatron-LM dev's chunked optimizer-state offload (``training.offload.optimizer_state_fraction``):
    the space never adds ``--optimizer-cpu-offload`` (dev's OptimizerConfig: "mutually exclusive") nor moves to
    Megatron-FSDP (validate_args); every (optimizer offload, sharding, moments) combination the space lists is one
    dev's own OptimizerConfig accepts, and rules.knob_problems flags exactly what it refuses."""
    cfg_cls = _dev_optimizer_config(monkeypatch)
    base = small_dense_plan()
    plan = base.with_changes(training=dict(offload=dict(optimizer_state_fraction=1.0, optimizer_state_chunk_mb=256)))
    cols = [FLAGS.index(x) for x in ("optimizer_offload", "moments", "precision")]
    ish = AXES.index("dp_sharding")

    def offered(space: Space) -> dict[tuple, Knobs]:
        """(optimizer offload, dp sharding, moments, precision) -> one candidate with it (from the tables:
        indexing every candidate would take minutes)."""
        out: dict[tuple, Knobs] = {}
        for head, c in zip(space.structs, space.ctx):
            for f in space.tables[c]:
                out.setdefault((f[cols[0]], head[ish], f[cols[1]], f[cols[2]]), Knobs._make(head + f))
        return out

    small = SpaceConfig(allow=ALL, max_mbs=1, max_cp=1, max_vpp=2, block_recompute_layers=(1,))
    seen = offered(Space(plan, small))
    for key, k in seen.items():
        assert _dev_refuses(cfg_cls, apply_knobs(plan, k)) == "", (key, _dev_refuses(cfg_cls, apply_knobs(plan, k)))
        assert problems_of(plan, k) == []
    assert {s[0] for s in seen} == {0.0} and {s[1] for s in seen} == {"optimizer"}
    assert ("bf16", "bf16") in {s[2] for s in seen}  # the moments still searched (dev accepts bf16 moments)
    # without the chunked offload the same space does offer both (the rule is the offload's, not the plan's)
    free = offered(Space(base, small))
    assert any(s[0] > 0 for s in free) and any(s[1] != "optimizer" for s in free)
    # the rule and dev's own config agree on each refused combination
    for change in (dict(training=dict(offload=dict(optimizer_fraction=1.0), precision_aware_optimizer=True)),
                   dict(parallel=dict(dp_sharding="optimizer_grads", pp=1), training=dict(micro_batch_size=1)),
                   dict(training=dict(precision_aware_optimizer=True, main_params_dtype="fp16")),
                   dict(training=dict(precision_aware_optimizer=True, exp_avg_dtype="fp8"))):
        bad = plan.with_changes(**change)
        why = _dev_refuses(cfg_cls, bad)
        assert why, change
        assert [x for x in rules.knob_problems(bad) if "chunked" in x[2] or "mutually" in x[2]], (change, why)
    ok = plan.with_changes(training=dict(precision_aware_optimizer=True, exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16"))
    assert _dev_refuses(cfg_cls, ok) == "" and not rules.knob_problems(ok)


def test_router_padding_recipe_candidates_pass_megatrons_transformer_config(monkeypatch):
    """A MoE recipe whose router pads for FP8 (``--moe-router-padding-for-fp8``, as NVIDIA's DeepSeek-V3 H100 FP8
    recipe): megatron-core 0.16.1's own ``TransformerConfig`` (built on the CPU) accepts every (dispatcher,
    precision, CUDA graph scope) the space offers with the padding the candidate keeps -- before, a BF16 or
    allgather candidate kept the padding ("fp8/fp4 must be specified", "allgather ... does not support") and a
    moe_preprocess graph met the padded alltoall router ("DtoH copies")."""
    import megatron.core.transformer.transformer_config as tc

    monkeypatch.setattr(tc, "is_te_min_version", lambda *a, **k: True)  # the recipes' TE 2.14
    plan = small_moe_plan("h100-sxm").with_changes(training=dict(precision="fp8", moe_grouped_gemm=True,
                                                                 moe_router_padding_for_quantization=True))
    sp = Space(plan, SpaceConfig(allow=ALL, max_tp=2, max_ep=2, max_mbs=1, max_cp=1, max_vpp=1,
                                 block_recompute_layers=(1,)))
    cols = [FLAGS.index(x) for x in ("dispatcher", "precision", "cuda_graph_impl", "cuda_graph_scope")]
    seen: dict[tuple, Knobs] = {}
    heads = {c: head for head, c in zip(sp.structs, sp.ctx)}  # one structure per table of flags
    for c, head in heads.items():
        for f in sp.tables[c]:
            seen.setdefault(tuple(f[j] for j in cols), Knobs._make(head + f))
    assert {d for d, *_ in seen} >= {"alltoall", "allgather"} and {p for _, p, *_ in seen} >= {"fp8", "bf16"}
    assert any("moe_preprocess" in s for *_, s in seen)
    for key, k in seen.items():
        t = apply_knobs(plan, k).training
        try:
            tc.TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, num_moe_experts=4,
                                 moe_router_topk=2, moe_grouped_gemm=True, bf16=True,
                                 moe_token_dispatcher_type=t.moe_token_dispatcher,
                                 moe_router_padding_for_fp8=t.moe_router_padding_for_quantization,
                                 fp8="e4m3" if t.precision == "fp8" else None, cuda_graph_impl=t.cuda_graph_impl,
                                 cuda_graph_scope=list(t.cuda_graph_scope))
        except (AssertionError, ValueError) as e:
            raise AssertionError(f"{key}: {e}") from None
    # the padding stays where Megatron takes it (the recipe's own candidate)
    assert apply_knobs(plan, knobs_of(plan)).training.moe_router_padding_for_quantization
