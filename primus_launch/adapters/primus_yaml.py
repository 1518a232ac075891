"""AMD Primus experiment YAMLs <-> :class:`Plan`.

A Primus experiment (``examples/<framework>/configs/<GPU>/*.yaml``) names a trainer module::

    modules:
      pre_trainer:
        framework: megatron          # or torchtitan
        config: pre_trainer.yaml     # primus/configs/modules/<framework>/pre_trainer.yaml
        model: llama3.1_8B.yaml      # primus/configs/models/<framework>/llama3.1_8B.yaml
        overrides: {...}             # win over both

and Primus builds the trainer's configuration as follows (facts of ``primus/core/config/yaml_loader.py``,
``merge_utils.py``, ``preset_loader.py`` and ``primus/core/launcher/parser.py``, mirrored here):

1. every YAML file is loaded, then ``${VAR}`` / ``${VAR:default}`` in strings are replaced from the
   environment, else the default (a whole-string result that reads as a bool / int / float becomes
   one); ``${VAR}`` without a default must be set;
2. then its ``extends:`` list (or one name), relative to the file, is resolved recursively and
   deep-merged in order, the file itself last (``deep_merge``: nested mappings merge, anything else
   is replaced); Primus releases before 2025-11-28 (v0.5.0, release/v25.9 and older) chain with ``bases:`` then
   ``includes:`` instead, each listed file adding only the top-level keys not already there
   (:func:`_filled_from`);
3. the module config (``primus/configs/modules/<fw>/<config>``) is the base; module-level keys of
   the experiment other than name/framework/config/model/overrides are kept where the base lacks them;
4. the model preset (``primus/configs/models/<fw>/<model>``) adds only the *top-level keys the
   module config does not have* (``merge_namespace(..., allow_override=False)``); it gets a ``model``
   key naming itself when it has none;
5. ``overrides`` are deep-merged last; every merged value passes ``yaml_utils.set_value_by_key``, which makes the
   exact string ``'null'`` None and types nothing else: a word or a quoted number (``None``, ``"128"``,
   ``${VAR:None}``) reaches Megatron-LM as a string (``MegatronArgBuilder`` coerces enum arguments only) and is
   refused where a number belongs; a null over a TorchTitan ``int`` the plan reads too (merged over the default).

The Primus checkout is the one the file lives in (the first ``primus/configs`` found walking up from
the file), or ``primus_root`` (``--primus-root``: the checkout or its ``primus/configs`` folder).

The merged configuration is then read by the framework's own rules: Megatron arguments through the
Megatron adapter's :func:`~primus_launch.adapters.megatron_args.plan_from_args` (every Megatron flag
rule applies), TorchTitan jobs through :func:`~primus_launch.adapters.torchtitan.plan_from_job`.
Primus-only knobs map to plan fields where they have one (Turbo DeepEP and sync-free MoE stage >= 2
-> ``moe_token_dispatcher="deepep"``, zero-bubble / Primus-pipeline schedules ->
``pipeline_schedule``, ``torch_compile.enable`` -> ``compile``) and are otherwise reported as not
modelled.  The cluster comes from the caller (flags, wrapper TOML); without one, the GPU is guessed
from the config's folder name (``.../MI355X/...``) and the node count is the smallest that fits the
parallel layout at ``--gpus-per-node`` (else 8) GPUs per node, each guessed or defaulted field stated in
``plan.source.notes`` (partial cluster flags set the rest).

Writing edits the experiment file only: values under ``overrides`` are changed in place (comments and
layout kept; for ``${VAR:default}`` the default, unless ``VAR`` is set), missing ones are added to
``overrides``; the rendering is re-read and must give the requested plan.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from primus_launch.adapters.megatron_flags import FALSE_WORDS
from primus_launch.adapters.node_size import fewest_nodes
from primus_launch.adapters.primus_fla import fla_kernel_env, fla_loss
from primus_launch.adapters.yaml_text import entries_after, entry, render_unshared
from primus_launch.errors import UserError
from primus_launch.fileio import atomic_write_text, read_recipe_text
from primus_launch.plan import GPU_NAMES, Cluster, Plan, PlanError, Source, UnmodelledFlag
from primus_launch.plan.sections import normalize_gpu

FRAMEWORKS = ("megatron", "torchtitan")
#: Primus's megatron_bridge backend (``primus/backends/megatron_bridge/config_utils.py`` ``load_recipe_config``, Primus
#: fd1eeab) builds the run's ConfigContainer by calling a Megatron-Bridge recipe function in Python (``recipe`` /
#: ``flavor``, looked up under ``primus.backends.megatron_bridge.recipes`` then ``megatron.bridge.recipes``) with the
#: overrides its signature takes, then merges the rest into the container: the values live in that Python code, not
#: in the YAML.  Megatron-Bridge writes the container it ran as ``run_config.yaml``
#: (``training/utils/checkpoint_utils.py`` ``CONFIG_FILE``, in each checkpoint), which the Bridge reader reads.
MEGATRON_BRIDGE_REFUSAL = (
    "not read: Primus's megatron_bridge backend builds the run's ConfigContainer by calling a Megatron-Bridge recipe "
    "function{flavor} in Python and merging the overrides into it, and primus-launch runs no recipe code; read instead "
    "the run_config.yaml Megatron-Bridge saves with the run's checkpoint (primus-launch --project run_config.yaml), "
    "or a megatron / torchtitan experiment")
_RESERVED = {"name", "framework", "config", "model", "overrides", "params"}

# ----------------------------------------------------------------------------- Primus semantics
_ENV = re.compile(r"\$\{([^:{}]+)(?::([^}]*))?}")
_FLOAT = re.compile(r"^-?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)$")


class CliWord(str):
    """A string a ``primus-cli`` command line gave (:func:`primus_cli.cli_overrides`): the runtime merges it as it is
    (train_runtime.py ``_apply_overrides``: ``deep_merge``, no ``set_value_by_key``), so even ``null`` stays a string."""


def _try_scalar(v: str) -> Any:
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    if re.fullmatch(r"-?\d+", v):
        try:
            return int(v)
        except ValueError:  # past Python's 4,300-digit limit of int(str): left as text, refused by its field's type
            return v
    if _FLOAT.fullmatch(v):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def resolve_env_string(s: str, env: Mapping[str, str], where: str = "") -> Any:
    """Primus ``_resolve_env_in_string``: ``${VAR}`` / ``${VAR:default}``; a changed string is typed."""
    def sub(m: re.Match) -> str:
        var, default = m.group(1), m.group(2)
        if default is None:
            if var not in env:
                raise UserError(f"{where}: ${{{var}}} needs the environment variable {var} (no default given)")
            return env[var]
        return env.get(var, default)

    out = _ENV.sub(sub, s)
    return _try_scalar(out) if out != s else out


def _resolve_env(obj: Any, env: Mapping[str, str], where: str) -> Any:
    if isinstance(obj, dict):
        return {k: _resolve_env(v, env, where) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_resolve_env(v, env, where) for v in obj]
    if isinstance(obj, str):
        return resolve_env_string(obj, env, where)
    return obj


def deep_merge(base: dict, override: dict) -> dict:
    """Primus ``deep_merge``: nested dicts merge recursively, anything else is replaced."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        if k in out and isinstance(out[k], dict) and isinstance(v, dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _load_yaml_text(text: str, where: str) -> Any:
    from primus_launch.inputs import parse_yaml as parse_yaml_text

    return parse_yaml_text(text, "recipe", where)


MAX_EXTENDS_DEPTH = 64     # files in one ``extends`` chain (Primus presets chain a handful)
MAX_EXTENDS_FILES = 256    # ``extends`` entries read for one file, shared bases counted at every use


def parse_yaml(path: Path, env: Mapping[str, str], text: Optional[str] = None, _seen: tuple = (),
               field: str = "recipe", _count: Optional[list[int]] = None) -> dict:
    """Primus ``parse_yaml``: load, resolve ``${...}``, then apply ``extends:`` (relative to the file).
    Files are read through the input boundary (``field`` names the file in its errors: the recipe,
    a preset, an ``extends`` / ``bases`` / ``includes`` file).  A file that extends itself (by any spelling of its path: real
    paths are compared), a chain deeper than :data:`MAX_EXTENDS_DEPTH` and a tree of more than
    :data:`MAX_EXTENDS_FILES` entries (files extending the same base twice, level after level, would
    double the work per level) are refused with one line."""
    where = str(path)
    real = os.path.realpath(path)
    if real in (os.path.realpath(s) for s in _seen):
        raise UserError(f"{where}: extends itself (through {' -> '.join(map(str, _seen))})")
    if len(_seen) >= MAX_EXTENDS_DEPTH:
        raise UserError(f"{_seen[0]}: an extends chain deeper than {MAX_EXTENDS_DEPTH} files (through {_seen[-1]}); "
                        "Primus presets chain a handful")
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > MAX_EXTENDS_FILES:
        raise UserError(f"{_seen[0] if _seen else where}: extends reaches more than {MAX_EXTENDS_FILES:,} files (a "
                        "base extended twice at every level?); Primus presets chain a handful")
    if text is None:
        text = read_recipe_text(path, field)
    cfg = _load_yaml_text(text, where)
    if cfg is None:
        raise UserError(f"{where}: empty YAML file")
    if not isinstance(cfg, dict):
        raise UserError(f"{where}: expected a YAML mapping")
    cfg = _resolve_env(cfg, env, where)
    for key in ("bases", "includes"):  # Primus <= v25.9's inheritance (before 077c0ff0), in its order
        if key in cfg:
            cfg = _filled_from(cfg, key, path, env, _seen, count)
    if "extends" not in cfg:
        return cfg
    ext = cfg["extends"]
    if isinstance(ext, str):
        ext = [ext]
    if not isinstance(ext, list):
        raise UserError(f"{where}: extends={ext!r}: a file name or a list of file names")
    from primus_launch.inputs import file_name

    merged: dict = {}
    for name in ext:
        name = file_name(name, f"{where}: extends", "a YAML file name (relative to the file)")
        merged = deep_merge(merged, parse_yaml(path.parent / name, env, _seen=(*_seen, path), field="extends",
                                               _count=count))
    return deep_merge(merged, {k: v for k, v in cfg.items() if k != "extends"})


def _filled_from(cfg: dict, key: str, path: Path, env: Mapping[str, str], _seen: tuple, count: list[int]) -> dict:
    """``cfg`` with its ``bases:`` / ``includes:`` list applied as Primus <= v25.9 does (``primus/core/utils/
    yaml_utils.py`` ``parse_yaml`` before commit 077c0ff0, 2025-11-28, which replaced both by ``extends:``): each
    listed file, relative to this one and parsed the same way, adds only the top-level keys not already there --
    the file's own keys win, then the earlier listed file's (a shallow fill, not :func:`deep_merge`).  Release
    v25.9 presets chain this way (``llama3.1_8B.yaml`` -> ``llama3_8B.yaml`` -> ``llama3_base.yaml`` ->
    ``llama_base.yaml`` -> ``language_model.yaml``, which ``includes:`` ``primus_megatron_model.yaml``)."""
    names = cfg[key]
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list):
        raise UserError(f"{path}: {key}={names!r}: a list of file names")
    from primus_launch.inputs import file_name

    out = {k: v for k, v in cfg.items() if k != key}
    for name in names:
        name = file_name(name, f"{path}: {key}", "a YAML file name (relative to the file)")
        for k, v in parse_yaml(path.parent / name, env, _seen=(*_seen, path), field=key, _count=count).items():
            out.setdefault(k, v)
    return out


def find_configs_root(path: Path, primus_root: Optional[str | Path] = None) -> Optional[Path]:
    """``primus/configs`` of the Primus checkout ``path`` lives in (or of ``primus_root``)."""
    if primus_root is not None:
        r = Path(primus_root)
        for cand in (r / "primus" / "configs", r / "configs", r):
            if (cand / "modules").is_dir() and (cand / "models").is_dir():
                return cand
        raise UserError(f"--primus-root={str(primus_root)!r}: no primus/configs (with models/ and modules/) there")
    for d in path.resolve().parents:  # the file's folder first
        cand = d / "primus" / "configs"
        if (cand / "modules").is_dir() and (cand / "models").is_dir():
            return cand
        if d.name == "configs" and d.parent.name == "primus" and (d / "modules").is_dir():
            return d
    return None


def is_primus_text(text: str) -> bool:
    """Whether ``text`` is a Primus experiment: a ``modules`` mapping whose entries name a framework."""
    if "modules" not in text:
        return False
    from primus_launch.inputs import parse_yaml as parse_yaml_text

    try:
        data = parse_yaml_text(text)
    except UserError:
        return False
    return _names_a_trainer(data)


def _names_a_trainer(data: Any) -> bool:
    mods = data.get("modules") if isinstance(data, dict) else None
    return isinstance(mods, dict) and any(isinstance(v, dict) and "framework" in v for v in mods.values())


def is_primus_file(path: Path, text: str, env: Optional[Mapping[str, str]] = None) -> bool:
    """Whether the YAML file ``path`` (its ``text``) is a Primus experiment: :func:`is_primus_text`,
    or a file whose top-level ``extends:`` chain (Primus ``parse_yaml``; e.g. Primus's
    ``examples/megatron/configs/MI355X/llama3_8B-BF16-lora-sft.yaml``) merges into one.  ``extends``
    is Primus's key (Megatron-LM's argument YAMLs have none): a chain whose file is missing or
    unreadable, or that names no trainer, is the user's one-line error, not a Megatron YAML."""
    if is_primus_text(text):
        return True
    from primus_launch.inputs import parse_yaml as parse_yaml_text

    try:
        data = parse_yaml_text(text)
    except UserError:
        return False
    if not isinstance(data, dict) or "extends" not in data:
        return False
    merged = parse_yaml(path, os.environ if env is None else env, text=text)
    if not _names_a_trainer(merged):
        raise UserError(f"{path}: extends={data['extends']!r}: the merged files hold no modules.<name>.framework; "
                        "extends is read in Primus experiments only (a Megatron argument YAML has none)")
    return True


@dataclass
class Resolved:
    """A Primus experiment resolved as Primus resolves it."""

    path: Path
    root: Optional[Path]
    module: str  # pre_trainer / post_trainer / ...
    framework: str
    config: dict  # the merged module configuration the trainer gets
    overrides: dict  # the experiment's overrides (env resolved)
    preset: dict  # the model preset chain (resolved)
    baseline: dict  # module defaults + the framework's base model preset: what nothing sets
    notes: list[str] = field(default_factory=list)
    #: key -> (its text in the experiment file, the environment variables it reads with their values) where the
    #: file writes a ``${VAR}`` / ``${VAR:default}`` value: an error names the variable and its value as given
    env_refs: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    #: the environment the recipe starts Primus's trainer in (its launch script's exports, then the experiment's
    #: ``env:`` block): what Primus's runtime patches read from ``os.environ`` (adapters/primus_fla.py)
    launch_env: dict[str, str] = field(default_factory=dict)


def _env_refs(raw: Any, env: Mapping[str, str]) -> dict[str, tuple[str, dict[str, str]]]:
    """The keys of a parsed (unresolved) experiment file whose value is a string with ``${VAR...}`` in it, with the
    variables set in ``env`` (a default used leaves the variable out: the file's text gives the value)."""
    out: dict[str, tuple[str, dict[str, str]]] = {}
    todo = [raw]
    while todo:
        o = todo.pop()
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in items:
            if isinstance(v, str) and _ENV.search(v):
                if isinstance(k, str):
                    out[k] = (v, {m.group(1): env[m.group(1)] for m in _ENV.finditer(v) if m.group(1) in env})
            elif isinstance(v, (dict, list)):
                todo.append(v)
    return out


def _module_of(exp: dict, where: str) -> tuple[str, dict]:
    mods = exp.get("modules")
    if not isinstance(mods, dict) or not mods:
        raise UserError(f"{where}: not a Primus experiment: no modules mapping (expected modules.pre_trainer with "
                        "framework, config and model)")
    for name in ("pre_trainer", "post_trainer", *mods):
        m = mods.get(name)
        if isinstance(m, dict) and "trainer" in name:
            return name, m
    raise UserError(f"{where}: modules.{next(iter(mods))}: Primus runs *trainer modules (pre_trainer, post_trainer)")


def _preset(root: Path, kind: str, fw: str, name: Any, env: Mapping[str, str], where: str) -> dict:
    from primus_launch.inputs import file_name

    key = "config" if kind == "modules" else "model"
    fname = file_name(name, f"{where}: modules.*.{key}", f"a {kind} preset file name")
    if not fname.endswith((".yaml", ".yml")):
        fname += ".yaml"
    p = root / kind / fw / fname
    if not p.resolve().is_relative_to(root.resolve()):
        raise UserError(f"{where}: {kind} preset {name!r}: outside {root}")
    if not p.is_file():
        raise UserError(f"{where}: modules.*.{key}={name!r}: no such preset "
                        f"{p}")
    return parse_yaml(p, env, field=f"{kind} preset")


_BASE_MODEL = {"megatron": "language_model.yaml"}


def resolve(path: Path, text: Optional[str] = None, primus_root: Optional[str | Path] = None,
            env: Optional[Mapping[str, str]] = None, cli: Optional[dict] = None) -> Resolved:
    """Resolve a Primus experiment as Primus's ``PrimusParser`` does (see the module docstring);
    ``cli``: the ``train pretrain --config X --key value`` overrides of a ``primus-cli`` command, merged
    last (Primus docs/02-user-guide/configuration-system.md, "Merge priority": CLI overrides >
    modules.pre_trainer.overrides > presets)."""
    from primus_launch.inputs import duplicate_keys, read_text

    env = os.environ if env is None else env
    where = str(path)
    text = text if text is not None else read_text(path, "recipe")  # read once: parsed, then checked for duplicates
    exp = parse_yaml(path, env, text=text)
    name, mod = _module_of(exp, where)
    fw = mod.get("framework")
    if fw == "megatron_bridge":  # read22: why, and what is read instead
        over = mod.get("overrides") if isinstance(mod.get("overrides"), dict) else {}
        flavor = over.get("flavor") or mod.get("flavor")
        raise PlanError(f"modules.{name}.framework", fw, MEGATRON_BRIDGE_REFUSAL.format(
            flavor=f" ({flavor})" if isinstance(flavor, str) else ""))
    if fw not in FRAMEWORKS:
        raise PlanError(f"modules.{name}.framework", fw, f"primus-launch reads {', '.join(FRAMEWORKS)} trainers")
    overrides = mod.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise UserError(f"{where}: modules.{name}.overrides: expected a mapping")
    if cli:
        overrides = deep_merge(overrides, cli)
    has_cfg, has_model = "config" in mod, "model" in mod
    root = find_configs_root(path, primus_root)
    # a key given twice: Primus's yaml.safe_load keeps the last, without a word (as Megatron YAMLs are noted)
    notes = [f"{key}: given twice (lines {a} and {b}); the last is read" for key, a, b in duplicate_keys(text)]
    refs = _env_refs(_load_yaml_text(text, where), env)
    if not has_cfg:  # an exported (already flattened) module: the module itself is the configuration
        cfg = {k: v for k, v in mod.items() if k not in _RESERVED}
        cfg = deep_merge(cfg, overrides)
        return Resolved(path, root, name, fw, cfg, overrides, {}, {}, notes, refs)
    if not has_model:
        raise UserError(f"{where}: modules.{name}: a config without a model preset")
    if root is None:
        raise UserError(f"{where}: the Primus presets ({mod['config']}, {mod['model']}) live in a Primus checkout's "
                        "primus/configs; none was found above the file: pass --primus-root DIR")
    cfg = _preset(root, "modules", fw, mod["config"], env, where)
    for k, v in mod.items():
        if k not in _RESERVED and not k.startswith("_") and k not in cfg:
            cfg[k] = v
    preset = _preset(root, "models", fw, mod["model"], env, where)
    model_cfg = dict(preset)
    if "model" not in model_cfg:
        model_cfg["model"] = mod["model"]
    cfg = deep_merge(cfg, {k: v for k, v in model_cfg.items() if k != "name" and k not in cfg})
    baseline = dict(cfg)
    base_name = _BASE_MODEL.get(fw)
    if base_name and (root / "models" / fw / base_name).is_file():
        base = parse_yaml(root / "models" / fw / base_name, env, field="models preset")
        baseline = deep_merge(_preset(root, "modules", fw, mod["config"], env, where),
                              {k: v for k, v in base.items() if k != "name"})
    else:
        baseline = _preset(root, "modules", fw, mod["config"], env, where)
    cfg = deep_merge(cfg, overrides)
    return Resolved(path, root, name, fw, cfg, overrides, preset, baseline, notes, refs)


def _settings(r: Resolved) -> dict:
    """What the experiment and its model preset set (keys whose value differs from the baseline)."""
    out = {}
    for src in (r.preset, r.overrides):
        for k, v in src.items():
            if k in ("extends", "model", "name"):
                continue
            if r.baseline.get(k, _MISS) != r.config.get(k, _MISS) or k in r.overrides:
                out[k] = r.config.get(k)
    return out


_MISS = object()

# ----------------------------------------------------------------------------- cluster


def gpu_from_folder(path: Path) -> Optional[tuple[str, str]]:
    """(GPU name, folder) when a folder above the config names a GPU (``.../MI355X/x.yaml``)."""
    for d in path.resolve().parents:
        g = normalize_gpu(d.name)
        if g in GPU_NAMES:
            return g, d.name
    return None


def _reference_gpus_per_node(gpu: str) -> int:
    """The GPU's reference node size (``GPUSpec.gpus_per_node``: 8 for an MI300X / MI355X platform, 4 for a GB200
    tray), 8 for a GPU the database does not hold (refused elsewhere, naming it)."""
    from primus_launch.projection.hardware.gpus import get_gpu

    try:
        return get_gpu(gpu).gpus_per_node
    except Exception:  # noqa: BLE001
        return 8


def default_cluster(path: Path, degrees: tuple[int, int, int, int, int], mbs: Optional[int], gbs: Optional[int],
                    notes: list[str], overrides: Optional[Mapping[str, Any]] = None) -> Cluster:
    """The cluster of a Primus config (which states none): partial cluster flags ``overrides`` first; the GPU
    from the folder name; ``--gpus-per-node``, else the GPU's reference node size (8 on an AMD platform), per node;
    ``--nodes``, else the smallest node count the
    layout fits on that many GPUs per node.  One note per field that is not the user's (a guess or a default)."""
    o = dict(overrides or {})
    hit = gpu_from_folder(path)
    if "gpu" not in o:
        notes.append(f"cluster.gpu={hit[0]}: guessed from the folder name {hit[1]!r}" if hit else
                     "cluster.gpu=mi300x: the config names no GPU (give --gpu)")
    gpu = o.get("gpu") or (hit[0] if hit else "mi300x")
    gpn = o.get("gpus_per_node") or _reference_gpus_per_node(gpu)
    tp, cp, pp, ep, etp = degrees
    n = o.get("num_nodes") or fewest_nodes(tp, cp, pp, ep, etp, gpn, mbs, gbs)
    if "num_nodes" not in o:
        notes.append(f"cluster: {n} node(s) x {gpn} GPUs, the smallest node count that fits the parallel layout "
                     "(Primus configs do not state the node count; give --nodes"
                     + (" / --gpus-per-node" if "gpus_per_node" not in o else "") + " or a wrapper TOML)")
    elif "gpus_per_node" not in o:
        notes.append(f"cluster: {gpn} GPUs per node, the default (Primus configs do not state it; give "
                     "--gpus-per-node or a wrapper TOML)")
    return Cluster(**{**o, "gpu": gpu, "num_nodes": n, "gpus_per_node": gpn})


def _cluster_first(notes: list[str]) -> list[str]:
    """``notes`` with the cluster's (:func:`default_cluster`: the GPU guessed from the folder, the node count fitted)
    first: the one-screen answer shows the first notes that fit, and a DeepSeek-V3 experiment 'tuned for 32N' was
    projected on the 16 nodes fitted with that note cut off behind the Megatron reader's longer ones."""
    return [n for n in notes if n.startswith("cluster")] + [n for n in notes if not n.startswith("cluster")]


def _vocab_key(e: PlanError, module: str) -> PlanError:
    """The vocabulary refusal naming this file's key: Primus builds Megatron's arguments from the module's
    config and ``overrides`` (``vocab_size``), not from a command line."""
    from primus_launch.adapters.megatron_args import ADD_VOCAB_SIZE

    if ADD_VOCAB_SIZE not in str(e.allowed):
        return e
    return PlanError(e.field, e.value, str(e.allowed).replace(
        ADD_VOCAB_SIZE, f"add vocab_size: N under modules.{module}.overrides"))


def _on_fitted_nodes(e: PlanError, cluster: Cluster, fitted: bool) -> PlanError:
    """``e`` saying where the node count came from when it was fitted (:func:`default_cluster`) and ``e`` reads the
    cluster (data-parallel size, world size): 'dp = 2 x 8' alone does not tell the user that the 8 is a guess."""
    if not fitted or not re.search(r"world size|\bdp\b|data.parallel", e.allowed):
        return e
    return PlanError(e.field, e.value, f"{e.allowed} (on {cluster.num_nodes} node(s) x {cluster.gpus_per_node} GPUs, "
                     "the fewest the parallel degrees fit: Primus configs do not state the node count; give --nodes)")


# ----------------------------------------------------------------------------- Megatron trainers
# Primus-only knobs of the Megatron trainer (primus/configs/modules/megatron/*.yaml): how each is read
_TURBO_KERNELS = {
    "use_turbo_attention": "attention", "use_turbo_gemm": "GEMM",
    "use_turbo_rms_norm": "RMSNorm", "use_turbo_fused_act_with_probs": "fused MoE activation",
    "use_turbo_mega_moe": "fused MegaMoE layer", "enable_turbo_attention_float8": "FP8 attention",
    "use_turbo_norm_te_linear": "RMSNorm + TE linear",
    "turbo_grouped_gemm_without_padding": "unpadded grouped GEMM"}
# Primus-Turbo MoE knobs read into the plan (with enable_primus_turbo): the grouped GEMM (training.moe_expert_gemm =
# turbo: one kernel over the experts, priced on the Primus-Turbo grouped-GEMM records), the fused router with aux
# score (training.moe_router_fusion: one fused top-k / score / aux-loss kernel per pass)
_TURBO_MOE = ("use_turbo_grouped_gemm", "use_turbo_grouped_mlp", "moe_use_fused_router_with_aux_score")
_PRIMUS_UNMODELLED = {
    "cpu_offload": (False, "memory and time: Primus pipeline CPU offload"),
    "offload": (False, "memory and time: Primus pipeline activation offload"),
    "offload_ops": ("", "memory and time: Primus pipeline offload of these ops"),
    "offload_chunk_num": (0, "memory and time: Primus pipeline offload chunks"),
    "num_seq_splits": (1, "memory and time: sequence split into chunks in the Primus pipeline"),
    "interleave_group_size": (0, "time: Primus interleave group size"),
    "decoder_pipeline_manual_split_list": (None, "memory and time: a manual split of layers over pipeline stages"),
    "turbo_deepep_num_cu": (32, "time: CUs given to Turbo DeepEP"),
    "turbo_deepep_use_comm_stream": (False, "time: Turbo DeepEP on its own stream"),
    "patch_moe_overlap": (False, "time: Primus MoE communication/computation overlap"),
    "zero_bubble_v_schedule_mem_setup": ("half", "memory: zero-bubble V schedule memory setup"),
    "zero_bubble_max_pending_backward": ("auto", "memory: pending backward passes of the zero-bubble schedule"),
    "turbo_gemm_backend": ("default", "time: Primus-Turbo GEMM backend"),
    "turbo_grouped_gemm_backend": ("default", "time: Primus-Turbo grouped GEMM backend"),
    "use_turbo_autotune": (False, "time: Primus-Turbo GEMM autotuning"),
    "pp_max_mem": (None, "memory: zero-bubble heuristic memory cap"),
    # primus/backends/megatron/core/transformer/moe/router.py: an in-place Triton tanh soft-cap over the router
    # logits (logits_processor.py fused_softcap); final_ / attn_logit_softcapping are read by no Megatron module of
    # Primus's backend (only its configs name them): neutral
    "router_logit_softcapping": (None, "time: router logits soft-capped in place (one Triton pass over the "
                                       "[tokens, experts] logits per MoE layer, small)"),
    # primus/backends/megatron/patches/empty_cache_interval_patches.py: with empty_unused_memory_level >= 1 (itself
    # reported), torch.cuda.empty_cache() before the optimizer step every N iterations (0 = never) instead of each
    "empty_cache_interval": (1, "time: torch.cuda.empty_cache() before the optimizer step every N iterations instead "
                                "of each (with empty_unused_memory_level >= 1; the allocator's re-growth not priced)"),
    # primus/backends/megatron/patches/args/hsdp_args_patches.py: > 1 needs use_torch_fsdp2 and makes FSDP2's mesh
    # (dp_replicate, dp_shard): HSDP, the gradients all-reduced across the replicas
    "data_parallel_replicate_degree": (1, "time, memory: HSDP (torch FSDP2 sharded within dp / N ranks, replicated "
                                          "N ways; gradients all-reduced over the replicas) priced as FSDP over the "
                                          "whole DP group"),
}
_PRIMUS_MAPPED = {"recompute_layer_ids", "no_fp8_weight_transpose_cache", "enable_primus_turbo", "use_turbo_deepep",
                  "moe_router_force_load_balancing_type",
                  "turbo_sync_free_moe_stage", "patch_zero_bubble", "enable_zero_bubble", "zero_bubble_v_schedule", "enable_1f1b_v", "patch_primus_pipeline",
                  "pp_algorithm", "torch_compile", "enable_zb_runtime",
                  "fused_ce_mode", "fused_ce_chunks"}  # training.loss_impl / loss_chunks (adapters/primus_fla.py)
# Megatron / Primus keys with no effect on step time or memory (numerics, logging, data, checkpoints)
_NEUTRAL_RE = re.compile(
    r"^(lr|min_lr|lr_.*|.*_lr|weight_decay.*|start_weight_decay|end_weight_decay|adam_.*|sgd_.*|clip_grad|"
    r"init_method.*|seed|.*log.*|tensorboard.*|wandb.*|mlflow.*|.*tracelens.*|save.*|load|no_load_.*|no_save_.*|"
    r"ckpt_.*|.*checkpoint.*|finetune|auto_continue_train|disable_last_saving|.*data_path|data_.*|mock_data|split|"
    r"tokenizer_.*|vocab_file|merge_file|eval_.*|exit_.*|test_mode|profile.*|.*profiler.*|use_rocm_mem_info.*|"
    r"eod_mask_loss|reset_.*|norm_epsilon|rotary_base|rotary_percent|rotary_.*|rope_.*|use_rope_scaling|"
    r"moe_aux_loss_coeff|moe_z_loss_coeff|moe_router_load_balancing_type|moe_router_score_function|"
    r"moe_router_topk_scaling_factor|moe_router_pre_softmax|moe_router_dtype|moe_router_bias_update_rate|"
    r"moe_input_jitter_eps|moe_per_layer_logging|mtp_loss_scaling_factor|"
    r"distributed_timeout_minutes|num_workers|dataloader_.*|stderr_sink_level|file_sink_level|sink_level|"
    r"work_group|user_name|exp_name|workspace|train_samples|.*_interval|.*_iters?|train_iters|"
    r"attention_softmax_in_fp32|apply_query_key_layer_scaling|.*_stats|use_legacy_models|deprecated_.*|"
    r"trainable|disable_.*|yaml_cfg|spec|check_for_.*|fp8_margin|fp8_amax_.*|fp8_interval|fp8_wgrad|"
    r"initial_loss_scale|min_loss_scale|loss_scale.*|hysteresis|weight_deosc.*|mxfp4_gradient_stochastic_rounding|"
    r"pp_warmup|dump_pp_data|debug_scheduler_table|pp_cost_.*|zero_bubble_pipeline_timers_.*|"
    r"zero_bubble_adaptive_memory_limit_percentile|enable_optimizer_post_validation|enable_exactly_numeric_match|"
    r"communication_method|pre_communication_optimization|profile_memory_iter|offload_time|auto_offload_time|"
    r"offload_overlap_sr|model_type|make_vocab_size_divisible_by|original_max_position_embeddings|"
    r"max_position_embeddings|trust_remote_code|legacy_tokenizer|tiktoken_.*|vocab_extra_ids|"
    r"override_opt_param_scheduler|use_checkpoint_.*|decoupled_.*|batch_size|onnx_safe|bert_binary_head|"
    r"data_parallel_random_init|init_model_with_meta_device|use_flash_attn|full_validation|multiple_validation_sets|"
    r"num_dataset_builder_threads|mmap_bin_files|object_storage_.*|s3_.*|msc_.*|async_save|ckpt_.*|"
    r"use_dist_ckpt|dist_ckpt_.*|non_persistent_.*|pretrained_checkpoint|use_persistent_ckpt_worker|"
    r"retro_.*|heterogeneous_.*|hybrid_.*_ratio|.*_seed|te_rng_tracker|inference_.*|straggler_.*|"
    r"enable_ft_package|calc_ft_timeouts|run_workload_inspector_server|enable_one_logger|one_logger_.*|"
    r"app_tag_run_.*|log_.*|timing_log_.*|barrier_with_l1_time|result_rejected_tracker_filename|"
    r"rerun_mode|enable_gloo_process_groups|error_injection_.*|qk_l2_norm|kitchen_.*|use_kitchen|"
    r"num_experts_per_tok|moe_extended_tp|moe_use_upcycling|moe_token_drop_policy|moe_expert_capacity_factor|"
    r"moe_pad_expert_input_to_capacity|norm_.*|exit_signal_handler|decrease_batch_size_if_needed|"
    r"rampup_batch_size|sequence_packing|stage|model)$")


def _megatron_status(key: str) -> str:
    """``modelled`` (read by the Megatron adapter), ``primus`` (a Primus knob), ``neutral`` or ``unmodelled``."""
    from primus_launch.adapters.megatron_args import BY_DEST, YAML_ALIASES

    if key in BY_DEST or key in YAML_ALIASES:
        return "modelled"
    if key in _PRIMUS_MAPPED or key in _TURBO_KERNELS or key in _TURBO_MOE or key in _PRIMUS_UNMODELLED:
        return "primus"
    if _NEUTRAL_RE.match(key):
        return "neutral"
    return "unmodelled"


def _table_flag(key: str) -> Any:
    """The Megatron-LM flag a key names (megatron_flags table), or None (a Primus-only or unknown key)."""
    from primus_launch.adapters.megatron_flags import lookup

    return lookup(key) if not key.startswith("-") else None


def _is_megatron_default(flag: Any, value: Any) -> bool:
    from primus_launch.adapters.megatron_flags import STANDARD_VALUES, is_default

    if value is None:
        return True
    if flag.kind in ("true", "false", "boolopt", "const") and isinstance(value, bool):
        return is_default(flag, value)
    if isinstance(value, list) and flag.flag in STANDARD_VALUES:  # spec: [module, name] of the stock TE stack
        return is_default(flag, value)
    if isinstance(value, (list, dict)):
        return False
    return is_default(flag, value)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))[:120]
    return str(v)


def _schedule(cfg: dict, pp: int, vpp: int, notes: list[str]) -> Optional[tuple[str, int]]:
    """(plan schedule, vpp) of Primus's zero-bubble / Primus-pipeline patches, or None (Megatron's own)."""
    if pp <= 1:
        return None
    if cfg.get("patch_primus_pipeline"):
        alg = str(cfg.get("pp_algorithm", "1f1b-interleaved"))
        table = {"1f1b": ("1f1b", 1), "1f1b-interleaved": ("interleaved_1f1b", vpp), "zero-bubble": ("zb_h1", 1),
                 "zero-bubble-heuristic": ("zb_h1", 1), "zbv-formatted": ("zbv", 2), "v-half": ("zbv", 2),
                 "v-min": ("zbv", 2)}
        if alg not in table:
            raise PlanError("pp_algorithm", alg, f"one of {', '.join(table)}")
        if alg in ("v-half", "v-min", "zero-bubble-heuristic"):
            notes.append(f"pp_algorithm={alg}: projected as {table[alg][0]} (its memory-limited variant is not "
                         "modelled)")
        return table[alg]
    if cfg.get("patch_zero_bubble"):
        if cfg.get("zero_bubble_v_schedule") or cfg.get("enable_1f1b_v"):
            if cfg.get("enable_1f1b_v") and not cfg.get("zero_bubble_v_schedule"):
                notes.append("enable_1f1b_v: 1F1B-V projected as the ZB-V schedule (the V placement is the same)")
            return "zbv", 2
        if cfg.get("enable_zero_bubble"):
            return "zb_h1", vpp
    return None


_MODEL_TYPES = {"deepseek_v4": "DeepSeek-V4 (its own Primus model builder: compressed sparse attention)",
                "kimi_k3": "Kimi-K3 (its own Primus model builder)"}


def _sync_free_stage(cfg: dict) -> int:
    """Primus-Turbo sync-free MoE stage in effect (0 without ``enable_primus_turbo``)."""
    return int(cfg.get("turbo_sync_free_moe_stage") or 0) if cfg.get("enable_primus_turbo") else 0


def _stage_implied(stage: int) -> dict[str, Any]:
    """Megatron arguments a sync-free MoE stage sets over the config (Primus
    ``rocm_arg_validation._get_sync_free_moe_options``: stage >= 1 turns on ``moe_permute_fusion`` and
    ``moe_use_fused_router_with_aux_score``; stage >= 2 adds ``use_turbo_deepep`` and ``use_turbo_grouped_gemm``)."""
    return {"moe_permute_fusion": True} if stage >= 1 else {}


def _implied_args(cfg: dict) -> dict[str, Any]:
    """Megatron arguments the Primus knobs imply (reader and writer alike): the sync-free stage's
    (:func:`_stage_implied`) and the fused router (:func:`_turbo_moe`) as ``moe_router_fusion``."""
    stage = _sync_free_stage(cfg)
    out = _stage_implied(stage)
    if _turbo_moe(cfg, stage).get("moe_router_fusion"):
        out["moe_router_fusion"] = True
    return out


#: use_turbo_grouped_mlp with moe_grouped_gemm but not moe_use_legacy_grouped_gemm: release/v25.9 trainer.py patches
#: only the legacy GroupedMLP (TE's grouped GEMM runs), release/v25.10 / v26.1 grouped_mlp_modules assert it off,
#: release/v26.3 takes it as use_turbo_grouped_gemm (PrimusGroupedMLP)
_TURBO_MLP_OFF_LEGACY = ("time: read as TE's grouped GEMM (Primus release/v25.9; v25.10 - v26.1 refuse the key "
                         "without moe_use_legacy_grouped_gemm); Primus v26.3 runs it as the Turbo grouped GEMM "
                         "(use_turbo_grouped_gemm: true says so)")


def _turbo_moe(cfg: dict, stage: int) -> dict[str, Any]:
    """Plan fields of Primus-Turbo's MoE knobs (``_TURBO_MOE``) and sync-free stage (with ``enable_primus_turbo``):
    ``use_turbo_grouped_gemm`` or stage >= 2 -> ``moe_expert_gemm = turbo``; the fused router with aux score or
    stage >= 1 -> ``moe_router_fusion``; stage >= 2 -> ``moe_sync_free`` (Primus
    ``core/extensions/primus_turbo.py`` ``PrimusTurboDeepEPTokenDispatcher``: "enable sync-free moe to eliminate
    deepep cpu busy-wait": ``deepep_num_worst_tokens`` set and the per-expert token counts left on the device for
    the Turbo grouped GEMM, ``deepep_use_cuda_num_tokens_per_expert``)."""
    if not cfg.get("enable_primus_turbo"):
        return {}
    out: dict[str, Any] = {}
    # use_turbo_grouped_mlp, the grouped MLP's older name (HEAD's rocm_arg_validation.py refuses it): release/v25.9
    # trainer.py, v25.10 / v26.1 grouped_mlp_modules (transformer_engine_spec_provider.py) run PrimusTurboGroupedMLP
    # on the legacy grouped-GEMM path, moe_grouped_gemm with moe_use_legacy_grouped_gemm; off that path the key
    # means a different thing by release (_TURBO_MLP_OFF_LEGACY), reported, not read
    mlp = cfg.get("use_turbo_grouped_mlp") and cfg.get("moe_grouped_gemm") and cfg.get("moe_use_legacy_grouped_gemm")
    if cfg.get("use_turbo_grouped_gemm") or stage >= 2 or mlp:
        out["moe_expert_gemm"] = "turbo"
    if cfg.get("moe_use_fused_router_with_aux_score") or stage >= 1:
        out["moe_router_fusion"] = True
    if stage >= 2:
        out["moe_sync_free"] = True
    return out


def _refuse_families(cfg: dict) -> None:
    """Refuse (one line) a merged configuration that sets a Megatron flag selecting a model family the
    projection does not model (``experimental_attention_variant: gated_delta_net`` of Qwen3.5 / Qwen3-Next,
    T5 encoder layers, ...; hybrid Mamba stacks are read: ``model_type: mamba``): the Megatron flag table's
    ``refused`` class, applied to the keys Primus passes to Megatron as it does to a script's flags."""
    from primus_launch.adapters.megatron_flags import REFUSED, is_default, lookup

    lfm = cfg.get("lfm_layer_types")
    if isinstance(lfm, list) and any(t != "full_attention" for t in lfm):
        kinds = {t: lfm.count(t) for t in dict.fromkeys(lfm)}
        raise PlanError("lfm_layer_types", ", ".join(f"{t} x{n}" for t, n in kinds.items()),
                        "an LFM2 hybrid (short-convolution and attention layers, Primus gpt_layer_specs): not modelled "
                        "(primus-launch models decoder-only GPT models; all full_attention reads as one)")
    for k, v in cfg.items():
        f = lookup(k) if isinstance(k, str) else None
        if f is not None and f.cls == REFUSED and not is_default(f, v):
            raise PlanError(k, v if not isinstance(v, list) else " ".join(map(str, v)),
                            f"{f.note}: not modelled (primus-launch models decoder-only GPT models)")


#: Primus's hybrid layer-spec module (``primus/backends/megatron/core/models/hybrid/hybrid_mamba_mla_layer_specs.py``,
#: fd1eeabb / 84035edc): its stacks are Primus's ``HybridStack`` (``hybrid_block.py``); which mixer sits in the
#: Mamba slots depends on the stack's name
PRIMUS_HYBRID_SPEC_MODULE = "primus.backends.megatron.core.models.hybrid.hybrid_mamba_mla_layer_specs"
#: stacks of that module whose Mamba slots hold Mamba-2 mixers (``MambaLayer`` / ``Mamba2HybridLayer`` over
#: megatron-core's ``MambaMixer``), MLA attention (``MLASelfAttention``) and ``MLPLayer`` s
PRIMUS_MAMBA_HYBRID_STACKS = ("hybrid_stack_spec", "mamba_hybrid_stack_spec_no_te")
#: the others: their Mamba slots are linear-attention mixers the projection does not model
PRIMUS_OTHER_HYBRID_STACKS = {"gdn": "Gated DeltaNet (GatedDeltaNetLayer)", "kda": "Kimi Delta Attention "
                              "(KimiDeltaAttentionLayer)"}


def _spec_name(spec: Any) -> tuple[str, str] | None:
    """(module, name) of a Primus ``spec`` value (``[module, name]`` or ``"module.name"``), else None."""
    if isinstance(spec, (list, tuple)) and len(spec) == 2:
        return str(spec[0]), str(spec[1])
    if isinstance(spec, str) and "." in spec:
        mod, _, name = spec.strip("[]'\" ").rpartition(".")
        return mod, name
    return None


def primus_hybrid_stack_pattern(num_layers: int, attention_ratio: float) -> str:
    """The layer symbols Primus's ``HybridStack`` builds when megatron-core hands it no layer list (Primus
    ``primus/backends/megatron/core/models/hybrid/hybrid_block.py`` ``HybridStack.allocate_layers``, fd1eeabb): the
    ``num_layers`` Megatron layers are mixer / MLP pairs -- ``A = int(num_layers // 2 x ratio)`` attention mixers,
    ``M = num_layers // 2 - A`` Mamba mixers, each mixer followed by an MLP ('-'); with ratio <= 0.5 the block
    ``*- (M-) x (M // A)`` repeated A times, then ``(M % A)`` more ``M-``; above 0.5 ``*-`` x (A - M) then
    ``*-M-`` x M; no attention: ``M-`` x (num_layers // 2).  ``hybrid_mlp_ratio`` is ignored, as the code says.
    Megatron-LM d3528a2 (Primus's pin) no longer has ``--hybrid-attention-ratio`` and its ``mamba_builders.py``
    passes only ``hybrid_layer_pattern`` to ``MambaModel``: without a pattern ``select_pipeline_segment`` gives an
    empty list and the stack falls back to this allocation (``if layer_type_list: ... else: allocate_layers``)."""
    half = num_layers // 2
    n_attn = int(half * attention_ratio)
    n_mamba = half - n_attn
    if n_attn == 0:
        return "M-" * half
    if attention_ratio <= 0.5:
        return ("*-" + "M-" * (n_mamba // n_attn)) * n_attn + "M-" * (n_mamba % n_attn)
    return "*-" * (n_attn - n_mamba) + "*-M-" * n_mamba


#: Primus's pure-Mamba spec (``primus/backends/megatron/core/models/mamba/mamba_layer_specs.py`` ``mamba_stack_spec``):
#: its ``MambaStack`` (``mamba_block.py``, fd1eeabb) takes a layer list megatron-core hands it, else
#: ``[LayerSymbols.MAMBA] * config.num_layers`` -- every layer Mamba, whatever ratio the YAML carries
PRIMUS_MAMBA_SPEC = ("primus.backends.megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec")


def _primus_hybrid_stack(cfg: dict, args: dict[str, Any]) -> None:
    """A ``model_type: mamba`` experiment whose ``spec`` is one of Primus's stacks and that gives no layer pattern
    (megatron-core then hands the stack an empty list, :func:`primus_hybrid_stack_pattern`): the stack's own
    allocation as ``hybrid_override_pattern`` -- Primus's ``mamba_stack_spec`` every layer Mamba
    (:data:`PRIMUS_MAMBA_SPEC`), the Mamba-2 stacks of its hybrid spec module mixer / MLP pairs; the Gated DeltaNet /
    KDA stacks of that module are refused (their mixers sit in the Mamba slots and are not Mamba-2)."""
    sn = _spec_name(cfg.get("spec"))
    if sn is None or sn[0] not in (PRIMUS_HYBRID_SPEC_MODULE, PRIMUS_MAMBA_SPEC[0]):
        return
    name = sn[1]
    if sn == PRIMUS_MAMBA_SPEC:
        if not any(args.get(k) not in (None, "", "None") for k in ("hybrid_override_pattern", "hybrid_layer_pattern")) \
                and isinstance(args.get("num_layers"), int) and args["num_layers"] > 0:
            args["hybrid_override_pattern"] = "M" * args["num_layers"]
            args.pop("hybrid_attention_ratio", None)
            args.pop("hybrid_mlp_ratio", None)
        return
    if sn[0] != PRIMUS_HYBRID_SPEC_MODULE:
        return
    for key, what in PRIMUS_OTHER_HYBRID_STACKS.items():
        if name.startswith(key):
            raise PlanError("spec", f"{sn[0]}.{name}", f"a {what} hybrid: not modelled (its linear-attention mixers "
                            f"sit in the Mamba slots); the Mamba-2 stacks are {' / '.join(PRIMUS_MAMBA_HYBRID_STACKS)}")
    if name not in PRIMUS_MAMBA_HYBRID_STACKS:
        return
    if any(args.get(k) not in (None, "", "None") for k in ("hybrid_override_pattern", "hybrid_layer_pattern")):
        return  # megatron-core parses the pattern into the list the stack uses as it is
    layers = args.get("num_layers")
    if not isinstance(layers, int) or layers <= 0:
        return
    ratio = cfg.get("hybrid_attention_ratio") or 0.0
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 <= ratio <= 1.0:
        raise PlanError("hybrid_attention_ratio", ratio, "a number from 0 to 1 (the attention share of the mixers)")
    pattern = primus_hybrid_stack_pattern(layers, float(ratio))
    if len(pattern) != layers:
        raise PlanError("num_layers", layers, f"an even number with spec {name} (Primus's HybridStack builds "
                        f"num_layers // 2 mixer / MLP pairs: {len(pattern)} layers)")
    args["hybrid_override_pattern"] = pattern
    args.pop("hybrid_attention_ratio", None)
    args.pop("hybrid_mlp_ratio", None)


def recompute_layer_ids(cfg: dict) -> Optional[tuple[int, ...]]:
    """Primus ``recompute_layer_ids`` of a merged Megatron configuration, normalised and validated as
    Primus does (``primus/backends/megatron/patches/recompute_layer_patches.py``
    ``validate_specified_recompute_layers``): a comma-separated string or a list of ints -> sorted
    unique ids; not empty; each in ``0 .. num_layers + mtp_num_layers - 1`` (the MTP depths follow the
    decoder layers); ``recompute_granularity: full`` and ``recompute_method: null``; not with
    ``distribute_saved_activations`` and sequence parallelism.  None when unset (null)."""
    raw = cfg.get("recompute_layer_ids")
    if raw is None:
        return None
    def layer_id(x: Any) -> int:  # a whole number: 1.5, inf, nan or true is no layer (int() read 1.5 as 1, raised on inf)
        if isinstance(x, int) and not isinstance(x, bool):
            return x
        if isinstance(x, str):
            return int(x.strip())
        raise ValueError(x)

    try:
        if isinstance(raw, str):
            ids = [layer_id(x) for x in raw.split(",") if x.strip()]
        elif isinstance(raw, (list, tuple)):
            ids = [layer_id(x) for x in raw]
        else:
            ids = [layer_id(raw)]
    except (TypeError, ValueError):
        raise PlanError("recompute_layer_ids", _fmt(raw), "a comma-separated string or a list of layer ids "
                        "(integers)") from None
    ids = sorted(set(ids))
    if not ids:
        raise PlanError("recompute_layer_ids", _fmt(raw), "must not be empty (Primus raises)")
    L = int(cfg.get("num_layers") or 0)
    mtp = int(cfg.get("mtp_num_layers") or 0)
    top = L + mtp - 1
    for i in ids:
        if i < 0 or i > top:
            raise PlanError("recompute_layer_ids", i, f"between 0 and {top} (0..{L - 1} are decoder layers"
                            + (f", {L}..{top} are the {mtp} MTP depths)" if mtp else ")"))
    if cfg.get("recompute_granularity") != "full":
        raise PlanError("recompute_granularity", _fmt(cfg.get("recompute_granularity")),
                        "full when using recompute_layer_ids (Primus raises)")
    if cfg.get("recompute_method") is not None:
        raise PlanError("recompute_method", _fmt(cfg.get("recompute_method")),
                        "null when using recompute_layer_ids (Primus raises)")
    if cfg.get("distribute_saved_activations") and cfg.get("sequence_parallel"):
        raise PlanError("distribute_saved_activations", "true", "false when sequence_parallel is on with "
                        "recompute_layer_ids (Primus raises)")
    return tuple(ids)


def primus_training_changes(cfg: dict) -> dict[str, Any]:
    """Plan ``training`` fields of Primus-only Megatron settings (a merged configuration, or just those keys):
    ``no_fp8_weight_transpose_cache: true`` -> ``fp8_weight_transpose_cache`` False (Primus
    ``patches/te_patches/{linear,layernorm_linear}_fp8_cache_patches.py`` build TELinear /
    TELayerNormColumnParallelLinear with ROCm TE's ``keep_fp8_weight_transpose_cache=False``)."""
    out: dict[str, Any] = {}
    if cfg.get("no_fp8_weight_transpose_cache"):
        out["fp8_weight_transpose_cache"] = False
    return out


def _refuse_fine_tuning(cfg: dict) -> None:
    """Refuse Primus fine-tuning (``primus/configs/modules/megatron/sft_trainer.yaml``: ``stage: sft``,
    optionally ``lora.enabled``): LoRA freezes the base weights (no weight gradients or optimizer state
    for them) and SFT packs / masks sequences, neither of which the plan models; Megatron-LM's own
    ``--sft`` loop is refused the same way (megatron_flags, group ``sft``)."""
    lora = cfg.get("lora")
    if (isinstance(lora, dict) and lora.get("enabled")) or lora is True:
        dim = lora.get("dim") if isinstance(lora, dict) else None
        raise PlanError("lora.enabled", True, f"LoRA fine-tuning (frozen base weights{f', rank {dim}' if dim else ''})"
                        ": not modelled (primus-launch projects full-parameter pretraining)")
    if cfg.get("stage") == "sft":
        raise PlanError("stage", "sft", "supervised fine-tuning (Primus sft_trainer: packed, loss-masked "
                        "sequences): not modelled (primus-launch projects pretraining)")


def _megatron_plan(r: Resolved, cluster: Optional[Cluster], overrides: Optional[Mapping[str, Any]] = None) -> Plan:
    """The plan of a Megatron module (:func:`_megatron_plan_of`); a refused value is named by the experiment's key
    (:func:`_as_written`)."""
    try:
        return _megatron_plan_of(r, cluster, overrides)
    except (PlanError, UserError) as e:
        raise _as_written(e, r) from None


def _key_of(name: str, cfg: Mapping[str, Any]) -> Optional[str]:
    """The experiment key a Megatron flag (``--num-experts``) or destination is read from: a key of ``cfg`` whose
    destination (:data:`~primus_launch.adapters.megatron_args.YAML_ALIASES`) it is; None where none is."""
    from primus_launch.adapters.megatron_args import YAML_ALIASES

    from primus_launch.adapters.megatron_args import BY_FLAG

    flag = BY_FLAG.get(name) if name.startswith("--") else None  # --fp8-format is read into fp8
    dest = flag.dest if flag else name[2:].replace("-", "_") if name.startswith("--") else name
    keys = [k for k in cfg if YAML_ALIASES.get(k, k) == dest]
    return keys[0] if keys else None


def _flags_as_keys(text: str, cfg: Mapping[str, Any]) -> str:
    """``text`` with each Megatron flag it names (``--pipeline-model-parallel-size``) spelled as the experiment's key
    that sets it (``pipeline_model_parallel_size``), where the configuration holds one; other words kept."""
    return re.sub(r"(?<![\w-])--[a-z][a-z0-9-]*", lambda m: _key_of(m.group(0), cfg) or m.group(0), text)


def _as_written(e: Exception, r: Resolved) -> Exception:
    """``e`` naming the experiment's key in place of the Megatron flag it maps to (``--moe-router-num-groups=3`` ->
    ``moe_router_num_groups=3``), where the configuration holds that value; a value from the environment names its
    variable and the variable's value as given (``PRIMUS_TP=1e400`` was shown as 'inf')."""
    text = str(e)
    name = e.field if isinstance(e, PlanError) else (m.group(1) if (m := re.match(r"(--[\w-]+)=", text)) else None)
    key = _key_of(name, r.config) if name else None
    if key is None:  # a compound name or one the configuration does not hold: its flags as the keys that set them
        if isinstance(e, PlanError):
            field, allowed = _flags_as_keys(e.field, r.config), _flags_as_keys(e.allowed, r.config)
            return e if (field, allowed) == (e.field, e.allowed) else PlanError(field, e.value, allowed)
        spelled = _flags_as_keys(text, r.config)
        return e if spelled == text else UserError(spelled)
    rest = text[len(name) + 1:]  # "<value>: <allowed>"
    value, sep, allowed = rest.partition(": ")
    held = r.config.get(key)
    if isinstance(e, PlanError):
        value, allowed = e.value, e.allowed
        if held != value and str(held) != str(value):
            return e
    allowed = _flags_as_keys(allowed, r.config)
    raw, used = r.env_refs.get(key, ("", {}))
    if raw:
        raw = raw if len(raw) <= 200 else f"{raw[:60]}... ({len(raw):,} characters)"
        from_env = ", ".join(f"{var}={val!r}" for var, val in used.items())
        src = f"{key}: {raw} with {from_env} from the environment" if used else f"{key}: {raw}"
        return UserError(f"{src}: {allowed}")
    if isinstance(e, PlanError):
        return PlanError(key, value, allowed)
    return UserError(f"{key}={value}: {allowed}") if sep else e


def _megatron_plan_of(r: Resolved, cluster: Optional[Cluster], overrides: Optional[Mapping[str, Any]] = None) -> Plan:
    from primus_launch.adapters.megatron_args import BY_DEST, NULL_MEANS_FALSE, YAML_ALIASES, convert, plan_from_args
    from primus_launch.adapters.megatron_flags import check_value, config_only_flags

    config_only = config_only_flags()

    cfg = r.config
    mt = cfg.get("model_type") or "gpt"
    # model_type mamba: Primus runs Megatron-LM's pretrain_mamba.py model provider (megatron_pretrain_trainer.py), a
    # hybrid Mamba stack whatever is_hybrid_model says (without a pattern megatron-core allocates one from the ratios)
    hybrid = mt == "mamba"
    hyb_keys = [k for k in ("is_hybrid_model", "hybrid_override_pattern", "hybrid_layer_pattern")
                if cfg.get(k) not in (None, False, "", "None")]
    if not hybrid and mt == "gpt" and hyb_keys:
        # Primus's GPT provider builds no Mamba layers; its hybrids under model_type gpt are the gated delta-net /
        # KDA linear-attention stacks (primus/backends/megatron/patches/gdn_config_patches.py, kimi_k3), whose layers
        # are not Mamba-2: refused rather than read as a Mamba stack
        k = hyb_keys[0]
        raise PlanError(k, cfg[k], "a hybrid stack under model_type gpt (Primus's gated delta-net / KDA linear-"
                        "attention hybrids): not modelled; a Mamba-2 hybrid is model_type: mamba")
    if mt not in ("gpt", "mamba"):  # Primus builds these with their own model providers (primus/backends/megatron)
        why = _MODEL_TYPES.get(str(mt)) or ("a diffusion model (Primus FLUX / diffusion builder)" if re.match(
            r"flux|diffusion", str(mt)) else f"a model_type={mt} model")
        raise PlanError("model_type", mt, f"{why}: not modelled (primus-launch models decoder-only GPT models)")
    _refuse_families(cfg)
    _refuse_fine_tuning(cfg)
    layer_ids = recompute_layer_ids(cfg)
    args: dict[str, Any] = {}
    notes = list(r.notes)
    for k, v in cfg.items():
        key = YAML_ALIASES.get(k, k)
        spec = BY_DEST.get(key)
        if spec is None:
            continue
        if spec.flag in config_only:
            # primus/backends/megatron/argument_builder.py MegatronArgBuilder.update keeps only Megatron-LM's argparse
            # destinations ("Non-Megatron parameters are silently ignored"); these TransformerConfig fields have none
            continue
        if spec.kind in ("true", "false") and isinstance(v, str) and v and v.strip().lower() in FALSE_WORDS:
            # `bf16: 'false'`: Primus passes the string into Megatron-LM's namespace as it is (its argument
            # builder coerces enum arguments only), where `if args.bf16:` takes it as true (the word says false;
            # a ${VAR:false} default is made a boolean by Primus's own _try_scalar)
            raise PlanError(k, v, "true or false, unquoted (a string is no boolean: Primus passes it to Megatron-LM "
                                  "as it is, where a non-empty string is true)")
        if spec.kind in ("int", "float") and isinstance(v, str) and (v != "null" or isinstance(v, CliWord)):
            # `global_batch_size: None` / `"128"` / `${GBS:None}`: Primus hands a string to Megatron-LM as it is
            # (argument_builder.py MegatronArgBuilder.update coerces enum arguments only; yaml_loader.py _try_scalar
            # types a ${VAR:...} result as bool / int / float only), where its arithmetic fails (arguments.py
            # validate_args `assert args.global_batch_size > 0`); only the exact string 'null' becomes None
            # (yaml_utils.py set_value_by_key, on every merged module value; not on a command line's: CliWord)
            what = "an integer" if spec.kind == "int" else "a number"
            raise PlanError(spec.flag, v, f"{what}, or None for the default (primus-cli keeps any other word a string, "
                            "which reaches Megatron-LM as it is, and fails)" if isinstance(v, CliWord) else
                            f"{what} unquoted, or null for the default (a string reaches Megatron-LM as it is from "
                            "Primus, and fails)")
        val = convert(spec, v)
        if val is not None:
            args[key] = val
        elif key in NULL_MEANS_FALSE and k in cfg:   # megatron_args.NULL_MEANS_FALSE: null is off
            args[key] = False
            notes.append(f"{key}: null overrides Megatron-LM's default (true) in Primus (argument_builder.py) and "
                         f"is false where training.py tests it: read as false")
    if layer_ids is not None:  # Megatron alone refuses full without a method: read as uniform/1, then replaced
        args.update(recompute_method="uniform", recompute_num_layers=1)
    unmod: list[UnmodelledFlag] = []
    settings = _settings(r)
    for k, v in settings.items():
        f = _table_flag(k)
        if f is not None and f.flag in config_only:  # no argparse destination: Primus drops it (above)
            if not _is_megatron_default(f, (not v) if f.kind == "false" and isinstance(v, bool) and k != f.dest else v):
                notes.append(f"{k}: {_fmt(v)} not read: a TransformerConfig field with no Megatron-LM argument, "
                             f"which Primus's MegatronArgBuilder drops (the run keeps the default)")
            continue
        st = _megatron_status(k)
        f = f if st in ("neutral", "unmodelled") else None
        if f is not None:  # a Megatron flag: the flag table's class decides, as for scripts (report_args)
            check_value(f, v, k)  # a value Megatron-LM would refuse: one line naming the key
            dv = (not v) if f.kind == "false" and k != f.dest and isinstance(v, bool) else v  # `no_x: true`
            if f.cls != "neutral" and not _is_megatron_default(f, dv):
                unmod.append(UnmodelledFlag(flag=k, value=_fmt(v), effect=f.note))
            continue
        if st == "unmodelled" and v not in (None, False, ""):
            unmod.append(UnmodelledFlag(flag=k, value=_fmt(v), effect="not read by the Megatron adapter: may change "
                                                                      "time or memory"))
    turbo = bool(cfg.get("enable_primus_turbo"))
    for k, what in _TURBO_KERNELS.items():
        if turbo and cfg.get(k):
            unmod.append(UnmodelledFlag(flag=k, value="true", effect=f"time: Primus-Turbo {what} kernels "
                                                                     "(kernel efficiency not modelled)"))
    for k, (default, effect) in _PRIMUS_UNMODELLED.items():
        if k in cfg and cfg[k] not in (default, None) and (k not in ("turbo_deepep_num_cu", "turbo_deepep_use_comm_stream",
                                                                      "turbo_gemm_backend", "turbo_grouped_gemm_backend",
                                                                      "use_turbo_autotune") or turbo):
            unmod.append(UnmodelledFlag(flag=k, value=_fmt(cfg[k]), effect=effect))
    stage = _sync_free_stage(cfg)
    if turbo and cfg.get("use_turbo_grouped_mlp") and cfg.get("moe_grouped_gemm") \
            and not cfg.get("moe_use_legacy_grouped_gemm") and _turbo_moe(cfg, stage).get("moe_expert_gemm") != "turbo":
        unmod.append(UnmodelledFlag(flag="use_turbo_grouped_mlp", value="true", effect=_TURBO_MLP_OFF_LEGACY))
    deepep = turbo and (bool(cfg.get("use_turbo_deepep")) or stage >= 2)
    args.update(_implied_args(cfg))
    if hybrid:
        args["is_hybrid_model"] = True
        _primus_hybrid_stack(cfg, args)
    if stage >= 3:
        unmod.append(UnmodelledFlag(flag="turbo_sync_free_moe_stage", value=str(stage),
                                    effect="time: Primus-Turbo fused MoE activation with probs (stage 3; stages 1-2 "
                                           "are modelled: fused router / permutation, Turbo DeepEP and grouped GEMM "
                                           "without host synchronisation)"))

    def num(key: str, default: int) -> int:
        v = args.get(key, default)
        return v if isinstance(v, int) and v > 0 else default

    tp, pp, cp = num("tensor_model_parallel_size", 1), num("pipeline_model_parallel_size", 1), \
        num("context_parallel_size", 1)
    ep = num("expert_model_parallel_size", 1)
    etp = args.get("expert_tensor_parallel_size") or tp
    nodes_fitted = cluster is None and "num_nodes" not in (overrides or {})
    if cluster is None:
        cluster = default_cluster(r.path, (tp, cp, pp, ep, etp), args.get("micro_batch_size"),
                                  args.get("global_batch_size"), notes, overrides)
    preset = cfg.get("model")
    from primus_launch.adapters.megatron_args import SHAPE_DESTS

    if all(args.get(d) is None for d in SHAPE_DESTS):  # Megatron-LM's "required" would name a flag nobody wrote
        raise UserError(f"{r.path}: modules.{r.module}: no model ({', '.join(SHAPE_DESTS)} unset); give model: "
                        "<a Primus models/megatron preset> with config:, or the model's keys under overrides")
    try:
        plan = plan_from_args(args, cluster, name=Path(preset).stem if isinstance(preset, str) else r.path.stem)
    except PlanError as e:
        raise _on_fitted_nodes(_vocab_key(e, r.module), cluster, nodes_fitted) from None
    upd: dict[str, dict] = {"training": {}, "parallel": {}}
    if layer_ids is not None:
        upd["training"]["recompute"] = dict(granularity="full", method="layer_ids", num_layers=None,
                                            modules=("core_attn",), layer_ids=layer_ids)
    if deepep and plan.model.is_moe:
        upd["training"]["moe_token_dispatcher"] = "deepep"
    balance = cfg.get("moe_router_force_load_balancing_type")  # Primus >= 253b3322 (2026-07-16); absent before
    if plan.model.is_moe and plan.training.moe_router_force_load_balancing and balance in (None, "even") \
            and (deepep or plan.training.moe_token_dispatcher != "deepep"):
        # Turbo DeepEP routes forced balance round robin (PrimusTurboDeepEPTokenDispatcher.dispatch_preprocess;
        # since 253b3322 only with moe_router_force_load_balancing_type "even", its default: "uniform" keeps
        # Megatron's random logits); set whatever the dispatcher read: a Primus plan is written back with
        # ``use_turbo_deepep`` whenever the tuner makes it ``deepep``, and the field takes effect only then
        # (moe_imbalance.forced_round_robin).  Megatron's own DeepEP (moe_enable_deepep without Turbo DeepEP)
        # is not Turbo's dispatcher: random logits (Primus's router skips its round robin under it).
        upd["training"]["moe_force_round_robin"] = True
        if balance == "even" and not deepep:
            unmod.append(UnmodelledFlag(flag="moe_router_force_load_balancing_type", value="even", effect=(
                "time: Primus's router (since 253b3322, router.py _force_even_routing) routes forced balance round "
                "robin under the all-to-all dispatcher too; priced as Megatron's random logits there")))
    upd["training"].update(primus_training_changes(cfg))
    loss_impl, loss_chunks, why = fla_loss(cfg, r.launch_env, hybrid)
    if loss_impl != "framework":
        upd["training"].update(loss_impl=loss_impl, loss_chunks=loss_chunks)
    if why:
        notes.append(why)
    if loss_impl == "fla_linear" and plan.parallel.tp > 1:
        notes.append(f"tensor parallel {plan.parallel.tp}: Primus hands FLA this rank's vocabulary shard of the output "
                     "weight (and, with sequence parallelism, its sequence shard) with no vocabulary-parallel "
                     "reduction; projected on those local shapes")
    for var, val, effect in fla_kernel_env(r.launch_env):
        unmod.append(UnmodelledFlag(flag=var, value=val, effect=f"{effect} (Primus FLA runtime knob, launch "
                                                                 "environment)"))
    if plan.model.is_moe:
        upd["training"].update(_turbo_moe(cfg, stage))
    tc = cfg.get("torch_compile")
    if isinstance(tc, dict) and tc.get("enable"):
        upd["training"]["compile"] = True
    sched = _schedule(cfg, plan.parallel.pp, plan.parallel.vpp, notes)
    if sched is not None:
        upd["training"]["pipeline_schedule"], vpp = sched
        if vpp != plan.parallel.vpp:
            upd["parallel"]["vpp"] = vpp
    src = Source(framework="megatron", path=str(r.path), format="primus-yaml", nodes_fitted=nodes_fitted,
                 unmodelled=list((plan.source.unmodelled if plan.source else [])) + unmod,
                 notes=_cluster_first([_flags_as_keys(n, cfg) for n in (plan.source.notes if plan.source else [])]
                                      + notes))
    if upd["training"] or upd["parallel"]:
        plan = plan.with_changes(**{k: v for k, v in upd.items() if v})
    return plan.model_copy(update={"source": src})


# ----------------------------------------------------------------------------- TorchTitan trainers
_TT_PRIMUS_TURBO = {"use_turbo_attention": "attention", "use_turbo_mx_linear": "MX linear",
                    "use_turbo_float8_linear": "FP8 linear", "use_turbo_grouped_mm": "grouped GEMM",
                    "use_turbo_async_tp": "async TP collectives", "enable_attention_float8": "FP8 attention",
                    "use_classic_attention": "classic attention"}


#: the TorchTitan number keys the plan reads (torchtitan v0.2.2 types them ``int``, not ``int | None``)
_TITAN_READ_NUMBERS = ("training.local_batch_size", "training.global_batch_size", "training.seq_len", "training.steps",
                       "parallelism.tensor_parallel_degree", "parallelism.pipeline_parallel_degree",
                       "parallelism.context_parallel_degree", "parallelism.data_parallel_shard_degree",
                       "parallelism.data_parallel_replicate_degree", "parallelism.expert_parallel_degree")


def _refuse_titan_nulls(job: Mapping[str, Any]) -> None:
    """Refuse ``local_batch_size: null`` (or ``'null'``, which ``set_value_by_key`` makes None) in a TorchTitan module:
    Primus merges the None over TorchTitan's default (backends/torchtitan/argument_builder.py
    ``TorchTitanJobConfigBuilder.update``: ``deep_merge``, no typing), and the ``int`` field fails in the trainer
    (``global_batch_size < 0``, ``local_batch_size * dp``); it was read as the default.  A TOML cannot write null."""
    from primus_launch.adapters.titan_job_types import job_data

    types = job_data()["types"]
    for path in _TITAN_READ_NUMBERS:
        if types.get(path) not in ("int", "float"):
            continue
        *up, leaf = path.split(".")
        node: Any = job
        for part in up:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node and node[leaf] is None:
            raise PlanError(path, "null", "an integer: Primus puts null over TorchTitan's default (its job-config "
                            "builder merges it as it is) and the int field fails in the trainer; leave the key out "
                            "for the default")


def _torchtitan_plan(r: Resolved, cluster: Optional[Cluster], overrides: Optional[Mapping[str, Any]] = None) -> Plan:
    from primus_launch.adapters.torchtitan import leaf_paths, plan_from_job

    job = r.config
    notes = list(r.notes)
    unmod: list[UnmodelledFlag] = []
    pt = job.get("primus_turbo") or {}
    if isinstance(pt, dict) and pt.get("enable_primus_turbo"):
        kernels = [what for k, what in _TT_PRIMUS_TURBO.items() if pt.get(k)]
        if kernels:
            unmod.append(UnmodelledFlag(flag="primus_turbo", value=",".join(k for k in _TT_PRIMUS_TURBO if pt.get(k)),
                                        effect=f"time: Primus-Turbo kernels ({', '.join(kernels)}); kernel efficiency "
                                               "not modelled"))
        if pt.get("use_turbo_grouped_mm") and pt.get("use_moe_fp8", True):
            unmod.append(UnmodelledFlag(flag="primus_turbo.use_moe_fp8", value="true",
                                        effect="time: MoE expert GEMMs in FP8 (Primus-Turbo grouped_mm)"))
    set_paths = [p for p, _ in leaf_paths({k: v for k, v in {**r.preset, **r.overrides}.items()
                                           if k not in ("primus_turbo", "extends", "name")})]
    set_paths = [p for p in set_paths if p.split(".", 1)[0] not in ("sink_level", "file_sink_level",
                                                                   "stderr_sink_level")]
    _refuse_titan_nulls(job)
    nodes_fitted = cluster is None and (overrides or {}).get("num_nodes") is None
    if cluster is None:
        par = job.get("parallelism") or {}
        g = lambda k: par.get(k) if isinstance(par.get(k), int) and par.get(k) > 0 else 1  # noqa: E731
        cluster = default_cluster(r.path, (g("tensor_parallel_degree"), g("context_parallel_degree"),
                                           g("pipeline_parallel_degree"), 1, 1), None, None, notes, overrides)
    return plan_from_job(job, cluster, path=str(r.path), fmt="primus-yaml", set_paths=set_paths, notes=notes,
                         unmodelled=unmod, nodes_fitted=nodes_fitted)


# ----------------------------------------------------------------------------- reading
def plan_from_text(text: str, path: str | Path, cluster: Optional[Cluster] = None,
                   primus_root: Optional[str | Path] = None, env: Optional[Mapping[str, str]] = None,
                   cli: Optional[dict] = None, overrides: Optional[Mapping[str, Any]] = None,
                   launch_env: Optional[Mapping[str, str]] = None) -> Plan:
    """The plan of a Primus experiment's text (``path`` locates ``extends`` and the Primus checkout;
    ``cli``: command-line overrides, see :func:`resolve`), on ``cluster``, else the one picked to fit its
    layout (:func:`default_cluster`) completed by partial cluster flags ``overrides``.  ``launch_env``: the
    variables the recipe's launch states (a launch script's exports, a command's ``NAME=value`` words), under
    the experiment's own ``env:`` block (:attr:`Resolved.launch_env`); never this process's environment."""
    r = resolve(Path(path), text, primus_root, env, cli)
    r.launch_env = {**{str(k): str(v) for k, v in (launch_env or {}).items()}, **experiment_env(text)}
    said = comment_cluster_fields(text) if cluster is None else {}
    said = {k: v for k, v in said.items() if k not in (overrides or {})}
    if said:
        overrides = {**said, **dict(overrides or {})}
    plan = _megatron_plan(r, cluster, overrides) if r.framework == "megatron" else \
        _torchtitan_plan(r, cluster, overrides)
    plan = _with_env_effects(plan, r.launch_env, te=r.framework == "megatron")
    if said and plan.source is not None:
        names = {"num_nodes": "nodes"}  # as the comment writes them
        shown = " ".join(f"{names.get(k, k)}={v}" for k, v in said.items())
        plan.source.notes.insert(0, f"cluster {shown}: from the file's '# primus-launch:' comment (give --gpu / "
                                    "--nodes / --gpus-per-node for another)")
    return plan


def _with_env_effects(plan: Plan, env: Mapping[str, str], te: bool) -> Plan:
    """``plan`` with the launch environment's variables that change time and are not modelled
    (``launch_env_effects``: the experiment's ``env:`` and the launch's own) among its unmodelled entries."""
    from primus_launch.adapters.launch_env_effects import env_unmodelled

    if plan.source is None:
        return plan
    said = {u.flag for u in plan.source.unmodelled}
    more = [u for u in env_unmodelled(env, te=te) if u.flag not in said]
    if not more:
        return plan
    src = plan.source.model_copy(update={"unmodelled": list(plan.source.unmodelled) + more})
    return plan.model_copy(update={"source": src})


def comment_cluster_fields(text: str) -> dict[str, Any]:
    """The cluster fields a ``# primus-launch: gpu=G nodes=N gpus_per_node=K`` comment in the experiment states
    (any of the three), as Megatron scripts / YAMLs and NeMo / Bridge configs state them; they rank below the
    cluster flags, a wrapper and the launch line.  An experiment's comment was dropped (user16: its GPU guessed
    from the folder name over the comment's ``gpu=mi300x``)."""
    from primus_launch.adapters.torchtitan import comment_cluster, comment_count

    cfg = comment_cluster(text)
    out: dict[str, Any] = {"gpu": cfg["gpu"]} if cfg.get("gpu") else {}
    for key, field in (("nodes", "num_nodes"), ("gpus_per_node", "gpus_per_node")):
        if key in cfg:
            out[field] = comment_count(cfg, key, 1)
    return out


def load_primus_yaml(path: str | Path, cluster: Optional[Cluster] = None, primus_root: Optional[str | Path] = None,
                     env: Optional[Mapping[str, str]] = None, overrides: Optional[Mapping[str, Any]] = None) -> Plan:
    """Read a Primus experiment YAML into a plan (see the module docstring; the cluster as
    :func:`plan_from_text` picks it)."""
    p = Path(path)
    return plan_from_text(read_recipe_text(p), p, cluster, primus_root, env, overrides=overrides)


# ----------------------------------------------------------------------------- YAML text edits
@dataclass
class _Edit:
    start: int
    end: int
    text: str
    seq: int = 0


def _scalar(value: Any, like: Optional[str] = None) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    s = str(value)
    q = like[:1] if like and like[:1] in "'\"" else None
    plain_ok = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-/]*", s) and s.lower() not in ("true", "false", "null", "yes",
                                                                                   "no", "on", "off", "~")
    if q == "'":
        return "'" + s.replace("'", "''") + "'"
    if q == '"' or not plain_ok:
        return json.dumps(s)
    return s


class YamlText:
    """Positions of the experiment's ``overrides`` entries in the text, for minimal edits."""

    def __init__(self, text: str, where: str):
        self.text = text
        self.where = where
        try:
            self.root = yaml.compose(text)
        except yaml.YAMLError as e:
            raise UserError(f"{where}: not valid YAML: {' '.join(str(e).split())}") from None
        self.edits: list[_Edit] = []
        # keys added under a mapping of the text, as one nested block per mapping (two keys under a new
        # ``modules.pre_trainer.overrides`` share its parents): id(mapping) -> (order, mapping, tree)
        self._added: dict[int, tuple[int, Any, dict]] = {}

    def node(self, path: list[str]) -> Optional[tuple[Any, Any]]:
        cur: Any = self.root
        hit = None
        for part in path:
            hit = entry(cur, part)
            if hit is None:
                return None
            cur = hit[1]
        return hit

    def set(self, path: list[str], value: Any, env: Mapping[str, str]) -> None:
        """Set the scalar at ``path`` (a list of keys from the document root); add it (and missing
        parent mappings) at the end of the deepest existing mapping when absent."""
        hit = self.node(path)
        if hit is not None and isinstance(hit[1], yaml.ScalarNode):
            node = hit[1]
            a, b = node.start_mark.index, node.end_mark.index
            raw = self.text[a:b]
            inner = raw[1:-1] if raw[:1] in "'\"" and raw[-1:] == raw[:1] else raw
            m = _ENV.fullmatch(inner)
            if m and m.group(2) is not None and m.group(1) not in env:  # keep the template, change its default
                off = a + (1 if inner is not raw else 0) + m.start(2)
                self.edits.append(_Edit(off, off + len(m.group(2)), _scalar(value).strip('"') if isinstance(value, str)
                                        else _scalar(value)))
                return
            self.edits.append(_Edit(a, b, _scalar(value, raw)))
            return
        if hit is not None and isinstance(hit[1], yaml.SequenceNode) and isinstance(value, list):
            # a list (Primus recompute_layer_ids): written back in flow style, in place of the old one
            key, node = hit
            a = self.text.index(":", key.end_mark.index) + 1 if not node.flow_style else node.start_mark.index
            b = node.value[-1].end_mark.index if (node.value and not node.flow_style) else node.end_mark.index
            self.edits.append(_Edit(a, b, (" " if not node.flow_style else "") + _scalar(value)))
            return
        if hit is not None:  # a mapping / list where a scalar goes: replace the whole value
            raise UserError(f"{self.where}: {'.'.join(path)} holds a {type(hit[1]).__name__[:-4].lower()}; "
                            "cannot set a value there")
        # find the deepest existing mapping
        depth = len(path) - 1
        while depth > 0 and self.node(path[:depth]) is None:
            depth -= 1
        parent = self.node(path[:depth])[1] if depth else self.root
        if not isinstance(parent, yaml.MappingNode):
            raise UserError(f"{self.where}: {'.'.join(path[:depth])} is not a mapping")
        self._insert(parent, path[depth:], value)

    def _insert(self, mapping: Any, keys: list[str], value: Any) -> None:
        """Note ``keys`` (the first absent from ``mapping``) = ``value``; :meth:`apply` writes every key
        added under one mapping as one block at its end, parents once."""
        if mapping.flow_style:
            raise UserError(f"{self.where}: cannot add {'.'.join(keys)} to a flow-style mapping")
        if not mapping.value:
            raise UserError(f"{self.where}: cannot add {'.'.join(keys)} to an empty mapping")
        tree = self._added.setdefault(id(mapping), (len(self.edits) + len(self._added), mapping, {}))[2]
        for i, k in enumerate(keys[:-1]):
            sub = tree.setdefault(k, {})
            if not isinstance(sub, dict):
                raise UserError(f"{self.where}: {'.'.join(keys[:i + 1])} is set to a value; cannot add keys under it")
            tree = sub
        if isinstance(tree.get(keys[-1]), dict):
            raise UserError(f"{self.where}: {'.'.join(keys)} holds keys; cannot set a value there")
        tree[keys[-1]] = value

    def _added_edit(self, order: int, mapping: Any, tree: dict) -> _Edit:
        step = 2
        for k, v in mapping.value:
            if isinstance(v, yaml.MappingNode) and v.value and not v.flow_style:
                step = max(1, v.value[0][0].start_mark.column - k.start_mark.column)
                break
        lines: list[str] = []

        def walk(t: dict, depth: int) -> None:
            for k, v in t.items():
                if isinstance(v, dict):
                    lines.append(" " * (depth * step) + f"{k}:")
                    walk(v, depth + 1)
                else:
                    lines.append(" " * (depth * step) + f"{k}: {_scalar(v)}")

        walk(tree, 0)
        at, text = entries_after(self.text, *mapping.value[-1], lines)
        return _Edit(at, at, text, seq=order)

    def apply(self) -> str:
        out = self.text
        edits = self.edits + [self._added_edit(*added) for added in self._added.values()]
        for e in sorted(edits, key=lambda e: (e.start, e.seq), reverse=True):
            out = out[:e.start] + e.text + out[e.end:]
        return out


# ----------------------------------------------------------------------------- writing
_DISPATCHER_KEYS = ("moe_token_dispatcher_type", "moe_enable_deepep", "moe_flex_dispatcher_backend")


_RECOMPUTE_KEYS = ("recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_activations",
                   "recompute_modules", "moe_layer_recompute")


def _layer_ids_value(ids: tuple[int, ...], like: Any) -> Any:
    """``recompute_layer_ids`` in the form the recipe wrote it: a comma-separated string (Primus's
    DeepSeek-V3 configs) or a list."""
    return list(ids) if isinstance(like, list) else ",".join(map(str, ids))


def _megatron_changes(plan: Plan, r: Resolved, old: Plan) -> dict[str, Any]:
    from primus_launch.adapters.megatron_args import BY_DEST, convert, desired_args

    cur: dict[str, Any] = {}
    for k, v in r.config.items():
        spec = BY_DEST.get(k)
        if spec is not None:
            cur[k] = convert(spec, v)
    cur.update(_implied_args(r.config))  # as the reader sees them
    t = plan.training
    sched_plan = plan
    primus: dict[str, Any] = {}
    if t.pipeline_schedule != old.training.pipeline_schedule or t.pipeline_schedule in ("zb_h1", "zbv"):
        if t.pipeline_schedule in ("zb_h1", "zbv"):
            if t.pipeline_schedule != old.training.pipeline_schedule:
                raise PlanError("training.pipeline_schedule", t.pipeline_schedule,
                                "switching a Primus recipe to a zero-bubble schedule is not written; set "
                                "patch_zero_bubble / patch_primus_pipeline yourself")
            sched_plan = plan.model_copy(update={"training": t.model_copy(update={
                "pipeline_schedule": "interleaved_1f1b" if plan.parallel.vpp > 1 else "1f1b"})})
        else:
            for k in ("patch_zero_bubble", "patch_primus_pipeline"):
                if r.config.get(k):
                    primus[k] = False
    rec, old_rec = t.recompute, old.training.recompute
    if rec.method == "layer_ids":  # Primus recompute_layer_ids: Megatron's own recompute keys written below
        sched_plan = sched_plan.model_copy(update={"training": sched_plan.training.model_copy(update={
            "recompute": rec.model_copy(update={"method": "uniform", "num_layers": 1, "layer_ids": ()})})})
        if old_rec.method != "layer_ids":
            primus.update(recompute_granularity="full", recompute_method=None, recompute_num_layers=None)
        if rec.layer_ids != old_rec.layer_ids:
            primus["recompute_layer_ids"] = _layer_ids_value(rec.layer_ids, r.config.get("recompute_layer_ids"))
    elif old_rec.method == "layer_ids":
        primus["recompute_layer_ids"] = None  # back to Megatron's own recompute (null: the patch is off)
    want = desired_args(sched_plan, {k: v for k, v in cur.items() if v is not None}, frozenset(r.overrides))
    if t.compile != old.training.compile:
        primus["torch_compile.enable"] = t.compile
    if t.fp8_weight_transpose_cache != old.training.fp8_weight_transpose_cache:
        primus["no_fp8_weight_transpose_cache"] = not t.fp8_weight_transpose_cache
    if t.moe_token_dispatcher != old.training.moe_token_dispatcher:
        if t.moe_token_dispatcher == "deepep":
            primus.update({"enable_primus_turbo": True, "use_turbo_deepep": True, "moe_router_dtype": "fp32"})
        elif t.moe_token_dispatcher == "alltoall":
            # stage 2 and above need Turbo DeepEP; stage 1 (permute fusion, fused router) does not, so a
            # recipe on stage >= 2 keeps stage 1's kernels (Primus rocm_arg_validation)
            stage = r.config.get("turbo_sync_free_moe_stage") or 0
            primus.update({"use_turbo_deepep": False, "turbo_sync_free_moe_stage": min(stage, 1)}
                          if r.config.get("use_turbo_deepep") or stage >= 2 else {})
            if stage >= 2 and t.moe_expert_gemm == "turbo" and not r.config.get("use_turbo_grouped_gemm"):
                # stage 2 implied the Turbo grouped GEMM (_turbo_moe); stage 1 does not: the plan keeps it, so say it
                primus["use_turbo_grouped_gemm"] = True
            primus["moe_token_dispatcher_type"] = "alltoall"
        else:
            raise PlanError("training.moe_token_dispatcher", t.moe_token_dispatcher, "Primus: alltoall or deepep")
    changes = {k: v for k, v in want.items() if cur.get(k) != v and not (
        cur.get(k) is None and (v is False or v == BY_DEST[k].default))}  # an unset key already means its default
    if t.moe_token_dispatcher == old.training.moe_token_dispatcher:
        # an unchanged dispatcher keeps its spelling: Turbo DeepEP (use_turbo_deepep / sync-free stage >= 2) is
        # DeepEP without moe_token_dispatcher_type=flex in the file (Primus's moe_dispatcher patch sets it)
        for k in _DISPATCHER_KEYS:
            changes.pop(k, None)
    # a key the plan wants unset whose written value means the same (e.g. a virtual pipeline size of 1)
    from primus_launch.adapters.megatron_args import plan_from_args

    args = {k: v for k, v in cur.items() if v is not None}
    if old_rec.method == "layer_ids":  # as the reader hands them to plan_from_args
        args.update(recompute_method="uniform", recompute_num_layers=1)
    for k in [k for k, v in changes.items() if v is None and k in args]:
        try:
            same = plan_from_args({a: v for a, v in args.items() if a != k}, old.cluster, validate=False) == \
                plan_from_args(args, old.cluster, validate=False)
        except (PlanError, UserError):
            same = False
        if same:
            del changes[k]
    if rec.method == "layer_ids":
        for k in _RECOMPUTE_KEYS:
            changes.pop(k, None)
    changes.update(primus)
    return changes


def experiment_env(text: str) -> dict[str, str]:
    """The experiment's top-level ``env:`` mapping, which Primus's runtime exports before the trainer
    starts (primus/core/runtime/train_runtime.py: ``os.environ[k] = str(v)``)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    block = raw.get("env") if isinstance(raw, dict) else None
    return {str(k): str(v) for k, v in block.items()} if isinstance(block, dict) else {}


def megatron_launch_env(plan: Plan, text: str) -> dict[str, str]:
    """The environment Primus starts Megatron with for ``plan`` from the experiment ``text``:
    ``examples/run_pretrain.sh`` exports CUDA_DEVICE_MAX_CONNECTIONS (default 1), the experiment's
    ``env:`` is applied, and the megatron patch ``megatron.env.cuda_device_max_connections``
    (primus/backends/megatron/patches/env_patches.py) sets it to 8 under FSDP."""
    env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1", **experiment_env(text)}
    if plan.parallel.dp_sharding in ("optimizer_grads", "full"):
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    return env


def _env_fixes(plan: Plan, old: Plan, text: str) -> dict[str, str]:
    """What the tuned plan newly needs in the experiment's ``env:`` (plan/legality.py
    megatron_env_fixes; Primus sets CUDA_DEVICE_MAX_CONNECTIONS itself)."""
    from primus_launch.projection.hardware.gpus import gpu_arch
    from primus_launch.plan.legality import megatron_env_fixes

    arch = gpu_arch(plan.cluster.gpu)
    before = megatron_env_fixes(old, megatron_launch_env(old, text), arch)
    fixes = megatron_env_fixes(plan, megatron_launch_env(plan, text), arch)
    return {k: v for k, v in fixes.items() if before.get(k) != v and k != "CUDA_DEVICE_MAX_CONNECTIONS"}


def render_primus_yaml(plan: Plan, original_text: str, path: str | Path, primus_root: Optional[str | Path] = None,
                       env: Optional[Mapping[str, str]] = None) -> str:
    """The experiment's text with only the overrides the tuned ``plan`` changes edited or added;
    an unchanged plan gives the text byte for byte.  Re-read to check it gives ``plan``."""
    return render_unshared(original_text, lambda t: _render_text(plan, t, path, primus_root, env))


def _render_text(plan: Plan, original_text: str, path: str | Path, primus_root: Optional[str | Path],
                 env: Optional[Mapping[str, str]]) -> str:
    env = os.environ if env is None else env
    p = Path(path)
    r = resolve(p, original_text, primus_root, env)
    try:
        old = plan_from_text(original_text, p, plan.cluster, primus_root, env)
    except PlanError:
        old = plan_from_text(original_text, p, None, primus_root, env)
    doc = YamlText(original_text, str(p))
    base = ["modules", r.module, "overrides"]  # created in this file when it has none (Primus deep-merges it)
    if r.framework == "megatron":
        changes = _megatron_changes(plan, r, old)
        for key, value in changes.items():
            doc.set(base + key.split("."), value, env)
        for var, value in (_env_fixes(plan, old, original_text) if changes else {}).items():
            doc.set(["env", var], value, env)  # the experiment's top-level env: (added when absent)
    else:
        from primus_launch.adapters.torchtitan import DELETE, job_assignments, job_get

        for key, value in job_assignments(plan, lambda k, d=None: job_get(r.config, k, d), old):
            if value is DELETE:
                value = None
            doc.set(base + key.split("."), value, env)
    out = doc.apply()
    out = _comment_in_step(out, plan.cluster)
    back = plan_from_text(out, p, plan.cluster, primus_root, env)
    if _comparable(back) != _comparable(plan):
        diff = [f"{s}.{k}" for s, d in _comparable(plan).items() for k in d if _comparable(back)[s].get(k) != d[k]]
        raise UserError(f"{p}: cannot express {', '.join(diff) or 'the plan'} in this Primus config")
    return out


def _comment_in_step(text: str, cluster: Cluster) -> str:
    """``text`` with the values its ``# primus-launch:`` comment states set to ``cluster``'s (a tune on other
    cluster flags would leave the comment naming the old cluster, which a re-read then takes)."""
    from primus_launch.adapters.megatron_script import comment_key_span

    stated = comment_cluster_fields(text)
    for key, field in (("gpus_per_node", "gpus_per_node"), ("nodes", "num_nodes"), ("gpu", "gpu")):
        new = getattr(cluster, field)
        span = comment_key_span(text, key)
        if field in stated and span is not None and stated[field] != new:
            text = text[:span[0]] + str(new) + text[span[1]:]
    return text


def _comparable(plan: Plan) -> dict:
    """The plan as a re-read of its rendering gives it back: the model's name aside, ``moe_force_round_robin``
    only where it is read (the deepep dispatcher: Megatron's own DeepEP switched to all-to-all reads back with
    it set, for the Turbo DeepEP a later switch would write), and the FSDP implementation the one the run gets
    (``legality.effective_fsdp_impl``: torch FSDP2 only where Megatron's ``validate_args`` takes the plan, as
    the Megatron writer renders it)."""
    from primus_launch.plan.legality import effective_fsdp_impl

    d = plan.model_dump(exclude={"source"})
    d["model"].pop("name", None)
    if plan.framework == "megatron":
        d["parallel"]["fsdp_impl"] = effective_fsdp_impl(plan)
    if d["training"]["moe_token_dispatcher"] != "deepep":  # read only under deepep (moe_imbalance.forced_round_robin)
        d["training"]["moe_force_round_robin"] = False
    return d


def write_primus_yaml(plan: Plan, original: str | Path, out: str | Path, primus_root: Optional[str | Path] = None,
                      env: Optional[Mapping[str, str]] = None) -> Path:
    """Render ``plan`` over the experiment at ``original`` and write it atomically to ``out`` (never
    over the original; the tuned file goes next to it, so Primus finds the same presets)."""
    src = Path(original)
    text = render_primus_yaml(plan, read_recipe_text(src), src, primus_root, env)
    return atomic_write_text(out, text, protect=src)
