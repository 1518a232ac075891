"""Bad-input classes of the robust11 round (``scripts/bad_input_campaign.py --only r11:``).

Each case runs the CLI's ``main`` in this process and checks the rule: a non-zero exit, one ``primus-launch:
error:`` line naming the field (as the user wrote it) and the value, no traceback, nothing written.

- A bound of the plan's own type broken by a Megatron value (``--expert-model-parallel-size 0``, YAML
  ``kv_channels: 0``, Bridge ``virtual_pipeline_model_parallel_size: 0``) was named by the plan's field (``ep=0``,
  ``head_dim=0``, ``vpp=0``); a TorchTitan ``selective_ac_option`` / ``seq_len`` past the plan's bound by
  ``training.recompute.num_layers`` / ``model.seq_length``.
- ``--power-limit-w 0.7`` (or a ``--gpu-file`` ``power_limit_w = 5``) projected a run thousands of times slower (1e-300 W:
  5e300 s per iteration): no board takes a cap below ~20 % of its rated power (NVIDIA DGX B200 User Guide, "Managing
  Power Capping": Redfish ``PowerLimitWatts`` ``AllowableMin`` 200 W at ``AllowableMax`` 1000 W / 700 W).
- A blank output path (``--report " "``, a quoted variable holding a space) wrote a file named " ".
- Words after ``--`` following a RECIPE file: a launch script's ``$1 $2`` as projected, but ``--launch`` ran them as
  a command and ``--emit`` printed the first as the training program; after a YAML / TOML they were dropped without a
  word (nothing reads them without ``--launch`` / ``--emit``).
- ``--json --emit``: stdout held the JSON object and a launch line (no longer one JSON document).
- ``--project -x.sh``: "unrecognized arguments"; the line now says to write ``./-x.sh``.
- A tune with no plan that fits under ``--memory-margin 0.99`` did not name the margin as the cause.
- A script running several different training commands (``for GBS in 64 128 256; do torchrun ...; done``) was
  projected as its last run without a word: a note now names the count and the flags that differ.
- A key given twice in a Megatron-Bridge run_config.yaml was read (the last, as Bridge does) without a word; a
  ``--gpu-file`` YAML field given twice kept the last silently (a TOML one is refused by its parser).
- An ASCII stdout (``PYTHONIOENCODING=ascii``) and a recipe named ``\u00fc.sh``: "internal error: UnicodeEncodeError", exit 70.
- A tune on a cluster where no layout is legal (3 GPUs for a model of 32 heads and layers, batch 128) gave the recipe's own
  error only, as if the tune had not tried the cluster's layouts.
- bash arithmetic over a value of the run (``N=$(nproc); TP=$((N / 4 + 1))``, ``$((RANDOM % 2 + 1))``) read it as 0 and
  projected TP 1 without a word; ``TP=$RANDOM`` was refused as 'an unset variable'.
- ``--report=~/r.html`` (bash expands no tilde after ``--flag=``) wrote ./~/r.html, a folder named "~" made.
- ``--yaml-cfg c.yaml`` in a launch script: Megatron-LM trains with the file and ignores the other flags, which were
  projected without a word; the YAML recipe's own launch line (``pretrain_gpt.py --yaml-cfg X``) was "--num-layers=None".
- ``#SBATCH --nodes=0`` (or a word, or 2-1) under the script's ``${SLURM_NNODES:-1}``: read as 1 node without a word.
- ``--tune --allow fp8`` on an A100 (no FP8 tensor cores): "numerics: allowed fp8", where no plan could take it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cli_run import run_cli
from test_bad_input_robust9 import refused  # the one error line of a refused run (exit 2, naming words)

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
YAML = (ROOT / "recipes/megatron/llama3.1_8b.yaml").read_text()
TOML = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
DSV3 = (ROOT / "recipes/torchtitan/deepseek_v3_671b.toml").read_text()  # DeepSeek-V3: 256 routed experts
BRIDGE = (ROOT / "tests/data/bridge/qwen3_moe_run_config.yaml").read_text()
GPU = ('[gpu.mygpu]\nvendor = "custom"\npeak_flops_bf16 = 989e12\nhbm_bytes = 85899345920\nhbm_bw = 3.35e12\n'
       'intra_node_bw = 450e9\nintra_node_topology = "switch"\ninter_node_bw = 50e9\n')
DRY = ["--dry-run", "--json"]


def _files(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()}


def _refused_writing_nothing(tmp_path: Path, files: dict[str, str], argv: list[str], *words: str) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    before = _files(tmp_path)
    rc, _, err, _ = run_cli(argv, tmp_path)
    line = refused(rc, err, *words)
    assert _files(tmp_path) == before
    return line


# ------------------------------------------------------------------------- a bound named by the user's field
@pytest.mark.parametrize("name, text, old, new, words", [
    ("r.sh", BASH, "--kv-channels 128", "--kv-channels 0", ("--kv-channels=0",)),
    ("r.sh", BASH, "--num-query-groups 8", "--num-query-groups 0", ("--num-query-groups=0",)),
    ("r.sh", BASH, "--bf16\n", "--bf16 --expert-model-parallel-size 0\n", ("--expert-model-parallel-size=0",)),
    ("r.sh", BASH, "--bf16\n", "--bf16 --num-virtual-stages-per-pipeline-rank 0\n",
     ("--num-virtual-stages-per-pipeline-rank=0",)),
    ("r.yaml", YAML, "  tensor_model_parallel_size: 2", "  tensor_model_parallel_size: 0",
     ("--tensor-model-parallel-size=0",)),
    ("r.yaml", YAML, "  context_parallel_size: 1", "  context_parallel_size: -3", ("--context-parallel-size=-3",)),
    ("r.yaml", YAML, "micro_batch_size: 1", "micro_batch_size: 0", ("--micro-batch-size=0",)),
    ("b.yaml", BRIDGE, "virtual_pipeline_model_parallel_size: 2", "virtual_pipeline_model_parallel_size: 0",
     ("model.virtual_pipeline_model_parallel_size=0",)),
    ("b.yaml", BRIDGE, "expert_tensor_parallel_size: 1", "expert_tensor_parallel_size: 0",
     ("model.expert_tensor_parallel_size=0",)),
    ("r.toml", TOML, 'selective_ac_option = "op"', 'selective_ac_option = "99999999999"',
     ("activation_checkpoint.selective_ac_option=99999999999", "at most 10,000")),
    ("r.toml", TOML, "seq_len = 8192", "seq_len = 99999999999", ("training.seq_len=99999999999",)),
    ("d.toml", DSV3, "expert_parallel_degree = 64", "expert_parallel_degree = 3",
     ("parallelism.expert_parallel_degree=3", "must divide num_experts=256")),
])
def test_a_broken_bound_names_the_field_as_written(tmp_path, name, text, old, new, words):
    assert old in text
    line = _refused_writing_nothing(tmp_path, {name: text.replace(old, new, 1)}, ["--project", name, *DRY], *words)
    for plan_name in ("ep=", "tp=", "cp=", "vpp=", "etp=", "head_dim=", "recompute.num_layers", "model.seq_length",
                      "parallel.ep="):
        assert f": error: {plan_name}" not in line and f"error: {plan_name}" not in line, line


# ------------------------------------------------------------------------------------------- power caps
@pytest.mark.parametrize("watts", ["0.7", "1e-300", "139"])
def test_power_cap_below_any_board_minimum_is_refused(tmp_path, watts):
    """h100-sxm is rated 700 W; 20 % of it is 140 W (the floor from NVIDIA's DGX guide's AllowableMin)."""
    _refused_writing_nothing(tmp_path, {"r.sh": BASH}, ["--project", "r.sh", *DRY, "--power-limit-w", watts,
                                                        "--report", "p.html"],
                             f"--power-limit-w={float(watts)!r}", "at least 140 W")


def test_power_cap_at_the_floor_projects(tmp_path):
    (tmp_path / "r.sh").write_text(BASH)
    rc, out, err, _ = run_cli(["--project", "r.sh", *DRY, "--power-limit-w", "140"], tmp_path)
    assert rc == 0 and '"iteration_time_s"' in out, err[-300:]


def test_gpu_file_power_limit_below_the_floor_is_refused(tmp_path):
    _refused_writing_nothing(tmp_path, {"r.sh": BASH, "g.toml": GPU + "tdp_watts = 700\npower_limit_w = 5\n"},
                             ["--project", "r.sh", *DRY, "--gpu-file", "g.toml", "--gpu", "mygpu"],
                             "gpu.mygpu.power_limit_w=5.0", "at least 140 W")


# ------------------------------------------------------------------------------------------ blank paths
@pytest.mark.parametrize("flag, value", [("--report", " "), ("--trace", "\t"), ("--gpu-file", "  "),
                                         ("--primus-root", " ")])
def test_blank_path_is_refused(tmp_path, flag, value):
    _refused_writing_nothing(tmp_path, {"r.sh": BASH}, ["--project", "r.sh", *DRY, flag, value],
                             f"{flag}={value!r}", "blank")


def test_blank_tune_log_is_refused(tmp_path):
    _refused_writing_nothing(tmp_path, {"r.sh": BASH}, ["--tune", "r.sh", *DRY, "--out", "t.sh", "--log", " "],
                             "--log=' '", "blank")


# ------------------------------------------------------------------------------------ words after --
@pytest.mark.parametrize("name, text, mode", [("r.yaml", YAML, "--project"), ("r.toml", TOML, "--project"),
                                              ("r.yaml", YAML, "--tune")])
def test_words_after_a_non_script_recipe_are_refused(tmp_path, name, text, mode):
    _refused_writing_nothing(tmp_path, {name: text}, [mode, name, *DRY, "--", "torchrun", "--nproc-per-node", "4"],
                             "-- torchrun --nproc-per-node 4", "not a launch script")


def test_launch_of_a_script_runs_it_with_its_positional_words(tmp_path, monkeypatch):
    """``--project x.sh -- A B`` reads A B as the script's $1 $2: --launch runs ``bash x.sh A B`` (it ran ``A B``)."""
    import primus_launch.launch.launcher as launcher

    ran: list[list[str]] = []
    monkeypatch.setattr(launcher, "run_command", lambda argv: ran.append(list(argv)) or 0)
    (tmp_path / "r.sh").write_text(BASH)
    rc, _, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--launch", "--force", "--", "/ckpt", "/tb"], tmp_path)
    assert rc == 0, err[-300:]
    assert ran == [["bash", "r.sh", "/ckpt", "/tb"]]


def test_emit_of_a_script_keeps_its_program(tmp_path):
    (tmp_path / "r.sh").write_text(BASH)
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--emit", "torchrun", "--", "/ckpt"], tmp_path)
    line = [ln for ln in out.splitlines() if "torchrun" in ln][-1]
    assert rc == 0 and "pretrain_gpt.py" in line and "--save /ckpt" in line and not line.endswith(" /ckpt"), line


def test_json_with_emit_is_refused(tmp_path):
    _refused_writing_nothing(tmp_path, {"r.sh": BASH}, ["--project", "r.sh", *DRY, "--emit", "torchrun"],
                             "--emit=torchrun", "--json")


def test_recipe_named_like_an_option(tmp_path):
    _refused_writing_nothing(tmp_path, {"-x.sh": BASH}, ["--project", "-x.sh", "--dry-run"], "write ./-x.sh")


def test_tune_without_a_fit_names_the_memory_margin(tmp_path):
    _refused_writing_nothing(tmp_path, {"r.sh": BASH}, ["--tune", "r.sh", *DRY, "--out", "t.sh", "--max-work", "300",
                                                        "--memory-margin", "0.99"],
                             "no plan fits", "--memory-margin=0.99", "a smaller --memory-margin")


def test_a_sweep_script_says_which_run_it_projects(tmp_path):
    """A script that loops over settings runs every training command (bash); one is projected: the note says how many
    and the flags that differ, with the projected one's value (it was the last one, without a word)."""
    i = BASH.index("torchrun ")
    sweep = BASH[:i] + "for GBS in 64 128 256; do\n" + BASH[i:].rstrip("\n") + " --global-batch-size $GBS\ndone\n"
    (tmp_path / "r.sh").write_text(sweep)
    rc, out, err, _ = run_cli(["--project", "r.sh", *DRY], tmp_path)
    assert rc == 0 and '"global_batch_size": 256' in out, err[-300:]
    assert "runs 3 training commands, 3 different" in err and "--global-batch-size 256 (of 64, 128, 256)" in err, err
    (tmp_path / "one.sh").write_text(BASH)
    rc, _, err, _ = run_cli(["--project", "one.sh", *DRY], tmp_path)
    assert rc == 0 and "training commands" not in err


def test_a_key_given_twice_in_a_bridge_config_is_noted(tmp_path):
    """Megatron-Bridge loads run_config.yaml with yaml.safe_load (training/utils/checkpoint_utils.py): the last wins."""
    (tmp_path / "b.yaml").write_text(BRIDGE.replace("\n  num_layers: 48\n", "\n  num_layers: 48\n  num_layers: 24\n", 1))
    rc, out, err, _ = run_cli(["--project", "b.yaml", *DRY], tmp_path)
    assert rc == 0 and '"num_layers": 24' in out and "num_layers: given twice" in err, err[-400:]


def test_a_gpu_yaml_field_given_twice_is_refused(tmp_path):
    gpu = ("gpu:\n  mygpu:\n    vendor: custom\n    peak_flops_bf16: 989.0e+12\n    hbm_bytes: 85899345920\n"
           "    hbm_bytes: 1\n    hbm_bw: 3.35e+12\n    intra_node_bw: 450.0e+9\n    intra_node_topology: switch\n"
           "    inter_node_bw: 50.0e+9\n")
    _refused_writing_nothing(tmp_path, {"r.sh": BASH, "g.yaml": gpu},
                             ["--project", "r.sh", *DRY, "--gpu-file", "g.yaml", "--gpu", "mygpu"],
                             "hbm_bytes: given twice", "lines 5 and 6")


def test_an_ascii_stdout_gets_escapes_not_an_internal_error():
    """``PYTHONIOENCODING=ascii`` (or a C locale without UTF-8 mode): the answer naming a recipe ``ü.sh`` raised
    UnicodeEncodeError (exit 70); it is written as stderr writes it, with a backslash escape."""
    import io

    from primus_launch.streams import Answer

    raw = io.BytesIO()
    out = Answer(io.TextIOWrapper(raw, encoding="ascii", write_through=True))
    assert out.write("model  \u00fc (32 layers)\n") == len("model  \u00fc (32 layers)\n")
    assert raw.getvalue() == b"model  \\xfc (32 layers)\n"


def test_tune_on_a_cluster_no_layout_fits_says_it_tried(tmp_path):
    """91 GPUs (13 x 7) for Llama 3.1 8B (32 heads, 32 layers, global batch 128): TP 7 divides no heads, PP 7 or 13
    leaves DP 13 or 7, and neither divides the batch (3 GPUs start at PP 3 on uneven stages since tune17)."""
    _refused_writing_nothing(tmp_path, {"r.sh": BASH}, ["--tune", "r.sh", *DRY, "--out", "t.sh", "--nodes", "13",
                                                        "--gpus-per-node", "7"],
                             "must divide world size 91", "no layout the tune starts from is legal there either")


@pytest.mark.parametrize("line, words", [
    ("N=$(nproc)\nTP_SIZE=$((N / 4 + 1))", ("--tensor-model-parallel-size=", "a command's output")),
    ("TP_SIZE=$((RANDOM % 2 + 1))", ("$RANDOM",)),
    ("TP_SIZE=$RANDOM", ("--tensor-model-parallel-size='$RANDOM'", "a different value on each run")),
])
def test_bash_arithmetic_over_a_value_of_the_run_is_refused(tmp_path, line, words):
    """bash evaluates ``$((N / 4 + 1))`` with N a command's output (nproc: a number of the machine it runs on) and
    ``$RANDOM`` (a new number per read, bash(1) "Shell Variables"); the reader read both as 0 and projected TP 1."""
    _refused_writing_nothing(tmp_path, {"r.sh": BASH.replace("TP_SIZE=2\n", line + "\n", 1)},
                             ["--project", "r.sh", *DRY], *words)


def test_random_port_still_projects(tmp_path):
    (tmp_path / "r.sh").write_text(BASH.replace("MASTER_PORT=${MASTER_PORT:-6000}", "MASTER_PORT=$((RANDOM % 1000 + 6000))"))
    rc, out, err, _ = run_cli(["--project", "r.sh", *DRY], tmp_path)
    assert rc == 0 and '"iteration_time_s"' in out, err[-300:]


@pytest.mark.parametrize("argv", [["--project", "r.sh", *DRY, "--report=~/r.html"],
                                  ["--tune", "r.sh", *DRY, "--out=~/t.sh"], ["--project=~/r.sh", "--dry-run"]])
def test_an_unexpanded_tilde_is_refused(tmp_path, argv):
    """bash expands ``~`` in a word only at its start or after an assignment's ``=`` (``echo --report=~/x`` prints
    ``--report=~/x``): the run made (or looked in) a folder named "~" in the working folder."""
    flag, _, value = next(x for x in argv if "~" in x).partition("=")
    _refused_writing_nothing(tmp_path, {"r.sh": BASH}, argv, f"{flag}={value!r}", "'~' was not expanded")
    assert not (tmp_path / "~").exists()


@pytest.mark.parametrize("argv, files", [
    (["--project", "r.sh", *DRY], {"r.sh": BASH.replace("    --bf16\n", "    --bf16 --yaml-cfg c.yaml\n", 1), "c.yaml": YAML}),
    (["--project", *DRY, "--", "torchrun", "--nproc-per-node", "8", "pretrain_gpt.py", "--yaml-cfg", "c.yaml"],
     {"c.yaml": YAML}),
])
def test_yaml_cfg_in_a_command_points_at_the_file(tmp_path, argv, files):
    """Megatron-LM parse_args: ``if args.yaml_cfg is not None: args = load_yaml(args.yaml_cfg)`` ("argparse arguments
    will be ignored", megatron/training/yaml_arguments.py): the command's flags are not the run's."""
    _refused_writing_nothing(tmp_path, files, argv, "--yaml-cfg='c.yaml'", "--project c.yaml")


@pytest.mark.parametrize("value", ["0", "abc", "2-1"])
def test_an_sbatch_count_sbatch_refuses_is_noted(tmp_path, value):
    """``#SBATCH --nodes=0`` (Slurm: no count of 0, a word or MIN > MAX, src/common/proc_args.c verify_node_count) with
    the script's ``${SLURM_NNODES:-1}`` default: projected on 1 node without a word."""
    text = BASH.replace("NUM_NODES=1", "NUM_NODES=${SLURM_NNODES:-1}").replace(
        "#!/bin/bash\n", f"#!/bin/bash\n#SBATCH --nodes={value}\n", 1)
    (tmp_path / "r.sbatch").write_text(text)
    rc, out, err, _ = run_cli(["--project", "r.sbatch", *DRY], tmp_path)
    assert rc == 0 and f"'#SBATCH --nodes={value}' is not a count sbatch takes" in err, err[-400:]


def test_allow_fp8_on_a_gpu_without_fp8_says_so(tmp_path):
    """An A100 has no FP8 tensor cores (its datasheet peak_flops_fp8 is its BF16 peak): ``--allow fp8`` searched
    nothing there, and the answer said "numerics: allowed fp8"."""
    (tmp_path / "r.sh").write_text(BASH)
    rc, out, err, _ = run_cli(["--tune", "r.sh", "--dry-run", "--out", "t.sh", "--max-work", "300", "--gpu",
                               "a100-sxm-80gb", "--allow", "fp8"], tmp_path)
    assert rc == 0, err[-300:]
    assert "fp8 (none on a100-sxm-80gb: no FP8 tensor cores)" in " ".join(out.split()), out[-800:]


def test_launch_of_a_tuned_script_keeps_its_positional_words(tmp_path, monkeypatch):
    """``--tune x.sh --launch -- A B``: the tune read x.sh with $1 $2 = A B; the tuned script runs with them too (they
    were dropped: ``bash x.tuned.sh``)."""
    import primus_launch.launch.launcher as launcher

    ran: list[list[str]] = []
    monkeypatch.setattr(launcher, "run_command", lambda argv: ran.append(list(argv)) or 0)
    (tmp_path / "r.sh").write_text(BASH)
    rc, _, err, _ = run_cli(["--tune", "r.sh", "--dry-run", "--max-work", "300", "--out", "t.sh", "--launch", "--force",
                             "--", "/ckpt", "/tb"], tmp_path)
    assert rc == 0, err[-300:]
    assert ran == [["bash", "t.sh", "/ckpt", "/tb"]]
