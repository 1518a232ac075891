"""A real 2-process megatron-core training run on the CPU, launched by primus-launch (issue 7).

The bundled recipe ``recipes/megatron/tiny_gpt_cpu.sh`` runs ``torchrun --nproc-per-node 2`` over
gloo with ``primus_launch/examples/tiny_mcore_train.py`` (megatron-core GPTModel, DDP, 1F1B
pipeline schedule with PP=2, Adam).  The test launches it through the installed ``primus-launch``
console script and checks the training log from outside: every iteration line appears in order,
the first loss is the untrained ``ln(vocab)``, the loss falls, and the exit status is 0.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "megatron" / "tiny_gpt_cpu.sh"
BIN = Path(sys.executable).parent
PRIMUS = str(BIN / "primus-launch") if (BIN / "primus-launch").exists() else shutil.which("primus-launch")
# as in an activated environment: the recipe's `torchrun` is the one installed beside this Python
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
ITER = re.compile(r"^ iteration\s+(\d+)/\s*(\d+) \|.*\| lm loss: ([0-9.E+-]+) \|")
VOCAB = 512  # --vocab-size of the recipe
TRAIN_ITERS = 8  # --train-iters of the recipe

pytestmark = pytest.mark.slow


def _iterations(stdout: str) -> list[tuple[int, int, float]]:
    return [(int(m[1]), int(m[2]), float(m[3])) for m in map(ITER.match, stdout.splitlines()) if m]


def _check_training_log(stdout: str, stderr: str, layout: str = "TP 1 x PP 2 x DP 1") -> None:
    its = _iterations(stdout)
    assert [i for i, _, _ in its] == list(range(1, TRAIN_ITERS + 1)), stdout + stderr[-3000:]
    assert all(n == TRAIN_ITERS for _, n, _ in its)
    losses = [l for _, _, l in its]
    assert abs(losses[0] - math.log(VOCAB)) < 0.3  # untrained model: uniform over the vocabulary
    assert min(losses[-3:]) < losses[0] - 0.5  # and it learns the synthetic bigram map
    assert layout in stdout  # the parallel layout asked for was built


def test_primus_launch_runs_the_bundled_tiny_recipe():
    """``primus-launch -- bash recipes/megatron/tiny_gpt_cpu.sh``: the passthrough, lines streamed."""
    p = subprocess.Popen([PRIMUS, "--", "bash", str(RECIPE)], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT)
    try:
        first = p.stdout.readline()
        while first and not first.startswith("tiny_mcore_train: world"):
            first = p.stdout.readline()
        assert first.startswith("tiny_mcore_train: world 2")
        rest, err = p.communicate(timeout=240)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-3000:]
    _check_training_log(first + rest, err)


def _recipe_command() -> list[str]:
    """The torchrun command line written in the bundled recipe."""
    import shlex

    text = RECIPE.read_text()
    return shlex.split(text[text.index("\ntorchrun ") + 1:].replace("\\\n", " ").replace('"$@"', ""))


def test_project_then_launch_the_recipe_command_data_parallel_equals_one_process():
    """``primus-launch --project --dry-run --launch -- torchrun ...``: the command is read as the recipe,
    projected (its report printed first), checked to fit, then run unchanged.  Here the recipe's
    command with PP=1 (so DP=2 over gloo); its losses must equal a single-process run of the same
    global batch (same seed, same samples, gradients averaged by megatron's DDP)."""
    cmd = _recipe_command()
    assert cmd[:5] == ["torchrun", "--nnodes", "1", "--nproc-per-node", "2"]
    i = cmd.index("--pipeline-model-parallel-size")
    cmd[i + 1] = "1"
    r = subprocess.run([PRIMUS, "--project", "--dry-run", "--launch", "--", *cmd], env=ENV, capture_output=True, text=True,
                       timeout=240, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    report, _, log = r.stdout.partition("tiny_mcore_train: world")
    assert "tokens/s/GPU" in report and "fits" in report  # the projection came before the run
    log = "tiny_mcore_train: world" + log
    _check_training_log(log, r.stderr, "TP 1 x PP 1 x DP 2")
    program = cmd[cmd.index("-m") + 1:]
    one = subprocess.run([sys.executable, "-m", *program], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert one.returncode == 0, one.stderr[-3000:]
    assert "TP 1 x PP 1 x DP 1" in one.stdout
    dp2 = [l for _, _, l in _iterations(log)]
    dp1 = [l for _, _, l in _iterations(one.stdout)]
    assert len(dp1) == len(dp2) == TRAIN_ITERS
    assert dp1 == pytest.approx(dp2, rel=1e-4)
