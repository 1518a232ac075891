#!/usr/bin/env python
"""Run every tuned recipe through its framework's own start-up validation (CPU, fake process group).

For each recipe (the bundled ``recipes/`` and, with ``--upstream``, a sample of upstream recipes) the
recipe is copied into a work folder, tuned there with ``primus-launch --tune R --dry-run`` (budget
flags below), and the original and the tuned recipe are both checked at the plan's world size:

- Megatron-LM scripts / YAMLs and Primus Megatron experiments: Megatron-LM's own ``parse_args`` +
  ``validate_args``, the micro-batch calculator, the parallel state on a fake process group and the
  TransformerConfig (:mod:`primus_launch.frameworks.mlm_validate`), from the source tree ``--mlm``
  (the tag of the pinned megatron-core); a recipe whose original names flags that tree does not
  have (one written for Megatron-LM main/dev) is checked on ``--mlm-dev`` when given;
- TorchTitan 0.3 launch lines: the installed torchtitan's ``ConfigManager`` + ``ParallelDims`` + the
  device mesh + the model config (:mod:`primus_launch.frameworks.titan_validate`); v0.2 job TOMLs the
  same on the torchtitan source tree ``--torchtitan-v02`` (torchtitan 0.3 no longer reads TOML).

The launch checked is the one the adapter reads: a script's training command after the program
(argv) and the environment it exports; a YAML's arguments (destinations -> Megatron's own parser) and
its ``ENV_VARS``; a Primus experiment's resolved module config (the destinations Megatron knows) with
the environment Primus gives it (``examples/run_pretrain.sh``: CUDA_DEVICE_MAX_CONNECTIONS defaults to
1; the experiment's top-level ``env:``; ``env_patches.py``: 8 with FSDP).  A deliberately broken copy of a tuned recipe per
framework must fail (the check can fail).  The table goes to ``--table`` (Markdown).

Trees::

    git -C /work/.mirror/NVIDIA+Megatron-LM/repo archive core_v0.16.1 | tar -x -C /tmp/mlm016
    git -C /work/.mirror/NVIDIA+Megatron-LM/repo archive dev | tar -x -C /tmp/mlmdev
    git -C /work/.mirror/pytorch+torchtitan/repo archive v0.2.2 torchtitan | tar -x -C /tmp/tt022
    git -C /work/.mirror/AMD-AGI+Primus/repo archive HEAD primus/configs examples/megatron | tar -x -C /tmp/primus
    python scripts/check_tuned_recipes.py --mlm /tmp/mlm016 --mlm-dev /tmp/mlmdev \\
        --torchtitan-v02 /tmp/tt022 --primus /tmp/primus --upstream
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from primus_launch.adapters import detect_kind, load_recipe  # noqa: E402
from primus_launch.frameworks.mlm_validate import (  # noqa: E402
    ARCH_MAJOR, DEFAULT_TE_VERSION, Launch, Verdict, validate_launches)
from primus_launch.frameworks.titan_validate import TitanCase, validate_titan  # noqa: E402

# upstream sample: (path in the tree, primus-launch cluster flags[, the script's positional parameters])
MLM_TAG_SAMPLE = [
    ("examples/llama/train_llama3_8b_h100_fp8.sh", []),
    ("examples/gpt3/train_gpt3_175b_distributed.sh", ["--gpu", "h100-sxm", "--nodes", "16", "--gpus-per-node", "8"],
     ["checkpoints", "tensorboard", "gpt2-vocab.json", "gpt2-merges.txt", "data/text_document"]),
    ("examples/mixtral/train_mixtral_8x7b_distributed.sh", ["--gpu", "h100-sxm", "--nodes", "4", "--gpus-per-node", "8"],
     ["checkpoints", "mistralai/Mixtral-8x7B-v0.1", "data/text_document"]),
]
MLM_DEV_SAMPLE = [
    ("examples/moe_recipes/qwen3_30b/h100/bf16_32GPU_TP1PP1EP8.yaml", []),
    ("examples/moe_recipes/qwen3_235b/h100/bf16_256GPU_TP2PP8EP32.yaml", []),
    ("examples/moe_recipes/deepseek_v3/h100/bf16_1024GPU_TP1PP16EP64.yaml", []),
    ("examples/moe_recipes/deepseek_v3/b200/mxfp8_256GPU_TP1PP8EP32.yaml", []),
]
TITAN_SAMPLE = [
    ("models_llama3__llama3_8b.toml", ["--gpu", "h100-sxm", "--nodes", "1", "--gpus-per-node", "8"]),
    ("models_llama3__llama3_70b.toml", ["--gpu", "h100-sxm", "--nodes", "8", "--gpus-per-node", "8"]),
    ("models_qwen3__qwen3_32b.toml", ["--gpu", "h100-sxm", "--nodes", "2", "--gpus-per-node", "8"]),
    ("models_deepseek_v3__deepseek_v3_16b.toml", ["--gpu", "h100-sxm", "--nodes", "1", "--gpus-per-node", "8"]),
]
TITAN_UPSTREAM = Path("/work/shared/upstream-recipes/torchtitan-v0.2.2")
PRIMUS_SAMPLE = [
    ("examples/megatron/configs/MI355X/llama3.1_8B-BF16-pretrain.yaml", []),
    ("examples/megatron/configs/MI355X/llama3.1_70B-BF16-pretrain.yaml", []),
    ("examples/megatron/configs/MI355X/qwen3_30B_A3B-BF16-pretrain.yaml", []),
]


@dataclass
class Item:
    """One recipe of the run: its copy, its tuned version and the verdicts."""

    label: str
    path: Path
    cluster_flags: list[str] = field(default_factory=list)
    primus_root: Optional[Path] = None
    script_args: list[str] = field(default_factory=list)
    tuned: Optional[Path] = None
    tune_note: str = ""
    framework: str = ""
    checker: str = ""
    original: Optional[Verdict] = None
    result: Optional[Verdict] = None
    broken: bool = False
    unread: str = ""  # why the adapter could not read the original (then nothing is checked)


# --------------------------------------------------------------------------- tuning
def tuned_out(item: Item) -> Path:
    """Where the tuned recipe goes: ``x.tuned.sh`` next to ``x.sh``; a wrapper ``w.primus.toml``'s
    tuned native recipe as ``w.tuned.<native suffix>`` next to the wrapper."""
    if detect_kind(item.path) == "wrapper":
        target = Path(load_recipe(item.path).source.path)
        return item.path.with_name(f"{item.path.name.removesuffix('.toml').removesuffix('.primus')}.tuned"
                                   f"{target.suffix}")
    return item.path.with_name(f"{item.path.stem}.tuned{item.path.suffix}")


def tune(item: Item, tool_root: Path, budget: int, time_limit: float, timeout: float) -> None:
    """``primus-launch --tune`` of the copy, written to :func:`tuned_out`."""
    out = tuned_out(item)
    search = ["--budget", str(budget), "--time-limit", str(time_limit), "--workers", "1"] if budget > 0 else []
    cmd = [sys.executable, "-m", "primus_launch.cli", "--tune", str(item.path), "--dry-run", *search,
           "--out", str(out), *item.cluster_flags]
    if item.primus_root is not None:
        cmd += ["--primus-root", str(item.primus_root)]
    if item.script_args:
        cmd += ["--", *item.script_args]
    env = {**os.environ, "PYTHONPATH": str(tool_root)}
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(item.path.parent),
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        item.tune_note = f"tune did not finish in {timeout:.0f} s (--time-limit {time_limit:g})"
        return
    changes = next((ln.split(":", 1)[1].strip() for ln in proc.stdout.splitlines() if ln.startswith("changes:")), "")
    if proc.returncode or not out.is_file():
        err = (proc.stderr.strip().splitlines() or ["?"])[-1]
        item.tune_note = f"tune failed (rc {proc.returncode}): {err[:160]}"
        return
    item.tuned = out
    item.tune_note = f"{time.time() - t0:.0f} s; " + (changes or "no change")


# --------------------------------------------------------------------------- launches
def _cluster_of(item: Item, path: Path) -> Any:
    """The plan of the item's original recipe on its target cluster (the wrapper's / the flags'): the
    cluster a tuned recipe launches on (``path`` is only read raw, so a broken copy is no error)."""
    over: dict[str, Any] = {}
    f = item.cluster_flags
    for flag, key, conv in (("--gpu", "gpu", str), ("--nodes", "num_nodes", int), ("--gpus-per-node", "gpus_per_node", int)):
        if flag in f:
            over[key] = conv(f[f.index(flag) + 1])
    if detect_kind(item.path) == "wrapper":
        c = load_recipe(item.path).cluster
        over = {"gpu": c.gpu, "num_nodes": c.num_nodes, "gpus_per_node": c.gpus_per_node}
    return load_recipe(item.path, over or None, primus_root=item.primus_root, script_args=item.script_args)


def megatron_launch(item: Item, path: Path, name: str, te: str = DEFAULT_TE_VERSION) -> Launch:
    """The Megatron launch of ``path`` as the adapter reads it."""
    from primus_launch.adapters import megatron_script as ms
    from primus_launch.adapters.megatron_yaml import from_yaml
    from primus_launch.fileio import read_recipe_text

    plan = _cluster_of(item, path)
    c = plan.cluster
    arch = ARCH_MAJOR.get(c.gpu, 9)
    kind = detect_kind(path)
    text = read_recipe_text(path)
    if kind == "primus":
        from primus_launch.adapters.primus_yaml import resolve

        r = resolve(path, text, item.primus_root)
        cfg = {k: v for k, v in r.config.items() if not isinstance(v, dict)}
        from primus_launch.adapters.primus_yaml import experiment_env

        fsdp = any(cfg.get(k) for k in ("use_torch_fsdp2", "use_custom_fsdp", "use_megatron_fsdp"))
        env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1", **experiment_env(text)}  # run_pretrain.sh, then env:
        if fsdp:  # primus/backends/megatron/patches/env_patches.py
            env["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
        return Launch(name, [], env, c.world_size, c.gpus_per_node, arch, te, dests=_megatron_dests(cfg), primus=True)
    if path.suffix in (".yaml", ".yml"):
        rec = from_yaml(text, str(path))
        return Launch(name, [], dict(rec.env), c.world_size, c.gpus_per_node, arch, te, dests=dict(rec.args))
    rec = ms.from_script(text, str(path), tuple(plan.source.script_args) if plan.source else ())
    argv = [t.text for t in rec.tokens[rec.script_index + 1:]]
    return Launch(name, argv, rec.env_values(), c.world_size, c.gpus_per_node, arch, te)


def _megatron_dests(cfg: dict) -> dict:
    """The keys of a Primus module config that are Megatron-LM arguments (Primus's own keys dropped)."""
    from primus_launch.adapters import megatron_flags

    out = {}
    for k, v in cfg.items():
        f = megatron_flags.lookup(k)
        if f is not None and f.dest == k:
            out[k] = v
    return out


def titan_case(item: Item, path: Path, name: str) -> tuple[TitanCase, bool]:
    """(the TorchTitan case, whether it is a v0.2 TOML job)."""
    plan = _cluster_of(item, path)
    if path.suffix == ".toml":
        return TitanCase(name, ["--job.config_file", str(path)], plan.cluster.world_size), True
    from primus_launch.adapters.torchtitan_argv import program_start
    from primus_launch.adapters.torchtitan_script import script_argv
    from primus_launch.fileio import read_recipe_text

    argv = script_argv(read_recipe_text(path), str(path))
    return TitanCase(name, argv[program_start(argv):], plan.cluster.world_size), False


def framework_of(path: Path, primus_root: Optional[Path]) -> str:
    kind = detect_kind(path)
    if kind == "wrapper":
        return framework_of(Path(load_recipe(path).source.path), primus_root)
    if kind == "primus":
        return "megatron" if load_recipe(path, primus_root=primus_root).framework == "megatron" else "primus-titan"
    return "torchtitan" if kind.startswith("torchtitan") else "megatron"


# --------------------------------------------------------------------------- broken recipes
def break_megatron(tuned: Path, out: Path) -> Path:
    """A copy of a tuned Megatron script whose TP size does not divide the world size."""
    text = tuned.read_text()
    new = re.sub(r"^TP_SIZE=\d+", "TP_SIZE=3", text, count=1, flags=re.M)
    assert new != text, "no TP_SIZE= line to break"
    out.write_text(new)
    return out


def break_titan(tuned: Path, out: Path) -> Path:
    """A copy of a tuned TorchTitan job whose TP degree does not divide the world size."""
    text = tuned.read_text()
    new, n = re.subn(r"^tensor_parallel_degree\s*=\s*\d+", "tensor_parallel_degree = 3", text, count=1, flags=re.M)
    if not n:
        new = text.replace("[parallelism]\n", "[parallelism]\ntensor_parallel_degree = 3\n", 1)
    assert new != text
    out.write_text(new)
    return out


# --------------------------------------------------------------------------- run
def _readable(i: Item) -> bool:
    try:
        _cluster_of(i, i.path)
        return True
    except Exception as e:  # noqa: BLE001 - the adapter's one-line refusal is the note
        i.unread = " ".join(str(e).split())[:200]
        return False


def native(i: Item) -> Path:
    """The recipe file a wrapper points at (the item's own file otherwise): the original launch."""
    if detect_kind(i.path) == "wrapper":
        return Path(load_recipe(i.path).source.path)
    return i.path


def run_checks(items: list[Item], a: argparse.Namespace) -> None:
    items = [i for i in items if _readable(i)]
    mlm_items = [i for i in items if i.framework == "megatron"]
    tag_cases = [megatron_launch(i, native(i), f"{i.label}::orig", a.te_version) for i in mlm_items]
    tag_res = {v.name: v for v in validate_launches(a.mlm, tag_cases)} if tag_cases else {}
    dev_items = [i for i in mlm_items if not tag_res[f"{i.label}::orig"].ok
                 and tag_res[f"{i.label}::orig"].stage == "parse_args" and a.mlm_dev]
    tuned_tag = [megatron_launch(i, i.tuned, f"{i.label}::tuned", a.te_version) for i in mlm_items
                 if i.tuned is not None and i not in dev_items]
    for v in validate_launches(a.mlm, tuned_tag) if tuned_tag else []:
        tag_res[v.name] = v
    dev_res: dict[str, Verdict] = {}
    if dev_items:
        cases = [megatron_launch(i, native(i), f"{i.label}::orig", a.te_version) for i in dev_items]
        cases += [megatron_launch(i, i.tuned, f"{i.label}::tuned", a.te_version) for i in dev_items if i.tuned is not None]
        dev_res = {v.name: v for v in validate_launches(a.mlm_dev, cases)}
    for i in mlm_items:
        res = dev_res if i in dev_items else tag_res
        i.checker = f"Megatron-LM {a.mlm_dev_name if i in dev_items else a.mlm_name}"
        i.original, i.result = res.get(f"{i.label}::orig"), res.get(f"{i.label}::tuned")
    titan_items = [i for i in items if i.framework == "torchtitan"]
    v03: list[TitanCase] = []
    v02: list[TitanCase] = []
    for i in titan_items:
        for p, tag in ((native(i), "orig"), (i.tuned, "tuned")):
            if p is None:
                continue
            case, is_toml = titan_case(i, p, f"{i.label}::{tag}")
            (v02 if is_toml else v03).append(case)
        i.checker = "torchtitan v0.2.2 (tree)" if native(i).suffix == ".toml" else "torchtitan 0.3.0 (installed)"
    res: dict[str, Verdict] = {}
    if v03:
        res.update({v.name: v for v in validate_titan(v03)})
    if v02 and a.torchtitan_v02:
        res.update({v.name: v for v in validate_titan(v02, a.torchtitan_v02)})
    for i in titan_items:
        i.original, i.result = res.get(f"{i.label}::orig"), res.get(f"{i.label}::tuned")


def _cell(v: Optional[Verdict]) -> str:
    if v is None:
        return "not checked"
    return "pass" if v.ok else f"FAIL ({v.stage})"


def _err(v: Optional[Verdict]) -> str:
    if v is None or v.ok:
        return ""
    return v.error.replace("|", "\\|")[:220]


def table(items: list[Item], a: argparse.Namespace, elapsed: float) -> str:
    checked = [i for i in items if not i.broken and i.original is not None and i.result is not None]
    orig_ok = [i for i in checked if i.original.ok]
    both = [i for i in orig_ok if i.result.ok]
    broken = [i for i in items if i.broken]
    lines = [
        "# Tuned recipes through their framework's own validation",
        "",
        f"Generated by `python scripts/check_tuned_recipes.py {' '.join(a.argv_shown)}` "
        f"({elapsed / 60:.1f} min); primus-launch tuning from `{a.tool_root_name}` "
        + (f"(`--tune R --dry-run --budget {a.budget} --time-limit {a.time_limit:g} --workers 1`" if a.budget > 0
           else "(`--tune R --dry-run`: the default search, the certified branch and bound")
        + (", tuned recipes already in the work folder reused: tune column `reused`" if a.reuse else "") + ").",
        "",
        f"Megatron-LM: `parse_args` + `validate_args` + micro-batch calculator + parallel state (fake process "
        f"group, rank 0, full world size) + TransformerConfig, Transformer Engine assumed {a.te_version}; "
        "TorchTitan: `ConfigManager` + `ParallelDims` + device mesh (fake process group) + model config.",
        "",
        f"**{len(both)} of {len(orig_ok)} tuned recipes whose originals pass also pass** "
        f"({len(checked)} recipes checked, {len(checked) - len(orig_ok)} originals fail on their own).",
        "",
        "| recipe | checked with | original | tuned | tuned recipe's first rejection | tune |",
        "|---|---|---|---|---|---|",
    ]
    for i in items:
        if i.broken:
            continue
        note = i.tune_note.replace("|", "\\|")
        orig = _cell(i.original) + (f": {_err(i.original)}" if i.original is not None and not i.original.ok else "")
        if i.unread:
            orig = f"not read by primus-launch: {i.unread}".replace("|", "\\|")
        lines.append(f"| {i.label} | {i.checker or i.framework} | {orig} | {_cell(i.result)} | {_err(i.result)} "
                     f"| {note} |")
    lines += ["", "Deliberately broken recipes (the check must reject them):", "",
              "| recipe | checked with | result | rejection |", "|---|---|---|---|"]
    for i in broken:
        lines.append(f"| {i.label} | {i.checker} | {_cell(i.result)} | {_err(i.result)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlm", required=True, help="Megatron-LM source tree at the tag of the pinned megatron-core")
    ap.add_argument("--mlm-dev", help="Megatron-LM main/dev tree, for recipes written for it")
    ap.add_argument("--torchtitan-v02", help="torchtitan v0.2.2 source tree, for v0.2 job TOMLs")
    ap.add_argument("--primus", help="Primus checkout (primus/configs, examples/megatron) for the upstream sample")
    ap.add_argument("--upstream", action="store_true", help="also the upstream sample")
    ap.add_argument("--only", help="regex: only recipes whose label matches")
    ap.add_argument("--work", help="work folder (default: a new temporary folder)")
    ap.add_argument("--reuse", action="store_true", help="keep tuned files already in --work")
    ap.add_argument("--check-only", action="store_true", help="with --reuse: tune nothing, check what is there")
    ap.add_argument("--tool-root", default=str(REPO), help="primus-launch checkout that tunes (default: this one)")
    ap.add_argument("--budget", type=int, default=300, help="the planner's budget; 0: the default search (branch and bound)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--tune-timeout", type=float, default=300.0, help="seconds before a tune is given up")
    ap.add_argument("--te-version", default=DEFAULT_TE_VERSION)
    ap.add_argument("--table", default=str(REPO / "scripts/validation/TUNED_RECIPES.md"))
    a = ap.parse_args()
    a.argv_shown = [x if not x.startswith("/") or x.startswith(str(REPO)) else Path(x).name for x in sys.argv[1:]]
    a.mlm_name = _tree_name(a.mlm)
    a.mlm_dev_name = _tree_name(a.mlm_dev) if a.mlm_dev else ""
    tool = Path(a.tool_root)
    a.tool_root_name = _git_desc(tool)
    t0 = time.time()
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="tuned-check-"))
    work.mkdir(parents=True, exist_ok=True)
    items = collect(work, a)
    if a.only:
        items = [i for i in items if re.search(a.only, i.label)]
    for i in items:
        try:
            i.framework = framework_of(i.path, i.primus_root)
        except Exception as e:  # noqa: BLE001 - reported in the table
            i.framework, i.unread = "?", " ".join(str(e).split())[:200]
        if a.reuse and tuned_out(i).is_file():
            i.tuned, i.tune_note = tuned_out(i), "reused"
        elif a.check_only:
            i.tune_note = "no tuned recipe (tune failed or not run)"
        else:
            tune(i, tool, a.budget, a.time_limit, a.tune_timeout)
        print(f"[{time.time() - t0:5.0f}s] {i.label}: {i.tune_note}", flush=True)
    broken: list[Item] = []
    for i in items:
        if i.tuned is None or i.broken:
            continue
        if i.framework == "megatron" and i.tuned.suffix == ".sh" and not any(b.framework == "megatron" for b in broken):
            if re.search(r"^TP_SIZE=\d+", i.tuned.read_text(), re.M):
                p = break_megatron(i.tuned, i.tuned.with_name("broken_tp3.sh"))
                broken.append(Item(f"{i.label} with TP_SIZE=3", i.path, i.cluster_flags, tuned=p,
                                   framework="megatron", broken=True))
        if i.framework == "torchtitan" and i.tuned.suffix == ".toml" and a.torchtitan_v02 \
                and not any(b.framework == "torchtitan" for b in broken):
            p = break_titan(i.tuned, i.tuned.with_name("broken_tp3.toml"))
            broken.append(Item(f"{i.label} with tensor_parallel_degree = 3", i.path, i.cluster_flags, tuned=p,
                               framework="torchtitan", broken=True))
    run_checks(items + broken, a)
    for b in broken:  # a broken recipe is judged as tuned; its original is the unbroken one
        b.original = None
    text = table(items + broken, a, time.time() - t0)
    Path(a.table).write_text(text)
    print(text)
    return 0


def _tree_name(path: str) -> str:
    p = Path(path)
    for cand in (p / "megatron/core/package_info.py",):
        if cand.is_file():
            m = dict(re.findall(r"^(MAJOR|MINOR|PATCH|PRE_RELEASE)\s*=\s*['\"]?([\w.]*)", cand.read_text(), re.M))
            ver = f"{m.get('MAJOR')}.{m.get('MINOR')}.{m.get('PATCH')}{m.get('PRE_RELEASE', '')}"
            return f"{p.name} (megatron-core {ver})"
    return p.name


def _git_desc(root: Path) -> str:
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        br = subprocess.run(["git", "-C", str(root), "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return f"{br}@{sha}" + ("+changes" if dirty else "")
    except (subprocess.CalledProcessError, OSError):
        return root.name


def collect(work: Path, a: argparse.Namespace) -> list[Item]:
    """The recipes of the run, copied into ``work``."""
    items: list[Item] = []
    bundled = work / "recipes"
    if not bundled.exists():
        shutil.copytree(REPO / "recipes", bundled, ignore=shutil.ignore_patterns("*.tuned.*"))
    for p in sorted(bundled.rglob("*")):
        if p.is_file() and ".tuned" not in p.name and "broken" not in p.name and p.suffix in (".sh", ".yaml", ".toml"):
            items.append(Item(str(p.relative_to(work)), p))
    if not a.upstream:
        return items
    up = work / "upstream"
    up.mkdir(exist_ok=True)

    def copy(src: Path, rel: str) -> Path:
        dst = up / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            shutil.copy2(src, dst)
        return dst

    for rel, flags, *args in MLM_TAG_SAMPLE:
        items.append(Item(f"Megatron-LM {Path(a.mlm).name}:{rel}", copy(Path(a.mlm) / rel, "mlm-tag/" + rel), flags,
                          script_args=args[0] if args else []))
    if a.mlm_dev:
        for rel, flags in MLM_DEV_SAMPLE:
            items.append(Item(f"Megatron-LM {Path(a.mlm_dev).name}:{rel}", copy(Path(a.mlm_dev) / rel, "mlm-dev/" + rel),
                              flags))
    for name, flags in TITAN_SAMPLE:
        items.append(Item(f"torchtitan v0.2.2:{name}", copy(TITAN_UPSTREAM / name, "torchtitan/" + name), flags))
    if a.primus:
        root = Path(a.primus)
        for rel, flags in PRIMUS_SAMPLE:
            items.append(Item(f"Primus:{rel}", copy(root / rel, "primus/" + rel), flags, primus_root=root / "primus/configs"))
    return items


if __name__ == "__main__":
    raise SystemExit(main())
