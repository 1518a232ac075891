"""Probe (MEMORY.md round 25): what each TorchTitan reserved-peak source ran with, beside the projection's terms.

For every judged TorchTitan case of ``memory_cases.json`` with an exactly published reserved peak, prints the
source's launch facts (torch build, the caching allocator's configuration as the launch line or launch script of
the source's torchtitan commit sets it, the launcher, which rank's peak is quoted; whether its FSDP units keep the
embedding in the root, as torchtitan before #1094 and the autoresearch branches do) beside the plan's compile / AC /
reshard / local batch and the projection's terms (GiB): allocated A, reserved R, measured M, the default-stream
fragmentation term ``f10`` (:data:`memory.stage.TITAN_DYNAMIC_FRAGMENTATION` of the dynamic bytes) and the FSDP2
side-stream pools ``sm``; then, per source group, the median of ``R / M - 1``, of ``M - A`` and of ``f10``, and the
Spearman correlation of the error ``R / M - 1`` with ``f10 / M`` (over all rows and within the B200 rows).
The launch facts are read from the sources (each ``SOURCES`` entry names where); nothing is written.

    PYTHONPATH=. python scripts/probe_titan_launch_split.py [ID_SUBSTRING ...]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_titan_reserve_gap import titan_reserved_cases  # noqa: E402
from validate_memory import evaluate, rank_correlation  # noqa: E402

GiB = 1024**3

#: (id prefix, group, torch, allocator configuration of the launch, where that is read).  "expandable" only where
#: the launch line or the launch script the source names sets it; "not set" where the published launch line is
#: a bare torchrun; "unknown" where the launcher is not published.
SOURCES: tuple[tuple[str, str, str, str, str], ...] = (
    ("titan_ar15_", "B200 autoresearch", "2.13.0a0", "expandable",
     "branch autoresearch-parallelize/may15-qwen3-14b-8xb200: NGPU=8 ./run_train.sh; run_train.sh @68f86f18f:42 "
     "PYTORCH_ALLOC_CONF=expandable_segments:True; rank 0"),
    ("titan_ar19_", "B200 autoresearch", "2.13.0a0", "expandable",
     "branch autoresearch-parallelize/may19-qwen3-14b: ./run_train.sh; run_train.sh @7c324f253:42 "
     "PYTORCH_ALLOC_CONF=expandable_segments:True; rank 0"),
    ("titan_pr808_", "H100 PR #808/#820", "nightly 2025-01", "expandable",
     "PR #808 description: 'CONFIG_FILE=... ./run_train.sh --training.compile'; the launch script sets "
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True under either name (run_llama_train.sh @690f299d3:22, "
     "run_train.sh @069bae286:22, the merge); rank 0"),
    ("titan_pr820_", "H100 PR #808/#820", "nightly 2025-02", "expandable",
     "the #808 command (commit 88247277c repeats none); as titan_pr808_; rank 0"),
    ("titan_pr1690_", "H100 PR #1690", "nightly 2025-09 (not stated)", "unknown",
     "PR #1690 logs: '[rank7]:' (run_train.sh's --role rank prefix; run_train.sh @d66b72a6a:20 sets "
     "PYTORCH_ALLOC_CONF=expandable_segments:True) for the 8-GPU compiled row, '[trainerN|k]:' (another "
     "launcher, not published) for the multi-node rows; the case says max over ranks"),
    ("torchtitan_h100_", "H100 docs 2024-12", "1963fc8 (2024-12-23)", "unknown",
     "benchmarks/llama3_h100_202412_torchtitan.md @31a17bfd: launcher not published (Grand Teton); "
     "run_llama_train.sh @9dec370:22 sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
     "multinode_trainer.slurm @9dec370:62 sets nothing; max over GPUs"),
    ("torchtitan_h200_", "H200 Trainy 2025-06", "2.8.0a0+5228986c39 (NGC 25.05)", "not set",
     "benchmarks/llama3_8b_h200_2025-06_torchtitan.md @bcdeaa37: a bare 'torchrun --nnodes $NUM_NODES ...' "
     "with no PYTORCH_*ALLOC_CONF (the image's environment not stated); max over GPUs"),
    ("ao_b200_", "torchao llama3.sh", "2.9.0.dev20250815+cu128", "expandable",
     "pytorch/ao benchmarks/float8/training/llama3.sh -> torchtitan 6fc499f6f run_train.sh:19 "
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; rank 0"),
    ("ao_mi300x_", "torchao llama3.sh", "2.9.0.dev20250811+rocm6.4", "expandable",
     "pytorch/ao benchmarks/float8/training/llama3.sh @853f87d1b -> torchtitan 2c8b59479 run_train.sh:19 "
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; rank 0"),
    ("ao_tutorial_", "torchao tutorial H100", "nightly 2025-06 (not stated)", "expandable",
     "pytorch/ao docs eager_tutorials/pretraining.rst: 'NGPU=8 CONFIG_FILE=... ./run_train.sh --training.compile'; "
     "torchtitan 775a486ed run_train.sh:24 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; rank 0"),
)


#: id prefixes of sources whose torchtitan predates 83e694105 (#1094, 2025-07-28, "Improve reshard_after_forward
#: logic"): before it ``apply_fsdp`` wrapped each block (the last one with ``reshard_after_forward=False``) and then
#: the root (``tok_embeddings``, ``norm``, ``output``), which FSDP2 never reshards after forward; from it the
#: embedding is its own unit (resharded after forward) and ``[norm, output]`` one unit, every block resharded
#: (9dec370 ``parallelisms/parallelize_llama.py:329-339``; 83e694105 ``models/llama3/infra/parallelize.py``).
PRE_1094 = ("titan_pr808_", "titan_pr820_", "torchtitan_h100_", "torchtitan_h200_")
#: the autoresearch branches' own parallelize leaves the embedding in the root unit too (the cases' ``read``:
#: "per block and on the root -- may15 -- or per block, lm_head and root -- may19"); blocks as 0.3.0
ROOT_EMBEDDING = ("titan_ar15_", "titan_ar19_")


def root_units_extra_gib(plan, last_block: bool = True) -> float:
    """What FSDP units that keep the embedding in the root hold allocated at the loss backward beyond torchtitan
    0.3.0's, GiB (not PP): the bf16 unsharded embedding (the root is never resharded after forward) and, before
    #1094, the last block's bf16 unsharded parameters (not resharded after forward).  The copy-in stream's
    larger root all-gather is not counted.  What-if only."""
    import math

    from primus_launch.projection.memory.titan import titan_param_shapes

    p = plan.parallel
    if p.pp > 1:
        return float("nan")

    def elems(part: str) -> float:
        return float(sum(math.prod(sh) for sh, _ in titan_param_shapes(plan.model, part, tp=p.tp, ep=1)))

    return 2.0 * (elems("emb") + (elems("dense") if last_block else 0.0)) / GiB


def source_of(case_id: str) -> tuple[str, str, str, str]:
    """(group, torch, allocator configuration, where read) of a case id; ``("other", ...)`` if not listed."""
    for prefix, group, torch, alloc, where in SOURCES:
        if case_id.startswith(prefix):
            return group, torch, alloc, where
    return "other", "-", "-", "-"


def rows(only: list[str]) -> list[dict]:
    """One dict per TorchTitan case with an exact reserved peak: launch facts, plan settings, terms (GiB)."""
    from primus_launch.projection.memory.estimate import estimate_memory
    from primus_launch.projection.memory.stage import TITAN_DYNAMIC_FRAGMENTATION as F

    out = []
    for it in titan_reserved_cases(only):
        m = it.measured
        r = evaluate(it)
        st = max(estimate_memory(it.plan).stages, key=lambda s: s.total_bytes)
        f10 = F * (st.activations_bytes + st.transient_bytes - st.workspace_bytes) / GiB
        t, p = it.plan.training, it.plan.parallel
        rc = t.recompute
        ac = "none" if rc is None or rc.granularity in (None, "none") else rc.granularity
        group, torch, alloc, where = source_of(it.id)
        out.append(dict(id=it.id, group=group, torch=torch, alloc=alloc, where=where, rank=m.get("rank", "max"),
                        compile=t.compile, ac=ac, reshard=p.fsdp_reshard_after_forward, lbs=t.micro_batch_size,
                        seq=it.plan.model.seq_length, chunks=t.loss_chunks, A=r["allocated_gib"],
                        R=r["projected_gib"], M=float(m["gib"]), f10=f10,
                        sm=st.allocator_reserve_bytes / GiB - f10,
                        root=root_units_extra_gib(it.plan) if it.id.startswith(PRE_1094) else
                        root_units_extra_gib(it.plan, last_block=False) if it.id.startswith(ROOT_EMBEDDING) else 0.0))
    return out


def main(argv: list[str] | None = None) -> int:
    rs = rows(list(sys.argv[1:] if argv is None else argv))
    print(f"{'case':56s} {'group':19s} {'alloc conf':10s} {'rank':5s} {'cmp':3s} {'AC':9s} {'reshard':7s} "
          f"{'lbs':>3s} {'seq':>6s} {'A':>6s} {'R':>6s} {'M':>6s} {'R/M-1':>6s} {'M-A':>5s} {'f10':>5s} {'sm':>5s} "
          f"{'root':>5s} {'+root':>6s}")
    for r in rs:
        cmp = "y" if r["compile"] else "n"
        print(f"{r['id'][:56]:56s} {r['group'][:19]:19s} {r['alloc']:10s} {r['rank']:5s} {cmp:3s} "
              f"{r['ac']:9s} {r['reshard']:7s} {r['lbs']:3d} {r['seq']:6d} {r['A']:6.1f} {r['R']:6.1f} {r['M']:6.1f} "
              f"{r['R'] / r['M'] - 1:+6.1%} {r['M'] - r['A']:5.1f} {r['f10']:5.1f} {r['sm']:5.1f} {r['root']:5.1f} "
              f"{(r['R'] + r['root']) / r['M'] - 1:+6.1%}")
    print("\nroot: what FSDP units keeping the embedding in the root (PRE_1094: + the last block; ROOT_EMBEDDING)"
          " hold beyond 0.3.0's at the loss backward (what-if, not modelled); +root: R + root against M")
    print("\nper source group: n, median R/M-1 (range), median M-A GiB (range), median f10 GiB, allocator"
          " configuration, median (R + root)/M - 1")
    groups: dict[str, list[dict]] = {}
    for r in rs:
        groups.setdefault(r["group"], []).append(r)
    for g, gr in groups.items():
        e = [r["R"] / r["M"] - 1 for r in gr]
        d = [r["M"] - r["A"] for r in gr]
        f10 = statistics.median(r["f10"] for r in gr)
        with_root = statistics.median((r["R"] + (0.0 if r["root"] != r["root"] else r["root"])) / r["M"] - 1
                                      for r in gr)  # (PP rows: nan, counted as 0)
        print(f"  {g:19s} n={len(gr):2d}  {statistics.median(e):+6.1%} ({min(e):+.1%} .. {max(e):+.1%})  "
              f"{statistics.median(d):5.1f} ({min(d):.1f} .. {max(d):.1f})  {f10:5.1f}"
              f"  {', '.join(sorted({r['alloc'] for r in gr}))}  {with_root:+.1%}")
    for label, sel in (("all rows", rs), ("B200 rows", [r for r in rs if r["group"] == "B200 autoresearch"])):
        if len(sel) > 2:
            rho = rank_correlation([r["f10"] / r["M"] for r in sel], [r["R"] / r["M"] - 1 for r in sel])
            rho_d = rank_correlation([r["f10"] for r in sel], [r["M"] - r["A"] for r in sel])
            fmt = lambda x: "undefined (a constant term)" if x is None else f"{x:+.2f}"  # noqa: E731
            print(f"Spearman, {label} (n={len(sel)}): rho(f10/M, R/M-1) {fmt(rho)}; rho(f10, M-A) {fmt(rho_d)}")
    print("\nwhere each group's launch facts are read:")
    for prefix, group, torch, alloc, where in SOURCES:
        print(f"  {prefix:18s} torch {torch}; allocator {alloc}: {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
