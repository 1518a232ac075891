"""Where the YAML writers (Megatron argument YAMLs and their ENV_VARS, Megatron-Bridge run configs, Primus
experiments) add an entry after an existing one (adapters/yaml_text.py): the result is read back by PyYAML,
the independent source here, as the mapping with the new key at the right level and nothing else moved."""

from __future__ import annotations

import pytest
import yaml

from primus_launch.adapters.yaml_text import entries_after, entry


def _add_after(text: str, path: list[str], lines: list[str]) -> str:
    node = yaml.compose(text)
    for key in path[:-1]:
        node = entry(node, key)[1]
    k, v = entry(node, path[-1])
    at, added = entries_after(text, k, v, lines)
    return text[:at] + added + text[at:]


@pytest.mark.parametrize("text, path, want", [
    # a scalar with a comment on its line: the comment stays on it (the Bridge writer moved it to the new line)
    ("model:\n  a: 1  # note\ntrain:\n  b: 2\n", ["model", "a"], "  a: 1  # note\n  new: 3\n"),
    # a block list ending where a shallower key starts, at column 0 and indented (the Primus and ENV_VARS writers
    # added the entry after that key's line in the second case)
    ("a:\n  - 1\n  - 2\nb: 2\n", ["a"], "  - 2\nnew: 3\nb: 2\n"),
    ("top:\n  mid:\n    xs:\n      - 1\n  other: 2\n", ["top", "mid", "xs"], "      - 1\n    new: 3\n  other: 2\n"),
    # a block scalar; the file's last line without a line break
    ("a: |\n  text\nb: 2\n", ["a"], "  text\nnew: 3\nb: 2\n"),
    ("a: 1\nb: 2", ["b"], "b: 2\nnew: 3"),
])
def test_new_entry_goes_after_the_value_at_its_keys_column(text, path, want):
    out = _add_after(text, path, ["new: 3"])
    assert want in out
    doc, before = yaml.safe_load(out), yaml.safe_load(text)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    assert parent.pop("new") == 3
    assert doc == before
