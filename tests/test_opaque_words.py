"""A command's output the reader does not run stays one word, however many words its source has (user20).

Truth: bash itself (``bash -c``, the script with ``python`` printing its arguments): a ``$(date "+%Y...")`` whose
output holds no blank, kept in a variable and expanded unquoted, is one argument; a process substitution
``<(echo a)`` is one (``/dev/fd/N``).  The reader cannot know an output, so it keeps the source text as one opaque
word: splitting it at the blanks of its *source* put the word after the space (``"+%Y.%m.%d-%H.%M.%S")``) where a
flag would stand.  Pai-Megatron-Patch ``examples/qwen3/run_mcore_qwen3.sh`` (``current_time=$(date
"+%Y.%m.%d-%H.%M.%S")`` in ``--tensorboard-dir``) was answered with a warning that that half-word's command
output "may set any flag: sizes, parallelism, batch, precision", and the tensorboard note cut at ``$(date``.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from primus_launch.adapters.megatron_bash import ShellState
from primus_launch.adapters.megatron import load_megatron

SNIPPETS = [
    'T=$(date "+%Y.%m.%d-%H.%M.%S")\nD="/out/tb_${T}"\npython x.py --tensorboard-dir ${D} --num-layers 2\n',
    'python x.py --a <(echo a) --b $(printf %s "x") --c 3\n',
    'N=`date +%s`\npython x.py --seed ${N} --num-layers 4\n',
]


def _bash_args(snippet: str) -> list[str]:
    prog = "python() { printf '%s\\0' \"$@\"; }\n" + snippet
    out = subprocess.run(["bash", "-c", prog], capture_output=True, timeout=10, check=True, stdin=subprocess.DEVNULL)
    return out.stdout.decode().split("\0")[:-1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("snippet", SNIPPETS)
def test_opaque_output_is_one_argument_as_bash_passes_it(snippet):
    want = _bash_args(snippet)
    st = ShellState(snippet)
    got = [c for c in st.commands if c.args and c.args[0].text == "python"][-1].args[1:]
    assert len(got) == len(want)
    for tok, arg in zip(got, want):
        if not tok.opaque:  # the words the reader knows are bash's, at bash's positions
            assert tok.text == arg


_SCRIPT = """#!/bin/bash
current_time=$(date "+%Y.%m.%d-%H.%M.%S")
TENSORBOARD_DIR="/logs/tensorboard/run_${current_time}"
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \\
    --num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 \\
    --vocab-size 1000 --micro-batch-size 1 --global-batch-size 8 --bf16 \\
    --tensorboard-dir ${TENSORBOARD_DIR} \\
    --log-timers-to-tensorboard
"""


def test_timestamped_path_is_no_unread_flag(tmp_path):
    p = tmp_path / "run_mcore.sh"
    p.write_text(_SCRIPT)
    plan = load_megatron(p)
    assert not [u for u in plan.source.unmodelled if "command's output" in u.value]
    note = [n for n in plan.source.notes if n.startswith("--tensorboard-dir")]
    assert note and '$(date "+%Y.%m.%d-%H.%M.%S")' in note[0]
