"""The input boundary: every file and value the user hands primus-launch is read, decoded, parsed
and size-checked here, and any failure becomes the project's one line (field, value, what is
allowed; the CLI exits 2) -- never a traceback, never an unbounded parse.

- :func:`read_text`: a file as UTF-8 text: at most :data:`MAX_INPUT_BYTES`; a UTF-8 byte-order
  mark is dropped; UTF-16 / UTF-32 (by their byte-order marks or their NUL pattern), binary content
  (NUL bytes) and invalid UTF-8 are refused with the offending byte's line and column.  Inside a
  :func:`run` (the CLI's), every file read is remembered (:func:`inputs_read`), so that no output of
  the run can name it (:func:`refuse_input`, :func:`check_output`).
- :func:`parse_yaml` / :func:`parse_toml`: the parsers of the formats, with their errors,
  nesting beyond what the parser can take and structures beyond :data:`MAX_DEPTH` levels or
  :data:`MAX_VALUES` values (YAML aliases counted where they are used: an alias "bomb" is refused,
  not expanded) turned into one line.
- :func:`expect`: a parsed value of the wrong type (``path = 42``, a list where a table belongs).
- :func:`check_output`: an output path that is an input of the run (same real path, or the same
  file through a hard link: ``st_dev`` / ``st_ino``), a folder, or in a folder the user cannot write
  (the CLI checks every output before any work; :func:`primus_launch.fileio.atomic_write_text`
  refuses an input again at the write).
- :func:`find_from_run_root`: a file a recipe names relative to its framework's checkout root.
- argparse types (:func:`finite_float`, :func:`bounded_int`, :func:`token_count`) for the command line's
  numbers.

The limits are far above any real recipe: the largest launch script or config in Megatron-LM's,
Primus's and TorchTitan's trees is 31 KB (a Primus YAML), and configs nest a few levels.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from primus_launch.errors import UserError

MAX_INPUT_BYTES = 256 * 1024   # per file read: 8x the largest recipe in the frameworks' trees (31 KB)
MAX_DEPTH = 64                 # nesting of YAML / TOML values (recipes nest a few levels)
MAX_VALUES = 200_000           # values in one parsed file, YAML aliases counted at every use

_READ: dict[str, tuple[str, Optional[tuple[int, int]]]] = {}   # realpath -> (field, (st_dev, st_ino))
_TRACKING = False   # inputs are remembered inside :func:`run` (the CLI's run) only


# ---------------------------------------------------------------------------------------- reading
def _limit_text(n: int) -> str:
    return f"{n:,} bytes ({n // 1024} KiB)"


def _where(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line}, column {col}"


def decode(data: bytes, field: str, value: object) -> str:
    """``data`` as UTF-8 text, or a :class:`UserError` saying what the bytes are instead."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        raise UserError(f"{field}={value!r}: UTF-32 text; save it as UTF-8")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UserError(f"{field}={value!r}: UTF-16 text; save it as UTF-8")
    nul = data.find(b"\x00")
    if nul >= 0:
        head = data[:64]
        even, odd = head[0::2], head[1::2]

        def text_and_nul(a: bytes, z: bytes) -> bool:  # one byte of each pair ASCII text, the other NUL
            return z.count(0) >= len(z) * 3 // 4 and sum(9 <= c < 127 for c in a) >= len(a) * 3 // 4

        if len(head) >= 4 and (text_and_nul(even, odd) or text_and_nul(odd, even)):
            raise UserError(f"{field}={value!r}: UTF-16 text (no byte-order mark); save it as UTF-8")
        raise UserError(f"{field}={value!r}: a binary file (NUL byte at {_where(data, nul)}); expected UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{field}={value!r}: not UTF-8 text (byte 0x{data[e.start]:02x} at "
                        f"{_where(data, e.start)}); save it as UTF-8") from None


def check_written_path(path: str | Path, field: str = "recipe") -> None:
    """Refuse a path as written that the kernel refuses (``r.sh/``, ``r.sh/.``: a file named as a folder), as the shell
    does ("Not a directory"); :class:`~pathlib.Path` drops the trailing ``/`` and read the file ``r.sh``."""
    if not isinstance(path, str) or not path.rstrip().endswith(("/", "/.")):
        return
    try:
        os.stat(path)
    except NotADirectoryError:
        raise UserError(f"{field}={path!r}: Not a directory (a trailing '/' names a folder; "
                        f"{path.rstrip().rstrip('/.').rstrip('/') or path!r} is a file: write it without the '/')") from None
    except (OSError, ValueError):
        return


def read_bytes(path: str | Path, field: str = "recipe", limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a user's file (at most ``limit``), remembered as an input of the run."""
    check_written_path(path, field)
    p = Path(path)
    shown = str(p)
    try:
        if p.is_dir():
            raise UserError(f"{field}={shown!r}: a folder; expected a file")
        if not p.is_file():
            what = _not_a_file(p)
            raise UserError(f"{field}={shown!r}: {what}" + ("; expected a regular file" if what != "no such file"
                                                             else ""))
        with open(p, "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read(limit + 1)
    except UserError:
        raise
    except (OSError, ValueError) as e:
        raise UserError(f"{field}={shown!r}: cannot read: {e.strerror or e}" if isinstance(e, OSError)
                        else f"{field}={shown!r}: cannot read: {e}") from None
    remember(p, field, (st.st_dev, st.st_ino))
    if len(data) > limit:
        size = max(st.st_size, len(data))
        raise UserError(f"{field}={shown!r}: {size:,} bytes; at most {_limit_text(limit)} are read "
                        f"(recipes are a few KB)")
    return data


def _not_a_file(p: Path) -> str:
    """What a path that is neither a folder nor a regular file is, in words (never opened: a named
    pipe would block, a device could be endless)."""
    import stat

    try:
        mode = os.stat(p).st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a loop of symbolic links"
        if isinstance(e, FileNotFoundError) and os.path.islink(p):
            return f"a symbolic link to {os.readlink(p)!r}, which does not exist"
        return "no such file" if isinstance(e, (FileNotFoundError, NotADirectoryError)) else \
            f"cannot read: {e.strerror or e}"
    except ValueError as e:  # an embedded NUL character
        return f"not a file name ({e})"
    for test, words in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def not_a_file(path: str | Path) -> str:
    """What ``path``, which is no regular file, is in words ("no such file", "a named pipe", "a folder", "a loop
    of symbolic links", ...), for readers that skip such a name with a note instead of refusing it."""
    p = Path(path)
    try:
        if p.is_dir():
            return "a folder"
    except (OSError, ValueError):
        pass
    return _not_a_file(p)


def read_text(path: str | Path, field: str = "recipe", limit: int = MAX_INPUT_BYTES) -> str:
    """A user's file as text: size-checked, decoded as UTF-8 (see the module docstring)."""
    return decode(read_bytes(path, field, limit), field, str(path))


# ----------------------------------------------------------------------------- inputs of the run
def _real(p: Path) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(p)))


def remember(path: str | Path, field: str, ident: Optional[tuple[int, int]] = None) -> None:
    """Note ``path`` as an input of this run (``field``: what it was, for the refusal's line);
    a no-op outside :func:`run`."""
    if not _TRACKING:
        return
    p = Path(path)
    if ident is None:
        try:
            st = os.stat(p)
            ident = (st.st_dev, st.st_ino)
        except OSError:
            ident = None
    _READ.setdefault(_real(p), (field, ident))


MAX_NAMED_FOLDER_FILES = 256   # files of a named folder (a Hugging Face assets folder holds a dozen) kept as inputs


def remember_named(path: object, field: str) -> None:
    """Keep ``path``, a file or folder a recipe names for its training run to read (a tokenizer, a Hugging Face
    assets folder) but this run need not read, as an input (:func:`remember`): no output may replace it.  A folder:
    the regular files directly in it (at most :data:`MAX_NAMED_FOLDER_FILES`; a checkpoint tree is not walked).
    Anything else (no such path, a name the kernel cannot take, not a string) is left alone: the reader judges it."""
    if not _TRACKING or not isinstance(path, str) or not path:
        return
    try:
        p = Path(path).expanduser()
        if p.is_file():
            remember(p, field)
        elif p.is_dir():
            with os.scandir(p) as it:
                for k, e in enumerate(it):
                    if k >= MAX_NAMED_FOLDER_FILES:
                        break
                    if e.is_file():
                        remember(e.path, field)
    except (OSError, ValueError):
        return


def inputs_read() -> dict[str, str]:
    """Real path -> field of every file read through this module in the current :func:`run`."""
    return {k: v[0] for k, v in _READ.items()}


@contextlib.contextmanager
def run() -> Iterator[None]:
    """One run of the tool (the CLI's): the files read inside it are its inputs, which no output
    of the run may name; forgotten when it ends.  Library calls outside a run track nothing."""
    global _TRACKING
    _READ.clear()
    _TRACKING = True
    try:
        yield
    finally:
        _TRACKING = False
        _READ.clear()


def input_named_by(path: str | Path) -> Optional[str]:
    """The field of the input ``path`` resolves to (real path or hard link), None when none."""
    real = _real(Path(path))
    if real in _READ:
        return _READ[real][0]
    try:
        st = os.stat(real)
    except OSError:
        return None
    for field, ident in _READ.values():
        if ident == (st.st_dev, st.st_ino):
            return field
    return None


def refuse_input(path: str | Path, field: str, extra_inputs: Iterable[tuple[str, str | Path | None]] = ()) -> None:
    """A :class:`UserError` when ``path`` resolves to an input of the run (or to one of
    ``extra_inputs``: (what, path)): same real path, or the same file through a hard link."""
    p = Path(path)
    hit = input_named_by(p)
    if hit is None:
        try:
            st = os.stat(p)
        except OSError:
            st = None
        for what, other in extra_inputs:
            if other is None:
                continue
            if _real(p) == _real(Path(other)):
                hit = what
                break
            try:
                so = os.stat(other)
            except OSError:
                continue
            if st is not None and (so.st_dev, so.st_ino) == (st.st_dev, st.st_ino):
                hit = what
                break
    if hit is not None:
        raise UserError(f"{field}={str(path)!r}: is an input of this run ({hit}); refusing to overwrite an input "
                        "(choose another path)")
    code = program_file(p)
    if code is not None:
        raise UserError(f"{field}={str(path)!r}: is a file of the running program ({code}); refusing to overwrite "
                        "it (choose another path)")


def program_file(path: str | Path) -> Optional[str]:
    """What part of the running program ``path`` is -- the interpreter, or the file of a module it imported
    (primus_launch's own, pydantic's, ...), by the same file (``st_dev`` / ``st_ino``: a link or another
    spelling too) -- None when none or when ``path`` is no existing file.  The run read those files as well:
    an output written over one (``--report primus_launch/cli.py``) breaks the tool for every later run."""
    import stat
    import sys

    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    ident = (st.st_dev, st.st_ino)
    named = [("the Python interpreter", sys.executable)]
    named += [(f"module {name}", getattr(m, "__file__", None)) for name, m in list(sys.modules.items())]
    for what, f in named:
        if not isinstance(f, str) or not f:
            continue
        try:
            so = os.stat(f)
        except (OSError, ValueError):
            continue
        if (so.st_dev, so.st_ino) == ident:
            return what
    return None


def check_output(path: str | Path, field: str, extra_inputs: Iterable[tuple[str, str | Path | None]] = ()) -> Path:
    """Refuse, before any work, an output path that is an input of the run (:func:`refuse_input`),
    a folder, an existing name that is no regular file (a device, a named pipe: the atomic write
    would replace it, not write to it), a name leading into ``/proc`` (``/dev/stdout``: :func:`_through_proc`), a
    dangling or looping symbolic link, or in a folder that cannot be written; returns the path.  A symbolic link to a
    regular file is written through (:func:`primus_launch.fileio.atomic_write_text`): its folder is the one checked."""
    shown = str(path)
    # 'x/', '.', '..', 'x/.': a folder by its spelling (pathlib reads 'x/.' as 'x' and '.' has no name to end
    # in .trials.json), whether or not it exists
    if not shown or shown.endswith(os.sep) or os.path.basename(shown) in (".", ".."):
        raise UserError(f"{field}={shown!r}: a file name; not a folder")
    if shown == "-":  # the shell tools' "standard output": here it would be a file named '-'
        raise UserError(f"{field}='-': a file name (the output is written atomically to a file, never to standard "
                        "output; write ./- for a file of that name)")
    p = Path(path)
    try:
        refuse_input(p, field, extra_inputs)
        hop = _through_proc(p)
        if hop is not None:  # /dev/stdout -> /proc/self/fd/1: the rename would replace the link itself
            raise UserError(f"{field}={shown!r}: names an open file of this process ({hop}), not a file name; the "
                            "output is written atomically (a new file renamed over the name): give a regular file's "
                            "path")
        if os.path.islink(p) and not p.exists():
            raise UserError(f"{field}={shown!r}: {_not_a_file(p)}; give a regular file's path")
        if p.is_dir():
            raise UserError(f"{field}={shown!r}: a folder; give a file name")
        if p.exists() and not p.is_file():  # through a symbolic link too (/dev/stdout)
            raise UserError(f"{field}={shown!r}: {_not_a_file(p)}; the output is written atomically (a new file "
                            "renamed over the name): give a regular file's path")
        if p.is_file() and (not os.access(p, os.W_OK) or not p.stat().st_mode & 0o222):
            # the rename would replace it all the same (it needs only the folder's write permission)
            raise UserError(f"{field}={shown!r}: an existing read-only file (mode {p.stat().st_mode & 0o777:04o}); "
                            "make it writable or choose another path")
        probe = Path(os.path.realpath(p) if os.path.islink(p) else os.path.abspath(p)).parent  # written there
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
    except OSError as e:  # a name too long, ...
        raise UserError(f"{field}={shown!r}: not a usable output path: {e.strerror or e}") from None
    except ValueError as e:  # an embedded NUL character
        raise UserError(f"{field}={shown!r}: not a usable output path: {e}") from None
    if not probe.is_dir():
        raise UserError(f"{field}={shown!r}: {str(probe)!r} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{field}={shown!r}: folder {str(probe)!r} is not writable")
    why = _cannot_create_in(probe)
    if why:  # root passes os.access everywhere; a read-only mount, /proc, /sys refuse only an actual write
        raise UserError(f"{field}={shown!r}: cannot create a file in folder {str(probe)!r} ({why})")
    return p


def _through_proc(p: Path) -> Optional[str]:
    """The ``/proc`` path an output name leads to through symbolic links (``/dev/stdout`` -> ``/proc/self/fd/1``,
    ``/dev/fd/2``), else None: such a name is an open file of the process, and an atomic write (a new file renamed
    over the name) would replace the link -- as root, ``/dev/stdout`` itself, for every process of the machine --
    while the file it names is never written."""
    cur = os.path.abspath(p)
    for hops in range(40):  # the kernel's own limit on links followed
        parent = os.path.realpath(os.path.dirname(cur))
        linked = hops > 0 or parent != os.path.normpath(os.path.dirname(cur))
        cur = os.path.join(parent, os.path.basename(cur))
        if linked and (parent == "/proc" or parent.startswith("/proc/")):  # (a /proc path as written: not a folder
            return cur                                                       # a file can be created in, said apart)
        if not os.path.islink(cur):
            return None
        cur = os.path.join(parent, os.readlink(cur))
    return None


def _cannot_create_in(folder: Path) -> Optional[str]:
    """Why a new file cannot be created in ``folder`` (None: it can): tried with a temp file, removed at once
    (``os.access`` answers from the permission bits -- always yes for root -- not from the mount or the file
    system: a read-only mount, ``/proc``, ``/sys`` refuse only the write itself)."""
    import tempfile

    from primus_launch import interrupt

    with interrupt.deferred():  # a signal here is raised once the probe file is gone
        try:
            fd, tmp = tempfile.mkstemp(prefix=".primus-launch-probe.", dir=folder)
        except OSError as e:
            return e.strerror or str(e)
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return None


# ---------------------------------------------------------------------------------------- parsing
def check_structure(obj: Any, field: str, value: object) -> Any:
    """Refuse a parsed value nested deeper than :data:`MAX_DEPTH` or holding more than
    :data:`MAX_VALUES` values (shared YAML nodes counted at every use: an alias bomb, or a
    recursive alias, ends here instead of in whatever walks it next)."""
    stack = [(obj, 0)]
    n = 0
    while stack:
        o, d = stack.pop()
        n += 1
        if n > MAX_VALUES:
            raise UserError(f"{field}={value!r}: more than {MAX_VALUES:,} values (YAML aliases counted where used); "
                            "recipes hold a few hundred")
        if isinstance(o, dict):
            if d >= MAX_DEPTH:
                raise UserError(f"{field}={value!r}: nested deeper than {MAX_DEPTH} levels; recipes nest a few")
            stack.extend((v, d + 1) for v in o.values())
            stack.extend((k, d + 1) for k in o if isinstance(k, (tuple, frozenset)))
        elif isinstance(o, (list, tuple)):
            if d >= MAX_DEPTH:
                raise UserError(f"{field}={value!r}: nested deeper than {MAX_DEPTH} levels; recipes nest a few")
            stack.extend((v, d + 1) for v in o)
    return obj  # nan / inf are refused by the field that takes a number (the Plan, GPUSpec, expect())


def _yaml_loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str, field: str = "recipe", value: object = None) -> Any:
    """``text`` parsed as YAML (PyYAML's safe loader, libyaml when present), its structure checked;
    errors as one line."""
    import yaml

    shown = field if value is None else value
    try:
        data = yaml.load(text, Loader=_yaml_loader())
    except yaml.YAMLError as e:
        raise UserError(f"{field}={shown!r}: not valid YAML: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise UserError(f"{field}={shown!r}: nested deeper than {MAX_DEPTH} levels; recipes nest a few") from None
    except (ValueError, OverflowError, TypeError) as e:  # e.g. a timestamp or int the constructor cannot build
        raise UserError(f"{field}={shown!r}: not valid YAML: {type(e).__name__}: {e}") from None
    return check_structure(data, field, shown)


def duplicate_keys(text: str) -> list[tuple[str, int, int]]:
    """The keys a YAML text gives twice in one mapping, as (key, first line, later line): YAML requires unique
    keys (YAML 1.2, 3.2.1.1) but PyYAML -- and so Megatron-LM's and Primus's readers -- keeps the last one
    silently; a reader states them as notes.  Merge keys (``<<``) are YAML's own override, not counted; a node an
    alias shares is walked once.  Empty for a text that does not compose (its parse reports that)."""
    import yaml

    try:
        root = yaml.compose(text, Loader=_yaml_loader())
    except (yaml.YAMLError, RecursionError, ValueError):
        return []
    out: list[tuple[str, int, int]] = []
    walked: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in walked:
            continue
        walked.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for k, v in node.value:
                stack.append(v)
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if k.value in first:
                        out.append((k.value, first[k.value], k.start_mark.line + 1))
                    first[k.value] = k.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return sorted(out, key=lambda d: d[2])


def yaml_structure_ok(text: str) -> bool:
    """Whether ``text`` is YAML within the limits (for readers that sniff a format)."""
    try:
        parse_yaml(text)
    except UserError:
        return False
    return True


def parse_toml(text: str, field: str = "recipe", value: object = None) -> dict:
    """``text`` parsed as TOML (``tomllib``), its structure checked; errors as one line."""
    import tomllib

    shown = field if value is None else value
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{field}={shown!r}: malformed TOML: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise UserError(f"{field}={shown!r}: nested deeper than {MAX_DEPTH} levels; recipes nest a few") from None
    except (ValueError, OverflowError) as e:
        raise UserError(f"{field}={shown!r}: malformed TOML: {e}") from None
    return check_structure(data, field, shown)


_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "a table",
               list: "a list"}


def expect(obj: Any, types: type | tuple[type, ...], field: str, allowed: Optional[str] = None) -> Any:
    """``obj`` if it is one of ``types`` (a bool is no int here), else a :class:`UserError` naming
    ``field``, the value and ``allowed`` (default: the types in words)."""
    ts = types if isinstance(types, tuple) else (types,)
    ok = isinstance(obj, ts) and not (isinstance(obj, bool) and bool not in ts)
    if isinstance(obj, float) and float in ts and not math.isfinite(obj):
        ok = False
    if not ok:
        words = allowed or " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in ts)
        shown = "<a table>" if isinstance(obj, dict) else "<a list>" if isinstance(obj, list) else repr(obj)
        raise UserError(f"{field}={shown}: {words}")
    return obj


# ------------------------------------------------------------------------------ files a recipe names
NAME_MAX = 255    # bytes of one path component (Linux NAME_MAX)
PATH_MAX = 4096   # bytes of a whole path (Linux PATH_MAX)


def file_name(value: Any, field: str, allowed: str = "a file name") -> str:
    """A file name a recipe writes (an ``extends`` entry, a preset, a wrapper's ``recipe.path``): a
    non-empty string without NUL characters, each component at most :data:`NAME_MAX` bytes and the whole
    at most :data:`PATH_MAX` (what the kernel takes; past them ``os.stat`` raises ``ENAMETOOLONG``
    and ``Path`` a ``ValueError`` for a NUL, before any "no such file" could be said)."""
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{field}={value!r}: {allowed} (a non-empty string)")
    if "\x00" in value:
        raise UserError(f"{field}={value!r}: {allowed}; a file name holds no NUL character")
    raw = value.encode("utf-8", "surrogateescape")
    if len(raw) > PATH_MAX or any(len(part) > NAME_MAX for part in raw.split(b"/")):
        raise UserError(f"{field}={value!r}: {allowed}; a file name of at most {NAME_MAX} bytes per component and "
                        f"{PATH_MAX:,} in all")
    return value


def find_from_run_root(name: str | Path, recipe: str | Path) -> Optional[Path]:
    """The file a recipe names by a path relative to where its framework runs (Megatron-LM, Primus and
    TorchTitan run from their checkout's root, and their scripts name configs from there): ``name`` itself
    when absolute, else ``d / name`` for the first folder ``d`` that has it of the recipe's folder (as
    written) and each folder above it (resolved, to the file system's root); None when no file is there."""
    n, r = Path(name), Path(recipe)
    # os.path.isfile: False for a name the kernel cannot take (too long, a NUL), where Path.is_file raises
    if n.is_absolute():
        return n if os.path.isfile(n) else None
    return next((d / n for d in (r.parent, *r.resolve().parent.parents) if os.path.isfile(d / n)), None)


# ------------------------------------------------------------------------------ command-line values
def finite_float(lo: Optional[float] = None, hi: Optional[float] = None, *, lo_open: bool = False,
                 what: str = "a number") -> Callable[[str], float]:
    """An argparse type: a finite float in ``[lo, hi]`` (``lo_open``: ``lo`` excluded)."""

    def conv(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r}: {what}") from None
        if not math.isfinite(v) or (lo is not None and (v <= lo if lo_open else v < lo)) \
                or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{s!r}: {what}")
        return v

    return conv


def bounded_int(lo: int, hi: int, what: str) -> Callable[[str], int]:
    """An argparse type: an integer in ``[lo, hi]``."""

    def conv(s: str) -> int:
        try:
            v = int(s.strip().replace("_", ""), 10) if len(s) <= 40 else None
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{s!r}: {what}")
        return v

    return conv


#: the suffixes a token count may carry (case-insensitive): thousand, million, billion (10**9), trillion
TOKEN_SUFFIXES = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
MAX_TOKENS = 10**18   # a million times the largest published pre-training runs (~15-36T tokens)


def token_count(what: str = "a whole number of tokens from 1 to 10**18: digits, a number with a suffix K, M, B "
                            "or T (15T, 1.5T, 300B) or in e-notation (1.5e12)") -> Callable[[str], int]:
    """An argparse type: a whole token count in ``[1, MAX_TOKENS]``, written as digits
    (``15000000000000``, ``15_000_000``), with a suffix of :data:`TOKEN_SUFFIXES` (``15T``, ``1.5T``,
    ``300b``) or in e-notation (``1.5e12``); read exactly (decimal, no binary rounding), so
    ``1.5T`` is 1,500,000,000,000.  A value that is not a whole number of tokens is refused."""
    from decimal import Decimal

    def conv(s: str) -> int:
        t = s.strip().replace("_", "").replace(",", "")
        scale = 1
        if t and t[-1].upper() in TOKEN_SUFFIXES:
            scale, t = TOKEN_SUFFIXES[t[-1].upper()], t[:-1]
        try:
            d = Decimal(t) * scale if 0 < len(t) <= 40 else None
        except ArithmeticError:  # InvalidOperation, Overflow (1e999999999999)
            d = None
        if d is None or not d.is_finite() or d != d.to_integral_value() or not 1 <= d <= MAX_TOKENS:
            raise argparse.ArgumentTypeError(f"{s!r}: {what}")
        return int(d)

    return conv
