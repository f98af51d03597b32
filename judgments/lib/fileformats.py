"""Readers for the files people bring: query sets and corpus documents. No Django import.

Every problem raises `FileProblem`, which names the file, the line and what is wrong; a reader
either returns everything or raises, so nothing is ever half-read.

`csv_chunks` writes every CSV file Verdict hands out, with each cell guarded against spreadsheet
formulas (`guard_cell`); the readers of files Verdict writes take the guard off (`unguard_cell`).

Hostile and careless files are refused before they cost memory or time: UTF-16, UTF-32 and binary
files are named as such from their first bytes; no line may be longer than ``max_line_bytes``
(files are streamed in blocks by `stream_blocks`, so a line without end is never held whole); ids are at most
``max_id_bytes`` and corpus fields ``max_field_bytes`` long; JSON nested too deeply for Python's
parser and non-finite numbers (``NaN``, ``Infinity``, ``1e400``) are errors at their line; and an
error quotes at most 80 characters of any value (`show`). The query-log and judgment
readers (`querylog`, `judgment_formats`) use the same helpers.
"""

import csv
import io
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import PurePath
from typing import IO

from evaluation.engine.errors import CR_ONLY, UTF8_BOM, show, text_problem

QUERY_COLUMNS = {
    "query_id": ("query_id", "qid", "id", "topic_id", "number"),
    "text": ("query", "query_text", "text", "title"),
    "information_need": ("information_need", "description", "need"),
    "tier": ("tier",),
    "weight": ("weight",),
    "segment": ("segment",),
    "references": ("references", "reference"),
}
# Columns a header may repeat: each holds one more value of a list (a query's reference texts).
REPEATABLE_COLUMNS = frozenset(QUERY_COLUMNS["references"])
DOC_ID_COLUMNS = ("doc_id", "docid", "docno", "id", "_id")

MAX_LINE_BYTES = 1 << 20
MAX_ID_BYTES = 512
MAX_FIELD_BYTES = 256 << 10
_BLOCK = 1 << 20  # bytes read from a stream at a time


class FileProblem(ValueError):
    """A problem in an input file, at a line when one is to blame."""

    def __init__(self, path: str, problem: str, line: int | None = None):
        self.path, self.problem, self.line = path, problem, line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {problem}")


@dataclass
class QueryRow:
    line: int
    query_id: str
    text: str
    information_need: str = ""
    tier: str = ""
    weight: float | None = None
    segment: str = ""
    extra: dict = field(default_factory=dict)
    references: list[str] = field(default_factory=list)


@dataclass
class QueryFile:
    queries: list[QueryRow]
    warnings: list[str]


# ------------------------------------------------------------------------------- hostile input


def long_line(data: bytes, limit: int) -> int | None:
    """Where the first line longer than `limit` bytes (line end not counted) starts, or None.

    Jumps from the last line end within reach to the next, so a file of short lines costs one
    `rfind` per `limit` bytes, not a step per line.
    """
    start = 0
    while len(data) - start > limit:
        end = data.rfind(b"\n", start, start + limit + 1)
        if end < 0:
            return start
        start = end + 1
    return None


def long_line_problem(line: bytes, limit: int) -> str:
    """What to say about a line longer than `limit` bytes, given its first bytes."""
    if b"\r" in line[:limit]:
        return CR_ONLY
    return f"line longer than {limit:,} bytes"


def open_text(source: bytes | IO[bytes], path: str,
              formats: tuple[str, ...] = ()) -> tuple[IO[bytes], bytes, str | None]:
    """A binary stream over `source` (a file's bytes or an open file), its first block, which the `stream_*`
    readers take next, and its `file_format` among `formats` (None when none are given). A file of another
    format, or not UTF-8 text, or holding nothing but white space, is refused here."""
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    first = stream.read(_BLOCK)
    kind = file_format(path, first[:4096], formats) if formats else None
    problem = text_problem(first[:4096])
    if problem:
        raise FileProblem(path, problem)
    if len(first) < _BLOCK and not first.removeprefix(UTF8_BOM).strip():
        raise FileProblem(path, "the file is empty")
    return stream, first, kind


class _NotFinite(ValueError):
    pass


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def _no_constant(text: str):
    raise _NotFinite(text)


_JSON = json.JSONDecoder()
_JSON_FINITE = json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant)  # names the number


def _finite(value) -> bool:
    """Whether a parsed JSON value holds only finite numbers (a list of numbers is summed in C first)."""
    kind = type(value)
    if kind is dict:
        items = value.values()
    elif kind is list:
        try:
            if math.isfinite(sum(value)):
                return True
        except (TypeError, OverflowError):  # not all numbers, or an integer beyond the floats
            pass
        items = value
    else:
        return kind is not float or math.isfinite(value)
    for item in items:
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return False
        elif (kind is dict or kind is list) and not _finite(item):
            return False
    return True


def json_value(text: str, path: str, line: int):
    """One JSON value (a JSON Lines line): invalid JSON, nesting too deep for Python's parser and
    non-finite numbers (NaN, Infinity, 1e400, which PostgreSQL's jsonb cannot store) are errors."""
    try:
        value = _JSON.decode(text)
        if not _finite(value):
            _JSON_FINITE.decode(text)
    except _NotFinite as exc:
        raise FileProblem(path, f"the number {show(str(exc))} is not finite; only finite numbers are accepted", line) from None
    except json.JSONDecodeError as exc:
        raise FileProblem(path, f"invalid JSON: {exc.msg} (column {exc.colno})", line) from None
    except RecursionError:
        raise FileProblem(path, "JSON nested too deeply", line) from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise FileProblem(path, f"invalid JSON: {show(str(exc))}", line) from None
    return value


def file_format(name: str, head: bytes, allowed: tuple[str, ...]) -> str:
    """csv, tsv, jsonl or trec, from the file's name and, failing that, its first bytes."""
    suffix = PurePath(name.lower().removesuffix(".gz")).suffix.lstrip(".")
    by_suffix = {"csv": "csv", "tsv": "tsv", "tab": "tsv", "jsonl": "jsonl", "ndjson": "jsonl", "json": "jsonl",
                 "xml": "trec", "trec": "trec", "topics": "trec"}
    kind = by_suffix.get(suffix)
    if kind is None and suffix not in ("", "txt", "text", "dat") and not suffix.isdigit() and "-" not in suffix:
        raise FileProblem(name, f"files ending in .{suffix} are not accepted here; use one of: {', '.join(allowed)}")
    if kind is None:
        start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        kind = "trec" if start.startswith(b"<") else "jsonl" if start.startswith(b"{") else "tsv" if b"\t" in head.split(b"\n", 1)[0] else "csv"
    if kind not in allowed:
        raise FileProblem(name, f"{kind.upper()} files are not accepted here; use one of: {', '.join(allowed)}")
    return kind


def decode(data: bytes, path: str) -> str:
    """A whole file as UTF-8 text (for a JSON document, which is not read by lines: one line may hold it all),
    with or without BOM and CRLF line ends; bad bytes are reported with their line."""
    problem = text_problem(data[:4096])
    if problem:
        raise FileProblem(path, problem)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileProblem(path, f"not valid UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8", line) from None
    if not text.strip():
        raise FileProblem(path, "the file is empty")
    return text.replace("\r\n", "\n").replace("\r", "\n")


# --------------------------------------------------------------------------------------- queries


def read_queries(source: bytes | IO[bytes], path: str, *, max_line_bytes: int = MAX_LINE_BYTES,
                 max_id_bytes: int = MAX_ID_BYTES) -> QueryFile:
    """Read a query set from CSV, TSV, JSONL or a TREC topics file (its bytes, or a binary stream)."""
    stream, first, kind = open_text(source, path, ("csv", "tsv", "jsonl", "trec"))
    if kind == "trec":
        text = "".join(block for _first, block in stream_texts(stream, path, max_line_bytes, first))
        records = _trec_topics(text.replace("\r\n", "\n").replace("\r", "\n"), path)
    elif kind == "jsonl":
        records = _jsonl_stream(stream_lines(stream, path, max_line_bytes, first), path)
    elif kind == "tsv":
        records = _delimited_stream(csv_lines(stream, path, max_line_bytes, first), path, "\t", REPEATABLE_COLUMNS)
    else:  # the CSV Verdict writes (the query-set download) carries formula guards: take them off
        records = ((line, {column: unguard_cell(value) if isinstance(value, str) else list(map(unguard_cell, value))
                           for column, value in record.items()}, *rest)
                   for line, record, *rest in _delimited_stream(csv_lines(stream, path, max_line_bytes, first), path,
                                                                ",", REPEATABLE_COLUMNS))
    queries = [_query_row(line, record, path, max_id_bytes) for line, record, *_ in records]
    if not queries:
        raise FileProblem(path, "the file holds no queries")
    return QueryFile(queries, _check_queries(queries, path))


def _query_row(line: int, record: dict, path: str, max_id_bytes: int) -> QueryRow:
    known, extra = {}, {}
    aliases = {alias: key for key, names in QUERY_COLUMNS.items() for alias in names}
    for column, value in record.items():
        key = aliases.get(column.strip().lower())
        if key and key not in known:
            known[key] = value
        else:
            extra[column] = value
    for key in ("query_id", "text"):
        value = known.get(key)
        column = "query_id" if key == "query_id" else "query"
        if isinstance(value, (dict, list)):
            raise FileProblem(path, f"{column} must be text or a number, not {show(value)}", line)
        if value is None or not str(value).strip():
            raise FileProblem(path, f"missing {column} (accepted names: {', '.join(QUERY_COLUMNS[key])})", line)
    return QueryRow(
        line=line,
        query_id=_id(known["query_id"], "query_id", max_id_bytes, path, line),
        text=" ".join(str(known["text"]).split()),
        information_need=str(known.get("information_need") or "").strip(),
        tier=str(known.get("tier") or "").strip().lower(),
        weight=_weight(known.get("weight"), line, path),
        segment=str(known.get("segment") or "").strip(),
        extra=extra,
        references=references(known.get("references"), path, line),
    )


def references(value, path: str, line: int | None = None) -> list[str]:
    """A query's reference texts from a cell: a list (repeated columns, JSONL), a JSON list of texts, or one
    text. Empty texts are dropped."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except ValueError:
            raise FileProblem(path, f"references {show(value)} is not a JSON list of texts", line) from None
    if value is None:
        return []
    if not isinstance(value, list):
        value = [value]
    if not all(isinstance(text, (str, int, float)) and not isinstance(text, bool) for text in value):
        raise FileProblem(path, f"references must be texts, not {show(value)}", line)
    return [text for text in (str(text).strip() for text in value) if text]


def _weight(value, line: int, path: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        weight = float(value)
    except (TypeError, ValueError):
        raise FileProblem(path, f"weight {show(value)} is not a number", line) from None
    except OverflowError:  # an integer beyond the largest float
        weight = math.inf
    if not math.isfinite(weight) or weight < 0:
        raise FileProblem(path, f"weight {show(value)} must be a finite number >= 0", line)
    return weight


def _id(value, column: str, max_id_bytes: int, path: str, line: int) -> str:
    text = str(value).strip()
    if len(text) > max_id_bytes // 4 and len(text.encode()) > max_id_bytes:
        raise FileProblem(path, f"{column} longer than {max_id_bytes:,} bytes: {show(text)}", line)
    return text


def _check_queries(queries: list[QueryRow], path: str) -> list[str]:
    """Duplicate ids are an error; the same text under two ids is reported as a warning."""
    first_line: dict[str, int] = {}
    for query in queries:
        if query.query_id in first_line:
            raise FileProblem(path, f"query_id {show(query.query_id)} was already used on line {first_line[query.query_id]}", query.line)
        first_line[query.query_id] = query.line
    by_text: dict[str, QueryRow] = {}
    warnings = []
    for query in queries:
        key = query.text.casefold()
        if key in by_text:
            other = by_text[key]
            warnings.append(
                f"line {query.line}: the text {show(query.text)} of query {query.query_id} repeats query {other.query_id} (line {other.line})"
            )
        else:
            by_text[key] = query
    return warnings


_TREC_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)
_TREC_FIELD = re.compile(r"<(num|title|desc|narr)>(.*?)(?=<(?:num|title|desc|narr)>|\Z)", re.S | re.I)
_TREC_PREFIX = re.compile(r"^\s*(number|topic|description|narrative)\s*:", re.I)
_XML_TOPIC = re.compile(r"<topic\b([^>]*)>(.*?)</topic>", re.S | re.I)
_XML_ATTR = re.compile(r'number\s*=\s*"([^"]+)"', re.I)
_XML_FIELD = re.compile(r"<(query|title|description|question|narrative)>(.*?)</\1>", re.S | re.I)


def _trec_topics(text: str, path: str) -> Iterator[tuple[int, dict]]:
    """Classic `<top><num><title><desc><narr></top>` topics, or the XML `<topic number="...">` form."""
    from html import unescape

    found = False
    for match in _TREC_TOP.finditer(text):
        found = True
        line = text.count("\n", 0, match.start()) + 1
        fields = {name.lower(): _TREC_PREFIX.sub("", " ".join(value.split())) for name, value in _TREC_FIELD.findall(match.group(1))}
        yield line, {"query_id": fields.get("num", ""), "query": fields.get("title", ""),
                     "information_need": " ".join(filter(None, [fields.get("desc", ""), fields.get("narr", "")]))}
    for match in _XML_TOPIC.finditer(text):
        found = True
        line = text.count("\n", 0, match.start()) + 1
        number = _XML_ATTR.search(match.group(1))
        fields = {name.lower(): unescape(" ".join(value.split())) for name, value in _XML_FIELD.findall(match.group(2))}
        yield line, {"query_id": number.group(1) if number else fields.get("number", ""),
                     "query": fields.get("query") or fields.get("title") or fields.get("question", ""),
                     "information_need": " ".join(filter(None, [fields.get("description", ""), fields.get("narrative", "")]))}
    if not found:
        raise FileProblem(path, "no <top> or <topic> blocks found in this TREC topics file")


# ---------------------------------------------------------------------------------------- corpus


@dataclass
class DocumentRow:
    line: int
    doc_id: str
    fields: dict


def read_documents(stream: IO[bytes], path: str, *, batch_size: int = 5000, max_line_bytes: int = MAX_LINE_BYTES,
                   max_id_bytes: int = MAX_ID_BYTES, max_field_bytes: int = MAX_FIELD_BYTES) -> Iterator[list[DocumentRow]]:
    """Stream a JSONL or CSV corpus in batches. Raises FileProblem on the first bad line.

    The caller validates the whole stream before writing anything (read twice, or inside one
    transaction), so a bad line near the end never leaves half a corpus behind.
    """
    stream, first, kind = open_text(stream, path, ("csv", "tsv", "jsonl"))
    if kind == "jsonl":
        records = _jsonl_stream(stream_lines(stream, path, max_line_bytes, first), path)
    else:
        # csv's own cap on a field (process-wide, 128 KiB by default) also stops a quoted field that runs on
        # over many lines; it is only ever raised, to what the corpus accepts.
        csv.field_size_limit(max(csv.field_size_limit(), max_field_bytes + 1))
        records = _delimited_stream(csv_lines(stream, path, max_line_bytes, first), path, "\t" if kind == "tsv" else ",")
    seen: dict[str, int] = {}
    batch: list[DocumentRow] = []
    for line, record, chars in records:
        doc_id = _doc_id(record, line, path, max_id_bytes)
        if doc_id in seen:
            raise FileProblem(path, f"doc_id {show(doc_id)} was already used on line {seen[doc_id]}", line)
        seen[doc_id] = line
        if 4 * chars > max_field_bytes:  # (a UTF-8 character is at most 4 bytes)
            _check_fields(record, max_field_bytes, path, line)
        batch.append(DocumentRow(line, doc_id, record))
        if len(batch) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch
    if not seen:
        raise FileProblem(path, "the file holds no documents")


def stream_blocks(stream: IO[bytes], path: str, max_line_bytes: int, data: bytes) -> Iterator[tuple[int, bytes]]:
    """(number of its first line, bytes) of each block of whole lines of `stream`, of which `data` was read
    already (`open_text`).

    Read in blocks cut at line ends, so a line longer than `max_line_bytes` is refused once that many
    bytes have passed without a line end, never held whole.
    """
    number = 0
    data = data.removeprefix(UTF8_BOM)
    while data:
        more = stream.read(_BLOCK)
        cut = data.rfind(b"\n") + 1 if more else len(data)
        complete = data[:cut]
        start = long_line(complete, max_line_bytes)
        if start is None and len(data) - cut > max_line_bytes:
            start = cut
        if start is not None:
            raise FileProblem(path, long_line_problem(data[start:start + max_line_bytes], max_line_bytes),
                              number + complete.count(b"\n", 0, start) + 1)
        if complete:
            yield number + 1, complete
            number += complete.count(b"\n")
        data = data[cut:] + more if cut < len(data) else more


def stream_texts(stream: IO[bytes], path: str, max_line_bytes: int, data: bytes) -> Iterator[tuple[int, str]]:
    """(number of its first line, text) of each block of `stream_blocks`, decoded."""
    for first, block in stream_blocks(stream, path, max_line_bytes, data):
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FileProblem(path, f"not valid UTF-8 (byte 0x{block[exc.start]:02x}); save the file as UTF-8",
                              first + block.count(b"\n", 0, exc.start)) from None
        yield first, text


def stream_lines(stream: IO[bytes], path: str, max_line_bytes: int, data: bytes) -> Iterator[tuple[int, str]]:
    """(number, text with its line end) of each line of `stream_texts`."""
    for first, text in stream_texts(stream, path, max_line_bytes, data):
        yield from enumerate(io.StringIO(text, newline=""), first)


def csv_lines(stream: IO[bytes], path: str, max_line_bytes: int, data: bytes) -> Iterator[str]:
    """The lines of `stream_texts` as csv.reader takes them: unnumbered (it counts them itself), split in C."""
    return chain.from_iterable(io.StringIO(text, newline="") for _first, text in
                               stream_texts(stream, path, max_line_bytes, data))


def _doc_id(record: dict, line: int, path: str, max_id_bytes: int) -> str:
    for column in DOC_ID_COLUMNS:
        if column in record:
            value = record.pop(column)
            if isinstance(value, (dict, list)):
                raise FileProblem(path, f"doc_id must be text or a number, not {show(value)}", line)
            if value is None or not str(value).strip():
                break
            return _id(value, "doc_id", max_id_bytes, path, line)
    raise FileProblem(path, f"missing doc_id (accepted names: {', '.join(DOC_ID_COLUMNS)})", line)


def _check_fields(record: dict, max_field_bytes: int, path: str, line: int) -> None:
    for name, value in record.items():
        if isinstance(value, str):
            size = len(value) if 4 * len(value) <= max_field_bytes else len(value.encode())
        elif isinstance(value, (dict, list)):
            size = len(json.dumps(value, ensure_ascii=False).encode())
        else:
            continue
        if size > max_field_bytes:
            raise FileProblem(path, f"field {show(name)} holds {size:,} bytes; the most a field may hold is "
                                    f"{max_field_bytes:,} bytes", line)


def _jsonl_stream(lines: Iterable[tuple[int, str]], path: str) -> Iterator[tuple[int, dict, int]]:
    """(line, record, characters of its text) of each JSON object line."""
    for number, line in lines:
        if not line.strip():
            continue
        record = json_value(line, path, number)
        if not isinstance(record, dict):
            raise FileProblem(path, f"expected a JSON object, found {type(record).__name__}", number)
        yield number, record, len(line)


def _delimited_stream(lines: Iterable[str], path: str, delimiter: str,
                      repeatable: frozenset[str] = frozenset()) -> Iterator[tuple[int, dict, int]]:
    """(line, record, characters of its values) of each row; a column named in `repeatable` may be repeated,
    and its values come as a list."""
    reader = csv.reader(lines, delimiter=delimiter)
    kind = "TSV" if delimiter == "\t" else "CSV"
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise FileProblem(path, "the file is empty") from None
    except csv.Error as exc:
        raise FileProblem(path, f"malformed {kind}: {exc}", reader.line_num) from None
    counts = Counter(header)
    bad = [name for name, count in counts.items() if count > 1 and name.lower() not in repeatable or not name]
    if bad:
        raise FileProblem(path, f"the header has empty or repeated column names: {', '.join(map(show, bad[:5]))}", 1)
    repeated = {name for name, count in counts.items() if count > 1}
    try:
        for values in reader:
            if not any(value.strip() for value in values):
                continue
            if len(values) != len(header):
                raise FileProblem(path, f"expected {len(header)} columns, found {len(values)}", reader.line_num)
            record = {name: [] for name in repeated}
            for name, value in zip(header, values):
                if name in repeated:
                    record[name].append(value)
                else:
                    record[name] = value
            yield reader.line_num, record, sum(map(len, values))
    except csv.Error as exc:
        if str(exc).startswith("field larger than field limit"):
            raise FileProblem(path, f"a field holds more than {csv.field_size_limit() - 1:,} characters", reader.line_num) from None
        raise FileProblem(path, f"malformed {kind}: {exc}", reader.line_num) from None


# ------------------------------------------------------------------------------------- CSV cells

# OWASP's CSV injection rule: a spreadsheet runs a cell that starts with one of these as a formula (tab
# and CR: once its import trims them), so such a cell gets a guard character in front.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A plain number (-1, -0.5, 1e-05) is no formula and stays unguarded, so numeric columns stay numeric.
_PLAIN_NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _formula_like(text: str) -> bool:
    return text.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(text)


def decimal_text(value: float) -> str:
    """A float as text for a file: the shortest that reads back as the same number to 15 significant digits.
    15 is the most a double holds exactly, so every decimal keeps all its digits while the noise of float
    arithmetic goes: a weight summed to 390.45000000000005 is written 390.45, 0.1 + 0.2 is written 0.3."""
    return repr(float(f"{value:.15g}"))


def cell_text(value) -> str:
    """A value as a file writes it: None is empty, a float its `decimal_text`, anything else its str()."""
    if value is None:
        return ""
    if isinstance(value, float):
        return decimal_text(value)
    return value if isinstance(value, str) else str(value)


def guard_cell(value, guard: str = "'") -> str:
    """`value` (as `cell_text` writes it) as a cell no spreadsheet runs as a formula.

    A formula-like value gets `guard` in front; so does a value whose leading guards are followed by
    one (``'=x`` becomes ``''=x``), so that `unguard_cell` gives every value back exactly.
    """
    text = cell_text(value)
    return guard + text if _formula_like(text.lstrip(guard)) else text


def unguard_cell(text: str, guard: str = "'") -> str:
    """The value `guard_cell` was given: `text` without the guard it added."""
    return text[1:] if text[:1] == guard and _formula_like(text[1:].lstrip(guard)) else text


def csv_chunks(rows: Iterable[Iterable], *, guard: str = "'", chunk_chars: int = 8192) -> Iterator[str]:
    """`rows` as CSV text (RFC 4180 quoting, LF line ends), every cell through `guard_cell`, in chunks
    of about `chunk_chars`: never the whole file at once."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    # Python's csv module leaves a lone CR unquoted, and readers (spreadsheets too) take it for a line
    # end: a row holding one is written fully quoted, so that the CR stays inside its cell.
    quoted = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in rows:
        cells = [guard_cell(value, guard) for value in row]
        (quoted if any("\r" in cell for cell in cells) else writer).writerow(cells)
        if buffer.tell() >= chunk_chars:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue()
