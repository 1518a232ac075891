"""The command line's flags: ``primus-launch``'s argparse parser (:func:`parser`), its one-line errors and its
refusal of a flag given twice; the checks of the parsed flags together are ``cli.py``'s.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from primus_launch.cli_recipe import FROM_COMMAND
from primus_launch.errors import clip_words


class _Parser(argparse.ArgumentParser):
    """argparse with the project's one-line errors (no usage block): exit 2."""

    def error(self, message: str):  # type: ignore[override]
        m = re.fullmatch(r"argument (--[\w-]+)(?:/[^:]*)?: expected one argument", message)
        argv = getattr(self, "argv", [])
        at = argv.index(m.group(1)) if m and m.group(1) in argv else -1
        if 0 <= at < len(argv) - 1 and argv[at + 1].startswith("-"):
            # `--train-tokens -5T`: argparse reads a word starting with '-' as the next flag, not as the value
            message += f"; {argv[at + 1]!r} is read as a flag: write {m.group(1)}={argv[at + 1]}"
        u = re.match(r"unrecognized arguments: (--[^\s=]+)", message)
        hits = [o for a in self._actions for o in a.option_strings if u and o.startswith(u.group(1))]
        if hits:  # allow_abbrev=False: `--gpus 64` is no --gpus-per-node 64 (it reads as the whole cluster's GPUs)
            message = (f"{u.group(1)}: not an option of primus-launch (options are not abbreviated); write the whole "
                       f"option: {', '.join(sorted(hits))}")
        w = re.match(r"unrecognized arguments: (-\S+)", message)
        if w and not hits and os.path.lexists(w.group(1)):  # `--project -x.sh`: the file's name read as an option
            message = (f"{w.group(1)!r}: read as an option (it starts with '-'); for the file of that name write "
                       f"./{w.group(1)}")
        print(clip_words(f"primus-launch: error: {' '.join(message.split())}"), file=sys.stderr)
        raise SystemExit(2)


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store`` that refuses a flag given twice (argparse keeps the last silently:
    ``--gpu h100-sxm ... --gpu b200`` would project on the B200 without a word)."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_given_once", {})
        if self.dest in seen and option_string is not None:
            parser.error(f"{option_string}={values}: given twice (first {seen[self.dest]}); give it once")
        seen[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


def parser() -> argparse.ArgumentParser:
    """The command line's parser: the mode (``--project`` / ``--tune``), then the target, the answer's, the
    search's and the launch's flags, in the order ``--help`` lists them."""
    ap = _Parser(
        prog="primus-launch", allow_abbrev=False,
        description="Plan, project and tune large LLM training runs before spending GPU-hours.",
        epilog="Everything after `--` is a training command: run unchanged, or read as the recipe "
               "when --project/--tune are given without a file.")
    ap.register("action", None, _StoreOnce)
    ap.register("action", "store", _StoreOnce)
    act = ap.add_mutually_exclusive_group()
    act.add_argument("--project", nargs="?", const=FROM_COMMAND, metavar="RECIPE",
                     help="project the run of RECIPE (or of the command after --) at its target scale")
    act.add_argument("--tune", nargs="?", const=FROM_COMMAND, metavar="RECIPE",
                     help="search parallel configurations and write the tuned recipe next to RECIPE")
    _add_target_args(ap)
    _add_answer_args(ap)
    _add_tune_args(ap)
    ap.add_argument("--launch", action="store_true", help="run the (tuned) command or recipe afterwards")
    ap.add_argument("--force", action="store_true", help="launch even if the plan does not fit in memory")
    ap.add_argument("--emit", choices=["torchrun", "slurm"],
                    help="print the plan's launch: a torchrun command or a Slurm batch script")
    ap.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                    help="print the installed version and exit")
    return ap


def _version() -> str:
    """The installed distribution's version (pyproject.toml), or "(not installed)" when run from a checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("primus-launch")
    except PackageNotFoundError:
        return "(not installed)"


def _add_target_args(ap: argparse.ArgumentParser) -> None:
    """The flags of what is projected and how: ``--dry-run``, the target GPU and cluster (overriding the
    recipe's), a GPU file, a power cap, the Primus checkout of an experiment's presets."""
    from primus_launch.inputs import bounded_int, finite_float
    from primus_launch.plan.sections import GPU_NAMES, LIMITS, Cluster

    nodes, per_node = LIMITS["cluster.num_nodes"], LIMITS["cluster.gpus_per_node"]
    ap.add_argument("--dry-run", action="store_true",
                    help="simulate the target GPU from the hardware database, on the CPU, in seconds (default: "
                         "build and time the model's layers on --measure-device, then upscale)")
    ap.add_argument("--gpu", help=f"target GPU: {', '.join(GPU_NAMES)} (or one from --gpu-file; default: the "
                                  f"wrapper's or the recipe's, else {Cluster.model_fields['gpu'].default}, said in a "
                                  "note)")
    ap.add_argument("--nodes", type=bounded_int(1, nodes, f"an integer from 1 to {nodes:,}"),
                    help="number of nodes (default: the wrapper's or the recipe's; where neither states it, a "
                         "default said in a note)")
    ap.add_argument("--gpus-per-node", type=bounded_int(1, per_node, f"an integer from 1 to {per_node:,}"),
                    help="GPUs per node (default: the wrapper's or the recipe's; where neither states it, a default "
                         "said in a note)")
    ap.add_argument("--gpu-file", help="TOML/YAML file adding or overriding GPU specs")
    ap.add_argument("--power-limit-w", type=finite_float(0.0, 1e5, lo_open=True, what="a power in W, > 0 and <= 100000"),
                    metavar="W",
                    help="board power cap the GPUs run at (nvidia-smi --power-limit), W; below the GPU's rated power "
                         "it slows compute-bound kernels by (W / rated) ** 0.94 (default: the rated power)")
    ap.add_argument("--primus-root", metavar="DIR",
                    help="Primus checkout (or its primus/configs) holding the presets of a Primus experiment YAML "
                         "(default: the checkout the YAML lives in)")


def _add_answer_args(ap: argparse.ArgumentParser) -> None:
    """The flags of the answer: the memory margin and basis of the fits verdict, a whole run's tokens and
    price, the output forms (``--json``, ``--explain``, a trace, a report) and the measuring device."""
    from primus_launch.inputs import finite_float, token_count

    ap.add_argument("--memory-margin", type=finite_float(0.0, 0.99, what="a fraction from 0 to 0.99"), default=0.0,
                    help="fraction of the device's memory kept free on top of the projected peak and its error "
                         "band (default 0)")
    ap.add_argument("--memory-basis", choices=["reserved", "allocated"], default="reserved",
                    help="peak the fits verdict compares with the GPU's capacity: the caching allocator's "
                         "estimated reserved peak (default) or the allocated peak (both + CUDA context/NCCL)")
    ap.add_argument("--train-tokens", type=token_count(), metavar="N",
                    help="tokens of the whole training run (15T, 1.5e12, 300B): adds its iterations, days and "
                         "GPU-hours (steady state: no checkpointing, evaluation, restarts or failures) to the "
                         "projection, and to the tune's original and best plans")
    ap.add_argument("--gpu-hour-price", type=finite_float(0.0, 1e9, lo_open=True, what="USD per GPU-hour, > 0 and <= 1e9"),
                    metavar="USD", help="with --train-tokens: price of one GPU-hour, adds the run's cost")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object on stdout (a tune: its trial log's form); notes and warnings on "
                         "stderr")
    ap.add_argument("--explain", action="store_true",
                    help="print every table: the full time and memory breakdowns, the measured pieces, every note "
                         "and the dry-run's per-op pricing (default: a one-screen answer)")
    ap.add_argument("--trace", help="write the simulated pipeline timeline as a Chrome/Perfetto trace (tune: the "
                                    "best plan's)")
    ap.add_argument("--report", help="write a self-contained HTML report")
    ap.add_argument("--measure-device", choices=["cpu", "cuda"],
                    help="without --dry-run: the device the layers are timed on (default: cuda where a GPU is "
                         "visible, else cpu, whose timings only check the path)")


def _add_tune_args(ap: argparse.ArgumentParser) -> None:
    """The flags only the search reads (``cli.py`` refuses them without ``--tune``): its limits, the kind of search, its workers,
    the knob families it may change, the table's rows, the memory rule and the files it writes."""
    from primus_launch.inputs import bounded_int, finite_float

    ap.add_argument("--budget", type=bounded_int(1, 10**9, "an integer from 1 to 1,000,000,000"),
                    help="tune: run the planner, scoring at most this many candidates (no certificate of "
                         "optimality; default: the certified branch and bound, bounded by --max-work)")
    ap.add_argument("--time-limit", type=finite_float(0.0, 1e7, lo_open=True, what="seconds, > 0 and <= 1e7"),
                    help="tune: stop the planner or the exhaustive search after this many seconds (the default "
                         "branch and bound is bounded by --max-work, never by time)")
    ap.add_argument("--max-work", type=bounded_int(1, 10**12, "an integer from 1 to 1,000,000,000,000"),
                    help="tune: work limit of the branch-and-bound search, in units of one plan's bound "
                         "(default 80,000; a count, so the answer does not depend on the machine's load)")
    ap.add_argument("--llm", metavar="MODEL",
                    help="tune: run the planner and also ask this model for candidates (OPENAI_BASE_URL / "
                         "OPENAI_API_KEY; no certificate of optimality)")
    search = ap.add_mutually_exclusive_group()
    search.add_argument("--exhaustive", action="store_true", default=None,
                        help="tune: score every legal candidate (brute force; default: the certified branch and "
                             "bound)")
    search.add_argument("--planner", dest="exhaustive", action="store_false",
                        help="tune: run the planner instead of the certified branch and bound")
    ap.add_argument("--workers", type=bounded_int(1, 4096, "an integer from 1 to 4096"),
                    help="tune: processes of the exhaustive search (default: every core); with the branch and "
                         "bound, N > 1 local processes expand its candidates ahead (default: this process; the "
                         "same plan and certificate)")
    ap.add_argument("--ray-address", metavar="ADDR",
                    help="tune: run the search's shards (and, measured on cuda, the distinct pieces, one per GPU) "
                         "on a Ray cluster: HOST:PORT of its head (ray start --head), ray://HOST:PORT, auto or local "
                         "(a local Ray instance); needs pip install 'primus-launch[ray]'; the same plan and "
                         "certificate as without it")
    ap.add_argument("--allow", action="append", default=[], metavar="LIST",
                    help="tune: also search knobs that change numerics, comma-separated: fp8 (FP8 precision, "
                         "scaling recipe, FP8 param gather), optimizer-dtypes (BF16 Adam moments)")
    ap.add_argument("--top", type=bounded_int(0, 10_000, "an integer from 0 to 10000"), default=5,
                    help="tune: rows in the top-N table and the JSON's top list (default 5; 0: every scored plan; the trial log, "
                         "--log, keeps every scored plan)")
    ap.add_argument("--memory-certain", action="store_true",
                    help="tune: only plans that fit by their whole memory error band may be the answer "
                         "(default: the fastest whose point estimate fits; tight plans over the capacity are "
                         "listed, marked, and chosen only where no plan's point estimate fits)")
    ap.add_argument("--log", help="tune: JSON log of every trial (default: next to the tuned recipe)")
    ap.add_argument("--out", help="tune: path of the tuned recipe (default RECIPE.tuned.EXT; through a wrapper "
                                  "W.primus.toml, W.tuned.EXT beside the recipe it points at)")
