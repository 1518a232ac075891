"""The CLI contract of issue 2: --json keys, overrides, and one-line errors with exit 2.

The exit statuses (errors, the passthrough) and ``--gpu-file`` (a spec swapped under a GPU's name, which the
cost functions cache by name) are read from a ``python -m primus_launch`` process; the answers of runs that
succeed from the CLI's ``main`` in this process (``in_process``: the same argv, stdout and stderr; a fresh
interpreter per answer would only repeat the imports)."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "primus_launch", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def in_process(*args, cwd=ROOT):
    """:func:`cli`'s answer from ``primus_launch.cli.main`` in this process (``tests/cli_run.py``)."""
    rc, out, err, _ = run_cli([str(a) for a in args], cwd)
    return SimpleNamespace(returncode=rc, stdout=out, stderr=err)


def one_error_line(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("primus-launch: error: ")
    return lines[0]


def test_json_contract_on_wrapper_recipe():
    p = in_process("--project", RECIPES / "llama3.1_70b_h100_1024gpu.primus.toml", "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)  # exactly one JSON object on stdout
    for k in ("iteration_time_s", "tokens_per_sec_per_gpu", "model_tflops_per_gpu", "mfu", "num_gpus", "memory", "plan"):
        assert k in d
    assert d["num_gpus"] == 1024 and d["plan"]["cluster"]["num_nodes"] == 128
    assert isinstance(d["memory"]["fits"], bool) and d["memory"]["peak_bytes_per_gpu"] > 0
    assert set(d["memory"]["breakdown"]) >= {"parameters", "gradients", "optimizer", "activations"}
    # internal consistency of the reported figures
    toks = d["plan"]["training"]["global_batch_size"] * d["plan"]["model"]["seq_length"]
    assert d["tokens_per_sec_per_gpu"] == pytest.approx(toks / d["iteration_time_s"] / 1024, rel=1e-6)
    assert 0 < d["mfu"] < 1


def test_cli_flags_override_recipe_cluster():
    p = in_process("--project", RECIPES / "megatron" / "llama3.1_8b.sh", "--dry-run", "--json",
            "--gpu", "mi300x", "--nodes", "2", "--gpus-per-node", "8")
    assert p.returncode == 0, p.stderr
    c = json.loads(p.stdout)["plan"]["cluster"]
    assert c == {"gpu": "mi300x", "num_nodes": 2, "gpus_per_node": 8, "nvlink_domain": None, "power_limit_w": None}


def test_text_table():
    p = in_process("--project", RECIPES / "torchtitan" / "llama3.1_8b.toml", "--dry-run")
    assert p.returncode == 0, p.stderr
    for word in ("iteration time", "tokens/s/GPU", "MFU", "memory", "compute"):
        assert word in p.stdout
    full = in_process("--project", RECIPES / "torchtitan" / "llama3.1_8b.toml", "--dry-run", "--explain")
    assert full.returncode == 0 and "bubble" in full.stdout  # every time component, zero ones included


def test_missing_file():
    assert "no such file" in one_error_line(cli("--project", "nope.sh", "--dry-run"))


def test_malformed_toml(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\nname = 'llama3'\n")
    assert "TOML" in one_error_line(cli("--project", bad, "--dry-run"))


def test_unknown_gpu():
    line = one_error_line(cli("--project", RECIPES / "megatron" / "llama3.1_8b.sh", "--dry-run", "--gpu", "tpu-v9"))
    assert "cluster.gpu='tpu-v9'" in line and "h100-sxm" in line


def test_illegal_parallelism(tmp_path):
    src = (RECIPES / "megatron" / "llama3.1_8b.sh").read_text()
    import re

    bad = tmp_path / "bad.sh"
    bad.write_text(re.sub(r"--tensor-model-parallel-size\s+\S+", "--tensor-model-parallel-size 3", src, count=1))
    line = one_error_line(cli("--project", bad, "--dry-run"))
    assert "tp" in line and "3" in line


def test_unknown_wrapper_key(tmp_path):
    w = tmp_path / "w.primus.toml"
    w.write_text(f'[recipe]\npath = "{RECIPES / "megatron" / "llama3.1_8b.sh"}"\n[cluster]\ngpus = 8\n')
    assert "cluster.gpus" in one_error_line(cli("--project", w, "--dry-run"))


def test_passthrough_exit_code():
    p = cli("--", sys.executable, "-c", "import sys; print('hi'); sys.exit(3)")
    assert p.returncode == 3 and p.stdout.strip() == "hi"


def test_tune_refuses_to_write_over_the_recipe_before_searching(tmp_path):
    recipe = tmp_path / "r.sh"
    recipe.write_text((RECIPES / "megatron" / "llama3.1_8b.sh").read_text())
    before = recipe.read_text()
    line = one_error_line(cli("--tune", recipe, "--dry-run", "--out", recipe))
    assert "overwrite" in line
    assert recipe.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ["r.sh"]


def test_partial_cluster_override_rereads_torchtitan_semantics():
    """TorchTitan's global batch is local_batch_size x DP when the TOML leaves it at -1 (the
    default), so 6 GPUs of the 8B job (local batch 1) give a global batch of 6."""
    p = in_process("--project", RECIPES / "torchtitan" / "llama3.1_8b.toml", "--dry-run", "--json",
                   "--gpus-per-node", "6")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["num_gpus"] == 6 and d["plan"]["training"]["global_batch_size"] == 6


def test_tune_ends_with_a_certificate_in_text_json_and_log(tmp_path):
    """The default tune (branch and bound) says "best of all N legal plans (M scored, the rest bounded
    out)" in the text answer and carries the same certificate in --json and the trial log; a bad
    --max-work is one line, exit 2."""
    recipe = RECIPES / "megatron" / "tiny_gpt_cpu.sh"
    out = tmp_path / "t.sh"
    p = in_process("--tune", recipe, "--dry-run", "--out", out)
    assert p.returncode == 0, p.stderr
    said = " ".join(p.stdout.split())  # the text answer wraps at 80 columns
    assert "best of all" in said and "scored, the rest bounded out" in said
    log = json.loads(out.with_name(out.name + ".trials.json").read_text())
    c = log["certificate"]
    assert c["certified"] and c["scored"] + c["bounded_time"] + c["bounded_memory"] == c["plans"]
    assert c["text"].startswith(f"best of all {c['plans']:,} legal plans ({c['scored']:,} scored")
    p = in_process("--tune", recipe, "--dry-run", "--json", "--out", tmp_path / "u.sh")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["certificate"] == c
    assert "--max-work" in one_error_line(cli("--tune", recipe, "--dry-run", "--max-work", "0"))


def test_a_gpu_file_spec_is_noted_in_the_answer(tmp_path):
    """``--gpu-file`` overriding the plan's GPU (a 64 GiB H100) changed the figures without a word in the answer:
    "37.2 GiB peak of 64.0 GiB" under "128 x 8 h100-sxm" read as the database's H100.  The answer now notes whose
    spec it used; a GPU the file adds says so too.  Truth: the file's own hbm_bytes is the capacity printed."""
    gpus = tmp_path / "gpus.toml"
    gpus.write_text("[gpu.h100-sxm]\nhbm_bytes = 68719476736\n\n[gpu.lab-h100]\nvendor = 'nvidia'\narch = 'hopper'\n"
                    "peak_flops_bf16 = 756e12\nhbm_bytes = 85899345920\nhbm_bw = 2.0e12\nintra_node_bw = 64e9\n"
                    "intra_node_topology = 'switch'\ninter_node_bw = 25e9\n")
    wrapper = RECIPES / "llama3.1_70b_h100_1024gpu.primus.toml"
    p = cli("--project", wrapper, "--dry-run", "--gpu-file", gpus)
    text = " ".join(p.stdout.split())
    assert p.returncode == 0, p.stderr
    assert "GiB peak of 64.0 GiB" in text
    assert f"note: cluster gpu=h100-sxm: spec from --gpu-file {gpus} (over the database's entry)" in text
    p = cli("--project", wrapper, "--dry-run", "--gpu-file", gpus, "--gpu", "lab-h100", "--json")
    d = json.loads(p.stdout)
    assert d["memory"]["capacity_bytes"] == 85899345920
    assert f"cluster gpu=lab-h100: spec from --gpu-file {gpus} (added by it)" in d["plan"]["source"]["notes"]
    p = cli("--project", RECIPES / "torchtitan" / "llama3.1_8b.toml", "--dry-run", "--gpu-file", gpus, "--gpu", "h200")
    assert p.returncode == 0 and "--gpu-file" not in p.stdout  # another GPU: nothing to note
