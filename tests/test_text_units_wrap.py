"""A wrapped answer keeps a number with its unit: the memory row under ``--memory-margin`` wrapped as
"band 57.6-65.2" / "GiB (-2/+11 %)" and the tune's "searched:" line as "0.7" / "s"."""

from __future__ import annotations

import re
from pathlib import Path

from primus_launch.adapters import load_recipe
from primus_launch.projection.api import project
from primus_launch.report.text import glue_units, render_text

ROOT = Path(__file__).resolve().parents[1]
UNIT_FIRST = re.compile(r"^\s*(s|ms|%|GiB|GB|MB|KB|W|days)\b")


def _split_units(text: str) -> list[tuple[str, str]]:
    lines = text.splitlines()
    return [(a, b) for a, b in zip(lines, lines[1:]) if re.search(r"\d$", a) and UNIT_FIRST.match(b)]


def test_number_and_unit_stay_on_one_line():
    res = project(load_recipe(ROOT / "recipes/megatron/llama3.1_8b.sh"), dry_run=True, memory_margin=0.1)
    text = render_text(res)
    assert "margin 10 %" in text and not _split_units(text)
    assert all(len(ln) <= 80 for ln in text.splitlines())
    assert glue_units("0.7 s, 12.8 s/iter, 3 GiB (5 %)") == "0.7\u00a0s, 12.8 s/iter, 3\u00a0GiB (5\u00a0%)"


def test_tune_lines_keep_units():
    from primus_launch.report.tune_text import _wrapped

    line = "searched: 52,088 plans: 1 scored, 51,853 bounded out by time, 234 by memory, 0.7 s"
    out = _wrapped(line)
    assert not _split_units("\n".join(out)) and " ".join(w.strip() for w in out) == line


def test_small_figures_are_not_printed_as_zero():
    """The bundled tiny GPT's 0.042 TFLOP/s and 0.0085 % MFU (model FLOPs over its iteration time and the
    TF32 peak) printed as "0.0" and "0.0 %"."""
    from primus_launch.report.text import small_figure

    assert [small_figure(v) for v in (0.0, 0.042022, 0.0084945, 0.05, 318.034, 1313.66)] == [
        "0.0", "0.042", "0.0085", "0.1", "318.0", "1,313.7"]  # thousands separated as the answer's other figures
    res = project(load_recipe(ROOT / "recipes/megatron/tiny_gpt_cpu.sh"), dry_run=True)
    text = render_text(res)
    assert f"model TFLOP/s/GPU  {res.model_tflops_per_gpu:.2g}" in text
    assert abs(res.model_tflops_per_gpu / (495 * res.mfu) - 1) < 0.01  # against the TF32 dense peak it names


def test_memory_row_names_the_allocated_basis():
    """``--memory-basis allocated`` printed "33.1 GiB peak", the same words as the default reserved peak."""
    plan = load_recipe(ROOT / "recipes/torchtitan/llama3.1_8b.toml")
    alloc = project(plan, dry_run=True, memory_basis="allocated")
    assert f"{alloc.memory.peak_bytes_per_gpu / 2 ** 30:.1f} GiB allocated peak of" in render_text(alloc)
    assert "allocated peak" not in render_text(project(plan, dry_run=True))


def test_a_path_longer_than_a_line_is_not_broken():
    """A note naming a file whose path is longer than the line (pytest's tmp paths under xdist) was broken
    mid-path by the fallback wrap, so the path printed could not be pasted back; it now overflows whole."""
    from primus_launch.report.text import WIDTH, _wrap
    path = "/tmp/pytest-of-root/pytest-626/popen-gw0/test_a_gpu_file_spec_is_noted_0/" + "x" * 20 + "/gpus.toml"
    lines = _wrap(f"note: cluster gpu=h100-sxm: spec from --gpu-file {path} (over the database's entry)",
                  indent="    ", first="  ")
    assert len(path) + 4 > WIDTH and any(ln.strip() == path for ln in lines)
    assert " ".join(" ".join(lines).split()) == ("note: cluster gpu=h100-sxm: spec from --gpu-file "
                                                 f"{path} (over the database's entry)")


def test_a_range_is_not_split_across_lines():
    """The summary of Megatron-LM's ``examples/mamba/train.sh`` (8B) wrapped "they ran 0 .." / "16 % slower than
    projected": a range's two ends stay together, at any sign or unit."""
    assert glue_units("they ran 0 .. 16 % slower") == "they ran 0\u00a0..\u00a016\u00a0% slower"
    assert glue_units("+0% .. +16% on") == "+0%\u00a0..\u00a0+16% on"
    assert glue_units("1.494 .. 1.601 s") == "1.494\u00a0..\u00a01.601\u00a0s"
    assert glue_units("modules .. and") == "modules .. and"
    res = project(load_recipe(ROOT / "recipes/megatron/qwen3_235b_a22b_h100_256gpu.yaml"), dry_run=True)
    lines = render_text(res).splitlines()
    assert not [a for a in lines if re.search(r"\d \.\.$", a)] and all(len(ln) <= 80 for ln in lines)


def test_one_micro_batch_is_singular():
    """``examples/mamba/train.sh`` (8B: GBS 8, MBS 4, DP 2) explained "note: 1 micro-batches"."""
    from primus_launch.plan import Cluster
    from primus_launch.adapters.megatron import plan_from_argv

    argv = ("pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 512 "
            "--max-position-embeddings 512 --micro-batch-size 4 --global-batch-size 8 --vocab-size 32000 "
            "--bf16").split()
    plan = plan_from_argv(argv, Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=2))
    assert plan.num_microbatches == 1
    notes = project(plan, dry_run=True).notes
    assert "1 micro-batch; schedule 1f1b" in notes and not any("1 micro-batches" in n for n in notes)


def test_titan_compile_notes_match_the_traced_model():
    """The bundled TorchTitan Llama 3.1 70B (``[compile] enable = true``) was explained with "unfused SwiGLU" in
    the activations note and "torch.compile: ... (stated model, not traced)": compiled blocks are traced against
    inductor's partitioner (tests/test_memory_titan.py ``test_compiled_block_keeps_what_inductors_partitioner_saves``),
    and the compiled block keeps SwiGLU's w1/w3 outputs only."""
    plan = load_recipe(ROOT / "recipes/torchtitan/llama3.1_70b.toml")
    assert plan.training.compile
    notes = project(plan, dry_run=True).memory.notes
    assert not any("not traced" in n or "unfused SwiGLU" in n for n in notes)
    assert any("compiled SwiGLU" in n for n in notes) and any("inductor's partitioner" in n for n in notes)
    eager = plan.model_copy(update={"training": plan.training.model_copy(update={"compile": False})})
    assert any("unfused SwiGLU" in n for n in project(eager, dry_run=True).memory.notes)


def test_tune_file_lines_keep_units():
    """``--tune recipes/megatron/tiny_gpt_cpu.sh --dry-run`` printed "trial log written to
    recipes/megatron/tiny_gpt_cpu.tuned.sh.trials.json (37.4" / "KB)"."""
    from primus_launch.cli_output import fit

    line = "trial log written to recipes/megatron/tiny_gpt_cpu.tuned.sh.trials.json (37.4 KB)"
    out = fit(line).splitlines()
    assert not _split_units("\n".join(out)) and " ".join(w.strip() for w in out) == line
    assert all(len(w) <= 80 for w in out)


def test_a_reserved_peak_over_the_capacity_beside_fits_says_why():
    """torchtitan v0.2.2's ``qwen3_32b.toml`` (8 H100s) answered "87.2 GiB peak of 79.2 GiB: fits": the verdict is
    on the part that cannot be released (the peak less the free cached segments torch's caching allocator gives
    back before it raises out of memory), and the answer now says the excess over the capacity is among them; the
    figures it prints are the JSON's."""
    from primus_launch.report.text import verdict_text

    res = project(load_recipe(ROOT / "tests/data/torchtitan-v0.2.2/models_qwen3__qwen3_32b.toml"), dry_run=True)
    m = res.memory
    assert m.verdict_peak_bytes <= m.capacity_bytes < m.peak_bytes_per_gpu and m.verdict == "fits"
    over = (m.peak_bytes_per_gpu - m.capacity_bytes) / 2 ** 30
    assert f"the {over:.1f} GiB over the capacity are among them" in verdict_text(res)
    assert over < (m.peak_bytes_per_gpu - m.verdict_peak_bytes) / 2 ** 30
    fits = project(load_recipe(ROOT / "recipes/torchtitan/llama3.1_8b.toml"), dry_run=True)
    assert fits.memory.peak_bytes_per_gpu < fits.memory.capacity_bytes and "over the capacity" not in verdict_text(fits)


def test_a_long_group_moved_whole_does_not_leave_a_word_alone():
    """Megatron-LM's ``examples/llama/train_llama3_8b_h100_fp8.sh`` from a long path was noted as
    "...: cluster gpu=h100-sxm: the" / "default" / "(the recipe does not state it; ...)" (a path under /tmp/u13): a parenthesised group
    moved whole to the next line left one word on its own; it now wraps at its spaces there, and a group that
    leaves no such line is still kept whole."""
    from primus_launch.report.text import _wrap

    note = ("/tmp/u13/mirror/train_llama3_8b_h100_fp8.sh: cluster gpu=h100-sxm: the default "
            "(the recipe does not state it; pass --gpu or a '# primus-launch:' comment)")
    lines = _wrap(note, indent="    ", first="note: ")
    assert all(len(ln) >= 80 // 3 for ln in lines[:-1]) and all(len(ln) <= 80 for ln in lines)
    assert " ".join(ln.strip() for ln in lines) == "note: " + note
    short = "cluster: 1 x 8 h100-sxm assumed (the job states no cluster; give --gpu / --nodes / --gpus-per-node)"
    assert _wrap(short, indent="    ", first="note: ")[1].strip().startswith("(the job states")


def test_explain_says_where_the_bf16_layers_are_timed():
    """The bundled DeepSeek-V3 FP8 recipe with ``first_last_layers_bf16: true`` and two BF16 layers at the start
    (megatron-core 0.16.1 ``fp8_utils.is_first_last_bf16_layer``) is timed with those layers in BF16 (iteration
    time up), but ``--explain`` said so only for memory and its per-layer tables are the FP8 layers': a time note
    names the layers; a plan without them has no such note."""
    path = ROOT / "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml"
    plain = load_recipe(path)
    plan = plain.model_copy(update={"training": plain.training.model_copy(
        update={"bf16_layers_start": 2, "bf16_layers_end": 1})})
    assert sorted(plan.bf16_layer_ids()) == [0, 1, plan.model.num_layers - 1]
    res, base = project(plan, dry_run=True), project(plain, dry_run=True)
    assert res.iteration_time_s > base.iteration_time_s
    note = [n for n in res.notes if "timed in BF16" in n]
    assert note and f"ids 0, 1, {plan.model.num_layers - 1}" in note[0] and "3 decoder layers" in note[0]
    assert not any("timed in BF16" in n for n in base.notes)
