"""In-place edits of a YAML recipe's text, shared by the tuned-recipe writers of Megatron-LM argument YAMLs
(:mod:`megatron_yaml`, its ``ENV_VARS`` too), Megatron-Bridge run configs (:mod:`bridge_yaml`) and Primus
experiments (:mod:`primus_yaml`): finding an entry of a composed mapping, and where new entries go after an
existing one so that the rest of the file (comments, blank lines, quoting) stays as written.

What differs between the formats stays with each writer: how a scalar is quoted (a Megatron YAML's, a Bridge
config's ``yaml.safe_dump`` style, the Primus experiment's own quote kept), which entry a new key follows (the
last of its argument group, of its section, of the ``overrides`` mapping) and how ``${VAR:default}``
templates are edited.
"""

from __future__ import annotations

from typing import Iterable, Optional

import yaml


def entry(node: yaml.Node | None, key: str) -> Optional[tuple[yaml.Node, yaml.Node]]:
    """(key node, value node) of the first entry ``key`` of the mapping ``node``; None when ``node`` is no
    mapping or has no such key."""
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k, v
    return None


def entry_line_end(text: str, value: yaml.Node) -> int:
    """Where a line added after the entry whose value is ``value`` starts: the line break that ends the value's
    last line (after a comment on it), ``len(text)`` when the text ends there without one.  A block
    collection's or block scalar's end mark lies at the start (or the indentation) of the line after it: the
    break before that line."""
    end = value.end_mark.index
    line_start = text.rfind("\n", 0, end) + 1
    if line_start > 0 and not text[line_start:end].strip(" \t"):
        return line_start - 1
    nl = text.find("\n", end)
    return len(text) if nl < 0 else nl


def entries_after(text: str, key: yaml.Node, value: yaml.Node, lines: Iterable[str]) -> tuple[int, str]:
    """(offset, text) of the insertion that adds ``lines`` (entries written relative to the mapping's key
    column, nested ones indented further) after the entry ``key``: ``value``, at the column of ``key``
    (:func:`entry_line_end`)."""
    col = " " * key.start_mark.column
    return entry_line_end(text, value), "".join(f"\n{col}{line}" for line in lines)
