"""Read every Primus experiment YAML and TorchTitan job (TOML, 0.3 config function) of an upstream
checkout and say, per source, how many are read right, refused (why) or read wrong.

    git -C /work/.mirror/AMD-AGI+Primus/repo archive HEAD examples primus/configs | tar -x -C /tmp/primus_x
    python scripts/survey_primus_titan.py --primus /tmp/primus_x --toml-dir v0.2.2=/tmp/tt_tags/v0.2.2 \\
        --titan-registry [--list] [--markdown]

    python scripts/survey_primus_titan.py --primus-ref release/v25.9 --primus-ref v0.7.0 [--markdown]
    python scripts/survey_primus_titan.py --titan-ref 238fa9953 [--list]   # torchtitan mirror TOMLs at a commit

``--primus-ref REF`` (repeatable) reads the Primus mirror's ``examples`` and ``primus/configs`` at a branch or tag
(``git archive`` into a temporary folder): older releases, whose presets chain with ``bases:`` / ``includes:``.

``--markdown`` also writes the tables into ``docs/recipe-survey.md`` (this script's section; with only
``--primus-ref``, the Primus releases section).

The upstream files stay out of the repository.  Per file:

- **read right**: a plan comes out, the unchanged plan renders the file byte for byte, a tuned plan
  (micro-batch halved/doubled, else TP changed) renders, re-reads equal to it and changes only the
  tuned keys, and the plan's model matches the numbers written in the resolved config (layers,
  hidden, heads, FFN, experts, top-k, sequence length, TP/PP/EP/CP, micro/global batch);
- **refused**: a one-line :class:`UserError` / :class:`PlanError` (counted by reason);
- **read wrong**: a plan comes out but one of the checks above fails;
- **traceback**: any other exception (a bug).

GPT-family pretraining files are the ``*pretrain*`` Primus experiments and the TorchTitan jobs whose
model family is a decoder-only GPT (not diffusion, hybrid Mamba / linear attention, multimodal).
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
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primus_launch.errors import UserError  # noqa: E402
from primus_launch.plan import Plan, PlanError  # noqa: E402

NON_GPT = re.compile(r"mamba|zebra|flux|diffusion|lfm|qwen3_5|kimi_k3|deepseek_v4|vlm|hummingbird|wan2|"
                     r"muse_glimmer|kimi_k2_7|transformers_modeling_backend", re.I)


STRIP: dict[str, str] = {}  # local folders -> their name in the output (stable across machines)


def _reason(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    if isinstance(e, PlanError):
        msg = f"{e.field}: {str(e.allowed)[:90]}"
    else:
        msg = re.sub(r"^\S+?: ", "", msg)
    for local, shown in STRIP.items():
        msg = msg.replace(local, shown)
    return msg[:110]


def _tuned(plan: Plan) -> list[Plan]:
    """Legal tuned variants of ``plan``: micro-batch, then TP (the framework's own rules applied)."""
    from primus_launch.plan import torchtitan_problems

    return [q for q in _variants(plan) if plan.framework != "torchtitan" or not torchtitan_problems(q)]


def _variants(plan: Plan) -> list[Plan]:
    out = []
    t, p = plan.training, plan.parallel
    for mbs in (t.micro_batch_size * 2, max(1, t.micro_batch_size // 2)):
        if mbs != t.micro_batch_size and t.global_batch_size % (mbs * plan.dp) == 0:
            try:
                out.append(plan.with_changes(training={"micro_batch_size": mbs}))
                break
            except (PlanError, ValueError):
                pass
    for tp in (p.tp * 2, max(1, p.tp // 2)):
        if tp == p.tp:
            continue
        dp = plan.world_size // (tp * p.cp * p.pp)
        if dp < 1 or plan.world_size % (tp * p.cp * p.pp):
            continue
        G = max(t.global_batch_size // (t.micro_batch_size * dp), 1) * t.micro_batch_size * dp
        try:
            etp = {"etp": 1} if plan.framework == "torchtitan" and p.ep > 1 and tp > 1 else {}
            out.append(plan.with_changes(parallel={"tp": tp, "sequence_parallel": tp > 1 and (
                p.sequence_parallel or plan.framework == "torchtitan"), **etp}, training={"global_batch_size": G}))
            break
        except (PlanError, ValueError):
            pass
    return out


UNKNOWN: collections.Counter = collections.Counter()  # keys reported as unknown to primus-launch


def _note_unknown(plan: Plan) -> None:
    for w in plan.source.unmodelled if plan.source else []:
        if "not known to primus-launch" in w.effect or "not read by the Megatron adapter" in w.effect:
            UNKNOWN[w.flag] += 1


def _same(a: Plan, b: Plan) -> bool:
    da, db = a.model_dump(exclude={"source"}), b.model_dump(exclude={"source"})
    da["model"].pop("name"), db["model"].pop("name")
    return da == db


def _model_check(plan: Plan, cfg: dict, keys: dict[str, Callable[[Plan], Any]]) -> list[str]:
    bad = []
    for k, get in keys.items():
        v = cfg.get(k)
        if v is None or isinstance(v, bool):
            continue
        try:
            want = int(v)
        except (TypeError, ValueError):
            continue
        if get(plan) != want:
            bad.append(f"{k}: file {want}, plan {get(plan)}")
    return bad


MEGATRON_KEYS = {
    "num_layers": lambda p: p.model.num_layers, "hidden_size": lambda p: p.model.hidden_size,
    "num_attention_heads": lambda p: p.model.num_attention_heads, "ffn_hidden_size": lambda p: p.model.ffn_hidden_size,
    "num_experts": lambda p: p.model.num_experts or 0, "moe_router_topk": lambda p: p.model.moe_router_topk,
    "seq_length": lambda p: p.model.seq_length, "tensor_model_parallel_size": lambda p: p.parallel.tp,
    "pipeline_model_parallel_size": lambda p: p.parallel.pp, "expert_model_parallel_size": lambda p: p.parallel.ep,
    "context_parallel_size": lambda p: p.parallel.cp, "micro_batch_size": lambda p: p.training.micro_batch_size,
    "global_batch_size": lambda p: p.training.global_batch_size,
}
TITAN_KEYS = {
    "training.seq_len": lambda p: p.model.seq_length, "parallelism.tensor_parallel_degree": lambda p: p.parallel.tp,
    "parallelism.pipeline_parallel_degree": lambda p: p.parallel.pp,
    "parallelism.context_parallel_degree": lambda p: p.parallel.cp,
    "parallelism.expert_parallel_degree": lambda p: p.parallel.ep,
}


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_primus(path: Path, root: Path) -> tuple[str, str]:
    from primus_launch.adapters.primus_yaml import load_primus_yaml, render_primus_yaml, resolve

    env: dict = {}
    plan = load_primus_yaml(path, primus_root=root, env=env)
    _note_unknown(plan)
    text = path.read_text()
    if render_primus_yaml(plan, text, path, root, env) != text:
        return "wrong", "unchanged plan does not render the file as it is"
    r = resolve(path, None, root, env)
    cfg = r.config if r.framework == "megatron" else _flat(r.config)
    bad = _model_check(plan, cfg, MEGATRON_KEYS if r.framework == "megatron" else TITAN_KEYS)
    if bad:
        return "wrong", "; ".join(bad)
    for q in _tuned(plan):
        try:
            out = render_primus_yaml(q, text, path, root, env)
        except (UserError, PlanError) as e:
            return "wrong", f"tuned plan not written: {_reason(e)}"
        tmp = path.with_name(path.stem + ".survey-tuned.yaml")
        tmp.write_text(out)
        try:
            back = load_primus_yaml(tmp, q.cluster, root, env)
        finally:
            tmp.unlink()
        if not _same(back, q):
            return "wrong", "tuned plan re-read differs"
    return "right", ""


def check_toml(path: Path) -> tuple[str, str]:
    import tomllib

    from primus_launch.adapters.torchtitan import load_torchtitan, plan_from_text, render_torchtitan

    plan = load_torchtitan(path)
    _note_unknown(plan)
    text = path.read_text()
    if render_torchtitan(plan, text) != text:
        return "wrong", "unchanged plan does not render the file as it is"
    bad = _model_check(plan, _flat(tomllib.loads(text)), TITAN_KEYS)
    if bad:
        return "wrong", "; ".join(bad)
    for q in _tuned(plan):
        try:
            back = plan_from_text(render_torchtitan(q, text), q.cluster, str(path))
        except (UserError, PlanError) as e:
            return "wrong", f"tuned plan not written: {_reason(e)}"
        if not _same(back, q):
            return "wrong", "tuned plan re-read differs"
    return "right", ""


def check_launch(module: str, config: str) -> tuple[str, str]:
    """A one-node launch line of the config function: 8 GPUs, or the GPU count its fixed parallel
    degrees need (a config pinning every degree to 1 is a one-GPU job, as torchtitan's ParallelDims
    requires the degrees' product to equal the world size)."""
    from primus_launch.adapters.command_recipe import plan_from_command, render_command

    def line(n: int) -> list[str]:
        return ["torchrun", "--nnodes", "1", "--nproc-per-node", str(n), "-m", "torchtitan.train", "--module",
                module, "--config", config]

    argv = line(8)
    try:
        plan = plan_from_command(argv)
    except PlanError as e:
        if e.field != "parallelism.data_parallel_shard_degree":
            raise
        for n in (1, 2, 4):
            try:
                argv = line(n)
                plan = plan_from_command(argv)
                break
            except PlanError:
                continue
        else:
            raise e from None
    _note_unknown(plan)
    if render_command(plan, argv) != argv:
        return "wrong", "unchanged plan does not render the line as it is"
    for q in _tuned(plan):
        try:
            back = plan_from_command(render_command(q, argv))
        except (UserError, PlanError) as e:
            return "wrong", f"tuned plan not written: {_reason(e)}"
        if not _same(back, q):
            return "wrong", "tuned plan re-read differs"
    return "right", ""


def run(items: list[tuple[str, Callable[[], tuple[str, str]], bool]], title: str, listing: bool) -> dict:
    counts: collections.Counter = collections.Counter()
    reasons: collections.Counter = collections.Counter()
    wrong: list[str] = []
    gpt = collections.Counter()
    gpt_refused: list[tuple[str, str]] = []
    for name, fn, is_gpt in items:
        try:
            status, why = fn()
        except (UserError, PlanError) as e:
            status, why = "refused", _reason(e)
        except Exception as e:  # noqa: BLE001 - a traceback is a bug: reported, counted
            status, why = "traceback", f"{type(e).__name__}: {e}"
            if listing:
                traceback.print_exc()
        counts[status] += 1
        if is_gpt:
            gpt[status] += 1
        if status == "refused":
            reasons[why] += 1
            if is_gpt:
                gpt_refused.append((name, why))
        if status in ("wrong", "traceback"):
            wrong.append(f"{name}: {why}")
        if listing:
            print(f"  {status:9s} {name}  {why}")
    n = sum(counts.values())
    ng = sum(gpt.values())
    print(f"{title}: {n} files: {counts['right']} read right, {counts['refused']} refused, {counts['wrong']} read "
          f"wrong, {counts['traceback']} tracebacks; GPT-family pretraining: {gpt['right']}/{ng} read right"
          + (f" ({100 * gpt['right'] / ng:.0f}%)" if ng else ""))
    for why, k in reasons.most_common():
        print(f"    refused x{k}: {why}")
    for w in wrong:
        print(f"    WRONG {w}")
    return {"title": title, "counts": dict(counts), "gpt": dict(gpt), "reasons": dict(reasons), "wrong": wrong,
            "gpt_refused": gpt_refused}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--primus", help="a Primus checkout (examples/ and primus/configs)")
    ap.add_argument("--primus-ref", action="append", default=[], metavar="REF",
                    help="a branch or tag of the Primus mirror (its examples/ and primus/configs), repeatable")
    ap.add_argument("--toml-dir", action="append", default=[], metavar="LABEL=DIR",
                    help="a folder of TorchTitan job TOMLs (e.g. one release tag)")
    ap.add_argument("--titan-ref", action="append", default=[], metavar="REV",
                    help="a commit or tag of the torchtitan mirror: the job TOMLs under its torchtitan/ (e.g. "
                         "238fa9953, the last tree with TOMLs before the Python config registry), repeatable")
    ap.add_argument("--titan-registry", action="store_true",
                    help="every config function of the installed torchtitan's config registries")
    ap.add_argument("--list", action="store_true", help="one line per file")
    ap.add_argument("--vocab-fallback", type=int, metavar="N",
                    help="estimate only: give tokenizers the Megatron adapter's table does not know N entries "
                         "(shows what else would refuse a file once the vocabulary is known)")
    ap.add_argument("--markdown", action="store_true",
                    help="also write the tables into docs/recipe-survey.md (this script's section)")
    a = ap.parse_args()
    results: list[dict] = []
    if a.vocab_fallback:
        from primus_launch.adapters import megatron_args

        known = megatron_args.tokenizer_vocab
        megatron_args.tokenizer_vocab = lambda m, t: known(m, t) or (a.vocab_fallback if (m or t) else None)
        print(f"(estimate: unknown tokenizers given {a.vocab_fallback} entries)")
    checkouts = [("", Path(a.primus))] if a.primus else []
    tmp = tempfile.TemporaryDirectory(prefix="survey-primus-") if (a.primus_ref or a.titan_ref) else None
    for rev in a.titan_ref:  # extracted like --toml-dir folders, labelled by the revision
        d = Path(tmp.name) / ("titan-" + rev.replace("/", "_"))
        d.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", TITAN_MIRROR, "archive", rev, "torchtitan"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(d)], input=archive, check=True)
        a.toml_dir.append(f"{rev}={d}")
    for ref in a.primus_ref:
        d = Path(tmp.name) / ref.replace("/", "_")
        d.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", PRIMUS_MIRROR, "archive", ref, "examples", "primus/configs"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(d)], input=archive, check=True)
        checkouts.append((f"{ref} ", d))
    for label, root in checkouts:
        STRIP.update({str(root.resolve()): "PRIMUS", str(root): "PRIMUS"})
        for fw in ("megatron", "torchtitan"):
            files = sorted((root / "examples" / fw / "configs").rglob("*.yaml"))
            items = [(str(f.relative_to(root)), (lambda f=f, root=root: check_primus(f, root)),
                      "pretrain" in f.name and not NON_GPT.search(str(f))) for f in files]
            results.append(run(items, f"Primus {label}examples/{fw}/configs", a.list))
    for spec in a.toml_dir:
        label, _, d = spec.partition("=")
        files = sorted(Path(d).rglob("*.toml"))
        items = [(str(f.relative_to(d)), (lambda f=f: check_toml(f)), not NON_GPT.search(str(f)))
                 for f in files]
        results.append(run(items, f"TorchTitan {label} TOMLs", a.list))
    if a.titan_registry:
        from primus_launch.adapters.titan_snapshot import snapshot

        items = []
        for module, table in sorted(snapshot()["configs"].items()):
            for config in table:
                items.append((f"--module {module} --config {config}", (lambda m=module, c=config: check_launch(m, c)),
                              not NON_GPT.search(module)))
        for module, fam in sorted(snapshot()["models"].items()):
            if module not in snapshot()["configs"]:
                items.append((f"--module {module}", (lambda m=module: check_launch(m, "x")), False))
        results.append(run(items, f"TorchTitan {snapshot()['torchtitan']} config registry (launch lines)", a.list))
    if UNKNOWN:
        print(f"keys reported as not read (warning, not silently dropped): {sum(UNKNOWN.values())} in all; most "
              f"common: " + ", ".join(f"{k} x{n}" for k, n in UNKNOWN.most_common(8)))
    if a.markdown and results:
        print(f"wrote {write_markdown(results, a)}")
    if tmp is not None:
        tmp.cleanup()
    return 0


def write_markdown(results: list[dict], a: argparse.Namespace) -> Path:
    """This survey's section of docs/recipe-survey.md (scripts/survey_doc.py)."""
    from survey_doc import reasons_table, table, write_section

    rows = []
    for r in results:
        c, g = r["counts"], r["gpt"]
        n, ng = sum(c.values()), sum(g.values())
        rows.append(dict(src=r["title"], files=n, right=c.get("right", 0), refused=c.get("refused", 0),
                         wrong=c.get("wrong", 0), tb=c.get("traceback", 0),
                         gpt=f"{g.get('right', 0)}/{ng} ({100 * g.get('right', 0) / ng:.0f}%)" if ng else "0/0"))
    releases_only = bool(a.primus_ref) and not (a.primus or a.toml_dir or a.titan_registry)
    args = []
    if a.primus:
        args.append("--primus PRIMUS")
    args += [f"--primus-ref {r}" for r in a.primus_ref]
    args += [f"--toml-dir {spec.partition('=')[0]}=DIR" for spec in a.toml_dir]
    if a.titan_registry:
        args.append("--titan-registry")
    if a.vocab_fallback:
        args.append(f"--vocab-fallback {a.vocab_fallback}")
    if releases_only:
        refs = ", ".join(f"`{r}` {_primus_head(r)}" for r in a.primus_ref)
        body = ["## Primus releases (`scripts/survey_primus_titan.py --primus-ref`)", "",
                f"Command: `python scripts/survey_primus_titan.py {' '.join(args)} --markdown` (mirror AMD-AGI/Primus "
                f"{refs}: `examples` and `primus/configs` at each).", ""]
    else:
        body = ["## Primus experiments and TorchTitan jobs (`scripts/survey_primus_titan.py`)", "",
                f"Command: `python scripts/survey_primus_titan.py {' '.join(args)} --markdown` (PRIMUS: `git archive "
                "HEAD examples primus/configs` of AMD-AGI/Primus; DIR: `git archive <tag> torchtitan` of "
                "pytorch/torchtitan; the registry is the installed torchtitan's).", ""]
    if a.primus:
        head = subprocess.run(["git", "-C", "/work/.mirror/AMD-AGI+Primus/repo", "rev-parse", "--short=10", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        if head:
            body += [f"Primus mirror HEAD: `{head}`.", ""]
    body.append(table(rows, [("src", "source"), ("files", "files"), ("right", "read right"),
                             ("refused", "refused"), ("wrong", "read wrong"), ("tb", "tracebacks"),
                             ("gpt", "GPT-family pretraining read right")]))
    gref = [(r["title"], f, why) for r in results for f, why in r["gpt_refused"]]
    if gref:
        body += ["GPT-family pretraining files refused:", "",
                 table([dict(src=t, f=f"`{f}`", why=why) for t, f, why in gref],
                       [("src", "source"), ("f", "file"), ("why", "refusal")])]
    wrong = [w for r in results for w in r["wrong"]]
    if wrong:
        body += ["Read wrong / tracebacks:", ""] + [f"- {w}" for w in wrong] + [""]
    for r in results:
        body += [f"Refusal reasons, {r['title']}:", "", reasons_table(r["reasons"])]
    return write_section("primus-releases" if releases_only else "primus-titan", "\n".join(body))


PRIMUS_MIRROR = "/work/.mirror/AMD-AGI+Primus/repo"
TITAN_MIRROR = "/work/.mirror/pytorch+torchtitan/repo"


def _primus_head(ref: str) -> str:
    return subprocess.run(["git", "-C", PRIMUS_MIRROR, "rev-parse", "--short=10", ref], capture_output=True,
                          text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
