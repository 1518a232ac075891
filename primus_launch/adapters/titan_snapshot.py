"""TorchTitan's model registry and config registry, read once per torchtitan version into a snapshot.

Importing torchtitan (and torch) costs seconds and hundreds of MB; a dry run must not pay that.
Everything the TorchTitan readers need from the installed torchtitan is read once into a JSON
snapshot:

- ``models``: every family of ``torchtitan.models._supported_models``, its flavors
  (``<family>_configs``) and, per flavor, the :class:`~primus_launch.plan.ModelArch` fields read from
  ``model_registry(flavor).model`` (:func:`~primus_launch.adapters.titan_model_config.arch_fields_of_model_config`)
  or the reason it is refused;
- ``configs``: every config function of ``torchtitan.models.<family>.config_registry`` (what
  ``--module <family> --config <function>`` loads through ``ConfigManager``), with the sections that
  change time or memory (``training``, ``parallelism``, ``compile``, ``activation_checkpoint``,
  ``debug``, ``comm``, optimizer / loss classes) and its model (family, flavor, converters, MoE
  token dispatcher, and the architecture when it differs from the flavor's);
- ``cli``: the types of the command-line fields of those sections (tyro parses
  ``--section.field`` by these types);
- ``schedules``: the ``torch.distributed.pipelining`` schedule names torchtitan accepts and whether
  each runs a single stage per rank (``PipelineScheduleSingle``);
- ``argv``: every command-line option torchtitan's own parser builds for a config function (tyro's
  argparse parser of ``type(config)`` with the config as default and ``ConfigManager``'s rules, as
  ``ConfigManager.parse_args`` builds it), option -> value kind (:func:`option_kind`), one table per
  distinct option set; each config entry names its table (``"argv"``).  Every section is there
  (``optimizer``, ``lr_scheduler``, ``checkpoint``, ``metrics``, ``profiler``, ``validator``,
  ``dataloader``, ``loss``, ...), which the ``cli`` types (the sections read into the plan) do not cover.

The snapshot of the torchtitan version this release was built against ships in
``primus_launch/data`` (built by ``scripts/build_titan_snapshot.py``; a test checks it equals the
live registry).  With another installed version, the snapshot is built on first use and kept in
``$PRIMUS_LAUNCH_CACHE`` (default ``~/.cache/primus-launch``), written atomically.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from primus_launch.plan import PlanError

FORMAT = 1
BUNDLED_VERSION = "0.3.0"
DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def bundled_path(version: str = BUNDLED_VERSION) -> Path:
    return DATA_DIR / f"torchtitan-{version}.json"


def dist_version(package: str) -> Optional[str]:
    """The installed version of ``package`` without importing it (from its ``.dist-info`` next to
    it, which is faster than ``importlib.metadata``), or None when it is not installed."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        return None
    site = Path(spec.origin).resolve().parent.parent
    for d in site.glob(f"{package}-*.dist-info"):
        m = re.match(rf"{package}-(.+)\.dist-info$", d.name)
        if m:
            return m.group(1)
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:  # importable without metadata (a source checkout)
        return "unknown"


def installed_version() -> Optional[str]:
    """The installed torchtitan's version (without importing it), or None."""
    return dist_version("torchtitan")


def cache_dir() -> Path:
    """``$PRIMUS_LAUNCH_CACHE``, else ``~/.cache/primus-launch``."""
    env = os.environ.get("PRIMUS_LAUNCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "primus-launch"


def _load(path: Path) -> Optional[dict]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


@lru_cache(maxsize=1)
def snapshot() -> dict:
    """The registry snapshot of the installed torchtitan (the bundled one when torchtitan is not
    installed or is the bundled version; otherwise cached per version, built on first use)."""
    version = installed_version()
    if version is None or version == BUNDLED_VERSION:
        data = _load(bundled_path())
        if data is None:
            raise RuntimeError(f"primus-launch install is missing {bundled_path()}")
        return data
    path = cache_dir() / f"torchtitan-{version}.json"
    data = _load(path)
    if data is not None and data.get("torchtitan") == version:
        return data
    data = build_snapshot()
    from primus_launch.fileio import atomic_write_text

    try:
        atomic_write_text(path, json.dumps(data, sort_keys=True))
    except OSError:
        pass  # a read-only home: keep the snapshot in memory for this process
    return data


# ----------------------------------------------------------------------------- queries
def _family(name: str) -> dict:
    from primus_launch.adapters.titan_model_config import REFUSED_FAMILIES, SUPPORTED_MODELS, refuse

    fam = snapshot()["models"].get(name)
    if fam is None or name in REFUSED_FAMILIES or fam.get("refused"):
        if name in REFUSED_FAMILIES or name not in SUPPORTED_MODELS:
            raise refuse(name)
        raise PlanError("model.name", name, f"torchtitan {snapshot()['torchtitan']}: {fam.get('refused') if fam else 'not in its registry'}")
    return fam


def model_flavors(name: str) -> list[str]:
    """Flavors of a torchtitan model family (``<family>_configs``)."""
    return list(_family(name)["flavors"])


def model_arch_fields(name: str, flavor: str) -> dict[str, Any]:
    """The ModelArch fields of ``model_registry(flavor)`` for family ``name``."""
    fam = _family(name)
    entry = fam["flavors"].get(flavor)
    if entry is None:
        raise PlanError("model.flavor", flavor, f"{name} flavors are {', '.join(fam['flavors'])}")
    if "refused" in entry:
        raise PlanError("model.flavor", flavor, entry["refused"])
    return entry["arch"]


def config_functions(module: str) -> list[str]:
    """Config functions of ``torchtitan.models.<module>.config_registry``."""
    return list(snapshot()["configs"].get(module, {}))


def config_entry(module: str, config: str) -> dict[str, Any]:
    """What ``--module <module> --config <config>`` loads (see the module docstring)."""
    from primus_launch.adapters.titan_model_config import REFUSED_FAMILIES, refuse

    snap = snapshot()
    if module in REFUSED_FAMILIES:
        raise refuse(module)
    table = snap["configs"].get(module)
    if table is None:
        known = sorted(snap["configs"])
        raise PlanError("--module", module, f"torchtitan {snap['torchtitan']} config registries: {', '.join(known)} "
                                            "(or a Python module path of your own config_registry)")
    entry = table.get(config)
    if entry is None:
        raise PlanError("--config", config, f"config functions of {module}: {', '.join(table)}")
    if "refused" in entry:
        raise PlanError("--config", config, entry["refused"])
    return entry


def schedules() -> dict[str, bool]:
    """torchtitan pipeline schedule name -> runs a single stage per rank."""
    return snapshot()["schedules"]


def cli_types() -> dict[str, dict[str, str]]:
    """``section -> field -> type`` of the command-line fields primus-launch reads."""
    return snapshot()["cli"]


def argv_options(entry: dict) -> Optional[dict[str, Any]]:
    """torchtitan's command-line options for a config entry (option with ``_`` for ``-``, no leading
    ``--`` -> kind; the activation-checkpoint subcommands under ``"activation-checkpoint:<kind>"``), or
    None when the entry carries no table (a user's module cached by an older release)."""
    if isinstance(entry.get("argv_table"), dict):
        return entry["argv_table"]
    tid = entry.get("argv")
    return snapshot().get("argv", {}).get(tid) if isinstance(tid, str) else None


# ----------------------------------------------------------------------------- building (imports torchtitan)
# sections of Trainer.Config read into a config entry (the others hold paths, logging, data, I/O)
SECTIONS = ("training", "parallelism", "compile", "debug", "comm")
_DISPATCHERS = {"AllToAllTokenDispatcher": "standard", "DeepEPTokenDispatcher": "deepep",
                "HybridEPTokenDispatcher": "hybridep", "MinimalAsyncEPTokenDispatcher": "minimal_async_ep",
                "LocalTokenDispatcher": "none"}
_AC_KINDS = {"SelectiveAC": "selective", "FullAC": "full", "MemoryBudgetAC": "memory-budget"}
# the schedule classes torch.distributed.pipelining offers for LLM training in torchtitan
SCHEDULE_NAMES = ("1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble",
                  "DualPipeV")


def _plain(v: Any) -> Any:
    """A JSON value for a config field (primitives and lists of them), or ``...`` to skip it."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)) and all(x is None or isinstance(x, (bool, int, float, str)) for x in v):
        return list(v)
    if isinstance(v, (list, tuple)) and all(isinstance(x, (list, tuple)) for x in v):
        inner = [_plain(x) for x in v]
        return ... if any(x is ... for x in inner) else inner
    return ...


def _fields(obj: Any) -> dict[str, Any]:
    import dataclasses

    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if f.name.startswith("_") or f.name in ("param_init", "sharding_config"):
            continue
        v = _plain(getattr(obj, f.name))
        if v is not ...:
            out[f.name] = v
    return out


def _owner_name(cfg: Any) -> str:
    return type(cfg).__qualname__.rsplit(".Config", 1)[0]


def _type_name(tp: Any) -> str:
    """A type annotation as the override parser needs it."""
    import types
    import typing

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(tp)[0])
    if tp is bool:
        return "bool"
    if tp is int:
        return "int"
    if tp is float:
        return "float"
    if tp is str:
        return "str"
    if origin is typing.Literal:
        return "literal:" + json.dumps(list(typing.get_args(tp)))
    if origin is list and typing.get_args(tp) == (str,):
        return "list[str]"
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        names = sorted({_type_name(a) for a in args})
        inner = "float" if names == ["float", "int"] else names[0] if len(names) == 1 else "other"
        return ("optional:" + inner) if type(None) in typing.get_args(tp) else inner
    return "other"


def _class_types(cls: Any) -> dict[str, str]:
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.name: _type_name(hints.get(f.name)) for f in dataclasses.fields(cls) if not f.name.startswith("_")
            and f.name not in ("param_init", "sharding_config")}


def option_kind(action: Any) -> str:
    """The value kind of one option of tyro's argparse parser (tyro 1.0 metavars): ``bool`` (a flag
    pair ``--x.y`` / ``--x.no-y``), ``literal:[...]`` (its choices), ``int`` / ``float`` / ``str`` /
    ``list[str]`` (one comma-separated token, torchtitan's ``list_str_rule``), ``optional:<kind>`` (also
    the word ``None``), ``nargs*:<kind>`` (zero or more tokens), ``other`` (a value primus-launch does not
    judge: torchtitan's parser is the judge)."""
    if action.nargs == 0:  # tyro's BooleanOptionalAction (its own argparse backend)
        return "bool"
    meta = str(action.metavar or "")
    opt = meta.startswith("{None}|")
    if opt:
        meta = meta[len("{None}|"):]
    if action.choices:
        kind = "literal:" + json.dumps([c for c in action.choices if c != "None"])
    elif action.nargs == "*":
        inner = meta.strip("[]").split(" ", 1)[0]
        base = {"INT": "int", "FLOAT": "float", "STR": "str", "FLOAT|INT": "float"}.get(inner, "other")
        return f"nargs*:{base}"
    else:
        kind = {"INT": "int", "FLOAT": "float", "FLOAT|INT": "float", "STR": "str",
                "A,B,C,...": "list[str]"}.get(meta, "other")
    return f"optional:{kind}" if opt else kind


def argv_table(cfg: Any) -> dict[str, Any]:
    """Every option torchtitan's parser takes for the loaded config ``cfg`` (see the module docstring)."""
    import tyro.extras
    from torchtitan.config.manager import ConfigManager, custom_registry

    import warnings

    ConfigManager.register_tyro_rules(custom_registry)
    with warnings.catch_warnings():  # tyro 1.0 marks get_parser deprecated; it is the parser tyro.cli runs
        warnings.simplefilter("ignore", DeprecationWarning)
        parser = tyro.extras.get_parser(type(cfg), default=cfg, registry=custom_registry)

    def table(p: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for a in p._actions:
            if not a.option_strings and isinstance(a.choices, dict):  # the subcommands (activation-checkpoint:*)
                for name, sub in a.choices.items():
                    out[name] = table(sub)
            elif a.option_strings and a.option_strings[0].startswith("--") and a.option_strings[0] != "--help":
                out[a.option_strings[0][2:].replace("-", "_")] = option_kind(a)
        return out

    return table(parser)


def _model_entry(spec: Any, converters: list, registry_arch: dict) -> dict[str, Any]:
    from primus_launch.adapters.titan_model_config import arch_fields_of_model_config

    cfg = spec.model
    out: dict[str, Any] = {"name": spec.name, "flavor": spec.flavor,
                           "converters": [{"type": _owner_name(c), **_fields(c)} for c in converters]}
    disp = None
    for lc in cfg.layers:
        moe = getattr(lc, "moe", None)
        if moe is not None:
            disp = _owner_name(moe.routed_experts.token_dispatcher)
            break
    if disp is not None:
        out["moe_comm_backend"] = _DISPATCHERS.get(disp, disp)
    arch = arch_fields_of_model_config(spec.name, spec.flavor, cfg)
    if arch != registry_arch:
        out["arch"] = arch
    return out


class _ConverterRecorder:
    """Instruments ``ModelConfigConverter.Config.build`` while the registry is read: converter configs
    are recorded and the model config is left unconverted (converting needs torchao and a GPU of the
    right generation; it swaps module classes, never shapes)."""

    def __init__(self) -> None:
        self.seen: list = []

    def __enter__(self) -> "_ConverterRecorder":
        from torchtitan.protocols.model import ModelConfigConverter

        recorder = self

        class _Identity:
            def __init__(self, cfg: Any) -> None:
                recorder.seen.append(cfg)

            def convert(self, model_config: Any) -> Any:
                return model_config

        self._cls = ModelConfigConverter.Config
        self._had = "build" in vars(self._cls)
        self._old = vars(self._cls).get("build")
        self._cls.build = lambda cfg, *a, **k: _Identity(cfg)  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._had:
            self._cls.build = self._old  # type: ignore[method-assign]
        else:
            del self._cls.build


def config_entry_of(cfg: Any, converters: list, registry_arch: Optional[dict], cli: Optional[dict] = None
                    ) -> dict[str, Any]:
    """The snapshot entry of a loaded ``Trainer.Config`` (``converters``: the converter configs its
    ``model_registry`` call received); ``cli`` collects the field types of its sections."""
    entry: dict[str, Any] = {"model": _model_entry(cfg.model_spec, converters, registry_arch)}
    for sec in SECTIONS:
        obj = getattr(cfg, sec)
        entry[sec] = _fields(obj)
        if cli is not None:
            cli.setdefault(sec, {}).update(_class_types(type(obj)))
    ac = cfg.activation_checkpoint
    entry["activation_checkpoint"] = None if ac is None else {
        "kind": _AC_KINDS.get(_owner_name(ac), _owner_name(ac)), **_fields(ac)}
    entry["optimizer"] = {"type": _owner_name(cfg.optimizer), **_fields(cfg.optimizer)}
    entry["loss"] = {"type": _owner_name(cfg.loss)}
    ov = getattr(cfg, "override", None)  # torchtitan 0.3 config/override.py OverrideConfig.imports
    entry["override"] = {"imports": [i if isinstance(i, str) else str(i[0]) for i in getattr(ov, "imports", [])]}
    return entry


def load_user_config(module: str, config: str) -> dict[str, Any]:
    """The entry of a config function of the user's own module (``--module my_pkg.configs``), read
    through torchtitan's ``ConfigManager`` resolution (``<module>.config_registry`` first, then
    ``<module>``).  Importing it imports torchtitan, so the entry is cached per (module file contents,
    torchtitan version) in :func:`cache_dir`."""
    import hashlib
    import importlib.util

    spec = None
    for cand in (f"{module}.config_registry", module):
        try:
            spec = importlib.util.find_spec(cand)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            break
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise PlanError("--module", module, "a torchtitan model name or an importable Python module with config "
                                            "functions (its package on PYTHONPATH)")
    digest = hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest()[:16]
    path = cache_dir() / f"titan-config-{installed_version()}-{digest}-{config}.json"
    hit = _load(path)
    if hit is not None and "trainer" in hit["entry"]:  # an entry cached before read20 names no trainer: reload
        return _runs_torchtitans_trainer(hit["entry"], config)
    import importlib
    import logging

    logging.getLogger("torchtitan").setLevel(logging.ERROR)
    from primus_launch.adapters.titan_newer import newer_in_error

    with _ConverterRecorder() as rec:
        try:
            mod = importlib.import_module(spec.name)
        except Exception as e:  # read22: a module written for torchtitan main imports torchtitan.components.data
            said = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
            newer = newer_in_error(said)
            raise PlanError("--module", module, f"torchtitan {installed_version()} cannot import it here ({said})"
                                                + (f"; {newer}" if newer else "")) from None
        fn = getattr(mod, config, None)
        if fn is None or not callable(fn):
            names = [n for n, v in vars(mod).items() if callable(v) and not n.startswith("_") and n[:1].islower()]
            raise PlanError("--config", config, f"config functions of {spec.name}: {', '.join(names)}")
        try:
            cfg = fn()
        except Exception as e:
            said = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
            newer = newer_in_error(said)
            raise PlanError("--config", config, f"torchtitan cannot load it here ({said})"
                                                + (f"; {newer}" if newer else "")) from None
        if getattr(cfg, "model_spec", None) is None or not hasattr(cfg, "parallelism"):
            raise PlanError("--config", config, "must return a torchtitan Trainer.Config with a model_spec")
        entry = config_entry_of(cfg, list(rec.seen), None)
        owner = getattr(type(cfg), "_owner", None)  # what ConfigManager's config.build() constructs (train.py)
        entry["trainer"] = f"{owner.__module__}.{owner.__qualname__}" if owner is not None else TRAINER
        try:
            entry["argv_table"] = argv_table(cfg)
        except Exception:  # a config tyro cannot render: torchtitan's parser is the judge of its options
            pass
    from primus_launch.fileio import atomic_write_text

    try:
        atomic_write_text(path, json.dumps({"format": FORMAT, "entry": entry}, sort_keys=True))
    except OSError:
        pass
    return _runs_torchtitans_trainer(entry, config)


# torchtitan 0.3's own trainer: ``torchtitan/train.py`` runs ``config.build()``, which constructs the class whose
# nested ``Config`` the config is (``Configurable.Config._owner``, config/configurable.py); a user's subclass of
# ``Trainer.Config`` defined outside a trainer class still builds this one.
TRAINER = "torchtitan.trainer.Trainer"
# torchtitan 0.3.0's experiment trainers and why their step is not Trainer's (read from their own modules)
OTHER_TRAINERS = {
    "torchtitan.experiments.graph_trainer.trainer.GraphTrainer":
        "traces forward, loss and backward into one graph (compile.mode aot_fx_trace), shards with SimpleFSDP and "
        "bucketing passes, and saves activations by its graph memory policy, not the activation_checkpoint wrapper",
    "torchtitan.experiments.torchft.trainer.FaultTolerantTrainer":
        "trains torchft replica groups (fault_tolerance: semi-sync DiLoCo / local SGD syncs every sync_steps)",
}


def _runs_torchtitans_trainer(entry: dict[str, Any], config: str) -> dict[str, Any]:
    """``entry`` when its config builds torchtitan's ``Trainer`` (the step primus-launch models); another
    trainer's config (``--module graph_trainer.llama3``, ``torchft.llama3``: ``GraphTrainer.Config``,
    ``FaultTolerantTrainer.Config``) is refused naming it -- its fields read the same, its step is not that one."""
    trainer = entry.get("trainer", TRAINER)
    if trainer == TRAINER:
        return entry
    why = OTHER_TRAINERS.get(trainer, "its own training step")
    raise PlanError("--config", config, f"builds {trainer}, not torchtitan's Trainer: it {why}; not modelled "
                                        f"(primus-launch models {TRAINER}'s step)")


def experiment_module(name: str) -> Optional[str]:
    """The module torchtitan's ``ConfigManager`` loads for a shorthand ``--module`` of its experiments
    (``graph_trainer.llama3``, ``torchft.llama3``, RL examples), or None: torchtitan 0.3.0
    ``config/manager.py`` looks a name of ``_supported_models | _supported_experiments`` up as
    ``torchtitan.models.<name>.config_registry``, then ``torchtitan.experiments.<name>.config_registry``, then
    ``torchtitan.experiments.rl.examples.<name>.config_registry``."""
    import importlib.util

    try:
        from torchtitan.experiments import _supported_experiments
    except Exception:  # torchtitan absent, or a release without the list
        return None
    if name not in _supported_experiments:
        return None
    for prefix in ("torchtitan.models", "torchtitan.experiments", "torchtitan.experiments.rl.examples"):
        try:
            if importlib.util.find_spec(f"{prefix}.{name}.config_registry") is not None:
                return f"{prefix}.{name}"
        except (ImportError, ValueError):
            continue
    return None


def build_snapshot() -> dict:
    """Read the installed torchtitan's registries into a snapshot (imports torchtitan and torch)."""
    import hashlib
    import importlib
    import inspect
    import logging

    from primus_launch.adapters.titan_model_config import REFUSED_FAMILIES, arch_fields_of_model_config

    logging.getLogger("torchtitan").setLevel(logging.ERROR)
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, get_schedule_class
    from torchtitan.distributed import activation_checkpoint as ac_mod
    from torchtitan.models import _supported_models

    snap: dict[str, Any] = {"format": FORMAT, "torchtitan": installed_version(), "models": {}, "configs": {},
                            "schedules": {}, "cli": {}, "argv": {},
                            "generated_by": "python scripts/build_titan_snapshot.py (torchtitan installed)"}
    for name in SCHEDULE_NAMES:
        try:
            snap["schedules"][name] = issubclass(get_schedule_class(name), PipelineScheduleSingle)
        except ValueError:
            continue
    cli: dict[str, dict[str, str]] = {}
    with _ConverterRecorder() as rec:
        for fam in sorted(_supported_models):
            try:
                mod = importlib.import_module(f"torchtitan.models.{fam}")
            except Exception as e:  # an optional dependency of a family missing here
                snap["models"][fam] = {"refused": f"cannot be read here ({type(e).__name__}: {e})", "flavors": {}}
                continue
            table = next(v for k, v in vars(mod).items() if k.endswith("_configs") and isinstance(v, dict))
            flv: dict[str, Any] = {}
            if fam in REFUSED_FAMILIES:
                snap["models"][fam] = {"refused": REFUSED_FAMILIES[fam], "flavors": {f: {"refused": REFUSED_FAMILIES[fam]}
                                                                                  for f in table}}
                continue
            for flavor in table:
                try:
                    flv[flavor] = {"arch": arch_fields_of_model_config(fam, flavor, mod.model_registry(flavor).model)}
                except PlanError as e:
                    flv[flavor] = {"refused": e.allowed}
            snap["models"][fam] = {"flavors": flv}
            try:
                reg = importlib.import_module(f"torchtitan.models.{fam}.config_registry")
            except Exception as e:
                snap["configs"][fam] = {}
                snap["models"][fam]["configs_refused"] = f"{type(e).__name__}: {e}"
                continue
            configs: dict[str, Any] = {}
            for fname, fn in vars(reg).items():
                if fname.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != reg.__name__:
                    continue
                if any(p.default is inspect.Parameter.empty for p in inspect.signature(fn).parameters.values()):
                    continue
                rec.seen.clear()
                try:
                    cfg = fn()
                except Exception as e:
                    configs[fname] = {"refused": f"torchtitan cannot load it here ({type(e).__name__}: {e})"}
                    continue
                if not hasattr(cfg, "parallelism") or getattr(cfg, "model_spec", None) is None:
                    continue
                reg_arch = flv.get(cfg.model_spec.flavor, {}).get("arch") if cfg.model_spec.name == fam else None
                try:
                    configs[fname] = config_entry_of(cfg, list(rec.seen), reg_arch, cli)
                except PlanError as e:
                    configs[fname] = {"refused": e.allowed}
                    continue
                opts = argv_table(cfg)
                tid = hashlib.sha256(json.dumps(opts, sort_keys=True).encode()).hexdigest()[:12]
                snap["argv"].setdefault(tid, opts)
                configs[fname]["argv"] = tid
            snap["configs"][fam] = configs
    for kind, cls in (("selective", ac_mod.SelectiveAC.Config), ("full", ac_mod.FullAC.Config),
                      ("memory-budget", ac_mod.MemoryBudgetAC.Config)):
        cli[f"activation_checkpoint:{kind}"] = _class_types(cls)
    snap["cli"] = cli
    return snap
