"""Qrels and runs: reading TREC text, JSON and tables into columnar, integer-coded form.

The TREC readers follow trec_eval 10.0 (``get_qrels.c``, ``get_trec_results.c``): fields are separated
by any whitespace; a qrels line has exactly four fields (``qid iter docno grade``); a run line has at
least six (``qid Q0 docno rank score tag``), where the rank is ignored and anything after the tag too.
trec_eval skips a qrels line that starts with ``#`` and a run line whose first non-blank character is
``#``; a ``#`` anywhere else belongs to a field, so doc ids such as ``doc_00_880019750#4_163`` work.
Blank lines are skipped. Unlike trec_eval, which reads ``abc`` as a score of 0 and keeps going, every
malformed value is an error naming the file and line, and nothing is evaluated from a half-read file.

Large runs take a fast path (files are memory-mapped; pyarrow's CSV parser, on one thread, reads
single-space or tab separated text); anything it cannot vouch for (other whitespace, comments, a wrong
field count, a bad number, invalid UTF-8) is re-read by the line-by-line path, which is also what names
the offending line.

Hostile input is refused before it costs time or memory: a line longer than ``max_line_bytes``
(checked as the file streams past, so it is never held whole), an id longer than ``max_id_bytes``,
a score or grade that is not a finite number in range (``nan``, ``inf``, ``1e400``), JSON nested
deeper than Python's parser goes, and UTF-16 or binary files, each named with its line where it
has one. Error messages quote at most ``QUOTE_CHARS`` characters of a value. ``progress(done,
total, message)``, when given, hears from every long phase (reading, checking, ranking).
"""

from __future__ import annotations

import json
import math
import mmap
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import (CR_ONLY, MAX_ID_BYTES, MAX_LINE_BYTES, UTF8_BOM, EngineInputError, deepest_json_line, show,
                     text_problem)
_INT_RE = re.compile(rb"[+-]?[0-9]+")
_FLOAT_RE = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_DUPLICATE_CHOICES = ("error", "first")
_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)  # None where the platform has no madvise
_CSV_PIECE_BYTES = 16 << 20  # the fast path parses a mapped file this much at a time, then drops its pages
_GRADE_COLUMNS = ("relevance", "rating", "grade", "rel")  # a qrels table's grade, by the first name it has

Progress = Callable[[int, int | None, str], None]


def _silent(done: int, total: int | None, message: str) -> None:
    pass


# ----------------------------------------------------------------------------------------- models


class Qrels:
    """Relevance judgments: one grade per (query, document), sorted by query then doc id (byte order).

    A negative grade means "pooled but not judged" (trec_eval's convention): such a document counts
    as judged for ``Judged@k`` and ``unj`` but never as relevant or non-relevant.
    """

    def __init__(self, query_codes: np.ndarray, query_ids: list[str], doc_ids: pa.Array,
                 grades: np.ndarray, *, name: str | None = None):
        self.name = name
        self.query_ids = query_ids
        self.query_codes = query_codes
        self.doc_ids = doc_ids
        self.grades = grades
        self.offsets = np.searchsorted(query_codes, np.arange(len(query_ids) + 1)).astype(np.int64)
        self._doc_dictionary: pa.Array | None = None
        self._keys: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.grades)

    def __repr__(self) -> str:
        return f"<Qrels {self.name or ''} queries={len(self.query_ids)} judgments={len(self)}>"

    def doc_dictionary(self) -> pa.Array:
        """Sorted distinct doc ids; a row's doc code is its position here."""
        if self._doc_dictionary is None:
            distinct = pc.unique(self.doc_ids)
            self._doc_dictionary = pc.array_take(distinct, pc.array_sort_indices(distinct))
        return self._doc_dictionary

    def keys(self) -> np.ndarray:
        """One sorted int64 key per judgment, ``query_code * n_docs + doc_code``."""
        if self._keys is None:
            dictionary = self.doc_dictionary()
            codes = pc.index_in(self.doc_ids, value_set=dictionary).to_numpy(zero_copy_only=False)
            self._keys = self.query_codes.astype(np.int64) * max(len(dictionary), 1) + codes
        return self._keys

    def to_dataframe(self):
        import pandas as pd

        return pd.DataFrame({
            "query_id": np.asarray(self.query_ids, dtype=object)[self.query_codes],
            "doc_id": self.doc_ids.to_numpy(zero_copy_only=False),
            "relevance": self.grades,
        })

    def to_dict(self) -> dict[str, dict[str, int]]:
        docs = self.doc_ids.to_pylist()
        grades = self.grades.tolist()
        return {
            qid: dict(zip(docs[a:b], grades[a:b]))
            for qid, a, b in zip(self.query_ids, self.offsets[:-1].tolist(), self.offsets[1:].tolist())
        }


class Run:
    """A ranking per query, kept in trec_eval's order: score descending, ties by doc id descending.

    Columns stay in the order they were read; ``order`` (None when the input was already ranked) maps
    ranking positions to rows, and ``offsets`` delimits each query's ranking in that order.
    """

    def __init__(self, query_codes: np.ndarray, query_ids: list[str], doc_ids: pa.Array,
                 scores: np.ndarray, *, name: str | None = None, run_id: str | None = None,
                 order: np.ndarray | None = None, doc_keys: np.ndarray | None = None):
        self.name = name
        self.run_id = run_id
        self.query_ids = query_ids
        self.query_codes = query_codes
        self.doc_ids = doc_ids
        self.scores = scores
        if order is None:
            order = _ranking_order(query_codes, scores, doc_ids, doc_keys)
        if order is not None and len(order) < 2**31:
            order = order.astype(np.int32, copy=False)  # half the memory of the default int64
        self.order = order
        self._doc_keys = doc_keys
        ranked_codes = query_codes if order is None else query_codes[order]
        self.offsets = np.searchsorted(ranked_codes, np.arange(len(query_ids) + 1)).astype(np.int64)

    def __len__(self) -> int:
        return len(self.scores)

    def __repr__(self) -> str:
        return f"<Run {self.run_id or self.name or ''} queries={len(self.query_ids)} rows={len(self)}>"

    def doc_codes(self, dictionary: pa.Array) -> np.ndarray:
        """Each row's doc id as a position in ``dictionary`` (distinct ids in byte order), -1 if absent."""
        if self._doc_keys is not None:
            codes = _codes_by_key(self._doc_keys, dictionary)
            if codes is not None:
                return codes
        return pc.index_in(self.doc_ids, value_set=dictionary).fill_null(-1).to_numpy(zero_copy_only=False)

    def ranked_rows(self) -> np.ndarray:
        return np.arange(len(self), dtype=np.int64) if self.order is None else self.order

    def to_arrow(self) -> pa.Table:
        """The run as a table in ranking order: query_id, doc_id, score, rank (1-based)."""
        rows = self.ranked_rows()
        codes = self.query_codes[rows]
        lengths = np.diff(self.offsets)
        ranks = np.arange(len(rows), dtype=np.int64) - np.repeat(self.offsets[:-1], lengths) + 1
        query_ids = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(self.query_ids, pa.string()))
        table = pa.table({
            "query_id": query_ids.cast(pa.string()),
            "doc_id": self.doc_ids if self.order is None else pc.take(self.doc_ids, pa.array(rows)),
            "score": pa.array(self.scores[rows], pa.float64()),
            "rank": pa.array(ranks, pa.int64()),
        })
        metadata = {b"run_id": (self.run_id or "").encode(), b"name": (self.name or "").encode()}
        return table.replace_schema_metadata(metadata)

    @classmethod
    def from_arrow(cls, table: pa.Table, *, name: str | None = None, on_duplicate: str = "error") -> Run:
        """Rebuild a run from ``to_arrow()`` output (or any table with query_id, doc_id, score)."""
        metadata = table.schema.metadata or {}
        run_id = metadata.get(b"run_id", b"").decode() or None
        name = name or metadata.get(b"name", b"").decode() or None
        return _run_from_table(table, name=name, run_id=run_id, on_duplicate=on_duplicate)

    def to_parquet(self, path: str | os.PathLike) -> None:
        import pyarrow.parquet as pq

        pq.write_table(self.to_arrow(), path)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike, *, name: str | None = None) -> Run:
        import pyarrow.parquet as pq

        return cls.from_arrow(pq.read_table(path), name=name or str(path))

    def to_dataframe(self):
        return self.to_arrow().to_pandas()

    def to_dict(self) -> dict[str, dict[str, float]]:
        table = self.to_arrow()
        docs = table.column("doc_id").to_pylist()
        scores = table.column("score").to_pylist()
        return {
            qid: dict(zip(docs[a:b], scores[a:b]))
            for qid, a, b in zip(self.query_ids, self.offsets[:-1].tolist(), self.offsets[1:].tolist())
        }


# ------------------------------------------------------------------------------------ public readers


def read_qrels(source: Any, *, name: str | None = None, on_duplicate: str = "error",
               max_line_bytes: int | None = MAX_LINE_BYTES, max_id_bytes: int | None = MAX_ID_BYTES,
               max_unpacked_bytes: int | None = None, progress: Progress | None = None) -> Qrels:
    """Read judgments from a TREC qrels file, JSON judgment list, dict, DataFrame, Arrow table or Parquet.

    ``source`` may be a path, an open file, text or bytes containing the file, a JSON judgment list
    ``[{"query_id", "query", "ratings": [{"doc_id", "rating"}]}]``, a ``{qid: {doc_id: grade}}``
    dict, or a table with columns ``query_id, doc_id, relevance``. Duplicated (query, doc) pairs are
    an error (trec_eval stops on them too) unless ``on_duplicate="first"``. A text line longer than
    ``max_line_bytes``, an id longer than ``max_id_bytes`` and a Parquet file whose columns unpack to
    more than ``max_unpacked_bytes`` are errors (None: no limit).
    """
    _check_duplicate_choice(on_duplicate)
    report = progress or _silent
    kind, payload, label = _classify(source, name, max_line_bytes, report)
    if kind == "parquet":
        kind, payload = "table", _parquet_table(payload, label, (("query_id",), ("doc_id",), _GRADE_COLUMNS),
                                                max_id_bytes or max_line_bytes, max_unpacked_bytes)
    if kind == "table":
        return _qrels_from_table(payload, name=label, on_duplicate=on_duplicate, max_id_bytes=max_id_bytes)
    if kind == "json":
        return _qrels_from_json(payload, name=label, on_duplicate=on_duplicate, max_id_bytes=max_id_bytes)
    text = payload
    columns = _fast_trec(text, 4, {0: pa.string(), 2: pa.string(), 3: pa.int64()})
    if columns is not None:
        qid, doc, grade = columns[0], columns[2], columns[3].to_numpy()
        lines = None
    else:
        fields, lines, _ = _slow_trec(text.read(), path=label, ncols=4, exact=True, run=False, report=report)
        qid, doc = _utf8(fields[0], lines, label, "query id"), _utf8(fields[2], lines, label, "doc id")
        grade = _parse_grades(fields[3], lines, label)
    report(0, None, "Checking the judgments")
    return _build_qrels(qid, doc, grade, lines, name=label, on_duplicate=on_duplicate, max_id_bytes=max_id_bytes)


def read_run(source: Any, *, name: str | None = None, on_duplicate: str = "error",
             max_line_bytes: int | None = MAX_LINE_BYTES, max_id_bytes: int | None = MAX_ID_BYTES,
             max_unpacked_bytes: int | None = None, progress: Progress | None = None) -> Run:
    """Read a run from a TREC run file, ``{qid: {doc_id: score}}`` JSON/dict, DataFrame, Arrow or Parquet.

    Tables need columns ``query_id, doc_id, score`` (a rank column is ignored, as in trec_eval).
    A document listed twice for one query is an error unless ``on_duplicate="first"``, which keeps
    the first line it appears on. Scores must be finite. A text line longer than ``max_line_bytes``,
    an id longer than ``max_id_bytes`` and a Parquet file whose columns unpack to more than
    ``max_unpacked_bytes`` are errors (None: no limit).
    """
    _check_duplicate_choice(on_duplicate)
    report = progress or _silent
    kind, payload, label = _classify(source, name, max_line_bytes, report)
    if kind == "parquet":
        kind, payload = "table", _parquet_table(payload, label, (("query_id",), ("doc_id",), ("score",)),
                                                max_id_bytes or max_line_bytes, max_unpacked_bytes)
    if kind == "table":
        metadata = payload.schema.metadata or {} if isinstance(payload, pa.Table) else {}
        run_id = metadata.get(b"run_id", b"").decode() or None
        return _run_from_table(payload, name=label, run_id=run_id, on_duplicate=on_duplicate,
                               max_id_bytes=max_id_bytes, report=report)
    if kind == "json":
        return _run_from_json(payload, name=label, on_duplicate=on_duplicate, max_id_bytes=max_id_bytes,
                              report=report)
    text = payload
    columns = _fast_trec(text, 6, {0: pa.string(), 2: pa.string(), 4: pa.float64()})
    if columns is not None:
        qid, doc, score = columns.pop(0), columns.pop(2), columns.pop(4).to_numpy()
        lines = None
        if not np.isfinite(score).all():  # the line-by-line path names the line
            columns = qid = doc = score = None
    if columns is not None:
        run_id = _run_tag(text.last_line())
    else:
        fields, lines, run_id = _slow_trec(text.read(), path=label, ncols=6, exact=False, run=True, report=report)
        qid, doc = _utf8(fields[0], lines, label, "query id"), _utf8(fields[2], lines, label, "doc id")
        score = _parse_scores(fields[4], lines, label)
    return _build_run(qid, doc, score, lines, name=label, run_id=run_id, on_duplicate=on_duplicate,
                      max_id_bytes=max_id_bytes, report=report)


def run_file_parts(handle: BinaryIO, part_bytes: int = 64 << 20) -> Iterator[bytes]:
    """A TREC run file's bytes in parts of about ``part_bytes`` that end where one query's lines give way to
    another's, for reading a big run a part at a time (``read_run`` on each part). A part never splits a
    run of consecutive lines with one query id; a query's lines far apart in the file land in different
    parts (the caller notices: a query id comes back). Comment and blank lines go with the line after them.
    """
    rest = b""
    while True:
        block = handle.read(part_bytes)
        if not block:
            if rest:
                yield rest
            return
        buffer = rest + block if rest else block
        del block, rest  # while a part is out, this holds only the part and what follows it
        cut = _query_boundary(buffer)
        if not cut and len(buffer) >= 4 * part_bytes:
            cut = len(buffer)  # one query (or one line) this long: cut anyway, the reader of the part will say why
        if not cut:
            rest = buffer
            continue
        part, rest = buffer[:cut], buffer[cut:]
        del buffer
        yield part
        del part


def doc_id_hashes(doc_ids: pa.Array) -> np.ndarray:
    """A 64-bit hash per doc id (equal ids, equal hashes): the distinct ids of a run read in parts are counted
    by their hashes (a clash among millions of ids has odds below one in a million)."""
    if isinstance(doc_ids, pa.ChunkedArray):
        doc_ids = doc_ids.combine_chunks()
    return _string_hashes(doc_ids)


def _query_boundary(data: bytes) -> int:
    """The start of the last query's lines among the complete lines of `data` (0: no boundary yet)."""
    end = data.rfind(b"\n") + 1
    last = None
    position = end
    while position > 0:
        start = data.rfind(b"\n", 0, position - 1) + 1
        fields = data[start:position].split(None, 1)
        query = fields[0] if fields and not fields[0].startswith(b"#") else None
        if query is not None:
            if last is None:
                last = query
            elif query != last:
                return position
        position = start
    return 0


# ------------------------------------------------------------------------------ source classification


def _check_duplicate_choice(on_duplicate: str) -> None:
    if on_duplicate not in _DUPLICATE_CHOICES:
        raise ValueError(f"on_duplicate must be one of {_DUPLICATE_CHOICES}, not {on_duplicate!r}")


def _classify(source: Any, name: str | None, max_line_bytes: int | None,
              report: Progress) -> tuple[str, Any, str | None]:
    """Return ("trec", _Text), ("json", object), ("table", pa.Table) or ("parquet", path) with a display name."""
    if isinstance(source, pa.Table):
        return "table", source, name
    if _is_dataframe(source):
        return "table", pa.Table.from_pandas(source, preserve_index=False), name
    if isinstance(source, (list, tuple, Mapping)):
        return "json", source, name
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _classify_bytes(bytes(source), name, suffix="", max_line_bytes=max_line_bytes, report=report)
    if isinstance(source, str) and ("\n" in source or not source.strip()):
        return _classify_bytes(source.encode("utf-8"), name, suffix="", max_line_bytes=max_line_bytes, report=report)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        label = name or str(source)
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            return "parquet", path, label
        try:
            with open(path, "rb") as handle:
                head = handle.read(4096)
                size = os.fstat(handle.fileno()).st_size
                if size <= len(head):
                    return _classify_bytes(head, label, suffix=suffix, max_line_bytes=max_line_bytes, report=report)
                _check_text(head, label)
                start = len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0
                if suffix == ".json" or head[start:].lstrip()[:1] in (b"[", b"{") or head.isspace():
                    return _classify_bytes(head + handle.read(), label, suffix=suffix, max_line_bytes=max_line_bytes,
                                           report=report)
                # Mapped, the file is read in place by the layout check and by pyarrow: read() would
                # copy it twice (for 72 MB, 0.04-0.24 s of system time against 0.01-0.04 s mapped).
                mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as error:
            raise EngineInputError(f"cannot read file: {error.strerror or error}", path=label) from None
        return "trec", _Text(mapped, start=start, name=label, max_line_bytes=max_line_bytes, report=report), label
    if hasattr(source, "read"):
        data = source.read()
        label = name or getattr(source, "name", None)
        label = str(label) if label is not None else None
        if isinstance(data, str):
            data = data.encode("utf-8")
        return _classify_bytes(data, label, suffix=Path(label).suffix.lower() if label else "",
                               max_line_bytes=max_line_bytes, report=report)
    raise TypeError(f"cannot read qrels or a run from {type(source).__name__}")


def _parquet_table(path: Path, name: str | None, wanted: tuple[tuple[str, ...], ...], max_value_bytes: int | None,
                   max_unpacked_bytes: int | None) -> pa.Table:
    """The columns a reader uses (the first of each tuple of spellings the file has), once the footer
    shows they are within the limits (see `parquet`)."""
    from .parquet import check_parquet, open_parquet, read_parquet

    with open_parquet(path, name=name) as parquet:
        present = parquet.schema_arrow.names
        columns = []
        for spellings in wanted:
            column = next((column for column in spellings if column in present), None)
            if column is None:
                raise _missing_column(spellings[0], present, name)
            columns.append(column)
        check_parquet(parquet, columns, name=name, max_value_bytes=max_value_bytes,
                      max_unpacked_bytes=max_unpacked_bytes)
        return read_parquet(parquet, columns, name=name, max_value_bytes=max_value_bytes,
                            max_unpacked_bytes=max_unpacked_bytes)


def _is_dataframe(source: Any) -> bool:
    return type(source).__module__.startswith("pandas") and hasattr(source, "columns")


def _classify_bytes(data: bytes, name: str | None, *, suffix: str, max_line_bytes: int | None,
                    report: Progress) -> tuple[str, Any, str | None]:
    _check_text(data[:4096], name)
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    head = data[:64].lstrip()
    if suffix == ".json" or head[:1] in (b"[", b"{"):
        report(0, None, "Reading JSON")
        try:
            return "json", json.loads(data.decode("utf-8")), name
        except UnicodeDecodeError as error:
            raise EngineInputError(f"not valid UTF-8 ({error.reason})", path=name,
                                   line=data.count(b"\n", 0, error.start) + 1) from None
        except json.JSONDecodeError as error:
            raise EngineInputError(f"invalid JSON: {error.msg}", path=name, line=error.lineno) from None
        except RecursionError:
            raise EngineInputError("JSON nested too deeply", path=name, line=deepest_json_line(data.decode())) from None
        except ValueError as error:  # an integer of more than 4,300 digits
            raise EngineInputError(f"invalid JSON: {show(str(error))}", path=name) from None
    if not data or data.isspace():
        raise EngineInputError("empty file", path=name)
    return "trec", _Text(data, name=name, max_line_bytes=max_line_bytes, report=report), name


def _check_text(head: bytes, name: str | None) -> None:
    """UTF-16, UTF-32 and binary files are named as such, not reported as a first bad line."""
    problem = text_problem(head)
    if problem:
        raise EngineInputError(problem, path=name)


class _LineLimit:
    """Follows text chunk by chunk and finds the first line longer than ``limit`` bytes (without its
    line end): ``start``, its offset, or None. One ``rfind`` per ``limit`` bytes, nothing per line."""

    def __init__(self, limit: int):
        self.limit = limit
        self.offset = 0  # where the next chunk starts in the text
        self.line_start = 0
        self.start: int | None = None

    def feed(self, buffer: bytes | mmap.mmap, begin: int, end: int) -> bool:
        """False once a line too long is found."""
        position = begin
        while True:
            reach = begin + self.line_start + self.limit + 1 - self.offset  # the line's end must come before
            newline = buffer.rfind(b"\n", position, min(reach, end))
            if newline >= 0:
                self.line_start = self.offset + newline + 1 - begin
                position = newline + 1
                continue
            if reach <= end:
                self.start = self.line_start
                return False
            self.offset += end - begin
            return True


class _Text:
    """TREC text to parse: bytes, or a memory-mapped file (read in place, never copied whole by the
    fast path; a file truncated while it is read stops the process with SIGBUS, as with any mapping).

    Every full pass over the chunks checks the line lengths; ``read()`` makes one first if none was.
    """

    def __init__(self, data: bytes | mmap.mmap, *, start: int = 0, name: str | None = None,
                 max_line_bytes: int | None = MAX_LINE_BYTES, report: Progress = _silent):
        self.data = data
        self.start = start  # bytes to skip (a UTF-8 byte order mark)
        self.name = name
        self.max_line_bytes = max_line_bytes
        self.report = report
        self.checked = max_line_bytes is None

    def chunks(self, size: int) -> Iterable[tuple[bytes | mmap.mmap, int, int]]:
        """(buffer, begin, end) triples covering the text in cache-sized pieces."""
        limit = _LineLimit(self.max_line_bytes) if self.max_line_bytes is not None else None
        total = len(self.data) - self.start
        for begin in range(self.start, len(self.data), size):
            end = min(begin + size, len(self.data))
            if limit is not None and not limit.feed(self.data, begin, end):
                raise EngineInputError(self._long_line_problem(limit.start), path=self.name,
                                       line=self._line_at(limit.start))
            self.report(end - self.start, total, "Reading")
            yield self.data, begin, end
            self.release(begin, end)
        self.checked = True

    def release(self, begin: int, end: int) -> None:
        """Drop a mapped file's pages between ``begin`` and ``end`` from this process's memory once read
        (they stay in the page cache, and come back from it if read again): otherwise every page of the
        file read so far counts in the process's resident memory, 250 MB for a 7M-line run."""
        if isinstance(self.data, mmap.mmap) and _MADV_DONTNEED is not None:
            first = -(-begin // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages only: the ends may be shared
            last = end if end == len(self.data) else end // mmap.PAGESIZE * mmap.PAGESIZE
            if last > first:
                self.data.madvise(_MADV_DONTNEED, first, last - first)

    def pieces(self, size: int) -> Iterator[tuple[int, int]]:
        """(begin, end) offsets of consecutive pieces of about ``size`` bytes, each ending after a line feed
        (the last one at the end of the text)."""
        begin = self.start
        while begin < len(self.data):
            newline = self.data.find(b"\n", min(begin + size, len(self.data)) - 1)
            end = len(self.data) if newline < 0 else newline + 1
            yield begin, end
            begin = end

    def _line_at(self, offset: int) -> int:
        """The number of the line starting ``offset`` bytes into the text (an error path)."""
        stop = self.start + offset
        return sum(self.data[begin:min(begin + (1 << 20), stop)].count(b"\n")
                   for begin in range(self.start, stop, 1 << 20)) + 1

    def _long_line_problem(self, offset: int) -> str:
        limit = self.max_line_bytes
        line = self.data[self.start + offset:self.start + offset + limit]
        if b"\r" in line:
            return CR_ONLY
        return f"line longer than {limit:,} bytes"

    def arrow_source(self) -> pa.Buffer:
        return pa.py_buffer(self.data)

    def read(self) -> bytes:
        if not self.checked:
            for _ in self.chunks(1 << 20):
                pass
        return self.data[self.start:]

    def last_line(self) -> bytes:
        """The last line that holds anything but whitespace."""
        data = self.data
        end = len(data)
        while end > 0 and data[end - 1:end].isspace():
            end -= 1
        return data[data.rfind(b"\n", 0, end) + 1:end]


# --------------------------------------------------------------------------------- TREC text parsing


def _fast_trec(text: _Text, ncols: int, wanted: dict[int, pa.DataType]) -> dict[int, pa.Array] | None:
    """Parse a cleanly formatted file with pyarrow, or return None to fall back to the slow path.

    Clean means: one separator kind (single spaces, or tabs without any space), LF or CRLF line ends,
    no blank or comment lines, exactly ``ncols`` non-empty fields everywhere. Then row i is line i + 1.
    Column 0 comes back dictionary-encoded.
    """
    import pyarrow.csv as pacsv

    layout = _clean_layout(text)
    if layout is None:
        return None
    delimiter, control, carriage_returns, ends_with_lf = layout
    names = [f"c{i}" for i in range(ncols)]
    types = {names[i]: t for i, t in wanted.items()}
    types[names[0]] = pa.dictionary(pa.int32(), pa.string())
    options = dict(
        read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22, use_threads=False),
        parse_options=pacsv.ParseOptions(
            delimiter=delimiter, quote_char=False, double_quote=False, escape_char=False,
            newlines_in_values=False, ignore_empty_lines=False),
        convert_options=pacsv.ConvertOptions(
            include_columns=[names[i] for i in wanted], column_types=types,
            null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False),
    )
    source = text.arrow_source()
    tables = []
    try:
        for begin, end in text.pieces(_CSV_PIECE_BYTES):
            tables.append(pacsv.read_csv(source.slice(begin, end - begin), **options))
            text.release(begin, end)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    table = pa.concat_tables(tables)
    del tables
    rows = table.num_rows
    # Without blank lines every line feed ends a row; any other control byte (a tab between
    # space-separated fields, a vertical tab, a lone CR, which pyarrow would take for a line end)
    # makes the count differ.
    line_feeds = rows - (0 if ends_with_lf else 1)
    tabs = rows * (ncols - 1) if delimiter == "\t" else 0
    if rows == 0 or control != line_feeds + carriage_returns + tabs:
        return None
    columns = {}
    for i in wanted:
        columns[i] = table.column(names[i])
        table = table.drop_columns([names[i]])
    first = _combine_dictionary(columns[0])
    dictionary = first.dictionary
    if pc.any(pc.starts_with(dictionary, "#")).as_py() or pc.any(pc.equal(pc.binary_length(dictionary), 0)).as_py():
        return None
    columns[0] = first
    for i in wanted:
        if i and pa.types.is_string(wanted[i]):
            columns[i] = columns[i].combine_chunks()
            offsets, _ = _string_buffers(columns[i])
            if not np.all(offsets[1:] > offsets[:-1]):
                return None
    # The parser's blocks are free now; hand their pages back before the next big arrays.
    pa.default_memory_pool().release_unused()
    return columns


def _combine_dictionary(column: pa.ChunkedArray) -> pa.DictionaryArray:
    if column.num_chunks == 1:
        return column.chunk(0)
    column = pa.table({"c": column}).unify_dictionaries().column(0)
    indices = pa.concat_arrays([chunk.indices for chunk in column.chunks])
    return pa.DictionaryArray.from_arrays(indices, column.chunk(0).dictionary)


def _clean_layout(text: _Text) -> tuple[str, int, int, bool] | None:
    """One pass over the bytes: the separator, how many control bytes (< 0x20) and CRs there are, and
    whether the text ends with a line feed; None unless every CR precedes an LF, no two whitespace
    bytes are adjacent (an empty field, a blank line) except CR LF, and no line starts or ends blank."""
    delimiter = None
    control = carriage_returns = pairs = crlf = 0
    previous = 10  # as if after a line feed: a leading blank makes a pair
    size = 1 << 20
    # Reused scratch arrays: fresh temporaries per chunk would cost a page fault every 4 KB.
    flags, larger = np.empty(size, dtype=bool), np.empty(size, dtype=np.uint8)
    for buffer, begin, end in text.chunks(size):
        raw = np.frombuffer(buffer, np.uint8, count=end - begin, offset=begin)
        n = len(raw)
        if delimiter is None:
            head_end = min(end, begin + 4096)
            line_end = buffer.find(b"\n", begin, head_end)
            delimiter = "\t" if buffer.find(b"\t", begin, line_end if line_end >= 0 else head_end) >= 0 else " "
        if delimiter == "\t" and buffer.find(b" ", begin, end) >= 0:
            return None
        control += int(np.count_nonzero(np.less(raw, 32, out=flags[:n])))
        np.maximum(raw[:-1], raw[1:], out=larger[:n - 1])
        pairs += int(np.count_nonzero(np.less_equal(larger[:n - 1], 32, out=flags[:n - 1])))
        pairs += max(previous, int(raw[0])) <= 32
        if buffer.find(b"\r", begin, end) >= 0:
            piece = buffer[begin:end]
            carriage_returns += piece.count(b"\r")
            crlf += piece.count(b"\r\n")
        crlf += previous == 13 and raw[0] == 10
        previous = int(raw[-1])
    if delimiter is None or (previous <= 32 and previous != 10):
        return None
    if pairs != crlf or carriage_returns != crlf:
        return None
    return delimiter, control, carriage_returns, previous == 10


def _slow_trec(data: bytes, *, path: str | None, ncols: int, exact: bool, run: bool, report: Progress = _silent):
    """Split every line on whitespace as trec_eval does; return raw fields, line numbers, last tag."""
    keep = (0, 2, 4) if run else (0, 2, 3)
    columns: dict[int, list[bytes]] = {i: [] for i in keep}
    lines: list[int] = []
    tag = None
    append_line = lines.append
    appenders = [(i, columns[i].append) for i in keep]
    total = data.count(b"\n") + 1
    for number, line in enumerate(data.split(b"\n"), 1):
        if not number & 0xFFFFF:
            report(number, total, "Reading line by line")
        fields = line.split()
        if not fields:
            continue
        if fields[0][:1] == b"#" and (run or line[:1] == b"#"):
            continue
        if len(fields) < ncols or (exact and len(fields) > ncols):
            raise EngineInputError(f"expected {ncols} columns, found {len(fields)}", path=path, line=number)
        for i, append in appenders:
            append(fields[i])
        append_line(number)
        if run:
            tag = fields[5]
    if not lines:
        raise EngineInputError("empty file (no data lines)", path=path)
    run_id = tag.decode("utf-8", "replace") if tag is not None else None
    return columns, np.asarray(lines, dtype=np.int64), run_id


def _run_tag(line: bytes) -> str | None:
    fields = line.split()
    return fields[5].decode("utf-8", "replace") if len(fields) >= 6 else None


def _utf8(values: list[bytes], lines: np.ndarray, path: str | None, what: str) -> pa.Array:
    try:
        return pa.array(values, pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:
        for value, line in zip(values, lines.tolist()):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise EngineInputError(f"{what} is not valid UTF-8: {show(value)}", path=path, line=line) from None
        raise


def _parse_scores(values: list[bytes], lines: np.ndarray, path: str | None) -> np.ndarray:
    try:
        scores = pa.array(values, pa.binary()).cast(pa.string()).cast(pa.float64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = next((i for i, value in enumerate(values) if not _FLOAT_RE.fullmatch(value)), None)
        if bad is not None:
            raise EngineInputError(f"score is not a number: {show(values[bad])}", path=path,
                                   line=int(lines[bad])) from None
        scores = np.array([float(value) for value in values])
    bad = np.flatnonzero(~np.isfinite(scores))
    if bad.size:  # nan, inf, or beyond the largest double (1e400)
        raise EngineInputError(f"score is not a finite number: {show(values[bad[0]])}", path=path,
                               line=int(lines[bad[0]]))
    return scores


def _parse_grades(values: list[bytes], lines: np.ndarray, path: str | None) -> np.ndarray:
    grades = np.empty(len(values), dtype=np.int64)
    for i, value in enumerate(values):
        if not _INT_RE.fullmatch(value):
            raise EngineInputError(f"relevance grade is not an integer: {show(value)}", path=path,
                                   line=int(lines[i]))
        number = int(value) if len(value) <= 20 else None
        if number is None or not -2**63 <= number < 2**63:
            raise EngineInputError(f"relevance grade is out of range: {show(value)}", path=path, line=int(lines[i]))
        grades[i] = number
    return grades


# ---------------------------------------------------------------------------------- builders: qrels


def _build_qrels(qid: pa.Array, doc: pa.Array, grades: np.ndarray, lines: np.ndarray | None, *,
                 name: str | None, on_duplicate: str, max_id_bytes: int | None = None, rows: bool = False) -> Qrels:
    _check_id_lengths(qid, "query id", lines, rows, max_id_bytes, name)
    _check_id_lengths(doc, "doc id", lines, rows, max_id_bytes, name)
    query_ids, codes = _encode_queries(qid)
    order = pc.sort_indices(pa.table({"q": codes, "d": doc}), sort_keys=[("q", "ascending"), ("d", "ascending")])
    order = order.to_numpy()
    codes, doc, grades = codes[order], pc.take(doc, pa.array(order)), grades[order]
    if len(order) > 1:
        same = (codes[1:] == codes[:-1]) & pc.equal(doc[1:], doc[:-1]).to_numpy(zero_copy_only=False)
        if same.any():
            if on_duplicate == "error":
                rows = order if lines is None else lines[order] - 1
                i = int(np.flatnonzero(same)[0])
                where = _line_of(rows[i + 1], lines is not None)
                first = _line_of(rows[i], lines is not None)
                raise EngineInputError(
                    f"duplicate judgment of document {show(doc[i + 1].as_py())} for query "
                    f"{show(query_ids[codes[i + 1]])} (first on {first})", path=name, line=where)
            keep = np.concatenate([[True], ~same])
            codes, grades = codes[keep], grades[keep]
            doc = doc.filter(pa.array(keep))
    return Qrels(codes, query_ids, doc, grades, name=name)


def _line_of(row_or_line, from_lines: bool) -> int:
    return int(row_or_line) + 1


def _qrels_from_table(table: pa.Table, *, name: str | None, on_duplicate: str, max_id_bytes: int | None) -> Qrels:
    grade_column = _pick_column(table, _GRADE_COLUMNS, name)
    qid = _string_column(table, "query_id", name)
    doc = _string_column(table, "doc_id", name)
    column = table.column(grade_column)
    if column.null_count:
        raise EngineInputError(f"column {grade_column!r} has missing values", path=name)
    grades = np.asarray(column.to_numpy())
    if grades.dtype.kind == "f":
        if not np.all(np.isfinite(grades)) or not np.all(grades == np.round(grades)):
            raise EngineInputError(f"column {grade_column!r} must hold integer grades", path=name)
    elif grades.dtype.kind not in "iub":
        raise EngineInputError(f"column {grade_column!r} must hold integer grades", path=name)
    return _build_qrels(qid, doc, grades.astype(np.int64), None, name=name, on_duplicate=on_duplicate,
                        max_id_bytes=max_id_bytes, rows=True)


def _qrels_from_json(payload: Any, *, name: str | None, on_duplicate: str, max_id_bytes: int | None) -> Qrels:
    qids: list[str] = []
    docs: list[str] = []
    grades: list[int] = []
    if isinstance(payload, Mapping):
        items: Iterable = ((q, [{"doc_id": d, "rating": g} for d, g in _mapping(r, q, name).items()])
                           for q, r in payload.items())
    else:
        items = (_judgment_item(item, i, name) for i, item in enumerate(payload))
    for qid, ratings in items:
        for j, rating in enumerate(ratings):
            where = f"query {show(qid)}, rating {j}"
            if not isinstance(rating, Mapping) or "doc_id" not in rating or "rating" not in rating:
                raise EngineInputError(f"{where}: expected an object with doc_id and rating", path=name)
            grade = rating["rating"]
            if isinstance(grade, bool) or not isinstance(grade, (int, float)) or (
                    isinstance(grade, float) and not grade.is_integer()):
                raise EngineInputError(f"{where}: rating is not an integer: {show(grade)}", path=name)
            if not -2**63 <= grade < 2**63:
                raise EngineInputError(f"{where}: rating is out of range: {show(grade)}", path=name)
            qids.append(_json_id(qid, where, name))
            docs.append(_json_id(rating["doc_id"], where, name))
            grades.append(int(grade))
    return _build_qrels(pa.array(qids, pa.string()), pa.array(docs, pa.string()),
                        np.asarray(grades, dtype=np.int64), None, name=name, on_duplicate=on_duplicate,
                        max_id_bytes=max_id_bytes, rows=True)


def _judgment_item(item: Any, index: int, name: str | None) -> tuple[str, list]:
    if not isinstance(item, Mapping):
        raise EngineInputError(f"item {index}: expected an object", path=name)
    if "ratings" in item:
        if "query_id" not in item:
            raise EngineInputError(f"item {index}: missing 'query_id'", path=name)
        ratings = item["ratings"]
        if not isinstance(ratings, list):
            raise EngineInputError(f"item {index}: 'ratings' must be a list", path=name)
        return _json_id(item["query_id"], f"item {index}", name), ratings
    missing = [k for k in ("query_id", "doc_id", "relevance") if k not in item]
    if missing:
        raise EngineInputError(f"item {index}: missing {missing[0]!r}", path=name)
    return _json_id(item["query_id"], f"item {index}", name), [{"doc_id": item["doc_id"], "rating": item["relevance"]}]


def _mapping(value: Any, qid: Any, name: str | None) -> Mapping:
    if not isinstance(value, Mapping):
        raise EngineInputError(f"query {show(qid)}: expected an object of doc_id: value", path=name)
    return value


def _json_id(value: Any, where: str, name: str | None) -> str:
    if isinstance(value, (Mapping, list, tuple)):
        raise EngineInputError(f"{where}: an id must be a string or a number, not {show(value)}", path=name)
    return str(value)


# ------------------------------------------------------------------------------------ builders: runs


def _run_from_table(table: pa.Table, *, name: str | None, run_id: str | None, on_duplicate: str,
                    max_id_bytes: int | None = None, report: Progress = _silent) -> Run:
    qid = _string_column(table, "query_id", name)
    doc = _string_column(table, "doc_id", name)
    column = table.column(_pick_column(table, ("score",), name))
    if column.null_count:
        raise EngineInputError("column 'score' has missing values", path=name)
    try:
        scores = np.asarray(pc.cast(column, pa.float64()).to_numpy(), dtype=np.float64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise EngineInputError("column 'score' must be numeric", path=name) from None
    if not np.isfinite(scores).all():
        row = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise EngineInputError(f"score is not a finite number in row {row}: {scores[row]}", path=name)
    return _build_run(qid, doc, scores, None, name=name, run_id=run_id, on_duplicate=on_duplicate, rows=True,
                      max_id_bytes=max_id_bytes, report=report)


def _run_from_json(payload: Any, *, name: str | None, on_duplicate: str, max_id_bytes: int | None,
                   report: Progress) -> Run:
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    if isinstance(payload, Mapping):
        for qid, ranking in payload.items():
            for doc, score in _mapping(ranking, qid, name).items():
                where = f"query {show(qid)}, doc {show(doc)}"
                scores.append(_json_score(score, where, name))
                qids.append(_json_id(qid, where, name))
                docs.append(_json_id(doc, where, name))
    else:
        for i, item in enumerate(payload):
            if not isinstance(item, Mapping) or any(k not in item for k in ("query_id", "doc_id", "score")):
                raise EngineInputError(f"item {i}: expected an object with query_id, doc_id and score", path=name)
            scores.append(_json_score(item["score"], f"item {i}", name))
            qids.append(_json_id(item["query_id"], f"item {i}", name))
            docs.append(_json_id(item["doc_id"], f"item {i}", name))
    return _build_run(pa.array(qids, pa.string()), pa.array(docs, pa.string()),
                      np.asarray(scores, dtype=np.float64), None, name=name, run_id=None,
                      on_duplicate=on_duplicate, rows=True, max_id_bytes=max_id_bytes, report=report)


def _json_score(score: Any, where: str, name: str | None) -> float:
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise EngineInputError(f"{where}: score is not a number: {show(score)}", path=name)
    try:
        value = float(score)
    except OverflowError:  # an integer beyond the largest double
        value = math.inf
    if not math.isfinite(value):
        raise EngineInputError(f"{where}: score is not a finite number: {show(score)}", path=name)
    return value


def _build_run(qid: pa.Array, doc: pa.Array, scores: np.ndarray, lines: np.ndarray | None, *,
               name: str | None, run_id: str | None, on_duplicate: str, rows: bool = False,
               max_id_bytes: int | None = None, report: Progress = _silent) -> Run:
    report(0, None, "Checking ids and duplicates")
    _check_id_lengths(qid, "query id", lines, rows, max_id_bytes, name)
    _check_id_lengths(doc, "doc id", lines, rows, max_id_bytes, name)
    query_ids, codes = _encode_queries(qid)
    if isinstance(doc, pa.ChunkedArray):
        doc = doc.combine_chunks()
    keys, exact = _doc_keys(doc)
    repeats = _repeated_rows(codes, keys, doc)
    if repeats.size:
        if on_duplicate == "error":
            row, first = (int(r) for r in repeats[0])
            problem = (f"duplicate document {show(doc[row].as_py())} in the ranking of query "
                       f"{show(query_ids[codes[row]])}")
            if rows:
                raise EngineInputError(f"{problem} (rows {first} and {row})", path=name)
            line_of = (lambda r: r + 1) if lines is None else (lambda r: int(lines[r]))
            raise EngineInputError(f"{problem} (first on line {line_of(first)})", path=name, line=line_of(row))
        keep = np.ones(len(codes), dtype=bool)
        keep[repeats[:, 0]] = False
        codes, scores, keys = codes[keep], scores[keep], keys[keep]
        doc = doc.filter(pa.array(keep))
    report(0, None, "Ranking")
    return Run(codes, query_ids, doc, scores, name=name, run_id=run_id, doc_keys=keys if exact else None)


def _check_id_lengths(ids: pa.Array, what: str, lines: np.ndarray | None, rows: bool, max_id_bytes: int | None,
                      name: str | None) -> None:
    """No id longer than `max_id_bytes`; the first that is is named by its line (row for tables, JSON)."""
    if max_id_bytes is None:
        return
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    encoded = isinstance(ids, pa.DictionaryArray)
    lengths = pc.binary_length(ids.dictionary if encoded else ids)
    if (pc.max(lengths).as_py() or 0) <= max_id_bytes:
        return
    too_long = np.flatnonzero(lengths.to_numpy(zero_copy_only=False) > max_id_bytes)
    row = int(np.flatnonzero(np.isin(ids.indices.to_numpy(zero_copy_only=False), too_long))[0]) if encoded \
        else int(too_long[0])
    problem = f"{what} longer than {max_id_bytes:,} bytes: {show(ids[row].as_py())}"
    if rows:
        raise EngineInputError(f"{problem} (row {row})", path=name)
    raise EngineInputError(problem, path=name, line=row + 1 if lines is None else int(lines[row]))


def _string_column(table: pa.Table, column: str, name: str | None) -> pa.Array:
    if column not in table.column_names:
        raise _missing_column(column, table.column_names, name)
    values = table.column(column)
    if values.null_count:
        raise EngineInputError(f"column {column!r} has missing values", path=name)
    try:
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        if not pa.types.is_string(values.type):
            values = pc.cast(values, pa.string())
    except pa.ArrowNotImplementedError:  # a struct or list in a table given as such (Parquet's are refused before)
        raise EngineInputError(f"column {column!r} holds {show(str(table.column(column).type))}, not text or numbers",
                               path=name) from None
    except pa.ArrowInvalid:
        raise EngineInputError(f"column {column!r} holds bytes that are not UTF-8 text", path=name) from None
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _pick_column(table: pa.Table, candidates: tuple[str, ...], name: str | None) -> str:
    for candidate in candidates:
        if candidate in table.column_names:
            return candidate
    raise _missing_column(candidates[0], table.column_names, name)


def _missing_column(column: str, columns: list[str], name: str | None) -> EngineInputError:
    return EngineInputError(f"missing column {column!r} (columns: {', '.join(columns)})", path=name)


# ------------------------------------------------------------------------------------- array helpers


def _encode_queries(qid: pa.Array) -> tuple[list[str], np.ndarray]:
    """Query ids sorted by byte order, and each row's index into them (int32)."""
    if isinstance(qid, pa.ChunkedArray):
        qid = qid.combine_chunks()
    # A dictionary array here comes from the CSV reader, whose dictionary holds only values in use.
    encoded = qid if isinstance(qid, pa.DictionaryArray) else pc.dictionary_encode(qid)
    values = encoded.dictionary.to_pylist()
    # Python orders str by code point, which is UTF-8 byte order: trec_eval's strcmp order.
    ranking = np.argsort(np.array(values, dtype=object), kind="stable") if values else np.array([], np.int64)
    remap = np.empty(len(values), dtype=np.int32)
    remap[ranking] = np.arange(len(values), dtype=np.int32)
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    return [values[i] for i in ranking], remap[indices] if len(values) else indices.astype(np.int32)


def _string_buffers(doc: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's n + 1 offsets and its bytes, without copying."""
    n = len(doc)
    offset_type = np.int64 if pa.types.is_large_string(doc.type) else np.int32
    buffers = doc.buffers()
    offsets = np.frombuffer(buffers[1], offset_type)[doc.offset: doc.offset + n + 1]
    raw = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets, raw


def _doc_keys(doc: pa.Array) -> tuple[np.ndarray, bool]:
    """A 64-bit key per doc id, and whether the keys are exact (one-to-one and in byte order) or hashes."""
    keys = _short_keys(doc)
    return (keys, True) if keys is not None else (_string_hashes(doc), False)


def _short_keys(doc: pa.Array) -> np.ndarray | None:
    """Ids of 1 to 8 bytes, zero-padded and read as little-endian integers (for speed: often no copy).

    None if some id is longer, empty or holds a NUL byte. Without NULs the padding is unambiguous, so
    equal keys mean equal ids, across arrays too; ``_in_byte_order`` turns keys into integers that
    compare like the ids' bytes.
    """
    n = len(doc)
    if n == 0:
        return np.zeros(0, np.uint64)
    offsets, raw = _string_buffers(doc)
    lengths = np.diff(offsets)
    shortest, longest = int(lengths.min()), int(lengths.max())
    raw = raw[offsets[0]:offsets[-1]]
    if shortest < 1 or longest > 8 or not raw.all():
        return None
    if shortest == longest == 8:
        keys = raw.view("<u8")
        return keys.astype(np.uint64, copy=keys.ctypes.data % 8 != 0)
    if shortest == longest:
        padded = np.zeros((n, 8), np.uint8)
        padded[:, :longest] = raw.reshape(n, longest)
        return padded.view("<u8").ravel().astype(np.uint64, copy=False)
    raw = np.concatenate([raw, np.zeros(8, np.uint8)])
    windows = np.lib.stride_tricks.as_strided(raw, shape=(len(raw) - 7, 8), strides=(1, 1))
    keys = windows[offsets[:-1] - offsets[0]].view("<u8").ravel().astype(np.uint64, copy=False)
    keys &= np.uint64(0xFFFFFFFFFFFFFFFF) >> ((8 - lengths) * 8).astype(np.uint64)
    return keys


def _in_byte_order(keys: np.ndarray) -> np.ndarray:
    """``_short_keys`` values as integers that order like the ids' bytes (a prefix first)."""
    return keys.astype("<u8", copy=False).view(">u8")


def _codes_by_key(keys: np.ndarray, dictionary: pa.Array) -> np.ndarray | None:
    """``Run.doc_codes`` from exact doc keys (``_short_keys``); None if the dictionary's ids have NULs."""
    index = _key_index(dictionary)
    if index is None:
        return None
    dictionary_keys, candidates, marked = index
    codes = np.full(len(keys), -1, dtype=np.int32)
    if not len(candidates):
        return codes
    shift = np.uint64(64 - (marked.size.bit_length() - 1))  # the bitmap has 2 ** bits entries
    rows = np.concatenate([np.flatnonzero(_marked_rows(keys[start:start + _HASHED_ROWS], marked, shift)) + start
                           for start in range(0, len(keys), _HASHED_ROWS)] or [np.zeros(0, np.int64)])
    found = np.minimum(np.searchsorted(dictionary_keys, keys[rows]), len(candidates) - 1)
    hit = dictionary_keys[found] == keys[rows]
    codes[rows[hit]] = candidates[found[hit]]
    return codes


_last_key_index: list = [None, None]  # the last dictionary given to _key_index, and its index


def _key_index(dictionary: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The dictionary's short ids as sorted keys, their positions in it, and a bitmap of their hashes (None if an id
    has a NUL). Kept for the last dictionary: a run evaluated in parts asks for the same qrels' index each time,
    and building it sorts every judged id (1.3 s of 3 on a 7M-line run with 280,000 judgments, in 31 parts)."""
    if _last_key_index[0] is dictionary:
        return _last_key_index[1]
    offsets, _ = _string_buffers(dictionary)
    lengths = np.diff(offsets)
    candidates = np.flatnonzero((lengths >= 1) & (lengths <= 8))  # no other id can equal a run's
    dictionary_keys = _short_keys(pc.take(dictionary, pa.array(candidates)))
    index = None
    if dictionary_keys is not None:
        by_key = np.argsort(dictionary_keys)
        dictionary_keys, candidates = dictionary_keys[by_key], candidates[by_key]
        # Most run rows are unjudged: a bitmap of hashed dictionary keys rules them out cheaply, and only
        # the few that pass are looked up exactly.
        bits = int(np.clip((len(candidates) * 64).bit_length(), 16, 24))
        marked = np.zeros(1 << bits, dtype=bool)
        with np.errstate(over="ignore"):
            marked[(dictionary_keys * _HASH_MULTIPLIER) >> np.uint64(64 - bits)] = True
        index = dictionary_keys, candidates, marked
    _last_key_index[:] = [dictionary, index]
    return index


def _marked_rows(keys: np.ndarray, marked: np.ndarray, shift: np.uint64) -> np.ndarray:
    """Whether each key's hash bit is set in ``marked``."""
    with np.errstate(over="ignore"):
        hashed = keys * _HASH_MULTIPLIER
    hashed >>= shift
    return marked[hashed]


_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_HASHED_ROWS = 1 << 20  # run rows hashed at a time by _codes_by_key, so that the temporary stays at 8 MB
_CHAINED_BYTES = 32  # ids up to this long (nearly all) are hashed a word position at a time
_SUMMED_BYTES = 16 << 20  # bytes of longer ids hashed at a time, so that the temporaries stay small


def _string_hashes(doc: pa.Array) -> np.ndarray:
    """A 64-bit hash per string (equal strings, equal hashes; a clash costs only a comparison).

    Ids of up to ``_CHAINED_BYTES`` are hashed eight bytes at a time, one word position across all
    of them per step. Longer ids have every word mixed with its position and the mixes summed per id,
    all words of many ids in one numpy pass: the work is linear in their bytes (stepping through the
    words of one 100 KB id, each step over every row, once made such a run take seconds).
    """
    n = len(doc)
    offsets, raw = _string_buffers(doc)
    offsets = offsets.astype(np.int64)
    lengths = offsets[1:] - offsets[:-1]
    padded = np.concatenate([raw[offsets[0]:offsets[-1]] if n else raw[:0], np.zeros(8, np.uint8)])
    windows = np.lib.stride_tricks.as_strided(padded, shape=(len(padded) - 7, 8), strides=(1, 1))
    starts = offsets[:-1] - (offsets[0] if n else 0)
    long_rows = np.flatnonzero(lengths > _CHAINED_BYTES)
    if not len(long_rows):
        return _chained_hashes(windows, starts, lengths)
    hashes = np.empty(n, dtype=np.uint64)
    short_rows = np.flatnonzero(lengths <= _CHAINED_BYTES)
    hashes[short_rows] = _chained_hashes(windows, starts[short_rows], lengths[short_rows])
    ends = np.cumsum(lengths[long_rows])
    first = 0
    while first < len(long_rows):
        last = max(first + 1, int(np.searchsorted(ends, ends[first] + _SUMMED_BYTES)))
        rows = long_rows[first:last]
        hashes[rows] = _summed_hashes(windows, starts[rows], lengths[rows])
        first = last
    return hashes


def _chained_hashes(windows: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    hashes = lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    max_length = int(lengths.max()) if len(lengths) else 0
    for k in range(0, max_length, 8):
        remaining = lengths - k
        active = remaining > 0
        if not active.all():
            idx = np.flatnonzero(active)
            words = np.ascontiguousarray(windows[starts[idx] + k]).view("<u8").ravel()
            rem = remaining[idx]
        else:
            idx = None
            words = np.ascontiguousarray(windows[starts + k]).view("<u8").ravel()
            rem = remaining
        short = rem < 8
        if short.any():
            masks = np.where(short, (np.uint64(1) << (np.minimum(rem, 7).astype(np.uint64) * np.uint64(8)))
                             - np.uint64(1), np.uint64(0xFFFFFFFFFFFFFFFF))
            words = words & masks
        if idx is None:
            hashes = (hashes ^ words) * np.uint64(0xFF51AFD7ED558CCD)
            hashes ^= hashes >> np.uint64(29)
        else:
            h = (hashes[idx] ^ words) * np.uint64(0xFF51AFD7ED558CCD)
            hashes[idx] = h ^ (h >> np.uint64(29))
    return hashes


def _summed_hashes(windows: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    words = (lengths + 7) // 8
    first_word = np.cumsum(words) - words
    position = np.arange(int(words.sum()), dtype=np.int64) - np.repeat(first_word, words)  # within its id
    values = np.ascontiguousarray(windows[np.repeat(starts, words) + 8 * position]).view("<u8").ravel()
    remaining = np.repeat(lengths, words) - 8 * position
    short = remaining < 8
    values[short] &= (np.uint64(1) << (remaining[short].astype(np.uint64) * np.uint64(8))) - np.uint64(1)
    sums = np.add.reduceat(_mix64(values ^ (position.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))), first_word)
    return _mix64(sums ^ (lengths.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)))


def _mix64(values: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, on uint64 arrays (multiplications wrap, as intended)."""
    values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


def _repeated_rows(codes: np.ndarray, doc_keys: np.ndarray, doc: pa.Array) -> np.ndarray:
    """Rows repeating an earlier (query, doc) pair, as an (k, 2) array of (row, first row), by row."""
    n = len(codes)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    ordered = _pair_keys(codes, doc_keys)
    ordered.sort()
    clashes = ordered[1:][ordered[1:] == ordered[:-1]]
    if clashes.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    candidates = np.flatnonzero(np.isin(_pair_keys(codes, doc_keys), clashes))
    docs = pc.take(doc, pa.array(candidates)).to_pylist()
    first_seen: dict[tuple[int, str], int] = {}
    repeats = []
    for row, code, d in zip(candidates.tolist(), codes[candidates].tolist(), docs):
        first = first_seen.setdefault((code, d), row)
        if first != row:
            repeats.append((row, first))
    return np.asarray(repeats, dtype=np.int64).reshape(-1, 2)


def _pair_keys(codes: np.ndarray, doc_keys: np.ndarray) -> np.ndarray:
    """One 64-bit key per (query, doc) row, in a fresh array (equal pairs, equal keys)."""
    keys = codes.astype(np.uint64)
    with np.errstate(over="ignore"):
        keys *= np.uint64(0xC2B2AE3D27D4EB4F)
    keys ^= doc_keys
    return keys


def _ranking_order(codes: np.ndarray, scores: np.ndarray, doc: pa.Array,
                   doc_keys: np.ndarray | None = None) -> np.ndarray | None:
    """Row order for (query asc, score desc, doc id desc by bytes); None if rows already are in it.

    ``doc_keys`` (exact keys from ``_short_keys``), when given, break ties faster.
    """
    n = len(codes)
    if n == 0:
        return None
    same_query = codes[1:] == codes[:-1]
    if not np.all(~same_query | (scores[1:] <= scores[:-1])):
        return _sorted_order(codes, scores, doc, doc_keys)
    starts = np.concatenate([[0], np.flatnonzero(~same_query) + 1])
    block_codes = codes[starts]
    if np.all(block_codes[1:] > block_codes[:-1]):
        blocks = None
    elif len(np.unique(block_codes)) == len(block_codes):
        # Each query's rows are contiguous and ranked already, only the queries are out of order.
        lengths = np.diff(np.concatenate([starts, [n]]))
        by_query = np.argsort(block_codes)
        new_lengths = lengths[by_query]
        new_starts = np.concatenate([[0], np.cumsum(new_lengths)[:-1]])
        blocks = np.arange(n, dtype=np.int64) + np.repeat(starts[by_query] - new_starts, new_lengths)
    else:
        return _sorted_order(codes, scores, doc, doc_keys)
    # Moving whole blocks keeps neighbours within a query, so ties can be broken in file order first.
    within = _break_ties(None, same_query & (scores[1:] == scores[:-1]), doc, doc_keys)
    if within is None:
        return blocks
    return within if blocks is None else within[blocks]


def _sorted_order(codes: np.ndarray, scores: np.ndarray, doc: pa.Array,
                  doc_keys: np.ndarray | None) -> np.ndarray:
    order = np.lexsort((-scores, codes))
    ranked_codes, ranked_scores = codes[order], scores[order]
    tie = (ranked_codes[1:] == ranked_codes[:-1]) & (ranked_scores[1:] == ranked_scores[:-1])
    resorted = _break_ties(order, tie, doc, doc_keys)
    return order if resorted is None else resorted


def _break_ties(rows: np.ndarray | None, tie: np.ndarray, doc: pa.Array,
                doc_keys: np.ndarray | None) -> np.ndarray | None:
    """Re-sort each run of tied positions by doc id, descending byte order; None if none needs it.

    ``rows`` maps positions to rows (None: the identity), and is re-sorted in place; ``tie[i]`` says
    positions i and i + 1 tie.
    """
    first = np.flatnonzero(tie)
    if not len(first):
        return None
    left, right = (first, first + 1) if rows is None else (rows[first], rows[first + 1])
    if doc_keys is not None:
        if np.all(_in_byte_order(doc_keys[left]) > _in_byte_order(doc_keys[right])):
            return None
    elif pc.all(pc.greater(pc.take(doc, pa.array(left)), pc.take(doc, pa.array(right)))).as_py():
        return None
    in_group = np.zeros(len(tie) + 1, dtype=bool)
    in_group[first] = True
    in_group[first + 1] = True
    members = np.flatnonzero(in_group)
    # A member opens a new group unless it ties with the position before it.
    opens = np.ones(len(members), dtype=bool)
    after = members > 0
    opens[after] = ~tie[members[after] - 1]
    group = np.cumsum(opens)
    sub = members if rows is None else rows[members]
    if doc_keys is None:
        resorted = sub[pc.sort_indices(
            pa.table({"g": group, "d": pc.take(doc, pa.array(sub))}),
            sort_keys=[("g", "ascending"), ("d", "descending")]).to_numpy()]
    else:
        resorted = _sort_groups(sub, group, opens, doc_keys)
    if rows is None:
        rows = np.arange(len(tie) + 1, dtype=np.int32 if len(tie) < 2**31 - 1 else np.int64)
    rows[members] = resorted
    return rows


def _sort_groups(sub: np.ndarray, group: np.ndarray, opens: np.ndarray, doc_keys: np.ndarray) -> np.ndarray:
    """``sub`` re-sorted by doc key, descending, within each group (consecutive, numbered from 1)."""
    heads = np.flatnonzero(opens)
    sizes = np.diff(np.append(heads, len(sub)))
    # Most ties are pairs: swap those in place, and sort only the larger groups.
    pairs = heads[sizes == 2]
    swap = pairs[_in_byte_order(doc_keys[sub[pairs]]) < _in_byte_order(doc_keys[sub[pairs + 1]])]
    resorted = sub.copy()
    resorted[swap], resorted[swap + 1] = sub[swap + 1], sub[swap]
    larger = np.flatnonzero(np.repeat(sizes > 2, sizes))
    if len(larger):
        descending = ~_in_byte_order(doc_keys[sub[larger]]).astype(np.uint64)
        resorted[larger] = sub[larger][np.lexsort((descending, group[larger]))]
    return resorted
