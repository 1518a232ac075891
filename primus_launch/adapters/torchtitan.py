"""TorchTitan adapter: a v0.2.2-format job TOML <-> :class:`~primus_launch.plan.Plan`.

torchtitan 0.3.0 configures jobs in Python and no longer parses TOML, but users' repositories hold
v0.2.x job TOMLs (``torchtitan/models/*/train_configs/*.toml``).  Key names, defaults and meaning
follow v0.2.x ``torchtitan/config/job_config.py``:

- ``[model] name, flavor, converters`` -> architecture from torchtitan's own registry
  (:func:`arch_from_flavor`); a ``float8`` (or ``mx``) converter -> precision fp8.
- ``[training] local_batch_size`` (8), ``global_batch_size`` (-1 = local x dp), ``seq_len`` (2048),
  ``steps`` (10000), ``mixed_precision_param`` ("bfloat16"; "float32" -> fp32).
- ``[parallelism]``: ``data_parallel_replicate_degree`` (1), ``data_parallel_shard_degree`` (-1 = the
  ranks left after replicate x cp x tp x pp), ``tensor_parallel_degree`` (1; titan's TP always
  shards the sequence: sequence parallel), ``pipeline_parallel_degree`` (1),
  ``pipeline_parallel_schedule`` ("1F1B"), ``pipeline_parallel_microbatch_size`` (1),
  ``pipeline_parallel_layers_per_stage`` / ``..._first_stage_less_layers`` / ``..._last_stage_less_layers``,
  ``context_parallel_degree`` (1), ``expert_parallel_degree`` (1), ``expert_tensor_parallel_degree`` (1;
  only meaningful with EP; etp must be 1 or tp), ``enable_async_tensor_parallel`` (false).
- ``[activation_checkpoint] mode`` ("selective") / ``selective_ac_option`` ("2"): "full" = every block
  checkpointed (Megatron full/uniform/1); "op" = per-op SAC (selective); an integer N = every N-th
  block fully checkpointed (v0.2.x ``_apply_layer_sac``), modelled as full/block with
  ``layers-per-chunk // N`` layers.

Batch: the micro-batch is ``pipeline_parallel_microbatch_size`` with PP, else ``local_batch_size``;
gradient accumulation = global / (local x dp).  FSDP (shard degree != 1) -> ``dp_sharding="full"``,
HSDP replicate degree -> ``dp_replicate``; shard degree 1 -> DDP (``"none"``).  FSDP2 and DDP
overlap their collectives with compute, so ``overlap_grad_reduce``/``overlap_param_gather`` are on.

The cluster is not in the TOML: the ``cluster`` argument, else the upstream header comment
("# NOTE: this toml config is a preset for 64 A100 GPUs."), else the product of explicit degrees,
else 1 node x 8 h100-sxm.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Optional

import tomlkit
from pydantic import ValidationError

from primus_launch.adapters.torchtitan_arch import arch_from_flavor
from primus_launch.adapters.torchtitan_layout import (
    explicit_rank_layers,
    is_single_stage,
    plan_layout,
    plan_schedule,
    rank_layers,
    titan_schedule,
)
from primus_launch.errors import UserError, one_line
from primus_launch.fileio import atomic_write_text, read_recipe_text
from primus_launch.plan import Cluster, Plan, PlanError, Source

__all__ = ["arch_from_flavor", "load_torchtitan", "plan_from_text", "render_torchtitan",
           "write_torchtitan", "torchtitan_problems", "cluster_from_header"]

# ---------------------------------------------------------------- cluster header
_GPU_TOKENS = {"A100": "a100-sxm-80gb", "H100": "h100-sxm", "H200": "h200", "B200": "b200",
               "MI300X": "mi300x", "MI325X": "mi325x", "MI355X": "mi355x"}
_GPU_WORDS = {v: k for k, v in _GPU_TOKENS.items()}
_HEADER_RE = re.compile(r"preset for (\d+) ([A-Za-z0-9]+) GPUs(?: \((\d+) nodes x (\d+) GPUs\))?")
DEFAULT_CLUSTER = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)


def cluster_from_header(text: str) -> Optional[Cluster]:
    """The cluster named by a ``# NOTE: this toml config is a preset for N <GPU> GPUs.`` comment
    (optionally followed by ``(M nodes x K GPUs)``), 8 GPUs per node by default."""
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("#"):
            continue
        m = _HEADER_RE.search(s)
        if m is None:
            continue
        n, tok = int(m.group(1)), m.group(2).upper()
        if tok not in _GPU_TOKENS:
            raise PlanError("header comment GPU", m.group(2), f"one of {', '.join(_GPU_TOKENS)}")
        if m.group(3):
            nodes, gpn = int(m.group(3)), int(m.group(4))
            if nodes * gpn != n:
                raise PlanError("header comment", s, f"{nodes} nodes x {gpn} GPUs must equal {n}")
        else:
            nodes, gpn = (n // 8, 8) if n % 8 == 0 else (1, n)
        return Cluster(gpu=_GPU_TOKENS[tok], num_nodes=nodes, gpus_per_node=gpn)
    return None


def _header_line(c: Cluster) -> str:
    word = _GPU_WORDS.get(c.gpu, c.gpu.upper())
    extra = "" if c.gpus_per_node == 8 else f" ({c.num_nodes} nodes x {c.gpus_per_node} GPUs)"
    return f"preset for {c.world_size} {word} GPUs{extra}"


# ---------------------------------------------------------------- typed key access
def _tbl(data: dict, name: str) -> dict:
    v = data.get(name, {})
    if not isinstance(v, dict):
        raise PlanError(name, v, "must be a TOML table")
    return v


def _int(tbl: dict, table: str, key: str, default: int, *, minimum: int = 1, allow_minus_one: bool = False) -> int:
    v = tbl.get(key, default)
    ok = isinstance(v, int) and not isinstance(v, bool) and (v >= minimum or (allow_minus_one and v == -1))
    if not ok:
        allowed = f"an integer >= {minimum}" + (" or -1" if allow_minus_one else "")
        raise PlanError(f"{table}.{key}", v, allowed)
    return v


def _opt_int(tbl: dict, table: str, key: str) -> Optional[int]:
    if key not in tbl:
        return None
    return _int(tbl, table, key, 1)


def _choice(tbl: dict, table: str, key: str, default: str, allowed: tuple[str, ...]) -> str:
    v = tbl.get(key, default)
    if v not in allowed:
        raise PlanError(f"{table}.{key}", v, f"one of {', '.join(allowed)}")
    return v


def _is_fp8_converter(name: Any) -> bool:
    s = str(name).lower()
    return "float8" in s or s == "mx" or s.endswith(".mx")


def _ac_option(v: Any) -> Optional[int]:
    """``selective_ac_option``: "op" -> None, an integer (string) N >= 0 -> N."""
    if str(v).strip() == "op":
        return None
    try:
        n = int(str(v).strip())
    except ValueError:
        n = -1
    if n < 0:
        raise PlanError("activation_checkpoint.selective_ac_option", v,
                        "'op' or a non-negative integer (every N-th layer)")
    return n


# ---------------------------------------------------------------- TOML -> Plan
def _parse(text: str, where: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"recipe={where!r}: malformed TOML: {e}") from None


def _resolve_cluster(text: str, data: dict, cluster: Optional[Cluster]) -> Cluster:
    if cluster is not None:
        return cluster
    header = cluster_from_header(text)
    if header is not None:
        return header
    par = _tbl(data, "parallelism")
    shard = par.get("data_parallel_shard_degree", -1)
    if isinstance(shard, int) and shard > 0:
        world = shard
        for k in ("data_parallel_replicate_degree", "tensor_parallel_degree", "pipeline_parallel_degree",
                  "context_parallel_degree"):
            v = par.get(k, 1)
            world *= v if isinstance(v, int) and v > 0 else 1
        return Cluster(gpu="h100-sxm", num_nodes=world // 8, gpus_per_node=8) if world % 8 == 0 else \
            Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=world)
    return DEFAULT_CLUSTER


def plan_from_text(text: str, cluster: Optional[Cluster] = None, path: Optional[str] = None) -> Plan:
    """Parse the text of a v0.2.2 job TOML into a validated :class:`Plan` (see the module docstring)."""
    where = path or "<text>"
    data = _parse(text, where)
    cl = _resolve_cluster(text, data, cluster)
    W = cl.world_size
    mdl, trn, par = _tbl(data, "model"), _tbl(data, "training"), _tbl(data, "parallelism")
    ac = _tbl(data, "activation_checkpoint")

    name, flavor = mdl.get("name", "llama3"), mdl.get("flavor", "debugmodel")
    if not isinstance(name, str) or not isinstance(flavor, str):
        raise PlanError("model.name" if not isinstance(name, str) else "model.flavor",
                        name if not isinstance(name, str) else flavor, "a string")
    seq = _int(trn, "training", "seq_len", 2048)
    model = arch_from_flavor(name, flavor, seq_len=seq)

    rep = _int(par, "parallelism", "data_parallel_replicate_degree", 1)
    shard_raw = _int(par, "parallelism", "data_parallel_shard_degree", -1, allow_minus_one=True)
    tp = _int(par, "parallelism", "tensor_parallel_degree", 1)
    pp = _int(par, "parallelism", "pipeline_parallel_degree", 1)
    cp = _int(par, "parallelism", "context_parallel_degree", 1)
    ep = _int(par, "parallelism", "expert_parallel_degree", 1)
    etp_raw = _int(par, "parallelism", "expert_tensor_parallel_degree", 1)
    other = rep * cp * tp * pp
    if shard_raw == -1:
        if W % other:
            raise PlanError("parallelism", f"replicate*cp*tp*pp={other}",
                            f"must divide the world size {W} ({cl.num_nodes} x {cl.gpus_per_node} {cl.gpu})")
        shard = W // other
    else:
        shard = shard_raw
        if shard * other != W:
            raise PlanError("parallelism.data_parallel_shard_degree", shard_raw,
                            f"replicate*shard*cp*tp*pp={shard * other} must equal the world size {W}; or use -1")
    dp = rep * shard

    sched_name = par.get("pipeline_parallel_schedule", "1F1B")
    schedule = plan_schedule(sched_name)
    lps = _opt_int(par, "parallelism", "pipeline_parallel_layers_per_stage")
    first_less = _int(par, "parallelism", "pipeline_parallel_first_stage_less_layers", 1, minimum=0)
    last_less = _int(par, "parallelism", "pipeline_parallel_last_stage_less_layers", 1, minimum=0)
    fqns = par.get("module_fqns_per_model_part")
    if pp > 1 and fqns is not None:
        vpp, counts = explicit_rank_layers(pp, str(sched_name), fqns)
        if sum(counts) != model.num_layers:
            raise PlanError("parallelism.module_fqns_per_model_part", f"{sum(counts)} layers",
                            f"must list all {model.num_layers} layers of {name} {flavor}")
    else:
        vpp, counts = rank_layers(model.num_layers, pp, str(sched_name), lps, first_less, last_less)
    first, last = plan_layout(model.num_layers, vpp, counts)

    local = _int(trn, "training", "local_batch_size", 8)
    gbs_raw = _int(trn, "training", "global_batch_size", -1, allow_minus_one=True)
    gbs = local * dp if gbs_raw == -1 else gbs_raw
    if gbs % (local * dp):
        raise PlanError("training.global_batch_size", gbs_raw,
                        f"must be a multiple of local_batch_size x dp = {local} x {dp}")
    if pp > 1:
        mbs = _int(par, "parallelism", "pipeline_parallel_microbatch_size", 1)
        if local % mbs:
            raise PlanError("parallelism.pipeline_parallel_microbatch_size", mbs,
                            f"must divide training.local_batch_size={local}")
    else:
        mbs = local

    mode = _choice(ac, "activation_checkpoint", "mode", "selective", ("none", "selective", "full", "memory_budget"))
    if mode == "none":
        recompute: dict[str, Any] = {"granularity": "none"}
    elif mode == "full":
        recompute = {"granularity": "full", "method": "uniform", "num_layers": 1}
    elif mode == "memory_budget":  # compiler-chosen recomputation: nearest plan notion is per-op SAC
        recompute = {"granularity": "op"}
    else:
        n = _ac_option(ac.get("selective_ac_option", "2"))
        if n is None:
            recompute = {"granularity": "op"}
        elif n <= 1:
            recompute = {"granularity": "full", "method": "uniform", "num_layers": 1}
        else:  # torchtitan _apply_layer_sac: every n-th block checkpointed
            recompute = {"granularity": "full", "method": "every_n", "num_layers": n}

    converters = mdl.get("converters", [])
    if isinstance(converters, str):
        converters = [c for c in converters.split(",") if c]
    if not isinstance(converters, list):
        raise PlanError("model.converters", converters, "a list of converter names, e.g. [\"float8\"]")
    mp = _choice(trn, "training", "mixed_precision_param", "bfloat16", ("bfloat16", "float32"))
    precision = "fp8" if any(_is_fp8_converter(c) for c in converters) else ("fp32" if mp == "float32" else "bf16")
    opt = _tbl(data, "optimizer").get("name", "AdamW")
    steps = _int(trn, "training", "steps", 10000)

    if ep > 1 and etp_raw not in (1, tp):
        raise PlanError("parallelism.expert_tensor_parallel_degree", etp_raw, f"1 or tensor_parallel_degree={tp}")
    async_tp = par.get("enable_async_tensor_parallel", False)
    if not isinstance(async_tp, bool):
        raise PlanError("parallelism.enable_async_tensor_parallel", async_tp, "true or false")

    try:
        plan = _build_plan(model, cl, path, dict(
            tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, etp=(etp_raw if ep > 1 and etp_raw != tp else None),
            sequence_parallel=tp > 1, dp_sharding="none" if shard_raw == 1 else "full",
            dp_replicate=1 if shard_raw == 1 else rep, pipeline_layers_first_stage=first,
            pipeline_layers_last_stage=last), dict(
            global_batch_size=gbs, micro_batch_size=mbs, precision=precision, recompute=recompute,
            pipeline_schedule=schedule, overlap_grad_reduce=True, overlap_param_gather=shard_raw != 1,
            tp_comm_overlap=async_tp, optimizer="sgd" if "sgd" in str(opt).lower() else "adam",
            grad_reduce_in_fp32=True, train_iters=steps))
    except ValidationError as e:
        for err in e.errors():
            ctx_err = (err.get("ctx") or {}).get("error")
            if isinstance(ctx_err, PlanError):
                raise ctx_err from None
        raise UserError(f"recipe={where!r}: {one_line(e)}") from None
    problems = torchtitan_problems(plan)
    if problems:
        raise PlanError(*problems[0])
    return plan


def _build_plan(model: Any, cl: Cluster, path: Optional[str], parallel: dict, training: dict) -> Plan:
    return Plan(
        model=model,
        parallel=parallel,
        training=training,
        cluster=cl,
        source=Source(framework="torchtitan", path=path),
    )


def load_torchtitan(path: str | Path, cluster: Optional[Cluster] = None) -> Plan:
    """Read a v0.2.2-format TorchTitan job TOML into a :class:`Plan` (``plan.source`` = the file)."""
    return plan_from_text(read_recipe_text(path), cluster, path=str(path))


def torchtitan_problems(plan: Plan) -> list[tuple[str, object, str]]:
    """Rules torchtitan adds to :func:`~primus_launch.plan.legality_problems`, as (field, value, allowed).

    Sources (v0.2.x): ``ParallelDims`` (EP is carved out of dp_shard x cp, x tp when etp = 1; etp is 1
    or tp), ``Decoder.Config.update_from_config`` (no weight tying with PP), ``pipeline_parallel.py``
    (single-stage schedules run one stage per rank, looped ones >= 2, V schedules exactly 2).
    """
    p, t, m = plan.parallel, plan.training, plan.model
    out: list[tuple[str, object, str]] = []
    if p.dp_sharding in ("optimizer", "optimizer_grads"):
        out.append(("parallel.dp_sharding", p.dp_sharding, "torchtitan has none (DDP) or full (FSDP/HSDP)"))
    r = t.recompute
    if r.granularity == "selective" or (r.granularity == "full" and r.method == "block"):
        what = "selective" if r.granularity == "selective" else "full block"
        out.append(("training.recompute", what, "torchtitan's activation checkpointing: none, full, op "
                                                "(per-op SAC) or full every N layers"))
    dp = plan.dp
    shard = dp // p.dp_replicate if dp % p.dp_replicate == 0 else 0
    if p.ep > 1 and m.is_moe:
        etp = p.expert_tp
        if etp not in (1, p.tp):
            out.append(("parallel.etp", etp, f"torchtitan supports expert TP 1 or tp={p.tp}"))
        pool = shard * p.cp * (p.tp if etp == 1 else 1)
        inner = p.cp * (p.tp if etp == 1 else 1)
        if pool % p.ep or p.ep % inner:
            out.append(("parallel.ep", p.ep, f"torchtitan needs ep to divide dp_shard*cp{'*tp' if etp == 1 else ''}"
                        f"={pool} and be a multiple of cp{'*tp' if etp == 1 else ''}={inner}"))
    if p.pp > 1:
        if not m.untie_embeddings_and_output_weights:
            out.append(("parallel.pp", p.pp, "torchtitan does not support weight tying with pipeline parallel"))
        name = titan_schedule(t.pipeline_schedule, p.vpp)
        single = is_single_stage(name)
        if single and p.vpp != 1:
            out.append(("parallel.vpp", p.vpp, f"torchtitan's {name} runs one stage per rank (vpp=1)"))
        if not single and p.vpp < 2:
            out.append(("parallel.vpp", p.vpp, f"torchtitan's {name} needs >= 2 stages per rank"))
    return out


# ---------------------------------------------------------------- Plan -> TOML text
_PAR, _TRN, _AC, _MDL = "parallelism", "training", "activation_checkpoint", "model"
# where a new key goes: after the first of these that the table already has
_ANCHORS = {
    "pipeline_parallel_schedule": ["pipeline_parallel_degree"],
    "pipeline_parallel_microbatch_size": ["pipeline_parallel_schedule", "pipeline_parallel_degree"],
    "pipeline_parallel_layers_per_stage": ["pipeline_parallel_schedule", "pipeline_parallel_degree"],
    "pipeline_parallel_first_stage_less_layers": ["pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule",
                                                  "pipeline_parallel_degree"],
    "pipeline_parallel_last_stage_less_layers": ["pipeline_parallel_first_stage_less_layers",
                                                 "pipeline_parallel_schedule", "pipeline_parallel_degree"],
    "pipeline_parallel_degree": ["tensor_parallel_degree"],
    "tensor_parallel_degree": ["data_parallel_shard_degree"],
    "data_parallel_shard_degree": ["data_parallel_replicate_degree"],
    "context_parallel_degree": ["pipeline_parallel_degree", "tensor_parallel_degree"],
    "expert_parallel_degree": ["context_parallel_degree", "pipeline_parallel_degree"],
    "expert_tensor_parallel_degree": ["expert_parallel_degree"],
    "global_batch_size": ["local_batch_size"],
    "selective_ac_option": ["mode"],
    "converters": ["flavor"],
}


class _Editor:
    """Sets keys in a tomlkit document, remembering whether anything changed."""

    def __init__(self, text: str):
        self.doc = tomlkit.parse(text)
        self.changed = False

    def get(self, table: str, key: str, default: Any = None) -> Any:
        t = self.doc.get(table)
        if t is None or key not in t:
            return default
        v = t[key]
        return v.unwrap() if hasattr(v, "unwrap") else v

    def set(self, table: str, key: str, value: Any, default: Any = None) -> None:
        """Set ``[table] key = value`` unless it already holds ``value`` (absent counts as ``default``)."""
        if self.get(table, key, default) == value:
            return
        if table not in self.doc:
            self.doc.add(table, tomlkit.table())
        t = self.doc[table]
        if key in t:
            t[key] = value
        else:
            anchor = next((a for a in _ANCHORS.get(key, []) if a in t), None)
            container = getattr(t, "value", None)
            if anchor is not None and hasattr(container, "_insert_after"):
                container._insert_after(anchor, key, value)
            else:
                t.add(key, value)
        self.changed = True


def _layout_keys(ed: _Editor, plan: Plan, sched_name: str) -> None:
    """Choose pipeline_parallel_layers_per_stage / first/last_stage_less_layers so that torchtitan's
    split reproduces the plan's (vpp, first, last); fewest changed keys first."""
    p, L = plan.parallel, plan.model.num_layers
    if "module_fqns_per_model_part" in ed.doc.get(_PAR, {}):  # an explicit split no longer fits: drop it
        del ed.doc[_PAR]["module_fqns_per_model_part"]
        ed.changed = True
    cur = (ed.get(_PAR, "pipeline_parallel_layers_per_stage", None),
           ed.get(_PAR, "pipeline_parallel_first_stage_less_layers", 1),
           ed.get(_PAR, "pipeline_parallel_last_stage_less_layers", 1))
    want = (p.vpp, p.pipeline_layers_first_stage, p.pipeline_layers_last_stage)

    exact = tuple(plan.layers_per_stage())

    def result(lps: Optional[int], fl: int, ll: int, strict: bool) -> Optional[tuple]:
        try:
            vpp, counts = rank_layers(L, p.pp, sched_name, lps, fl, ll)
        except PlanError:
            return None
        if strict:  # torchtitan's split is exactly the plan's
            return (vpp, *want[1:]) if counts == exact else None
        return (vpp, *plan_layout(L, vpp, counts))

    weights = range(0, max(L // p.pp, 1) + 1)
    lps_opts = [None, *range(1, L + 3)]
    candidates = [cur]
    candidates += [(x, cur[1], cur[2]) for x in lps_opts] + [(cur[0], f, cur[2]) for f in weights] + \
        [(cur[0], cur[1], g) for g in weights]
    candidates += [(cur[0], f, g) for f in weights for g in weights]
    candidates += [(x, f, g) for x in lps_opts for f in range(0, 4) for g in range(0, 4)]
    for cand in [(c, True) for c in candidates] + [(c, False) for c in candidates]:
        cand, strict = cand
        if result(*cand, strict) == want:
            lps, fl, ll = cand
            if lps != cur[0]:
                if lps is None:
                    del ed.doc[_PAR]["pipeline_parallel_layers_per_stage"]
                    ed.changed = True
                else:
                    ed.set(_PAR, "pipeline_parallel_layers_per_stage", lps)
            ed.set(_PAR, "pipeline_parallel_first_stage_less_layers", fl, 1)
            ed.set(_PAR, "pipeline_parallel_last_stage_less_layers", ll, 1)
            return
    raise PlanError("parallel.pipeline_layers_first_stage", p.pipeline_layers_first_stage,
                    f"torchtitan cannot split {L} layers over pp={p.pp} x vpp={p.vpp} with "
                    f"first={p.pipeline_layers_first_stage}, last={p.pipeline_layers_last_stage}")


def render_torchtitan(plan: Plan, original_text: str) -> str:
    """``original_text`` with only the values that differ from ``plan`` changed (tomlkit keeps every
    other key, comment and the order).  An unchanged plan gives ``original_text`` byte for byte."""
    problems = torchtitan_problems(plan)
    if problems:
        raise PlanError(*problems[0])
    try:
        old = plan_from_text(original_text, plan.cluster)
    except PlanError:  # the original's explicit degrees may not fit the plan's (new) cluster
        old = plan_from_text(original_text, None)
    ed = _Editor(original_text)
    p, t, op, ot = plan.parallel, plan.training, old.parallel, old.training

    # ---- model / precision
    if plan.model.seq_length != old.model.seq_length:
        ed.set(_TRN, "seq_len", plan.model.seq_length, 2048)
    if t.precision != ot.precision:
        conv = ed.get(_MDL, "converters", [])
        conv = [c for c in conv.split(",") if c] if isinstance(conv, str) else list(conv)
        if t.precision == "fp8":
            conv.append("float8")
        else:
            conv = [c for c in conv if not _is_fp8_converter(c)]
        ed.set(_MDL, "converters", conv, [])
        ed.set(_TRN, "mixed_precision_param", "float32" if t.precision == "fp32" else "bfloat16", "bfloat16")
    if t.train_iters is not None and t.train_iters != ot.train_iters:
        ed.set(_TRN, "steps", t.train_iters, 10000)

    # ---- degrees
    ed.set(_PAR, "tensor_parallel_degree", p.tp, 1)
    ed.set(_PAR, "pipeline_parallel_degree", p.pp, 1)
    ed.set(_PAR, "context_parallel_degree", p.cp, 1)
    ed.set(_PAR, "expert_parallel_degree", p.ep, 1)
    if p.ep > 1 and (p.expert_tp != old.parallel.expert_tp or p.ep != op.ep):
        ed.set(_PAR, "expert_tensor_parallel_degree", p.expert_tp, 1)
    dp = plan.dp
    if p.dp_sharding == "none":  # DDP: every DP rank a replica
        ed.set(_PAR, "data_parallel_replicate_degree", dp, 1)
        ed.set(_PAR, "data_parallel_shard_degree", 1, -1)
    else:  # FSDP / HSDP
        ed.set(_PAR, "data_parallel_replicate_degree", p.dp_replicate, 1)
        raw = ed.get(_PAR, "data_parallel_shard_degree", -1)
        if raw == 1:
            ed.set(_PAR, "data_parallel_shard_degree", -1, -1)
        elif raw != -1:
            shard = dp // p.dp_replicate
            ed.set(_PAR, "data_parallel_shard_degree", shard if shard > 1 else -1, -1)
    ed.set(_PAR, "enable_async_tensor_parallel", t.tp_comm_overlap, False)

    # ---- pipeline schedule and layout
    cur_sched = ed.get(_PAR, "pipeline_parallel_schedule", "1F1B")
    sched_name = cur_sched
    if t.pipeline_schedule != plan_schedule(cur_sched) or (
            p.pp > 1 and is_single_stage(cur_sched) != (p.vpp == 1)):
        sched_name = titan_schedule(t.pipeline_schedule, p.vpp)
        ed.set(_PAR, "pipeline_parallel_schedule", sched_name, "1F1B")
    if p.pp > 1 and (p.pp, p.vpp, p.pipeline_layers_first_stage, p.pipeline_layers_last_stage, sched_name) != (
            op.pp, op.vpp, op.pipeline_layers_first_stage, op.pipeline_layers_last_stage, cur_sched):
        _layout_keys(ed, plan, sched_name)

    # ---- batch: micro-batch is the PP micro-batch, else local_batch_size
    G, m = t.global_batch_size, t.micro_batch_size
    local = ed.get(_TRN, "local_batch_size", 8)
    if p.pp > 1:
        ed.set(_PAR, "pipeline_parallel_microbatch_size", m, 1)
        if local % m or G % (local * dp):
            local = G // dp
    else:
        local = m
    ed.set(_TRN, "local_batch_size", local, 8)
    gbs_cur = ed.get(_TRN, "global_batch_size", -1)
    if not (gbs_cur == -1 and G == local * dp):
        ed.set(_TRN, "global_batch_size", G, -1)

    # ---- activation checkpointing
    if t.recompute != ot.recompute:
        _render_recompute(ed, plan)

    text = tomlkit.dumps(ed.doc) if ed.changed else original_text
    return _render_cluster(text, original_text, plan.cluster)


def _render_recompute(ed: _Editor, plan: Plan) -> None:
    r = plan.training.recompute
    cur = plan_from_text(tomlkit.dumps(ed.doc), plan.cluster).training.recompute
    if cur == r:
        return
    if r.granularity == "none":
        ed.set(_AC, "mode", "none", "selective")
    elif r.granularity == "op":
        ed.set(_AC, "mode", "selective", "selective")
        ed.set(_AC, "selective_ac_option", "op", "2")
    elif r.method == "every_n" and (r.num_layers or 1) > 1:
        ed.set(_AC, "mode", "selective", "selective")
        ed.set(_AC, "selective_ac_option", str(r.num_layers), "2")
    else:
        ed.set(_AC, "mode", "full", "selective")


def _render_cluster(text: str, original_text: str, cluster: Cluster) -> str:
    """Keep the header comment naming the cluster in step with ``cluster`` (only when it differs
    from the cluster the original text implies); add one at the top if there is none."""
    try:
        implied = _resolve_cluster(original_text, _parse(original_text, "<text>"), None)
    except PlanError:
        implied = None
    if implied == cluster:
        return text
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = _HEADER_RE.search(line)
        if line.lstrip().startswith("#") and m is not None:
            lines[i] = line[:m.start()] + _header_line(cluster) + line[m.end():]
            return "".join(lines)
    return f"# NOTE: this toml config is a {_header_line(cluster)}.\n" + text


def write_torchtitan(plan: Plan, original_path: str | Path, out_path: str | Path) -> Path:
    """Render ``plan`` over the TOML at ``original_path`` and write it atomically to ``out_path``
    (never over the original)."""
    orig = Path(original_path)
    text = render_torchtitan(plan, read_recipe_text(orig))
    return atomic_write_text(out_path, text, protect=orig)
