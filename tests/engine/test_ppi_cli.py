"""``python -m evaluation.engine ppi``: prediction-powered estimates from qrels files, through ``main``."""

import json

import numpy as np
import pytest

from evaluation.engine import evaluate, read_qrels
from evaluation.engine.cli import main
from evaluation.engine.ppi import estimate

QUERIES = [f"q{i:02d}" for i in range(40)]
DOCS = [f"d{k}" for k in range(8)]


@pytest.fixture
def files(tmp_path):
    """Raters' qrels on 20 labelled queries, a judge's qrels on all 40 (a grade off now and then), two runs."""
    rng = np.random.default_rng(0)
    grades = {q: {d: int(rng.choice([0, 1, 2], p=[0.6, 0.25, 0.15])) for d in DOCS} for q in QUERIES}
    labelled = QUERIES[::2]
    human = "".join(f"{q} 0 {d} {g}\n" for q in labelled for d, g in grades[q].items())
    judge = "".join(f"{q} 0 {d} {min(2, g + int(rng.random() < 0.2))}\n" for q in QUERIES for d, g in grades[q].items())
    paths = {"human": tmp_path / "human.qrels", "judge": tmp_path / "judge.qrels",
             "labelled": tmp_path / "labelled.txt", "good": tmp_path / "good.run", "poor": tmp_path / "poor.run"}
    paths["human"].write_text(human)
    paths["judge"].write_text(judge)
    paths["labelled"].write_text("\n".join(labelled) + "\n")
    for name, quality in (("good", 2.0), ("poor", 0.3)):
        lines = []
        for q in QUERIES:
            scores = {d: quality * g + rng.normal() for d, g in grades[q].items()}
            ranked = sorted(scores, key=scores.get, reverse=True)
            lines += [f"{q} Q0 {d} {rank} {len(DOCS) - rank} {name}\n" for rank, d in enumerate(ranked, 1)]
        paths[name].write_text("".join(lines))
    return paths


def _args(files, *extra):
    return ["ppi", "--human", str(files["human"]), "--judge", str(files["judge"]), "--labelled",
            str(files["labelled"]), str(files["good"]), str(files["poor"]), *extra]


def test_it_prints_a_table_per_measure_with_the_judges_mean_marked(files, capsys):
    assert main(_args(files, "-m", "nDCG@10", "-m", "P@10")) == 0
    out = capsys.readouterr().out
    assert "20 labelled queries (raters' labels; they must be a random sample of the set) and 20 judge-only" in out
    assert "nDCG@10: PPI estimate, human-only estimate over the same 20 labelled queries" in out
    assert "P@10: PPI estimate" in out
    assert "* judge: the automatic judge's own mean over all 40 queries, uncorrected" in out
    assert "Paired comparisons (PPI on per-query differences A - B):" in out
    row = next(line for line in out.splitlines() if line.startswith("good  ") and "[" in line)
    human = evaluate(read_qrels(str(files["human"])), str(files["good"]), ["nDCG@10"], all_queries=True)
    assert f"{human.aggregate['nDCG@10']:.4f}" in row.split()  # the human-only mean over the labelled queries


def test_json_is_the_engines_result_on_the_runs_per_query_values(files, capsys):
    assert main(_args(files, "-m", "AP", "--json")) == 0
    document = json.loads(capsys.readouterr().out)
    labelled = files["labelled"].read_text().split()
    judge, human = {}, {}
    for name in ("good", "poor"):
        on_judge = evaluate(read_qrels(str(files["judge"])), str(files[name]), ["AP"], all_queries=True)
        on_human = evaluate(read_qrels(str(files["human"])), str(files[name]), ["AP"], all_queries=True)
        judge[name] = {"AP": on_judge.per_query["AP"]}
        human[name] = {"AP": {q: on_human.per_query["AP"][q] for q in labelled}}
    assert document == json.loads(json.dumps(estimate(human, judge, labelled=labelled).to_json()))
    assert document["runs"][0]["measures"]["AP"]["human"]["mean"] == pytest.approx(
        np.mean([human["good"]["AP"][q] for q in labelled]))


def test_traffic_weights_add_a_weighted_row(files, tmp_path, capsys):
    weights = tmp_path / "weights.tsv"
    weights.write_text("".join(f"{q}\t{1 + i % 3}\n" for i, q in enumerate(QUERIES)))
    assert main(_args(files, "-m", "AP", "--weights", str(weights))) == 0
    assert sum(line.startswith("  weighted") for line in capsys.readouterr().out.splitlines()) == 2


def test_fewer_than_ten_labelled_queries_give_numbers_but_no_verdict(files, capsys):
    files["labelled"].write_text("q00\nq02\nq04\nq06\n")
    assert main(_args(files, "-m", "AP")) == 0
    out = capsys.readouterr().out
    assert "Only 4 labelled queries: the numbers are shown, but no verdict rests on fewer than 10." in out
    assert "? only 4 labelled queries: at least 10 are needed for a verdict." in out
    row = next(line for line in out.splitlines() if line.startswith("good poor"))
    assert "?" in row and "*" not in row


@pytest.mark.parametrize("content, problem", [
    ("q00\nq02\nq00\n", "labelled.txt:3: query 'q00' is listed twice (first on line 1)"),
    ("q00\nzz\n", "labelled.txt:2: query 'zz' has no judge labels"),
    ("q00 q02\n", "labelled.txt:1: expected one query id a line, found 2 fields"),
    ("\n\n", "labelled.txt: empty file"),
])
def test_a_bad_labelled_file_names_the_line_and_the_problem(files, capsys, content, problem):
    files["labelled"].write_text(content)
    assert main(_args(files)) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and problem in captured.err


def test_a_labelled_query_the_raters_did_not_label_is_an_error(files, capsys):
    files["labelled"].write_text("q00\nq01\n")
    assert main(_args(files)) == 2
    assert "labelled.txt: 1 labelled queries have no raters' labels in" in capsys.readouterr().err
