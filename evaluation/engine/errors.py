"""Errors the engine raises for bad input and unknown measure names, and the helpers every reader of
people's files uses to describe bad input (the app's readers in `judgments` use them too): a value quoted
short (`show`), why bytes are not UTF-8 text (`text_problem`), where too-deep JSON is (`deepest_json_line`)."""

from __future__ import annotations

import difflib
import re
import reprlib
from collections.abc import Iterable
from typing import Any

QUOTE_CHARS = 80  # the most of any input value an error message quotes
# Limits every reader of people's files applies (the run and qrels readers in data.py, the answer readers in
# answers.py), here so that a reader can use them without loading numpy and pyarrow.
UTF8_BOM = b"\xef\xbb\xbf"
MAX_LINE_BYTES = 1 << 20
MAX_ID_BYTES = 512  # query and doc ids
CR_ONLY = "lines end in CR only (old Mac style); save the file with LF or CRLF line ends"


class EngineInputError(ValueError):
    """Bad qrels or run input, located as precisely as the input allows.

    ``str(error)`` reads like a compiler message, ``results.test:17: expected 6 columns, found 5``;
    ``path`` and ``line`` are None when the input was not a file or the problem has no single line.
    """

    def __init__(self, problem: str, *, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        self.problem = problem
        super().__init__(self._message())

    def _message(self) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.problem}"


class UnknownMeasureError(ValueError):
    """A measure name the registry does not know, with the closest known spellings."""

    def __init__(self, text: str, known: Iterable[str], *, detail: str | None = None):
        self.text = text
        self.suggestions = difflib.get_close_matches(text, sorted(set(known)), n=5, cutoff=0.5)
        message = detail or f"unknown measure {text!r}"
        if self.suggestions:
            message += "; did you mean " + ", ".join(self.suggestions) + "?"
        super().__init__(message)


_SHOWN = reprlib.Repr(maxlevel=2, maxdict=4, maxlist=4, maxtuple=4, maxset=4, maxstring=QUOTE_CHARS,
                      maxother=QUOTE_CHARS, maxlong=QUOTE_CHARS)


def show(value: Any) -> str:
    """An input value quoted for an error message: its repr, cut after QUOTE_CHARS characters (with the
    whole length), so that a 20 MB id gives a short message; nested values are cut at two levels."""
    if isinstance(value, (bytes, bytearray)):
        text, size, unit = bytes(value[:4 * QUOTE_CHARS]).decode("utf-8", "replace"), len(value), "bytes"
        whole = size <= 4 * QUOTE_CHARS
    elif isinstance(value, str):
        text, size, unit, whole = value, len(value), "characters", True
    else:
        return _SHOWN.repr(value)
    shown = text[:QUOTE_CHARS]
    while len(repr(shown)) > QUOTE_CHARS + 2:  # an escaped character (\x1b) counts as what it shows
        shown = shown[:-max(1, (len(repr(shown)) - QUOTE_CHARS - 2) // 10)]
    if whole and shown == text:
        return repr(shown)
    return f"{shown!r}... ({size:,} {unit})"


_MAGIC = ((b"\x1f\x8b", "gzip-compressed data; unpack it first"),
          (b"PK\x03\x04", "a ZIP archive (an Excel workbook?); save it as CSV"))


def text_problem(head: bytes) -> str | None:
    """Why a file starting with these bytes is not UTF-8 text (UTF-16, UTF-32, binary), or None."""
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "the file is UTF-32 text; save it as UTF-8"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "the file is UTF-16 text; save it as UTF-8"
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return f"this is not a text file but {what}"
    sample = head[:4096]
    if b"\x00" not in sample:
        return None
    # UTF-16 without a byte order mark: mostly-ASCII text has a NUL in every other byte, on one side only.
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    if max(even, odd) >= len(sample) // 8 and 8 * min(even, odd) <= max(even, odd):
        return "the file is UTF-16 text (without a byte order mark); save it as UTF-8"
    return "this is not a text file (it holds binary data)"


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def deepest_json_line(text: str, start: int = 0, stop: int = 1000) -> int:
    """The line where the JSON value at `start` is nested deepest, or first deeper than `stop` levels:
    where Python's parser gave up (an error path only: one regular-expression match per token)."""
    depth, deepest, at = 0, 0, start
    for token in _JSON_TOKEN.finditer(text, start):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth > deepest:
                deepest, at = depth, token.start()
                if depth > stop:
                    break
        elif bracket in ("]", "}"):
            depth -= 1
            if depth == 0:
                break
    return text.count("\n", 0, at) + 1
