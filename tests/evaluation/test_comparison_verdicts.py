""""Significant" on comparisons has three states: yes, no (the test could have found a difference and did not),
or not enough evidence (so few queries differ that no p can go below alpha after Holm's correction). The
smallest p a sign-flip test can give is checked against an exact enumeration of the 2^k sign vectors; what
the tests covered and p-values below 0.0001 read as such, on the page, the downloads and the API."""

import csv
import html
import io
import itertools
import json
import re

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from evaluation.engine.significance import evidence, smallest_p
from judgments.lib.scales import BINARY
from judgments.ops import grading, rounds
from judgments.ops.grading import Verdict
from judgments.ops.imports import import_corpus, import_queries, import_run
from judgments.ops.pools import add_runs_to_pool, create_pool
from tests.api.conftest import token_for
from tests.evaluation.test_evaluations import evaluated, setup  # noqa: F401 (4 queries, runs A and B)
from tests.factory import trec_run

pytestmark = pytest.mark.django_db


def exact_smallest_p(k: int) -> float:
    """The oracle: the exact two-sided sign-flip p of k differences all of one sign (distinct sizes, so no
    other vector ties by accident), counted over every one of the 2^k sign vectors; no data give less."""
    d = np.arange(1, k + 1, dtype=float)
    observed = abs(d.sum())
    sums = [abs(sum(s * x for s, x in zip(signs, d))) for signs in itertools.product((1, -1), repeat=k)]
    return sum(1 for s in sums if s >= observed - 1e-12) / 2 ** k


def needed(tests: int, alpha: float = 0.05) -> int:
    return next(k for k in itertools.count(1) if tests * exact_smallest_p(k) < alpha)


def test_the_smallest_p_equals_the_exact_enumeration():
    for k in range(1, 12):
        assert smallest_p(k, 10**9) == pytest.approx(exact_smallest_p(k), abs=1e-15), k
    assert smallest_p(0, 10_000) == 1.0 and smallest_p(30, 10_000) == 1 / 10_001
    assert (needed(1), needed(4)) == (6, 8)  # 2/64 < 0.05 <= 2/32; 4 * 2/256 < 0.05 <= 4 * 2/128


def words(page: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", page).split())


def cell(page: str, run: str, measure: str) -> list[str]:
    """The cells of one row of the comparison table of `run`, tags stripped."""
    table = page[page.index(f"<h2>{run} vs "):]
    row = re.search(r'<tr><th scope="row"><a [^>]*>' + re.escape(measure) + r"</a></th>(.*?)</tr>", table, re.S).group(1)
    return [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_four_queries_give_not_enough_evidence_not_no(people, setup):  # noqa: F811
    round, run_a, run_b, _folder = setup
    measures = ("nDCG@5", "AP", "P@1", "RR")
    evaluation = evaluated(people, round, [run_a, run_b], measures=measures)
    client = people.client("viewer")
    page = html.unescape(client.get(reverse("evaluation:comparison", args=[round.project.slug, evaluation.uuid])).content.decode())
    for c in evaluation.results["comparisons"]["B"]:
        assert c["p_corrected"] >= 0.05  # nothing proven, and nothing could be: 4 queries, 4 tests
        assert cell(page, "B", c["measure"])[-1] == "not enough evidence", c["measure"]
    differing = {c["measure"]: c["wins"] + c["losses"] for c in evaluation.results["comparisons"]["B"]}
    k = differing["nDCG@5"]
    holm_floor = max(exact_smallest_p(k), min(1.0, 4 * min(exact_smallest_p(n) for n in differing.values())))
    reason = (f"over 4 queries, {k} of which differ: the smallest p this test can give is {exact_smallest_p(k):.4f} "
              f"({holm_floor:.4f} after Holm's correction across 4 tests), not below alpha 0.05: "
              f"at least {needed(4)} differing queries needed")
    assert reason in words(page)
    assert "The tests pair the two runs query by query over 4 queries, every query either run scored." in words(page)
    assert ">no<" not in page
    rows = list(csv.DictReader(io.StringIO(client.get(reverse("evaluation:download", args=[
        round.project.slug, evaluation.uuid, "comparison", "csv"])).content.decode())))
    assert {row["verdict"] for row in rows} == {"not enough evidence"} and rows[0]["missing_a"] == "0"
    body = json.loads(client.get(reverse("evaluation:download", args=[round.project.slug, evaluation.uuid, "comparison", "json"])).content)
    [ndcg] = [c for c in body["comparisons"]["B"] if c["measure"] == "nDCG@5"]
    assert ndcg["verdict"]["state"] == "insufficient" and ndcg["verdict"]["label"] == "not enough evidence"
    assert ndcg["verdict"]["reasons"] == [reason]


# 40 queries, each with a relevant document r and a non-relevant n. A ranks r first on q00-q19 and n first on
# q20-q39; B ranks n first everywhere (P@1: 20 losses, 20 ties); C swaps A's order on q00-q09 (worse) and on
# q20-q29 (better): 10 wins, 10 losses, 20 ties.
def order(run: str, i: int) -> list[str]:
    first_r = {"A": i < 20, "B": False, "C": (i < 20) != (i < 10 or 20 <= i < 30)}[run]
    return ["r", "n"] if first_r else ["n", "r"]


@pytest.fixture
def forty(people):
    project = people.project
    ids = [f"q{i:02d}" for i in range(40)]
    import_corpus(project, io.BytesIO("".join(json.dumps({"doc_id": f"{q}-{d}", "title": d}) + "\n" for q in ids for d in "rn").encode()),
                  "docs.jsonl")
    collection, _ = import_queries(project, ("query_id,query\n" + "".join(f"{q},query {q}\n" for q in ids)).encode(), "q.csv", name="Forty")
    runs = [import_run(project, trec_run({q: [f"{q}-{d}" for d in order(name, i)] for i, q in enumerate(ids)}, name.lower()),
                       f"{name}.run", name=name, system=name)[0] for name in "ABC"]
    pool = create_pool(project, name="Pool", query_set=collection, depth=2, strategy="best_rank")
    add_runs_to_pool(pool, runs[:1])
    from judgments.ops.actions import save_guidelines

    guidelines = save_guidelines(project, "# Rules", author=people.lead)[0]
    round = rounds.create_round(project, name="Forty", pool=pool, guidelines=guidelines, scale=BINARY, raters=[people.rater],
                                user=people.lead, seed=1, overlap_share=0)
    rounds.open_round(round)
    round.refresh_from_db()
    for item in round.items.select_related("document"):
        grading.record(item, people.rater, Verdict(grade=int(item.document.doc_id.endswith("-r"))))
    return round, runs


def test_forty_queries_give_yes_and_no_and_tiny_p_reads_below_0_0001(people, forty):
    round, runs = forty
    evaluation = evaluated(people, round, runs, measures=("P@1",))
    page = html.unescape(people.client("viewer").get(reverse("evaluation:comparison", args=[round.project.slug, evaluation.uuid])).content.decode())
    b = cell(page, "B", "P@1")
    # B - A: 20 differences of -1: the t-test p is 0 (no spread), the permutation p 1 / 10,001 (no resample beats it).
    assert b[-1] == "yes" and b[-4] == "< 0.0001" and b[-5] == "0.0001" and b[-3] == "0.0002" and b[-2] == "0 / 20 / 20"
    c = cell(page, "C", "P@1")
    assert c[-1] == "no" and c[-2] == "10 / 20 / 10"
    assert "0.0000" not in b[-5:-2] + c[-5:-2] and "not enough evidence" not in page.split("</hgroup>")[1]
    assert "over 40 queries, every query either run scored." in words(page)


def test_the_api_and_the_command_give_the_verdicts(people, forty, capsys):
    round, runs = forty
    evaluation = evaluated(people, round, runs, measures=("P@1",))
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token_for(people.lead, people.project)}"
    rows = client.get(f"/api/v1/projects/{people.project.slug}/evaluations/{evaluation.uuid}/comparison").json()["rows"]
    assert [(r["candidate"], r["verdict"]["state"]) for r in rows] == [("B", "pass"), ("C", "fail")]
    assert rows[1]["verdict"]["reasons"] == ["p 1.0000 after Holm's correction across 2 tests is not below alpha 0.05 "
                                             "(over 40 queries, 20 of which differ), and the test could have gone below it"]
    call_command("compare", str(round.uuid), "--runs", "A", "B", "C", "--measures", "P@1")
    out = capsys.readouterr().out
    assert re.search(r"^P@1 .* significant$", out, re.M) and re.search(r"^P@1 .* not significant$", out, re.M)


def test_few_resamples_are_not_enough_evidence_either():
    rows = [{"wins": 40, "losses": 0, "n_queries": 40, "p_value": 0.0099, "p_corrected": 0.0594}] * 6
    [first, *_] = evidence(rows, resamples=100)
    assert first.state == "insufficient"
    assert first.missing == ("100 resamples: no p can go below 0.0099 (0.0594 after Holm's correction across 6 tests): "
                             "at least 120 resamples needed",)
