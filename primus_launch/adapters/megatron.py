"""Megatron-LM adapter: launch scripts / argument YAML / command lines <-> :class:`Plan`.

Reading: :func:`load_megatron` (a bash launch script or a YAML of Megatron arguments) and
:func:`plan_from_argv` (a command line).  Megatron-LM's own defaults apply to absent flags (see
:mod:`megatron_args`).  The cluster comes from torchrun's ``--nnodes`` / ``--nproc-per-node``
(torchrun defaults: 1 and 1), a ``# primus-launch: gpu=... [nodes=N gpus_per_node=K]`` comment, or
the ``cluster`` argument, which overrides both.

Writing: :func:`render_megatron` / :func:`render_argv` change only the values the plan changed, where
they are written; an unchanged plan renders byte-identical text.  Every rendering is re-read and
must give back the requested plan, or a :class:`UserError` says which field could not be expressed.
"""

from __future__ import annotations

import os

import re
from pathlib import Path
from typing import Any, Callable, Mapping

from primus_launch.fileio import read_recipe_text, write_beside_original
from primus_launch.inputs import find_from_run_root
import primus_launch.adapters.megatron_script as ms
from primus_launch.adapters.megatron_bash import NODES_FALL_BACK, unstated_note
from primus_launch.adapters.node_size import fewest_nodes
from primus_launch.adapters.megatron_forks import fork_problem
from primus_launch.adapters.program_limits import program_fixed
from primus_launch.adapters.sbatch_edit import sbatch_count_edits
from primus_launch.adapters.pai_patch import legacy_program
from primus_launch.adapters.megatron_args import (SHAPE_DESTS, BY_DEST, changed_args, is_hybrid_program, plan_from_args,
                                                  program_family)
from primus_launch.adapters.megatron_yaml import YamlRecipe, from_yaml, is_yaml_text
from primus_launch.adapters.yaml_text import render_unshared
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, Plan, PlanError, Source
from primus_launch.plan.legality import effective_fsdp_impl, megatron_env_fixes, megatron_env_problems

DEFAULT_GPU = "h100-sxm"
_YAML_SUFFIXES = (".yaml", ".yml")


# --------------------------------------------------------------------------- reading
def _stated_cluster(cfg: dict[str, str], launcher: tuple[int | None, int | None, bool] | None) -> Cluster:
    """The cluster a recipe states: torchrun options (torchrun defaults 1 node x 1 process), else the
    ``# primus-launch:`` comment, else the plan's default cluster."""

    def num(key: str) -> int | None:
        if key not in cfg:
            return None
        try:
            return int(cfg[key])
        except ValueError:
            raise PlanError(key, cfg[key], "an integer (in the '# primus-launch:' comment)") from None

    dflt = Cluster()
    nodes, gpn = num("nodes"), num("gpus_per_node")
    if launcher is not None and launcher[2]:
        nodes = launcher[0] if launcher[0] is not None else (nodes or 1)
        gpn = launcher[1] if launcher[1] is not None else (gpn or 1)
    return Cluster(gpu=cfg.get("gpu", DEFAULT_GPU), num_nodes=nodes or dflt.num_nodes,
                   gpus_per_node=gpn or dflt.gpus_per_node)


# GPU folder names of Megatron-LM examples/moe_recipes/<model>/<gpu>/<precision>_<N>GPU_*.yaml
_GPU_FOLDERS = {"h100": ("h100-sxm", 8, None), "h200": ("h200", 8, None), "b200": ("b200", 8, None),
                "b300": ("b300", 8, None), "gb200": ("gb200", 4, 72), "gb300": ("gb300", 4, 72),
                "a100": ("a100-sxm-80gb", 8, None), "mi300x": ("mi300x", 8, None), "mi325x": ("mi325x", 8, None),
                "mi355x": ("mi355x", 8, None), "mi350x": ("mi350x", 8, None)}


def _guessed_cluster(path: str) -> tuple[Cluster, str] | None:
    """The cluster an NVIDIA recipe's path names (``.../gb200/mxfp8_256GPU_TP1PP4EP64.yaml``): the GPU
    from the folder, the GPU count from the file name; a stated guess (GB200/GB300: 4 GPUs per node,
    72 in one NVLink domain)."""
    p = Path(path)
    m = re.search(r"(?:^|_)(\d+)GPU(?:_|$)", p.stem)
    hit = _GPU_FOLDERS.get(p.parent.name.lower())
    if not m or hit is None:
        return None
    gpu, per_node, domain = hit
    n = int(m.group(1))
    if n % per_node:
        return None
    c = Cluster(gpu=gpu, num_nodes=n // per_node, gpus_per_node=per_node, nvlink_domain=domain)
    return c, (f"cluster guessed from the recipe's path: {n} x {gpu} ({n // per_node} nodes x {per_node}"
               + (f", NVLink domain {domain}" if domain else "") + "); pass --gpu/--nodes to override")


def _parse(text: str, path: str, argv_mode: bool = False, given: Cluster | None = None,
           script_args: tuple[str, ...] = (), overrides: Mapping[str, Any] | None = None,
           script_env: Mapping[str, str] | None = None) -> tuple[Any, Cluster]:
    """(recipe, cluster as written) for a script, YAML or argv text; with ``given`` the written
    cluster is not resolved (a launcher value like ``--nproc-per-node gpu`` is then no error).
    ``overrides`` (without ``given``): partial cluster flags, which complete the written cluster
    (:meth:`Cluster.completed`); a note on how the recipe's own cluster was found (a guess from its
    path, a count falling back) is left out only where the flags set every field it is about.  ``script_env``:
    the variables a script is started with (a command's ``NAME=value`` prefixes)."""
    rec, cluster = _parse_recipe(text, path, argv_mode, given, script_args, overrides, script_env)
    _env_attention_backend(rec)
    return rec, cluster


# megatron-core ``LanguageModule._set_attention_backend`` (fa0dcc4, 2024-12-07; core_v0.11.0 .. main
# ``models/common/language_module/language_module.py``, called from ``__init__``, i.e. at model build): per
# ``--attention-backend`` the value each of NVTE_FLASH_ATTN, NVTE_FUSED_ATTN, NVTE_UNFUSED_ATTN must have (in that
# order), unset or that exact text, else AssertionError "<var> set to <v>, but expected <e> for attention backend type
# <backend>"
ATTN_ENV_EXPECTED: dict[str, tuple[int, int, int]] = {
    "local": (0, 0, 0), "flash": (1, 0, 0), "fused": (0, 1, 0), "unfused": (0, 0, 1), "auto": (1, 1, 1)}
ATTN_ENV_VARS = ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN")


def attention_env_assertion(backend: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The variable and the AssertionError text megatron-core >= 0.11 raises at model build for ``--attention-backend
    backend`` in launch environment ``env`` (:data:`ATTN_ENV_EXPECTED`), or None when the variables agree."""
    for name, want in zip(ATTN_ENV_VARS, ATTN_ENV_EXPECTED.get(backend, ())):
        v = env.get(name)
        if v is not None and v != str(want):
            return name, f"{name} set to {v}, but expected {want} for attention backend type {backend}"
    return None


def _env_attention_backend(rec: Any) -> None:
    """Without ``--attention-backend``, the attention Transformer Engine runs is chosen by its opt-out
    variables: ``NVTE_FLASH_ATTN`` / ``NVTE_FUSED_ATTN`` (default 1; ``0`` disables the backend; both off:
    the unfused one -- TE ``attention/dot_product_attention/utils.py`` ``get_attention_backend``).  A recipe
    that exports one of them as 0 (Pai-Megatron-Patch's ``FL`` switch: ``NVTE_FLASH_ATTN=1
    NVTE_FUSED_ATTN=0``, older Megatron-LM scripts) runs that backend on Megatron-LM before core_v0.11.0 (which has
    no ``--attention-backend``); read into ``attention_backend`` with a note.  From core_v0.11.0 (fa0dcc4) Megatron-LM
    stops such a run at model build (:func:`attention_env_assertion` under its default ``auto``); the reader cannot
    tell the version from the script (the flag that dates it is the one absent), so the note says both.  With
    ``--attention-backend`` given (so core_v0.11.0 or later) variables that disagree with it are that assertion: a
    note names it (the plan keeps the flag's backend, which Megatron-LM would set if the variables were unset)."""
    env = recipe_env(rec)
    if "attention_backend" in rec.args:  # the flag, when given, is what Megatron-LM sets (and checks the variables against)
        backend = str(rec.args["attention_backend"]).strip()
        stop = attention_env_assertion(backend, env)
        if stop is not None:
            var, stop = stop
            rec.notes.append(f"--attention-backend {backend} with {var}={env[var]} "
                             f"in the launch environment: Megatron-LM (core_v0.11.0 on, which has the flag) stops at "
                             f"model build with AssertionError '{stop}' (language_module.py _set_attention_backend); "
                             f"read as {backend}, the run once the variable is unset")
        return
    flash, fused = env.get("NVTE_FLASH_ATTN"), env.get("NVTE_FUSED_ATTN")

    def on(v: str | None) -> bool:
        return v is None or v.strip() not in ("0", "")

    if on(flash) and on(fused):
        return
    backend = "flash" if on(flash) else "fused" if on(fused) else "unfused"
    rec.args["attention_backend"] = backend
    said = " ".join(f"{k}={v}" for k, v in (("NVTE_FLASH_ATTN", flash), ("NVTE_FUSED_ATTN", fused)) if v is not None)
    stop = (attention_env_assertion("auto", env) or (None, None))[1]
    rec.notes.append(f"{said} in the launch environment: attention read as {backend}, as Transformer Engine's opt-out "
                     "variables choose it on Megatron-LM before core_v0.11.0 (no --attention-backend); from "
                     "core_v0.11.0 (fa0dcc4, 2024-12-07) Megatron-LM's default --attention-backend auto stops the run "
                     f"at model build with AssertionError '{stop or 'NVTE_* set to 0'}' (language_module.py "
                     "_set_attention_backend): "
                     f"there, unset the variables and pass --attention-backend {backend}")


def _parse_recipe(text: str, path: str, argv_mode: bool, given: Cluster | None, script_args: tuple[str, ...],
                  overrides: Mapping[str, Any] | None,
                  script_env: Mapping[str, str] | None = None) -> tuple[Any, Cluster]:
    """:func:`_parse` before the launch environment's attention variables are read."""
    if argv_mode:
        rec: Any = ms.from_argv(text.split("\n") if text else [])
        if given is not None:
            return rec, given
        launcher = rec.cluster_values()
        for k, _why in rec.unstated_counts():  # `--nproc-per-node gpu` on a command line: no script default
            o = rec.launcher_value(*rec.cluster_flags()[k])
            word = o.vals[0].text if o is not None and o.vals else ""
            if (overrides or {}).get(("num_nodes", "gpus_per_node")[k]) is None:
                raise PlanError(o.flag if o is not None else ("--nnodes", "--nproc-per-node")[k], word,
                                "a count: the GPUs of the node it runs on are not known here; pass --gpus-per-node"
                                if k == 1 else "a count (pass --nodes)")
        written = _stated_cluster({}, launcher)
        _default_note(rec, path, written, {"num_nodes", "gpus_per_node"} if launcher[2] else set(), overrides)
        return rec, written
    cfg = ms.comment_config(text)
    world = None  # the GPU count a path guess states (partial flags keep it: Cluster.completed)
    if path.endswith(_YAML_SUFFIXES) or (not path.endswith((".sh", ".bash", ".slurm", ".sbatch")) and is_yaml_text(text)):
        rec = from_yaml(text, path)
        written = given
        if given is None and not cfg:
            guess = _guessed_cluster(path)
            if guess is not None:
                if Cluster.uncovered(("gpu", "num_nodes", "gpus_per_node"), overrides):
                    rec.notes.append(guess[1])
                written, world = guess[0], guess[0].world_size
        if written is None and rec.gpus_per_node is not None and "gpus_per_node" not in cfg:
            # the functional-test runner's GPUS_PER_NODE for the MODEL_ARGS run, on one node
            written = _stated_cluster({**cfg, "gpus_per_node": str(rec.gpus_per_node),
                                       "nodes": cfg.get("nodes", "1")}, None)
            if Cluster.uncovered(("num_nodes", "gpus_per_node"), overrides):
                rec.notes.append(f"cluster: {written.num_nodes} node(s) x {written.gpus_per_node} GPU(s) from "
                                 f"MODEL_ENV_VARS.MODEL_ARGS.GPUS_PER_NODE={rec.gpus_per_node} (the functional-test "
                                 "runner's count for the MODEL_ARGS run; other MODEL_ARGS_N runs are not read)")
            _default_note(rec, path, written, {"num_nodes", "gpus_per_node"}, overrides, cfg)
        if written is None:
            written = _stated_cluster(cfg, None)
            _default_note(rec, path, written, set(), overrides, cfg)
    else:
        rec = ms.from_script(text, path, script_args, script_env)
        written = given or _script_cluster(rec, cfg, path, overrides)
    out = written.completed(overrides, world) if given is None and overrides else written
    return rec, (reference_node(rec, out, overrides) if given is None else out)


def reference_node(rec: Any, cluster: Cluster, overrides: Mapping[str, Any] | None) -> Cluster:
    """``cluster`` with the GPU's reference node size (``GPUSpec.gpus_per_node``, "a reader's default for
    Cluster.gpus_per_node": 4 for a GB200 / GB300 compute tray) where neither the recipe nor the flags state the GPUs
    per node and the default cluster's 8 was taken (:func:`_default_note` names ``gpus_per_node``): ``--gpu gb200
    --nodes 8`` of a functional test's model_config.yaml was 8 x 8 = 64 GPUs, where 8 GB200 trays hold 32."""
    from primus_launch.projection.hardware.gpus import get_gpu

    if (overrides or {}).get("gpus_per_node") is not None:
        return cluster
    said = f"gpus_per_node={cluster.gpus_per_node}"
    at = next((i for i, n in enumerate(getattr(rec, "notes", []))
               if (m := _DEFAULT_COUNTS.search(n)) is not None and said in m.group(1)), None)
    if at is None:
        return cluster
    try:
        ref = get_gpu(cluster.gpu).gpus_per_node
    except Exception:  # noqa: BLE001 -- an unknown GPU is refused elsewhere, naming it
        return cluster
    if ref == cluster.gpus_per_node:
        return cluster
    rec.notes[at] = rec.notes[at].replace(said, f"gpus_per_node={ref} ({cluster.gpu}'s reference node)", 1)
    return cluster.model_copy(update={"gpus_per_node": ref})


def _script_cluster(rec: ms.CommandRecipe, cfg: dict[str, str], path: str,
                    overrides: Mapping[str, Any] | None = None) -> Cluster:
    """The cluster a launch script states (:func:`_stated_cluster` of its launcher and comment); a count it
    means to state but leaves unread falls back, with a note that says to what unless the partial cluster
    flags ``overrides`` set that count."""
    launcher = rec.cluster_values()
    unstated = rec.unstated_counts()
    if unstated:  # meant to be stated (a placeholder, an unset variable): the comment's count, else the default's
        dflt, fill = Cluster(), list(launcher)
        for k, _ in unstated:
            key = ("nodes", "gpus_per_node")[k]
            fill[k] = int(cfg[key]) if cfg.get(key, "").isdigit() else (dflt.num_nodes, dflt.gpus_per_node)[k]
        launcher = (fill[0], fill[1], launcher[2])
    written = _stated_cluster(cfg, launcher)
    # a launcher states both counts (its own defaults included: torchrun 1 node x 1 process); an unread one has
    # its own note below
    _default_note(rec, path, written, {"num_nodes", "gpus_per_node"} if launcher[2] else set(), overrides, cfg)
    for k, why in unstated:  # read as not stated: the count falls back, and the note says to what
        if Cluster.uncovered((("num_nodes", "gpus_per_node")[k],), overrides):
            rec.notes.append(unstated_note(path, k, why, (written.num_nodes, written.gpus_per_node)[k]))
    allocated = getattr(rec, "allocation", {}).get("nodes")
    rng = rec.launcher_range()
    if allocated and launcher[0] and launcher[0] > allocated and not (rng and rng[0] == "srun") \
            and Cluster.uncovered(("num_nodes",), overrides):
        # torchrun --nnodes 4 in a job of #SBATCH --nodes=2: the rendezvous waits for nodes the job does not have
        rec.notes.append(f"{path}: the launcher asks for {launcher[0]} nodes, the #SBATCH header allocates {allocated}: "
                         f"torchrun's rendezvous waits for {launcher[0]} nodes and the job does not start unless sbatch "
                         f"is given --nodes={launcher[0]} or more (its options win over the header); projected on "
                         f"{launcher[0]} nodes")
    for directive in getattr(rec, "unread_allocation", {}).values():  # `#SBATCH --nodes=0` / `=abc`: sbatch refuses
        if not any(repr(directive) in n for n in rec.notes):         # the script; the count came from elsewhere
            rec.notes.append(f"{path}: {directive!r} is not a count sbatch takes (it refuses the script: zero, a word, "
                             f"a range MIN > MAX, a template placeholder?): not read; the cluster is {written.num_nodes} "
                             f"x {written.gpus_per_node}")
    return written


_CFG_KEYS = {"gpu": "gpu", "num_nodes": "nodes", "gpus_per_node": "gpus_per_node"}


def _default_note(rec: Any, path: str, written: Cluster, stated: set[str], overrides: Mapping[str, Any] | None,
                  cfg: dict[str, str] | None = None) -> None:
    """One note naming the cluster fields that fall back to the default cluster's (:func:`_stated_cluster`):
    neither the recipe (``stated`` by its launcher, or its ``# primus-launch:`` comment ``cfg``) nor the partial
    cluster flags ``overrides`` set them."""
    fields = [f for f in ("gpu", "num_nodes", "gpus_per_node")
              if f not in stated and _CFG_KEYS[f] not in (cfg or {}) and (overrides or {}).get(f) is None]
    if fields:
        said = ", ".join(f"{f}={getattr(written, f)}" for f in fields)
        flags = " / ".join({"gpu": "--gpu", "num_nodes": "--nodes", "gpus_per_node": "--gpus-per-node"}[f]
                           for f in fields)
        rec.notes.append(f"{path}: cluster {said}: the default (the recipe does not state "
                         f"{'it' if len(fields) == 1 else 'them'}; pass {flags} or a '# primus-launch:' comment)")


_DEFAULT_COUNTS = re.compile(r": cluster (.*(?:num_nodes|gpus_per_node)=.*): the default \(the recipe does not state")
_WORLD_RULE = re.compile(r"world size|\bdp\b|\bnodes?\b|GPUs per node")


def _on_default_cluster(e: PlanError, rec: Any) -> PlanError:
    """``e`` with the default cluster named when it is a rule on the GPU count and the recipe states no node or
    per-node count (:func:`_default_note`): the refusal then says where its world size came from."""
    said = next((m.group(1) for n in getattr(rec, "notes", []) if (m := _DEFAULT_COUNTS.search(n))), None)
    if said is None or not _WORLD_RULE.search(e.allowed):
        return e
    return PlanError(e.field, e.value, f"{e.allowed} (the recipe states no GPU count: cluster {said} by default; "
                                       "pass --nodes / --gpus-per-node)")


def _fewest_default_nodes(e: PlanError, rec: Any, written: Cluster, args: Mapping[str, Any]) -> Cluster | None:
    """The default cluster widened to the fewest nodes the recipe's parallel degrees fit
    (:func:`node_size.fewest_nodes`: ``tp * cp * pp`` and ``etp * ep * pp`` divide the world, the data-parallel size
    the batch) when ``e`` is a world-size rule broken on the default node of a recipe that states no node count (a
    Megatron-LM functional test's ``model_config.yaml`` of TP 2 x PP 2 x EP 8 on 1 x 8 GPUs: README, "a Megatron
    recipe on the default node ... is projected on the fewest nodes its parallel degrees allow"); None otherwise."""
    if not _nodes_defaulted(rec) or not _WORLD_RULE.search(e.allowed):
        return None

    def deg(key: str, dflt: int) -> int:
        v = args.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else dflt

    tp = deg("tensor_model_parallel_size", 1)
    mbs = deg("micro_batch_size", 1)
    gbs = args.get("global_batch_size") if isinstance(args.get("global_batch_size"), int) else None
    n = fewest_nodes(tp, deg("context_parallel_size", 1), deg("pipeline_model_parallel_size", 1),
                     deg("expert_model_parallel_size", 1), deg("expert_tensor_parallel_size", tp),
                     written.gpus_per_node, mbs, gbs)
    return None if n <= written.num_nodes else written.model_copy(update={"num_nodes": n})


def _say_fitted_nodes(rec: Any, written: Cluster, wider: Cluster) -> None:
    """The default-cluster note (:func:`_default_note`) naming the node count :func:`_fewest_default_nodes` chose."""
    for i, n in enumerate(rec.notes):
        if _DEFAULT_COUNTS.search(n) and f"num_nodes={written.num_nodes}" in n:
            rec.notes[i] = n.replace(f"num_nodes={written.num_nodes}", f"num_nodes={wider.num_nodes} (the fewest "
                                     f"nodes of {wider.gpus_per_node} GPUs its parallel degrees fit)", 1)
            return


def _with_source(plan: Plan, rec: Any, path: str | None, fmt: str, deepep_pin: str | None = None,
                 launch_env: Mapping[str, str] | None = None) -> Plan:
    """``plan`` with its source: the recipe's notes first, then the plan's own; the plan's unmodelled flags,
    then the recipe's (a Megatron-Bridge config's ``unmodelled``; the Megatron-LM recipes have none), then the
    program's (a Pai-Megatron-Patch legacy entry point: :func:`pai_patch.legacy_program`); the HybridEP combine
    chunk (:func:`_with_hybridep_chunk`; ``deepep_pin``: the DeepEP commit the run built, where the recipe text
    does not say it; ``launch_env``: variables the run started with beyond the recipe's own)."""
    src = plan.source or Source(framework="megatron")
    notes = list(getattr(rec, "notes", [])) + [n for n in src.notes if n not in getattr(rec, "notes", [])]
    program = getattr(rec, "program", None)
    legacy = legacy_program(program)
    unmodelled = list(src.unmodelled) + list(getattr(rec, "unmodelled", [])) + ([legacy] if legacy else [])
    from primus_launch.adapters.launch_env_effects import env_unmodelled

    said = {u.flag for u in unmodelled}  # the launch environment's variables that change time (user16)
    unmodelled += [u for u in env_unmodelled({**recipe_env(rec), **(launch_env or {})}) if u.flag not in said]
    plan = _with_hybridep_chunk(plan, rec, notes, deepep_pin, launch_env, fmt == "bridge-yaml")
    return plan.model_copy(update={"source": Source(framework="megatron", path=path, format=fmt,
                                                    unmodelled=unmodelled, notes=notes, program=program,
                                                    fixed=list(dict.fromkeys(src.fixed + program_fixed(program))))})


def _with_hybridep_chunk(plan: Plan, rec: Any, notes: list[str], pin: str | None = None,
                         launch_env: Mapping[str, str] | None = None, bridge: bool = False) -> Plan:
    """``plan`` with the HybridEP combine chunk its recipe states (:func:`hybridep_env.combine_chunk`: the launch
    environment's ``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API``, else the default of the DeepEP build the recipe pins,
    else, on the HybridEP dispatcher, Megatron-Bridge's launcher's 128 for a Bridge config; None: DeepEP's current
    64), and under HybridEP the note saying which appended to ``notes``; ``bridge``: ``rec`` is a Megatron-Bridge
    config."""
    from primus_launch.adapters.hybridep_env import combine_chunk, deepep_pin

    pin = pin or deepep_pin(getattr(rec, "text", "") or "")
    chunk, note = combine_chunk({**recipe_env(rec), **(launch_env or {})}, pin, bridge,
                                plan.training.moe_token_dispatcher == "hybridep")
    if note:
        notes.append(note)
    if chunk == plan.training.moe_hybridep_combine_chunk:
        return plan
    return plan.model_copy(update={"training": plan.training.model_copy(
        update={"moe_hybridep_combine_chunk": chunk})})


def _check_family(rec: Any) -> None:
    """Refuse a recipe whose training program is not a GPT-family decoder (Megatron-LM entry points), a fork's
    run (:mod:`megatron_forks`: Megatron-DeepSpeed, MegaBlocks), and a Megatron-LM command with a word no flag
    takes (:func:`megatron_script.stray_word_problem`)."""
    program = getattr(rec, "program", None)
    fam = program_family(program)
    if fam and fam.startswith("tool: "):
        raise PlanError("training program", program, fam[6:])
    if fam:
        raise PlanError("training program", program, f"trains a {fam}, which the projection does not model "
                                                     "(GPT-family decoders only)")
    fork = fork_problem(getattr(rec, "args", {}))
    if fork is not None:  # Megatron-DeepSpeed's / MegaBlocks' own flags: another engine or MoE layer
        raise fork
    if isinstance(rec, ms.CommandRecipe):
        problem = ms.stray_word_problem(rec.occs)
        # a command naming no model flag gets the 'required' line, unless a blank word (`pretrain_gpt.py \ `) cut it
        if problem is not None and (any(rec.args.get(d) is not None for d in SHAPE_DESTS)
                                    or not str(problem.value).strip() or str(problem.value).startswith("-")):
            crlf = next((n for n in rec.notes if "end in CR LF" in n), None)
            if crlf is not None and "\r" in str(problem.value):  # a '\' then CR: bash passes the CR, ends the command
                raise PlanError("argument", problem.value, "a carriage return Megatron-LM's parser refuses ('unrecognized "
                                                           f"arguments'): {crlf}")
            raise problem


def _hybrid_program_args(rec: Any, args: dict) -> dict:
    """``args`` with ``is_hybrid_model`` set when the training program is a hybrid Mamba stack's entry point
    (``pretrain_mamba.py`` builds a MambaModel whatever the flags; megatron_args.HYBRID_PROGRAMS)."""
    if is_hybrid_program(getattr(rec, "program", None)) and not args.get("is_hybrid_model"):
        return {**args, "is_hybrid_model": True}
    return args


# flags naming a file the run reads at start-up, relative to where it is launched
_RUN_FILES = ("tp_comm_overlap_cfg",)


def _files_from_run_root(args: dict, recipe: Path, downloads: Mapping[str, str] | None = None) -> dict:
    """``args`` with a relative file path that is not found from here looked up next to the recipe and
    in each folder above it: Megatron-LM runs from its checkout's root, and its functional tests name
    their own files from there (``--tp-comm-overlap-cfg tests/functional_tests/test_cases/<case>/
    tp_comm_overlap_cfg.yaml``).  Not found anywhere: left as written (the reader names it).  A tokenizer
    file the script downloads (``downloads``: :func:`megatron_script.downloaded_files`) and that is not on this
    machine is named by its address, which the public-tokenizer table reads (``.../Llama-2-7b-chat-hf/...``)."""
    out = dict(args)
    for dest in ("tokenizer_model", "vocab_file"):
        v = args.get(dest)
        if isinstance(v, str) and v in (downloads or {}) and not os.path.exists(v):
            out[dest] = downloads[v]
    for dest in _RUN_FILES:
        v = args.get(dest)
        if not isinstance(v, str) or not v or Path(v).is_absolute() or os.path.isfile(v):  # False for an impossible name
            continue
        hit = find_from_run_root(v, recipe)
        if hit is not None:
            out[dest] = str(hit)
    return out


def _recipe_args(rec: Any, recipe: Path) -> dict:
    """A parsed recipe's arguments with its files found (:func:`_files_from_run_root`, with the files a script
    downloads; a YAML config has none)."""
    return _files_from_run_root(rec.args, recipe, getattr(rec, "downloads", None))


def load_megatron(path: str | Path, cluster: Cluster | None = None, script_args: tuple[str, ...] | list[str] = (),
                  overrides: Mapping[str, Any] | None = None, script_env: Mapping[str, str] | None = None) -> Plan:
    """Read a Megatron-LM launch script or argument YAML into a plan.

    ``script_args`` are the script's positional parameters (``$1``, ``$2``, ... ``$@``), e.g. the
    tokenizer or data paths of Megatron-LM's example scripts; unset ones stay empty, so the
    script's own defaults (``${2:-MOCK}``) decide.  ``overrides`` (without ``cluster``): partial cluster
    flags completing the cluster the recipe states before the plan is checked (:func:`_parse`).
    ``script_env``: the variables a script is started with (``TP=4 bash x.sh``: a command's prefixes).
    """
    p = Path(path)
    text = read_recipe_text(p)
    rec, written = _parse(text, str(p), given=cluster, script_args=tuple(script_args), overrides=overrides,
                          script_env=script_env)
    _check_family(rec)
    _refuse_config_file_command(rec, written, str(p))
    args = _hybrid_program_args(rec, _recipe_args(rec, p))
    try:
        plan = plan_from_args(args, written, name=p.stem)
    except PlanError as e:  # a world-size rule broken on the default cluster says so (the recipe states none)
        wider = _fewest_default_nodes(e, rec, written, args) if cluster is None else None
        if wider is None:
            raise _on_default_cluster(e, rec) from None
        try:
            plan = plan_from_args(args, wider, name=p.stem)
        except PlanError as e2:  # another rule on the wider world: the default node's refusal; else that rule's
            raise (_on_default_cluster(e, rec) if _WORLD_RULE.search(e2.allowed) else e2) from None
        _say_fitted_nodes(rec, written, wider)
    fmt = rec.format if isinstance(rec, YamlRecipe) else "megatron-bash"
    out = _with_source(plan, rec, str(p), fmt)
    if script_args:
        out.source.script_args = list(script_args)
    if cluster is None and _nodes_defaulted(rec):   # the recipe and the flags state no node count
        out.source.nodes_fitted = True
    return out


#: the option Megatron-Bridge's training scripts take their ConfigContainer YAML by (scripts/training/run_recipe.py,
#: examples/recipes/*/pretrain_*.py: ``--config-file``; Bridge @067f987); Megatron-LM has no such flag
_BRIDGE_CONFIG_FLAGS = ("--config-file", "--config_file")


def _refuse_config_file_command(rec: Any, cluster: Cluster, where: str,
                               overrides: Mapping[str, Any] | None = None) -> None:
    """A training command that names no Megatron-LM model flag but a ``--config-file`` (a Slurm batch script
    running Bridge's ``run_recipe.py --config-file run_config.yaml``) is refused by naming that file and the
    command that projects it on the command's cluster, ``where`` the recipe's name (user18: the refusal said Bridge
    recipes build the model in Python, while a saved run config is read).  ``overrides``: cluster flags the caller
    applies after the read (a command's), put in here."""
    args = getattr(rec, "args", {}) or {}
    if any(args.get(d) is not None for d in SHAPE_DESTS):
        return
    value = next((args[f] for f in _BRIDGE_CONFIG_FLAGS if isinstance(args.get(f), str) and args[f].strip()), None)
    if value is None:
        return
    cfg, *words = value.split()  # the reader joins the words after an unknown flag: Bridge's dotlist overrides
    if not cfg.endswith((".yaml", ".yml")):
        return
    extra = (f"; first write its override words into it ({', '.join(words[:2])}{', ...' if len(words) > 2 else ''})"
             if words else "")
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    cluster = cluster.model_copy(update=given)
    defaulted = [f for f in ("gpu", "num_nodes", "gpus_per_node") if f not in given
                 and any(re.search(rf"\b{f}=[^:]*: the default", n) for n in getattr(rec, "notes", []))]
    said = f" ({', '.join(defaulted)}: the default, the command states none)" if defaulted else ""
    raise UserError(f"{where}: --config-file {cfg}: a Megatron-Bridge run (no Megatron-LM model flag); project that "
                    f"YAML on this cluster: --project {cfg} --gpu {cluster.gpu} --nodes {cluster.num_nodes} "
                    f"--gpus-per-node {cluster.gpus_per_node}{said}{extra}")


def _nodes_defaulted(rec: Any) -> bool:
    """Whether the node count of ``rec``'s cluster is the default cluster's (:func:`_default_note` names
    ``num_nodes``: neither the recipe nor the partial cluster flags state it), also where the recipe means to
    state it and does not (:func:`megatron_bash.unstated_note`: ``#SBATCH --nodes=your_own_num_nodes``, which
    sbatch refuses; Megatron-LM's ``examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh``)."""
    return any(((m := _DEFAULT_COUNTS.search(n)) is not None and "num_nodes=" in m.group(1)) or NODES_FALL_BACK in n
               for n in getattr(rec, "notes", []))


def plan_from_argv(argv: list[str], cluster: Cluster | None = None, deepep_pin: str | None = None,
                   launch_env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None) -> Plan:
    """The plan of a command line (``torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py ...``);
    ``deepep_pin`` / ``launch_env``: the DeepEP commit the run built and the environment it started with (the
    HybridEP combine chunk, :mod:`hybridep_env`; the variables that change time, :mod:`launch_env_effects`);
    ``overrides``: the partial cluster flags the caller applies after (the default-cluster note leaves them out)."""
    rec, written = _parse("\n".join(argv), "argv", argv_mode=True, given=cluster, overrides=overrides)
    _check_family(rec)
    _refuse_config_file_command(rec, written, "the command", overrides)
    plan = plan_from_args(_hybrid_program_args(rec, rec.args), written)
    return _with_source(plan, rec, None, "megatron-argv", deepep_pin, launch_env)


# --------------------------------------------------------------------------- writing
def _normalized(plan: Plan) -> dict:
    """The plan as a re-read rendering gives it back (derived fields filled in), cluster aside."""
    d = plan.model_dump(exclude={"source", "cluster"})
    p, t = d["parallel"], d["training"]
    # HybridEP's combine chunk is the launch environment's (or the DeepEP build's), not an argument: a rendering keeps
    # the original's environment, so the arguments read back cannot state it (_with_hybridep_chunk)
    t["moe_hybridep_combine_chunk"] = None
    t["pipeline_schedule"] = "interleaved_1f1b" if p["vpp"] > 1 else "1f1b"
    r = t["recompute"]
    if r["granularity"] != "full":
        r["method"], r["num_layers"] = "uniform", None
    elif r["num_layers"] is None:
        r["num_layers"] = 1 if r["method"] == "uniform" else max(plan.layers_per_stage()) // p["vpp"]
    if r["granularity"] != "selective":
        r["modules"] = ("core_attn",)
    if p["pp"] == 1:
        p["pipeline_layers_first_stage"] = p["pipeline_layers_last_stage"] = None
        p["account_for_embedding_in_pipeline_split"] = p["account_for_loss_in_pipeline_split"] = False
    if p["pipeline_layout"]:
        p["pipeline_layers_first_stage"] = p["pipeline_layers_last_stage"] = None
        p["account_for_embedding_in_pipeline_split"] = p["account_for_loss_in_pipeline_split"] = False
    if p["etp"] is not None and p["etp"] == p["tp"]:
        p["etp"] = None
    if t["precision"] != "fp8":
        t["fp8_recipe"] = None
    if t["precision"] not in ("fp8", "fp4"):
        t["fp8_param_gather"] = False
    if t["cuda_graph_impl"] == "none":
        t["cuda_graph_scope"] = ()
    p["fsdp_impl"] = effective_fsdp_impl(plan)  # torch FSDP2 only where validate_args takes the plan
    if not t["precision_aware_optimizer"]:
        for k in ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"):
            t[k] = "fp32"
    if not t["precision_aware_optimizer"] or t["precision"] in ("fp8", "fp4") or t["optimizer_fp8_recipe"] == "delayed":
        t["optimizer_fp8_recipe"] = None  # read by the memory model only there (memory.mcore.master_param_bytes)
    if not plan.model.is_moe:
        t["moe_token_dispatcher"] = "alltoall"
    if t["offload"]["optimizer_fraction"] == 0:
        t["offload"]["optimizer_fraction"] = 0.0
    return d


def _changes(rec: Any, old: Plan, new: Plan) -> dict[str, Any]:
    present = frozenset(rec.entries) if isinstance(rec, YamlRecipe) else frozenset(
        o.spec.dest for o in rec.occs if o.spec is not None)
    return changed_args(old, new, rec.args, present)


def _yaml_edits(rec: YamlRecipe, changes: dict[str, Any]) -> list[ms.Edit]:
    edits = []

    def absent(spec: Any, val: Any) -> bool:
        return val is None or (spec.kind == "true" and val is False) or (spec.kind == "false" and val is True)

    removed = frozenset(d for d, v in changes.items() if d in rec.entries and absent(BY_DEST[d], v)
                        and rec.format == "megatron-nvidia-yaml")
    for dest, val in changes.items():
        spec = BY_DEST[dest]
        if dest in removed:
            edits.append(rec.remove_edit(dest))
        elif dest in rec.entries:
            edits.append(rec.set_edit(dest, val, removed))
        elif val is None or val == spec.default or (spec.kind == "true" and not val):
            continue
        else:
            edits.append(rec.set_edit(dest, val, removed))
    return edits


def _cluster_edits(text: str, rec: Any, written: Cluster, target: Cluster, argv_mode: bool) -> list[ms.Edit]:
    edits: list[ms.Edit] = []
    has_launcher = not isinstance(rec, YamlRecipe) and rec.launcher_start() is not None
    if not argv_mode:
        keys = [("gpu", written.gpu, target.gpu)]
        if not has_launcher:
            keys += [("nodes", written.num_nodes, target.num_nodes),
                     ("gpus_per_node", written.gpus_per_node, target.gpus_per_node)]
        for key, old, new in keys:
            if old == new:
                continue
            span = ms.comment_key_span(text, key)
            if span is not None:
                edits.append(ms.Edit(span[0], span[1], str(new)))
            elif key == "gpu" and ms.comment_key_span(text, None) is None:
                at = text.index("\n") + 1 if text.startswith("#!") and "\n" in text else 0
                edits.append(ms.Edit(at, at, f"# primus-launch: gpu={new}\n"))
    if has_launcher:
        # a count the script leaves to its user (an #SBATCH placeholder, an unset variable) is not written here
        unstated = _unstated(rec)
        nodes = target.num_nodes if target.num_nodes != written.num_nodes and 0 not in unstated else None
        per_node = target.gpus_per_node if target.gpus_per_node != written.gpus_per_node and 1 not in unstated else None
        if nodes is not None or per_node is not None:
            edits += ms.launcher_edits(rec, nodes, per_node)
            # the #SBATCH header's counts follow (adapters/sbatch_edit.py)
            edits += [ms.Edit(a, b, v) for a, b, v in sbatch_count_edits(text, target.num_nodes,
                                                                          target.gpus_per_node)]
    return edits


def _unstated(rec: Any) -> set[int]:
    """The launcher counts a script means to state but does not (ms.CommandRecipe.unstated_counts)."""
    return {k for k, _ in rec.unstated_counts()} if isinstance(rec, ms.CommandRecipe) else set()


def _parse_for_render(text: str, path: str, argv_mode: bool, plan: Plan) -> tuple[Any, Cluster]:
    args = tuple(plan.source.script_args) if plan.source else ()
    try:
        rec, written = _parse(text, path, argv_mode, script_args=args)
    except PlanError:  # e.g. --nproc-per-node gpu: the cluster is not written; keep the plan's
        return _parse(text, path, argv_mode, given=plan.cluster, script_args=args)
    return rec, written


def _render_text(plan: Plan, text: str, path: str, argv_mode: bool = False) -> str:
    # one render's readings by text (the original, each pass's, the result read back): a text is parsed once, as
    # nothing here changes a parsed recipe after its reading (the edits are computed from it, applied to the text)
    parsed: dict[str, tuple[Any, Cluster]] = {}

    def read(t: str) -> tuple[Any, Cluster]:
        hit = parsed.get(t)
        if hit is None:
            hit = parsed[t] = _parse_for_render(t, path, argv_mode, plan)
        return hit

    def edits_of(out: str) -> list[ms.Edit]:
        rec, written = read(out)
        current = plan_from_args(_recipe_args(rec, Path(path)), plan.cluster, validate=False)
        if plan.training.fp8_attention and not current.training.fp8_attention and not isinstance(rec, YamlRecipe):
            # a TransformerConfig field: Megatron-LM's arguments.py has no argument for it (its argparse would
            # refuse --fp8-dot-product-attention); only a YAML config carries it
            raise UserError(f"{path}: training.fp8_attention=True cannot be written into a Megatron-LM command line "
                            "(fp8_dot_product_attention has no Megatron-LM argument): use a YAML config")
        changes = _changes(rec, current, plan)
        edits = _yaml_edits(rec, changes) if isinstance(rec, YamlRecipe) else ms.plan_edits(rec, changes)
        return edits + _cluster_edits(out, rec, written, plan.cluster, argv_mode)

    out = ms.edit_to_fixpoint(text, path, edits_of)
    if out != text and not argv_mode:
        out = _with_launch_env(plan, text, out, path, read=lambda t: read(t)[0])
    # verify: the rendering reads back as the requested plan
    rec, written = read(out)
    back = plan_from_args(_recipe_args(rec, Path(path)), plan.cluster)  # validated: Megatron would accept the result
    diffs = _plan_diffs(plan, back)
    has_launcher = not isinstance(rec, YamlRecipe) and rec.launcher_start() is not None
    unstated = _unstated(rec) if has_launcher else set()
    if has_launcher and any(k not in unstated and w != c for k, w, c in (
            (0, written.num_nodes, plan.cluster.num_nodes), (1, written.gpus_per_node, plan.cluster.gpus_per_node))):
        diffs.append("cluster")
    _refuse_diffs(diffs, path, "Megatron recipe")
    return out


def _refuse_diffs(diffs: list[str], path: str, what: str) -> None:
    """The tuned-recipe writers' last check: a rendering that reads back with ``diffs`` (``section.field``
    names, :func:`_plan_diffs`) is refused in one line naming them."""
    if diffs:
        raise UserError(f"{path}: cannot express {', '.join(diffs)} in this {what}")


def write_rendered(plan: Plan, original_path: str | Path, out_path: str | Path, fmt: str,
                   render: Callable[[Plan, str], str]) -> Path:
    """``render(plan, original text)`` written atomically to ``out_path`` (never over the original), the plan's
    source set to the original in format ``fmt``: the YAML-family writers (Bridge run config, NeMo 1.0)."""
    src, dst = Path(original_path), Path(out_path)
    plan = plan.model_copy(update={"source": Source(framework="megatron", path=str(src), format=fmt)})
    return write_beside_original(dst, render(plan, read_recipe_text(src)), src)


def _plan_diffs(plan: Plan, back: Plan) -> list[str]:
    """The ``section.field`` names where ``back`` (a rendering read back) differs from ``plan``, compared as
    :func:`_normalized` (the model's name aside)."""
    want, got = _normalized(plan), _normalized(back)
    want["model"]["name"] = got["model"]["name"]
    return [f"{sec}.{k}" for sec in want for k in want[sec] if want[sec].get(k) != got[sec].get(k)]


def recipe_env(rec: Any) -> dict[str, str]:
    """The launch environment a read recipe sets: a script's exports and ``VAR=value`` prefixes of the
    training command, a YAML's ``ENV_VARS``, a Megatron-Bridge config's ``env_vars``."""
    return rec.env_values() if isinstance(rec, ms.CommandRecipe) else dict(rec.env)


def _with_launch_env(plan: Plan, original: str, text: str, path: str,
                     read: Callable[[str], Any] | None = None) -> str:
    """``text`` (the rendering of ``plan`` from ``original``) with the environment variables that the
    changed knobs need at start-up written into it (plan/legality.py megatron_env_fixes: Megatron-FSDP
    needs CUDA_DEVICE_MAX_CONNECTIONS other than 1, TP > 1 on Hopper needs it 1, fine-grained activation
    offloading NVTE_CPU_OFFLOAD_V1=1): the script's ``export``, the YAML's ``ENV_VARS`` (a Megatron-Bridge
    config's ``env_vars``: ``read`` is its reader, text -> recipe).  A fix the original recipe already
    needed (its own plan in its own environment) is left to its author."""
    if read is None:
        def read(t: str) -> Any:
            return _parse_for_render(t, path, False, plan)[0]
    rec0 = read(original)
    old = plan_from_args(_recipe_args(rec0, Path(path)), plan.cluster, validate=False)
    from primus_launch.projection.hardware.gpus import gpu_arch

    arch = gpu_arch(plan.cluster.gpu)
    before = megatron_env_fixes(old, recipe_env(rec0), arch)
    rec = read(text)
    fixes = {k: v for k, v in megatron_env_fixes(plan, recipe_env(rec), arch).items() if before.get(k) != v}
    if not fixes:
        return text
    edits = ms.env_edits(rec, fixes) if isinstance(rec, ms.CommandRecipe) else rec.env_edits(fixes)
    out = ms.apply_edits(text, edits, path)
    rec = read(out)
    left = [p for p in megatron_env_problems(plan, recipe_env(rec), arch) if p[0].split(" ", 1)[1] in fixes]
    if left:
        var = left[0][0].split(" ", 1)[1]
        where = rec.written_in([ms.Token(rec.env[var])]) if isinstance(rec, ms.CommandRecipe) and rec.env.get(var) else None
        if where is not None:  # set in a sourced fragment after the line written here
            raise rec.elsewhere_error([(where, f"set {var}={fixes[var]}")])
        raise UserError(f"{path}: cannot set the launch environment the plan needs: {str(PlanError(*left[0]))}")
    return out


def render_megatron(plan: Plan, original_text: str) -> str:
    """The recipe text with only the plan's changed values edited (identical text if unchanged)."""
    path = plan.source.path if plan.source and plan.source.path else "<recipe>"
    if path.endswith(_YAML_SUFFIXES) or (not path.endswith((".sh", ".bash", ".slurm", ".sbatch"))
                                         and is_yaml_text(original_text)):
        return render_unshared(original_text, lambda t: _render_text(plan, t, path))
    return _render_text(plan, original_text, path)


def render_argv(plan: Plan, argv: list[str]) -> list[str]:
    """The command line with only the plan's changed values edited."""
    out = _render_text(plan, "\n".join(argv), "argv", argv_mode=True)
    return out.split("\n") if out else []


def write_megatron(plan: Plan, original_path: str | Path, out_path: str | Path) -> Path:
    """Write the rendered recipe atomically to ``out_path`` (never over the original)."""
    src, dst = Path(original_path), Path(out_path)
    text = read_recipe_text(src)
    args = list(plan.source.script_args) if plan.source else []
    plan = plan.model_copy(update={"source": Source(framework="megatron", path=str(src), script_args=args)})
    return write_beside_original(dst, render_megatron(plan, text), src)


# public names for the Megatron-Bridge config reader (bridge_yaml.py): the same cluster and verification rules
stated_cluster = _stated_cluster
plan_diffs = _plan_diffs
refuse_diffs = _refuse_diffs
with_source = _with_source
with_launch_env = _with_launch_env
cluster_edits = _cluster_edits
default_cluster_note = _default_note
files_from_run_root = _files_from_run_root

__all__ = ["load_megatron", "plan_from_argv", "render_megatron", "render_argv", "write_megatron"]
