"""``--where``: a row filter — comparisons combined with ``and``, ``or``, ``not`` and
parentheses.

    split = 'test' and score >= 0.1
    (region in ('eu', 'us') or day < 3) and not team == 'a and b'
    age is not null and `visit type` != "follow-up"

Grammar (keywords case-insensitive)::

    filter     := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | "(" or ")" | predicate
    predicate  := COLUMN OP VALUE | COLUMN ["not"] "in" "(" VALUE ("," VALUE)* ")"
                | COLUMN "is" ["not"] "null"
    OP         := = | == | != | <> | < | <= | > | >=
    COLUMN     := a name [A-Za-z_][A-Za-z0-9_.]* or any name in backquotes (`a b`)
    VALUE      := a number, true/false, or a string in single or double quotes (a doubled
                  quote inside stands for itself: 'it''s'; backslash escapes \\' \\" \\\\)

A real tokenizer reads the text, so a quoted string may contain ``and``, operators or
parentheses, and every error points at the offending token.  Parsing imports nothing heavy: the
filter is checked before any input is read; the readers turn it into one pyarrow expression
(:func:`calcheck.io.source.to_expression`, pushed down to Parquet scans) once the columns are known, and
:attr:`Filter.columns` tells every reader which columns the filter needs — the same on every
source kind and engine.  Nothing the user writes is ever evaluated.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from calcheck.errors import InputError, UsageError

OPS = {"==": "__eq__", "=": "__eq__", "!=": "__ne__", "<>": "__ne__", "<": "__lt__",
       "<=": "__le__", ">": "__gt__", ">=": "__ge__"}
KEYWORDS = ("and", "or", "not", "in", "is", "null", "true", "false")
MAX_LENGTH = 10_000
MAX_DEPTH = 50

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?![A-Za-z0-9_.]))
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<bquote>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<op>==|!=|<>|<=|>=|=|<|>)
  | (?P<punct>[(),])
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    kind: str            # name, column, number, string, op, punct, keyword, end
    text: str
    pos: int
    value: Any = None


@dataclass(frozen=True)
class Condition:
    """``column op value``."""

    column: str
    op: str
    value: Any


@dataclass(frozen=True)
class InSet:
    column: str
    values: tuple[Any, ...]
    negate: bool = False


@dataclass(frozen=True)
class IsNull:
    column: str
    negate: bool = False


@dataclass(frozen=True)
class BoolOp:
    op: str                          # "and", "or"
    parts: tuple[Any, ...]


@dataclass(frozen=True)
class Not:
    part: Any


@dataclass(frozen=True)
class Filter:
    """A parsed ``--where`` filter: its text, its tree and the columns it reads."""

    text: str
    tree: Any

    @property
    def columns(self) -> list[str]:
        """Every column the filter names, in order of first appearance."""
        out: list[str] = []

        def walk(node: Any) -> None:
            if isinstance(node, (Condition, InSet, IsNull)):
                if node.column not in out:
                    out.append(node.column)
            elif isinstance(node, BoolOp):
                for p in node.parts:
                    walk(p)
            elif isinstance(node, Not):
                walk(node.part)

        walk(self.tree)
        return out


def _error(text: str, pos: int, what: str, label: str) -> UsageError:
    before, after = text[max(0, pos - 40):pos], text[pos:pos + 40]
    return UsageError(f"{label}: {what} at character {pos + 1}: "
                      f"{'...' if pos > 40 else ''}{before} <<HERE>> {after}"
                      f"{'...' if len(text) > pos + 40 else ''} (write COLUMN OP VALUE with OP one "
                      "of = != < <= > >=, COLUMN in (V, ...), COLUMN is [not] null, joined by "
                      "and/or/not and parentheses; text values in quotes)")


def _unquote(raw: str) -> str:
    q = raw[0]
    body = raw[1:-1]
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(body[i + 1])
            i += 2
        elif ch == q and i + 1 < len(body) and body[i + 1] == q:
            out.append(q)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def tokenize(text: str, label: str = "--where") -> list[Token]:
    """The tokens of a filter; an unknown character is an error pointing at it."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            what = ("an unterminated string" if text[pos] in "'\"`"
                    else f"unexpected character {text[pos]!r}")
            raise _error(text, pos, what, label)
        kind = m.lastgroup or ""
        raw = m.group()
        if kind == "number":
            num: Any = float(raw) if any(c in raw for c in ".eE") else int(raw)
            tokens.append(Token("number", raw, pos, num))
        elif kind == "name":
            low = raw.lower()
            if low in KEYWORDS:
                tokens.append(Token("keyword", low, pos, {"true": True, "false": False}.get(low)))
            else:
                tokens.append(Token("column", raw, pos, raw))
        elif kind == "bquote":
            tokens.append(Token("column", raw, pos, raw[1:-1].replace("``", "`")))
        elif kind == "string":
            tokens.append(Token("string", raw, pos, _unquote(raw)))
        elif kind in ("op", "punct"):
            tokens.append(Token(kind, raw, pos))
        pos = m.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str, label: str) -> None:
        self.text, self.label = text, label
        self.tokens = tokenize(text, label)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def fail(self, what: str, tok: Token | None = None) -> UsageError:
        t = tok or self.tok
        shown = "the end of the filter" if t.kind == "end" else repr(t.text)
        return _error(self.text, t.pos, f"{what}, found {shown}", self.label)

    def keyword(self, word: str) -> bool:
        if self.tok.kind == "keyword" and self.tok.text == word:
            self.i += 1
            return True
        return False

    def expect_punct(self, ch: str) -> None:
        if self.tok.kind == "punct" and self.tok.text == ch:
            self.i += 1
            return
        raise self.fail(f"expected {ch!r}")

    def parse(self) -> Any:
        tree = self.or_()
        if self.tok.kind != "end":
            raise self.fail("expected 'and', 'or' or the end of the filter")
        return tree

    def or_(self) -> Any:
        parts = [self.and_()]
        while self.keyword("or"):
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else BoolOp("or", tuple(parts))

    def and_(self) -> Any:
        parts = [self.not_()]
        while self.keyword("and"):
            parts.append(self.not_())
        return parts[0] if len(parts) == 1 else BoolOp("and", tuple(parts))

    def not_(self) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"more than {MAX_DEPTH} nested 'not' or parentheses")
        try:
            if self.keyword("not"):
                return Not(self.not_())
            if self.tok.kind == "punct" and self.tok.text == "(":
                self.i += 1
                inner = self.or_()
                self.expect_punct(")")
                return inner
            return self.predicate()
        finally:
            self.depth -= 1

    def value(self) -> Any:
        t = self.tok
        if t.kind in ("number", "string") or (t.kind == "keyword" and t.text in ("true",
                                                                                 "false")):
            self.i += 1
            return t.value
        if t.kind == "column":
            raise self.fail(f"expected a value (a number or a quoted string; is {t.text!r} "
                            "text that needs quotes?)")
        raise self.fail("expected a value (a number or a quoted string)")

    def predicate(self) -> Any:
        t = self.tok
        if t.kind != "column":
            raise self.fail("expected a column name")
        self.i += 1
        column = t.value
        if self.tok.kind == "op":
            op = self.tok.text
            self.i += 1
            return Condition(column, op, self.value())
        if self.keyword("is"):
            negate = self.keyword("not")
            if not self.keyword("null"):
                raise self.fail("expected 'null'")
            return IsNull(column, negate)
        negate = self.keyword("not")
        if self.keyword("in"):
            self.expect_punct("(")
            values = [self.value()]
            while self.tok.kind == "punct" and self.tok.text == ",":
                self.i += 1
                values.append(self.value())
            self.expect_punct(")")
            return InSet(column, tuple(values), negate)
        raise self.fail(f"expected an operator (= != < <= > >=), 'in' or 'is' after {column!r}")


def parse_where(text: str, *, label: str = "--where") -> Filter:
    """The parsed filter (module docstring); a :class:`UsageError` pointing at the offending
    token when it does not parse."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"{label}: empty filter")
    if len(text) > MAX_LENGTH:
        raise UsageError(f"{label}: the filter has {len(text):,} characters; at most "
                         f"{MAX_LENGTH:,}")
    return Filter(text, _Parser(text, label).parse())


def check_columns(flt: Filter | None, available: list[str], source: str,
                  label: str = "--where") -> None:
    """Every column the filter names must exist."""
    for column in (flt.columns if flt is not None else []):
        if column not in available:
            close = difflib.get_close_matches(column, available, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(f"{source}: {label} names no column {column!r}{hint}; available "
                             f"columns: {', '.join(available) or '(none)'}", column=column)
