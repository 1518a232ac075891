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

from typing import Callable, Iterable, Optional

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


_FLOW_SPECIAL = ",[]{}#"


def _flow_text(text: str, tokens: list, at: int, first: object) -> str:
    """The one-line flow collection starting at ``tokens[at]`` as written (from ``first``, its tag or itself);
    "" when it spans lines or holds an anchor or alias (a copy would repeat the anchor or name one dropped)."""
    depth = 0
    for tok in tokens[at:]:
        if isinstance(tok, (yaml.AnchorToken, yaml.AliasToken)):
            return ""
        if isinstance(tok, (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken)):
            depth += 1
        elif isinstance(tok, (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken)):
            depth -= 1
            if depth == 0:
                raw = text[first.start_mark.index:tok.end_mark.index]
                return "" if "\n" in raw else raw
    return ""


def unshared_scalars(text: str) -> str:
    """:func:`unshare_once` until nothing changes (a flow list that held an alias is written out on the next pass);
    ``text`` itself when no alias names a one-line value."""
    for _ in range(64):
        out = unshare_once(text)
        if out is text:
            break
        text = out
    return text


def unshare_once(text: str) -> str:
    """``text`` with every alias of a one-line scalar (``eval_iters: &one 1`` ... ``micro_batch_size: *one``)
    written out as the scalar it names, and those scalars' anchors dropped; ``text`` itself when no alias names
    a scalar (or the text does not scan).  The same document to ``yaml.safe_load`` (an alias is the node its
    anchor names, YAML 1.1 spec 3.2.2.2), but each key then holds its own value: the recipe writers edit a value
    where it is written, and an edit of an anchored scalar changed every key that names it (or dropped the
    anchor the others name: the tuned recipe no longer loaded), an edit of an alias changed the anchor's key.
    One-line flow lists and mappings (``recompute_modules: &m [core_attn]``) are written out too, unless they hold
    anchors or aliases; block mappings and lists (``<<: *BASE`` merges) are left as they are."""
    try:
        tokens = list(yaml.scan(text))
    except yaml.YAMLError:
        return text
    scalars: dict[str, str] = {}  # anchor -> the scalar as written (with its tag)
    aliased: set[str] = set()
    edits: list[tuple[int, int, str]] = []
    for i, tok in enumerate(tokens):
        if isinstance(tok, yaml.AnchorToken):
            nxt = first = tokens[i + 1] if i + 1 < len(tokens) else None
            if isinstance(nxt, yaml.TagToken):  # written out with its tag (`&s !!str 1`: a string)
                nxt = tokens[i + 2] if i + 2 < len(tokens) else None
            raw = text[first.start_mark.index:nxt.end_mark.index] if isinstance(nxt, yaml.ScalarToken) else ""
            if isinstance(nxt, (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken)):
                raw = _flow_text(text, tokens, tokens.index(nxt, i), first)
            if raw and "\n" not in raw and text[nxt.start_mark.index:][:1] not in "|>":
                if getattr(nxt, "plain", False) and first is nxt and any(c in raw for c in _FLOW_SPECIAL):
                    raw = '"' + raw.replace("\\", "\\\\").replace('"', '\\"') + '"'
                scalars[tok.value] = raw
            else:
                scalars.pop(tok.value, None)  # a collection's anchor (or a redefinition of the name by one)
        elif isinstance(tok, yaml.AliasToken) and tok.value in scalars:
            aliased.add(tok.value)
            edits.append((tok.start_mark.index, tok.end_mark.index, scalars[tok.value]))
    if not edits:
        return text
    for tok in tokens:  # drop the anchors of the scalars written out (an unused anchor stays)
        if isinstance(tok, yaml.AnchorToken) and tok.value in aliased:
            nxt = text.find(text[tok.end_mark.index:].lstrip(" \t")[:1], tok.end_mark.index)
            edits.append((tok.start_mark.index, nxt if nxt > 0 else tok.end_mark.index, ""))
    out, last = [], 0
    for a, b, new in sorted(edits):
        out.append(text[last:a])
        out.append(new)
        last = b
    out.append(text[last:])
    return "".join(out)


def render_unshared(text: str, render: Callable[[str], str]) -> str:
    """``render`` (a recipe writer's edit of a YAML text) applied to :func:`unshared_scalars` of ``text``; ``text``
    itself when that edits nothing (a plan the recipe already states keeps the file byte for byte)."""
    plain = unshared_scalars(text)
    if plain == text:
        return render(text)
    out = render(plain)
    return text if out == plain else out
