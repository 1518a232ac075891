"""The small primus-launch TOML: points at a native recipe and names the target cluster.

::

    [recipe]
    path = "megatron/llama3.1_70b.sh"   # relative to this file (a script, YAML, TOML or Primus YAML)
    # framework = "megatron"            # optional; detected from the file otherwise
    # primus_root = "../Primus"         # optional: the Primus checkout of a Primus experiment

    [cluster]
    gpu = "h100-sxm"
    nodes = 128
    gpus_per_node = 8

    [hardware]                           # optional: extra/overridden GPU specs (TOML or YAML)
    file = "my_gpus.toml"

    [software]                           # optional: the run's software where it is not the modelled stack
    torch = "2.8.0"                      # torch.__version__ of the run (plan.software.torch, plan/software.py)
    torchtitan = "0.1.0"                 # torchtitan's version.txt of the run (plan.software.torchtitan)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from primus_launch.errors import UserError

_CLUSTER_KEYS = {"gpu": "gpu", "nodes": "num_nodes", "num_nodes": "num_nodes", "gpus_per_node": "gpus_per_node"}


def _read(path: Path) -> dict:
    """The wrapper's tables, through the input boundary, with their types checked."""
    from primus_launch.inputs import expect, parse_toml, read_text

    data = parse_toml(read_text(path, "recipe"), "recipe", str(path))
    for table in ("recipe", "cluster", "hardware", "software"):
        if table in data:
            expect(data[table], dict, table, f"a table ([{table}])")
    rec = data.get("recipe", {})
    for key in ("path", "framework", "primus_root"):
        if key in rec:
            expect(rec[key], str, f"recipe.{key}", "a string" + (" (a file name relative to this file)"
                                                                  if key == "path" else ""))
    if "torch" in data.get("software", {}):
        expect(data["software"]["torch"], str, "software.torch", "a string (a torch version, e.g. \"2.8.0\")")
    if "torchtitan" in data.get("software", {}):
        expect(data["software"]["torchtitan"], str, "software.torchtitan",
               "a string (a torchtitan version, e.g. \"0.1.0\")")
    if "file" in data.get("hardware", {}):
        expect(data["hardware"]["file"], str, "hardware.file", "a string (a TOML/YAML file relative to this file)")
    return data


def is_wrapper(path: Path) -> bool:
    """A primus-launch wrapper has a top-level ``[recipe]`` table with ``path``; a file with a
    ``[recipe]`` (without ``path``) or only the wrapper's tables is a broken wrapper (read as one, so
    that the refusal names what is missing), never a TorchTitan job (which has neither)."""
    data = _read(path)
    return "recipe" in data or (bool(data) and set(data) <= {"cluster", "hardware", "software"})


def wrapper_primus_root(path: Path) -> Path | None:
    """The ``[recipe] primus_root`` of a wrapper, relative to it (None when absent)."""
    from primus_launch.inputs import file_name

    root = _read(path).get("recipe", {}).get("primus_root")
    return None if root is None else path.parent / file_name(root, "recipe.primus_root", "a folder name")


@dataclass(frozen=True)
class Wrapper:
    """What a wrapper states: the native recipe it points at (``target``, resolved; ``written``: as the
    wrapper spells it), the cluster fields it names (plan field names), the framework it insists on
    (None: detected), the Primus checkout (``primus_root``, relative to the wrapper; None when
    absent) and the run's software versions (``[software]``: ``plan.software`` fields)."""

    path: Path
    target: Path
    written: str
    cluster: dict
    framework: str | None
    primus_root: Path | None
    software: dict   # plan.software's fields the wrapper's [software] table states (plan/software.py)


def read_wrapper(path: Path) -> Wrapper:
    """Read and check the wrapper at ``path``; its ``[hardware] file`` is loaded into the GPU database
    (``projection.hardware.gpus.load_gpu_file``).  The dispatcher (``adapters.load_recipe``) reads the
    target recipe on the wrapper's cluster."""
    from primus_launch.inputs import expect, file_name, read_text

    data = _read(path)
    unknown = set(data) - {"recipe", "cluster", "hardware", "software"}
    bad = set(data.get("recipe", {})) - {"path", "framework", "primus_root"}
    if bad:
        raise UserError(f"{path}: unknown [recipe] key(s) {sorted(bad)}; allowed: path, framework, primus_root")
    if unknown:
        raise UserError(f"{path}: unknown table(s) {sorted(unknown)}; allowed: recipe, cluster, hardware, software")
    bad_sw = set(data.get("software", {})) - {"torch", "torchtitan"}
    if bad_sw:
        raise UserError(f"{path}: unknown [software] key(s) {sorted(bad_sw)}; allowed: torch, torchtitan")
    if "torch" in data.get("software", {}):
        from primus_launch.plan import parse_torch_version

        parse_torch_version(data["software"]["torch"])
    if "torchtitan" in data.get("software", {}):
        from primus_launch.plan import parse_torchtitan_version

        parse_torchtitan_version(data["software"]["torchtitan"])
    bad_hw = set(data.get("hardware", {})) - {"file"}
    if bad_hw:
        raise UserError(f"{path}: unknown [hardware] key(s) {sorted(bad_hw)}; allowed: file")
    if "path" not in data.get("recipe", {}):
        raise UserError(f"recipe.path: missing in {path}; a wrapper names its native recipe ([recipe] path = "
                        "\"NAME.sh\" / .yaml / .toml, relative to the wrapper)")
    written = data["recipe"]["path"]
    expected = ("the recipe file itself (a Megatron-LM launch script or argument YAML, a Megatron-Bridge "
                "run_config.yaml, a TorchTitan TOML or launch script, a Primus experiment YAML), relative to the wrapper")
    if isinstance(written, str) and not written:
        raise UserError(f"recipe.path={written!r}: empty; expected {expected}")
    file_name(written, "recipe.path")
    # os.path.realpath, not Path.resolve: a symbolic-link loop is named by read_text below, not a RuntimeError
    target = Path(os.path.realpath(path.parent / written))
    if target.is_dir():
        raise UserError(f"recipe.path={written!r}: a folder ({target}); expected {expected}")
    if not target.is_file() and not os.path.lexists(target):
        raise UserError(f"recipe.path={written!r}: no such file (relative to {path.parent})")
    read_text(target, "recipe.path")  # size and encoding, before anything sniffs its kind
    hw = data.get("hardware", {})
    if "file" in hw:
        from primus_launch.projection.hardware.gpus import load_gpu_file

        load_gpu_file(path.parent / file_name(hw["file"], "hardware.file", "a GPU file name"), "hardware.file")
    cluster = {}
    for k, v in data.get("cluster", {}).items():
        if k not in _CLUSTER_KEYS:
            raise UserError(f"cluster.{k}={v!r}: unknown key; allowed: gpu, nodes, gpus_per_node")
        expect(v, str if k == "gpu" else int, f"cluster.{k}", "a GPU name" if k == "gpu" else "an integer")
        if k != "gpu":
            from primus_launch.plan import PlanError
            from primus_launch.plan.sections import LIMITS

            top = LIMITS[f"cluster.{_CLUSTER_KEYS[k]}"]
            if not 1 <= v <= top:  # as written (`cluster.nodes=0`; the plan's check named `num_nodes`)
                raise PlanError(f"cluster.{k}", v, f"an integer from 1 to {top:,}")
        if _CLUSTER_KEYS[k] in cluster:  # nodes and num_nodes: two spellings of one field
            raise UserError(f"cluster.{k}={v!r}: the node count is already given (nodes and num_nodes are one "
                            "field); give one of them")
        cluster[_CLUSTER_KEYS[k]] = v
    fw = data["recipe"].get("framework")
    if fw is not None and fw not in ("megatron", "torchtitan"):
        raise UserError(f"recipe.framework={fw!r}: one of megatron, torchtitan")
    root = data["recipe"].get("primus_root")
    return Wrapper(path=path, target=target, written=str(data["recipe"]["path"]), cluster=cluster, framework=fw,
                   primus_root=None if root is None else path.parent / file_name(root, "recipe.primus_root",
                                                                                 "a folder name"),
                   software=dict(data.get("software", {})))


def tuned_recipe_path(wrapper: Path, native: Path) -> Path:
    """Where a tune through ``wrapper`` writes the tuned native recipe without ``--out``: beside the native
    recipe (its sourced fragments, ``extends:`` chain and Primus checkout resolve as they did), named after
    the wrapper, ``w.primus.toml`` + ``x.sh`` -> ``w.tuned.sh``: the tuned recipe is the wrapper's cluster's,
    and a tune of ``x.sh`` alone (its own cluster) writes ``x.tuned.sh``, which this must not replace (both
    were ``x.tuned.sh``: tuning the 1,024-GPU wrapper overwrote the 64-GPU script's tune).  A wrapper named
    as the recipe (``x.primus.toml``) gives ``x.primus.tuned.sh``."""
    base = wrapper.name.removesuffix(".toml").removesuffix(".primus") or "wrapper"
    if base == native.stem:
        base += ".primus"
    return native.with_name(f"{base}.tuned{native.suffix}")


def tuned_wrapper_path(wrapper: Path, out_recipe: Path, out_given: bool) -> Path:
    """Where a tune through ``wrapper`` writes its tuned wrapper: ``x.primus.toml`` ->
    ``x.primus.tuned.toml`` next to it, or, with ``--out``, ``<out stem>.primus.toml`` next to the tuned
    recipe."""
    if out_given:
        return out_recipe.with_name(f"{out_recipe.stem}.primus.toml")
    return wrapper.with_name(f"{wrapper.stem}.tuned{wrapper.suffix}")


def render_tuned_wrapper(wrapper: Path, out: Path, tuned_recipe: Path, cluster: dict) -> str:
    """The wrapper's text for the tuned run, comments kept: ``[recipe] path`` names ``tuned_recipe`` and
    ``[cluster]`` holds ``cluster`` (``gpu`` / ``num_nodes`` / ``gpus_per_node``: the cluster the tune
    projected; the native recipe may not be able to state it, e.g. a Primus experiment has no node count),
    every relative path (``recipe.primus_root``, ``hardware.file``) re-based from the wrapper's folder to
    ``out``'s."""
    import tomlkit

    from primus_launch.inputs import read_text

    doc = tomlkit.parse(read_text(wrapper, "recipe"))
    src, dst = wrapper.parent, out.parent

    def rebase(p: str) -> str:
        return os.path.relpath(os.path.realpath(src / p), os.path.realpath(dst))

    doc["recipe"]["path"] = os.path.relpath(os.path.realpath(tuned_recipe), os.path.realpath(dst))
    if "primus_root" in doc["recipe"]:
        doc["recipe"]["primus_root"] = rebase(str(doc["recipe"]["primus_root"]))
    if "hardware" in doc and "file" in doc["hardware"]:
        doc["hardware"]["file"] = rebase(str(doc["hardware"]["file"]))
    if "cluster" not in doc:
        doc["cluster"] = tomlkit.table()
    tbl = doc["cluster"]
    node_key = "num_nodes" if "num_nodes" in tbl else "nodes"
    for key, field in (("gpu", "gpu"), (node_key, "num_nodes"), ("gpus_per_node", "gpus_per_node")):
        if field in cluster and (key not in tbl or tbl[key] != cluster[field]):
            tbl[key] = cluster[field]
    return tomlkit.dumps(doc)
