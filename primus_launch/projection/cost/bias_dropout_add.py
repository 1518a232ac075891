"""The residual bias-dropout-add after a layer's attention / MLP block, and whether Megatron's TEGroupedMLP experts
with biases force it unfused for the whole model.

Formula (megatron/core/fusions/fused_bias_dropout.py): fused, one kernel of 6 B per element (+1 B dropout mask);
unfused ``_bias_dropout_add_func``, 10 B per element (+2 B with dropout) in 2 kernels each way, backward 2 B.
"""

from __future__ import annotations

from primus_launch.plan import ModelArch
from primus_launch.projection.cost.framework import Profile
from primus_launch.projection.cost.layer_ops import LayerOps


def residual_bda(acc: LayerOps, m: ModelArch, Tn: int, unfused: bool) -> None:
    """The bias-dropout-add after a linear with ``add_bias_linear``: fused (one kernel, 6 B per element;
    +1 B dropout mask) or, with ``bias_dropout_fusion`` off, Megatron's ``_bias_dropout_add_func``
    (megatron/core/fusions/fused_bias_dropout.py): ``x + bias`` (4 B), dropout (no kernel at p = 0:
    ATen ``dropout`` returns its input), ``residual + out`` (6 B); its backward reduces the bias grad over
    the tokens (2 B) and adds it to main_grad (DDP hook): 2 kernels each way."""
    drop = 1.0 if m.hidden_dropout else 0.0
    if unfused:
        nb = 10 + 2 * drop
        acc.elem(nb * Tn * m.hidden_size, "residual add (unfused bias + dropout + add)", 2.0 / nb,
                 (2 + (1 if drop else 0), 2))
    else:
        acc.elem((6 + drop) * Tn * m.hidden_size, "residual add (bias-dropout-add)", 1.0, (1, 0))


def te_grouped_mlp_bias(m: ModelArch, prof: Profile, grouped: bool) -> bool:
    """Whether the MoE experts are Megatron's ``TEGroupedMLP`` with biases (``add_bias_linear``): then
    its FC2 bias runs the unfused per-expert ``_apply_bias`` (``elementwise_bytes.EXPERT_BIAS_BYTES``) and
    ``bias_dropout_fusion`` must be off (experts.py ``TEGroupedMLP.__init__`` asserts "bias_dropout_fusion
    is not supported in TEGroupedMLP when add_bias_linear=True"; Megatron-Bridge's GPT-OSS provider sets
    ``bias_dropout_fusion = False``), so every bias-dropout-add of the model is unfused
    (:func:`residual_bda`)."""
    return bool(m.is_moe and m.add_bias_linear and grouped and prof.name == "megatron-te")
