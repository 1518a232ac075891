"""A small static interpreter for Megatron-LM launch scripts (bash), with source provenance.

It evaluates what a launch script does before it starts training, without running anything:
``VAR=value`` / ``export VAR=value`` assignments, ``${VAR}``, ``$VAR``, ``${VAR:-default}`` (and the
other ``-`` ``=`` ``+`` forms), ``$((arithmetic))``, bash arrays ``ARGS=( ... )`` / ``ARGS+=( ... )``
and ``${ARGS[@]}``, quoted strings, ``\\`` line continuations, comments, ``if/elif/else/fi`` with
``[ ]`` / ``[[ ]]`` tests and ``&&`` / ``||`` lists, ``case`` blocks, functions (defined and called),
``source`` / ``.`` of fragments next to the script and positional parameters (``$1``, ``$@``, given
after the recipe path).  Loops and process substitution are skipped with a warning;
``$(command)`` substitutions stay opaque.  Variables the script does not set are unset: the
environment of this process is never read (topology comes from the plan, not from the machine).

Every character of every expanded word remembers where it came from: ``lit`` is the offset of the
literal character in the script (``-1`` for synthesised text, ``-2`` for opaque command output) and
``refs`` lists the ``$...`` expansions it flowed through, innermost first.  The Megatron adapter uses
this to edit a value exactly where it is written: in place, or in the assignment of the variable it
came from.
"""

from __future__ import annotations

import ast
import fnmatch
import operator
import re
from dataclasses import dataclass, field

from primus_launch.errors import UserError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=")
_WORD_END = set(" \t\n;&|<>()")
_KEYWORD_END = {"then", "fi", "elif", "else", "do", "done", "esac", "}"}

OPAQUE = -2  # lit value of characters produced by $(...) / `...`
SYNTH = -1  # lit value of characters computed (arithmetic, joins)


# --------------------------------------------------------------------------- provenance strings
@dataclass(frozen=True)
class PC:
    """One character with its provenance."""

    ch: str
    lit: int
    refs: tuple[int, ...] = ()


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
        if not self.pcs or any(p.lit < 0 for p in self.pcs):
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


def _lit(text: str, start: int) -> list[PC]:
    return [PC(c, start + i) for i, c in enumerate(text)]


def _synth(text: str, lit: int = SYNTH) -> list[PC]:
    return [PC(c, lit) for c in text]


# --------------------------------------------------------------------------- syntax tree
@dataclass
class Part:
    kind: str  # lit | param | arith | cmdsub
    quoted: bool
    pcs: list[PC] = field(default_factory=list)  # lit
    name: str = ""  # param
    index: str | None = None  # param: "@", "*", or an index expression
    op: str = ""  # param: "", ":-", "-", ":=", "=", ":+", "+", "#", "##", "%", "%%", "len"
    arg: "Word | None" = None  # param operator argument
    text: str = ""  # arith / cmdsub source
    start: int = 0
    end: int = 0


@dataclass
class Word:
    parts: list[Part]
    start: int
    end: int
    array: list["Word"] | None = None  # NAME=( ... ) elements (parts hold "NAME=")

    @property
    def raw_literal(self) -> str | None:
        """The word's text when it is a plain unquoted literal (keywords, operators)."""
        if self.array is not None or any(p.kind != "lit" or p.quoted for p in self.parts):
            return None
        return "".join(pc.ch for p in self.parts for pc in p.pcs)


@dataclass
class Simple:
    words: list[Word]
    start: int
    end: int


@dataclass
class AndOr:
    items: list[tuple[str, "Node"]]  # (op joining it to the previous one: "", "&&", "||"), node


@dataclass
class If:
    branches: list[tuple[list["Node"], list["Node"]]]
    orelse: list["Node"]


@dataclass
class Skipped:
    what: str
    start: int


@dataclass
class Case:
    word: Word
    arms: list[tuple[list[Word], list["Node"]]]  # (patterns, body)


@dataclass
class FuncDef:
    name: str
    body: list["Node"]
    start: int


Node = Simple | AndOr | If | Skipped | Case | FuncDef


# --------------------------------------------------------------------------- parser
class _Parser:
    def __init__(self, src: str, path: str):
        self.s = src
        self.i = 0
        self.path = path
        self.heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs) awaiting a newline
        self.warnings: list[str] = []  # constructs skipped (loops, process substitution)

    # --- low level
    def err(self, msg: str, at: int | None = None) -> UserError:
        at = self.i if at is None else at
        line = self.s.count("\n", 0, at) + 1
        return UserError(f"{self.path}:{line}: cannot parse launch script: {msg}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def skip_blanks(self) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            else:
                break

    def skip_comment(self) -> None:
        if self.peek() == "#":
            while self.i < len(self.s) and self.s[self.i] != "\n":
                self.i += 1

    def skip_separators(self) -> None:
        while True:
            self.skip_blanks()
            self.skip_comment()
            if self.peek() == "\n" and self.heredocs:
                self.i += 1
                self.skip_heredoc_bodies()
                continue
            if self.peek() in ("\n", ";") and not self.s.startswith((";;", ";&"), self.i):
                self.i += 1
                continue
            break

    def skip_heredoc_bodies(self) -> None:
        """Skip the bodies of ``<<WORD`` here-documents opened on the line just ended."""
        for delim, strip in self.heredocs:
            while self.i < len(self.s):
                j = self.s.find("\n", self.i)
                line = self.s[self.i:(len(self.s) if j < 0 else j)]
                self.i = len(self.s) if j < 0 else j + 1
                if (line.lstrip("\t") if strip else line) == delim:
                    break
        self.heredocs = []

    # --- words
    def read_word(self) -> Word | None:
        start = self.i
        parts: list[Part] = []
        lit: list[PC] = []

        def flush() -> None:
            if lit:
                parts.append(Part("lit", False, list(lit)))
                lit.clear()

        while self.i < len(self.s):
            c = self.s[self.i]
            if c in _WORD_END:
                if c == "(" and lit and not parts and _ASSIGN.match("".join(p.ch for p in lit)):
                    # NAME=( ... ) array assignment
                    flush()
                    self.i += 1
                    elems = self.read_array_elems()
                    return Word(parts, start, self.i, array=elems)
                break
            if c == "\\":
                if self.peek(1) == "\n":
                    self.i += 2
                    continue
                if self.peek(1):
                    flush()
                    parts.append(Part("lit", True, [PC(self.s[self.i + 1], self.i + 1)]))
                    self.i += 2
                    continue
                self.i += 1
                continue
            if c == "'":
                flush()
                j = self.s.find("'", self.i + 1)
                if j < 0:
                    raise self.err("unterminated single quote", self.i)
                parts.append(Part("lit", True, _lit(self.s[self.i + 1:j], self.i + 1)))
                self.i = j + 1
                continue
            if c == '"':
                flush()
                self.i += 1
                parts.extend(self.read_dquoted())
                continue
            if c == "$" or c == "`":
                p = self.read_dollar(quoted=False)
                if p is not None:
                    flush()
                    parts.append(p)
                    continue
            lit.append(PC(c, self.i))
            self.i += 1
        flush()
        if self.i == start:
            return None
        return Word(parts, start, self.i)

    def read_array_elems(self) -> list[Word]:
        elems: list[Word] = []
        while True:
            self.skip_separators()
            if self.i >= len(self.s):
                raise self.err("unterminated array ( ... )")
            if self.peek() == ")":
                self.i += 1
                return elems
            w = self.read_word()
            if w is None:
                raise self.err(f"unexpected {self.peek()!r} in array")
            elems.append(w)

    def read_dquoted(self) -> list[Part]:
        parts: list[Part] = []
        lit: list[PC] = []
        opened = self.i - 1
        while True:
            if self.i >= len(self.s):
                raise self.err("unterminated double quote", opened)
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                break
            if c == "\\" and self.peek(1) in ('$', '`', '"', '\\', '\n'):
                if self.peek(1) != "\n":
                    lit.append(PC(self.s[self.i + 1], self.i + 1))
                self.i += 2
                continue
            if c in "$`":
                p = self.read_dollar(quoted=True)
                if p is not None:
                    if lit:
                        parts.append(Part("lit", True, list(lit)))
                        lit.clear()
                    parts.append(p)
                    continue
            lit.append(PC(c, self.i))
            self.i += 1
        # an empty "" still makes a (quoted, empty) part so that it yields an empty argument
        parts.append(Part("lit", True, list(lit)))
        return parts

    def _matching(self, i: int, open_: str, close: str) -> int:
        """Index of the ``close`` matching an already-consumed ``open_`` (quotes respected)."""
        depth = 1
        while i < len(self.s):
            c = self.s[i]
            if c == "\\":
                i += 2
                continue
            if c == "'" and open_ != "{":
                j = self.s.find("'", i + 1)
                i = (j + 1) if j >= 0 else len(self.s)
                continue
            if c == '"':
                j = i + 1
                while j < len(self.s) and self.s[j] != '"':
                    j += 2 if self.s[j] == "\\" else 1
                i = j + 1
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return i
            i += 1
        raise self.err(f"unterminated {open_}...{close}")

    def read_dollar(self, quoted: bool) -> Part | None:
        s, i = self.s, self.i
        if s[i] == "`":
            j = s.find("`", i + 1)
            if j < 0:
                raise self.err("unterminated backquote")
            self.i = j + 1
            return Part("cmdsub", quoted, text=s[i + 1:j], start=i, end=j + 1)
        nxt = self.peek(1)
        if s.startswith("$((", i):
            j = self._matching(i + 3, "(", ")")
            if j + 1 < len(s) and s[j + 1] == ")":
                self.i = j + 2
                return Part("arith", quoted, text=s[i + 3:j], start=i, end=j + 2)
        if nxt == "(":
            j = self._matching(i + 2, "(", ")")
            self.i = j + 1
            return Part("cmdsub", quoted, text=s[i + 2:j], start=i, end=j + 1)
        if nxt == "{":
            j = self._matching(i + 2, "{", "}")
            self.i = j + 1
            return self.parse_braced(i, j, quoted)
        m = _NAME.match(s, i + 1)
        if m:
            self.i = m.end()
            return Part("param", quoted, name=m.group(0), start=i, end=m.end())
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            self.i = i + 2
            return Part("param", quoted, name=nxt, start=i, end=i + 2)
        return None  # a lone "$" is literal

    def parse_braced(self, start: int, close: int, quoted: bool) -> Part:
        body_start = start + 2
        body = self.s[body_start:close]
        part = Part("param", quoted, start=start, end=close + 1)
        k = 0
        if body.startswith("#") and len(body) > 1:
            part.op = "len"
            k = 1
        m = _NAME.match(body, k) or re.compile(r"\d+|[@*#?$!]").match(body, k)
        if not m:
            raise self.err(f"bad substitution ${{{body}}}", start)
        part.name = m.group(0)
        k = m.end()
        if k < len(body) and body[k] == "[":
            j = body.find("]", k)
            if j < 0:
                raise self.err(f"bad substitution ${{{body}}}", start)
            part.index = body[k + 1:j]
            k = j + 1
        if part.op == "len":
            return part
        rest = body[k:]
        for op in (":-", ":=", ":+", ":?", "##", "%%", "-", "=", "+", "?", "#", "%"):
            if rest.startswith(op):
                part.op = op
                sub = _Parser(self.s, self.path)
                sub.i = body_start + k + len(op)
                sub_end = close
                sub.s = self.s[:sub_end]  # the argument word ends at the closing brace
                w_parts: list[Part] = []
                while sub.i < sub_end:
                    w = sub.read_word_in_braces(sub_end)
                    w_parts.extend(w)
                part.arg = Word(w_parts, body_start + k + len(op), sub_end)
                return part
        if rest:
            part.op = "opaque"
            part.text = self.s[start:close + 1]
        return part

    def read_word_in_braces(self, end: int) -> list[Part]:
        """Parts of a ``${x:-word}`` argument (blanks are literal here)."""
        parts: list[Part] = []
        lit: list[PC] = []
        while self.i < end:
            c = self.s[self.i]
            if c == "'":
                if lit:
                    parts.append(Part("lit", False, list(lit)))
                    lit.clear()
                j = self.s.find("'", self.i + 1)
                j = end if j < 0 else j
                parts.append(Part("lit", True, _lit(self.s[self.i + 1:j], self.i + 1)))
                self.i = j + 1
                continue
            if c == '"':
                if lit:
                    parts.append(Part("lit", False, list(lit)))
                    lit.clear()
                self.i += 1
                parts.extend(self.read_dquoted())
                continue
            if c in "$`":
                p = self.read_dollar(quoted=False)
                if p is not None:
                    if lit:
                        parts.append(Part("lit", False, list(lit)))
                        lit.clear()
                    parts.append(p)
                    continue
            if c == "\\" and self.i + 1 < end:
                lit.append(PC(self.s[self.i + 1], self.i + 1))
                self.i += 2
                continue
            lit.append(PC(c, self.i))
            self.i += 1
        if lit:
            parts.append(Part("lit", False, list(lit)))
        return parts

    # --- commands
    def parse_list(self, terminators: set[str]) -> tuple[list[Node], str]:
        """Commands up to one of ``terminators`` (a keyword at command position) or EOF."""
        nodes: list[Node] = []
        while True:
            self.skip_separators()
            if self.i >= len(self.s):
                if terminators:
                    raise self.err(f"missing {' / '.join(sorted(terminators))}")
                return nodes, ""
            if ";;" in terminators and self.s.startswith(";;", self.i):
                self.i += 3 if self.s.startswith((";;&",), self.i) else 2
                return nodes, ";;"
            if ";;" in terminators and self.s.startswith(";&", self.i):
                self.i += 2
                return nodes, ";;"
            save = self.i
            w = self.read_word()
            kw = w.raw_literal if w is not None else None
            if kw in terminators:
                return nodes, kw
            self.i = save
            if self.peek() == ")" and ")" in terminators:
                self.i += 1
                return nodes, ")"
            nodes.append(self.parse_and_or())
            if self.i == save:  # nothing consumed (a stray ')', ...): bash's syntax error, not a loop
                raise self.err(f"syntax error near unexpected token {self.s[self.i:self.i + 1]!r}")

    def parse_and_or(self) -> Node:
        items: list[tuple[str, Node]] = []
        op = ""
        while True:
            node = self.parse_command()
            items.append((op, node))
            self.skip_blanks()
            if self.s.startswith("&&", self.i) or self.s.startswith("||", self.i):
                op = self.s[self.i:self.i + 2]
                self.i += 2
                self.skip_separators()
                continue
            if self.peek() == "|" or (self.peek() == "&" and not self.s.startswith("&&", self.i)):
                self.i += 1  # pipelines / background: keep the left side, read on
                self.skip_separators()
                op = "&&"
                continue
            break
        return items[0][1] if len(items) == 1 else AndOr(items)

    def parse_command(self) -> Node:
        self.skip_blanks()
        start = self.i
        save = self.i
        first = self.read_word()
        kw = first.raw_literal if first is not None else None
        if first is None and self.peek() == "(":
            self.i += 1
            if self.peek() == "(":  # (( arithmetic command ))
                j = self._matching(self.i + 1, "(", ")")
                self.i = j + 2 if self.s.startswith("))", j) else j + 1
                return Skipped("((", start)
            self.parse_list({")"})
            return Skipped("subshell", start)
        if kw == "if":
            return self.parse_if()
        if kw in ("for", "while", "until", "select"):
            self.parse_list({"do"})
            self.parse_list({"done"})
            self.warnings.append(f"line {self.s.count(chr(10), 0, start) + 1}: '{kw}' loop not evaluated")
            return Skipped(kw, start)
        if kw == "case":
            return self.parse_case(start)
        if kw == "{":
            body, _ = self.parse_list({"}"})
            return AndOr([("", n) for n in body]) if body else Skipped("{}", start)
        if kw == "function":
            self.skip_blanks()
            w = self.read_word()
            self.skip_blanks()
            if self.s.startswith("()", self.i):
                self.i += 2
            return FuncDef((w.raw_literal if w else "") or "", self._function_body(), start)
        if first is not None and kw and _NAME.fullmatch(kw) and re.match(r"[ \t]*\(\)", self.s[self.i:]):
            self.i = self.s.index("()", self.i) + 2
            return FuncDef(kw, self._function_body(), start)
        self.i = save
        words: list[Word] = []
        test_mode = False
        while True:
            self.skip_blanks()
            c = self.peek()
            if not c or c in "\n;" or (c == "#" and (not words or self.s[self.i - 1] in " \t")):
                break
            if c in "&|" and not test_mode:
                break
            if c in "&|" and test_mode:  # && / || inside [[ ]]
                op = self.s[self.i:self.i + 2]
                words.append(Word([Part("lit", False, _lit(op, self.i))], self.i, self.i + 2))
                self.i += 2
                continue
            if c == ")" and not test_mode:
                break
            if c in "<>" and self.peek(1) == "(":  # process substitution <(...) / >(...)
                j = self._matching(self.i + 2, "(", ")")
                self.warnings.append(f"line {self.s.count(chr(10), 0, self.i) + 1}: process substitution "
                                     f"{self.s[self.i:j + 1][:40]!r} not evaluated")
                words.append(Word([Part("cmdsub", False, text=self.s[self.i + 2:j], start=self.i, end=j + 1)],
                                  self.i, j + 1))
                self.i = j + 1
                continue
            if c in "<>" or (c.isdigit() and self.s[self.i + 1:self.i + 2] in ("<", ">")):
                if test_mode and c in "<>":
                    words.append(Word([Part("lit", False, _lit(c, self.i))], self.i, self.i + 1))
                    self.i += 1
                    continue
                self._skip_redirect()
                continue
            if c in "()" and test_mode:
                words.append(Word([Part("lit", False, _lit(c, self.i))], self.i, self.i + 1))
                self.i += 1
                continue
            w = self.read_word()
            if w is None:
                raise self.err(f"unexpected {c!r}")
            words.append(w)
            if len(words) == 1 and w.raw_literal == "[[":
                test_mode = True
            if test_mode and w.raw_literal == "]]":
                test_mode = False
        return Simple(words, start, self.i)

    def _skip_redirect(self) -> None:
        while self.peek().isdigit():
            self.i += 1
        op_start = self.i
        while self.peek() in ("<", ">", "&") or (self.peek() == "-" and self.s[op_start:self.i] == "<<"):
            self.i += 1
        op = self.s[op_start:self.i]
        self.skip_blanks()
        if op in ("<<", "<<-"):
            w = self.read_word()
            delim = "".join(pc.ch for p in (w.parts if w else []) for pc in p.pcs)
            self.heredocs.append((delim, op == "<<-"))
            return
        if self.peek() == "-" or self.peek().isdigit():
            self.i += 1
            return
        self.read_word()

    def _function_body(self) -> list[Node]:
        self.skip_separators()
        if self.peek() == "{":
            self.i += 1
            return self.parse_list({"}"})[0]
        if self.peek() == "(":
            self.i += 1
            return self.parse_list({")"})[0]
        return [self.parse_command()]

    def parse_case(self, start: int) -> Case:
        """``case WORD in PAT|PAT) body ;; ... esac`` (``;&`` / ``;;&`` end an arm like ``;;``)."""
        self.skip_blanks()
        word = self.read_word()
        if word is None:
            raise self.err("case without a word", start)
        self.skip_separators()
        w = self.read_word()
        if w is None or w.raw_literal != "in":
            raise self.err("case without 'in'", start)
        arms: list[tuple[list[Word], list[Node]]] = []
        while True:
            self.skip_separators()
            if self.i >= len(self.s):
                raise self.err("missing esac", start)
            save = self.i
            w = self.read_word()
            if w is not None and w.raw_literal == "esac":
                return Case(word, arms)
            self.i = save
            if self.peek() == "(":
                self.i += 1
            pats: list[Word] = []
            while True:
                self.skip_blanks()
                p = self.read_word()
                if p is not None:
                    pats.append(p)
                self.skip_blanks()
                c = self.peek()
                if c == "|":
                    self.i += 1
                    continue
                if c == ")":
                    self.i += 1
                    break
                raise self.err(f"unexpected {c!r} in a case pattern")
            body, _ = self.parse_list({";;", "esac"})
            arms.append((pats, body))
            if _ == "esac":
                return Case(word, arms)

    def parse_if(self) -> If:
        branches: list[tuple[list[Node], list[Node]]] = []
        orelse: list[Node] = []
        while True:
            cond, _ = self.parse_list({"then"})
            body, kw = self.parse_list({"elif", "else", "fi"})
            branches.append((cond, body))
            if kw == "elif":
                continue
            if kw == "else":
                orelse, _ = self.parse_list({"fi"})
            return If(branches, orelse)


def parse_script(text: str, path: str = "<script>", warnings: list[str] | None = None) -> list[Node]:
    """Parse a bash launch script into the small tree :class:`ShellState` executes (constructs it
    skips are appended to ``warnings``)."""
    p = _Parser(text, path)
    nodes, _ = p.parse_list(set())
    if warnings is not None:
        warnings.extend(p.warnings)
    return nodes


# --------------------------------------------------------------------------- evaluation
_ARITH_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Mod: lambda a, b: int(a - b * int(a / b)) if b else 0,
              ast.FloorDiv: lambda a, b: int(a / b) if b else 0, ast.Pow: operator.pow}


def _arith(expr: str) -> int:
    expr = expr.replace("/", "//").replace("////", "//")
    node = ast.parse(expr.strip() or "0", mode="eval").body

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in _ARITH_OPS:
            return int(_ARITH_OPS[type(n.op)](ev(n.left), ev(n.right)))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            v = ev(n.operand)
            return -v if isinstance(n.op, ast.USub) else v
        raise ValueError(expr)

    return ev(node)


@dataclass
class Command:
    """A simple command the script runs, with its arguments expanded."""

    args: list[Token]
    start: int
    end: int
    # environment the command runs with, as far as the script sets it: exported variables and
    # ``VAR=value cmd`` prefix assignments (characters keep their provenance, for editing)
    env: dict[str, list[PC]] = field(default_factory=dict)


class ShellState:
    """Runs the parsed script statically, collecting variables and the commands it would run."""

    def __init__(self, text: str, path: str = "<script>", argv: tuple[str, ...] | list[str] = ()):
        self.text = text
        self.path = path
        self.scalars: dict[str, list[PC]] = {}
        self.arrays: dict[str, list[list[PC]]] = {}
        self.refs: list[Ref] = []
        self.commands: list[Command] = []
        self.functions: dict[str, list[Node]] = {}
        self.warnings: list[str] = []
        self.exported: set[str] = set()  # names exported (export / declare -x) so far
        # positional parameters: given by the caller (characters not in the script: SYNTH)
        self.positional: list[list[PC]] = [_synth(str(x)) for x in argv]
        self._depth = 0
        self.run(parse_script(text, path, self.warnings))

    # --- expansion
    def _ref(self, start: int, end: int, pcs: list[PC]) -> list[PC]:
        rid = len(self.refs)
        self.refs.append(Ref(start, end, len(pcs)))
        return [PC(p.ch, p.lit, p.refs + (rid,)) for p in pcs]

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
            except (ValueError, SyntaxError):
                k = 0
            return ([arr[k]] if -len(arr) <= k < len(arr) else None), False
        if name in self.scalars:
            return [self.scalars[name]], False
        return None, False

    def _expand_part(self, part: Part) -> list[tuple[list[PC], bool, bool]]:
        """Segments (chars, splittable, field_break_after) of one word part."""
        if part.kind == "lit":
            return [(part.pcs, False, False)]
        if part.kind == "cmdsub":
            return [(self._ref(part.start, part.end, _synth(self.text[part.start:part.end], OPAQUE)),
                     not part.quoted, False)]
        if part.kind == "arith":
            inner = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", part.text)

            def var(m: re.Match) -> str:
                vals, _ = self._value(m.group(0), None)
                txt = "".join(p.ch for p in vals[0]) if vals else "0"
                return txt if re.fullmatch(r"-?\d+", txt.strip()) else "0"

            try:
                val = str(_arith(_NAME.sub(var, inner)))
                pcs = _synth(val)
            except (ValueError, SyntaxError, ZeroDivisionError):
                pcs = _synth(self.text[part.start:part.end], OPAQUE)
            return [(self._ref(part.start, part.end, pcs), not part.quoted, False)]
        # parameter
        if part.op == "opaque":
            return [(self._ref(part.start, part.end, _synth(part.text, OPAQUE)), not part.quoted, False)]
        vals, multi = self._value(part.name, part.index)
        if part.op == "len":
            n = len(vals or []) if part.index in ("@", "*") else len(vals[0]) if vals else 0
            return [(self._ref(part.start, part.end, _synth(str(n))), not part.quoted, False)]
        is_null = not vals or (not multi and not vals[0])
        if part.op in (":-", "-", ":=", "=", ":?", "?"):
            use_default = is_null if part.op.startswith(":") else (vals is None)
            if use_default:
                dflt = self._expand_word_nosplit(part.arg) if part.arg else []
                if part.op in (":=", "="):
                    self.scalars[part.name] = dflt
                return [(self._ref(part.start, part.end, dflt), not part.quoted, False)] if dflt or part.quoted else []
        elif part.op in (":+", "+"):
            use_alt = (not is_null) if part.op == ":+" else (vals is not None)
            alt = self._expand_word_nosplit(part.arg) if (use_alt and part.arg) else []
            return [(self._ref(part.start, part.end, alt), not part.quoted, False)]
        if vals is None:
            return [([], not part.quoted, False)]
        if part.op in ("#", "##", "%", "%%"):
            pat = "".join(p.ch for p in self._expand_word_nosplit(part.arg)) if part.arg else ""
            out = []
            for v in vals:
                txt = "".join(p.ch for p in v)
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
            segs = []
            for k, v in enumerate(vals):
                segs.append((v, not part.quoted, k < len(vals) - 1))
            return segs
        return [(self._ref(part.start, part.end, vals[0]), not part.quoted, False)]

    def _expand_word_nosplit(self, word: Word | None) -> list[PC]:
        if word is None:
            return []
        out: list[PC] = []
        for part in word.parts:
            for pcs, _, _ in self._expand_part(part):
                out.extend(pcs)
        return out

    def _is_empty_quoted_list(self, word: Word) -> bool:
        """``"$@"`` / ``"${A[@]}"`` with no elements (and nothing else in the word): bash gives no
        argument at all, not an empty one."""
        multi = [p for p in word.parts if p.kind == "param" and p.quoted and not p.op
                 and (p.name in ("@", "*") or p.index in ("@", "*"))]
        rest = [p for p in word.parts if p not in multi]
        return bool(multi) and all(p.kind == "lit" and not p.pcs for p in rest) and all(
            not (self._value(p.name, p.index)[0] or []) for p in multi)

    def expand_word(self, word: Word) -> list[Token]:
        """Expand one word into argument tokens (parameter expansion + field splitting)."""
        if self._is_empty_quoted_list(word):
            return []
        fields: list[list[PC]] = []
        cur: list[PC] = []
        have = False  # whether the current field exists (quoted empties count)
        for part in word.parts:
            segs = self._expand_part(part)
            if part.quoted and part.kind == "lit":
                have = True
            for pcs, splittable, brk in segs:
                if part.quoted:
                    have = True
                if not splittable:
                    cur.extend(pcs)
                    if pcs:
                        have = True
                else:
                    for p in pcs:
                        if p.ch in " \t\n":
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

    # --- execution
    def run(self, nodes: list[Node]) -> None:
        for n in nodes:
            self.exec(n)

    def exec(self, node: Node) -> bool:
        if isinstance(node, Skipped):
            return True
        if isinstance(node, FuncDef):
            self.functions[node.name] = node.body
            return True
        if isinstance(node, Case):
            word = "".join(p.ch for p in self._expand_word_nosplit(node.word))
            for pats, body in node.arms:
                for pat in pats:
                    ptxt = "".join(p.ch for p in self._expand_word_nosplit(pat))
                    if fnmatch.fnmatchcase(word, ptxt):
                        self.run(body)
                        return True
            return True
        if isinstance(node, If):
            for cond, body in node.branches:
                ok = True
                for c in cond:
                    ok = self.exec(c)
                if ok:
                    self.run(body)
                    return True
            self.run(node.orelse)
            return True
        if isinstance(node, AndOr):
            ok = True
            for op, n in node.items:
                if op == "&&" and not ok:
                    continue
                if op == "||" and ok:
                    continue
                ok = self.exec(n)
            return ok
        return self.exec_simple(node)

    def _assign(self, word: Word, exported: bool = False) -> bool:
        head = word.parts[0] if word.parts else None
        if head is None or head.kind != "lit" or head.quoted:
            return False
        head_txt = "".join(p.ch for p in head.pcs)
        m = _ASSIGN.match(head_txt)
        if not m:
            return False
        name, idx, plus = m.group(1), m.group(2), m.group(3)
        if word.array is not None:
            elems: list[list[PC]] = []
            for w in word.array:
                elems.extend(t.pcs for t in self.expand_word(w))
            if plus:
                self.arrays[name] = self.arrays.get(name, []) + elems
            else:
                self.arrays[name] = elems
            self.scalars.pop(name, None)
            return True
        rest = Part("lit", False, head.pcs[m.end():])
        value = self._expand_word_nosplit(Word([rest] + word.parts[1:], word.start, word.end))
        if idx is not None and name in self.arrays:
            try:
                k = _arith(idx[1:-1])
                arr = self.arrays[name]
                while len(arr) <= k:
                    arr.append([])
                arr[k] = (arr[k] + value) if plus else value
            except (ValueError, SyntaxError):
                pass
            return True
        if name in self.arrays and not plus:
            self.arrays[name] = [value]
            return True
        if name in self.arrays and plus:
            arr = self.arrays[name]
            arr[0] = (arr[0] if arr else []) + value
            return True
        self.scalars[name] = (self.scalars.get(name, []) + value) if plus else value
        return True

    def exec_simple(self, cmd: Simple) -> bool:
        words = list(cmd.words)
        k = 0
        while k < len(words) and self._is_assignment(words[k]):
            k += 1
        if k == len(words):
            for w in words:
                self._assign(w)
            return True
        head = words[k].raw_literal
        if head in ("export", "declare", "local", "readonly", "typeset"):
            opts = [w.raw_literal or "" for w in words[k + 1:] if (w.raw_literal or "").startswith("-")]
            exporting = head == "export" or any("x" in o for o in opts)
            for w in words[k + 1:]:
                self._assign(w)  # options (-a, -x) and bare names set nothing
                first = w.parts[0] if w.parts else None
                m = _NAME.match("".join(p.ch for p in first.pcs)) \
                    if first is not None and first.kind == "lit" and not first.quoted else None
                if exporting and m:
                    self.exported.add(m.group(0))
            return True
        if head == "unset":
            for w in words[k + 1:]:
                nm = w.raw_literal or ""
                self.scalars.pop(nm, None)
                self.arrays.pop(nm, None)
            return True
        args: list[Token] = []
        for w in words[k:]:
            args.extend(self.expand_word(w))
        if not args:
            return True
        name = args[0].text
        if name in ("[", "[[", "test"):
            return self.test([a.text for a in args[1:]], name)
        if name in ("true", ":"):
            return True
        if name == "false":
            return False
        if name == "shift":
            n = int(args[1].text) if len(args) > 1 and args[1].text.isdigit() else 1
            self.positional = self.positional[n:]
            return True
        if name == "set" and len(args) > 1 and args[1].text == "--":
            self.positional = [a.pcs for a in args[2:]]
            return True
        if name in self.functions and self._depth < 20:
            saved = self.positional
            self.positional = [a.pcs for a in args[1:]]
            self._depth += 1
            try:
                self.run(self.functions[name])
            finally:
                self._depth -= 1
                self.positional = saved
            return True
        if name in ("source", ".") and len(args) > 1:
            tok = args[1]
            # `source "$(dirname "$0")/env.sh"`: the opaque directory part is the script's own directory
            last = max((i for i, p in enumerate(tok.pcs) if p.lit == OPAQUE), default=-1)
            self._source(tok.text if last < 0 else "".join(p.ch for p in tok.pcs[last + 1:]).lstrip("/"))
            return True
        inner = self._shell_c(args)
        if inner is not None:
            self._run_string(inner)
            return True
        env = {n: self.scalars[n] for n in sorted(self.exported) if n in self.scalars}
        for w in words[:k]:  # VAR=value cmd: for this command only
            head_pc = w.parts[0] if w.parts else None
            m = _ASSIGN.match("".join(p.ch for p in head_pc.pcs)) if head_pc is not None else None
            if m and not m.group(2) and not m.group(3) and w.array is None:
                rest = Part("lit", False, head_pc.pcs[m.end():])
                env[m.group(1)] = self._expand_word_nosplit(Word([rest] + w.parts[1:], w.start, w.end))
        self.commands.append(Command(args, cmd.start, cmd.end, env))
        return True

    @staticmethod
    def _shell_c(args: list[Token]) -> Token | None:
        """The command string of ``[srun/env/... ] bash -c "$CMD"`` (also sh/zsh, ``-lc``)."""
        for i, a in enumerate(args[:-1]):
            base = a.text.rsplit("/", 1)[-1]
            if base in ("bash", "sh", "zsh", "dash") and re.fullmatch(r"-[a-z]*c[a-z]*", args[i + 1].text) \
                    and i + 2 < len(args):
                return args[i + 2]
        return None

    def _run_string(self, tok: Token) -> None:
        """Run the text of a ``bash -c`` string in this state; characters keep the provenance they
        had in the string (a literal in ``CMD="..."`` stays editable where it is written)."""
        if self._depth >= 20:
            return
        sub = ShellState.__new__(ShellState)
        sub.text, sub.path = tok.text, self.path
        sub.scalars, sub.arrays, sub.functions = self.scalars, self.arrays, self.functions
        sub.refs, sub.commands, sub.warnings = [], [], self.warnings
        sub.positional, sub._depth, sub.exported = self.positional, self._depth + 1, self.exported
        before = {k: id(v) for k, v in self.scalars.items()} | {"[]" + k: id(v) for k, v in self.arrays.items()}
        try:
            sub.run(parse_script(tok.text, self.path, self.warnings))
        except UserError as e:
            self.warnings.append(f"bash -c string not evaluated: {e}")
            return
        src = tok.pcs

        def remap(p: PC) -> PC:
            if p.lit >= 0 and p.lit < len(src):
                o = src[p.lit]
                return PC(p.ch, o.lit, o.refs)
            return PC(p.ch, SYNTH if p.lit != OPAQUE else OPAQUE)

        for k, v in list(self.scalars.items()):
            if before.get(k) != id(v):
                self.scalars[k] = [remap(p) for p in v]
        for k, arr in list(self.arrays.items()):
            if before.get("[]" + k) != id(arr):
                self.arrays[k] = [[remap(p) for p in v] for v in arr]
        for c in sub.commands:
            self.commands.append(Command([Token([remap(p) for p in t.pcs]) for t in c.args], c.start, c.end,
                                         {n: [remap(p) for p in v] for n, v in c.env.items()}))

    def _source(self, name: str) -> None:
        """``source FILE`` / ``. FILE``: a file next to the script is read and run in this state (its
        characters are not in the script: values from it are edited at the use site)."""
        from pathlib import Path

        base = Path(self.path).parent if self.path not in ("<script>", "argv") else Path(".")
        cands = [Path(name)] if Path(name).is_absolute() else [base / name]
        hit = next((c for c in cands if c.is_file()), None)
        if hit is None or self._depth >= 20:
            self.warnings.append(f"source {name}: not found next to the script; skipped")
            return
        try:
            from primus_launch.inputs import read_text  # the input boundary: size and encoding

            text = read_text(hit, f"source {name}")
            nodes = parse_script(text, str(hit), self.warnings)
        except (OSError, UnicodeDecodeError, UserError) as e:
            self.warnings.append(f"source {name}: not read ({e})")
            return
        sub = ShellState.__new__(ShellState)
        sub.text, sub.path = text, str(hit)
        sub.scalars, sub.arrays, sub.functions = self.scalars, self.arrays, self.functions
        sub.refs, sub.commands, sub.warnings = [], [], self.warnings
        sub.positional, sub._depth, sub.exported = self.positional, self._depth + 1, self.exported
        before = {k: id(v) for k, v in self.scalars.items()} | {"[]" + k: id(v) for k, v in self.arrays.items()}
        sub.run(nodes)
        self.warnings.append(f"source {name}: read ({hit})")

        def flat(p: PC) -> PC:
            return PC(p.ch, SYNTH) if p.lit >= 0 or p.refs else p

        for k, v in list(self.scalars.items()):
            if before.get(k) != id(v):
                self.scalars[k] = [flat(p) for p in v]
        for k, arr in list(self.arrays.items()):
            if before.get("[]" + k) != id(arr):
                self.arrays[k] = [[flat(p) for p in v] for v in arr]
        for c in sub.commands:
            self.commands.append(Command([Token([PC(p.ch, SYNTH if p.lit >= 0 else p.lit) for p in t.pcs])
                                          for t in c.args], -1, -1, {n: [flat(p) for p in v] for n, v in c.env.items()}))

    @staticmethod
    def _is_assignment(word: Word) -> bool:
        head = word.parts[0] if word.parts else None
        if head is None or head.kind != "lit" or head.quoted:
            return False
        return bool(_ASSIGN.match("".join(p.ch for p in head.pcs)))

    # --- [ ] / [[ ]] tests
    def test(self, argv: list[str], kind: str) -> bool:
        if kind == "[" and argv and argv[-1] == "]":
            argv = argv[:-1]
        if kind == "[[" and argv and argv[-1] == "]]":
            argv = argv[:-1]
        try:
            val, rest = self._t_or(argv, kind)
            return val if not rest else False
        except (IndexError, ValueError):
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
                r = re.search(y, x) is not None
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
