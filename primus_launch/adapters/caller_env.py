"""What the caller's environment would change in a launch script's run: the answer's note.

A launch script that reads a variable before it sets it (``TP=${TP:-2}``, ``: ${TP:=2}``,
``export TP=${TP-2}``, ``[ -z "$TP" ] && TP=2``; torchtitan's ``run_train.sh``: ``NGPU=${NGPU:-8}``,
``CONFIG_FILE=${CONFIG_FILE:-...}``) runs with the caller's value when one is set: ``TP=4 bash train.sh``
runs TP=4.  The readers never take the plan from the environment primus-launch runs in (the plan is the
recipe as written; topology never comes from the machine), so ``TP=4 primus-launch --project train.sh``
projects TP=2 -- and says so here: for each variable the script reads that this environment sets to a
value that changes the plan, one note naming the variable, its value here, the plan's value and the
value a launch in this environment would run, and how to make it count (write it in the script, or
give it as the command's ``NAME=value`` word: ``primus-launch --project -- TP=4 bash train.sh``, which
the readers take as the environment the script starts in).

How: the recipe is read a second time with those variables as the environment the script starts in
(the readers' ``script_env``: the same evaluation a command's ``NAME=value`` words get), and the two
plans' model, parallel, training and cluster sections are compared -- each variable alone when
together they change something.  Candidates are the names the script's text refers to (``$NAME`` /
``${NAME...}``; torchtitan's ``run_train.sh`` call: the variables that script reads) that the
environment sets and the command does not give.  Only the CLI calls this, with ``os.environ``; the
plan it returns notes for is never changed, and projection and tuner never see the environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

from primus_launch.errors import UserError, one_line
from primus_launch.plan import Plan, PlanError

_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
#: the variables torchtitan's run_train.sh reads (main: NGPU, MODULE, CONFIG, COMM_MODE; <= 0.2: CONFIG_FILE)
RUN_TRAIN_NAMES = ("NGPU", "MODULE", "CONFIG", "CONFIG_FILE", "COMM_MODE")
_SECTIONS = ("model", "parallel", "training", "cluster")
_SHOWN_FIRST = ("parallel", "training", "cluster", "model")
#: at most this many variables are read one by one, only when together they change the plan (a script that
#: reads more that this environment sets: the first ones, in the order the script names them)
MAX_ALONE = 64


@dataclass(frozen=True)
class EnvEffect:
    """A variable of the caller's environment that changes the plan of the script that reads it."""

    name: str
    value: str  # its value in the environment
    changes: tuple[tuple[str, Any, Any], ...]  # (field, the plan's value, the value read with it)
    error: Optional[str] = None  # the reading with it fails: its one line


def referenced_names(text: str) -> list[str]:
    """The variable names ``text`` expands (``$NAME``, ``${NAME}``, ``${NAME:-x}``...), in order, once each."""
    return list(dict.fromkeys(m.group(1) for m in _REF.finditer(text)))


def _sections(plan: Plan) -> dict:
    return plan.model_dump(include=set(_SECTIONS))


def _diff(a: Any, b: Any, at: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted field, value in ``a``, value in ``b``) of each field that differs: the layout and batch first."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(a.keys() | b.keys()):
            out += _diff(a.get(k), b.get(k), f"{at}.{k}" if at else k)
        return out if at else sorted(out, key=lambda d: _SHOWN_FIRST.index(d[0].split(".")[0]))
    return [] if a == b else [(at, a, b)]


def _read(read: Callable[[dict[str, str]], Plan], env: dict[str, str]) -> Plan | str:
    try:
        return read(env)
    except (UserError, PlanError, ValueError, OSError) as e:
        return one_line(e)


def env_effects(read: Callable[[dict[str, str]], Plan], plan: Plan, names: Iterable[str],
                environ: Mapping[str, str]) -> list[EnvEffect]:
    """The variables of ``names`` set in ``environ`` that change ``plan`` when ``read`` (the recipe's reader,
    given the environment the script starts in) reads the recipe with them; ``plan``: its reading without."""
    given = {n: environ[n] for n in names if n in environ}
    if not given:
        return []
    base = _sections(plan)
    together = _read(read, given)
    if not isinstance(together, str) and _sections(together) == base:
        return []
    out = []
    for name, value in list(given.items())[:MAX_ALONE]:
        alone = _read(read, {name: value})
        if isinstance(alone, str):
            out.append(EnvEffect(name, value, (), alone))
            continue
        changes = tuple(_diff(base, _sections(alone)))
        if changes:
            out.append(EnvEffect(name, value, changes))
    return out


def _leaf(field: str) -> str:
    return field.rsplit(".", 1)[-1]


def env_note(e: EnvEffect, script: str, tuning: bool = False, command: str = "") -> str:
    """The answer's note for one :class:`EnvEffect` of the script named ``script``; ``tuning``: the note of a
    tune (its values are written where the script's were, which the variable beats at launch); ``command``: how
    the run was given (``bash train.sh``), for the way to project it with the variable."""
    if e.error is not None:
        said = f"read with it, the recipe fails: {e.error}"
    else:
        shown = [f"{_leaf(f)}={new}" for f, _, new in e.changes[:3]]
        had = [f"{_leaf(f)}={old}" for f, old, _ in e.changes[:3]]
        more = f" and {len(e.changes) - 3} more" if len(e.changes) > 3 else ""
        said = f"a launch here runs {', '.join(shown)}{more}; the plan has {', '.join(had)}"
    head = f"{e.name}={e.value} is set in this environment and {script} reads it ({said})"
    if tuning:
        return (f"{head}: the tune starts from the script as written, without it, and writes the tuned values where "
                f"the script's are, which {e.name}={e.value} still beats at launch: unset {e.name} before running "
                "the tuned script")
    how = f"primus-launch --project -- {e.name}={e.value} {command or 'bash ' + script}"
    return (f"{head}: the plan is the script as written, without it; to project that run, write {e.name}={e.value} "
            f"in the script or give it before the command ({how})")


def script_text(path: Path) -> str:
    """The text of a launch script, for :func:`referenced_names` ("" when unreadable: no candidates)."""
    from primus_launch.fileio import read_recipe_text

    try:
        return read_recipe_text(path)
    except UserError:
        return ""


_SCRIPT_KINDS = ("torchtitan-launch", "torchtitan-config-script", "primus-cli")
#: what a Primus launcher reads from its environment besides the script's own text (primus_cli module doc)
_PRIMUS_NAMES = ("NNODES", "GPUS_PER_NODE", "EXP")


def _script_names(p: Path, kind: str, script_args: Optional[list[str]] = None) -> list[str]:
    """:func:`referenced_names` of a launch script and, for a Megatron-LM script, of the files it sources or runs
    (``source common.sh``: the files the bash reader read, ``megatron_bash.ShellState.files``)."""
    text = script_text(p)
    names = referenced_names(text)
    if kind == "megatron" and text:
        from primus_launch.adapters.megatron_script import from_script

        try:
            rec = from_script(text, str(p), tuple(script_args or ()))
        except (UserError, PlanError, ValueError, OSError):
            return names
        for _, body in rec.files.values():
            names += referenced_names(body)
    return list(dict.fromkeys(names))


def recipe_effects(path: str | Path, plan: Plan, environ: Mapping[str, str], overrides: Optional[dict] = None,
                   primus_root: Optional[str | Path] = None, script_args: Optional[list[str]] = None
                   ) -> list[EnvEffect]:
    """:func:`env_effects` of a recipe file read as :func:`primus_launch.adapters.load_recipe` reads it (the same
    cluster ``overrides``, ``primus_root`` and ``script_args``); none for a recipe that is no launch script (a
    YAML, a TOML, a wrapper: Primus experiments read the environment themselves, as Primus does)."""
    from primus_launch.adapters import SCRIPT_SUFFIXES, detect_kind, load_recipe

    p = Path(path)
    kind = detect_kind(p)
    if not (kind in _SCRIPT_KINDS or (kind == "megatron" and p.suffix.lower() in SCRIPT_SUFFIXES)):
        return []
    names = _script_names(p, kind, script_args) + (list(_PRIMUS_NAMES) if kind == "primus-cli" else [])
    return env_effects(lambda env: load_recipe(p, overrides, primus_root, script_args=script_args, script_env=env),
                       plan, dict.fromkeys(names), environ)


def command_effects(argv: list[str], plan: Plan, environ: Mapping[str, str], overrides: Optional[dict] = None,
                    primus_root: Optional[str | Path] = None) -> tuple[list[EnvEffect], str]:
    """(:func:`env_effects` of a training command read as
    :func:`primus_launch.adapters.command_recipe.plan_from_command` reads it, the script it runs): for a launch
    script (``bash train.sh``, ``TP=4 bash train.sh``: the names its text reads, less the command's own words),
    torchtitan's ``run_train.sh`` call (:data:`RUN_TRAIN_NAMES`) and a Primus launch (``NNODES``...); none for
    a command that states everything itself (torchrun and its flags)."""
    from primus_launch.adapters.command_recipe import called_script, env_prefix, framework_of, plan_from_command

    argv = [str(a) for a in argv]
    kind = framework_of(argv)
    given, _ = env_prefix(argv)
    call = called_script(argv)
    if kind == "script" and call is not None:
        from primus_launch.adapters import detect_kind

        script, args = call
        names, label = _script_names(script, detect_kind(script), args), str(script)
    elif kind == "run-train-call":
        names, label = list(RUN_TRAIN_NAMES), "run_train.sh"
    elif kind == "primus-cli":
        names, label = list(_PRIMUS_NAMES), "the Primus launcher"
    else:
        return [], ""
    names = [n for n in dict.fromkeys(names) if n not in given]
    return env_effects(lambda env: plan_from_command(argv, overrides, primus_root, script_env=env), plan,
                       names, environ), label
