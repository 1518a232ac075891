"""TorchTitan 0.3 launch lines <-> :class:`Plan`.

torchtitan 0.3 has no job file: a run is ::

    torchrun --nproc-per-node 8 -m torchtitan.train --module llama3 --config llama3_8b \\
        --parallelism.tensor_parallel_degree 8 --training.local_batch_size 2 activation-checkpoint:full

``ConfigManager`` (``torchtitan/config/manager.py``) loads the config function ``--config`` of
``torchtitan.models.<module>.config_registry`` (or of the user's module ``--module my_pkg.configs``:
``<module>.config_registry``, then ``<module>``) and applies the remaining arguments with tyro:
``--section.field value`` (``-`` and ``_`` are the same; booleans are flags ``--compile.enable`` /
``--compile.no-enable``; ``list[str]`` fields take one comma-separated value; ``None`` is spelled
``None``), and the activation-checkpointing policy is a subcommand ``activation-checkpoint:{selective,
full,memory-budget,none}`` whose own options follow it (the parent's options must come before it).

Reading: the config function comes from the registry snapshot (:mod:`titan_snapshot`; a user's
module is loaded once through torchtitan and cached), the overrides are applied by those rules, and
the result is mapped by :func:`~primus_launch.adapters.torchtitan.plan_from_job` with torchtitan 0.3's
rules.  Writing: the launch line with only the changed values edited (existing override tokens
rewritten in place, new ones added before the subcommand), torchrun's ``--nnodes`` /
``--nproc-per-node`` following the plan's cluster.  Every override is judged as tyro judges it, by the
config function's own option table in the snapshot (every section: ``--optimizer.param-groups.0.optimizer-kwargs.lr``,
``--checkpoint.interval``, ``--metrics.log-freq``, top-level ``--dump-folder``; :func:`check_override_names`, its
value by :func:`_value`, the configs' ``__post_init__`` rules by :mod:`titan_option_rules`); an option that changes
time or memory and is not modelled (``--checkpoint.enable``, ``--optimizer.implementation``, a param group's
optimizer) is listed as such by the key table of :mod:`torchtitan`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from primus_launch.adapters.titan_mapped_values import later_name_hint
from primus_launch.adapters.titan_option_rules import check_option_rule
from primus_launch.adapters.titan_snapshot import (argv_options, cli_types, config_entry, experiment_module,
                                                  load_user_config, snapshot)
from primus_launch.adapters.torchtitan import DELETE, job_assignments, job_get, plan_from_job
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, Plan, PlanError

_PROGRAMS = ("torchtitan.train",)
_AC_PREFIXES = ("activation-checkpoint:", "activation_checkpoint:")
_AC_KINDS = ("selective", "full", "memory-budget", "none")


def program_start(argv: list[str]) -> Optional[int]:
    """Index of the first argument of the torchtitan program (after ``-m torchtitan.train`` or
    ``.../torchtitan/train.py``), or None when ``argv`` does not run torchtitan's trainer."""
    for i, tok in enumerate(argv):
        if tok == "-m" and i + 1 < len(argv) and argv[i + 1] in _PROGRAMS:
            return i + 2
        if tok.endswith("torchtitan/train.py"):
            return i + 1
    return None


def is_titan_launch(argv: list[str]) -> bool:
    """A torchtitan 0.3 launch line: torchtitan's trainer with ``--module`` (no ``--job.config_file``)."""
    start = program_start(argv)
    if start is None:
        return False
    prog = argv[start:]
    has_module = any(t == "--module" or t.startswith("--module=") for t in prog)
    has_file = any(t.split("=", 1)[0] in ("--job.config_file", "--job.config-file") for t in prog)
    return has_module and not has_file


@dataclass
class Override:
    """One ``--section.field [value]`` of the launch line (token indices into argv)."""

    first: int
    last: int
    path: str  # section.field, underscores
    raw: Optional[str]  # None: a bare flag
    negated: bool = False  # --x.no-y
    subcommand: bool = False  # belongs to the activation-checkpoint subcommand


@dataclass
class TitanLaunch:
    argv: list[str]
    start: int
    module: str
    config: str
    module_at: tuple[int, int]
    config_at: tuple[int, int]
    overrides: list[Override] = field(default_factory=list)
    ac_at: Optional[int] = None  # index of the subcommand token
    ac_kind: Optional[str] = None


def _norm(name: str) -> str:
    return name.replace("-", "_")


def parse_launch(argv: list[str]) -> TitanLaunch:
    """The parts of a torchtitan 0.3 launch line (see the module docstring)."""
    start = program_start(argv)
    if start is None:
        raise UserError("command: not a torchtitan launch (expected -m torchtitan.train --module M --config C)")
    module = config = None
    m_at = c_at = (-1, -1)
    ovs: list[Override] = []
    ac_at = ac_kind = None
    i = start
    while i < len(argv):
        tok = argv[i]
        low = tok.lower()
        if any(low.startswith(p) for p in _AC_PREFIXES):
            kind = low.split(":", 1)[1].replace("_", "-")
            if kind not in _AC_KINDS:
                raise PlanError("activation-checkpoint", kind, f"one of {', '.join(_AC_KINDS)}")
            if ac_at is not None:
                raise PlanError("activation-checkpoint", kind, "given twice")
            ac_at, ac_kind = i, kind
            i += 1
            continue
        if not tok.startswith("--"):
            raise UserError(f"command: unexpected argument {tok!r} (torchtitan takes --section.field options and "
                            "an activation-checkpoint:KIND subcommand)")
        name, eq, val = tok[2:].partition("=")
        if name in ("module", "config"):
            if eq:
                value, span = val, (i, i)
                i += 1
            elif i + 1 < len(argv):
                value, span = argv[i + 1], (i, i + 1)
                i += 2
            else:
                raise UserError(f"--{name}: missing its value")
            if name == "module":
                module, m_at = value, span
            else:
                config, c_at = value, span
            continue
        head, dot, last = _norm(name).rpartition(".")
        negated = last.startswith("no_") and _field_type(f"{head}{dot}{last[3:]}", ac_kind) == "bool"
        if negated:
            last = last[3:]
        path = f"{head}{dot}{last}"
        section = path.split(".", 1)[0]
        typ = _field_type(path, ac_kind)
        sub = ac_at is not None
        if sub and section != "activation_checkpoint":
            raise UserError(f"command: --{name} after the {argv[ac_at]} subcommand (torchtitan's parser takes the "
                            "other options before it)")
        if eq:
            ovs.append(Override(i, i, path, val, negated, sub))
            i += 1
        elif typ is not None and typ.startswith("nargs*:"):  # zero or more words (argparse nargs='*')
            j = i + 1
            while j < len(argv) and not argv[j].startswith("-") and \
                    not any(argv[j].lower().startswith(p) for p in _AC_PREFIXES):
                j += 1
            ovs.append(Override(i, j - 1, path, " ".join(argv[i + 1:j]), negated, sub))
            i = j
        elif typ == "bool" or i + 1 >= len(argv) or argv[i + 1].startswith("--") or \
                any(argv[i + 1].lower().startswith(p) for p in _AC_PREFIXES):
            if typ not in ("bool", None):
                raise UserError(f"--{name}: missing its value")
            ovs.append(Override(i, i, path, None, negated, sub))
            i += 1
        else:
            ovs.append(Override(i, i + 1, path, argv[i + 1], negated, sub))
            i += 2
    if module is None or config is None:
        raise UserError("command: torchtitan needs --module and --config (e.g. --module llama3 --config llama3_8b)")
    return TitanLaunch(list(argv), start, module, config, m_at, c_at, ovs, ac_at, ac_kind)


def _all_options() -> dict[str, Any]:
    """The union of torchtitan's option tables over the registry's config functions (the snapshot's
    ``argv``): how a word of the line is parsed before its config function is known."""
    out: dict[str, Any] = {}
    for table in snapshot().get("argv", {}).values():
        for k, v in table.items():
            if isinstance(v, dict):
                out.setdefault(k, {}).update(v)
            else:
                out.setdefault(k, v)
    return out


_ALL: dict[str, Any] = {}


def _field_type(path: str, ac_kind: Optional[str], options: Optional[dict] = None) -> Optional[str]:
    """The kind of the option ``path`` (``section.field``, ``_`` for ``-``) by torchtitan's parser
    (``options``: a config function's table; default: any config function's), else by the ``cli``
    types of the sections read into the plan."""
    if options is None:
        if not _ALL:
            _ALL.update(_all_options())
        options = _ALL
    section, _, key = path.partition(".")
    if section == "activation_checkpoint":
        sub = options.get(f"activation-checkpoint:{ac_kind or 'selective'}", {})
        return sub.get(path) or cli_types().get(f"activation_checkpoint:{ac_kind or 'selective'}", {}).get(key)
    kind = options.get(path)
    return kind if isinstance(kind, str) else cli_types().get(section, {}).get(key)


def _value(o: Override, ac_kind: Optional[str], options: Optional[dict] = None) -> Any:
    """The typed value of an override, by tyro's rules for the field's type (``options``: the config
    function's option table)."""
    typ = _field_type(o.path, ac_kind, options)
    where = f"--{o.path}"
    if o.raw is None:
        return not o.negated
    raw = o.raw
    if typ is None:
        return _guess(raw)
    if typ == "bool":  # a flag pair: tyro exits on --compile.enable=False ('ignored explicit argument')
        plain = "--" + o.path.replace(".", ".no-", 1) if raw.lower() == "false" else where
        raise PlanError(where, raw, f"no value: torchtitan's parser (tyro) takes a boolean as a flag, --{o.path} or "
                                    f"--{o.path.replace('.', '.no-', 1)} (it refuses '{where}={raw}'); write {plain}")
    if typ.startswith("nargs*:"):  # zero or more words, each of the element kind
        inner = typ.split(":", 1)[1]
        for word in raw.split():
            if inner in ("int", "float"):
                try:
                    (int if inner == "int" else float)(word)
                except ValueError:
                    raise PlanError(where, word, "numbers, one word each" if inner == "float" else
                                    "integers, one word each") from None
        return raw.split() if inner != "other" else raw
    opt = typ.startswith("optional:")
    if opt:
        if raw == "None":
            return None
        typ = typ.split(":", 1)[1]
    if typ == "bool":
        if raw not in ("True", "False", "true", "false"):
            raise PlanError(where, raw, "True or False")
        return raw.lower() == "true"
    if typ == "int":
        try:
            return int(raw)
        except ValueError:
            raise PlanError(where, raw, "an integer") from None
    if typ == "float":
        try:
            return float(raw)
        except ValueError:
            raise PlanError(where, raw, "a number") from None
    if typ == "list[str]":
        return raw.split(",")
    if typ.startswith("literal:"):
        allowed = json.loads(typ.split(":", 1)[1])
        for a in allowed:
            if str(a) == raw:
                return a
        raise PlanError(where, raw, f"one of {', '.join(map(str, allowed))}")
    return raw


def _guess(raw: str) -> Any:
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return {"True": True, "False": False, "None": None}.get(raw, raw)


# ----------------------------------------------------------------------------- entry -> job
_AC_MODE = {"selective": {"mode": "selective", "selective_ac_option": "op"}, "full": {"mode": "full"},
            "memory-budget": {"mode": "memory_budget"}}


def _resolve_entry(module: str, config: str) -> tuple[dict, str]:
    """(config entry, the module name as the registry knows it) for ``--module/--config``."""
    snap = snapshot()
    name = module
    for prefix in ("torchtitan.models.",):
        if name.startswith(prefix):
            name = name[len(prefix):]
    name = re.sub(r"\.config_registry$", "", name)
    from primus_launch.adapters.titan_model_config import REFUSED_FAMILIES

    if name in snap["configs"] or name in REFUSED_FAMILIES or name in snap["models"]:
        return config_entry(name, config), name
    full = experiment_module(module)  # a shorthand of torchtitan's experiments: ConfigManager resolves it first
    if full is not None:
        return load_user_config(full, config), module
    import importlib.util

    try:
        found = importlib.util.find_spec(module.split(".", 1)[0]) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return config_entry(module, config), module  # the registry's one-line error
    return load_user_config(module, config), module


def job_of(entry: dict) -> dict:
    """A torchtitan 0.3 config entry as a job in the v0.2 key space (see :mod:`torchtitan`)."""
    m = entry["model"]
    job: dict[str, Any] = {
        "model": {"name": m["name"], "flavor": m["flavor"], "_converters03": m.get("converters", []),
                  "_moe_comm_backend": m.get("moe_comm_backend"), "_loss03": (entry.get("loss") or {}).get("type"),
                  "_loss_chunks03": (entry.get("loss") or {}).get("num_chunks")},
        "training": dict(entry["training"]),
        "parallelism": dict(entry["parallelism"]),
        "compile": dict(entry["compile"]),
        "debug": dict(entry.get("debug", {})),
        "comm": dict(entry.get("comm", {})),
        "optimizer": {"name": entry.get("optimizer", {}).get("name", "AdamW")},
        "override": {"imports": list((entry.get("override") or {}).get("imports") or [])},
    }
    if "arch" in m:
        job["model"]["_arch"] = m["arch"]
    ac = entry.get("activation_checkpoint")
    job["activation_checkpoint"] = {"mode": "none"} if ac is None else {
        **_AC_MODE[ac["kind"]], **{k: v for k, v in ac.items() if k == "memory_budget"}}
    return job


def _set(job: dict, path: str, value: Any) -> None:
    *tbl, key = path.split(".")
    cur = job
    for t in tbl:
        cur = cur.setdefault(t, {})
    cur[key] = value


def check_override_names(launch: TitanLaunch, options: Optional[dict] = None, judge: bool = True) -> None:
    """Refuse an override that names no option of torchtitan's parser for the config function
    (``--parallelism.tensor_paralel_degree 8``, ``--optimizer.lr 3e-4``, ``--paralelism.x``): torchtitan
    0.3.0 parses the line with tyro (``ConfigManager.parse_args``, ``torchtitan/config/manager.py``:
    ``tyro.cli(type(loaded_config), args=..., default=loaded_config)``), which exits with "Unrecognized
    options ... Perhaps you meant --parallelism.tensor-parallel-degree" (tyro 1.0.17, checked on the CPU),
    where the reader would only list the override as not modelled and project the default.  ``options``:
    the config function's option table (:func:`titan_snapshot.argv_options`, every section: optimizer,
    lr_scheduler, checkpoint, metrics, profiler, validator, dataloader, loss, ...); without one (a user's
    module cached by an older release) only the sections of the ``cli`` types are judged, as a user's
    ``Trainer.Config`` subclass may add fields of its own, and with ``judge`` false (a user's module without a
    table) only the top-level options (``--dump-folder``)."""
    import difflib

    tt = f"torchtitan {snapshot().get('torchtitan', '0.3')}"
    if options is None:
        fields = cli_types()
        sections = sorted({k.split(":", 1)[0] for k in fields})

        def known_of(section: str) -> dict:
            return fields.get(f"activation_checkpoint:{launch.ac_kind or 'selective'}" if section ==
                              "activation_checkpoint" else section, {})
    else:
        sections = sorted({k.split(".", 1)[0] for k in options if "." in k} |
                          {k.split(":", 1)[0].replace("-", "_") for k in options if ":" in k})

        def known_of(section: str) -> dict:
            table = options.get(f"activation-checkpoint:{launch.ac_kind or 'selective'}", {}) \
                if section == "activation_checkpoint" else options
            return {k.split(".", 1)[1]: v for k, v in table.items() if k.startswith(section + ".")}
    for o in launch.overrides:
        section, _, key = o.path.partition(".")
        where = launch.argv[o.first].split("=", 1)[0]
        raw = o.raw if o.raw is not None else True
        if section == "activation_checkpoint" and launch.ac_kind is None:
            continue  # launch_job's own error: the subcommand goes first
        if not key:  # a top-level option (--dump-folder, a field of a user's Trainer.Config subclass)
            top = options if options is not None else _ALL or _all_options()
            if not isinstance(top.get(o.path), str):
                names = sorted(k for k, v in top.items() if "." not in k and isinstance(v, str))
                raise UserError(f"command: {where} is not a torchtitan option (expected --section.field; the "
                                f"top-level ones: {', '.join('--' + n.replace('_', '-') for n in names)})")
            continue
        if not judge:
            continue
        if section not in sections:
            close = difflib.get_close_matches(section, sections, n=1, cutoff=0.8)
            if close:
                raise PlanError(where, raw, f"'{section}' is no section of {tt}'s config (its parser "
                                            f"refuses unknown options); did you mean --{close[0]}.{key}?")
            if options is None:
                continue
            raise PlanError(where, raw, f"'{section}' is no section of {tt}'s config (its parser refuses unknown "
                                        f"options); its sections: {', '.join(sections)}")
        known = known_of(section)
        if key in known and not (o.negated and known[key] != "bool"):
            continue
        names = list(known) + [f"no_{k}" for k, t in known.items() if t == "bool"]
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        if section == "optimizer" and options is not None and "." not in key:
            lead = [k for k in known if k.endswith(f"optimizer_kwargs.{key}") or k.endswith(f".{key}")]
            close = lead[:1] or close
        later = later_name_hint(f"{section}.{key}")
        hint = later if later else (f"did you mean --{section}.{close[0]}?" if close else
                                    f"its fields: {', '.join(sorted(known))}" if known else "it takes no options")
        raise PlanError(where, raw, f"not a field of {tt}'s {section} (its parser refuses unknown "
                                    f"options); {hint}")


def resolved_entry(launch: TitanLaunch) -> tuple[dict, bool]:
    """(config entry of the line's ``--module`` / ``--config``, whether its options are judged against an
    option table: the entry carries one, or it is one of the snapshot's own configs)."""
    entry, name = _resolve_entry(launch.module, launch.config)
    return entry, argv_options(entry) is not None or name in snapshot()["configs"]


def launch_job(launch: TitanLaunch, resolved: Optional[tuple[dict, bool]] = None) -> tuple[dict, list[str]]:
    """(job with the overrides applied, the override paths); ``resolved``: :func:`resolved_entry` of ``launch``
    where the caller has it."""
    entry, judged = resolved or resolved_entry(launch)
    options = argv_options(entry)
    check_override_names(launch, options, judge=judged)
    job = job_of(entry)
    paths = []
    if launch.ac_kind is not None:
        job["activation_checkpoint"] = {"mode": "none"} if launch.ac_kind == "none" else dict(_AC_MODE[launch.ac_kind])
        paths.append("activation_checkpoint.mode")
    for o in launch.overrides:
        val = _value(o, launch.ac_kind, options)
        section = o.path.split(".", 1)[0]
        if section == "activation_checkpoint" and launch.ac_kind is None:
            raise UserError(f"--{o.path}: give the activation-checkpoint:KIND subcommand before its options")
        if o.path == "parallelism.module_fqns_per_model_part":
            raise PlanError(f"--{o.path}", o.raw, "explicit stage lists on the command line are not read; "
                                                  "use --parallelism.pipeline_parallel_layers_per_stage")
        check_option_rule(o.path, val, launch.argv[o.first].split("=", 1)[0])
        _set(job, o.path, val)
        paths.append(o.path)
    return job, paths


def plan_from_launch(argv: list[str], cluster: Cluster) -> Plan:
    """The plan of a torchtitan 0.3 launch line on ``cluster``."""
    from primus_launch.adapters.repeated import repeated_notes

    launch = parse_launch(argv)
    resolved = resolved_entry(launch)
    job, paths = launch_job(launch, resolved)
    try:
        plan = plan_from_job(job, cluster, fmt="torchtitan-argv", set_paths=paths, flag=lambda p: f"--{p}",
                             version="0.3")
    except PlanError as e:  # a value the command gave, named as its option (user15: was 'training.local_batch_size=0')
        if e.field in paths:
            raise PlanError(f"--{e.field}", e.value, e.allowed) from None
        raise
    said = repeated_notes(((f"--{o.path}", "false" if o.negated else "true" if o.raw is None else o.raw)
                           for o in launch.overrides), "torchtitan")
    if launch.overrides and not resolved[1]:  # review12: the option table could not be built, said
        said.append(f"the options of --module {launch.module} --config {launch.config} were not checked by name or "
                    "type: torchtitan's parser could not render that config's option table here (its own parser "
                    "judges them at launch)")
    if said and plan.source is not None:
        plan = plan.model_copy(update={"source": plan.source.model_copy(update={"notes": plan.source.notes + said})})
    return plan


# ----------------------------------------------------------------------------- Plan -> launch line
def _spell(value: Any) -> str:
    if value is None or value is DELETE:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def render_launch(plan: Plan, argv: list[str]) -> list[str]:
    """``argv`` (a torchtitan 0.3 launch line) with only the values ``plan`` changes edited."""
    launch = parse_launch(argv)
    job, _ = launch_job(launch)
    try:
        old = plan_from_job(job, plan.cluster, fmt="torchtitan-argv", version="0.3")
    except PlanError:  # the line's values may not fit the plan's (new) cluster: read it on its own
        from primus_launch.adapters.torchrun_argv import launch_cluster

        old = plan_from_job(job, launch_cluster(argv, {"gpu": plan.cluster.gpu}), fmt="torchtitan-argv",
                            version="0.3")
    assigns = job_assignments(plan, lambda path, default=None: job_get(job, path, default), old, allow_fqns=False,
                              version="0.3")
    out = list(argv)
    inserts: list[str] = []
    ac_mode: Optional[str] = None
    by_path = {o.path: o for o in launch.overrides}
    for path, value in assigns:
        if path.startswith("activation_checkpoint."):
            if path == "activation_checkpoint.mode":
                ac_mode = value
            continue
        typ = _field_type(path, launch.ac_kind)
        o = by_path.get(path)
        section, _, key = path.partition(".")
        if typ == "bool":
            tok = f"--{section}.{key}" if value else f"--{section}.no-{key.replace('_', '-')}"
            if o is not None:
                out[o.first] = tok
                if o.last != o.first:  # --x.y=True form
                    out[o.last] = ""
            else:
                inserts.append(tok)
            continue
        text = _spell(value)
        if o is None:
            inserts += [f"--{path}", text]
        elif o.first == o.last and "=" in argv[o.first]:
            out[o.first] = f"{argv[o.first].split('=', 1)[0]}={text}"
        else:
            out[o.last] = text
    at = launch.ac_at if launch.ac_at is not None else len(out)
    ac_tok: list[str] = []
    if ac_mode is not None:
        kind = {"none": "none", "full": "full", "memory_budget": "memory-budget"}.get(ac_mode, "selective")
        if launch.ac_at is not None:
            out[launch.ac_at] = f"activation-checkpoint:{kind}"
            keep = cli_types().get(f"activation_checkpoint:{kind}", {})
            for o in launch.overrides:  # options of the old policy that the new one lacks
                if o.subcommand and o.path.split(".", 1)[1] not in keep:
                    for j in range(o.first, o.last + 1):
                        out[j] = ""
        else:
            ac_tok = [f"activation-checkpoint:{kind}"]
    out = out[:at] + inserts + ac_tok + out[at:]
    out = [t for t in out if t != ""]
    from primus_launch.adapters.torchrun_argv import with_torchrun_cluster

    return with_torchrun_cluster(out, plan.cluster)
