"""The rank's shard of megatron-core's column-parallel QKV linear for the QKV sub-sharding tests (test helper).

``ColumnParallelLinear`` holds ``output_size / tp`` rows and its forward returns ``(output, bias)``; the stub is a
bias-free bf16 ``torch.nn.Linear`` of that width returning ``(output, None)``, which ``SelfAttention.
get_query_key_value_tensors`` (megatron-core 0.16.1 ``transformer/attention.py``) unpacks as the real one's."""

from __future__ import annotations

import torch


class QKVShard(torch.nn.Module):
    """``h`` -> ``out`` columns, bf16, no bias; forward returns ``(output, None)``."""

    def __init__(self, h: int, out: int):
        super().__init__()
        self.lin = torch.nn.Linear(h, out, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.lin(x), None
