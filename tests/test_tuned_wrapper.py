"""A tune through a wrapper TOML writes a tuned wrapper beside the tuned recipe: a Primus experiment states
no node count, so the tuned YAML alone read back on its default cluster (1 x 8) projected 13.8 s where the
tune, on the wrapper's 2 x 8 MI355X, stated 6.9 s.  Truth: the tune's own best plan, projected again from
the written files; the inputs stay unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from primus_launch.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_tuned_wrapper_keeps_the_cluster(tmp_path, capsys):
    shutil.copy(ROOT / "recipes/llama3.1_8b_mi355x.primus.toml", tmp_path / "w.primus.toml")
    (tmp_path / "primus/MI355X").mkdir(parents=True)
    shutil.copy(ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml", tmp_path / "primus/MI355X/llama3.1_8b.yaml")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(["--tune", str(tmp_path / "w.primus.toml"), "--dry-run", "--json"]) == 0
    tuned = json.loads(capsys.readouterr().out)
    assert all(p.read_bytes() == b for p, b in before.items())          # never over an input
    wrapper = Path(tuned["tuned_wrapper"])
    assert wrapper == tmp_path / "w.primus.tuned.toml" and str(wrapper) in tuned["files"]
    assert "# primus-launch wrapper" in wrapper.read_text()             # comments kept
    assert main(["--project", str(wrapper), "--dry-run", "--json"]) == 0
    back = json.loads(capsys.readouterr().out)
    best = tuned["best"]
    assert back["num_gpus"] == 16 and back["plan"]["cluster"]["gpu"] == "mi355x"
    assert back["iteration_time_s"] == best["iteration_time_s"]
    assert back["plan"]["source"]["path"] == tuned["tuned_recipe"]
    # --out elsewhere: the wrapper beside it, its paths re-based
    out = tmp_path / "elsewhere" / "t.yaml"
    out.parent.mkdir()
    assert main(["--tune", str(tmp_path / "w.primus.toml"), "--dry-run", "--json", "--out", str(out)]) == 0
    moved = json.loads(capsys.readouterr().out)
    assert moved["tuned_wrapper"] == str(out.parent / "t.primus.toml")
    assert main(["--project", moved["tuned_wrapper"], "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iteration_time_s"] == best["iteration_time_s"]


def test_out_naming_a_wrapper_writes_the_wrapper_there(tmp_path, capsys):
    """``--tune w.primus.toml --out t.primus.toml`` names the tuned wrapper (the recipe the user tuned is a
    wrapper): it was refused as "give a path ending in .yaml"; the tuned native recipe is ``t.yaml`` beside
    it, and an --out naming the input wrapper itself is refused by the same flag."""
    shutil.copy(ROOT / "recipes/llama3.1_8b_mi355x.primus.toml", tmp_path / "w.primus.toml")
    (tmp_path / "primus/MI355X").mkdir(parents=True)
    shutil.copy(ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml", tmp_path / "primus/MI355X/llama3.1_8b.yaml")
    out = tmp_path / "out" / "t.primus.toml"
    out.parent.mkdir()
    assert main(["--tune", str(tmp_path / "w.primus.toml"), "--dry-run", "--json", "--out", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["tuned_wrapper"] == str(out) and res["tuned_recipe"] == str(out.parent / "t.yaml")
    assert main(["--project", str(out), "--dry-run", "--json"]) == 0
    back = json.loads(capsys.readouterr().out)
    assert back["iteration_time_s"] == res["best"]["iteration_time_s"]
    before = (tmp_path / "w.primus.toml").read_bytes()
    assert main(["--tune", str(tmp_path / "w.primus.toml"), "--dry-run", "--out", str(tmp_path / "w.primus.toml")]) == 2
    assert "--out=" in capsys.readouterr().err and (tmp_path / "w.primus.toml").read_bytes() == before


def test_wrapper_tune_does_not_replace_the_recipes_own_tune(tmp_path, capsys):
    """A tune through a wrapper writes its tuned native recipe named after the wrapper (``w.tuned.yaml``
    beside the recipe): it was ``llama3.1_8b.tuned.yaml``, the name a tune of the recipe alone on its own
    cluster writes, so tuning the 2-node wrapper silently replaced the 1-node tune (and the 1,024-GPU 70B
    wrapper the 64-GPU script's)."""
    from primus_launch.adapters.primus_toml import tuned_recipe_path

    shutil.copy(ROOT / "recipes/llama3.1_8b_mi355x.primus.toml", tmp_path / "w.primus.toml")
    (tmp_path / "primus/MI355X").mkdir(parents=True)
    native = tmp_path / "primus/MI355X/llama3.1_8b.yaml"
    shutil.copy(ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml", native)
    assert main(["--tune", str(native), "--dry-run", "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert alone["tuned_recipe"] == str(native.with_name("llama3.1_8b.tuned.yaml"))
    own = Path(alone["tuned_recipe"]).read_bytes()
    assert main(["--tune", str(tmp_path / "w.primus.toml"), "--dry-run", "--json"]) == 0
    wrapped = json.loads(capsys.readouterr().out)
    assert wrapped["tuned_recipe"] == str(native.with_name("w.tuned.yaml"))
    assert Path(alone["tuned_recipe"]).read_bytes() == own
    assert tuned_recipe_path(Path("a/llama.primus.toml"), Path("a/m/llama.sh")) == Path("a/m/llama.primus.tuned.sh")
