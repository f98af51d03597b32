"""Hostile and careless runs and qrels: endless lines, long ids, non-finite scores, deep JSON, UTF-16.

Each is refused with the file, the line and the problem, without the time or memory the input asks for.
"""

import json
import time
import tracemalloc

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.engine import EngineInputError, read_qrels, read_run
from evaluation.engine.data import _string_hashes

RUN = b"q1 Q0 d1 1 2.5 tag\nq1 Q0 d2 2 1.5 tag\n"


def error_of(reader, source, **kwargs) -> EngineInputError:
    with pytest.raises(EngineInputError) as caught:
        reader(source, **kwargs)
    return caught.value


# ------------------------------------------------------------------------------------------ long lines


@pytest.mark.parametrize("separator", [b" ", b"  "])  # the fast path, and the line-by-line path
def test_a_line_longer_than_the_limit_is_refused_with_its_number(separator, tmp_path):
    data = RUN + b"q1 Q0" + separator + b"d3 3 0.5 " + b"t" * 1100 + b"\n"
    error = error_of(read_run, data, name="run.txt", max_line_bytes=1024)
    assert str(error) == "run.txt:3: line longer than 1,024 bytes"
    path = tmp_path / "run.txt"
    path.write_bytes(data * 3)
    assert error_of(read_run, path, max_line_bytes=1024).line == 3
    assert len(read_run(data, max_line_bytes=2048)) == 3


def test_a_line_of_exactly_the_limit_is_accepted():
    line = b"q1 Q0 d3 3 0.5 "
    data = RUN + line + b"t" * (1024 - len(line)) + b"\n"
    assert max(map(len, data.split(b"\n"))) == 1024
    assert len(read_run(data, max_line_bytes=1024)) == 3


def test_an_endless_line_in_a_file_is_refused_without_being_read_whole(tmp_path):
    path = tmp_path / "endless.run"
    with path.open("wb") as handle:
        handle.write(RUN * 1000)
        for _ in range(64):
            handle.write(b"x" * (1 << 20))  # 64 MiB without a line end
    tracemalloc.start()
    try:
        error = error_of(read_run, path, max_line_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (error.line, error.problem) == (2001, "line longer than 1,048,576 bytes")
    assert peak < 16 << 20


def test_old_mac_line_ends_are_named_as_such():
    error = error_of(read_qrels, b"q1 0 d1 1\r" * 200, name="mac.qrels", max_line_bytes=1024)
    assert str(error) == "mac.qrels:1: lines end in CR only (old Mac style); save the file with LF or CRLF line ends"


# ---------------------------------------------------------------------------------------------- ids


@pytest.mark.parametrize("reader,template,what", [
    (read_run, b"q1 Q0 d1 1 2.5 tag\nq1 Q0 %s 2 1.5 tag\n", "doc id"),
    (read_run, b"q1 Q0 d1 1 2.5 tag\n%s Q0 d2 2 1.5 tag\n", "query id"),
    (read_qrels, b"q1 0 d1 1\nq1 0 %s 0\n", "doc id"),
    (read_qrels, b"q1 0 d1 1\n%s  0 d2 0\n", "query id"),  # (two spaces: the line-by-line path)
])
def test_an_id_longer_than_512_bytes_is_refused_at_its_line(reader, template, what):
    assert reader(template % (b"x" * 512), name="f")
    error = error_of(reader, template % (b"x" * 513), name="f")
    assert error.line == 2
    assert error.problem == f"{what} longer than 512 bytes: {'x' * 80!r}... (513 characters)"


def test_ids_in_json_and_tables_are_bounded_too():
    long_id = "é" * 257  # 514 bytes
    assert "doc id longer than 512 bytes" in str(error_of(read_run, {"q1": {long_id: 1.0}}))
    frame = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", long_id], "score": [2.0, 1.0]})
    assert str(error_of(read_run, frame, name="frame")).endswith("(row 1)")
    assert "query id longer than 512 bytes" in str(error_of(read_qrels, {long_id: {"d1": 1}}))
    assert len(read_run(frame, max_id_bytes=None)) == 2


# ------------------------------------------------------------------------------------- number values


@pytest.mark.parametrize("score", [b"inf", b"-inf", b"Infinity", b"nan", b"NaN", b"1e400", b"-1e309"])
@pytest.mark.parametrize("separator", [b" ", b"\t"])
def test_a_score_that_is_not_finite_is_refused_at_its_line(score, separator):
    data = RUN + separator.join([b"q1", b"Q0", b"d3", b"3", score, b"tag"]) + b"\n"
    error = error_of(read_run, data, name="run.txt")
    assert (error.line, error.problem) == (3, f"score is not a finite number: {score.decode()!r}")


@pytest.mark.parametrize("score", ["1e400", "-1e400", "NaN", "Infinity", "1" + "0" * 400])
def test_a_json_score_that_is_not_finite_is_refused(score):
    text = '{"q1": {"d1": 1.0, "d2": %s}}' % score
    assert "score is not a finite number" in str(error_of(read_run, text.encode(), name="run.json"))
    items = '[{"query_id": "q1", "doc_id": "d2", "score": %s}]' % score
    assert "item 0: score is not a finite number" in str(error_of(read_run, items.encode(), name="run.json"))


def test_a_table_score_that_is_not_finite_is_refused():
    frame = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [1.0, np.inf]})
    assert str(error_of(read_run, frame, name="frame")) == "frame: score is not a finite number in row 1: inf"
    table = pa.table({"query_id": ["q1"], "doc_id": ["d1"], "score": [-np.inf]})
    assert "not a finite number" in str(error_of(read_run, table))


@pytest.mark.parametrize("grade,problem", [
    (b"9" * 30, "relevance grade is out of range: '" + "9" * 30 + "'"),
    (b"9223372036854775808", "relevance grade is out of range: '9223372036854775808'"),
])
def test_a_grade_beyond_64_bits_is_refused_at_its_line(grade, problem):
    error = error_of(read_qrels, b"q1 0 d1 1\nq1 0 d2 " + grade + b"\n", name="q")
    assert (error.line, error.problem) == (2, problem)


@pytest.mark.parametrize("grade", ["1e400", "NaN", "-Infinity", "1" + "0" * 30])
def test_a_json_grade_that_is_not_a_finite_integer_in_range_is_refused(grade):
    error = error_of(read_qrels, ('{"q1": {"d1": %s}}' % grade).encode(), name="qrels.json")
    assert "query 'q1', rating 0: rating is" in str(error)


# ---------------------------------------------------------------------------------------------- JSON


@pytest.mark.parametrize("reader", [read_run, read_qrels])
def test_json_nested_too_deeply_is_named_by_its_line(reader, tmp_path):
    data = b'{"q1":\n  {"d1": 1,\n   "d2": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n"
    assert str(error_of(reader, data, name="deep.json")) == "deep.json:3: JSON nested too deeply"
    path = tmp_path / "deep.json"
    path.write_bytes(b" " * 5000 + data)  # larger than the first look at a file
    assert error_of(reader, path).line == 3


def test_an_id_nested_in_json_is_refused_not_turned_into_text():
    nested = '{"q1": {"d1": 1}, "q2": [%s]}' % ("[" * 900 + "]" * 900)
    assert "expected an object of doc_id: value" in str(error_of(read_run, nested.encode()))
    items = '[{"query_id": %s, "doc_id": "d1", "relevance": 1}]' % ("[" * 900 + "]" * 900)
    assert "an id must be a string or a number" in str(error_of(read_qrels, items.encode()))


# --------------------------------------------------------------------------------- UTF-16 and binary


@pytest.mark.parametrize("data,problem", [
    (RUN.decode().encode("utf-16"), "the file is UTF-16 text; save it as UTF-8"),
    (RUN.decode().encode("utf-16-le"), "the file is UTF-16 text (without a byte order mark); save it as UTF-8"),
    (RUN.decode().encode("utf-16-be"), "the file is UTF-16 text (without a byte order mark); save it as UTF-8"),
    (RUN.decode().encode("utf-32"), "the file is UTF-32 text; save it as UTF-8"),
    (b"\x1f\x8b\x08\x00" + bytes(200), "this is not a text file but gzip-compressed data; unpack it first"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "this is not a text file (it holds binary data)"),
])
def test_utf16_and_binary_files_are_named_as_such(data, problem, tmp_path):
    assert str(error_of(read_run, data, name="run.txt")) == f"run.txt: {problem}"
    path = tmp_path / "run.txt"
    path.write_bytes(data * 50)
    assert error_of(read_run, path).problem == problem


# ----------------------------------------------------------------------------------- error messages


@settings(max_examples=60, deadline=None)
@given(value=st.text(min_size=1, max_size=3000).filter(lambda text: text.strip()),
       where=st.sampled_from(["doc", "query", "score", "grade", "json_doc", "json_score"]))
def test_an_error_message_stays_short_whatever_the_input(value, where):
    token = "".join(value.split()) or "x"
    long_token = token * (4000 // len(token) + 1)
    sources = {
        "doc": (read_run, f"q1 Q0 {long_token} 1 1.0 tag\nq1 Q0 {long_token} 2 0.5 tag\n".encode()),
        "query": (read_run, f"{long_token} Q0 d1 1 1.0 tag\n".encode()),
        "score": (read_run, f"q1 Q0 d1 1 {long_token} tag\n".encode()),
        "grade": (read_qrels, f"q1 0 d1 {long_token}\n".encode()),
        "json_doc": (read_run, json.dumps({"q1": {long_token: "high"}}).encode()),
        "json_score": (read_qrels, json.dumps({"q1": {"d1": long_token}}).encode()),
    }
    reader, data = sources[where]
    try:
        reader(data, name="input.txt", max_id_bytes=None)
    except EngineInputError as error:
        assert len(str(error)) <= 400, str(error)


# ---------------------------------------------------------------------------------- speed and progress


def _run_text(rows: int, extra: bytes = b"") -> bytes:
    docs = np.char.add("doc-", np.arange(rows).astype(str)).astype(object)
    lines = [f"q{i // 1000} Q0 {doc:0>12} {i % 1000 + 1} {1000 - i % 1000} tag\n" for i, doc in enumerate(docs)]
    return "".join(lines).encode() + extra


def test_one_long_id_costs_time_in_proportion_to_its_bytes():
    """Hashing stepped through a long id eight bytes at a time, each step over every row: 200,000 rows with
    one 1 MB id took minutes."""
    normal = _run_text(200_000)
    started = time.perf_counter()
    read_run(normal, max_id_bytes=None)
    plain = time.perf_counter() - started
    long_id = normal + b"q0 Q0 " + b"z" * (1 << 20) + b" 1001 0.5 tag\n"
    started = time.perf_counter()
    run = read_run(long_id, max_id_bytes=None, max_line_bytes=None)
    assert len(run) == 200_001
    assert time.perf_counter() - started < 3 * plain + 2


def test_equal_ids_hash_alike_wherever_they_stand_and_whatever_their_length():
    ids = ["", "a", "abcdefgh", "abcdefghi", "x" * 40, "y" * 100_000, "é" * 33]
    column = pa.array(["pad"] + ids + list(reversed(ids)))
    hashes = _string_hashes(column)
    first, second = hashes[1:len(ids) + 1], hashes[len(ids) + 1:][::-1]
    assert (first == second).all()
    assert len(set(first.tolist())) == len(ids)
    assert (_string_hashes(column.slice(1, len(ids))) == first).all()


def test_progress_hears_from_every_phase_of_reading_a_run(tmp_path):
    path = tmp_path / "run.txt"
    path.write_bytes(_run_text(3000))
    heard = []
    read_run(path, progress=lambda done, total, message: heard.append((done, total, message)))
    messages = list(dict.fromkeys(message for _, _, message in heard))
    assert messages == ["Reading", "Checking ids and duplicates", "Ranking"]
    reading = [(done, total) for done, total, message in heard if message == "Reading"]
    assert reading[-1] == (path.stat().st_size, path.stat().st_size)
