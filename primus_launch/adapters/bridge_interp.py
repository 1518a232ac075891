"""OmegaConf interpolations of Megatron-Bridge ConfigContainer YAMLs, resolved as Bridge resolves them.

How the frameworks load such a file: Megatron-LM ``megatron/training/config/container.py``
``ConfigContainer.from_yaml`` (Bridge's ``ConfigContainer`` inherits it) does ``yaml.safe_load``, then
``OmegaConf.create`` and ``OmegaConf.to_container(conf, resolve=True)``; Bridge's override path
(``src/megatron/bridge/training/utils/omegaconf_utils.py`` ``process_config_with_overrides``: ``OmegaConf.load``,
``OmegaConf.merge`` over the recipe, ``to_container(resolve=True)``) and ``models/config.py`` do the same (Bridge
@067f987, Megatron-LM @d98e8a64).  So every ``${...}`` of the file is resolved at load time, over the whole
config: ``${model.seq_length}`` from the file's top, ``${.hidden_size}`` in the mapping holding the key,
``${..x}`` in its parent; a value that is one interpolation keeps the referenced value's type, one inside a text
is a string.  Neither framework registers a resolver of its own (``register_new_resolver``: none), so the
resolvers are OmegaConf's: ``oc.env`` reads the launching shell's environment, which primus-launch does not see
(the plan states the run as the file writes it): a field the reader needs written that way is refused in one
line naming it; a field it does not read (``checkpoint.save: ${oc.env:CHECKPOINT_DIR,null}``, as Bridge's own
``examples/diffusion/override_configs/*.yaml`` write it) is left as written.  A reference to a key the file does not
hold is refused (OmegaConf raises ``InterpolationKeyError`` on it wherever it is; Bridge's
``scripts/moe_model_zoo/model_configs/*.yaml`` on pull request 1113 write ``${TP}`` for ``envsubst`` to fill).
Resolution itself (references, relative dots, cycles, depth and size bounds) is :class:`nemo_interp.Resolver`'s.
"""

from __future__ import annotations

from typing import Any

import yaml

from primus_launch.adapters.nemo_interp import Resolver, Unresolved
from primus_launch.errors import UserError
from primus_launch.plan import PlanError

_TAGS = {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}
# characters all resolved values of one file may hold together (each value is bounded by nemo_interp's _MAX_CHARS;
# thousands of values each doubling a 1 MiB text would hold gigabytes): far above any config's paths and names
_MAX_TOTAL = 1 << 23


def _scalar(node: yaml.ScalarNode, value: Any) -> bool:
    """Rewrite ``node`` in place to hold ``value`` (its marks kept: a tuned value replaces the ``${...}`` text)."""
    tag = _TAGS.get(type(value))
    if tag is None:
        return False
    node.tag = f"tag:yaml.org,2002:{tag}"
    if isinstance(value, bool):
        node.value = "true" if value else "false"
    elif value is None:
        node.value = "null"
    elif isinstance(value, float):
        node.value = repr(value).replace("inf", ".inf").replace("nan", ".nan")
    else:
        node.value = str(value)
    node.style = None
    return True


def _node_of(value: Any, like: yaml.Node) -> yaml.Node:
    """A node holding a mapping / list ``value`` (``fields: ${..shared}``), its marks the interpolation's."""
    node = yaml.compose(yaml.safe_dump(value, default_flow_style=True))
    stack = [node]
    while stack:
        n = stack.pop()
        n.start_mark, n.end_mark = like.start_mark, like.end_mark
        if isinstance(n, yaml.MappingNode):
            stack += [x for kv in n.value for x in kv]
        elif isinstance(n, yaml.SequenceNode):
            stack += n.value
    return node


def resolve_nodes(root: yaml.Node, text: str, path: str) -> dict[int, tuple[str, str]]:
    """Resolve the interpolations of the composed file ``root`` (``text``) in place, as OmegaConf's
    ``to_container(resolve=True)`` does; returns ``id(node) -> (key path, text)`` of the values left as written
    (a resolver primus-launch does not evaluate, ``oc.env``), for the reader to refuse where it reads one.  A
    reference to a key the file does not hold, a cycle, or a mapping inside a text: one-line ``UserError``."""
    if "${" not in text:
        return {}
    data = yaml.safe_load(text)
    res = Resolver(data if isinstance(data, dict) else {}, path, root=None, resolvers={})
    left: dict[int, tuple[str, str]] = {}
    seen: set[int] = set()
    total = [0]  # characters of the resolved strings so far

    def walk(node: yaml.Node, here: tuple[str, ...]) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        pairs = ([(k, v) for k, v in node.value] if isinstance(node, yaml.MappingNode) else
                 [(None, v) for v in node.value] if isinstance(node, yaml.SequenceNode) else [])
        for i, (k, v) in enumerate(pairs):
            key = str(k.value) if isinstance(k, yaml.ScalarNode) else str(i)
            if isinstance(v, yaml.ScalarNode) and v.tag.endswith(":str") and "${" in str(v.value):
                where = ".".join((*here, key))
                try:
                    got = res.value(v.value, here, where)
                except UserError as e:
                    if "which the file does not hold" not in str(e):
                        raise
                    raise UserError(f"{e} (OmegaConf raises InterpolationKeyError when Megatron-Bridge loads it; a "
                                    "template's ${NAME} is filled by envsubst or the shell first: give the filled "
                                    "file)") from None
                total[0] += len(got) if isinstance(got, str) else 0
                if total[0] > _MAX_TOTAL:
                    raise UserError(f"{path}: {where}: interpolations expand to more than {_MAX_TOTAL:,} characters "
                                    "in all")
                if isinstance(got, Unresolved):
                    left[id(v)] = (where, v.value)
                elif not _scalar(v, got):
                    new = _node_of(got, v)
                    if isinstance(node, yaml.MappingNode):
                        node.value[i] = (k, new)
                    else:
                        node.value[i] = new
            elif isinstance(v, (yaml.MappingNode, yaml.SequenceNode)):
                walk(v, (*here, key))

    walk(root, ())
    return left


def unresolved_reason(text: str) -> str:
    """What a field written as ``text`` (an interpolation left as written) needs: the value itself."""
    if "oc.env:" in text:
        var = text.split("oc.env:", 1)[1].split(",", 1)[0].split("}", 1)[0].strip()
        return (f"a value, not an environment lookup: OmegaConf reads the variable {var} from the shell that "
                "launches Megatron-Bridge (ConfigContainer.from_yaml resolves it), which primus-launch does not see; "
                "the plan is the file as written: write the value")
    return ("a value or a reference to a key of the file: a resolver other than a key reference is evaluated by "
            "OmegaConf at launch (Megatron-Bridge registers none of its own); write the value")


#: launch-environment variables a reader reads into the plan or its warnings (time / memory): the attention
#: backend switches (``megatron.ATTN_ENV_VARS``), ``CUDA_DEVICE_MAX_CONNECTIONS``, ``NVTE_CPU_OFFLOAD_V1``,
#: ``NCCL_GRAPH_REGISTER``, the allocator settings, ``launch_env_effects.ENV_EFFECTS`` and HybridEP's combine chunk
#: (``hybridep_env.VAR``)
PLAN_ENV_VARS = frozenset({
    "NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN", "CUDA_DEVICE_MAX_CONNECTIONS", "NVTE_CPU_OFFLOAD_V1",
    "NCCL_GRAPH_REGISTER", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "NCCL_ALGO", "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NVTE_FWD_LAYERNORM_SM_MARGIN",
    "NVTE_BWD_LAYERNORM_SM_MARGIN", "NVTE_ALLOW_NONDETERMINISTIC_ALGO", "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API"})


def env_var_from_environment(name: str, text: str) -> str | None:
    """An ``env_vars`` entry whose value stayed an ``${oc.env:...}`` interpolation (read22).  Megatron-Bridge's
    loader resolves it from the launching shell (``ConfigContainer.from_yaml``: ``OmegaConf.to_container(...,
    resolve=True)``; ``oc.env:NAME,default`` gives the default only where NAME is unset, and raises where it is unset
    with no default), then ``apply_environment_variables`` sets ``os.environ.setdefault(name, str(value))``: the
    run's variable is whatever that shell holds.  A variable the plan reads (:data:`PLAN_ENV_VARS`) is refused
    naming the entry (the plan is the file as written, never the environment); for any other the note to add (the
    entry is left out of the environment the plan reads); None when ``text`` holds no ``oc.env``."""
    if "oc.env:" not in text:
        return None
    if name in PLAN_ENV_VARS:
        raise PlanError(f"env_vars.{name}", text, unresolved_reason(text) + " (it changes the run's time or memory)")
    return (f"env_vars.{name}={text}: taken from the launching shell by Megatron-Bridge's loader (OmegaConf oc.env); "
            "not read (the plan reads no such variable)")


def refuse_unresolved(field: str, text: str) -> None:
    """One line naming the field whose value stayed an interpolation."""
    raise PlanError(field, text, unresolved_reason(text))


__all__ = ["PLAN_ENV_VARS", "env_var_from_environment", "refuse_unresolved", "resolve_nodes", "unresolved_reason"]
