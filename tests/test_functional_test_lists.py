"""A list value written into a Megatron-LM functional test's ``MODEL_ARGS`` reaches Megatron-LM as its words (user20).

Truth: Megatron-LM's runner ``tests/functional_tests/shell_test_utils/_run_training.sh`` (@d98e8a6): a value
wrapped in ``[ ]`` has the brackets stripped and its words split by ``eval`` (every list-valued ``MODEL_ARGS``
upstream is written ``--recompute-modules: "[layernorm mla_up_proj mlp moe_act]"``); Megatron-LM's
``TransformerConfig`` then takes only its own module names.  A tune of the DeepSeek-V3 proxy test
(``deepseekv3_proxy_flex_tp2pp2emp16etp1cp1_gb_200_release``) wrote ``--recompute-modules: [moe_act, layernorm]``,
a YAML flow sequence whose words after that stripping are ``moe_act,`` and ``layernorm``.
"""

from __future__ import annotations

import yaml

from primus_launch.adapters import load_recipe, render_recipe

# megatron/core/transformer/transformer_config.py (megatron-core 0.16.1): the recompute modules it allows
from megatron.core.transformer.transformer_config import TransformerConfig

_YAML = """\
ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
MODEL_ARGS:
  --num-layers: 4
  --hidden-size: 1024
  --num-attention-heads: 16
  --seq-length: 2048
  --max-position-embeddings: 2048
  --vocab-size: 32000
  --micro-batch-size: 1
  --global-batch-size: 64
  --recompute-granularity: selective
  --recompute-modules: "[layernorm mlp]"
  --bf16: true
"""


def _runner_words(value: str) -> list[str]:
    """The words the runner passes for a ``[ ]``-wrapped value: brackets stripped, split at blanks."""
    assert value.startswith("[") and value.endswith("]")
    return value[1:-1].split()


def test_tuned_list_is_written_as_the_runner_reads_it(tmp_path):
    p = tmp_path / "model_config.yaml"
    p.write_text(_YAML)
    plan = load_recipe(p)
    assert list(plan.training.recompute.modules) == ["layernorm", "mlp"]
    rc = plan.training.recompute.model_copy(update={"modules": ("core_attn", "layernorm")})
    tuned = plan.with_changes(training=dict(recompute=rc)).model_copy(update={"source": plan.source})
    out = render_recipe(tuned, _YAML)
    value = yaml.safe_load(out)["MODEL_ARGS"]["--recompute-modules"]
    assert isinstance(value, str)  # a string the runner strips, not a sequence yq prints with commas
    words = _runner_words(value)
    assert words == ["core_attn", "layernorm"]
    # each word one Megatron-LM accepts (TransformerConfig's __post_init__ check)
    cfg = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, recompute_granularity="selective",
                            recompute_modules=words)
    assert cfg.recompute_modules == words
    back = tmp_path / "model_config.tuned.yaml"
    back.write_text(out)
    assert list(load_recipe(back).training.recompute.modules) == ["core_attn", "layernorm"]
