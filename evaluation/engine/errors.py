"""Errors the engine raises for bad input and unknown measure names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


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
