"""TorchTitan commands that name a job TOML (``torchrun ... -m torchtitan.train --job.config_file
llama3_8b.toml --training.steps 10``: torchtitan <= 0.2): where the TOML path and the command's
``--section.key`` overrides are, the TOML text with those overrides written in (the command wins over
the file in torchtitan's ``ConfigManager``), and the plan of such a command.  Shared by the command
reader (``command_recipe``) and the launch-script reader (``torchtitan_script``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from primus_launch.adapters.torchrun_argv import cluster_overrides, command_cluster, default_gpu_note, split_torchrun
from primus_launch.errors import UserError
from primus_launch.plan import Plan

CONFIG_FLAGS = ("--job.config_file", "--job.config-file")


def config_index(argv: list[str]) -> Optional[int]:
    """Index of the ``--job.config_file`` token (value in the same token after ``=`` or the next)."""
    for i, tok in enumerate(argv):
        name = tok.split("=", 1)[0]
        if name in CONFIG_FLAGS:
            return i
    return None


def config_path(argv: list[str], i: int) -> tuple[str, int]:
    tok = argv[i]
    if "=" in tok:
        return tok.split("=", 1)[1], i
    if i + 1 >= len(argv):
        raise UserError(f"{tok}: missing the TOML path")
    return argv[i + 1], i + 1


def program_args(argv: list[str]) -> tuple[int, list[str]]:
    tr = split_torchrun(argv)
    if tr is None:
        return 0, argv
    start = len(argv) - len(tr.program)
    return start, tr.program


def _bool_key(section: str, key: str) -> tuple[str, bool] | None:
    """(the key, negated) of a boolean field a ``--section.key`` / ``--section.no-key`` names (its type in
    :data:`titan_job_types.JOB_TYPES`), else None."""
    from primus_launch.adapters.titan_job_types import JOB_TYPES

    norm = key.replace("-", "_")
    if JOB_TYPES.get(f"{section}.{norm}") == "bool":
        return key, False
    if norm.startswith("no_") and JOB_TYPES.get(f"{section}.{norm[3:]}") == "bool":
        return key[3:], True
    return None


def job_overrides(argv: list[str]) -> list[tuple[int, int, str, str, Optional[str]]]:
    """``--section.key value`` / ``--section.key=value`` / bare ``--section.key`` (true) tokens of the
    training program, as (first token, last token, section, key, raw value).  A boolean field is a flag pair, as
    torchtitan's parser (tyro, v0.1 to v0.3) builds it: ``--compile.enable`` (true), ``--compile.no-enable``
    (false, key ``enable``); a value given to it (``--compile.enable=False``, ``--compile.enable false``) is refused
    as tyro refuses it, and so is any other word no option takes."""
    from primus_launch.plan import PlanError

    start, prog = program_args(argv)
    out = []
    at = next((j for j, t in enumerate(prog) if t == "torchtitan.train" or t.endswith("train.py")), None)
    i = 0 if at is None else at + 1  # the trainer's own words follow the program (torchtitan.train, train.py)
    while i < len(prog):
        tok = prog[i]
        if tok.startswith("--") and "." in tok.split("=", 1)[0]:
            name, eq, val = tok[2:].partition("=")
            if name.replace("-", "_") in ("job.config_file",):
                i += 1 if eq else 2
                continue
            section, _, key = name.partition(".")
            flag = _bool_key(section, key)
            if flag is not None:
                key, negated = flag
                pair = f"--{section}.{key} or --{section}.no-{key.replace('_', '-')}"
                if eq:
                    raise PlanError(f"--{name}", val, f"no value: torchtitan's parser (tyro) takes a boolean as a flag, "
                                                      f"{pair} (it refuses --{name}={val})")
                if i + 1 < len(prog) and not prog[i + 1].startswith("-"):
                    raise PlanError(f"--{name}", prog[i + 1], f"no value: torchtitan's parser (tyro) takes a boolean as a "
                                                              f"flag, {pair} (it refuses the word after it)")
                out.append((start + i, start + i, section, key, "false" if negated else None))
                i += 1
                continue
            if eq:
                out.append((start + i, start + i, section, key, val))
                i += 1
            elif i + 1 < len(prog) and not prog[i + 1].startswith("--"):
                out.append((start + i, start + i + 1, section, key, prog[i + 1]))
                i += 2
            else:
                out.append((start + i, start + i, section, key, None))
                i += 1
        elif tok.startswith("-"):
            i += 1  # a flag of its own (--module, --config): torchtitan's to judge
        elif at is None:
            i += 1
        else:  # tyro: 'Unrecognized arguments'
            raise UserError(f"command: unexpected argument {tok!r} (torchtitan takes --section.key options, each with "
                            "one value, a boolean with none)")
    return out


#: keys whose ``Literal`` tyro enforces on the command line only: a TOML's value becomes a tyro default, kept
#: unchecked (torchtitan v0.2.2 ``config/manager.py``), and the reader takes the values that then run
#: (:func:`primus_launch.adapters.torchtitan._mixed_precision_reduce`)
CLI_CHOICES: dict[str, tuple[str, ...]] = {"training.mixed_precision_reduce": ("float32",)}


def typed_override(raw: Optional[str], current: Any, where: str, path: Optional[str] = None) -> Any:
    """The TOML value of a command-line override, typed like the value it replaces (a key the job does not
    write: like torchtitan v0.2.2's annotation of ``path``, :data:`titan_job_types.JOB_TYPES`, where listed)."""
    if raw is None:
        return True
    allowed = CLI_CHOICES.get(path or "")
    if allowed is not None and raw not in allowed:  # tyro checks a command line's value against the Literal
        raise UserError(f"{where}={raw!r}: one of {', '.join(allowed)} on a command line (tyro refuses any other; "
                        "a TOML's value is kept)")
    if current is None and path is not None:
        from primus_launch.adapters.titan_job_types import JOB_TYPES

        kind = JOB_TYPES.get(path)
        current = {"strs": [], "bool": False, "int": 0, "float": 0.0}.get(kind) if isinstance(kind, str) else None
    number = isinstance(current, (int, float)) and not isinstance(current, bool)
    # `--training.local_batch_size True`: tyro parses an int field with int() and refuses the word (exit 2), as it
    # refuses None for a field that is not `X | None`; it was typed a boolean and refused as the TOML key's value
    if isinstance(current, bool) or (raw.lower() in ("true", "false") and not number):
        if raw.lower() not in ("true", "false"):
            raise UserError(f"{where}={raw!r}: expected true or false")
        return raw.lower() == "true"
    if isinstance(current, list):
        return [x.strip() for x in raw.split(",") if x.strip()]
    for cast in (int, float):
        if isinstance(current, cast) or current is None:
            try:
                return cast(raw)
            except ValueError:
                if current is not None:
                    raise UserError(f"{where}={raw!r}: expected {'an integer' if cast is int else 'a number'}"
                                    + (" (or None)" if path in _optional() else "")) from None
    return raw


def _optional() -> frozenset[str]:
    from primus_launch.adapters.titan_job_types import optional_keys

    return optional_keys()


def text_with_overrides(text: str, overrides: list[tuple[int, int, str, str, Optional[str]]],
                               path: str) -> str:
    """The TOML text with the command's overrides written in (tomlkit keeps comments and order)."""
    if not overrides:
        return text
    import tomlkit

    from primus_launch.inputs import parse_toml

    parse_toml(text, "recipe", path)  # the input boundary: syntax and nesting as one line
    try:
        doc = tomlkit.parse(text)
    except Exception as e:  # tomlkit raises its own ParseError subclasses
        raise UserError(f"recipe={path!r}: malformed TOML: {e}") from None
    for _, _, section, key, raw in overrides:
        # ``--quantize.linear.float8.recipe_name``: every dot a level of the job's nesting, ``-`` read as ``_`` (tyro)
        *path, leaf = override_path(section, key)
        tbl = doc
        for part in path:
            if not isinstance(tbl.get(part), dict):
                tbl[part] = tomlkit.table()
            tbl = tbl[part]
        if raw == "None" and ".".join([*path, leaf]) in _optional():
            # tyro takes the word None for an ``X | None`` field (torchtitan v0.2.2); a TOML cannot hold it: the key
            # is dropped (v0.2.2's default of these keys; none of them is read into the plan)
            tbl.pop(leaf, None)
            continue
        tbl[leaf] = typed_override(raw, tbl.get(leaf), f"--{section}.{key}", ".".join([*path, leaf]))
    return tomlkit.dumps(doc)


def override_path(section: str, key: str) -> list[str]:
    """The job's nested keys an override ``--section.key`` sets (``quantize.linear.float8.recipe_name``: four)."""
    return [part.replace("-", "_") for part in f"{section}.{key}".split(".")]


def job_value(job: dict, section: str, key: str) -> Any:
    """The value at an override's nested keys in a parsed job (None when absent)."""
    node: Any = job
    for part in override_path(section, key):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def plan_from_job_command(argv: list[str], overrides: Optional[dict] = None) -> Plan:
    """The plan of a command naming a job TOML: the TOML (a path relative to the current folder, as
    torchrun runs it) under the command's overrides, on torchrun's cluster (``overrides`` win)."""
    from primus_launch.adapters.torchtitan import cluster_from_header, plan_from_text
    from primus_launch.fileio import read_recipe_text

    ov = cluster_overrides(overrides)
    cfg, _ = config_path(argv, config_index(argv))
    from primus_launch.inputs import file_name

    # the input boundary names what is there instead of a file (a folder, a device, a named pipe, nothing)
    path = Path(file_name(cfg, "--job.config_file", "a TOML file name"))
    given = job_overrides(argv)
    text = text_with_overrides(read_recipe_text(path, "--job.config_file"), given, cfg)
    header = cluster_from_header(text)
    cluster = command_cluster(argv, ov, header.gpu if header else None)
    plan = plan_from_text(text, cluster, str(path))
    if cluster is None and ov:
        plan = plan.with_changes(cluster=ov)
    note = default_gpu_note(cluster, ov) if cluster is not None and header is None else None
    if cluster is not None and header is not None and "gpu" not in ov:  # the header's GPU, the launch's count
        note = (f"cluster gpu={cluster.gpu}: from the TOML's header comment (a preset for {header.world_size} "
                f"GPUs); the GPU count is the launch's, {cluster.world_size} (give --gpu for another GPU)")
    if note is not None and plan.source is not None:  # torchrun's counts, the GPU kind nowhere
        plan.source.notes.append(note)
    from primus_launch.adapters.repeated import repeated_notes

    said = repeated_notes(((f"--{sec}.{key}", "true" if raw is None else raw) for _, _, sec, key, raw in given),
                          "torchtitan")
    if said and plan.source is not None:
        plan.source.notes.extend(said)
    return plan
