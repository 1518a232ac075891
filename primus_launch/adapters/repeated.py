"""Options a command gives more than once with different values (``--num-layers 32 ... --num-layers 16``,
``--parallelism.tensor_parallel_degree 2 ... =4``).  argparse keeps the last occurrence without a word
(``argparse._StoreAction`` overwrites the namespace attribute: Megatron-LM's ``parse_args``, torchrun's
``get_args_parser``, torchtitan's tyro parser built on argparse), so the reader reads the last too; the note
names every value, as a YAML key given twice is named (:func:`primus_launch.inputs.duplicate_keys`): a
script that appends an override after its defaults reads as intended, a pasted second flag is seen."""

from __future__ import annotations

from collections.abc import Iterable


def repeated_notes(pairs: Iterable[tuple[str, str]], parser: str) -> list[str]:
    """One note per option of ``pairs`` ((option, value as written), in command order) given more than once
    with different values; ``parser`` names the program whose parser keeps the last."""
    seen: dict[str, list[str]] = {}
    for option, value in pairs:
        seen.setdefault(option, []).append(value)
    return [f"{option} given {len(vals)} times with different values ({', '.join(repr(v) for v in vals)}): "
            f"{parser}'s argparse keeps the last, {vals[-1]!r} is read"
            for option, vals in seen.items() if len(set(vals)) > 1]
