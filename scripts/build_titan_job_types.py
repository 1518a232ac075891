"""Build the value types of torchtitan v0.2.2's job TOML keys from its own ``JobConfig`` dataclasses.

    python scripts/build_titan_job_types.py [TORCHTITAN_GIT_DIR]   # default /work/.mirror/pytorch+torchtitan/repo

torchtitan v0.2.2 is not the installed torchtitan (0.3.0 has no job TOML), so its
``torchtitan/config/job_config.py`` is read from a git clone of pytorch/torchtitan at tag ``v0.2.2`` and executed
(it imports torch and ``torchtitan.tools.logging``, both installed); every field of ``JobConfig`` and of its nested
dataclasses is written as ``table.key -> kind`` (``int`` / ``float`` / ``bool`` / ``str`` / ``strs`` (list[str]) /
``["a", "b"]`` (a Literal's strings) / ``opt:<kind>`` (``X | None``: the word ``None`` on a command line) /
``other`` (not judged)) into ``primus_launch/data/torchtitan-0.2.2-job.json``, which
:mod:`primus_launch.adapters.titan_job_types` reads.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
import tempfile
import types
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TAG = "v0.2.2"
OUT = ROOT / "primus_launch" / "data" / "torchtitan-0.2.2-job.json"


def kind(tp) -> typing.Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return kind(args[0])
    simple = {bool: "bool", int: "int", float: "float", str: "str"}
    if tp in simple:
        return simple[tp]
    if origin is typing.Literal and all(isinstance(a, str) for a in args):
        return list(args)
    if origin is list and args == (str,):
        return "strs"
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        kinds = {json.dumps(kind(a)) for a in inner}
        if kinds == {'"int"', '"float"'}:
            base: typing.Any = "float"
        elif len(kinds) == 1:
            base = kind(inner[0])
        else:
            return "other"
        if type(None) in args:
            return f"opt:{base}" if isinstance(base, str) and base != "other" else "other"
        return base
    return "other"


def job_types(job_config_cls) -> dict[str, typing.Any]:
    out: dict[str, typing.Any] = {}

    def walk(cls, prefix: str) -> None:
        hints = typing.get_type_hints(cls, include_extras=True)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{f.name}.")
            else:
                out[f"{prefix}{f.name}"] = kind(tp)

    walk(job_config_cls, "")
    return out


def _job_config(git_dir: str, tag: str, path: str):
    """The ``JobConfig`` class of ``path`` at ``tag`` (the file executed on its own)."""
    src = subprocess.run(["git", "--git-dir", git_dir, "show", f"{tag}:{path}"],
                         check=True, capture_output=True, text=True).stdout
    name = f"job_config_{tag.replace('.', '_')}"
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / f"{name}.py"
        file.write_text(src)
        spec = importlib.util.spec_from_file_location(name, file)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod.JobConfig


# the earlier releases the TOML reader takes too: their field names (v0.1.0 ignored unknown fields, v0.2.0 on
# refuse them), so that a key none of them holds can be refused as v0.2's ConfigManager refuses it
EARLIER = (("v0.1.0", "torchtitan/config_manager.py"), ("v0.2.0", "torchtitan/config/job_config.py"),
           ("v0.2.1", "torchtitan/config/job_config.py"))


def main(argv: list[str]) -> int:
    git_dir = argv[0] if argv else "/work/.mirror/pytorch+torchtitan/repo"
    types_ = job_types(_job_config(git_dir, TAG, "torchtitan/config/job_config.py"))
    earlier = sorted({k for tag, path in EARLIER for k in job_types(_job_config(git_dir, tag, path))} - set(types_))
    data = {"generated_by": f"python scripts/build_titan_job_types.py (torchtitan {TAG} torchtitan/config/job_config.py;"
                            f" earlier_names: {', '.join(t for t, _ in EARLIER)})",
            "torchtitan": TAG.lstrip("v"), "types": types_, "earlier_names": earlier}
    from primus_launch.fileio import atomic_write_text
    atomic_write_text(OUT, json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o644)
    print(f"{OUT}: {len(data['types'])} keys of torchtitan {TAG}'s JobConfig, {len(earlier)} of earlier releases only")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
