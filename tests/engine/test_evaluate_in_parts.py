"""evaluate_run_file (what the command line uses) reads a big run a part at a time: the same result as reading it
whole, and where parts cannot stand for the file it reads the file whole, errors naming the file's own line."""

import json
from pathlib import Path

import numpy as np
import pytest

from evaluation.engine import EngineInputError, evaluate, read_qrels, read_run
from evaluation.engine import scoring
from evaluation.engine.scoring import evaluate_run_file

PART = 4096  # bytes: the run below (about 110 KB) comes in some thirty parts


def _write_files(folder: Path, *, shuffled: bool = False) -> tuple[Path, Path]:
    """300 run queries x 12 documents (ties, unjudged and negative-graded documents); the qrels grade 0-3, lack
    some run queries and have queries of their own (for -c)."""
    rng = np.random.default_rng(31)
    run_lines, qrels_lines = [], []
    for q in range(300):
        qid = f"q{q:03d}"
        docs = rng.choice(60, 12, replace=False)
        scores = np.round(rng.random(12) * 4, 1)  # few distinct values: ties, broken by doc id
        run_lines += [[f"{qid} Q0 d{d:02d} {r} {s} tag{q}\n" for r, (d, s) in enumerate(zip(docs, scores), 1)]]
        if q % 7:
            judged = rng.choice(60, 15, replace=False)
            grades = rng.choice([-1, 0, 0, 1, 2, 3], 15)
            qrels_lines += [f"{qid} 0 d{d:02d} {g}\n" for d, g in zip(judged, grades)]
    qrels_lines += [f"only{q} 0 d01 {q % 3}\n" for q in range(5)]
    if shuffled:  # query q050's lines come back at the end of the file
        run_lines.append(run_lines.pop(50)[6:])
        run_lines[50] = run_lines[50][:6]
    run, qrels = folder / "run.txt", folder / "qrels.txt"
    run.write_text("".join(line for lines in run_lines for line in lines))
    qrels.write_text("".join(qrels_lines))
    return qrels, run


def _assert_same(parts, whole) -> None:
    assert parts.query_ids == whole.query_ids
    assert parts.run_id == whole.run_id
    assert parts.measures == whole.measures
    for measure in whole.measures:
        np.testing.assert_array_equal(parts.values[measure], whole.values[measure])
    np.testing.assert_array_equal(list(parts.aggregate.values()), list(whole.aggregate.values()))


@pytest.mark.parametrize("options", [
    {}, {"all_queries": True}, {"judged_only": True}, {"max_docs": 5}, {"relevance_level": 2},
    {"all_queries": True, "judged_only": True, "max_docs": 3, "relevance_level": 2},
], ids=["default", "c", "J", "M5", "l2", "cJM3l2"])
def test_parts_give_the_whole_files_result(tmp_path, monkeypatch, options):
    qrels_path, run_path = _write_files(tmp_path)
    qrels = read_qrels(qrels_path)
    whole = evaluate(qrels, read_run(run_path), "all_trec", **options)
    reads = []
    monkeypatch.setattr(scoring, "read_run", lambda source, **kw: reads.append(len(source)) or read_run(source, **kw))
    parts = evaluate_run_file(qrels, run_path, "all_trec", part_bytes=PART, **options)
    assert len(reads) > 20 and max(reads) < 2 * PART  # it did read parts
    _assert_same(parts, whole)
    assert whole.run_id == "tag299"  # the last line's tag
    assert len(parts.query_ids) == (262 if options.get("all_queries") else 257)


def test_a_query_split_across_parts_reads_the_file_whole(tmp_path):
    qrels_path, run_path = _write_files(tmp_path, shuffled=True)
    qrels = read_qrels(qrels_path)
    whole = evaluate(qrels, read_run(run_path), ["AP", "nDCG@10", "P@5"])
    _assert_same(evaluate_run_file(qrels, run_path, ["AP", "nDCG@10", "P@5"], part_bytes=PART), whole)
    assert whole.run_id == "tag50"


def test_a_bad_line_in_a_later_part_is_named_by_its_line_in_the_file(tmp_path):
    qrels_path, run_path = _write_files(tmp_path)
    lines = run_path.read_text().splitlines(keepends=True)
    lines[3000] = "q250 Q0 d99 1\n"
    run_path.write_text("".join(lines))
    with pytest.raises(EngineInputError) as error:
        evaluate_run_file(read_qrels(qrels_path), run_path, "AP", part_bytes=PART)
    assert (error.value.path, error.value.line) == (str(run_path), 3001)
    assert "expected 6 columns, found 4" in str(error.value)


def test_a_duplicate_in_a_later_part_names_both_lines_of_the_file(tmp_path):
    qrels_path, run_path = _write_files(tmp_path)
    lines = run_path.read_text().splitlines(keepends=True)
    lines[2401] = lines[2400].replace(" 1 ", " 2 ", 1)  # q200's first document again
    run_path.write_text("".join(lines))
    with pytest.raises(EngineInputError) as error:
        evaluate_run_file(read_qrels(qrels_path), run_path, "AP", part_bytes=PART)
    assert error.value.line == 2402
    assert "first on line 2401" in str(error.value)


def test_json_runs_are_read_whole(tmp_path):
    qrels_path, run_path = _write_files(tmp_path)
    qrels = read_qrels(qrels_path)
    json_path = tmp_path / "run.json"
    json_path.write_text(json.dumps(read_run(run_path).to_dict()) + " " * 3 * PART)
    _assert_same(evaluate_run_file(qrels, json_path, "AP", part_bytes=PART), evaluate(qrels, read_run(json_path), "AP"))
