"""The client's commands against a real server process: download-qrels with its ETag cache."""

import json

import pytest

from clients.verdict import main
from judgments.ops import grading
from tests.factory import make_round, trec_run

from .conftest import write_token


@pytest.fixture
def graded(server, people):
    round = make_round(people.project, people.lead, [people.rater], {"q1": ["d1", "d2"], "q2": ["d3"]}, name="Launch")
    items = list(round.items.select_related("document").order_by("document__doc_id"))
    for item, grade in zip(items, (2, 0, 1)):
        grading.record(item, people.rater, grading.Verdict(grade=grade))
    return {"args": ["--url", server.url, "--token", write_token(people.lead, people.project), "--project", people.project.slug],
            "round": round, "items": items, "rater": people.rater}


def test_download_qrels_writes_the_list_and_downloads_again_only_when_it_changed(graded, tmp_path, capsys):
    output = tmp_path / "launch.qrels"
    download = ["download-qrels", *graded["args"], "--round", "Launch", "--output", str(output), "--if-none-match"]

    assert main(download) == 0
    assert output.read_text() == "q1 0 d1 2\nq1 0 d2 0\nq2 0 d3 1\n"
    etag = (tmp_path / "launch.qrels.etag").read_text().strip()
    assert etag.startswith('"')
    output.write_text("my copy")
    assert main(download) == 0
    assert output.read_text() == "my copy"
    assert "not modified" in capsys.readouterr().out

    grading.record(graded["items"][2], graded["rater"], grading.Verdict(grade=3))
    assert main(download) == 0

    assert output.read_text() == "q1 0 d1 2\nq1 0 d2 0\nq2 0 d3 3\n"
    assert (tmp_path / "launch.qrels.etag").read_text().strip() != etag


def test_upload_evaluate_and_compare_from_the_command_line(graded, tmp_path, capsys):
    run_file = tmp_path / "reversed.trec"
    run_file.write_bytes(trec_run({"q1": ["d2", "d1"], "q2": ["d3"]}, "rev"))

    assert main(["upload-run", *graded["args"], str(run_file), "--format", "trec"]) == 0
    uploaded = json.loads(capsys.readouterr().out)
    assert (uploaded["name"], uploaded["n_queries"], uploaded["n_lines"]) == ("reversed", 2, 3)
    assert main(["evaluate", *graded["args"], "--round", "Launch", "--run", "Launch pool run", "--run", uploaded["uuid"],
                 "--measure", "nDCG@2", "--measure", "RR"]) == 0
    evaluation = json.loads(capsys.readouterr().out)
    assert evaluation["state"] == "done" and evaluation["measures"] == ["nDCG@2", "RR"]
    reversed_row = next(row for row in evaluation["results"]["runs"] if row["run"] == "reversed")
    assert reversed_row["mean"]["RR"] == pytest.approx((1 / 2 + 1) / 2)
    assert main(["compare", *graded["args"], "--evaluation", evaluation["uuid"], "--baseline", "reversed"]) == 0
    compared = json.loads(capsys.readouterr().out)

    assert compared["baseline"] == "reversed"
    rr = next(row for row in compared["rows"] if row["measure"] == "RR")
    assert (rr["candidate"], rr["diff"], rr["wins"], rr["ties"]) == ("Launch pool run", pytest.approx(0.25), 1, 1)


def test_a_bad_run_file_is_refused_with_its_line(graded, tmp_path, capsys):
    run_file = tmp_path / "broken.trec"
    run_file.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2\n")

    assert main(["upload-run", *graded["args"], str(run_file)]) == 2

    assert "400 bad_file: broken.trec:2" in capsys.readouterr().err
