"""The refusal of a layer count the pipeline size does not divide says what makes it split (user20).

Truth: Megatron-LM's ``validate_args`` (``megatron/training/arguments.py`` @d98e8a6): without virtual stages or a
layout, ``num_layers`` plus one per ``--account-for-embedding/loss-in-pipeline-split`` must divide by the pipeline
size; ``--decoder-first/last-pipeline-num-layers`` lift that, the middle stages sharing the rest evenly
(``TransformerConfig``), and cannot be combined with the account-for flags.  Each hint is applied to the recipe and
the recipe re-read: it must then be accepted.  Primus's ``llama3.1_405B-FP8-pretrain.yaml`` (126 layers, PP 8) was
refused with '--decoder-first/last-pipeline-num-layers', a Megatron flag spelling no Primus key, and no word of
the account-for pair that makes 126 + 2 = 128 divide.
"""

from __future__ import annotations

import re

import pytest

from primus_launch.adapters.megatron import load_megatron
from primus_launch.plan import PlanError

_ARGS = ("--num-layers {L} --hidden-size 512 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 "
         "--vocab-size 32000 --micro-batch-size 1 --global-batch-size 64 --bf16 --pipeline-model-parallel-size {pp} "
         "{extra}")


def _script(tmp_path, L: int, pp: int, extra: str = ""):
    p = tmp_path / "train.sh"
    p.write_text(f"#!/bin/bash\ntorchrun --nnodes 1 --nproc-per-node {pp} pretrain_gpt.py "
                 + _ARGS.format(L=L, pp=pp, extra=extra) + "\n")
    return p


def _megatron_accepts(L: int, pp: int, e: bool, l: bool, first: int | None, last: int | None) -> bool:
    if first is not None or last is not None:
        if e or l:
            return False
        mid = pp - (first is not None) - (last is not None)
        rest = L - (first or 0) - (last or 0)
        return rest >= 0 and (rest % mid == 0 if mid else rest == 0)
    return (L + e + l) % pp == 0


@pytest.mark.parametrize("L, pp", [(126, 8), (12, 8), (61, 4), (7, 2), (30, 4), (95, 16)])
def test_every_hint_is_one_megatron_accepts(tmp_path, L, pp):
    with pytest.raises(PlanError) as ei:
        load_megatron(_script(tmp_path, L, pp))
    msg = str(ei.value)
    assert f"must divide --num-layers={L}" in msg and "\n" not in msg
    hints = msg.split("(Megatron asserts); ", 1)[1].split("; or ")
    assert hints[-1].endswith("--pipeline-model-parallel-layout")
    tried = 0
    for h in hints[:-1]:
        e, l = "--account-for-embedding" in h, "--account-for-loss" in h
        m = re.search(r"--decoder-first-pipeline-num-layers (\d+) --decoder-last-pipeline-num-layers (\d+)", h)
        first, last = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        assert _megatron_accepts(L, pp, e, l, first, last)
        extra = " ".join(f for f, on in (("--account-for-embedding-in-pipeline-split", e),
                                         ("--account-for-loss-in-pipeline-split", l)) if on)
        if m:
            extra += f" --decoder-first-pipeline-num-layers {first} --decoder-last-pipeline-num-layers {last}"
        plan = load_megatron(_script(tmp_path, L, pp, extra))  # the recipe with the hint applied is read
        assert plan.parallel.pp == pp
        tried += 1
    assert tried >= 1  # an uneven split of L >= pp layers always exists: one is offered beside a layout string


def test_account_for_hint_says_the_slot_count(tmp_path):
    with pytest.raises(PlanError) as ei:
        load_megatron(_script(tmp_path, 126, 8))
    msg = str(ei.value)
    assert ("set --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split "
            "(128 = 8 x 16 slots") in msg
    assert "first/last" not in msg  # each flag spelt whole: a Primus / Bridge reader names its own key for it
