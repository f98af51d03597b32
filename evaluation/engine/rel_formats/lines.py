"""Whitespace-separated judgment files read line by line, each problem named by ``path:line``.

trec_eval reads these formats with ``atof``/``atol`` (``1.5abc`` is 1.5, ``x`` is 0); here a number must be
written as one, and a line must have exactly the expected number of fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import CR_ONLY, MAX_ID_BYTES, MAX_LINE_BYTES, UTF8_BOM, EngineInputError, show, text_problem

_DECIMAL = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(rb"[+-]?\d+")


@dataclass
class TextLine:
    path: str
    line: int
    fields: list[str]

    def error(self, problem: str) -> EngineInputError:
        return EngineInputError(problem, path=self.path, line=self.line)

    def number(self, value: str, what: str) -> float:
        if not _DECIMAL.fullmatch(value.encode()):
            raise self.error(f"{what} must be a number, found {show(value)}")
        return float(value)

    def integer(self, value: str, what: str) -> int:
        if not _INTEGER.fullmatch(value.encode()):
            raise self.error(f"{what} must be a whole number, found {show(value)}")
        return int(value)


def read_fields(path: str, count: int) -> Iterator[TextLine]:
    """Each non-comment line of ``path`` split on whitespace into exactly ``count`` fields.

    A line starting with ``#`` is a comment, as in trec_eval. Lines longer than MAX_LINE_BYTES and ids longer
    than MAX_ID_BYTES are refused, so a hostile file cannot make one line or one id take unbounded memory.
    """
    with open(path, "rb") as handle:
        head = handle.read(4096)
        problem = text_problem(head)
        if problem:
            raise EngineInputError(problem, path=path)
        if b"\r" in head and b"\n" not in head:
            raise EngineInputError(CR_ONLY, path=path)
        handle.seek(len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0)
        for number, raw in enumerate(_bounded_lines(handle, path), start=1):
            if raw.startswith(b"#"):
                continue
            yield TextLine(path, number, _split(raw, path, number, count))


def _bounded_lines(handle, path: str) -> Iterator[bytes]:
    number = 0
    while True:
        raw = handle.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise EngineInputError(f"line longer than {MAX_LINE_BYTES:,} bytes", path=path, line=number)
        yield raw


def _split(raw: bytes, path: str, number: int, count: int) -> list[str]:
    parts = raw.split()
    if len(parts) != count:
        found = "an empty line" if not parts else f"{len(parts)} fields"
        raise EngineInputError(f"expected {count} fields, found {found}", path=path, line=number)
    try:
        fields = [part.decode("utf-8") for part in parts]
    except UnicodeDecodeError:
        raise EngineInputError("the line is not UTF-8 text", path=path, line=number) from None
    for value in fields[:-1]:
        if len(value.encode()) > MAX_ID_BYTES:
            raise EngineInputError(f"id longer than {MAX_ID_BYTES} bytes: {show(value)}", path=path, line=number)
    return fields
