"""A SQL script cut into its statements, as psql cuts it: at semicolons outside quotes, dollar
quotes, comments, parentheses and the BEGIN ATOMIC ... END body of a function. Each statement
keeps its offset in the script, so that the server's error positions and the statement's kind
(the command tag the server returns) can be reported as file:line."""

from __future__ import annotations

import re
from dataclasses import dataclass

_DOLLAR = re.compile(r"\$([A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*)?\$")
_WORD = re.compile(r"[A-Za-z_\x80-\U0010ffff][\w$\x80-\U0010ffff]*")
_ROUTINE_HEADS = (("create", "function"), ("create", "procedure"))


@dataclass(frozen=True)
class Statement:
    """One statement of a script: its text (without the semicolon) and where it starts."""

    text: str
    offset: int  # of its first character that is not blank or a comment
    line: int  # 1-based line of that character

    def line_at(self, position: int) -> int:
        """The script line of a 0-based position inside this statement's text."""
        return self.line + self.text.count("\n", 0, position)


def split_statements(script: str) -> list[Statement]:
    """The statements of `script`, in order; blank and comment-only pieces are left out."""
    out: list[Statement] = []
    i, n = 0, len(script)
    start, first = 0, None  # the piece's start; its first character that counts
    words: list[str] = []  # the piece's first words, lower case, to spot CREATE FUNCTION
    parens = begins = 0
    while i < n:
        c = script[i]
        if c.isspace():
            i += 1
            continue
        if script.startswith("--", i):
            j = script.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if script.startswith("/*", i):
            i = _block_comment_end(script, i)
            continue
        if first is None:
            first = i
        if c == ";" and parens == 0 and begins == 0:
            _add(out, script, start, first, i)
            i += 1
            start, first, words, parens, begins = i, None, [], 0, 0
            continue
        if c == "(":
            parens += 1
        elif c == ")":
            parens = max(0, parens - 1)
        if c == "'":
            escapes = i > 0 and script[i - 1] in "eE" and not _word_char(script, i - 2)
            i = _quote_end(script, i, "'", escapes)
            continue
        if c == '"':
            i = _quote_end(script, i, '"', False)
            continue
        if c == "$" and not _word_char(script, i - 1):
            m = _DOLLAR.match(script, i)
            if m:
                end = script.find(m.group(0), m.end())
                i = n if end < 0 else end + len(m.group(0))
                continue
        m = _WORD.match(script, i)
        if m and not _word_char(script, i - 1):
            word = m.group(0).lower()
            words.append(word)
            if parens == 0 and _in_routine(words):
                if word == "begin":
                    begins += 1
                elif word == "case" and begins:
                    begins += 1
                elif word == "end" and begins:
                    begins -= 1
            i = m.end()
            continue
        i += 1
    _add(out, script, start, first, n)
    return out


def _add(out: list[Statement], script: str, start: int, first: int | None, end: int) -> None:
    if first is None:
        return
    out.append(Statement(script[first:end], first, script.count("\n", 0, first) + 1))


def _in_routine(words: list[str]) -> bool:
    """Does the piece start CREATE [OR REPLACE] FUNCTION|PROCEDURE (whose body may hold ';')?"""
    head = [w for w in words[:4] if w not in ("or", "replace")][:2]
    return tuple(head) in _ROUTINE_HEADS


def _word_char(script: str, i: int) -> bool:
    return i >= 0 and (script[i].isalnum() or script[i] in "_$")


def _quote_end(script: str, i: int, quote: str, escapes: bool) -> int:
    """The index after the quoted text that starts at i (doubled quotes, and backslash escapes in
    an E'' string, stay inside)."""
    j = i + 1
    n = len(script)
    while j < n:
        c = script[j]
        if escapes and c == "\\":
            j += 2
            continue
        if c == quote:
            if j + 1 < n and script[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    return n


def _block_comment_end(script: str, i: int) -> int:
    """The index after the (nested) /* ... */ comment that starts at i."""
    depth, j, n = 0, i, len(script)
    while j < n:
        if script.startswith("/*", j):
            depth += 1
            j += 2
        elif script.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        else:
            j += 1
    return n
