"""Reading qrels and runs: formats, encodings, and an error naming file, line and problem."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from evaluation.engine import EngineInputError, Run, evaluate, read_qrels, read_run

QRELS = "q1 0 a 1\nq1 0 b 0\nq1 0 c 2\nq2 0 x 1\n"


def error_of(reader, text, name, **kwargs) -> EngineInputError:
    with pytest.raises(EngineInputError) as info:
        reader(text.encode(), name=name, **kwargs)
    return info.value


def test_a_short_run_line_is_reported_with_file_and_line():
    error = error_of(read_run, "q1 Q0 a 1 2.0 r\nq1 Q0 b 2 1.0\n", "results.test")
    assert (error.path, error.line, error.problem) == ("results.test", 2, "expected 6 columns, found 5")
    assert str(error) == "results.test:2: expected 6 columns, found 5"


def test_a_non_numeric_score_is_an_error():
    error = error_of(read_run, "q1 Q0 a 1 2.0 r\n# note\nq1 Q0 b 2 high r\n", "run.txt")
    assert (error.line, error.problem) == (3, "score is not a number: 'high'")


def test_a_non_integer_grade_is_an_error():
    error = error_of(read_qrels, "q1 0 a 1\nq1 0 b x\n", "qrels.txt")
    assert (error.line, error.problem) == (2, "relevance grade is not an integer: 'x'")


def test_a_qrels_line_with_five_columns_is_an_error():
    assert error_of(read_qrels, "q1 0 a 1 extra\n", "qrels.txt").problem == "expected 4 columns, found 5"


def test_an_empty_file_is_an_error():
    assert error_of(read_run, "", "empty.run").problem == "empty file"
    assert error_of(read_qrels, "# only a comment\n", "q").problem.startswith("empty file")


def test_a_duplicate_document_in_one_ranking_is_an_error_naming_both_lines():
    error = error_of(read_run, "q1 Q0 a 1 2 r\nq1 Q0 b 2 1 r\nq1 Q0 a 3 0.5 r\n", "run.txt")
    assert error.line == 3
    assert error.problem == "duplicate document 'a' in the ranking of query 'q1' (first on line 1)"


def test_keep_first_drops_later_duplicates():
    run = read_run(b"q1 Q0 a 1 0.5 r\nq1 Q0 b 2 1 r\nq1 Q0 a 3 3.0 r\n", on_duplicate="first")
    assert run.to_dict() == {"q1": {"b": 1.0, "a": 0.5}}


def test_the_same_document_under_two_queries_is_not_a_duplicate():
    assert len(read_run(b"q1 Q0 a 1 1 r\nq2 Q0 a 1 1 r\n")) == 2


def test_duplicate_judgments_are_an_error_unless_keep_first():
    error = error_of(read_qrels, "q1 0 a 1\nq1 0 a 0\n", "qrels.txt")
    assert error.line == 2
    assert read_qrels(b"q1 0 a 1\nq1 0 a 0\n", on_duplicate="first").to_dict() == {"q1": {"a": 1}}


def test_a_bom_and_crlf_line_ends_are_accepted():
    plain = evaluate(read_qrels(QRELS.encode()), read_run(b"q1 Q0 a 1 3 r\nq1 Q0 c 2 2 r\n"), ["AP", "nDCG@10"])
    crlf = evaluate(read_qrels(b"\xef\xbb\xbf" + QRELS.replace("\n", "\r\n").encode()),
                    read_run(b"\xef\xbb\xbfq1 Q0 a 1 3 r\r\nq1 Q0 c 2 2 r\r\n"), ["AP", "nDCG@10"])
    assert crlf.aggregate == plain.aggregate


def test_comment_lines_are_skipped_and_doc_ids_may_contain_a_hash():
    qrels = read_qrels(b"# header\nq1 0 doc#1 1\n")
    run = read_run(b"  # indented comment\nq1 Q0 doc#1 1 2.0 tag\n")
    assert evaluate(qrels, run, ["P@1"]).aggregate["P@1"] == 1.0


def test_any_whitespace_separates_fields():
    run = read_run(b"q1\tQ0  a \t1   2.5\ttag extra junk\n\nq1 Q0 b 2 1.0 tag\n")
    assert run.to_dict() == {"q1": {"a": 2.5, "b": 1.0}}
    assert run.run_id == "tag"


def test_invalid_utf8_is_reported_on_its_line():
    with pytest.raises(EngineInputError) as info:
        read_run(b"q1 Q0 a 1 1 r\nq1 Q0 \xff 2 0 r\n", name="bad.run")
    assert info.value.line == 2
    assert info.value.problem.startswith("doc id is not valid UTF-8")


def test_the_json_judgment_list_format_is_read():
    qrels = read_qrels([{"query_id": "q1", "query": "cats", "ratings": [{"doc_id": "a", "rating": 2},
                                                                       {"doc_id": "b", "rating": 0}]}])
    assert qrels.to_dict() == {"q1": {"a": 2, "b": 0}}


def test_a_json_judgment_without_rating_is_an_error():
    with pytest.raises(EngineInputError, match="rating"):
        read_qrels([{"query_id": "q1", "ratings": [{"doc_id": "a"}]}], name="list.json")


def test_json_runs_and_dataframes_read_the_same_ranking():
    from_json = read_run(b'{"q1": {"a": 1.0, "b": 2.0}}')
    from_frame = read_run(pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["a", "b"], "score": [1.0, 2.0]}))
    assert from_json.to_dict() == from_frame.to_dict() == {"q1": {"b": 2.0, "a": 1.0}}


def test_a_dataframe_of_qrels_is_read():
    frame = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["a", "b"], "relevance": [1, 0]})
    assert read_qrels(frame).to_dict() == {"q1": {"a": 1, "b": 0}}


def test_a_dataframe_without_a_score_column_is_an_error():
    with pytest.raises(EngineInputError, match="missing column 'score'"):
        read_run(pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"]}))


def test_ties_are_broken_by_doc_id_descending_in_byte_order():
    run = read_run(b"q1 Q0 B 1 1.0 r\nq1 Q0 a 2 1.0 r\nq1 Q0 \xc3\xa9 3 1.0 r\nq1 Q0 Z 4 1.0 r\n")
    assert list(run.to_dict()["q1"]) == ["\u00e9", "a", "Z", "B"]


def test_the_rank_column_is_ignored():
    by_score = read_run(b"q1 Q0 a 1 1.0 r\nq1 Q0 b 2 3.0 r\n")
    assert list(by_score.to_dict()["q1"]) == ["b", "a"]


def test_a_rank_only_run_with_equal_scores_ranks_by_doc_id_descending():
    qrels = read_qrels(b"q1 0 a 1\n")
    run = read_run(b"q1 Q0 a 1 0 r\nq1 Q0 b 2 0 r\nq1 Q0 c 3 0 r\n")
    assert evaluate(qrels, run, ["RR"]).aggregate["RR"] == pytest.approx(1 / 3)


def test_runs_round_trip_through_arrow_and_parquet_in_ranking_order(tmp_path):
    run = read_run(b"q2 Q0 x 1 1 r\nq1 Q0 a 1 1 r\nq1 Q0 b 2 5 r\n")
    table = run.to_arrow()
    assert table.column("doc_id").to_pylist() == ["b", "a", "x"]
    assert table.column("rank").to_pylist() == [1, 2, 1]
    path = tmp_path / "run.parquet"
    run.to_parquet(path)
    again = Run.from_parquet(path)
    assert again.to_dict() == run.to_dict() and again.run_id == "r"
    assert Run.from_arrow(pa.table({"query_id": ["q"], "doc_id": ["d"], "score": np.array([1.0])})).to_dict() == {
        "q": {"d": 1.0}}


def test_a_large_cleanly_formatted_run_reads_like_the_line_by_line_path():
    rng = np.random.default_rng(7)
    lines = [f"q{q} Q0 d{d} {i} {s:.3f} run" for q in range(40) for i, (d, s) in
             enumerate(zip(rng.choice(5000, 300, replace=False), rng.integers(0, 50, 300) / 8))]
    fast = read_run("\n".join(lines).encode() + b"\n")
    slow = read_run("\n".join(lines).replace(" Q0 ", "  Q0 ").encode() + b"\n")  # double space: slow path
    assert fast.to_arrow().equals(slow.to_arrow())
