"""How launchers write a run's node and process counts, for the readers of launch scripts and commands
(:mod:`megatron_script`, :mod:`megatron_bash`'s ``#SBATCH`` header, :mod:`primus_cli`,
:mod:`torchtitan_script`, :mod:`torchrun_argv`).

- :func:`slurm_option`: one word of an ``srun`` / ``sbatch`` command or ``#SBATCH`` directive split into
  (option, ``=``, value): ``--nodes=4``, and getopt's attached short form ``-N4`` / ``-n32`` (Slurm's short
  options take their argument attached or as the next word).
- :func:`launcher_count`: a count as the launchers accept it: digits, or a range whose upper bound is the
  run's size (torchrun ``--nnodes MIN:MAX``, ``torch.distributed.run`` ``parse_min_max_nnodes``; srun /
  sbatch ``--nodes=<minnodes>[-maxnodes]``), from 1 to 999,999,999.
"""

from __future__ import annotations

import re
from typing import Optional

#: the largest count read (9 digits); the plan's own limits (``cluster.num_nodes``) are far below
MAX_COUNT = 999_999_999


#: the short options of srun / sbatch (Slurm 24.05 srun(1), sbatch(1)) that take an argument (required or
#: optional), which getopt reads attached (``-N4``, ``-n32``) or as the next word
SLURM_SHORT_WITH_ARG = frozenset("ABCDGJLMNSTWbcdeimnopqrtwx")


def slurm_option(word: str) -> tuple[str, str, str]:
    """(option, ``"="`` or ``""``, value) of one word of a Slurm command line: ``--nodes=4`` ->
    (``--nodes``, ``=``, ``4``); ``-N4`` -> (``-N``, ``=``, ``4``), ``-n32`` -> (``-n``, ``=``, ``32``) (the argument
    attached to a short option of :data:`SLURM_SHORT_WITH_ARG`: all that follows the letter); any other word
    ``w`` -> (``w``, ``""``, ``""``) when it has no ``=``."""
    if len(word) > 2 and word[0] == "-" and word[1] in SLURM_SHORT_WITH_ARG:
        return word[:2], "=", word[2:]
    return word.partition("=")


def launcher_count(text: str, ranges: str = ":-") -> Optional[int]:
    """The count ``text`` states (surrounding blanks allowed): digits, or ``MIN<sep>MAX`` with a separator
    of ``ranges`` (``:`` torchrun's elastic node range, ``-`` Slurm's), read as its upper bound, the size the
    run may reach; None unless a whole number from 1 to :data:`MAX_COUNT` (zero, a sign, a variable or a
    placeholder is no count a launcher starts a run with).  A range whose MIN exceeds its MAX is None (torch
    ``torch.distributed.run.config_from_args`` raises unless ``0 < min_nodes <= max_nodes``; Slurm's
    ``verify_node_count``, src/common/proc_args.c: "Maximum node count %d is less than minimum node count %d"),
    and so is a torchrun range from 0."""
    seps = "".join(re.escape(c) for c in ranges)
    m = re.fullmatch(rf"\s*([0-9]{{1,18}})(?:([{seps}])([0-9]{{1,18}}))?\s*", text) if seps else \
        re.fullmatch(r"\s*([0-9]{1,18})\s*", text)
    if not m:
        return None
    n = int(m.group(m.lastindex))
    if m.lastindex == 3:  # a range: the launchers refuse MIN > MAX, and torchrun a MIN of 0
        lo = int(m.group(1))
        if lo > n or (m.group(2) == ":" and lo < 1):
            return None
    return n if 1 <= n <= MAX_COUNT else None


#: what :func:`launcher_count` takes, for the error lines of the readers that call it
COUNT_WORDS = "an integer from 1 to 999,999,999, or a range MIN:MAX (torchrun, 1 <= MIN <= MAX) / MIN-MAX (Slurm)"


#: a command substitution that asks the node it runs on for its GPU count: ``python -c "import torch;
#: print(torch.cuda.device_count())"`` (ROCm/Megatron-LM branch scripts, Pai-Megatron-Patch's
#: ``${KUBERNETES_CONTAINER_RESOURCE_GPU:-$(python -c ...)}``), ``nvidia-smi -L | wc -l`` / ``nvidia-smi
#: --list-gpus | wc -l`` (one line per GPU, nvidia-smi(1)); only the whole substitution, ``$(...)`` or backquoted
_NODE_GPU_QUERY = re.compile(
    r"""(?:\$\(|`)\s*(?:python3?\s+-c\s+(["'])\s*import\s+torch\s*[;\n]\s*print\(\s*torch\.cuda\.device_count\(\)\s*\)\s*\1"""
    r"""|nvidia-smi\s+(?:-L|--list-gpus)(?:\s+2>\s*/dev/null)?\s*\|\s*wc\s+-l)\s*(?:\)|`)""")


def is_node_gpu_query(source: str) -> bool:
    """Whether ``source`` (a command substitution as the script writes it) prints the GPU count of the node
    it runs on (:data:`_NODE_GPU_QUERY`): a processes-per-node count taken from it means "every GPU of the
    node", which is the cluster's ``gpus_per_node`` (given, commented or the default), not a number in the
    recipe."""
    return bool(_NODE_GPU_QUERY.fullmatch(source.strip()))
