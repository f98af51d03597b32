"""Judgment lists in the file formats other tools read and write (issue #7). No Django import.

Writers take iterables and return generators of text chunks of about 8 KB, never the whole file, so
an export of a million judgments runs in flat memory. The same input gives the same bytes, so export,
import, export reproduces a file exactly. Writers check ids and grades as rows stream past and raise
ValueError at the first one the format cannot carry; they keep no per-pair state, so a repeated pair
is the caller's to prevent (the readers refuse one).

Readers take a file's bytes or a binary stream and return every row, or raise `JudgmentFileProblem` at
the first problem, naming the file, the line and what is wrong: nothing is ever half-read. They refuse
what `fileformats` refuses (UTF-16 and binary files, lines longer than ``max_line_bytes``, ids longer
than ``max_id_bytes``, JSON nested too deeply) and quote at most 80 characters of a value. Qrels and
Quepid CSV are streamed by lines, so a line without end is never held whole; a JSON list is read by lines
too (a line without end is refused as soon), then parsed whole.
Lines ending in CR alone are refused from the file's first line (`detect_import_format`): trec_eval
reads such a qrels file as one line, and the line limit would see one line too.

Every CSV cell is guarded against spreadsheet formulas (`fileformats.guard_cell`, OWASP's rule: a
leading ``'``). Quepid CSV keeps the guard of Quepid's book export
(``app/controllers/api/v1/books_controller.rb``), a leading space, so that Quepid reads our files as
its own; the reader takes that space off again.
"""

import csv
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, time
from functools import partial
from pathlib import PurePath
from typing import IO

from evaluation.engine.errors import deepest_json_line

from .fileformats import (CR_ONLY, MAX_ID_BYTES, MAX_LINE_BYTES, FileProblem, csv_chunks, csv_lines, decode, open_text,
                          show, stream_blocks, unguard_cell)

__all__ = [
    "EXPORT_FORMATS", "IMPORT_FORMATS", "LONG_CSV_COLUMNS", "RANK_EVAL_METRICS", "JudgmentFileProblem", "Label",
    "QueryLabels", "detect_import_format", "json_list", "long_csv", "ltr", "numbered_qrels", "quepid_csv",
    "quepid_filename", "qrels", "rank_eval", "read_json_list", "read_qrels", "read_quepid_csv",
]

EXPORT_FORMATS = ("qrels", "json", "quepid-csv", "long-csv", "consensus-csv", "rank-eval", "ltr")
IMPORT_FORMATS = ("qrels", "json", "quepid-csv")
LONG_CSV_COLUMNS = ("query_id", "query", "doc_id", "rater", "grade", "unrateable", "unrateable_note", "note",
                    "seconds", "created_at", "updated_at", "source")
ANSWER_CSV_COLUMNS = ("answer_run", "faithfulness")  # answer rounds: which run's answer, and its faithfulness grade
RANK_EVAL_METRICS = ("ndcg", "dcg", "precision", "recall", "mrr", "err")
CHUNK_CHARS = 8192

_SPACE = re.compile(r"\s")  # str.split()'s whitespace, which pytrec_eval splits qrels lines on
_INT_BYTES = re.compile(rb"[+-]?[0-9]+")  # the engine's (and trec_eval's) integer grade
_CSV_GRADE = re.compile(r"([+-]?[0-9]+)(?:\.0*)?")  # Quepid stores ratings as floats and writes "3.0"
QUEPID_GUARD = " "  # Quepid's formula guard
_GRADE_DIGITS = 18  # a grade fits in 64 bits
_UTF8_BOM = b"\xef\xbb\xbf"


class JudgmentFileProblem(FileProblem):
    """A problem in an imported judgment file, ``name:line: problem``.

    A `FileProblem`, so code that already reports those reports these the same way.
    """


@dataclass(frozen=True, slots=True)
class Label:
    """The one final grade of a (query, document) pair."""

    query_id: str
    doc_id: str
    grade: int


@dataclass(frozen=True, slots=True)
class QueryLabels:
    """A query's text and its (doc_id, grade) labels, in the order given."""

    query_id: str
    query: str
    labels: tuple[tuple[str, int], ...]  # or (doc_id, grade, more keys for its rating), as answer rounds write
    line: int | None = field(default=None, compare=False)  # where a read file's object starts, for problems found later


# ------------------------------------------------------------------------------------------ writers


def qrels(labels: Iterable[Label], *, threshold: int | None = None) -> Iterator[str]:
    """TREC qrels, ``qid 0 docid grade`` per line, no comments, in the order given.

    With ``threshold`` the grades become binary: ``grade >= threshold`` is 1, a lower grade 0; a
    negative grade (trec_eval's "pooled but not judged") is written unchanged either way.
    """
    if threshold is not None:
        _grade(threshold, "threshold")
    return _chunked(_qrels_lines(labels, threshold))


def _qrels_lines(labels: Iterable[Label], threshold: int | None) -> Iterator[str]:
    checked_qid = None
    for label in labels:
        qid, doc_id, grade = label.query_id, label.doc_id, label.grade
        if qid != checked_qid:
            _trec_id(qid, "query id")
            if qid.startswith("#"):
                raise ValueError(f"query id {qid!r} starts with '#': trec_eval skips such a line as a comment")
            checked_qid = qid
        _trec_id(doc_id, "doc id")
        if type(grade) is not int:
            _grade(grade, f"the grade of {qid} {doc_id}")
        if threshold is not None and grade >= 0:
            grade = 1 if grade >= threshold else 0
        yield f"{qid} 0 {doc_id} {grade}\n"


def json_list(queries: Iterable[QueryLabels]) -> Iterator[str]:
    """A JSON array with one query object per line, the layout the engine's `read_qrels` also reads::

        [
        {"query_id": "q1", "query": "tent", "ratings": [{"doc_id": "d1", "rating": 2}]},
        ...
        ]
    """
    return _chunked(_json_array(_query_object(query) for query in queries))


def _query_object(query: QueryLabels) -> str:
    qid = _text(query.query_id, "query id", empty=False)
    ratings = [{"doc_id": _text(doc_id, f"a doc id of query {qid}", empty=False),
                "rating": _grade(grade, f"the grade of {qid} {doc_id}"), **(more[0] if more else {})}
               for doc_id, grade, *more in query.labels]
    return json.dumps({"query_id": qid, "query": _text(query.query, f"the text of query {qid}"), "ratings": ratings},
                      ensure_ascii=False)


def _json_array(objects: Iterable[str]) -> Iterator[str]:
    opening = "[\n"
    for text in objects:
        yield opening + text
        opening = ",\n"
    yield "[]\n" if opening == "[\n" else "\n]\n"


def quepid_filename(book_id) -> str:
    return f"book_{book_id}_judgements.csv"


def quepid_csv(rows: Iterable[tuple[str, str, Sequence[int | None]]], raters: Sequence[str]) -> Iterator[str]:
    """Quepid's book export: ``query,docid,<rater>...``, then each rater's grade (or nothing) per pair."""
    names = [_text(rater, "rater name", empty=False) for rater in raters]
    if len(set(names)) != len(names):
        raise ValueError(f"two raters share a name, so their columns could not be told apart: {names}")
    return csv_chunks(_quepid_rows(rows, names), guard=QUEPID_GUARD, chunk_chars=CHUNK_CHARS)


def _quepid_rows(rows: Iterable[tuple[str, str, Sequence[int | None]]], names: list[str]) -> Iterator[Sequence]:
    yield ["query", "docid", *names]
    for query, doc_id, grades in rows:
        query = _text(query, "query text", empty=False)
        doc_id = _text(doc_id, f"a doc id of query {query!r}", empty=False)
        if len(grades) != len(names):
            raise ValueError(f"query {query!r}, doc {doc_id!r}: {len(grades)} grades for {len(names)} raters")
        yield [query, doc_id, *(None if grade is None else _grade(grade, f"a grade of {query!r} {doc_id}") for grade in grades)]


def long_csv(rows: Iterable[Mapping], columns: Sequence[str] = LONG_CSV_COLUMNS) -> Iterator[str]:
    """Every judgment, one per line with its rater, time, flags and note, in `columns` (answer rounds add
    `ANSWER_CSV_COLUMNS` to `LONG_CSV_COLUMNS`).

    A missing key or None is an empty cell, booleans are ``true``/``false``, times ISO 8601 and seconds
    to the millisecond (the browser's clock measures no finer); keys outside the columns are ignored.
    """
    return csv_chunks(_long_rows(rows, columns), chunk_chars=CHUNK_CHARS)


def _long_rows(rows: Iterable[Mapping], columns: Sequence[str]) -> Iterator[Sequence]:
    yield columns
    for row in rows:
        yield [_cell(row.get(column)) for column in columns]


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime, time)):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(round(value, 3))
    return str(value)


CONSENSUS_CSV_COLUMNS = ("query_id", "query", "doc_id", "label", "n_grades", "spread", "adjudicated")


def consensus_csv(rows: Iterable[Sequence]) -> Iterator[str]:
    """One line per labelled pair: its final label, how many grades it came from and how far they spread,
    and whether a lead adjudicated it; rows in `CONSENSUS_CSV_COLUMNS` order."""
    return csv_chunks(_consensus_rows(rows), chunk_chars=CHUNK_CHARS)


def _consensus_rows(rows: Iterable[Sequence]) -> Iterator[Sequence]:
    yield CONSENSUS_CSV_COLUMNS
    for query_id, query, doc_id, label, n_grades, spread, adjudicated in rows:
        yield [query_id, query, doc_id, label, n_grades, spread, "true" if adjudicated else "false"]


def rank_eval(queries: Iterable[QueryLabels], *, metric: str = "ndcg", k: int = 10, index: str = "products",
              fields: Sequence[str] = ("title",), relevant_threshold: int = 1,
              maximum_relevance: int | None = None) -> Iterator[str]:
    """An Elasticsearch / OpenSearch ``_rank_eval`` request body: one ``multi_match`` request per query.

    Metric parameters are those of the Elasticsearch 8 ranking evaluation API; ``ndcg`` is its ``dcg``
    with ``normalize``. ``err`` needs the scale's top grade: pass ``maximum_relevance``, or it is the
    highest grade in the labels.
    """
    if metric not in RANK_EVAL_METRICS:
        raise ValueError(f"unknown rank_eval metric {metric!r}; choose one of {', '.join(RANK_EVAL_METRICS)}")
    if _grade(k, "k") < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    _grade(relevant_threshold, "relevant_threshold")
    if maximum_relevance is not None:
        _grade(maximum_relevance, "maximum_relevance")
    index = _text(index, "index name", empty=False)
    fields = [_text(field, "field name", empty=False) for field in fields]
    if not fields:
        raise ValueError("rank_eval needs at least one field to search")
    return _chunked(_rank_eval_parts(queries, metric, k, index, fields, relevant_threshold, maximum_relevance))


def _rank_eval_parts(queries: Iterable[QueryLabels], metric: str, k: int, index: str, fields: list[str],
                     threshold: int, maximum_relevance: int | None) -> Iterator[str]:
    highest = None
    opening = '{"requests": [\n'
    for query in queries:
        qid = _text(query.query_id, "query id", empty=False)
        ratings = []
        for doc_id, grade in query.labels:
            grade = _grade(grade, f"the grade of {qid} {doc_id}")
            ratings.append({"_index": index, "_id": _text(doc_id, f"a doc id of query {qid}", empty=False),
                            "rating": grade})
            highest = grade if highest is None else max(highest, grade)
        request = {"id": qid,
                   "request": {"query": {"multi_match": {"query": _text(query.query, f"the text of query {qid}"),
                                                          "fields": fields}}},
                   "ratings": ratings}
        yield opening + json.dumps(request, ensure_ascii=False)
        opening = ",\n"
    if maximum_relevance is None:
        maximum_relevance = max(highest or 0, 0)
    block = {
        "ndcg": {"dcg": {"k": k, "normalize": True}},
        "dcg": {"dcg": {"k": k, "normalize": False}},
        "precision": {"precision": {"k": k, "relevant_rating_threshold": threshold, "ignore_unlabeled": False}},
        "recall": {"recall": {"k": k, "relevant_rating_threshold": threshold}},
        "mrr": {"mean_reciprocal_rank": {"k": k, "relevant_rating_threshold": threshold}},
        "err": {"expected_reciprocal_rank": {"maximum_relevance": maximum_relevance, "k": k}},
    }[metric]
    closing = '{"requests": [],' if opening != ",\n" else "\n],"
    yield f'{closing} "metric": {json.dumps(block)}}}\n'


def ltr(labels: Iterable[tuple[Label, str]]) -> Iterator[str]:
    """Learning-to-rank judgments as RankLib reads them: ``grade qid:<id> # docid query`` per line.

    The query text follows the comment mark with its whitespace collapsed to single spaces.
    """
    return _chunked(_ltr_lines(labels))


def _ltr_lines(labels: Iterable[tuple[Label, str]]) -> Iterator[str]:
    for label, query in labels:
        qid = _trec_id(label.query_id, "query id")
        if "#" in qid:
            raise ValueError(f"query id {qid!r} holds '#', which starts the comment in RankLib's format")
        doc_id = _trec_id(label.doc_id, "doc id")
        grade = _grade(label.grade, f"the grade of {qid} {doc_id}")
        words = " ".join(_text(query, f"the text of query {qid}").split())
        yield f"{grade} qid:{qid} # {doc_id} {words}\n" if words else f"{grade} qid:{qid} # {doc_id}\n"


def _chunked(pieces: Iterable[str]) -> Iterator[str]:
    buffer: list[str] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= CHUNK_CHARS:
            yield "".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer)


def _trec_id(value, what: str) -> str:
    if not isinstance(value, str) or not value or _SPACE.search(value):
        raise ValueError(f"{what} {value!r} cannot be written: ids here must be non-empty, without whitespace")
    return value


def _text(value, what: str, *, empty: bool = True) -> str:
    if not isinstance(value, str) or not (empty or value.strip()):
        raise ValueError(f"{what} must be {'a' if empty else 'a non-empty'} string, not {value!r}")
    return value


def _grade(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, not {value!r}")
    return int(value)


def _unguard(text: str) -> str:
    return unguard_cell(text, QUEPID_GUARD)


# ------------------------------------------------------------------------------------------ readers


def detect_import_format(name: str, data: bytes) -> str:
    """``qrels``, ``json`` or ``quepid-csv``: from the first bytes (`data` may be the file's first 4 KB)
    when they decide, else the file name.

    A JSON array or object is JSON; a first line starting ``query,docid`` is Quepid CSV; otherwise a
    ``.json`` or ``.csv`` name decides, and anything else is read as qrels (whose reader then names
    the first line it cannot read). A file whose first line ends in CR alone is refused (JSON aside,
    which has no lines).
    """
    head = data[:4096].removeprefix(_UTF8_BOM).lstrip()
    if head[:1] in (b"[", b"{"):
        return "json"
    first_line = head.split(b"\n", 1)[0]
    if b"\r" in first_line.rstrip(b"\r"):
        raise JudgmentFileProblem(name, CR_ONLY, 1)
    first_line = first_line.decode("utf-8", "replace")
    header = next(csv.reader([first_line]), [])
    if [cell.strip().lower() for cell in header[:2]] in (["query", "docid"], ["query", "doc_id"]):
        return "quepid-csv"
    suffix = PurePath(name.lower()).suffix
    return {".json": "json", ".csv": "quepid-csv"}.get(suffix, "qrels")


def read_qrels(source: bytes | IO[bytes], name: str, *, max_line_bytes: int = MAX_LINE_BYTES,
               max_id_bytes: int = MAX_ID_BYTES) -> list[Label]:
    """TREC qrels under the engine's rules (trec_eval's): ``qid iter docid grade`` split on whitespace.

    Exactly four fields; a line starting with ``#`` and a blank line are skipped; the grade is an
    integer (``+2`` and ``-1`` too) of at most 18 digits; a pair given twice is an error naming both
    lines. Labels come back in file order.
    """
    return numbered_qrels(source, name, max_line_bytes=max_line_bytes, max_id_bytes=max_id_bytes)[0]


def numbered_qrels(source: bytes | IO[bytes], name: str, *, max_line_bytes: int = MAX_LINE_BYTES,
                   max_id_bytes: int = MAX_ID_BYTES) -> tuple[list[Label], list[int]]:
    """`read_qrels`, and the line of each label, for problems the caller finds in a label."""
    labels: list[Label] = []
    lines: list[int] = []
    first_line: dict[tuple[str, str], int] = {}
    last_qid_bytes, qid = None, ""
    for number, line in _byte_lines(source, name, max_line_bytes):
        fields = line.split()
        if not fields or line[:1] == b"#":
            continue
        if len(fields) != 4:
            raise JudgmentFileProblem(
                name, f"expected 4 columns (query_id iteration doc_id grade), found {len(fields)}", number)
        qid_bytes, _, doc_bytes, grade_bytes = fields
        if not _INT_BYTES.fullmatch(grade_bytes):
            raise JudgmentFileProblem(name, f"grade {show(grade_bytes)} is not an integer", number)
        if len(grade_bytes.lstrip(b"+-")) > _GRADE_DIGITS:
            raise JudgmentFileProblem(name, f"grade {show(grade_bytes)} has more than {_GRADE_DIGITS} digits", number)
        if qid_bytes != last_qid_bytes:
            qid = _read_id(qid_bytes, "query id", name, number, max_id_bytes)
            if qid.startswith("#"):
                raise JudgmentFileProblem(name, f"query id {show(qid)} starts with '#', which marks a comment line", number)
            last_qid_bytes = qid_bytes
        doc_id = _read_id(doc_bytes, "doc id", name, number, max_id_bytes)
        key = (qid, doc_id)
        first = first_line.setdefault(key, number)
        if first != number:
            raise JudgmentFileProblem(
                name, f"duplicate judgment of document {show(doc_id)} for query {show(qid)} (first on line {first})", number)
        labels.append(Label(qid, doc_id, int(grade_bytes)))
        lines.append(number)
    if not labels:
        raise JudgmentFileProblem(name, "the file holds no judgments, only comments and blank lines")
    return labels, lines


def _read_id(value: bytes, what: str, name: str, line: int, max_id_bytes: int) -> str:
    if len(value) > max_id_bytes:
        raise JudgmentFileProblem(name, f"{what} longer than {max_id_bytes:,} bytes: {show(value)}", line)
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise JudgmentFileProblem(name, f"{what} is not valid UTF-8: {show(value)}; save as UTF-8", line) from None
    if _SPACE.search(text):
        raise JudgmentFileProblem(name, f"{what} {show(text)} holds a whitespace character", line)
    return text


def read_json_list(source: bytes | IO[bytes], name: str, *, max_id_bytes: int = MAX_ID_BYTES,
                   max_line_bytes: int = MAX_LINE_BYTES) -> list[QueryLabels]:
    """The `json_list` layout: ``[{"query_id", "query", "ratings": [{"doc_id", "rating"}]}, ...]``.

    ``query`` may be left out (read as ""); ids may be JSON strings or integers; a rating is an
    integer (``2.0`` counts as 2, as in the engine). Problems are named by the line the query object
    starts on and its position, ``[3].ratings[1].rating``. The list is parsed whole, but read by lines
    first, so a line longer than `max_line_bytes` is refused before the rest is read.
    """
    with _judgment_problems():
        stream, first, _format = open_text(source, name)
        text = decode(b"".join(block for _start, block in stream_blocks(stream, name, max_line_bytes, first)), name)
    queries: list[QueryLabels] = []
    seen: dict[str, tuple[int, int]] = {}
    for position, line, item in _json_array_items(text, name):
        problem = partial(JudgmentFileProblem, name, line=line)
        where = f"[{position}]"
        if not isinstance(item, dict):
            raise problem(f"{where}: expected an object with query_id, query and ratings, found {_json_type(item)}")
        for key in ("query_id", "ratings"):
            if key not in item:
                raise problem(f"{where}: missing {key!r}")
        qid = _json_id(item["query_id"], f"{where}.query_id", problem, max_id_bytes)
        if qid in seen:
            raise problem(f"{where}: query_id {show(qid)} was already used by [{seen[qid][0]}] (line {seen[qid][1]})")
        seen[qid] = (position, line)
        query = item.get("query", "")
        if not isinstance(query, str):
            raise problem(f"{where}.query must be a string, found {_json_type(query)}")
        ratings = item["ratings"]
        if not isinstance(ratings, list):
            raise problem(f"{where}.ratings must be a list, found {_json_type(ratings)}")
        labels = []
        docs: dict[str, int] = {}
        for j, rating in enumerate(ratings):
            at = f"{where}.ratings[{j}]"
            if not isinstance(rating, dict):
                raise problem(f"{at}: expected an object with doc_id and rating, found {_json_type(rating)}")
            for key in ("doc_id", "rating"):
                if key not in rating:
                    raise problem(f"{at}: missing {key!r} (query {show(qid)})")
            doc_id = _json_id(rating["doc_id"], f"{at}.doc_id", problem, max_id_bytes)
            if doc_id in docs:
                first = f"ratings[{docs[doc_id]}]"
                raise problem(f"{at}: doc_id {show(doc_id)} is rated twice for query {show(qid)} (first at {first})")
            docs[doc_id] = j
            grade = rating["rating"]
            if isinstance(grade, float) and grade.is_integer():
                grade = int(grade)
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise problem(f"{at}.rating must be an integer, found {_json_text(grade)} (query {show(qid)})")
            if abs(grade) >= 10**_GRADE_DIGITS:
                raise problem(f"{at}.rating {show(grade)} has more than {_GRADE_DIGITS} digits (query {show(qid)})")
            labels.append((doc_id, grade))
        queries.append(QueryLabels(qid, query, tuple(labels), line))
    if not queries:
        raise JudgmentFileProblem(name, "the file holds an empty list, no queries")
    return queries


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _json_array_items(text: str, name: str) -> Iterator[tuple[int, int, object]]:
    """(position, line, value) for each element of a top-level JSON array, parsed one at a time."""
    decoder = json.JSONDecoder()
    line, counted = 1, 0

    def line_at(offset: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, offset)
        counted = offset
        return line

    pos = _JSON_SPACE.match(text).end()
    if text[pos:pos + 1] != "[":
        found = "an object" if text[pos:pos + 1] == "{" else "something else"
        raise JudgmentFileProblem(
            name, f"expected a JSON array of queries [{{query_id, query, ratings}}], found {found}", line_at(pos))
    pos = _JSON_SPACE.match(text, pos + 1).end()
    position = 0
    if text[pos:pos + 1] != "]":
        while True:
            try:
                value, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                raise JudgmentFileProblem(name, f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None
            except RecursionError:
                raise JudgmentFileProblem(name, "JSON nested too deeply", deepest_json_line(text, pos)) from None
            except ValueError as exc:  # an integer of more than 4,300 digits
                raise JudgmentFileProblem(name, f"invalid JSON: {show(str(exc))}", line_at(pos)) from None
            yield position, line_at(pos), value
            pos = _JSON_SPACE.match(text, end).end()
            separator = text[pos:pos + 1]
            if separator == "]":
                break
            if separator != ",":
                raise JudgmentFileProblem(name, f"invalid JSON: expected ',' or ']' after [{position}]", line_at(pos))
            pos = _JSON_SPACE.match(text, pos + 1).end()
            position += 1
    pos = _JSON_SPACE.match(text, pos + 1).end()
    if pos != len(text):
        raise JudgmentFileProblem(name, "invalid JSON: more data after the closing ']'", line_at(pos))


def _json_id(value, where: str, problem, max_id_bytes: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise problem(f"{where} must be a non-empty string, found {_json_text(value)}")
    text = str(value)
    if len(text) > max_id_bytes // 4 and len(text.encode()) > max_id_bytes:
        raise problem(f"{where} is longer than {max_id_bytes:,} bytes: {show(text)}")
    return text


def _json_text(value) -> str:
    """A scalar as JSON writes it, for a message about a JSON file; a long or nested value cut by `show`."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        text = json.dumps(value, ensure_ascii=False)
        if len(text) <= 80:
            return text
    return show(value)


def _json_type(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def read_quepid_csv(source: bytes | IO[bytes], name: str, *, max_line_bytes: int = MAX_LINE_BYTES,
                    max_id_bytes: int = MAX_ID_BYTES) -> tuple[list[str], list[tuple[str, str, list[int | None]]]]:
    """Quepid CSV: ``query,docid,<rater>...`` (its book export) or ``query,docid,rating`` (its rating import).

    Returns the rater columns and, per pair, the query text, doc id and each column's grade (None for
    an empty cell). Quepid writes ratings as floats, so ``3.0`` reads as 3; ``2.5`` is an error. The
    single-rating layout comes back as one column named ``rating``.
    """
    with _judgment_problems():
        stream, head, _format = open_text(source, name)
        reader = csv.reader(csv_lines(stream, name, max_line_bytes, head))
        try:
            columns = [cell.strip() for cell in next(reader)]
            if [column.lower() for column in columns[:2]] not in (["query", "docid"], ["query", "doc_id"]):
                raise JudgmentFileProblem(name, f"the header must start with query,docid; found {show(','.join(columns))}",
                                          1)
            raters = [_unguard(column) for column in columns[2:]]
            if not raters:
                raise JudgmentFileProblem(name, "no rating columns after query,docid", 1)
            if not all(raters) or len(set(raters)) != len(raters):
                raise JudgmentFileProblem(name, f"the rater columns have empty or repeated names: {show(raters)}", 1)
            rows: list[tuple[str, str, list[int | None]]] = []
            first_line: dict[tuple[str, str], int] = {}
            line = reader.line_num + 1
            for values in reader:
                start, line = line, reader.line_num + 1
                if not any(value.strip() for value in values):
                    continue
                if len(values) != len(columns):
                    raise JudgmentFileProblem(name, f"expected {len(columns)} columns, found {len(values)}", start)
                query, doc_id = _unguard(values[0]), values[1].strip()
                if not query.strip() or not doc_id:
                    raise JudgmentFileProblem(name, f"empty {'query' if not query.strip() else 'docid'}", start)
                if len(doc_id) > max_id_bytes // 4 and len(doc_id.encode()) > max_id_bytes:
                    raise JudgmentFileProblem(name, f"docid longer than {max_id_bytes:,} bytes: {show(doc_id)}", start)
                first = first_line.setdefault((query, doc_id), start)
                if first != start:
                    raise JudgmentFileProblem(
                        name, f"query {show(query)} and doc {show(doc_id)} were already on line {first}", start)
                grades = [_csv_grade(value, rater, name, start) for value, rater in zip(values[2:], raters)]
                rows.append((query, doc_id, grades))
        except csv.Error as exc:
            raise JudgmentFileProblem(name, f"malformed CSV: {exc}", reader.line_num) from None
    if not rows:
        raise JudgmentFileProblem(name, "the file holds a header but no judgments")
    return raters, rows


def _csv_grade(value: str, rater: str, name: str, line: int) -> int | None:
    value = value.strip()
    if not value:
        return None
    match = _CSV_GRADE.fullmatch(value)
    if match is None:
        raise JudgmentFileProblem(name, f"rating {show(value)} in column {show(rater)} is not an integer grade", line)
    if len(match.group(1).lstrip("+-")) > _GRADE_DIGITS:
        raise JudgmentFileProblem(name, f"rating {show(value)} in column {show(rater)} has more than {_GRADE_DIGITS} digits", line)
    return int(match.group(1))


def _byte_lines(source: bytes | IO[bytes], name: str, max_line_bytes: int) -> Iterator[tuple[int, bytes]]:
    """(number, bytes) of each line, split as trec_eval splits them (on line feeds; its fields on ASCII white
    space, which bytes.split keeps to), from the blocks `fileformats.stream_blocks` streams."""
    with _judgment_problems():
        stream, first, _format = open_text(source, name)
        for start, block in stream_blocks(stream, name, max_line_bytes, first):
            yield from enumerate(block.split(b"\n"), start)


@contextmanager
def _judgment_problems() -> Iterator[None]:
    """The shared readers' problems (`FileProblem`) as this module's."""
    try:
        yield
    except JudgmentFileProblem:
        raise
    except FileProblem as problem:
        raise JudgmentFileProblem(problem.path, problem.problem, problem.line) from None
