"""Structured fuzzing of the CLI (robust7): hypothesis draws *parsed* mutations of every bundled recipe
and test corpus file -- a value anywhere in a YAML / TOML tree (not only a number a regular expression
finds) replaced by another type (a list, a table, a string, a boolean, null, a huge integer, nan / inf,
unicode), a key deleted / renamed / duplicated, a subtree nested deep -- bash words and assignments
replaced by drawn shell text, ``--gpu-file`` entries with drawn fields, wrapper clusters with drawn
values, and drawn CLI flag sets (conflicting modes, outputs naming inputs / folders / read-only files).

Each case runs through :func:`bad_input_campaign.run_case` (a forked child with a timeout, its own
folder) and counts what must never happen: a traceback, an internal error (exit 70), a hang, an exit 0
with non-finite or non-positive figures, exit 2 without one error line, an error line that names no
field (the catch-all for a RecursionError / MemoryError), a changed input, a run over 20 s.

    python scripts/fuzz_structured.py [--examples 200] [--seed 7] [--only yaml] [-v]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import shutil
import time
import tomllib
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings, seed as hseed
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import bad_input_campaign as bic  # noqa: E402

TAIL = ["--dry-run", "--json"]


def _files(pattern: str, base: Path) -> list[Path]:
    return sorted(p for p in base.rglob(pattern) if p.is_file())


YAMLS = _files("*.yaml", ROOT / "recipes") + _files("*.yaml", ROOT / "tests" / "data")
TOMLS = [p for p in _files("*.toml", ROOT / "recipes") if not p.name.endswith(".primus.toml")] + \
    _files("*.toml", ROOT / "tests" / "data")
# a NeMo-Framework-Launcher training config (OmegaConf interpolations): the adapter test's
NEMO = (ROOT / "tests" / "test_adapter_nemo_yaml.py").read_text().split('CONFIG = """\\\n')[1].split('"""')[0]
WRAPPERS = _files("*.primus.toml", ROOT / "recipes")
BASHES = _files("*.sh", ROOT / "recipes")


# ----------------------------------------------------------------------------- values
def scalars() -> st.SearchStrategy:
    return st.one_of(
        st.sampled_from([0, -1, 1, 2, 3, 7, 10**9, 2**63, 2**64 + 1, 10**30, -(10**18), True, False, None,
                         0.0, -0.0, 0.5, 1e-300, 1e300, float("nan"), float("inf"), float("-inf"),
                         "", " ", "0", "1e3", "nan", "inf", "true", "null", "auto", "none", "-1", "8B",
                         "llama3", "h100-sxm", "mi300x", "${X}", "${PRIMUS_TP:abc}", "\u00e9\u4e2d\U0001f600",
                         "a\nb", "x" * 10000, "${training.model.num_layers}", "${.hidden_size}", "${..}",
                         "${training.model}", "${multiply:${.hidden_size}, 1e308}", "${divide_ceil:1, 0}",
                         "${divide_floor:${training.model.num_layers}, 0.5}", "${training.run}", "${.}",
                         "${training.model.data.data_prefix.1}", "${multiply:2}", "${x:y:z}", "${}"]),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
    )


def values() -> st.SearchStrategy:
    return st.recursive(scalars(), lambda c: st.one_of(st.lists(c, max_size=4),
                                                        st.dictionaries(st.text(min_size=1, max_size=8), c,
                                                                        max_size=3)), max_leaves=8)


def _paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(tree, dict):
        for k, v in tree.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out += _paths(v, prefix + (i,))
    return out


def _set(tree: Any, path: tuple, op: str, value: Any) -> None:
    parent = tree
    for k in path[:-1]:
        parent = parent[k]
    k = path[-1]
    if op == "replace":
        parent[k] = value
    elif op == "delete":
        del parent[k]
    elif op == "wrap-list":
        parent[k] = [parent[k]]
    elif op == "wrap-deep":
        v = parent[k]
        for _ in range(70):
            v = {"a": v}
        parent[k] = v
    elif op == "rename" and isinstance(parent, dict):
        parent[str(value)[:30] or "_"] = parent.pop(k)
    elif op == "stringify":
        parent[k] = str(parent[k])


@st.composite
def tree_mutation(draw, tree: Any) -> tuple[str, Any]:
    import copy

    t = copy.deepcopy(tree)
    paths = _paths(t)
    n = draw(st.integers(1, 3))
    tags = []
    for _ in range(n):
        paths = _paths(t)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "wrap-list", "wrap-deep", "rename",
                                   "stringify"]))
        v = draw(values()) if op in ("replace", "rename") else None
        try:
            _set(t, path, op, v)
        except (KeyError, IndexError, TypeError):
            continue
        tags.append(f"{op}:{'.'.join(map(str, path))[:60]}={str(v)[:30]!r}")
    return " ".join(tags), t


# ----------------------------------------------------------------------------- TOML writer
def _toml_key(k: Any) -> str:
    k = str(k)
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k, ensure_ascii=False)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if v is None:
        return '""'
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(str(v))


def toml_dump(d: dict, prefix: str = "") -> str:
    lines, tables = [], []
    for k, v in d.items():
        if isinstance(v, dict) and v and all(isinstance(x, (dict, list, str, int, float, bool)) for x in v.values()) \
                and len(prefix) < 200:
            tables.append((k, v))
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    out = "\n".join(lines) + "\n"
    for k, v in tables:
        name = f"{prefix}.{_toml_key(k)}" if prefix else _toml_key(k)
        out += f"\n[{name}]\n" + toml_dump(v, name)
    return out


# ----------------------------------------------------------------------------- cases
FAILURES: list[tuple[str, list[str], str]] = []
COUNT = {"cases": 0}


def _check(case: bic.Case, base: Path, timeout: float, verbose: bool) -> None:
    o = bic.run_case(case, base, timeout)
    COUNT["cases"] += 1
    problems = [p for p in o.problems if not p.startswith("slow")]
    if o.seconds > 20:
        problems.append(f"slow: {o.seconds:.1f} s (> 20 s)")
    lines = [ln for ln in o.stderr.splitlines() if ln.strip()]
    if o.rc == 2 and lines and "too deeply nested to process" in lines[-1]:
        problems.append("catch-all: " + lines[-1][:160])
    if lines and len(lines[-1]) > 600:
        problems.append(f"long error line: {len(lines[-1]):,} characters")
    if o.rc == 0 and "--json" in case.argv:
        try:
            d = json.loads(o.stdout)
            for k in ("iteration_time_s", "tokens_per_sec_per_gpu", "mfu"):
                if k in d and not (isinstance(d[k], (int, float)) and d[k] > 0):
                    problems.append(f"nonsense figure {k}={d[k]}")
        except ValueError:
            pass
    if o.rc == 0 and "--json" not in case.argv:
        for m in re.finditer(r"\b(nan|inf)\b", o.stdout):
            problems.append(f"non-finite text {m.group(0)!r}")
            break
    if problems:
        FAILURES.append((case.name, problems, (lines[-1] if lines else "")[:300]))
    if verbose or problems:
        print(f"{'FAIL' if problems else 'ok  '} {case.name[:110]} rc={o.rc} {o.seconds:.1f}s "
              f"{'; '.join(problems)[:200]} | {(lines[-1] if lines else '')[:200]}", flush=True)


def yaml_case(draw) -> bic.Case:
    src = draw(st.sampled_from(YAMLS + [None]))
    tree = yaml.safe_load(src.read_text() if src else NEMO)
    src = src or Path("nemo1.yaml")
    tag, t = draw(tree_mutation(tree))
    text = yaml.safe_dump(t, sort_keys=False, allow_unicode=True, width=10**6)
    return bic.Case(f"yaml:{src.name}:{tag}", "value", {"r.yaml": text.encode()}, ["--project", "r.yaml"] + TAIL)


def toml_case(draw) -> bic.Case:
    src = draw(st.sampled_from(TOMLS))
    tree = tomllib.loads(src.read_text())
    tag, t = draw(tree_mutation(tree))
    return bic.Case(f"toml:{src.name}:{tag}", "value", {"r.toml": toml_dump(t).encode()}, ["--project", "r.toml"] + TAIL)


def wrapper_case(draw) -> bic.Case:
    src = draw(st.sampled_from(WRAPPERS))
    tree = tomllib.loads(src.read_text())
    target = ROOT / "recipes" / tree["recipe"]["path"]
    tag, t = draw(tree_mutation(tree))
    rel = str(Path(tree["recipe"]["path"]))
    return bic.Case(f"wrapper:{src.name}:{tag}", "value", {"w.primus.toml": toml_dump(t).encode(),
                                                            rel: target.read_bytes()},
                    ["--project", "w.primus.toml"] + TAIL)


_SHELL = st.one_of(st.sampled_from(["$((2**62*4))", "${X:-}", "$(seq 1 9)", "`echo 9`", "'", '"', "\\", "$", "${",
                                    "((", "{1..9999999}", "~", "*", "$@", "${#X}", "${X/a/b}", "0x10", "010",
                                    "-1", "1e9", "nan", "inf", "", " ", "\u00e9", "\x00", "$'\\x41'", "<<EOF",
                                    "$RANDOM", "${!X}", "${X[@]}", "$((1/0))", "|| true", "; exit 0", "&", "\t"]),
                   st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
                   st.integers(-(2**70), 2**70).map(str))


def bash_case(draw) -> bic.Case:
    src = draw(st.sampled_from(BASHES))
    data = src.read_text()
    words = [m.span() for m in re.finditer(r"(?<=[ =])[^ \n\\]+", data)]
    tags = []
    for _ in range(draw(st.integers(1, 3))):
        words = [m.span() for m in re.finditer(r"(?<=[ =])[^ \n\\]+", data)]
        s, e = draw(st.sampled_from(words))
        new = draw(_SHELL)
        tags.append(f"{data[s:e][:20]!r}->{new[:20]!r}")
        data = data[:s] + new + data[e:]
    return bic.Case(f"bash:{src.name}:{' '.join(tags)}", "value", {"r.sh": data.encode()}, ["--project", "r.sh"] + TAIL)


GPU_FIELDS = ["vendor", "arch", "peak_flops_bf16", "peak_flops_fp8", "peak_flops_fp4", "hbm_bytes", "hbm_bw",
              "intra_node_bw", "intra_node_topology", "inter_node_bw", "sustained_clock_fraction", "tdp_w",
              "name", "nic_count", "gpus_per_node"]


def gpu_case(draw) -> bic.Case:
    base = tomllib.loads(bic.GPU_TOML.decode())
    name = draw(st.sampled_from(["mygpu", "h100-sxm", "mi300x", "b200"]))
    entry = dict(base["gpu"]["mygpu"]) if name == "mygpu" else {}
    tags = []
    for _ in range(draw(st.integers(1, 3))):
        f = draw(st.sampled_from(GPU_FIELDS))
        v = draw(scalars())
        entry[f] = v
        tags.append(f"{f}={str(v)[:20]!r}")
    fmt = draw(st.sampled_from(["toml", "yaml"]))
    doc = {"gpu": {name: entry}}
    text = toml_dump(doc) if fmt == "toml" else yaml.safe_dump(doc, allow_unicode=True)
    gname = f"g.{fmt}"
    return bic.Case(f"gpu:{fmt}:{name}:{' '.join(tags)}", "value", {"r.sh": bic.BASH, gname: text.encode()},
                    ["--project", "r.sh", "--gpu-file", gname, "--gpu", name] + TAIL)


FLAG_VALUES = {
    "--gpu": ["h100-sxm", "mi300x", "b200", "gb200", "H100", "x"],
    "--nodes": ["1", "2", "3", "0", "-2", "1000000", "7"],
    "--gpus-per-node": ["1", "3", "8", "0", "72", "100000"],
    "--power-limit-w": ["1", "50", "700", "100000", "0.001", "-5"],
    "--memory-margin": ["0", "0.5", "0.99", "1", "-0.1"],
    "--memory-basis": ["reserved", "allocated"],
    "--train-tokens": ["15T", "0", "-1", "1e40", "abc", "1.5e12", "300B", "1P", "nan", "inf", "1e-9", "0.5"],
    "--gpu-hour-price": ["2", "0", "-1", "nan", "1e300", "inf"],
    "--budget": ["1", "2", "0", "5"],
    "--time-limit": ["0.001", "1", "5"],
    "--max-work": ["0", "1", "10", "-1", "1e30", "100"],
    "--top": ["0", "1", "1000000"],
    "--allow": ["fp8", "optimizer-dtypes", "fp8,fp8", "", ",", "fp4", "FP8", "fp8,optimizer-dtypes"],
    "--emit": ["torchrun", "slurm"],
    "--workers": ["1", "2"],
}
BOOL_FLAGS = ["--explain", "--exhaustive", "--planner", "--memory-certain", "--force", "--json", "--dry-run"]
OUT_TARGETS = ["r.sh", "dir", "ro.sh", "t.sh", "t.html", "x/y/z.html", "dir/", ".", "..", "r.sh.tuned.sh",
               "link-to-dir", "t.json"]


def _cli_setup(d: Path) -> None:
    import os

    (d / "dir").mkdir()
    (d / "ro.sh").write_text("keep\n")
    os.chmod(d / "ro.sh", 0o444)
    os.symlink("dir", d / "link-to-dir")


def cli_case(draw) -> bic.Case:
    mode = draw(st.sampled_from(["--project", "--tune"]))
    argv = [mode, "r.sh", "--dry-run"]
    tags = []
    for f in draw(st.lists(st.sampled_from(sorted(FLAG_VALUES)), max_size=4, unique=True)):
        v = draw(st.sampled_from(FLAG_VALUES[f]))
        argv += [f, v]
    for f in draw(st.lists(st.sampled_from(BOOL_FLAGS), max_size=3, unique=True)):
        argv.append(f)
    for f in draw(st.lists(st.sampled_from(["--out", "--log", "--report", "--trace"]), max_size=2, unique=True)):
        argv += [f, draw(st.sampled_from(OUT_TARGETS))]
    if mode == "--tune" and "--out" not in argv:
        argv += ["--out", "t.sh"]
    if mode == "--tune" and "--max-work" not in argv and "--planner" not in argv and "--exhaustive" not in argv:
        argv += ["--max-work", "200"]
    if mode == "--tune" and ("--planner" in argv or "--exhaustive" in argv) and "--budget" not in argv:
        argv += ["--budget", "5"]
    return bic.Case(f"cli:{' '.join(argv)}", "argv", {"r.sh": bic.BASH}, argv, setup=_cli_setup)


FABRIC_KEYS = ["up_bw", "link_bw", "e_ar", "e_g", "e_a2a", "l_ar", "l_g", "l_a2a", "nic_bw", "e_nic", "e_nic_a2a",
               "l_nic", "a_up", "a_nic", "e_rdma", "e_nvl", "fitted", "e_rs", "l_rs", "e_p2p", "l_nic_a2a", "points",
               "points_ranks", "e_typo"]


def collectives_case(draw) -> bic.Case:
    """A ``[collectives.<gpu>]`` table (per-op link fits, localhw.py's output) with drawn fields."""
    gpu = draw(st.sampled_from(["h100-sxm", "mi300x", "b200", "nope"]))
    table = {}
    for _ in range(draw(st.integers(1, 4))):
        k = draw(st.sampled_from(FABRIC_KEYS))
        if k == "points":
            num = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 2**70))
            v = draw(st.one_of(values(), st.dictionaries(
                st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p", "x"]),
                st.one_of(num, st.lists(st.lists(num, min_size=0, max_size=3), max_size=4)), max_size=3)))
        elif k in ("e_rdma", "e_nvl"):
            v = draw(st.one_of(values(), st.dictionaries(st.sampled_from(["deepep", "hybridep", "x"]), scalars(),
                                                         max_size=2)))
        else:
            num = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 2**70))
            v = draw(st.one_of(num, num, st.lists(num, max_size=3), st.dictionaries(st.text(max_size=4), num, max_size=2),
                               scalars()))
        table[k] = v
    fmt = draw(st.sampled_from(["toml", "yaml"]))
    doc = {"collectives": {gpu: table}}
    text = toml_dump(doc) if fmt == "toml" else yaml.safe_dump(doc, allow_unicode=True)
    recipe = draw(st.sampled_from(["r.sh", "m.sh"]))
    return bic.Case(f"collectives:{fmt}:{gpu}:{str(table)[:100]}", "value",
                    {"r.sh": bic.BASH, "m.sh": (ROOT / "recipes/megatron/mixtral_8x22b.sh").read_bytes(),
                     f"g.{fmt}": text.encode()},
                    ["--project", recipe, "--gpu-file", f"g.{fmt}", "--gpu", gpu if gpu != "nope" else "h100-sxm"] + TAIL)


_NAMES = st.one_of(st.sampled_from(["", " ", ".", "..", "/", "/dev/zero", "/dev/null", "/proc/self/mem", "/tmp",
                                    "dir", "dir/", "link-to-dir", "x" * 300, "x/" * 2100, "a\x00b", "~/x.yaml",
                                    "\u00e9.yaml", "r.sh", "w.primus.toml", "nope.yaml", "fifo", "loop"]),
                   st.text(max_size=10))


def _paths_setup(d: Path) -> None:
    import os

    (d / "dir").mkdir()
    os.symlink("dir", d / "link-to-dir")
    os.mkfifo(d / "fifo")
    os.symlink("loop", d / "loop")


def paths_case(draw) -> bic.Case:
    """A file name a recipe or a flag writes, drawn: empty, a folder, a device, a named pipe, a link loop,
    too long, a NUL, unicode -- in each place a name is read from."""
    name = draw(_NAMES).replace("\\x00", "\x00")
    where = draw(st.sampled_from(["extends", "preset", "wrapper", "wrapper-root", "wrapper-hw", "source", "job-config",
                                  "overlap-cfg", "tokenizer", "gpu-file", "primus-root", "hf-assets"]))
    q = json.dumps(name, ensure_ascii=False)
    files: dict[str, bytes] = {"r.sh": bic.BASH}
    argv = ["--project", "r.sh"] + TAIL
    if where == "extends":
        files["r.yaml"] = f"extends:\n  - {q}\n".encode()
        argv = ["--project", "r.yaml"] + TAIL
    elif where == "preset":
        files["r.yaml"] = bic.PRIMUS.replace(b"    model: llama3.1_8B.yaml\n",
                                             f"    config: {q}\n    model: {q}\n".encode())
        argv = ["--project", "r.yaml", "--primus-root", "dir"] + TAIL
    elif where.startswith("wrapper"):
        key = {"wrapper": "recipe]\npath", "wrapper-root": "recipe]\npath = \"r.sh\"\nprimus_root",
               "wrapper-hw": "hardware]\nfile"}[where]
        files["w.primus.toml"] = (f"[{key} = {q}\n" + ("" if where == "wrapper" else "")).encode() \
            if where != "wrapper-hw" else f'[recipe]\npath = "r.sh"\n[hardware]\nfile = {q}\n'.encode()
        argv = ["--project", "w.primus.toml"] + TAIL
    elif where == "source":
        files["r.sh"] = bic.BASH.replace(b"# Parallelism and batch\n", b"source " + name.encode("utf-8", "replace")
                                         .replace(b"\x00", b"") + b"\n# Parallelism and batch\n")
    elif where == "job-config":
        argv = ["--project"] + TAIL + ["--", "torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train",
                                        "--job.config_file", name.replace("\x00", "")]
    elif where == "overlap-cfg":
        files["r.sh"] = bic.BASH.replace(b"--bf16", b"--bf16 --tp-comm-overlap --tp-comm-overlap-cfg '"
                                         + name.replace("\x00", "").replace("'", "").encode() + b"'")
    elif where == "tokenizer":
        files["r.yaml"] = re.sub(rb"(?m)^tokenizer_model: .*$", lambda m: f"tokenizer_model: {q}".encode(), bic.YAML)
        argv = ["--project", "r.yaml"] + TAIL
    elif where == "gpu-file":
        argv = ["--project", "r.sh", "--gpu-file", name.replace("\x00", "") or "x"] + TAIL
    elif where == "primus-root":
        files["r.yaml"] = bic.PRIMUS
        argv = ["--project", "r.yaml", "--primus-root", name.replace("\x00", "") or "x"] + TAIL
    else:
        files["r.toml"] = re.sub(rb"(?m)^hf_assets_path = .*$", lambda m: f"hf_assets_path = {q}".encode(), bic.TOML)
        argv = ["--project", "r.toml"] + TAIL
    return bic.Case(f"paths:{where}:{name[:40]!r}", "reference", files, argv, setup=_paths_setup)


_REFS = ["training.model.hidden_size", "training.model.num_layers", ".hidden_size", "..model", ".encoder_seq_length",
         "training.trainer.num_nodes", "training.model", "training.model.data.data_prefix.0", "training", ".",
         "training.model.tokenizer.type", "base_results_dir", "training.nope", "..", "...", "training.model.optim.lr"]


@st.composite
def interpolation(draw, depth: int = 0) -> str:
    if depth > 3 or draw(st.booleans()):
        return "${" + draw(st.sampled_from(_REFS)) + "}"
    name = draw(st.sampled_from(["multiply", "divide_ceil", "divide_floor", "oc.env", "nope"]))
    arg = st.one_of(st.sampled_from(["0", "-1", "1e308", "1e-320", "nan", "inf", "9" * 5000, "true", "''", "2.5", "3"]),
                    interpolation(depth + 1))
    args = draw(st.lists(arg, min_size=0, max_size=3))
    return "${" + name + ":" + ", ".join(args) + "}"


def nemo_case(draw) -> bic.Case:
    """The NeMo-Framework-Launcher config with values replaced by drawn OmegaConf interpolations (references,
    the launcher's resolvers, nested, concatenated)."""
    import copy

    t = copy.deepcopy(yaml.safe_load(NEMO))
    tags = []
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_paths(t)))
        parts = draw(st.lists(interpolation(), min_size=1, max_size=3))
        v = draw(st.sampled_from(["", "x", "1"])).join(parts)
        try:
            _set(t, path, "replace", v)
        except (KeyError, IndexError, TypeError):
            continue
        tags.append(f"{'.'.join(map(str, path))}={v[:60]!r}")
    text = yaml.safe_dump(t, sort_keys=False, allow_unicode=True, width=10**6)
    return bic.Case(f"nemo:{' '.join(tags)}", "value", {"r.yaml": text.encode()}, ["--project", "r.yaml"] + TAIL)


def gpu_range_case(draw) -> bic.Case:
    """A GPU entry whose every figure is inside the GPU file's plausible range (drawn log-uniform, the
    ends included), projected and tuned: the answer must stay finite and positive."""
    from primus_launch.projection.hardware.gpus import _RANGES

    entry: dict[str, Any] = {"vendor": draw(st.sampled_from(["nvidia", "amd", "custom"])),
                             "arch": draw(st.sampled_from(["", "hopper", "blackwell", "cdna3", "ampere"])),
                             "intra_node_topology": draw(st.sampled_from(["switch", "mesh"]))}
    tags = []
    for f, (lo, hi, _) in _RANGES.items():
        if f in ("power_limit_w",) or not draw(st.integers(0, 3)):
            continue
        edge = draw(st.sampled_from(["lo", "hi", "mid"]))
        if edge == "mid":
            x = math.exp(draw(st.floats(math.log(max(lo, 1e-9)), math.log(hi))))
        else:
            x = lo if edge == "lo" else hi
        entry[f] = int(x) if f in ("num_sms", "gpus_per_node", "nvlink_domain") else float(x)
        tags.append(f"{f}={entry[f]:.3g}")
    for f, v in (("peak_flops_bf16", 989e12), ("hbm_bytes", 85899345920.0), ("hbm_bw", 3.35e12),
                 ("intra_node_bw", 450e9), ("inter_node_bw", 50e9)):
        entry.setdefault(f, v)
    doc = {"gpu": {"g": entry}}
    mode = draw(st.sampled_from(["--project", "--tune"]))
    recipe = draw(st.sampled_from(["r.sh", "m.sh"]))
    argv = [mode, recipe, "--gpu-file", "g.toml", "--gpu", "g", "--nodes", draw(st.sampled_from(["1", "2", "16"]))] + TAIL
    if mode == "--tune":
        argv += ["--out", "t.sh", "--max-work", "300"]
    return bic.Case(f"gpurange:{mode}:{recipe}:{' '.join(tags)}", "value",
                    {"r.sh": bic.BASH, "m.sh": (ROOT / "recipes/megatron/mixtral_8x22b.sh").read_bytes(),
                     "g.toml": toml_dump(doc).encode()}, argv)


MAKERS = {"gpurange": gpu_range_case, "nemo": nemo_case, "collectives": collectives_case, "paths": paths_case, "yaml": yaml_case, "toml": toml_case, "wrapper": wrapper_case, "bash": bash_case, "gpu": gpu_case,
          "cli": cli_case}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", choices=sorted(MAKERS))
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    import primus_launch.cli  # noqa: F401 - warm the imports the forked children share

    base = Path(tempfile.mkdtemp(prefix="fuzz-structured-"))
    kinds = [a.only] if a.only else sorted(MAKERS)

    @hseed(a.seed)
    @settings(max_examples=a.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data):
        kind = data.draw(st.sampled_from(kinds))
        case = MAKERS[kind](data.draw)
        _check(case, base, a.timeout, a.verbose)

    t0 = time.monotonic()
    try:
        run()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n{COUNT['cases']} cases in {time.monotonic() - t0:.0f} s; {len(FAILURES)} failures")
    classes: dict[str, int] = {}
    for _, probs, _ in FAILURES:
        for p in probs:
            k = p.split(":")[0]
            classes[k] = classes.get(k, 0) + 1
    for k, v in sorted(classes.items()):
        print(f"  {k:30s} {v}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
