"""Large clean TREC files take a fast path (pyarrow, 64-bit doc keys); it must read what the line-by-line
path reads, rank ties the same way, and still stop on malformed lines with the line number."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from evaluation.engine import EngineInputError, evaluate, read_qrels, read_run

ROOT = Path(__file__).resolve().parents[2]

DOC_IDS = {
    "fixed width": lambda i: f"D{i:07d}",
    "up to 8 bytes": lambda i: str(i),
    "longer than 8 bytes": lambda i: f"clueweb-{i}",
    "mixed lengths": lambda i: f"d{i}" if i % 3 else f"document-{i}",
    "non-ASCII": lambda i: f"\u00e9{i}",
}


def make_run(doc_id, queries=30, depth=120, seed=5) -> tuple[str, str]:
    """A run (queries out of order, scores k/8 with many ties, ties in random order) and its qrels."""
    rng = np.random.default_rng(seed)
    run, qrels = [], []
    for q in rng.permutation(queries).tolist():
        docs = rng.choice(5000, depth, replace=False)
        scores = np.sort(rng.integers(0, 40, depth))[::-1] / 8
        run += [f"q{q} Q0 {doc_id(d)} {rank} {s} tag{q}" for rank, (d, s) in enumerate(zip(docs.tolist(), scores), 1)]
        judged = np.concatenate([docs[rng.choice(depth, 4, replace=False)], rng.choice(5000, 2) + 5000])
        qrels += [f"q{q} 0 {doc_id(d)} {g}" for d, g in zip(judged.tolist(), rng.integers(0, 3, 6).tolist())]
    return "\n".join(run) + "\n", "\n".join(qrels) + "\n"


def line_by_line(text: str) -> bytes:
    return text.replace(" Q0 ", "  Q0 ").encode()  # a double space is not clean: the line-by-line path


@pytest.mark.parametrize("shape", DOC_IDS)
def test_a_run_file_reads_like_the_line_by_line_path_whatever_the_doc_ids(tmp_path, shape):
    text, _ = make_run(DOC_IDS[shape])
    path = tmp_path / "run.txt"
    path.write_text(text, encoding="utf-8")
    fast = read_run(path)
    slow = read_run(line_by_line(text))
    assert fast.to_arrow().equals(slow.to_arrow())
    assert fast.run_id == slow.run_id == text.splitlines()[-1].split()[-1]


@pytest.mark.parametrize("shape", DOC_IDS)
def test_fast_read_files_score_like_pytrec_eval(tmp_path, shape):
    text, qrels_text = make_run(DOC_IDS[shape], seed=11)
    (tmp_path / "run").write_text(text, encoding="utf-8")
    (tmp_path / "qrels").write_text(qrels_text, encoding="utf-8")
    measures = ["AP", "nDCG@10", "RR", "P@10", "R@100"]
    ours = evaluate(read_qrels(tmp_path / "qrels"), read_run(tmp_path / "run"), measures)
    run, qrels = {}, {}
    for line in text.splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    for line in qrels_text.splitlines():
        q, _, d, g = line.split()
        qrels.setdefault(q, {})[d] = int(g)
    trec_measures = {"map", "ndcg_cut.10", "recip_rank", "P.10", "recall.100"}
    expected = pytrec_eval.RelevanceEvaluator(qrels, trec_measures).evaluate(run)
    for trec, canonical in (("map", "AP"), ("ndcg_cut_10", "nDCG@10"), ("recip_rank", "RR"), ("P_10", "P@10"),
                            ("recall_100", "R@100")):
        for qid, values in expected.items():
            assert ours.per_query[canonical][qid] == pytest.approx(values[trec], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("variant", ["bom and crlf", "tabs", "no final newline"])
def test_files_with_a_bom_crlf_tabs_or_no_final_newline_read_the_same(tmp_path, variant):
    text, _ = make_run(DOC_IDS["fixed width"], queries=5, depth=40)
    data = text.encode()
    if variant == "bom and crlf":
        data = b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")
    elif variant == "tabs":
        data = data.replace(b" ", b"\t")
    else:
        data = data.rstrip(b"\n")
    path = tmp_path / "run.txt"
    path.write_bytes(data)
    assert read_run(path).to_arrow().equals(read_run(text.encode()).to_arrow())
    assert read_run(path).run_id == read_run(text.encode()).run_id


def test_an_empty_field_in_a_column_the_engine_does_not_read_is_an_error(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 a 1 2.0 r\nq1 Q0 b  1.0 r\n")
    with pytest.raises(EngineInputError) as info:
        read_run(path)
    assert (info.value.line, info.value.problem) == (2, "expected 6 columns, found 5")


def test_a_lone_carriage_return_is_whitespace_inside_a_line_as_in_trec_eval():
    run = read_run(b"q1 Q0 a 1 2.0 r\rq1 Q0 b 2 3.0 r\nq1 Q0 c 3 1.0 s\n")
    assert run.to_dict() == {"q1": {"a": 2.0, "c": 1.0}}


@pytest.mark.parametrize("shape", ["fixed width", "longer than 8 bytes"])
def test_a_duplicate_in_a_large_file_names_both_lines(tmp_path, shape):
    text, _ = make_run(DOC_IDS[shape], queries=10, depth=100)
    lines = text.splitlines()
    q, _, doc, *_ = lines[420].split()
    lines.insert(450, f"{q} Q0 {doc} 1 0.5 tag")
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(EngineInputError) as info:
        read_run(path)
    assert info.value.line == 451
    assert info.value.problem.endswith("(first on line 421)")
    kept = read_run(path, on_duplicate="first")
    assert kept.to_dict() == read_run(text.encode()).to_dict()


def test_the_command_line_does_not_import_pandas(tmp_path):
    text, qrels = make_run(DOC_IDS["fixed width"], queries=3, depth=20)
    (tmp_path / "run").write_text(text)
    (tmp_path / "qrels").write_text(qrels)
    script = ("import runpy, sys\n"
              f"sys.argv = ['engine', '-m', 'P.5', {str(tmp_path / 'qrels')!r}, {str(tmp_path / 'run')!r}]\n"
              "try:\n    runpy.run_module('evaluation.engine', run_name='__main__')\n"
              "except SystemExit as end:\n    print('exit', end.code, 'pandas' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.stdout.startswith("P_5") and result.stdout.endswith("exit 0 False\n"), result.stderr


# Files larger than the first 4 KB look are mapped into memory and read in place.


def test_a_long_line_more_than_a_megabyte_into_a_mapped_file_is_named_by_its_number(tmp_path):
    path = tmp_path / "run.txt"
    line = b"q1 Q0 D0000001 1 2.5 tag\n"
    clean = b"".join(line.replace(b"D0000001", b"D%07d" % i) for i in range(60_000))
    path.write_bytes(clean + b"q2 Q0 d 1 1.0 " + b"t" * 2000 + b"\n" + line)
    assert len(clean) > 1 << 20
    with pytest.raises(EngineInputError) as info:
        read_run(path, max_line_bytes=1024)
    assert (info.value.path, info.value.line, info.value.problem) == (str(path), 60_001, "line longer than 1,024 bytes")


def test_old_mac_line_ends_in_a_mapped_file_are_named_as_such(tmp_path):
    path = tmp_path / "mac.qrels"
    path.write_bytes(b"q1 0 d1 1\r" * 2000)
    with pytest.raises(EngineInputError) as info:
        read_qrels(path, max_line_bytes=1024)
    assert (info.value.line, info.value.problem) == (
        1, "lines end in CR only (old Mac style); save the file with LF or CRLF line ends")


@pytest.mark.parametrize("bad,problem", [
    (b"q9 Q0 d9 1 abc tag", "score is not a number: 'abc'"),
    (b"q9 Q0 d9 1", "expected 6 columns, found 4"),
])
def test_a_bad_line_deep_in_a_mapped_file_is_named_by_file_and_line(tmp_path, bad, problem):
    text, _ = make_run(DOC_IDS["fixed width"], queries=10, depth=300)
    lines = text.encode().splitlines()
    lines.insert(2500, bad)
    path = tmp_path / "run.txt"
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")
    with pytest.raises(EngineInputError) as info:
        read_run(path)
    assert str(info.value) == f"{path}:2501: {problem}"

