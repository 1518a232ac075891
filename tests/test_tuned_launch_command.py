"""user18: a tuned recipe file that holds no training command (a Megatron-Bridge run config, a Megatron YAML) could
not be launched: ``--tune R.yaml --emit slurm`` said "give the command after --" after the whole search, and
``--tune R.yaml --emit slurm -- CMD`` was refused as the YAML's positional parameters.  Now the command after ``--``
runs with its word for the recipe pointed at the tuned file, and a command naming the recipe nowhere (it would run
the original) or a missing one is refused before the search, nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from primus_launch.cli import main
from primus_launch.launch.tuned_command import recipe_words, with_tuned_recipe

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/megatron/llama3.1_8b.yaml"


def test_words_naming_the_recipe_point_at_the_tuned_file(tmp_path, monkeypatch):
    cfg = tmp_path / "run_config.yaml"
    cfg.write_text("x: 1\n")
    tuned = tmp_path / "run_config.tuned.yaml"
    monkeypatch.chdir(tmp_path)
    cmd = ["torchrun", "run.py", "--config-file", "run_config.yaml", "--c2=./run_config.yaml", str(cfg),
           "run_config.yaml.bak", "--other=x.yaml"]
    assert recipe_words(cmd, cfg) == [3, 4, 5]
    assert with_tuned_recipe(cmd, cfg, tuned) == [
        "torchrun", "run.py", "--config-file", "run_config.tuned.yaml", "--c2=./run_config.tuned.yaml", str(tuned),
        "run_config.yaml.bak", "--other=x.yaml"]
    elsewhere = tmp_path / "out" / "t.yaml"
    assert with_tuned_recipe(["a", "run_config.yaml"], cfg, elsewhere) == ["a", str(elsewhere)]


def _tune(tmp_path, *extra: str) -> tuple[int, Path]:
    recipe = tmp_path / RECIPE.name
    shutil.copy(RECIPE, recipe)
    rc = main(["--tune", str(recipe), "--dry-run", "--max-work", "2000", *extra])
    return rc, recipe


def test_emit_runs_the_command_on_the_tuned_file(tmp_path, capsys):
    recipe = tmp_path / RECIPE.name
    rc, recipe = _tune(tmp_path, "--emit", "torchrun", "--", "python", "pretrain_gpt.py", "--yaml-cfg",
                       str(recipe))
    out = capsys.readouterr().out.strip().splitlines()
    tuned = recipe.with_name(recipe.stem + ".tuned.yaml")
    assert rc == 0 and tuned.is_file()
    assert out[-1].endswith(f"pretrain_gpt.py --yaml-cfg {tuned}"), out[-1]


@pytest.mark.parametrize("extra, says", [
    (("--emit", "slurm", "--", "python", "pretrain_gpt.py", "--yaml-cfg", "other.yaml"),
     "would run the original recipe, not the tuned one"),
    (("--emit", "slurm"), "is no launch script and holds no training command; give the command"),
    (("--launch",), "is no launch script; give the command that runs it after --"),
])
def test_refused_before_the_search(tmp_path, capsys, extra, says):
    rc, recipe = _tune(tmp_path, *extra)
    err = capsys.readouterr().err
    assert rc == 2 and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [recipe.name]  # nothing written: refused before the search
