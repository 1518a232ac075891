"""The recipe a ``primus-launch`` command reads (``--project`` / ``--tune``): the plan with the cluster flags, the
power cap, the ``--gpu-file`` note and the caller's environment noted (:func:`load_plan`), and the outputs checked
before any work (:func:`check_outputs`); shared by the CLI's projection (``cli.py``) and its tune (``cli_tune.py``).
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from primus_launch.errors import UserError

if TYPE_CHECKING:
    from primus_launch.plan import Plan

#: the RECIPE of ``--project`` / ``--tune`` given without a file: the training command after ``--``
FROM_COMMAND = "<command>"


def cluster_overrides(a: argparse.Namespace) -> dict:
    """The cluster flags as the adapters take them (``gpu``, ``num_nodes``, ``gpus_per_node``; None where not
    given: the recipe's)."""
    return {"gpu": a.gpu, "num_nodes": a.nodes, "gpus_per_node": a.gpus_per_node}


def load_plan(a: argparse.Namespace, recipe: str, command: list[str]) -> Plan:
    """The plan of ``recipe`` (a file, or :data:`FROM_COMMAND`: the training ``command`` after ``--``) on the
    cluster flags' cluster, with the caller's environment noted (:func:`_note_environment`), the
    ``--power-limit-w`` cap applied and a ``--gpu-file`` spec it uses said in a note."""
    plan = _load_recipe(a, recipe, command)
    _note_environment(a, recipe, command, plan)
    if getattr(a, "power_limit_w", None) is not None:
        from primus_launch.plan import PlanError
        from primus_launch.projection.hardware.gpus import power_capped

        try:  # the cap against the GPU's rated power, named as given (the plan names it cluster.power_limit_w)
            power_capped(plan.cluster.gpu, a.power_limit_w)
        except PlanError as e:
            raise PlanError("--power-limit-w", e.value, e.allowed) from None
        plan = plan.with_changes(cluster={"power_limit_w": a.power_limit_w})  # validated, as every plan
    specs = getattr(a, "gpu_file_specs", None) or {}
    if plan.cluster.gpu in specs and plan.source is not None:  # the answer says whose figures it used
        plan.source.notes.append(f"cluster gpu={plan.cluster.gpu}: spec from --gpu-file {a.gpu_file} "
                                 + ("(over the database's entry)" if specs[plan.cluster.gpu] else "(added by it)"))
    return plan


#: the name a Megatron-LM recipe gives ``training.fp8_recipe``: its flag on a command line, its key in a YAML
_FP8_RECIPE_NAMES = {"megatron-bash": "--fp8-recipe", "megatron-argv": "--fp8-recipe", "megatron-yaml": "fp8_recipe",
                     "primus-yaml": "fp8_recipe"}


def check_precision_as_written(plan: Plan) -> None:
    """The projection's check that the GPU runs the plan's precision (``projection/hardware/gpus.py``
    ``check_precision``: MXFP8 before Blackwell / CDNA4, ...), before any work, its refusal naming the FP8 recipe as
    the Megatron-LM recipe writes it (``--fp8-recipe='mxfp8'``; the plan's name, ``training.fp8_recipe``, is no
    flag or key of the recipe); other refusals and formats as the check names them."""
    from primus_launch.plan import PlanError
    from primus_launch.projection.hardware.gpus import check_precision

    t = plan.training
    try:
        check_precision(plan.cluster.gpu, t.precision, t.fp8_recipe, t.fp4_recipe)
    except PlanError as e:
        name = _FP8_RECIPE_NAMES.get(plan.source.format if plan.source else None)
        if e.field == "training.fp8_recipe" and name is not None:
            raise PlanError(name, e.value, e.allowed) from None
        raise


def refuse_environment_launch(a: argparse.Namespace) -> None:
    """``--launch`` runs the command in this environment: a variable that changes the run the answer checked
    (:func:`load_plan` notes it) is refused by name; a tune refuses it before its search (``cli_tune.run_tune``)."""
    effects = getattr(a, "env_effects", None) or []
    if effects:
        said = ", ".join(f"{e.name}={e.value}" for e in effects)
        raise UserError(f"--launch: {said} in this environment would change the run the answer checked (the script "
                        f"reads {'it' if len(effects) == 1 else 'them'}); unset {'it' if len(effects) == 1 else 'them'}"
                        ", or write the value in the script and project that")


def _note_environment(a: argparse.Namespace, recipe: str, command: list[str], plan: Plan) -> None:
    """The variables of this process's environment that the launch script reads and that would change its run
    (``TP=4 primus-launch --project train.sh`` where it says ``TP=${TP:-2}``), each a note on ``plan`` (never a
    change to it: adapters/caller_env.py); kept on ``a`` for ``--launch``, which would run with them."""
    from primus_launch.adapters import caller_env

    overrides = cluster_overrides(a)
    if recipe == FROM_COMMAND:
        effects, label = caller_env.command_effects(command, plan, os.environ, overrides, a.primus_root)
        how = shlex.join(command)
    else:
        effects = caller_env.recipe_effects(recipe, plan, os.environ, overrides, a.primus_root, command)
        label, how = recipe, shlex.join(["bash", recipe, *command])
    a.env_effects = effects
    tuning = getattr(a, "tune", None) is not None
    if plan.source is not None:
        plan.source.notes.extend(caller_env.env_note(e, label, tuning, how) for e in effects)


def _load_recipe(a: argparse.Namespace, recipe: str, command: list[str]) -> Plan:
    if recipe == FROM_COMMAND:
        if not command:
            raise UserError("--project/--tune need a RECIPE file or a training command after --")
        from primus_launch.adapters import cluster_rule_error
        from primus_launch.adapters.command_recipe import plan_from_command
        from primus_launch.plan import PlanError

        try:
            return plan_from_command(command, cluster_overrides(a), a.primus_root)
        except PlanError as e:  # a rule the final cluster breaks names the cluster flags given
            raise cluster_rule_error(e, cluster_overrides(a)) from None
    from primus_launch.adapters import load_recipe

    # `--project script.sh -- A B`: the words after -- are the script's positional parameters ($1, $2)
    return load_recipe(recipe, cluster_overrides(a), a.primus_root, script_args=command)


def takes_script_args(recipe: str) -> bool:
    """Whether the words after ``--`` are ``recipe``'s positional parameters ($1 $2 ...): a launch script's
    (the suffixes that pick a script reader); after any other RECIPE file they can only be the command
    ``--launch`` runs or ``--emit`` prints."""
    from primus_launch.adapters import SCRIPT_SUFFIXES

    return recipe != FROM_COMMAND and Path(recipe).suffix.lower() in SCRIPT_SUFFIXES


def check_outputs(outputs: Sequence[tuple[str, Optional[str | Path]]]) -> None:
    """Before any work: no output may name an input the run read (recipe, wrapper, sourced
    fragment, --gpu-file, extends chain; real path or hard link), a folder, a folder that cannot be
    written, or another output."""
    from primus_launch.inputs import check_output

    seen: dict[str, str] = {}
    for flag, path in outputs:
        if path is None:
            continue
        check_output(path, flag)
        real = os.path.realpath(os.fspath(path))
        if real in seen:
            raise UserError(f"{flag}={str(path)!r}: the same file as {seen[real]}; give each output its own path")
        seen[real] = flag
