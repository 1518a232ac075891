"""Megatron-LM dev's own options (the ``dev`` rows of the flag table, d48bd6be): a recipe setting them reads
without "unknown flag"; the ones that change time or memory are reported as not modelled, the neutral ones are
not, the one that selects an experimental attention variant refuses the recipe.

Truth: Megatron-LM dev's argparse parser (``scripts/megatron_flag_inventory.py`` on ``git archive dev megatron``),
checked here against dev's own source in the mirror when it is on this machine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from primus_launch.adapters import megatron_flags as mf
from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import Cluster, PlanError

ARGV = ("pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 2048 "
        "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 --vocab-size 32000 --bf16 "
        "--use-distributed-optimizer").split()
CL = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)
MIRROR = Path("/work/.mirror/NVIDIA+Megatron-LM/repo")

# flag and value set -> class in the table
SAMPLE = {
    "--dynamic-context-parallel": (None, mf.NOT_MODELLED),
    "--cp-partition-mode": ("contiguous", mf.NOT_MODELLED),
    "--moe-hybridep-pad-variable-tokens": (None, mf.NOT_MODELLED),
    "--dense-grouped-gemm": (None, mf.NOT_MODELLED),
    "--head-wise-attn-gate": (None, mf.NOT_MODELLED),
    "--fallback-to-eager-attn": (None, mf.NOT_MODELLED),
    "--use-varlen-dataset": (None, mf.NOT_MODELLED),
    "--thd-max-packed-sequences": ("16", mf.NOT_MODELLED),
    "--csa-window-size": ("64", mf.NEUTRAL),
    "--csa-dense-mode": (None, mf.NEUTRAL),
    "--csa-compress-ratios": ("[0,4,128,4]", mf.NEUTRAL),
    "--log-moe-overload-factor": (None, mf.NEUTRAL),
    "--mrope-interleaved": (None, mf.NEUTRAL),
    "--varlen-mock-dataset-config-json": ('{"mode":"distribution"}', mf.NEUTRAL),
}


def test_dev_options_are_in_the_table_with_their_class():
    dev = {f.flag: f for f in mf.all_flags() if f.versions == "dev"}
    assert len(dev) == 46  # 7 (optimizer-state offload, hyper-connections) + the 39 others dev's parser has
    for flag, (_, cls) in SAMPLE.items():
        assert dev[flag].cls == cls, flag
    assert dev["--linear-attention-type"].cls == mf.REFUSED
    assert all(f.note.split(":")[0] in ("time", "memory", "time, memory", "memory, time")
               for f in dev.values() if f.cls == mf.NOT_MODELLED)


def test_a_recipe_setting_dev_options_reads_and_reports_the_time_memory_ones():
    extra = []
    for flag, (value, _) in SAMPLE.items():
        extra += [flag] + ([value] if value is not None else [])
    plan = plan_from_argv(ARGV + extra, CL)
    assert not [n for n in plan.source.notes if "unknown" in n.lower()]
    reported = {u.flag: u.effect for u in plan.source.unmodelled}
    assert set(reported) == {f for f, (_, cls) in SAMPLE.items() if cls == mf.NOT_MODELLED}
    assert reported["--cp-partition-mode"].startswith("time") and "memory" in reported["--use-varlen-dataset"]
    # Megatron's default value is nothing to report
    quiet = plan_from_argv(ARGV + ["--cp-partition-mode", "zigzag", "--thd-max-packed-sequences", "16"], CL)
    assert [u.flag for u in quiet.source.unmodelled] == ["--thd-max-packed-sequences"]
    with pytest.raises(PlanError, match="--linear-attention-type"):
        plan_from_argv(ARGV + ["--linear-attention-type", "gated_delta_net"], CL)


@pytest.mark.skipif(not (MIRROR / "HEAD").exists(), reason="Megatron-LM mirror not on this machine")
def test_dev_rows_are_dev_options():
    """Each dev row is an option of dev's parser: its option string in dev's arguments.py, or its dest a field
    of the config dataclasses dev's parser is generated from; and main's arguments.py has neither spelling."""
    def show(rev: str, path: str) -> str:
        return subprocess.run(["git", "-C", str(MIRROR), "show", f"{rev}:{path}"], capture_output=True, text=True,
                              check=True).stdout

    args = show("dev", "megatron/training/arguments.py")
    fields = "".join(show("dev", p) for p in ("megatron/core/transformer/transformer_config.py",
                                              "megatron/core/model_parallel_config.py"))
    main_args = show("main", "megatron/training/arguments.py")
    for f in mf.all_flags():
        if f.versions != "dev":
            continue
        assert f"'{f.flag}'" in args or f'"{f.flag}"' in args or f"    {f.dest}:" in fields, f.flag
        assert f"'{f.flag}'" not in main_args and f'"{f.flag}"' not in main_args, f.flag
