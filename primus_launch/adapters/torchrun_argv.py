"""Split a ``torchrun`` command line into launcher, launcher options and training program, and read
the cluster a command states (``--nnodes`` x ``--nproc-per-node``) or write a plan's cluster into it.

The option table (which options exist, which take a value, their aliases) is read from torchrun's
own parser, ``torch.distributed.run.get_args_parser()``, so the split follows torchrun exactly:
options come first, the first non-option token is the training script (or module, with ``-m``),
and everything after it belongs to the program (argparse ``REMAINDER``).  Tokens are kept verbatim
so that a command can be rewritten changing only the options that were asked for.

Recognised launchers: ``torchrun``, ``python -m torch.distributed.run`` and
``python -m torch.distributed.launch`` (any ``python*`` interpreter path).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from primus_launch.adapters.launcher_counts import launcher_count
from primus_launch.errors import UserError
from primus_launch.plan import Cluster

#: torchrun options that describe the job's topology / rendezvous; a launch writer replaces them.
TOPOLOGY_DESTS = frozenset({
    "nnodes", "nproc_per_node", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf",
    "standalone", "node_rank", "master_addr", "master_port"})


def live_option_table() -> dict[str, tuple[str, bool]]:
    """``{option string: (dest, takes_value)}`` from torchrun's own argparse parser (imports torch)."""
    from torch.distributed.run import get_args_parser

    table: dict[str, tuple[str, bool]] = {}
    for action in get_args_parser()._actions:
        for opt in action.option_strings:
            table[opt] = (action.dest, action.nargs != 0)
    return table


TABLE_FILE = "torchrun-options-{}.json"
BUNDLED_TORCH = "2.13.0"


@functools.lru_cache(maxsize=1)
def _option_table() -> dict[str, tuple[str, bool]]:
    """torchrun's option table, read once per torch version (importing torch costs seconds): the
    bundled table of torch 2.13.0 (``primus_launch/data``, built by ``scripts/build_titan_snapshot.py``,
    tested equal to the live parser), else a table cached per version in the user cache dir."""
    import json

    from primus_launch.adapters.titan_snapshot import DATA_DIR, cache_dir, dist_version

    version = (dist_version("torch") or BUNDLED_TORCH).split("+", 1)[0]
    path = DATA_DIR / TABLE_FILE.format(BUNDLED_TORCH) if version == BUNDLED_TORCH else \
        cache_dir() / TABLE_FILE.format(version)
    try:
        return {k: (v[0], bool(v[1])) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        pass
    table = live_option_table()
    try:
        from primus_launch.fileio import atomic_write_text

        atomic_write_text(path, json.dumps(table, sort_keys=True), mode=0o644)
    except OSError:
        pass
    return table


@dataclass
class Option:
    dest: str
    tokens: list[str]
    value: Optional[str]


@dataclass
class TorchrunCommand:
    """``prefix`` (the launcher itself), ``options`` (in order, tokens verbatim), ``program``."""

    prefix: list[str]
    options: list[Option] = field(default_factory=list)
    program: list[str] = field(default_factory=list)

    def get(self, dest: str) -> Optional[str]:
        """The value torchrun would use for ``dest`` from the command line (last one wins)."""
        found = None
        for o in self.options:
            if o.dest == dest:
                found = o.value if o.value is not None else "true"
        return found

    def has(self, dest: str) -> bool:
        return any(o.dest == dest for o in self.options)

    @property
    def program_is_module(self) -> bool:
        return self.has("module")

    def argv(self, options: Optional[list[Option]] = None) -> list[str]:
        opts = self.options if options is None else options
        return [*self.prefix, *(t for o in opts for t in o.tokens), *self.program]

    def replaced(self, set_options: dict[str, Optional[str]], drop: frozenset[str] | set[str] = frozenset(),
                 ) -> list[str]:
        """The command with ``drop`` options removed and ``set_options`` (dest -> value, ``None``
        for a flag) written in place of the first occurrence, or placed first when absent."""
        out: list[Option] = []
        pending = dict(set_options)
        for o in self.options:
            if o.dest in pending:
                out.append(_make(o.dest, pending.pop(o.dest)))
            elif o.dest in drop or o.dest in set_options:
                continue
            else:
                out.append(o)
        return self.argv([*(_make(d, v) for d, v in pending.items()), *out])


def _spelling(dest: str) -> str:
    names = [o for o, (d, _) in _option_table().items() if d == dest and o.startswith("--")]
    if not names:
        raise KeyError(dest)
    dashed = [n for n in names if "_" not in n]
    return (dashed or names)[0]


def _make(dest: str, value: Optional[str]) -> Option:
    opt = _spelling(dest)
    return Option(dest, [opt] if value is None else [opt, str(value)], value)


#: the options ``python -m torch.distributed.launch`` adds to torchrun's (torch/distributed/launch.py ``parse_args``:
#: ``--use-env`` / ``--use_env``, a switch), option string -> (dest, takes a value)
LAUNCH_OPTIONS = {"--use-env": ("use_env", False), "--use_env": ("use_env", False)}


def resolve_option(name: str, legacy: bool = False) -> Optional[str]:
    """The torchrun option string ``name`` stands for: itself, or the one option it abbreviates; None when it is none.
    torchrun's parser (``torch.distributed.run.get_args_parser``) is a plain ``ArgumentParser``, ``allow_abbrev`` left
    True: ``--nproc-per 8`` sets ``--nproc-per-node``, ``--nnode 2`` sets ``--nnodes``; a prefix of several option
    strings (``--nproc``: ``--nproc-per-node``, ``--nproc_per_node``) exits with "ambiguous option" (argparse
    ``_parse_optional``, Python 3.11), refused here the same way.  ``legacy``: the launcher is
    ``torch.distributed.launch``, whose parser has :data:`LAUNCH_OPTIONS` besides."""
    table = {**_option_table(), **LAUNCH_OPTIONS} if legacy else _option_table()
    if name in table:
        return name
    if not name.startswith("--") or len(name) < 3:
        return None
    hits = sorted(o for o in table if o.startswith(name))
    if len(hits) > 1:
        raise UserError(f"torchrun option {name}: ambiguous, it could match {', '.join(hits)} (torch.distributed.run "
                        "exits with 'ambiguous option'); write the whole option")
    return hits[0] if hits else None


def _launcher_prefix(argv: list[str]) -> Optional[int]:
    """Number of tokens that name the launcher, or None when ``argv`` is not a torchrun command."""
    if not argv:
        return None
    exe = os.path.basename(argv[0])
    if exe == "torchrun":
        return 1
    if exe.startswith("python") and len(argv) >= 3 and argv[1] == "-m" and argv[2] in (
            "torch.distributed.run", "torch.distributed.launch"):
        return 3
    return None


def is_torchrun(argv: list[str]) -> bool:
    return _launcher_prefix(list(argv)) is not None


def split_torchrun(argv: list[str]) -> Optional[TorchrunCommand]:
    """Split ``argv`` if it runs torchrun; ``None`` otherwise.  Unknown torchrun options raise
    :class:`UserError` (torchrun itself would reject them)."""
    argv = [str(a) for a in argv]
    n = _launcher_prefix(argv)
    if n is None:
        return None
    legacy = n == 3 and argv[2] == "torch.distributed.launch"
    table = {**_option_table(), **LAUNCH_OPTIONS} if legacy else _option_table()
    cmd = TorchrunCommand(prefix=argv[:n])
    i = n
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("-") or tok == "-":
            break
        if tok == "--":  # argparse: end of options, the script follows
            i += 1
            break
        name, eq, val = tok.partition("=")
        full = resolve_option(name, legacy)  # torchrun takes unique abbreviations (--nproc-per 8)
        if full is None:
            raise UserError(f"torchrun option {tok!r}: not an option of torchrun "
                            f"(torch.distributed.run); put program flags after the training script")
        dest, takes_value = table[full]
        if takes_value and not eq:
            if i + 1 >= len(argv):
                raise UserError(f"torchrun option {name}: missing its value")
            cmd.options.append(Option(dest, [tok, argv[i + 1]], argv[i + 1]))
            i += 2
            continue
        cmd.options.append(Option(dest, [tok], val if eq else None))
        i += 1
    cmd.program = argv[i:]
    if not cmd.program:
        raise UserError(f"command {' '.join(argv)!r}: torchrun needs a training script")
    return cmd


def parse_nnodes(value: str) -> int:
    """torchrun ``--nnodes`` is ``N`` or ``MIN:MAX`` (elastic); a plan takes the largest size
    (:func:`launcher_count`)."""
    n = launcher_count(value, ":")
    if n is None:
        raise UserError(f"torchrun --nnodes={value!r}: expected N or MIN:MAX (whole numbers from 1 to 999,999,999, "
                        "MIN <= MAX: torch.distributed.run refuses a range from 0 or a MIN above the MAX)")
    return n


def parse_nproc(value: str) -> Optional[int]:
    """torchrun ``--nproc-per-node``: a count (:func:`launcher_count`), or gpu / auto (every GPU of the node, decided
    there: None); cpu / xpu (CPU cores, Intel GPUs) are refused."""
    if value in ("gpu", "auto"):  # torch.distributed.run.determine_local_world_size: every GPU of the node
        return None
    if value in ("cpu", "xpu"):
        raise UserError(f"torchrun --nproc-per-node={value!r}: a GPU count: a number, gpu or auto (cpu starts one "
                        "process per CPU core, xpu one per Intel GPU: not runs this tool models)")
    n = launcher_count(value, "")
    if n is None:
        raise UserError(f"torchrun --nproc-per-node={value!r}: expected a whole number from 1 to 999,999,999 or "
                        "gpu / auto")
    return n


# ----------------------------------------------------------------------------- the cluster of a command
def cluster_overrides(overrides: Optional[dict]) -> dict[str, Any]:
    """Accepts the CLI's flat dict (gpu, num_nodes|nodes, gpus_per_node) or ``{"cluster": {...}}``;
    ``None`` values mean "not given"."""
    ov = dict(overrides or {})
    if isinstance(ov.get("cluster"), dict):
        ov = {**{k: v for k, v in ov.items() if k != "cluster"}, **ov["cluster"]}
    if "nodes" in ov and ov.get("num_nodes") is None:
        ov["num_nodes"] = ov.pop("nodes")
    ov.pop("nodes", None)
    unknown = set(ov) - {"gpu", "num_nodes", "gpus_per_node"}
    if unknown:
        raise UserError(f"overrides={sorted(unknown)!r}: only gpu, num_nodes (nodes), gpus_per_node may be overridden")
    return {k: v for k, v in ov.items() if v is not None}


def command_cluster(argv: list[str], overrides: dict[str, Any], gpu_default: Optional[str]) -> Optional[Cluster]:
    """The cluster from torchrun's options and ``overrides``; ``None`` when the command has no
    launcher and the overrides are incomplete (the recipe's own statement then applies)."""
    tr = split_torchrun(argv)
    if tr is None:
        if {"gpu", "num_nodes", "gpus_per_node"} <= set(overrides):
            return Cluster(**overrides)
        return None
    nodes = parse_nnodes(tr.get("nnodes")) if tr.get("nnodes") else 1
    if nodes > 1 and tr.has("standalone"):  # each node's own localhost rendezvous: the nodes never meet
        raise UserError(f"torchrun --nnodes={tr.get('nnodes')!r}: 1 with --standalone: torchrun's --standalone "
                        "rendezvous is local to each node (c10d at localhost:0), so the nodes never meet; drop "
                        "--standalone and give --rdzv-endpoint HOST:PORT for several")
    nproc = parse_nproc(tr.get("nproc_per_node")) if tr.get("nproc_per_node") else 1
    if nproc is None and "gpus_per_node" not in overrides:
        raise UserError(f"torchrun --nproc-per-node={tr.get('nproc_per_node')!r}: the GPU count is decided on "
                        "the node; give --gpus-per-node")
    merged = {"gpu": gpu_default or "h100-sxm", "num_nodes": nodes, "gpus_per_node": nproc}
    merged.update(overrides)
    return Cluster(**merged)


def default_gpu_note(cluster: Cluster, overrides: dict[str, Any]) -> Optional[str]:
    """The note a plan read from a launch command carries where its GPU kind is the default: torchrun and the
    training command state nodes and processes, never the GPU (:func:`command_cluster`); ``None`` where the
    ``--gpu`` override named it.  (A Megatron script's or a TorchTitan TOML's own statement has its own note.)"""
    if overrides.get("gpu") is not None:
        return None
    return (f"cluster gpu={cluster.gpu}: the default (the launch command does not name its GPU; "
            "pass --gpu)")


def launch_cluster(argv: list[str], overrides: dict[str, Any]) -> Cluster:
    """torchrun's options (or one process without a launcher) completed by ``overrides``."""
    cl = command_cluster(argv, overrides, None)
    if cl is None:
        cl = Cluster(**{"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 1, **overrides})
    return cl


def with_torchrun_cluster(argv: list[str], cluster: Cluster) -> list[str]:
    """``argv`` with torchrun's ``--nnodes``/``--nproc-per-node`` set to ``cluster`` where they differ
    from what is written (torchrun defaults 1 and 1); a command without torchrun is returned as is."""
    tr = split_torchrun(argv)
    if tr is None:
        return argv
    want: dict[str, Optional[str]] = {}
    nnodes = tr.get("nnodes")
    if (parse_nnodes(nnodes) if nnodes else 1) != cluster.num_nodes:
        want["nnodes"] = str(cluster.num_nodes)
    nproc = tr.get("nproc_per_node")
    if (parse_nproc(nproc) if nproc else 1) != cluster.gpus_per_node:
        want["nproc_per_node"] = str(cluster.gpus_per_node)
    return tr.replaced(want) if want else argv
