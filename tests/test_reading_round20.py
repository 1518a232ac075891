"""read20: Megatron-LM dev's examples/moe_recipes (``ARGS:`` YAMLs) against dev's own parse_args + validate_args.

13 of the 18 set ``cross_entropy_loss_fusion: true`` with ``cross_entropy_fusion_impl: te``, which Megatron-LM
refuses from 168cb15d70 (2026-06-03, #5115: "Transformer Engine cross entropy loss fusion is disabled due to
stability issues"; in core_r0.18.0, core_v0.19.0, main, dev; not in core_v0.18.0 or older).  The reader cannot date
a recipe, so it reads TE's fused cross entropy as the older releases run it and now says that the newer ones
refuse it (it said nothing).  With ``native`` there all 14 that dev parses read the same values.
"""

from __future__ import annotations

from pathlib import Path

from primus_launch.adapters.megatron import load_megatron

# a reduced moe_recipes file (the layout of dev's examples/moe_recipes/qwen3_30b/h100/*.yaml, values written here)
RECIPE = """ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: '1'
ARGS:
  num_layers: 4
  hidden_size: 1024
  ffn_hidden_size: 4096
  num_attention_heads: 16
  vocab_size: 32000
  seq_length: 4096
  max_position_embeddings: 4096
  swiglu: true
  normalization: RMSNorm
  tensor_model_parallel_size: 1
  micro_batch_size: 1
  global_batch_size: 64
  bf16: true
  cross_entropy_loss_fusion: true
  cross_entropy_fusion_impl: {impl}
"""


def _read(tmp_path: Path, impl: str):
    path = tmp_path / f"recipe_{impl}.yaml"
    path.write_text(RECIPE.format(impl=impl))
    return load_megatron(path)


def test_te_cross_entropy_fusion_reads_as_written_and_names_the_newer_refusal(tmp_path):
    plan = _read(tmp_path, "te")
    assert plan.training.cross_entropy_loss_fusion and plan.training.cross_entropy_fusion_impl == "te"
    notes = [n for n in plan.source.notes if "--cross-entropy-fusion-impl te" in n]
    assert len(notes) == 1 and "168cb15" in notes[0] and "native" in notes[0]


def test_native_cross_entropy_fusion_has_no_such_note(tmp_path):
    plan = _read(tmp_path, "native")
    assert plan.training.cross_entropy_fusion_impl == "native"
    assert not [n for n in plan.source.notes if "cross-entropy-fusion-impl" in n]
