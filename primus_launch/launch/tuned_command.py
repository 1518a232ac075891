"""The command a tuned recipe file is launched with: the user's own training command after ``--`` (``--tune
run_config.yaml --launch -- sbatch train.sbatch`` is not it; ``-- torchrun ... run_recipe.py --config-file
run_config.yaml`` is), with the words that name the recipe file pointed at the tuned file.  A command that names
the recipe nowhere would launch the original recipe, not the tuned one: :func:`recipe_words` finds none, and the
CLI refuses it before the search."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence


def _named_path(word: str) -> tuple[str, str]:
    """(prefix, path) of a command word: ``--config-file=x.yaml`` -> (``--config-file=``, ``x.yaml``); a bare
    word is all path."""
    if word.startswith("-") and "=" in word:
        head, _, tail = word.partition("=")
        return head + "=", tail
    return "", word


def _same_file(a: str, b: str | os.PathLike) -> bool:
    try:
        return bool(a) and os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):  # a NUL or an over-long word names no file
        return False


def recipe_words(command: Sequence[str], recipe: str | os.PathLike) -> list[int]:
    """Indices of the words of ``command`` that name the file ``recipe`` (the same real path, from the current
    folder: a word ``run_config.yaml``, ``./run_config.yaml``, ``/abs/run_config.yaml`` or ``--config-file=...``)."""
    return [i for i, w in enumerate(command) if _same_file(_named_path(w)[1], recipe)]


def with_tuned_recipe(command: Sequence[str], recipe: str | os.PathLike, tuned: str | os.PathLike) -> list[str]:
    """``command`` with every word naming ``recipe`` naming ``tuned`` instead: its folder as the word wrote it
    where the tuned file lies beside the recipe (``run_config.yaml`` -> ``run_config.tuned.yaml``), else
    ``tuned`` as given (``--out`` elsewhere)."""
    out = list(command)
    for i in recipe_words(command, recipe):
        prefix, path = _named_path(out[i])
        beside = Path(os.path.realpath(tuned)).parent == Path(os.path.realpath(recipe)).parent
        new = os.path.join(os.path.dirname(path), Path(tuned).name) if beside else str(tuned)
        out[i] = prefix + new
    return out


#: words that start a script rather than name it (``sbatch train.sh``, ``bash train.sh``): skipped with their options
_STARTERS = ("sbatch", "bash", "sh", "srun", "env", "nohup", "exec")
#: files a command names that are the recipe's kind, not a launch script
_NOT_SCRIPTS = (".py", ".yaml", ".yml", ".toml", ".json")


def launch_script(command: Sequence[str], recipe: str | os.PathLike) -> tuple[str | None, list[str], dict[str, str]]:
    """``(script, its arguments, VAR=value prefixes)`` of a command that starts a shell script (``sbatch train.sh
    R.yaml``, ``bash train.sh R.yaml``, ``CUDA_DEVICE_MAX_CONNECTIONS=1 ./train.sh R.yaml``): the first word naming
    an existing file that is neither ``recipe`` nor a program / config file (:data:`_NOT_SCRIPTS`); None where the
    command names no such file (a ``torchrun ... run.py --config-file R.yaml`` holds its own environment in its
    ``VAR=value`` prefixes alone)."""
    prefix: dict[str, str] = {}
    for i, w in enumerate(command):
        if "=" in w and not w.startswith("-") and w.split("=", 1)[0].isidentifier():
            name, _, value = w.partition("=")
            prefix[name] = value
            continue
        if w.endswith(_NOT_SCRIPTS) or _same_file(w, recipe) or not os.path.isfile(w):
            continue
        return w, list(command[i + 1:]), prefix
    return None, [], prefix


def launch_env(command: Sequence[str], recipe: str | os.PathLike) -> tuple[str, dict[str, str]]:
    """``(where, environment)`` a command sets for the training program it starts: the ``export`` lines and
    ``VAR=value`` prefixes of its shell script as the Megatron script reader collects them
    (``adapters/megatron_script.py`` ``from_script``, run with the command's words after the script as ``$1 ..``),
    over the command's own ``VAR=value`` prefixes; ``where`` names the script (or ``the command``).  A script the
    reader cannot read gives its prefixes alone."""
    from primus_launch.adapters.megatron_script import from_script
    from primus_launch.errors import UserError
    from primus_launch.plan import PlanError

    script, args, prefix = launch_script(command, recipe)
    if script is None:
        return "the command", prefix
    try:
        text = Path(script).read_text(errors="replace")
        rec = from_script(text, script, tuple(args), prefix)
    except (OSError, UserError, PlanError, ValueError):
        return "the command", prefix
    return script, {**prefix, **rec.env_values()}


def launch_env_problem(plan, command: Sequence[str], recipe: str | os.PathLike) -> str | None:
    """The first start-up assert of Megatron-LM that the tuned ``plan`` breaks in the environment ``command``'s
    launch script sets (``plan/legality.py`` ``megatron_env_problems`` over :func:`launch_env`; only variables the
    script or command sets: one it leaves unset is the tuned recipe's to set, its writer does), as ``SCRIPT exports
    VAR=value; the tuned plan needs ...``; None where it breaks none.  The tuned recipe cannot carry the variable so
    that it wins: Megatron-Bridge applies a run config's ``env_vars`` with ``os.environ.setdefault``
    (``training/config.py`` ``apply_environment_variables``: "explicit launcher or shell settings take precedence"),
    and ``pretrain_gpt.py --yaml-cfg`` reads no ``ENV_VARS`` (NVIDIA's functional-test launcher exports them)."""
    return env_problem(plan, *launch_env(command, recipe))


def env_problem(plan, where: str, env: dict[str, str]) -> str | None:
    """:func:`launch_env_problem` of an environment already read (:func:`launch_env`: ``where`` names the script):
    the CLI reads it before the search and checks the tuned plan after it, before anything is written."""
    from primus_launch.plan.legality import megatron_env_problems
    from primus_launch.projection.hardware.gpus import gpu_arch

    for field, value, allowed in megatron_env_problems(plan, env, gpu_arch(plan.cluster.gpu)):
        var = field.split(" ", 1)[1]
        if var in env:
            return f"{where} sets {var}={value}; the tuned plan needs {var} {allowed}"
    return None
