"""YAML files of Megatron-LM arguments <-> argument values, edited in place.

Two layouts are read (keys are Megatron's argparse destinations, e.g. ``tensor_model_parallel_size``):

- flat: a mapping of arguments (what ``--yaml-cfg`` style tools and many recipes use);
- Megatron-LM's experimental ``--yaml-cfg`` layout (``examples/gpt3/gpt_config.yaml``): arguments at
  the top level plus ``language_model:`` and ``model_parallel:`` sub-mappings, with TransformerConfig
  names such as ``num_moe_experts``;

(Primus experiment files, ``modules.pre_trainer...``, are read by :mod:`primus_launch.adapters.primus_yaml`.)

Edits replace the scalar's text (for ``${VAR:default}`` only the default), add a missing key after a
key of the same argument group with the same indentation, and never reflow the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from primus_launch.adapters.megatron_args import BY_DEST, YAML_ALIASES, Flag, convert
from primus_launch.adapters.megatron_script import Edit
from primus_launch.errors import UserError

_ENV = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*):(.*)\}$", re.S)


@dataclass
class YamlEntry:
    dest: str
    key_node: yaml.Node
    value_node: yaml.Node
    mapping: yaml.MappingNode


@dataclass
class YamlRecipe:
    text: str
    path: str
    entries: dict[str, YamlEntry] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)
    main: yaml.MappingNode | None = None

    # ----- edits
    def _scalar_text(self, value: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def set_edit(self, dest: str, value: Any) -> Edit:
        spec = BY_DEST[dest]
        e = self.entries.get(dest)
        if e is not None:
            node = e.value_node
            a, b = node.start_mark.index, node.end_mark.index
            raw = self.text[a:b]
            new = self._scalar_text(value)
            inner = raw.strip("'\"")
            m = _ENV.match(inner)
            if m:
                off = a + raw.index(inner) + len(m.group(1)) + 3
                return Edit(off, off + len(m.group(2)), new)
            return Edit(a, b, new)
        return self._insert(spec, value)

    def _insert(self, spec: Flag, value: Any) -> Edit:
        key = spec.dest
        anchor = None
        for e in self.entries.values():
            if e.mapping is self.main and BY_DEST[e.dest].group == spec.group:
                if anchor is None or e.value_node.end_mark.index > anchor.value_node.end_mark.index:
                    anchor = e
        if anchor is None and self.main is not None and self.main.value:
            k, v = self.main.value[-1]
            anchor = YamlEntry("", k, v, self.main)
        if anchor is None:
            raise UserError(f"{self.path}: no mapping to add {key} to")
        col = anchor.key_node.start_mark.column
        end = anchor.value_node.end_mark.index
        le = self.text.find("\n", end)
        if le < 0:
            return Edit(len(self.text), len(self.text), "\n" + " " * col + f"{key}: {self._scalar_text(value)}")
        # a block scalar / nested value ends at the start of the next line: insert before it
        if end > 0 and self.text[end - 1] == "\n":
            le = end - 1
        return Edit(le, le, "\n" + " " * col + f"{key}: {self._scalar_text(value)}")


def _value(node: yaml.Node) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        return yaml.safe_load(yaml.serialize(node))
    raw = node.value
    m = _ENV.match(raw) if isinstance(raw, str) else None
    if m:
        raw = m.group(2)
        return yaml.safe_load(raw) if raw.strip() else None
    return yaml.safe_load(yaml.serialize(node))


def _mapping_items(node: yaml.Node) -> list[tuple[yaml.Node, yaml.Node]]:
    return list(node.value) if isinstance(node, yaml.MappingNode) else []


def _child(node: yaml.Node, key: str) -> yaml.Node | None:
    for k, v in _mapping_items(node):
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v
    return None


def _collect(rec: YamlRecipe, mapping: yaml.MappingNode, into: dict[str, Any], editable: bool) -> None:
    for k, v in _mapping_items(mapping):
        if not isinstance(k, yaml.ScalarNode):
            continue
        key = YAML_ALIASES.get(k.value, k.value)
        if key == "activation_func" and isinstance(v, yaml.ScalarNode):
            if v.value == "swiglu":
                into["swiglu"] = True
            continue
        spec = BY_DEST.get(key)
        if spec is None:
            continue
        val = convert(spec, _value(v))  # store_false dests (add_bias_linear) hold the dest's value
        into[key] = val
        if editable:
            rec.entries[key] = YamlEntry(key, k, v, mapping)


def from_yaml(text: str, path: str) -> YamlRecipe:
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(root, yaml.MappingNode):
        raise UserError(f"{path}: expected a YAML mapping of Megatron arguments")
    rec = YamlRecipe(text, path)
    args: dict[str, Any] = {}
    if _child(root, "modules") is not None:
        raise UserError(f"{path}: a Primus experiment config (modules:); read it as a Primus recipe")
    rec.main = root
    _collect(rec, root, args, editable=True)
    for sub in ("language_model", "model_parallel"):
        node = _child(root, sub)
        if isinstance(node, yaml.MappingNode):
            _collect(rec, node, args, editable=True)
    rec.args = {k: v for k, v in args.items() if v is not None}
    return rec


def is_yaml_text(text: str) -> bool:
    """Whether ``text`` looks like a YAML mapping of Megatron arguments (not a bash script)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    if not isinstance(data, dict):
        return False
    keys = set(data)
    return bool(keys & (set(BY_DEST) | {"language_model", "model_parallel"}))
