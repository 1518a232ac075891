"""Read a recipe straight from a training command line, and render the tuned command back.

``primus-launch --project -- <command>`` / ``--tune -- <command>`` (issue 7).  Four kinds of
command are understood:

- **TorchTitan 0.3**: ``torchrun ... -m torchtitan.train --module M --config C --section.key value``
  (:mod:`primus_launch.adapters.torchtitan_argv`); rendering edits the command's own tokens.
- **TorchTitan**: any command carrying ``--job.config_file PATH`` (``torchrun ... -m torchtitan.train
  --job.config_file llama3_8b.toml``).  The plan is the TOML read by the TorchTitan adapter with the
  command's ``--section.key value`` overrides applied first (torchtitan lets the command line override
  the file); the cluster is torchrun's ``--nnodes`` x ``--nproc-per-node``.
  Rendering writes the tuned TOML next to the original (``x.tuned.toml``, never over it), points
  ``--job.config_file`` at it, and keeps any command-line override in step with the tuned value.
- **A launch script**: ``bash recipe.sh [ARGS]`` or ``./recipe.sh`` -> the Megatron-LM adapter reads
  the script; rendering writes ``recipe.tuned.sh`` next to it and runs that instead.  ``NAME=value`` words
  before it (``TP=4 bash recipe.sh``, also after ``env``) are the environment the script starts in, which its
  ``${TP:-2}`` reads; a tune of such a command is refused (the words would beat the tuned values).
- **Megatron-LM flags** otherwise (``torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py
  --num-layers ...``): the Megatron adapter's :func:`plan_from_argv` / :func:`render_argv`, which
  also take the cluster from torchrun's options and edit only the changed values.

Cluster precedence (as for recipe files): ``overrides`` (the CLI's ``--gpu/--nodes/--gpus-per-node``)
over what the command states (torchrun options; torchrun's defaults are 1 node x 1 process) over the
recipe's own statement (header comments).  The GPU kind is never in a command: it comes from the
override, the recipe's comment, or the adapters' default (h100-sxm).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Optional

from primus_launch.errors import UserError
from primus_launch.plan import Plan
from primus_launch.adapters.titan_job_argv import (config_index, config_path, job_overrides, job_value,
                                                   plan_from_job_command, text_with_overrides, typed_override)
from primus_launch.adapters.torchrun_argv import (cluster_overrides, command_cluster, default_gpu_note,
                                                  launch_cluster, with_torchrun_cluster)

_SHELLS = ("bash", "sh")
_SCRIPT_SUFFIXES = (".sh", ".bash")


# ----------------------------------------------------------------------------- kinds
def _script_of(argv: list[str]) -> Optional[tuple[int, Path]]:
    """(index of the script token, its path) for ``bash x.sh ...`` / ``./x.sh ...``."""
    if not argv:
        return None
    i = 1 if os.path.basename(argv[0]) in _SHELLS else 0
    if i == 1:
        while i < len(argv) and argv[i].startswith("-"):  # bash -e x.sh, bash -x x.sh
            i += 1
    if i < len(argv) and argv[i].endswith(_SCRIPT_SUFFIXES):
        return i, Path(argv[i])
    return None


def framework_of(argv: list[str]) -> str:
    """``"torchtitan"`` (a v0.2 job TOML), ``"torchtitan-launch"`` (torchtitan 0.3 ``--module/--config``),
    ``"primus-cli"`` (a Primus launch: ``./primus-cli ... -- train pretrain --config X``), ``"run-train-call"``
    (``MODULE=m CONFIG=c ./run_train.sh``), ``"script"`` (a launch script) or ``"megatron"`` (flags)."""
    from primus_launch.adapters.primus_cli import launcher_in
    from primus_launch.adapters.torchtitan_script import run_train_call

    if launcher_in(argv):
        return "primus-cli"
    if run_train_call(argv):
        return "run-train-call"
    if config_index(argv) is not None:
        return "torchtitan"
    from primus_launch.adapters.torchtitan_argv import is_titan_launch

    if is_titan_launch(argv):
        return "torchtitan-launch"
    if _script_of(argv) is not None:
        return "script"
    env, rest = env_prefix(argv)
    if env and _script_of(rest) is not None:
        return "script"
    return "megatron"


def env_prefix(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """(the ``NAME=value`` words a command starts with, after an optional ``env``: the environment it runs
    with, the command after them)."""
    from primus_launch.adapters.torchtitan_script import ENV_WORD

    skip = 1 if argv and os.path.basename(argv[0]) == "env" else 0
    env: dict[str, str] = {}
    while skip < len(argv) and ENV_WORD.match(argv[skip]):
        k, v = argv[skip].split("=", 1)
        env[k] = v
        skip += 1
    return (env, list(argv[skip:])) if env else ({}, list(argv))


def called_script(argv: list[str]) -> Optional[tuple[Path, list[str]]]:
    """(the launch script a command runs: ``bash x.sh A B``, ``./x.sh``, after ``NAME=value`` words; its
    arguments), else None."""
    rest = env_prefix(argv)[1]
    hit = _script_of(rest)
    return (hit[1], rest[hit[0] + 1:]) if hit is not None else None


def check_command_tunable(argv: list[str]) -> None:
    """Refuse, before a tune, a launch script called with ``NAME=value`` words (``TP=4 bash x.sh``): the tuned
    command would run the tuned script with them, and they beat what the script's ``${TP:-2}`` says."""
    env, rest = env_prefix([str(a) for a in argv])
    if env and framework_of([str(a) for a in argv]) == "script":
        said = " ".join(f"{k}={v}" for k, v in env.items())
        raise UserError(f"command: {said} before {_script_of(rest)[1]}: the tuned script would run with them, and they "
                        "beat the values it writes; write them into the script, then tune it")


# ----------------------------------------------------------------------------- reading
def plan_from_command(argv: list[str], overrides: dict | None = None, primus_root: str | Path | None = None,
                      script_env: dict[str, str] | None = None) -> Plan:
    """The plan of a training command (see the module docstring for the kinds and precedence); ``primus_root``
    locates the presets of a Primus launch's experiment; ``script_env``: variables the launch script (or
    run_train.sh, a Primus launcher) starts with besides the command's own ``NAME=value`` words, which win (never
    this process's environment: :mod:`primus_launch.adapters.caller_env`); a node past the GPU's reference server is
    noted (:mod:`primus_launch.adapters.node_size`)."""
    from primus_launch.adapters.node_size import with_node_note

    return with_node_note(_plan_of_command(argv, overrides, primus_root, script_env))


def _plan_of_command(argv: list[str], overrides: dict | None, primus_root: str | Path | None,
                     script_env: dict[str, str] | None) -> Plan:
    """:func:`plan_from_command`'s reading, by the command's kind."""
    argv = [str(a) for a in argv]
    if not argv:
        raise UserError("command: empty; give the training command after '--'")
    ov = cluster_overrides(overrides)
    kind = framework_of(argv)
    if kind == "primus-cli":
        from primus_launch.adapters.primus_cli import plan_from_primus_command

        return plan_from_primus_command(argv, ov, primus_root, script_env)
    if kind == "run-train-call":
        from primus_launch.adapters.torchtitan_script import plan_from_run_train_call

        return plan_from_run_train_call(argv, ov, script_env)
    if kind == "torchtitan":
        return plan_from_job_command(argv, ov)
    if kind == "torchtitan-launch":
        from primus_launch.adapters.torchtitan_argv import plan_from_launch

        cluster = launch_cluster(argv, ov)
        return _noted(plan_from_launch(argv, cluster), default_gpu_note(cluster, ov))
    if kind == "script":
        from primus_launch.adapters import load_recipe

        env, rest = env_prefix(argv)
        i, script = _script_of(rest)
        # the words after the script are its positional parameters ($1, $2, "$@"), as `--project script -- A B`;
        # NAME=value words before it, the environment it starts in
        return load_recipe(script, ov, script_args=rest[i + 1:], script_env={**(script_env or {}), **env} or None)
    from primus_launch.adapters.megatron import plan_from_argv

    # `NCCL_ALGO=Ring torchrun ...`: torchrun's cluster is read past the NAME=value words, which are the run's
    # environment (user16: the words hid torchrun, so --gpu was applied after a read that noted gpu=h100-sxm as "the
    # default ... pass --gpu", and the variables were not read)
    env, rest = env_prefix(argv)
    cluster = command_cluster(rest, ov, None)
    if cluster is None:
        plan = plan_from_argv(argv, launch_env=env or None, overrides=ov)
        return plan.with_changes(cluster=ov) if ov else plan
    return _noted(plan_from_argv(argv, cluster, launch_env=env or None), default_gpu_note(cluster, ov))


def _noted(plan: Plan, note: Optional[str]) -> Plan:
    """``plan`` with ``note`` added to its reader notes (the answer's ``note:`` lines)."""
    if note is not None and plan.source is not None and note not in plan.source.notes:
        plan.source.notes.append(note)
    return plan


# ----------------------------------------------------------------------------- writing
def _tuned_path(original: Path) -> Path:
    return original.with_name(f"{original.stem}.tuned{original.suffix}")


def render_command(plan: Plan, argv: list[str]) -> list[str]:
    """The command that runs ``plan``: ``argv`` with only the tuned values changed.

    Megatron-LM flags are edited in place (Megatron adapter).  A launch script or a TorchTitan TOML
    is written next to the original as ``*.tuned.*`` (atomically, never over the original) and the
    command is pointed at it; torchrun's ``--nnodes``/``--nproc-per-node`` follow the plan's cluster.
    """
    argv = [str(a) for a in argv]
    if not argv:
        raise UserError("command: empty; nothing to render")
    kind = framework_of(argv)
    if kind in ("primus-cli", "run-train-call"):
        raise UserError(f"command: a {'Primus launch' if kind == 'primus-cli' else 'run_train.sh call'} is read, not "
                        "rewritten; tune its experiment YAML / the torchtitan command itself")
    if kind == "megatron":
        from primus_launch.adapters.megatron import render_argv

        return render_argv(plan, argv)
    if kind == "torchtitan-launch":
        from primus_launch.adapters.torchtitan_argv import render_launch

        return render_launch(plan, argv)
    if kind == "script":
        from primus_launch.adapters import write_recipe

        i, script = _script_of(argv)
        out = _tuned_path(script)
        from primus_launch.adapters import detect_kind

        fmt = "torchtitan-script" if detect_kind(script) == "torchtitan-launch" else None
        base = plan.source or _source("torchtitan" if fmt else "megatron")
        src = plan.model_copy(update={"source": base.model_copy(update={
            "framework": "torchtitan" if fmt else "megatron", "path": str(script),
            "format": fmt or (base.format if base.framework == "megatron" else None)})})
        write_recipe(src, out)
        return [*argv[:i], _sibling_token(argv[i], out, bare_command=i == 0), *argv[i + 1:]]
    return _render_titan(plan, argv)


def _sibling_token(token: str, out: Path, bare_command: bool = False) -> str:
    """The path of ``out`` (a file next to ``token``'s file) spelled from ``token``'s own directory,
    so a relative command stays relative; a bare command name gets ``./`` (no PATH lookup)."""
    d = os.path.dirname(token)
    if not d:
        return f"./{out.name}" if bare_command else out.name
    return os.path.join(d, out.name)


def _source(framework: str):
    from primus_launch.plan import Source

    return Source(framework=framework)


def _render_titan(plan: Plan, argv: list[str]) -> list[str]:
    from primus_launch.adapters.torchtitan import render_torchtitan
    from primus_launch.fileio import atomic_write_text

    ci = config_index(argv)
    cfg, vi = config_path(argv, ci)
    original = Path(cfg)
    if not original.is_file():
        raise UserError(f"--job.config_file={cfg!r}: no such file")
    ovs = job_overrides(argv)
    from primus_launch.fileio import read_recipe_text

    base = text_with_overrides(read_recipe_text(original, "--job.config_file"), ovs, cfg)
    tuned_text = render_torchtitan(plan, base)
    out = _tuned_path(original)
    atomic_write_text(out, tuned_text, protect=original)
    new = list(argv)
    spelled = _sibling_token(cfg, out)
    new[vi] = f"{argv[ci].split('=', 1)[0]}={spelled}" if vi == ci else spelled
    # a command-line override wins over the file in torchtitan: keep each one equal to the tuned value
    tuned = tomllib.loads(tuned_text)
    for first, last, section, key, raw in ovs:
        val = job_value(tuned, section, key)
        if val is None or typed_override(raw, val, f"--{section}.{key}") == val:
            continue
        text_val = str(val).lower() if isinstance(val, bool) else (
            ",".join(map(str, val)) if isinstance(val, list) else str(val))
        if isinstance(val, bool):  # a flag pair (tyro): --compile.enable / --compile.no-enable, no value
            new[first] = f"--{section}.{key}" if val else f"--{section}.no-{key.replace('_', '-')}"
        elif first == last and "=" in argv[first]:
            new[first] = f"{argv[first].split('=', 1)[0]}={text_val}"
        elif first == last:  # bare flag (true) that is now false
            new[first] = f"{argv[first]}={text_val}"
        else:
            new[last] = text_val
    return with_torchrun_cluster(new, plan.cluster)
