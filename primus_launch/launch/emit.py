"""Emit the launch of a plan: a torchrun command line, or a Slurm batch script (``--emit slurm``).

The topology comes from the plan's cluster only: ``--nnodes = plan.cluster.num_nodes`` and
``--nproc-per-node = plan.cluster.gpus_per_node`` (one torchrun per node spawning one worker per
GPU, so ``nodes x nproc-per-node = plan.world_size``).  Rendezvous follows torchrun's multi-node
recipe (https://pytorch.org/docs/stable/elastic/run.html): ``--rdzv-backend c10d`` with the
endpoint on the first node; a single node uses ``--standalone``.

``program_argv`` is either the training program (``pretrain_gpt.py ARGS``, ``python train.py ARGS``,
``python -m pkg.mod ARGS``) or a whole torchrun command; in the latter case the user's other
torchrun options (``--max-restarts``, ``--log-dir``, ``-m`` ...) are kept and only the topology and
rendezvous options are replaced.
"""

from __future__ import annotations

import os
import re
import shlex

from primus_launch.errors import UserError
from primus_launch.plan import Plan
from primus_launch.adapters.torchrun_argv import TOPOLOGY_DESTS, Option, TorchrunCommand, split_torchrun

#: the rendezvous endpoint written when the command did not name one: expanded by the shell
DEFAULT_RDZV_ENDPOINT = "${MASTER_ADDR}:${MASTER_PORT:-29500}"

SLURM_RDZV_ENDPOINT = "${MASTER_ADDR}:${MASTER_PORT}"
SLURM_RDZV_ID = "${SLURM_JOB_ID}"
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]", ""}

#: the only tokens written with live shell expansions; every other token (the user's program
#: arguments included: their shell already expanded them) is quoted literally
LIVE_TOKENS = frozenset({DEFAULT_RDZV_ENDPOINT, SLURM_RDZV_ENDPOINT, SLURM_RDZV_ID})


def shell_quote(token: str) -> str:
    """Quote one token for a POSIX shell; the rendezvous placeholders this module writes
    (:data:`LIVE_TOKENS`) are double-quoted so that they expand on the node."""
    if token in LIVE_TOKENS:
        return f'"{token}"'
    return shlex.quote(token)


def shell_join(argv: list[str]) -> str:
    return " ".join(shell_quote(t) for t in argv)


def _as_torchrun(program_argv: list[str]) -> TorchrunCommand:
    argv = [str(a) for a in program_argv]
    if not argv:
        raise UserError("command: empty; nothing to launch")
    tr = split_torchrun(argv)
    if tr is not None:
        return tr
    exe = os.path.basename(argv[0])
    if exe.startswith("python") and len(argv) >= 2 and re.fullmatch(r"python[0-9.]*", exe):
        rest = argv[1:]
        if rest[0] == "-m" and len(rest) >= 2:  # python -m pkg.mod ARGS -> torchrun -m pkg.mod ARGS
            return TorchrunCommand(prefix=["torchrun"], program=rest[1:],
                                   options=[Option("module", ["-m"], None)])
        if rest[0].startswith("-"):
            raise UserError(f"command {shlex.join(argv)!r}: python options before the script cannot be "
                            "passed through torchrun; give the script (or -m module) first")
        return TorchrunCommand(prefix=["torchrun"], program=rest)
    return TorchrunCommand(prefix=["torchrun"], program=argv)


def _topology(plan: Plan, tr: TorchrunCommand, rdzv_id: str | None, endpoint: str | None,
              ) -> dict[str, str | None]:
    c = plan.cluster
    opts: dict[str, str | None] = {"nnodes": str(c.num_nodes), "nproc_per_node": str(c.gpus_per_node)}
    if endpoint is None and c.num_nodes == 1:
        opts["standalone"] = None
        return opts
    if endpoint is None:
        ep = tr.get("rdzv_endpoint")
        if ep is None and tr.get("master_addr"):
            ep = f"{tr.get('master_addr')}:{tr.get('master_port') or 29500}"
        if ep is not None and ep.rsplit(":", 1)[0] in _LOOPBACK:  # a single-node default, not a host
            ep = None
        endpoint = ep or DEFAULT_RDZV_ENDPOINT
    opts.update({"rdzv_backend": "c10d", "rdzv_endpoint": endpoint})
    if rdzv_id is not None:
        opts["rdzv_id"] = rdzv_id
    elif tr.get("rdzv_id"):
        opts["rdzv_id"] = tr.get("rdzv_id")
    return opts


def torchrun_command(plan: Plan, program_argv: list[str]) -> list[str]:
    """The torchrun command line that runs ``program_argv`` on the plan's cluster (run it on every
    node).  Multi-node: c10d rendezvous at the command's own endpoint if it named a host (not a
    loopback address, which only works on one node), else at
    ``$MASTER_ADDR:${MASTER_PORT:-29500}`` (print with :func:`shell_join` to keep it expandable)."""
    tr = _as_torchrun(program_argv)
    return tr.replaced(_topology(plan, tr, None, None), drop=TOPOLOGY_DESTS)


def _job_name(name: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")
    if not clean:
        raise UserError(f"job_name={name!r}: needs letters, digits, '_', '.' or '-'")
    return clean


def env_words(env: dict[str, str]) -> list[str]:
    """``NAME=value`` words (the value shell-quoted, the name bare: a quoted assignment is a command name)
    to put before a command line."""
    return [f"{k}={shlex.quote(v)}" for k, v in env.items()]


def slurm_script(plan: Plan, program_argv: list[str], job_name: str = "primus",
                 env: dict[str, str] | None = None) -> str:
    """A Slurm batch script: ``#SBATCH --nodes=N --ntasks-per-node=1 --gpus-per-node=G``, then one
    ``torchrun`` per node through ``srun`` with c10d rendezvous on the first node of the allocation
    (first line of ``scontrol show hostnames $SLURM_JOB_NODELIST``) and ``--rdzv-id $SLURM_JOB_ID``;
    ``env`` (the recipe's launch environment, :func:`launch_env_of_recipe`) exported before ``srun``,
    which passes the batch environment to its tasks (its default ``--export=ALL``)."""
    c = plan.cluster
    tr = _as_torchrun(program_argv)
    topo = {"nnodes": str(c.num_nodes), "nproc_per_node": str(c.gpus_per_node),
            "rdzv_backend": "c10d", "rdzv_endpoint": SLURM_RDZV_ENDPOINT, "rdzv_id": SLURM_RDZV_ID}
    launch = tr.replaced(topo, drop=TOPOLOGY_DESTS)
    srun = ["srun", f"--nodes={c.num_nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    body = " \\\n    ".join([shell_join(srun), *_wrap(launch)])
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={_job_name(job_name)}",
        f"#SBATCH --nodes={c.num_nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={c.gpus_per_node}",
        "#SBATCH --exclusive",
        f"# primus-launch plan: {plan.model.name}, {c.num_nodes} node(s) x {c.gpus_per_node} {c.gpu} "
        f"= {plan.world_size} GPUs; {plan.parallel_summary()}",
        "set -euo pipefail",
        # sed reads all of its input: `head -n 1` can end the pipe early and, under pipefail,
        # fail the script with scontrol's SIGPIPE (exit 141)
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"',
        'MASTER_PORT="${MASTER_PORT:-29500}"',
        "export MASTER_ADDR MASTER_PORT",
        *[f"export {w}" for w in env_words(env or {})],
        body,
        "",
    ]
    return "\n".join(lines)


def _wrap(argv: list[str], width: int = 100) -> list[str]:
    """Shell-quoted tokens grouped into continuation lines of about ``width`` characters, keeping an
    option and its value together."""
    toks = [shell_quote(t) for t in argv]
    out: list[str] = []
    cur = ""
    for i, t in enumerate(toks):
        joined_with_prev_opt = i > 0 and argv[i - 1].startswith("-") and not argv[i].startswith("-")
        if cur and len(cur) + 1 + len(t) > width and not joined_with_prev_opt:
            out.append(cur)
            cur = t
        else:
            cur = f"{cur} {t}" if cur else t
    if cur:
        out.append(cur)
    return out


def program_of_recipe(plan: Plan, recipe_path: str | os.PathLike | None = None) -> list[str] | None:
    """The training command a recipe file runs, for :func:`torchrun_command` / :func:`slurm_script`
    when the user gave a file instead of a command; ``None`` when the recipe holds no command.

    - Megatron-LM launch script: its training command as the shell would expand it (the Megatron
      adapter's script reader), with the plan's values rendered into the flags (nothing is written);
    - TorchTitan job TOML: ``torchrun -m torchtitan.train --job.config_file PATH`` (v0.2 launcher).

    ``recipe_path`` defaults to ``plan.source.path`` (pass the tuned file's path after a tune).
    """
    path = str(recipe_path) if recipe_path is not None else (plan.source.path if plan.source else None)
    if not path:
        return None
    fw = plan.source.framework if plan.source else None
    if fw == "torchtitan" and path.endswith((".sh", ".bash")):
        # a TorchTitan 0.3 launch script: its launch line with the plan's values (it was given to
        # --job.config_file as if it were the job TOML)
        from pathlib import Path

        from primus_launch.adapters.torchtitan_argv import render_launch
        from primus_launch.adapters.torchtitan_script import is_titan_script, script_launch
        from primus_launch.fileio import read_recipe_text

        text = read_recipe_text(Path(path))
        return render_launch(plan, script_launch(text, path, _script_args(plan))[0]) if is_titan_script(text) else None
    if fw == "torchtitan" or path.endswith(".toml"):
        return ["torchrun", "-m", "torchtitan.train", "--job.config_file", path]
    if path.endswith((".sh", ".bash")):
        from pathlib import Path

        from primus_launch.adapters.megatron import render_argv
        from primus_launch.adapters.megatron_script import from_script

        from primus_launch.fileio import read_recipe_text

        rec = from_script(read_recipe_text(Path(path)), path, _script_args(plan))
        argv = [t.text for t in rec.tokens]
        start = rec.launcher_start()
        launcher = max(0, (start or rec.script_index) - 1) if start is not None else rec.script_index
        argv = argv[launcher:] if start is not None else argv[rec.script_index:]
        return render_argv(plan, argv)
    return None


def launch_env_of_recipe(plan: Plan, recipe_path: str | os.PathLike | None = None) -> dict[str, str]:
    """The environment a launch script sets for its training command (its ``export``s and ``NAME=value``
    prefixes, the script reader's ``env_values``), for the emitted launch: without it the command
    :func:`program_of_recipe` returns does not start as the script does -- Megatron-LM's
    ``validate_args`` (core_v0.16.1 megatron/training/arguments.py) asserts
    ``CUDA_DEVICE_MAX_CONNECTIONS == "1"`` with TP or CP > 1 before Blackwell, and a tuned script carries
    the variables its new knobs need.  Empty for other recipes."""
    path = str(recipe_path) if recipe_path is not None else (plan.source.path if plan.source else None)
    if not path or not path.endswith((".sh", ".bash")):
        return {}
    from pathlib import Path

    from primus_launch.adapters.megatron_script import from_script
    from primus_launch.fileio import read_recipe_text

    return from_script(read_recipe_text(Path(path)), path, _script_args(plan)).env_values()


def _script_args(plan: Plan) -> tuple[str, ...]:
    """The positional parameters ($1 $2 ...) the plan's launch script was read with (the words after ``--``)."""
    return tuple(plan.source.script_args) if plan.source else ()
