"""``primus-launch --tune``: the recipe read (moved to a legal layout where the cluster flags make its own illegal),
checked tunable, its output paths checked, the search run (``tuner.search.tune``), the tuned recipe / wrapper,
trial log, report and trace written, and the answer printed (text or JSON).  The launch after it (``--emit``,
``--launch``) is the CLI's (``cli.py``), as a projection's.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional

from primus_launch.cli_output import file_size, fit, human, print_reader_lines, shown, write_trace
from primus_launch.cli_recipe import (FROM_COMMAND, check_outputs, check_precision_as_written, cluster_overrides,
                                     load_plan, refuse_environment_launch, takes_script_args)
from primus_launch.errors import UserError

if TYPE_CHECKING:
    from primus_launch.executor import Executor
    from primus_launch.plan import Plan
    from primus_launch.projection.result import ProjectionResult
    from primus_launch.tuner.result import TuneResult


@dataclass(frozen=True)
class TunedRun:
    """What a tune answered, for the launch after it: the search's result, the tuned recipe written (None for a
    command after ``--``) and the tuned command (None after a RECIPE file)."""

    result: TuneResult
    written: Optional[Path]
    tuned_cmd: Optional[list[str]]


def _wrapper_primus_root(plan: Plan) -> Optional[Path]:
    """``[recipe] primus_root`` of the wrapper TOML a plan was read through, if any."""
    if plan.source is None or plan.source.wrapper_path is None:
        return None
    from primus_launch.adapters.primus_toml import wrapper_primus_root

    return wrapper_primus_root(Path(plan.source.wrapper_path))


def _check_some_plan_fits(a: argparse.Namespace, res) -> None:
    """A search whose best plan does not fit has no answer (no candidate fits, and the recipe's own plan does
    not either): one line with the peak, the capacity and the ways out, and nothing written -- not a "tuned"
    recipe that is the original, which does not fit."""
    mem = res.best.memory
    if mem.fits or a.launch and a.force:  # --launch --force: the user launches the original anyway
        return
    c, gib = res.best_plan.cluster, 1024 ** 3
    what = (f"the whole space: {res.legal_candidates:,} legal plans, {res.scored:,} scored"
            if res.certificate is not None and res.certificate.certified else
            f"{res.scored:,} scored of {'' if res.legal_exact else '~'}{res.legal_candidates:,} legal plans")
    certain = " by its whole error band (--memory-certain)" if a.memory_certain else ""
    from primus_launch.projection.hardware.gpus import get_gpu, has_fp8

    spec = get_gpu(c.gpu)
    allowed = {x.strip() for item in a.allow for x in item.split(",")}
    # the numerics knobs that could still save memory: FP8 only on a GPU that has it (not an A100)
    more = [k for k, ok in (("fp8", has_fp8(spec)), ("optimizer-dtypes", True))
            if ok and k not in allowed]
    # what the verdict compares: the peak less the free cached segments the allocator releases before an OOM
    held = mem.verdict_peak_bytes
    peaks = [t.verdict_peak_bytes for t in res.trials if t.status == "scored" and t.verdict_peak_bytes]
    need = (f"the recipe's own layout is not legal there, and the smallest peak of the {len(peaks) or 1} plan(s) scored is "
            f"{min(peaks + [held]) / gib:.1f} GiB per GPU of {mem.capacity_bytes / gib:.1f} GiB"
            if res.no_reference else
            f"the recipe's own plan needs {held / gib:.1f} GiB per GPU of "
            f"{mem.capacity_bytes / gib:.1f} GiB")
    # a margin the user asked for is part of the constraint: said, with its share of the capacity, and a way out
    margin = (f" less --memory-margin={a.memory_margin:g} ({a.memory_margin * mem.capacity_bytes / gib:.1f} GiB kept "
              "free)" if a.memory_margin else "")
    raise UserError(f"--tune={a.tune}: no plan fits in memory{certain} on {c.num_nodes} x {c.gpus_per_node} {c.gpu}: "
                    f"{need}{margin}, and none searched fits ({what}); give "
                    + ("a smaller --memory-margin, " if a.memory_margin else "") + "more GPUs "
                    "(--nodes / --gpus-per-node), a GPU with more memory (--gpu)"
                    + (f", or --allow {','.join(more)}" if more else "") + "; nothing written")


def _check_weights_can_fit(a: argparse.Namespace, plan: Plan) -> None:
    """A model whose weights alone overflow the fullest GPU whatever the layout (``tuner/memory_floors.py``
    ``whole_space_out``: every parameter stored once, in 4 bits at least) has no tuned plan: one line before the
    search, as :func:`_check_some_plan_fits` says after it (a 9,984-layer model of hidden size 2^20 spent minutes
    pricing hopeless plans).  ``--launch --force`` launches the original anyway: no line."""
    if a.launch and a.force:
        return
    from primus_launch.tuner.memory_floors import MIN_WEIGHT_BYTES, whole_space_out

    floor = whole_space_out(plan, a.memory_margin, a.memory_certain)
    if floor is None:
        return
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.memory.params import total_parameters

    c, gib = plan.cluster, 1024 ** 3
    cap = float(get_gpu(c.gpu).hbm_bytes)
    margin = (f" less --memory-margin={a.memory_margin:g} ({a.memory_margin * cap / gib:,.1f} GiB kept free)"
              if a.memory_margin else "")
    raise UserError(f"--tune={a.tune}: no plan fits in memory on {c.num_nodes} x {c.gpus_per_node} {c.gpu}: the "
                    f"model's {total_parameters(plan.model):.3g} parameters, {MIN_WEIGHT_BYTES:g} byte each at least "
                    f"over {plan.world_size:,} GPUs, need {floor / gib:,.1f} GiB per GPU of {cap / gib:,.1f} GiB"
                    f"{margin} whatever the layout, sharding or precision (nothing searched); give more GPUs "
                    "(--nodes / --gpus-per-node), a GPU with more memory (--gpu) or a smaller model; nothing written")


def primus_cluster_line(best: Plan, written: str) -> str:
    """The cluster a tuned Primus experiment was tuned for, and how Primus launches it there: the experiment states
    no cluster (user15: the 16 nodes fitted to a DeepSeek-V3 experiment 'tuned for 32N' were said only in a note)."""
    c = best.cluster
    gpn = "" if c.gpus_per_node == 8 else f" GPUS_PER_NODE={c.gpus_per_node}"
    return (f"tuned for {c.num_nodes} node(s) x {c.gpus_per_node} {c.gpu} (a Primus experiment states no cluster): "
            f"EXP={written} NNODES={c.num_nodes}{gpn} bash examples/run_slurm_pretrain.sh")


def _flagged_cluster_notes(seed: Plan, flags: dict) -> Plan:
    """``seed`` without its reader's notes on the cluster the flags replaced: the recipe read on its own cluster
    noted 'cluster: 1 node(s) x 8 GPUs, the smallest node count that fits' under ``--tune --nodes 4`` (a Primus
    experiment), a cluster the tune does not run on.  A note on the node count goes with ``--nodes`` /
    ``--gpus-per-node``, one on the GPU (``cluster.gpu=``, ``cluster gpu=``) with ``--gpu``."""
    src = seed.source
    if src is None:
        return seed
    sized = "num_nodes" in flags or "gpus_per_node" in flags

    def replaced(n: str) -> bool:
        if n.startswith(("cluster.gpu=", "cluster gpu=")):
            return "gpu" in flags
        return sized and n.startswith(("cluster:", "cluster guessed", "cluster gpus_per_node="))

    notes = [n for n in src.notes if not replaced(n)]
    return seed if notes == list(src.notes) else seed.model_copy(
        update={"source": src.model_copy(update={"notes": notes})})


def _load_tunable(a: argparse.Namespace, command: list[str]) -> tuple[Plan, Optional[str], Optional[str]]:
    """The plan a tune starts from, why there is no legal reference (None when the recipe's own plan is legal on the
    cluster) and the note saying so (printed once every refusal before the search has passed: a note "searching
    that cluster's layouts" before a refusal that searches nothing misled): a recipe whose parallel layout the
    cluster flags make illegal (TP 8 on 2 GPUs) is read on its own cluster and moved to the flags' cluster with a
    legal layout (``tuner/rebase.py``) -- the model, batch and precision kept, the layout searched.  Where no
    layout is legal there (or the recipe does not read without the flags), the recipe's own error stands, with why
    no layout of that cluster is legal."""
    from primus_launch.plan import PlanError

    try:
        return load_plan(a, a.tune, command), None, None
    except PlanError as e:
        flags = {k: v for k, v in cluster_overrides(a).items() if v is not None}
        if not flags:
            raise
        try:
            own = load_plan(argparse.Namespace(**{**vars(a), "gpu": None, "nodes": None, "gpus_per_node": None}),
                        a.tune, command)
        except PlanError:
            raise e from None
        from primus_launch.tuner.rebase import seed_or_why

        seed, why_none = seed_or_why(own, flags)
        if seed is None:  # said: the tune tried the cluster's layouts, not only the recipe's own, and why none
            own_rule = e.allowed.split(" (cluster from ")[0]  # the flags named by the clause that follows
            raise PlanError(e.field, e.value, f"{own_rule}; and no layout the tune starts from is legal there either "
                            f"({why_none}); give another GPU count") from None
        seed = _flagged_cluster_notes(seed, flags)
        c = seed.cluster
        why = f"{e.field}={e.value!r}: {e.allowed.split(' (cluster from ')[0]}"
        p = seed.parallel
        split = (f", layers {p.pipeline_layers_first_stage} / .. / {p.pipeline_layers_last_stage}"
                 if p.pipeline_layers_first_stage is not None else "")
        note = (f"primus-launch tune: the recipe's own parallel layout is not legal on {c.num_nodes} x "
                f"{c.gpus_per_node} {c.gpu} ({why}); searching that cluster's layouts from a legal start "
                f"(tp={p.tp}, pp={p.pp}{split}; model, batch and precision kept)")
        return seed, why, note


def run_tune(a: argparse.Namespace, command: list[str]) -> TunedRun:
    """The tune of the parsed command line ``a`` (``command``: the words after ``--``), up to its printed answer;
    a user's mistake raised as a one-line error before anything is written."""
    from primus_launch.tuner.search import tune

    plan, no_reference, rebased = _load_tunable(a, command)
    check_precision_as_written(plan)
    config_script = _check_tunable(a, plan, command)
    _check_launch_command(a, plan, command)
    out_recipe, out_wrapper, log_path = _tune_outputs(a, plan)
    _check_weights_can_fit(a, plan)  # the weights alone overflow every layout: no search
    if a.launch:  # a variable of this environment that changes the run: refused now, not after the search
        refuse_environment_launch(a)
    launch_env = _launch_env(a, plan, command)  # the launch script read before the search, not after it
    if rebased is not None:  # every refusal before the search passed: the search is what it says
        print(rebased, file=sys.stderr)
    executor = None
    if a.ray_address is not None:
        from primus_launch.ray_cluster import connect

        executor = connect(a.ray_address)
    score = _measured_score(a, executor)
    allow = [x.strip() for item in a.allow for x in item.split(",") if x.strip()]
    res = tune(plan, score=score, budget=a.budget, time_limit_s=a.time_limit, exhaustive=a.exhaustive,
               llm_model=a.llm, memory_margin=a.memory_margin, memory_basis=a.memory_basis, progress=not a.json,
               top_n=a.top, allow=allow,
               workers=a.workers if a.dry_run else 1, max_work=a.max_work, score_is_dry_run=a.dry_run,
               training_tokens=a.train_tokens, gpu_hour_price=a.gpu_hour_price,  # the measured path holds the device: one process
               executor=executor if a.dry_run else None, memory_certain=a.memory_certain,
               no_reference=no_reference, echo_warnings=a.json)  # the text answer lists them itself
    if executor is not None and not a.dry_run and score.fanned:
        print(f"primus-launch tune: {score.fanned} piece(s) measured on {executor.describe()}"
              + (f", {score.foreign} of them on another device than this machine's (measured again here)"
                 if score.foreign else ""), file=sys.stderr)
    _check_some_plan_fits(a, res)  # nothing fits: its one line alone
    # what the reader assumed and what the tuned plan's projection leaves out (the tune's answer lists neither: a
    # recipe read on an assumed H100 was tuned without a word); the best plan's, the one the tuned recipe runs
    from primus_launch.projection.api import with_unmodelled

    print_reader_lines(with_unmodelled(res.best), plan)
    best = res.best_plan
    if config_script:  # a key the script's command passes would not run as tuned
        from primus_launch.adapters.torchtitan_script import check_config_script_tunable

        check_config_script_tunable(a.tune, a.out, best, plan)
    if launch_env is not None:  # the tuned plan against the launch script's exports: refused, nothing written
        _check_launch_env(best, command, launch_env)
    tuned_cmd = None
    with _nothing_left_on_failure((out_recipe, out_wrapper, log_path, a.report, a.trace)):
        if command and a.tune == FROM_COMMAND:  # after a RECIPE file, the words after -- are its $1 $2 ...
            from primus_launch.adapters.command_recipe import render_command

            tuned_cmd = render_command(best, command)
        written, written_wrapper = _write_tuned(a, plan, best, out_recipe, out_wrapper)
        _write_tune_files(a, res, plan, log_path)
    if command and a.tune != FROM_COMMAND and written is not None and not takes_script_args(a.tune):
        from primus_launch.launch.tuned_command import with_tuned_recipe

        tuned_cmd = with_tuned_recipe(command, plan.source.path, written)  # the launch of the tuned file
    files = {str(p): file_size(p) for p in (written, written_wrapper, log_path, a.report, a.trace)
             if p is not None and Path(p).is_file()}
    if a.json:  # the trial log's form: the top trials in full, every trial as compact columns
        d = res.to_log_dict(plan)
        d["tuned_recipe"] = str(written) if written else None
        d["tuned_wrapper"] = str(written_wrapper) if written_wrapper else None
        d["tuned_command"] = tuned_cmd
        d["files"] = files
        print(json.dumps(d))
    else:
        _print_tune_text(a, res, plan, (written, written_wrapper, log_path), files, tuned_cmd)
    return TunedRun(res, written, tuned_cmd)


def _check_tunable(a: argparse.Namespace, plan: Plan, command: list[str]) -> bool:
    """Refuse, before the search, a recipe whose tuned form cannot be written: the plan's format
    (:func:`check_writable`), a launch command's, a TorchTitan config script's; returns whether the recipe is
    such a script (its tuned recipe is the job TOML it runs, checked again against the best plan)."""
    from primus_launch.adapters import check_writable

    check_writable(plan)
    if a.tune == FROM_COMMAND:
        from primus_launch.adapters.command_recipe import check_command_tunable

        check_command_tunable(command)
        return False
    from primus_launch.adapters import detect_kind

    config_script = detect_kind(Path(a.tune)) == "torchtitan-config-script"
    if config_script:  # its tuned recipe is the job TOML it runs
        from primus_launch.adapters.torchtitan_script import check_config_script_tunable

        check_config_script_tunable(a.tune, a.out)
    return config_script


def _launch_env(a: argparse.Namespace, plan: Plan, command: list[str]) -> Optional[tuple[str, dict[str, str]]]:
    """``(where, environment)`` the command after ``--`` sets for the tuned recipe file it launches or emits
    (``launch/tuned_command.py`` ``launch_env``: its launch script's exports over its ``VAR=value`` prefixes),
    read before the search; None where no tuned recipe file is launched."""
    if not (a.launch or a.emit) or not command or a.tune == FROM_COMMAND or takes_script_args(a.tune):
        return None
    from primus_launch.launch.tuned_command import launch_env

    return launch_env(command, plan.source.path if plan.source and plan.source.path else a.tune)


def _check_launch_env(best: Plan, command: list[str], env: tuple[str, dict[str, str]]) -> None:
    """Refuse to launch (or emit) the tuned recipe with a command whose launch script sets a variable the tuned
    plan's Megatron start-up asserts against (``launch/tuned_command.py`` ``env_problem``: the tune moved to
    Megatron-FSDP while the sbatch script exports CUDA_DEVICE_MAX_CONNECTIONS=1; user19: the job died at start-up),
    after the search and before anything is written (the tuned recipe the launch would not run is not left
    behind; the environment itself was read before the search: :func:`_launch_env`)."""
    from primus_launch.launch.tuned_command import env_problem

    problem = env_problem(best, *env)
    if problem is not None:
        raise UserError(f"-- {shlex.join(command)}: {problem}: Megatron would stop at start-up; not launched, nothing "
                        "written (set the variable as the plan needs, or tune without --launch / --emit and "
                        "launch the tuned recipe with it set)")


@contextmanager
def _nothing_left_on_failure(paths: Iterable[Optional[str | Path]]) -> Iterator[None]:
    """Run the tune's writes; on any failure (a refusal, a full disk, Ctrl-C) remove the outputs among ``paths``
    this block created, so that a refused tune leaves no tuned file behind (each file is written atomically; a
    file of the same name from an earlier run, replaced, cannot be restored and is left)."""
    fresh = [Path(p) for p in paths if p is not None and not Path(p).exists()]
    try:
        yield
    except BaseException:
        for p in fresh:
            try:
                if p.is_file():
                    p.unlink()
            except OSError:
                pass
        raise


def _check_launch_command(a: argparse.Namespace, plan: Plan, command: list[str]) -> None:
    """Refuse, before the search, a launch of a tuned recipe file that would not run the tuned file (user18: a tuned
    Bridge run config could not be launched: ``--emit`` said "give the command after --" after the whole search,
    and a command after -- was refused as the YAML's positional parameters): a command after ``--`` that names
    the recipe nowhere (it would run the original), or none where the recipe holds no training command (a YAML)."""
    if a.tune == FROM_COMMAND or not (a.launch or a.emit) or takes_script_args(a.tune):
        return
    recipe = plan.source.path if plan.source and plan.source.path else a.tune
    flag = "--launch" if a.launch else f"--emit={a.emit}"
    if command:
        from primus_launch.launch.tuned_command import recipe_words

        if not recipe_words(command, recipe):
            raise UserError(f"-- {shlex.join(command)}: names no {recipe}: {flag} would run the original recipe, not "
                            "the tuned one; give the training command that reads it (its word for the recipe is "
                            "pointed at the tuned file)")
        return
    from primus_launch.launch import emit

    # --launch runs a launch script itself (cli._launch_recipe); --emit wraps the command a recipe holds
    if (Path(recipe).suffix not in (".sh", ".bash") if a.launch else emit.program_of_recipe(plan) is None):
        raise UserError(f"{flag}: {recipe} is no launch script{'' if a.launch else ' and holds no training command'}; "
                        "give the command that runs it after -- (its word for the recipe is pointed at the tuned "
                        "file)")


def _tune_outputs(a: argparse.Namespace, plan: Plan) -> tuple[Optional[Path], Optional[Path], Optional[Path]]:
    """(tuned recipe, tuned wrapper, trial log) paths of a tune, each None where none is written, checked
    writable before the search (:func:`check_outputs`): ``--out`` or the recipe's tuned name beside it (a
    wrapper's name where the recipe came through a Primus TOML wrapper; ``--out`` naming a wrapper puts the
    tuned recipe beside it), the trial log ``--log`` or the tuned recipe's name + ``.trials.json``."""
    log_path = Path(a.log) if a.log is not None else None
    out_recipe = out_wrapper = None
    if a.out is not None:  # before its name is used ('.' has none to add .trials.json to); again with the others
        from primus_launch.inputs import check_output

        check_output(a.out, "--out")
    if a.tune != FROM_COMMAND:
        from primus_launch.adapters import native_path, tuned_path

        native = native_path(plan)
        wrapped = plan.source is not None and bool(plan.source.wrapper_path)
        out_recipe = Path(a.out) if a.out is not None else tuned_path(native)
        if a.out is None and wrapped:  # named after the wrapper: a tune of the recipe alone writes tuned_path
            from primus_launch.adapters.primus_toml import tuned_recipe_path

            out_recipe = tuned_recipe_path(Path(plan.source.wrapper_path), native)
        if a.out is not None and wrapped and _names_wrapper(out_recipe, native):
            # --out names the tuned wrapper (x.primus.toml): the tuned recipe is x.<native ending> beside it
            out_wrapper = out_recipe
            out_recipe = out_recipe.with_name(_wrapper_stem(out_recipe) + native.suffix)
        elif a.out is not None:
            _check_out_format(native, out_recipe)
        if log_path is None:
            log_path = out_recipe.with_name(out_recipe.name + ".trials.json")
    if out_recipe is not None and out_wrapper is None and plan.source is not None and plan.source.wrapper_path:
        # the wrapper states the cluster the tune ran on; the native recipe may not (a Primus experiment has no
        # node count): the tuned wrapper points at the tuned recipe on that cluster
        from primus_launch.adapters.primus_toml import tuned_wrapper_path

        out_wrapper = tuned_wrapper_path(Path(plan.source.wrapper_path), out_recipe, bool(a.out))
    out_names_wrapper = a.out is not None and out_wrapper is not None and Path(a.out) == out_wrapper
    check_outputs([("--out" if a.out and not out_names_wrapper else "tuned recipe", out_recipe),
                    ("--log" if a.log else "trial log", log_path), ("--report", a.report), ("--trace", a.trace),
                    ("--out" if out_names_wrapper else "tuned wrapper", out_wrapper)])
    return out_recipe, out_wrapper, log_path


def _check_out_format(native: Path, out: Path) -> None:
    """``--out`` must end like the recipe it tunes (the tuned recipe is written in its native format): a
    bash recipe's tuned script is not a ``.toml``, and a name without an ending is refused too (the reader
    picks the format by the ending: ``--project t`` of such a file was "unknown recipe kind").  The endings
    of one format are the adapters' own (the ones that pick the reader)."""
    from primus_launch.adapters import SCRIPT_SUFFIXES, YAML_SUFFIXES

    have, want = out.suffix.lower(), native.suffix.lower()
    group = next((g for g in (SCRIPT_SUFFIXES, YAML_SUFFIXES, frozenset({".toml"})) if want in g), None)
    if group is not None and have not in group:
        raise UserError(f"--out={str(out)!r}: the tuned recipe is written in the recipe's own format "
                        f"({native.name}); give a path ending in {' or '.join(sorted(group))}")


def _names_wrapper(out: Path, native: Path) -> bool:
    """``--out`` of a tune through a wrapper TOML names the tuned wrapper (``.toml``) where the native
    recipe is not a TOML."""
    return out.suffix.lower() == ".toml" and native.suffix.lower() != ".toml"


def _wrapper_stem(out: Path) -> str:
    """``tuned.primus.toml`` -> ``tuned`` (the name the tuned native recipe takes beside it)."""
    name = out.name
    for end in (".primus.toml", ".toml"):
        if name.lower().endswith(end):
            return name[: -len(end)] or "tuned"
    return out.stem


def _measured_score(a: argparse.Namespace,
                    executor: Optional[Executor]) -> Optional[Callable[[Plan], ProjectionResult]]:
    """The tune's scoring without ``--dry-run``: the measured projection (``projection.api.project``), its
    distinct pieces measured on ``executor``'s GPUs where one is given; None (the dry-run) with ``--dry-run``."""
    if a.dry_run:
        return None
    from functools import partial

    from primus_launch.projection.api import project

    score = partial(project, dry_run=False, memory_margin=a.memory_margin, measure_device=a.measure_device,
                    memory_basis=a.memory_basis)
    if executor is not None:   # the distinct pieces measured on the cluster, one per GPU, into the cache
        from primus_launch.projection.api import default_measure_device
        from primus_launch.projection.measure.fanout import FannedOut

        score = FannedOut(score, executor, a.measure_device or default_measure_device())
    return score


def _write_tuned(a: argparse.Namespace, plan: Plan, best: Plan, out_recipe: Optional[Path],
                 out_wrapper: Optional[Path]) -> tuple[Optional[Path], Optional[Path]]:
    """(written tuned recipe, written tuned wrapper): ``best`` in the recipe's own format at ``out_recipe``, and,
    for a recipe read through a Primus wrapper, the wrapper pointing at it on the best plan's cluster."""
    written = None
    if out_recipe is not None:
        from primus_launch.adapters import write_recipe

        written = write_recipe(best, out_recipe, a.primus_root or _wrapper_primus_root(plan))
    written_wrapper = None
    if written is not None and out_wrapper is not None:
        from primus_launch.adapters.primus_toml import render_tuned_wrapper
        from primus_launch.fileio import atomic_write_text

        c = best.cluster
        text = render_tuned_wrapper(Path(plan.source.wrapper_path), out_wrapper, Path(written),
                                    {"gpu": c.gpu, "num_nodes": c.num_nodes, "gpus_per_node": c.gpus_per_node})
        written_wrapper = atomic_write_text(out_wrapper, text)
    return written, written_wrapper


def _write_tune_files(a: argparse.Namespace, res: TuneResult, plan: Plan, log_path: Optional[Path]) -> None:
    """The trial log (once the run has its answer and the tuned recipe was taken: the writer refuses one it
    cannot read back, so a refused run leaves no log), and with ``--report`` / ``--trace`` the best plan's
    projection with its timeline, written as the HTML report and the trace."""
    if log_path is not None:
        from primus_launch.fileio import atomic_write_text
        from primus_launch.tuner.result import log_text

        atomic_write_text(log_path, log_text(res.to_log_dict(plan)))
    if a.report or a.trace:  # the best plan's timeline: the report's and the trace's
        from primus_launch.projection.api import project

        detailed = project(res.best_plan, dry_run=a.dry_run, memory_margin=a.memory_margin,
                           memory_basis=a.memory_basis, measure_device=a.measure_device, record_timeline=True)
        if a.trace:
            write_trace(a.trace, detailed)
        if a.report:
            from primus_launch.report.html import write_tune_report

            write_tune_report(res.model_copy(update={"best": detailed}), a.report)


def _print_tune_text(a: argparse.Namespace, res: TuneResult, plan: Plan, paths: tuple[Optional[Path], ...], files: dict[str, int],
                     tuned_cmd: Optional[list[str]]) -> None:
    """The tune's text answer (``report.tune_text``), then each file written with its size (``paths``: the tuned
    recipe, the tuned wrapper, the trial log), the tuned recipe's lines that differ from the recipe's, and the
    tuned command where the recipe was one (not with ``--launch``, which runs it)."""
    from primus_launch.report.tune_text import render_tune_text

    written, written_wrapper, log_path = paths
    print(render_tune_text(res))
    if written:
        print("\n" + fit(f"tuned recipe written to {shown(written)} ({human(files.get(str(written)))})"))
        _print_recipe_diff(plan, Path(written))
        if plan.source is not None and plan.source.format == "primus-yaml" and not written_wrapper:
            print(fit(primus_cluster_line(res.best_plan, shown(written))))
    if written_wrapper:
        print(fit(f"tuned wrapper written to {shown(written_wrapper)} ({human(files.get(str(written_wrapper)))}; "
                   "the tuned recipe on the wrapper's cluster)"))
    if log_path:
        print(fit(f"trial log written to {shown(log_path)} ({human(files.get(str(log_path)))})"))
    if a.report:
        print(fit(f"report written to {a.report} ({human(files.get(str(a.report)))})"))
    if a.trace:
        print(fit(f"best plan's trace written to {a.trace} ({human(files.get(str(a.trace)))})"))
    if tuned_cmd and not a.launch:
        print("\ntuned command:\n" + shlex.join(tuned_cmd))


def _print_recipe_diff(plan, written: Path) -> None:
    """The tuned recipe's lines that differ from the recipe it was written from (``report/recipe_diff.py``): the
    ``changes:`` line names the plan's fields, the file also carries what they need to start."""
    from primus_launch.adapters import native_path
    from primus_launch.fileio import read_recipe_text
    from primus_launch.report.recipe_diff import diff_lines

    try:
        original = Path(native_path(plan))
        text = read_recipe_text(original)
    except (OSError, UserError):  # no file to compare (a command after --): nothing to show
        return
    for ln in diff_lines(text, read_recipe_text(written), shown(original), shown(written)):
        # the changed lines are cut to the width already; the header keeps its counts on its line
        print(ln if ln.startswith(("  ", "lines that differ")) else fit(ln))
