"""Adapters: native recipes <-> :class:`primus_launch.plan.Plan`.

One module per framework (``megatron``, ``torchtitan``), the Primus experiment YAML (``primus_yaml``:
Megatron or TorchTitan trainers), TorchTitan 0.3 launch lines (``torchtitan_argv``) and the small
primus-launch wrapper TOML (``primus_toml``) that points at a native recipe and names the target
cluster.  This module only dispatches on the file kind; it never interprets framework flags itself.

Kinds, by suffix and content: ``.sh``/``.bash`` holding a ``torchtitan.train --module`` launch line ->
``torchtitan-launch``, scripts whose command names a TorchTitan job TOML (``--job.config_file``:
torchtitan <= 0.2's ``run_train.sh``) -> ``torchtitan-config-script``, other scripts -> ``megatron``; ``.yaml``/``.yml`` with a ``modules:`` mapping of
trainers -> ``primus``, Megatron-Bridge ConfigContainer YAMLs that state the model (``model.num_layers``,
``model.hidden_size``, ``train:``; a saved ``run_config.yaml``) -> ``bridge``, NeMo 1.0 training configs
(top-level ``trainer:`` and ``model:``: the NeMo-Framework-Launcher's ``conf/training``) -> ``nemo1``, other YAMLs -> ``megatron``; ``.toml`` with ``[recipe] path`` -> ``wrapper``,
other TOMLs -> ``torchtitan``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional

from primus_launch.errors import UserError
from primus_launch.plan import Cluster, Plan, PlanError

RecipeKind = Literal["megatron", "torchtitan", "torchtitan-launch", "torchtitan-config-script", "primus", "primus-cli",
                     "wrapper", "bridge", "nemo1"]

SCRIPT_SUFFIXES = frozenset({".sh", ".bash", ".slurm", ".sbatch"})  # the last two: Slurm batch scripts
YAML_SUFFIXES = frozenset({".yaml", ".yml"})


def _text(path: Path) -> str:
    from primus_launch.fileio import read_recipe_text

    return read_recipe_text(path)


def detect_kind(path: Path) -> RecipeKind:
    """Which reader a recipe file needs, from its suffix and its content."""
    suffix = path.suffix.lower()
    if suffix in SCRIPT_SUFFIXES:
        from primus_launch.adapters.torchtitan_script import is_titan_config_script, is_titan_script

        from primus_launch.adapters.primus_cli import is_primus_cli_script

        text = _text(path)
        return "torchtitan-launch" if is_titan_script(text) else \
            "torchtitan-config-script" if is_titan_config_script(text) else \
            "primus-cli" if is_primus_cli_script(text) else "megatron"
    if suffix in YAML_SUFFIXES:
        from primus_launch.adapters.primus_yaml import is_primus_file

        from primus_launch.adapters.bridge_yaml import is_bridge_run_config
        from primus_launch.adapters.nemo_yaml import is_nemo1_config

        text = _text(path)
        return "primus" if is_primus_file(path, text) else "nemo1" if is_nemo1_config(text) else \
            "bridge" if is_bridge_run_config(text) else "megatron"
    if suffix == ".toml":
        from primus_launch.adapters.primus_toml import is_wrapper

        return "wrapper" if is_wrapper(path) else "torchtitan"
    raise UserError(f"recipe={str(path)!r}: unknown recipe kind; expected a launch script (.sh/.bash/.slurm), a Megatron "
                    f"argument YAML or Primus experiment (.yaml/.yml) or a TOML (TorchTitan job or primus-launch)")


#: how the CLI spells each cluster override (the default naming of :func:`load_recipe`'s ``origin``)
CLUSTER_FLAGS = {"gpu": "--gpu", "num_nodes": "--nodes", "gpus_per_node": "--gpus-per-node"}


def cluster_rule_error(e: PlanError, overrides: Optional[dict], origin: Optional[dict[str, str]] = None) -> PlanError:
    """``e`` with the cluster overrides that set the run's cluster named (``--nodes=1``, a wrapper's
    ``[cluster] gpus_per_node=4``; ``origin``: key -> how it was given, default :data:`CLUSTER_FLAGS`) when
    ``e`` is a rule that reads the cluster (world size, dp, nodes, the GPU); else ``e`` itself."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None and k in CLUSTER_FLAGS}
    if not overrides or not re.search(r"world size|\bdp\b|cluster|node|GPU", str(e)):
        return e
    origin = origin or {}
    parts, prev = [], None
    for k in (k for k in CLUSTER_FLAGS if k in overrides):  # one file's keys after its name once:
        label = origin.get(k, CLUSTER_FLAGS[k])            # "w.toml [cluster] nodes=2, gpus_per_node=4"
        head, _, key = label.rpartition(" ")
        parts.append(f"{key if head and head == prev else label}={overrides[k]}")
        prev = head or None
    said = ", ".join(parts)
    rest = [w for k, w in (("num_nodes", "node count"), ("gpus_per_node", "GPUs per node"), ("gpu", "GPU"))
            if k not in overrides]
    return PlanError(e.field, e.value, f"{e.allowed} (cluster from {said}"
                     + (f"; {' and '.join(rest)} from the recipe or its defaults" if rest else "") + ")")


def load_recipe(path: str | Path, cluster_overrides: Optional[dict] = None,
                primus_root: Optional[str | Path] = None, script_args: Optional[list[str]] = None,
                origin: Optional[dict[str, str]] = None, script_env: Optional[dict[str, str]] = None) -> Plan:
    """Read any supported recipe into a validated Plan; ``cluster_overrides`` (gpu, num_nodes,
    gpus_per_node) win over what the recipe or wrapper states, before the plan's legality check (a
    partial set completes the cluster the recipe states); ``primus_root`` locates the Primus
    checkout of a Primus experiment that does not live in one; ``script_args`` are a launch
    script's positional parameters ($1..$N); ``origin`` names where each override came from in a
    rule the final plan breaks (default: the CLI flags, :data:`CLUSTER_FLAGS`); ``script_env``: the variables a
    launch script is started with (``TP=4 bash x.sh``: a command's prefixes; never this process's environment,
    :mod:`primus_launch.adapters.caller_env`)."""
    from primus_launch.inputs import check_written_path

    check_written_path(path)  # `r.sh/`: Path would drop the '/' the kernel refuses
    p = Path(path)
    _text(p)  # the input boundary: a folder, a missing, unreadable, oversized or non-UTF-8 file ends here
    kind = detect_kind(p)
    overrides = {k: v for k, v in (cluster_overrides or {}).items() if v is not None}
    from primus_launch.adapters.node_size import with_node_note

    if kind == "wrapper":
        return with_node_note(load_wrapper(p, overrides, primus_root))
    try:
        return with_node_note(_load_native(p, kind, overrides, primus_root, script_args, script_env))
    except PlanError as e:  # a rule that reads the cluster names the overrides that set it
        named = cluster_rule_error(e, overrides, origin)
        if named is e:
            raise
        raise named from None


def _load_native(p: Path, kind: RecipeKind, overrides: dict, primus_root: Optional[str | Path],
                 script_args: Optional[list[str]], script_env: Optional[dict[str, str]] = None) -> Plan:
    """The reader of ``kind`` on the cluster ``overrides`` make: all of gpu / num_nodes / gpus_per_node, the
    cluster itself (a recipe is validated against its target cluster only); some, completing the cluster
    the recipe states (or, a Primus experiment, the one picked to fit its layout) in the reader's one pass,
    before the plan's legality check."""
    full = Cluster(**overrides) if set(overrides) >= {"gpu", "num_nodes", "gpus_per_node"} else None
    partial = overrides if full is None and overrides else None
    if kind == "megatron":
        from primus_launch.adapters.megatron import load_megatron

        return load_megatron(p, full, tuple(script_args or ()), overrides=partial, script_env=script_env)
    if kind == "bridge":
        from primus_launch.adapters.bridge_yaml import load_bridge_yaml

        return load_bridge_yaml(p, full, overrides=partial)
    if kind == "nemo1":
        from primus_launch.adapters.nemo_yaml import load_nemo1_yaml

        return load_nemo1_yaml(p, full, overrides=partial)
    if kind == "primus":
        from primus_launch.adapters.primus_yaml import load_primus_yaml

        return load_primus_yaml(p, full, primus_root, overrides=partial)
    if kind == "primus-cli":
        from primus_launch.adapters.primus_cli import load_primus_cli_script

        return load_primus_cli_script(p, overrides, primus_root, tuple(script_args or ()), script_env)
    if kind == "torchtitan-launch":
        from primus_launch.adapters.torchtitan_script import load_titan_script

        return load_titan_script(p, overrides, tuple(script_args or ()), script_env)
    if kind == "torchtitan-config-script":
        from primus_launch.adapters.torchtitan_script import load_titan_config_script

        return load_titan_config_script(p, overrides, tuple(script_args or ()), script_env)
    from primus_launch.adapters.torchtitan import load_torchtitan

    return load_torchtitan(p, full, overrides=partial)


def load_wrapper(path: Path, overrides: Optional[dict] = None, primus_root: Optional[str | Path] = None) -> Plan:
    """The plan of the native recipe a primus-launch wrapper TOML points at
    (:func:`primus_launch.adapters.primus_toml.read_wrapper`), on the wrapper's cluster; ``overrides``
    win.  ``[recipe] primus_root`` (relative to the wrapper) locates the Primus checkout of a Primus
    experiment; the ``primus_root`` argument (``--primus-root``) wins over it."""
    from primus_launch.adapters.primus_toml import read_wrapper

    w = read_wrapper(path)
    cluster = {**w.cluster, **(overrides or {})}
    if detect_kind(w.target) == "wrapper":
        raise UserError(f"recipe.path={w.written!r}: must point at a native recipe, not another wrapper")
    origin = {k: f"{path.name} [cluster] {'nodes' if k == 'num_nodes' else k}" for k in w.cluster
              if k not in (overrides or {})}
    plan = load_recipe(w.target, cluster, primus_root if primus_root is not None else w.primus_root, origin=origin)
    if w.framework is not None and plan.framework != w.framework:  # the wrapper insists on a framework
        raise UserError(f"recipe.framework={w.framework!r}: {w.written} is a {plan.framework} recipe; name its "
                        "framework or leave the key out (detected from the file)")
    src = plan.source.model_copy(update={"wrapper_path": str(path)})
    update: dict = {"source": src}
    if w.software:  # [software]: the run's versions (plan/software.py), over the plan's
        from primus_launch.plan import Software

        if w.software.get("torchtitan") and plan.source.format in ("torchtitan-argv", "torchtitan-script"):
            from primus_launch.adapters.titan_newer import check_registry_version
            from primus_launch.adapters.titan_snapshot import snapshot

            check_registry_version(w.software["torchtitan"], str(snapshot().get("torchtitan", "0.3.0")))
        from primus_launch.plan.software import software_notes

        update["software"] = Software(**{**plan.software.model_dump(), **w.software})
        said = software_notes(update["software"], plan.framework)
        if said:
            update["source"] = src.model_copy(update={"notes": [*src.notes, *said]})
    return plan.model_copy(update=update)


def native_path(plan: Plan) -> Path:
    """The native recipe file a plan was read from (the wrapper's target for wrapper TOMLs)."""
    if plan.source is None or plan.source.path is None:
        raise UserError("plan.source: the plan was not read from a recipe file, so there is nothing to write back")
    return Path(plan.source.path)


def tuned_path(original: str | Path) -> Path:
    """``x.sh`` -> ``x.tuned.sh``, ``job.toml`` -> ``job.tuned.toml`` (next to the original)."""
    p = Path(original)
    return p.with_name(f"{p.stem}.tuned{p.suffix}")


def check_writable(plan: Plan) -> None:
    """Refuse, before a tune, a plan whose recipe cannot be written back (a primus-cli launch script; a
    torchtitan launch script called with arguments, which its ``"$@"`` hands to the trainer over the script's
    own options: a tuned script run with them would not run as tuned)."""
    _refuse_cli_script(plan.source.format if plan.source else None)
    if plan.source is not None and plan.source.format == "torchtitan-command-call":
        raise UserError("command: a run_train.sh call is read, not rewritten; tune the torchtitan command it runs "
                        "(primus-launch --tune -- torchrun ... -m torchtitan.train --module M --config C ...)")
    if plan.source is not None and plan.source.framework == "torchtitan" and plan.source.script_args:
        raise UserError(f"script arguments {' '.join(plan.source.script_args)!r}: the launch script hands them to "
                        "torchtitan over its own command (\"$@\"), so they would beat the tuned values; write them "
                        "into the script, or tune the torchtitan command itself (primus-launch --tune -- torchrun ... "
                        "-m torchtitan.train ...)")


def _refuse_cli_script(fmt: Optional[str]) -> None:
    if fmt == "primus-cli-script":
        raise UserError("recipe: a Primus launch (primus-cli ... --config X, EXP=X bash examples/run_pretrain.sh or "
                        "run_slurm_pretrain.sh) is read, not written: its experiment YAML X holds the run and the "
                        "command's overrides beat it; tune the experiment YAML (primus-launch --tune X --nodes N, the "
                        "launch's node count; the command's overrides moved into its modules.pre_trainer.overrides)")


def render_recipe(plan: Plan, original_text: str, primus_root: Optional[str | Path] = None) -> str:
    """The native text of ``plan``: ``original_text`` with only the changed values edited."""
    fmt = plan.source.format if plan.source else None
    fw = plan.source.framework if plan.source else None
    _refuse_cli_script(fmt)
    if fmt == "primus-yaml":
        from primus_launch.adapters.primus_yaml import render_primus_yaml

        return render_primus_yaml(plan, original_text, native_path(plan), primus_root)
    if fmt == "bridge-yaml":
        from primus_launch.adapters.bridge_yaml import render_bridge_yaml

        return render_bridge_yaml(plan, original_text)
    if fmt == "nemo1-yaml":
        from primus_launch.adapters.nemo_yaml import render_nemo1_yaml

        return render_nemo1_yaml(plan, original_text)
    if fmt == "torchtitan-script":
        from primus_launch.adapters.torchtitan_script import render_titan_script

        return render_titan_script(plan, original_text, str(native_path(plan)))
    if fw == "megatron":
        from primus_launch.adapters.megatron import render_megatron

        return render_megatron(plan, original_text)
    if fw == "torchtitan":
        from primus_launch.adapters.torchtitan import render_torchtitan

        return render_torchtitan(plan, original_text)
    raise UserError(f"plan.source.framework={fw!r}: one of megatron, torchtitan")


def write_recipe(plan: Plan, out_path: Optional[str | Path] = None, primus_root: Optional[str | Path] = None) -> Path:
    """Write ``plan`` as a native recipe next to the one it came from (``*.tuned.*`` by default).

    Never writes over the original; the write is atomic (temp file + rename).
    """
    original = native_path(plan)
    out = Path(out_path) if out_path is not None else tuned_path(original)
    fmt = plan.source.format if plan.source else None
    _refuse_cli_script(fmt)
    if fmt == "primus-yaml":
        from primus_launch.adapters.primus_yaml import write_primus_yaml

        return write_primus_yaml(plan, original, out, primus_root)
    if fmt == "bridge-yaml":
        from primus_launch.adapters.bridge_yaml import write_bridge_yaml

        return write_bridge_yaml(plan, original, out)
    if fmt == "nemo1-yaml":
        from primus_launch.adapters.nemo_yaml import write_nemo1_yaml

        return write_nemo1_yaml(plan, original, out)
    if fmt == "torchtitan-script":
        from primus_launch.adapters.torchtitan_script import write_titan_script

        return write_titan_script(plan, original, out)
    fw = plan.source.framework
    if fw == "megatron":
        from primus_launch.adapters.megatron import write_megatron

        return write_megatron(plan, original, out)
    from primus_launch.adapters.torchtitan import write_torchtitan

    return write_torchtitan(plan, original, out)
