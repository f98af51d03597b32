"""Qrels and runs: reading TREC text, JSON and tables into columnar, integer-coded form.

The TREC readers follow trec_eval 10.0 (``get_qrels.c``, ``get_trec_results.c``): fields are separated
by any whitespace; a qrels line has exactly four fields (``qid iter docno grade``); a run line has at
least six (``qid Q0 docno rank score tag``), where the rank is ignored and anything after the tag too.
trec_eval skips a qrels line that starts with ``#`` and a run line whose first non-blank character is
``#``; a ``#`` anywhere else belongs to a field, so doc ids such as ``doc_00_880019750#4_163`` work.
Blank lines are skipped. Unlike trec_eval, which reads ``abc`` as a score of 0 and keeps going, every
malformed value is an error naming the file and line, and nothing is evaluated from a half-read file.

Large runs take a fast path (pyarrow's multithreaded CSV parser on single-space or tab separated
files); anything it cannot vouch for (other whitespace, comments, a wrong field count, a bad number,
invalid UTF-8) is re-read by the line-by-line path, which is also what names the offending line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import EngineInputError

UTF8_BOM = b"\xef\xbb\xbf"
_INT_RE = re.compile(rb"[+-]?[0-9]+")
_FLOAT_RE = re.compile(
    rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)
_DUPLICATE_CHOICES = ("error", "first")


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


def read_qrels(source: Any, *, name: str | None = None, on_duplicate: str = "error") -> Qrels:
    """Read judgments from a TREC qrels file, JSON judgment list, dict, DataFrame or Arrow table.

    ``source`` may be a path, an open file, text or bytes containing the file, a JSON judgment list
    ``[{"query_id", "query", "ratings": [{"doc_id", "rating"}]}]``, a ``{qid: {doc_id: grade}}``
    dict, or a table with columns ``query_id, doc_id, relevance``. Duplicated (query, doc) pairs are
    an error (trec_eval stops on them too) unless ``on_duplicate="first"``.
    """
    _check_duplicate_choice(on_duplicate)
    kind, payload, label = _classify(source, name)
    if kind == "table":
        return _qrels_from_table(payload, name=label, on_duplicate=on_duplicate)
    if kind == "json":
        return _qrels_from_json(payload, name=label, on_duplicate=on_duplicate)
    text = payload
    columns = _fast_trec(text, 4, {0: pa.string(), 2: pa.string(), 3: pa.int64()})
    if columns is not None:
        qid, doc, grade = columns[0], columns[2], columns[3].to_numpy()
        lines = None
    else:
        fields, lines, _ = _slow_trec(text.read(), path=label, ncols=4, exact=True, run=False)
        qid, doc = _utf8(fields[0], lines, label, "query id"), _utf8(fields[2], lines, label, "doc id")
        grade = _parse_grades(fields[3], lines, label)
    return _build_qrels(qid, doc, grade, lines, name=label, on_duplicate=on_duplicate)


def read_run(source: Any, *, name: str | None = None, on_duplicate: str = "error") -> Run:
    """Read a run from a TREC run file, ``{qid: {doc_id: score}}`` JSON/dict, DataFrame, Arrow or Parquet.

    Tables need columns ``query_id, doc_id, score`` (a rank column is ignored, as in trec_eval).
    A document listed twice for one query is an error unless ``on_duplicate="first"``, which keeps
    the first line it appears on.
    """
    _check_duplicate_choice(on_duplicate)
    kind, payload, label = _classify(source, name)
    if kind == "table":
        metadata = payload.schema.metadata or {} if isinstance(payload, pa.Table) else {}
        run_id = metadata.get(b"run_id", b"").decode() or None
        return _run_from_table(payload, name=label, run_id=run_id, on_duplicate=on_duplicate)
    if kind == "json":
        return _run_from_json(payload, name=label, on_duplicate=on_duplicate)
    text = payload
    columns = _fast_trec(text, 6, {0: pa.string(), 2: pa.string(), 4: pa.float64()})
    if columns is not None:
        qid, doc, score = columns.pop(0), columns.pop(2), columns.pop(4).to_numpy()
        lines = None
        if np.isnan(score).any():
            columns = qid = doc = score = None
    if columns is not None:
        run_id = _run_tag(text.last_line())
    else:
        fields, lines, run_id = _slow_trec(text.read(), path=label, ncols=6, exact=False, run=True)
        qid, doc = _utf8(fields[0], lines, label, "query id"), _utf8(fields[2], lines, label, "doc id")
        score = _parse_scores(fields[4], lines, label)
    return _build_run(qid, doc, score, lines, name=label, run_id=run_id, on_duplicate=on_duplicate)


# ------------------------------------------------------------------------------ source classification


def _check_duplicate_choice(on_duplicate: str) -> None:
    if on_duplicate not in _DUPLICATE_CHOICES:
        raise ValueError(f"on_duplicate must be one of {_DUPLICATE_CHOICES}, not {on_duplicate!r}")


def _classify(source: Any, name: str | None) -> tuple[str, Any, str | None]:
    """Return ("trec", bytes), ("json", object) or ("table", pa.Table) with a display name."""
    if isinstance(source, pa.Table):
        return "table", source, name
    if _is_dataframe(source):
        return "table", pa.Table.from_pandas(source, preserve_index=False), name
    if isinstance(source, (list, tuple, Mapping)):
        return "json", source, name
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _classify_bytes(bytes(source), name, suffix="")
    if isinstance(source, str) and ("\n" in source or not source.strip()):
        return _classify_bytes(source.encode("utf-8"), name, suffix="")
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        label = name or str(source)
        if path.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            return "table", pq.read_table(path), label
        try:
            with open(path, "rb") as handle:
                head = handle.read(4096)
                size = os.fstat(handle.fileno()).st_size
                if size <= len(head):
                    return _classify_bytes(head, label, suffix=path.suffix.lower())
                start = len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0
                if path.suffix.lower() == ".json" or head[start:].lstrip()[:1] in (b"[", b"{") \
                        or head.isspace():
                    return _classify_bytes(head + handle.read(), label, suffix=path.suffix.lower())
        except OSError as error:
            raise EngineInputError(f"cannot read file: {error.strerror or error}", path=label) from None
        return "trec", _Text(path=str(path), start=start), label
    if hasattr(source, "read"):
        data = source.read()
        label = name or getattr(source, "name", None)
        label = str(label) if label is not None else None
        if isinstance(data, str):
            data = data.encode("utf-8")
        return _classify_bytes(data, label, suffix=Path(label).suffix.lower() if label else "")
    raise TypeError(f"cannot read qrels or a run from {type(source).__name__}")


def _is_dataframe(source: Any) -> bool:
    return type(source).__module__.startswith("pandas") and hasattr(source, "columns")


def _classify_bytes(data: bytes, name: str | None, *, suffix: str) -> tuple[str, Any, str | None]:
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    head = data[:64].lstrip()
    if suffix == ".json" or head[:1] in (b"[", b"{"):
        try:
            return "json", json.loads(data.decode("utf-8")), name
        except UnicodeDecodeError as error:
            raise EngineInputError(f"not valid UTF-8 ({error.reason})", path=name) from None
        except json.JSONDecodeError as error:
            raise EngineInputError(f"invalid JSON: {error.msg}", path=name, line=error.lineno) from None
    if not data or data.isspace():
        raise EngineInputError("empty file", path=name)
    return "trec", _Text(data=data), name


class _Text:
    """TREC text to parse: bytes, or a file that the fast path never holds in memory as a whole."""

    def __init__(self, *, data: bytes | None = None, path: str | None = None, start: int = 0):
        self.data = data
        self.path = path
        self.start = start  # bytes to skip (a UTF-8 byte order mark), which pyarrow skips too

    def chunks(self, size: int) -> Iterable[tuple[bytes | bytearray, int, int]]:
        """(buffer, begin, end) triples covering the text: cache-sized pieces, never a copy of all of it."""
        if self.data is not None:
            for begin in range(self.start, len(self.data), size):
                yield self.data, begin, min(begin + size, len(self.data))
            return
        with open(self.path, "rb") as handle:
            handle.seek(self.start)
            buffer = bytearray(size)
            while count := handle.readinto(buffer):
                yield buffer, 0, count

    def arrow_source(self):
        return pa.py_buffer(self.data) if self.data is not None else self.path

    def read(self) -> bytes:
        if self.data is not None:
            return self.data[self.start:]
        with open(self.path, "rb") as handle:
            handle.seek(self.start)
            return handle.read()

    def last_line(self) -> bytes:
        """The last line that holds anything but whitespace."""
        if self.data is not None:
            return _last_line(self.data)[0]
        with open(self.path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            tail = 1 << 16
            while True:
                begin = max(self.start, size - tail)
                handle.seek(begin)
                line, whole = _last_line(handle.read(size - begin))
                if whole or begin == self.start:
                    return line
                tail *= 4


def _last_line(data: bytes) -> tuple[bytes, bool]:
    """The last line with anything but whitespace, and whether a line feed precedes it in ``data``."""
    end = len(data)
    while end > 0 and data[end - 1:end].isspace():
        end -= 1
    start = data.rfind(b"\n", 0, end) + 1
    return data[start:end], start > 0


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
    try:
        table = pacsv.read_csv(
            text.arrow_source(),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=False, double_quote=False, escape_char=False,
                newlines_in_values=False, ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(
                include_columns=[names[i] for i in wanted], column_types=types,
                null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
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
            carriage_returns += buffer.count(b"\r", begin, end)
            crlf += buffer.count(b"\r\n", begin, end)
        crlf += previous == 13 and raw[0] == 10
        previous = int(raw[-1])
    if delimiter is None or (previous <= 32 and previous != 10):
        return None
    if pairs != crlf or carriage_returns != crlf:
        return None
    return delimiter, control, carriage_returns, previous == 10


def _slow_trec(data: bytes, *, path: str | None, ncols: int, exact: bool, run: bool):
    """Split every line on whitespace as trec_eval does; return raw fields, line numbers, last tag."""
    keep = (0, 2, 4) if run else (0, 2, 3)
    columns: dict[int, list[bytes]] = {i: [] for i in keep}
    lines: list[int] = []
    tag = None
    append_line = lines.append
    appenders = [(i, columns[i].append) for i in keep]
    for number, line in enumerate(data.split(b"\n"), 1):
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
                raise EngineInputError(f"{what} is not valid UTF-8: {value!r}", path=path, line=line) from None
        raise


def _parse_scores(values: list[bytes], lines: np.ndarray, path: str | None) -> np.ndarray:
    try:
        scores = pa.array(values, pa.binary()).cast(pa.string()).cast(pa.float64()).to_numpy()
        bad = np.flatnonzero(np.isnan(scores))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = np.array([i for i, v in enumerate(values) if not _FLOAT_RE.fullmatch(v)] or [0])
        scores = None
    if scores is not None and bad.size == 0:
        return scores
    for i in bad.tolist():
        value = values[i]
        if not _FLOAT_RE.fullmatch(value) or value.lower().lstrip(b"+-") == b"nan":
            raise EngineInputError(f"score is not a number: {_show(value)}", path=path, line=int(lines[i]))
    return np.array([float(v) for v in values])


def _parse_grades(values: list[bytes], lines: np.ndarray, path: str | None) -> np.ndarray:
    grades = np.empty(len(values), dtype=np.int64)
    for i, value in enumerate(values):
        if not _INT_RE.fullmatch(value):
            raise EngineInputError(f"relevance grade is not an integer: {_show(value)}", path=path,
                                   line=int(lines[i]))
        grades[i] = int(value)
    return grades


def _show(value: bytes) -> str:
    return repr(value.decode("utf-8", "replace"))


# ---------------------------------------------------------------------------------- builders: qrels


def _build_qrels(qid: pa.Array, doc: pa.Array, grades: np.ndarray, lines: np.ndarray | None, *,
                 name: str | None, on_duplicate: str) -> Qrels:
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
                    f"duplicate judgment of document {doc[i + 1].as_py()!r} for query "
                    f"{query_ids[codes[i + 1]]!r} (first on {first})", path=name, line=where)
            keep = np.concatenate([[True], ~same])
            codes, grades = codes[keep], grades[keep]
            doc = doc.filter(pa.array(keep))
    return Qrels(codes, query_ids, doc, grades, name=name)


def _line_of(row_or_line, from_lines: bool) -> int:
    return int(row_or_line) + 1


def _qrels_from_table(table: pa.Table, *, name: str | None, on_duplicate: str) -> Qrels:
    grade_column = _pick_column(table, ("relevance", "rating", "grade", "rel"), name)
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
    return _build_qrels(qid, doc, grades.astype(np.int64), None, name=name, on_duplicate=on_duplicate)


def _qrels_from_json(payload: Any, *, name: str | None, on_duplicate: str) -> Qrels:
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
            where = f"query {qid!r}, rating {j}"
            if not isinstance(rating, Mapping) or "doc_id" not in rating or "rating" not in rating:
                raise EngineInputError(f"{where}: expected an object with doc_id and rating", path=name)
            grade = rating["rating"]
            if isinstance(grade, bool) or not isinstance(grade, (int, float)) or grade != int(grade):
                raise EngineInputError(f"{where}: rating is not an integer: {grade!r}", path=name)
            qids.append(str(qid))
            docs.append(str(rating["doc_id"]))
            grades.append(int(grade))
    return _build_qrels(pa.array(qids, pa.string()), pa.array(docs, pa.string()),
                        np.asarray(grades, dtype=np.int64), None, name=name, on_duplicate=on_duplicate)


def _judgment_item(item: Any, index: int, name: str | None) -> tuple[str, list]:
    if not isinstance(item, Mapping):
        raise EngineInputError(f"item {index}: expected an object", path=name)
    if "ratings" in item:
        if "query_id" not in item:
            raise EngineInputError(f"item {index}: missing 'query_id'", path=name)
        ratings = item["ratings"]
        if not isinstance(ratings, list):
            raise EngineInputError(f"item {index}: 'ratings' must be a list", path=name)
        return str(item["query_id"]), ratings
    missing = [k for k in ("query_id", "doc_id", "relevance") if k not in item]
    if missing:
        raise EngineInputError(f"item {index}: missing {missing[0]!r}", path=name)
    return str(item["query_id"]), [{"doc_id": item["doc_id"], "rating": item["relevance"]}]


def _mapping(value: Any, qid: Any, name: str | None) -> Mapping:
    if not isinstance(value, Mapping):
        raise EngineInputError(f"query {qid!r}: expected an object of doc_id: value", path=name)
    return value


# ------------------------------------------------------------------------------------ builders: runs


def _run_from_table(table: pa.Table, *, name: str | None, run_id: str | None, on_duplicate: str) -> Run:
    qid = _string_column(table, "query_id", name)
    doc = _string_column(table, "doc_id", name)
    column = table.column(_pick_column(table, ("score",), name))
    if column.null_count:
        raise EngineInputError("column 'score' has missing values", path=name)
    try:
        scores = np.asarray(pc.cast(column, pa.float64()).to_numpy(), dtype=np.float64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise EngineInputError("column 'score' must be numeric", path=name) from None
    if np.isnan(scores).any():
        row = int(np.flatnonzero(np.isnan(scores))[0])
        raise EngineInputError(f"score is not a number in row {row}", path=name)
    return _build_run(qid, doc, scores, None, name=name, run_id=run_id, on_duplicate=on_duplicate, rows=True)


def _run_from_json(payload: Any, *, name: str | None, on_duplicate: str) -> Run:
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    if isinstance(payload, Mapping):
        for qid, ranking in payload.items():
            for doc, score in _mapping(ranking, qid, name).items():
                if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
                    raise EngineInputError(f"query {qid!r}, doc {doc!r}: score is not a number: {score!r}",
                                           path=name)
                qids.append(str(qid))
                docs.append(str(doc))
                scores.append(float(score))
    else:
        for i, item in enumerate(payload):
            if not isinstance(item, Mapping) or any(k not in item for k in ("query_id", "doc_id", "score")):
                raise EngineInputError(f"item {i}: expected an object with query_id, doc_id and score", path=name)
            score = item["score"]
            if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
                raise EngineInputError(f"item {i}: score is not a number: {score!r}", path=name)
            qids.append(str(item["query_id"]))
            docs.append(str(item["doc_id"]))
            scores.append(float(score))
    return _build_run(pa.array(qids, pa.string()), pa.array(docs, pa.string()),
                      np.asarray(scores, dtype=np.float64), None, name=name, run_id=None,
                      on_duplicate=on_duplicate, rows=True)


def _build_run(qid: pa.Array, doc: pa.Array, scores: np.ndarray, lines: np.ndarray | None, *,
               name: str | None, run_id: str | None, on_duplicate: str, rows: bool = False) -> Run:
    query_ids, codes = _encode_queries(qid)
    if isinstance(doc, pa.ChunkedArray):
        doc = doc.combine_chunks()
    keys, exact = _doc_keys(doc)
    repeats = _repeated_rows(codes, keys, doc)
    if repeats.size:
        if on_duplicate == "error":
            row, first = (int(r) for r in repeats[0])
            problem = (f"duplicate document {doc[row].as_py()!r} in the ranking of query "
                       f"{query_ids[codes[row]]!r}")
            if rows:
                raise EngineInputError(f"{problem} (rows {first} and {row})", path=name)
            line_of = (lambda r: r + 1) if lines is None else (lambda r: int(lines[r]))
            raise EngineInputError(f"{problem} (first on line {line_of(first)})", path=name, line=line_of(row))
        keep = np.ones(len(codes), dtype=bool)
        keep[repeats[:, 0]] = False
        codes, scores, keys = codes[keep], scores[keep], keys[keep]
        doc = doc.filter(pa.array(keep))
    return Run(codes, query_ids, doc, scores, name=name, run_id=run_id, doc_keys=keys if exact else None)


def _string_column(table: pa.Table, column: str, name: str | None) -> pa.Array:
    if column not in table.column_names:
        raise EngineInputError(f"missing column {column!r} (columns: {', '.join(table.column_names)})", path=name)
    values = table.column(column)
    if values.null_count:
        raise EngineInputError(f"column {column!r} has missing values", path=name)
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if not pa.types.is_string(values.type):
        values = pc.cast(values, pa.string())
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _pick_column(table: pa.Table, candidates: tuple[str, ...], name: str | None) -> str:
    for candidate in candidates:
        if candidate in table.column_names:
            return candidate
    raise EngineInputError(
        f"missing column {candidates[0]!r} (columns: {', '.join(table.column_names)})", path=name)


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
    offsets, _ = _string_buffers(dictionary)
    lengths = np.diff(offsets)
    candidates = np.flatnonzero((lengths >= 1) & (lengths <= 8))  # no other id can equal a run's
    dictionary_keys = _short_keys(pc.take(dictionary, pa.array(candidates)))
    if dictionary_keys is None:
        return None
    by_key = np.argsort(dictionary_keys)
    dictionary_keys, candidates = dictionary_keys[by_key], candidates[by_key]
    codes = np.full(len(keys), -1, dtype=np.int32)
    if not len(candidates):
        return codes
    # Most run rows are unjudged: a bitmap of hashed dictionary keys rules them out cheaply, and only
    # the few that pass are looked up exactly.
    bits = int(np.clip((len(candidates) * 64).bit_length(), 16, 24))
    multiplier, shift = np.uint64(0x9E3779B97F4A7C15), np.uint64(64 - bits)
    marked = np.zeros(1 << bits, dtype=bool)
    with np.errstate(over="ignore"):
        marked[(dictionary_keys * multiplier) >> shift] = True
        hashed = keys * multiplier
    hashed >>= shift
    rows = np.flatnonzero(marked[hashed])
    del hashed
    found = np.minimum(np.searchsorted(dictionary_keys, keys[rows]), len(candidates) - 1)
    hit = dictionary_keys[found] == keys[rows]
    codes[rows[hit]] = candidates[found[hit]]
    return codes


def _string_hashes(doc: pa.Array) -> np.ndarray:
    """A 64-bit hash per string, computed eight bytes at a time (exact for ids of up to 8 bytes)."""
    n = len(doc)
    offsets, raw = _string_buffers(doc)
    offsets = offsets.astype(np.int64)
    lengths = offsets[1:] - offsets[:-1]
    padded = np.concatenate([raw[: offsets[-1] if n else 0], np.zeros(8, np.uint8)])
    windows = np.lib.stride_tricks.as_strided(padded, shape=(max(len(padded) - 7, 0), 8), strides=(1, 1))
    hashes = lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    starts = offsets[:-1]
    max_length = int(lengths.max()) if n else 0
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


def _repeated_rows(codes: np.ndarray, doc_keys: np.ndarray, doc: pa.Array) -> np.ndarray:
    """Rows repeating an earlier (query, doc) pair, as an (k, 2) array of (row, first row), by row."""
    n = len(codes)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    with np.errstate(over="ignore"):
        keys = doc_keys ^ (codes.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F))
    ordered = np.sort(keys)
    clashes = ordered[1:][ordered[1:] == ordered[:-1]]
    if clashes.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    candidates = np.flatnonzero(np.isin(keys, clashes))
    docs = pc.take(doc, pa.array(candidates)).to_pylist()
    first_seen: dict[tuple[int, str], int] = {}
    repeats = []
    for row, code, d in zip(candidates.tolist(), codes[candidates].tolist(), docs):
        first = first_seen.setdefault((code, d), row)
        if first != row:
            repeats.append((row, first))
    return np.asarray(repeats, dtype=np.int64).reshape(-1, 2)


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

    ``rows`` maps positions to rows (None: the identity); ``tie[i]`` says positions i and i + 1 tie.
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
    rows = np.arange(len(tie) + 1, dtype=np.int64) if rows is None else rows.copy()
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
