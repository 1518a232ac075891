"""Print every Megatron-LM training flag of a checkout as JSON lines (the inventory behind
``primus_launch/adapters/megatron_flags.py`` and docs/megatron-flags.md).

Builds Megatron-LM's own argparse parser (``megatron.training.arguments.add_megatron_arguments``,
which includes the groups generated from config dataclasses) from a source tree, with the optional
tokenizer/logging packages it imports replaced by empty modules, and prints one object per argument:
option strings, dest, kind (true / false / int / float / str / const), nargs, default, choices, group.

    git -C /work/.mirror/NVIDIA+Megatron-LM/repo archive core_r0.16.0 megatron | tar -x -C /tmp/mlm016
    python scripts/megatron_flag_inventory.py /tmp/mlm016 > /tmp/flags-r016.jsonl
    git -C /work/.mirror/NVIDIA+Megatron-LM/repo archive dev megatron | tar -x -C /tmp/mlmdev   # the `dev` rows

What Megatron-LM prints while building its parser (dev's dataclass-to-argparse warnings) goes to stderr, so
stdout stays one JSON object a line.

The tree is kept out of this repository; only the derived table is committed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import importlib.machinery
import json
import re
import sys
import types
import typing
import warnings

_STUBS = {"six", "sentencepiece", "tiktoken", "nltk", "wandb", "einops", "flask", "flask_restful"}


class _Empty(types.ModuleType):
    def __getattr__(self, k: str):
        if k.startswith("__"):
            raise AttributeError(k)
        return type(k, (), {"__init__": lambda self, *a, **kw: None})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in _STUBS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _Empty(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


def _kind(a: argparse.Action) -> str:
    if isinstance(a, argparse._StoreTrueAction):
        return "true"
    if isinstance(a, argparse._StoreFalseAction):
        return "false"
    if isinstance(a, argparse._StoreConstAction):
        return "const"
    if isinstance(a, argparse.BooleanOptionalAction):
        return "boolopt"
    t = a.type
    if t is int:
        return "int"
    if t is float:
        return "float"
    return "str"


def inventory(root: str) -> list[dict]:
    warnings.filterwarnings("ignore")
    sys.path.insert(0, root)
    sys.meta_path.insert(0, _Finder())
    sys.modules.setdefault("regex", re)
    if not hasattr(typing, "override"):  # Megatron-LM main uses Python 3.12's typing.override
        typing.override = lambda f: f  # type: ignore[attr-defined]
    with contextlib.redirect_stdout(sys.stderr):
        from megatron.training.arguments import add_megatron_arguments

        parser = add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    group_of = {}
    for g in parser._action_groups:
        for a in g._group_actions:
            group_of[id(a)] = g.title
    out = []
    for a in parser._actions:
        if not a.option_strings or a.dest == "help":
            continue
        default = a.default
        if not isinstance(default, (int, float, str, bool, type(None), list, tuple)):
            default = str(default)
        out.append(dict(flags=list(a.option_strings), dest=a.dest, kind=_kind(a),
                        nargs=a.nargs if isinstance(a.nargs, (str, int)) or a.nargs is None else str(a.nargs),
                        default=list(default) if isinstance(default, tuple) else default,
                        const=a.const if isinstance(a.const, (int, float, str, bool, type(None))) else str(a.const),
                        choices=[str(c) for c in a.choices] if a.choices else None,
                        group=group_of.get(id(a), "")))
    return out


if __name__ == "__main__":
    for row in inventory(sys.argv[1]):
        print(json.dumps(row, default=str))
