"""Answer inputs (#16): references, predictions, UltraRAG lists and weights, read and refused with
`file:line: problem`; and the `answers` / `answers-compare` command lines."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.engine.answers import Answer, read_predictions, read_references, read_ultrarag, read_weights
from evaluation.engine.data import MAX_LINE_BYTES
from evaluation.engine.errors import EngineInputError

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluation.engine", *args], cwd=ROOT, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


# --------------------------------------------------------------------------------------------- reading

def test_references_jsonl_and_tsv_give_the_same_answers(tmp_path):
    jsonl = write(tmp_path, "r.jsonl", '{"query_id": "q1", "answers": ["Paris", "City of Paris"]}\n\n'
                                       '{"query_id": 2, "answers": "Berlin"}\n{"query_id": "q1", "answers": ["Lutetia"]}\n')
    tsv = write(tmp_path, "r.tsv", "query_id\tanswer\nq1\tParis\nq1\tCity of Paris\n2\tBerlin\r\nq1\tLutetia\n")
    expected = {"q1": ["Paris", "City of Paris", "Lutetia"], "2": ["Berlin"]}
    assert read_references(jsonl) == expected
    assert read_references(tsv) == expected


def test_predictions_jsonl_tsv_and_a_binary_file_object():
    data = b'\xef\xbb\xbf{"query_id": "q1", "answer": "Paris", "cites": ["d1", 7], "extra": 1}\n{"query_id": "q2", "answer": ""}\n'
    assert read_predictions(io.BytesIO(data), name="upload.jsonl") == {
        "q1": Answer("Paris", ("d1", "7")), "q2": Answer("")}
    assert read_predictions(io.BytesIO(b"q1\tan answer\twith a tab\nq2\t\n")) == {
        "q1": Answer("an answer\twith a tab"), "q2": Answer("")}


def test_ultrarag_lists(tmp_path):
    path = write(tmp_path, "u.json", json.dumps({"pred_ls": ["a", "b", "c"], "gt_ls": [["a", "x"], "b", []],
                                                 "q_ls": ["?", "?", "?"]}, indent=2))
    references, predictions = read_ultrarag(path)
    assert references == {"0": ["a", "x"], "1": ["b"], "2": []}
    assert predictions == {"0": Answer("a"), "1": Answer("b"), "2": Answer("c")}


def test_weights(tmp_path):
    assert read_weights(write(tmp_path, "w.tsv", "query_id\tweight\nq1\t2.5\nq2\t0\n")) == {"q1": 2.5, "q2": 0.0}


# ------------------------------------------------------------------------------------------ refusals

@pytest.mark.parametrize("reader, text, problem", [
    (read_predictions, '{"query_id": "q1", "answer": "a"}\n{"query_id": "q2", "answer": "b"\n', "2: invalid JSON"),
    (read_predictions, '{"query_id": "q1", "answer": "a"}\n{"query_id": "q2"}\n', '2: missing field "answer"'),
    (read_predictions, '{"query_id": "q1", "answer": "a"}\n\n{"query_id": "q1", "answer": "b"}\n',
     "3: query 'q1' is answered twice (first on line 1)"),
    (read_predictions, '{"query_id": "q1", "answer": 42}\n', '1: "answer" must be a string, not int'),
    (read_predictions, '{"query_id": true, "answer": "x"}\n', '1: "query_id" must be a string or an integer'),
    (read_predictions, '{"query_id": "q1", "answer": "x", "cites": "d1"}\n', '1: "cites" must be a list'),
    (read_predictions, '["q1", "x"]\n', "1: expected a JSON object, found list"),
    (read_predictions, "q1\tfine\nq2 no tab here\n", "2: expected query_id<TAB>answer, found no tab"),
    (read_predictions, '{"query_id": "q1", "answer": ' + "[" * 5000 + "\n", "1: JSON nested too deeply"),
    (read_references, '{"query_id": "q1", "answers": []}\n', '1: "answers" is empty'),
    (read_references, '{"query_id": "q1", "answers": ["a", 3]}\n', "1: every answer in \"answers\" must be a string"),
    (read_references, '{"query_id": "q1", "answers": {"a": 1}}\n', '1: "answers" must be a list of strings'),
    (read_references, '{"query_id": "' + "x" * 600 + '", "answers": ["a"]}\n', "1: query id longer than 512 bytes"),
    (read_references, "q1\tok\nq2\t\xff\n".encode("latin-1"), "2: not valid UTF-8"),
    (read_weights, "q1\t1\nq2\tmany\n", "2: weight is not a number: 'many'"),
    (read_weights, "q1\t1\nq2\tnan\n", "2: weight must be finite and >= 0"),
    (read_weights, "q1\t1\nq1\t2\n", "2: query 'q1' has two weights"),
])
def test_bad_lines_are_named_with_file_and_line(tmp_path, reader, text, problem):
    path = write(tmp_path, "in.txt", text)
    with pytest.raises(EngineInputError) as caught:
        reader(path)
    assert str(caught.value).startswith(f"{path}:")
    assert problem in str(caught.value)


@pytest.mark.parametrize("data, problem", [
    (b"", "empty file"),
    (b"\n  \n\t\n", "empty file"),
    ('{"query_id": "q1", "answer": "x"}\n'.encode("utf-16"), "UTF-16"),
    ('{"query_id": "q1", "answer": "x"}\n'.encode("utf-16-le"), "UTF-16"),
    (b"\x1f\x8b\x08\x00", "gzip"),
])
def test_whole_file_problems(tmp_path, data, problem):
    path = write(tmp_path, "p.jsonl", data)
    with pytest.raises(EngineInputError, match=problem) as caught:
        read_predictions(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_a_huge_line_is_refused_without_reading_it_whole(tmp_path):
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as handle:
        handle.write(b'{"query_id": "q1", "answer": "fine"}\n')
        handle.write(b'{"query_id": "q2", "answer": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n')
    with pytest.raises(EngineInputError, match=f"{path}:2: line longer than 1,048,576 bytes"):
        read_predictions(path)


def test_a_file_object_is_named_by_the_name_given():
    with pytest.raises(EngineInputError, match="^answers.jsonl:1: invalid JSON"):
        read_predictions(io.BytesIO(b"{oops\n"), name="answers.jsonl")


@pytest.mark.parametrize("document, problem", [
    ({"pred_ls": ["a"]}, 'missing field "gt_ls"'),
    ({"pred_ls": ["a", "b"], "gt_ls": [["a"]]}, "pred_ls has 2 items but gt_ls has 1"),
    ({"pred_ls": ["a", 3], "gt_ls": [["a"], ["b"]]}, "pred_ls[1] must be a string, not int"),
    ({"pred_ls": ["a"], "gt_ls": [["a", None]]}, "gt_ls[0][1] must be a string, not NoneType"),
    ({"pred_ls": ["a"], "gt_ls": [7]}, "gt_ls[0] must be a list of strings, not int"),
    ({"pred_ls": "a", "gt_ls": []}, '"pred_ls" must be a list, not str'),
    ([1, 2], "expected a JSON object with pred_ls and gt_ls, found list"),
])
def test_ultrarag_refusals(tmp_path, document, problem):
    path = write(tmp_path, "u.json", json.dumps(document))
    with pytest.raises(EngineInputError) as caught:
        read_ultrarag(path)
    assert str(caught.value).startswith(f"{path}") and problem in str(caught.value)


def test_ultrarag_invalid_json_names_its_line(tmp_path):
    path = write(tmp_path, "u.json", '{\n  "pred_ls": ["a"],\n  "gt_ls": [["a"],\n}\n')
    with pytest.raises(EngineInputError, match=f"{path}:4: invalid JSON"):
        read_ultrarag(path)


def test_ultrarag_refuses_a_file_above_its_size_cap(tmp_path):
    path = write(tmp_path, "u.json", json.dumps({"pred_ls": ["a"] * 100, "gt_ls": [["a"]] * 100}))
    with pytest.raises(EngineInputError, match="larger than 100 bytes"):
        read_ultrarag(path, max_bytes=100)


# ---------------------------------------------------------------------------------------- command line

@pytest.fixture
def files(tmp_path):
    refs = write(tmp_path, "refs.jsonl", '{"query_id": "q1", "answers": ["Paris"]}\n'
                                         '{"query_id": "q2", "answers": ["Berlin", "the German capital"]}\n'
                                         '{"query_id": "q3", "answers": ["Rome"]}\n')
    a = write(tmp_path, "a.tsv", "q1\tParis\nq2\tIt is Berlin\n")
    b = write(tmp_path, "b.jsonl", '{"query_id": "q1", "answer": "Lyon"}\n{"query_id": "q2", "answer": "Berlin"}\n'
                                   '{"query_id": "q3", "answer": "Rome, Italy"}\n')
    return refs, a, b


def test_cli_prints_trec_eval_style_lines(files):
    refs, a, _ = files
    result = cli("answers", str(refs), str(a), "-m", "em", "-m", "f1", "-q")
    assert result.returncode == 0, result.stderr
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    assert [[c.strip() for c in line] for line in lines] == [
        ["em", "q1", "1.0000"], ["em", "q2", "0.0000"], ["f1", "q1", "1.0000"], ["f1", "q2", "0.5000"],
        ["num_q", "all", "2"], ["em", "all", "0.5000"], ["f1", "all", "0.7500"]]


def test_cli_json_with_c_and_weights(files, tmp_path):
    refs, a, _ = files
    weights = write(tmp_path, "w.tsv", "q1\t3\nq2\t1\nq3\t0\n")
    result = cli("answers", str(refs), str(a), "-m", "em", "-c", "--json", "--weights", str(weights))
    document = json.loads(result.stdout)
    assert document == {"aggregate": {"em": 0.75}, "per_query": {"em": {"q1": 1.0, "q2": 0.0, "q3": 0.0}}}


def test_cli_ultrarag_output_and_input(files, tmp_path):
    refs, a, _ = files
    result = cli("answers", str(refs), str(a), "-m", "em,acc", "--ultrarag")
    assert json.loads(result.stdout) == {"em": [1.0, 0.0], "acc": [1.0, 1.0], "avg_em": 0.5, "avg_acc": 1.0}
    lists = write(tmp_path, "u.json", json.dumps({"pred_ls": ["Paris", "no"], "gt_ls": [["paris"], ["False"]]}))
    result = cli("answers", str(lists), "--ultrarag", "-m", "em")
    assert json.loads(result.stdout) == {"em": [1.0, 1.0], "avg_em": 1.0}


def test_cli_errors_exit_2_with_file_and_line(files, tmp_path):
    refs, _, _ = files
    bad = write(tmp_path, "bad.jsonl", '{"query_id": "q1", "answer": "a"}\n{"query_id": "q1", "answer": "b"}\n')
    result = cli("answers", str(refs), str(bad))
    assert result.returncode == 2 and result.stdout == ""
    assert f"{bad}:2: query 'q1' is answered twice" in result.stderr
    result = cli("answers", str(refs), str(bad), "-m", "bleu")
    assert result.returncode == 2 and "unknown answer measure 'bleu'" in result.stderr
    weights = write(tmp_path, "w.tsv", "q1\t1\n")
    good = write(tmp_path, "good.tsv", "q1\tx\nq2\ty\n")
    result = cli("answers", str(refs), str(good), "--weights", str(weights))
    assert result.returncode == 2 and "no weight for 1 scored queries" in result.stderr


def test_cli_compare_prints_the_paired_tests_and_json_has_ultrarag_fields(files):
    refs, a, b = files
    result = cli("answers-compare", str(refs), str(a), str(b), "--resamples", "200")
    assert result.returncode == 0, result.stderr
    assert "3 queries scored" in result.stdout and "p_holm" in result.stdout
    assert [line.split()[0] for line in result.stdout.splitlines()[6:14]] == [
        "acc", "em", "stringem", "coverem", "f1", "rouge-1", "rouge-2", "rouge-l"]
    document = json.loads(cli("answers-compare", str(refs), str(a), str(b), "-m", "em", "--resamples", "200",
                              "--json").stdout)
    assert document["n_queries"] == 3 and document["ultrarag"] == {"A": {"avg_em": 1 / 3}, "B": {"avg_em": 1 / 3}}
    [em] = document["comparisons"]
    assert em["measure"] == "em" and em["wins"] == 1 and em["losses"] == 1 and em["p_corrected"] == 1.0


def test_cli_help_documents_the_inputs_and_the_tokenizer():
    result = cli("answers", "--help")
    for text in ("-q", "-c", "--json", "--ultrarag", "--tokenizer", "--weights", "pred_ls", "rouge-l", "unicode"):
        assert text in result.stdout


@pytest.mark.parametrize("data, problem", [
    (b"", ": empty file"),
    ('{"query_id": "q1", "answer": "x"}\n'.encode("utf-16"), ": the file is UTF-16 text"),
    (b'{"query_id": "q1", "answer": "x"}\n{"query_id": "q2", "answer": ["x"]}\n', ':2: "answer" must be a string'),
    (b'{"query_id": "q1"}\n', ':1: missing field "answer"'),
    (b'{"query_id": "q1", "answer": "x"}\n{"query_id": "q2", "answer": "x"\n', ":2: invalid JSON"),
    (b'{"query_id": "q1", "answer": "' + b"x" * (MAX_LINE_BYTES + 1) + b'"}\n', ":1: line longer than 1,048,576 bytes"),
])
def test_cli_names_file_and_line_of_bad_predictions(files, tmp_path, data, problem):
    refs, _, _ = files
    bad = write(tmp_path, "bad.jsonl", data)
    result = cli("answers", str(refs), str(bad))
    assert result.returncode == 2 and result.stdout == ""
    assert f"error: {bad}{problem}" in result.stderr


def test_the_package_exposes_the_answer_api_lazily():
    import evaluation.engine as engine

    assert engine.score_answers is __import__("evaluation.engine.answers", fromlist=["x"]).score_answers
    assert "score_answers" in dir(engine) and engine.ANSWER_MEASURES[0] == "acc"
