"""verdict-eval -R prefs / qrels_prefs / qrels_jg against trec_eval 10.0's own outputs, byte for byte.

The quicktest commands compare with trec_eval's stored test outputs; the cases in trec_eval/prefs_cases were
produced by the trec_eval 10.0 binary on small seeded inputs (see its README); the rest checks refusals.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.engine import read_run
from evaluation.engine.rel_formats.evaluate import evaluate_rel_format
from evaluation.engine.trec_eval import trec_eval_main

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
CASES_DIR = DATA / "prefs_cases"
ROOT = Path(__file__).resolve().parents[2]

QUICKTEST = {
    "prefs": ("-m all_prefs -q -R prefs prefs.test prefs.results.test", "out.test.prefs"),
    "prefs with comments": ("-m all_prefs -q -R prefs prefs.comment.test prefs.results.test", "out.test.prefs"),
    "qrels_prefs": ("-m all_prefs -q -R qrels_prefs qrels.test results.test", "out.test.qrels_prefs"),
    "qrels_jg": ("-m qrels_jg -q -R qrels_jg qrels.123 results.test", "out.test.qrels_jg"),
    "qrels_jg with comments": ("-m qrels_jg -q -R qrels_jg qrels.comments.123 results.test", "out.test.qrels_jg"),
}
STORED_CASES = dict(line.split("\t") for line in (CASES_DIR / "cases.txt").read_text().splitlines())


def verdict_eval(args: list[str], folder: Path, capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.chdir(folder)
    status = trec_eval_main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("case", QUICKTEST)
def test_trec_evals_quicktest_commands_print_its_stored_output(case, capsys, monkeypatch):
    command, expected = QUICKTEST[case]
    status, out, err = verdict_eval(command.split(), DATA, capsys, monkeypatch)
    assert status == 0, err
    assert out == (DATA / expected).read_text()


@pytest.mark.parametrize("case", STORED_CASES)
def test_options_on_the_other_formats_print_what_trec_eval_printed(case, capsys, monkeypatch):
    status, out, err = verdict_eval(STORED_CASES[case].split(), CASES_DIR, capsys, monkeypatch)
    assert status == 0, err
    assert out == (CASES_DIR / f"{case}.out").read_text()


def test_the_stored_cases_cover_every_option_the_brief_names():
    flags = {flag for command in STORED_CASES.values() for flag in command.split() if flag.startswith("-")}
    assert {"-q", "-c", "-M", "-J", "-l", "-n"} <= flags
    assert {c.split(" -R ")[1].split()[0] for c in STORED_CASES.values()} == {"prefs", "qrels_prefs", "qrels_jg"}


def test_the_python_api_takes_a_run_already_read():
    text = evaluate_rel_format("qrels_prefs", str(DATA / "qrels.test"), read_run(DATA / "results.test"),
                               ["prefs_simp", "prefs_num_prefs_poss"])
    assert text == "prefs_num_prefs_poss  \tall\t669704\nprefs_simp            \tall\t0.5684\n"


def test_the_command_reads_the_run_from_stdin():
    command = "from evaluation.engine.cli import trec_eval_main; raise SystemExit(trec_eval_main())"
    done = subprocess.run([sys.executable, "-c", command, "-m", "qrels_jg", "-q", "-R", "qrels_jg", "qrels.123", "-"],
                          cwd=DATA, input=(DATA / "results.test").read_text(), capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (DATA / "out.test.qrels_jg").read_text()


def write(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text)
    return name


RUN = "q1 Q0 a 1 3 r\nq1 Q0 b 2 2 r\nq1 Q0 c 3 1 r\n"


@pytest.mark.parametrize(("rel_format", "text", "problem"), [
    ("prefs", "q1 g s a 1\nq1 g s b\n", "p:2: expected 5 fields, found 4 fields"),
    ("prefs", "q1 g s a 1\n\n", "p:2: expected 5 fields, found an empty line"),
    ("prefs", "# note\nq1 g s a high\n", "p:2: relevance level must be a number, found 'high'"),
    ("prefs", "q1 g s a -1\n", "p:1: relevance level must be a finite number >= 0, found '-1'"),
    ("qrels_prefs", "q1 0 a 1 extra\n", "p:1: expected 4 fields, found 5 fields"),
    ("qrels_jg", "q1 0 a 1\nq1 0 a 2\n", "p:2: document 'a' is graded twice for query 'q1' in judgment group '0'"),
    ("qrels_jg", "q1 0 a 1.5\n", "p:1: relevance must be a whole number, found '1.5'"),
])
def test_a_malformed_judgment_file_is_refused_with_its_line(rel_format, text, problem, tmp_path, capsys,
                                                             monkeypatch):
    write(tmp_path, "p", text)
    write(tmp_path, "r", RUN)
    status, out, err = verdict_eval(["-R", rel_format, "-m", "all_prefs" if "prefs" in rel_format else "qrels_jg",
                                     "p", "r"], tmp_path, capsys, monkeypatch)
    assert status == 2 and out == ""
    assert problem in err


@pytest.mark.parametrize(("text", "problem"), [
    ("q1 g s1 a 2\nq1 g s1 b 1\nq1 g s2 b 2\nq1 g s2 a 1\n",
     "inconsistent preferences: documents 'a' and 'b' are each preferred to the other"),
    ("q1 g s1 a 2\nq1 g s1 b 0\nq1 g s2 b 1\nq1 g s2 c 0\n",
     "document 'b' is both non-relevant (level 0) and relevant (level 1)"),
    ("q1 g s a 2\nq1 g s a 1\n", "document 'a' has two levels (2 and 1) in one subgroup"),
])
def test_a_judgment_group_that_contradicts_itself_is_refused(text, problem, tmp_path, capsys, monkeypatch):
    """trec_eval aborts (or stops) on these too; different judgment groups may disagree, one may not."""
    write(tmp_path, "p", text)
    write(tmp_path, "r", RUN)
    status, _, err = verdict_eval(["-R", "prefs", "-m", "all_prefs", "p", "r"], tmp_path, capsys, monkeypatch)
    assert status == 2
    assert f"p: query 'q1', judgment group 'g': {problem}" in err


def test_two_judgment_groups_may_disagree(tmp_path, capsys, monkeypatch):
    write(tmp_path, "p", "q1 g1 s a 2\nq1 g1 s b 1\nq1 g2 s b 2\nq1 g2 s a 1\n")
    write(tmp_path, "r", RUN)
    status, out, err = verdict_eval(["-R", "prefs", "-m", "prefs_pair", "-m", "prefs_simp", "p", "r"], tmp_path,
                                    capsys, monkeypatch)
    assert status == 0, err
    assert out == "prefs_simp            \tall\t0.5000\nprefs_pair            \tall\t0.5000\n"


@pytest.mark.parametrize(("args", "problem"), [
    (["-R", "prefs", "-m", "map_avgjg"], "measure 'map_avgjg' needs -R qrels_jg, not -R prefs"),
    (["-R", "qrels_jg", "-m", "prefs"], "measure 'prefs_num_prefs_poss' needs -R prefs, not -R qrels_jg"),
    (["-R", "qrels_jg", "-m", "map"], "measure 'map' cannot be computed from a -R qrels_jg file"),
    (["-R", "qrels_jg", "-m", "P_avgjg.5,0"], "P_avgjg cutoffs must be positive and distinct"),
])
def test_a_measure_the_format_cannot_give_is_refused(args, problem, tmp_path, capsys, monkeypatch):
    write(tmp_path, "p", "q1 0 a 1\n")
    write(tmp_path, "r", RUN)
    status, out, err = verdict_eval([*args, "p", "r"], tmp_path, capsys, monkeypatch)
    assert status == 2 and out == ""
    assert problem in err


def test_a_judged_query_missing_from_the_run_stops_as_trec_eval_does_unless_c(tmp_path, capsys, monkeypatch):
    """trec_eval 10.0 prints the queries before the missing one, then stops with exit status 4."""
    write(tmp_path, "p", "q1 0 a 1\nq2 0 a 1\n")
    write(tmp_path, "r", RUN)
    status, out, err = verdict_eval(["-q", "-R", "qrels_jg", "-m", "map_avgjg", "p", "r"], tmp_path, capsys,
                                    monkeypatch)
    assert (status, out, err) == (4, "map_avgjg             \tq1\t1.0000\n",
                                  "trec_eval: result qid 'q2' not found in qrels\n")
    status, out, err = verdict_eval(["-c", "-R", "qrels_jg", "-m", "map_avgjg", "p", "r"], tmp_path, capsys,
                                    monkeypatch)
    assert status == 0 and out == "map_avgjg             \tall\t0.5000\n"


def test_a_hostile_line_is_refused_before_it_is_held(tmp_path, capsys, monkeypatch):
    (tmp_path / "p").write_bytes(b"q1 g s a 1\n" + b"x" * (2 << 20) + b"\n")
    write(tmp_path, "r", RUN)
    status, _, err = verdict_eval(["-R", "prefs", "-m", "prefs", "p", "r"], tmp_path, capsys, monkeypatch)
    assert status == 2 and "p:2: line longer than 1,048,576 bytes" in err


def test_a_query_with_too_many_preference_pairs_is_refused_before_they_are_made(tmp_path, capsys, monkeypatch):
    lines = [f"q1 0 d{i} {i % 2}\n" for i in range(10_002)]  # 5,001 x 5,001 pairs in one judgment group
    write(tmp_path, "p", "".join(lines))
    write(tmp_path, "r", RUN)
    status, _, err = verdict_eval(["-R", "qrels_prefs", "-m", "prefs", "p", "r"], tmp_path, capsys, monkeypatch)
    assert status == 2 and "p: query 'q1': more than 25,000,000 preference pairs" in err
