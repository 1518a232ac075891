"""Probe: a Megatron-Bridge run config carrying *every* field of the dataclasses it dumps, read by the Bridge reader.

The field names and literal defaults come from the fetched mirrors' source (``ast``, nothing imported):
Megatron-LM ``ModelParallelConfig`` + ``TransformerConfig`` + Bridge ``GPTModelProvider`` for ``model:``,
``DistributedDataParallelConfig`` for ``ddp:``, ``OptimizerConfig`` for ``optimizer:`` (defaults that are not
literals -- factories, functions -- are written as null).  A small dense model is set on top.  Prints how many
fields each section has, what the reader reports as not modelled, and its notes; it must not raise.

    python scripts/bridge_fields_probe.py [--megatron /work/.mirror/NVIDIA+Megatron-LM/repo]
                                          [--bridge /work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo]
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _source(repo: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", repo if repo.endswith(".git") else repo, "show", f"HEAD:{path}"],
                          capture_output=True, text=True, check=True).stdout


def _fields(src: str, cls: str) -> dict:
    out: dict = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and not st.target.id.startswith("_"):
                    v = st.value
                    if isinstance(v, ast.Call) and getattr(v.func, "id", "") == "field":
                        v = next((k.value for k in v.keywords if k.arg == "default"), None)
                    try:
                        out[st.target.id] = ast.literal_eval(v) if v is not None else None
                    except ValueError:
                        out[st.target.id] = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megatron", default="/work/.mirror/NVIDIA+Megatron-LM/repo")
    ap.add_argument("--bridge", default="/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo")
    a = ap.parse_args()
    model = _fields(_source(a.megatron, "megatron/core/model_parallel_config.py"), "ModelParallelConfig")
    model.update(_fields(_source(a.megatron, "megatron/core/transformer/transformer_config.py"), "TransformerConfig"))
    model.update(_fields(_source(a.bridge, "src/megatron/bridge/models/gpt_provider.py"), "GPTModelProvider"))
    model.update(num_layers=16, hidden_size=2048, num_attention_heads=16, ffn_hidden_size=8192, seq_length=2048,
                 vocab_size=32000, kv_channels=128, bf16=True,
                 activation_func={"_target_": "torch.nn.functional.gelu", "_call_": False})
    ddp = _fields(_source(a.megatron, "megatron/core/distributed/distributed_data_parallel_config.py"),
                  "DistributedDataParallelConfig")
    opt = _fields(_source(a.megatron, "megatron/core/optimizer/optimizer_config.py"), "OptimizerConfig")
    cfg = {"_target_": "megatron.bridge.training.config.ConfigContainer",
           "model": {"_target_": "megatron.bridge.models.gpt_provider.GPTModelProvider", **model},
           "ddp": ddp, "optimizer": opt, "mixed_precision": "bf16_mixed",
           "train": {"micro_batch_size": 1, "global_batch_size": 8, "train_iters": 10}}
    print(f"fields: model {len(model)}, ddp {len(ddp)}, optimizer {len(opt)}")
    from primus_launch.adapters import load_recipe

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "run_config.yaml"
        p.write_text(yaml.safe_dump(cfg))
        plan = load_recipe(p, {"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 8})
    for u in plan.source.unmodelled:
        print(f"not modelled: {u.flag}={u.value}")
    for n in plan.source.notes:
        print(f"note: {n}")


if __name__ == "__main__":
    main()
