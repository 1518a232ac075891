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

import primus_launch.adapters.megatron_flags as megatron_flags
from primus_launch.adapters.megatron_args import BY_DEST, BY_FLAG, NULL_MEANS_FALSE, YAML_ALIASES, Flag, convert
from primus_launch.adapters.megatron_flags import FALSE_WORDS
from primus_launch.adapters.megatron_script import Edit
from primus_launch.adapters.yaml_text import entries_after, entry
from primus_launch.errors import UserError
from primus_launch.plan import PlanError, UnmodelledFlag

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
    format: str = "megatron-yaml"
    key_style: str = "dest"  # how new keys are written: dest, underscore flag name, or --flag
    notes: list[str] = field(default_factory=list)
    # launch environment: the top-level ENV_VARS mapping (NVIDIA recipes; the launcher exports it)
    env: dict[str, str] = field(default_factory=dict)
    env_node: yaml.MappingNode | None = None
    # a functional test's GPUs per node for its MODEL_ARGS run (MODEL_ENV_VARS.MODEL_ARGS.GPUS_PER_NODE), or None
    gpus_per_node: int | None = None
    # MODEL_ARGS values written escaped for the functional-test runner's shell (runner_unescaped): written back so
    shell_escaped: set[str] = field(default_factory=set)

    def env_edits(self, values: dict[str, str]) -> list[Edit]:
        """Edits that set each ``VAR: 'value'`` of ``values`` in the top-level ``ENV_VARS`` mapping
        (added at the end of the file when the YAML has none)."""
        return env_mapping_edits(self.text, self.path, self.env_node, values, "ENV_VARS",
                                 "launch environment (Megatron-LM reads it at start-up; NVIDIA recipes' ENV_VARS)")

    # ----- edits
    def _scalar_text(self, value: Any, dest: str = "") -> str:
        if self.key_style == "flag" and isinstance(value, (list, tuple)):
            # a functional test's MODEL_ARGS list as its runner passes one: the string "[a b c]", brackets stripped
            # and the words split (tests/functional_tests/shell_test_utils/_run_training.sh @d98e8a6, the
            # "value is wrapped in [ ]" case; every list-valued MODEL_ARGS upstream is written so); a flow sequence
            # [a, b] would reach Megatron-LM as the words 'a,' and 'b'
            return '"[' + " ".join(str(v) for v in value) + ']"'
        if dest in self.shell_escaped and isinstance(value, str):
            txt = runner_escaped(value)
            return f"'{txt}'" if re.match(r"[-?:,\[\]{}#&*!|>'\"%@`]", txt) or ": " in txt or " #" in txt else txt
        return scalar_text(value)

    def remove_edit(self, dest: str) -> Edit:
        """Delete the entry's line(s) (NVIDIA YAMLs become command-line flags: ``key: null`` or a false
        switch would be passed as a value)."""
        e = self.entries[dest]
        a = self.text.rfind("\n", 0, e.key_node.start_mark.index) + 1
        end = e.value_node.end_mark.index
        if isinstance(e.value_node, (yaml.SequenceNode, yaml.MappingNode)) and not e.value_node.flow_style:
            end = self.text.rfind("\n", e.value_node.start_mark.index, end)
        else:
            nl = self.text.find("\n", end)
            end = len(self.text) - 1 if nl < 0 else nl
        return Edit(a, min(end + 1, len(self.text)), "")

    def key_for(self, spec: Flag) -> str:
        """A new key in the file's own style (``dest``, ``flag_name`` or ``--flag``)."""
        if self.key_style == "flag":
            return spec.flag
        if self.key_style == "flag_underscore":
            return spec.flag[2:].replace("-", "_")
        return spec.dest

    def set_edit(self, dest: str, value: Any, exclude: frozenset[str] = frozenset()) -> Edit:
        spec = BY_DEST[dest]
        e = self.entries.get(dest)
        if e is not None:
            node = e.value_node
            a, b = node.start_mark.index, node.end_mark.index
            raw = self.text[a:b]
            if spec.kind == "false" and e.key_node.value != spec.dest and isinstance(value, bool):
                value = not value  # the key is the flag (disable_bias_linear: true), the value its dest's
            if isinstance(node, yaml.SequenceNode) and not node.flow_style and isinstance(value, (list, tuple)):
                col = node.start_mark.column
                end = self.text.rfind("\n", a, b)  # a block ends where the next key starts
                end = b if end < 0 else end
                return Edit(a, end, ("\n" + " " * col).join(f"- {v}" for v in value))
            new = self._scalar_text(value, dest)
            if not isinstance(node, yaml.ScalarNode) and not node.flow_style:
                end = self.text.rfind("\n", a, b)  # a block ends where the next key starts: keep its newline
                return Edit(a, b if end < 0 else end, new)
            inner = raw.strip("'\"")
            m = _ENV.match(inner)
            if m:
                off = a + raw.index(inner) + len(m.group(1)) + 3
                return Edit(off, off + len(m.group(2)), new)
            return Edit(a, b, new)
        return self._insert(spec, value, exclude)

    def _insert(self, spec: Flag, value: Any, exclude: frozenset[str] = frozenset()) -> Edit:
        key = spec.dest
        anchor = None
        for e in self.entries.values():
            if e.mapping is self.main and BY_DEST[e.dest].group == spec.group and e.dest not in exclude:
                if anchor is None or e.value_node.end_mark.index > anchor.value_node.end_mark.index:
                    anchor = e
        if anchor is None and self.main is not None and self.main.value:
            keep = [(k, v) for k, v in self.main.value
                    if not any(e.key_node is k for d, e in self.entries.items() if d in exclude)]
            k, v = (keep or self.main.value)[-1]
            anchor = YamlEntry("", k, v, self.main)
        if anchor is None:
            raise UserError(f"{self.path}: no mapping to add {key} to")
        key = self.key_for(spec)
        if spec.kind == "false" and key != spec.dest and isinstance(value, bool):
            value = not value
        at, lines = entries_after(self.text, anchor.key_node, anchor.value_node,
                                  [f"{key}: {self._scalar_text(value, spec.dest)}"])
        return Edit(at, at, lines)


_RUNNER_SPECIAL = re.compile(r"([|()<>;&])")


@dataclass
class MappedYamlRecipe:
    """A nested YAML read onto Megatron arguments (a Megatron-Bridge run config, a NeMo 1.0 config): the
    values by Megatron destination, the YAML nodes each came from (to edit in place), the sections, the
    reader's notes and unmodelled settings, and the launch environment the file states."""

    text: str
    path: str
    args: dict[str, Any] = field(default_factory=dict)
    nodes: dict[str, list[tuple[yaml.Node, bool]]] = field(default_factory=dict)  # dest -> [(node, inverted)]
    sections: dict[str, yaml.MappingNode] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unmodelled: list[UnmodelledFlag] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    env_node: yaml.MappingNode | None = None


def flag_dest(flag: str) -> str | None:
    """The Megatron-LM destination a flag sets (``--fp8-format`` -> ``fp8``, ``--no-masked-softmax-fusion`` ->
    ``masked_softmax_fusion``); None for a word no flag table knows."""
    spec = BY_FLAG.get(flag)
    if spec is not None:
        return spec.dest
    row = megatron_flags.by_option().get(flag)
    return row.dest if row is not None else None


def warnings_as_keys(unmodelled: list[UnmodelledFlag], spelled: dict[str, tuple[str, Any]]) -> list[UnmodelledFlag]:
    """Each warning on a Megatron-LM flag whose value the file gave (``spelled``: destination -> (the file's dotted
    key, its value as written)) named as the file writes it: ``--no-masked-softmax-fusion=true`` ->
    ``model.masked_softmax_fusion=false`` (a NeMo / Megatron-Bridge user's warnings named flags they never typed)."""
    out = []
    for w in unmodelled:
        dest = flag_dest(w.flag) if w.flag.startswith("--") else None
        if dest in spelled:
            key, value = spelled[dest]
            shown = str(value).lower() if isinstance(value, bool) else str(value)
            w = w.model_copy(update={"flag": key, "value": shown})
        out.append(w)
    return out


def runner_unescaped(value: str) -> str:
    """A ``MODEL_ARGS`` value as Megatron-LM's functional-test runner hands it to the training script
    (tests/functional_tests/shell_test_utils/_run_training.sh, core_v0.14.0): ``echo "$value" | xargs`` (a
    backslash escapes the next character), then ``eval "PARAMS=(... $key $value ...)"``: an unquoted word
    (a backslash escapes the next character again), or ``"$value"`` when it holds a blank or is wrapped in
    ``( )`` (only ``\\$ \\` \\" \\\\`` lose the backslash).  ``Et*3\\\\|\\\\(tt\\\\|\\\\)*6tmL`` ->
    ``Et*3|(tt|)*6tmL`` (its moe test case, whose comment says so)."""
    once = re.sub(r"\\(.)", r"\1", value, flags=re.S)
    if " " in once or re.fullmatch(r"\([^)]+\)", once):
        return re.sub(r'\\([$`"\\])', r"\1", once)
    return re.sub(r"\\(.)", r"\1", once, flags=re.S)


def runner_escaped(value: str) -> str:
    """``value`` written for that runner as the file wrote it: each of ``| ( ) < > ; &`` behind two
    backslashes (one for xargs, one for eval)."""
    return _RUNNER_SPECIAL.sub(r"\\\\\1", value)


def _runner_values(rec: YamlRecipe, args: dict[str, Any]) -> None:
    """String values of a functional test's ``MODEL_ARGS`` that hold a backslash, read as its runner passes
    them (:func:`runner_unescaped`); the writer escapes a new value of theirs the same way."""
    for dest, v in list(args.items()):
        if isinstance(v, str) and "\\" in v:
            args[dest] = runner_unescaped(v)
            rec.shell_escaped.add(dest)
            flag = BY_DEST[dest].flag if dest in BY_DEST else dest
            rec.notes.append(f"{flag} {v}: read as the functional-test runner's shell passes it (xargs, then eval): "
                             f"{args[dest]}")


def _value(node: yaml.Node) -> Any:
    """The Python value of a composed node, as ``yaml.safe_load`` gives it.  A scalar is constructed
    from its resolved tag directly (the safe constructor; a re-serialise and re-load per scalar cost a
    millisecond each, most of a recipe's read); a collection is re-loaded from its own text, so that
    the safe constructor's merge-key flattening never edits the composed tree the writer edits."""
    try:
        if not isinstance(node, yaml.ScalarNode):
            return yaml.safe_load(yaml.serialize(node))
        raw = node.value
        m = _ENV.match(raw) if isinstance(raw, str) else None
        if m:
            raw = m.group(2)
            return yaml.safe_load(raw) if raw.strip() else None
        return yaml.constructor.SafeConstructor().construct_document(node)
    except yaml.YAMLError:
        return node.value if isinstance(node, yaml.ScalarNode) else None


def _mapping_items(node: yaml.Node) -> list[tuple[yaml.Node, yaml.Node]]:
    return list(node.value) if isinstance(node, yaml.MappingNode) else []


def _child(node: yaml.Node, key: str) -> yaml.Node | None:
    hit = entry(node, key)
    return None if hit is None else hit[1]


def _resolve(key: str) -> tuple[str, Flag | None, bool]:
    """(dest, modelled spec or None, key names the flag of a store_false dest) of a YAML key: a dest
    (``tensor_model_parallel_size``), a flag name with underscores (``disable_bias_linear``, NVIDIA
    ``ARGS:``) or a ``--flag`` (functional tests' ``MODEL_ARGS:``)."""
    key = YAML_ALIASES.get(key, key)
    spec = BY_DEST.get(key)
    if spec is not None and not key.startswith("-"):
        return key, spec, False
    flagname = key if key.startswith("-") else "--" + key.replace("_", "-")
    spec = BY_FLAG.get(flagname)
    if spec is not None:
        return spec.dest, spec, spec.kind == "false"
    f = megatron_flags.lookup(key)
    if f is not None:
        return f.dest, None, f.kind == "false" and (key.startswith("-") or key != f.dest)
    return key, None, False


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _runner_switch(key: str, raw: Any, node: yaml.Node) -> None:
    """Refuse a ``--switch: VALUE`` of a functional test's ``MODEL_ARGS`` other than true: Megatron-LM's runner
    (``tests/functional_tests/shell_test_utils/_run_training.sh``) passes the bare flag for ``true`` only and
    ``--switch VALUE`` for anything else, which Megatron-LM's parser refuses ("unrecognized arguments: false");
    the reader read ``--sequence-parallel: false`` as off.  The runner reads the file with yq (YAML 1.2): ``on`` /
    ``yes`` are words there, not true."""
    text = node.value if isinstance(node, yaml.ScalarNode) else None
    if not key.startswith("--") or raw == "true" or (raw is True and text in ("true", "True", "TRUE")):
        return
    f = megatron_flags.by_option().get(key)
    if f is not None and f.kind in ("true", "false", "boolopt", "const"):
        raise PlanError(key, text if raw is True else raw, "true, or the key left out: the functional-test runner "
                                  "(YAML 1.2: yes / on are words) passes the bare flag for true "
                                  f"only and '{key} VALUE' otherwise, which Megatron-LM's parser refuses "
                                  "('unrecognized arguments')")


def _collect(rec: YamlRecipe, mapping: yaml.MappingNode, into: dict[str, Any], editable: bool) -> None:
    # YAML merge keys first (`<<: *BASE_MODEL_ARGS`, as functional tests share arguments): the
    # mapping's own keys win over merged ones (YAML 1.1 merge); merged entries are not edited in
    # place (the anchor is shared): a tuned value is added to this mapping, where it wins.
    for k, v in _mapping_items(mapping):
        if isinstance(k, yaml.ScalarNode) and k.tag == _MERGE_TAG:
            for src in (v.value if isinstance(v, yaml.SequenceNode) else [v])[::-1]:
                if isinstance(src, yaml.MappingNode):
                    _collect(rec, src, into, editable=False)
    seen: dict[str, int] = {}
    for k, v in _mapping_items(mapping):
        if not isinstance(k, yaml.ScalarNode) or k.tag == _MERGE_TAG:
            continue
        if k.value in seen and editable:  # YAML keeps the last (as Megatron-LM's functional-test runner does)
            rec.notes.append(f"{k.value}: given twice (lines {seen[k.value]} and {k.start_mark.line + 1}); "
                             "the last is read")
        seen[k.value] = k.start_mark.line + 1
        key = YAML_ALIASES.get(k.value, k.value)
        if key == "activation_func" and isinstance(v, yaml.ScalarNode):
            if v.value == "swiglu":
                into["swiglu"] = True
            continue
        dest, spec, negated = _resolve(key)
        raw = _value(v)
        _runner_switch(key, raw, v)
        if spec is None:
            if isinstance(raw, bool) and negated:
                raw = not raw  # `no_save_optim: true` -> save_optim False
            if isinstance(raw, dict):
                f = megatron_flags.lookup(key)
                if f is not None and key not in ("language_model", "model_parallel"):
                    # a mapping where Megatron takes one value (`lr: {a: 1}`): not a section of arguments
                    raise PlanError(f.flag, raw, "a single value, not a mapping")
                continue  # a nested section (Primus, NeMo) that is not an argument
            into[dest] = raw
            continue
        if spec.kind in ("true", "false") and isinstance(raw, str) and isinstance(v, yaml.ScalarNode) \
                and v.style in ("'", '"') and not _ENV.match(v.value) and raw and raw.strip().lower() in FALSE_WORDS:
            # `bf16: 'false'`: yaml.safe_load gives the string, which Megatron-LM's --yaml-cfg namespace keeps and
            # `if args.bf16:` takes as true (a non-empty string); the word says false
            raise PlanError(spec.flag, raw, "true or false unquoted (a quoted string is no YAML boolean: Megatron-LM "
                                            "keeps the string, which is true whatever it says)")
        if spec.kind in ("int", "float") and isinstance(raw, str) and raw.strip().lower() in ("none", "null") \
                and isinstance(v, yaml.ScalarNode) and not _ENV.match(v.value):
            # `global_batch_size: None` / `'null'`: a string to yaml.safe_load (YAML's null is null / ~ / empty),
            # which Megatron-LM's --yaml-cfg namespace keeps (its arithmetic fails) and the functional-test runner
            # passes to the parser ('invalid int value'); convert() read it as unset and projected the default
            raise PlanError(spec.flag, raw, ("an integer" if spec.kind == "int" else "a number") + ", or null unquoted "
                            "for the default (the word is a string in YAML: Megatron-LM keeps it and fails)")
        if spec.kind == "false" and negated and isinstance(raw, bool):
            raw = not raw  # `disable_bias_linear: true` -> add_bias_linear False
        val = convert(spec, raw)  # store_false dests (add_bias_linear) hold the dest's value
        into[dest] = val
        if editable:
            rec.entries[dest] = YamlEntry(dest, k, v, mapping)


# sections of a Megatron-Bridge ConfigContainer (megatron/bridge/training/config.py), as its override
# YAMLs (``--config-file``, examples/*/conf/*.yaml, tutorials/recipes/*/conf) and saved run configs write them
BRIDGE_SECTIONS = frozenset({
    "model", "train", "dataset", "optimizer", "scheduler", "ddp", "dist", "logger", "tokenizer", "checkpoint",
    "mixed_precision", "comm_overlap", "rng", "profiling", "peft", "ft", "straggler", "nvrx_straggler",
    "inprocess_restart", "validation", "tensor_inspect", "optimizer_config_override_provider",
    "rerun_state_machine", "env_vars", "_target_"})


def _refuse_bridge_config(root: yaml.MappingNode, path: str, text: str) -> None:
    """Refuse a Megatron-Bridge / NeMo 2 ConfigContainer YAML by name: its ``model:`` / ``train:`` /
    ``optimizer:`` ... sections override a recipe that Megatron-Bridge builds in Python (the recipe
    function fixes the architecture), so the file alone does not state the run.  A top-level mapping of the
    file's own that its interpolations name (``cluster_config:``, read by ``${cluster_config.exp_dir}``: Bridge's
    ``examples/diffusion/recipes/nemotron_diffusion/conf/*.yaml``; the example merges the file over the recipe with
    ``OmegaConf.merge`` and resolves it) does not make it another format."""
    keys = [str(k.value) for k, _ in _mapping_items(root) if isinstance(k, yaml.ScalarNode)]
    sections = [k for k in keys if k in BRIDGE_SECTIONS and isinstance(_child(root, k), yaml.MappingNode)]
    extra = [k for k in set(keys) - BRIDGE_SECTIONS - {"ENV_VARS"}
             if not (isinstance(_child(root, k), yaml.MappingNode) and "${" + k + "." in text)]
    # (a config that states the model -- model.num_layers and model.hidden_size -- is read by bridge_yaml.py)
    if not sections or not ({"model", "train"} & set(sections)) or extra:
        return
    raise UserError(f"{path}: a Megatron-Bridge config YAML ({', '.join(sections[:4])}"
                    f"{', ...' if len(sections) > 4 else ''} sections) without model.num_layers / model.hidden_size: it "
                    "overrides a recipe Megatron-Bridge builds in Python, so the file alone does not state the model; give "
                    "the run's saved run_config.yaml (ConfigContainer.to_yaml), its Megatron-LM flags "
                    "(primus-launch --project -- torchrun ... pretrain_gpt.py ...) or a Megatron-LM argument YAML")


# model: keys only NeMo 1.0's MegatronGPTModel config has (NeMo examples/nlp/language_modeling/conf/
# megatron_gpt_config.yaml, the NeMo-Framework-Launcher's launcher_scripts/conf/training/**.yaml)
NEMO1_MODEL_KEYS = frozenset({"encoder_seq_length", "mcore_gpt", "megatron_amp_O2", "activations_checkpoint_granularity",
                              "ub_tp_comm_overlap", "virtual_pipeline_model_parallel_size", "optim"})


def _refuse_nemo1_config(root: yaml.MappingNode, path: str) -> None:
    """Refuse a NeMo 1.0 training config (``trainer:`` / ``model:`` / ``exp_manager:``, the NeMo-Framework-
    Launcher's ``conf/training`` files) by name: its nested ``model.*`` keys are NeMo's, not Megatron-LM's
    arguments, and read as Megatron-LM arguments they would say nothing of the model."""
    model, trainer = _child(root, "model"), _child(root, "trainer")
    if not isinstance(model, yaml.MappingNode) or not isinstance(trainer, yaml.MappingNode):
        return
    keys = {str(k.value) for k, _ in _mapping_items(model) if isinstance(k, yaml.ScalarNode)}
    hits = sorted(keys & NEMO1_MODEL_KEYS)
    if not hits:
        return
    raise UserError(f"{path}: a NeMo 1.0 training config (trainer: / model: sections, model.{hits[0]}: the NeMo-"
                    "Framework-Launcher's conf/training layout), not a Megatron-LM argument YAML; read it with "
                    "primus-launch --project FILE (its NeMo 1.0 reader, adapters/nemo_yaml.py)")


def scalar_text(value: Any, quote: str = '"') -> str:
    """A value as one YAML flow scalar for an in-place edit: null / true / false, a list in flow style,
    a string quoted with ``quote`` where YAML would read it otherwise (indicators, a leading anchor / tag)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    txt = str(value)
    return f"{quote}{txt}{quote}" if re.search(r"[|:#\[\]{}]|^[*&!%@`]", txt) else txt


def _model_env_gpus(root: yaml.MappingNode, path: str) -> int | None:
    """GPUs per node a functional test states for its ``MODEL_ARGS`` run: ``MODEL_ENV_VARS.MODEL_ARGS.GPUS_PER_NODE``
    (Megatron-LM ``tests/functional_tests/shell_test_utils/run_ci_test.sh`` @d98e8a6: a checkpoint-consistency test
    runs each ``MODEL_ARGS[_N]`` block with ``GPUS_PER_NODE`` from ``MODEL_ENV_VARS.<block>``); None when not stated."""
    env = _child(root, "MODEL_ENV_VARS")
    run = _child(env, "MODEL_ARGS") if isinstance(env, yaml.MappingNode) else None
    node = _child(run, "GPUS_PER_NODE") if isinstance(run, yaml.MappingNode) else None
    if node is None:
        return None
    v = _value(node)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise PlanError("MODEL_ENV_VARS.MODEL_ARGS.GPUS_PER_NODE", v, "a positive integer (GPUs per node of the "
                        "MODEL_ARGS run)")
    return v


def from_yaml(text: str, path: str) -> YamlRecipe:
    from primus_launch.inputs import parse_yaml

    parse_yaml(text, "recipe", path)  # the input boundary: syntax, nesting and size as one line
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(root, yaml.MappingNode):
        raise UserError(f"{path}: expected a YAML mapping of Megatron arguments")
    rec = YamlRecipe(text, path)
    args: dict[str, Any] = {}
    env_node = _child(root, "ENV_VARS")
    if isinstance(env_node, yaml.MappingNode):
        rec.env_node = env_node
        rec.env = {str(k.value): str(_value(v)) for k, v in _mapping_items(env_node)
                   if isinstance(k, yaml.ScalarNode) and _value(v) is not None}
    mods = _child(root, "modules")
    if mods is not None:  # a Primus experiment names a framework under modules.<trainer> (else it is read as one)
        items = list(_mapping_items(mods)) if isinstance(mods, yaml.MappingNode) else []
        node = items[0][1] if items else mods
        value = repr(_value(node)) if isinstance(node, yaml.ScalarNode) else "a list" if isinstance(
            node, yaml.SequenceNode) else "a mapping without framework"
        shown = f"modules.{items[0][0].value}={value}" if items else f"modules={value}"
        raise UserError(f"{path}: {shown}: no trainer module naming its framework; a Primus experiment gives "
                        "modules.pre_trainer with framework (megatron or torchtitan), config and model")
    _refuse_bridge_config(root, path, text)
    _refuse_nemo1_config(root, path)
    for block in ("ARGS", "MODEL_ARGS"):
        node = _child(root, block)
        if isinstance(node, yaml.ScalarNode) and _value(node) in (None, ""):
            raise UserError(f"{path}: {block} is empty: no Megatron arguments to read (not a training recipe)")
    if isinstance(_child(root, "ARGS"), yaml.MappingNode) or isinstance(_child(root, "MODEL_ARGS"), yaml.MappingNode):
        # NVIDIA nested YAMLs: Megatron-LM examples/moe_recipes (ARGS: flag names with underscores) and
        # functional tests' model_config.yaml (MODEL_ARGS: --flag keys); DEPENDENCIES / ENV_VARS ignored
        block = "ARGS" if isinstance(_child(root, "ARGS"), yaml.MappingNode) else "MODEL_ARGS"
        node = _child(root, block)
        rec.main = node
        rec.format = "megatron-nvidia-yaml"
        keys = [k.value for k, _ in _mapping_items(node) if isinstance(k, yaml.ScalarNode)]
        rec.key_style = "flag" if any(str(k).startswith("--") for k in keys) else "flag_underscore"
        mode = _value(_child(root, "MODE")) if isinstance(_child(root, "MODE"), yaml.ScalarNode) else None
        if block == "MODEL_ARGS" and mode not in (None, "pretraining"):
            # Megatron-LM tests/functional_tests/shell_test_utils/run_ci_test.sh: MODE (default pretraining)
            # picks what the test runs; inference and rl tests start generation / RL loops, not pretraining
            raise UserError(f"MODE={mode!r}: a Megatron-LM functional test of {mode}, not a training run; "
                            "primus-launch projects pretraining (MODE: pretraining, the default)")
        nemo = [k for k in keys if re.match(r"^(trainer|model|data|log|optim)\.", str(k))]
        if nemo and len(nemo) * 2 >= len(keys):
            raise UserError(f"{path}: a NeMo launcher config ({nemo[0]}, ...), not Megatron-LM arguments")
        _collect(rec, node, args, editable=True)
        if block == "MODEL_ARGS":
            _runner_values(rec, args)
            rec.gpus_per_node = _model_env_gpus(root, path)
        # these blocks become pretrain_gpt.py's command line (functional tests' run_ci_test.sh, moe_recipes)
        rec.notes += megatron_flags.config_only_notes(
            str(k) if str(k).startswith("-") else "--" + str(k).replace("_", "-") for k in keys)
    else:
        rec.main = root
        _collect(rec, root, args, editable=True)
        yaml_cfg = False
        for sub in ("language_model", "model_parallel"):
            node = _child(root, sub)
            if isinstance(node, yaml.MappingNode):
                yaml_cfg = True
                _collect(rec, node, args, editable=True)
        for dest in NULL_MEANS_FALSE:   # megatron_args.NULL_MEANS_FALSE: the --yaml-cfg namespace's null is off
            if yaml_cfg and dest in args and args[dest] is None:
                args[dest] = False
                rec.notes.append(f"{dest}: null is None in Megatron-LM's --yaml-cfg namespace, false where training.py "
                                 f"tests it: read as false")
    rec.args = {k: v for k, v in args.items() if v is not None}
    for k, v in list(rec.args.items()):
        if isinstance(v, str) and re.search(r"\$\{?[A-Za-z_]", v) and k in BY_DEST and BY_DEST[k].kind in ("int", "float"):
            raise PlanError(BY_DEST[k].flag, v, "comes from an environment variable; write the number in the recipe")
    return rec


def env_mapping_edits(text: str, path: str, node: yaml.MappingNode | None, values: dict[str, str], key: str,
                      comment: str) -> list[Edit]:
    """Edits that set each ``VAR: 'value'`` of ``values`` in the top-level mapping ``key`` (``node``; the
    Megatron YAMLs' ``ENV_VARS``, a Megatron-Bridge run config's ``env_vars``): a value written there is
    replaced, a missing one added after the block mapping's last entry or inside a flow mapping (``env_vars:
    {}``, as ``yaml.safe_dump`` writes an empty one), and the mapping added at the end of the file (under a
    ``# comment`` line) when the file has none."""
    edits: list[Edit] = []
    missing: dict[str, str] = {}
    for var, val in values.items():
        hit = _child(node, var) if node is not None else None
        if isinstance(hit, yaml.ScalarNode):
            edits.append(Edit(hit.start_mark.index, hit.end_mark.index, f"'{val}'"))
        else:
            missing[var] = val
    if not missing:
        return edits
    items = _mapping_items(node) if node is not None else []
    if node is not None and node.flow_style:
        close = text.rfind("}", node.start_mark.index, node.end_mark.index)
        if close < 0:
            raise UserError(f"{path}: cannot add {', '.join(missing)} to its {key} (not a mapping)")
        sep = ", " if items else ""
        edits.append(Edit(close, close, sep + ", ".join(f"{var}: '{val}'" for var, val in missing.items())))
    elif items:
        at, lines = entries_after(text, *items[-1], [f"{var}: '{val}'" for var, val in missing.items()])
        edits.append(Edit(at, at, lines))
    elif node is None:
        lead = "" if text.endswith("\n") or not text else "\n"
        edits.append(Edit(len(text), len(text), lead + f"\n# {comment}\n{key}:\n"
                          + "".join(f"  {var}: '{val}'\n" for var, val in missing.items())))
    else:
        raise UserError(f"{path}: cannot add {', '.join(missing)} to its {key} (not a block mapping)")
    return edits


# public names for the Megatron-Bridge reader (bridge_yaml.py), which walks the same composed trees
node_value = _value
child_node = _child
mapping_items = _mapping_items


def mapping_root(text: str) -> yaml.MappingNode | None:
    """The document's top-level mapping node (without Primus ``modules:``), or None where ``text`` is no YAML
    or not a mapping: the common first step of the nested-YAML kind checks (Bridge run config, NeMo 1.0)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if not isinstance(root, yaml.MappingNode) or _child(root, "modules") is not None:
        return None
    return root


def is_yaml_text(text: str) -> bool:
    """Whether ``text`` looks like a YAML mapping of Megatron arguments (not a bash script)."""
    from primus_launch.inputs import parse_yaml

    try:
        data = parse_yaml(text)
    except UserError:
        return False
    if not isinstance(data, dict):
        return False
    keys = set(data)
    return bool(keys & (set(BY_DEST) | {"language_model", "model_parallel", "ARGS", "MODEL_ARGS"}))
