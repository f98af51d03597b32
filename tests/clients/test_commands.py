"""The client's commands against a real server process: download-qrels with its ETag cache."""

import pytest

from clients.verdict import main
from judgments import grading
from tests.factory import make_round

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
