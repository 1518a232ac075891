"""Run the Megatron reader over directories of public recipes and say how many are read right.

    python scripts/survey_recipes.py                     # Megatron-LM main examples/, dev examples/moe_recipes,
                                                         # main functional tests (from the local mirror)
    python scripts/survey_recipes.py --source NAME=DIR   # any directory of .sh / .yaml recipes
    python scripts/survey_recipes.py -v                  # one line per file
    python scripts/survey_recipes.py --markdown          # also write docs/recipe-survey.md (its section)
    python scripts/survey_recipes.py --ref core_r0.15.0 --ref dev   # other branches / tags of the mirror:
                                                         # their examples/ and functional tests (own doc section)
    python scripts/survey_recipes.py --rocm-branches     # the launch scripts at the root of every ROCm/Megatron-LM
                                                         # branch (mirror ROCm+Megatron-LM; one copy per distinct file)

The upstream trees are extracted to a temporary directory (``git archive``), never into this
repository.  Per source it prints ``N read right, M refused (reasons grouped), K read wrong`` and the
same over GPT-family pretraining recipes only (files that are not training recipes - data
preparation, inference, conversion scripts - and other model families are refused by design).

A file is *read wrong* when a real check fails:

- **flags**: a flag or key written in the file (found by a regex over the file's text, independent of
  the reader) is neither a Megatron flag the plan reads, nor neutral, nor reported in
  ``source.unmodelled`` / ``source.notes`` (switches and values equal to Megatron's default need no
  report);
- **round trip**: the unchanged plan does not render byte-identical text, or a tuned copy (another
  micro-batch size, recompute switched) does not render and re-read as the requested plan;
- **layout**: the parallel layout the file's name or the moe_recipes README table states
  (``TP2PP8EP64``, ``tp1_pp4_vp2``, ``TP/PP/EP/CP/ETP`` and ``MBS/GBS/SL`` columns) contradicts the plan.

Functional tests take their cluster from ``tests/test_utils/recipes/**.yaml`` (``nodes`` x ``gpus``), or
from the test's own ``MODEL_ENV_VARS: MODEL_ARGS: GPUS_PER_NODE`` when it states one.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from primus_launch.adapters import megatron_flags as mf  # noqa: E402
from primus_launch.adapters.megatron import _parse, load_megatron, render_megatron  # noqa: E402
from primus_launch.adapters import pai_patch  # noqa: E402
from primus_launch.adapters.megatron_args import BY_DEST, PAI_VOCAB_KEYS  # noqa: E402
from primus_launch.errors import UserError, one_line  # noqa: E402
from primus_launch.plan import Cluster, PlanError  # noqa: E402

MIRROR = Path("/work/.mirror/NVIDIA+Megatron-LM/repo")
ROCM_MIRROR = Path("/work/.mirror/ROCm+Megatron-LM/repo")
ROCM_SOURCE = "ROCm/Megatron-LM branch scripts"
# example folders that hold no GPT pretraining recipe (post-training, inference, fine-tuning studies, RL)
NOT_PRETRAINING = ("post_training", "inference", "msdp", "detxoify_lm", "rl", "mimo", "multimodal")
FAMILY_DIRS = {"bert": "BERT", "t5": "T5", "hybrid": "hybrid Mamba", "multimodal-llava": "multimodal",
               "mimo": "multimodal", "gpt-nemo": "NeMo config", "multimodal": "multimodal", "mamba": "hybrid Mamba",
               "retro": "RETRO", "vision": "vision"}


DEFAULT_SOURCES = (("Megatron-LM main examples/", "main", "examples"),
                   ("Megatron-LM dev examples/moe_recipes", "dev", "examples/moe_recipes"),
                   ("Megatron-LM main functional tests", "main", "tests/functional_tests/test_cases"))


def ref_sources(refs: list[str]) -> tuple[tuple[str, str, str], ...]:
    """The examples/ and functional tests of other branches or tags of the mirror (``--ref``)."""
    return tuple(src for r in refs for src in ((f"Megatron-LM {r} examples/", r, "examples"),
                                                (f"Megatron-LM {r} functional tests", r,
                                                 "tests/functional_tests/test_cases")))


def _tree_has(ref: str, sub: str) -> bool:
    return bool(subprocess.run(["git", "-C", str(MIRROR), "ls-tree", "-d", "--name-only", ref, sub],
                               capture_output=True, text=True).stdout.strip())


def extract(tmp: Path, sources: tuple[tuple[str, str, str], ...] = DEFAULT_SOURCES) -> list[tuple[str, Path, list[Path]]]:
    """Check the upstream trees out of the mirror into ``tmp``; (name, root, files) per source."""
    out = []
    for name, branch, sub in sources:
        if not _tree_has(branch, sub):
            continue  # a release without functional tests / examples in this layout
        dst = tmp / branch.replace("/", "_")
        dst.mkdir(exist_ok=True)
        paths = [sub] + (["tests/test_utils/recipes"] if "functional" in name and _tree_has(branch, "tests/test_utils/recipes")
                         else [])
        archive = subprocess.run(["git", "-C", str(MIRROR), "archive", branch, *paths], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dst)], input=archive, check=True)
        root = dst / sub
        if "functional" in name:
            files = sorted(root.glob("*/*/model_config.yaml"))
        else:
            files = sorted(p for p in root.rglob("*") if p.suffix in (".sh", ".yaml", ".yml"))
        out.append((name, root, files))
    return out


def extract_rocm_branches(tmp: Path) -> tuple[str, Path, list[Path]]:
    """The ``*.sh`` files at the root of every branch of the ROCm/Megatron-LM mirror (their teams' launch scripts:
    ``train_llama2.sh``, ``basetrain70b.sh``, ``tune_*.sh``), one copy of each distinct file (by blob), under
    ``<branch with / as _>/``, in branch order; (name, root, files)."""
    root = tmp / "rocm-branches"
    seen: set[str] = set()
    branches = subprocess.run(["git", "-C", str(ROCM_MIRROR), "for-each-ref", "--format=%(refname:short)", "refs/heads"],
                              check=True, capture_output=True, text=True).stdout.split()
    for b in branches:
        listing = subprocess.run(["git", "-C", str(ROCM_MIRROR), "ls-tree", b], check=True, capture_output=True,
                                 text=True).stdout.splitlines()
        for line in listing:
            meta, _, name = line.partition("\t")
            kind, blob = meta.split()[1:3]
            if kind != "blob" or not name.endswith(".sh") or blob in seen:
                continue
            seen.add(blob)
            dst = root / b.replace("/", "_") / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(subprocess.run(["git", "-C", str(ROCM_MIRROR), "cat-file", "blob", blob], check=True,
                                           capture_output=True).stdout)
    return f"{ROCM_SOURCE} ({len(branches)} branches)", root, sorted(root.rglob("*.sh"))


def test_clusters(tests_root: Path) -> dict[str, tuple[int, int]]:
    """test case -> (nodes, gpus per node) from tests/test_utils/recipes/**.yaml."""
    import yaml

    out: dict[str, tuple[int, int]] = {}
    recipes = tests_root.parents[1] / "test_utils" / "recipes"
    for f in recipes.rglob("*.yaml"):
        try:
            data = yaml.safe_load(f.read_text())
        except yaml.YAMLError:
            continue
        if not isinstance(data, dict):
            continue
        spec = data.get("spec") or {}
        nodes, gpus = spec.get("nodes", 1), spec.get("gpus", 8)
        for prod in data.get("products") or []:
            for case in (prod.get("test_case") or []):
                if isinstance(nodes, int) and isinstance(gpus, int):
                    out.setdefault(case, (nodes, gpus))
    return out


def readme_table(root: Path) -> dict[str, dict]:
    """moe_recipes README rows: recipe path -> TP/PP/EP/CP/ETP, MBS/GBS/SL."""
    out = {}
    readme = root / "README.md"
    if not readme.is_file():
        return out
    text = readme.read_text()
    for m in re.finditer(r'href="([^"]+\.yaml)".*?</td>\s*<td>(\d+)</td>\s*<td>([\d/]+)</td>\s*<td>([\d/]+)</td>',
                         text, re.S):
        tp, pp, ep, cp, etp = (int(x) for x in m.group(3).split("/"))
        mbs, gbs, sl = (int(x) for x in m.group(4).split("/"))
        out[m.group(1)] = dict(gpus=int(m.group(2)), tp=tp, pp=pp, ep=ep, cp=cp, etp=etp, mbs=mbs, gbs=gbs, seq=sl)
    return out


def name_layout(path: Path) -> dict[str, int]:
    """Parallel degrees a file or directory name states (TP2PP8EP64, tp1_pp4_vp2, ep8, cp2)."""
    name = (path.stem if path.name != "model_config.yaml" else path.parent.name).lower()
    out = {}
    for key, field in (("tp", "tp"), ("pp", "pp"), ("ep", "ep"), ("cp", "cp"), ("etp", "etp")):
        m = re.search(rf"(?:^|[_\-]|(?<=\d)){key}(\d+)(?=[_\-a-z]|$)", name)
        if m and not (key == "tp" and re.search(r"etp" + m.group(1), name) and name.count("tp") == 1):
            out[field] = int(m.group(1))
    return out


_FLAG_RE = re.compile(r"(?<![\w\-])(--[a-z][a-z0-9\-]+)")


def written_flags(path: Path, text: str, yaml_like: bool) -> set[str]:
    """Flags written in the file (regex over its text; YAML: keys of the argument block)."""
    if yaml_like:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return set()
        block = data.get("ARGS") or data.get("MODEL_ARGS") or data if isinstance(data, dict) else {}
        if not isinstance(block, dict):
            return set()
        return {str(k) for k in block}
    flags = set()
    for line in text.splitlines():
        code = line.split(" #")[0] if not line.lstrip().startswith("#") else ""
        flags.update(_FLAG_RE.findall(code))
    return flags


# Pai-Megatron-Patch's own arguments that plan_from_args reads (the vocabulary, its legacy shared experts / MLA)
READ_PAI = frozenset(k for keys in PAI_VOCAB_KEYS for k in keys) | frozenset(pai_patch.KEYS)


def check_flags(plan, rec, path: Path, text: str, yaml_like: bool, key_of=None) -> list[str]:
    """Flags in the reader's own arguments that are neither read, neutral, nor reported; ``key_of``: the
    config's own dotted key of a destination, for readers that name warnings as the file writes them
    (NeMo: ``nemo_yaml.file_key``)."""
    problems = []
    reported = {u.flag for u in plan.source.unmodelled}
    if key_of is not None:  # a warning named model.rotary_percentage reports --rotary-percent
        reported |= {f.flag for k in rec.args if (f := mf.lookup(k)) is not None and key_of(k) in reported}
    notes = " ".join(plan.source.notes)
    for key, val in rec.args.items():
        if key in BY_DEST or key in READ_PAI:
            continue
        f = mf.lookup(key)
        if f is None:
            if (key if key.startswith("-") else "--" + key.replace("_", "-")) not in notes:
                problems.append(f"unknown {key} not reported")
            continue
        if f.cls in (mf.NOT_MODELLED, mf.MODELLED) and not mf.is_default(f, val):
            if not ({f.flag, "--no-" + f.flag[2:]} & reported):
                problems.append(f"{f.flag} set but not reported")
    # flags written in the text that the reader never saw (YAML only: scripts have branches)
    if yaml_like:
        seen = {mf.lookup(k).flag for k in rec.args if mf.lookup(k)} | {k for k in rec.args if k.startswith("--")}
        seen |= {BY_DEST[k].flag for k in rec.args if k in BY_DEST}
        for key in written_flags(path, text, True):
            f = mf.lookup(key)
            shown = key if key.startswith("-") else "--" + key.replace("_", "-")
            if f is None and shown not in notes and key not in rec.args:
                problems.append(f"{key} written but neither read nor reported")
    return problems


def check_roundtrip(plan, text: str, tmp: Path, suffix: str, cluster_given: bool = False) -> list[str]:
    first = render_megatron(plan, text)
    if cluster_given:  # the survey chose the cluster: the rendering may state it; then it must be stable
        text = first
        first = render_megatron(plan, text)
    if first != text:
        return ["unchanged plan does not render identical text"]
    t = plan.training
    dp = plan.dp
    changes = {}
    if t.global_batch_size % (2 * t.micro_batch_size * dp) == 0:
        changes["training"] = {"micro_batch_size": 2 * t.micro_batch_size}
    else:
        gran = "selective" if t.recompute.granularity == "none" else "none"
        changes["training"] = {"recompute": {"granularity": gran, "method": "uniform", "num_layers": None}}
    try:
        new = plan.with_changes(**changes).model_copy(update={"source": plan.source})
    except Exception:
        return []
    try:
        out = render_megatron(new, text)
    except (UserError, PlanError) as e:
        return [f"tuned copy not expressible: {one_line(e)[:100]}"]
    # beside the recipe (in the extracted tree), as --tune writes it: files it names from the run's root resolve
    f = Path(plan.source.path).with_name("rt.survey" + suffix) if plan.source.path else tmp / ("rt" + suffix)
    f.write_text(out)
    try:
        back = load_megatron(f, plan.cluster, plan.source.script_args)
    except (UserError, PlanError) as e:
        return [f"tuned copy does not re-read: {one_line(e)[:100]}"]
    finally:
        f.unlink()
    if back.training.micro_batch_size != new.training.micro_batch_size or \
            back.training.recompute.granularity != new.training.recompute.granularity:
        return ["tuned copy re-reads differently"]
    return []


def check_layout(plan, path: Path, table: dict[str, dict], root: Path) -> list[str]:
    p, t = plan.parallel, plan.training
    have = dict(tp=p.tp, pp=p.pp, ep=p.ep, cp=p.cp, etp=p.expert_tp, vpp=p.vpp, mbs=t.micro_batch_size,
                gbs=t.global_batch_size, seq=plan.model.seq_length, gpus=plan.world_size)
    want = dict(name_layout(path)) if "functional" not in str(root) else {}  # test names are often stale
    rel = str(path.relative_to(root)) if root in path.parents else path.name
    want.update(table.get(rel, {}))
    if "vpp" in want and want["vpp"] == 1 and have["vpp"] == 2:
        want.pop("vpp")  # functional tests' "vp1" = one extra virtual stage in their naming
    return [f"{k}: file says {v}, plan {have[k]}" for k, v in want.items() if k in have and have[k] != v]


# positional parameters of example scripts, as their READMEs / headers tell the user to pass them
SCRIPT_ARGS: dict[str, tuple[str, ...]] = {
    "gpt3/train_gpt3_175b_distributed.sh": ("ckpt", "tb", "gpt2-vocab.json", "gpt2-merges.txt", "data_text_document"),
    "mixtral/train_mixtral_8x7b_distributed.sh": ("ckpt", "mistralai/Mixtral-8x7B-v0.1", "data_text_document"),
}


def _args_for(f: Path) -> tuple[str, ...]:
    return next((v for k, v in SCRIPT_ARGS.items() if f.as_posix().endswith(k)), ())


def _fitting_cluster(f: Path, err: PlanError):
    """The smallest 8-GPU-node cluster on which the recipe's layout is legal (functional tests whose
    cluster is not in tests/test_utils/recipes); raises the first error when none up to 64 nodes fits."""
    for n in (2, 4, 8, 16, 32, 64):
        try:
            return load_megatron(f, Cluster(num_nodes=n, gpus_per_node=8), SCRIPT_ARGS.get(f.name, ()) or _args_for(f))
        except PlanError:
            continue
    raise err


def env_gpus(text: str) -> int | None:
    """GPUs per node a functional test states for its MODEL_ARGS run (``MODEL_ENV_VARS: MODEL_ARGS:
    GPUS_PER_NODE: N``, checkpoint-consistency tests), or None."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    env = ((data or {}).get("MODEL_ENV_VARS") or {}).get("MODEL_ARGS") if isinstance(data, dict) else None
    g = env.get("GPUS_PER_NODE") if isinstance(env, dict) else None
    return g if isinstance(g, int) and g > 0 else None


def _untemp(msg: str) -> str:
    """The message without the temporary extraction folder (stable output)."""
    return re.sub(r"\S*/survey-[^/\s]+/[^/\s]+/", "", msg)


def classify_error(msg: str) -> str:
    msg = _untemp(msg)
    if "no Megatron arguments to read" in msg:
        return "not a training recipe (an empty MODEL_ARGS block)"
    if "is not a training program" in msg:
        return "not a training program (inference / conversion / evaluation tool)"
    if "no training command" in msg:
        return "not a training script (no torchrun/python ... pretrain_*.py command)"
    m = re.search(r"a Megatron-LM functional test of (\w+)", msg)
    if m:  # MODE: inference / rl (run_ci_test.sh runs generation / RL loops, not pretraining)
        return f"model family / mode not modelled: functional test MODE {m.group(1)}"
    if "trains a" in msg or "not modelled by the projection" in msg or "NeMo launcher" in msg:
        m = re.search(r"(hybrid Mamba[^:,(]*|BERT|T5[^:,]*|multimodal[^:,]*|RETRO|vision|RL loop|biencoder[^:,]*|"
                      r"experimental attention variant|heterogeneous layers|NeMo launcher config|reinforcement-learning loop|"
                      r"supervised fine-tuning loop|logits distillation)", msg)
        return "model family / mode not modelled: " + (m.group(1).strip() if m else msg[:60])
    return re.sub(r"\d+", "N", msg)[:110]


def survey(name: str, root: Path, files: list[Path], verbose: bool, tmp: Path) -> dict:
    clusters = test_clusters(root) if "functional" in name else {}
    table = readme_table(root)
    right, wrong, refused = [], [], collections.Counter()
    gpt_refused: list[tuple[str, str]] = []
    gpt_right = gpt_wrong = gpt_total = 0
    for f in files:
        text = f.read_text(errors="replace")
        yaml_like = f.suffix in (".yaml", ".yml")
        case = f.parent.name
        family_dir = next((fam for d, fam in FAMILY_DIRS.items() if d in f.relative_to(root).parts[:-1]), None)
        cluster = None
        if "functional" in name and env_gpus(text):  # the MODEL_ARGS run's own GPU count wins
            cluster = Cluster(num_nodes=1, gpus_per_node=env_gpus(text))
        elif case in clusters:
            n, g = clusters[case]
            cluster = Cluster(num_nodes=n, gpus_per_node=g)
        elif "functional" in name:
            cluster = Cluster(num_nodes=1, gpus_per_node=8)
        forced = False
        try:
            try:
                plan = load_megatron(f, cluster, SCRIPT_ARGS.get(f.relative_to(root).as_posix(), ()))
            except PlanError as e:
                if not re.search(r"world size|micro_batch_size x dp|interleaved schedule", str(e)):
                    raise
                plan = _fitting_cluster(f, e)  # a layout larger than the default / stated cluster
                forced = True
            rec, _ = _parse(text, str(f), given=plan.cluster, script_args=tuple(plan.source.script_args))
        except (UserError, PlanError, ValueError) as e:
            reason = classify_error(one_line(e))
            refused[reason] += 1
            is_gpt = not family_dir and not reason.startswith(("not a training", "model family"))
            is_gpt = is_gpt and not any(d in f.relative_to(root).parts[:-1] for d in NOT_PRETRAINING) \
                and "inference" not in f.parent.name
            # a file bash cannot parse is a training recipe only if it names a training program
            is_gpt = is_gpt and not ("cannot parse launch script" in reason and "pretrain_" not in text)
            gpt_total += is_gpt
            if is_gpt:
                gpt_refused.append((str(f.relative_to(root)), _untemp(one_line(e))))
            if verbose:
                print(f"  refused  {f.relative_to(root)}: {one_line(e)[:160]}")
            continue
        except Exception as e:  # a traceback is a bug: report it loudly
            refused["TRACEBACK " + type(e).__name__] += 1
            print(f"  TRACEBACK {f}: {e}")
            traceback.print_exc()
            continue
        problems = []
        if family_dir and not (family_dir == "hybrid Mamba" and plan.model.hybrid_pattern):  # hybrids are read
            problems.append(f"a {family_dir} recipe read as a GPT")
        problems += check_flags(plan, rec, f, text, yaml_like)
        problems += check_layout(plan, f, table, root)
        try:
            problems += check_roundtrip(plan, text, tmp, f.suffix, cluster_given=forced)
        except Exception as e:
            problems.append(f"round trip raised {type(e).__name__}: {e}")
        is_gpt = not family_dir and not any(d in f.relative_to(root).parts[:-1] for d in NOT_PRETRAINING) \
            and "inference" not in f.parent.name
        gpt_total += is_gpt
        if problems:
            wrong.append((f, problems))
            gpt_wrong += is_gpt
            if verbose:
                print(f"  WRONG    {f.relative_to(root)}: {'; '.join(problems)[:200]}")
        else:
            right.append(f)
            gpt_right += is_gpt
            if verbose:
                print(f"  right    {f.relative_to(root)}")
    n = len(files)
    print(f"{name}: {n} files: {len(right)} read right, {sum(refused.values())} refused, {len(wrong)} read wrong")
    for reason, k in refused.most_common():
        print(f"    refused {k:4d}  {reason}")
    for f, probs in wrong:
        print(f"    wrong        {f.relative_to(root)}: {'; '.join(probs)[:160]}")
    print(f"  GPT-family training recipes: {gpt_right}/{gpt_total} read right"
          + (f" ({100 * gpt_right / gpt_total:.0f}%)" if gpt_total else "") + f", {gpt_wrong} read wrong")
    return dict(files=n, right=len(right), refused=sum(refused.values()), wrong=len(wrong), gpt=gpt_total,
                gpt_right=gpt_right, reasons=dict(refused), gpt_refused=gpt_refused,
                wrong_files=[_untemp(f"{f.relative_to(root)}: {'; '.join(p)}") for f, p in wrong])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", action="append", default=[], help="NAME=DIR of recipe files (default: the mirror)")
    ap.add_argument("--ref", action="append", default=[],
                    help="a branch or tag of the mirror: survey its examples/ and functional tests (repeatable)")
    ap.add_argument("--rocm-branches", action="store_true",
                    help="survey the launch scripts at the root of every ROCm/Megatron-LM branch (own doc section)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--markdown", action="store_true",
                    help="also write the tables into docs/recipe-survey.md (this script's section)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="survey-") as td:
        tmp = Path(td)
        if args.source:
            sources = []
            for s in args.source:
                nm, _, d = s.partition("=")
                root = Path(d)
                sources.append((nm, root, sorted(p for p in root.rglob("*") if p.suffix in (".sh", ".yaml", ".yml"))))
        elif args.ref or args.rocm_branches:
            sources = extract(tmp, ref_sources(args.ref)) + ([extract_rocm_branches(tmp)] if args.rocm_branches else [])
        else:
            sources = extract(tmp)
        work = tmp / "work"
        work.mkdir()
        total = collections.Counter()
        results = []
        for nm, root, files in sources:
            r = survey(nm, root, files, args.verbose, work)
            results.append((nm, r))
            total.update({k: v for k, v in r.items() if isinstance(v, int)})
        print(f"ALL: {total['files']} files: {total['right']} read right, {total['refused']} refused, "
              f"{total['wrong']} read wrong; GPT-family training recipes {total['gpt_right']}/{total['gpt']} read right")
        if args.markdown:
            print(f"wrote {write_markdown(results, total, bool(args.source), args.ref, args.rocm_branches)}")


def write_markdown(results: list[tuple[str, dict]], total: collections.Counter, custom: bool,
                   refs: list[str] | None = None, rocm: bool = False) -> Path:
    """This survey's section of docs/recipe-survey.md (scripts/survey_doc.py)."""
    from survey_doc import reasons_table, table, write_section

    def pct(a: int, b: int) -> str:
        return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "0/0"

    rows = [dict(src=nm, files=r["files"], right=r["right"], refused=r["refused"], wrong=r["wrong"],
                 gpt=pct(r["gpt_right"], r["gpt"])) for nm, r in results]
    rows.append(dict(src="**all**", files=total["files"], right=total["right"], refused=total["refused"],
                     wrong=total["wrong"], gpt=pct(total["gpt_right"], total["gpt"])))
    def head(branch: str) -> str:
        return subprocess.run(["git", "-C", str(MIRROR), "rev-parse", "--short=10", branch], capture_output=True,
                              text=True).stdout.strip()

    other = bool(refs) or rocm
    commits = "" if custom or (rocm and not refs) else ", ".join(f"`{b}` {head(b)}" for b in (refs or ("main", "dev")))
    title = "Other Megatron-LM trees: release branches, ROCm/Megatron-LM branch scripts" if other else "Megatron-LM recipes"
    cmd = ("python scripts/survey_recipes.py " + "".join(f"--ref {r} " for r in refs or ())
           + ("--rocm-branches " if rocm else "") + "--markdown")
    where = [f"mirror NVIDIA/Megatron-LM {commits}"] if commits else []
    if rocm:
        where.append("mirror ROCm/Megatron-LM, the root `*.sh` of every branch, one copy per distinct file; a script that "
                     "runs another (`bash train.sh KEY=VALUE`) is read with what it passes")
    body = [f"## {title} (`scripts/survey_recipes.py`)", "",
            f"Command: `{cmd}`" + (f" ({'; '.join(where)})" if where else ""), "",
            table(rows, [("src", "source"), ("files", "files"), ("right", "read right"), ("refused", "refused"),
                         ("wrong", "read wrong"), ("gpt", "GPT-family training recipes read right")])]
    gref = [(nm, f, why) for nm, r in results for f, why in r["gpt_refused"]]
    if gref:
        body += ["GPT-family training recipes refused:", "",
                 table([dict(src=nm, f=f"`{f}`", why=why[:220]) for nm, f, why in gref],
                       [("src", "source"), ("f", "file"), ("why", "refusal")])]
    wrong = [(nm, w) for nm, r in results for w in r["wrong_files"]]
    if wrong:
        body += ["Read wrong:", ""] + [f"- {nm}: {w}" for nm, w in wrong] + [""]
    for nm, r in results:
        body += [f"Refusal reasons, {nm}:", "", reasons_table(r["reasons"])]
    return write_section("megatron-other" if other else "megatron", "\n".join(body))


if __name__ == "__main__":
    main()
