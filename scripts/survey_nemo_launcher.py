"""Run the NeMo 1.0 reader (``adapters/nemo_yaml.py``) over NeMo-Framework-Launcher's training configs and say how
many are read right.

    python scripts/survey_nemo_launcher.py              # launcher_scripts/conf/training/**.yaml of the local mirror
    python scripts/survey_nemo_launcher.py -v           # one line per file
    python scripts/survey_nemo_launcher.py --markdown   # also write docs/recipe-survey.md (its section)
    python scripts/survey_nemo_launcher.py --all-refs   # every other branch / tag's distinct training YAMLs

The tree is extracted with ``git archive`` into a temporary folder, never into this repository.  Files without a
top-level ``trainer:`` and ``model:`` (``tp_overlap/ub_cfg_*.yaml`` userbuffers settings, model parts) are not
training configs and are left out.  A file is *read wrong* when a check fails:

- **stated values**: a whole number the file writes for ``model.num_layers / hidden_size / num_attention_heads /
  encoder_seq_length / tensor_model_parallel_size / pipeline_model_parallel_size / micro_batch_size /
  global_batch_size`` or ``trainer.num_nodes / devices`` (read here with ``yaml.safe_load``, independently of the
  reader; ``${...}`` interpolations skipped) differs from the plan;
- **flags**: an argument the reader produced is neither read by the plan, nor neutral, nor reported in
  ``source.unmodelled`` / ``source.notes`` (``survey_recipes.check_flags``);
- **round trip**: the unchanged plan does not render byte-identical text, or a tuned copy (micro-batch x 2 where
  the batch allows, else recompute switched) does not render and re-read as requested.

A file refused for a model family the projection does not model (T5, BERT, NeVA, CLIP, diffusion, ...) is not a
GPT-family training recipe; every other refusal is counted against the GPT-family total.
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

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from primus_launch.adapters.nemo_yaml import _parse, file_key, load_nemo1_yaml, render_nemo1_yaml  # noqa: E402
from primus_launch.errors import UserError, one_line  # noqa: E402
from primus_launch.plan import PlanError  # noqa: E402
from survey_recipes import check_flags  # noqa: E402

MIRROR = Path("/work/.mirror/NVIDIA+NeMo-Framework-Launcher/repo")
SUB = "launcher_scripts/conf/training"
NAME = "NeMo-Framework-Launcher conf/training"
# (section, key) the file states -> the plan's value
STATED = {("model", "num_layers"): lambda p: p.model.num_layers, ("model", "hidden_size"): lambda p: p.model.hidden_size,
          ("model", "num_attention_heads"): lambda p: p.model.num_attention_heads,
          ("model", "encoder_seq_length"): lambda p: p.model.seq_length,
          ("model", "tensor_model_parallel_size"): lambda p: p.parallel.tp,
          ("model", "pipeline_model_parallel_size"): lambda p: p.parallel.pp,
          ("model", "micro_batch_size"): lambda p: p.training.micro_batch_size,
          ("model", "global_batch_size"): lambda p: p.training.global_batch_size,
          ("trainer", "num_nodes"): lambda p: p.cluster.num_nodes, ("trainer", "devices"): lambda p: p.cluster.gpus_per_node}


def check_stated(plan, text: str) -> list[str]:
    data = yaml.safe_load(text) or {}
    out = []
    for (sec, key), have in STATED.items():
        v = (data.get(sec) or {}).get(key)
        if isinstance(v, int) and not isinstance(v, bool) and have(plan) != v:
            out.append(f"{sec}.{key}: file says {v}, plan {have(plan)}")
    return out


def check_roundtrip(plan, path: Path, text: str) -> list[str]:
    if render_nemo1_yaml(plan, text) != text:
        return ["unchanged plan does not render identical text"]
    t = plan.training
    if t.global_batch_size % (2 * t.micro_batch_size * plan.dp) == 0:
        change = {"micro_batch_size": 2 * t.micro_batch_size}
    else:
        change = {"recompute": {"granularity": "selective" if t.recompute.granularity == "none" else "none",
                                "method": "uniform", "num_layers": None}}
    try:
        new = plan.with_changes(training=change).model_copy(update={"source": plan.source})
    except Exception:
        return []
    try:
        out = render_nemo1_yaml(new, text)
    except (UserError, PlanError) as e:
        return [f"tuned copy not expressible: {one_line(e)[:100]}"]
    f = path.with_name("rt.survey.yaml")
    f.write_text(out)
    try:
        back = load_nemo1_yaml(f, plan.cluster)
    except (UserError, PlanError) as e:
        return [f"tuned copy does not re-read: {one_line(e)[:100]}"]
    finally:
        f.unlink()
    if (back.training.micro_batch_size, back.training.recompute.granularity) != \
            (new.training.micro_batch_size, new.training.recompute.granularity):
        return ["tuned copy re-reads differently"]
    return []


def _untemp(msg: str) -> str:
    """``msg`` without the temporary checkout's folder."""
    return re.sub(r"\S*/survey-nemo-[^/\s]+/" + re.escape(SUB) + "/", "", msg)


def classify(msg: str) -> tuple[str, bool]:
    """(reason without numbers and the temporary folder, whether the file is a GPT-family training recipe)."""
    msg = _untemp(msg)
    msg = re.sub(r"^\S+\.ya?ml: ", "", msg)  # the file the line names
    if "model family the projection does not model" in msg:
        m = re.search(r"\((model\.\w+|exp_manager\.name='[^']*')\)", msg)
        return f"model family not modelled ({m.group(1) if m else '?'})", False
    return re.sub(r"\d+", "N", msg)[:110], True


def survey(root: Path, files: list[Path], verbose: bool) -> dict:
    right, wrong, refused = [], [], collections.Counter()
    gpt_refused: list[tuple[str, str]] = []
    gpt_total = gpt_right = 0
    for f in files:
        rel = str(f.relative_to(root))
        text = f.read_text(errors="replace")
        try:
            plan = load_nemo1_yaml(f)
            rec, _ = _parse(text, str(f), plan.cluster)
        except (UserError, PlanError, ValueError) as e:
            reason, gpt = classify(one_line(e))
            refused[reason] += 1
            gpt_total += gpt
            if gpt:
                gpt_refused.append((rel, _untemp(one_line(e))))
            if verbose:
                print(f"  refused  {rel}: {one_line(e)[:160]}")
            continue
        except Exception as e:  # a traceback is a bug: report it loudly
            refused["TRACEBACK " + type(e).__name__] += 1
            print(f"  TRACEBACK {rel}: {e}")
            traceback.print_exc()
            continue
        gpt_total += 1
        problems = check_stated(plan, text) + check_flags(plan, rec, f, text, False, file_key)
        try:
            problems += check_roundtrip(plan, f, text)
        except Exception as e:
            problems.append(f"round trip raised {type(e).__name__}: {e}")
        if problems:
            wrong.append((rel, problems))
            if verbose:
                print(f"  WRONG    {rel}: {'; '.join(problems)[:200]}")
        else:
            right.append(rel)
            gpt_right += 1
            if verbose:
                print(f"  right    {rel}")
    n = len(files)
    print(f"{NAME}: {n} files: {len(right)} read right, {sum(refused.values())} refused, {len(wrong)} read wrong")
    for reason, k in refused.most_common():
        print(f"    refused {k:4d}  {reason}")
    for rel, probs in wrong:
        print(f"    wrong        {rel}: {'; '.join(probs)[:160]}")
    print(f"  GPT-family training configs: {gpt_right}/{gpt_total} read right, {len(wrong)} read wrong")
    return dict(files=n, right=len(right), refused=sum(refused.values()), wrong=len(wrong), gpt=gpt_total,
                gpt_right=gpt_right, reasons=dict(refused), gpt_refused=gpt_refused,
                wrong_files=[f"{rel}: {'; '.join(p)}" for rel, p in wrong])


def write_markdown(r: dict, head: str) -> Path:
    from survey_doc import reasons_table, table, write_section

    pct = f"{r['gpt_right']}/{r['gpt']} ({100 * r['gpt_right'] / r['gpt']:.0f}%)" if r["gpt"] else "0/0"
    body = ["## NeMo 1.0 training configs (`scripts/survey_nemo_launcher.py`)", "",
            f"Command: `python scripts/survey_nemo_launcher.py --markdown` (mirror NVIDIA/NeMo-Framework-Launcher "
            f"`{head}`, `{SUB}/**.yaml` with top-level `trainer:` and `model:`; the cluster is the file's "
            "`trainer.num_nodes` x `devices`)", "",
            table([dict(src=NAME, files=r["files"], right=r["right"], refused=r["refused"], wrong=r["wrong"], gpt=pct)],
                  [("src", "source"), ("files", "files"), ("right", "read right"), ("refused", "refused"),
                   ("wrong", "read wrong"), ("gpt", "GPT-family training configs read right")])]
    if r["gpt_refused"]:
        body += ["GPT-family training configs refused:", "",
                 table([dict(f=f"`{f}`", why=why[:220]) for f, why in r["gpt_refused"]],
                       [("f", "file"), ("why", "refusal")])]
    if r["wrong_files"]:
        body += ["Read wrong:", ""] + [f"- {w}" for w in r["wrong_files"]] + [""]
    body += ["Refusal reasons:", "", reasons_table(r["reasons"])]
    return write_section("nemo1", "\n".join(body))


def _other_refs_files(tmp: Path) -> list[Path]:
    """Each training YAML blob under ``SUB`` on a branch or tag of the mirror that HEAD does not hold (read18),
    written to ``tmp/BLOB10/SUB/...`` (its own path kept: the first ref holding it)."""
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(MIRROR), *a], capture_output=True, text=True, check=True).stdout

    head = {ln.split()[2] for ln in git("ls-tree", "-r", "HEAD", SUB).splitlines()}
    seen: dict[str, str] = {}
    for c in sorted(set(git("for-each-ref", "--format=%(objectname)").split())):
        for ln in git("ls-tree", "-r", c, SUB).splitlines():
            meta, path = ln.split("\t", 1)
            blob = meta.split()[2]
            if path.endswith(".yaml") and blob not in head:
                seen.setdefault(blob, path)
    files = []
    for blob, path in sorted(seen.items(), key=lambda x: x[1]):
        text = git("cat-file", "-p", blob)
        if re.search(r"^trainer:", text, re.M) and re.search(r"^model:", text, re.M):
            f = tmp / blob[:10] / path
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
            files.append(f)
    return files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--markdown", action="store_true",
                    help="also write the tables into docs/recipe-survey.md (this script's section)")
    ap.add_argument("--all-refs", action="store_true",
                    help="every distinct training YAML of every branch / tag (HEAD's left out), not HEAD's tree")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="survey-nemo-") as td:
        tmp = Path(td)
        if args.all_refs:
            survey(tmp, _other_refs_files(tmp), args.verbose)
            return
        archive = subprocess.run(["git", "-C", str(MIRROR), "archive", "HEAD", SUB], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        root = tmp / SUB
        files = sorted(f for f in root.rglob("*.yaml")
                       if re.search(r"^trainer:", f.read_text(errors="replace"), re.M)
                       and re.search(r"^model:", f.read_text(errors="replace"), re.M))
        r = survey(root, files, args.verbose)
        if args.markdown:
            head = subprocess.run(["git", "-C", str(MIRROR), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                                  text=True).stdout.strip()
            print(f"wrote {write_markdown(r, head)}")


if __name__ == "__main__":
    main()
