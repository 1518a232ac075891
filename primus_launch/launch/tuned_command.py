"""The command a tuned recipe file is launched with: the user's own training command after ``--`` (``--tune
run_config.yaml --launch -- sbatch train.sbatch`` is not it; ``-- torchrun ... run_recipe.py --config-file
run_config.yaml`` is), with the words that name the recipe file pointed at the tuned file.  A command that names
the recipe nowhere would launch the original recipe, not the tuned one: :func:`recipe_words` finds none, and the
CLI refuses it before the search."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence


def _named_path(word: str) -> tuple[str, str]:
    """(prefix, path) of a command word: ``--config-file=x.yaml`` -> (``--config-file=``, ``x.yaml``); a bare
    word is all path."""
    if word.startswith("-") and "=" in word:
        head, _, tail = word.partition("=")
        return head + "=", tail
    return "", word


def _same_file(a: str, b: str | os.PathLike) -> bool:
    try:
        return bool(a) and os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):  # a NUL or an over-long word names no file
        return False


def recipe_words(command: Sequence[str], recipe: str | os.PathLike) -> list[int]:
    """Indices of the words of ``command`` that name the file ``recipe`` (the same real path, from the current
    folder: a word ``run_config.yaml``, ``./run_config.yaml``, ``/abs/run_config.yaml`` or ``--config-file=...``)."""
    return [i for i, w in enumerate(command) if _same_file(_named_path(w)[1], recipe)]


def with_tuned_recipe(command: Sequence[str], recipe: str | os.PathLike, tuned: str | os.PathLike) -> list[str]:
    """``command`` with every word naming ``recipe`` naming ``tuned`` instead: its folder as the word wrote it
    where the tuned file lies beside the recipe (``run_config.yaml`` -> ``run_config.tuned.yaml``), else
    ``tuned`` as given (``--out`` elsewhere)."""
    out = list(command)
    for i in recipe_words(command, recipe):
        prefix, path = _named_path(out[i])
        beside = Path(os.path.realpath(tuned)).parent == Path(os.path.realpath(recipe)).parent
        new = os.path.join(os.path.dirname(path), Path(tuned).name) if beside else str(tuned)
        out[i] = prefix + new
    return out
