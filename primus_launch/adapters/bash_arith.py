"""Bash's integer arithmetic (``$(( ... ))``), evaluated as bash evaluates it, without running anything.

Operators, highest precedence first, as the bash manual's "Shell Arithmetic" lists them (bash 5.2,
``expr.c``): unary ``- + ! ~``; ``**`` (right-associative); ``* / %``; ``+ -``; ``<< >>``;
``<= >= < >``; ``== !=``; ``&``; ``^``; ``|``; ``&&``; ``||``; ``cond ? a : b`` (right-associative).
Comparisons and ``!`` / ``&&`` / ``||`` give 1 or 0.  Values are signed 64-bit integers that wrap
(bash's ``intmax_t``), so ``10**10**10`` costs no more than ``2**3``; ``/`` and ``%`` truncate toward
zero (C's); division by zero and a negative exponent are errors, as in bash, except that a division by zero
on the side ``&&`` / ``||`` / ``?:`` leaves unevaluated is not (bash 5.2 ``expr.c`` ``noeval``:
``$(( 0 && 1/0 ))`` is 0; a bad constant or negative exponent there still fails, as it does in bash).  Constants: decimal,
``0x`` hex, a leading ``0`` octal, ``BASE#DIGITS`` (2..64).  Names are the caller's business (it puts
their values in first); assignments (``=``, ``+=``, ``++``) and the comma operator are not evaluated:
they raise ``ValueError`` like any other expression this does not read, and the caller keeps the text.
"""

from __future__ import annotations

import re
from typing import Callable

_TOKEN = re.compile(r"\s*(?:(\d+#[0-9A-Za-z@_]+|0[xX][0-9A-Fa-f]+|\d+)|(\*\*|<<|>>|<=|>=|==|!=|&&|\|\||"
                    r"\+\+|--|[-+*/%<>&^|!~?:()=,]))")
# binary operators: precedence (higher binds tighter), right-associative
_BINARY = {"**": (12, True), "*": (11, False), "/": (11, False), "%": (11, False), "+": (10, False),
           "-": (10, False), "<<": (9, False), ">>": (9, False), "<=": (8, False), ">=": (8, False),
           "<": (8, False), ">": (8, False), "==": (7, False), "!=": (7, False), "&": (6, False),
           "^": (5, False), "|": (4, False), "&&": (3, False), "||": (2, False)}
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ@_"


def int64(v: int) -> int:
    """``v`` as bash keeps it: a signed 64-bit integer, wrapped (bash's ``intmax_t`` arithmetic)."""
    v &= 0xFFFF_FFFF_FFFF_FFFF
    return v - (1 << 64) if v >> 63 else v


def trunc_div(a: int, b: int) -> int:
    """Integer division truncated toward zero, exactly (C's ``/``, as bash's); by zero bash fails."""
    if not b:
        raise ValueError("division by 0")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _constant(txt: str) -> int:
    if "#" in txt:  # BASE#DIGITS; bases above 36 use a-z, A-Z, @, _ (36 and below: case-insensitive)
        base_txt, digits = txt.split("#", 1)
        base = int(base_txt)
        if not 2 <= base <= 64:
            raise ValueError(f"invalid arithmetic base {base}")
        table = _DIGITS if base > 36 else _DIGITS[:36]
        v = 0
        for ch in digits if base > 36 else digits.lower():
            d = table.find(ch)
            if d < 0 or d >= base:
                raise ValueError(f"value too great for base: {txt}")
            v = v * base + d
        return int64(v)
    if txt[:2] in ("0x", "0X"):
        return int64(int(txt, 16))
    if len(txt) > 1 and txt[0] == "0":
        return int64(int(txt, 8))  # bash: a leading 0 is octal (08 is an error, so is int('8', 8))
    return int64(int(txt))


def _binary(op: str, a: int, b: int) -> int:
    if op == "**":
        if b < 0:
            raise ValueError("exponent less than 0")
        return int64(pow(a, b, 1 << 64))
    if op in ("/", "%"):
        q = trunc_div(a, b)
        return int64(q if op == "/" else a - b * q)
    if op in ("<<", ">>"):
        b &= 63
        return int64(a << b) if op == "<<" else a >> b
    fn = {"*": lambda: a * b, "+": lambda: a + b, "-": lambda: a - b, "<=": lambda: int(a <= b),
          ">=": lambda: int(a >= b), "<": lambda: int(a < b), ">": lambda: int(a > b), "==": lambda: int(a == b),
          "!=": lambda: int(a != b), "&": lambda: a & b, "^": lambda: a ^ b, "|": lambda: a | b}[op]
    return int64(fn())


def arith(expr: str) -> int:
    """Value of ``expr`` (the text between ``$((`` and ``))``, names already replaced by their values);
    ``ValueError`` for what bash would reject or this does not read (assignments, ``,``, names)."""
    toks: list[tuple[str, str]] = []
    pos, text = 0, expr.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"arithmetic: cannot read {text[pos:]!r}")
        toks.append(("num", m.group(1)) if m.group(1) else ("op", m.group(2)))
        pos = m.end()
    if not toks:
        return 0
    k = 0
    noeval = 0  # > 0 while parsing a side bash short-circuits: its division by zero is no error

    def peek() -> tuple[str, str] | None:
        return toks[k] if k < len(toks) else None

    def take(want: str | None = None) -> tuple[str, str]:
        nonlocal k
        if k >= len(toks) or (want is not None and toks[k] != ("op", want)):
            raise ValueError(f"arithmetic: expected {want or 'more'} in {text!r}")
        k += 1
        return toks[k - 1]

    def unary() -> int:
        t = take()
        if t[0] == "num":
            return _constant(t[1])
        op = t[1]
        if op == "(":
            v = ternary()
            take(")")
            return v
        if op in ("-", "+", "!", "~"):  # bash binds these tighter than **: -2**2 is 4
            v = unary()
            return {"-": lambda: int64(-v), "+": lambda: v, "!": lambda: int(not v), "~": lambda: ~v}[op]()
        raise ValueError(f"arithmetic: {op!r} not read in {text!r}")  # ++, --, =, ',': assignments, not evaluated

    def binary(min_prec: int) -> int:
        left = unary()
        while True:
            t = peek()
            if not t or t[0] != "op" or t[1] not in _BINARY:
                return left
            prec, right_assoc = _BINARY[t[1]]
            if prec < min_prec:
                return left
            take()
            if t[1] in ("&&", "||"):  # bash short-circuits: the other side is parsed, not evaluated
                right = skipped(bool(left) == (t[1] == "||"), lambda: binary(prec + 1))
                left = int(bool(left) and bool(right)) if t[1] == "&&" else int(bool(left) or bool(right))
                continue
            right = binary(prec if right_assoc else prec + 1)
            left = 0 if noeval and t[1] in ("/", "%") and not right else _binary(t[1], left, right)

    def skipped(skip: bool, parse: Callable[[], int]) -> int:
        nonlocal noeval
        noeval += skip
        try:
            return parse()
        finally:
            noeval -= skip

    def ternary() -> int:
        cond = binary(1)
        if peek() == ("op", "?"):
            take()
            a = skipped(not cond, ternary)
            take(":")
            b = skipped(bool(cond), ternary)
            return a if cond else b
        return cond

    value = ternary()
    if k != len(toks):
        raise ValueError(f"arithmetic: {toks[k][1]!r} not read in {text!r}")
    return value
