"""Bad-input campaign: the CLI under broken, huge, hostile and interrupted input, over every format
it reads.  Counts what must never happen: a traceback, a hang, a changed input, a non-finite figure,
an exit other than 0 (finite figures) / 2 (one ``primus-launch: error:`` line) / 130 / 143 (a signal).

Formats: Megatron bash script (and a TorchTitan launch script), Megatron argument YAML, NVIDIA's
nested YAML, Primus experiment YAML (and its ``extends:`` chain), TorchTitan TOML, the wrapper TOML,
a bash fragment a script ``source``s, ``--gpu-file`` (TOML and YAML) and a command line after ``--``.
Kinds of input: flipped bytes, truncation, invalid UTF-8, UTF-16 (with and without BOM), binary
files, 8 MiB files, empty files; every number of a recipe set to 0, -1, 1.5, 10^9, 10^30, 1e30,
nan, inf, a word; 5,000-deep nesting, alias bombs, wrong types (a list, a table, a string where a
number belongs); outputs (``--report``, ``--trace``, ``--log``, ``--out``) naming an input (the
recipe, the wrapper, the fragment, the GPU file, an extended file, a hard link, a symbolic link), a
folder, a path under a file, another output, a named pipe or a device; special files (named pipe,
link loop, dangling link, /dev/zero, folder) wherever a reader reads a file; broken ``extends`` chains;
bash arithmetic / array / loop bombs; flags the chosen mode does not read; SIGINT / SIGTERM at chosen
moments of ``--project`` and ``--tune``; the classes ``scripts/fuzz_structured.py`` (hypothesis over parsed
recipes) found: NeMo interpolation bombs, file names the kernel cannot take, ``[collectives]`` tables of the
wrong shape, a tune on a ``--gpu-file`` GPU (``--only structured:``); the robust8 classes (``--only r8:``):
characters a terminal acts on (ESC sequences, a carriage return, a newline, BEL, DEL, C1, bidi overrides) in
recipe keys, words, file names and flag values -- no case may print one raw (``shown`` escapes them) -- and
bash builtins that set a variable the reader does not evaluate (``printf -v``, ``read``, ``mapfile``); ``true`` in
a numeric field of a ``--gpu-file`` GPU (read as 1); the robust9 classes (``--only r9:``): launcher node ranges with MIN > MAX or from 0
(``--nnodes 4:1``), Megatron-Bridge integers and mappings where a number belongs, Primus ``recompute_layer_ids`` of
floats, outputs naming a file of the running program (a module it imported), ``--project ''`` / ``-``; and a
Megatron-Bridge ``run_config.yaml`` as one more format (``--only bridge-yaml:``); the robust10 classes (``--only r10:``):
abbreviated Megatron-LM flags (``allow_abbrev=False`` there), words no Megatron-LM flag takes (``--sequence-parallel
false``, a blank after a line-ending backslash, ``"--num-layers 32"`` as one word), a switch given ``=VALUE``, a misspelt choice (``--lr-decay-style
COSINE``), torchrun's abbreviations, bash ``$'...'`` / ``declare -i`` / ``readonly`` / ``(( X *= 2 ))`` / ``let`` values, TorchTitan booleans given a value
(tyro's flag pairs) and fields cut short, ``torchrun --standalone`` on several nodes, outputs named through a link into /proc (``/dev/stdout``) or a dangling
link, and primus-launch's own options abbreviated; the robust11 classes (``--only r11:``): a Megatron or TorchTitan value
past a bound of the plan named by the field as written (not ``tp=0`` / ``head_dim=0`` / ``training.recompute.num_layers``),
a power cap below any board's minimum (``--power-limit-w 0.7``), blank output paths (``--report ' '``), words after ``--``
following a YAML / TOML recipe, ``--json --emit``, a recipe named like an option, a tune with no fit under a margin, a script running several training commands (a sweep),
a key given twice in a Megatron-Bridge config (noted) or a ``--gpu-file`` YAML (refused), a stdout that cannot encode a
character of the recipe (``PYTHONIOENCODING=ascii``), a tune on a cluster where no layout is legal, bash arithmetic over
a command's output or ``$RANDOM`` (read as 0: ``N=$(nproc); TP=$((N / 4 + 1))`` projected TP 1), a path starting with
an unexpanded ``~`` (``--report=~/r.html`` made a folder named "~"), ``--yaml-cfg`` in a command (Megatron-LM then ignores
its other flags: they were projected), an ``#SBATCH`` count sbatch refuses under a script default (read without a word);
the robust12 classes (``--only r12:``): a model bound named by the plan's field (``model.num_experts``), a Primus value
from the environment (the variable unnamed, 1e400 shown as 'inf'), NeMo ``${oc.env:X}`` resolvers, ``--project r.sh/``,
a node past the GPU's reference server (noted), a script that exits before training, a virtual-stage count named by the
wrong flag, a Primus ``modules:`` with no framework or no model; the robust13 classes (``--only r13:``): an option given twice with
different values (Megatron-LM, torchrun, TorchTitan overrides: noted, the last read), a quoted false Megatron-Bridge
switch (``sequence_parallel: 'false'``, refused), an output over a tokenizer file the recipe names (refused), a launcher
asking for more nodes than the ``#SBATCH`` header allocates (noted); the titanjob classes (``--only tj:``): a TorchTitan
0.3 option of a section the plan does not read (optimizer, lr_scheduler, checkpoint, metrics, ...) misspelt or of the
wrong type (refused by torchtitan's own option table), a v0.2 TOML's misspelt key of a neutral table (refused); the
titanval classes (``--only tv:``): a v0.2 TOML key read into the plan with a value TorchTitan does not allow
(``converters = "float8"``, ``recipe_name = "colwise"``, ``mxfp8_dim1_cast_kernel_choice = "cutlass"``,
``selective_ac_option = 2``: refused), an unknown key far from every name (``[metrics] log_frequency``: refused, naming
its sub-table), valid values read; the robust14 classes (``--only r14:``): ``None`` / ``null`` given a Megatron-LM
number on a command line or as a YAML word (refused, as Megatron-LM's parser refuses it), a local tokenizer folder of no
tokenizer shape (``"vocab_size": true``, a ``model.vocab`` string, ``true`` / negative ids: not read) or past the bound
(named by its file), a wrapper's ``cluster.nodes`` / ``gpus_per_node`` out of range (named as written), YAML tags and
documents, TOML dates where numbers belong, bash that bash never finishes, ``--train-tokens`` forms no count is, a
command after ``--`` without ``#!``, ``--version`` / ``--help`` into a full or closed stdout (one line, exit 2);
the robust15 classes (``--only r15:``, the field drawn by ``--seed``): a number given ``None`` / ``'Null'`` / ``"128"`` / ``${VAR:None}`` /
``???`` in a Primus experiment, a Megatron-Bridge or a NeMo YAML (those loaders keep the string and the batch
arithmetic fails: refused; Primus's 'null' and YAML's null are the default), TorchTitan ``--training.x True`` (tyro);
the robust16 classes (``--only r16:``): a tune of a model whose weights alone overflow every GPU whatever the layout
(hidden size 2^20; minutes pricing hopeless plans: one line before the search), many pipeline stages of 9,984 layers,
a projection of 2,048 pipeline stages (the schedule's extrapolation ran 100M actions); the robust17 classes (``--only r17:``):
YAML anchors and aliases sharing a scalar with a key a tune writes (the tuned recipe changed the other key or named an
anchor it had dropped: checked by ``Case.check`` on the written file), a merge key's block a tune changes, Megatron values
its start-up refuses (``--moe-shared-expert-intermediate-size 0``, ``--encoder-seq-length`` beside ``--seq-length``),
sizes named as given (``--padded-vocab-size 0``), two runs at once writing the same outputs; the robust18 classes
(``--only r18:``): a framework newer than the one read -- a wrapper's ``[software]`` torch / torchtitan past the modelled
stack (noted), a torchtitan version on a Megatron recipe (noted), torchtitan main's #4121 names (refused naming the 0.3.0
field) --, ``--virtual-pipeline-model-parallel-size`` on a Megatron-LM command line (refused: no flag since 2021), a
Megatron-Bridge section of no ``ConfigContainer`` field (noted), MXFP8 on a GPU without MX formats named as the recipe
writes it, and kept: experts / EP / ETP / seq / VPP rules, ``--gpu-file`` units and missing fields, unset variables.

Each case runs the CLI's ``main`` in a forked child of this (warm) process, in its own folder and
process group, killed after ``--timeout`` seconds (a hang); signal cases start a fresh interpreter
(``python -m primus_launch``) and send the signal at the chosen moment.

    python scripts/bad_input_campaign.py [--quick] [--timeout 60] [--jobs 2] [--keep DIR] [-v]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
sys.path.insert(0, str(ROOT / "tests"))
from signal_helpers import group_members, signal_at, start_cli  # noqa: E402 - the interrupt test's own tools

BAD_NUMBERS = ["0", "-1", "1.5", "1000000000", "1" + "0" * 30, "1e30", "nan", "inf", "abc"]


@dataclass
class Case:
    name: str
    kind: str                       # byte / value / structure / output / argv / signal
    files: dict[str, bytes]         # relative path -> content, written into the case folder
    argv: list[str]                 # CLI arguments (relative paths resolve in the case folder)
    setup: Optional[Callable[[Path], None]] = None   # extra setup in the folder (links, folders)
    signal_at: Optional[float] = None
    signum: int = signal.SIGINT
    expect_refusal: bool = False    # the case must be refused (exit 2), e.g. an output naming an input
    expect_rc: Optional[int] = None  # the exit status the case must end with (a command run after --)
    expect_words: tuple[str, ...] = ()  # words the one error line must hold (the field and the value it names)
    typed: bytes = b""              # "tty" cases: what is typed on the terminal once the command runs
    expect_out: bytes = b""         # "tty" / "nohup" cases: what the command must have printed
    env: dict[str, str] = field(default_factory=dict)  # "stream" cases: variables the command starts with
    check: Optional[Callable[[Path], Optional[str]]] = None  # after the run, in the case's folder: a problem or None


@dataclass
class Outcome:
    case: Case
    rc: Optional[int]
    seconds: float
    stdout: str
    stderr: str
    problems: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------ the formats
def _read(rel: str) -> bytes:
    return (RECIPES / rel).read_bytes()


BASH = _read("megatron/llama3.1_8b.sh")
BASH_TITAN = _read("torchtitan/llama3_8b_launch.sh")
TINY = _read("megatron/tiny_gpt_cpu.sh")
YAML = _read("megatron/llama3.1_8b.yaml")
NESTED = _read("megatron/qwen3_235b_a22b_h100_256gpu.yaml")
PRIMUS = _read("primus/MI355X/llama3.1_8b.yaml")
TOML = _read("torchtitan/llama3.1_8b.toml")
BRIDGE = (ROOT / "tests" / "data" / "bridge" / "qwen3_moe_run_config.yaml").read_bytes()  # a saved run_config.yaml
WRAPPER = b'[recipe]\npath = "r.sh"\n[cluster]\ngpu = "h100-sxm"\nnodes = 2\ngpus_per_node = 8\n'
GPU_TOML = (b'[gpu.mygpu]\nvendor = "custom"\npeak_flops_bf16 = 989e12\nhbm_bytes = 85899345920\n'
            b'hbm_bw = 3.35e12\nintra_node_bw = 450e9\nintra_node_topology = "switch"\ninter_node_bw = 50e9\n')
GPU_YAML = (b'gpu:\n  mygpu:\n    vendor: custom\n    peak_flops_bf16: 989.0e+12\n    hbm_bytes: 85899345920\n'
            b'    hbm_bw: 3.35e+12\n    intra_node_bw: 450.0e+9\n    intra_node_topology: switch\n    inter_node_bw: 50.0e+9\n')
FRAGMENT = b"NUM_LAYERS=32\nHIDDEN=4096\nGBS=128\nTP=2\n"
SOURCING = BASH.replace(b"# Parallelism and batch\n", b"source ./frag.sh\n# Parallelism and batch\n") \
    .replace(b"--num-layers 32", b"--num-layers $NUM_LAYERS").replace(b"--hidden-size 4096", b"--hidden-size $HIDDEN") \
    .replace(b"GLOBAL_BATCH_SIZE=128", b"GLOBAL_BATCH_SIZE=$GBS").replace(b"TP_SIZE=2", b"TP_SIZE=$TP")
EXTENDS_BASE = PRIMUS.replace(b"work_group:", b"work_group_base:")  # the chain's base: a full experiment
EXTENDS_TOP = b"extends:\n  - base.yaml\nexp_name: chained\n"
ARGV = ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py", "--num-layers", "32", "--hidden-size", "4096",
        "--ffn-hidden-size", "14336", "--num-attention-heads", "32", "--seq-length", "4096",
        "--max-position-embeddings", "4096", "--micro-batch-size", "1", "--global-batch-size", "64",
        "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--bf16",
        "--vocab-size", "128256", "--swiglu"]

# format -> (the file the case mutates, its name, the other files, the CLI arguments)
FORMATS: dict[str, tuple[bytes, str, dict[str, bytes], list[str]]] = {
    "bash": (BASH, "r.sh", {}, ["--project", "r.sh"]),
    "bash-titan": (BASH_TITAN, "r.sh", {}, ["--project", "r.sh"]),
    "yaml": (YAML, "r.yaml", {}, ["--project", "r.yaml"]),
    "nested-yaml": (NESTED, "r.yaml", {}, ["--project", "r.yaml"]),
    "primus-yaml": (PRIMUS, "r.yaml", {}, ["--project", "r.yaml"]),
    "extends": (EXTENDS_BASE, "base.yaml", {"r.yaml": EXTENDS_TOP}, ["--project", "r.yaml"]),
    "toml": (TOML, "r.toml", {}, ["--project", "r.toml"]),
    "bridge-yaml": (BRIDGE, "b.yaml", {}, ["--project", "b.yaml"]),
    "wrapper": (WRAPPER, "w.primus.toml", {"r.sh": BASH}, ["--project", "w.primus.toml"]),
    "fragment": (FRAGMENT, "frag.sh", {"r.sh": SOURCING}, ["--project", "r.sh"]),
    "gpu-toml": (GPU_TOML, "g.toml", {"r.sh": BASH}, ["--project", "r.sh", "--gpu-file", "g.toml", "--gpu", "mygpu"]),
    "gpu-yaml": (GPU_YAML, "g.yaml", {"r.sh": BASH}, ["--project", "r.sh", "--gpu-file", "g.yaml", "--gpu", "mygpu"]),
}
TAIL = ["--dry-run", "--json"]


# ------------------------------------------------------------------------------------ the mutations
_NUM = re.compile(rb"(?<![\w.$-])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])")


def number_spans(data: bytes) -> list[tuple[int, int]]:
    """Numbers outside comments (a ``#`` to the end of the line)."""
    out = []
    for m in _NUM.finditer(data):
        line_start = data.rfind(b"\n", 0, m.start()) + 1
        if b"#" in data[line_start:m.start()]:
            continue
        out.append(m.span())
    return out


def byte_cases(fmt: str, rng: random.Random, n_flip: int) -> list[tuple[str, bytes]]:
    data = FORMATS[fmt][0]
    out = []
    for i in range(n_flip):
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            j = rng.randrange(len(b))
            b[j] ^= 1 << rng.randrange(8)
        out.append((f"flip{i}", bytes(b)))
    cut = rng.randrange(1, len(data))
    out += [
        (f"truncated@{cut}", data[:cut]),
        ("invalid-utf8", data[: len(data) // 2] + b"\xff\xfe\xc3(" + data[len(data) // 2:]),
        ("utf16-bom", data.decode("utf-8").encode("utf-16")),
        ("utf16-le", data.decode("utf-8").encode("utf-16-le")),
        ("utf8-bom", b"\xef\xbb\xbf" + data),
        ("binary", bytes(rng.randrange(256) for _ in range(4096))),
        ("png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4),
        ("nul", data[:100] + b"\x00" + data[100:]),
        ("empty", b""),
        ("blank", b"\n \n\t\n"),
        ("8MiB", (data + b"\n") * (8 * 2**20 // (len(data) + 1) + 1)),
        ("255KiB-comment", data + b"\n#" + b"x" * (255 * 1024 - len(data)) + b"\n"),
        ("crlf", data.replace(b"\n", b"\r\n")),
        ("long-line", data + b"\n" + b"# " + b"y" * 200_000 + b"\n"),
    ]
    return out


def value_cases(fmt: str, rng: random.Random, per_number: int) -> list[tuple[str, bytes]]:
    data = FORMATS[fmt][0]
    out = []
    for s, e in number_spans(data):
        for v in rng.sample(BAD_NUMBERS, min(per_number, len(BAD_NUMBERS))):
            out.append((f"num@{s}={data[s:e].decode()}->{v[:12]}", data[:s] + v.encode() + data[e:]))
    return out


def structure_cases(fmt: str) -> list[tuple[str, bytes]]:
    data = FORMATS[fmt][0]
    deep_list, deep_map = b"[" * 5000 + b"]" * 5000, b"{a: " * 5000 + b"1" + b"}" * 5000
    out: list[tuple[str, bytes]] = []
    if fmt.endswith("yaml") or fmt in ("extends",):
        out += [("deep-flow", data + b"\ndeep: " + deep_list + b"\n"),
                ("deep-map", data + b"\ndeep: " + deep_map + b"\n"),
                ("deep-block", data + b"\n" + b"".join(b" " * i + b"k:\n" for i in range(400)) + b" " * 400 + b"k: 1\n"),
                ("alias-bomb", data + b"\nbomb0: &a0 [1,1,1,1,1,1,1,1,1,1]\n" + b"".join(
                    f"bomb{i}: &a{i} [{', '.join(['*a%d' % (i - 1)] * 10)}]\n".encode() for i in range(1, 9))),
                ("recursive-alias", data + b"\nloop: &l [*l]\n"),
                ("list-root", b"- 1\n- 2\n"), ("scalar-root", b"42\n"),
                ("dup-keys", data + b"\n" + data)]
        for key in (b"num_layers", b"hidden_size", b"global_batch_size", b"tensor_model_parallel_size",
                    b"pipeline_model_parallel_size", b"peak_flops_bf16", b"hbm_bytes", b"micro_batch_size"):
            for v, tag in ((b"[1, 2]", "list"), (b"{a: 1}", "map"), (b"'32'", "string"), (b"true", "bool"),
                           (b"null", "null"), (b"", "empty")):
                if key + b":" in data:
                    out.append((f"type:{key.decode()}={tag}", re.sub(key + rb":[^\n]*", key + b": " + v, data, count=1)))
    if fmt in ("toml", "wrapper", "gpu-toml"):
        out += [("deep-array", data + b"\ndeep = " + deep_list + b"\n"),
                ("deep-table", data + b"\ndeep = " + b"{a=" * 5000 + b"1" + b"}" * 5000 + b"\n"),
                ("dup-table", data + b"\n" + data), ("inf", data.replace(b"= 8\n", b"= inf\n", 1)),
                ("nan", data.replace(b"= 1\n", b"= nan\n", 1))]
        for key in (b"local_batch_size", b"seq_len", b"tensor_parallel_degree", b"pipeline_parallel_degree",
                    b"path", b"gpu", b"nodes", b"gpus_per_node", b"peak_flops_bf16", b"hbm_bytes", b"flavor",
                    b"data_parallel_shard_degree"):
            for v, tag in ((b"[1, 2]", "list"), (b"{a = 1}", "table"), (b'"32"', "string"), (b"true", "bool"),
                           (b"42", "int"), (b"1e30", "huge"), (b"-5", "negative")):
                if re.search(rb"(?m)^" + key + rb" = ", data):
                    out.append((f"type:{key.decode()}={tag}", re.sub(rb"(?m)^" + key + rb" = [^\n]*", key + b" = " + v,
                                                                     data, count=1)))
        out += [("table-is-value", b"recipe = 3\n" if fmt == "wrapper" else b"gpu = [1, 2]\n" if fmt == "gpu-toml"
                 else b"parallelism = 3\n" + data),
                ("unknown-table", data + b"\n[zzz]\na = 1\n")]
    if fmt in ("bash", "bash-titan", "fragment"):
        out += [("deep-subshell", data + b"\nX=" + b"$(" * 3000 + b"echo 1" + b")" * 3000 + b"\n"),
                ("deep-braces", data + b"\nY=" + b"${A:-" * 3000 + b"1" + b"}" * 3000 + b"\n"),
                ("huge-loop", data + b"\nfor i in $(seq 1 100000000); do X=$i; done\n"),
                ("brace-expansion", data + b"\nZ=({1..100000000})\n"),
                ("recursive-fn", data + b"\nf() { f; }\nf\n"),
                ("self-source", data + b"\nsource ./r.sh\n" if fmt == "bash" else data + b"\nsource ./frag.sh\n"),
                ("unterminated", data + b"\nX=\"abc\n"), ("heredoc", data + b"\ncat <<EOF\nunterminated\n"),
                ("many-args", data.replace(b"--bf16", b"--bf16 " + b"--x 1 " * 20000))]
    return out


def argv_cases() -> list[tuple[str, list[str]]]:
    base = ["--project", "--dry-run", "--json", "--"] + ARGV
    out = []
    for i, a in enumerate(ARGV):
        if a.lstrip("-").isdigit():
            for v in BAD_NUMBERS + ["", "1" * 5000]:
                cmd = list(ARGV)
                cmd[i] = v
                out.append((f"argv:{ARGV[i - 1]}={v[:12]}", ["--project", "--dry-run", "--json", "--"] + cmd))
    flags = [("--nodes", BAD_NUMBERS), ("--gpus-per-node", BAD_NUMBERS), ("--power-limit-w", BAD_NUMBERS),
             ("--memory-margin", BAD_NUMBERS + ["1", "0.999"]), ("--gpu", ["", "nope", "h100-sxm\x00"]),
             ("--time-limit", ["0", "-1", "nan", "inf", "1e30"]), ("--budget", ["0", "-1", "1e30", "nan"]),
             ("--workers", ["0", "-1", "100000"]), ("--top", ["-1", "1e30"]),
             ("--ray-address", ["", "nope", "127.0.0.1:1", "h:99999", "ray://", "h:6379\x00"])]
    for flag, vals in flags:
        for v in vals:
            tune = flag in ("--time-limit", "--budget", "--workers", "--top", "--ray-address")
            out.append((f"flag:{flag}={v[:12]}", (["--tune", "r.sh", "--dry-run", "--json", "--out", "t.sh"] if tune
                                                  else ["--project", "r.sh", "--dry-run", "--json"]) + [flag, v]))
    out += [("argv:empty-command", ["--project", "--dry-run", "--"]),
            ("argv:no-action", []), ("argv:unknown-flag", ["--project", "r.sh", "--frobnicate"]),
            ("argv:binary-arg", ["--project", "r.sh\udcff", "--dry-run"]),
            ("argv:recipe-is-folder", ["--project", ".", "--dry-run"]),
            ("argv:recipe-missing", ["--project", "missing.sh", "--dry-run"]),
            ("argv:many-args", base + ["--x", "1"] * 20000)]
    return out


def output_cases() -> list[Case]:
    cases = []
    proj = ["--dry-run", "--json"]
    sets = {
        "bash": ({"r.sh": BASH}, "r.sh"), "toml": ({"r.toml": TOML}, "r.toml"),
        "wrapper": ({"w.primus.toml": WRAPPER, "r.sh": BASH}, "w.primus.toml"),
        "fragment": ({"r.sh": SOURCING, "frag.sh": FRAGMENT}, "r.sh"),
        "extends": ({"r.yaml": EXTENDS_TOP, "base.yaml": EXTENDS_BASE}, "r.yaml"),
    }
    for fmt, (files, recipe) in sets.items():
        for victim in files:
            for flag in ("--report", "--trace"):
                cases.append(Case(f"out:{fmt}:{flag}={victim}", "output", files,
                                  ["--project", recipe, *proj, flag, victim], expect_refusal=True))
            for flag in ("--log", "--out"):
                if fmt in ("bash", "wrapper", "fragment"):
                    cases.append(Case(f"out:{fmt}:tune{flag}={victim}", "output", files,
                                      ["--tune", recipe, "--dry-run", "--json", "--time-limit", "20", flag, victim]
                                      + (["--out", "t.sh"] if flag == "--log" else []), expect_refusal=True))
    gfiles = {"r.sh": BASH, "g.toml": GPU_TOML}
    for flag in ("--report", "--trace"):
        cases.append(Case(f"out:gpu-file:{flag}", "output", gfiles, ["--project", "r.sh", *proj, "--gpu-file", "g.toml",
                                                                     flag, "g.toml"], expect_refusal=True))

    def hard(d: Path) -> None:
        os.link(d / "r.sh", d / "hard.sh")

    def soft(d: Path) -> None:
        os.symlink("r.sh", d / "soft.html")

    def folder(d: Path) -> None:
        (d / "outdir").mkdir()

    for flag in ("--report", "--trace"):
        cases += [Case(f"out:hardlink{flag}", "output", {"r.sh": BASH}, ["--project", "r.sh", *proj, flag, "hard.sh"],
                       setup=hard, expect_refusal=True),
                  Case(f"out:symlink{flag}", "output", {"r.sh": BASH}, ["--project", "r.sh", *proj, flag, "soft.html"],
                       setup=soft, expect_refusal=True),
                  Case(f"out:folder{flag}", "output", {"r.sh": BASH}, ["--project", "r.sh", *proj, flag, "outdir"],
                       setup=folder, expect_refusal=True),
                  Case(f"out:under-file{flag}", "output", {"r.sh": BASH}, ["--project", "r.sh", *proj, flag, "r.sh/x"],
                       expect_refusal=True),
                  Case(f"out:proc{flag}", "output", {"r.sh": BASH}, ["--project", "r.sh", *proj, flag, "/proc/x.json"],
                       expect_refusal=True)]
    cases += [Case("out:tune-out=folder", "output", {"r.sh": BASH}, ["--tune", "r.sh", "--dry-run", "--json",
                                                                     "--out", "outdir"], setup=folder, expect_refusal=True),
              Case("out:tune-out=hardlink", "output", {"r.sh": BASH}, ["--tune", "r.sh", "--dry-run", "--json",
                                                                       "--out", "hard.sh"], setup=hard, expect_refusal=True),
              Case("out:report=trace", "output", {"r.sh": BASH}, ["--project", "r.sh", *proj, "--report", "o.x",
                                                                  "--trace", "o.x"], expect_refusal=True),
              Case("out:tune-log=out", "output", {"r.sh": BASH}, ["--tune", "r.sh", "--dry-run", "--json",
                                                                  "--out", "o.sh", "--log", "o.sh"], expect_refusal=True)]
    return cases


def signal_cases(quick: bool) -> list[Case]:
    cases = []
    times = [0.05, 0.3, 0.8, 1.5] if quick else [0.05, 0.3, 0.8, 1.5, 2.0, 2.5, 3.5]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if sig == signal.SIGHUP:  # a hang-up (terminal or ssh closed) ends a run as SIGTERM does: fewer moments
            for t in times[1:3]:
                cases.append(Case(f"signal:SIGHUP@{t}s:tune-workers", "signal", {"r.sh": BASH},
                                  ["--tune", "r.sh", "--dry-run", "--exhaustive", "--workers", "2", "--out", "t.sh",
                                   "--report", "t.html", "--time-limit", "30"], signal_at=t + 1.0, signum=sig))
                cases.append(Case(f"signal:SIGHUP@{t}s:project", "signal", {"r.sh": BASH},
                                  ["--project", "r.sh", "--dry-run", "--report", "p.html", "--trace", "p.json"],
                                  signal_at=t, signum=sig))
            continue
        for t in times:
            cases.append(Case(f"signal:{sig.name}@{t}s:tune", "signal", {"r.sh": BASH},
                              ["--tune", "r.sh", "--dry-run", "--out", "t.sh", "--report", "t.html",
                               "--workers", "2", "--time-limit", "30"], signal_at=t, signum=sig))
        for t in times[:4]:
            cases.append(Case(f"signal:{sig.name}@{t}s:project", "signal", {"r.sh": BASH},
                              ["--project", "r.sh", "--dry-run", "--report", "p.html", "--trace", "p.json"],
                              signal_at=t, signum=sig))
        cases.append(Case(f"signal:{sig.name}@1.0s:planner", "signal", {"r.sh": BASH},
                          ["--tune", "r.sh", "--dry-run", "--out", "t.sh", "--planner", "--budget", "400"],
                          signal_at=1.0, signum=sig))
        for t in (1.0, 4.0, 8.0):  # the measured path on this machine (megatron-core layers built and timed)
            cases.append(Case(f"signal:{sig.name}@{t}s:measured", "signal", {"r.sh": TINY},
                              ["--project", "r.sh", "--measure-device", "cpu", "--report", "p.html"],
                              signal_at=t, signum=sig))
    return cases


def _special(name: str, kind: str) -> Callable[[Path], None]:
    """A setup that makes ``name`` a special file: a named pipe, a loop of links, a dangling link, a link to
    an endless device, a folder, or /dev/null's twin (a character device made in the case's folder, as
    root only: never the system's own)."""
    def setup(d: Path) -> None:
        p = d / name
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "link-loop":
            os.symlink(name + ".b", p)
            os.symlink(name, d / (name + ".b"))
        elif kind == "dangling":
            os.symlink("nowhere", p)
        elif kind == "dev-zero":
            os.symlink("/dev/zero", p)
        elif kind == "folder":
            p.mkdir()
        elif kind == "chardev" and os.geteuid() == 0:
            os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return setup


SPECIAL_KINDS = ("fifo", "link-loop", "dangling", "dev-zero", "folder")
BASH_BOMBS = {"arith-pow-tower": b"X=$((10**10**10))\n", "arith-div0": b"X=$((1/0))\n",
              "array-far-index": b"X=(a)\nX[99999999]=b\n", "array-before-start": b"X=(a)\nX[-5]=b\n",
              "while-true": b"while true; do :; done\n", "brace-product": b"X=(" + b"{a,b}" * 40 + b")\n",
              "mutual-source": b"source ./frag.sh\n"}
# flags the mode does not read: refused (one line), never ignored; the command after -- never runs
FLAG_CONFLICTS = [["--dry-run", "--", "touch", "ran"], ["--emit", "slurm", "--", "touch", "ran"],
                  ["--project", "r.sh", "--dry-run", "--budget", "3"], ["--project", "r.sh", "--dry-run", "--out", "x"],
                  ["--project", "r.sh", "--dry-run", "--force"],
                  ["--project", "r.sh", "--dry-run", "--measure-device", "cpu"],
                  ["--tune", "r.sh", "--dry-run", "--budget", "1", "--exhaustive"],
                  ["--tune", "r.sh", "--dry-run", "--max-work", "5", "--planner"],
                  ["--tune", "r.sh", "--workers", "2"]]


def reference_cases() -> list[Case]:
    """Special files where each reader reads a file (the recipe, --gpu-file, a wrapper's recipe.path, an
    ``extends`` base, a sourced fragment), broken ``extends`` chains, bash constructs that would run
    without end if evaluated literally, flags the mode does not read, and outputs an atomic write
    would replace instead of writing to (a named pipe, a character device)."""
    cases = []
    for kind in SPECIAL_KINDS:
        for role, files, argv, victim in (
                ("recipe", {}, ["--project", "r.sh"], "r.sh"),
                ("gpu-file", {"r.sh": BASH}, ["--project", "r.sh", "--gpu-file", "g.toml"], "g.toml"),
                ("wrapper-target", {"w.primus.toml": WRAPPER}, ["--project", "w.primus.toml"], "r.sh"),
                ("extends", {"r.yaml": EXTENDS_TOP}, ["--project", "r.yaml"], "base.yaml"),
                ("source", {"r.sh": SOURCING}, ["--project", "r.sh"], "frag.sh")):
            cases.append(Case(f"special:{role}:{kind}", "reference", files, argv + TAIL, setup=_special(victim, kind)))
    for tag, top in (("loop", b"extends: [a.yaml]\n"), ("self", b"extends: r.yaml\n"), ("int", b"extends: 42\n"),
                     ("no-trainer", b"extends: [a.yaml]\nnum_layers: 2\n"), ("empty-list", b"extends: []\n")):
        cases.append(Case(f"extends:{tag}", "reference", {"r.yaml": top, "a.yaml": b"extends: [r.yaml]\n"
                                                          if tag == "loop" else b"hidden_size: 8\n"},
                          ["--project", "r.yaml"] + TAIL))
    for tag, text in BASH_BOMBS.items():
        files = {"r.sh": BASH.replace(b"# Parallelism and batch\n", text + b"# Parallelism and batch\n")}
        if tag == "mutual-source":
            files["frag.sh"] = b"source ./r.sh\nX=1\n"
        cases.append(Case(f"bash:{tag}", "reference", files, ["--project", "r.sh"] + TAIL))
    for argv in FLAG_CONFLICTS:
        cases.append(Case(f"flags:{' '.join(argv)[:60]}", "reference", {"r.sh": BASH}, argv, expect_refusal=True))
    for kind in ("fifo", "chardev"):
        cases.append(Case(f"out:report={kind}", "output", {"r.sh": BASH}, ["--project", "r.sh", *TAIL, "--report", "o"],
                          setup=_special("o", kind), expect_refusal=kind == "fifo" or os.geteuid() == 0))
    return cases


# ------------------------------------------------------------------- typed values, constructs, CLI paths
# special values for one field: (text per format family, tag, must be refused in a numeric field)
BIG = str(2**200)
TYPED_VALUES = [  # (bash text, YAML text, TOML text, tag)
    (BIG, BIG, BIG, "2**200"), ("1e30", "1.0e+30", "1e30", "1e30"), ("nan", ".nan", "nan", "nan"),
    ("inf", ".inf", "inf", "inf"), ("-inf", "-.inf", "-inf", "-inf"), ("-0", "-0", "-0", "-0"),
    ("1e-400", "1.0e-400", "1e-400", "1e-400"), ("yes", "'yes'", '"yes"', "yes"), ("off", "'off'", '"off"', "off"),
    ("[1]", "[1]", "[1]", "list"), ("{a:1}", "{a: 1}", "{a = 1}", "mapping"), ("0x10", "0x10", "0x10", "hex"),
    ("1_000", "1_000", "1_000", "underscores"), ("-5", "-5", "-5", "negative"),
]
_WRONG = {"nan", "inf", "-inf", "yes", "off", "list", "mapping"}   # never a number of the field's type
# what each format refuses beyond _WRONG (argparse type=int takes no "0x10" or "1e30"; YAML and TOML read
# 0x10 and 1_000 as integers; a TOML float is no integer; every integer is held to 64 bits or a plan bound)
_REFUSED = {("bash", "int"): _WRONG | {"hex", "1e30", "1e-400", "2**200"}, ("bash", "float"): _WRONG | {"hex"},
            ("yaml", "int"): _WRONG | {"1e30", "2**200"}, ("yaml", "float"): set(_WRONG),
            ("toml", "int"): _WRONG | {"1e30", "1e-400", "2**200"}, ("toml", "float"): set(_WRONG)}
# Megatron flags of each type (argparse type=int / float), read or not read by the plan
BASH_INT_FLAGS = ["--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--num-query-groups",
                  "--kv-channels", "--max-position-embeddings", "--train-iters", "--lr-warmup-iters", "--rotary-base"]
BASH_FLOAT_FLAGS = ["--lr", "--min-lr", "--clip-grad", "--weight-decay", "--adam-beta1", "--adam-beta2",
                    "--init-method-std", "--norm-epsilon"]
YAML_KEYS = {"num_layers": "int", "hidden_size": "int", "seq_length": "int", "micro_batch_size": "int",
             "global_batch_size": "int", "tensor_model_parallel_size": "int", "kv_channels": "int", "lr": "float",
             "min_lr": "float", "clip_grad": "float", "adam_beta2": "float", "train_iters": "int",
             "rotary_base": "int", "lr_warmup_iters": "int"}
TOML_KEYS = {"local_batch_size": "int", "seq_len": "int", "steps": "int", "tensor_parallel_degree": "int",
             "pipeline_parallel_degree": "int", "lr": "float", "eps": "float", "max_norm": "float",
             "warmup_steps": "int", "profile_freq": "int", "log_freq": "int", "interval": "int", "freq": "int"}


def typed_value_cases(rng: random.Random, quick: bool) -> list[Case]:
    """Every special value (2**200, 1e30, nan, +-inf, -0, 1e-400, a word, a list, a mapping, hex,
    underscores, a negative) in the numeric fields of a launch script, a Megatron YAML, a Primus YAML
    and a TorchTitan TOML -- the modelled ones and the ones the plan does not read (lr, clip-grad,
    warm-up, logging).  A value the framework itself would refuse (a word, a list or a mapping where a
    number belongs, nan / inf, an integer past 64 bits or written as a float) must be refused."""
    out: list[Case] = []
    for bash_v, yaml_v, toml_v, tag in TYPED_VALUES:
        for flag in BASH_INT_FLAGS + BASH_FLOAT_FLAGS:
            kind = "int" if flag in BASH_INT_FLAGS else "float"
            data = re.sub((re.escape(flag) + r" [^\n]*").encode(), (flag + " " + shlex_quote(bash_v)).encode(), BASH,
                          count=1)
            out.append(Case(f"typed:bash:{flag}={tag}", "value", {"r.sh": data}, ["--project", "r.sh"] + TAIL,
                            expect_refusal=tag in _REFUSED["bash", kind]))
        for key, kind in YAML_KEYS.items():
            for fmt, base, name in (("yaml", YAML, "r.yaml"), ("primus", PRIMUS, "r.yaml")):
                pat = re.compile(rb"(?m)^(\s*)" + key.encode() + rb":[^\n]*")
                if not pat.search(base):
                    continue
                data = pat.sub(lambda m: m.group(1) + f"{key}: {yaml_v}".encode(), base, count=1)
                out.append(Case(f"typed:{fmt}:{key}={tag}", "value", {name: data}, ["--project", name] + TAIL,
                                expect_refusal=tag in _REFUSED["yaml", kind]))
        for key, kind in TOML_KEYS.items():
            pat = re.compile(rb"(?m)^" + key.encode() + rb" = [^\n]*")
            if not pat.search(TOML):
                continue
            data = pat.sub(f"{key} = {toml_v}".encode(), TOML, count=1)
            out.append(Case(f"typed:toml:{key}={tag}", "value", {"r.toml": data}, ["--project", "r.toml"] + TAIL,
                            expect_refusal=tag in _REFUSED["toml", kind]))
    return rng.sample(out, min(len(out), 120)) if quick else out


def shlex_quote(v: str) -> str:
    import shlex

    return shlex.quote(v)


def _in_bash(snippet: bytes, data: bytes = BASH) -> bytes:
    return data.replace(b"# Parallelism and batch\n", snippet + b"# Parallelism and batch\n", 1)


# bash constructs: (tag, script, must be refused)
BASH_CONSTRUCTS = [
    ("eval", _in_bash(b'eval "TP_SIZE=4"\n'), False),
    ("cmdsubst-number", BASH.replace(b"TP_SIZE=2", b"TP_SIZE=$(nproc)"), True),
    ("backtick-number", BASH.replace(b"TP_SIZE=2", b"TP_SIZE=`nproc`"), True),
    ("backtick-echo", BASH.replace(b"TP_SIZE=2", b"TP_SIZE=`echo 2`"), False),  # read as bash does: 2
    ("unset-env-number", BASH.replace(b"TP_SIZE=2", b"TP_SIZE=$NEVER_SET_TP"), True),
    ("unset-env-default", BASH.replace(b"TP_SIZE=2", b"TP_SIZE=${NEVER_SET_TP:-4}"), False),
    ("unset-env-required", BASH.replace(b"TP_SIZE=2", b"TP_SIZE=${NEVER_SET_TP:?set it}"), True),
    ("unterminated-single-quote", _in_bash(b"X='abc\n"), True),
    ("unterminated-backquote", _in_bash(b"X=`abc\n"), True),
    ("unterminated-cmdsubst", _in_bash(b"X=$(echo\n"), True),
    ("unterminated-array", _in_bash(b"ARR=(a b\n"), True),
    ("unterminated-brace", _in_bash(b"X=${A\n"), True),
    ("heredoc-unterminated", _in_bash(b"cat <<EOF\nhello\n"), True),
    ("heredoc-quoted-flags", _in_bash(b"cat <<'EOF'\n--num-layers 1\nEOF\n"), False),
    ("array-assoc", _in_bash(b"declare -A M=([tp]=4 [pp]=1)\nTP_SIZE=${M[tp]}\n"), False),
    ("array-negative-index", _in_bash(b"A=(1 2 4)\nTP_SIZE=${A[-1]}\n"), False),
    ("array-huge-index", _in_bash(b"A=(1 2 4)\nTP_SIZE=${A[99999999999999999999]}\n"), False),
    ("arith-2**200", _in_bash(b"TP_SIZE=$((2**200))\n"), False),
    ("arith-shift-70", _in_bash(b"TP_SIZE=$((1<<70))\n"), False),
    ("arith-mod-0", _in_bash(b"TP_SIZE=$((5%0))\n"), False),
    ("doubling-variable", _in_bash(b"V=ab\n" + b'V="$V$V"\n' * 60), True),
    ("doubling-array", _in_bash(b"A=(1 2)\n" + b'A=("${A[@]}" "${A[@]}")\n' * 40), True),
    ("long-pattern-cut", _in_bash(b"X=" + b"a" * 100_000 + b"\nY=${X%%*b}\nZ=${X##a*b}\n"), False),
    ("continuation-at-eof", BASH.rstrip(b"\n") + b" \\", False),
    ("continuation-newline-eof", BASH.rstrip(b"\n") + b" \\\n", False),
    ("cr-only-lines", BASH.replace(b"\n", b"\r"), True),
    ("non-utf8-comment", _in_bash(b"# caf\xe9\n"), True),
    ("source-dev-zero", _in_bash(b"source /dev/zero\n"), False),
    ("source-missing", _in_bash(b"source ./nope.sh\n"), False),
    ("read-stdin", _in_bash(b"read TP_SIZE\n"), False),
    ("while-read-dev-zero", _in_bash(b"while read x; do echo $x; done < /dev/zero\n"), False),
    ("exit-early", _in_bash(b"exit 1\n"), False),
    ("python-script", b"#!/usr/bin/env python\nimport os\nprint(1)\n", True),
    ("nnodes-0", BASH.replace(b"NUM_NODES=1", b"NUM_NODES=0"), True),
    ("nnodes-negative", BASH.replace(b"NUM_NODES=1", b"NUM_NODES=-1"), True),
    ("nproc-0", BASH.replace(b"GPUS_PER_NODE=8", b"GPUS_PER_NODE=0"), True),
]


def construct_cases() -> list[Case]:
    """Bash constructs a careless or hostile script holds (eval, heredocs, command substitutions,
    arrays, unset variables, unterminated quotes, a line continuation at the end of the file, a
    variable or array that doubles itself), TorchTitan TOMLs with missing sections, wrappers without
    a recipe, and Primus ``extends`` cycles longer than two."""
    out = [Case(f"construct:bash:{tag}", "structure", {"r.sh": data}, ["--project", "r.sh"] + TAIL,
                expect_refusal=bad) for tag, data, bad in BASH_CONSTRUCTS]

    def drop(section: str) -> bytes:
        return re.sub((r"(?ms)^\[" + re.escape(section) + r"\]\n.*?(?=^\[|\Z)").encode(), b"", TOML)

    tomls = [(f"missing-[{sec}]", drop(sec), sec == "model") for sec in
             ("model", "training", "parallelism", "job", "activation_checkpoint", "compile", "optimizer")]
    tomls += [("empty", b"", True), ("comments-only", b"# nothing\n", True), ("only-job", b'[job]\ndescription = "x"\n', True),
              ("model-unknown", TOML.replace(b'name = "llama3"', b'name = "gpt5"'), True),
              ("flavor-unknown", TOML.replace(b'flavor = "8B"', b'flavor = "9000B"'), True),
              ("flavor-path", TOML.replace(b'flavor = "8B"', b'flavor = "../../etc/passwd"'), True),
              ("name-module", TOML.replace(b'name = "llama3"', b'name = "os.path"'), True),
              ("components-int", TOML.replace(b'components = ["model", "loss"]', b"components = 1"), True),
              ("checkpoint-enable-string", TOML.replace(b"enable = false", b'enable = "false"', 1), True),
              ("datetime", TOML.replace(b"seq_len = 8192", b"seq_len = 1979-05-27T07:32:00Z"), True)]
    out += [Case(f"construct:toml:{tag}", "structure", {"r.toml": data}, ["--project", "r.toml"] + TAIL,
                 expect_refusal=bad) for tag, data, bad in tomls]
    wrappers = [("no-recipe", b'[cluster]\ngpu = "h100-sxm"\n'), ("recipe-without-path", b"[recipe]\n"),
                ("self", b'[recipe]\npath = "w.primus.toml"\n'), ("empty", b""),
                ("two-wrappers", b'[recipe]\npath = "v.primus.toml"\n'), ("to-empty-toml", b'[recipe]\npath = "e.toml"\n')]
    for tag, data in wrappers:
        out.append(Case(f"construct:wrapper:{tag}", "structure",
                        {"w.primus.toml": data, "v.primus.toml": b'[recipe]\npath = "w.primus.toml"\n', "e.toml": b""},
                        ["--project", "w.primus.toml"] + TAIL, expect_refusal=True))
    for tag, data in (("env-default-5000-digits", PRIMUS.replace(b"${PRIMUS_TP:1}", b"${PRIMUS_TP:" + b"9" * 5000 + b"}")),
                      ("lr-list", PRIMUS.replace(b"      train_iters: 50\n", b"      train_iters: 50\n      lr: [1]\n")),
                      ("lr-nan", PRIMUS.replace(b"      train_iters: 50\n", b"      train_iters: 50\n      lr: .nan\n"))):
        out.append(Case(f"construct:primus:{tag}", "structure", {"r.yaml": data}, ["--project", "r.yaml"] + TAIL,
                        expect_refusal=True))
    chain = {"r.yaml": b"extends: [a.yaml]\n", "a.yaml": b"extends: [b.yaml]\n", "b.yaml": b"extends: [r.yaml]\n"}
    out.append(Case("construct:extends:3-cycle", "structure", chain, ["--project", "r.yaml"] + TAIL, expect_refusal=True))
    long_chain = {"r.yaml": b"extends: [e0.yaml]\n", "e300.yaml": EXTENDS_BASE,
                  **{f"e{i}.yaml": f"extends: [e{i + 1}.yaml]\n".encode() for i in range(300)}}
    out.append(Case("construct:extends:300-long", "structure", long_chain, ["--project", "r.yaml"] + TAIL,
                    expect_refusal=True))
    diamond = {"r.yaml": b"extends: [d0.yaml]\n", "d30.yaml": b"extends: [base.yaml]\n", "base.yaml": EXTENDS_BASE,
               **{f"d{i}.yaml": f"extends: [d{i + 1}.yaml, d{i + 1}.yaml]\n".encode() for i in range(30)}}
    out.append(Case("construct:extends:doubling-diamond", "structure", diamond, ["--project", "r.yaml"] + TAIL,
                    expect_refusal=True))
    out.append(Case("construct:extends:cycle-through-dotdot", "structure", {"r.yaml": b"extends: [sub/../r.yaml]\n"},
                    ["--project", "r.yaml"] + TAIL, setup=lambda d: (d / "sub").mkdir(), expect_refusal=True))
    return out


def cli_path_cases() -> list[Case]:
    """Empty path or name flags (``--out ""`` must not mean the default path), a --primus-root that is
    no folder, --gpu spelled almost right, and the exit status of a command run after ``--`` (its
    own status, 128 + N for a signal, 127 / 126 for a missing / not executable program)."""
    tune = ["--tune", "r.sh", "--dry-run", "--json"]
    out = [Case(f"cli:{' '.join(a)[:60]}", "argv", {"r.sh": BASH}, a, expect_refusal=True) for a in (
        tune + ["--out", ""], tune + ["--out", "t.sh", "--log", ""], tune + ["--llm", "", "--out", "t.sh"],
        ["--project", "r.sh", "--dry-run", "--primus-root", "/nonexistent"],
        ["--project", "r.sh", "--dry-run", "--gpu", "H10"], ["--project", "r.sh", "--dry-run", "--gpu", " "],
        ["--project", "r.sh", "--dry-run", "--gpu-file", ""], ["--project", "r.sh", "--dry-run", "--trace", ""],
        ["--project", "r.sh", "--tune", "r.sh"], ["--project", "r.sh", "--dry-run", "--gpu-file", "r.sh"])]
    for cmd, rc in ((["sh", "-c", "exit 3"], 3), (["sh", "-c", "exit 255"], 255), (["sh", "-c", "kill -TERM $$"], 143),
                    (["sh", "-c", "kill -INT $$"], 130), (["sh", "-c", "kill -KILL $$"], 137),
                    (["sh", "-c", "kill -SEGV $$"], 139), (["true"], 0)):
        out.append(Case(f"passthrough:{' '.join(cmd)}", "argv", {"r.sh": BASH}, ["--"] + cmd, expect_rc=rc))
    return out


LLAMA70 = _read("megatron/llama3.1_70b.sh")
LLAMA70_ONE_GPU = re.sub(rb"(?m)^.*virtual-pipeline.*\n", b"", LLAMA70).replace(b"TP=${TP:-8}", b"TP=1") \
    .replace(b"PP=${PP:-4}", b"PP=1")
GPU_BARE = GPU_TOML.replace(b'vendor = "custom"\n', b"")


def _read_only(name: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        (d / name).write_text("keep me\n")
        os.chmod(d / name, 0o444)
    return setup


def _bad_interpreter(d: Path) -> None:
    (d / "bad.sh").write_text("#!/nonexistent/interpreter\n")
    (d / "bad.sh").chmod(0o755)


def edge_cases() -> list[Case]:
    """The seventh round's classes: outputs the permission bits call writable and the folder refuses
    (``/proc``, ``/sys``: root passes ``os.access`` everywhere), ``-`` and read-only files as outputs; GPU-file
    spellings the model would take for another (an ``arch`` or ``vendor`` it does not tell apart, a clock
    fraction of 1e-300); a tune with no plan that fits (must write nothing); passthrough commands that cannot
    start (an empty name, a missing ``#!`` interpreter); ``nohup`` (a SIGHUP ignored at start stays ignored:
    the command survives the hang-up); a command reading the terminal (kind ``tty``: on a pseudo-terminal)."""
    tune = ["--tune", "r.sh", "--dry-run", "--json"]
    out = [Case(f"edge:out:{' '.join(a)[-40:]}", "output", {"r.sh": BASH}, a, setup=setup, expect_refusal=True,
                expect_words=words) for a, setup, words in (
        (tune + ["--out", "/proc/t.sh"], None, ("--out='/proc/t.sh'",)),
        (tune + ["--out", "t.sh", "--log", "/sys/t.json"], None, ("--log='/sys/t.json'",)),
        (["--project", "r.sh", "--dry-run", "--report", "/proc/r.html"], None, ("--report='/proc/r.html'",)),
        (["--project", "r.sh", "--dry-run", "--report", "-"], None, ("--report='-'",)),
        (["--project", "r.sh", "--dry-run", "--trace", "-"], None, ("--trace='-'",)),
        (tune + ["--out", "t.sh"], _read_only("t.sh"), ("--out='t.sh'", "read-only")),
        (["--project", "r.sh", "--dry-run", "--report", "t.html"], _read_only("t.html"), ("--report='t.html'",)))]
    for tag, extra, words in (("arch-typo", b'arch = "hoper"\n', ("arch='hoper'",)),
                              ("arch-case", b'arch = "Hopper"\n', ("arch='Hopper'",)),
                              ("vendor-case", b'vendor = "NVIDIA"\n', ("vendor='NVIDIA'",)),
                              ("vendor-other", b'vendor = "intel"\n', ("vendor='intel'",)),
                              ("clock-tiny", b"sustained_clock_fraction = 1e-300\n", ("sustained_clock_fraction",)),
                              ("clock-zero", b"sustained_clock_fraction = 0\n", ("sustained_clock_fraction",))):
        out.append(Case(f"edge:gpu-file:{tag}", "value", {"r.sh": BASH, "g.toml": GPU_BARE + extra},
                        ["--project", "r.sh", "--gpu-file", "g.toml", "--gpu", "mygpu"] + TAIL, expect_refusal=True,
                        expect_words=("--gpu-file='g.toml'",) + words))
    for tag, data in (("bash", BASH.replace(b"--max-position-embeddings 131072", b"--max-position-embeddings 4096")),
                      ("yaml", re.sub(rb"(?m)^max_position_embeddings: .*$", b"max_position_embeddings: 4096", YAML))):
        name = "r.sh" if tag == "bash" else "r.yaml"
        out.append(Case(f"edge:max-position-below-seq:{tag}", "value", {name: data}, ["--project", name] + TAIL,
                        expect_refusal=True, expect_words=("--max-position-embeddings=4096",)))
    dup = PRIMUS.replace(b"      micro_batch_size: ${PRIMUS_MBS:4}\n",
                         b"      micro_batch_size: ${PRIMUS_MBS:4}\n      micro_batch_size: 2\n")
    out.append(Case("edge:primus-key-twice", "value", {"r.yaml": dup}, ["--project", "r.yaml"] + TAIL,
                    expect_words=("micro_batch_size: given twice",)))
    for tag, more in (("b&b", []), ("memory-certain", ["--memory-certain"]), ("planner", ["--planner"])):
        out.append(Case(f"edge:tune-no-fit:{tag}", "value", {"r.sh": LLAMA70_ONE_GPU},
                        ["--tune", "r.sh", "--dry-run", "--nodes", "1", "--gpus-per-node", "1", "--out", "t.sh",
                         "--report", "t.html", "--trace", "t.json"] + more, expect_refusal=True,
                        expect_words=("--tune=r.sh", "no plan fits")))
    # more local workers than cores: clamped (each worker is a fork of this process; 64 keeps the old code's
    # forks survivable, where the flag's bound 4,096 would not be)
    out.append(Case("edge:workers-64", "argv", {"r.sh": BASH}, ["--tune", "r.sh", "--dry-run", "--json", "--workers",
                                                                 "64", "--out", "t.sh"]))
    for cmd, rc in (([""], 127), (["./bad.sh"], 127), (["./nope.sh"], 127), (["."], 126)):
        out.append(Case(f"edge:passthrough:{cmd[0] or 'empty'}", "argv", {"r.sh": BASH}, ["--"] + cmd,
                        setup=_bad_interpreter, expect_rc=rc))
    out.append(Case("edge:nohup:passthrough", "nohup", {}, ["--", "sh", "-c", "sleep 1.5; echo alive"],
                    signal_at=0.8, signum=signal.SIGHUP, expect_rc=0, expect_out=b"alive"))
    out.append(Case("edge:nohup:project", "nohup", {"r.sh": BASH}, ["--project", "r.sh", "--dry-run", "--json"],
                    signal_at=0.05, signum=signal.SIGHUP, expect_rc=0, expect_out=b'"iteration_time_s"'))
    out.append(Case("edge:tty:passthrough-reads", "tty", {}, ["--", sys.executable, "-c", "print('got', input())"],
                    signal_at=1.5, typed=b"hello\n", expect_rc=0, expect_out=b"got hello"))
    out.append(Case("edge:tty:passthrough-ctrl-c", "tty", {}, ["--", "sh", "-c", "sleep 5; echo late"],
                    signal_at=1.5, typed=b"\x03", expect_rc=130))
    return out


def fanout_cases() -> list[Case]:
    """The eighth round's classes: bash whose function calls or sourced files fan out (each chain within
    the depth bound, 2^30 runs in all), arithmetic commands and ``let`` (a variable changed, not followed:
    said), TorchTitan keys and tables one or two letters from a JobConfig field and torchtitan 0.3 launch-line
    overrides naming no field (TorchTitan refuses them),
    a quoted word that says false for a Megatron YAML boolean, a flag value that starts with '-', and the
    standard streams (kind ``stream``: a closed stderr, a full stdout, a full stderr)."""
    out: list[Case] = []
    fan = {"r.sh": _in_bash(b"source ./a0.sh\n"), "a24.sh": b"X=1\n",
           **{f"a{i}.sh": f"source ./a{i + 1}.sh\nsource ./a{i + 1}.sh\n".encode() for i in range(24)}}
    calls = _in_bash(b"".join(f"f{i}() {{ f{i + 1}; f{i + 1}; }}\n".encode() for i in range(24)) + b"f24() { X=1; }\nf0\n")
    called = {"r.sh": _in_bash(b"bash ./a0.sh\n"), "a24.sh": b"X=1\n",
              **{f"a{i}.sh": f"bash ./a{i + 1}.sh\nbash ./a{i + 1}.sh\n".encode() for i in range(24)}}
    for tag, files in (("source", fan), ("function", {"r.sh": calls}), ("called-script", called)):
        out.append(Case(f"fan:bash:{tag}-fan-out", "structure", files, ["--project", "r.sh"] + TAIL,
                        expect_refusal=True, expect_words=("runs more than",)))
    for tag, snippet, words in (("arith-command", b"((TP_SIZE = X = 2))\n", ("arithmetic command",)),
                                ("let", b"let TP_SIZE=X=2\n", ("'let TP_SIZE=X=2' not evaluated",))):
        out.append(Case(f"fan:bash:{tag}", "structure", {"r.sh": _in_bash(snippet)}, ["--project", "r.sh"] + TAIL,
                        expect_words=words))
    for tag, data, words in (
            ("key", TOML.replace(b"tensor_parallel_degree = 1", b"tensor_parallel_degree = 1\ntensor_paralel_degree = 8"),
             ("did you mean parallelism.tensor_parallel_degree",)),
            ("table", TOML + b"\n[paralelism]\ntensor_parallel_degree = 8\n", ("did you mean [parallelism]",)),
            ("training-key", TOML.replace(b"local_batch_size = 1", b"local_batchsize = 2"), ("local_batch_size",))):
        out.append(Case(f"fan:toml:typo-{tag}", "value", {"r.toml": data}, ["--project", "r.toml"] + TAIL,
                        expect_refusal=True, expect_words=words))
    # torchtitan 0.3 launch lines: tyro (ConfigManager.parse_args) refuses an override naming no field
    titan = ["--project", "--dry-run", "--json", "--", "torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train",
             "--module", "llama3", "--config", "llama3_8b"]
    for tag, extra in (("space", ["--parallelism.tensor_paralel_degree", "8"]),
                       ("equals", ["--parallelism.tensor_paralel_degree=8"])):
        out.append(Case(f"fan:argv:titan-typo-{tag}", "argv", {}, titan + extra, expect_refusal=True,
                        expect_words=("--parallelism.tensor_paralel_degree",
                                      "did you mean --parallelism.tensor_parallel_degree")))
    out.append(Case("fan:titan-run-train:typo", "value",
                    {"r.sh": b"MODULE=llama3 CONFIG=llama3_8b ./run_train.sh --parallelism.tensor_paralel_degree=8\n"},
                    ["--project", "r.sh"] + TAIL, expect_refusal=True,
                    expect_words=("did you mean --parallelism.tensor_parallel_degree",)))
    for word in (b"'false'", b'"no"', b"'off'", b"'0'"):
        out.append(Case(f"fan:yaml:bf16={word.decode()}", "value",
                        {"r.yaml": re.sub(rb"(?m)^bf16: .*$", b"bf16: " + word, YAML)}, ["--project", "r.yaml"] + TAIL,
                        expect_refusal=True, expect_words=("--bf16=", "unquoted")))
    out.append(Case("fan:primus:bf16='false'", "value", {"r.yaml": PRIMUS.replace(b"    bf16: true", b"    bf16: 'false'")},
                    ["--project", "r.yaml"] + TAIL, expect_refusal=True, expect_words=("bf16='false'",)))
    for dash in ("\u2014", "\u2013-", "\u2010-", "\u2212-", "\uff0d-"):
        data = BASH.replace(b"    --bf16\n", f"    {dash}bf16\n".encode(), 1)
        out.append(Case(f"fan:bash:lookalike-dash-U+{ord(dash[0]):04X}", "value", {"r.sh": data},
                        ["--project", "r.sh"] + TAIL, expect_refusal=True, expect_words=("write --bf16",)))
        out.append(Case(f"fan:argv:lookalike-dash-U+{ord(dash[0]):04X}", "argv", {},
                        ["--project", "--dry-run", "--json", "--"] + ARGV[:-4] + [dash + "bf16"] + ARGV[-4:],
                        expect_refusal=True, expect_words=("write --bf16",)))
    out.append(Case("fan:argv:value-starting-with-dash", "argv", {"r.sh": BASH},
                    ["--project", "r.sh", "--dry-run", "--train-tokens", "-5T"], expect_refusal=True,
                    expect_words=("write --train-tokens=-5T",)))
    for tag, argv, shell, rc, words in (
            ("stderr-closed", ["--project", "r.sh", "--dry-run", "--json"], "2>&-", 0, ()),
            ("stderr-full-tune", ["--tune", "r.sh", "--dry-run", "--out", "t.sh"], "2>/dev/full", 0, ()),
            ("stdout-full", ["--project", "r.sh", "--dry-run"], ">/dev/full", 2, ("stdout: cannot write",)),
            ("stdout-full-json", ["--project", "r.sh", "--dry-run", "--json"], ">/dev/full", 2,
             ("stdout: cannot write",)),
            # robust8: a stdout the process was started without (>&-) dropped the answer and exited 0
            ("stdout-closed", ["--project", "r.sh", "--dry-run", "--json"], ">&-", 2, ("stdout is closed",)),
            ("stdout-closed-tune", ["--tune", "r.sh", "--dry-run", "--out", "t.sh"], ">&-", 2, ("stdout is closed",)),
            ("stdout-closed-passthrough", ["--", "sh", "-c", "exit 3"], ">&-", 3, ())):
        if os.path.exists("/dev/full") or "full" not in shell:
            out.append(Case(f"fan:stream:{tag}", "stream", {"r.sh": BASH}, argv, expect_rc=rc, expect_words=words,
                            typed=shell.encode()))
    return out


def _run_stream(case: Case, d: Path, timeout: float) -> tuple[Optional[int], float, str, str]:
    """``primus-launch ARGV REDIRECT`` under bash (``typed`` holds the redirection: ``2>&-``, ``>/dev/full``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(case.env)
    import shlex

    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "primus_launch", *case.argv]) + " " + case.typed.decode()
    t0 = time.monotonic()
    try:
        p = subprocess.run(["bash", "-c", cmd], cwd=d, env=env, capture_output=True, timeout=timeout,
                           start_new_session=True)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = None, e.stdout or b"", e.stderr or b""
    return rc, time.monotonic() - t0, out.decode(errors="replace"), err.decode(errors="replace")


def _run_nohup(case: Case, d: Path, timeout: float) -> tuple[Optional[int], float, str, str]:
    """``nohup primus-launch ARGV``: SIGHUP ignored from the start, then sent (to primus-launch alone, as a
    terminal's hang-up reaches the foreground job's leader) after ``signal_at`` seconds."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "primus_launch", *case.argv], cwd=d, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    time.sleep(case.signal_at or 0.0)
    if proc.poll() is None:
        proc.send_signal(case.signum)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc: Optional[int] = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    _reap_group(proc.pid)
    return rc, time.monotonic() - t0, out.decode(errors="replace"), err.decode(errors="replace")


def run_in_terminal(argv: list[str], typed: bytes, after_s: float, limit_s: float, *,
                    env: Optional[dict] = None, cwd: Optional[Path] = None) -> tuple[Optional[int], bytes]:
    """Run ``argv`` as the foreground job of a new pseudo-terminal and type ``typed`` on it after ``after_s``
    seconds; (exit code or None when killed at ``limit_s``, the terminal's output: stdout and stderr share it).
    ``tests/test_bad_input_edges.py`` runs its passthrough cases through it too."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:
        try:
            if cwd is not None:
                os.chdir(cwd)
            os.execvpe(argv[0], argv, env if env is not None else dict(os.environ))
        finally:
            os._exit(127)
    out, rc, sent, t0 = b"", None, False, time.monotonic()
    try:
        while time.monotonic() - t0 < limit_s:
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    out += os.read(fd, 4096)
                except OSError:
                    pass
            if not sent and time.monotonic() - t0 > after_s:
                os.write(fd, typed)
                sent = True
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                rc = os.waitstatus_to_exitcode(status)
                break
        else:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        os.close(fd)
    _reap_group(pid)
    return rc, out


def _run_tty(case: Case, d: Path, timeout: float) -> tuple[Optional[int], float, str, str]:
    """``primus-launch ARGV`` as the foreground job of a new pseudo-terminal; ``typed`` is typed on it after
    ``signal_at`` seconds.  The terminal's output is returned as stdout (stdout and stderr share it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.monotonic()
    rc, out = run_in_terminal([sys.executable, "-m", "primus_launch", *case.argv], case.typed, case.signal_at or 0.0,
                              timeout, env=env, cwd=d)
    return rc, time.monotonic() - t0, out.decode(errors="replace"), ""


NEMO = (ROOT / "tests" / "test_adapter_nemo_yaml.py").read_text().split('CONFIG = """\\\n')[1].split('"""')[0]
LONG_NAME = "x" * 5000


def structured_cases() -> list[Case]:
    """The robust7 classes (``scripts/fuzz_structured.py``: hypothesis over parsed recipes): NeMo
    interpolations that double, cycle, nest past the bound or feed inf / nan / a mapping to a resolver or a
    string; file names a recipe or a flag writes that the kernel cannot take (a NUL, 5,000 characters) in
    every place one is read; ``[collectives.<gpu>]`` fields of the wrong type or far outside their range; a
    tune on a ``--gpu-file`` GPU (its tuned recipe must read back) and a TorchTitan tune on a hyphenated GPU."""
    out: list[Case] = []
    doubling = "  d0: x\n" + "".join(f'  d{i + 1}: "${{.d{i}}}${{.d{i}}}"\n' for i in range(30))
    for tag, old, new, words in (
            ("doubling", "hidden_size: 1024", "hidden_size: ${.d30}", ("expand to more than",)),
            ("cycle", "num_layers: 8", "num_layers: ${.num_layers}", ("in a cycle",)),
            ("deep", "${multiply:8, 16}", "${multiply:" * 40 + "1,1" + "}, 1" * 39 + "}", ("nested deeper",)),
            ("ceil-inf", "${divide_floor:${.hidden_size}, 3}", "${divide_floor:1e999, 3}", ("finite numbers",)),
            ("floor-nan", "${divide_floor:${.hidden_size}, 3}", "${divide_floor:nan, 3}", ("finite numbers",)),
            ("mul-overflow", "${multiply:8, 16}", "${multiply:1e308, 1e308}", ("a finite number is needed",)),
            ("index-5000-digits", "num_layers: 8", "num_layers: ${training.model.data.data_prefix." + "9" * 5000 + "}",
             ("does not hold",)),
            ("mapping-in-string", "name: megatron_llama", "name: x${training.model}", ("names a mapping",))):
        text = NEMO.replace(old, new, 1)
        if tag == "doubling":
            text = text.replace("  num_layers: 8\n", "  num_layers: 8\n" + doubling)
        out.append(Case(f"structured:nemo:{tag}", "structure", {"n.yaml": text.encode()}, ["--project", "n.yaml"] + TAIL,
                        expect_refusal=True, expect_words=words))
    exp = ("work_group: a\nuser_name: b\nexp_name: c\nworkspace: ./o\nmodules:\n  pre_trainer:\n    framework: "
           "megatron\n    config: pre_trainer.yaml\n    model: {}\n    overrides:\n      seq_length: 128\n")

    def primus_root(d: Path) -> None:
        (d / "primus/configs/models/megatron").mkdir(parents=True)
        (d / "primus/configs/modules/megatron").mkdir(parents=True)
        (d / "primus/configs/modules/megatron/pre_trainer.yaml").write_text("bf16: true\n")

    names = [("extends-nul", {"r.yaml": b'extends:\n  - "a\\0b.yaml"\n'}, ["--project", "r.yaml"], "extends="),
             ("extends-long", {"r.yaml": f"extends:\n  - {LONG_NAME}.yaml\n".encode()}, ["--project", "r.yaml"],
              "extends="),
             ("preset-nul", {"e.yaml": exp.format('"a\\0b"').encode()}, ["--project", "e.yaml", "--primus-root", "."],
              "modules.*.model="),
             ("preset-long", {"e.yaml": exp.format(LONG_NAME).encode()}, ["--project", "e.yaml", "--primus-root", "."],
              "modules.*.model="),
             ("wrapper-path-long", {"w.primus.toml": f'[recipe]\npath = "{LONG_NAME}.sh"\n'.encode()},
              ["--project", "w.primus.toml"], "recipe.path="),
             ("wrapper-root-long", {"w.primus.toml": f'[recipe]\npath = "r.sh"\nprimus_root = "{LONG_NAME}"\n'.encode()},
              ["--project", "w.primus.toml"], "recipe.primus_root="),
             ("primus-root-long", {}, ["--project", "r.sh", "--primus-root", LONG_NAME], "--primus-root="),
             ("overlap-cfg-long", {"r.sh": BASH.replace(b"--bf16", b"--bf16 --tp-comm-overlap --tp-comm-overlap-cfg "
                                                        + LONG_NAME.encode() + b".yaml")},
              ["--project", "r.sh"], "--tp-comm-overlap-cfg="),
             ("job-config-long", {}, ["--project", "--dry-run", "--json", "--", "torchrun", "--nproc-per-node", "8", "-m",
                                      "torchtitan.train", "--job.config_file", LONG_NAME + ".toml"], "--job.config_file=")]
    for tag, files, argv, word in names:
        full = argv if "--" in argv else argv + TAIL
        out.append(Case(f"structured:name:{tag}", "reference", {"r.sh": BASH, **files}, full, setup=primus_root,
                        expect_refusal=True, expect_words=(word,)))
    out.append(Case("structured:bash:cut-5000-digits", "structure",
                    {"r.sh": BASH.replace(b"TP_SIZE=2", b"TP_SIZE=$(echo 2 3 | cut -d' ' -f " + b"9" * 5000 + b")")},
                    ["--project", "r.sh"] + TAIL, expect_refusal=True, expect_words=("--tensor-model-parallel-size=",)))
    out.append(Case("structured:name:source-long", "reference",
                    {"r.sh": _in_bash(f"source ./{LONG_NAME}\n".encode())}, ["--project", "r.sh"] + TAIL))
    for tag, body, word in (("list", "e_ar = [1, 2]", "e_ar=[1, 2]"), ("table", "l_g = {a = 1}", "l_g="),
                            ("points-pair", "points = {all_reduce = [[1]]}", "points.all_reduce="),
                            ("points-empty", "points = {all_reduce = []}", "points.all_reduce="),
                            ("points-int", "points = 3", "points=3"), ("rdma-int", "e_rdma = 3", "e_rdma=3"),
                            ("bw-tiny", "up_bw = 1e-300", "up_bw=1e-300"), ("latency-huge", "l_ar = 1e15", "l_ar=")):
        out.append(Case(f"structured:collectives:{tag}", "value",
                        {"r.sh": BASH, "c.toml": f"[collectives.h100-sxm]\n{body}\n".encode()},
                        ["--project", "r.sh", "--gpu-file", "c.toml"] + TAIL, expect_refusal=True,
                        expect_words=(f"collectives.h100-sxm.{word}",)))
    for tag, name in (("space", "my gpu"), ("newline", "x\\nTP=1"), ("equals", "a=b")):
        out.append(Case(f"structured:gpu-name:{tag}", "value",
                        {"r.sh": BASH, "g.toml": GPU_TOML.replace(b"[gpu.mygpu]", f'[gpu."{name}"]'.encode())},
                        ["--project", "r.sh", "--gpu-file", "g.toml"] + TAIL, expect_refusal=True,
                        expect_words=("a GPU name is one word",)))
    for out_name in (".", "/", "x/..", "r.sh/."):
        out.append(Case(f"structured:out:{out_name}", "output", {"r.sh": BASH},
                        ["--tune", "r.sh", "--out", out_name] + TAIL, expect_refusal=True,
                        expect_words=(f"--out={out_name!r}",)))
    out.append(Case("structured:tune:gpu-file-gpu", "value", {"r.sh": BASH, "g.toml": GPU_TOML},
                    ["--tune", "r.sh", "--gpu-file", "g.toml", "--gpu", "mygpu", "--out", "t.sh", "--max-work", "400"]
                    + TAIL))
    out.append(Case("structured:tune:titan-hyphenated-gpu", "value", {"r.toml": TOML},
                    ["--tune", "r.toml", "--gpu", "a100-sxm-40gb", "--out", "t.toml", "--max-work", "400"] + TAIL))
    return out


# ------------------------------------------------------------------- robust8: terminal controls, builtins
#: characters a terminal acts on instead of showing (primus_launch.streams): no output may hold one raw
ACTIVE_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
CONTROLS = {"csi-clear": "\x1b[2J", "osc-title": "\x1b]0;pwned\x07", "cr-spoof": "\rprimus-launch: all good",
            "newline": "\nprimus-launch: error: fake", "bel": "\x07", "del": "\x7f", "c1-nel": "\x85",
            "bidi-rlo": "\u202e", "line-sep": "\u2028", "vt": "\x0b"}


def terminal_cases() -> list[Case]:
    """Recipe text that reaches a note, a warning or an error line with characters a terminal acts on:
    a TorchTitan key and table, a Megatron YAML key and value, a bash flag word and value, the recipe's own
    file name, a flag value shown without quotes (``--ray-address``), a wrapper's recipe path.  Each case
    must end as the others do (exit 0 / one error line) with no such character written raw (``run_case``
    checks every case's output for them)."""
    out: list[Case] = []
    for tag, c in CONTROLS.items():
        toml_c = json.dumps(c)[1:-1]  # a TOML basic string takes JSON's escapes (\u001b, \n, \r)
        for fmt, files, argv in (
                ("toml-key", {"r.toml": TOML.replace(b"[training]", f'[training]\n"k{toml_c}x" = 1'.encode(), 1)},
                 ["--project", "r.toml"]),
                ("toml-table", {"r.toml": TOML + f'\n["t{toml_c}"]\nx = 1\n'.encode()}, ["--project", "r.toml"]),
                ("yaml-key", {"r.yaml": YAML + f'\n"k{toml_c}x": 1\n'.encode()}, ["--project", "r.yaml"]),
                ("yaml-value", {"r.yaml": re.sub(rb"(?m)^num_layers: .*$", lambda m: f'num_layers: "3{toml_c}2"'.encode(), YAML)},
                 ["--project", "r.yaml"]),
                ("bash-flag", {"r.sh": BASH.replace(b"    --bf16\n", f"    --bf16 '--x{c}y'\n".encode(), 1)},
                 ["--project", "r.sh"]),
                ("bash-value", {"r.sh": BASH.replace(b"TP_SIZE=2", f"TP_SIZE='2{c}'".encode(), 1)}, ["--project", "r.sh"]),
                ("file-name", {f"r{c}.sh".replace("\x00", ""): BASH}, ["--project", f"r{c}.sh"]),
                ("wrapper-path", {"w.primus.toml": f'[recipe]\npath = "r{toml_c}.sh"\n'.encode()},
                 ["--project", "w.primus.toml"]),
                ("flag-value", {"r.sh": BASH}, ["--project", "r.sh", "--ray-address", f"h{c}"])):
            if fmt == "file-name" and ("\n" in c or "/" in c):
                continue
            out.append(Case(f"r8:terminal:{fmt}:{tag}", "value", files, argv + TAIL))
    out.append(Case("r8:terminal:explain-text", "value",
                    {"r.sh": BASH.replace(b"    --bf16\n", b"    --bf16 '--x\x1b[2Jy'\n", 1)},
                    ["--project", "r.sh", "--dry-run", "--explain"]))
    # true / false where a --gpu-file GPU takes a number (read as 1 / 0 by pydantic's lax mode): every numeric field
    from primus_launch.projection.hardware.gpus import GPUSpec

    for key, info in GPUSpec.model_fields.items():
        if info.annotation is str or key == "name":
            continue
        text = re.sub(rb"(?m)^" + key.encode() + rb" = .*\n", b"", GPU_TOML) + f"{key} = true\n".encode()
        out.append(Case(f"r8:gpu-file:{key}=true", "value", {"r.sh": BASH, "g.toml": text},
                        ["--project", "r.sh", "--gpu-file", "g.toml", "--gpu", "mygpu"] + TAIL, expect_refusal=True,
                        expect_words=(f"gpu.mygpu.{key}=True: a number",)))
    # bash builtins that set a variable: not evaluated here, so the note says so (the value read is the old one)
    for tag, snippet in (("printf-v", b'printf -v TP_SIZE "%d" 4\n'), ("read-herestring", b'read -r TP_SIZE <<< "4"\n'),
                         ("read-array", b'IFS=, read -ra PARTS <<< "4,1"\nTP_SIZE=${PARTS[0]}\n'),
                         ("mapfile", b"mapfile -t LINES < /dev/null\n"), ("readarray", b"readarray -t LINES < /dev/null\n"),
                         ("getopts", b'while getopts "t:" o; do TP_SIZE=$OPTARG; done\n')):
        data = BASH.replace(b"SEQ_LENGTH=8192\n", b"SEQ_LENGTH=8192\n" + snippet, 1)
        unset = tag == "read-array"  # PARTS is then unset: the flag has no value (refused, naming it)
        out.append(Case(f"r8:builtin:{tag}", "structure", {"r.sh": data}, ["--project", "r.sh"] + TAIL,
                        expect_refusal=unset,
                        expect_words=("--tensor-model-parallel-size=None",) if unset else ("not evaluated",)))
    return out


# ------------------------------------------------------------------- robust9: ranges, Bridge integers, own files
def _own_module(name: str) -> Callable[[Path], None]:
    """A setup that writes ``name`` (a Python module) in the case's folder and imports it into this process, so
    that the forked CLI runs with it among its modules: a file of the running program, which no output may
    replace (the repo's own modules are never named: a regression would overwrite them)."""
    def setup(d: Path) -> None:
        import importlib.machinery
        import importlib.util

        (d / name).write_text("VALUE = 1\n")
        mod_name = f"r9_own_{d.name.replace('-', '_')}"  # any suffix: a tuned launch script's name can be a module
        loader = importlib.machinery.SourceFileLoader(mod_name, str(d / name))
        spec = importlib.util.spec_from_loader(mod_name, loader)
        assert spec is not None
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        sys.modules[mod_name] = mod
    return setup


def robust9_cases() -> list[Case]:
    """The robust9 classes (``--only r9:``): launcher node ranges whose MIN exceeds the MAX or starts at 0
    (torchrun ``--nnodes 4:1`` / ``0:4``, Slurm ``4-2``; ``torch.distributed.run.config_from_args`` refuses them,
    they projected 1 / 4 nodes); Megatron-Bridge integers the reader converts itself (``model.seq_length``,
    ``num_query_groups``, ``dataset.seq_length``: nan, 1e400, a list, a mapping were internal errors) and a
    mapping where a Megatron-LM number belongs (noted as 'not read': the default was projected); Primus
    ``recompute_layer_ids`` of floats (1.5 read as 1, .inf an internal error); an output naming a file of the
    running program (a module it imported: ``--report primus_launch/__init__.py`` replaced the tool's code);
    ``--project ''`` / ``--project -``."""
    out: list[Case] = []
    for v, words in ((b"4:1", ("--nnodes='4:1'",)), (b"0:4", ("--nnodes='0:4'",)), (b"4-2", ("--nnodes='4-2'",)),
                     (b"1:4", ())):
        out.append(Case(f"r9:nnodes-range:bash={v.decode()}", "value",
                        {"r.sh": BASH.replace(b"NUM_NODES=1", b"NUM_NODES=" + v)}, ["--project", "r.sh"] + TAIL,
                        expect_refusal=bool(words), expect_words=words))
    for v, words in (("gpu", ()), ("auto", ()), ("cpu", ("--nproc_per_node='cpu'",)), ("2:8", ("--nproc_per_node='2:8'",))):
        out.append(Case(f"r9:nproc:bash={v}", "value", {"r.sh": BASH.replace(b"GPUS_PER_NODE=8", b"GPUS_PER_NODE=" + v.encode())},
                        ["--project", "r.sh"] + TAIL, expect_refusal=bool(words),
                        expect_words=words or ("one process per GPU of the node",)))
    for v in ("4:1", "0:2"):
        cmd = list(ARGV)
        cmd[1:3] = ["--nnodes", v, "--nproc-per-node", "8"]
        out.append(Case(f"r9:nnodes-range:argv={v}", "argv", {}, ["--project", "--dry-run", "--json", "--"] + cmd,
                        expect_refusal=True, expect_words=(f"--nnodes={v!r}",)))
    for key, pat in (("model.seq_length", rb"(?m)^(  seq_length: )4096$"), ("dataset.seq_length", rb"(?m)^(  seq_length: )4096$"),
                     ("num_query_groups", rb"(?m)^(  num_query_groups: ).*$"),
                     ("expert_model_parallel_size", rb"(?m)^(  expert_model_parallel_size: ).*$")):
        hits = list(re.finditer(pat, BRIDGE))
        if not hits:
            continue
        m = hits[-1] if key == "model.seq_length" else hits[0]
        for v in (b".nan", b"1e400", b"[1]", b"{a: 1}", b"true"):
            data = BRIDGE[:m.start()] + m.group(1) + v + BRIDGE[m.end():]
            out.append(Case(f"r9:bridge:{key}={v.decode()}", "value", {"b.yaml": data}, ["--project", "b.yaml"] + TAIL,
                            expect_refusal=True))
    ids = PRIMUS.replace(b"      train_iters: 50\n", b"      train_iters: 50\n      recompute_granularity: full\n"
                         b"      recompute_method: null\n      recompute_layer_ids: XX\n")
    for v in (b"[1.5]", b"[.inf]", b"[.nan]", b"[true]"):
        out.append(Case(f"r9:primus:recompute_layer_ids={v.decode()}", "value", {"r.yaml": ids.replace(b"XX", v)},
                        ["--project", "r.yaml"] + TAIL, expect_refusal=True, expect_words=("recompute_layer_ids=",)))
    for flag in ("--report", "--trace"):
        out.append(Case(f"r9:out:own-module{flag}", "output", {"r.sh": BASH}, ["--project", "r.sh", *TAIL, flag, "own.py"],
                        setup=_own_module("own.py"), expect_refusal=True, expect_words=("file of the running program",)))
    out.append(Case("r9:out:own-module-tune-out", "output", {"r.sh": BASH},
                    ["--tune", "r.sh", "--dry-run", "--json", "--max-work", "300", "--out", "own.sh"],
                    setup=_own_module("own.sh"), expect_refusal=True, expect_words=("--out='own.sh'", "running program")))
    for v in ("", "-"):
        out.append(Case(f"r9:cli:--project={v!r}", "argv", {"r.sh": BASH}, ["--project", v, "--dry-run"],
                        expect_refusal=True, expect_words=(f"--project={v!r}",)))
    for name, near in (("mi300", "mi300x"), ("b20", "b200")):
        out.append(Case(f"r9:cli:--gpu={name}", "argv", {"r.sh": BASH}, ["--project", "r.sh", "--dry-run", "--gpu", name],
                        expect_refusal=True, expect_words=(f"cluster.gpu={name!r}", f"did you mean {near}?")))
    out.append(Case("r9:bash:crlf", "byte", {"r.sh": BASH.replace(b"\n", b"\r\n")}, ["--project", "r.sh"] + TAIL,
                    expect_words=("line(s) of r.sh end in CR LF",)))
    for v in ("", ",,"):  # no knob named: the tune searched none, without a word
        out.append(Case(f"r9:cli:--allow={v!r}", "argv", {"r.sh": BASH},
                        ["--tune", "r.sh", "--dry-run", "--out", "t.sh", "--allow", v], expect_refusal=True,
                        expect_words=(f"--allow={v!r}",)))
    out.append(Case("r9:cli:--allow=' fp8 '", "argv", {"r.sh": BASH},
                    ["--tune", "r.sh", "--dry-run", "--json", "--out", "t.sh", "--max-work", "300", "--allow", " fp8 "]))
    return out


def robust10_cases(rng: random.Random, quick: bool) -> list[Case]:
    """The robust10 classes (``--only r10:``): every Megatron-LM flag of the bash recipe abbreviated (its last two
    characters cut: Megatron-LM's parser has ``allow_abbrev=False``, the reader noted an unknown flag and projected
    the default); every switch followed by a word (``--sequence-parallel false``: Megatron-LM's parser has no
    positional arguments, the switch was projected on) and every one-value flag followed by a second one; each
    line-ending backslash of the recipe followed by a blank (bash passes " " and ends the command); torchrun's own
    abbreviations (``--nproc-per 4``, read as torch reads them) and an ambiguous one (``--nproc``); bash ``$'...'``
    and ``declare -i`` values; primus-launch's own options abbreviated (``--gpus 64`` read as --gpus-per-node)."""
    sys.path.insert(0, str(ROOT))
    from primus_launch.adapters import megatron_flags

    out: list[Case] = []
    text = BASH.decode()
    flags = list(dict.fromkeys(re.findall(r"(?m)^\s+(--[a-z][a-z0-9-]*)", text)))
    switches = [f for f in flags if (megatron_flags.by_option().get(f) is not None
                                     and not megatron_flags.by_option()[f].takes_value)]
    valued = [f for f in flags if f not in switches and megatron_flags.by_option().get(f) is not None
              and megatron_flags.by_option()[f].nargs in ("", "1")]
    cut = [f for f in flags if megatron_flags.by_option().get(f) is not None and megatron_flags.abbreviated(f[:-2])]
    for f in (rng.sample(cut, min(6, len(cut))) if quick else cut):
        data = re.sub(rf"(?m)^(\s+){re.escape(f)}(?=[\s=])", lambda m: m.group(1) + f[:-2], text, count=1)
        out.append(Case(f"r10:abbrev:{f[:-2]}", "value", {"r.sh": data.encode()}, ["--project", "r.sh"] + TAIL,
                        expect_refusal=True, expect_words=(f[:-2], "allow_abbrev=False")))
    for f in (rng.sample(switches, min(4, len(switches))) if quick else switches):
        for w in (("false",) if quick else ("false", "0", "no", "True")):
            data = re.sub(rf"(?m)^(\s+){re.escape(f)}$", lambda m: f"{m.group(1)}{f} {w}", text, count=1)
            out.append(Case(f"r10:switch-word:{f}={w}", "value", {"r.sh": data.encode()}, ["--project", "r.sh"] + TAIL,
                            expect_refusal=True, expect_words=(f, repr(w))))
    for f in (rng.sample(valued, min(3, len(valued))) if quick else valued):
        data = re.sub(rf"(?m)^(\s+{re.escape(f)} \S+)$", r"\1 7", text, count=1)
        if data != text:
            out.append(Case(f"r10:extra-word:{f}", "value", {"r.sh": data.encode()}, ["--project", "r.sh"] + TAIL,
                            expect_refusal=True, expect_words=(f, "'7'")))
    quoted = text.replace("${MODEL_ARGS[@]}", '"${MODEL_ARGS[@]}"')
    for f in [f for f in flags if re.search(rf"(?m)^    {re.escape(f)} \S+$", text) and f in text.split("MODEL_ARGS=(")[1]
              .split(")")[0]][:2 if quick else 6]:  # a flag and its value quoted into one word
        data = re.sub(rf"(?m)^    ({re.escape(f)} \S+)$", r'    "\1"', quoted, count=1)
        out.append(Case(f"r10:quoted-pair:{f}", "value", {"r.sh": data.encode()}, ["--project", "r.sh"] + TAIL,
                        expect_refusal=True, expect_words=(f"argument='{f} ", "blank")))
    conts = [m.start() for m in re.finditer(r"\\\n", text)]
    for at in (rng.sample(conts, min(2, len(conts))) if quick else conts):
        out.append(Case(f"r10:backslash-blank@{at}", "byte", {"r.sh": (text[:at] + "\\ \n" + text[at + 2:]).encode()},
                        ["--project", "r.sh"] + TAIL, expect_refusal=True, expect_words=("argument=' '",)))
    launch = b"--nproc_per_node $GPUS_PER_NODE"
    for opt, words in ((b"--nproc-per 8", ()), (b"--nproc_per 8", ()), (b"--nproc 8", ("--nproc", "ambiguous"))):
        out.append(Case(f"r10:torchrun:{opt.decode()}", "value", {"r.sh": BASH.replace(launch, opt)},
                        ["--project", "r.sh"] + TAIL, expect_refusal=bool(words), expect_words=words))
    out.append(Case("r10:torchrun:standalone-2-nodes", "value",
                    {"r.sh": BASH.replace(b"--nnodes $NUM_NODES", b"--nnodes 2 --standalone")}, ["--project", "r.sh"] + TAIL,
                    expect_refusal=True, expect_words=("--nnodes='2'", "--standalone")))
    for opt, words in (("--nnode", ()), ("--nproc", ("--nproc", "ambiguous")), ("--n", ("--n", "ambiguous"))):
        cmd = list(ARGV)
        cmd[1:3] = [opt, "2"]
        out.append(Case(f"r10:torchrun:argv:{opt}", "argv", {}, ["--project", "--dry-run", "--json", "--"] + cmd,
                        expect_refusal=bool(words), expect_words=words))
    for line in (b"TP_SIZE=$'2'", b"TP_SIZE=$'\\x32'", b"declare -i TP_SIZE=1+1", b"typeset -i TP_SIZE=4/2",
                 b"declare -i TP_SIZE=2/0", b"readonly TP_SIZE=2\nTP_SIZE=3", b"declare -r TP_SIZE=2\nunset TP_SIZE",
                 b"TP_SIZE=2\nunset -f TP_SIZE", b"TP_SIZE=1\n((TP_SIZE *= 2))", b"TP_SIZE=1\nlet TP_SIZE++",
                 b"TP_SIZE=2\n((TP_SIZE /= 0))", b"N=TP_VAL\nTP_VAL=2\nTP_SIZE=${!N}", b"X=2\nTP_SIZE=${X/2/4}"):
        out.append(Case(f"r10:bash:{line.decode()}", "value", {"r.sh": BASH.replace(b"TP_SIZE=2\n", line + b"\n", 1)},
                        ["--project", "r.sh"] + TAIL, expect_refusal=line.endswith(b"/0") or b"${X/" in line,
                        expect_words=("--tensor-model-parallel-size='2/0'",) if line.endswith(b"/0") else
                        ("TP_SIZE is readonly",) if b"-r " in line or b"readonly" in line else ()))
    from primus_launch.adapters.megatron_choices import CHOICES

    for f in [f for f in valued if f in CHOICES]:  # each choice flag of the recipe: its value upper-cased
        m = re.search(rf"(?m)^(\s+{re.escape(f)} )(\S+)$", text)
        if m and m.group(2).upper() != m.group(2):
            data = text[:m.start(2)] + m.group(2).upper() + text[m.end(2):]
            out.append(Case(f"r10:choice:{f}={m.group(2).upper()}", "value", {"r.sh": data.encode()},
                            ["--project", "r.sh"] + TAIL, expect_refusal=True, expect_words=(f, "did you mean")))
    for f in (rng.sample(switches, min(3, len(switches))) if quick else switches):
        data = re.sub(rf"(?m)^(\s+){re.escape(f)}$", lambda m: f"{m.group(1)}{f}=true", text, count=1)
        out.append(Case(f"r10:switch=value:{f}", "value", {"r.sh": data.encode()}, ["--project", "r.sh"] + TAIL,
                        expect_refusal=True, expect_words=(f, "ignored explicit argument")))
    tt = b"--compile.enable "
    for opt, words in ((b"--compile.enable=False ", ("--compile.enable='False'",)),
                       (b"--compile.enable=True ", ("--compile.enable='True'",))):
        out.append(Case(f"r10:titan-launch:{opt.decode().strip()}", "value", {"r.sh": BASH_TITAN.replace(tt, opt)},
                        ["--project", "r.sh"] + TAIL, expect_refusal=True, expect_words=words))
    job = ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--job.config_file", "r.toml"]
    for more, words in ((["--compile.no-enable"], ()), (["--compile.enable=False"], ("--compile.enable='False'",)),
                        (["--compile.enable", "false"], ("--compile.enable='false'",)),
                        (["--training.steps", "10", "20"], ("unexpected argument '20'",)),
                        (["--parallelism.tensor_parallel", "2"], ("did you mean parallelism.tensor_parallel_degree",))):
        out.append(Case(f"r10:titan-job:{' '.join(more)}", "argv", {"r.toml": TOML},
                        ["--project", "--dry-run", "--json", "--"] + job + more, expect_refusal=bool(words),
                        expect_words=words))
    def fd_link(d: Path) -> None:  # /dev/stdout's kind of link, in the case's folder
        os.symlink("/proc/self/fd/1", d / "fd1")

    def dangling(d: Path) -> None:
        os.symlink("nowhere/x", d / "gone")

    for flag in ("--report", "--trace"):
        for name, setup, words in (("fd1", fd_link, "names an open file of this process"),
                                   ("gone", dangling, "which does not exist")):
            out.append(Case(f"r10:out:{flag}={name}", "output", {"r.sh": BASH}, ["--project", "r.sh"] + TAIL + [flag, name],
                            setup=setup, expect_refusal=True, expect_words=(f"{flag}='{name}'", words)))
    for flag, whole in (("--gpus", "--gpus-per-node"), ("--node", "--nodes"), ("--dry", "--dry-run")):
        args = ["--project", "r.sh", "--dry-run", flag, "8"] if flag != "--dry" else ["--project", "r.sh", flag]
        out.append(Case(f"r10:cli:{flag}", "argv", {"r.sh": BASH}, args, expect_refusal=True,
                        expect_words=(flag, whole)))
    return out


# ------------------------------------------------------------------- robust11: names, caps, blanks, words after --
def robust11_cases() -> list[Case]:
    """The robust11 classes (``--only r11:``): a bound of the plan's own type broken by a Megatron value (``--kv-channels
    0``, YAML ``tensor_model_parallel_size: 0``, Bridge ``virtual_pipeline_model_parallel_size: 0``) or a TorchTitan one
    past the plan's bound (``selective_ac_option``, ``seq_len``): the line names the field as written, not the plan's
    (``head_dim=0``, ``tp=0``, ``vpp=0``, ``training.recompute.num_layers``); a power cap below any board's minimum
    (``--power-limit-w 0.7``: 1e-300 W projected 5e300 s), by flag or ``--gpu-file``; blank output paths (``--report ' '``
    wrote a file named ' '); words after ``--`` following a YAML / TOML recipe (dropped without a word) and ``--json
    --emit`` (two documents on stdout); a recipe file named like an option (``--project -x.sh``); a tune with no fit
    under a ``--memory-margin`` (the line names the margin); a script that runs several different training commands (a
    loop over settings: the last was projected without a word; now a note names the flags that differ)."""
    out: list[Case] = []
    bridge = BRIDGE.decode()
    for tag, name, data, words in (
            ("bash:kv-channels=0", "r.sh", BASH.replace(b"--kv-channels 128", b"--kv-channels 0"), "--kv-channels=0"),
            ("bash:ep=0", "r.sh", BASH.replace(b"    --bf16\n", b"    --bf16 --expert-model-parallel-size 0\n"),
             "--expert-model-parallel-size=0"),
            ("bash:vstages=0", "r.sh", BASH.replace(b"    --bf16\n", b"    --bf16 --num-virtual-stages-per-pipeline-rank 0\n"),
             "--num-virtual-stages-per-pipeline-rank=0"),
            ("yaml:tp=0", "r.yaml", YAML.replace(b"  tensor_model_parallel_size: 2", b"  tensor_model_parallel_size: 0"),
             "--tensor-model-parallel-size=0"),
            ("yaml:cp=-3", "r.yaml", YAML.replace(b"  context_parallel_size: 1", b"  context_parallel_size: -3"),
             "--context-parallel-size=-3"),
            ("primus:ep=0", "r.yaml", PRIMUS.replace(b"expert_model_parallel_size: 1", b"expert_model_parallel_size: 0"),
             "expert_model_parallel_size=0"),
            ("bridge:vpp=0", "b.yaml", bridge.replace("virtual_pipeline_model_parallel_size: 2",
                                                       "virtual_pipeline_model_parallel_size: 0").encode(),
             "model.virtual_pipeline_model_parallel_size=0"),  # named as the config writes it since 94a4f17
            ("toml:selective_ac_option", "r.toml", TOML.replace(b'selective_ac_option = "op"',
                                                                 b'selective_ac_option = "99999999999"'),
             "activation_checkpoint.selective_ac_option=99999999999"),
            ("toml:seq_len", "r.toml", TOML.replace(b"seq_len = 8192", b"seq_len = 99999999999"),
             "training.seq_len=99999999999"),
            ("toml:expert_parallel_degree", "r.toml", _read("torchtitan/deepseek_v3_671b.toml").replace(
                b"expert_parallel_degree = 64", b"expert_parallel_degree = 3"), "parallelism.expert_parallel_degree=3")):
        out.append(Case(f"r11:named:{tag}", "value", {name: data}, ["--project", name] + TAIL, expect_refusal=True,
                        expect_words=(words,)))
    for w in ("0.7", "1e-300", "139"):
        out.append(Case(f"r11:power-cap:{w}", "argv", {"r.sh": BASH}, ["--project", "r.sh", *TAIL, "--power-limit-w", w],
                        expect_refusal=True, expect_words=("--power-limit-w=", "at least 140 W")))
    out.append(Case("r11:power-cap:tune", "argv", {"r.sh": BASH},
                    ["--tune", "r.sh", *TAIL, "--out", "t.sh", "--power-limit-w", "3"], expect_refusal=True,
                    expect_words=("--power-limit-w=3.0",)))
    out.append(Case("r11:power-cap:gpu-file", "value", {"r.sh": BASH, "g.toml": GPU_TOML + b"tdp_watts = 700\npower_limit_w = 5\n"},
                    ["--project", "r.sh", "--gpu-file", "g.toml", "--gpu", "mygpu"] + TAIL, expect_refusal=True,
                    expect_words=("gpu.mygpu.power_limit_w=5.0", "at least 140 W")))
    for flag, v in (("--report", " "), ("--trace", "\t"), ("--gpu-file", "  "), ("--primus-root", " ")):
        out.append(Case(f"r11:blank:{flag}", "output", {"r.sh": BASH}, ["--project", "r.sh", *TAIL, flag, v],
                        expect_refusal=True, expect_words=(f"{flag}={v!r}", "blank")))
    for flag in ("--out", "--log"):
        more = ["--out", "t.sh"] if flag == "--log" else []
        out.append(Case(f"r11:blank:tune{flag}", "output", {"r.sh": BASH}, ["--tune", "r.sh", *TAIL, *more, flag, " "],
                        expect_refusal=True, expect_words=(f"{flag}=' '", "blank")))
    # `--report=~/r.html`: bash expands no tilde after `--flag=` (nor in quotes): a folder named "~" was made here
    for flag, v in (("--report", "~/r.html"), ("--trace", "~/t.json"), ("--gpu-file", "~/g.toml")):
        out.append(Case(f"r11:tilde:{flag}", "output", {"r.sh": BASH}, ["--project", "r.sh", *TAIL, f"{flag}={v}"],
                        expect_refusal=True, expect_words=(f"{flag}={v!r}", "'~' was not expanded")))
    out.append(Case("r11:tilde:tune--out", "output", {"r.sh": BASH}, ["--tune", "r.sh", *TAIL, "--out=~/t.sh"],
                    expect_refusal=True, expect_words=("--out='~/t.sh'", "'~' was not expanded")))
    for mode, name, data in (("--project", "r.yaml", YAML), ("--project", "r.toml", TOML), ("--tune", "r.yaml", YAML),
                             ("--project", "w.primus.toml", WRAPPER)):
        files = {name: data, "r.sh": BASH}
        out.append(Case(f"r11:words-after:{mode}:{name}", "argv", files, [mode, name, *TAIL, "--", "torchrun", "x.py"],
                        expect_refusal=True, expect_words=("-- torchrun x.py", "not a launch script")))
    out.append(Case("r11:words-after:script", "argv", {"r.sh": BASH}, ["--project", "r.sh", *TAIL, "--", "/ckpt", "/tb"]))
    out.append(Case("r11:json-emit", "argv", {"r.sh": BASH}, ["--project", "r.sh", *TAIL, "--emit", "torchrun"],
                    expect_refusal=True, expect_words=("--emit=torchrun", "--json")))
    out.append(Case("r11:dash-named-recipe", "argv", {"-x.sh": BASH}, ["--project", "-x.sh", "--dry-run"],
                    expect_refusal=True, expect_words=("write ./-x.sh",)))
    # a key given twice: Megatron-Bridge's yaml.safe_load keeps the last (noted, as for Megatron-LM / Primus YAMLs); a
    # --gpu-file YAML field twice is refused, as TOML's parser refuses it
    twice = BRIDGE.replace(b"\n  num_layers: 48\n", b"\n  num_layers: 48\n  num_layers: 24\n", 1)
    out.append(Case("r11:twice:bridge", "structure", {"b.yaml": twice}, ["--project", "b.yaml"] + TAIL,
                    expect_words=("num_layers: given twice", "the last is read")))
    out.append(Case("r11:twice:gpu-yaml", "structure",
                    {"r.sh": BASH, "g.yaml": GPU_YAML.replace(b"    hbm_bw:", b"    hbm_bytes: 1\n    hbm_bw:")},
                    ["--project", "r.sh", "--gpu-file", "g.yaml", "--gpu", "mygpu"] + TAIL, expect_refusal=True,
                    expect_words=("--gpu-file='g.yaml'", "hbm_bytes: given twice")))
    # a stdout that cannot encode a character of the recipe's (PYTHONIOENCODING=ascii; a C locale without UTF-8 mode):
    # the answer printing the recipe's name was "internal error: UnicodeEncodeError", exit 70
    for tag, argv in (("project", ["--project", "\u00fc.sh", "--dry-run"]),
                      ("explain", ["--project", "\u00fc.sh", "--dry-run", "--explain"]),
                      ("tune", ["--tune", "\u00fc.sh", "--dry-run", "--max-work", "300"])):
        out.append(Case(f"r11:stream:ascii-stdout:{tag}", "stream", {"\u00fc.sh": BASH}, argv, expect_rc=0,
                        env={"PYTHONIOENCODING": "ascii"}))
    # arithmetic over a value of the run (a command's output, $RANDOM) read it as 0: `N=$(nproc); TP=$((N / 4 + 1))`
    # projected TP 1 without a word; $RANDOM itself was "has no value (an unset variable ...)"
    for tag, line, words in (("cmdsub-arith", b"N=$(nproc)\nTP_SIZE=$((N / 4 + 1))", ("--tensor-model-parallel-size=",
                                                                                       "a command's output")),
                             ("random-arith", b"TP_SIZE=$((RANDOM % 2 + 1))", ("--tensor-model-parallel-size=", "$RANDOM")),
                             ("random", b"TP_SIZE=$RANDOM", ("reads $RANDOM, a different value on each run",)),
                             ("pid", b"TP_SIZE=$$", ("reads $$",))):
        out.append(Case(f"r11:bash:{tag}", "value", {"r.sh": BASH.replace(b"TP_SIZE=2\n", line + b"\n", 1)},
                        ["--project", "r.sh"] + TAIL, expect_refusal=True, expect_words=words))
    out.append(Case("r11:bash:random-port", "value",  # a value of the run no Megatron number reads: projected as before
                    {"r.sh": BASH.replace(b"MASTER_PORT=${MASTER_PORT:-6000}", b"MASTER_PORT=$((RANDOM % 1000 + 6000))")},
                    ["--project", "r.sh"] + TAIL))
    # --yaml-cfg: Megatron-LM loads the file and ignores the command's other flags (arguments.py parse_args: load_yaml);
    # a script's flags were projected without a word, and the YAML recipe's own documented launch line was refused as
    # "--num-layers=None: required"
    out.append(Case("r11:yaml-cfg:script", "value", {"r.sh": BASH.replace(b"    --bf16\n", b"    --bf16 --yaml-cfg c.yaml\n", 1),
                                                     "c.yaml": YAML}, ["--project", "r.sh"] + TAIL, expect_refusal=True,
                    expect_words=("--yaml-cfg='c.yaml'", "--project c.yaml")))
    out.append(Case("r11:yaml-cfg:command", "argv", {"c.yaml": YAML},
                    ["--project", *TAIL, "--", "torchrun", "--nproc-per-node", "8", "pretrain_gpt.py", "--yaml-cfg", "c.yaml"],
                    expect_refusal=True, expect_words=("--yaml-cfg='c.yaml'", "ignores the command's other flags")))
    # an #SBATCH count sbatch refuses, with the script's own default taking over (NUM_NODES=${SLURM_NNODES:-1}): silent
    slurm = BASH.replace(b"NUM_NODES=1", b"NUM_NODES=${SLURM_NNODES:-1}")
    for v in (b"0", b"abc", b"2-1", b"99999999999"):
        out.append(Case(f"r11:sbatch:--nodes={v.decode()}", "value",
                        {"r.sbatch": slurm.replace(b"#!/bin/bash\n", b"#!/bin/bash\n#SBATCH --nodes=" + v + b"\n", 1)},
                        ["--project", "r.sbatch"] + TAIL,
                        expect_words=(f"'#SBATCH --nodes={v.decode()}' is not a count sbatch takes",)))
    i = BASH.index(b"torchrun ")  # a sweep: bash runs every training command, one is projected (said in a note)
    sweep = BASH[:i] + b"for GBS in 64 128 256; do\n" + BASH[i:].rstrip(b"\n") + b" --global-batch-size $GBS\ndone\n"
    out.append(Case("r11:bash:sweep-loop", "structure", {"r.sh": sweep}, ["--project", "r.sh"] + TAIL,
                    expect_words=("3 training commands", "--global-batch-size 256 (of 64, 128, 256)")))
    # a tune on a cluster no layout fits (13 x 7 = 91 GPUs: TP 7 splits no 32 heads, DP 7 / 13 / 91 no batch of 128,
    # PP 91 more stages than 32 layers; 3 GPUs fit since uneven pipeline stages are offered, tune17): the recipe's own
    # error alone read as if only its layout had been tried
    out.append(Case("r11:tune-no-layout", "argv", {"r.sh": BASH},
                    ["--tune", "r.sh", *TAIL, "--out", "t.sh", "--nodes", "13", "--gpus-per-node", "7"],
                    expect_refusal=True,
                    expect_words=("must divide world size 91", "no layout the tune starts from is legal there either")))
    out.append(Case("r11:tune-no-fit-margin", "value", {"r.sh": BASH},
                    ["--tune", "r.sh", *TAIL, "--out", "t.sh", "--max-work", "300", "--memory-margin", "0.99",
                     "--report", "t.html"], expect_refusal=True,
                    expect_words=("no plan fits", "--memory-margin=0.99", "a smaller --memory-margin")))
    return out


def robust12_cases() -> list[Case]:
    """The robust12 classes (``--only r12:``): a bound or rule of the plan's model section named by the plan's field
    (``model.num_experts=99999999``; now ``--num-experts`` / the Primus key); a Primus value from the environment
    (``PRIMUS_TP=1e400`` shown as 'inf', the variable unnamed); NeMo ``${oc.env:X}`` / ``${oc.decode:..}`` ("needs a
    whole number"); ``--project r.sh/`` read as r.sh (bash: "Not a directory"); a node past the GPU's reference server
    (``--gpus-per-node 16`` on h100-sxm priced as one 16-GPU NVLink domain, now noted); a script that exits before its
    training command; a virtual-stage count named ``--num-layers-per-virtual-pipeline-stage`` with the count; a Primus
    ``modules:`` naming no framework or a module with no model."""
    out: list[Case] = []
    for tag, name, data, words in (
            ("bash:num-experts", "r.sh", BASH.replace(b"    --bf16\n", b"    --bf16 --num-experts 99999999\n"),
             ("--num-experts=99999999",)),
            ("bash:router-groups", "r.sh", BASH.replace(b"    --bf16\n", b"    --bf16 --num-experts 8 --moe-router-topk 2 "
                                                         b"--moe-router-num-groups 3 --moe-router-group-topk 1\n"),
             ("--moe-router-num-groups=3",)),
            ("primus:router-groups", "r.yaml", PRIMUS.replace(
                b"      expert_model_parallel_size: 1\n", b"      expert_model_parallel_size: 1\n      num_experts: 8\n"
                b"      moe_router_topk: 2\n      moe_router_num_groups: 3\n      moe_router_group_topk: 1\n"),
             ("moe_router_num_groups=3",)),
            ("vstages", "r.sh", BASH.replace(b"    --bf16\n", b"    --bf16 --num-virtual-stages-per-pipeline-rank 2\n"),
             ("--num-virtual-stages-per-pipeline-rank=2",)),
            ("layers-per-vstage", "r.sh", BASH.replace(b"    --bf16\n", b"    --bf16 --num-layers-per-virtual-pipeline-stage 4\n"),
             ("--num-layers-per-virtual-pipeline-stage=4", "8 virtual stages")),
            ("layout-vstages", "r.sh", BASH.replace(b"    --bf16\n", b"    --bf16 --pipeline-model-parallel-layout 'Et*16|t*16L'\n"),
             ("--pipeline-model-parallel-layout='Et*16|t*16L'",)),
            ("exit-first", "r.sh", b"#!/bin/bash\nexit 1\n" + BASH, ("'exit 1'", "before any training command")),
            ("primus:modules-null", "r.yaml", PRIMUS.split(b"modules:")[0] + b"modules:\n  pre_trainer: null\n",
             ("modules.pre_trainer=None",)),
            ("primus:no-model", "r.yaml", PRIMUS.split(b"modules:")[0] + b"modules:\n  pre_trainer:\n    framework: megatron\n",
             ("modules.pre_trainer: no model",))):
        out.append(Case(f"r12:named:{tag}", "value", {name: data}, ["--project", name] + TAIL, expect_refusal=True,
                        expect_words=words))
    for tag, old, new, words in (
            ("oc-env", "num_layers: 8", "num_layers: ${oc.env:NL,8}", ("resolver ${oc.env:NL,8} not evaluated",)),
            ("oc-env-no-default", "micro_batch_size: 1", "micro_batch_size: ${oc.env:MBS}", ("no default",)),
            ("oc-decode", "tensor_model_parallel_size: 2", "tensor_model_parallel_size: ${oc.decode:${oc.env:TP}}",
             ("resolver ${oc.decode:${oc.env:TP}} not evaluated",))):
        out.append(Case(f"r12:nemo:{tag}", "value", {"n.yaml": NEMO.replace(old, new, 1).encode()},
                        ["--project", "n.yaml"] + TAIL, expect_refusal=True, expect_words=words))
    for v, words in (("abc", "PRIMUS_TP='abc'"), ("1e400", "PRIMUS_TP='1e400'"), ("0", "PRIMUS_TP='0'")):
        out.append(Case(f"r12:primus-env:{v}", "stream", {"r.yaml": PRIMUS}, ["--project", "r.yaml"] + TAIL, expect_rc=2,
                        expect_words=("tensor_model_parallel_size: ${PRIMUS_TP:1}", words), env={"PRIMUS_TP": v}))
    for tag, argv in (("project", ["--project", "r.sh/"]), ("project-dot", ["--project", "r.sh/."]),
                      ("tune", ["--tune", "r.sh/", "--out", "t.sh"]), ("gpu-file", ["--project", "r.sh", "--gpu-file", "g.toml/"])):
        out.append(Case(f"r12:slash:{tag}", "argv", {"r.sh": BASH, "g.toml": b"[gpu.h100-sxm]\ntdp_watts = 700\n"},
                        argv + TAIL, expect_refusal=True, expect_words=("Not a directory",)))
    out.append(Case("r12:node-past-server", "argv", {"r.sh": BASH}, ["--project", "r.sh", *TAIL, "--gpus-per-node", "16"],
                    expect_words=("reference server has 8 GPUs", "domain of 16 GPUs")))
    return out


def robust13_cases() -> list[Case]:
    """The robust13 classes (``--only r13:``): an option given twice with different values -- a Megatron-LM flag in a
    script or after ``--`` (``--num-layers 32 ... --num-layers 16``), a torchrun option (``--nnodes 1 --nnodes 2``), a
    TorchTitan override on a 0.3 launch line or a job-TOML command -- was read as the last (argparse's rule) without a
    word, where a YAML key given twice is noted: now a note names every value; a Megatron-Bridge ``run_config.yaml``
    switch quoted (``sequence_parallel: 'false'``: Bridge's instantiate keeps the string, true in Python) was read as
    false: now refused as the Megatron-LM, Primus and NeMo readers refuse it; an output naming a tokenizer file the
    recipe names but the run does not read (``--report tokenizer.model`` under ``--vocab-size``, a ``--merge-file``, a
    file of a Hugging Face tokenizer folder, TorchTitan's ``model.hf_assets_path`` / ``tokenizer_path``) replaced it:
    now refused as an input of the run; ``torchrun --nnodes 4`` under ``#SBATCH --nodes=2`` projected 4 nodes without a
    word (the job never starts): now noted."""
    out: list[Case] = []
    titan = ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train"]
    tp2, tp4 = ["--parallelism.tensor_parallel_degree", "2"], ["--parallelism.tensor_parallel_degree=4"]
    for tag, files, argv, words in (
            ("bash:megatron", {"r.sh": BASH.replace(b"    --bf16\n", b"    --bf16 --num-layers 16\n", 1)}, ["--project", "r.sh"],
             ("--num-layers given 2 times with different values ('32', '16')", "'16' is read")),
            ("bash:torchrun", {"r.sh": BASH.replace(b"--nnodes $NUM_NODES", b"--nnodes $NUM_NODES --nnodes 2", 1)},
             ["--project", "r.sh"], ("--nnodes given 2 times with different values ('1', '2')",)),
            ("argv:megatron", {}, ["--project", "--dry-run", "--json", "--", *ARGV, "--tensor-model-parallel-size", "4"],
             ("--tensor-model-parallel-size given 2 times with different values ('2', '4')",)),
            ("argv:titan-0.3", {}, ["--project", "--dry-run", "--json", "--", *titan, "--module", "llama3", "--config",
                                    "llama3_8b", *tp2, *tp4],
             ("--parallelism.tensor_parallel_degree given 2 times with different values ('2', '4')",)),
            ("argv:titan-job-toml", {"c.toml": TOML}, ["--project", "--dry-run", "--json", "--", *titan,
                                                       "--job.config_file", "c.toml", *tp2, *tp4],
             ("--parallelism.tensor_parallel_degree given 2 times with different values ('2', '4')",)),
            ("bash:titan-script", {"r.sh": b"NGPU=8 MODULE=llama3 CONFIG=llama3_8b ./run_train.sh "
                                           b"--parallelism.tensor_parallel_degree 2 --parallelism.tensor_parallel_degree=4\n"},
             ["--project", "r.sh"], ("--parallelism.tensor_parallel_degree given 2 times",)),
            ("bash:same-value", {"r.sh": BASH.replace(b"    --bf16\n", b"    --bf16 --num-layers 32 --bf16\n", 1)},
             ["--project", "r.sh"], ())):
        full = argv if "--" in argv else argv + TAIL
        out.append(Case(f"r13:repeated:{tag}", "value", files, full, expect_words=words))
    for key, line in (("model.sequence_parallel", b"  sequence_parallel: true"),
                      ("optimizer.use_distributed_optimizer", b"  use_distributed_optimizer: true"),
                      ("mixed_precision.bf16", b"  bf16: true")):
        for word in (b"'false'", b"'no'", b"'0'", b"'None'", b"'true'", b"''"):
            data = BRIDGE.replace(line, line.replace(b"true", word), 1)
            if key.startswith("optimizer."):  # the optimizer section's (the ddp section's comes first)
                at = BRIDGE.rindex(line)
                data = BRIDGE[:at] + line.replace(b"true", word) + BRIDGE[at + len(line):]
            bad = word not in (b"'true'", b"''")
            out.append(Case(f"r13:bridge-bool:{key}={word.decode()}", "value", {"b.yaml": data},
                            ["--project", "b.yaml"] + TAIL, expect_refusal=bad,
                            expect_words=(f"{key}={word.decode()}", "unquoted") if bad else ()))
    # torchrun --nnodes past the #SBATCH allocation: the rendezvous waits for nodes the job lacks (noted, not refused:
    # sbatch --nodes on the command line wins over the header); within it, or with --nodes given here: no note
    head = b"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n"
    for tag, nodes, extra, words in (("past", b"4", [], ("the #SBATCH header allocates 2",)), ("within", b"2", [], ()),
                                     ("flag", b"4", ["--nodes", "4"], ())):
        out.append(Case(f"r13:sbatch-nodes:{tag}", "value", {"r.sh": head + BASH.replace(b"NUM_NODES=1", b"NUM_NODES=" + nodes)},
                        ["--project", "r.sh", *TAIL, *extra], expect_words=words))
    # a file the recipe's training run reads but this run does not (a SentencePiece .model under --vocab-size, a
    # --merge-file): --report / --trace / --out over it replaced the user's tokenizer
    tok = BASH.replace(b"--tokenizer-model meta-llama/Llama-3.1-8B", b"--tokenizer-model tok.model --vocab-size 128256")
    for tag, files, argv, victim, flag in (
            ("report:tokenizer-model", {"r.sh": tok, "tok.model": b"\x0a\x0bsentencepiece"}, ["--project", "r.sh", *TAIL],
             "tok.model", "--report"),
            ("trace:merge-file", {"r.sh": BASH.replace(b"    --bf16\n", b"    --bf16 --merge-file m.txt\n", 1),
                                  "m.txt": b"#version: 0.2\nG t\n"}, ["--project", "r.sh", *TAIL], "m.txt", "--trace"),
            ("tune-out:tokenizer-model", {"r.sh": tok.replace(b"tok.model", b"tok.sh"), "tok.sh": b"x\n"},
             ["--tune", "r.sh", *TAIL, "--max-work", "200"], "tok.sh", "--out"),
            ("report:hf-folder-file", {"r.sh": tok.replace(b"tok.model", b"hf"), "hf/tokenizer.json": b"{}",
                                       "hf/special_tokens_map.json": b"{}"}, ["--project", "r.sh", *TAIL],
             "hf/special_tokens_map.json", "--report"),
            ("report:titan-hf-assets", {"r.toml": TOML.replace(b'"./assets/hf/Llama-3.1-8B"', b'"hf"'),
                                        "hf/tokenizer.json": b"{}"}, ["--project", "r.toml", *TAIL], "hf/tokenizer.json",
             "--report"),
            ("trace:titan-tokenizer-path", {"r.toml": TOML.replace(b"[model]", b'[model]\ntokenizer_path = "t.model"', 1),
                                            "t.model": b"x"}, ["--project", "r.toml", *TAIL], "t.model", "--trace")):
        out.append(Case(f"r13:run-file:{tag}", "output", files, argv + [flag, victim], expect_refusal=True,
                        expect_words=(f"{flag}={victim!r}", "input of this run")))
    return out


def titanjob_cases() -> list[Case]:
    """The titanjob classes (``--only tj:``): an option of a TorchTitan 0.3 launch line (and of ``run_train.sh`` in a
    script) in a section the plan does not read -- optimizer, lr_scheduler, checkpoint, metrics, profiler, validator,
    dataloader -- was never checked: ``--optimizer.lr=abc`` (no such option: its lr is
    ``--optimizer.param-groups.0.optimizer-kwargs.lr``), ``--checkpoint.intervall 10``, ``--lr-scheduler.warmup-steps
    1.5``, ``--validation.enable`` (the v0.2 name) were accepted and ignored, where torchtitan's parser exits: now
    refused in one line by torchtitan's own option table (bundled); the values its configs refuse when built
    (``--checkpoint.keep-latest-k 1``) too; a v0.2 job TOML's misspelt key of a neutral table (``[checkpoint]
    intervall``) refused as its ConfigManager refuses it.  Valid options are accepted."""
    out: list[Case] = []
    titan = ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "llama3", "--config", "llama3_8b"]
    for words, expect in (
            ("--optimizer.lr=abc", ("--optimizer.lr", "'abc'")), ("--optimizer.lr=", ("--optimizer.lr", "''")),
            ("--optimizer.param-groups.0.optimizer-kwargs.lr=abc", ("optimizer_kwargs.lr='abc'", "a number")),
            ("--optimizer.param-groups.0.optimizer-kwargs.lr=", ("optimizer_kwargs.lr=''",)),
            ("--optimizer.implementation fast", ("implementation='fast'", "foreach")),
            ("--optimizer.param-groups.0.optimizer-kwargs.betas 0.9 x", ("betas='x'",)),
            ("--lr-scheduler.warmup-steps 1.5", ("warmup_steps='1.5'", "an integer")),
            ("--lr-scheduler.decay-type exp", ("decay_type='exp'", "cosine")),
            ("--checkpoint.intervall 10", ("--checkpoint.intervall", "--checkpoint.interval?")),
            ("--checkpoint.interval abc", ("interval='abc'",)), ("--checkpoint.async-mode yes", ("async_mode='yes'",)),
            ("--checkpoint.enable=true", ("--checkpoint.enable",)), ("--checkpoint.keep-latest-k 1", ("keep-latest-k=1",)),
            ("--metrics.log-freq=", ("log_freq=''",)), ("--metrics.log_frequency 10", ("log_frequency",)),
            ("--validation.enable", ("'validation'", "--validator.enable")), ("--validator.freq x", ("freq='x'",)),
            ("--comm.init-timeout-seconds 1e3", ("init_timeout_seconds='1e3'",)),
            ("--profiler.profile-freq ten", ("profile_freq='ten'",)), ("--dump-folder", ("--dump-folder",)),
            ("--job.dump-folder /tmp/x", ("'job'",))):
        out.append(Case(f"tj:argv-bad:{words}", "value", {}, ["--project", *TAIL, "--", *titan, *words.split()],
                        expect_refusal=True, expect_words=expect))
    for words in ("--optimizer.param-groups.0.optimizer-kwargs.lr 3e-4", "--optimizer.implementation foreach",
                  "--lr-scheduler.warmup-steps 100", "--checkpoint.enable --checkpoint.interval 500",
                  "--checkpoint.async-mode async", "--metrics.log-freq 5", "--validator.enable",
                  "--optimizer.param-groups.0.optimizer-kwargs.betas 0.9 0.95", "--dump-folder /tmp/out"):
        out.append(Case(f"tj:argv-good:{words}", "value", {}, ["--project", *TAIL, "--", *titan, *words.split()]))
    for tag, line, bad in (("bad", b"--optimizer.lr=abc", True), ("typo", b"--checkpoint.intervall 10", True),
                           ("good", b"--lr-scheduler.warmup-steps 10", False)):
        out.append(Case(f"tj:script:{tag}", "value", {"r.sh": b"NGPU=8 MODULE=llama3 CONFIG=llama3_8b ./run_train.sh "
                                                             + line + b"\n"}, ["--project", "r.sh", *TAIL],
                        expect_refusal=bad))
    for tag, key in (("checkpoint", b"intervall = 10"), ("metrics", b"log_freqq = 10"), ("lr_scheduler", b"warmup_step = 2")):
        data = TOML.replace(b"[" + tag.encode() + b"]\n", b"[" + tag.encode() + b"]\n" + key + b"\n", 1)
        out.append(Case(f"tj:toml-typo:{tag}", "value", {"c.toml": data}, ["--project", "c.toml", *TAIL],
                        expect_refusal=True, expect_words=(f"{tag}.{key.split(b' ')[0].decode()}",)))
    return out


def _toml_with(table: str, line: str) -> bytes:
    """The campaign's TorchTitan TOML with ``line`` in ``[table]`` (its own line for the key dropped)."""
    key = line.split("=", 1)[0].strip()
    text = "\n".join(x for x in TOML.decode().splitlines() if "=" not in x or x.split("=", 1)[0].strip() != key) + "\n"
    head = f"[{table}]\n"
    return (text.replace(head, head + line + "\n", 1) if head in text else text + f"\n{head}{line}\n").encode()


def titanval_cases() -> list[Case]:
    """The titanval classes (``--only tv:``): a v0.2 job TOML's key read into the plan with a value torchtitan does not
    allow (its ``JobConfig`` field type, v0.2.2 ``config/job_config.py``, or the check of the code that reads it) was
    accepted when the value went unused or was a string -- ``converters = "float8"`` read as FP8, ``recipe_name =
    "colwise"`` with the converter off, ``selective_ac_option = 2`` read as every-2nd-layer AC: now refused in one line
    naming the key, the value and what is allowed; an unknown key far from every name (``[metrics] log_frequency``)
    refused as v0.2's ConfigManager refuses it, naming its sub-table (``[training.dataloader]``).  Valid values read."""
    out: list[Case] = []
    for table, line, expect in (
            ("model", 'converters = "float8"', ("model.converters='float8'", "converter names")),
            ("model", 'converters = ["fp8"]', ("model.converters=['fp8']", "quantize.linear.float8")),
            ("quantize.linear.float8", 'recipe_name = "colwise"', ("recipe_name='colwise'", "rowwise_with_gw_hp")),
            ("quantize.linear.mx", 'mxfp8_dim1_cast_kernel_choice = "cutlass"', ("'cutlass'", "triton, cuda, torch")),
            ("quantize.grouped_mm.mx", 'recipe_name = "mxfp4"', ("'mxfp4'", "mxfp8")),
            ("quantize.grouped_mm.float8", "fqns = 3", ("fqns=3",)),
            ("activation_checkpoint", "selective_ac_option = 2", ("selective_ac_option=2", "a string")),
            ("activation_checkpoint", 'selective_ac_option = "2 "', ("selective_ac_option='2 '", "'op'")),
            ("parallelism", 'module_fqns_per_model_part = "layers.0"', ("module_fqns_per_model_part='layers.0'",)),
            ("metrics", "log_frequency = 10", ("metrics.log_frequency=10", "[metrics]")),
            ("training.dataloader", "num_wrokers = 2", ("[training.dataloader]", "num_workers")),
            ("training.dataloader", "foo = 2", ("training.dataloader.foo=2", "[training.dataloader]"))):
        out.append(Case(f"tv:bad:{table}.{line}", "value", {"c.toml": _toml_with(table, line)},
                        ["--project", "c.toml", *TAIL], expect_refusal=True, expect_words=expect))
    for table, line in (("model", 'converters = ["quantize.linear.float8"]'),
                        ("quantize.linear.float8", 'recipe_name = "rowwise"'),
                        ("quantize.linear.mx", 'mxfp8_dim1_cast_kernel_choice = "cuda"'),
                        ("quantize.grouped_mm.float8", 'fqns = "experts"'),
                        ("activation_checkpoint", 'selective_ac_option = "0"'),
                        ("checkpoint", "last_save_model_weights_only = false")):
        out.append(Case(f"tv:good:{table}.{line}", "value", {"c.toml": _toml_with(table, line)},
                        ["--project", "c.toml", *TAIL]))
    return out


def _tokenizer_recipe(files: dict[str, bytes]) -> dict[str, bytes]:
    """The campaign's bash recipe reading its tokenizer from the local folder ``tok`` (no ``--vocab-size``)."""
    return {"r.sh": BASH.replace(b"--tokenizer-model meta-llama/Llama-3.1-8B", b"--tokenizer-model tok"),
            **{f"tok/{name}": data for name, data in files.items()}}


def robust14_cases() -> list[Case]:
    """The robust14 classes (``--only r14:``): a Megatron-LM integer or float flag given ``None`` / ``null`` on a command
    line (``GBS=None``; Megatron-LM's parser exits with 'invalid int value': it was read as unset and the flag's
    default projected) or as a word in an argument YAML (``global_batch_size: None``, a string to ``yaml.safe_load``
    that Megatron-LM keeps; YAML's null stays the default); a local tokenizer folder whose files are not of a
    tokenizer's shape (``"vocab_size": true`` read as a vocabulary of 1, a ``model.vocab`` string counted by its
    characters, ``true`` / negative token ids) or past the plan's bound (named by the file, not ``model.vocab_size``);
    a wrapper's ``cluster.nodes`` / ``gpus_per_node`` of 0, negative or past the bound (named as written, not the
    plan's ``num_nodes``); and guards of classes no round had sent: YAML tags (``!!python/object/apply``,
    ``!!binary``, ``!!set``, timestamps, custom tags), several YAML documents, TOML dates / times / inline tables
    where a number or a name belongs, bash that bash would never finish (``while :``, ``for ((;;))``, ``eval`` of a
    loop, a fork bomb, ``exec`` of itself, ``source`` of ``/dev/stdin`` / ``/dev/zero`` / a folder, ``read`` from the
    terminal), ``--train-tokens`` forms no count is, and a command after ``--`` the kernel cannot execute (no ``#!``:
    126) or named ``--`` (127); ``--version`` / ``--help`` into a full or closed stdout (it exited 0, nothing written)."""
    out: list[Case] = []
    for v in (b"None", b"null", b"'None'", b"NONE"):
        out.append(Case(f"r14:none:bash:GBS={v.decode()}", "value",
                        {"r.sh": BASH.replace(b"GLOBAL_BATCH_SIZE=128", b"GLOBAL_BATCH_SIZE=" + v)},
                        ["--project", "r.sh"] + TAIL, expect_refusal=True,
                        expect_words=("--global-batch-size=", "invalid int value")))
    for v in (b"None", b"'null'"):
        out.append(Case(f"r14:none:yaml:global_batch_size={v.decode()}", "value",
                        {"r.yaml": YAML.replace(b"global_batch_size: 128", b"global_batch_size: " + v)},
                        ["--project", "r.yaml"] + TAIL, expect_refusal=True,
                        expect_words=("--global-batch-size=", "null unquoted")))
    out.append(Case("r14:none:yaml:global_batch_size=null", "value",
                    {"r.yaml": YAML.replace(b"global_batch_size: 128", b"global_batch_size: null")},
                    ["--project", "r.yaml"] + TAIL))
    out.append(Case("r14:none:bash:--lr None", "value", {"r.sh": BASH.replace(b"--lr 3.0e-4", b"--lr None")},
                    ["--project", "r.sh"] + TAIL, expect_refusal=True, expect_words=("--lr='None'",)))
    cmd = list(ARGV)
    cmd[cmd.index("--global-batch-size") + 1] = "None"
    out.append(Case("r14:none:argv:--global-batch-size None", "argv", {}, ["--project", "--dry-run", "--json", "--"] + cmd,
                    expect_refusal=True, expect_words=("--global-batch-size='None'",)))
    unknown = ("--tokenizer-model='tok'", "vocabulary size unknown", "a local tokenizer")
    for tag, files, words in (
            ("config-true", {"config.json": b'{"vocab_size": true}'}, unknown),
            ("config-string", {"config.json": b'{"vocab_size": "128256"}'}, unknown),
            ("config-huge", {"config.json": b'{"vocab_size": 1000000000000}'}, ("tok/config.json vocab_size=",)),
            ("json-vocab-string", {"tokenizer.json": b'{"model": {"vocab": "abc"}}'}, unknown),
            ("json-ids-true", {"tokenizer.json": b'{"model": {"vocab": {"a": true}}}'}, unknown),
            ("json-ids-negative", {"tokenizer.json": b'{"model": {"vocab": {"a": -7}}}'}, unknown),
            ("json-ids-huge", {"tokenizer.json": b'{"model": {"vocab": {"a": 1000000000000}}}'},
             ("tok/tokenizer.json (highest token id + 1)=",)),
            ("json-added-huge", {"tokenizer.json": b'{"model": {"vocab": {"a": 1}}, "added_tokens": [{"id": 1099511627776}]}'},
             ("tok/tokenizer.json (highest token id + 1)=",))):
        out.append(Case(f"r14:tokenizer:{tag}", "value", _tokenizer_recipe(files), ["--project", "r.sh"] + TAIL,
                        expect_refusal=True, expect_words=words))
    for tag, files, words in (
            ("config", {"config.json": b'{"vocab_size": 128256}'}, ("vocabulary 128256 from tok/config.json",)),
            ("bpe", {"tokenizer.json": b'{"model": {"vocab": {"a": 0, "b": 127999}}, "added_tokens": [{"id": 128255}]}'},
             ("vocabulary 128256 from tok/tokenizer.json",)),
            ("unigram", {"tokenizer.json": b'{"model": {"vocab": [["a", 0.0], ["b", -1.0]]}}'},
             ("vocabulary 2 from tok/tokenizer.json",))):
        out.append(Case(f"r14:tokenizer:good-{tag}", "value", _tokenizer_recipe(files), ["--project", "r.sh"] + TAIL,
                        expect_words=words))
    for key, v in (("nodes", "0"), ("nodes", "-1"), ("nodes", "200000"), ("num_nodes", "0"), ("gpus_per_node", "0"),
                   ("gpus_per_node", "-8"), ("gpus_per_node", "2000")):
        body = b'[recipe]\npath = "r.sh"\n[cluster]\n' + f"{key} = {v}\n".encode()
        out.append(Case(f"r14:wrapper:cluster.{key}={v}", "value", {"w.primus.toml": body, "r.sh": BASH},
                        ["--project", "w.primus.toml"] + TAIL, expect_refusal=True,
                        expect_words=(f"cluster.{key}={v}", "an integer from 1 to")))
    for tag, line in (("python-apply", b"x: !!python/object/apply:os.system ['touch pwned']"),
                      ("python-name", b"x: !!python/name:os.system"), ("custom-tag", b"num_layers: !foo 32"),
                      ("binary", b"num_layers: !!binary MzI="), ("set", b"num_layers: !!set {a, b}"),
                      ("timestamp", b"num_layers: 2024-01-01"), ("float-tag", b"num_layers: !!float 32"),
                      ("second-document", b"---\nnum_layers: 4"), ("complex-key", b"? [a, b]\n: 1")):
        data = YAML + b"\n" + line + b"\n"
        out.append(Case(f"r14:yaml-tag:{tag}", "structure", {"r.yaml": data}, ["--project", "r.yaml"] + TAIL,
                        expect_refusal=True))
    for key, v in (("local_batch_size", b"1979-05-27T07:32:00Z"), ("seq_len", b"1979-05-27"),
                   ("tensor_parallel_degree", b"07:32:00"), ("flavor", b"{ a = 1 }"), ("flavor", b"1979-05-27"),
                   ("name", b"5")):
        data = re.sub(rb"(?m)^" + key.encode() + rb" = [^\n]*", key.encode() + b" = " + v, TOML, count=1)
        out.append(Case(f"r14:toml-type:{key}={v.decode()}", "value", {"r.toml": data}, ["--project", "r.toml"] + TAIL,
                        expect_refusal=True, expect_words=(f"{key}=",)))
    for tag, snippet in (("while-colon", b"while :; do X=1; done"), ("until-false", b"until false; do :; done"),
                         ("for-ever", b"for ((;;)); do :; done"), ("eval-loop", b"eval 'while true; do :; done'"),
                         ("fork-bomb", b":(){ :|:& };:"), ("fork-bomb-subst", b"X=$(:(){ :|:& };:)"),
                         ("exec-self", b"exec bash $0"), ("source-stdin", b"source /dev/stdin"),
                         ("source-zero", b"source /dev/zero"), ("source-folder", b"source /"),
                         ("read-terminal", b"read X"), ("cat-stdin", b"X=$(cat)"), ("sleep", b"sleep 100000"),
                         ("background-loop", b"(while true; do :; done) &"), ("yes-pipe", b"X=$(yes | head -c 100000000)"),
                         ("kill-self", b"kill -9 $$")):
        out.append(Case(f"r14:bash-endless:{tag}", "structure", {"r.sh": _in_bash(snippet + b"\n")}, ["--project", "r.sh"] + TAIL))
    for v in ("1.5.5T", "15TB", "0x10", "1e-9", "1P", "T", "15T15", "1e400", "99999999999999999999T"):
        out.append(Case(f"r14:train-tokens={v}", "argv", {"r.sh": BASH},
                        ["--project", "r.sh", *TAIL, "--train-tokens", v], expect_refusal=True,
                        expect_words=("--train-tokens", repr(v))))

    def no_shebang(d: Path) -> None:
        (d / "ns.sh").write_text("echo hi; exit 4\n")
        (d / "ns.sh").chmod(0o755)

    out.append(Case("r14:passthrough:no-shebang", "argv", {}, ["--", "./ns.sh"], setup=no_shebang, expect_rc=126))
    out.append(Case("r14:passthrough:named-dashdash", "argv", {}, ["--", "--", "true"], expect_rc=127))
    for flag, shell, why in (("--version", ">/dev/full", "No space left"), ("--help", ">/dev/full", "No space left"),
                             ("--version", ">&-", "stdout is closed")):
        if os.path.exists("/dev/full") or "full" not in shell:  # argparse swallowed the failed write: exit 0, nothing
            out.append(Case(f"r14:stream:{flag}{shell}", "stream", {}, [flag], expect_rc=2,
                            expect_words=("stdout: cannot write", why), typed=shell.encode()))
    return out


def robust15_cases(rng: random.Random, quick: bool) -> list[Case]:
    """The robust15 classes (``--only r15:``): a number field given a word or a quoted number in the formats whose
    loaders keep it a string (``None``, ``'Null'``, ``"128"``, ``${GBS:None}``, ``???``): Primus hands it to
    Megatron-LM as it is (argument_builder.py coerces enums only; only the exact string 'null' becomes None,
    yaml_utils.py set_value_by_key), Megatron-Bridge's ``ConfigContainer`` loaders and NeMo's OmegaConf keep it, and
    their batch arithmetic fails; it was read as unset (the default projected) or as the number.  YAML's null (and
    Primus's 'null' / ``${GBS:null}``) still means the default.  TorchTitan on a command line: tyro refuses ``True``
    for an int option (it was typed a boolean and refused as the TOML key).  The field of each format is drawn from
    the seeded generator."""
    out: list[Case] = []
    pkey = rng.choice(["global_batch_size", "train_iters", "seq_length"])
    pline = {"global_batch_size": b"      global_batch_size: 256", "train_iters": b"      train_iters: 50",
             "seq_length": b"      seq_length: 8192"}[pkey]
    head = pline.split(b":")[0] + b": "
    words = [b"None", b"'None'", b"'Null'", b'"128"', b"${R15:None}", b"${R15:}"]
    for v in (rng.sample(words, 3) if quick else words):
        out.append(Case(f"r15:primus:{pkey}={v.decode()}", "value", {"r.yaml": PRIMUS.replace(pline, head + v)},
                        ["--project", "r.yaml"] + TAIL, expect_refusal=True, expect_words=(pkey, "unquoted")))
    for v in (b"'null'", b"~", b"${R15:null}"):
        out.append(Case(f"r15:primus:{pkey}={v.decode()}", "value", {"r.yaml": PRIMUS.replace(pline, head + v)},
                        ["--project", "r.yaml"] + TAIL))
    bkey = rng.choice([("train.global_batch_size", rb"(?m)^(  global_batch_size: )256$"),
                       ("train.micro_batch_size", rb"(?m)^(  micro_batch_size: )1$"),
                       ("train.train_iters", rb"(?m)^(  train_iters: )1000$")])
    m = re.search(bkey[1], BRIDGE)
    for v in (b"None", b"'null'", b'"128"'):
        data = BRIDGE[:m.start()] + m.group(1) + v + BRIDGE[m.end():]
        out.append(Case(f"r15:bridge:{bkey[0]}={v.decode()}", "value", {"b.yaml": data}, ["--project", "b.yaml"] + TAIL,
                        expect_refusal=True, expect_words=(bkey[0], "unquoted")))
    nkey = rng.choice(["global_batch_size", "micro_batch_size"])
    mm = re.search(r"(?m)^(\s+" + nkey + r": )(.*)$", NEMO)
    for v in ("None", "'null'", "'128'", "???"):
        text = NEMO[:mm.start()] + mm.group(1) + v + NEMO[mm.end():]
        out.append(Case(f"r15:nemo:{nkey}={v}", "value", {"n.yaml": text.encode()}, ["--project", "n.yaml"] + TAIL,
                        expect_refusal=True, expect_words=(f"model.{nkey}=",)))
    tt = PRIMUS.replace(b"framework: megatron", b"framework: torchtitan").split(b"    # model (")[0] + \
        b"    training:\n      local_batch_size: 2\n      seq_len: 4096\n      steps: 10\n"
    out.append(Case("r15:primus-titan:training.local_batch_size=2", "value", {"r.yaml": tt}, ["--project", "r.yaml"] + TAIL))
    for v in (b"null", b"~"):
        out.append(Case(f"r15:primus-titan:training.local_batch_size={v.decode()}", "value",
                        {"r.yaml": tt.replace(b"local_batch_size: 2", b"local_batch_size: " + v)},
                        ["--project", "r.yaml"] + TAIL, expect_refusal=True,
                        expect_words=("training.local_batch_size='null'", "leave the key out")))
    tkey = rng.choice(["training.local_batch_size", "training.steps", "parallelism.tensor_parallel_degree"])
    for v in ("True", "None", "false"):
        cmd = ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--job.config_file", "r.toml", f"--{tkey}", v]
        out.append(Case(f"r15:titan-argv:--{tkey} {v}", "argv", {"r.toml": TOML}, ["--project", "--dry-run", "--json", "--"] + cmd,
                        expect_refusal=True, expect_words=(f"--{tkey}='{v}'", "expected an integer")))
    return out


HUGE_BASH = BASH.replace(b"--hidden-size 4096", b"--hidden-size 1048576").replace(
    b"--ffn-hidden-size 14336", b"--ffn-hidden-size 4194304").replace(b"--num-attention-heads 32", b"--num-attention-heads 8192")
HUGE_YAML = YAML.replace(b"hidden_size: 4096", b"hidden_size: 1048576").replace(
    b"ffn_hidden_size: 14336", b"ffn_hidden_size: 4194304").replace(b"num_attention_heads: 32", b"num_attention_heads: 8192")


def robust16_cases() -> list[Case]:
    """The robust16 classes (``--only r16:``): a tune of a model whose weights alone overflow every GPU whatever the
    layout (hidden size 2^20; 9,984 such layers on 1,024 nodes priced 101K hopeless plans for minutes, past the
    campaign's hang limit): one line before the search, nothing written (``tuner/memory_floors.py``
    ``whole_space_out``); and many pipeline stages of a 9,984-layer model (the uneven splits' window walked pair by
    pair, O(pp^2) per pipeline shape)."""
    out: list[Case] = []
    deep = HUGE_BASH.replace(b"--num-layers 32", b"--num-layers 9984")
    words = ("--tune=r", "no plan fits in memory", "nothing searched", "nothing written")
    for tag, files, name, more in (
            ("bash", {"r.sh": HUGE_BASH}, "r.sh", []), ("yaml", {"r.yaml": HUGE_YAML}, "r.yaml", []),
            ("bash-9984-layers-1024-nodes", {"r.sh": deep}, "r.sh", ["--nodes", "1024"]),
            ("bash-memory-certain", {"r.sh": HUGE_BASH}, "r.sh", ["--memory-certain"]),
            ("bash-margin", {"r.sh": HUGE_BASH}, "r.sh", ["--memory-margin", "0.3"]),
            ("bash-planner", {"r.sh": HUGE_BASH}, "r.sh", ["--planner"]),
            ("bash-exhaustive", {"r.sh": HUGE_BASH}, "r.sh", ["--exhaustive", "--workers", "2"])):
        out.append(Case(f"r16:huge-weights:tune:{tag}", "value", files,
                        ["--tune", name, "--dry-run", "--out", "t" + name[1:], "--report", "t.html", "--log", "t.json"]
                        + more, expect_refusal=True, expect_words=words))
    # 2,048 pipeline stages of 128 micro-batches: the extrapolation's cyclicity run (24,588 micro-batches) took minutes
    out.append(Case("r16:pp-2048:project", "value", {"r.sh": BASH.replace(b"--num-layers 32", b"--num-layers 4096")
                                                     .replace(b"PP_SIZE=1", b"PP_SIZE=2048")},
                    ["--project", "r.sh", "--nodes", "512"] + TAIL))
    # the projection itself answers (nothing to search): does not fit
    out.append(Case("r16:huge-weights:project", "value", {"r.sh": HUGE_BASH}, ["--project", "r.sh"] + TAIL))
    out.append(Case("r16:9984-layers:project-1024-nodes", "value", {"r.sh": BASH.replace(b"--num-layers 32",
                                                                                       b"--num-layers 9984")},
                    ["--project", "r.sh", "--nodes", "1024"] + TAIL, expect_refusal=True,
                    expect_words=("--global-batch-size=128",)))
    return out


def _shared_value(text: bytes, key: bytes, other: bytes, anchored_first: bool) -> bytes:
    """``text`` with ``key``'s value shared with a new ``other`` entry beside it through a YAML anchor:
    ``key: &v X`` / ``other: *v`` (anchored_first) or ``other: &v X`` / ``key: *v``."""
    m = re.search(rb"(?m)^([ \t]*)" + key + rb": (.*)$", text)
    ind, val = m.group(1), m.group(2)
    lines = (ind + key + b": &v " + val + b"\n" + ind + other + b": *v" if anchored_first
             else ind + other + b": &v " + val + b"\n" + ind + key + b": *v")
    return text[:m.start()] + lines + text[m.end():]


def _tuned_keeps(out: str, path: list[str], other: str, want: object) -> Callable[[Path], Optional[str]]:
    """A check: the tuned recipe ``out`` loads as YAML and its ``other`` entry (under ``path``) still holds ``want``."""
    def check(d: Path) -> Optional[str]:
        import yaml

        if not (d / out).exists():
            return f"no tuned recipe {out}"
        try:
            doc = yaml.safe_load((d / out).read_text())
        except yaml.YAMLError as e:
            return f"tuned recipe {out} does not load: {' '.join(str(e).split())[:80]}"
        for k in path:
            doc = doc.get(k, {}) if isinstance(doc, dict) else {}
        if not isinstance(doc, dict) or doc.get(other) != want:
            return f"tuned recipe {out}: {other}={doc.get(other) if isinstance(doc, dict) else None!r}, want {want!r}"
        return None
    return check


MIXTRAL = _read("megatron/mixtral_8x22b.sh")


def robust17_cases() -> list[Case]:
    """The robust17 classes (``--only r17:``): YAML anchors and aliases -- a scalar shared by two keys
    (``eval_iters: &one 1`` / ``micro_batch_size: *one``, either way round) in a Megatron YAML, a Primus experiment and
    a Megatron-Bridge run config, tuned and written back: the in-place edit changed the other key or left an alias
    naming no anchor (the written recipe no longer loaded, and the line blamed the user's recipe); merge keys
    (``<<: *BASE``) whose merged entries a tune changes; Megatron values its start-up refuses that were projected
    (``--moe-shared-expert-intermediate-size 0``, ``--encoder-seq-length`` beside ``--seq-length``) and sizes named
    as the plan's usual flag instead of the one given (``--padded-vocab-size 0`` as ``--vocab-size=0``)."""
    out: list[Case] = []
    tune = ["--dry-run", "--json", "--max-work", "200"]
    # (a Megatron-Bridge run config's tune takes > 10 s here: its writer is checked by tests/test_bad_input_robust17.py)
    for fmt, data, name, path in (("yaml", YAML, "r.yaml", []),
                                  ("primus", PRIMUS, "r.yaml", ["modules", "pre_trainer", "overrides"])):
        for first in (True, False):
            text = _shared_value(data, b"micro_batch_size", b"eval_iters", first)
            import yaml as _yaml

            doc = _yaml.safe_load(text)
            for k in path:
                doc = doc[k]
            tag = "anchor-on-tuned-key" if first else "alias-on-tuned-key"
            out.append(Case(f"r17:yaml-alias:{fmt}:{tag}", "structure", {name: text},
                            ["--tune", name, *tune, "--out", "t" + name[1:]], expect_rc=0,
                            check=_tuned_keeps("t" + name[1:], path, "eval_iters", doc["eval_iters"])))
    # a merge key: the layout comes from a shared block (functional tests' `<<: *BASE_MODEL_ARGS`)
    base_keys = (b"tensor_model_parallel_size", b"pipeline_model_parallel_size", b"micro_batch_size")
    kept = b"".join(ln + b"\n" for ln in YAML.splitlines() if not ln.startswith(base_keys))
    merged = b"BASE: &BASE\n  tensor_model_parallel_size: 2\n  pipeline_model_parallel_size: 1\n  micro_batch_size: 1\n" \
        + b"<<: *BASE\n" + kept
    out.append(Case("r17:yaml-merge:tune", "structure", {"r.yaml": merged}, ["--tune", "r.yaml", *tune, "--out", "t.yaml"]))
    out.append(Case("r17:yaml-merge:project", "structure", {"r.yaml": merged}, ["--project", "r.yaml"] + TAIL))
    for tag, files, name, words in (
            ("bash:shared-expert=0", {"r.sh": MIXTRAL.replace(b"--moe-grouped-gemm",
                                                              b"--moe-grouped-gemm --moe-shared-expert-intermediate-size 0")},
             "r.sh", ("--moe-shared-expert-intermediate-size=0", "TransformerConfig")),
            ("primus:shared-expert=0", {"r.yaml": PRIMUS.replace(b"      train_iters: 50\n", b"      train_iters: 50\n"
                                                                 b"      moe_shared_expert_intermediate_size: 0\n")},
             "r.yaml", ("moe_shared_expert_intermediate_size=0",)),
            ("bash:encoder-seq-length", {"r.sh": BASH.replace(b"    --bf16\n", b"    --bf16 --encoder-seq-length 8192\n")},
             "r.sh", ("--encoder-seq-length=8192", "validate_args asserts")),
            ("yaml:encoder-seq-length", {"r.yaml": YAML + b"\nencoder_seq_length: 8192\n"}, "r.yaml",
             ("--encoder-seq-length=8192",)),
            ("bash:padded-vocab-size=0", {"r.sh": BASH.replace(b"    --bf16\n", b"    --bf16 --padded-vocab-size 0\n")},
             "r.sh", ("--padded-vocab-size=0",))):
        out.append(Case(f"r17:megatron-refuses:{tag}", "value", files, ["--project", name] + TAIL, expect_refusal=True,
                        expect_words=words))
    # two runs at once writing the same outputs (a job array, a re-run before the first ended): each write is whole
    # (temp file + rename), no temp file is left, both exit 0
    import shlex

    def whole(names: tuple[str, ...]) -> Callable[[Path], Optional[str]]:
        def check(d: Path) -> Optional[str]:
            for n in names:
                if not (d / n).exists():
                    return f"{n} not written"
                body = (d / n).read_text(errors="replace")
                if (n.endswith(".html") and not body.rstrip().endswith("</html>")) or \
                        (n.endswith(".json") and _json_finite(body) is None) or (n.endswith(".sh") and "torchrun" not in body):
                    return f"{n} is not whole"
            return None
        return check

    for tag, argv, names in (
            ("project", ["--project", "r.sh", "--dry-run", "--report", "o.html", "--trace", "o.json"], ("o.html", "o.json")),):
        # (two tunes at once pass the same way, but take > 10 s on a loaded 2-core machine)
        twin = shlex.join([sys.executable, "-m", "primus_launch", *argv])
        shell = f">/dev/null & P=$!; {twin} >/dev/null; R2=$?; wait $P; R1=$?; exit $((R1 | R2))"
        out.append(Case(f"r17:concurrent:{tag}", "stream", {"r.sh": BASH}, argv, expect_rc=0, typed=shell.encode(),
                        check=whole(names)))
    return out


def robust18_cases() -> list[Case]:
    """The robust18 classes (``--only r18:``): recipes written for another framework version and names the recipe
    does not hold -- a wrapper's ``[software]`` versions newer than the modelled stack (noted: priced as it), of
    another framework (noted: not read) or no version (refused); ``--virtual-pipeline-model-parallel-size`` on a
    Megatron-LM command line (no flag of its parser since 2021: refused, it was read as VPP); a Megatron-Bridge
    top-level key of no ``ConfigContainer`` field (noted with the nearest section: it was dropped silently);
    torchtitan main's names after 0.3.0 (pytorch/torchtitan#4121: refused naming the 0.3.0 field to give); MXFP8 on
    a GPU without MX formats named as the recipe writes the FP8 recipe (``--fp8-recipe``, not
    ``training.fp8_recipe``); and classes that already passed, kept: MoE experts not divisible by EP, ETP x EP x PP
    not dividing the world, a sequence not divisible by TP under sequence parallelism, VPP sizes Megatron-LM
    rejects, ``--gpu-file`` sizes with units (``"80GB"``), a new GPU without bandwidth, zero FLOPs, a Primus
    override of no Megatron-LM argument (warned by name), an unset variable in a launch script (``${SEQ_LEN}``)."""
    out: list[Case] = []
    dry = ["--dry-run", "--json"]
    for tag, sw, rec, words in (
            ("torch-future", 'torch = "3.0"', "r.sh", ("software.torch='3.0': newer than torch",)),
            ("torchtitan-future", 'torchtitan = "0.9.0"', "r.toml", ("software.torchtitan='0.9.0': newer",)),
            ("torchtitan-on-megatron", 'torchtitan = "0.3.0"', "r.sh", ("software.torchtitan='0.3.0': not read",))):
        wrapper = f'[recipe]\npath = "{rec}"\n[software]\n{sw}\n'.encode()
        out.append(Case(f"r18:software:{tag}", "value", {"w.primus.toml": wrapper, "r.sh": BASH, "r.toml": TOML},
                        ["--project", "w.primus.toml"] + dry, expect_words=words))
    for tag, sw in (("word", 'torch = "latest"'), ("major-only", 'torch = "2"'), ("epoch", 'torch = "0:2.8"'),
                    ("number", "torch = 2.8"), ("titan-word", 'torchtitan = "main"')):
        wrapper = f'[recipe]\npath = "r.sh"\n[software]\n{sw}\n'.encode()
        out.append(Case(f"r18:software:{tag}", "value", {"w.primus.toml": wrapper, "r.sh": BASH},
                        ["--project", "w.primus.toml"] + dry, expect_refusal=True,
                        expect_words=("software.torch" if sw.startswith("torch ") else "software.torchtitan",)))
    vpp = BASH.replace(b"    --bf16\n", b"    --bf16 --virtual-pipeline-model-parallel-size 2\n", 1).replace(
        b"PP_SIZE=1", b"PP_SIZE=2", 1)  # PP 2: the old flag was read as VPP 2 and projected
    out.append(Case("r18:vpp-yaml-name:bash", "argv", {"r.sh": vpp}, ["--project", "r.sh"] + dry, expect_refusal=True,
                    expect_words=("--virtual-pipeline-model-parallel-size=2", "--num-virtual-stages-per-pipeline-rank")))
    for tag, key, words in (("misspelt", b"mixed_precison", ("did you mean mixed_precision",)),
                            ("foreign", b"my_launcher", ("my_launcher: not a section",))):
        out.append(Case(f"r18:bridge-section:{tag}", "structure", {"b.yaml": BRIDGE + key + b":\n  fp8: hybrid\n"},
                        ["--project", "b.yaml"] + dry, expect_words=words))
    for tag, old, new, words in (
            ("argv:tokens-per-microbatch", b"--training.local_batch_size 2",
             b"--training.num_tokens_per_microbatch_per_dp_rank 16384", ("0.3.0 calls it training.local_batch_size",)),
            ("argv:max-context", b"--training.local_batch_size 2",
             b"--training.local_batch_size 2 --training.max_context_length 4096", ("0.3.0 calls it training.seq_len",)),
            ("argv:pp-microbatches", b"--training.local_batch_size 2",
             b"--training.local_batch_size 2 --parallelism.num_pp_microbatches 4",
             ("0.3.0 calls it parallelism.pipeline_parallel_microbatch_size",))):
        out.append(Case(f"r18:titan-main:{tag}", "value", {"r.sh": BASH_TITAN.replace(old, new, 1)},
                        ["--project", "r.sh"] + dry, expect_refusal=True, expect_words=words))
    for tag, old, new, words in (("toml:max-context", b"seq_len = 8192", b"max_context_length = 8192",
                                  ("training.max_context_length=8192", "0.3.0 calls it training.seq_len")),
                                 ("toml:tokens-per-step", b"local_batch_size = 1", b"num_tokens_per_train_step = 65536",
                                  ("0.3.0 calls it training.global_batch_size",))):
        out.append(Case(f"r18:titan-main:{tag}", "value", {"r.toml": TOML.replace(old, new, 1)},
                        ["--project", "r.toml"] + dry, expect_refusal=True, expect_words=words))
    mx = BASH.replace(b"    --bf16\n", b"    --bf16 --fp8-format hybrid --fp8-recipe mxfp8\n", 1)
    pmx = PRIMUS.replace(b"      train_iters: 50\n", b"      train_iters: 50\n      fp8: hybrid\n      fp8_recipe: mxfp8\n", 1)
    for tag, files, argv, words in (
            ("bash:project", {"r.sh": mx}, ["--project", "r.sh", "--gpu", "h100-sxm"], ("--fp8-recipe='mxfp8'",)),
            ("bash:tune", {"r.sh": mx}, ["--tune", "r.sh", "--gpu", "h100-sxm", "--max-work", "50"],
             ("--fp8-recipe='mxfp8'",)),
            ("primus:project", {"r.yaml": pmx}, ["--project", "r.yaml", "--gpu", "mi300x"], (" fp8_recipe='mxfp8'",))):
        out.append(Case(f"r18:fp8-recipe-named:{tag}", "value", files, argv + dry, expect_refusal=True,
                        expect_words=words))
    # classes that already passed (kept so that they stay so)
    for tag, old, new, words in (
            ("ep-not-dividing-experts", b"--expert-model-parallel-size 4", b"--expert-model-parallel-size 3",
             ("--expert-model-parallel-size=3", "num_experts=8")),
            ("experts-not-divisible", b"--num-experts 8", b"--num-experts 6", ("num_experts=6",)),
            ("etp-ep-pp-world", b"--expert-model-parallel-size 4",
             b"--expert-model-parallel-size 4 --expert-tensor-parallel-size 3", ("must divide world size 32",)),
            ("seq-not-divisible-by-tp-sp", b"--seq-length 4096", b"--seq-length 4097",
             ("--tensor-model-parallel-size=2", "seq_length")),
            ("vpp-not-dividing-layers", b"--pipeline-model-parallel-size 4",
             b"--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 5", ("pp*vpp=20",)),
            ("vpp-two-ways", b"--pipeline-model-parallel-size 4",
             b"--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
             b"--num-layers-per-virtual-pipeline-stage 7", ("cannot be combined",)),
            ("fp8-format-e5m2", b"--bf16", b"--bf16 --fp8-format e5m2", ("--fp8-format='e5m2'", "e4m3, hybrid"))):
        assert old in MIXTRAL, old
        out.append(Case(f"r18:megatron-rule:{tag}", "value", {"r.sh": MIXTRAL.replace(old, new, 1)},
                        ["--project", "r.sh"] + dry, expect_refusal=True, expect_words=words))
    for tag, gpu, words in (
            ("units", GPU_TOML.replace(b"hbm_bytes = 85899345920", b'hbm_bytes = "80GB"'), ("hbm_bytes='80GB'",)),
            ("no-bandwidth", GPU_TOML.replace(b"hbm_bw = 3.35e12\n", b""), ("hbm_bw: Field required",)),
            ("zero-flops", GPU_TOML.replace(b"peak_flops_bf16 = 989e12", b"peak_flops_bf16 = 0"),
             ("peak_flops_bf16=0",)),
            ("negative-override", b"[gpu.h100-sxm]\npeak_flops_fp8 = -1\n", ("peak_flops_fp8=-1",))):
        name = "h100-sxm" if tag == "negative-override" else "mygpu"
        out.append(Case(f"r18:gpu-file:{tag}", "value", {"g.toml": gpu, "r.sh": BASH},
                        ["--project", "r.sh", "--gpu-file", "g.toml", "--gpu", name] + dry, expect_refusal=True,
                        expect_words=words))
    unknown = PRIMUS.replace(b"      train_iters: 50\n", b"      train_iters: 50\n      seq_lenght: 4096\n", 1)
    out.append(Case("r18:primus-override:unknown-key", "value", {"r.yaml": unknown}, ["--project", "r.yaml"] + dry,
                    expect_words=("seq_lenght",)))
    unset = BASH.replace(b"--seq-length $SEQ_LENGTH", b"--seq-length ${SEQ_LEN}", 1)
    assert unset != BASH
    out.append(Case("r18:unset-variable:bash", "value", {"r.sh": unset}, ["--project", "r.sh"] + dry,
                    expect_refusal=True, expect_words=("--seq-length", "unset variable")))
    return out


def build_cases(quick: bool, seed: int) -> list[Case]:
    rng = random.Random(seed)
    cases: list[Case] = []
    for fmt, (data, name, others, args) in FORMATS.items():
        muts = byte_cases(fmt, rng, 3 if quick else 8)
        vals = value_cases(fmt, rng, 2 if quick else 4)
        if quick:
            vals = rng.sample(vals, min(len(vals), 12))
        muts += vals + structure_cases(fmt)
        for tag, content in muts:
            kind = "byte" if not tag.startswith(("num@", "type:", "deep", "alias", "recursive", "list-root",
                                                 "scalar-root", "dup", "inf", "nan", "table-is", "unknown",
                                                 "huge", "brace", "self", "unterm", "heredoc", "many")) else \
                ("value" if tag.startswith(("num@", "type:", "inf", "nan")) else "structure")
            cases.append(Case(f"{fmt}:{tag}", kind, {**others, name: content}, args + TAIL))
    for tag, argv in argv_cases():
        cases.append(Case(tag, "argv", {"r.sh": BASH}, argv))
    cases += output_cases()
    cases += reference_cases()
    cases += typed_value_cases(rng, quick)
    cases += construct_cases()
    cases += cli_path_cases()
    cases += signal_cases(quick)
    cases += edge_cases()
    cases += fanout_cases()
    cases += structured_cases()
    cases += terminal_cases()
    cases += robust9_cases()
    cases += robust10_cases(rng, quick)
    cases += robust11_cases()
    cases += robust12_cases()
    cases += robust13_cases()
    cases += titanjob_cases()
    cases += titanval_cases()
    cases += robust14_cases()
    cases += robust15_cases(rng, quick)
    cases += robust16_cases()
    cases += robust17_cases()
    cases += robust18_cases()
    return cases


# ------------------------------------------------------------------------------------ running
def _snapshot(d: Path) -> dict[str, str]:
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(d))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _finite(obj) -> bool:
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, float) and not math.isfinite(o):
            return False
        if isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return True


def _json_finite(text: str) -> Optional[bool]:
    """True / False for a JSON document's numbers; None when ``text`` is not one JSON document."""
    bad = []
    try:
        d = json.loads(text, parse_constant=lambda c: bad.append(c) or float("nan"))
    except ValueError:
        return None
    return not bad and _finite(d)


def _run_forked(case: Case, d: Path, timeout: float) -> tuple[Optional[int], float, str, str]:
    out, err = d / ".stdout", d / ".stderr"
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: the CLI's main, as the entry point calls it
        rc = 1
        try:
            os.setpgid(0, 0)
            os.chdir(d)
            fo = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            fe = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fo, 1)
            os.dup2(fe, 2)
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), write_through=True)
            from primus_launch.cli import main

            rc = main(case.argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: BLE001 - a traceback is what the campaign counts
            import traceback

            traceback.print_exc()
            rc = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(rc if isinstance(rc, int) else 1)
    rc = None
    while time.monotonic() - t0 < timeout:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            rc = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.01)
    secs = time.monotonic() - t0
    if rc is None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    _reap_group(pid)
    # bytes as written (read_text would turn a carriage return into a newline: a line overwritten on a terminal
    # would read as two lines here)
    return rc, secs, out.read_bytes().decode(errors="replace"), err.read_bytes().decode(errors="replace")


def _reap_group(pgid: int) -> list[int]:
    """Processes left in the case's group (then killed)."""
    left = group_members(pgid)
    if left:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def _run_signal(case: Case, d: Path, timeout: float) -> tuple[Optional[int], float, str, str, list[str]]:
    t0 = time.monotonic()
    stopped = signal_at(start_cli(case.argv, d), case.signal_at, case.signum, grace_s=timeout)
    secs = time.monotonic() - t0
    problems = []
    if stopped.own_s is not None and stopped.rc is not None and stopped.own_s > 2.0:  # not counting CPU waits
        problems.append(f"ended {stopped.after_signal_s:.1f} s after the signal (> 2 s; {stopped.waited_s:.1f} s of it "
                        "waiting for a CPU)")
    if stopped.left:
        problems.append(f"{len(stopped.left)} process(es) left behind")
    return stopped.rc, secs, stopped.stdout, stopped.stderr, problems


def run_case(case: Case, base: Path, timeout: float) -> Outcome:
    d = Path(tempfile.mkdtemp(prefix="case-", dir=base))
    for rel, content in case.files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(content)
    if case.setup:
        case.setup(d)
    before = _snapshot(d)
    extra: list[str] = []
    if case.kind == "signal":
        rc, secs, out, err, extra = _run_signal(case, d, timeout)
    elif case.kind == "nohup":
        rc, secs, out, err = _run_nohup(case, d, timeout)
    elif case.kind == "tty":
        rc, secs, out, err = _run_tty(case, d, timeout)
    elif case.kind == "stream":
        rc, secs, out, err = _run_stream(case, d, timeout)
    else:
        rc, secs, out, err = _run_forked(case, d, timeout)
    for p in (d / ".stdout", d / ".stderr"):
        p.unlink(missing_ok=True)
    after = _snapshot(d)
    o = Outcome(case, rc, secs, out, err, extra)
    changed = [k for k, h in before.items() if after.get(k) != h]
    if changed:
        o.problems.append(f"input changed: {changed}")
    leftovers = [k for k in after if k not in before and (k.endswith(".tmp") or "/." in "/" + k)]
    if leftovers:
        o.problems.append(f"partial / temp files left: {leftovers}")
    if rc is None:
        o.problems.append(f"hang: still running after {timeout:.0f} s")
    if "Traceback" in err:
        o.problems.append("traceback")
    if case.check is not None and rc is not None:
        said = case.check(d)
        if said:
            o.problems.append(said)
    if case.kind not in ("signal", "tty", "nohup", "stream") and case.expect_rc is None:
        raw = ACTIVE_CHARS.search(out + err)
        if raw:  # a character from the input a terminal would act on (clear, retitle, overwrite the line)
            o.problems.append(f"raw control character {raw.group()!r} in the output")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("primus-launch: error:") or "internal error" in ln]
    if case.kind == "signal":
        want = 128 + int(case.signum)
        if rc not in (want, 0):
            o.problems.append(f"exit {rc} after {case.signum.name} (want {want}, or 0 when it finished first)")
        if rc == want:
            last = [ln.split("\r")[-1] for ln in lines]
            stop = [ln for ln in last if ln.startswith(("primus-launch: interrupted", "primus-launch: terminated",
                                                        "primus-launch: hung up"))]
            if len(stop) != 1 or last[-1] not in stop or any("Traceback" in ln for ln in lines):
                o.problems.append(f"not one stop line: {lines[-3:]}")
            new = [k for k in after if k not in before]
            for k in new:  # an output written before the signal must be whole
                if k.endswith((".json",)) and _json_finite((d / k).read_text()) is None:
                    o.problems.append(f"partial output {k}")
                if k.endswith(".html") and not (d / k).read_text().rstrip().endswith("</html>"):
                    o.problems.append(f"partial output {k}")
    elif case.kind == "stream":
        if rc != case.expect_rc:
            o.problems.append(f"exit {rc}, want {case.expect_rc}: {lines[-2:]}")
        elif rc == 2 and (len(errors) != 1 or lines[-1] != errors[0]
                          or not all(w in errors[0] for w in case.expect_words)):
            o.problems.append(f"not one error line naming {list(case.expect_words)}: {lines[-3:]}")
        elif rc == 0 and "--json" in case.argv and _json_finite(out) is None:
            o.problems.append(f"stdout is not one JSON object: {out[:120]!r}")
    elif case.expect_rc is not None:
        if rc != case.expect_rc:
            o.problems.append(f"exit {rc}, want {case.expect_rc} (the command's own status)")
        if errors or "Traceback" in err or (case.kind == "tty" and "Traceback" in out
                                            and case.expect_rc != 130):
            o.problems.append(f"the tool spoke over the command's status: {lines[-2:]}")
        if case.expect_out and case.expect_out.decode() not in out:
            o.problems.append(f"the command's output lacks {case.expect_out!r}: {out[-120:]!r}")
    elif rc == 0:
        if errors:  # a note or warning whose text held a line break printed a line of its own
            o.problems.append(f"an error line on a run that exited 0: {errors[0][:80]!r}")
        if case.expect_refusal:
            o.problems.append("accepted: the case must be refused (exit 2, one line)")
        elif case.expect_words and not all(w in err for w in case.expect_words):  # a note the answer must carry
            o.problems.append(f"the answer does not say {[w for w in case.expect_words if w not in err]}")
        if "--json" in case.argv:
            ok = _json_finite(out)
            if ok is None:
                o.problems.append("exit 0 without one JSON object on stdout")
            elif not ok:
                o.problems.append("non-finite figure")
    elif rc == 2:
        if len(errors) != 1 or lines[-1] != errors[0]:
            o.problems.append(f"exit 2 without exactly one error line last: {lines[-3:]}")
        missing = [w for w in case.expect_words if not errors or w not in errors[-1]]
        if missing:
            o.problems.append(f"the error line does not name {missing}: {errors[-1:]}")
        written = [k for k in after if k not in before]
        if written:  # a refused run writes nothing (no tuned recipe, log, report or trace of a run with no answer)
            o.problems.append(f"files written by a refused run: {written}")
    else:
        o.problems.append(f"exit {rc}: {lines[-2:]}")
    if case.kind != "signal" and secs > 10:
        o.problems.append(f"slow: {secs:.1f} s (> 10 s)")
    shutil.rmtree(d, ignore_errors=True)
    return o


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer flipped bytes and values per format")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a case counts as a hang")
    ap.add_argument("--only", help="run the cases whose name contains this")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import primus_launch.cli  # noqa: F401 - warm the imports the forked children share
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.api import project

    project(load_recipe(RECIPES / "megatron" / "llama3.1_8b.sh"), dry_run=True)  # warm the caches too
    cases = build_cases(a.quick, a.seed)
    if a.only:
        cases = [c for c in cases if a.only in c.name]
    base = Path(tempfile.mkdtemp(prefix="bad-input-campaign-"))
    counts = {"cases": 0, "exit 0": 0, "exit 2": 0, "signal": 0, "tracebacks": 0, "hangs": 0,
              "inputs changed": 0, "non-finite figures": 0, "slow (> 10 s)": 0, "other problems": 0}
    by_kind: dict[str, int] = {}
    bad: list[Outcome] = []
    slowest: tuple[float, str] = (0.0, "")
    t0 = time.monotonic()
    try:
        for c in cases:
            o = run_case(c, base, a.timeout)
            counts["cases"] += 1
            by_kind[c.kind] = by_kind.get(c.kind, 0) + 1
            if c.kind == "signal":
                counts["signal"] += 1
            elif o.rc == 0:
                counts["exit 0"] += 1
            elif o.rc == 2:
                counts["exit 2"] += 1
            if c.kind != "signal" and o.seconds > slowest[0]:
                slowest = (o.seconds, c.name)
            for p in o.problems:
                key = ("tracebacks" if p == "traceback" else "hangs" if p.startswith("hang") else
                       "inputs changed" if p.startswith("input changed") else
                       "non-finite figures" if p == "non-finite figure" else
                       "slow (> 10 s)" if p.startswith("slow") else "other problems")
                counts[key] += 1
            if o.problems:
                bad.append(o)
            if a.verbose or o.problems:
                tail = [ln for ln in o.stderr.splitlines() if ln.strip()][-1:] or [""]
                print(f"{'FAIL' if o.problems else 'ok  '} {c.name[:70]:70s} rc={o.rc} {o.seconds:5.1f}s "
                      f"{'; '.join(o.problems)[:200]} | {tail[0][:160]}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n{counts['cases']} cases ({', '.join(f'{k} {v}' for k, v in sorted(by_kind.items()))}) in "
          f"{time.monotonic() - t0:.0f} s; slowest non-signal case {slowest[0]:.1f} s ({slowest[1]})")
    for k, v in counts.items():
        if k != "cases":
            print(f"  {k:20s} {v}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
