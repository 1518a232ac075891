"""A small static evaluator of Megatron-LM launch scripts (bash), with source provenance.

The script is parsed by tree-sitter-bash (the grammar of ``bash``); this module only evaluates the
syntax tree, without running anything: ``VAR=value`` / ``export VAR=value`` assignments, ``${VAR}``,
``$VAR``, ``${VAR:-default}`` (and the other ``-`` ``=`` ``+`` ``?`` forms, ``#`` ``%`` pattern
removal, ``${#VAR}``), ``$((arithmetic))``, bash arrays ``ARGS=( ... )`` / ``ARGS+=( ... )`` and
``${ARGS[@]}``, quoting, ``if/elif/else`` with ``[ ]`` / ``[[ ]]`` / ``test`` and ``&&`` / ``||``
lists, ``case`` blocks, functions (defined and called), ``source`` / ``.`` of fragments next to the
script, positional parameters (``$1``, ``$@``, given after the recipe path, ``shift``, ``set --``)
and ``[srun ...] bash -c "$CMD"`` strings, ``eval`` (its joined arguments run as shell code), ``for NAME in
WORDS`` loops over known words, ``${VAR:offset:length}``.  ``while`` / ``until`` / C-style loops, for loops
over command output and process substitution are skipped with a warning; subshells ``( ... )`` and
``(( ... ))`` are skipped; ``$(command)`` substitutions stay opaque, except ``$(echo ...)``,
``$(echo ... | cut ...)``, ``$(FUNCTION ARGS)`` of a function whose body is only ``echo`` commands, and a comment
alone (`` `# note` ``: no output), which are computed; file tests (``[ -f x ]``) are taken as true.  Variables the
script does not set are unset:
the environment of this process is never read (topology comes from the plan, not from the machine).

Every character of every expanded word remembers where it came from: ``lit`` is the offset of the
literal character in the script (``-1`` for synthesised text, ``-2`` for opaque command output) and
``refs`` lists the ``$...`` expansions it flowed through, innermost first.  The Megatron adapter uses
this to edit a value exactly where it is written: in place, or in the assignment of the variable it
came from.

tree-sitter-bash 0.25 cannot parse some valid ``${...}`` forms (``"${X:-a|b}"``, ``${X:-a;b}``,
``${X:---flag}``, ``${S%%[*}``, ``${A:$N+1}``): such an expansion's body is blanked for the parse
and read from the script's text here (name, operator and a literal or ``$``-expanding argument).
``NAME=<file`` (bash: ``NAME=`` and a redirection) is parsed as ``NAME <file``, a redirection to an
escaped blank (``> \\ ``) with the blank masked, a backquoted comment (`` `# note` ``, whose comment
tree-sitter-bash runs past the closing backquote) as `` `: note` ``; two or more ``NAME=value`` ending their line
(``B=1 C=2`` NEWLINE ``export X=1``, which tree-sitter-bash 0.25 reads as one command, ``export`` with prefixes) as
``B=1 C=2;``.  What bash itself cannot parse is an error
naming the line and the construct, as ``bash -n`` does: also a redirection whose file is on the next line, which
tree-sitter-bash accepts.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import tree_sitter
import tree_sitter_bash

from primus_launch.adapters.bash_arith import arith as _arith
from primus_launch.adapters.bash_cut import cut_indices
from primus_launch.adapters.launcher_counts import launcher_count, slurm_option
from primus_launch.errors import UserError
from primus_launch.inputs import find_from_run_root
from primus_launch.plan import PlanError

_PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = re.compile(r"\d+|[@*#?$!]")
# a name inside $(( )): not the letters of a constant (0x1F, 16#ff, 1e3 is not bash)
_ARITH_NAME = re.compile(r"(?<![0-9A-Za-z_#])[A-Za-z_][A-Za-z0-9_]*")
_OPS = (":-", ":=", ":+", ":?", "##", "%%", "-", "=", "+", "?", "#", "%")
# a variable's value read as an expression inside $(( )): names, numbers, operators, blanks (no $, quotes, paths)
_ARITH_TEXT = re.compile(r"[A-Za-z0-9_#\s+\-*/%<>=!&|^~?:()]+")


class _ArithTooDeep(ValueError):
    """Variables whose values name each other without end inside ``$(( ))`` (bash fails the expansion)."""


# an arithmetic command that assigns: `=` (not ==, !=, <=, >=), `op=` (<<= and >>= too), ++, --
_ARITH_ASSIGN = re.compile(r"(?<![=!<>])=(?!=)|<<=|>>=|\+\+|--")
# one assignment of an arithmetic command (`((X *= 2))`, `let X=X*2`, `((X++))`): NAME OP EXPR, NAME++ / ++NAME
_ARITH_SET = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<<=|>>=|[-+*/%&^|]?=)(?!=)\s*(\S.*?)\s*|"
                        r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\+\+|--)\s*|\s*(\+\+|--)\s*([A-Za-z_][A-Za-z0-9_]*)\s*", re.S)


def arith_sets(expr: str) -> list[tuple[str, str, str]] | None:
    """The assignments of an arithmetic command's expression, as (name, operator, expression) -- ``X++`` is
    (X, "+=", "1") -- when every comma-separated part is one; None otherwise (a condition, a nested assignment)."""
    parts, depth, cur = [], 0, ""
    for ch in expr:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for part in parts:
        m = _ARITH_SET.fullmatch(part)
        if m is None or (m.group(3) is not None and _ARITH_ASSIGN.search(m.group(3))):
            return None
        if m.group(1):
            out.append((m.group(1), m.group(2), m.group(3)))
        else:
            name, op = (m.group(4), m.group(5)) if m.group(4) else (m.group(7), m.group(6))
            out.append((name, op[0] + "=", "1"))
    return out
_LOOPS = ("for_statement", "c_style_for_statement", "while_statement")
# nodes of a word that expand (everything else in a word is literal text)
_EXPANDING = ("string", "raw_string", "ansi_c_string", "translated_string", "expansion", "command_substitution",
              "arithmetic_expansion", "process_substitution")
_WORDISH = _EXPANDING + ("simple_expansion", "word", "number", "concatenation", "brace_expression", "extglob_pattern", "regex",
                         "test_operator", "variable_name", "special_variable_name")
MAX_DEPTH = 20  # nested function calls, sourced files and bash -c strings
MAX_ARRAY_GAP = 4096  # an array element assigned at most this far past the array's end (launch scripts: a few)
# syntax-tree depth a script may reach (the deepest of 649 public launch scripts: 20; the evaluator recurses per level)
MAX_TREE_DEPTH = 150
# what one word, variable or array may expand to: the input boundary reads at most 256 KiB of script, and
# launch scripts build words of a few KB; a variable that doubles itself (``V=$V$V``, ``A=("${A[@]}" "${A[@]}")``)
# would otherwise grow without end in a few dozen lines (each character carries its provenance)
MAX_WORD_CHARS = 262_144
MAX_WORDS = 65_536
# words a ``for`` loop is run over (launch scripts loop over their arguments or a few node names)
MAX_LOOP_WORDS = 4096
# ``${V#pat}`` / ``${V%pat}`` try every prefix or suffix (quadratic): values past this are not cut
MAX_PATTERN_CUT_CHARS = 4096
# statements one reading runs, over every function call, sourced file and bash -c string: depth alone
# (MAX_DEPTH) does not bound the work of calls or sources that fan out (``f0() { f1; f1; }`` ... or a
# fragment that sources the next one twice: 2^20 runs at depth 20); the bundled corpus of launch scripts
# (tests/data/bash_corpus.json) runs at most 26, the 580 .sh files of Megatron-LM, Primus, Megatron-Bridge and
# TorchTitan (the mirrors of this session) at most 1,255 (Primus tests/runner/test_primus_cli_direct.sh)
MAX_STATEMENTS = 10_000

_STRING_IDS = itertools.count()  # one tag per bash -c string run (ShellState._run_string)
OPAQUE = -2  # lit value of characters produced by $(...) / `...`
#: variables bash sets to a value of the run (bash(1) "Shell Variables"): opaque where the script did not set them
VARYING = frozenset({"RANDOM", "SRANDOM", "BASHPID", "SECONDS", "EPOCHSECONDS", "EPOCHREALTIME", "$", "PPID"})
SYNTH = -1  # lit value of characters computed (arithmetic, joins)


# --------------------------------------------------------------------------- provenance strings
@dataclass(frozen=True)
class PC:
    """One character with its provenance."""

    ch: str
    lit: int
    refs: tuple[int, ...] = ()
    # (file, character offset) where the character is written when that is a file the script sources or
    # runs (``source common.sh``, ``bash examples/x.sh``), not the script itself: ``lit`` is then SYNTH
    at: tuple[str, int] | None = None


@dataclass(frozen=True)
class Ref:
    """One ``$...`` expansion in the script: its source span and how many characters it produced."""

    start: int
    end: int
    nchars: int


class Token:
    """An expanded word (a command-line argument) with per-character provenance."""

    __slots__ = ("pcs",)

    def __init__(self, pcs: list[PC]):
        self.pcs = list(pcs)

    @property
    def text(self) -> str:
        return "".join(p.ch for p in self.pcs)

    def sub(self, a: int, b: int | None = None) -> "Token":
        return Token(self.pcs[a:b])

    def literal_span(self) -> tuple[int, int] | None:
        """The script span holding this token's text verbatim, if it is one contiguous literal."""
        if not self.pcs or any(p.lit < 0 or p.at is not None for p in self.pcs):
            return None
        lits = [p.lit for p in self.pcs]
        a = lits[0]
        if lits != list(range(a, a + len(lits))):
            return None
        return a, lits[-1] + 1

    def exact_refs(self, refs: list[Ref]) -> list[int]:
        """Ids of ``$...`` expansions that produced exactly this token (innermost first)."""
        if not self.pcs:
            return []
        common = set(self.pcs[0].refs)
        for p in self.pcs[1:]:
            common &= set(p.refs)
        return [r for r in self.pcs[0].refs if r in common and refs[r].nchars == len(self.pcs)]

    @property
    def opaque(self) -> bool:
        return any(p.lit == OPAQUE for p in self.pcs)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Token({self.text!r})"


def _synth(text: str, lit: int = SYNTH) -> list[PC]:
    return [PC(c, lit) for c in text]


def _too_large(path: str, what: str, limit: int, unit: str) -> UserError:
    return UserError(f"{path}: {what} expands to more than {limit:,} {unit} (launch scripts build a few KB; a "
                     f"variable that doubles itself?)")


@dataclass
class Command:
    """A simple command the script runs, with its arguments expanded."""

    args: list[Token]
    start: int
    end: int
    # environment the command runs with, as far as the script sets it: exported variables and
    # ``VAR=value cmd`` prefix assignments (characters keep their provenance, for editing)
    env: dict[str, list[PC]] = field(default_factory=dict)


# --------------------------------------------------------------------------- parsing
class Script:
    """A script's text and its tree-sitter-bash syntax tree (offsets: bytes in the tree, characters
    everywhere else)."""

    def __init__(self, text: str, path: str, data: bytes, root: tree_sitter.Node, masked: dict[int, int],
                 empty_assign: dict[int, int] | None = None):
        self.text, self.path, self.data, self.root = text, path, data, root
        self.origin: str | None = None  # a sourced / called file: its path (PC.at); None for the script itself
        self.masked = masked  # byte offset of a "${" whose body the parser could not read -> its "}"
        # byte offset of the NAME of a `NAME=<file` / `NAME=>file` parsed as `NAME <file` -> its "="
        self.empty_assign = empty_assign or {}
        self._b2c: list[int] | None = None
        if not text.isascii():
            self._b2c = []
            for i, ch in enumerate(text):
                self._b2c.extend([i] * len(ch.encode("utf-8", "surrogatepass")))
            self._b2c.extend(range(len(text), len(text) + 2))

    def pos(self, byte: int) -> int:
        """Character offset of a byte offset."""
        return byte if self._b2c is None else self._b2c[byte]

    def src(self, node: tree_sitter.Node) -> str:
        return self.text[self.pos(node.start_byte):self.pos(node.end_byte)]

    def line(self, byte: int) -> int:
        return self.text.count("\n", 0, self.pos(byte)) + 1

    def err(self, msg: str, byte: int) -> UserError:
        return UserError(f"{self.path}:{self.line(byte)}: cannot parse launch script: {msg}")

    def pc(self, ch: str, i: int) -> PC:
        """The character ``ch`` written at offset ``i`` of this text."""
        return PC(ch, i, (), None if self.origin is None else (self.origin, i))


def _too_deep(root: tree_sitter.Node) -> tree_sitter.Node | None:
    """The first node deeper than :data:`MAX_TREE_DEPTH` (walked without recursion), or None."""
    cursor, depth = root.walk(), 0
    while True:
        if cursor.goto_first_child():
            depth += 1
            if depth > MAX_TREE_DEPTH:
                return cursor.node
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return None
            depth -= 1


def _first_error(node: tree_sitter.Node) -> tree_sitter.Node | None:
    if node.is_missing or node.is_error:
        return node
    for c in node.children:
        if c.has_error or c.is_missing:
            hit = _first_error(c)
            if hit is not None:
                return hit
    return None


def _closing(data: bytes | bytearray, i: int, depth: int, open_: int, close: int) -> int | None:
    """Offset of the ``close`` byte that brings ``depth`` open brackets before ``i`` to zero (double
    quotes and backslashes respected)."""
    while i < len(data):
        c = data[i]
        if c == 0x5C:  # backslash
            i += 2
            continue
        if c == 0x22:  # "
            i += 1
            while i < len(data) and data[i] != 0x22:
                i += 2 if data[i] == 0x5C else 1
        elif c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _unreadable(data: bytearray, bad: tree_sitter.Node, masked: dict[int, int]) -> tuple[int, int, bytes] | None:
    """The ``${...}`` or ``((...))`` around a parse error: (start, end of its body, what replaces the
    body for the parser), when there is one."""
    a, b = bad.start_byte, max(bad.end_byte, bad.start_byte + 1)
    spans = []
    for opener in (b"${", b"(("):
        p = data.find(opener)
        while 0 <= p < b:
            if opener == b"${":
                q = _closing(data, p + 2, 1, 0x7B, 0x7D)
            else:
                q = _closing(data, p + 2, 2, 0x28, 0x29)
                q = q - 1 if q is not None and data[q - 1] == 0x29 else None
            if q is not None and p not in masked and q > p + 2 and (p <= a <= q or a <= p < b):
                for_header = opener == b"((" and re.search(rb"\bfor\s*$", bytes(data[max(0, p - 8):p]))
                fill = b"_" if opener == b"${" else b";;" if for_header else b"0"
                spans.append((p, q, fill))
            p = data.find(opener, p + 2)
    inside = [s for s in spans if s[0] <= a]
    return max(inside) if inside else (min(spans) if spans else None)


def _line_end(data: bytearray, bad: tree_sitter.Node) -> int:
    """Offset of the end of the line where a parse error ends."""
    e = data.find(b"\n", max(bad.end_byte, bad.start_byte + 1))
    return len(data) if e < 0 else e + 1


_EMPTY_ASSIGN = re.compile(rb"(?:^|(?<=[ \t;&|(]))([A-Za-z_][A-Za-z0-9_]*)=(?=[<>])", re.M)


def _empty_assignment(data: bytearray, bad: tree_sitter.Node, done: dict[int, int]) -> tuple[int, int] | None:
    """A ``NAME=<file`` / ``NAME=>file`` on the lines of a parse error: (start of NAME, offset of
    its ``=``).  Bash reads it as the assignment ``NAME=`` (empty) and a redirection; tree-sitter-bash
    0.25 cannot parse it, and parses ``NAME <file`` once the ``=`` is blanked."""
    a = data.rfind(b"\n", 0, bad.start_byte) + 1
    for m in _EMPTY_ASSIGN.finditer(bytes(data), a, _line_end(data, bad)):
        if m.start() not in done:
            return m.start(), m.end(1)
    return None


_BLANK_DEST = re.compile(rb"[<>][ \t]*(\\)[ \t]")


def _escaped_blank_destination(data: bytearray, bad: tree_sitter.Node) -> int | None:
    """Offset of the backslash of a redirection to an escaped blank (``> \\ ``, a file named " ")
    on the lines before a parse error, which tree-sitter-bash 0.25 cannot parse."""
    p = data.rfind(b"\n", 0, bad.start_byte)
    a = data.rfind(b"\n", 0, p) + 1 if p > 0 else 0  # the line before the error's, too
    m = _BLANK_DEST.search(bytes(data), a, _line_end(data, bad))
    return m.start(1) if m else None


_BACKQUOTED_COMMENT = re.compile(rb"(?:^|(?<=[\s\"=(]))`[ \t]*(#)[^`\n]*`", re.M)


def _backquoted_comment(data: bytearray) -> int | None:
    """Offset of the ``#`` of the first backquoted comment (`` `# Model` ``, the idiom that comments the lines of a
    long command: bash runs the comment, which prints nothing, so the word vanishes) that tree-sitter-bash 0.25
    cannot parse (its comment runs past the closing backquote to the line's end).  Made ``:`` for the parser only (a
    blank leaves an empty pair of backquotes it cannot parse either): the evaluator reads the substitution from the
    text, a comment alone, whose output is empty."""
    m = _BACKQUOTED_COMMENT.search(bytes(data))
    return m.start(1) if m else None


_REDIRECT_OPS = (">", "<", ">>", "&>", "&>>", "<&", ">&", ">|", "<>", "<&-", ">&-")


def _syntax_error(sc: Script, bad: tree_sitter.Node) -> UserError:
    hint = " (not bash syntax: the reader follows bash's grammar)"
    if bad.is_missing and bad.parent is not None and bad.parent.type == "file_redirect":
        op = next((c for c in bad.parent.children if not c.is_named), bad)
        return sc.err(f"unexpected newline after {sc.src(op)!r} (a redirection needs a file on its line)", op.start_byte)
    last = bad.children[-1] if bad.is_error and bad.child_count else None
    if last is not None and not last.is_named and last.type in _REDIRECT_OPS:  # `> (`: no file after it
        i = last.end_byte
        while i < len(sc.data) and (sc.data[i] in b" \t" or sc.data[i:i + 2] == b"\\\n"):
            i += 2 if sc.data[i] == 0x5C else 1
        if i >= len(sc.data) or sc.data[i] in b"\r\n":
            return sc.err(f"unexpected newline after {last.type!r} (a redirection needs a file on its line)", last.start_byte)
        nxt = sc.text[sc.pos(i):sc.pos(i) + 40].split("\n")[0]
        return sc.err(f"unexpected {nxt[:1] if nxt[:1] in '();&|<>' else nxt.split()[0]!r} after {last.type!r}{hint}", i)
    if bad.is_missing:
        kind = bad.type
        opener = {'"': "double quote", "'": "single quote", "`": "backquote"}.get(kind)
        if opener:
            node = bad.parent
            while node is not None and not sc.src(node).startswith(("\"", "'", "`", "$\"", "$'")):
                node = node.parent
            return sc.err(f"unterminated {opener}", node.start_byte if node is not None else bad.start_byte)
        return sc.err(f"missing {kind!r}{hint}", bad.start_byte)
    start = sc.pos(bad.start_byte)
    text = sc.text[start:sc.pos(bad.end_byte)] or sc.text[start:start + 40]
    lead = len(text) - len(text.lstrip())
    snippet = (text.strip().split("\n")[0] or text.strip())[:40]
    return sc.err(f"unexpected {snippet!r}{hint}", bad.start_byte + lead)


def parse_script(text: str, path: str = "<script>", warnings: list[str] | None = None) -> Script:
    """Parse a bash launch script; constructs the evaluator skips (loops, process substitution) are
    appended to ``warnings``.  A syntax error, or a ``${...}`` bash would reject, raises
    :class:`UserError` with the line."""
    crlf = text.count("\r\n")
    if crlf and warnings is not None:  # a file saved on Windows: bash would not run it as it reads here
        first = text[:text.index("\r\n")].count("\n") + 1
        warnings.append(f"{crlf:,} line(s) of {Path(path).name} end in CR LF (Windows line ends; the first on line "
                        f"{first}): bash keeps the CR (X=2 CR LF sets X to '2\\r'; a '\\' then CR does not continue the "
                        "command: the next line runs as a command of its own), so the script does not run as read "
                        "here; convert it (dos2unix)")
    data = bytearray(text.encode("utf-8", "surrogatepass") + b"\n")  # a last "\" continues onto it
    original = bytes(data)
    masked: dict[int, int] = {}
    empty: dict[int, int] = {}
    for _ in range(256):
        root = _PARSER.parse(bytes(data)).root_node
        deep = _too_deep(root)
        if deep is not None:
            sc = Script(text, path, original, root, masked, empty)
            raise sc.err(f"its syntax nests more than {MAX_TREE_DEPTH} levels deep (each operator of a long chain "
                         "such as 1+1+...+1 is a level; launch scripts nest a few)", deep.start_byte)
        bad = _first_error(root)
        if bad is None:
            ends = _run_on_prefixes(data, root)
            if not ends:
                break
            for at in ends:  # `B=1 C=2` NEWLINE `export X=1`: two commands (bash), one in tree-sitter-bash 0.25
                data[at] = 0x3B  # the blank or newline after the assignments -> ";" (offsets kept; lines read from text)
            continue
        span = _unreadable(data, bad, masked)
        if span is None:
            hit = _empty_assignment(data, bad, empty)
            if hit is not None:  # NAME=<file -> NAME <file (the evaluator reads NAME= and the redirection)
                data[hit[1]] = 0x20
                empty[hit[0]] = hit[1]
                continue
            blank = _escaped_blank_destination(data, bad)
            if blank is not None:  # `> \ `: the file " " (redirections are not evaluated)
                data[blank] = 0x5F
                continue
            hash_at = _backquoted_comment(data)
            if hash_at is not None:  # `# Model` -> `: Model`; read from the text: an empty substitution (_pure_cmdsub)
                data[hash_at] = 0x3A
                continue
            raise _syntax_error(Script(text, path, original, root, masked, empty), bad)
        p, q, fill = span  # the body is read from the text (${...}) or not needed (arithmetic)
        data[p + 2:q] = b"_" * (q - p - 2) if fill == b"_" else fill[:q - p - 2].ljust(q - p - 2)
        masked[p] = q
    else:  # pragma: no cover - 256 unreadable expansions
        raise UserError(f"{path}: cannot parse launch script: too many unreadable ${{...}} / ((...)) constructs")
    sc = Script(text, path, original, root, masked, empty)
    notes: list[str] = []
    _check(sc, root, notes)
    if warnings is not None:
        warnings.extend(notes)
    return sc


def _run_on_prefixes(data: bytearray, root: tree_sitter.Node) -> list[int]:
    """Where a command's ``NAME=value`` prefixes end their line: tree-sitter-bash 0.25 parses ``B=1 C=2`` NEWLINE
    ``export X=1`` (two or more assignments, then a line that starts with a word) as ONE command, ``export`` with
    the prefixes ``B=1 C=2``; bash ends a simple command at an unescaped newline (bash(1) SHELL GRAMMAR), so the
    assignments set shell variables and ``export`` / ``declare`` / ``local`` / ``unset`` / ``torchrun ...`` is the
    next command.  Returns the byte after the last assignment before such a newline (a blank or the newline)."""
    out: list[int] = []
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "command" or node.child_by_field_name("name") is None:
            continue
        kids = [c for c in node.children if c.type != "comment"]
        comments = [c for c in node.children if c.type == "comment"]
        for prev, c in zip(kids, kids[1:]):
            if prev.type != "variable_assignment":
                continue
            gap = bytes(data[prev.end_byte:c.start_byte]).replace(b"\\\n", b"")
            if (b"\n" in gap or any(prev.end_byte <= k.start_byte < c.start_byte for k in comments)) \
                    and data[prev.end_byte:prev.end_byte + 1] in (b" ", b"\t", b"\n"):
                out.append(prev.end_byte)
                break
            if c.type == "command_name":
                break
    return out


def _check(sc: Script, node: tree_sitter.Node, notes: list[str]) -> None:
    """Walk the tree as the evaluator would see it: refuse ``${...}`` bash rejects, note loops (after
    their bodies) and process substitutions.  Command substitutions, heredoc bodies and arithmetic
    are not entered (they are opaque or evaluated as a whole)."""
    t = node.type
    if t == "process_substitution":
        text = sc.text[sc.pos(_start(sc, node)):sc.pos(node.end_byte)]
        notes.append(f"line {sc.line(_start(sc, node))}: process substitution {text[:40]!r} not evaluated")
        return
    if t in ("command_substitution", "heredoc_body", "arithmetic_expansion", "comment"):
        return
    if t == "compound_statement" and node.child_count and node.children[0].type == "((":
        body = sc.src(node).strip()[2:-2]
        if _ARITH_ASSIGN.search(body) and arith_sets(body) is None:  # ((X *= 2)) is run (ShellState.exec);
            notes.append(f"line {sc.line(node.start_byte)}: arithmetic command {sc.src(node)[:40]!r} not evaluated")
        return                                                       # other assignments are not followed
    if t == "command" and node.child_count and node.children[0].type == "command_name" \
            and sc.src(node.children[0]) == "let":  # let X=X*2: run as ((...)) where every argument is an assignment
        if any(arith_sets(sc.src(c).strip("\"'")) is None for c in node.children[1:] if c.is_named):
            notes.append(f"line {sc.line(node.start_byte)}: {sc.src(node)[:40]!r} not evaluated")
        return
    if t == "command" and node.child_by_field_name("name") is not None \
            and _sets_variable(sc, node):  # printf -v X, read X, mapfile X, getopts S X (IFS=, read X too): as let
        notes.append(f"line {sc.line(node.start_byte)}: {sc.src(node)[:40]!r} not evaluated (a variable it sets "
                     "keeps its value from before)")
    if t == "expansion":
        _brace_body(sc, node)
    if t == "file_redirect":
        _dangling_redirect(sc, node)
    for c in node.children:
        _check(sc, c, notes)
    if t in _LOOPS and t != "for_statement":  # a for loop over known words is run (ShellState.exec_for)
        notes.append(f"line {sc.line(node.start_byte)}: '{sc.src(node.children[0])}' loop not evaluated")


#: bash builtins that set a shell variable (bash(1) SHELL BUILTIN COMMANDS): `printf -v NAME`, `read NAME...`,
#: `mapfile` / `readarray [ARRAY]`, `getopts OPTSTRING NAME` -- the reader does not run them (their input is
#: a file, the terminal or the script's arguments), so a variable they set keeps its earlier value here
_SETTING_BUILTINS = ("read", "mapfile", "readarray", "getopts")


def _sets_variable(sc: Script, node: tree_sitter.Node) -> bool:
    """Whether the simple command ``node`` is one of :data:`_SETTING_BUILTINS` (or ``printf -v``), after any
    ``NAME=value`` prefixes (``IFS=, read -r TP PP <<< "$L"``)."""
    name_node = node.child_by_field_name("name")
    name = sc.src(name_node)
    if name in _SETTING_BUILTINS:
        return True
    kids = list(node.children)
    args = [sc.src(c) for c in kids[kids.index(name_node) + 1:] if c.is_named]
    # printf's options come before its format: `printf -v NAME FMT`, `printf -vNAME FMT`
    return name == "printf" and bool(args) and (args[0] == "-v" or (args[0].startswith("-v") and args[0][2:].isidentifier()))


def _dangling_redirect(sc: Script, node: tree_sitter.Node) -> None:
    """A redirection operator at the end of a line is bash's syntax error ("unexpected token
    `newline'"); tree-sitter-bash 0.25 takes the next line's first word as its destination."""
    op = next((c for c in node.children if not c.is_named), None)
    dest = node.child_by_field_name("destination")
    if op is None or dest is None:
        return
    gap = sc.data[op.end_byte:_start(sc, dest)].replace(b"\\\n", b"")
    if b"\n" in gap:
        raise sc.err(f"unexpected newline after {sc.src(op)!r} (a redirection needs a file on its line)", op.start_byte)


# --------------------------------------------------------------------------- words
@dataclass
class Part:
    kind: str  # lit | param | arith | cmdsub
    quoted: bool
    pcs: list[PC] = field(default_factory=list)  # lit
    name: str = ""  # param
    index: str | None = None  # param: "@", "*", or an index expression
    op: str = ""  # param: "", ":-", "-", ":=", "=", ":+", "+", "#", "##", "%", "%%", "len", "opaque"
    arg: list["Part"] | None = None  # param operator argument
    text: str = ""  # cmdsub / opaque: the source; arith: the expression
    start: int = 0
    end: int = 0
    source: str = ""  # arith: the source


def _literal(sc: Script, a: int, b: int, mode: str) -> list[Part]:
    """Parts of script text between expanding nodes (character offsets ``a``..``b``), quotes removed:
    ``mode`` is ``word`` (unquoted: ``\\c`` is ``c``), ``dq`` (inside double quotes: only
    ``\\$ \\` \\" \\\\`` lose the backslash) or ``brace`` (a ``${x:-word}`` argument); ``\\``-newline
    is removed.  ``$NAME`` / ``$1`` / ``$@`` ... are read here, not from the tree: tree-sitter-bash
    0.25 splits ``$A/$B/c`` into ``$A/$`` and ``B/c`` (tree-sitter-bash issues #180, #315) and reads
    ``${X:-$_Y}``'s argument as a word (#280)."""
    s, out, lit = sc.text, [], []
    quoted = mode == "dq"

    def flush() -> None:
        nonlocal lit
        if lit:
            out.append(Part("lit", quoted, lit))
            lit = []

    i = a
    while i < b:
        c = s[i]
        if c == "$" and i + 1 < b:
            m = _NAME.match(s, i + 1, b)
            end = m.end() if m else (i + 2 if s[i + 1] in "0123456789@*#?$!-" else -1)
            if end > 0:
                flush()
                out.append(Part("param", quoted, name=s[i + 1:end], start=i, end=end))
                i = end
                continue
        if c == "\\" and i + 1 < b:
            n = s[i + 1]
            if n == "\n" and mode != "brace":
                i += 2
                continue
            if mode == "word":
                flush()
                out.append(Part("lit", True, [sc.pc(n, i + 1)]))
                i += 2
                continue
            if mode == "brace" or n in '$`"\\':
                lit.append(sc.pc(n, i + 1))
                i += 2
                continue
        elif c == "\\" and mode == "word":  # a lone trailing backslash
            i += 1
            continue
        lit.append(sc.pc(c, i))
        i += 1
    flush()
    return out


def _expanding_children(node: tree_sitter.Node, a: int, b: int) -> Iterator[tree_sitter.Node]:
    """The expanding nodes under ``node`` within bytes ``a``..``b``, in order (not inside each other)."""
    for c in node.children:
        if c.end_byte <= a or c.start_byte >= b:
            continue
        if c.type in _EXPANDING:
            yield c
        elif c.child_count:
            yield from _expanding_children(c, a, b)


def _start(sc: Script, node: tree_sitter.Node) -> int:
    """Byte offset where a node's own text begins (tree-sitter-bash lets an expansion inside a string
    start at the blanks before it)."""
    i, data = node.start_byte, sc.data
    while i < node.end_byte and (data[i] in b" \t\n" or data[i:i + 2] == b"\\\n"):
        i += 2 if data[i] == 0x5C else 1
    return i


def _spliced(sc: Script, a: int, b: int, kids: list[tree_sitter.Node], mode: str, quoted: bool) -> list[Part]:
    """Parts of bytes ``a``..``b``: the expanding ``kids`` and the literal text between them."""
    out: list[Part] = []
    at = a
    for k in kids:
        out.extend(_literal(sc, sc.pos(at), sc.pos(_start(sc, k)), mode))
        out.extend(word_parts(sc, [k], quoted))
        at = k.end_byte
    out.extend(_literal(sc, sc.pos(at), sc.pos(b), mode))
    return out


def word_groups(sc: Script, nodes: list[tree_sitter.Node]) -> list[list[tree_sitter.Node]]:
    """Nodes grouped into shell words: nodes with nothing between them are one word (tree-sitter-bash
    may split one word into two arguments, see :func:`_literal`)."""
    groups: list[list[tree_sitter.Node]] = []
    for n in nodes:
        if groups and _start(sc, n) == groups[-1][-1].end_byte:
            groups[-1].append(n)
        else:
            groups.append([n])
    return groups


def word_parts(sc: Script, nodes: list[tree_sitter.Node], quoted: bool = False) -> list[Part]:
    """The parts of one shell word made of adjacent syntax-tree nodes (``quoted``: inside double
    quotes)."""
    node, t = nodes[0], nodes[0].type
    a, b = sc.pos(_start(sc, node)), sc.pos(nodes[-1].end_byte)
    if len(nodes) > 1 or t not in _EXPANDING:
        ba = _start(sc, node)
        kids = [k for n in nodes for k in ([n] if n.type in _EXPANDING else _expanding_children(n, ba, n.end_byte))]
        return _spliced(sc, ba, nodes[-1].end_byte, kids, "dq" if quoted else "word", quoted)
    if t == "raw_string":
        return [Part("lit", True, [sc.pc(sc.text[i], i) for i in range(a + 1, b - 1)])]
    if t == "ansi_c_string":  # $'...': its escapes decoded (bash(1) QUOTING); inside "..." it is plain text
        if quoted:
            return [Part("lit", True, [sc.pc(sc.text[i], i) for i in range(a, b)])]
        return [Part("lit", True, [sc.pc(ch, i) for ch, i in ansi_c_chars(sc.text, a + 2, b - 1)])]
    if t in ("string", "translated_string"):  # $"...": "$" and a double-quoted string
        lead = _start(sc, node) + (1 if t == "string" else 2)
        kids = list(_expanding_children(node, lead, node.end_byte - 1))
        kids = [k for k in kids if k.type != "string"]
        out = [] if t == "string" else [Part("lit", quoted, [sc.pc("$", a)])]
        inner = _spliced(sc, lead, node.end_byte - 1, kids, "dq", True)
        tail = inner.pop().pcs if inner and inner[-1].kind == "lit" else []
        # an empty "" still makes a (quoted, empty) part so that it yields an empty argument
        return out + inner + [Part("lit", True, tail)]
    if t == "expansion":
        return [_brace_part(sc, node, quoted)]
    text = sc.text[a:b]
    if t == "arithmetic_expansion" or (text.startswith("$((") and text.endswith("))")):
        # tree-sitter-bash reads $((...)) inside ${x:-...} as $( (subshell) ): arithmetic is read from text
        inner = text[3:-2] if text.startswith("$((") else text[2:-1]
        return [Part("arith", quoted, text=inner, start=a, end=b, source=text)]
    return [Part("cmdsub", quoted, text=text, start=a, end=b)]  # $(...), `...`, <(...), >(...)


_ANSI_C = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
           "\\": "\\", "'": "'", '"': '"', "?": "?"}
_ANSI_C_NUM = re.compile(r"([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|c(.)", re.S)


def ansi_c_chars(s: str, a: int, b: int) -> list[tuple[str, int]]:
    """The characters of the body ``s[a:b]`` of a ``$'...'`` word, each with the offset it was written at: bash(1)
    QUOTING decodes ``\\n \\t \\e ... \\nnn \\xHH \\uHHHH \\UHHHHHHHH \\cX``; an unknown escape stays as written
    (backslash and character).  ``TP=$'4'`` is TP=4 (read as ``$4`` before: a positional parameter's text)."""
    out: list[tuple[str, int]] = []
    i = a
    while i < b:
        c = s[i]
        if c != "\\" or i + 1 >= b:
            out.append((c, i))
            i += 1
            continue
        n = s[i + 1]
        if n in _ANSI_C:
            out.append((_ANSI_C[n], i))
            i += 2
            continue
        m = _ANSI_C_NUM.match(s, i + 1, b)
        if m is None:
            out.append((c, i))
            i += 1
            continue
        octal, hx, u, big, ctl = m.groups()
        code = int(octal, 8) & 0xFF if octal else int(hx or u or big, 16) if not ctl else ord(ctl) & 0x1F
        if code == 0:  # bash ends the word at a NUL
            break
        if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF:
            out.append((chr(code), i))
        i = m.end()
    return out


def _brace_body(sc: Script, node: tree_sitter.Node) -> tuple[Part, int, int]:
    """(part without its argument, argument start, end) of a ``${...}`` (character offsets)."""
    start, close = sc.pos(_start(sc, node)), sc.pos(node.end_byte) - 1
    body = sc.text[start + 2:close]
    part = Part("param", False, start=start, end=close + 1)
    m = re.fullmatch(r"!([A-Za-z_][A-Za-z0-9_]*)", body)
    if m:  # ${!NAME}: the variable NAME names (indirect expansion)
        part.op, part.name = "indirect", m.group(1)
        return part, close, close
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(\^\^|,,|\^|,)", body)
    if m:  # ${NAME^^} / ${NAME,,} / ${NAME^} / ${NAME,}: case modification (no pattern)
        part.op, part.name = m.group(2), m.group(1)
        return part, close, close
    k = 0
    if body.startswith("#") and len(body) > 1:
        part.op = "len"
        k = 1
    m = _NAME.match(body, k) or _SPECIAL.match(body, k)
    if not m:
        raise sc.err(f"bad substitution ${{{body}}}", _start(sc, node))
    part.name = m.group(0)
    k = m.end()
    if k < len(body) and body[k] == "[":
        j = body.find("]", k)
        if j < 0:
            raise sc.err(f"bad substitution ${{{body}}}", _start(sc, node))
        part.index = body[k + 1:j]
        k = j + 1
    if part.op == "len":
        return part, close, close
    rest = body[k:]
    if rest.startswith(":") and rest[1:2] not in ("-", "=", "+", "?") or rest.startswith(": -"):
        part.op = "substr"  # ${NAME:OFFSET[:LENGTH]}: arithmetic, evaluated at expansion
        part.text = rest[1:]
        part.source = sc.text[start:close + 1]
        return part, close, close
    for op in _OPS:
        if rest.startswith(op):
            part.op = op
            return part, start + 2 + k + len(op), close
    if rest:
        part.op = "opaque"
        part.text = sc.text[start:close + 1]
    return part, close, close


def _brace_part(sc: Script, node: tree_sitter.Node, quoted: bool) -> Part:
    part, a, b = _brace_body(sc, node)
    part.quoted = quoted
    if part.op in ("", "len", "opaque", "substr", "indirect", "^^", ",,", "^", ","):
        return part
    ba, bb = _byte(sc, a), _byte(sc, b)
    if _start(sc, node) not in sc.masked:
        part.arg = _spliced(sc, ba, bb, list(_expanding_children(node, ba, bb)), "brace", False)
        return part
    # the parser could not read this body: its argument is read here
    part.arg = _unparsed_arg(sc, a, b)
    if part.arg is None:
        return Part("param", quoted, op="opaque", text=sc.text[part.start:part.end], start=part.start, end=part.end)
    return part


def _unparsed_arg(sc: Script, a: int, b: int) -> list[Part] | None:
    """Parts of a ``${x:-word}`` argument the parser could not read (characters ``a``..``b``):
    quotes are removed here, ``$``-expansions come from a parse of each quoted or unquoted stretch
    alone (None: not readable)."""
    s, out, i = sc.text, [], a
    while i < b:
        if s[i] == "'":
            j = s.find("'", i + 1, b)
            j = b if j < 0 else j
            out.append(Part("lit", True, [sc.pc(s[k], k) for k in range(i + 1, j)]))
            i = j + 1
            continue
        j = i + 1 if s[i] == '"' else i
        while j < b and (s[j] != '"' if s[i] == '"' else s[j] not in "'\""):
            j += 2 if s[j] == "\\" else 1
        j = min(j, b)
        seg = _stretch(sc, i + 1 if s[i] == '"' else i, j, "dq" if s[i] == '"' else "brace")
        if seg is None:
            return None
        if s[i] == '"':
            tail = seg.pop().pcs if seg and seg[-1].kind == "lit" else []
            seg.append(Part("lit", True, tail))
            j += 1
        out.extend(seg)
        i = j
    return out


def _stretch(sc: Script, a: int, b: int, mode: str) -> list[Part] | None:
    text = sc.text[a:b]
    if "${" not in text and "$(" not in text and "`" not in text:
        return _literal(sc, a, b, mode)
    ba, bb = _byte(sc, a), _byte(sc, b)
    head = b"cat <<Z\n"  # the stretch as a here-document body: its expansions, at their own offsets
    if ba < len(head):
        return None
    root = _PARSER.parse(b" " * (ba - len(head)) + head + sc.data[ba:bb] + b"\nZ\n").root_node
    if root.has_error or _too_deep(root) is not None:
        return None
    sub = Script(sc.text, sc.path, sc.data, root, {})
    sub.origin = sc.origin
    return _spliced(sub, ba, bb, list(_expanding_children(root, ba, bb)), mode, mode == "dq")


def _byte(sc: Script, char: int) -> int:
    if sc._b2c is None:
        return char
    return len(sc.text[:char].encode("utf-8", "surrogatepass"))


# --------------------------------------------------------------------------- evaluation
_SBATCH = re.compile(r"^#SBATCH\s+(.*)$")
_SBATCH_KEYS = {"-N": "nodes", "--nodes": "nodes", "--ntasks-per-node": "ntasks_per_node",
                "--gpus-per-node": "gpus_per_node", "--gres": "gres", "-n": "ntasks", "--ntasks": "ntasks"}


def sbatch_allocation(text: str) -> dict[str, int]:
    """The allocation a script's ``#SBATCH`` header asks for (sbatch reads the directives before the
    first command): ``nodes`` (``-N`` / ``--nodes``; a ``min-max`` range: the upper bound),
    ``ntasks_per_node`` (``--ntasks-per-node``, else ``-n`` / ``--ntasks``: the job's total tasks spread over
    its nodes, as srun's ``-n`` is read; a count the nodes do not divide is a :class:`PlanError`) and
    ``gpus_per_node`` (``--gpus-per-node=[type:]N`` or ``--gres=gpu[:type]:N``)."""
    return sbatch_header(text)[0]


def sbatch_header(text: str) -> tuple[dict[str, int], dict[str, str]]:
    """(:func:`sbatch_allocation`, the directives of those fields whose count is not a number: field ->
    the directive as written).  A template's placeholder (``#SBATCH --nodes=<NODES>``, ``-N {nodes}``,
    ``--nodes=${NNODES}``: sbatch expands no variables in its directives) is no count sbatch accepts;
    it is left out of the allocation and named here, for the reader's note."""
    out: dict[str, int] = {}
    unread: dict[str, str] = {}
    tasks: tuple[str, str] | None = None  # (option, value) of the last -n / --ntasks
    for line in text.splitlines():
        st = line.strip()
        if st and not st.startswith("#"):
            break
        m = _SBATCH.match(st)
        if not m:
            continue
        words = m.group(1).split("#", 1)[0].split()
        for i, w in enumerate(words):
            key, _, val = slurm_option(w)
            if key not in _SBATCH_KEYS:
                continue
            if not val and i + 1 < len(words):
                val = words[i + 1]
            field = _SBATCH_KEYS[key]
            said = f"#SBATCH {w}" + (f" {val}" if w == key and val else "")
            if field == "gres":
                g = re.search(r"(?:^|,)gpu(?::[^:,]+)?:(\d+)", val)
                if g:
                    out.setdefault("gpus_per_node", int(g.group(1)))
                elif re.search(r"(?:^|,)gpu\b", val):
                    unread.setdefault("gpus_per_node", said)
                continue
            if field == "ntasks":
                tasks = (key, val)
                continue
            num = launcher_count(val.partition(":")[2] if ":" in val else val, "-")  # [type:]N, MIN-MAX
            if num is not None:
                out[field] = num
                unread.pop(field, None)
            else:
                unread[field] = said
    if tasks is not None and "ntasks_per_node" not in out:
        flag, val = tasks
        n, nodes = launcher_count(val, ""), out.get("nodes", 1)
        if n is None:
            unread["ntasks_per_node"] = f"#SBATCH {flag} {val}"
        elif n % nodes:
            raise PlanError(f"#SBATCH {flag}", val, f"a multiple of the node count {nodes} (the same number of "
                                                     "processes on every node), or --ntasks-per-node")
        else:
            out["ntasks_per_node"] = n // nodes
    return out, {k: v for k, v in unread.items() if k not in out}


def unstated_why(unread: dict[str, str], fields: tuple[str, ...], flag: str | None) -> str | None:
    """Why a launcher count the script means to state is not read: an ``#SBATCH`` directive of ``fields``
    whose count is no number (``unread``: :func:`sbatch_header`'s), else launcher option ``flag`` written
    with no value; ``None`` when neither (the count is then not unstated)."""
    bad = [unread[f] for f in fields if f in unread]
    if bad:  # the value was to come from the allocation (srun's, or its SLURM_* variables)
        return f"{bad[0]!r} is not a count (a template placeholder? sbatch refuses it)"
    return None if flag is None else f"{flag} has no value (an unset variable?)"


#: the words :func:`unstated_note` says a node count the script leaves unread falls back by (the reader then fits
#: the node count as for a recipe that states none: ``megatron.load_megatron``)
NODES_FALL_BACK = "the node count falls back to"


def unstated_note(path: str, k: int, why: str, value: int) -> str:
    """The reader's note for an unstated count (:func:`unstated_why`): ``k`` 0 the node count, 1 the
    processes per node, falling back to ``value``."""
    if k == 0:
        return f"{path}: {why}: {NODES_FALL_BACK} {value} (pass --nodes or a wrapper TOML's [cluster] to state it)"
    count = ("count of processes per node", "--gpus-per-node")
    return (f"{path}: {why}: the {count[0]} falls back to {value} "
            f"(pass {count[1]} or a wrapper TOML's [cluster] to state it)")


def slurm_env(alloc: dict[str, int]) -> dict[str, str]:
    """The SLURM_* variables Slurm sets in a job with allocation ``alloc`` (sbatch(1), "OUTPUT
    ENVIRONMENT VARIABLES"), which launch scripts read for torchrun's ``--nnodes`` and the like."""
    env: dict[str, str] = {}
    n, t, g = alloc.get("nodes"), alloc.get("ntasks_per_node"), alloc.get("gpus_per_node")
    if n is not None:
        env.update(SLURM_NNODES=str(n), SLURM_JOB_NUM_NODES=str(n))
    if t is not None:
        env.update(SLURM_NTASKS_PER_NODE=str(t))
        if n is not None:
            env.update(SLURM_NTASKS=str(n * t), SLURM_NPROCS=str(n * t))
    if g is not None:
        env.update(SLURM_GPUS_PER_NODE=str(g), SLURM_GPUS_ON_NODE=str(g))
    return env



class ShellState:
    """Runs a parsed script statically, collecting variables and the commands it would run."""

    def __init__(self, text: str, path: str = "<script>", argv: tuple[str, ...] | list[str] = (),
                 env: dict[str, str] | None = None):
        self.text = text
        self.path = path
        # the environment the script starts in (e.g. the SLURM_* variables of its #SBATCH allocation)
        self.scalars: dict[str, list[PC]] = {k: _synth(v) for k, v in (env or {}).items()}
        self.arrays: dict[str, list[list[PC]]] = {}
        self.refs: list[Ref] = []
        self.commands: list[Command] = []
        self.functions: dict[str, tuple[Script, list[tree_sitter.Node]]] = {}
        self.warnings: list[str] = []
        self.exported: set[str] = set()  # names exported (export / declare -x) so far
        self.integers: set[str] = set()  # names with the integer attribute (declare -i): assignments are arithmetic
        self.readonly: set[str] = set()  # names made readonly (readonly / declare -r): later assignments fail in bash
        # files read besides the script: path -> ("source" | "bash", text) (where PC.at points)
        self.files: dict[str, tuple[str, str]] = {}
        # a default a script this one runs takes (`MBS="${MBS:-8}"` in train.sh, run by `bash train.sh` here):
        # (file, character) of the default -> (variable, offset of that `bash` command in this script), where
        # `MBS=4 ` written before the command gives the run another value (the tuned-recipe writer's edit)
        self.run_defaults: dict[tuple[str, int], tuple[str, int]] = {}
        self._bash_site: int | None = None  # in a state running a called script: its `bash` command's offset
        # the job's #SBATCH allocation (sbatch_allocation): the script's header, or an `sbatch <<EOF` it submits
        self.allocation, self.unread_allocation = sbatch_header(text)
        # positional parameters: given by the caller (characters not in the script: SYNTH)
        self.positional: list[list[PC]] = [_synth(str(x)) for x in argv]
        self._depth = 0
        self._ran = [0]  # statements run so far, shared with every child state (MAX_STATEMENTS)
        self._script = path  # the script the reading started from (a child state's path is its file's)
        # per function call running: name -> (scalar, array) it had before the call's `local NAME` (None: unset)
        self._frames: list[dict[str, tuple[list[PC] | None, list[list[PC]] | None]]] = []
        self.sc = parse_script(text, path, self.warnings)
        # a top-level `exit` ends the script there (bash runs nothing after it): (line, its text) where one did
        self.exited_at: tuple[int, str] | None = None
        for node in _statements(self.sc.root):
            if node.type == "command" and re.match(r"exit(\s|;|$)", self.sc.src(node).strip()):
                self.exited_at = (self.sc.line(node.start_byte), " ".join(self.sc.src(node).split())[:80])
                break
            self.exec(node)

    def _child(self, text: str, path: str, sc: Script) -> "ShellState":
        """A state sharing this one's variables, functions and positional parameters, for another
        text (a sourced file, a ``bash -c`` string)."""
        sub = ShellState.__new__(ShellState)
        sub.text, sub.path, sub.sc = text, path, sc
        sub.scalars, sub.arrays, sub.functions = self.scalars, self.arrays, self.functions
        sub.refs, sub.commands, sub.warnings = [], [], self.warnings
        sub.positional, sub._depth, sub.exported = self.positional, self._depth + 1, self.exported
        sub.integers, sub.readonly = self.integers, self.readonly
        sub._ran, sub._script, sub._frames = self._ran, self._script, self._frames
        sub.allocation, sub.unread_allocation, sub.files = self.allocation, self.unread_allocation, self.files
        sub.run_defaults, sub._bash_site = self.run_defaults, None
        return sub

    # --- expansion
    def _ref(self, start: int, end: int, pcs: list[PC]) -> list[PC]:
        if self.sc.origin is not None:  # an expansion written in another file (a function it defines): not here
            return pcs
        rid = len(self.refs)
        self.refs.append(Ref(start, end, len(pcs)))
        return [PC(p.ch, p.lit, p.refs + (rid,), p.at) for p in pcs]

    def _value(self, name: str, index: str | None) -> tuple[list[list[PC]] | None, bool]:
        """(values, is_multi): list of element strings, or None when unset."""
        if name in ("@", "*"):  # positional parameters (none unless given)
            return list(self.positional), True
        if name == "#":
            return [_synth(str(len(self.positional)))], False
        if name.isdigit() and name != "0":
            k = int(name)
            return ([self.positional[k - 1]] if k <= len(self.positional) else None), False
        if index in ("@", "*"):
            if name in self.arrays:
                return self.arrays[name], True
            if name in self.scalars:
                return [self.scalars[name]], True
            return [], True
        if name in self.arrays:
            arr = self.arrays[name]
            try:
                k = _arith(index or "0")
            except (ValueError, SyntaxError, ZeroDivisionError):
                k = 0
            return ([arr[k]] if -len(arr) <= k < len(arr) else None), False
        if name in self.scalars:
            return [self.scalars[name]], False
        if name in VARYING:  # bash sets it, to a value of the run (a random number, a process id, the clock)
            return [_synth(f"${name}", OPAQUE)], False
        return None, False

    def _expand_part(self, part: Part) -> list[tuple[list[PC], bool, bool]]:
        """Segments (chars, splittable, field_break_after) of one word part."""
        if part.kind == "lit":
            return [(part.pcs, False, False)]
        if part.kind == "cmdsub":
            out = self._pure_cmdsub(part.text)
            return [(self._ref(part.start, part.end, _synth(part.text, OPAQUE) if out is None else out),
                     not part.quoted, False)]
        if part.kind == "arith":  # variables: their integer value, else 0
            try:
                pcs = _synth(str(self._arith_value(part.text)))
            except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, RecursionError):
                pcs = _synth(part.source, OPAQUE)
            return [(self._ref(part.start, part.end, pcs), not part.quoted, False)]
        # parameter
        if part.op == "opaque":
            return [(self._ref(part.start, part.end, _synth(part.text, OPAQUE)), not part.quoted, False)]
        if part.op == "indirect":  # ${!N}: N's value names the variable read (N=TP; ${!N} is $TP)
            ref, _ = self._value(part.name, None)
            target = "".join(p.ch for p in ref[0]) if ref else ""
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[([^\]]*)\])?", target)
            if m is None or (ref and any(p.lit == OPAQUE for p in ref[0])):
                text = self.sc.text[part.start:part.end]
                return [(self._ref(part.start, part.end, _synth(text, OPAQUE)), not part.quoted, False)]
            return self._expand_part(dataclasses.replace(part, op="", name=m.group(1), index=m.group(2)))
        vals, multi = self._value(part.name, part.index)
        if part.op in ("^^", ",,", "^", ","):  # case modification, every character or the first
            def cased(v: list[PC]) -> list[PC]:
                up = part.op.startswith("^")
                return [dataclasses.replace(p, ch=(p.ch.upper() if up else p.ch.lower()))
                        if len(part.op) == 2 or i == 0 else p for i, p in enumerate(v)]
            vals = None if vals is None else [cased(v) for v in vals]
            part = dataclasses.replace(part, op="")
        if part.op == "substr":
            return [(self._ref(part.start, part.end, self._substring(part, vals, multi)), not part.quoted, False)]
        if part.op == "len":
            n = len(vals or []) if part.index in ("@", "*") else len(vals[0]) if vals else 0
            return [(self._ref(part.start, part.end, _synth(str(n))), not part.quoted, False)]
        is_null = not vals or (not multi and not vals[0])
        if part.op in (":-", "-", ":=", "=", ":?", "?"):
            use_default = is_null if part.op.startswith(":") else (vals is None)
            if use_default and part.op in (":?", "?"):  # bash stops here with the message; the value is unset
                self.warnings.append(f"${{{part.name}{part.op}...}}: {part.name} is not set (bash would stop here)")
                return [([], not part.quoted, False)]
            if use_default:
                dflt = self._expand_word_nosplit(part.arg)
                if self._bash_site is not None and part.op in (":-", "-") and not part.name.isdigit():
                    for p in dflt:
                        if p.at is not None and p.lit >= 0:
                            self.run_defaults.setdefault(p.at, (part.name, self._bash_site))
                if part.op in (":=", "="):
                    self.scalars[part.name] = dflt
                return [(self._ref(part.start, part.end, dflt), not part.quoted, False)] if dflt or part.quoted else []
        elif part.op in (":+", "+"):
            use_alt = (not is_null) if part.op == ":+" else (vals is not None)
            alt = self._expand_word_nosplit(part.arg) if use_alt else []
            return [(self._ref(part.start, part.end, alt), not part.quoted, False)]
        if vals is None:
            return [([], not part.quoted, False)]
        if part.op in ("#", "##", "%", "%%"):
            pat = "".join(p.ch for p in self._expand_word_nosplit(part.arg))
            out = []
            for v in vals:
                txt = "".join(p.ch for p in v)
                if len(txt) > MAX_PATTERN_CUT_CHARS:  # every prefix tried: quadratic; not followed
                    self.warnings.append(f"${{{part.name}{part.op}...}}: a value of {len(txt):,} characters not cut "
                                         f"(at most {MAX_PATTERN_CUT_CHARS:,} are)")
                    out.append(_synth(txt, OPAQUE))
                    continue
                cut = (0, len(txt))
                rng = range(len(txt) + 1)
                if part.op in ("#", "##"):
                    ks = [k for k in rng if fnmatch.fnmatchcase(txt[:k], pat)]
                    if ks:
                        cut = ((min(ks) if part.op == "#" else max(ks)), len(txt))
                else:
                    ks = [k for k in rng if fnmatch.fnmatchcase(txt[k:], pat)]
                    if ks:
                        cut = (0, (max(ks) if part.op == "%" else min(ks)))
                out.append(v[cut[0]:cut[1]])
            vals = out
        if multi and part.index == "*" and part.quoted:
            joined: list[PC] = []
            for k, v in enumerate(vals):
                if k:
                    joined.append(PC(" ", SYNTH))
                joined.extend(v)
            return [(joined, False, False)]
        if multi:
            return [(v, not part.quoted, k < len(vals) - 1) for k, v in enumerate(vals)]
        return [(self._ref(part.start, part.end, vals[0]), not part.quoted, False)]

    def _pure_cmdsub(self, text: str) -> list[PC] | None:
        """The output of ``$(echo WORDS)`` / ``$(echo WORDS | cut ...)`` (also in backquotes), computed: commands
        with no effect outside their output, which argument-parsing loops use (``KEY=$(echo $ARGUMENT | cut -f1
        -d=)``, Megatron-LM's functional-test scripts up to core_r0.8.0); None for any other command (opaque)."""
        text = text.lstrip(" \t\n")  # tree-sitter-bash starts a backquoted one in a string at the blanks before it
        inner = text[2:-1] if text.startswith("$(") and text.endswith(")") else \
            text[1:-1] if text.startswith("`") and text.endswith("`") else None
        if inner is None or self._depth >= MAX_DEPTH or \
                ("echo" not in inner and "#" not in inner and not self.functions):
            return None
        try:
            sc = parse_script(inner, self.path)
        except UserError:
            return None
        stmts = _statements(sc.root)
        if not stmts and not sc.text.strip(" \t\n").startswith("#"):
            return None
        if not stmts:  # a comment alone (`# Model`, $(# note)): bash prints nothing, the word vanishes
            return []
        if len(stmts) != 1:
            return None
        node = stmts[0]
        cmds = [c for c in node.named_children if c.type != "comment"] if node.type == "pipeline" else [node]
        if not 1 <= len(cmds) <= 2 or any(c.type != "command" for c in cmds):
            return None
        mark = f"\0command substitution {next(_STRING_IDS)}"
        sc.origin = mark
        sub = self._child(inner, self.path, sc)
        words = [sub._words(_command_words(sc, c)) for c in cmds]
        if any(any(t.opaque for t in w) for w in words):
            return None
        def own(p: PC) -> bool:  # a character written in the substitution's text
            return p.at is not None and p.at[0] == mark

        if len(cmds) == 1 and words[0] and words[0][0].text in self.functions:
            args = [[PC(p.ch, SYNTH) if own(p) else p for p in a.pcs] for a in words[0][1:]]
            out = self._echo_function_output(words[0][0].text, args)
        elif [t.text for t in words[0][:1]] == ["echo"]:
            out = _echo_output(words[0][1:], own)
        else:
            out = None
        if out is None:
            return None
        if len(cmds) == 2:
            kept = cut_indices("".join(p.ch for p in out), [t.text for t in words[1]])
            if kept is None:
                return None
            out = [out[k] if isinstance(k, int) else PC(k, SYNTH) for k in kept]
        return out

    def _echo_function_output(self, name: str, args: list[list[PC]]) -> list[PC] | None:
        """The output of ``$(NAME ARGS)`` where NAME is a function the script defined whose body is only ``echo``
        commands (``parallel_args() { echo "--tensor-model-parallel-size $TP"; }``, a script building part of its
        command line), computed with ``$1``... set to ARGS, one line per ``echo`` (bash runs the function in the
        substitution's subshell: its output is the echoes' lines); None for any other body (opaque).  The body's own
        characters are computed (not edited in place: another call may print them with other values); the values
        of variables it expands keep their provenance, as in ``$(echo $TP)``."""
        fsc, body = self.functions[name]
        if not body or any(c.type != "command" for c in body):
            return None
        first, last = fsc.pos(min(c.start_byte for c in body)), fsc.pos(max(c.end_byte for c in body))

        def own(p: PC) -> bool:  # a character written in the function body (not a variable's value)
            where = p.lit if fsc.origin is None and p.at is None else \
                p.at[1] if p.at is not None and p.at[0] == fsc.origin else None
            return where is not None and first <= where < last

        sub = self._child(fsc.text, fsc.path, fsc)
        sub.positional = args
        out: list[PC] = []
        for c in body:
            words = sub._words(_command_words(fsc, c))
            if any(t.opaque for t in words) or [t.text for t in words[:1]] != ["echo"]:
                return None
            line = _echo_output(words[1:], own)
            if line is None:
                return None
            out.extend(([PC("\n", SYNTH)] if out else []) + line)
        return out

    def _arith_value(self, expr: str, depth: int = 0) -> int:
        """``$(( expr ))``: a variable reads as its value evaluated as an expression, as bash reads it (bash 5.2
        ``expr.c`` ``expr_streval``: ``B=A`` or ``A="2+3"`` give A's value, 5; a negative value stays one
        operand: ``-A`` with ``A=-3`` is 3); 0 when unset, empty, or a text that is no expression (a path).  Values
        that name each other in a cycle fail, as in bash (recursion level exceeded); a value of the run this cannot
        know (a command's output, ``$RANDOM``) fails too (ValueError): the expansion stays opaque and is refused where
        a number is read, not read as 0."""
        if depth > 32:
            raise _ArithTooDeep("expression recursion level exceeded")
        inner = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expr)

        def var(m: re.Match) -> str:
            vals, _ = self._value(m.group(0), None)
            txt = "".join(p.ch for p in vals[0]).strip() if vals else ""
            if re.fullmatch(r"-?\d+", txt):
                return f"({txt})"
            if vals and any(p.lit == OPAQUE for p in vals[0]):  # a command's output, $RANDOM: a value of the run,
                raise ValueError(f"{m.group(0)} holds a value of the run")  # not 0 (`$((N / 4 + 1))` read as 1)
            if not txt or not _ARITH_TEXT.fullmatch(txt):
                return "0"
            try:
                return f"({self._arith_value(txt, depth + 1)})"
            except _ArithTooDeep:
                raise
            except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, RecursionError):
                return "0"  # bash fails here (a value that is no expression); read as 0, as before

        return _arith(_ARITH_NAME.sub(var, inner))

    def _substring(self, part: Part, vals: list[list[PC]] | None, multi: bool) -> list[PC]:
        """``${NAME:OFFSET[:LENGTH]}`` of a scalar, as bash cuts it (both arithmetic; a negative offset counts
        from the end, a negative length is an end counted from the end); the characters keep their origin.
        Array slices and expressions this does not read stay opaque text."""
        if multi or part.index in ("@", "*") or part.name in ("@", "*"):
            return _synth(part.source, OPAQUE)
        txt = vals[0] if vals else []
        off_txt, _, len_txt = part.text.partition(":")
        try:
            if "?" in part.text:  # a ternary's ':' cannot be told from the length's here
                raise ValueError(part.text)
            off = self._arith_value(off_txt)
            n = len(txt)
            a = off if off >= 0 else n + off
            if a < 0 or a > n:
                return []
            if not _:
                return list(txt[a:])
            ln = self._arith_value(len_txt)
            b = a + ln if ln >= 0 else n + ln
            if b < a:
                raise ValueError("substring expression < 0")  # bash: an error, the word has no value
            return list(txt[a:b])
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, RecursionError):
            return _synth(part.source, OPAQUE)

    def _expand_word_nosplit(self, parts: list[Part] | None) -> list[PC]:
        """A word without field splitting (an assignment's value, a here-document): the elements of
        ``"${A[@]}"`` / ``"$@"`` joined with a space, as bash joins them there."""
        out: list[PC] = []
        for part in parts or []:
            segs = self._expand_part(part)
            for k, (pcs, _, brk) in enumerate(segs):
                out.extend(pcs)
                if brk and k < len(segs) - 1:
                    out.extend(_synth(" "))
                if len(out) > MAX_WORD_CHARS:
                    raise _too_large(self.path, "a word", MAX_WORD_CHARS, "characters")
        return out

    def _is_empty_quoted_list(self, parts: list[Part]) -> bool:
        """``"$@"`` / ``"${A[@]}"`` with no elements (and nothing else in the word): bash gives no
        argument at all, not an empty one."""
        multi = [p for p in parts if p.kind == "param" and p.quoted and not p.op
                 and (p.name in ("@", "*") or p.index in ("@", "*"))]
        rest = [p for p in parts if p not in multi]
        return bool(multi) and all(p.kind == "lit" and not p.pcs for p in rest) and all(
            not (self._value(p.name, p.index)[0] or []) for p in multi)

    def expand_word(self, parts: list[Part]) -> list[Token]:
        """Expand one word into argument tokens (parameter expansion + field splitting)."""
        if self._is_empty_quoted_list(parts):
            return []
        fields: list[list[PC]] = []
        cur: list[PC] = []
        have = False  # whether the current field exists (quoted empties count)
        total = 0
        for part in parts:
            segs = self._expand_part(part)
            if part.quoted and part.kind == "lit":
                have = True
            for pcs, splittable, brk in segs:
                total += len(pcs)
                if total > MAX_WORD_CHARS or len(fields) > MAX_WORDS:
                    raise _too_large(self.path, "a word", MAX_WORD_CHARS, "characters") if total > MAX_WORD_CHARS \
                        else _too_large(self.path, "a word", MAX_WORDS, "words")
                if part.quoted:
                    have = True
                if not splittable:
                    cur.extend(pcs)
                    if pcs:
                        have = True
                else:
                    for p in pcs:
                        if p.ch in " \t\n" and p.lit != OPAQUE:  # a command's source is no output to split
                            if have or cur:
                                fields.append(cur)
                            cur, have = [], False
                        else:
                            cur.append(p)
                            have = True
                if brk:
                    if part.quoted or have or cur:
                        fields.append(cur)
                    cur, have = [], False
        if have or cur:
            fields.append(cur)
        return [Token(f) for f in fields]

    def _words(self, nodes: list[tree_sitter.Node]) -> list[Token]:
        out: list[Token] = []
        for group in word_groups(self.sc, nodes):
            out.extend(self.expand_word(word_parts(self.sc, group)))
            if len(out) > MAX_WORDS:
                raise _too_large(self.path, "a command or array", MAX_WORDS, "words")
        return out

    def _text(self, nodes: list[tree_sitter.Node]) -> str:
        """A word's text, expanded without field splitting (``case`` words and patterns)."""
        return "".join(p.ch for p in self._expand_word_nosplit(word_parts(self.sc, nodes)))

    # --- execution
    def run(self, nodes: list[tree_sitter.Node]) -> bool:
        ok = True
        for n in nodes:
            ok = self.exec(n)
        return ok

    def exec(self, node: tree_sitter.Node, redirects: tuple[tree_sitter.Node, ...] = ()) -> bool:
        """Run one statement; ``redirects``: redirections tree-sitter-bash hangs on a statement around
        this one (``a && b >f``, ``x | y >f``, ``! c >f``): in bash they belong to its last command."""
        self._ran[0] += 1
        if self._ran[0] > MAX_STATEMENTS:
            raise UserError(f"{self._script}: runs more than {MAX_STATEMENTS:,} statements (function calls or sourced "
                            "files that fan out?); launch scripts run at most a few thousand")
        t = node.type
        if t == "command":
            return self.exec_command(node, redirects)
        if t == "variable_assignment":
            self._assign(node)
        elif t in ("variable_assignments", "declaration_command"):  # A=1 B=2; export / declare / local ...
            kids = [c for c in node.named_children if c.type != "comment"]
            if t == "declaration_command":
                self._note_locals(node, kids)
                self._note_integers(node, kids)
            self._assign_all(kids, t == "declaration_command" and node.child_count > 0 and node.children[0].type == "export")
            if t == "declaration_command":
                self._note_exports(node, kids)
                self._note_readonly(node, kids)
        elif t == "unset_command":  # unset [-v] NAME...: variables; unset -f NAME...: functions (bash(1) unset)
            names = [self.sc.src(c) for c in node.named_children]
            opts = "".join(n[1:] for n in names if n.startswith("-"))
            for nm in (n for n in names if not n.startswith("-")):
                if "f" in opts:
                    self.functions.pop(nm, None)
                    continue
                if nm in self.readonly:  # bash: "cannot unset: readonly variable", the value stays
                    self.warnings.append(f"unset {nm}: {nm} is readonly (bash refuses it; the value stays)")
                    continue
                self.scalars.pop(nm, None)
                self.arrays.pop(nm, None)
        elif t == "redirected_statement":  # redirections (and here-documents) are skipped
            body = node.child_by_field_name("body")
            own = tuple(node.children_by_field_name("redirect"))
            ok = True
            if body is not None:
                ok = self.exec(body, tuple(sorted(own + redirects, key=lambda r: r.start_byte)))
            for r in own:  # cat <<EOF | tee x: tree-sitter-bash puts "| tee x" in the here-document
                if r.type == "heredoc_redirect":
                    self._heredoc_script(body, r)
                    ok = self._chain(r.children, ok)
            return ok
        elif t == "pipeline":  # each command of `a | b` runs in a subshell: what it sets is not kept
            scalars, arrays, exported = dict(self.scalars), dict(self.arrays), set(self.exported)
            try:
                return self._chain(node.children, True, redirects)
            finally:
                for store, old in ((self.scalars, scalars), (self.arrays, arrays), (self.exported, exported)):
                    store.clear()
                    store.update(old)
        elif t == "list":
            return self._chain(node.children, True, redirects)
        elif t == "negated_command":
            # "! cmd" is recorded as the command "!" (never a function or builtin), and succeeds
            inner = next((c for c in node.named_children if c.type != "comment"), None)
            if inner is not None and inner.type == "redirected_statement":
                redirects = tuple(sorted(tuple(inner.children_by_field_name("redirect")) + redirects,
                                         key=lambda r: r.start_byte))
                inner = inner.child_by_field_name("body")
            if inner is None or inner.type != "command":
                return True if inner is None else (self.exec(inner, redirects) or True)
            words = [Token([self.sc.pc("!", self.sc.pos(node.start_byte))])]
            words += self._words(_command_words(self.sc, inner, redirects=redirects))
            end = _command_end(self.sc, inner, redirects)
            self.commands.append(Command(words, self.sc.pos(node.start_byte), self.sc.pos(end), self._prefix_env([])))
        elif t == "compound_statement":  # { ...; } (and (( ... )): its assignments run, its value not read)
            if node.child_count and node.children[0].type == "((":
                self._arith_command(self.sc.src(node).strip()[2:-2], node)
                return True
            return self.run(_statements(node))
        elif t == "if_statement":
            return self.exec_if(node)
        elif t == "case_statement":
            return self.exec_case(node)
        elif t == "function_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if name is not None and body is not None:
                stmts = _statements(body) if body.type in ("compound_statement", "subshell") else [body]
                self.functions[self.sc.src(name)] = (self.sc, stmts)
        elif t == "test_command":
            return self.exec_test(node)
        elif t == "for_statement":
            return self.exec_for(node)
        # while / until / C-style for loops (noted when parsed), subshells, comments: not evaluated
        return True

    def exec_for(self, node: tree_sitter.Node) -> bool:
        """``for NAME in WORDS; do ...; done`` (``for NAME; do``: over ``"$@"``): the body runs once per word,
        NAME set to it, as bash runs it.  Not run (a note says so) when a word is opaque (``$(seq 1 8)``), a
        glob bash would expand against the file system, more than :data:`MAX_LOOP_WORDS` words, or the body
        may leave the loop early (``break`` / ``continue`` / ``return`` / ``exit``): what the loop does is then
        unknown here."""
        var, body = node.child_by_field_name("variable"), node.child_by_field_name("body")
        line = f"line {self.sc.line(node.start_byte)}: 'for' loop not evaluated"
        if var is None or body is None:
            self.warnings.append(line)
            return True
        values = node.children_by_field_name("value")
        if any(c.type == "in" for c in node.children):
            globbed = [v for v in values if v.type in ("word", "concatenation") and re.search(r"(?<!\\)[*?\[]", self.sc.src(v))
                       and not self.sc.src(v).startswith(("'", '"'))]
            if globbed:
                self.warnings.append(f"{line} (a file-name pattern: {self.sc.src(globbed[0])!r})")
                return True
            words = self._words(values)
        else:
            words = [Token(list(p)) for p in self.positional]
        why = ("its words come from a command" if any(w.opaque for w in words) else
               f"more than {MAX_LOOP_WORDS} words" if len(words) > MAX_LOOP_WORDS else
               "break / continue / return / exit in its body"
               if re.search(r"(^|[\s;&|(])(break|continue|return|exit)\b", self.sc.src(body)) else None)
        if why:
            self.warnings.append(f"{line} ({why})")
            return True
        name = self.sc.src(var)
        for w in words:
            self.scalars[name] = list(w.pcs)
            self.arrays.pop(name, None)
            self.run(_statements(body))
        return True

    def _chain(self, nodes: list[tree_sitter.Node], ok: bool, redirects: tuple[tree_sitter.Node, ...] = ()) -> bool:
        """``a && b || c``; a pipeline ``a | b`` runs on like ``a && b``; ``redirects`` belong to the
        last statement."""
        op = "&&"
        stmts = [c for c in nodes if c.is_named and c.type not in ("comment", "heredoc_start", "heredoc_body",
                                                                   "heredoc_end") and not c.type.endswith("_redirect")]
        for c in nodes:
            if not c.is_named:
                op = c.type if c.type in ("&&", "||") else "&&"
            elif c in stmts and not ((op == "&&" and not ok) or (op == "||" and ok)):
                ok = self.exec(c, redirects if c == stmts[-1] else ())
        return ok

    def exec_if(self, node: tree_sitter.Node) -> bool:
        """``if`` / ``elif`` / ``else``: a branch runs when its condition list's last command succeeds."""
        branches: list[tuple[list[tree_sitter.Node], list[tree_sitter.Node]]] = []
        orelse: list[tree_sitter.Node] = []

        def split(n: tree_sitter.Node) -> tuple[list[tree_sitter.Node], list[tree_sitter.Node]]:
            cond: list[tree_sitter.Node] = []
            body: list[tree_sitter.Node] = []
            seen_then = False
            for c in n.children:
                if not c.is_named:
                    seen_then = seen_then or c.type == "then"
                elif c.type not in ("comment", "elif_clause", "else_clause"):
                    (body if seen_then else cond).append(c)
            return cond, body

        branches.append(split(node))
        for c in node.named_children:
            if c.type == "elif_clause":
                branches.append(split(c))
            elif c.type == "else_clause":
                orelse = _statements(c)
        for cond, body in branches:
            if self.run(cond):
                self.run(body)
                return True
        self.run(orelse)
        return True

    def exec_case(self, node: tree_sitter.Node) -> bool:
        """``case WORD in PAT|PAT) ... ;; esac``: the first arm whose pattern matches (``;&`` / ``;;&`` end
        an arm like ``;;``)."""
        value = node.child_by_field_name("value")
        word = self._text([value]) if value is not None else ""
        for item in node.named_children:
            if item.type != "case_item":
                continue
            pats, body, in_body = [], [], False
            for i, c in enumerate(item.children):
                if not c.is_named:
                    in_body = in_body or c.type == ")"
                    continue
                if item.field_name_for_child(i) == "value" and not in_body:
                    pats.append(c)
                elif c.type != "comment" and in_body:
                    body.append(c)
            for pat in word_groups(self.sc, pats):
                if fnmatch.fnmatchcase(word, self._text(pat)):
                    self.run(body)
                    return True
        return True

    def _assign(self, node: tree_sitter.Node, more: list[tree_sitter.Node] = ()) -> None:
        """``NAME=value`` / ``NAME+=value`` / ``NAME[i]=value`` / ``NAME=( ... )``; ``more``: the nodes
        tree-sitter split off the end of the value (see :func:`word_groups`)."""
        sc = self.sc
        target = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if target is None:
            return
        plus = any(not c.is_named and c.type == "+=" for c in node.children)
        index: tree_sitter.Node | None = None
        if target.type == "subscript":
            index = target.child_by_field_name("index")
            target = target.child_by_field_name("name") or target
        name = sc.src(target)
        if name in self.readonly:  # bash: "NAME: readonly variable"; the assignment fails, the script goes on
            self.warnings.append(f"{sc.src(node)[:80]}: {name} is readonly (bash refuses the assignment and goes on; "
                                 f"{name} keeps its value)")
            return
        if value is not None and value.type == "array":
            elems: list[list[PC]] = []
            items = [w for w in value.named_children if w.type != "comment"]
            elems = [t.pcs for t in self._words(items)]
            self.arrays[name] = (self.arrays.get(name, []) + elems) if plus else elems
            if len(self.arrays[name]) > MAX_WORDS:
                raise _too_large(self.path, f"array {name}", MAX_WORDS, "elements")
            self.scalars.pop(name, None)
            return
        nodes = ([value] if value is not None else []) + list(more)
        val = self._expand_word_nosplit(word_parts(sc, nodes)) if nodes else []
        if index is not None and name in self.arrays:
            try:
                k = _arith(sc.src(index))
            except (ValueError, SyntaxError, ZeroDivisionError):
                return
            arr = self.arrays[name]
            if k < 0:
                k += len(arr)  # bash 4.3+: from the end; before the first element "bad array subscript"
            if not 0 <= k < len(arr) + MAX_ARRAY_GAP:
                # bash arrays are sparse; this reader's are dense lists: an index far past the end (or before
                # the start) is not materialised, and what the script reads of the array is then unknown
                self.warnings.append(f"{name}[{sc.src(index)}]: index {k:,} not followed (arrays of at most "
                                     f"{MAX_ARRAY_GAP:,} elements past the last are read)")
                return
            while len(arr) <= k:
                arr.append([])
            arr[k] = (arr[k] + val) if plus else val
            return
        if name in self.arrays:
            arr = self.arrays[name]
            if plus:
                arr[0] = (arr[0] if arr else []) + val
            else:
                self.arrays[name] = [val]
            return
        if name in self.integers:  # declare -i NAME: NAME=2*2 is 4, NAME+=1 adds
            val = self._integer_value(val, self.scalars.get(name) if plus else None)
            plus = False
        self.scalars[name] = (self.scalars.get(name, []) + val) if plus else val
        if len(self.scalars[name]) > MAX_WORD_CHARS:
            raise _too_large(self.path, f"variable {name}", MAX_WORD_CHARS, "characters")

    def _note_locals(self, node: tree_sitter.Node, kids: list[tree_sitter.Node]) -> None:
        """``local NAME[=v]`` (also ``declare`` / ``typeset`` without ``-g``) inside a function: the name's
        value before the call is kept, and given back when the call returns (bash's dynamic scoping); a
        ``local TP=8`` in a helper function does not change the script's TP."""
        head = node.children[0].type if node.child_count else ""
        opts = [self.sc.src(c) for c in kids if c.type == "word" and self.sc.src(c).startswith("-")]
        if not self._frames or head not in ("local", "declare", "typeset") or any("g" in o for o in opts):
            return
        frame = self._frames[-1]
        for c in kids:
            if c.type == "variable_assignment":
                c = c.child_by_field_name("name")
                if c is not None and c.type == "subscript":
                    c = c.child_by_field_name("name")
            if c is None:
                continue
            if c.type in ("variable_name", "word") and not self.sc.src(c).startswith("-"):
                names = [self.sc.src(c)]
            elif c.type in ("string", "raw_string", "concatenation", "simple_expansion", "expansion"):
                # `local "$K=8"`: the builtin reads NAME=value after expansion (_assign_all assigns it so)
                names = [m.group(1) for tok in self._words([c]) if not tok.opaque
                         for m in [re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", tok.text)] if m]
            else:
                continue
            for name in names:
                if _NAME.fullmatch(name) and name not in frame:
                    frame[name] = (self.scalars.get(name), self.arrays.get(name))

    def _note_integers(self, node: tree_sitter.Node, kids: list[tree_sitter.Node]) -> None:
        """``declare -i NAME[=v]`` (``typeset`` / ``local`` too): NAME gets the integer attribute, so this and every
        later assignment to it is evaluated as arithmetic (bash(1) ``declare -i``: "arithmetic evaluation is
        performed when the variable is assigned a value"); ``+i`` takes the attribute away."""
        head = node.children[0].type if node.child_count else ""
        opts = [self.sc.src(c) for c in kids if c.type == "word" and self.sc.src(c)[:1] in "-+"]
        on, off = any(o[0] == "-" and "i" in o for o in opts), any(o[0] == "+" and "i" in o for o in opts)
        if head not in ("declare", "typeset", "local") or not (on or off):
            return
        for c in kids:
            if c.type == "variable_assignment":
                c = c.child_by_field_name("name")
            if c is not None and c.type == "variable_name":
                (self.integers.add if on else self.integers.discard)(self.sc.src(c))

    def _arith_command(self, expr: str, node: tree_sitter.Node) -> None:
        """The assignments of ``(( expr ))`` / ``let expr`` (:func:`arith_sets`), evaluated as ``$(( ))`` is and made,
        one after the other (``((TP *= 2))`` doubles TP, ``let N=N+1``); one that does not evaluate stops there, with
        a note (bash fails the command too: a division by zero; or a value this does not read)."""
        sets = arith_sets(expr)
        if sets is None:
            return  # not an assignment list (a condition, or noted by _check)
        for name, op, rhs in sets:
            try:
                value = self._arith_value(rhs if op == "=" else f"({name}) {op[:-1]} ({rhs})")
            except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, RecursionError):
                self.warnings.append(f"line {self.sc.line(node.start_byte)}: arithmetic {expr.strip()[:40]!r} not "
                                     f"evaluated ({name} keeps its value)")
                return
            if name in self.readonly:
                self.warnings.append(f"{expr.strip()[:80]}: {name} is readonly (bash refuses the assignment and goes "
                                     f"on; {name} keeps its value)")
                return
            self.scalars[name] = _synth(str(value))
            self.arrays.pop(name, None)

    def _declared_names(self, kids: list[tree_sitter.Node]) -> list[str]:
        """The names a declaration command's words declare: ``NAME``, ``NAME=v`` and ``NAME[i]=v`` give NAME."""
        out = []
        for c in kids:
            if c.type == "variable_assignment":
                c = c.child_by_field_name("name")
                if c is not None and c.type == "subscript":
                    c = c.child_by_field_name("name")
            if c is not None and c.type == "variable_name":
                out.append(self.sc.src(c))
        return out

    def _note_readonly(self, node: tree_sitter.Node, kids: list[tree_sitter.Node]) -> None:
        """``readonly NAME[=v]`` / ``declare -r`` / ``typeset -r`` (not a function's ``local``): a later assignment to
        NAME fails in bash -- "NAME: readonly variable" -- and the script goes on with the value it had."""
        head = node.children[0].type if node.child_count else ""
        opts = [self.sc.src(c) for c in kids if c.type == "word" and self.sc.src(c)[:1] in "-+"]
        if head not in ("readonly", "declare", "typeset") or (head != "readonly" and not any(
                o[0] == "-" and "r" in o for o in opts)) or any("f" in o for o in opts):
            return
        if head != "readonly" and self._frames and not any("g" in o for o in opts):
            return  # a function's own variable: gone when it returns
        self.readonly.update(self._declared_names(kids))

    def _integer_value(self, val: list[PC], old: list[PC] | None) -> list[PC]:
        """The value an integer variable gets from ``val`` (``old``: its value before a ``+=``), evaluated as
        ``$(( ))`` is; a text that does not evaluate (a command's output, a division by zero, where bash stops with
        an error) stays as written, and is refused where a number is read."""
        txt = "".join(p.ch for p in val).strip()
        if old is not None:
            txt = f"({''.join(p.ch for p in old).strip() or 0})+({txt or 0})"
        if any(p.lit == OPAQUE for p in val) or not _ARITH_TEXT.fullmatch(txt or "0"):
            return val if old is None else (old + val)
        try:
            return _synth(str(self._arith_value(txt or "0")))
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, RecursionError, _ArithTooDeep):
            return val if old is None else (old + val)

    def _end_frame(self) -> None:
        """A function call returns: its ``local`` names get their values from before the call back."""
        for name, (scalar, array) in self._frames.pop().items():
            for store, old in ((self.scalars, scalar), (self.arrays, array)):
                if old is None:
                    store.pop(name, None)
                else:
                    store[name] = old

    def _note_exports(self, node: tree_sitter.Node, kids: list[tree_sitter.Node]) -> None:
        """``export NAME[=v]`` / ``declare -x NAME[=v]`` (also ``local`` / ``readonly`` / ``typeset``
        with ``-x``): the names join the environment of the commands that follow."""
        head = node.children[0].type if node.child_count else ""
        opts = [self.sc.src(c) for c in kids if c.type == "word" and self.sc.src(c).startswith("-")]
        if head != "export" and not any("x" in o for o in opts):
            return
        self.exported.update(self._declared_names(kids))

    def _prefix_env(self, groups: list[list[tree_sitter.Node]]) -> dict[str, list[PC]]:
        """The environment of a command: the exported variables, and its ``VAR=value`` prefixes (for
        this command only; ``VAR+=``, ``VAR[i]=`` and arrays are not environment)."""
        env = {n: self.scalars[n] for n in sorted(self.exported) if n in self.scalars}
        for g in groups:
            if g[0].type != "variable_assignment":
                break
            target, value = g[0].child_by_field_name("name"), g[0].child_by_field_name("value")
            plus = any(not c.is_named and c.type == "+=" for c in g[0].children)
            if target is None or target.type != "variable_name" or plus or (value is not None and value.type == "array"):
                continue
            nodes = ([value] if value is not None else []) + g[1:]
            env[self.sc.src(target)] = self._expand_word_nosplit(word_parts(self.sc, nodes)) if nodes else []
        return env

    def _assign_all(self, nodes: list[tree_sitter.Node], export: bool = False) -> None:
        """The assignments among ``nodes`` (of ``export`` / ``local`` / ...: options and bare names set
        nothing).  A word that expands to ``NAME=value`` assigns too, as the builtins parse their arguments
        after expansion (``export "$KEY"="$VALUE"`` in argument-parsing loops); ``export``: the name is
        exported."""
        for group in word_groups(self.sc, nodes):
            if group[0].type == "variable_assignment":
                self._assign(group[0], group[1:])
                continue
            for tok in self._words(group):
                m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", tok.text)
                if m is None or tok.opaque:
                    continue
                name = m.group(1)
                if name in self.readonly:
                    self.warnings.append(f"{tok.text[:80]}: {name} is readonly (bash refuses the assignment and goes "
                                         f"on; {name} keeps its value)")
                    continue
                self.scalars[name] = list(tok.pcs[m.end():])
                self.arrays.pop(name, None)
                if export:
                    self.exported.add(name)

    def exec_command(self, node: tree_sitter.Node, redirects: tuple[tree_sitter.Node, ...] = ()) -> bool:
        """A simple command: builtins that change the state, function calls, ``source``, ``bash -c``;
        any other command is recorded with its expanded arguments (``VAR=x cmd`` prefixes and
        redirections are dropped)."""
        groups = word_groups(self.sc, _command_words(self.sc, node, True, redirects))
        k = next((i for i, g in enumerate(groups) if g[0].type != "variable_assignment"), -1)
        empty_name = None
        if k >= 0 and _start(self.sc, groups[k][0]) in self.sc.empty_assign:  # NAME=<file: NAME= and
            name = empty_name = self.sc.src(groups[k][0])  # the redirection (and a command after it)
            groups = groups[:k] + groups[k + 1:]
            if all(g[0].type == "variable_assignment" for g in groups):
                if name in self.arrays:
                    self.arrays[name] = [[]]
                else:
                    self.scalars[name] = []
                for g in groups:
                    self._assign(g[0], g[1:])
                return True
        if all(g[0].type == "variable_assignment" for g in groups):
            for g in groups:
                self._assign(g[0], g[1:])
            return True
        args = self._words([n for g in groups if g[0].type != "variable_assignment" for n in g])
        if not args:
            return True
        name = args[0].text
        if name in ("[", "[[", "test"):
            return self.test([a.text for a in args[1:]], name)
        if name in ("true", ":"):
            return True
        if name == "false":
            return False
        if name == "let":  # let X=X*2 Y++: each argument an arithmetic expression (bash(1) let)
            for a in args[1:]:
                if not a.opaque:
                    self._arith_command(a.text, node)
            return True
        if name == "shift":
            n = int(args[1].text) if len(args) > 1 and args[1].text.isdigit() else 1
            self.positional = self.positional[n:]
            return True
        if name == "set" and len(args) > 1 and args[1].text == "--":
            self.positional = [a.pcs for a in args[2:]]
            return True
        if name in self.functions and self._depth < MAX_DEPTH:
            saved, saved_sc = self.positional, self.sc
            fsc, body = self.functions[name]
            self.positional, self.sc = [a.pcs for a in args[1:]], fsc
            self._depth += 1
            self._frames.append({})
            try:
                self.run(body)
            finally:
                self._end_frame()
                self._depth -= 1
                self.positional, self.sc = saved, saved_sc
            return True
        if name in ("source", ".") and len(args) > 1:
            tok = args[1]
            # `source "$(dirname "$0")/env.sh"`: the opaque directory part is the script's own directory
            last = max((i for i, p in enumerate(tok.pcs) if p.lit == OPAQUE), default=-1)
            self._source(tok.text if last < 0 else "".join(p.ch for p in tok.pcs[last + 1:]).lstrip("/"))
            return True
        if name == "eval" and len(args) > 1:
            # bash joins eval's arguments with blanks and runs the result as shell code: quotes and backslashes
            # in it are read again (`cmd="torchrun ... ${ARGS[@]}"; eval $cmd` with an element 'Et\|\(tt\|\)*30L'
            # runs Megatron with Et|(tt|)*30L)
            joined: list[PC] = []
            for a in args[1:]:
                joined.extend(([PC(" ", SYNTH)] if joined else []) + list(a.pcs))
            self._run_string(Token(joined))
            return True
        inner = self._shell_c(args)
        if inner is not None:
            # `srun [opts] bash -c "$CMD"`: the commands of the string run under that srun (its task counts)
            at = next((i for i, a in enumerate(args) if a is inner), len(args))
            lead = args[:at]
            k = next((i for i, a in enumerate(lead) if a.text.rsplit("/", 1)[-1] == "srun"), None)
            shell = next((i for i, a in enumerate(lead) if a.text.rsplit("/", 1)[-1] in ("bash", "sh", "zsh", "dash")),
                         len(lead))
            self._run_string(inner, lead[k:shell] if k is not None and k < shell else [])
            return True
        called = self._called_script(args)
        if called is not None:  # `bash examples/gpt3/train_gpt3_175b_distributed.sh ARGS`: the script it runs
            saved, saved_vars = self.positional, dict(self.scalars)
            self.positional = [a.pcs for a in called[1]]
            self.scalars.update(self._prefix_env(groups))  # `NUM_NODES=2 bash x.sh`: its environment
            lead = args[0].pcs[0] if args[0].pcs else None
            site = lead.lit if (lead is not None and lead.at is None and lead.lit >= 0 and self._depth == 0
                                and self.sc.origin is None) else None
            try:
                self._source(str(called[0]), what="bash", site=site)
            finally:
                self.positional = saved
                self.scalars.clear()  # a child process: nothing it sets comes back
                self.scalars.update(saved_vars)
            return True
        self.commands.append(Command(args, self.sc.pos(node.start_byte), self.sc.pos(_command_end(self.sc, node, redirects)),
                                     self._prefix_env(groups) | ({empty_name: []} if empty_name else {})))
        return True

    @staticmethod
    def _shell_c(args: list[Token]) -> Token | None:
        """The command string of ``[srun/env/... ] bash -c "$CMD"`` (also sh/zsh, ``-lc``)."""
        for i, a in enumerate(args[:-1]):
            base = a.text.rsplit("/", 1)[-1]
            if base not in ("bash", "sh", "zsh", "dash"):
                continue
            j = i + 1
            while j < len(args) - 1 and re.fullmatch(r"-[a-z]+", args[j].text):  # bash -x -c, bash -lc
                if "c" in args[j].text:
                    return args[j + 1]
                j += 1
        return None

    def _run_string(self, tok: Token, launcher: list[Token] | None = None) -> None:
        """Run the text of a ``bash -c`` string in this state; characters keep the provenance they
        had in the string (a literal in ``CMD="..."`` stays editable where it is written);
        ``launcher``: the ``srun ...`` words the string runs under, put before each command it runs."""
        if self._depth >= MAX_DEPTH:
            return
        n_before = len(self.commands)
        before = self._snapshot()
        # the string's own characters are tagged (PC.at = (mark, offset in the string)), so that only they are
        # mapped back through the string; characters of variables set outside it (``\$TP`` in the string,
        # ``TP=2`` above it) already carry this script's provenance and keep it
        mark = f"\0bash -c string {next(_STRING_IDS)}"
        try:
            sc = parse_script(tok.text, self.path, self.warnings)
            sc.origin = mark
            sub = self._child(tok.text, self.path, sc)
            sub.run(_statements(sc.root))
        except UserError as e:
            self.warnings.append(f"bash -c string not evaluated: {e}")
            return
        src = tok.pcs

        def remap(p: PC) -> PC:
            if p.at is None or p.at[0] != mark:
                return p
            if 0 <= p.at[1] < len(src):
                o = src[p.at[1]]
                return PC(p.ch, o.lit, o.refs, o.at)
            return PC(p.ch, SYNTH, (), None)

        self._adopt(sub, before, remap, remap, keep_spans=True)
        if launcher and (self.allocation or self.unread_allocation or any(re.match(r"(-N|--nodes|--ntasks-per-node)\b", a.text)
                                                for a in launcher)):
            for c in self.commands[n_before:]:
                if not any(a.text.rsplit("/", 1)[-1] == "torchrun" or a.text in ("torch.distributed.run",
                                                                               "torch.distributed.launch")
                           for a in c.args):  # torchrun's own options state the world
                    c.args = list(launcher) + c.args

    def _heredoc_script(self, body: tree_sitter.Node | None, redirect: tree_sitter.Node) -> None:
        """``sbatch <<EOF ... EOF`` (also ``bash`` / ``sh``): the here-document is the script the command
        runs; it is run in this state (an unquoted delimiter expands it, as a double-quoted string),
        under the SLURM_* environment of its own ``#SBATCH`` lines (Megatron-LM examples/megatron_fsdp/
        sbatch_mfsdp_deepseek_v3.sh)."""
        if body is None or body.type != "command" or self._depth >= MAX_DEPTH:
            return
        name = body.child_by_field_name("name")
        if name is None or self.sc.src(name).rsplit("/", 1)[-1] not in ("sbatch", "bash", "sh"):
            return
        if any(c.type != "command_name" and c.is_named for c in body.children):
            return  # `bash x.sh <<EOF`: the here-document is that script's input
        doc = next((c for c in redirect.children if c.type == "heredoc_body"), None)
        start = next((c for c in redirect.children if c.type == "heredoc_start"), None)
        if doc is None:
            return
        a, b = _start(self.sc, doc), doc.end_byte
        if start is not None and re.search(r"[\"'\\]", self.sc.src(start)):  # <<'EOF': not expanded
            pcs = [self.sc.pc(self.sc.text[i], i) for i in range(self.sc.pos(a), self.sc.pos(b))]
        else:
            kids = [k for k in _expanding_children(doc, a, b) if k.type != "heredoc_content"]
            pcs = self._expand_word_nosplit(_spliced(self.sc, a, b, kids, "dq", True))
        tok = Token(pcs)
        saved = dict(self.scalars)
        alloc, unread = sbatch_header(tok.text)
        if (alloc or unread) and self.sc.src(name).rsplit("/", 1)[-1] == "sbatch":
            self.allocation.clear()
            self.allocation.update(alloc)  # the job's allocation: what srun inside it inherits
            self.unread_allocation.clear()
            self.unread_allocation.update(unread)
        job_env = slurm_env(alloc)
        self.scalars.update({k: _synth(v) for k, v in job_env.items()})
        try:
            self._run_string(tok)
        finally:
            for k in job_env:
                if k in saved:
                    self.scalars[k] = saved[k]
                else:
                    self.scalars.pop(k, None)

    def _called_script(self, args: list[Token]) -> tuple[Path, list[Token]] | None:
        """(file, its arguments) of ``bash FILE.sh ARGS`` / ``./FILE.sh ARGS`` when the file is found:
        next to this script or, as a path from where the run starts, in a folder above it (Megatron-LM's
        READMEs: ``bash examples/gpt3/train_gpt3_175b_distributed.sh $CHECKPOINT_PATH ...``)."""
        i = 1 if args[0].text.rsplit("/", 1)[-1] in ("bash", "sh") and len(args) > 1 else 0
        name = args[i].text
        if not name.endswith((".sh", ".bash")) or name.startswith("-") or self.path in ("<script>", "argv"):
            return None
        me = Path(self.path).resolve()
        # a bare name (`bash train.sh`) only next to this script; a path (`examples/llama/x.sh`) also from the
        # folders above it, where the run may start (a checkout's root)
        if "/" in name.lstrip("./"):
            hit = find_from_run_root(name, me)
        else:
            hit = me.parent / name if os.path.isfile(me.parent / name) else None
        if hit is None or hit == me:
            return None
        return hit, args[i + 1:]

    def _source(self, name: str, what: str = "source", site: int | None = None) -> None:
        """``source FILE`` / ``. FILE``: a file next to the script is read and run in this state (its
        characters are not in the script: values from it are edited at the use site); ``what`` =
        ``bash``: a script this one runs (:meth:`_called_script`, its path already resolved), ``site`` the offset
        of its ``bash`` command in this script (the defaults it takes are recorded: :attr:`run_defaults`)."""
        base = Path(self.path).parent if self.path not in ("<script>", "argv") else Path(".")
        hit = Path(name) if Path(name).is_absolute() else base / name
        from primus_launch.inputs import not_a_file, read_text  # the input boundary: size and encoding

        if self._depth >= MAX_DEPTH:  # a file that sources itself, or two that source each other
            self.warnings.append(f"{what} {name or repr(name)}: more than {MAX_DEPTH} nested sources, function calls "
                                 "or bash -c strings (a file that sources itself?); skipped")
            return
        # os.path.isfile: a name bash cannot open either (too long: ENAMETOOLONG) is skipped as bash skips it; a
        # named pipe, a device or a folder is never opened (a pipe would block, a device may be endless)
        if not name.strip():  # `source "$0"`, `source "$DIR/$F"` with the variables unknown here
            self.warnings.append(f"{what} {name!r}: an empty name (a variable this reader has no value for?); skipped")
            return
        if not os.path.isfile(hit):
            why = not_a_file(hit)
            self.warnings.append(f"{what} {name or repr(name)}: "
                                 + ("not found next to the script" if why == "no such file" else why) + "; skipped")
            return
        try:

            text = read_text(hit, f"{what} {name}")
            sc = parse_script(text, str(hit), self.warnings)
        except (OSError, UnicodeDecodeError, UserError) as e:
            self.warnings.append(f"{what} {name}: not read ({e})")
            return
        sc.origin = str(hit)
        self.files.setdefault(str(hit), (what, text))
        sub = self._child(text, str(hit), sc)
        sub._bash_site = site  # a script run by this one's `bash` command at ``site``: its defaults are recorded
        before = self._snapshot()
        self._depth += 1
        try:
            sub.run(_statements(sc.root))
        finally:
            self._depth -= 1
        self.warnings.append(f"{what} {name}: read ({hit})")
        # the file's own characters (PC.at set) become computed text that remembers its file; a character of this
        # script (at None: a value it passes on, `MBS=$MBS bash train.sh`, `bash train.sh MBS=8`) keeps its place
        # here, where --tune edits it
        self._adopt(sub, before, lambda p: p if p.at is None and p.lit >= 0 else
                    PC(p.ch, SYNTH, (), p.at) if p.lit >= 0 or p.refs else p,
                    lambda p: p if p.at is None and p.lit >= 0 else PC(p.ch, SYNTH if p.lit >= 0 else p.lit, (), p.at),
                    keep_spans=False)

    def _snapshot(self) -> dict[str, int]:
        return {k: id(v) for k, v in self.scalars.items()} | {"[]" + k: id(v) for k, v in self.arrays.items()}

    def _adopt(self, sub: "ShellState", before: dict[str, int], fix, fix_args, keep_spans: bool) -> None:
        """Give what ``sub`` (run on another text) set, and the commands it ran, provenance in this
        script: ``fix`` for variables changed since ``before``, ``fix_args`` for arguments."""
        for k, v in list(self.scalars.items()):
            if before.get(k) != id(v):
                self.scalars[k] = [fix(p) for p in v]
        for k, arr in list(self.arrays.items()):
            if before.get("[]" + k) != id(arr):
                self.arrays[k] = [[fix(p) for p in v] for v in arr]
        for c in sub.commands:
            self.commands.append(Command([Token([fix_args(p) for p in t.pcs]) for t in c.args],
                                         c.start if keep_spans else -1, c.end if keep_spans else -1,
                                         {n: [fix(p) for p in v] for n, v in c.env.items()}))

    # --- [ ] / [[ ]] tests
    def exec_test(self, node: tree_sitter.Node) -> bool:
        """``[ ... ]`` / ``[[ ... ]]``: the expanded words and operators, read as ``test`` reads them."""
        items: list[str | tree_sitter.Node] = []

        def flat(n: tree_sitter.Node) -> None:
            for c in n.children:
                if not c.is_named:
                    if c.type not in ("[", "]", "[[", "]]"):
                        items.append(self.sc.src(c))
                elif c.type in _WORDISH:
                    items.append(c)
                elif c.type != "comment":
                    flat(c)

        flat(node)
        words: list[str] = []
        for k, it in enumerate(items):
            if isinstance(it, str):
                words.append(it)
            elif k == 0 or isinstance(items[k - 1], str):
                run = [x for x in items[k:k + next((j for j, x in enumerate(items[k:]) if isinstance(x, str)),
                                                       len(items) - k)]]
                words.extend(t.text for t in self._words(run))
        return self.test(words, "[[" if node.children and node.children[0].type == "[[" else "[")

    def test(self, argv: list[str], kind: str) -> bool:
        if kind == "[" and argv and argv[-1] == "]":
            argv = argv[:-1]
        if kind == "[[" and argv and argv[-1] == "]]":
            argv = argv[:-1]
        try:
            val, rest = self._t_or(argv, kind)
            return val if not rest else False
        except (IndexError, ValueError, re.error):
            return False

    def _t_or(self, a: list[str], kind: str) -> tuple[bool, list[str]]:
        v, a = self._t_and(a, kind)
        while a and a[0] in ("||", "-o"):
            w, a = self._t_and(a[1:], kind)
            v = v or w
        return v, a

    def _t_and(self, a: list[str], kind: str) -> tuple[bool, list[str]]:
        v, a = self._t_not(a, kind)
        while a and a[0] in ("&&", "-a"):
            w, a = self._t_not(a[1:], kind)
            v = v and w
        return v, a

    def _t_not(self, a: list[str], kind: str) -> tuple[bool, list[str]]:
        if a and a[0] == "!":
            v, a = self._t_not(a[1:], kind)
            return not v, a
        if a and a[0] == "(":
            v, a = self._t_or(a[1:], kind)
            return v, a[1:] if a and a[0] == ")" else a
        return self._t_prim(a, kind)

    def _t_prim(self, a: list[str], kind: str) -> tuple[bool, list[str]]:
        if len(a) >= 3 and a[1] in ("=", "==", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "=~", "<", ">"):
            x, op, y = a[0], a[1], a[2]
            if op in ("=", "=="):
                r = fnmatch.fnmatchcase(x, y) if kind == "[[" else x == y
            elif op == "!=":
                r = not (fnmatch.fnmatchcase(x, y) if kind == "[[" else x == y)
            elif op == "=~":
                m = re.search(y, x)
                r = m is not None
                if m is not None:  # bash sets BASH_REMATCH: the match, then each group
                    self.arrays["BASH_REMATCH"] = [_synth(g or "") for g in (m.group(0),) + m.groups()]
                    self.scalars.pop("BASH_REMATCH", None)
            elif op in ("<", ">"):
                r = (x < y) if op == "<" else (x > y)
            else:
                xi, yi = int(x), int(y)
                r = {"-eq": xi == yi, "-ne": xi != yi, "-lt": xi < yi, "-le": xi <= yi,
                     "-gt": xi > yi, "-ge": xi >= yi}[op]
            return r, a[3:]
        if len(a) >= 2 and a[0] in ("-z", "-n"):
            return (a[1] == "") == (a[0] == "-z"), a[2:]
        if len(a) >= 2 and re.fullmatch(r"-[a-zA-Z]", a[0]):
            return True, a[2:]  # file tests: assume the files the script expects exist
        if len(a) >= 1:
            return a[0] != "", a[1:]
        return False, a


@dataclass
class _Lost:
    """A word in no node: tree-sitter-bash drops the ``-`` of ``python - <<EOF``."""

    start_byte: int
    end_byte: int
    type: str = "word"
    children: tuple = ()
    child_count: int = 0


def _command_words(sc: Script, node: tree_sitter.Node, assignments: bool = False,
                   redirects: tuple[tree_sitter.Node, ...] = ()) -> list[tree_sitter.Node | _Lost]:
    """The word nodes of a simple command (its ``VAR=x`` prefixes with ``assignments``), without
    redirections.  tree-sitter-bash gives ``cmd > out a b`` the destinations ``out a b``: the
    words after the first are the command's arguments."""
    out: list[tree_sitter.Node | _Lost] = []
    kids = list(node.children) + list(redirects)
    for prev, c in zip([None] + kids, kids):
        if prev is not None:
            for m in _LOST_WORD.finditer(sc.data[prev.end_byte:c.start_byte]):
                out.append(_Lost(prev.end_byte + m.start(), prev.end_byte + m.end()))
        if not c.is_named:
            continue
        if c.type == "file_redirect":
            out.extend(c.children_by_field_name("destination")[1:])
        elif c.type == "comment" or c.type.endswith("_redirect") or (c.type == "variable_assignment" and not assignments):
            continue
        else:
            out.append(c.named_children[0] if c.type == "command_name" and c.named_child_count else c)
    end = max((k.end_byte for k in kids), default=node.end_byte)
    m = _TRAILING_ESCAPED_BLANK.match(sc.data, end)
    if m:  # `cmd a \ ` + newline: bash passes " " (tree-sitter-bash drops it)
        out.append(_Lost(m.start(1), m.end(1)))
    return out


_LOST_WORD = re.compile(rb"(?:\\[^\n]|[^\s\\])+")
_TRAILING_ESCAPED_BLANK = re.compile(rb"(?:[ \t]|\\\n)*((?:\\[ \t])+)(?=[\s;&|)]|$)")


def _command_end(sc: Script, node: tree_sitter.Node, redirects: tuple[tree_sitter.Node, ...]) -> int:
    """Where a command's text ends: after its redirections (not a here-document's body) and the
    blanks that follow."""
    end = node.end_byte
    for r in redirects:
        if r.type == "heredoc_redirect":
            end = max([end] + [c.end_byte for c in r.children if c.type in ("heredoc_start", "file_redirect")])
        else:
            end = max(end, r.end_byte)
    while end < len(sc.data) and (sc.data[end] in b" \t\r" or sc.data[end:end + 2] in (b"\\\n", b"\\ ", b"\\\t")):
        end += 2 if sc.data[end] == 0x5C else 1
    return end


def _echo_output(args: list[Token], computed: Callable[[PC], bool]) -> list[PC] | None:
    """What ``echo ARGS`` prints (its words joined by blanks; ``-n`` / ``-E`` dropped: the trailing newline goes with
    a command substitution anyway), the characters ``computed`` says are the substitution's own marked computed
    (SYNTH); None with escapes (``echo -e``, xpg_echo: not read)."""
    while args and args[0].text in ("-n", "-E"):
        args = args[1:]
    if any(a.text.startswith("-e") and set(a.text[1:]) <= set("neE") for a in args[:1]) \
            or any("\\" in a.text for a in args):
        return None
    out: list[PC] = []
    for a in args:
        out.extend(([PC(" ", SYNTH)] if out else []) + [PC(p.ch, SYNTH) if computed(p) else p for p in a.pcs])
    return [PC(p.ch, p.lit, (), p.at) for p in out]  # the child's expansion records are not this state's


def _statements(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The statements directly inside a program, ``{ ... }``, ``( ... )`` or ``else`` clause."""
    return [c for c in node.named_children if c.type != "comment"]
