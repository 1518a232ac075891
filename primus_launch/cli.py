"""``primus-launch``: project, tune or launch a Megatron-LM / TorchTitan training run.

    primus-launch --project RECIPE [--dry-run] [--gpu G --nodes N --gpus-per-node K] [--json]
                  [--train-tokens 15T [--gpu-hour-price USD]]
    primus-launch --tune RECIPE [--dry-run] [--max-work N] [--budget N | --time-limit S] [--llm MODEL] [--allow fp8,...]
                  [--ray-address HOST:PORT | local]
    primus-launch [--project | --tune] [--launch [--force]] [--emit torchrun|slurm] -- COMMAND...
    primus-launch -- torchrun ... pretrain_gpt.py ...       (run the command unchanged)

The CLI parses flags, calls the library (adapters -> plan -> projection / tuner) and renders the
typed results; it holds no model of its own.  User mistakes exit 2 with one line on stderr.  This module
holds the checks of the parsed flags, the projection's answer and the launch after a projection or a tune;
the flags are ``cli_flags.py``, the tune's search and answer ``cli_tune.py``, the recipe read
``cli_recipe.py``, the lines and files beside the answer ``cli_output.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from primus_launch.cli_flags import parser
from primus_launch.cli_output import file_size, human, print_reader_lines, shown, write_trace
from primus_launch.cli_recipe import (FROM_COMMAND, check_outputs, check_precision_as_written, load_plan,
                                     refuse_environment_launch, takes_script_args)
from primus_launch.cli_tune import run_tune
from primus_launch.errors import UserError, clip_words, one_line  # light: the heavy imports follow the signal handlers

if TYPE_CHECKING:
    from primus_launch.plan import Plan


#: flags that only the search reads (dest -> how it is spelled)
_TUNE_ONLY = {"budget": "--budget", "time_limit": "--time-limit", "max_work": "--max-work", "llm": "--llm",
              "workers": "--workers", "log": "--log", "out": "--out", "allow": "--allow", "top": "--top",
              "memory_certain": "--memory-certain"}


#: flags that only a projection or a search reads: without --project / --tune the command after -- runs as is
_PLAN_ONLY = {"dry_run": "--dry-run", "gpu": "--gpu", "nodes": "--nodes", "gpus_per_node": "--gpus-per-node",
              "gpu_file": "--gpu-file", "power_limit_w": "--power-limit-w", "primus_root": "--primus-root",
              "memory_margin": "--memory-margin", "memory_basis": "--memory-basis", "json": "--json",
              "explain": "--explain", "trace": "--trace", "report": "--report", "measure_device": "--measure-device",
              "emit": "--emit", "force": "--force"}


def _given(a: argparse.Namespace, dest: str) -> bool:
    """Whether a flag was given (its value is not the parser's default)."""
    v = getattr(a, dest)
    default = {"memory_margin": 0.0, "memory_basis": "reserved", "top": 5, "allow": []}.get(dest)
    return v not in (None, False) and v != default


def _branch_and_bound(a: argparse.Namespace) -> bool:
    """Whether ``--tune`` runs the default certified branch and bound (``tuner.search.tune``'s rule)."""
    return a.exhaustive is None and a.budget is None and a.llm is None and a.dry_run


def _flag_conflict(a: argparse.Namespace, command: list[str]) -> Optional[str]:
    """A flag the chosen mode would not read (never ignored silently), or two that contradict: the
    one-line error, None when the flags go together."""
    def as_given(dest: str, spelled: str) -> str:
        v = getattr(a, dest)
        return spelled if isinstance(v, bool) else f"{spelled}={','.join(v) if isinstance(v, list) else v}"

    if a.project is None and a.tune is None:
        for dest, spelled in _PLAN_ONLY.items():
            if _given(a, dest):
                return (f"{as_given(dest, spelled)}: only with --project or --tune (without them the command after -- "
                        "is run as it is)")
    if a.tune is None:
        for dest, spelled in [*_TUNE_ONLY.items(), ("exhaustive", "--exhaustive/--planner")]:
            if _given(a, dest) or (dest == "exhaustive" and a.exhaustive is not None):
                return f"{as_given(dest, spelled) if dest != 'exhaustive' else spelled}: only with --tune"
    if a.explain and a.json:
        return ("--explain: not with --json (the JSON object holds every figure and note; --explain is the text "
                "answer with every table)")
    if a.emit and a.json:  # the launch line after the object: stdout was no longer one JSON document
        return (f"--emit={a.emit}: not with --json (stdout holds exactly one JSON object, the resolved plan among it); "
                "give --emit without --json")
    if a.explain and a.tune is not None:
        return ("--explain: only with --project (a tune prints its search and top plans; project the tuned recipe "
                "with --explain)")
    if a.force and not a.launch:
        return "--force: only with --launch (it launches a plan that does not fit)"
    recipe = a.project if a.project is not None else a.tune
    if command and recipe not in (None, FROM_COMMAND) and not takes_script_args(recipe):
        words = shlex.join(command)
        if a.tune is not None and not (a.launch or a.emit):  # cli_tune: with them, the command must name RECIPE
            return (f"-- {words}: after --tune RECIPE the words after -- are a launch script's positional parameters "
                    f"($1 $2 ...), and {recipe} is not a launch script (.sh, .bash, .slurm, .sbatch): nothing would "
                    "read them (with --launch / --emit, a command that names the recipe runs the tuned file); drop "
                    "them, or tune the training command itself (--tune -- CMD)")
        if not (a.launch or a.emit):
            return (f"-- {words}: after --project RECIPE the words after -- are a launch script's positional "
                    f"parameters ($1 $2 ...), and {recipe} is not a launch script (.sh, .bash, .slurm, .sbatch): "
                    "nothing would read them (only --launch runs, and --emit prints, a command given there); drop "
                    "them, or project the command itself (--project -- CMD)")
    if a.measure_device is not None and a.dry_run:
        return (f"--measure-device={a.measure_device}: not with --dry-run (the dry run simulates the target GPU and "
                "measures nothing)")
    if a.tune is not None:
        if a.tune == FROM_COMMAND and a.out is not None:
            return (f"--out={a.out}: only with --tune RECIPE; a tuned command is printed, and the script or TOML it "
                    "runs is written next to the original (NAME.tuned.EXT)")
        if a.budget is not None and a.exhaustive:
            return (f"--budget={a.budget}: not with --exhaustive (the brute force scores every legal candidate; "
                    "stop it with --time-limit, or give --planner)")
        if a.max_work is not None and not _branch_and_bound(a):
            why = ("--exhaustive" if a.exhaustive else "--planner" if a.exhaustive is False else
                   f"--budget={a.budget}" if a.budget is not None else f"--llm={a.llm}" if a.llm else
                   "a measured search (no --dry-run)")
            return (f"--max-work={a.max_work}: bounds the default branch and bound only, which {why} replaces "
                    "(stop the others with --budget / --time-limit)")
        if a.workers is not None and a.workers > 1 and not a.dry_run:
            return (f"--workers={a.workers}: only with --dry-run (the measured search holds the device: one "
                    "process; --ray-address spreads its measurements)")
    return None


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def _project(a: argparse.Namespace, plan: Plan, command: Sequence[str] = ()):
    """The projection of ``plan``; on a dry-run where the reader fitted the node count and the plan does not fit,
    with the fewest nodes the same recipe fits on (:mod:`projection.node_fit`: the recipe re-read with
    ``--nodes N``, as the framework would run the same file on N nodes)."""
    from primus_launch.projection.api import project
    from primus_launch.projection.node_fit import with_node_search

    result = project(plan, dry_run=a.dry_run, memory_margin=a.memory_margin, memory_basis=a.memory_basis,
                     measure_device=a.measure_device, record_timeline=bool(a.trace or a.report))
    if not a.dry_run:
        return result

    def replan(n: int) -> Plan:
        return load_plan(argparse.Namespace(**{**vars(a), "nodes": n}), a.project, list(command))

    def project_at(p: Plan):
        return project(p, dry_run=True, memory_margin=a.memory_margin, memory_basis=a.memory_basis)

    return with_node_search(plan, result, project_at, replan)


def _emit(a: argparse.Namespace, plan: Plan, command: list[str], recipe_path: Optional[Path] = None) -> None:
    from primus_launch.launch import emit

    program = command or emit.program_of_recipe(plan, recipe_path)
    if not program:
        raise UserError(f"--emit: the recipe {plan.source.path if plan.source else ''!s} holds no training "
                        "command; give the command after --")
    env = {} if command else emit.launch_env_of_recipe(plan, recipe_path)  # a command runs in the user's env
    if a.emit == "slurm":
        print(emit.slurm_script(plan, program, env=env))
    else:
        print(" ".join(emit.env_words(env) + [emit.shell_join(emit.torchrun_command(plan, program))]))


def _launch_recipe(plan: Plan, script_args: Sequence[str] = ()) -> int:
    """``bash SCRIPT $1 $2 ...``: the launch script the plan was read from, with the positional parameters
    it was read with (the words after ``--``), as projected."""
    from primus_launch.launch.launcher import run_command

    path = Path(plan.source.path) if plan.source and plan.source.path else None
    if path is None or path.suffix not in (".sh", ".bash"):
        raise UserError("--launch with a recipe file needs a launch script (.sh); "
                        "for other recipes give the training command after --")
    return run_command(["bash", str(path), *script_args])


def _cmd_project(a: argparse.Namespace, command: list[str]) -> int:
    plan = load_plan(a, a.project, command)
    check_precision_as_written(plan)
    check_outputs([("--trace", a.trace), ("--report", a.report)])
    result = _project(a, plan, command)
    run = None
    if a.train_tokens is not None:
        from primus_launch.projection.training_run import training_run

        run = training_run(result, a.train_tokens, a.gpu_hour_price)
    if a.json:  # the text answer shows them itself
        print_reader_lines(result, plan)
    if result.measurement is not None and result.measurement.cache_warning:
        print(f"primus-launch: warning: {result.measurement.cache_warning}", file=sys.stderr)
    if result.mode == "measured" and a.measure_device is None:
        from primus_launch.projection.api import default_measure_device
        from primus_launch.projection.measure.device import no_gpu_reason

        if default_measure_device() == "cpu":
            print(f"primus-launch: warning: no GPU: {no_gpu_reason()}; measured on the CPU: CPU timings only check "
                  "the path (use --dry-run to simulate the target GPU)", file=sys.stderr)
    if a.trace:
        write_trace(a.trace, result)
    if a.report:
        from primus_launch.report.html import write_projection_report

        write_projection_report(result, a.report, run)
    if a.json:
        d = result.to_json_dict()
        if run is not None:
            d["training_run"] = run.model_dump(mode="json")
        print(json.dumps(d))
    else:
        from primus_launch.report.text import render_text

        print(render_text(result, explain=a.explain, reader_notes=plan.source.notes if plan.source else [],
                          run=run))
    for path, what in ((a.report, "report"), (a.trace, "trace")):  # as a tune says what it wrote; on stderr: not
        if path:                                                     # the answer's screen, nor in its JSON
            print(f"primus-launch: {what} written to {shown(path)} ({human(file_size(path))})", file=sys.stderr)
    # after a launch script, the words after -- are its $1 $2 ... (read so above): not a command to run or print
    script_args = command if takes_script_args(a.project) else []
    if a.emit:
        _emit(a, plan, [] if script_args else command)
    if a.launch:
        from primus_launch.launch.launcher import ensure_fits, run_command

        ensure_fits(result, a.force)
        refuse_environment_launch(a)
        sys.stdout.flush()
        if command and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", command[0]):  # TP=4 bash x.sh: as the shell runs it
            command = ["env", *command]
        return run_command(command) if command and not script_args else _launch_recipe(plan, script_args)
    return 0


def _cmd_tune(a: argparse.Namespace, command: list[str]) -> int:
    """The tune (:func:`primus_launch.cli_tune.run_tune`: the search, the tuned files and the answer), then
    ``--emit`` / ``--launch`` of the tuned plan: the tuned command, or the tuned recipe with the script's
    positional parameters."""
    tuned = run_tune(a, command)
    best = tuned.result.best_plan
    if a.emit:
        _emit(a, best, tuned.tuned_cmd or [], tuned.written)
    if a.launch:
        from primus_launch.launch.launcher import ensure_fits, run_command

        ensure_fits(tuned.result.best, a.force)  # (the environment was refused before the search: run_tune)
        sys.stdout.flush()
        if tuned.tuned_cmd:
            return run_command(tuned.tuned_cmd)
        source = best.source.model_copy(update={"path": str(tuned.written)})  # the tuned recipe runs
        return _launch_recipe(best.model_copy(update={"source": source}), command if takes_script_args(a.tune) else ())
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the CLI; SIGINT ends with one line and exit 130, SIGTERM with one line and exit 143, SIGHUP
    with one line and exit 129 (:mod:`primus_launch.interrupt`: handlers installed before anything heavy is imported); a
    user's mistake with one line and exit 2; a fault of the tool itself with one line and exit 70
    (``PRIMUS_LAUNCH_TRACEBACK=1`` shows its traceback).  Called as the process's entry point
    (``argv`` None), the signals stay ignored after the run, until the interpreter exits."""
    from primus_launch import interrupt

    def stopped(signum: int) -> int:
        from primus_launch.tuner.progress import end_lines

        end_lines()
        _say(interrupt.end_line(signum))
        return interrupt.exit_code(signum)

    from primus_launch import streams

    with interrupt.handling(keep=argv is None), streams.guarded():
        try:
            with interrupt.deferred():
                # pydantic-core's import initialises pyo3's datetime C API: a KeyboardInterrupt inside it
                # makes Rust panic (a message on stderr); a signal meanwhile is raised once it is done
                import pydantic  # noqa: F401
            rc = _guarded(argv)
        except SystemExit:
            raise
        except BaseException:  # the signal's KeyboardInterrupt / Terminated, or what a library made of it
            if interrupt.received() is None:
                raise
            return stopped(interrupt.received())
        if interrupt.received() is not None:  # a framework swallowed it; the run still ends here
            return stopped(interrupt.received())
        return rc


#: the frameworks the measured path imports: their own warnings (missing Apex / Transformer Engine on
#: a CPU, deprecations) are not the user's answer; ``python -W`` / ``PYTHONWARNINGS`` shows them
FRAMEWORK_MODULES = r"(megatron|torch|torchtitan|torchao|triton|transformer_engine)(\.|$)"


def _guarded(argv: Optional[Sequence[str]]) -> int:
    """:func:`_main` with every failure as one line: exit 2 for the user's mistakes, 70 for the
    tool's.  An exception while a signal is pending is the signal's (a library may have wrapped the
    ``KeyboardInterrupt`` its code was in -- pydantic-core turns one into a ``SchemaError``)."""
    from primus_launch import inputs, interrupt

    with inputs.run():
        try:
            return _main(argv)
        except (KeyboardInterrupt, interrupt.Terminated, SystemExit):
            raise
        except BaseException as e:  # pyo3's PanicException is a BaseException
            interrupt.check()
            if not isinstance(e, Exception):
                raise
            from pydantic import ValidationError

            from primus_launch.plan import PlanError

            if isinstance(e, (UserError, PlanError, ValidationError)):
                _say(f"primus-launch: error: {one_line(e)}")
                return 2
            if isinstance(e, (RecursionError, MemoryError)):  # input the boundary let through: still one line
                _say(f"primus-launch: error: input too large or too deeply nested to process ({type(e).__name__})")
                return 2
            if os.environ.get("PRIMUS_LAUNCH_TRACEBACK"):
                raise
            _say(f"primus-launch: internal error: {type(e).__name__}: {' '.join(str(e).split())[:300]} "
                 "(set PRIMUS_LAUNCH_TRACEBACK=1 for the traceback)")
            return 70


def _say(line: str) -> None:
    """One line on stderr; a closed stderr (a pipe the reader left) is not an error of its own."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not sys.warnoptions:
        import warnings

        warnings.filterwarnings("ignore", module=FRAMEWORK_MODULES)
    ours, command = _split_command(argv)
    ap = parser()
    ap.argv = ours  # type: ignore[attr-defined]  # for the error of a value that starts with '-'
    try:
        a = ap.parse_args(ours)
    except SystemExit as e:
        if e.code in (0, None):  # --help / --version: argparse swallows a failed write of their text (exit 0, nothing)
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            failed = getattr(sys.stdout, "failed", None)
            if failed is not None:
                _say(f"primus-launch: error: {failed}")
                raise SystemExit(2) from None
        raise
    refused = _argument_error(a, command)
    if refused:
        return _usage_error(*refused)
    _warn_adjusted(a)
    try:
        return _run_mode(a, command)
    except BrokenPipeError:  # the reader of stdout left (`| head`): end as a shell tool does, without a word
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush has nowhere to fail
        except (OSError, ValueError):
            pass
        return 128 + int(signal.SIGPIPE)
    except OSError as e:
        from primus_launch import interrupt

        interrupt.check()
        said = one_line(e) if e.filename is None or isinstance(e, UserError) else \
            clip_words(f"{str(e.filename)!r}: {e.strerror or e}")  # the file it is about, by name
        return _usage_error(said, clip=False)


def _usage_error(message: str, clip: bool = True) -> int:
    """``primus-launch: error: MESSAGE`` on stderr, as one line (its long words cut by :func:`clip_words` where
    ``clip``); returns the exit status of a user's mistake, 2."""
    line = f"primus-launch: error: {message}"
    print(clip_words(line) if clip else line, file=sys.stderr)
    return 2


#: the flags that name a path (dest -> how it is spelled)
_PATH_FLAGS = {"out": "--out", "log": "--log", "report": "--report", "trace": "--trace", "gpu_file": "--gpu-file",
               "primus_root": "--primus-root"}


def _argument_error(a: argparse.Namespace, command: list[str]) -> Optional[tuple[str, bool]]:
    """The first mistake of the parsed command line, as (the error's message, whether its long words are cut):
    a flag needing another, an empty or blank value, an unexpanded '~', a recipe read from standard input, a
    working folder gone, a ``--primus-root`` that is no folder, then :func:`_flag_conflict`; None when none."""
    if a.gpu_hour_price is not None and a.train_tokens is None:
        return (f"--gpu-hour-price={a.gpu_hour_price:g}: needs --train-tokens N (the cost is of a whole run of N "
                "tokens)", False)
    if a.ray_address is not None and a.tune is None:
        return f"--ray-address={a.ray_address}: only with --tune (it runs the search's shards on a Ray cluster)", True
    for dest, spelled in {**_PATH_FLAGS, "llm": "--llm", "gpu": "--gpu"}.items():
        v = getattr(a, dest)
        # `--out ""`: not the default path; `--report " "` (a quoted variable holding a blank): not a file named " "
        if v is not None and not v.strip():
            return (f"{spelled}={v!r}: {'empty' if not v else 'blank'}; give "
                    f"{'a model name' if dest == 'llm' else 'a GPU name' if dest == 'gpu' else 'a path'}", False)
    for dest, spelled in {**_PATH_FLAGS, "project": "--project", "tune": "--tune"}.items():
        v = getattr(a, dest)
        # `--report=~/r.html` or a quoted "~/r.html": bash expands no tilde there, and the run read or wrote a folder
        # named "~" in the working folder (one that exists is taken as written)
        if isinstance(v, str) and v.startswith("~") and not os.path.lexists(v.split("/", 1)[0]):
            return (f"{spelled}={v!r}: '~' was not expanded (bash leaves it after {spelled}= and in quotes); write the "
                    f"path in full or with $HOME ({os.path.expanduser(v)!r})", True)
    for item in a.allow:  # `--allow ""` / `--allow ,`: no knob named (it searched none, without a word)
        if not any(x.strip() for x in item.split(",")):
            return f"--allow={item!r}: empty; give knob families, comma-separated (fp8, optimizer-dtypes)", False
    for dest, spelled in (("project", "--project"), ("tune", "--tune")):
        v = getattr(a, dest)
        if v == "" or v == "-":  # `--project ""` read as the folder '.'; '-' (standard input) as a missing file
            return (f"{spelled}={v!r}: " + (
                "empty; give a recipe file (or the training command after --)" if not v else
                "standard input is not read; give the recipe's file (write ./- for a file of that name) or the "
                "training command after --"), False)
    if a.project is not None or a.tune is not None:
        try:
            os.getcwd()  # every relative path, and each input's real path, is resolved against it
        except OSError as e:
            return (f"working folder: {e.strerror or e} (removed while the shell was in it?); cd to an existing "
                    "folder", False)
    # os.path.isdir: False for a name the kernel cannot take (too long), where Path.is_dir raises
    if a.primus_root is not None and not os.path.isdir(a.primus_root):
        return f"--primus-root={a.primus_root!r}: no such folder (a Primus checkout, or its primus/configs)", True
    conflict = _flag_conflict(a, command)
    return (conflict, True) if conflict else None


def _warn_adjusted(a: argparse.Namespace) -> None:
    """Warn of the flags the run adjusts or leaves unapplied: ``--workers`` above the cores this process may use
    (lowered to them), ``--time-limit`` with the default branch and bound (bounded by ``--max-work``)."""
    if a.workers is not None and a.ray_address is None:  # --workers: only with --tune, which imports the search
        from primus_launch.tuner.search import default_workers

        cores = default_workers()
        if a.workers > cores:
            # more local processes than cores only adds forks (each a copy of this process, up to the flag's bound
            # of 4,096); the answer does not depend on their number
            print(f"primus-launch: warning: --workers={a.workers}: this process may use {cores} core(s); {cores} "
                  "worker process(es) run (the answer does not depend on the number)", file=sys.stderr)
            a.workers = cores
    if a.tune is not None and a.time_limit is not None and _branch_and_bound(a):
        print(f"primus-launch: warning: --time-limit={a.time_limit:g}: not applied: the default branch and bound is "
              "bounded by --max-work (a count, the same answer on any machine); add --planner or --exhaustive to "
              "stop the search by time", file=sys.stderr)


def _run_mode(a: argparse.Namespace, command: list[str]) -> int:
    """The checked command line run: the ``--gpu-file`` specs read, then ``--project``, ``--tune`` or, with
    neither, the command after ``--`` as is; returns the exit status."""
    if a.gpu_file:
        from primus_launch.projection.hardware.gpus import known_gpus, load_gpu_file

        before = set(known_gpus())
        a.gpu_file_specs = {n: n in before for n in load_gpu_file(a.gpu_file)}  # name -> overrides the DB's
    if a.project is None and a.tune is None:
        if not command:
            return _usage_error("give --project RECIPE, --tune RECIPE or a command after --", clip=False)
        if a.train_tokens is not None:
            return _usage_error(f"--train-tokens={a.train_tokens}: only with --project or --tune", clip=False)
        from primus_launch.launch.launcher import run_command

        return run_command(command)
    rc = _cmd_project(a, command) if a.project is not None else _cmd_tune(a, command)
    sys.stdout.flush()  # a full disk under `> answer.json` is this run's error line, not the exit's
    return rc


if __name__ == "__main__":
    sys.exit(main())
