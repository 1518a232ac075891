"""Property (issue 29): any mutation of a bundled recipe -- a value, a type, bytes, the structure
-- ends as ``exit 0`` with finite figures or ``exit 2`` with one ``primus-launch: error:`` line; never
a traceback, never longer than 10 s, never a changed input.  Runs the CLI's ``main`` in-process
(argv in, stdout / stderr captured) on a copy of ``recipes/`` whose one mutated file is restored
after each example.  Also: the input boundary's refusals by kind, and outputs that name an input."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(str(p.relative_to(ROOT / "recipes")) for p in (ROOT / "recipes").rglob("*")
                 if p.is_file() and p.suffix in (".sh", ".yaml", ".toml"))
_NUM = re.compile(rb"(?<![\w.$-])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])")
BAD_WORDS = [b"0", b"-1", b"1.5", b"1000000000", b"1" + b"0" * 30, b"1e30", b"-1e30", b"nan", b"inf", b".inf",
             b"abc", b"", b"1" * 60, b"0x10", b"1_000"]
TYPES = [b"[1, 2]", b"{a: 1}", b"{a = 1}", b'"32"', b"true", b"null", b"[]", b"{}", b"- 1"]


def assert_outcome(rc: int, out: str, err: str, secs: float, what: str) -> None:
    assert "Traceback" not in err, (what, err[-2000:])
    # a hang guard, not a speed check: a dry-run takes well under a second; a loop that never ends
    # (the bash arithmetic and array bombs this file feeds in) runs past any bound
    assert secs < 60.0, f"{what}: {secs:.1f} s"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if rc == 0:
        bad: list[str] = []
        d = json.loads(out, parse_constant=lambda c: bad.append(c) or 0.0)
        assert not bad, f"{what}: non-finite figures {bad}"
        for k in ("iteration_time_s", "tokens_per_sec_per_gpu", "mfu"):
            assert math.isfinite(d[k]) and d[k] > 0, (what, k, d[k])
    else:
        assert rc == 2, (what, rc, lines[-3:])
        errors = [ln for ln in lines if ln.startswith("primus-launch: error:")]
        assert len(errors) == 1 and lines[-1] == errors[0], (what, lines[-3:])


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("recipes")
    shutil.copytree(ROOT / "recipes", d, dirs_exist_ok=True)
    return d


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*") if p.is_file()}


@st.composite
def mutation(draw, data: bytes) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["value", "type", "bytes", "structure"]))
    spans = [m.span() for m in _NUM.finditer(data)]
    if kind in ("value", "type") and spans:
        s, e = draw(st.sampled_from(spans))
        if kind == "value":
            new = draw(st.one_of(st.sampled_from(BAD_WORDS), st.integers(-10, 10**12).map(lambda i: str(i).encode()),
                                 st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).encode())))
        else:
            new = draw(st.sampled_from(TYPES))
        return f"{kind}@{s}:{data[s:e]!r}->{new[:20]!r}", data[:s] + new + data[e:]
    if kind in ("value", "type", "bytes"):
        b = bytearray(data)
        how = draw(st.sampled_from(["flip", "insert", "truncate"]))
        if how == "flip":
            for _ in range(draw(st.integers(1, 6))):
                i = draw(st.integers(0, len(b) - 1))
                b[i] ^= 1 << draw(st.integers(0, 7))
        elif how == "insert":
            i = draw(st.integers(0, len(b)))
            b[i:i] = draw(st.binary(min_size=1, max_size=8))
        else:
            del b[draw(st.integers(0, len(b))):]
        return f"bytes:{how}", bytes(b)
    lines = data.split(b"\n")
    how = draw(st.sampled_from(["delete", "duplicate", "swap", "indent", "dedent"]))
    i = draw(st.integers(0, len(lines) - 1))
    if how == "delete":
        del lines[i]
    elif how == "duplicate":
        lines.insert(i, lines[i])
    elif how == "swap":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif how == "indent":
        lines[i] = b"    " + lines[i]
    else:
        lines[i] = lines[i].lstrip()
    return f"structure:{how}@{i}", b"\n".join(lines)


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_recipes_end_in_a_result_or_one_error_line(tree, data):
    rel = data.draw(st.sampled_from(RECIPES), label="recipe")
    path = tree / rel
    original = path.read_bytes()
    tag, mutated = data.draw(mutation(original), label="mutation")
    path.write_bytes(mutated)
    before = _snapshot(tree)
    try:
        rc, out, err, secs = run_cli(["--project", str(path), "--dry-run", "--json"], tree)
        assert_outcome(rc, out, err, secs, f"{rel} {tag}")
        assert _snapshot(tree) == before, f"{rel} {tag}: an input changed"
    finally:
        path.write_bytes(original)


# ----- the boundary's refusals, one per kind ----------------------------------------------------

RECIPE = ROOT / "recipes" / "megatron" / "llama3.1_8b.sh"


@pytest.mark.parametrize("name,content,words", [
    ("r.sh", b"X=1\n\xff\xfe\n", "not UTF-8 text (byte 0xff at line 2, column 1)"),
    ("r.yaml", "num_layers: 2\n".encode("utf-16"), "UTF-16"),
    ("r.toml", "a = 1\n".encode("utf-16-le"), "UTF-16"),
    ("r.sh", b"\x7fELF\x02\x01\x01\x00" + bytes(64), "a binary file"),
    ("r.sh", b"#" * (256 * 1024 + 1), "at most 262,144 bytes"),
    ("r.yaml", b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", "not valid YAML"),
    ("r.yaml", b"a: " + b"[" * 100 + b"]" * 100 + b"\n", "nested deeper than 64 levels"),
    ("r.toml", b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested deeper than 64 levels"),
    ("r.yaml", b"a0: &a0 [1,1,1,1,1,1,1,1,1,1]\n" + b"".join(
        f"a{i}: &a{i} [{', '.join(['*a%d' % (i - 1)] * 10)}]\n".encode() for i in range(1, 8)), "more than 200,000 values"),
    ("w.primus.toml", b"[recipe]\npath = 42\n", "recipe.path=42: a string"),
    ("w.primus.toml", b"recipe = 3\n", "recipe=3: a table"),
    ("w.primus.toml", b'[recipe]\npath = "r.sh"\n[cluster]\nnodes = "two"\n', "cluster.nodes='two': an integer"),
])
def test_boundary_refusals(tmp_path, name, content, words):
    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    (tmp_path / name).write_bytes(content)
    rc, out, err, secs = run_cli(["--project", name, "--dry-run", "--json"], tmp_path)
    assert_outcome(rc, out, err, secs, name)
    assert rc == 2 and words in err, err


@pytest.mark.parametrize("content,words", [
    (b"gpu = [1, 2]\n", "--gpu-file gpu=<a list>"),
    (b"[gpu.x]\npeak_flops_bf16 = nan\n", "Input should be a finite number"),
    (b"[gpu.h100-sxm]\nhbm_bw = 1e30\n", "gpu.h100-sxm.hbm_bw=1e+30: between"),
    (b"[gpu.h100-sxm]\nhbm_bytes = 0.5\n", "gpu.h100-sxm.hbm_bytes=0.5: between"),
])
def test_gpu_file_refusals(tmp_path, content, words):
    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    (tmp_path / "g.toml").write_bytes(content)
    from primus_launch.projection.hardware import gpus

    db = dict(gpus._DB)
    try:
        rc, out, err, secs = run_cli(["--project", "r.sh", "--dry-run", "--json", "--gpu-file", "g.toml"], tmp_path)
    finally:
        gpus._DB.clear()
        gpus._DB.update(db)
    assert_outcome(rc, out, err, secs, "gpu-file")
    assert rc == 2 and words in err, err


@pytest.mark.parametrize("argv,words", [
    (["--power-limit-w", "nan"], "argument --power-limit-w: 'nan'"),
    (["--nodes", "1" + "0" * 30], "argument --nodes"),
    (["--memory-margin", "inf"], "argument --memory-margin"),
])
def test_non_finite_and_huge_flags_are_refused(tmp_path, argv, words):
    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    rc, out, err, secs = run_cli(["--project", "r.sh", "--dry-run", "--json", *argv], tmp_path)
    assert_outcome(rc, out, err, secs, " ".join(argv))
    assert rc == 2 and words in err, err


@pytest.mark.parametrize("field,value", [("num_layers", 10**9), ("global_batch_size", 10**30),
                                         ("seq_length", 10**12), ("num_nodes", 10**9)])
def test_plan_bounds_are_named_before_any_allocation(field, value):
    """A count far beyond any run is refused by name when the plan is built (no layout of 10^9
    layers, no schedule of 10^30 micro-batches)."""
    from primus_launch.adapters import load_recipe
    from primus_launch.errors import one_line
    from primus_launch.plan.sections import LIMITS

    plan = load_recipe(RECIPE)
    section = {"num_layers": "model", "seq_length": "model", "global_batch_size": "training"}.get(field, "cluster")
    import tracemalloc

    tracemalloc.start()  # what is allocated, not how long it takes: no assertion on the machine's speed
    try:
        with pytest.raises(Exception) as e:
            plan.with_changes(**{section: {field: value}})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak  # a layout of 10^9 layers / 10^30 micro-batches would take gigabytes
    msg = one_line(e.value)
    assert f"{section}.{field}={value}" in msg and f"at most {LIMITS[f'{section}.{field}']:,}" in msg, msg


@pytest.mark.parametrize("flag", ["--report", "--trace"])
@pytest.mark.parametrize("victim", ["w.primus.toml", "r.sh", "frag.sh", "hard.sh", "link.sh"])
def test_an_output_naming_an_input_is_refused_before_work(tmp_path, flag, victim):
    """The recipe, the wrapper, a sourced fragment, a hard link and a symbolic link to the recipe."""
    text = RECIPE.read_bytes().replace(b"# Parallelism and batch\n", b"source ./frag.sh\n# Parallelism and batch\n")
    (tmp_path / "r.sh").write_bytes(text)
    (tmp_path / "frag.sh").write_bytes(b"TP_SIZE=2\n")
    (tmp_path / "w.primus.toml").write_bytes(b'[recipe]\npath = "r.sh"\n')
    os.link(tmp_path / "r.sh", tmp_path / "hard.sh")
    os.symlink("r.sh", tmp_path / "link.sh")
    before = _snapshot(tmp_path)
    rc, out, err, secs = run_cli(["--project", "w.primus.toml", "--dry-run", "--json", flag, victim], tmp_path)
    assert_outcome(rc, out, err, secs, victim)
    assert rc == 2 and "is an input of this run" in err and out == "", err
    assert _snapshot(tmp_path) == before


def test_outputs_are_atomic_and_follow_the_umask(tmp_path):
    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    old = os.umask(0o022)
    try:
        rc, out, err, secs = run_cli(["--project", "r.sh", "--dry-run", "--json", "--report", "p.html",
                                      "--trace", "p.json"], tmp_path)
    finally:
        os.umask(old)
    assert rc == 0, err
    for name in ("p.html", "p.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.html", "p.json", "r.sh"]


# ----- outputs of a sensible size -----------------------------------------------------------------

def test_tune_outputs_stay_small_for_a_large_search(tmp_path):
    """A search of 60,000 candidates (a real tune's trials, repeated with their figures spread, as
    an exhaustive sweep of the 8B recipe records them): the report stays under 2 MB and draws at
    most 1,500 candidates, saying so; the trial log holds every trial as columns in a few MB."""
    import random

    from primus_launch.adapters import load_recipe
    from primus_launch.report.charts import SCATTER_MAX_POINTS
    from primus_launch.report.html import write_tune_report
    from primus_launch.tuner.result import log_text
    from primus_launch.tuner.search import tune

    plan = load_recipe(RECIPE)
    res = tune(plan, budget=25, exhaustive=False)
    rng = random.Random(29)
    real = [t for t in res.trials]
    trials = []
    for i in range(60_000):
        t = real[i % len(real)]
        f = 1 + 0.2 * (rng.random() - 0.5)
        upd = {"index": i, "source": "exhaustive"}
        if t.status == "scored":
            upd.update(iteration_time_s=t.iteration_time_s * f, tokens_per_sec_per_gpu=t.tokens_per_sec_per_gpu / f,
                       peak_memory_bytes=int(t.peak_memory_bytes * (2 - f)))
        trials.append(t.model_copy(update=upd))
    big = res.model_copy(update={"trials": trials})
    report = write_tune_report(big, tmp_path / "tune.html")
    html = report.read_text()
    assert report.stat().st_size < 2_000_000, report.stat().st_size
    n_scored = sum(t.status == "scored" for t in trials)
    assert f"{SCATTER_MAX_POINTS:,} of {n_scored:,} scored candidates" in html
    assert html.count("<circle") <= SCATTER_MAX_POINTS
    log = log_text(big.to_log_dict(plan))
    assert len(log) < 6_000_000, len(log)
    d = json.loads(log)
    assert d["trials"]["count"] == 60_000 and len(d["trials"]["columns"]["iteration_time_s"]) == 60_000
    assert all(len(col["codes"] if isinstance(col, dict) else col) == 60_000 for col in d["trials"]["knobs"].values())
    assert len(d["top"]) == len(res.top)  # the top trials in full


# ----- special files: what the reader must never open, and names an atomic write must not replace -----

def _special(tmp_path: Path, name: str, kind: str) -> None:
    p = tmp_path / name
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "loop":
        os.symlink(name + ".b", p)
        os.symlink(name, tmp_path / (name + ".b"))
    elif kind == "dangling":
        os.symlink("nowhere.sh", p)
    elif kind == "device":
        os.symlink("/dev/zero", p)


SPECIAL_WORDS = {"fifo": "a named pipe; expected a regular file", "loop": "a loop of symbolic links",
                 "dangling": "a symbolic link to 'nowhere.sh', which does not exist",
                 "device": "a character device; expected a regular file"}


@pytest.mark.parametrize("kind", sorted(SPECIAL_WORDS))
@pytest.mark.parametrize("role", ["recipe", "gpu-file", "wrapper-target"])
def test_special_files_are_named_not_opened(tmp_path, kind, role):
    """Regression: a named pipe, a device, a loop of links were all "no such file", and a wrapper
    whose recipe.path was a link loop ended in RuntimeError (exit 70).  A named pipe is never
    opened (it would block), a device never read (/dev/zero is endless)."""
    argv = {"recipe": ["--project", "r.sh"], "gpu-file": ["--project", "ok.sh", "--gpu-file", "r.sh"],
            "wrapper-target": ["--project", "w.primus.toml"]}[role]
    (tmp_path / "ok.sh").write_bytes(RECIPE.read_bytes())
    (tmp_path / "w.primus.toml").write_bytes(b'[recipe]\npath = "r.sh"\n')
    _special(tmp_path, "r.sh", kind)
    rc, out, err, secs = run_cli(argv + ["--dry-run", "--json"], tmp_path)
    assert_outcome(rc, out, err, secs, f"{role} {kind}")
    assert rc == 2 and (SPECIAL_WORDS[kind] in err or role == "wrapper-target" and "no such file" in err), err


@pytest.mark.parametrize("content,words", [
    (b'[recipe]\npath = "r.sh\\u0000"\n', "recipe.path='r.sh\\x00': a file name; a file name holds no NUL character"),
    (b'[recipe]\npath = "r.sh"\n[cluster]\nnodes = 2\nnum_nodes = 3\n', "cluster.num_nodes=3: the node count is "
                                                                       "already given"),
    (b'[recipe]\npath = "r.sh"\nframework = "torchtitan"\n', "recipe.framework='torchtitan': r.sh is a megatron "
                                                             "recipe"),
])
def test_wrapper_refusals(tmp_path, content, words):
    """Regression: a NUL in recipe.path was ValueError (exit 70); nodes and num_nodes together took
    the last silently; a framework the wrapper insists on was not checked against the recipe."""
    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    (tmp_path / "w.primus.toml").write_bytes(content)
    rc, out, err, secs = run_cli(["--project", "w.primus.toml", "--dry-run", "--json"], tmp_path)
    assert_outcome(rc, out, err, secs, words)
    assert rc == 2 and words in err, err


@pytest.mark.parametrize("target,words", [("fifo", "a named pipe"), ("null", "a character device"),
                                          ("link-to-dev-null", "a character device"),
                                          ("x" * 300 + ".html", "not a usable output path: File name too long")])
def test_outputs_that_an_atomic_write_would_replace_are_refused(tmp_path, target, words):
    """Regression: ``--report /dev/null`` (as root) renamed a regular file over the device node, and a
    named pipe was replaced the same way; a name too long was an OSError line without the flag."""
    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/null", tmp_path / "link-to-dev-null")  # a broken check replaces the link, not /dev/null
    if target == "null":  # /dev/null's twin in the test's folder (never the system's own: as root a broken
        try:              # check would rename a file over it)
            os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod needs root")
    rc, out, err, secs = run_cli(["--project", "r.sh", "--dry-run", "--json", "--report", target], tmp_path)
    assert_outcome(rc, out, err, secs, target)
    shown = f"--report='{target}'" if len(target) < 200 else f"--report='{target[:50]}... (316 characters):"  # clipped
    assert rc == 2 and shown in err and words in err, err
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode) and os.path.islink(tmp_path / "link-to-dev-null")
    assert target != "null" or stat.S_ISCHR(os.lstat(tmp_path / "null").st_mode)


# ----- flags the chosen mode would not read: refused, never ignored silently -------------------------

@pytest.mark.parametrize("argv,words", [
    (["--dry-run", "--", "touch", "ran"], "--dry-run: only with --project or --tune (without them the command"),
    (["--emit", "slurm", "--", "touch", "ran"], "--emit=slurm: only with --project or --tune"),
    (["--gpu", "h100-sxm", "--", "touch", "ran"], "--gpu=h100-sxm: only with --project or --tune"),
    (["--project", "r.sh", "--dry-run", "--budget", "3"], "--budget=3: only with --tune"),
    (["--project", "r.sh", "--dry-run", "--out", "x.sh"], "--out=x.sh: only with --tune"),
    (["--project", "r.sh", "--dry-run", "--top", "3"], "--top=3: only with --tune"),
    (["--project", "r.sh", "--dry-run", "--exhaustive"], "--exhaustive/--planner: only with --tune"),
    (["--project", "r.sh", "--dry-run", "--force"], "--force: only with --launch"),
    (["--project", "r.sh", "--dry-run", "--measure-device", "cpu"], "--measure-device=cpu: not with --dry-run"),
    (["--tune", "r.sh", "--dry-run", "--budget", "1", "--exhaustive"], "--budget=1: not with --exhaustive"),
    (["--tune", "r.sh", "--dry-run", "--max-work", "5", "--planner"], "--max-work=5: bounds the default branch"),
    (["--tune", "r.sh", "--dry-run", "--max-work", "5", "--budget", "9"], "which --budget=9 replaces"),
    (["--tune", "r.sh", "--max-work", "5"], "which a measured search (no --dry-run) replaces"),
    (["--tune", "r.sh", "--workers", "2"], "--workers=2: only with --dry-run"),
    (["--tune", "--dry-run", "--out", "x.sh", "--", "bash", "r.sh"], "--out=x.sh: only with --tune RECIPE"),
    (["--project", "r.sh", "--dry-run", "--json", "--explain"], "--explain: not with --json"),  # JSON printed, explain dropped
    (["--tune", "r.sh", "--dry-run", "--explain"], "--explain: only with --project"),  # tuned, nothing explained
])
def test_flags_the_mode_would_not_read_are_refused(tmp_path, argv, words):
    """Regression: each of these ran with the flag ignored -- ``--dry-run -- CMD`` even ran the
    command for real, ``--budget 1 --exhaustive`` scored all 52,088 candidates (a minute)."""
    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    rc, out, err, secs = run_cli(argv, tmp_path)
    assert_outcome(rc, out, err, secs, " ".join(argv))
    assert rc == 2 and words in err and secs < 2.0, err
    assert not (tmp_path / "ran").exists()


def test_tune_writes_the_best_plans_trace(tmp_path):
    """Regression: ``--tune --trace`` was accepted and wrote nothing; the trace is the best plan's
    timeline (the report's), checked as an output like the others; a --time-limit the branch and bound
    does not read is said on stderr."""
    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    rc, out, err, secs = run_cli(["--tune", "r.sh", "--dry-run", "--json", "--out", "t.sh", "--trace", "t.json",
                                  "--time-limit", "5"], tmp_path)
    assert rc == 0, err
    d = json.loads(out)
    assert str(tmp_path / "t.json") in {str(tmp_path / k) for k in d["files"]}
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)
    assert "--time-limit=5: not applied" in err
    rc, out, err, secs = run_cli(["--tune", "r.sh", "--dry-run", "--json", "--trace", "r.sh"], tmp_path)
    assert rc == 2 and "--trace='r.sh': is an input of this run" in err, err


# ----- the plan's fields at their boundaries, through the projection --------------------------------

_SIZES = st.sampled_from([1, 2, 3, 4, 7, 8, 64, 1000, 4096, 2**20])
_PLAN_FIELDS = {
    ("model", "num_layers"): _SIZES, ("model", "hidden_size"): _SIZES, ("model", "ffn_hidden_size"): _SIZES,
    ("model", "num_attention_heads"): _SIZES, ("model", "num_query_groups"): st.one_of(st.none(), _SIZES),
    ("model", "head_dim"): st.one_of(st.none(), _SIZES), ("model", "vocab_size"): st.sampled_from([1, 2, 2**24]),
    ("model", "seq_length"): st.sampled_from([1, 2, 3, 4096, 2**24]), ("model", "num_experts"): st.one_of(st.none(), _SIZES),
    ("model", "moe_router_topk"): _SIZES, ("model", "moe_dense_first_layers"): st.sampled_from([0, 1, 100]),
    ("model", "mtp_num_layers"): st.sampled_from([0, 1, 2]), ("model", "multi_latent_attention"): st.booleans(),
    ("model", "make_vocab_size_divisible_by"): st.sampled_from([1, 3, 2**16]),
    ("parallel", "tp"): _SIZES, ("parallel", "pp"): _SIZES, ("parallel", "vpp"): _SIZES, ("parallel", "cp"): _SIZES,
    ("parallel", "ep"): _SIZES, ("parallel", "etp"): st.one_of(st.none(), _SIZES),
    ("parallel", "sequence_parallel"): st.booleans(), ("parallel", "dp_replicate"): _SIZES,
    ("parallel", "dp_sharding"): st.sampled_from(["none", "optimizer", "optimizer_grads", "full"]),
    ("parallel", "pipeline_layers_first_stage"): st.one_of(st.none(), st.sampled_from([0, 1, 100])),
    ("parallel", "pipeline_layout"): st.one_of(st.none(), st.sampled_from(["Et|tL", "", "x", "E|(tt|)*2L"])),
    ("training", "global_batch_size"): _SIZES, ("training", "micro_batch_size"): _SIZES,
    ("training", "precision"): st.sampled_from(["bf16", "fp16", "fp8", "fp4", "fp32"]),
    ("training", "pipeline_schedule"): st.sampled_from(["1f1b", "interleaved_1f1b", "zb_h1", "zbv", "gpipe"]),
    ("training", "moe_token_dispatcher"): st.sampled_from(["alltoall", "allgather", "deepep", "hybridep"]),
    ("training", "recompute"): st.fixed_dictionaries({
        "granularity": st.sampled_from(["none", "selective", "full", "op"]),
        "method": st.sampled_from(["uniform", "block", "every_n", "layer_ids"]),
        "num_layers": st.one_of(st.none(), st.sampled_from([0, 1, 7, 1000])),
        "layer_ids": st.sampled_from([(), (0, 1), (5, 3), (99999,), (-1,)])}),
    ("cluster", "num_nodes"): st.sampled_from([1, 3, 1024, 100_000]),
    ("cluster", "gpus_per_node"): st.sampled_from([1, 3, 8, 72]),
    ("cluster", "gpu"): st.sampled_from(["h100-sxm", "a100-sxm-40gb", "mi300x", "gb200"]),
    ("cluster", "power_limit_w"): st.one_of(st.none(), st.sampled_from([1.0, 5000.0])),
}


@pytest.fixture(scope="module")
def base_plans() -> dict:
    from primus_launch.adapters import load_recipe

    return {n: load_recipe(ROOT / "recipes" / n).model_dump()
            for n in ("megatron/llama3.1_8b.sh", "torchtitan/llama3.1_8b.toml", "megatron/qwen3_235b_a22b.sh",
                      "megatron/deepseek_v3_671b.sh")}


@settings(max_examples=120, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_plan_fields_at_their_boundaries_end_in_a_projection_or_one_line(base_plans, data):
    """0-ish / 1 / huge sizes, topk above the experts, EP not dividing them, GBS not a multiple of MBS x DP,
    TP not dividing the heads, PP above the layers, ...: a :class:`PlanError` / validation error of one
    line, or a projection whose every figure is finite (time, throughput and MFU positive).  Found: a
    hidden size not a multiple of the heads (no head_dim) gave head_dim 0 and ZeroDivisionError."""
    from pydantic import ValidationError

    from primus_launch.errors import UserError, one_line
    from primus_launch.plan import Plan, PlanError
    from primus_launch.projection.api import project

    d = json.loads(json.dumps(base_plans[data.draw(st.sampled_from(sorted(base_plans)), label="base")]))
    for sec, key in data.draw(st.lists(st.sampled_from(sorted(_PLAN_FIELDS)), min_size=1, max_size=6, unique=True),
                              label="fields"):
        d[sec][key] = data.draw(_PLAN_FIELDS[(sec, key)], label=f"{sec}.{key}")
    try:
        j = project(Plan.model_validate(d), dry_run=True).to_json_dict()
    except (PlanError, ValidationError, UserError) as e:
        line = one_line(e)
        assert line and "\n" not in line
        return
    bad: list[str] = []
    json.loads(json.dumps(j), parse_constant=lambda c: bad.append(c))
    assert not bad, bad
    assert j["iteration_time_s"] > 0 and j["tokens_per_sec_per_gpu"] > 0 and 0 < j["mfu"] < 1.5, j["mfu"]


def test_hidden_size_must_be_a_multiple_of_the_heads_without_head_dim(base_plans):
    from pydantic import ValidationError

    from primus_launch.errors import one_line
    from primus_launch.plan import Plan

    d = json.loads(json.dumps(base_plans["megatron/llama3.1_8b.sh"]))
    for upd, words in (({"hidden_size": 4100, "head_dim": None}, "model.hidden_size=4100: a multiple of "
                                                                  "num_attention_heads=32"),
                       ({"hidden_size": 4096, "num_query_groups": 12}, "model.num_query_groups=12: must divide "
                                                                       "num_attention_heads=32")):
        d["model"].update(upd)
        with pytest.raises(ValidationError) as e:
            Plan.model_validate(d)
        assert words in one_line(e.value)
    d["model"].update(num_query_groups=8, head_dim=100, hidden_size=4100)  # kv_channels given: Megatron takes it
    assert Plan.model_validate(d).model.kv_channels == 100


@pytest.mark.parametrize("argv,words", [
    (["--project", "r.sh", "--dry-run", "--gpu", "h100-sxm", "--gpu", "b200"], "--gpu=b200: given twice (first h100-sxm)"),
    (["--project", "r.sh", "--project", "other.sh", "--dry-run"], "--project=other.sh: given twice (first r.sh)"),
    (["--project", "r.sh", "--dry-run", "--nodes", "2", "--nodes=4"], "--nodes=4: given twice (first 2)"),
])
def test_a_flag_given_twice_is_refused(tmp_path, argv, words):
    """Regression: argparse kept the last value silently (``--gpu h100-sxm ... --gpu b200`` projected
    on the B200)."""
    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    rc, out, err, secs = run_cli(argv, tmp_path)
    assert_outcome(rc, out, err, secs, " ".join(argv))
    assert rc == 2 and words in err, err


def test_a_reader_that_leaves_ends_the_run_quietly(tmp_path):
    """Regression: ``primus-launch ... --json | head -c 10`` ended with ``error: [Errno 32] Broken pipe``
    and exit 2 (a user error); it ends as a shell tool does: no line, exit 141 (128 + SIGPIPE)."""
    import signal
    import subprocess
    import sys

    (tmp_path / "r.sh").write_bytes(RECIPE.read_bytes())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "primus_launch", "--project", "r.sh", "--dry-run", "--json"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before the first byte
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 128 + signal.SIGPIPE, err
    assert "error" not in err and "Traceback" not in err and "Exception ignored" not in err, err
