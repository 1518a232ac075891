"""``--fine-grained-activation-offloading --offload-modules`` moves nothing on a hybrid (Mamba) stack
(cost/offload.py ``module_offload_inert``).

Truth: megatron-core 0.16.1's own code.  Every offload call site (attention, transformer layer, MoE experts) goes
through ``pipeline_parallel/fine_grained_activation_offload.py``, which does nothing while the manager has no
current forward chunk; only ``GPTModel`` (``preprocess_for_fine_grained_offloading``) ever creates one --
``models/mamba/mamba_model.py`` and ``ssm/`` never call ``init_chunk_handler``.  The manager is run here on CPU
(its CUDA streams replaced by stand-ins): without a chunk, a module's offload context leaves autograd's saved
tensors on the device and its group markers return their input.  So a hybrid plan's projected memory and step
time with offload modules must equal the plan's without, while a GPT plan's offloading still lowers its memory.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
import torch

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.cost.offload import module_offload_inert
from primus_launch.projection.dryrun import project_dry_run
from tests.test_hybrid_mamba import NANO

HYBRID = NANO  # Nemotron 3 Nano (tests/test_hybrid_mamba.py)
MOE = ModelArch(name="moe-16x", num_layers=16, hidden_size=2048, ffn_hidden_size=8192, num_attention_heads=16,
                num_query_groups=4, vocab_size=128256, seq_length=8192, num_experts=64, moe_router_topk=6,
                moe_ffn_hidden_size=1024)
MODS = ["core_attn", "attn_proj", "expert_fc1", "moe_act"]


def _plan(arch: ModelArch, offload: list[str] | None = None, **par) -> Plan:
    training = dict(global_batch_size=512, micro_batch_size=1, offload={"activation_modules": offload or []})
    return Plan(model=arch, parallel=par, training=training,
                cluster=dict(gpu="h100-sxm", num_nodes=4, gpus_per_node=8))


def test_only_gpt_model_opens_an_offload_chunk_in_megatron_core():
    pytest.importorskip("megatron.core")
    import megatron.core as mc

    root = Path(mc.__file__).parent
    callers = {f.relative_to(root).as_posix() for f in root.rglob("*.py")
               if "init_chunk_handler(" in f.read_text(errors="replace")
               and f.name != "fine_grained_activation_offload.py"}
    assert callers == {"models/gpt/gpt_model.py"}
    import megatron.core.models.mamba.mamba_model as mamba_model

    assert "offload" not in inspect.getsource(mamba_model)


def test_without_a_chunk_the_offload_context_keeps_saved_tensors(monkeypatch):
    pytest.importorskip("megatron.core")
    import megatron.core.pipeline_parallel.fine_grained_activation_offload as fgo

    monkeypatch.setattr(torch.cuda, "Stream", lambda *a, **k: object())
    monkeypatch.setattr(fgo.PipelineOffloadManager, "OFFLOAD_MGR", None)
    x = torch.randn(64, 64, requires_grad=True)
    with fgo.FineGrainedActivationOffloadingInterface(True, x, "expert_fc1") as y:
        assert y is x                                   # group start: the input, no autograd marker
        z = y * y
    assert z.grad_fn._saved_self is x                   # saved as is: no pack hook moved it
    assert fgo.PipelineOffloadManager.get_instance().cur_forward_chunk() is None
    assert fgo.FineGrainedActivationOffloadingInterface.group_commit(z, "expert_fc1") is z
    # the contrast: once a chunk exists (GPTModel's init_chunk_handler), the context hooks the saves
    assert "init_chunk_handler" in inspect.getsource(
        importlib.import_module("megatron.core.models.gpt.gpt_model").GPTModel.preprocess_for_fine_grained_offloading)


def test_module_offload_of_a_hybrid_stack_is_priced_as_none():
    none, off = _plan(HYBRID, ep=8), _plan(HYBRID, MODS, ep=8)
    assert module_offload_inert(off) and not module_offload_inert(none)
    a, b = project_dry_run(none), project_dry_run(off)
    assert b.memory.peak_bytes_per_gpu == a.memory.peak_bytes_per_gpu
    assert b.iteration_time_s == pytest.approx(a.iteration_time_s, rel=1e-9)
    assert any(w.flag == "training.offload.activation_modules" and "0.16.1" in w.effect for w in b.warnings)


def test_module_offload_of_a_gpt_stack_still_acts():
    none, off = _plan(MOE, ep=8), _plan(MOE, MODS, ep=8)
    assert not module_offload_inert(off)
    a, b = project_dry_run(none), project_dry_run(off)
    assert b.memory.peak_bytes_per_gpu < a.memory.peak_bytes_per_gpu
