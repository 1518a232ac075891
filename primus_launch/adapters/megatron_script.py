"""Megatron-LM launch commands (a bash script or an argv list) <-> Megatron argument values.

Finds the training command (``torchrun ... pretrain_gpt.py --num-layers ...``, ``python -m
torch.distributed.run ...``, ``python pretrain_gpt.py ...``), splits launcher and Megatron
arguments, and edits values where they are written (see :mod:`megatron_bash` for provenance):
in place, in the assignment of the variable a value came from, or (when that variable also feeds
other flags) at the use site.  Boolean flags are added next to a flag of the same argument group,
copying its line's indentation and ``\\`` continuation, and removed with their line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import primus_launch.adapters.megatron_flags as megatron_flags
from primus_launch.adapters.launcher_counts import COUNT_WORDS, is_node_gpu_query, launcher_count, slurm_option
from primus_launch.adapters.megatron_args import BY_DEST, BY_FLAG, FLAGS, Flag, convert
from primus_launch.adapters.megatron_bash import (PC, VARYING, Command, Ref, ShellState, Token, sbatch_allocation, slurm_env,
                                                 unstated_why)
from primus_launch.errors import UserError
from primus_launch.plan import GPU_NAMES, PlanError, UnmodelledFlag
from primus_launch.plan.sections import normalize_gpu

_COMMENT = re.compile(r"^[ \t]*#[ \t]*primus-launch:[ \t]*(.*?)[ \t]*$", re.M)
# a negative number is a value, not a flag; so are -inf / -nan (argparse would take them for an option and stop
# with "expected one argument": a value the recipe meant, refused by the flag's type instead of read as unset)
_NUMBER = re.compile(r"^-(\d|\.\d|(inf|infinity|nan)$)", re.I)
_ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_BLANKISH = re.compile(r'^(?:[ \t"\'=]|\\\n)*$')
_LINE_TAIL = re.compile(r"^([ \t]*\\)?[ \t]*(#.*)?$")


@dataclass
class Occ:
    """One occurrence of a flag on the command line."""

    flag: str
    spec: Flag | None
    flag_tok: Token
    vals: list[Token]
    whole: Token  # the full argument token (differs from flag_tok for --flag=value)


@dataclass
class Edit:
    start: int
    end: int
    text: str


def is_flag(text: str) -> bool:
    return text.startswith("-") and not _NUMBER.match(text) and len(text) > 1


def _nvals(t: str) -> str:
    """How many values the flag ``t`` takes: "0", "1", "+" (all following non-flags) or a count,
    from the modelled specs, else Megatron-LM's flag table; unknown flags take all following
    non-flag tokens."""
    spec = BY_FLAG.get(t)
    if spec is not None:
        return "0" if spec.kind in ("true", "false") else "+" if spec.kind == "list" else "1"
    f = megatron_flags.by_option().get(t)
    if f is None:
        return "+"
    if not f.takes_value:
        return "0"
    return f.nargs if f.nargs in ("+", "*") or f.nargs.isdigit() else "1"


# dashes a word processor or a web page puts where "--" was typed (hyphen, non-breaking hyphen, figure dash,
# en dash, em dash, horizontal bar, minus sign, small / full-width hyphen-minus)
_LOOKALIKE_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"
_LOOKALIKE_FLAG = re.compile(f"[{_LOOKALIKE_DASHES}][-{_LOOKALIKE_DASHES}]?[A-Za-z][A-Za-z0-9_-]*(=.*)?", re.S)


def lookalike_flag_problem(text: str) -> PlanError | None:
    """A word that reads as a flag but starts with a Unicode dash (``\u2014bf16``, ``\u2013-recompute-activations``,
    pasted from a document): argparse sees a positional argument, Megatron-LM exits with "unrecognized
    arguments", and a reader that skips it would project the run without the flag."""
    if not _LOOKALIKE_FLAG.fullmatch(text):
        return None
    import unicodedata

    fixed = "--" + text.lstrip("-" + _LOOKALIKE_DASHES).split("=")[0]
    return PlanError("argument", text, f"starts with U+{ord(text[0]):04X} {unicodedata.name(text[0], 'DASH')}, not '--' "
                                       f"(Megatron-LM refuses it as an unrecognized argument); write {fixed}")


def parse_occurrences(tokens: list[Token]) -> list[Occ]:
    """Split arguments into flag occurrences (each flag takes as many values as argparse gives it); a
    word that looks like a flag behind a Unicode dash is refused (:func:`lookalike_flag_problem`)."""
    for tok in tokens:
        problem = lookalike_flag_problem(tok.text)
        if problem is not None:
            raise problem
    out: list[Occ] = []
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        t = tok.text
        if not is_flag(t):
            out.append(Occ("", None, tok, [], tok))
            i += 1
            continue
        if t.startswith("--") and "=" in t:
            k = t.index("=")
            name = t[:k]
            out.append(Occ(name, BY_FLAG.get(name), tok.sub(0, k), [tok.sub(k + 1)], tok))
            i += 1
            continue
        spec = BY_FLAG.get(t)
        nv = _nvals(t)
        if nv == "0":
            out.append(Occ(t, spec, tok, [], tok))
            i += 1
            continue
        j = i + 1
        limit = n if nv in ("+", "*") else min(n, i + 1 + int(nv))
        while j < limit and not is_flag(tokens[j].text):
            j += 1
        out.append(Occ(t, spec, tok, tokens[i + 1:j], tok))
        i = j
    return out


def slurm_occurrences(occs: list[Occ]) -> list[Occ]:
    """``srun``'s options as :func:`parse_occurrences` split them, with getopt's attached short forms
    (:func:`launcher_counts.slurm_option`: ``-N4``, ``-n32``) split into option and value; a word such an
    option took as its value (``-N4 8``) is a word of its own again."""
    out: list[Occ] = []
    for o in occs:
        key, eq, _ = slurm_option(o.flag) if o.flag.startswith("-") and not o.flag.startswith("--") else ("", "", "")
        if not eq:
            out.append(o)
            continue
        out.append(Occ(key, None, o.flag_tok.sub(0, len(key)), [o.flag_tok.sub(len(key))], o.whole))
        out += [Occ("", None, v, [], v) for v in o.vals]
    return out


_SWITCH_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0", "none", "null"})


def stray_word_problem(occs: list[Occ]) -> PlanError | None:
    """The refusal of the first word of a Megatron-LM command that no flag takes, else None.  Megatron-LM's parser
    has no positional arguments (``megatron/training/arguments.py``: options only, ``parser.parse_args()``), so a
    word after a switch (``--sequence-parallel false``), a second value (``--lr 3e-4 1e-4``) or a lone blank (a
    ``\\`` followed by a space before the line's end: bash passes " " and ends the command there) or a flag and its
    value quoted into one word (``"--num-layers 32"``: argparse takes a word with a blank for a positional one) exits
    with "unrecognized arguments"; a reader that skipped it projected the switch on.  Words a command substitution
    gives (not run) and empty words are left alone."""
    prev: Occ | None = None
    for o in occs:
        if o.flag and any(c.isspace() for c in o.flag) and not o.whole.opaque:
            fix = o.flag.split()[0] + ("=" + " ".join(o.flag.split()[1:]) if len(o.flag.split()) > 1 else "")
            return PlanError("argument", o.flag, "one word holding a blank (a quoted \"--flag value\"): Megatron-LM's "
                             "parser reads it as a positional argument and refuses it ('unrecognized arguments'); "
                             f"unquote it or write {fix}")
        spec = (o.spec or megatron_flags.by_option().get(o.flag)) if o.flag else None
        if spec is not None and spec.kind in ("true", "false", "boolopt", "const") and o.vals:
            word = o.vals[0].text  # --bf16=true: argparse exits with "ignored explicit argument 'true'"
            keep = "; leave the flag out to keep it off" if word.lower() in _SWITCH_WORDS else ""
            return PlanError(o.flag, word, f"no value (a switch: Megatron-LM's parser refuses --flag=VALUE on it, "
                             f"'ignored explicit argument'); write {o.flag} alone{keep}")
        if o.flag or o.whole.opaque or not o.whole.text:
            prev = o if o.flag else prev
            continue
        word = o.whole.text
        if not word.strip():
            return PlanError("argument", word, "a blank word, which Megatron-LM's parser refuses ('unrecognized "
                             "arguments'): a '\\' followed by a space or tab at a line's end passes the blank and "
                             "ends the command there (the lines after it are not part of it); delete the blank")
        if prev is None:
            return PlanError("argument", word, "a word before any flag: Megatron-LM's parser takes no positional "
                             "arguments ('unrecognized arguments')")
        spec = prev.spec or megatron_flags.by_option().get(prev.flag)
        switch = spec is not None and spec.kind in ("true", "false", "boolopt", "const")
        if switch:
            keep = "leave the flag out" + (" to keep it off" if word.lower() in _SWITCH_WORDS else "")
            return PlanError(prev.flag, word, f"no value (a switch: Megatron-LM's parser refuses {word!r}, "
                             f"'unrecognized arguments'); {keep}")
        return PlanError(prev.flag, " ".join(v.text for v in prev.vals) + " " + word,
                         f"{len(prev.vals)} value{'s' if len(prev.vals) != 1 else ''}: Megatron-LM's parser refuses the "
                         f"extra word {word!r} ('unrecognized arguments'; a value holding blanks stays one word only "
                         "quoted, through a quoted expansion too: \"${ARGS[@]}\")")
    return None


def torchrun_occurrences(occs: list[Occ]) -> list[Occ]:
    """torchrun's options as :func:`parse_occurrences` split them, each abbreviation under the option it stands for
    (torchrun's parser takes unique prefixes: ``--nproc-per 8`` is ``--nproc-per-node 8``; an ambiguous one is
    refused: :func:`torchrun_argv.resolve_option`); the words stay as written."""
    from dataclasses import replace

    from primus_launch.adapters.torchrun_argv import resolve_option

    out: list[Occ] = []
    for o in occs:
        full = resolve_option(o.flag) if o.flag.startswith("--") else None
        out.append(replace(o, flag=full) if full is not None and full != o.flag else o)
    return out


def _known(o: Occ) -> str | None:
    """The canonical option string of a Megatron-LM flag occurrence, None for a word or an unknown flag."""
    return o.spec.flag if o.spec is not None else getattr(megatron_flags.by_option().get(o.flag), "flag", None)


def choice_notes(occs: list[Occ]) -> list[str]:
    """A note per flag whose value is outside its choices in the three Megatron-LM versions (:mod:`megatron_choices`)."""
    from primus_launch.adapters.megatron_choices import choice_note

    notes = [choice_note(k, [v.text for v in o.vals if not v.opaque]) for o in occs for k in [_known(o)] if k]
    return list(dict.fromkeys(n for n in notes if n))


def repeated_notes(occs: list[Occ], launcher: bool = False) -> list[str]:
    """A note per flag of ``occs`` given more than once with different values (:mod:`repeated`: argparse keeps the
    last, which is what is read); ``launcher``: torchrun options, whose ``_`` and ``-`` spellings are one option
    (``--nproc_per_node`` / ``--nproc-per-node``); Megatron-LM flags are keyed by their canonical option string."""
    from primus_launch.adapters.repeated import repeated_notes as notes

    pairs = [(key, " ".join(v.text for v in o.vals) if o.vals else o.flag) for o in occs if o.flag
             for key in [o.flag.replace("_", "-") if launcher else _known(o)] if key is not None]
    return notes(pairs, "torchrun" if launcher else "Megatron-LM")


#: names the reader takes from a YAML / Bridge / Primus config (TransformerConfig fields) that no Megatron-LM parser
#: of core_r0.16.0 / main / dev takes on a command line (it exits 'unrecognized arguments': allow_abbrev=False)
_YAML_ONLY = {
    "--virtual-pipeline-model-parallel-size": "not a Megatron-LM command-line flag since 2021 (Megatron-LM dcef906978; "
    "its parser exits 'unrecognized arguments'); give --num-virtual-stages-per-pipeline-rank N (or "
    "--num-layers-per-virtual-pipeline-stage)",
}


def args_of(occs: list[Occ]) -> dict[str, Any]:
    """``dest -> value`` for every flag (argparse semantics: the last occurrence wins): modelled flags
    converted, other Megatron flags as text (switches as booleans of their dest), unknown flags
    under their ``--name``; a value misspelling one of a flag's choices is refused (:mod:`megatron_choices`)."""
    from primus_launch.adapters.megatron_choices import choice_problem
    from primus_launch.adapters.megatron_forks import fork_problem

    fork = fork_problem({o.flag: " ".join(v.text for v in o.vals) if o.vals else True
                         for o in occs if o.flag and o.spec is None and _known(o) is None})
    if fork is not None:  # a fork's run (Megatron-DeepSpeed, MegaBlocks): its reason before any value of its flags
        raise fork
    a: dict[str, Any] = {}
    for o in occs:
        s = o.spec
        if o.flag in _YAML_ONLY:  # a TransformerConfig name copied onto a command line
            given = " ".join(v.text for v in o.vals) if o.vals else True
            raise PlanError(o.flag, int(given) if isinstance(given, str) and given.isdigit() else given,
                            _YAML_ONLY[o.flag])
        known = _known(o)
        problem = choice_problem(known, [v.text for v in o.vals if not v.opaque]) if known else None
        if problem is not None:  # --lr-decay-style Cosine: Megatron-LM's parser exits with 'invalid choice'
            raise problem
        if s is None:
            if not o.flag:
                continue
            f = megatron_flags.by_option().get(o.flag)
            if f is None:
                a[o.flag] = " ".join(v.text for v in o.vals) if o.vals else True
            elif f.kind == "true":
                a[f.dest] = True
            elif f.kind == "false":
                a[f.dest] = False
            elif f.kind == "boolopt":
                a[f.dest] = not o.flag.startswith("--no-")
            elif f.kind == "const":
                a[f.dest] = True
            elif f.nargs in ("+", "*") or (f.nargs.isdigit() and int(f.nargs) > 1):
                a[f.dest] = [v.text for v in o.vals]
            else:
                a[f.dest] = o.vals[0].text if o.vals else None
            continue
        if s.kind == "true":
            a[s.dest] = True
        elif s.kind == "false":
            a[s.dest] = False
        elif s.kind == "list":
            a[s.dest] = convert(s, [v.text for v in o.vals])
        else:
            if not o.vals:
                if s.kind in ("int", "float"):
                    raise PlanError(s.flag, None, "has no value (an unset variable or positional parameter?): "
                                                  "pass the script's arguments after the recipe")
                a[s.dest] = None  # e.g. --vocab-file $3 with no script arguments: as if absent
                continue
            v = o.vals[0]
            if v.opaque and s.kind in ("int", "float"):
                varying = re.search(r"\$\{?(" + "|".join(sorted(VARYING - {"$"})) + r")\b|\$\$", v.text)
                if varying:  # bash sets it to a value of the run: no one number to project
                    raise PlanError(s.flag, v.text, f"reads {varying.group()}, a different value on each run (bash "
                                                    "sets it); set it to a literal or a variable")
                if "$((" in v.text and "$(" not in v.text.replace("$((", ""):
                    raise PlanError(s.flag, v.text, "an arithmetic expansion the reader cannot evaluate (a division by zero, "
                                                    "a ?: or a negative power, a number bash refuses -- 08, 2#3: 'value "
                                                    "too great for base', bash stops the script there -- or a variable "
                                                    "holding a command's output or $RANDOM); set it to a literal or a "
                                                    "variable")
                if v.text.startswith("${") and "$(" not in v.text:  # ${X/a/b}, ${X@Q}: not evaluated here
                    raise PlanError(s.flag, v.text, "a parameter expansion the reader does not evaluate; set it to a "
                                                    "literal or a variable")
                raise PlanError(s.flag, v.text, "comes from a command substitution; set it to a literal or a variable")
            if s.kind in ("int", "float") and v.text.strip().strip("'\"").lower() in ("none", "null"):
                # `--global-batch-size None` (a script's GBS=None): Megatron-LM's parser (type=int / float) exits
                # with "invalid int value: 'None'"; convert() reads the word as unset (a YAML null), which
                # projected the flag's default without a word
                raise PlanError(s.flag, v.text, ("an integer" if s.kind == "int" else "a number") + ": Megatron-LM's "
                                "parser takes no None / null on its command line ('invalid "
                                f"{'int' if s.kind == 'int' else 'float'} value'); leave the flag out for its default")
            a[s.dest] = convert(s, v.text)
    return a


def comment_config(text: str) -> dict[str, str]:
    """``# primus-launch: gpu=h100-sxm nodes=4 gpus_per_node=8`` -> dict (first such line)."""
    m = _COMMENT.search(text)
    if not m:
        return {}
    cfg = {}
    for item in m.group(1).split():
        if "=" in item:
            k, v = item.split("=", 1)
            cfg[k.strip().replace("-", "_")] = v.strip()
    gpu = cfg.get("gpu")
    if gpu is not None and normalize_gpu(gpu) in GPU_NAMES:
        gpu = cfg["gpu"] = normalize_gpu(gpu)
    if gpu is not None and gpu not in GPU_NAMES:
        # a GPU a --gpu-file (or a wrapper's [hardware] file) added is as good as a built-in one: a tune on it
        # writes its name here, and reading the tuned recipe back must take it
        from primus_launch.projection.hardware.gpus import known_gpus

        if gpu not in known_gpus():
            raise PlanError("gpu", gpu, "one of " + ", ".join(GPU_NAMES) + " or a GPU a --gpu-file adds (in the "
                            "'# primus-launch:' comment)")
    return cfg


def comment_key_span(text: str, key: str | None) -> tuple[int, int] | None:
    """Span of ``key``'s value in the ``# primus-launch:`` comment (key None: the comment line)."""
    m = _COMMENT.search(text)
    if not m:
        return None
    if key is None:
        return m.start(), m.end()
    g = re.search(rf"\b{key}=(\S+)", m.group(1))
    if not g:
        return None
    base = m.start(1)
    return base + g.start(1), base + g.end(1)


_RELATED = {  # where a new flag goes when its own group is absent
    "recompute": ("recompute", "batch", "precision"), "precision": ("precision", "batch"),
    "ddp": ("ddp", "parallel"), "parallel": ("parallel", "ddp"), "moe": ("moe", "model"),
    "mla": ("mla", "moe", "model"), "optim": ("optim", "batch"), "batch": ("batch", "precision"),
}
_LAUNCHERS = ("torchrun",)
#: why torchrun --standalone runs one node (torch.distributed.run: the rendezvous of --standalone is a c10d store at
#: localhost:0 of each node, so the nodes never meet: each waits for the others until the join timeout)
STANDALONE_WHY = ("torchrun's --standalone rendezvous is local to each node (c10d at localhost:0), so the nodes "
                  "never meet; drop --standalone and give --rdzv-endpoint HOST:PORT (or --master-addr) for several")
#: torchrun --nproc-per-node words that mean "one process per GPU of the node" (torch.distributed.run
#: determine_local_world_size, torch 2.13: gpu -> torch.cuda.device_count(); auto -> torch.accelerator.device_count()
#: where an accelerator is available)
NODE_GPU_WORDS = ("gpu", "auto")
_SRUN_TASKS = ("-n", "--ntasks")  # srun's total task count (srun(1): with -N, the tasks spread over the nodes)
_PY_LAUNCH_MODULES = ("torch.distributed.run", "torch.distributed.launch")


@dataclass
class CommandRecipe:
    """The training command of a script (or argv) with everything needed to edit it."""

    text: str
    path: str
    tokens: list[Token]
    refs: list[Ref]
    script_index: int  # index of the training .py in tokens
    launcher: list[Occ]  # torchrun options
    occs: list[Occ]  # Megatron options
    args: dict[str, Any] = field(default_factory=dict)
    joiner: str = " "  # between a new flag and its value
    notes: list[str] = field(default_factory=list)  # constructs skipped while reading
    # environment of the training command as the script sets it (exports, VAR=value / env prefixes)
    env: dict[str, list[PC]] = field(default_factory=dict)
    allocation: dict[str, int] = field(default_factory=dict)  # the #SBATCH header's (sbatch_allocation)
    # the #SBATCH directives whose count is not a number (sbatch_header): field -> the directive as written
    unread_allocation: dict[str, str] = field(default_factory=dict)
    # files the script downloads (wget -O FILE URL, curl -o FILE URL): FILE as written -> URL (downloaded_files)
    downloads: dict[str, str] = field(default_factory=dict)
    # files the script sources or runs: path -> ("source" | "bash", text) (megatron_bash.ShellState.files)
    files: dict[str, tuple[str, str]] = field(default_factory=dict)
    # defaults a script this one runs takes: (file, character) -> (variable, offset of the `bash` command here)
    # (megatron_bash.ShellState.run_defaults)
    run_defaults: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    # settings the reader cannot see (command_output_words: a command substitution's words among the arguments)
    unmodelled: list[UnmodelledFlag] = field(default_factory=list)

    def env_values(self) -> dict[str, str]:
        """The launch environment the script sets for the training command, as text."""
        return {k: "".join(p.ch for p in v) for k, v in self.env.items()}

    @property
    def program(self) -> str | None:
        """The training program (``pretrain_gpt.py``, a module after ``-m``), None for bare arguments."""
        return self.tokens[self.script_index].text if self.script_index >= 0 else None

    # ----- launcher
    def launcher_value(self, *names: str) -> Occ | None:
        hit = None
        for o in self.launcher:
            if o.flag in names:
                hit = o
        return hit

    def cluster_flags(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(node-count flag names, processes-per-node flag names) of this command's launcher."""
        rng = self.launcher_range()
        if rng is not None and rng[0] == "srun":
            return ("--nodes", "-N"), ("--ntasks-per-node",)
        return ("--nnodes",), ("--nproc-per-node", "--nproc_per_node")

    def cluster_values(self) -> tuple[int | None, int | None, bool]:
        """(nodes, processes per node, has_launcher) as written (None = launcher default / absent); an
        ``srun`` without ``--nodes`` / ``--ntasks-per-node`` takes them from the job's ``#SBATCH``
        allocation, as srun does inside it.  A count not read (an ``#SBATCH`` placeholder such as
        ``--nodes=<NODES>``, a launcher option whose variable is unset) is None, and said in
        :meth:`unstated_counts`."""
        has = self.launcher_start() is not None
        inherit = self._inherited()
        out: list[int | None] = []
        for k, names in enumerate(self.cluster_flags()):
            o = self.launcher_value(*names)
            if k == 1 and (o is None or not o.vals) and self._srun_tasks() is not None:
                o = self._srun_tasks()  # srun -n / --ntasks: the job's tasks spread over its nodes
            if o is None or not o.vals:
                out.append(inherit[k])
                continue
            txt = o.vals[0].text
            if k == 1 and (self.node_gpu_query(o.vals[0]) is not None or txt.strip() in NODE_GPU_WORDS):
                out.append(None)  # every GPU of the node: the cluster's gpus_per_node (unstated_counts says so)
                continue
            if k == 1 and txt.strip() in ("cpu", "xpu"):  # torch.distributed.run.determine_local_world_size
                raise PlanError(o.flag, txt, "a GPU count: a number, gpu or auto (cpu starts one process per CPU "
                                             "core, xpu one per Intel GPU: not runs this tool models)")
            if o.vals[0].opaque:
                raise PlanError(o.flag, txt, "comes from a command substitution; pass the cluster explicitly")
            # node counts take a range (torchrun 1:4, srun 2-4: the upper bound); a process count does not
            # (torch's determine_local_world_size: int() of it)
            ranges = ":-" if k == 0 else ""
            n = launcher_count(txt, ranges)
            if n is None:  # torchrun refuses 0 nodes / processes, and a range from 0 or with MIN > MAX
                raise PlanError(o.flag, txt, f"{COUNT_WORDS if ranges else 'an integer from 1 to 999,999,999'} "
                                             "(or pass the cluster explicitly)")
            if o.flag in _SRUN_TASKS:
                nodes = out[0] or 1
                if n % nodes:
                    raise PlanError(o.flag, txt, f"a multiple of the node count {nodes} (the same number of processes "
                                                 "on every node), or --ntasks-per-node")
                n //= nodes
            out.append(n)
        nn = self.launcher_value("--nnodes")
        if (out[0] or 1) > 1 and nn is not None and nn.vals and self.launcher_value("--standalone") is not None:
            raise PlanError("--nnodes", nn.vals[0].text, f"1 with --standalone: {STANDALONE_WHY}")
        return out[0], out[1], has

    def node_gpu_query(self, tok: Token) -> str | None:
        """The command substitution that ``tok`` (a launcher count) comes from when it asks the node for its GPU
        count (:func:`launcher_counts.is_node_gpu_query`: ``GPUS_PER_NODE=`python -c "import torch;
        print(torch.cuda.device_count())"```), else None.  An unquoted substitution is split into several words
        (its text, not run, is the value): the words from ``tok`` on are joined until they spell the query, as
        the script writes it directly or through ``eval $run_cmd``."""
        if not tok.opaque:
            return None
        at = next((i for i, t in enumerate(self.tokens) if t is tok), None)
        words = [tok] if at is None else self.tokens[at:at + 16]
        text = ""
        for w in words:
            if not w.opaque:
                break
            text = f"{text} {w.text}" if text else w.text
            if is_node_gpu_query(text):
                return text
        return None

    def _srun_tasks(self) -> Occ | None:
        """``srun``'s total task count option (``-n`` / ``--ntasks``), None under another launcher or without it."""
        rng = self.launcher_range()
        if rng is None or rng[0] != "srun":
            return None
        o = self.launcher_value(*_SRUN_TASKS)
        return o if o is not None and o.vals else None

    def _inherited(self) -> tuple[int | None, int | None]:
        rng = self.launcher_range()
        if rng is None or rng[0] != "srun":
            return None, None
        return self.allocation.get("nodes"), self.allocation.get("ntasks_per_node")

    def unstated_counts(self) -> list[tuple[int, str]]:
        """(0 nodes / 1 processes per node, why) for each count :meth:`cluster_values` leaves unread where
        the recipe means to state it: an ``#SBATCH`` count srun or the SLURM_* variables would pass on that
        is no number (:func:`megatron_bash.sbatch_header`), a launcher option whose value is empty."""
        rng = self.launcher_range()
        srun = rng is not None and rng[0] == "srun"
        sources = (("nodes",), ("ntasks_per_node",) if srun else ("ntasks_per_node", "gpus_per_node"))
        inherit = self._inherited()
        why: list[tuple[int, str]] = []
        for k, names in enumerate(self.cluster_flags()):
            o = self.launcher_value(*names)
            query = self.node_gpu_query(o.vals[0]) if k == 1 and o is not None and o.vals else None
            if query is not None:
                why.append((k, f"{o.flag} comes from {query} (the GPUs of the node it runs on)"))
                continue
            if k == 1 and o is not None and o.vals and o.vals[0].text.strip() in NODE_GPU_WORDS:
                why.append((k, f"{o.flag} {o.vals[0].text.strip()} (torchrun: one process per GPU of the node it "
                               "runs on)"))
                continue
            if (o is not None and o.vals) or inherit[k] is not None or (o is None and not srun) \
                    or (k == 1 and self._srun_tasks() is not None):
                continue
            said = unstated_why(self.unread_allocation, sources[k], o.flag if o is not None else None)
            if said is not None:
                why.append((k, said))
        return why

    def launcher_range(self) -> tuple[str, int, int] | None:
        """(kind, first option index, end) of the launcher options: ``torchrun`` /
        ``python -m torch.distributed.run`` options, or ``srun`` options before ``python``."""
        for i in range(self.script_index):
            t = self.tokens[i].text
            base = t.rsplit("/", 1)[-1]
            if base in _LAUNCHERS:
                return "torchrun", i + 1, self.script_index
            if base.startswith("python") and i + 2 < self.script_index + 1:
                if self.tokens[i + 1].text == "-m" and self.tokens[i + 2].text in _PY_LAUNCH_MODULES:
                    return "torchrun", i + 3, self.script_index
        for i in range(self.script_index):
            if self.tokens[i].text.rsplit("/", 1)[-1] == "srun":
                end = next((j for j in range(i + 1, self.script_index)
                            if self.tokens[j].text.rsplit("/", 1)[-1].startswith("python")), self.script_index)
                return "srun", i + 1, end
        return None

    def launcher_start(self) -> int | None:
        rng = self.launcher_range()
        return rng[1] if rng else None

    # ----- values written in another file (a sourced fragment, a script this one runs)
    def written_in(self, toks: Iterable[Token]) -> tuple[str, int, str] | None:
        """(file, line, how) of the first character of ``toks`` written in a file this script sources
        (how ``source``) or runs (``bash``), not in the script itself; None if there is none."""
        for t in toks:
            for p in t.pcs:
                if p.at is not None and p.at[0] in self.files:
                    how, text = self.files[p.at[0]]
                    return p.at[0], text.count("\n", 0, p.at[1]) + 1, how
        return None

    def elsewhere_error(self, items: list[tuple[tuple[str, int, str], str]]) -> UserError:
        """One line: the edits ``items`` ((file, line, how), what to do) are in other files, to be made
        there by hand (the tuned recipe is a copy of this script; a file the run reads is never written)."""
        by_file: dict[tuple[str, str], list[str]] = {}
        for (f, line, how), what in sorted(items, key=lambda x: x[0][1]):
            by_file.setdefault((f, how), []).append(f"line {line}: {what}")
        parts = [f"{f} ({'run' if how == 'bash' else 'sourced'} by this script) " + ", ".join(dict.fromkeys(ws))
                 for (f, how), ws in by_file.items()]
        return UserError(f"{self.path}: cannot write the tuned values: they are set in another file, "
                         f"{'; '.join(parts)}; edit {'them' if len(items) > 1 else 'it'} there by hand (only this script is copied and edited, "
                         f"and no file the run reads is written over)")

    # ----- sites in the text
    def _site(self, tok: Token, after: int | None, prefer_literal: bool = True) -> tuple[int, int] | None:
        """Where ``tok`` is written: its literal span, or the ``$...`` that produced exactly it.

        With ``after`` (end of the preceding site), only a site that directly follows it counts.
        """
        cands: list[tuple[int, int]] = []
        lit = tok.literal_span()
        exact = [(self.refs[r].start, self.refs[r].end) for r in tok.exact_refs(self.refs)]
        if prefer_literal and lit:
            cands.append(lit)
        cands.extend(exact)
        if not prefer_literal and lit:
            cands.append(lit)
        if after is None:
            return cands[0] if cands else None
        for a, b in cands:
            if a >= after and _BLANKISH.match(self.text[after:a]):
                return a, b
        return None

    def occ_region(self, o: Occ) -> tuple[int, int]:
        fs = self._site(o.flag_tok, None)
        if o.whole is not o.flag_tok:  # --flag=value: the whole token
            ws = self._site(o.whole, None)
            if ws is not None:
                return ws
        if fs is None:
            raise UserError(f"{self.path}: cannot locate {o.flag!r} in the script to edit it")
        end = fs[1]
        for v in o.vals:
            vs = self._site(v, end) or self._site(v, end, prefer_literal=False)
            if vs is None:
                raise UserError(f"{self.path}: cannot locate the value of {o.flag} ({v.text!r}) next to the flag")
            end = vs[1]
        return fs[0], end

    # ----- edit planning
    def value_edits(self, requests: list[tuple[Occ, str]],
                    elsewhere: list[tuple[tuple[str, int, str], str]] | None = None) -> list[Edit]:
        """Edits that give each occurrence's value the requested text; a value written in another file
        (:meth:`written_in`) is added to ``elsewhere`` (None: refused at once, :meth:`elsewhere_error`)."""
        all_toks = [t for o in self.occs + self.launcher if o.spec is not None or o in self.launcher for t in o.vals]
        edits: list[Edit] = []
        req_ids = {id(o.vals[0]): txt for o, txt in requests}
        for o, txt in requests:
            v = o.vals[0]
            lit = v.literal_span()
            if lit is not None:
                a, b = lit
                users = [t for t in all_toks if any(a <= p.lit < b and p.at is None for p in t.pcs)]
                if all(req_ids.get(id(t)) == txt for t in users):
                    edits.append(Edit(a, b, txt))
                    continue
            fs = self._site(o.flag_tok, None)
            site = self._site(v, fs[1] if fs else None, prefer_literal=False) if fs else None
            if site is None:
                exact = v.exact_refs(self.refs)
                prefix = self.run_default_edit(v, txt, req_ids) if not exact else None
                if prefix is not None:
                    edits.append(prefix)
                    continue
                if not exact:
                    where = self.written_in([v])
                    if where is None:
                        raise UserError(f"{self.path}: cannot edit the value of {o.flag} ({v.text!r}): it is computed")
                    item = (where, f"set {o.flag} {txt} (now {v.text})")
                    if elsewhere is None:
                        raise self.elsewhere_error([item])
                    elsewhere.append(item)
                    continue
                r = self.refs[exact[-1]]
                site = (r.start, r.end)
            edits.append(Edit(site[0], site[1], txt))
        return edits

    def run_default_edit(self, v: Token, txt: str, req_ids: dict[int, str]) -> Edit | None:
        """``VAR=txt `` written before the ``bash`` command of this script that runs the file where ``v`` is the
        default of ``VAR`` (``MBS="${MBS:-8}"`` in ``train.sh``: ``MBS=4 bash train.sh``), or None when ``v`` is not
        wholly such a default, or another argument value of the training command (any flag's, the launcher's) or its
        environment uses that default (``--tensorboard-dir tb/mbs$MBS``) without being given the same value (words
        after the command, ``| tee logs/log_$MBS.txt``, are not its arguments)."""
        keys = {self.run_defaults.get(p.at) if p.at is not None else None for p in v.pcs}
        if len(keys) != 1 or None in keys:
            return None
        var, site = next(iter(keys))

        def uses(pcs: Iterable[PC]) -> bool:
            return any(p.at is not None and self.run_defaults.get(p.at) == (var, site) for p in pcs)

        values = [t for o in self.occs + self.launcher for t in o.vals]
        if any(uses(t.pcs) and req_ids.get(id(t)) != txt for t in values) or any(uses(e) for e in self.env.values()):
            return None
        return Edit(site, site, f"{var}={shlex.quote(txt)} ")

    def _locatable(self, o: Occ) -> bool:
        """Whether the flag and its values are written where an insertion can follow them (not,
        e.g., a value like ``${OUTPUT_DIR}/tensorboard`` that is part literal, part expansion)."""
        if not self._site(o.flag_tok, None):
            return False
        try:
            self.occ_region(o)
        except UserError:
            return False
        return True

    def removal_edit(self, o: Occ) -> Edit:
        a, b = self.occ_region(o)
        return Edit(*_removal_region(self.text, a, b), "")

    def insertion_edit(self, spec: Flag, value: str | None, exclude: tuple[Occ, ...] = ()) -> Edit:
        new = spec.flag if value is None else f"{spec.flag}{self.joiner}{value}"
        anchor = None
        for group in _RELATED.get(spec.group, (spec.group,)):
            for o in self.occs:  # the last flag of the same (or a related) argument group
                if (o.spec is not None and o.spec.group == group and not any(o is x for x in exclude)
                        and self._locatable(o)):
                    anchor = o
            if anchor is not None:
                break
        if anchor is None:
            for o in self.occs:
                if o.flag and not any(o is x for x in exclude) and self._locatable(o):
                    anchor = o
        if anchor is None:
            if self.joiner == "\n":  # argv: append
                return Edit(len(self.text), len(self.text), ("\n" if self.text else "") + new)
            raise UserError(f"{self.path}: no place to add {spec.flag} (no literal Megatron flag in the command)")
        a, b = self.occ_region(anchor)
        return _insertion(self.text, a, b, new)


def _expand_quotes(text: str, a: int, b: int) -> tuple[int, int]:
    """Widen a region over quotes that open or close inside it (``"--fp8-format hybrid"``)."""
    if a > 0 and b < len(text) and text[a - 1] in "\"'" and text[b] == text[a - 1]:
        return a - 1, b + 1
    if b < len(text) and text[b] in "\"'" and text.count(text[b], a, b) % 2 == 1:
        b += 1
    return a, b


def _line_bounds(text: str, a: int, b: int) -> tuple[int, int]:
    ls = text.rfind("\n", 0, a) + 1
    le = text.find("\n", b)
    return ls, (len(text) if le < 0 else le)


def _prev_line_cont(text: str, ls: int) -> re.Match | None:
    if ls == 0:
        return None
    ps = text.rfind("\n", 0, ls - 1) + 1
    return re.search(r"[ \t]*\\$", text[ps:ls - 1])


def _removal_region(text: str, a: int, b: int) -> tuple[int, int]:
    a, b = _expand_quotes(text, a, b)
    ls, le = _line_bounds(text, a, b)
    before, after = text[ls:a], text[b:le]
    tail = _LINE_TAIL.match(after)
    if before.strip() == "" and tail:
        if not tail.group(1):
            m = _prev_line_cont(text, ls)
            if m is not None and ls > 0:
                # last line of a "\"-continued command: drop the previous line's continuation too
                return ls - 1 - len(m.group(0)), le
        return ls, min(le + 1, len(text))
    if before.strip() == "":
        while b < le and text[b] in " \t":
            b += 1
        return a, b
    while a > ls and text[a - 1] in " \t":
        a -= 1
    return a, b


def _insertion(text: str, a: int, b: int, new: str) -> Edit:
    a, b = _expand_quotes(text, a, b)
    ls, le = _line_bounds(text, a, b)
    before, after = text[ls:a], text[b:le]
    tail = _LINE_TAIL.match(after)
    if before.strip() == "" and tail:
        indent = before
        if tail.group(1):
            return Edit(le, le, "\n" + indent + new + tail.group(1))
        m = _prev_line_cont(text, ls)
        if m is not None:
            return Edit(ls, ls, indent + new + m.group(0) + "\n")
        return Edit(le, le, "\n" + indent + new)
    return Edit(b, b, " " + new)


def apply_edits(text: str, edits: list[Edit], path: str) -> str:
    """Apply non-overlapping edits (identical duplicates merged)."""
    uniq: dict[tuple[int, int, str], Edit] = {}
    for e in edits:
        uniq[(e.start, e.end, e.text)] = e
    es = sorted(uniq.values(), key=lambda e: (e.start, e.end))
    for x, y in zip(es, es[1:]):
        if y.start < x.end:
            raise UserError(f"{path}: conflicting edits at offset {y.start}; edit the script by hand")
    out = text
    for e in reversed(es):
        out = out[:e.start] + e.text + out[e.end:]
    return out


def edit_to_fixpoint(text: str, path: str, edits_of: Callable[[str], list[Edit]], passes: int = 3) -> str:
    """``text`` with ``edits_of(text)`` applied pass by pass until a pass asks for none (at most ``passes``):
    each pass reads the text the last one wrote, as one edit can change what the next reading needs (a
    parallel size moved with the cluster counts that depend on it).  The tuned-recipe writers' shared loop."""
    out = text
    for _ in range(passes):
        edits = edits_of(out)
        if not edits:
            break
        out = apply_edits(out, edits, path)
    return out


# --------------------------------------------------------------------------- construction
def program_index(tokens: list[Token]) -> int | None:
    """Index of the training program: the first ``*.py``, or the module after ``-m`` / ``--module``
    (``torchrun -m pkg.train`` / ``python -m pkg.train``; the torch launcher modules are skipped)."""
    cands = [next((i for i, t in enumerate(tokens) if t.text.endswith(".py")), None)]
    for i, t in enumerate(tokens[:-1]):
        if t.text in ("-m", "--module") and tokens[i + 1].text not in _PY_LAUNCH_MODULES:
            cands.append(i + 1)
            break
    found = [c for c in cands if c is not None]
    return min(found) if found else None


def _pick_command(state: ShellState, path: str) -> tuple[list[Token], int, dict[str, list[PC]]]:
    best = None
    runs: list[tuple[str, ...]] = []  # the arguments of each training command the script runs
    for cmd in state.commands:
        idx = program_index(cmd.args)
        if idx is None:
            continue
        texts = [t.text for t in cmd.args[idx + 1:]]
        # a command that runs it over one that prints it (`echo ${run_cmd} | tee -a $LOG; eval ${run_cmd}`: the echo's
        # unquoted words still hold the redirection and pipe the eval'd command reads as shell syntax)
        executes = not (cmd.args and cmd.args[0].text.rsplit("/", 1)[-1] in ("echo", "printf"))
        score = (executes, ("--num-layers" in texts) or any(t.startswith("--num-layers=") for t in texts), len(texts))
        if executes and score[1]:
            runs.append(tuple(texts))
        if best is None or score >= best[0]:
            best = (score, cmd.args, idx, cmd.env)
    if best is None and getattr(state, "exited_at", None):
        line, said = state.exited_at
        raise UserError(f"{path}: line {line}: {said!r} ends the script before any training command runs (bash runs "
                        "nothing after a top-level exit); remove it, or give the training command after --")
    if best is None:
        raise UserError(f"{path}: no training command found (expected torchrun/python ... pretrain_gpt.py --num-layers ...)")
    note = runs_note(runs, tuple(t.text for t in best[1][best[2] + 1:]))
    if note:
        state.warnings.append(note)
    env = dict(best[3])
    args = best[1]
    if args and args[0].text.rsplit("/", 1)[-1] == "env":  # env VAR=value ... torchrun ...
        for t in args[1:best[2]]:
            m = _ENV_ASSIGN.match(t.text)
            if not m:
                break
            env[m.group(1)] = t.pcs[m.end():]
    return args, best[2], env


def runs_note(runs: list[tuple[str, ...]], chosen: tuple[str, ...]) -> Optional[str]:
    """The note of a script that runs several different training commands (a loop over settings, runs in sequence:
    bash runs every one, one is projected): how many, the flags whose values differ, and the values of the one
    projected; None for one command (or the same one repeated)."""
    distinct = list(dict.fromkeys(runs))
    if len(distinct) < 2:
        return None
    def flags(words: tuple[str, ...]) -> dict[str, str]:  # --flag -> its last value as argparse keeps it ("" a switch)
        out: dict[str, str] = {}
        for i, w in enumerate(words):
            if w.startswith("--"):
                k, eq, v = w.partition("=")
                out[k] = v if eq else words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
        return out

    maps, own = [flags(r) for r in distinct], flags(chosen)
    diff: list[str] = []
    for k in dict.fromkeys(k for m in maps for k in m):
        vals = list(dict.fromkeys(m.get(k, "(not given)") or "(given)" for m in maps))
        if len(vals) > 1:
            diff.append(f"{k} {own.get(k, '(not given)') or '(given)'} (of {', '.join(vals[:4])}"
                        f"{', ...' if len(vals) > 4 else ''})")
    said = "; ".join(diff[:3]) + ("; ..." if len(diff) > 3 else "") if diff else "their arguments differ in order"
    return (f"the script runs {len(runs)} training commands, {len(distinct)} different (a loop over settings?); "
            f"projected one of them: {said}; project each run as its own recipe")


def from_script(text: str, path: str, script_args: tuple[str, ...] = (),
                script_env: Optional[Mapping[str, str]] = None) -> CommandRecipe:
    """The training command of a launch script run statically with positional parameters
    ``script_args`` and the SLURM_* environment of its ``#SBATCH`` allocation over ``script_env`` (the
    variables the script is started with: a command's ``NAME=value`` prefixes); skipped constructs, and
    ``$(...)`` output reaching a Megatron argument, are stated in ``notes``."""
    alloc = sbatch_allocation(text)
    state = ShellState(text, path, script_args, {**(script_env or {}), **slurm_env(alloc)})
    tokens, idx, env = _pick_command(state, path)
    rec = CommandRecipe(text, path, tokens, state.refs, idx, [], parse_occurrences(tokens[idx + 1:]), env=env)
    rec.allocation, rec.unread_allocation, rec.files = state.allocation, state.unread_allocation, state.files
    rec.run_defaults = state.run_defaults
    rng = rec.launcher_range()
    if rng is not None:
        rec.launcher = parse_occurrences(tokens[rng[1]:rng[2]])
        rec.launcher = slurm_occurrences(rec.launcher) if rng[0] == "srun" else torchrun_occurrences(rec.launcher)
    rec.args = args_of(rec.occs)
    rec.notes = [f"{path}: {w}" for w in dict.fromkeys(state.warnings)]
    rec.downloads = downloaded_files(state.commands)
    for flag, dest in (("--tokenizer-model", "tokenizer_model"), ("--vocab-file", "vocab_file")):
        url = rec.downloads.get(str(rec.args.get(dest)))
        if url is not None:
            rec.notes.append(f"{flag} {rec.args[dest]}: the file the script downloads from {url}; when it is not on "
                             "this machine, its vocabulary is looked up by that address")
    rec.notes += megatron_flags.config_only_notes(o.flag for o in rec.occs) + choice_notes(rec.occs)
    rec.notes += repeated_notes(rec.launcher, launcher=True) + repeated_notes(rec.occs)
    for o in rec.occs:
        if o.flag and any(v.opaque for v in o.vals):
            rec.notes.append(f"{o.flag} {' '.join(v.text for v in o.vals)}: the value comes from a command "
                             f"substitution, which is not run (read as its text)")
    rec.unmodelled = command_output_words(rec.occs)
    return rec


def command_output_words(occs: list[Occ]) -> list[UnmodelledFlag]:
    """One entry per run of arguments that stand where a flag would and come from a command substitution the
    reader does not run (``pretrain_gpt.py ${ARGS[@]} $(parallel_args)``, a function printing
    ``--tensor-model-parallel-size 2 ...``; ``$(cat args.txt)``): bash splits the command's output into words and
    Megatron-LM's parser reads them as flags, so they may set any field; reading the rest while dropping them
    silently projected the defaults (TP 1 for the function's TP 2).  Values of a flag from a substitution are
    noted separately (they are read as their text)."""
    runs: list[list[str]] = [[]]
    for o in occs:
        if not o.flag and o.whole.opaque:
            runs[-1].append(o.whole.text)
        elif runs[-1]:
            runs.append([])
    return [UnmodelledFlag(flag=" ".join(r), value="(a command's output, not run)", effect=(
        "time and memory: the words this command substitution prints are arguments of the training command (any "
        "flag: sizes, parallelism, batch, precision); the reader does not run it, so they are not read (write them "
        "out in the script)")) for r in runs if r]


_DOWNLOADERS = {"wget": (("-O", "--output-document"),), "curl": (("-o", "--output"),)}


def downloaded_files(commands: Iterable[Command]) -> dict[str, str]:
    """FILE -> URL for each ``wget -O FILE URL`` / ``wget --output-document=FILE URL`` / ``curl [-L] -o FILE URL``
    (``--output FILE``) the script runs with both words known (no command output in them): launch scripts fetch
    their tokenizer that way (ROCm/Megatron-LM's ``wget -O $TOKENIZER_MODEL https://huggingface.co/.../
    tokenizer.model`` before ``--tokenizer-model $TOKENIZER_MODEL``).  wget(1) ``-O file``, curl(1) ``-o file``."""
    out: dict[str, str] = {}
    for cmd in commands:
        words = [t.text for t in cmd.args] if not any(t.opaque for t in cmd.args) else []
        if not words or words[0].rsplit("/", 1)[-1] not in _DOWNLOADERS:
            continue
        (opts,) = _DOWNLOADERS[words[0].rsplit("/", 1)[-1]]
        target, url = None, None
        k = 1
        while k < len(words):
            w = words[k]
            if w in opts and k + 1 < len(words):
                target, k = words[k + 1], k + 2
                continue
            if w.startswith(tuple(o + "=" for o in opts if o.startswith("--"))):
                target = w.split("=", 1)[1]
            elif w[:2] in opts and len(w) > 2 and not w.startswith("--"):
                target = w[2:]  # -Ofile
            elif re.match(r"(?:https?|s3|ftp)://\S+$", w):
                url = w
            k += 1
        if target and url and target != "-":
            out[target] = url
    return out


def from_argv(argv: list[str]) -> CommandRecipe:
    if any("\n" in a for a in argv):
        raise UserError("argv: arguments containing newlines are not supported")
    text = "\n".join(argv)
    tokens: list[Token] = []
    pos = 0
    for a in argv:
        tokens.append(Token([PC(c, pos + i) for i, c in enumerate(a)]))
        pos += len(a) + 1
    idx = program_index(tokens)
    if idx is None:
        idx = -1  # bare Megatron arguments
    rec = CommandRecipe(text, "argv", tokens, [], idx, [], parse_occurrences(tokens[idx + 1:]), joiner="\n")
    rng = rec.launcher_range() if idx >= 0 else None
    if rng is not None:
        rec.launcher = parse_occurrences(tokens[rng[1]:rng[2]])
        rec.launcher = slurm_occurrences(rec.launcher) if rng[0] == "srun" else torchrun_occurrences(rec.launcher)
    rec.args = args_of(rec.occs)
    rec.notes = megatron_flags.config_only_notes(o.flag for o in rec.occs) + choice_notes(rec.occs)
    rec.notes += repeated_notes(rec.launcher, launcher=True) + repeated_notes(rec.occs)
    return rec


def plan_edits(rec: CommandRecipe, changes: dict[str, Any]) -> list[Edit]:
    """Edits that set each ``dest`` in ``changes`` (None / False = absent) on the command line."""
    value_reqs: list[tuple[Occ, str]] = []
    edits: list[Edit] = []
    removed: list[Occ] = []
    inserts: list[tuple[Flag, str | None]] = []
    elsewhere: list[tuple[tuple[str, int, str], str]] = []  # edits in a file the script sources or runs
    for dest, val in changes.items():
        spec = BY_DEST[dest]
        occs = [o for o in rec.occs if o.spec is spec]
        if spec.kind in ("true", "false"):
            want_present = bool(val) if spec.kind == "true" else (not val)
            if want_present and not occs:
                inserts.append((spec, None))
            elif not want_present:
                removed.extend(occs)
            continue
        if val is None:
            removed.extend(occs)
            continue
        if spec.kind == "list":
            txt = " ".join(str(v) for v in val)
            where = rec.written_in([occs[-1].flag_tok]) if occs and rec._site(occs[-1].flag_tok, None) is None else None
            if where is not None:
                elsewhere.append((where, f"set {spec.flag} {txt}"))
            elif occs:
                a, b = rec.occ_region(occs[-1])
                o = occs[-1]
                head = rec.text[a:rec._site(o.flag_tok, None)[1]] if rec._site(o.flag_tok, None) else spec.flag
                sep = "=" if o.whole is not o.flag_tok else rec.joiner
                edits.append(Edit(a, b, f"{head}{sep}{txt}" if rec.joiner != "\n" else f"{spec.flag}\n" + "\n".join(map(str, val))))
                removed.extend(occs[:-1])
            else:
                inserts.append((spec, txt if rec.joiner != "\n" else "\n".join(map(str, val))))
            continue
        txt = str(val)
        if rec.joiner != "\n" and re.search(r"[|&;<>()$`\\\"'*?\[\]#~\s{}]", txt):
            v0 = occs[-1].vals[0] if occs and occs[-1].vals else None
            span = v0.literal_span() if v0 is not None else None
            if span is None or rec.text[span[0] - 1:span[0]] not in ("'", '"'):
                txt = "'" + txt.replace("'", "'\\''") + "'"  # a shell word
        if occs and occs[-1].vals:
            value_reqs.append((occs[-1], txt))
        else:
            inserts.append((spec, txt))
    for o in removed:
        where = rec.written_in([o.flag_tok]) if rec._site(o.flag_tok, None) is None else None
        if where is not None:
            elsewhere.append((where, f"remove {o.flag}"))
        else:
            edits.append(rec.removal_edit(o))
    for spec, txt in inserts:
        try:
            edits.append(rec.insertion_edit(spec, txt, tuple(removed)))
        except UserError:
            near = [[o.flag_tok for o in rec.occs if o.spec is not None and o.spec.group == g]
                    for g in _RELATED.get(spec.group, (spec.group,))]  # where insertion_edit would add it
            where = rec.written_in(next((n[-1:] for n in near if n), [o.flag_tok for o in rec.occs if o.flag][-1:]))
            if where is None:
                raise
            elsewhere.append((where, f"add {spec.flag}" + ("" if txt is None else f" {txt}")))
    edits.extend(rec.value_edits(value_reqs, elsewhere))
    if elsewhere:
        raise rec.elsewhere_error(elsewhere)
    return edits


def launcher_edits(rec: CommandRecipe, nnodes: int | None, nproc: int | None) -> list[Edit]:
    """Set the launcher's node count and processes per node (torchrun: added when absent)."""
    reqs: list[tuple[Occ, str]] = []
    edits: list[Edit] = []
    rng = rec.launcher_range()
    for names, val in zip(rec.cluster_flags(), (nnodes, nproc)):
        if val is None:
            continue
        o = rec.launcher_value(*names)
        if o is not None and o.vals:
            reqs.append((o, str(val)))
            continue
        if rng is None or rng[0] != "torchrun":
            raise UserError(f"{rec.path}: cannot set {names[0]}={val}: the launcher does not state it")
        site = rec._site(rec.tokens[rng[1] - 1], None)
        where = rec.written_in([rec.tokens[rng[1] - 1]]) if site is None else None
        if where is not None:
            raise rec.elsewhere_error([(where, f"add {names[0]} {val}")])
        if site is None:
            raise UserError(f"{rec.path}: cannot set {names[0]}={val}: the launcher is not written literally")
        underscore = any("_" in x.flag for x in rec.launcher)  # --node_rank style: keep it
        flag = names[-1] if (underscore and len(names) > 1) else names[0]
        sep = "\n" if rec.joiner == "\n" else " "
        edits.append(Edit(site[1], site[1], f"{sep}{flag}{rec.joiner}{val}"))
    return edits + rec.value_edits(reqs)


__all__ = ["CommandRecipe", "Edit", "Occ", "apply_edits", "args_of", "comment_config", "comment_key_span",
           "edit_to_fixpoint", "from_argv", "from_script", "launcher_edits", "parse_occurrences", "plan_edits", "FLAGS"]


def env_edits(rec: CommandRecipe, values: dict[str, str]) -> list[Edit]:
    """Edits that make the training command run with each ``VAR=value`` of ``values``: the value is
    replaced where the script writes it (``export VAR=1``, ``VAR=1 torchrun``, the default of
    ``${VAR:-1}``); a variable the script does not set (or computes) gets an ``export VAR=value``
    line after the script's last ``export`` before the command (else after its header comments)."""
    edits: list[Edit] = []
    new_lines: list[str] = []
    for var, val in values.items():
        span = Token(rec.env[var]).literal_span() if rec.env.get(var) else None
        if span is not None:
            edits.append(Edit(span[0], span[1], val))
        else:
            new_lines.append(f"export {var}={val}\n")
    if new_lines:
        cmd_at = next((p.lit for t in rec.tokens for p in t.pcs if p.lit >= 0 and p.at is None), len(rec.text))
        at = 0
        for m in re.finditer(r"^export[ \t]+[A-Za-z_][A-Za-z0-9_]*=.*\n", rec.text[:cmd_at], re.M):
            at = m.end()
        if at == 0:  # after the shebang and the header comment block (and the blank lines after it)
            for m in re.finditer(r"^(#.*|[ \t]*)\n", rec.text, re.M):
                if m.start() != at:
                    break
                at = m.end()
            new_lines.append("\n")
        edits.append(Edit(at, at, "".join(new_lines)))
    return edits
