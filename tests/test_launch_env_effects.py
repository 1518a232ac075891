"""Launch-environment variables that change time are reported as not modelled, never dropped (user16).

Truth: Megatron-LM main's functional test ``tests/functional_tests/test_cases/gpt/gpt3_7b_tp1_pp4_memory_speed/
model_config.yaml`` sets ``NCCL_ALGO: Ring``, ``NVTE_ALLOW_NONDETERMINISTIC_ALGO: 0`` and both LayerNorm SM
margins to 16 in its ``ENV_VARS`` (copied below as it writes them); Transformer Engine's defaults for those variables
(margins ``"0"``, non-deterministic algorithms ``"1"``) and NCCL's (unset: NCCL picks) are not reported.
"""

from __future__ import annotations

from pathlib import Path

from primus_launch.adapters import load_recipe

CL = {"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 8}

ENV = """ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
  NVTE_ALLOW_NONDETERMINISTIC_ALGO: 0
  NCCL_ALGO: Ring
  CUBLAS_WORKSPACE_CONFIG: :4096:8
  NVTE_FWD_LAYERNORM_SM_MARGIN: 16
  NVTE_BWD_LAYERNORM_SM_MARGIN: 16
"""
ARGS = """MODEL_ARGS:
  --num-layers: 4
  --hidden-size: 1024
  --num-attention-heads: 8
  --seq-length: 2048
  --max-position-embeddings: 2048
  --micro-batch-size: 1
  --global-batch-size: 64
  --tokenizer-type: NullTokenizer
  --vocab-size: 32000
  --bf16: true
TEST_TYPE: regular
"""
SCRIPT = """#!/bin/bash
export NCCL_ALGO=Tree
export NVTE_FWD_LAYERNORM_SM_MARGIN=0
export NVTE_ALLOW_NONDETERMINISTIC_ALGO=1
torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 \\
  --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 \\
  --tokenizer-type NullTokenizer --vocab-size 32000 --bf16
"""


def _unmodelled(plan) -> dict[str, str]:
    return {u.flag: u.value for u in plan.source.unmodelled}


def test_functional_test_env_vars_are_reported(tmp_path: Path):
    f = tmp_path / "model_config.yaml"
    f.write_text(ENV + ARGS)
    got = _unmodelled(load_recipe(f, CL))
    assert {k: got.get(k) for k in ("NCCL_ALGO", "NVTE_ALLOW_NONDETERMINISTIC_ALGO", "NVTE_FWD_LAYERNORM_SM_MARGIN",
                                    "NVTE_BWD_LAYERNORM_SM_MARGIN")} == {
        "NCCL_ALGO": "Ring", "NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0", "NVTE_FWD_LAYERNORM_SM_MARGIN": "16",
        "NVTE_BWD_LAYERNORM_SM_MARGIN": "16"}
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in got  # read by the legality rules, not a warning
    # without the ENV_VARS block: nothing reported
    g = tmp_path / "bare.yaml"
    g.write_text(ARGS)
    assert not any(k.startswith(("NCCL_", "NVTE_")) for k in _unmodelled(load_recipe(g, CL)))


def test_script_exports_at_their_defaults_are_not_reported(tmp_path: Path):
    f = tmp_path / "run.sh"
    f.write_text(SCRIPT)
    got = _unmodelled(load_recipe(f, CL))
    assert got.get("NCCL_ALGO") == "Tree"  # any forced algorithm
    assert "NVTE_FWD_LAYERNORM_SM_MARGIN" not in got and "NVTE_ALLOW_NONDETERMINISTIC_ALGO" not in got


# ------------------------------------------------------------------ Primus experiments and TorchTitan scripts (user16)
def test_primus_env_block_and_titan_script_exports_are_said(tmp_path):
    """The table covered Megatron-family formats only: a Primus experiment's ``env:`` (Primus's runtime exports
    it: primus/core/runtime/train_runtime.py ``os.environ[k] = str(v)``) and a TorchTitan script's exports /
    launch-line prefixes now reach it; a plain (unexported) assignment does not reach torchrun, and TorchTitan
    runs no Transformer Engine module, so its NVTE_* variables say nothing."""
    from pathlib import Path

    from primus_launch.adapters.primus_yaml import plan_from_text
    from primus_launch.adapters.torchtitan_script import load_titan_script

    root = Path(__file__).resolve().parents[1]
    exp = (root / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
    base = {u.flag for u in plan_from_text(exp, root / "recipes/primus/MI355X/llama3.1_8b.yaml").source.unmodelled}
    assert "NCCL_ALGO" not in base
    withenv = exp.replace("modules:\n", "env:\n  NCCL_ALGO: Ring\n  NVTE_ALLOW_NONDETERMINISTIC_ALGO: 0\n"
                          "  NCCL_PROTO: \"\"\nmodules:\n", 1)
    assert withenv != exp
    un = {u.flag: u.value for u in plan_from_text(withenv, root / "recipes/primus/MI355X/llama3.1_8b.yaml")
          .source.unmodelled}
    assert un.get("NCCL_ALGO") == "Ring" and un.get("NVTE_ALLOW_NONDETERMINISTIC_ALGO") == "0"
    assert "NCCL_PROTO" not in un   # empty: unset

    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\nexport NCCL_MAX_NCHANNELS=8\nNCCL_PROTO=Simple\nNVTE_ALLOW_NONDETERMINISTIC_ALGO=0\n"
                      "NCCL_ALGO=Tree torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 "
                      "--config llama3_8b\n")
    flags = {u.flag: u.value for u in load_titan_script(script).source.unmodelled}
    assert flags.get("NCCL_MAX_NCHANNELS") == "8" and flags.get("NCCL_ALGO") == "Tree"
    assert "NCCL_PROTO" not in flags and "NVTE_ALLOW_NONDETERMINISTIC_ALGO" not in flags


def test_titan_script_exports_are_what_bash_hands_the_command():
    """launch_exports against bash itself: the variables a command started at the script's end sees (``env``) that
    the script set.  A plain assignment line, also one of several words or with a quoted space, stays the shell's
    (it was taken for the launch's environment when its value held a space); ``export`` with such a value is
    exported (it was dropped)."""
    import shutil
    import subprocess

    import pytest

    from primus_launch.adapters.torchtitan_script import launch_exports

    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    text = ("#!/bin/bash\nNCCL_ALGO=\"Ring Tree\"\nNCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=8\n"
            "export NCCL_PROTO=\"LL LL128\"\nexport NVTE_FWD_LAYERNORM_SM_MARGIN=16\nNCCL_MIN_CTAS=2 env\n")
    seen = subprocess.run(["env", "-i", "bash", "-c", text], capture_output=True, text=True, check=True).stdout
    truth = {k: v for k, _, v in (ln.partition("=") for ln in seen.splitlines()) if k.startswith(("NCCL_", "NVTE_"))}
    assert truth == {"NCCL_PROTO": "LL LL128", "NVTE_FWD_LAYERNORM_SM_MARGIN": "16", "NCCL_MIN_CTAS": "2"}
    assert launch_exports(text) == truth
