"""Edits that keep a launch script's ``#SBATCH`` header in step with a tuned node / GPU count.

sbatch reads its directives from the comment lines before the script's first command (Slurm 24.05
sbatch(1) "Options may be specified ... with #SBATCH ... before any executable commands";
:func:`megatron_bash.sbatch_header` reads them so).  The writers of launch scripts (:mod:`megatron`,
:mod:`torchtitan_script`) change the launcher's counts; a header still asking for the old allocation would
start the job on the old node count.  The directives that state a count are rewritten where they are
numbers:

- ``-N`` / ``--nodes``: the node count (a ``min-max`` range becomes the one count);
- ``--gpus-per-node`` and ``--gres=gpu[:type]:N``: the GPUs per node;
- ``--ntasks-per-node``: kept where it was one task per node (torchrun starts the node's processes),
  else (one task per GPU: srun starts every rank) the new GPUs per node;
- ``-n`` / ``--ntasks``: the job's tasks, nodes x the tasks per node above.

A directive that is no number (a template placeholder) is left as written; the reader notes those.
"""

from __future__ import annotations

import re

from primus_launch.adapters.launcher_counts import launcher_count, slurm_option

_SBATCH = re.compile(r"^(\s*#SBATCH\s+)(.*)$")
_GRES_GPU = re.compile(r"((?:^|,)gpu(?::[^:,]+)?:)(\d+)")


def _directives(text: str) -> list[tuple[str, int, int, str | None]]:
    """(option, start and end of its value in ``text``, the value) of each ``#SBATCH`` word of the header."""
    out: list[tuple[str, int, int, str | None]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        st = line.strip()
        if st and not st.startswith("#"):
            break
        m = _SBATCH.match(line.rstrip("\n"))
        if m:
            body = m.group(2).split("#", 1)[0]
            words = [(w.group(0), pos + m.start(2) + w.start()) for w in re.finditer(r"\S+", body)]
            for i, (w, at) in enumerate(words):
                key, eq, val = slurm_option(w)
                if eq:
                    start = at + len(w) - len(val)
                    out.append((key, start, at + len(w), val))
                elif i + 1 < len(words) and not words[i + 1][0].startswith("-"):
                    nxt, nat = words[i + 1]
                    out.append((key, nat, nat + len(nxt), nxt))
        pos += len(line)
    return out


def sbatch_count_edits(text: str, nodes: int, gpus_per_node: int) -> list[tuple[int, int, str]]:
    """(start, end, new value) edits of the header's count directives (module doc) for ``nodes`` x
    ``gpus_per_node``; none where the header already states them or states none."""
    dirs = _directives(text)
    num = {k: launcher_count(v, "-") for k, _, _, v in dirs if v is not None and k != "--gres"}
    old_nodes = next((num[k] for k in ("-N", "--nodes") if num.get(k)), 1)
    old_gpus = next((num[k] for k in ("--gpus-per-node",) if num.get(k)), None)
    for k, _, _, v in dirs:
        g = _GRES_GPU.search(v or "") if k == "--gres" else None
        if g and old_gpus is None:
            old_gpus = int(g.group(2))
    tpn_old = num.get("--ntasks-per-node")
    if tpn_old is None:
        tasks = next((num[k] for k in ("-n", "--ntasks") if num.get(k)), None)
        tpn_old = tasks // old_nodes if tasks and tasks % old_nodes == 0 else None
    # one task per GPU (srun starts the ranks) follows the GPU count; one per node stays one
    per_gpu = tpn_old is not None and tpn_old > 1 and tpn_old == old_gpus
    tpn = gpus_per_node if per_gpu else tpn_old
    edits: list[tuple[int, int, str]] = []
    for k, a, b, v in dirs:
        new: str | None = None
        if k in ("-N", "--nodes") and num.get(k) is not None:
            new = str(nodes)
        elif k == "--gpus-per-node" and num.get(k) is not None:
            new = str(gpus_per_node)
        elif k == "--gres" and v:
            g = _GRES_GPU.search(v)
            if g:
                a, b, new = a + g.start(2), a + g.end(2), str(gpus_per_node)
        elif k == "--ntasks-per-node" and num.get(k) is not None and tpn is not None:
            new = str(tpn)
        elif k in ("-n", "--ntasks") and num.get(k) is not None and tpn is not None:
            new = str(nodes * tpn)
        if new is not None and text[a:b] != new:
            edits.append((a, b, new))
    return edits


__all__ = ["sbatch_count_edits"]
