"""Bad-input classes the structured fuzzing found (robust7, ``scripts/fuzz_structured.py``: hypothesis draws
parsed mutations of every bundled recipe, NeMo interpolations, ``[collectives]`` tables, file names and CLI
flag sets): each was an internal error (exit 70), a hang, an unnamed ``[Errno 36]`` line, NaN printed with
exit 0, or a tune that could not read back the recipe it wrote.  Now: one ``primus-launch: error:`` line
naming the field and the value, exit 2 -- or, for the tune, the answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import run_cli
from test_bad_input_values import refused

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
TOML = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
PRIMUS = (ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
NEMO = (ROOT / "tests/test_adapter_nemo_yaml.py").read_text().split('CONFIG = """\\\n')[1].split('"""')[0]
GPU = ('[gpu.mygpu]\nvendor = "custom"\npeak_flops_bf16 = 989e12\nhbm_bytes = 85899345920\nhbm_bw = 3.35e12\n'
       'intra_node_bw = 450e9\nintra_node_topology = "switch"\ninter_node_bw = 50e9\n')
LONG = "x" * 5000


@pytest.fixture
def hardware_restored():
    """--gpu-file registers GPUs and fabrics in this process: put the databases back after the test."""
    from primus_launch.projection.hardware import fabric, gpus

    db, measured = dict(gpus._DB), dict(fabric._MEASURED)
    yield
    gpus._DB.clear()
    gpus._DB.update(db)
    for name in set(fabric._MEASURED) | set(measured):
        if fabric._MEASURED.get(name) != measured.get(name):
            fabric.register_fabric(name, measured.get(name))  # None drops it; the listeners clear the caches


# ----------------------------------------------------------------------------- NeMo interpolations
@pytest.mark.parametrize("old,new,words", [
    # math.ceil(inf) / math.floor(nan) raised OverflowError / ValueError: exit 70
    ("${divide_floor:${.hidden_size}, 3}", "${divide_floor:1e999, 3}", ("takes two finite numbers", "inf")),
    ("${divide_floor:${.hidden_size}, 3}", "${divide_floor:nan, 3}", ("takes two finite numbers", "nan")),
    ("${divide_floor:${.hidden_size}, 3}", "${divide_floor:${.hidden_size}, 1e-320}", ("a finite number is needed",)),
    ("${multiply:8, 16}", "${multiply:1e308, 1e308}", ("model.global_batch_size", "a finite number is needed")),
    # nested resolvers past the depth bound were called "a cycle"
    ("${multiply:8, 16}", "${multiply:" * 40 + "1,1" + "}, 1" * 39 + "}", ("nested deeper than 32 levels",)),
    # a 5,000-digit list index: int() past Python's 4,300-digit limit, exit 70
    ("num_layers: 8", "num_layers: ${training.model.data.data_prefix." + "9" * 5000 + "}",
     ("model.num_layers", "which the file does not hold", "(5,0")),
    # a mapping inside a string: its repr made a 1,500-character "value"
    ("name: megatron_llama", "name: x${training.model}", ("exp_manager.name", "names a mapping")),
])
def test_nemo_interpolations_refused_in_one_line(tmp_path, old, new, words):
    assert old in NEMO
    (tmp_path / "n.yaml").write_text(NEMO.replace(old, new, 1))
    line = refused(["--project", "n.yaml", "--dry-run", "--json"], tmp_path, *words)
    assert len(line) < 600, len(line)


def test_nemo_interpolations_that_double_are_refused_not_expanded(tmp_path):
    """``d1: ${.d0}${.d0}`` ... ``d30``: 2^30 characters from 30 lines (the reader ran without end); each key
    is resolved once and a value past 1 MiB is refused."""
    chain = "  d0: x\n" + "".join(f'  d{i + 1}: "${{.d{i}}}${{.d{i}}}"\n' for i in range(30))
    text = NEMO.replace("  num_layers: 8\n", "  num_layers: 8\n" + chain).replace("hidden_size: 1024",
                                                                                  "hidden_size: ${.d30}")
    (tmp_path / "n.yaml").write_text(text)
    refused(["--project", "n.yaml", "--dry-run", "--json"], tmp_path, "model.hidden_size",
            "expand to more than 1,048,576 characters")


def test_a_cycle_is_named_with_its_key(tmp_path):
    (tmp_path / "n.yaml").write_text(NEMO.replace("num_layers: 8", "num_layers: ${.num_layers}"))
    refused(["--project", "n.yaml", "--dry-run", "--json"], tmp_path, "in a cycle (model.num_layers)")


# ----------------------------------------------------------------------------- file names a recipe writes
EXP = ("work_group: a\nuser_name: b\nexp_name: c\nworkspace: ./o\nmodules:\n  pre_trainer:\n    framework: megatron\n"
       "    config: pre_trainer.yaml\n    model: {model}\n    overrides:\n      seq_length: 128\n")


@pytest.mark.parametrize("files,argv,words", [
    # ValueError: embedded null byte (exit 70)
    ({"r.yaml": 'extends:\n  - "a\\0b.yaml"\n'}, ["--project", "r.yaml"], ("extends='a\\x00b.yaml'", "no NUL")),
    ({"exp/e.yaml": EXP.format(model='"a\\0b"')}, ["--project", "exp/e.yaml", "--primus-root", "."],
     ("modules.*.model='a\\x00b'", "no NUL")),
    ({"exp/e.yaml": EXP.format(model="[1, 2]")}, ["--project", "exp/e.yaml", "--primus-root", "."],
     ("modules.*.model=[1, 2]", "a non-empty string")),
    # OSError ENAMETOOLONG: a bare "[Errno 36] File name too long" line naming no field (exit 70 for --primus-root)
    ({"exp/e.yaml": EXP.format(model=LONG)}, ["--project", "exp/e.yaml", "--primus-root", "."],
     ("modules.*.model='xxx", "characters):", "at most 255 bytes per component")),
    ({"r.yaml": f"extends:\n  - {LONG}.yaml\n"}, ["--project", "r.yaml"], ("extends='xxx", "(5,015 characters):")),
    ({"w.primus.toml": f'[recipe]\npath = "{LONG}.sh"\n'}, ["--project", "w.primus.toml"], ("recipe.path='xxx",)),
    ({"w.primus.toml": f'[recipe]\npath = "r.sh"\nprimus_root = "{LONG}"\n'}, ["--project", "w.primus.toml"],
     ("recipe.primus_root='xxx",)),
    ({"w.primus.toml": f'[recipe]\npath = "r.sh"\n[hardware]\nfile = "{LONG}.toml"\n'}, ["--project", "w.primus.toml"],
     ("hardware.file='xxx",)),
    ({}, ["--project", "r.sh", "--primus-root", LONG], ("--primus-root='xxx", "no such folder")),
    ({"o.sh": BASH.replace("--bf16", f"--bf16 --tp-comm-overlap --tp-comm-overlap-cfg {LONG}.yaml")},
     ["--project", "o.sh"], ("--tp-comm-overlap-cfg='xxx", "File name too long")),
    ({}, ["--project", "--", "torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--job.config_file",
          LONG + ".toml"], ("--job.config_file='xxx",)),
    # a device was "no such file"
    ({}, ["--project", "--", "torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--job.config_file",
          "/dev/zero"], ("--job.config_file='/dev/zero': a character device",)),
])
def test_impossible_file_names_are_refused_by_field(tmp_path, files, argv, words):
    (tmp_path / "r.sh").write_text(BASH)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "primus/configs/models/megatron").mkdir(parents=True)
    (tmp_path / "primus/configs/modules/megatron").mkdir(parents=True)
    (tmp_path / "primus/configs/modules/megatron/pre_trainer.yaml").write_text("bf16: true\n")
    line = refused(argv[:2] + ["--dry-run", "--json"] + argv[2:], tmp_path, *words)
    assert "Errno" not in line and len(line) < 600, line


def test_a_sourced_file_whose_name_is_too_long_is_skipped_as_bash_skips_it(tmp_path):
    (tmp_path / "r.sh").write_text(BASH.replace("# Parallelism and batch\n", f"source ./{LONG}\n# Parallelism and batch\n"))
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--json"], tmp_path)
    assert rc == 0 and "Traceback" not in err, err[-500:]
    assert json.loads(out)["iteration_time_s"] > 0


# ----------------------------------------------------------------------------- [collectives.<gpu>] tables
@pytest.mark.parametrize("body,words", [
    ("e_ar = [1, 2]", "collectives.h100-sxm.e_ar=[1, 2]: a number"),           # TypeError (exit 70)
    ("l_g = {a = 1}", "collectives.h100-sxm.l_g={'a': 1}: a number"),
    ("e_rdma = 3", "collectives.h100-sxm.e_rdma=3: a table of efficiencies"),  # accepted, then unused
    ("points = 3", "collectives.h100-sxm.points=3: a table"),
    ("points = {all_reduce = [[1]]}", "points.all_reduce=[[1]]: a non-empty list of [S, t] pairs"),  # ValueError
    ("points = {all_reduce = []}", "points.all_reduce=[]: a non-empty list"),  # IndexError
    ("points = {nope = [[1, 2]]}", "points.nope=[[1, 2]]: an op of"),
    ("points_ranks = 1.5", "points_ranks=1.5: a whole number of ranks"),
    ("up_bw = 1e-300", "up_bw=1e-300: between 1e+06 and 1e+15 bytes/s"),       # NaN figures with exit 0
    ("link_bw = 1e-300", "link_bw=1e-300: between 1e+06 and 1e+15 bytes/s (or 0: a switch)"),
    ("l_ar = 1e15", "l_ar=1000000000000000.0: between 0 and 1 s"),             # a 10^17 s iteration
])
def test_collectives_fields_checked_by_type_and_range(tmp_path, hardware_restored, body, words):
    (tmp_path / "r.sh").write_text(BASH)
    (tmp_path / "c.toml").write_text(f"[collectives.h100-sxm]\n{body}\n")
    refused(["--project", "r.sh", "--dry-run", "--json", "--gpu-file", "c.toml"], tmp_path, words)


def test_a_switch_fabric_link_of_zero_is_taken(tmp_path, hardware_restored):
    (tmp_path / "r.sh").write_text(BASH)
    (tmp_path / "c.toml").write_text("[collectives.h100-sxm]\nlink_bw = 0\n")
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--json", "--gpu-file", "c.toml"], tmp_path)
    assert rc == 0, err[-300:]


# ----------------------------------------------------------------------------- a tune on a --gpu-file GPU
def test_a_tune_on_a_gpu_file_gpu_writes_a_recipe_it_reads_back(tmp_path, hardware_restored):
    """The tuned script's ``# primus-launch: gpu=mygpu`` was refused on reading back: every tune on a custom
    GPU ended in an error (after writing its trial log)."""
    (tmp_path / "r.sh").write_text(BASH)
    (tmp_path / "g.toml").write_text(GPU)
    rc, out, err, _ = run_cli(["--tune", "r.sh", "--dry-run", "--json", "--gpu-file", "g.toml", "--gpu", "mygpu",
                               "--out", "t.sh", "--max-work", "200"], tmp_path)
    assert rc == 0, err[-400:]
    assert "gpu=mygpu" in (tmp_path / "t.sh").read_text()
    rc, out, err, _ = run_cli(["--project", "t.sh", "--dry-run", "--json", "--gpu-file", "g.toml"], tmp_path)
    assert rc == 0 and json.loads(out)["num_gpus"] == 8, err[-300:]


@pytest.mark.parametrize("gpu", ["a100-sxm-40gb", "gb200", "mygpu"])
def test_torchtitan_preset_header_round_trips_every_gpu_name(hardware_restored, gpu):
    """The tuned TOML's header upper-cased the name: GB200 / a --gpu-file name were refused on reading back,
    and a hyphenated name (a100-sxm-40gb) was not seen at all -- the tuned TOML read as 8 H100s."""
    from primus_launch.adapters.torchtitan import _header_line, cluster_from_header
    from primus_launch.plan import Cluster
    from primus_launch.projection.hardware.gpus import load_gpu_file

    if gpu == "mygpu":
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(GPU)
        load_gpu_file(f.name)
        Path(f.name).unlink()
    c = Cluster(gpu=gpu, num_nodes=2, gpus_per_node=4)
    back = cluster_from_header(f"# NOTE: this toml config is a {_header_line(c)}.\n")
    assert back == c
    # torchtitan's own words still read as before
    assert cluster_from_header("# NOTE: this toml config is a preset for 64 A100 GPUs.\n").gpu == "a100-sxm-80gb"


# ----------------------------------------------------------------------------- error lines
def test_error_lines_clip_long_words_and_keep_both_ends():
    from primus_launch.errors import UserError, one_line

    line = one_line(UserError(f"extends='{LONG}': a YAML file name"))
    assert line == f"extends='{'x' * 51}... (5,010 characters): a YAML file name"  # the word's length
    mapping = repr({f"k{i}": "v" * 10 for i in range(200)})
    line = one_line(UserError(f"model.normalization={mapping}: one of LayerNorm, RMSNorm"))
    assert line.startswith("model.normalization={'k0'") and line.endswith(": one of LayerNorm, RMSNorm")
    assert len(line) < 560


@pytest.mark.parametrize("name", ["my gpu", "a=b", "x\\nTP=1", "-x"])
def test_a_gpu_name_is_one_word(tmp_path, hardware_restored, name):
    """A name with a space, a '=' or a newline went into the tuned script's ``# primus-launch: gpu=NAME``
    comment: read back as another name (``gpu='my'``), or a newline began a line of the script."""
    (tmp_path / "r.sh").write_text(BASH)
    (tmp_path / "g.toml").write_text(GPU.replace("[gpu.mygpu]", f'[gpu."{name}"]'))
    refused(["--project", "r.sh", "--dry-run", "--json", "--gpu-file", "g.toml"], tmp_path, "--gpu-file='g.toml'",
            "a GPU name is one word")


def test_a_flag_bound_is_said():
    """``--gpu-hour-price 1e300`` was refused as "USD per GPU-hour, > 0" (1e300 is > 0: the bound went unsaid)."""
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--gpu-hour-price", "1e300", "--train-tokens", "1T"],
                              ROOT)
    assert rc == 2 and "<= 1e9" in err, err


@pytest.mark.parametrize("argv", [["--tp", "x" + "9" * 5000], ["--micro-batch-size", "9" * 5000 + "x"]])
def test_argparse_and_flag_conflict_lines_are_clipped(argv):
    """argparse's own refusals (an unknown flag, a value of the wrong type) printed a 5,000-character value
    whole: now one line with the value's head and its length, as every other error line."""
    rc, out, err, _ = run_cli(["--project", "recipes/megatron/llama3.1_8b.sh", "--dry-run", *argv], ROOT)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("primus-launch: error: "), err[:300]
    assert len(lines[0]) < 560 and "characters)" in lines[0]


@pytest.mark.parametrize("count", ["0", "9" * 5000])
def test_torchtitan_header_counts_are_bounded(count):
    """``preset for 0 H100 GPUs`` was refused as ``num_nodes=0`` (no header named); 5,000 digits were an
    internal error (int() past Python's digit limit)."""
    from primus_launch.adapters.torchtitan import cluster_from_header
    from primus_launch.errors import one_line
    from primus_launch.plan import PlanError

    with pytest.raises(PlanError) as e:
        cluster_from_header(f"# NOTE: this toml config is a preset for {count} H100 GPUs.\n")
    assert one_line(e.value).startswith("header comment=") and "counts from 1 to 9,999,999" in one_line(e.value)


def test_a_cut_field_of_5000_digits_is_not_read(tmp_path):
    """``$(echo 2 3 | cut -d' ' -f 9...9)``: int() of 5,000 digits raised (exit 70); GNU cut refuses an offset
    that large, and the value is then the command substitution's, refused by name."""
    (tmp_path / "r.sh").write_text(BASH.replace("TP_SIZE=2", "TP_SIZE=$(echo 2 3 | cut -d' ' -f " + "9" * 5000 + ")"))
    refused(["--project", "r.sh", "--dry-run", "--json"], tmp_path, "--tensor-model-parallel-size=",
            "command substitution")


@pytest.mark.parametrize("out", [".", "./", "/", "x/..", "r.sh/."])
def test_an_out_spelled_as_a_folder_is_refused_before_its_name_is_used(tmp_path, out):
    """``--out .`` was an internal error (``Path('.').with_name``: no name to add .trials.json to); ``x/..``
    of a missing x passed the checks, the search ran, and the write failed with 'Device or resource busy'."""
    (tmp_path / "r.sh").write_text(BASH)
    refused(["--tune", "r.sh", "--dry-run", "--out", out], tmp_path, f"--out={out!r}", "not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sh"]
