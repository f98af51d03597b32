"""Hostile and careless files in the pure readers: query sets, corpus, query logs and judgment lists.

Endless lines, gzip bombs, long ids and fields, non-finite numbers, deep JSON, UTF-16 and binary files are
refused with the file, the line and the problem, without the memory or time the file asks for. No database.
"""

import gzip
import io
import json
import tracemalloc
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgments.lib import querylog
from judgments.lib.fileformats import FileProblem, read_documents, read_queries, show
from judgments.lib.judgment_formats import read_json_list, read_qrels, read_quepid_csv
from judgments.lib.querylog import ColumnMapping, LogProblem, aggregate_log, peek

DEEP = "[" * 100_000 + "]" * 100_000


def problem_of(call) -> str:
    with pytest.raises(FileProblem) as caught:
        call()
    return str(caught.value)


def documents(data: bytes, name: str = "docs.jsonl", **limits) -> list:
    return [row for batch in read_documents(io.BytesIO(data), name, **limits) for row in batch]


def peak_bytes(call) -> int:
    """The most memory Python (and numpy) held while `call` ran; the call must raise."""
    tracemalloc.start()
    try:
        with pytest.raises((FileProblem, LogProblem)):
            call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --------------------------------------------------------------------------------- showing values


def test_show_quotes_at_most_80_characters_and_says_how_long_the_value_was():
    assert show("d1") == "'d1'"
    assert show("x" * 80) == repr("x" * 80)
    assert show("x" * 20_000_000) == f"{'x' * 80!r}... (20,000,000 characters)"
    assert show(b"\xff" * 1000) == f"{chr(0xfffd) * 80!r}... (1,000 bytes)"
    assert len(show("\x1b" * 200)) < 110  # escapes count as what they show
    nested = json.loads("[" * 900 + "]" * 900)
    assert len(show(nested)) < 20 and len(show({"k": "v" * 1000, "l": list(range(1000))})) < 200


# ------------------------------------------------------------------------------------- long lines


def test_a_query_file_line_longer_than_the_limit_is_refused_with_its_number():
    data = b"query_id,query\nq1,tent\nq2," + b"x" * 2000 + b"\nq3,stove\n"
    assert problem_of(lambda: read_queries(data, "q.csv", max_line_bytes=1024)) == "q.csv:3: line longer than 1,024 bytes"
    assert len(read_queries(data, "q.csv", max_line_bytes=4096).queries) == 3


def test_an_endless_corpus_line_is_refused_without_being_read_whole():
    class Endless(io.RawIOBase):
        """A stream of one line that never ends (64 MiB shown, more would do)."""

        sent = 0

        def readinto(self, buffer) -> int:
            if self.sent >= 64 << 20:
                return 0
            buffer[:] = b"x" * len(buffer)
            self.sent += len(buffer)
            return len(buffer)

        def readable(self) -> bool:
            return True

    stream = io.BufferedReader(Endless())
    assert peak_bytes(lambda: list(read_documents(stream, "docs.jsonl", max_line_bytes=1 << 20))) < 8 << 20
    assert problem_of(lambda: list(read_documents(io.BufferedReader(Endless()), "docs.jsonl"))) == (
        "docs.jsonl:1: line longer than 1,048,576 bytes")


def test_a_long_corpus_line_is_named_by_its_number_wherever_the_blocks_cut():
    lines = [json.dumps({"doc_id": f"d{i}", "text": "word " * (i % 300)}).encode() for i in range(3000)]
    lines[2500] = json.dumps({"doc_id": "long", "text": "w" * 5000}).encode()
    data = b"\n".join(lines) + b"\n"
    assert problem_of(lambda: documents(data, max_line_bytes=4096)) == "docs.jsonl:2501: line longer than 4,096 bytes"
    assert len(documents(data, max_line_bytes=8192)) == 3000


def test_old_mac_line_ends_are_named_as_such():
    data = b"query_id,query\r" + b"q1,tent\r" * 200
    assert "lines end in CR only (old Mac style)" in problem_of(lambda: read_queries(data, "q.csv", max_line_bytes=1024))


# ------------------------------------------------------------------------------- ids and fields


def test_query_and_document_ids_longer_than_the_limit_are_refused():
    ok, long = "é" * 256, "é" * 257  # 512 and 514 bytes
    assert read_queries(f"query_id,query\n{ok},tent\n".encode(), "q.csv").queries[0].query_id == ok
    assert problem_of(lambda: read_queries(f"query_id,query\nq1,a\n{long},tent\n".encode(), "q.csv")).startswith(
        "q.csv:3: query_id longer than 512 bytes: 'éééé")
    assert documents(json.dumps({"doc_id": ok}).encode())[0].doc_id == ok
    assert problem_of(lambda: documents(json.dumps({"doc_id": long}).encode())).startswith(
        "docs.jsonl:1: doc_id longer than 512 bytes")


def test_a_corpus_field_larger_than_the_limit_is_refused_naming_the_field():
    small = {"doc_id": "d1", "title": "Tent", "body": "b" * 1000}
    large = {"doc_id": "d2", "title": "Stove", "body": "é" * 600}  # 1,200 bytes
    data = (json.dumps(small) + "\n" + json.dumps(large, ensure_ascii=False) + "\n").encode()
    assert problem_of(lambda: documents(data, max_field_bytes=1024)) == (
        "docs.jsonl:2: field 'body' holds 1,200 bytes; the most a field may hold is 1,024 bytes")
    nested = json.dumps({"doc_id": "d3", "specs": {"sizes": list(range(500))}}).encode()
    assert "field 'specs' holds" in problem_of(lambda: documents(nested, max_field_bytes=1024))
    assert len(documents(data, max_field_bytes=2048)) == 2


def test_a_csv_corpus_field_running_over_many_lines_is_refused():
    data = b'doc_id,body\nd1,short\nd2,"' + b"many lines\n" * 200_000 + b'"\n'
    assert "docs.csv:" in problem_of(lambda: documents(data, "docs.csv", max_field_bytes=1 << 20))
    assert "a field holds more than" in problem_of(lambda: documents(data, "docs.csv", max_field_bytes=1 << 20))


def test_an_id_that_is_a_json_structure_is_refused():
    assert "doc_id must be text or a number" in problem_of(lambda: documents(b'{"doc_id": [[["d1"]]]}\n'))
    assert "query_id must be text or a number" in problem_of(
        lambda: read_queries(b'{"query_id": {"a": 1}, "query": "tent"}\n', "q.jsonl"))


# --------------------------------------------------------------------------------- number values


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-2E+999", "1" + "0" * 400 + ".5"])
def test_a_non_finite_number_in_a_json_lines_file_is_refused_at_its_line(number):
    corpus = b'{"doc_id": "d1", "price": 1.5}\n{"doc_id": "d2", "specs": {"weights": [1.0, %s]}}\n' % number.encode()
    assert problem_of(lambda: documents(corpus)).startswith(f"docs.jsonl:2: the number {show(number)} is not finite")
    queries = b'{"query_id": "q1", "query": "tent", "score": %s}\n' % number.encode()
    assert problem_of(lambda: read_queries(queries, "q.jsonl")).startswith("q.jsonl:1: the number")


def test_large_finite_numbers_are_kept():
    [row] = documents(b'{"doc_id": "d1", "big": 1e300, "huge": %s, "list": [1e308, 1e308]}\n' % (b"9" * 400))
    assert row.fields["big"] == 1e300 and row.fields["huge"] == int("9" * 400)


@pytest.mark.parametrize("weight", ["1e400", "inf", "nan", "1" + "0" * 400])
def test_a_query_weight_that_is_not_finite_is_refused(weight):
    assert "must be a finite number >= 0" in problem_of(
        lambda: read_queries(f"query_id,query,weight\nq1,tent,{weight}\n".encode(), "q.csv"))
    assert "q.jsonl:1:" in problem_of(
        lambda: read_queries(f'{{"query_id": "q1", "query": "tent", "weight": {weight}}}\n'.encode(), "q.jsonl"))


# ---------------------------------------------------------------------------------------------- JSON


def test_json_nested_too_deeply_is_named_by_its_line_in_every_json_reader(tmp_path):
    corpus = b'{"doc_id": "d1"}\n{"doc_id": "d2", "x": %s}\n' % DEEP.encode()
    assert problem_of(lambda: documents(corpus)) == "docs.jsonl:2: JSON nested too deeply"
    queries = b'{"query_id": "q1", "query": "tent"}\n{"query_id": "q2", "query": "boots", "x": %s}\n' % DEEP.encode()
    assert problem_of(lambda: read_queries(queries, "q.jsonl")) == "q.jsonl:2: JSON nested too deeply"
    judgments = b'[\n{"query_id": "q1", "ratings": []},\n{"query_id": "q2",\n "ratings": %s}\n]\n' % DEEP.encode()
    assert problem_of(lambda: read_json_list(judgments, "labels.json")) == "labels.json:4: JSON nested too deeply"
    log = tmp_path / "log.jsonl"
    deep = ("[" * 30_000 + "]" * 30_000).encode()  # within the first look at the file, which peek reads
    log.write_bytes(b'{"query": "tent"}\n{"query": "boots", "x": %s}\n{oops}\n{"query": "stove"}\n' % deep)
    counted = aggregate_log(log, "log.jsonl", ColumnMapping("query"), max_bad_share=0.5)
    assert [example[:2] for example in counted.bad_examples] == [
        (2, "invalid JSON: nested too deeply"), (3, "invalid JSON: Expecting property name enclosed in double quotes")]
    assert peek(log, "log.jsonl").columns == ["query"]
    log.write_bytes(b'{"query": %s}\n{"query": "boots"}\n' % DEEP.encode())
    assert aggregate_log(log, "log.jsonl", ColumnMapping("query"), max_bad_share=0.5).bad_examples[0][:2] == (
        1, "invalid JSON: nested too deeply")


def test_a_json_list_with_a_number_of_too_many_digits_is_refused_at_its_line():
    data = b'[\n{"query_id": "q1", "ratings": [{"doc_id": "d1", "rating": %s}]}\n]' % (b"9" * 5000)
    assert problem_of(lambda: read_json_list(data, "labels.json")).startswith("labels.json:2: invalid JSON")
    data = b'[{"query_id": "q1", "ratings": [{"doc_id": "d1", "rating": %s}]}]' % (b"9" * 30)
    assert problem_of(lambda: read_json_list(data, "labels.json")) == (
        f"labels.json:1: [0].ratings[0].rating {'9' * 30} has more than 18 digits (query 'q1')")


# ----------------------------------------------------------------------------------- judgment files


def test_judgment_files_refuse_long_lines_long_ids_and_huge_grades():
    assert problem_of(lambda: read_qrels(b"q1 0 d1 1\nq1 0 " + b"d" * 2000 + b" 1\n", "l.qrels", max_line_bytes=1024)) \
        == "l.qrels:2: line longer than 1,024 bytes"
    assert problem_of(lambda: read_qrels(b"q1 0 " + b"d" * 600 + b" 1\n", "l.qrels")).startswith(
        "l.qrels:1: doc id longer than 512 bytes: 'ddd")
    assert problem_of(lambda: read_qrels(b"q1 0 d1 " + b"7" * 5000 + b"\n", "l.qrels")).startswith(
        "l.qrels:1: grade '77777")
    assert problem_of(lambda: read_quepid_csv(b"query,docid,Ann\ntent," + b"p" * 600 + b",1\n", "l.csv")).startswith(
        "l.csv:2: docid longer than 512 bytes")
    assert "has more than 18 digits" in problem_of(lambda: read_quepid_csv(b"query,docid,Ann\ntent,p1," + b"3" * 40 + b"\n", "l.csv"))


# -------------------------------------------------------------------------------- UTF-16 and binary


@pytest.mark.parametrize("encoding,problem", [
    ("utf-16", "the file is UTF-16 text; save it as UTF-8"),
    ("utf-16-le", "the file is UTF-16 text (without a byte order mark); save it as UTF-8"),
    ("utf-32", "the file is UTF-32 text; save it as UTF-8"),
])
def test_utf16_files_get_the_fix_in_every_reader(encoding, problem, tmp_path):
    def text(content: str) -> bytes:
        return content.encode(encoding)

    assert problem_of(lambda: read_queries(text("query_id,query\nq1,tent\n"), "q.csv")) == f"q.csv: {problem}"
    assert problem_of(lambda: documents(text('{"doc_id": "d1"}\n'))) == f"docs.jsonl: {problem}"
    assert problem_of(lambda: read_qrels(text("q1 0 d1 1\n"), "l.qrels")) == f"l.qrels: {problem}"
    assert problem_of(lambda: read_json_list(text('[{"query_id": "q1", "ratings": []}]'), "l.json")) == f"l.json: {problem}"
    assert problem_of(lambda: read_quepid_csv(text("query,docid,Ann\ntent,p1,1\n"), "l.csv")) == f"l.csv: {problem}"
    log = tmp_path / "log.csv"
    log.write_bytes(text("query\ntent\n"))
    with pytest.raises(LogProblem) as caught:
        aggregate_log(log, "log.csv", ColumnMapping("query"))
    assert str(caught.value) == f"log.csv: {problem}"


@pytest.mark.parametrize("data,problem", [
    (b"PK\x03\x04\x14\x00\x06\x00" + bytes(100), "this is not a text file but a ZIP archive (an Excel workbook?); save it as CSV"),
    (gzip.compress(b"query_id,query\nq1,tent\n"), "this is not a text file but gzip-compressed data; unpack it first"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "this is not a text file (it holds binary data)"),
])
def test_binary_files_are_named_as_such(data, problem):
    assert problem_of(lambda: read_queries(data, "q.csv")) == f"q.csv: {problem}"
    assert problem_of(lambda: documents(data, "docs.csv")) == f"docs.csv: {problem}"
    assert problem_of(lambda: read_qrels(data, "l.qrels")) == f"l.qrels: {problem}"


# ---------------------------------------------------------------------------------------- query logs


def gzipped_stream(path, head: bytes, line: bytes, repeat: int, tail: bytes = b"") -> None:
    """A gzip file of `head`, then `line` `repeat` times, then `tail`, compressed as it is written."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with path.open("wb") as handle:
        handle.write(packer.compress(head))
        for _ in range(repeat):
            handle.write(packer.compress(line))
        handle.write(packer.compress(tail) + packer.flush())


def test_an_endless_line_in_a_gzipped_log_stops_at_its_line_in_bounded_memory(tmp_path):
    path = tmp_path / "log.csv.gz"
    gzipped_stream(path, b"query,n\ntent,1\nboots,2\n", b"x" * (1 << 20), 128)  # a 128 MiB fourth line
    assert path.stat().st_size < 1 << 20
    with pytest.raises(LogProblem) as caught:
        aggregate_log(path, "log.csv.gz", ColumnMapping("query"))
    assert str(caught.value) == "log.csv.gz:4: line longer than 1,048,576 bytes"
    assert peak_bytes(lambda: aggregate_log(path, "log.csv.gz", ColumnMapping("query"))) < 64 << 20


def test_a_long_line_inside_a_block_is_refused_too(tmp_path):
    rows = b"query\n" + b"tent\n" * 1000 + b"b" * 5000 + b"\n" + b"boots\n" * 1000
    path = tmp_path / "log.csv"
    path.write_bytes(rows)
    with pytest.raises(LogProblem, match=r"^log.csv:1002: line longer than 4,096 bytes$"):
        aggregate_log(path, "log.csv", ColumnMapping("query"), max_line_bytes=4096)
    assert aggregate_log(path, "log.csv", ColumnMapping("query"), max_line_bytes=8192, max_bad_share=1).rows_read == 2001


def test_a_gzip_bomb_of_short_lines_stops_at_the_unpacked_limit(tmp_path):
    path = tmp_path / "bomb.csv.gz"
    gzipped_stream(path, b"query\n", b"tent\n" * 200_000, 40)  # 40 MB unpacked, 40 KB packed
    with pytest.raises(LogProblem, match="bomb.csv.gz: the file unpacks to more than 16,777,216 bytes"):
        aggregate_log(path, "bomb.csv.gz", ColumnMapping("query"), max_decompressed_bytes=16 << 20)
    assert aggregate_log(path, "bomb.csv.gz", ColumnMapping("query"), max_decompressed_bytes=64 << 20).rows_read == 8_000_000


def test_blocks_of_very_short_lines_are_split_and_counted_the_same(tmp_path, monkeypatch):
    rows = ["query,n"] + [f"q{i % 7},{i % 3}" for i in range(200)] + ["", "bad,row,here", "q1,x"] + ["q2,1"] * 50
    path = tmp_path / "log.csv"
    path.write_text("\n".join(rows) + "\n")
    mapping = ColumnMapping("query", count="n")
    whole = aggregate_log(path, "log.csv", mapping, max_bad_share=1)
    monkeypatch.setattr(querylog, "BLOCK_LINES", 3)
    split = aggregate_log(path, "log.csv", mapping, max_bad_share=1)
    assert split.bad_examples == whole.bad_examples == [(203, "expected 2 fields, found 3",
                                                         "bad,row,here"), (204, "count is not a whole number >= 0: 'x'", "q1,x")]
    for table in ("daily", "variants", "rows"):
        assert getattr(split, table).to_pylist() == getattr(whole, table).to_pylist()


def test_parquet_values_and_unpacked_sizes_are_bounded(tmp_path):
    path = tmp_path / "log.parquet"
    pq.write_table(pa.table({"query": ["tent", "boots", "z" * 5000, "stove"]}), path)
    with pytest.raises(LogProblem, match=r"^log.parquet:3: the value in column 'query' is longer than 4,096 bytes$"):
        aggregate_log(path, "log.parquet", ColumnMapping("query"), max_line_bytes=4096)
    with pytest.raises(LogProblem, match=r"^log.parquet: the column 'query' unpacks to [0-9,]+ bytes; the most accepted is 1,024"):
        aggregate_log(path, "log.parquet", ColumnMapping("query"), max_decompressed_bytes=1024)


def test_a_dictionary_is_checked_by_the_values_its_rows_name_and_unpacked_in_slices(tmp_path):
    from evaluation.engine import read_run
    from evaluation.engine.parquet import decoded_batches

    long_id = "d" * 600
    run = tmp_path / "run.parquet"
    pq.write_table(pa.table({"query_id": ["q1"] * 4, "doc_id": ["d1", "d2", long_id, "d4"], "score": [4.0, 3, 2, 1]}), run)
    with pytest.raises(ValueError, match=r"^run.parquet: column 'doc_id' holds a value longer than 512 bytes \(row group 1 of 1\)$"):
        read_run(run, name="run.parquet", max_id_bytes=512)
    # A long value no row names is no problem; rows naming one value unpack in slices of the size asked.
    values = pa.DictionaryArray.from_arrays(pa.array([0, 0, 0, 2], pa.int32()), pa.array(["x" * 100, long_id, "y"]))
    batch = pa.RecordBatch.from_arrays([values], names=["doc_id"])
    pieces = list(decoded_batches([batch], name="b", where="here", max_value_bytes=512, budget=None, slice_bytes=250))
    assert [piece.column(0).to_pylist() for piece in pieces] == [["x" * 100, "x" * 100], ["x" * 100, "y"]]
    with pytest.raises(ValueError, match="unpacks to at least 333 bytes; the most accepted is 300"):
        list(decoded_batches([batch], name="b", where="here", max_value_bytes=512, budget=300))


def test_a_parquet_log_previews_its_plain_columns_and_refuses_to_count_a_list_column(tmp_path):
    path = tmp_path / "log.parquet"
    pq.write_table(pa.table({"query": ["tent", "boots"], "clicks": [["d1"], []]}), path)
    preview = peek(path, "log.parquet")
    assert preview.columns == ["query", "clicks"] and preview.rows == [{"query": "tent"}, {"query": "boots"}]
    assert aggregate_log(path, "log.parquet", ColumnMapping("query")).rows_read == 2
    with pytest.raises(LogProblem, match=r"^log.parquet: column 'clicks' holds 'list<element: string>', not text or numbers$"):
        aggregate_log(path, "log.parquet", ColumnMapping("query", segments=("clicks",)))


# ----------------------------------------------------------------------------------- error messages


READERS = {
    "query set": lambda data: read_queries(data, "q.csv"),
    "corpus": lambda data: documents(data, "docs.csv"),
    "qrels": lambda data: read_qrels(data, "l.qrels"),
    "quepid": lambda data: read_quepid_csv(data, "l.csv"),
}


@settings(max_examples=80, deadline=None)
@given(value=st.text(min_size=1, max_size=50).map(lambda text: text * 400),
       where=st.sampled_from(["id", "repeat", "grade", "header"]), reader=st.sampled_from(sorted(READERS)))
def test_an_error_message_stays_short_whatever_the_input(value, where, reader):
    lines = {
        "id": f"query_id,query,doc_id\n{value},x,{value}\n{value},x,{value}\n",
        "repeat": f"query,docid,Ann\n{value},{value},1\n{value},{value},2\n",
        "grade": f"q1 0 d1 {value}\nq1,d1,{value}\n",
        "header": f"{value},{value}\n",
    }[where]
    try:
        READERS[reader](lines.encode("utf-8", "surrogatepass"))
    except FileProblem as problem:
        assert len(str(problem)) <= 400, str(problem)
