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
  the script; rendering writes ``recipe.tuned.sh`` next to it and runs that instead.
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
from typing import Any, Optional

from primus_launch.errors import UserError
from primus_launch.plan import Plan
from primus_launch.adapters.torchrun_argv import (cluster_overrides, command_cluster, launch_cluster,
                                                  split_torchrun, with_torchrun_cluster)

_CONFIG_FLAGS = ("--job.config_file", "--job.config-file")
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


def _titan_config_index(argv: list[str]) -> Optional[int]:
    """Index of the ``--job.config_file`` token (value in the same token after ``=`` or the next)."""
    for i, tok in enumerate(argv):
        name = tok.split("=", 1)[0]
        if name in _CONFIG_FLAGS:
            return i
    return None


def _titan_config_path(argv: list[str], i: int) -> tuple[str, int]:
    tok = argv[i]
    if "=" in tok:
        return tok.split("=", 1)[1], i
    if i + 1 >= len(argv):
        raise UserError(f"{tok}: missing the TOML path")
    return argv[i + 1], i + 1


def framework_of(argv: list[str]) -> str:
    """``"torchtitan"`` (a v0.2 job TOML), ``"torchtitan-launch"`` (torchtitan 0.3 ``--module/--config``),
    ``"script"`` (a launch script) or ``"megatron"`` (flags)."""
    if _titan_config_index(argv) is not None:
        return "torchtitan"
    from primus_launch.adapters.torchtitan_argv import is_titan_launch

    if is_titan_launch(argv):
        return "torchtitan-launch"
    if _script_of(argv) is not None:
        return "script"
    return "megatron"


# ----------------------------------------------------------------------------- torchtitan overrides
def _program_args(argv: list[str]) -> tuple[int, list[str]]:
    tr = split_torchrun(argv)
    if tr is None:
        return 0, argv
    start = len(argv) - len(tr.program)
    return start, tr.program


def _titan_overrides(argv: list[str]) -> list[tuple[int, int, str, str, Optional[str]]]:
    """``--section.key value`` / ``--section.key=value`` / bare ``--section.key`` (true) tokens of the
    training program, as (first token, last token, section, key, raw value)."""
    start, prog = _program_args(argv)
    out = []
    i = 0
    while i < len(prog):
        tok = prog[i]
        if tok.startswith("--") and "." in tok.split("=", 1)[0]:
            name, eq, val = tok[2:].partition("=")
            if name.replace("-", "_") in ("job.config_file",):
                i += 1 if eq else 2
                continue
            section, _, key = name.partition(".")
            if eq:
                out.append((start + i, start + i, section, key, val))
                i += 1
            elif i + 1 < len(prog) and not prog[i + 1].startswith("--"):
                out.append((start + i, start + i + 1, section, key, prog[i + 1]))
                i += 2
            else:
                out.append((start + i, start + i, section, key, None))
                i += 1
        else:
            i += 1
    return out


def _typed(raw: Optional[str], current: Any, where: str) -> Any:
    """The TOML value of a command-line override, typed like the value it replaces."""
    if raw is None:
        return True
    if isinstance(current, bool) or raw.lower() in ("true", "false"):
        if raw.lower() not in ("true", "false"):
            raise UserError(f"{where}={raw!r}: expected true or false")
        return raw.lower() == "true"
    if isinstance(current, list):
        return [x.strip() for x in raw.split(",") if x.strip()]
    for cast in (int, float):
        if isinstance(current, cast) or current is None:
            try:
                return cast(raw)
            except ValueError:
                if current is not None:
                    raise UserError(f"{where}={raw!r}: expected a {cast.__name__}") from None
    return raw


def _titan_text_with_overrides(text: str, overrides: list[tuple[int, int, str, str, Optional[str]]],
                               path: str) -> str:
    """The TOML text with the command's overrides written in (tomlkit keeps comments and order)."""
    if not overrides:
        return text
    import tomlkit

    from primus_launch.inputs import parse_toml

    parse_toml(text, "recipe", path)  # the input boundary: syntax and nesting as one line
    try:
        doc = tomlkit.parse(text)
    except Exception as e:  # tomlkit raises its own ParseError subclasses
        raise UserError(f"recipe={path!r}: malformed TOML: {e}") from None
    for _, _, section, key, raw in overrides:
        sec_name, key = section, key.replace("-", "_")
        if sec_name not in doc:
            doc[sec_name] = tomlkit.table()
        tbl = doc[sec_name]
        tbl[key] = _typed(raw, tbl.get(key), f"--{section}.{key}")
    return tomlkit.dumps(doc)


# ----------------------------------------------------------------------------- reading
def plan_from_command(argv: list[str], overrides: dict | None = None) -> Plan:
    """The plan of a training command (see the module docstring for the kinds and precedence)."""
    argv = [str(a) for a in argv]
    if not argv:
        raise UserError("command: empty; give the training command after '--'")
    ov = cluster_overrides(overrides)
    kind = framework_of(argv)
    if kind == "torchtitan":
        from primus_launch.adapters.torchtitan import cluster_from_header, plan_from_text

        cfg, _ = _titan_config_path(argv, _titan_config_index(argv))
        path = Path(cfg)
        if not path.is_file():
            raise UserError(f"--job.config_file={cfg!r}: no such file")
        from primus_launch.fileio import read_recipe_text

        text = _titan_text_with_overrides(read_recipe_text(path, "--job.config_file"), _titan_overrides(argv), cfg)
        header = cluster_from_header(text)
        cluster = command_cluster(argv, ov, header.gpu if header else None)
        plan = plan_from_text(text, cluster, str(path))
        if cluster is None and ov:
            plan = plan.with_changes(cluster=ov)
        return plan
    if kind == "torchtitan-launch":
        from primus_launch.adapters.torchtitan_argv import plan_from_launch

        return plan_from_launch(argv, launch_cluster(argv, ov))
    if kind == "script":
        from primus_launch.adapters import load_recipe

        _, script = _script_of(argv)
        return load_recipe(script, ov)
    from primus_launch.adapters.megatron import plan_from_argv

    cluster = command_cluster(argv, ov, None)
    if cluster is None:
        plan = plan_from_argv(argv)
        return plan.with_changes(cluster=ov) if ov else plan
    return plan_from_argv(argv, cluster)


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

    ci = _titan_config_index(argv)
    cfg, vi = _titan_config_path(argv, ci)
    original = Path(cfg)
    if not original.is_file():
        raise UserError(f"--job.config_file={cfg!r}: no such file")
    ovs = _titan_overrides(argv)
    from primus_launch.fileio import read_recipe_text

    base = _titan_text_with_overrides(read_recipe_text(original, "--job.config_file"), ovs, cfg)
    tuned_text = render_torchtitan(plan, base)
    out = _tuned_path(original)
    atomic_write_text(out, tuned_text, protect=original)
    new = list(argv)
    spelled = _sibling_token(cfg, out)
    new[vi] = f"{argv[ci].split('=', 1)[0]}={spelled}" if vi == ci else spelled
    # a command-line override wins over the file in torchtitan: keep each one equal to the tuned value
    tuned = tomllib.loads(tuned_text)
    for first, last, section, key, raw in ovs:
        val = tuned.get(section, {}).get(key.replace("-", "_"))
        if val is None or _typed(raw, val, f"--{section}.{key}") == val:
            continue
        text_val = str(val).lower() if isinstance(val, bool) else (
            ",".join(map(str, val)) if isinstance(val, list) else str(val))
        if first == last and "=" in argv[first]:
            new[first] = f"{argv[first].split('=', 1)[0]}={text_val}"
        elif first == last:  # bare flag (true) that is now false
            new[first] = f"{argv[first]}={text_val}"
        else:
            new[last] = text_val
    return with_torchrun_cluster(new, plan.cluster)
