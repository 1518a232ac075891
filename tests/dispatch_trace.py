"""Record the collectives megatron-core 0.16.1's real MoE layer issues (test helper, CPU only).

Run as a script (its own process: it owns the default process group):

    python tests/dispatch_trace.py '[{"dispatcher": "allgather", "tp": 1, "ep": 2, "etp": 1, ...}, ...]'

builds megatron's ``MoELayer`` (local spec, per-expert MLPs) on torch's fake process group
(``FakeStore`` + backend ``"fake"``: this process is rank 0 of a world of ``tp x ep x ...`` ranks),
runs one forward and one backward of ``[seq / tp, batch, hidden]`` bf16 tokens and prints, as JSON,
per configuration a list with one record per collective call: phase (fwd / bwd), op, bytes by the NCCL convention (all-gather: the
gathered output; reduce-scatter: the input; all-to-all: what this rank sends), dtype and group size.
The calls are intercepted where megatron issues them (``tensor_parallel.mappings``'
``dist_all_gather_func`` / ``dist_reduce_scatter_func`` and ``torch.distributed``'s
``all_gather`` / ``reduce_scatter`` / ``all_to_all_single`` / ``all_reduce``) and executed as if
every rank held this rank's tensors (an all-gather repeats the input; the others keep their output
buffers), so the dispatcher's own control flow runs unchanged.
"""

from __future__ import annotations

import json
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

from primus_launch.frameworks import mcore_cpu  # noqa: E402

RECORDS: list[dict] = []
PHASE = ["fwd"]


def _rec(op: str, t: torch.Tensor, group, nbytes: float | None = None) -> None:
    RECORDS.append(dict(phase=PHASE[0], op=op, nbytes=float(nbytes if nbytes is not None else t.numel() * t.element_size()),
                        dtype=str(t.dtype).replace("torch.", ""), group_size=dist.get_world_size(group)))


def _all_gather_into_tensor(output, input_, group=None, async_op=False):
    _rec("all_gather", output, group)
    n = output.shape[0] // max(1, input_.shape[0])
    output.copy_(input_.repeat(n, *([1] * (input_.dim() - 1))))


def _reduce_scatter_tensor(output, input_, group=None, async_op=False, op=None):
    _rec("reduce_scatter", input_, group)
    output.copy_(input_[: output.shape[0]])


def _all_gather(tensor_list, tensor, group=None, async_op=False):
    _rec("all_gather", tensor, group, sum(t.numel() for t in tensor_list) * tensor.element_size())


def _reduce_scatter(output, input_list, group=None, async_op=False, op=None):
    _rec("reduce_scatter", output, group, sum(t.numel() for t in input_list) * output.element_size())


def _all_to_all_single(output, input_, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
    _rec("all_to_all", input_, group)


def _all_reduce(tensor, op=None, group=None, async_op=False):
    _rec("all_reduce", tensor, group)


def trace(cfg: dict) -> list[dict]:
    """The collective calls of one MoE layer's forward + backward under ``cfg`` (module doc)."""
    mcore_cpu.install()
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.tensor_parallel import mappings
    from megatron.core.transformer.moe.moe_layer import MoELayer
    from megatron.core.transformer.transformer_config import TransformerConfig

    tp, ep, etp = cfg["tp"], cfg["ep"], cfg["etp"]
    world = max(tp, etp * ep)
    if dist.is_initialized():
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    mappings.dist_all_gather_func, mappings.dist_reduce_scatter_func = _ORIG["ag"], _ORIG["rs"]
    RECORDS.clear()
    PHASE[0] = "fwd"
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    ps.initialize_model_parallel(tp, 1, expert_model_parallel_size=ep, expert_tensor_parallel_size=etp,
                                 create_gloo_process_groups=False)
    mcore_cpu.seed_rng_tracker(1234)
    E, h = cfg["num_experts"], cfg["hidden"]
    conf = TransformerConfig(num_layers=1, hidden_size=h, ffn_hidden_size=2 * h, num_attention_heads=4,
                             num_moe_experts=E, moe_router_topk=cfg["topk"], moe_ffn_hidden_size=2 * h,
                             moe_grouped_gemm=False,
                             tensor_model_parallel_size=tp, expert_model_parallel_size=ep,
                             expert_tensor_parallel_size=etp, sequence_parallel=tp > 1,
                             params_dtype=torch.bfloat16, bf16=True, add_bias_linear=False,
                             hidden_dropout=0.0, attention_dropout=0.0,
                             **{**mcore_cpu.config_overrides(), "moe_token_dispatcher_type": cfg["dispatcher"]})
    spec = get_gpt_layer_local_spec(num_experts=E, moe_grouped_gemm=False).submodules.mlp.submodules
    layer = MoELayer(conf, spec).to(torch.bfloat16)
    mappings.dist_all_gather_func = _all_gather_into_tensor
    mappings.dist_reduce_scatter_func = _reduce_scatter_tensor
    dist.all_gather, dist.reduce_scatter = _all_gather, _reduce_scatter
    dist.all_to_all_single, dist.all_reduce = _all_to_all_single, _all_reduce
    s_local = cfg["seq"] // tp
    x = torch.randn(s_local, cfg["batch"], h, dtype=torch.bfloat16, requires_grad=True)
    out, _ = layer(x)
    PHASE[0] = "bwd"
    out.float().sum().backward()
    dist.all_gather, dist.reduce_scatter = _ORIG["all_gather"], _ORIG["reduce_scatter"]
    dist.all_to_all_single, dist.all_reduce = _ORIG["all_to_all_single"], _ORIG["all_reduce"]
    return list(RECORDS)


_ORIG: dict = {}

if __name__ == "__main__":
    from megatron.core.tensor_parallel import mappings as _m

    _ORIG.update(ag=_m.dist_all_gather_func, rs=_m.dist_reduce_scatter_func, all_gather=dist.all_gather,
                 reduce_scatter=dist.reduce_scatter, all_to_all_single=dist.all_to_all_single,
                 all_reduce=dist.all_reduce)
    print(json.dumps([trace(c) for c in json.loads(sys.argv[1])]))
