"""A launch script that runs a Primus experiment through ``primus-cli`` -> :class:`Plan` (reading only).

Primus's documented launch (README, docs/02-user-guide/configuration-system.md)::

    [NNODES=4] ./primus-cli slurm srun -N 4 -- train pretrain --config examples/megatron/configs/MI355X/x.yaml \
        --train_iters 100 --micro_batch_size 2

(and its older forms ``NNODES=8 EXP=examples/.../x.yaml bash examples/run_slurm_pretrain.sh --key value``,
docs/02-user-guide/megatron-lm-training.md, and ``torchrun ... primus/cli/main.py train pretrain --config X``)
is read as the experiment YAML (:mod:`primus_yaml`) with the command's overrides merged last (Primus
``parse_cli_overrides``: ``--key value``, ``--key=value``, ``key=value``, dotted keys nest, a bare
``--flag`` is true; "CLI overrides > modules.pre_trainer.overrides > presets"), the script's
``NAME=value`` / ``export`` assignments as the environment its ``${VAR:default}`` placeholders read, and the
node count from ``slurm ... -N`` / ``--nodes`` or ``NNODES`` (GPUs per node: ``GPUS_PER_NODE``, else 8).
A relative ``--config`` is relative to where primus-cli runs (the Primus checkout's root): it is looked for
next to the script, then in each folder above it.  Tuning writes the experiment YAML, which the command's
overrides would beat: a tune of such a script is refused by name (tune the experiment YAML).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional


from primus_launch.adapters.launcher_counts import launcher_count, slurm_option
from primus_launch.adapters.torchtitan_script import ENV_WORD, command_lines
from primus_launch.errors import UserError
from primus_launch.fileio import read_recipe_text
from primus_launch.inputs import find_from_run_root
from primus_launch.plan import Cluster, Plan, PlanError

_CLI = "primus-cli"


_EXAMPLE_NAME = r"run_(?:slurm_|local_)?pretrain(?:_cli)?\.sh"  # examples/run_slurm_pretrain.sh and its kin
_EXAMPLE_SCRIPT = re.compile(rf"^{_EXAMPLE_NAME}$")


def _launcher_at(words: list[str]) -> Optional[tuple[int, str]]:
    """(index, kind) of the Primus launcher in a command's words: ``primus-cli``, an example script
    (``examples/run_slurm_pretrain.sh``) or ``primus/cli/main.py``."""
    for i, w in enumerate(words):
        name = Path(w).name
        if name == _CLI:
            return i, "cli"
        if _EXAMPLE_SCRIPT.match(name):
            return i, "example"
        if w.endswith("primus/cli/main.py"):
            return i, "main"
    return None


def is_primus_cli_script(text: str) -> bool:
    """A script whose command runs a Primus experiment: ``primus-cli ... -- train pretrain --config X``,
    ``EXP=X bash examples/run_slurm_pretrain.sh ...`` or ``... primus/cli/main.py train pretrain``."""
    for line in text.splitlines():
        code = line.split("#", 1)[0]
        if re.search(r"(?:^|[\s/])primus-cli\b|primus/cli/main\.py", code) or \
                (re.search(rf"\b{_EXAMPLE_NAME}\b", code) and "EXP=" in text):
            return True
    return False


def _coerce(value: str) -> Any:
    """Primus ``_coerce_cli_value_modern`` (primus/core/utils/arg_utils.py:14-36, what ``train_runtime.py``
    ``_apply_overrides`` uses): ``true`` / ``false`` in any case a bool; the word ``None`` or a ``[`` / ``(`` / ``{``
    literal by ``ast.literal_eval``; with a ``.`` ``float()``; else ``int()``; else the string as it is (``null``,
    ``~``, ``yes``, ``0x10`` stay strings; YAML read them as None / True / 16)."""
    import ast

    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    if value == "None" or value[:1] in ("[", "(", "{"):
        try:
            v = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
        else:
            return v
    if "." in value:
        try:
            return float(value)
        except ValueError:
            pass
    try:
        return int(value)
    except ValueError:
        from primus_launch.adapters.primus_yaml import CliWord

        return CliWord(value)  # kept a string by the runtime's merge: `null` too (not None, as in a YAML)


def cli_overrides(tokens: list[str]) -> dict:
    """Primus ``parse_cli_overrides`` of the tokens after ``train pretrain --config X``."""
    out: dict = {}
    i = 0
    while i < len(tokens):
        item = tokens[i].strip()
        i += 1
        if not item:
            continue
        if "=" in item:
            key, value = item.split("=", 1)
        elif item.startswith("--") and i < len(tokens) and not tokens[i].startswith("--"):
            key, value = item, tokens[i]
            i += 1
        elif item.startswith("--"):
            key, value = item, "true"
        else:
            continue  # primus-cli warns and skips it
        cur = out
        *path, last = key.lstrip("-").strip().split(".")
        for k in path:
            cur = cur.setdefault(k, {})
        cur[last] = _coerce(value.strip())
    return out


def _command(text: str, path: str, args: tuple[str, ...] = (), start_env: Optional[dict[str, str]] = None
             ) -> tuple[list[str], str, dict[str, str]]:
    """(the launcher's command words, its kind, the environment the script sets, over ``start_env``: the
    variables it is started with) of the last Primus launch line; ``args``: the script's own arguments (its
    ``"$@"``)."""
    hit: Optional[tuple[list[str], str, dict[str, str]]] = None
    for words, env in command_lines(text, args, start_env):
        at = _launcher_at(words)
        if at is None:
            continue
        env = dict(env)
        for w in words[:at[0]]:  # NAME=value prefixes of the call
            if ENV_WORD.match(w):
                k, v = w.split("=", 1)
                env[k] = v
        hit = (words if at[1] == "main" else words[at[0]:], at[1], env)
    if hit is None:
        raise UserError(f"{path}: no Primus launch found (expected primus-cli ... -- train pretrain --config X, or "
                        "EXP=X bash examples/run_slurm_pretrain.sh)")
    return hit


def _count(value: str, what: str) -> int:
    """A node / GPU count the launch states (:func:`launcher_count`; Slurm's ``MIN-MAX``: the upper bound)."""
    n = launcher_count(value, "-")
    if n is None:
        raise UserError(f"{what}={value!r}: a positive integer or a range MIN-MAX with MIN <= MAX (or pass --nodes / "
                        "--gpus-per-node)")
    return n


def load_primus_cli_script(path: str | Path, overrides: Optional[dict] = None,
                           primus_root: Optional[str | Path] = None, script_args: tuple[str, ...] = (),
                           script_env: Optional[dict[str, str]] = None) -> Plan:
    """The plan of the Primus experiment a ``primus-cli`` launch script runs (see the module docstring);
    ``overrides`` (gpu, num_nodes, gpus_per_node) win over what the script states; ``script_env``: the variables
    the script is started with (its ``${NNODES:-1}`` reads them)."""
    p = Path(path)
    plan = _plan_from_launch_text(read_recipe_text(p), p, str(p), overrides, primus_root, tuple(script_args),
                                  script_env)
    if script_args:
        plan.source.script_args = list(script_args)
    return plan


def launcher_in(argv: list[str]) -> bool:
    """Whether a command's words run a Primus experiment (``./primus-cli direct -- train pretrain --config X``,
    ``EXP=X bash examples/run_pretrain.sh``, ``torchrun ... primus/cli/main.py train pretrain ...``); an example
    script's name (``run_pretrain.sh``, a common name) counts only with the ``EXP=`` it reads written before it."""
    at = _launcher_at(argv)
    return at is not None and (at[1] != "example" or any(w.startswith("EXP=") for w in argv[:at[0]]))


def plan_from_primus_command(argv: list[str], overrides: Optional[dict] = None,
                             primus_root: Optional[str | Path] = None,
                             script_env: Optional[dict[str, str]] = None) -> Plan:
    """The plan of a Primus launch given as a command (``primus-launch --project -- ./primus-cli direct -- train
    pretrain --config X``; ``NAME=value`` prefixes are its environment), read as the one-line script that runs it
    from the current folder (a relative ``--config`` is looked for there and in each folder above it)."""
    import shlex

    return _plan_from_launch_text(shlex.join(argv), Path.cwd() / "command", "command", overrides, primus_root,
                                  start_env=script_env)


def _plan_from_launch_text(text: str, p: Path, label: str, overrides: Optional[dict],
                           primus_root: Optional[str | Path], args: tuple[str, ...] = (),
                           start_env: Optional[dict[str, str]] = None) -> Plan:
    """:func:`load_primus_cli_script` of a script's ``text``; ``p``: where it runs from (relative configs),
    ``label``: how messages name it."""
    from primus_launch.adapters.primus_yaml import gpu_from_folder, plan_from_text

    cmd, kind, env = _command(text, label, args, start_env)
    if kind == "example":
        # examples/run_pretrain.sh: ``primus/cli/main.py train pretrain --config $EXP ... "$@"`` on NNODES nodes
        mode, rest = [], ["--config", env.get("EXP", ""), *cmd[1:]]
    else:
        try:
            sep = next(i for i in range(len(cmd) - 1) if cmd[i] == "train" and cmd[i + 1] == "pretrain")
        except StopIteration:
            runs = " ".join(cmd[cmd.index("--") + 1:][:2]) if "--" in cmd else " ".join(cmd[1:3])
            raise UserError(f"{label}: the Primus command runs {runs!r}, not 'train pretrain' (only pretraining is "
                            "projected)") from None
        mode, rest = cmd[:sep], cmd[sep + 2:]
    cfg, extra, i = None, [], 0
    while i < len(rest):
        key, eq, val = rest[i].partition("=")
        if key in ("--config", "--exp") and (eq or i + 1 < len(rest)):
            cfg = val if eq else rest[i + 1]
            i += 1 if eq else 2
            continue
        extra.append(rest[i])
        i += 1
    if cfg is None:
        raise UserError(f"{label}: primus train pretrain has no --config (the experiment YAML)")
    if not cfg.strip():
        raise UserError(f"{label}: the Primus experiment (--config / EXP) has no value (an unset variable such as $EXP? "
                        "set it in the script)")
    hit = find_from_run_root(cfg, p)
    if hit is None:
        raise UserError(f"--config={cfg!r}: no such file next to {label} or in a folder above it (the path is relative to "
                        "where Primus runs, the Primus checkout's root)")
    nodes: Optional[int] = None
    nodes_from = ""  # how the launch states its node count, for an error that reads it
    gpn_written: Optional[str] = env.get("GPUS_PER_NODE")
    if "slurm" in mode:
        for j, w in enumerate(mode):
            k, eq, v = slurm_option(w)
            if k in ("-N", "--nodes"):
                nodes = _count(v if eq else (mode[j + 1] if j + 1 < len(mode) else ""), f"primus-cli slurm {k}")
                nodes_from = f"primus-cli slurm {k} {nodes}"
    if kind == "main":  # torchrun ... primus/cli/main.py: torchrun's own counts
        from primus_launch.adapters.torchrun_argv import resolve_option

        program = next((j for j, w in enumerate(mode) if w.endswith(".py")), len(mode))
        for j, w in enumerate(mode[:program]):
            k, eq, v = w.partition("=")
            k = (resolve_option(k) or k) if k.startswith("--") else k  # torchrun takes --nnode 2 as --nnodes 2
            v = v if eq else (mode[j + 1] if j + 1 < len(mode) else "")
            if k == "--nnodes":
                nodes = _count(v, "torchrun --nnodes")
                nodes_from = f"torchrun --nnodes {nodes}"
            elif k in ("--nproc_per_node", "--nproc-per-node"):
                gpn_written = v
    if nodes is None and env.get("NNODES"):
        nodes = _count(env["NNODES"], "NNODES")
        nodes_from = f"NNODES={nodes}"
    import os

    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    gpu = gpu_from_folder(hit)
    stated = {"gpu": gpu[0] if gpu else "mi300x", "num_nodes": nodes or 1,
              "gpus_per_node": _count(gpn_written, "GPUS_PER_NODE") if gpn_written else 8}
    cluster = Cluster(**{**stated, **given}) if nodes is not None or "num_nodes" in given else None
    cli = cli_overrides(extra)
    text, full_env = read_recipe_text(hit), {**os.environ, **env}
    # no node count stated: the one the layout needs, on the GPU / node size given
    try:
        plan = plan_from_text(text, hit, cluster, primus_root, full_env, cli,
                              overrides=given if cluster is None else None, launch_env=env)
    except PlanError as e:
        if nodes_from and "num_nodes" not in given and re.search(r"world size|\bdp\b", e.allowed):
            raise PlanError(e.field, e.value, f"{e.allowed} (nodes from the launch's {nodes_from})") from None
        raise
    note = f"read through the Primus launch: the experiment {cfg}" + (
        f" with the command's overrides {', '.join(sorted(cli))} (they win over its YAML)" if cli else "")
    said = [note]
    notes = list(plan.source.notes)
    if kind == "example" and cluster is None:  # the example scripts default NNODES to 1: the fitted count is not theirs
        notes = [f"{n.split(', the smallest node count', 1)[0]}, the fewest the parallel layout fits: the launch sets "
                 "no NNODES (examples/run_pretrain.sh and run_slurm_pretrain.sh default to 1 node); give NNODES= "
                 "or --nodes" if n.startswith("cluster: ") and "the smallest node count" in n else n for n in notes]
    if cluster is not None and "gpu" not in given:  # the launch gave the node count; the GPU is still a guess (user15)
        said.append(f"cluster.gpu={cluster.gpu}: guessed from the folder name {gpu[1]!r}" if gpu else
                    f"cluster.gpu={cluster.gpu}: the config names no GPU (give --gpu)")
    src = plan.source.model_copy(update={"path": str(p) if label != "command" else str(hit),
                                         "format": "primus-cli-script",
                                         "notes": [*said, *notes]})
    return plan.model_copy(update={"source": src})
