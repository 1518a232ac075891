"""Run megatron-core's real pipeline schedule for one rank on the CPU, its steps and P2P replaced by
recorders (shared by ``test_pipeline.py`` and ``test_dp_interleaved_window.py``)."""

from __future__ import annotations

import types
from typing import Callable, Optional


def megatron_rank_order(monkeypatch, pp: int, vpp: int, m: int, rank: int, group: int | None = None,
                        configure: Optional[Callable[[object, list], None]] = None) -> list[tuple]:
    """Run ``forward_backward_pipelining_with(out)_interleaving`` of megatron-core for rank ``rank``
    with its forward / backward steps and P2P replaced by recorders, and return the steps in the order
    it executes them: ``("F" | "B", chunk, micro-batch)``.  ``configure(cfg, rec)``: called on the
    ``TransformerConfig`` before the run (to set its hooks, e.g. ``grad_sync_func``, which may append
    their own entries to ``rec``)."""
    import torch
    from megatron.core.enums import ModelType
    from megatron.core.pipeline_parallel import schedules as ms
    from megatron.core.transformer.transformer_config import TransformerConfig

    rec: list[tuple] = []

    class Group:
        def size(self):
            return pp

        def rank(self):
            return rank

    cfg = TransformerConfig(num_layers=pp * vpp, hidden_size=8, num_attention_heads=1,
                            pipeline_model_parallel_size=pp, pipeline_dtype=torch.float32,
                            virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None,
                            microbatch_group_size_per_vp_stage=group)
    if configure is not None:
        configure(cfg, rec)

    class Chunk(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config, self.model_type = cfg, ModelType.encoder_or_decoder

    class Out:   # stands for a chunk's output activation; identifies it in the backward
        def __init__(self, c, mb):
            self.c, self.mb = c, mb

    def forward_step(forward_step_func, data_iterator, model, num_microbatches, input_tensor,
                     forward_data_store, config, *a, current_microbatch=None, vp_stage=None, **k):
        rec.append(("F", vp_stage or 0, current_microbatch))
        out = Out(vp_stage or 0, current_microbatch)
        return (out if vpp > 1 else [out]), torch.zeros([], dtype=torch.int)

    def backward_step(input_tensor, output_tensor, output_tensor_grad, model_type, config):
        out = output_tensor if vpp > 1 else output_tensor[0]
        rec.append(("B", out.c, out.mb))

    class Comm:
        pp_group, config = Group(), cfg
        virtual_pipeline_model_parallel_size = vpp if vpp > 1 else None

        def __getattr__(self, name):   # every send/recv: nothing to move
            return lambda *a, **k: (None, None) if name == "send_forward_backward_recv_forward_backward" else None

    pgc = types.SimpleNamespace(tp=Group(), cp=types.SimpleNamespace(size=lambda: 1), embd=None,
                                pos_embd=None, pp=Comm.pp_group, dp_cp=None)
    zeros = torch.zeros
    monkeypatch.setattr(ms, "forward_step", forward_step)
    monkeypatch.setattr(ms, "backward_step", backward_step)
    monkeypatch.setattr(ms, "is_pp_first_stage", lambda g: g.rank() == 0)
    monkeypatch.setattr(ms, "is_pp_last_stage", lambda g: g.rank() == g.size() - 1)
    monkeypatch.setattr(torch, "zeros", lambda *a, device=None, **k: zeros(*a, **k))  # device="cuda"
    fn = (ms.forward_backward_pipelining_with_interleaving if vpp > 1
          else ms.forward_backward_pipelining_without_interleaving)
    fn(forward_step_func=None, data_iterator=[iter(()) for _ in range(vpp)], model=[Chunk() for _ in range(vpp)],
       num_microbatches=m, seq_length=4, micro_batch_size=1, p2p_communicator=Comm(), pg_collection=pgc)
    monkeypatch.undo()
    return rec
