"""OmegaConf interpolations of NeMo-Framework-Launcher training configs, resolved without OmegaConf.

What the launcher's files use (NVIDIA/NeMo-Framework-Launcher ``launcher_scripts/conf/training/**.yaml``,
@26e42fa, 2025-04-18): node references ``${training.model.hidden_size}`` (absolute, under the launcher's
``training`` group: the file is that group), ``${.hidden_size}`` / ``${..name}`` (relative: one dot the
mapping that holds the key, each further dot its parent), and the resolvers ``launcher_scripts/main.py``
registers: ``multiply`` (``x * y``), ``divide_ceil`` (``int(math.ceil(x / y))``), ``divide_floor``
(``int(math.floor(x / y))``).  A reference outside the file (``${base_results_dir}``, ``${data_dir}``, the
launcher's ``cluster`` group) is left as written: such values are paths and names, and a field the model
needs that stays unresolved is refused by its reader, naming it.

Bounds (a config is a few KB; OmegaConf itself has none): a reference chain or resolver nesting deeper
than ``_MAX_DEPTH`` is refused (a key met again on its own chain: a cycle, said as such), a value whose
resolved text passes ``_MAX_CHARS`` is refused (``d1: ${.d0}${.d0}``, ``d2: ${.d1}${.d1}`` ... doubles each
level: 2^30 characters from 30 lines), and each key's resolution is kept, so a reference is resolved once.
The resolvers take finite numbers and give finite ones (``math.ceil(inf)`` raises in the launcher).

Megatron-Bridge / Megatron-LM ConfigContainer YAMLs use the same node references with the file's top as the root
(``root=None``) and no resolvers of their own (:mod:`primus_launch.adapters.bridge_interp`); a ``${name:args}``
whose resolver is not one given stays as written (OmegaConf's grammar: a colon only follows a resolver's name).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from primus_launch.errors import UserError

RESOLVERS: dict[str, Callable[[Any, Any], Any]] = {
    "multiply": lambda x, y: x * y,
    "divide_ceil": lambda x, y: int(math.ceil(x / y)),
    "divide_floor": lambda x, y: int(math.floor(x / y)),
}
ROOT = "training"  # the launcher's config group the file is read into
_MAX_DEPTH = 32
_MAX_CHARS = 1 << 20  # characters of one resolved value (the file itself is at most 256 KiB)


class Unresolved(str):
    """An interpolation that points outside the file (kept as its text)."""


def _spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level ``${...}`` in ``text`` (nested ones inside it skipped)."""
    out, i = [], 0
    while True:
        a = text.find("${", i)
        if a < 0:
            return out
        depth, j = 0, a
        while j < len(text):
            if text.startswith("${", j):
                depth, j = depth + 1, j + 2
                continue
            if text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if depth:
            return out  # unbalanced: left as text
        out.append((a, j + 1))
        i = j + 1


def _split_args(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    i = 0
    while i < len(text):
        if text.startswith("${", i):
            depth, cur, i = depth + 1, cur + "${", i + 2
            continue
        ch = text[i]
        if ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
        i += 1
    parts.append(cur.strip())
    return parts


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text.strip("'\"")


class Resolver:
    """Resolves the values of one config (``data``: the file's plain YAML data)."""

    def __init__(self, data: dict, path: str, root: str | None = ROOT,
                 resolvers: dict[str, Callable[[Any, Any], Any]] | None = None) -> None:
        self.data, self.path, self.root = data, path, root
        self.resolvers = RESOLVERS if resolvers is None else resolvers
        self._done: dict[tuple[str, ...], Any] = {}  # key path -> its resolved value
        self._chain: list[tuple[str, ...]] = []  # the key paths being resolved, outermost first

    def lookup(self, keys: list[str], where: str) -> tuple[Any, tuple[str, ...]]:
        node: Any = self.data
        for k in keys:
            if isinstance(node, dict) and k in node:
                node = node[k]
            elif isinstance(node, list) and k.isascii() and k.isdigit() and len(k) < 10 and int(k) < len(node):
                node = node[int(k)]
            else:
                raise UserError(f"{self.path}: {where}: the interpolation names {'.'.join(keys)!r}, which the file "
                                "does not hold")
        return node, tuple(keys[:-1])

    def value(self, value: Any, here: tuple[str, ...], where: str, depth: int = 0) -> Any:
        """``value`` (found in the mapping at key path ``here``) with its interpolations resolved."""
        if depth > _MAX_DEPTH:
            raise UserError(f"{self.path}: {where}: interpolations nested deeper than {_MAX_DEPTH} levels")
        if not isinstance(value, str) or "${" not in value:
            return value
        spans = _spans(value)
        if len(spans) == 1 and spans[0] == (0, len(value)):
            return self._one(value[2:-1], here, where, depth)
        out, last, unresolved = "", 0, False
        for a, b in spans:
            got = self._one(value[a + 2:b - 1], here, where, depth)
            if isinstance(got, (dict, list)):  # a node's text has no value of its own in a string
                raise UserError(f"{self.path}: {where}: {value[a:b]} names a {'mapping' if isinstance(got, dict) else 'list'}"
                                ", which a string cannot hold (name one of its values)")
            unresolved = unresolved or isinstance(got, Unresolved)
            out += value[last:a] + str(got)
            last = b
            if len(out) > _MAX_CHARS:
                raise UserError(f"{self.path}: {where}: interpolations expand to more than {_MAX_CHARS:,} characters")
        out += value[last:]
        return Unresolved(out) if unresolved else out

    def _one(self, inner: str, here: tuple[str, ...], where: str, depth: int) -> Any:
        name, sep, rest = inner.partition(":")
        if sep and name.strip() in self.resolvers:
            args = [self.value(a, here, where, depth + 1) if "${" in a else _number(a) for a in _split_args(rest)]
            if len(args) != 2 or any(isinstance(a, Unresolved) for a in args):
                return Unresolved("${" + inner + "}")
            if not all(isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a) for a in args):
                raise UserError(f"{self.path}: {where}: ${{{inner}}}: the {name} resolver takes two finite numbers, "
                                f"got {args[0]!r}, {args[1]!r}")
            if name.strip() != "multiply" and args[1] == 0:
                raise UserError(f"{self.path}: {where}: ${{{inner}}}: division by zero")
            try:
                got = self.resolvers[name.strip()](args[0], args[1])
            except OverflowError:  # divide_ceil of a huge quotient (1 / 1e-320)
                got = math.inf
            if isinstance(got, float) and not math.isfinite(got):
                raise UserError(f"{self.path}: {where}: ${{{inner}}}: {got} (a finite number is needed)")
            return got
        ref = inner.strip()
        if sep:  # a resolver this reader does not evaluate (oc.env, oc.decode, ...)
            return Unresolved("${" + inner + "}")
        if ref.startswith("."):
            dots = len(ref) - len(ref.lstrip("."))
            base = list(here[:len(here) - (dots - 1)]) if dots - 1 <= len(here) else None
            if base is None:
                return Unresolved("${" + inner + "}")
            keys = base + ref[dots:].split(".")
        else:
            keys = ref.split(".")
            if self.root is not None:
                if keys[0] != self.root:
                    return Unresolved("${" + inner + "}")
                keys = keys[1:]
        at = tuple(keys)
        if at in self._done:
            return self._done[at]
        if at in self._chain:
            raise UserError(f"{self.path}: {where}: interpolations refer to each other in a cycle "
                            f"({'.'.join(at)})")
        found, parent = self.lookup(keys, where)
        self._chain.append(at)
        try:
            got = self.value(found, parent, where, depth + 1)
        finally:
            self._chain.pop()
        self._done[at] = got
        return got

    def at(self, keys: tuple[str, ...]) -> Any:
        """The resolved value at key path ``keys`` (None when absent)."""
        node: Any = self.data
        for k in keys:
            if not isinstance(node, dict) or k not in node:
                return None
            node = node[k]
        return self.value(node, keys[:-1], ".".join(keys))


def unresolved_why(text: str) -> str:
    """Why an interpolation of ``text`` (an :class:`Unresolved` value) stayed as written, and what to do: a resolver
    this reader does not evaluate (OmegaConf's ``oc.env`` reads the launching shell's environment; ``oc.decode``,
    ``oc.create``, ``now`` and a launcher's own resolvers run only inside OmegaConf) or a key outside the file."""
    for a, b in _spans(text):
        inner = text[a + 2:b - 1]
        name, sep, rest = inner.partition(":")
        name = name.strip()
        if sep and name == "oc.env":
            var, _, default = rest.partition(",")
            dflt = f", default {default.strip()}" if default.strip() else ", no default"
            return (f"resolver {text[a:b]} not evaluated (OmegaConf reads the environment variable {var.strip()} when "
                    f"the launcher runs{dflt}): write the value")
        if sep and name not in RESOLVERS and not name.startswith("."):
            return (f"resolver {text[a:b]} not evaluated (primus-launch evaluates {', '.join(RESOLVERS)} and keys of "
                    "the file): write the value")
        if "${" in inner:
            return unresolved_why(inner)
        return f"{text[a:b]} names a key outside the file (another launcher config group): write the value"
    return "an interpolation outside the file; write the value"


__all__ = ["RESOLVERS", "Resolver", "Unresolved", "unresolved_why"]
