"""Build megatron-core 0.16.1's Muon optimizer (``optimizer/muon.py`` ``get_megatron_muon_optimizer``, not layer-wise)
on a tiny bf16 model on the CPU, take one step, print the bytes of its optimizer state (test helper, called in-
process by ``tests/test_muon.py``).

Usage: ``python tests/muon_real_state.py EO_TREE moe|dense``, ``EO_TREE`` an extraction of Emerging-Optimizers
v0.1.0 (``emerging_optimizers/``; not installed in the venv).  Shims, all outside the optimizer's logic: ``absl``
logging stubbed; megatron's CUDA factories routed to the CPU (``frameworks.mcore_cpu.install``); ``Tensor.type()``
answers the ``torch.cuda.*`` spelling the Float16 wrapper and ``clip_grads`` check for; the chunk's ``ddp_config``
(``get_megatron_optimizer`` reads it); random ``main_grad`` per parameter.  Prints ``STATE <bytes>``: every tensor
of the optimizers' ``state`` (Muon's ``momentum_buffer``, AdamW's ``exp_avg`` / ``exp_avg_sq``) and the fp32
masters (``fp32_from_float16_groups``)."""

import importlib
import sys
import types
import warnings

import torch


def real_muon_state(eo_tree: str, moe: bool) -> tuple[list[str], int]:
    """(the chained optimizers' classes, bytes of their state and fp32 masters) after one step (module doc); every
    global it touches (``sys.path``, the ``absl`` stub, ``Tensor.type``, the CPU shim) is put back."""
    from mcore_meta import block_spec, cpu_current_device, init_fake_parallel, mcore_config
    from primus_launch.frameworks import mcore_cpu
    from test_muon import _tiny

    added = "absl" not in sys.modules
    if added:
        absl = types.ModuleType("absl")
        absl.logging = types.SimpleNamespace(log_first_n=lambda *a, **k: None, info=lambda *a, **k: None, INFO=0,
                                             debug=lambda *a, **k: None, warning=lambda *a, **k: None)
        sys.modules["absl"], sys.modules["absl.logging"] = absl, absl.logging
    sys.path.insert(0, eo_tree)
    shim = "cpu" in mcore_cpu._INSTALLED
    orig = torch.Tensor.type
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import megatron.core.optimizer.muon as mu
            from megatron.core.distributed import DistributedDataParallelConfig
            from megatron.core.models.gpt.gpt_model import GPTModel
            from megatron.core.optimizer import OptimizerConfig
            from megatron.core.process_groups_config import ProcessGroupCollection

            if not mu.HAVE_EMERGING_OPTIMIZERS:   # imported earlier without Emerging-Optimizers on the path
                mu = importlib.reload(mu)
            assert mu.HAVE_EMERGING_OPTIMIZERS
            mcore_cpu.install("cpu")
            plan = _tiny(moe)
            plan = plan.model_copy(update={"parallel": plan.parallel.model_copy(update=dict(pp=1, ep=1))})
            init_fake_parallel(1, 1, 1, 1, 1, None, 0)
            cfg = mcore_config(plan)
            with cpu_current_device():
                model = GPTModel(cfg, block_spec(plan, cfg, 0, None), vocab_size=plan.model.padded_vocab_size(1),
                                 max_sequence_length=plan.model.seq_length, share_embeddings_and_output_weights=False,
                                 position_embedding_type="rope")
            model = model.to(torch.bfloat16)
            model.ddp_config = DistributedDataParallelConfig(use_distributed_optimizer=False)
            gen = torch.Generator().manual_seed(0)
            for prm in model.parameters():
                prm.main_grad = torch.randn(prm.shape, generator=gen).to(prm.dtype)
            ocfg = OptimizerConfig(optimizer="muon", lr=1e-3, bf16=True, muon_momentum=0.95, muon_num_ns_steps=5,
                                   muon_tp_mode="blockwise", muon_fp32_matmul_prec="medium",
                                   use_distributed_optimizer=False)
            torch.Tensor.type = lambda self, *a, **k: (orig(self).replace("torch.", "torch.cuda.", 1)
                                                       if not a and not k else orig(self, *a, **k))
            opt = mu.get_megatron_muon_optimizer(ocfg, [model], use_gloo_process_groups=False,
                                                 pg_collection=ProcessGroupCollection.use_mpu_process_groups())
            assert opt.step()[0]
    finally:
        torch.Tensor.type = orig
        sys.path.remove(eo_tree)
        if added:
            sys.modules.pop("absl", None)
            sys.modules.pop("absl.logging", None)
        if not shim:
            mcore_cpu.uninstall()
    seen = {}
    for inner in opt.chained_optimizers:
        for st in inner.optimizer.state.values():
            seen.update({id(v): v for v in st.values() if torch.is_tensor(v) and v.numel() > 1})
        for group in getattr(inner, "fp32_from_float16_groups", []):
            seen.update({id(v): v for v in group})
    return ([type(o.optimizer).__name__ for o in opt.chained_optimizers],
            sum(v.numel() * v.element_size() for v in seen.values()))


if __name__ == "__main__":
    names, total = real_muon_state(sys.argv[1], sys.argv[2] == "moe")
    print("OPTIMIZERS", " ".join(names))
    print("STATE", total)
