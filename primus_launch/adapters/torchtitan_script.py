"""A launch script holding a torchtitan 0.3 launch line (``torchrun ... -m torchtitan.train --module M
--config C ...``, e.g. torchtitan's own ``run_train.sh``) <-> :class:`Plan`.

The script is read as far as such scripts need: ``NAME=value`` / ``export NAME=value`` assignments
(``${NAME:-default}`` / ``${NAME-default}`` / ``$NAME`` references, quotes, backslash line
continuations), and the one command that runs ``torchtitan.train`` with its tokens located in the
text.  ``"$@"`` / ``$*`` (the script's own arguments: torchtitan's ``run_train.sh`` hands them to the trainer as
``--section.key value`` overrides) stand for the arguments the script is called with (``--project script.sh --
ARGS`` or ``--project -- ./script.sh ARGS``), none when it is read alone.  The command is read by
:mod:`torchtitan_argv`; writing edits the tokens the tuned command changes where they are written
(a literal, the default of a ``${NAME:-default}``, or the ``NAME=value`` assignment a reference
comes from) and adds new options after the last literal option of the command.
"""

from __future__ import annotations

import difflib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from primus_launch.adapters.launcher_counts import slurm_option
from primus_launch.adapters.titan_job_argv import CONFIG_FLAGS
from primus_launch.errors import UserError
from primus_launch.fileio import read_recipe_text, write_beside_original
from primus_launch.inputs import find_from_run_root
from primus_launch.plan import Cluster, Plan, PlanError

#: a ``NAME=value`` word: an assignment written before a command (its environment), as the shell reads it
ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
#: ``--opt=`` then one variable reference (quoted or not): ``--nproc_per_node=${NGPU}``
_OPT_REF = re.compile(r"(--?[A-Za-z0-9][A-Za-z0-9_.-]*=)(\"?\$\{?[A-Za-z_][^\s]*)")
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass
class Tok:
    text: str  # expanded
    start: int  # span in the script
    end: int
    literal: bool  # written as-is (no expansion)
    ref: Optional[tuple[str, Optional[tuple[int, int]]]] = None  # whole token = one ${VAR[:-default]}: (VAR, default span)
    after: Optional[int] = None  # where words inserted after this token go (None: its end)
    # ``--opt=${VAR[:-default]}``: (the literal ``--opt=``, VAR, default span) -- its value is VAR's
    opt_ref: Optional[tuple[str, str, Optional[tuple[int, int]]]] = None


@dataclass
class Assign:
    value: str
    start: int  # span of the value text
    end: int


def _logical_lines(text: str) -> list[tuple[int, int]]:
    """Spans of logical lines (backslash-newline continues a line)."""
    out, start, i = [], 0, 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] == "\n":
            i += 2
            continue
        if text[i] == "\n":
            out.append((start, i))
            start = i + 1
        i += 1
    out.append((start, len(text)))
    return out


def _unquote(v: str) -> str:
    v = v.strip()
    try:
        parts = shlex.split(v, comments=True)
    except ValueError:
        return v
    return parts[0] if len(parts) == 1 else v


def _expand(word: str, env: dict[str, Assign]) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(4)
        if name in env:
            val = env[name].value
            if m.group(2) == ":-" and val == "":
                return m.group(3) or ""
            return val
        return m.group(3) if m.group(2) else ""

    return _REF.sub(sub, word)


def _tokens(text: str, a: int, b: int, env: dict[str, Assign], args: tuple[str, ...] = ()) -> list[Tok]:
    """Shell words of ``text[a:b]`` with their spans (quotes removed, references expanded); ``"$@"`` / ``$*``
    (also through a variable assigned from them, ``overrides="$*"`` then ``$overrides``) become ``args``, the
    script's own arguments (tokens at that place, not in the text: never edited)."""
    out: list[Tok] = []
    i = a
    while i < b:
        c = text[i]
        if c in " \t":
            i += 1
            continue
        if c == "\\" and i + 1 < b and text[i + 1] == "\n":
            i += 2
            continue
        if c == "#":
            break
        if c in ";|&":
            out.append(Tok(c, i, i + 1, True))
            i += 1
            continue
        start, buf, literal, quote = i, [], True, None
        while i < b:
            c = text[i]
            if quote is None and c in " \t;|&":
                break
            if c == "\\" and i + 1 < b and text[i + 1] == "\n":
                i += 2
                continue
            if quote is None and c in "'\"":
                quote = c
                i += 1
                continue
            if quote is not None and c == quote:
                quote = None
                i += 1
                continue
            if c == "$" and quote != "'":
                m = _REF.match(text, i)
                if m:
                    buf.append(_expand(m.group(0), env))
                    literal = False
                    i = m.end()
                    continue
                if text.startswith(("$@", "$*"), i):
                    buf.append("\0@")
                    literal = False
                    i += 2
                    continue
            buf.append(c)
            i += 1
        word = "".join(buf)
        raw = text[start:i]
        ref = None
        m = _REF.fullmatch(raw.strip("\"'"))
        if m:
            name = m.group(1) or m.group(4)
            off = start + (1 if raw[:1] in "'\"" else 0)
            dflt = (off + m.start(3), off + m.end(3)) if m.group(2) else None
            ref = (name, dflt)
        opt_ref = None
        m = _OPT_REF.fullmatch(raw)
        if m:
            r = _REF.fullmatch(m.group(2).strip("\"'"))
            if r:
                off = start + m.start(2) + (1 if m.group(2)[:1] in "'\"" else 0)
                opt_ref = (m.group(1), r.group(1) or r.group(4),
                           (off + r.start(3), off + r.end(3)) if r.group(2) else None)
        if word in ("\0@", "$@", "$*"):  # the script's own arguments
            out.extend(Tok(w, start, start, False, after=i) for w in args)
            continue
        out.append(Tok(word, start, i, literal, ref, opt_ref=opt_ref))
    return out


def _scan(text: str, path: str, args: tuple[str, ...] = (), start_env: Optional[dict[str, str]] = None
          ) -> tuple[list[Tok], dict[str, Assign], list[tuple[int, str]]]:
    """(the launch line's tokens, the variables assigned, the notes of counts it leaves unstated:
    :func:`_fill_unstated`); ``args``: the script's own arguments (:func:`_tokens`); ``start_env``: the
    variables the script is started with."""
    from primus_launch.adapters.megatron_bash import sbatch_header, slurm_env

    alloc, unread = sbatch_header(text)
    # the SLURM_* variables of the #SBATCH allocation over those it starts with (not written in the script:
    # spans -1, never edited)
    env: dict[str, Assign] = {k: Assign(v, -1, -1) for k, v in {**(start_env or {}), **slurm_env(alloc)}.items()}
    cmd: Optional[list[Tok]] = None
    for a, b in _logical_lines(text):
        line = text[a:b]
        m = _ASSIGN.match(line)
        if m and " " not in m.group(2).strip().split("#")[0].strip().strip("\"'"):
            val_start = a + m.start(2)
            raw = m.group(2).split(" #")[0].rstrip()
            val = _expand(_unquote(raw), env)
            q = 1 if raw[:1] in "'\"" else 0
            env[m.group(1)] = Assign(val, val_start + q, val_start + len(raw) - q)
            continue
        toks = _tokens(text, a, b, env, args)
        run = _run_train_command(toks, env, text)
        if run is not None:
            cmd = run
            continue
        if any(t.text in ("torchtitan.train",) or t.text.endswith("torchtitan/train.py")
               or t.text.split("=", 1)[0] in CONFIG_FLAGS for t in toks):
            # drop leading NAME=value prefixes and anything before the launcher
            cmd = [t for t in toks if t.text not in (";", "|", "&")]
            while cmd and ENV_WORD.match(cmd[0].text):
                cmd = cmd[1:]
            cmd = _under_srun(cmd, alloc, unread)
    if cmd is None:
        raise UserError(f"{path}: no torchtitan launch line (torchrun ... -m torchtitan.train --module M --config C)")
    cmd = _check_against_bash(text, path, args, {**(start_env or {}), **slurm_env(alloc)}, cmd)
    return cmd, env, _fill_unstated(cmd, unread, path)


def _program_args(words: list[str]) -> Optional[list[str]]:
    """The arguments after ``-m torchtitan.train`` / ``.../torchtitan/train.py`` in ``words`` (None: no such
    program)."""
    from primus_launch.adapters.torchtitan_argv import program_start

    i = program_start(words)
    return None if i is None else words[i:]


# options that change no iteration (where the run writes, its data files, logging, timeouts): a script may build
# their paths from what the evaluator leaves opaque ($(pwd), $(date)) without changing the reading
_NEUTRAL_KEY = re.compile(r"folder|dump|dataset_path|path$|_dir$|log|profil|trace|timeout|wandb|tensorboard|seed")


def _options(words: list[str]) -> list[tuple[str, Optional[str]]]:
    """``--key=value`` / ``--key value`` / ``--flag`` / ``word`` as (key, value) pairs, the neutral keys left out."""
    out, i = [], 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" in w:
            k, v = w.split("=", 1)
        elif w.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("-") \
                and ":" not in words[i + 1]:
            k, v = w, words[i + 1]
            i += 1
        else:
            k, v = w, None
        i += 1
        if not _NEUTRAL_KEY.search(k.lstrip("-")):
            out.append((k, v))
    return out


def _multiword_names(text: str) -> set[str]:
    """Names the script assigns a value with spaces (``EXTRA_ARGS="--a --b "``): the scanner does not read them
    (:func:`_scan`), an unquoted reference to one expands to nothing in its reading."""
    out = set()
    for a, b in _logical_lines(text):
        m = _ASSIGN.match(text[a:b].replace("+=", "=", 1))
        if m and " " in m.group(2).strip().split(" #")[0].strip().strip("\"'"):
            out.add(m.group(1))
    return out


def _word_split(text: str, cmd: list[Tok], theirs: list[str]) -> Optional[list[Tok]]:
    """The scanner's command with bash's words in place of its one empty word, where that is all the readings
    differ by: a word the scanner expanded to nothing from references to multi-word variables
    (:func:`_multiword_names`; dgxc-benchmarking's ``launch.sh`` ``${EXTRA_TRAIN_ARGS}${MXFP8_TRAIN_ARGS}``, which
    bash word-splits into ``--compile.enable --compile.components=...``), bash's options being the scanner's with
    a block of options at that word's place.  None where they differ otherwise."""
    words = [t.text for t in cmd]
    start = len(words) - len(_program_args(words) or [])
    empty = [i for i in range(start, len(cmd)) if cmd[i].text == ""]
    if len(empty) != 1:
        return None
    i = empty[0]
    names = {m.group(1) or m.group(4) for m in _REF.finditer(text[cmd[i].start:cmd[i].end])}
    if not names & _multiword_names(text):
        return None
    before = _options([w for w in words[start:i]])
    after = _options([w for w in words[i + 1:]])
    theirs_o = _options(theirs)
    n = len(theirs_o) - len(before) - len(after)
    if n <= 0 or theirs_o[:len(before)] != before or theirs_o[len(before) + n:] != after:
        return None
    block = [f"{k}={v}" if v is not None else k for k, v in theirs_o[len(before):len(before) + n]]
    t = cmd[i]
    return cmd[:i] + [Tok(w, t.start, t.end, False) for w in block] + cmd[i + 1:]


def _check_against_bash(text: str, path: str, args: tuple[str, ...], env: dict[str, str], cmd: list[Tok]
                        ) -> list[Tok]:
    """Refuse, in one line, a command whose trainer options this line scanner reads otherwise than the bash
    evaluator (:class:`megatron_bash.ShellState`: ``if`` / ``case`` branches, functions, ``bash -c`` strings)
    does: the scanner takes every assignment in order, whatever branch it sits in (NVIDIA dgxc-benchmarking
    ``deepseek_v3/pretrain/torchtitan/launch.sh`` sets the degrees per ``GPU_TYPE`` in ``if/elif``: the last
    branch's were read).  Scripts the evaluator cannot follow (no torchtitan command found, a parse error) keep
    the scanner's reading.  Where the readings differ only by bash's word splitting of multi-word variables
    (:func:`_word_split`), the command with bash's words is returned."""
    from primus_launch.adapters.megatron_bash import ShellState

    mine = _program_args([t.text for t in cmd])
    if mine is None:
        return cmd
    try:
        state = ShellState(text, path, args, env)
    except Exception:  # noqa: BLE001 -- a guard over the scanner's reading: where bash's cannot be had, keep it
        return cmd
    runs = [a for a in (_program_args([t.text for t in c.args]) for c in state.commands) if a is not None]
    if not runs or _options(runs[-1]) == _options(mine):
        return cmd
    split = _word_split(text, cmd, runs[-1])
    if split is not None:
        return split
    mine, theirs = [f"{k}={v}" if v is not None else k for k, v in _options(mine)], \
        [f"{k}={v}" if v is not None else k for k, v in _options(runs[-1])]
    diff = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
    said = theirs[diff] if diff < len(theirs) else "(nothing)"
    read = mine[diff] if diff < len(mine) else "(nothing)"
    raise UserError(f"{path}: the torchtitan command has {said!r} as bash runs the script (its if / case / function "
                    f"code) but {read!r} as this reader scans it: give the values on the command line (a script "
                    "with the branch taken, or the launch line itself)")


_COUNT_FLAGS = {"--nnodes": 0, "--nproc_per_node": 1, "--nproc-per-node": 1}


def _fill_unstated(cmd: list[Tok], unread: dict[str, str], path: str) -> list[tuple[int, str]]:
    """torchrun's ``--nnodes`` / ``--nproc_per_node`` written with no value (an unset variable, the SLURM_*
    variable of an ``#SBATCH`` placeholder such as ``--nodes=<NODES>``: sbatch expands nothing in its
    directives) fall back to the default cluster's count, in place, as the Megatron reader's do; each as
    (0 nodes / 1 processes per node, the note saying so: :func:`megatron_bash.unstated_note`)."""
    from primus_launch.adapters.megatron_bash import unstated_note, unstated_why
    from primus_launch.plan import Cluster

    dflt, out = Cluster(), []
    for j, t in enumerate(cmd):
        if t.text == "-m" and j > 0 and Path(cmd[j - 1].text).name not in ("python", "python3"):
            break  # the trainer's module: torchrun's options are behind
        name, eq, val = t.text.partition("=")
        k = _COUNT_FLAGS.get(name)
        tok = t if eq else cmd[j + 1] if k is not None and j + 1 < len(cmd) else None
        if k is None or tok is None or (val if eq else tok.text).strip():
            continue
        n = (dflt.num_nodes, dflt.gpus_per_node)[k]
        why = unstated_why(unread, ("nodes",) if k == 0 else ("ntasks_per_node", "gpus_per_node"), name)
        tok.text = f"{name}={n}" if eq else str(n)
        out.append((k, unstated_note(path, k, why or f"{name} has no value", n)))
    return out


_SRUN_NODES, _SRUN_TASKS = ("-N", "--nodes"), ("--ntasks-per-node",)


def _under_srun(cmd: list[Tok], alloc: dict[str, int], unread: dict[str, str]) -> list[Tok]:
    """The command ``srun [options] CMD`` runs on each node: CMD when it is torchrun (its own options
    set the world: torchtitan's multinode_trainer.slurm); one srun task per rank otherwise
    (``srun python -m torchtitan.train ...``), read as the torchrun with srun's ``--nodes`` /
    ``--ntasks-per-node``, else the ``#SBATCH`` allocation's (what srun inherits in the job; a count
    ``unread`` there, a placeholder, is left empty for :func:`_fill_unstated`)."""
    if not cmd or Path(cmd[0].text).name != "srun":
        return cmd
    i, opts = 1, {}
    while i < len(cmd) and cmd[i].text.startswith("-"):
        key, eq, val = slurm_option(cmd[i].text)
        if not eq and i + 1 < len(cmd) and key in _SRUN_NODES + _SRUN_TASKS + ("-n", "--ntasks", "-w", "-p",
                                                                                "--partition", "-J", "--job-name"):
            val = cmd[i + 1].text
            i += 1
        opts[key] = val
        i += 1
    rest = cmd[i:]
    if rest and (Path(rest[0].text).name == "torchrun" or rest[0].text.startswith("python") and len(rest) > 2
                 and rest[2].text in ("torch.distributed.run", "torch.distributed.launch")):
        return rest
    def inherited(key: str) -> str:
        return str(alloc[key]) if key in alloc else "" if key in unread else "1"

    nodes = next((opts[k] for k in _SRUN_NODES if k in opts), None) or inherited("nodes")
    tasks = next((opts[k] for k in _SRUN_TASKS if k in opts), None)
    total = next((opts[k] for k in ("-n", "--ntasks") if k in opts), None)
    if tasks is None and total and total.isdigit() and nodes.split("-")[-1].isdigit():
        n_nodes = int(nodes.split("-")[-1])  # srun -n: the job's tasks spread evenly over its nodes
        if int(total) % max(1, n_nodes):
            raise PlanError("srun -n", total, f"a multiple of the node count {n_nodes} (the same number of processes "
                                              "on every node), or --ntasks-per-node")
        tasks = str(int(total) // max(1, n_nodes))
    tasks = tasks or inherited("ntasks_per_node")
    at = rest[0].start if rest else cmd[0].end

    def virtual(word: str) -> Tok:
        return Tok(word, at, at, False)

    if rest and rest[0].text.startswith("python"):
        rest = rest[1:]  # "python -m torchtitan.train ...": the torchrun below runs the module
    return [virtual("torchrun"), virtual("--nnodes"), virtual(nodes.split("-")[-1]), virtual("--nproc_per_node"),
            virtual(tasks)] + rest


def is_titan_script(text: str) -> bool:
    """A script whose command runs torchtitan 0.3's trainer with ``--module``, or calls torchtitan's
    ``run_train.sh`` with ``MODULE`` / ``CONFIG`` (or neither: its defaults)."""
    kind = _run_train_kind(text)
    if kind is not None:
        return kind == "module"
    return ("torchtitan.train" in text or "torchtitan/train.py" in text) and "--module" in text \
        and "--job.config_file" not in text and "--job.config-file" not in text


def is_titan_config_script(text: str) -> bool:
    """A launch script whose command names a TorchTitan job TOML (``--job.config_file``): torchtitan
    <= 0.2's ``run_train.sh`` (also called as ``CONFIG_FILE=... ./run_train.sh``) and its experiments'
    scripts (``-m torchtitan.models.flux.train``, ``train_ds_real.py``).  Megatron-LM has no such flag."""
    return _run_train_kind(text) == "job" or any(f in text for f in CONFIG_FLAGS)


# ----------------------------------------------------------------------------- ./run_train.sh calls
# torchtitan's README launches a run as ``[NGPU=8] MODULE=llama3 CONFIG=llama3_8b ./run_train.sh
# [--section.key value ...]``; the script (torchtitan main, 0.3) runs
#   torchrun --nproc_per_node=${NGPU:-8} ... -m torchtitan.train --module ${MODULE:-llama3}
#            --config ${CONFIG:-llama3_debugmodel} "$@"
# and torchtitan <= 0.2's ran ``-m torchtitan.train --job.config_file ${CONFIG_FILE:-<llama3 debug
# TOML>} "$@"``.  Such a call is read as the command the script runs (with COMM_MODE set, the script
# runs one process that simulates NGPU ranks: its ``fake_backend`` / ``local_tensor`` debugging modes).
_RUN_TRAIN_DEFAULTS = {"NGPU": "8", "MODULE": "llama3", "CONFIG": "llama3_debugmodel"}
_RUN_TRAIN_LINE = re.compile(r"^[ \t]*(?:(?:export[ \t]+)?[A-Za-z_][A-Za-z0-9_]*=\S*[ \t]+)*(?:(?:ba)?sh[ \t]+)?"
                             r"\S*run_train\.sh\b(.*)$", re.M)


def _run_train_kind(text: str) -> Optional[str]:
    """``module`` / ``job`` when a line of ``text`` calls torchtitan's ``run_train.sh`` (``job``: with
    a ``CONFIG_FILE``, torchtitan <= 0.2's job TOML), else None."""
    for m in _RUN_TRAIN_LINE.finditer(text):
        line = m.group(0)
        if line.lstrip().startswith("#"):
            continue
        return "job" if re.search(r"(?:^|\s)(?:export\s+)?CONFIG_FILE=", text) else "module"
    return None


def _run_train_command(toks: list[Tok], env: dict[str, Assign], text: str) -> Optional[list[Tok]]:
    """The command ``run_train.sh`` runs, when ``toks`` (one logical line) call it: synthetic tokens
    for what the script adds (editable where the value is written: a ``NAME=value`` prefix of the
    call or an assignment above it), then the call's own arguments.  None for any other line."""
    i, prefix = 0, {}
    while i < len(toks) and ENV_WORD.match(toks[i].text):
        prefix[toks[i].text.split("=", 1)[0]] = toks[i]
        i += 1
    if i < len(toks) and toks[i].text in ("bash", "sh"):
        i += 1
    if i >= len(toks) or Path(toks[i].text).name != "run_train.sh":
        return None
    call = toks[i]
    args: list[Tok] = []
    for t in toks[i + 1:]:
        if t.text in (";", "|", "&"):
            break
        args.append(t)
    end = args[-1].end if args else call.end

    def virtual(word: str) -> Tok:
        return Tok(word, call.start, call.start, False, after=end)

    def value(name: str) -> Tok:
        if name in prefix:
            t = prefix[name]
            raw = text[t.start:t.end]
            a = t.start + len(name) + 1
            q = 1 if raw[len(name) + 1:len(name) + 2] in ("'", '"') else 0
            return Tok(t.text.split("=", 1)[1], a + q, t.end - q, t.literal, after=end)
        if name in env and env[name].start >= 0:
            return Tok(env[name].value, env[name].start, env[name].end, True, after=end)
        if name in env:  # the environment the script starts in (run_train.sh reads ${NAME:-default})
            return Tok(env[name].value, call.start, call.start, False, (name, None), after=end)
        return Tok(_RUN_TRAIN_DEFAULTS.get(name, ""), call.start, call.start, False, (name, None), after=end)

    ngpu = value("NGPU")
    comm = value("COMM_MODE").text.strip("\"'")
    if comm and ngpu.text.isdigit() and int(ngpu.text) > 8 and int(ngpu.text) % 8 == 0:
        # COMM_MODE=fake_backend / local_tensor: one process stands in for NGPU ranks (run_train.sh's config
        # check); the plan is the NGPU-rank run it checks, on nodes of 8 GPUs
        head = [virtual("torchrun"), virtual("--nnodes"), virtual(str(int(ngpu.text) // 8)),
                virtual("--nproc_per_node"), virtual("8")]
    else:
        head = [virtual("torchrun"), virtual("--nproc_per_node"), ngpu]
    head += [virtual("-m"), virtual("torchtitan.train")]
    if "CONFIG_FILE" in prefix or "CONFIG_FILE" in env:
        head += [virtual("--job.config_file"), value("CONFIG_FILE")]
    else:
        head += [virtual("--module"), value("MODULE"), virtual("--config"), value("CONFIG")]
    return head + args


def load_titan_config_script(path: str | Path, overrides: Optional[dict] = None,
                             script_args: tuple[str, ...] | list[str] = (),
                             script_env: Optional[dict[str, str]] = None) -> Plan:
    """The plan of the job TOML a launch script's command names, with the command's ``--section.key``
    overrides and torchrun's cluster (:func:`primus_launch.adapters.titan_job_argv.plan_from_job_command`).
    A relative TOML path is relative to where the script runs (torchtitan's scripts run from the
    repository's root: ``./torchtitan/models/flux/train_configs/...``): it is looked for next to the
    script, then in each folder above it.  ``script_env``: the variables the script is started with."""
    from primus_launch.adapters.titan_job_argv import plan_from_job_command
    from primus_launch.adapters.torchrun_argv import cluster_overrides

    p = Path(path)
    argv, _, unstated = _config_script_argv(p, tuple(script_args), start_env=script_env)
    said = comment_gpu(read_recipe_text(p), cluster_overrides(overrides))
    plan = plan_from_job_command(argv, {**(overrides or {}), **said})
    notes = _count_notes(unstated, cluster_overrides(overrides))
    if said:
        notes.append(_COMMENT_GPU_NOTE.format(gpu=said["gpu"]))
    if notes and plan.source is not None:
        plan.source.notes.extend(n for n in notes if n not in plan.source.notes)
    if script_args and plan.source is not None:
        plan.source.script_args = list(script_args)
    return plan


def _config_script_argv(p: Path, args: tuple[str, ...] = (), text: Optional[str] = None,
                        start_env: Optional[dict[str, str]] = None) -> tuple[list[str], Path, list[tuple[int, str]]]:
    """The script's command with its job TOML's path resolved (:func:`load_titan_config_script`), that
    path, and the notes of the launcher counts the command leaves unstated (:func:`script_launch`)."""
    from primus_launch.adapters.titan_job_argv import config_index, config_path

    # bash's $PWD: the folder the script runs from, read as the script's own (the rule for relative paths below;
    # dgxc-benchmarking's launch.sh: LLMB_REPO=$PWD, --job.config_file=$LLMB_REPO/deepseek_v3_671b.toml)
    start_env = {"PWD": str(p.resolve().parent), **(start_env or {})}
    argv, unstated = script_launch(read_recipe_text(p) if text is None else text, str(p), args, start_env)
    i = config_index(argv)
    if i is None:
        raise UserError(f"{p}: no command with --job.config_file found (expected torchrun ... --job.config_file "
                        "TOML)")
    cfg, j = config_path(argv, i)
    if not cfg.strip():
        raise UserError(f"{p}: --job.config_file has no value (an unset variable?)")
    hit = find_from_run_root(cfg, p)
    if hit is None:
        raise UserError(f"--job.config_file={cfg!r}: no such file next to {p} or in a folder above it (the path is "
                        "relative to where the script runs)")
    argv[j] = f"{argv[j].split('=', 1)[0]}={hit}" if j == i else str(hit)
    return argv, hit, unstated


def check_config_script_tunable(path: str | Path, out: Optional[str | Path], tuned: Optional[Plan] = None,
                                original: Optional[Plan] = None) -> None:
    """For a tune of a script that runs a job TOML (:func:`load_titan_config_script`): its tuned recipe
    is that TOML (``NAME.tuned.toml``, run with the script's ``CONFIG_FILE`` pointed at it), so ``--out``
    must name a ``.toml``; and a ``--section.key`` the script's own command passes wins over the TOML in
    torchtitan, so a tuned value for such a key would not be run: with ``tuned`` (and the ``original``
    plan) such keys are refused by name (tune the command itself: ``--tune -- torchrun ...``)."""
    import tomllib

    from primus_launch.adapters.titan_job_argv import job_overrides, override_path, text_with_overrides
    from primus_launch.adapters.torchtitan import job_assignments, job_get

    p = Path(path)
    if out is not None and Path(out).suffix.lower() != ".toml":
        raise UserError(f"--out={str(out)!r}: the tuned recipe of {p.name} is its job TOML; give a .toml path (and "
                        "run the script with CONFIG_FILE pointed at it)")
    if tuned is None or original is None:
        return
    argv, toml, _ = _config_script_argv(p)
    passed = {".".join(override_path(sec, key)): " ".join(argv[a:b + 1]) for a, b, sec, key, _ in job_overrides(argv)}
    if not passed:
        return
    ovs = job_overrides(argv)  # the job as the script runs it: the TOML under its command's overrides
    job = tomllib.loads(text_with_overrides(read_recipe_text(toml, "--job.config_file"), ovs, str(toml)))
    changed = [k for k, _ in job_assignments(tuned, lambda k, d=None: job_get(job, k, d), original)]
    hit = [passed[k] for k in changed if k in passed]
    if hit:
        raise UserError(f"{p}: its command passes {', '.join(hit)}, which wins over the tuned TOML's value; tune the "
                        "command instead (primus-launch --tune -- torchrun ...) or drop it from the script")


def command_lines(text: str, args: tuple[str, ...] = (), start_env: Optional[dict[str, str]] = None
                  ) -> list[tuple[list[str], dict[str, str]]]:
    """Each command line of a script (logical lines; assignments read as :func:`_scan` does): its
    expanded words and the variables assigned above it (``NAME=value`` / ``export NAME=value``) or given in
    ``start_env`` (the variables the script is started with); ``args``: the script's own arguments, where a
    line says ``"$@"`` / ``$*``."""
    env: dict[str, Assign] = {k: Assign(v, -1, -1) for k, v in (start_env or {}).items()}
    out: list[tuple[list[str], dict[str, str]]] = []
    for a, b in _logical_lines(text):
        m = _ASSIGN.match(text[a:b])
        if m and " " not in m.group(2).strip().split("#")[0].strip().strip("\"'"):
            env[m.group(1)] = Assign(_expand(_unquote(m.group(2).split(" #")[0].rstrip()), env), a, a)
            continue
        words = [t.text for t in _tokens(text, a, b, env, args)]
        if words:
            out.append((words, {k: v.value for k, v in env.items()}))
    return out


def launch_exports(text: str) -> dict[str, str]:
    """The variables the script hands its launch: ``export NAME=value`` lines and the ``NAME=value`` words before a
    command (the shell puts both in the command's environment; a plain ``NAME=value`` line stays the shell's)."""
    env: dict[str, Assign] = {}
    out: dict[str, str] = {}
    for a, b in _logical_lines(text):
        line = text[a:b]
        m = _ASSIGN.match(line)
        if m and " " not in m.group(2).strip().split("#")[0].strip().strip("\"'"):
            val = _expand(_unquote(m.group(2).split(" #")[0].rstrip()), env)
            env[m.group(1)] = Assign(val, a, a)
            if line.lstrip().startswith("export "):
                out[m.group(1)] = val
            continue
        # a value with a blank (`export A="x y"`, `A=1 B=2`): the words -- exported, or a command's prefix when a
        # command follows them; NAME=value words alone on their line are the shell's
        words = [t.text for t in _tokens(text, a, b, env)]
        exported = words[:1] == ["export"]
        lead = words[1:] if exported else words
        n = next((i for i, w in enumerate(lead) if not ENV_WORD.match(w)), len(lead))
        if exported or n < len(lead):
            out.update(w.partition("=")[::2] for w in lead[:n])
    return out


def script_argv(text: str, path: str) -> list[str]:
    """The launch line of the script, expanded."""
    return script_launch(text, path)[0]


def script_launch(text: str, path: str, args: tuple[str, ...] = (), start_env: Optional[dict[str, str]] = None
                  ) -> tuple[list[str], list[tuple[int, str]]]:
    """(:func:`script_argv`, the notes of the launcher counts it leaves unstated: (0 nodes / 1 processes
    per node, note), :func:`_fill_unstated`); ``args``: the script's own arguments (its ``"$@"``);
    ``start_env``: the variables the script is started with."""
    toks, _, notes = _scan(text, path, args, start_env)
    return [t.text for t in toks], notes


def _count_notes(notes: list[tuple[int, str]], overrides: dict) -> list[str]:
    """The unstated-count notes whose count the cluster overrides do not set."""
    return [n for k, n in notes if ("num_nodes", "gpus_per_node")[k] not in overrides]


def load_titan_script(path: str | Path, overrides: Optional[dict] = None,
                      script_args: tuple[str, ...] | list[str] = (), script_env: Optional[dict[str, str]] = None
                      ) -> Plan:
    """Read the torchtitan launch line of a script (cluster from its torchrun options, ``overrides`` win);
    ``script_args``: the arguments the script is called with (where its command says ``"$@"``); ``script_env``:
    the variables it is started with."""
    p = Path(path)
    return _plan_from_launch_text(read_recipe_text(p), p, overrides, tuple(script_args), script_env)


def run_train_call(argv: list[str]) -> bool:
    """Whether a command calls torchtitan's ``run_train.sh`` with its environment written before it
    (``MODULE=llama3 CONFIG=llama3_8b ./run_train.sh [--section.key value ...]``, torchtitan's README)."""
    i = 1 if argv and Path(argv[0]).name == "env" else 0
    names = []
    while i < len(argv) and ENV_WORD.match(argv[i]):
        names.append(argv[i].split("=", 1)[0])
        i += 1
    if i < len(argv) and argv[i] in ("bash", "sh"):
        i += 1
    if i >= len(argv) or Path(argv[i]).name != "run_train.sh" or not {"MODULE", "CONFIG", "CONFIG_FILE"} & set(names):
        return False  # run_train.sh is a common name: torchtitan's takes MODULE / CONFIG (CONFIG_FILE up to 0.2)
    script = Path(argv[i])
    try:  # where the script is here, it must be torchtitan's (it runs torchtitan.train)
        return not script.is_file() or "torchtitan" in script.read_text(errors="replace")
    except OSError:
        return True


def plan_from_run_train_call(argv: list[str], overrides: Optional[dict] = None,
                             script_env: Optional[dict[str, str]] = None) -> Plan:
    """The plan of a :func:`run_train_call` command: the command run_train.sh runs with that environment and
    its arguments (as a script holding that call is read); a job TOML is looked for from the current folder.
    ``script_env``: the variables the command starts with besides its own prefixes (which win)."""
    import shlex

    words = argv[1:] if Path(argv[0]).name == "env" else list(argv)
    text, here = shlex.join(words), Path.cwd() / "command"
    if _run_train_kind(text) == "job":
        from primus_launch.adapters.titan_job_argv import plan_from_job_command
        from primus_launch.adapters.torchrun_argv import cluster_overrides

        job, toml, unstated = _config_script_argv(here, (), text, script_env)
        plan = plan_from_job_command(job, overrides)
        plan.source.notes.extend(_count_notes(unstated, cluster_overrides(overrides)))
    else:
        plan = _plan_from_launch_text(text, here, overrides, (), script_env)
    return plan.model_copy(update={"source": plan.source.model_copy(update={"format": "torchtitan-command-call"})})


_COMMENT_GPU_NOTE = ("cluster gpu={gpu}: from the script's '# primus-launch:' comment (the node and GPU counts are the "
                     "launch line's; give --gpu for another)")


def comment_gpu(text: str, overrides: dict) -> dict[str, str]:
    """``{"gpu": G}`` from the script's ``# primus-launch: gpu=G`` comment where the cluster flags give no GPU, else {}:
    torchrun states the counts, never the GPU, which a Megatron script states in that comment (user16: a torchtitan
    launch script's comment was dropped for "gpu=h100-sxm: the default")."""
    from primus_launch.adapters.megatron_script import comment_config

    gpu = comment_config(text).get("gpu") if overrides.get("gpu") is None else None
    return {"gpu": gpu} if gpu else {}


def _plan_from_launch_text(text: str, p: Path, overrides: Optional[dict], script_args: tuple[str, ...],
                           script_env: Optional[dict[str, str]] = None) -> Plan:
    """:func:`load_titan_script` of a script's ``text`` (``p``: its path)."""
    from primus_launch.adapters.torchrun_argv import cluster_overrides, default_gpu_note, launch_cluster
    from primus_launch.adapters.torchtitan_argv import plan_from_launch
    from primus_launch.plan import Source

    argv, unstated = script_launch(text, str(p), tuple(script_args), script_env)
    ov = cluster_overrides(overrides)
    said = comment_gpu(text, ov)
    cluster = launch_cluster(argv, {**ov, **said})
    plan = plan_from_launch(argv, cluster)
    src = plan.source.model_copy(update={"path": str(p), "format": "torchtitan-script"}) if plan.source else \
        Source(framework="torchtitan", path=str(p), format="torchtitan-script")
    src.notes.extend(_count_notes(unstated, ov))
    from primus_launch.adapters.launch_env_effects import env_unmodelled

    known = {u.flag for u in src.unmodelled}
    src.unmodelled.extend(u for u in env_unmodelled(launch_exports(text), te=False) if u.flag not in known)
    gpu_note = default_gpu_note(cluster, {**ov, **said})
    if gpu_note is not None:
        src.notes.append(gpu_note)
    if said:
        src.notes.append(_COMMENT_GPU_NOTE.format(gpu=said["gpu"]))
    if script_args:
        src.script_args = list(script_args)
    m = re.search(r"\bCOMM_MODE=[\"']?(fake_backend|local_tensor)", text) if _run_train_kind(text) else None
    if m:
        src.notes.append(f"COMM_MODE={m.group(1)}: run_train.sh checks the configuration in one process standing in "
                         f"for its NGPU ranks (one step); projected as the {plan.world_size}-GPU run it checks")
    return plan.model_copy(update={"source": src})


def _q(word: str) -> str:
    return word if re.fullmatch(r"[A-Za-z0-9_.,:=/+\-]+", word) else shlex.quote(word)


def render_titan_script(plan: Plan, text: str, path: str) -> str:
    """The script with only the tokens the tuned launch line changes edited."""
    from primus_launch.adapters.torchtitan_argv import render_launch

    toks, env, _ = _scan(text, path)
    old = [t.text for t in toks]
    new = _as_written(old, render_launch(plan, old))
    edits: list[tuple[int, int, str]] = []
    sm = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        if op == "replace" and i2 - i1 == j2 - j1:
            for k in range(i2 - i1):
                edits.append(_token_edit(toks[i1 + k], new[j1 + k], env, path))
            continue
        if op in ("delete", "replace"):
            edits.append((toks[i1].start, toks[i2 - 1].end, " ".join(_q(w) for w in new[j1:j2])))
            continue
        # insert after the previous token (or before the first)
        prev = toks[i1 - 1] if i1 > 0 else None
        at = (prev.after if prev.after is not None else prev.end) if prev is not None else toks[0].start
        words = " ".join(_q(w) for w in new[j1:j2])
        edits.append((at, at, (" " + words) if i1 > 0 else (words + " ")))
    from primus_launch.adapters.megatron_script import comment_config, comment_key_span

    from primus_launch.adapters.sbatch_edit import sbatch_count_edits
    from primus_launch.adapters.torchrun_argv import launch_cluster

    try:
        was = (lambda c: (c.num_nodes, c.gpus_per_node))(launch_cluster(old, {"gpu": plan.cluster.gpu}))
    except (UserError, PlanError):   # counts decided on the node (--nproc-per-node gpu): no header edit
        was = (plan.cluster.num_nodes, plan.cluster.gpus_per_node)
    if was != (plan.cluster.num_nodes, plan.cluster.gpus_per_node):
        edits += sbatch_count_edits(text, plan.cluster.num_nodes, plan.cluster.gpus_per_node)  # the header follows
    span = comment_key_span(text, "gpu")  # the GPU the script's comment states follows a tune onto another GPU
    if span is not None and comment_config(text).get("gpu") != plan.cluster.gpu:
        edits.append((span[0], span[1], plan.cluster.gpu))
    out = text
    for a, b, s in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[:a] + s + out[b:]
    return out


def _as_written(old: list[str], new: list[str]) -> list[str]:
    """``new`` with an option the old line wrote as one ``--opt=value`` word (``--nproc_per_node=${NGPU}``)
    and the launcher writer wrote as two (``--nproc-per-node 4``: torchrun accepts both spellings and forms,
    torch 2.x ``torch/distributed/run.py`` ``--nproc-per-node`` / ``--nproc_per_node``) in the old word's
    spelling and form, so that the word's own edit (the variable's assignment) carries the change."""
    def norm(flag: str) -> str:
        return flag.replace("_", "-")

    out = list(new)
    for w in old:
        flag, eq, _ = w.partition("=")
        if not eq or not flag.startswith("--") or w in out:
            continue
        for j in range(len(out) - 1):
            if norm(out[j]) == norm(flag) and not out[j + 1].startswith("-"):
                out[j:j + 2] = [f"{flag}={out[j + 1]}"]
                break
    return out


def _token_edit(tok: Tok, new: str, env: dict[str, Assign], path: str) -> tuple[int, int, str]:
    if tok.literal:
        return tok.start, tok.end, _q(new)
    if tok.opt_ref is not None and new.startswith(tok.opt_ref[0]):
        # --opt=${VAR}: the value is VAR's -- edit its assignment (or default), the word stays as written
        return _token_edit(Tok(tok.text, tok.start, tok.end, False, (tok.opt_ref[1], tok.opt_ref[2])),
                           new[len(tok.opt_ref[0]):], env, path)
    if tok.ref is not None:
        name, dflt = tok.ref
        if name in env and env[name].start >= 0:
            a = env[name]
            return a.start, a.end, new
        if dflt is not None:
            return dflt[0], dflt[1], new
    raise UserError(f"{path}: cannot edit {tok.text!r} (it is computed in the script); change it to {new!r} by hand")


def write_titan_script(plan: Plan, original: str | Path, out: str | Path) -> Path:
    """Render ``plan`` over the script at ``original`` and write it atomically (never over it; the
    executable bit is kept)."""
    src = Path(original)
    return write_beside_original(out, render_titan_script(plan, read_recipe_text(src), str(src)), src)


__all__ = ["is_titan_script", "load_titan_script", "render_titan_script", "write_titan_script", "script_argv",
           "Cluster"]
