"""Estimates with a judge in the app: a round planned with a random sample of queries for raters, raters' grades on the
sample, a token-overlap judge on every pair; the job's estimates equal the engine's on the same per-query arrays (and
ppi-python's on one of them), the page shows them beside the raters-only ones with the judge's numbers marked, the
downloads carry them, and the refusals and access: outsiders 404, raters 403, viewers read but do not start."""

import csv
import io
import json

import numpy as np
import pytest
from django.urls import reverse
from django.utils.html import escape
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from evaluation.engine import evaluate, read_qrels, read_run
from evaluation.engine.ppi import estimate, ppi_mean
from evaluation.models import JudgeEstimate
from judgments.lib.scales import BINARY
from judgments.models import DisplayField, HumanSample, Job
from judgments.ops import automatic, grading, planning, rounds
from judgments.ops.actions import save_guidelines
from judgments.ops.automatic import PairChoice, add_judge
from judgments.ops.imports import import_corpus, import_queries, import_run
from judgments.ops.pools import add_runs_to_pool, create_pool
from tests.factory import run_queued_jobs, trec_run

pytestmark = pytest.mark.django_db

QUERIES = [f"q{i:02d}" for i in range(1, 61)]
SAMPLE_SIZE, SAMPLE_SEED = 30, 11  # 29 fully labelled: enough for verdicts (the engine's MIN_LABELLED)
# Each run's order of a query's documents q..a, q..b, q..c, by query number: good mostly puts the a-document first.
RUNS = {"good": lambda i: "bac" if i % 4 == 0 else "abc", "mid": lambda i: "bac" if i % 2 else "cba",
        "poor": lambda i: "acb" if i % 5 == 0 else "cba"}
MEASURES = ["nDCG@3", "AP", "P@1"]


def ranked(run: str) -> bytes:
    return trec_run({q: [f"{q}{s}" for s in RUNS[run](int(q[1:]))] for q in QUERIES}, run)


def truth(query_id: str, doc_id: str) -> int:
    """The raters' grade: the a-document is relevant, and in every third query the b-document too (the judge misses it)."""
    return int(doc_id.endswith("a") or (doc_id.endswith("b") and int(query_id[1:]) % 3 == 0))


def judged(query_id: str, doc_id: str) -> int:
    """The token-overlap judge's grade: only the document that repeats the query's reference answer."""
    return int(doc_id.endswith("a"))


def make_planned_round(project, lead, raters, *, name: str = "Planned", by_tier: bool = False, open: bool = True, plan: bool = True):
    """A binary round over 60 queries (three documents each, three runs) planned with a seeded random sample of 30
    queries for raters (without `plan`, a draft the lead plans): once it opens, the sampled queries' pairs need a rater,
    the others none (the judge labels them)."""
    for order, field in enumerate(("title", "body")):
        DisplayField.objects.get_or_create(project=project, field=field, defaults={"label": field, "order": order})
    lines = "query_id,query,tier,weight,references\n" + "".join(
        f"{q},query {q},{'head' if int(q[1:]) <= 10 else 'tail'},{int(q[1:])},Title of {q}a Text of {q}a\n" for q in QUERIES)
    collection, _ = import_queries(project, lines.encode(), "queries.csv", name=f"{name} queries")
    corpus = "".join(json.dumps({"doc_id": f"{q}{s}", "title": f"Title of {q}{s}", "body": f"Text of {q}{s}"}) + "\n"
                     for q in QUERIES for s in "abc")
    import_corpus(project, io.BytesIO(corpus.encode()), "corpus.jsonl")
    runs = [import_run(project, ranked(run), f"{run}.trec", name=run, system=run)[0] for run in RUNS]
    pool = create_pool(project, name=f"{name} pool", query_set=collection, depth=3, strategy="best_rank")
    add_runs_to_pool(pool, runs)
    guidelines = project.guideline_versions.first() or save_guidelines(project, "Relevant: it answers the query.", author=lead)[0]
    round = rounds.create_round(project, name=name, pool=pool, guidelines=guidelines, scale=BINARY, raters=raters, user=lead, seed=7,
                                overlap_share=0)
    if plan:
        planning.plan_round(round, size=SAMPLE_SIZE, by_tier=by_tier, seed=SAMPLE_SEED, user=lead)
    if open:
        rounds.open_round(round)
        round.refresh_from_db()
    return round, runs


def grade_sample(round, rater, *, leave_pending: int = 1) -> list[str]:
    """The rater grades every pair of the sampled queries but the last pair of the last `leave_pending` ones; returns
    the queries left fully labelled."""
    sampled = list(round.human_sample.query_ids)
    pending = set(sampled[len(sampled) - leave_pending:])
    for item in round.items.filter(query__query_id__in=sampled).select_related("query", "document").order_by("query__query_id", "document__doc_id"):
        query_id, doc_id = item.query.query_id, item.document.doc_id
        if query_id in pending and doc_id.endswith("c"):
            continue
        grading.record(item, rater, grading.Verdict(grade=truth(query_id, doc_id)))
    return [q for q in sampled if q not in pending]


def overlap_judge_on_every_pair(round):
    judge = add_judge(round, name="overlap", kind="token_overlap", settings={})
    automatic.run_judge(judge, PairChoice())
    return judge


@pytest.fixture
def planned(people):
    round, runs = make_planned_round(people.project, people.lead, [people.rater])
    labelled = grade_sample(round, people.rater)
    judge = overlap_judge_on_every_pair(round)
    return round, runs, judge, labelled


def start(people, round, judge, runs, who="lead", **extra):
    return people.client(who).post(reverse("evaluation:judge-estimate-create", args=[people.project.slug]), {
        "round": round.uuid, "judge": judge.uuid, "runs": [run.uuid for run in runs], "measures": " ".join(MEASURES),
        "alpha": "0.05", **extra})


def estimated(people, round, judge, runs) -> JudgeEstimate:
    response = start(people, round, judge, runs)
    assert response.status_code == 302, response.content.decode()[:3000]
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    return JudgeEstimate.objects.get()


def expected_values(grade, queries) -> dict:
    """Per run, measure and query: the metric engine on qrels written here from `grade` (None: no label), trec_eval's -c."""
    lines = ((q, f"{q}{s}", grade(q, f"{q}{s}")) for q in queries for s in "abc")
    qrels = read_qrels("".join(f"{q} 0 {d} {g}\n" for q, d, g in lines if g is not None).encode(), name="x.qrels")
    values = {}
    for run in RUNS:
        ranking = read_run(ranked(run), name=run)
        values[run] = evaluate(qrels, ranking, MEASURES, all_queries=True).per_query
    return values


def test_the_jobs_estimates_equal_the_engines_on_the_same_arrays(people, planned):
    round, runs, judge, labelled = planned
    assert {(g.item.query.query_id, g.item.document.doc_id, g.grade) for g in judge.grades.select_related("item__query", "item__document")} == {
        (q, f"{q}{s}", judged(q, f"{q}{s}")) for q in QUERIES for s in "abc"}
    found = estimated(people, round, judge, runs)
    assert found.state == JudgeEstimate.State.DONE and found.measures == MEASURES
    weights = {q: float(int(q[1:])) for q in QUERIES}
    tiers = {q: "head" if int(q[1:]) <= 10 else "tail" for q in QUERIES}
    engine = estimate(expected_values(truth, labelled), expected_values(judged, QUERIES), labelled=sorted(labelled), weights=weights,
                      tiers=tiers).to_json()
    assert {key: found.results[key] for key in ("alpha", "labelled", "unlabelled", "min_labelled")} == {
        key: engine[key] for key in ("alpha", "labelled", "unlabelled", "min_labelled")}
    assert found.results["runs"] == json.loads(json.dumps(engine["runs"]))
    assert found.results["comparisons"] == json.loads(json.dumps(engine["comparisons"]))
    assert found.results["labelled"] == SAMPLE_SIZE - 1 and found.results["unlabelled"] == len(QUERIES) - (SAMPLE_SIZE - 1)
    inputs = found.results["inputs"]
    assert inputs["sample"]["seed"] == SAMPLE_SEED and inputs["sample"]["query_ids"] == round.human_sample.query_ids
    assert inputs["still_grading"] == [round.human_sample.query_ids[-1]] and inputs["judge"]["could_not_judge"] == 0
    assert len(found.human_qrels_sha256) == len(found.judge_qrels_sha256) == 64
    assert [link.sha256 for link in found.run_links.all()] == [run.sha256 for run in runs]


def test_the_ppi_estimate_is_ppi_pythons_on_the_same_arrays(people, planned):
    """The independent oracle: ppi-python's point estimate on each run's and measure's per-query values, and its
    interval when the engine's is the normal one (but where the judge's values are constant: ppi-python's tuning
    divides by their variance, 0, and gives nan); the interval is the engine's `ppi_mean` on the same arrays."""
    round, runs, judge, labelled = planned
    found = estimated(people, round, judge, runs)
    human, machine = expected_values(truth, labelled), expected_values(judged, QUERIES)
    rest = [q for q in QUERIES if q not in labelled]
    checked = 0
    for row in found.results["runs"]:
        for measure, values in row["measures"].items():
            y, yhat, yhat_u = (np.array([side[row["run"]][measure][q] for q in ids])
                               for side, ids in ((human, labelled), (machine, labelled), (machine, rest)))
            if np.ptp(np.concatenate([yhat, yhat_u])) == 0:
                continue
            checked += 1
            assert values["ppi"]["mean"] == pytest.approx(np.ravel(ppi_mean_pointestimate(y, yhat, yhat_u))[0], abs=1e-12)
            engine = ppi_mean(y, yhat, yhat_u, alpha=0.05)
            assert (values["ppi"]["low"], values["ppi"]["high"]) == pytest.approx((engine.low, engine.high), abs=1e-12)
            if values["ppi"].get("df") is None:  # the normal interval is ppi-python's
                low, high = ppi_mean_ci(y, yhat, yhat_u, alpha=0.05)
                assert (values["ppi"]["low"], values["ppi"]["high"]) == pytest.approx((np.ravel(low)[0], np.ravel(high)[0]), abs=1e-12)
    assert checked == len(RUNS) * len(MEASURES) - 1  # mid never ranks the a-document first: its P@1 is 0 for the judge


def test_the_page_shows_estimates_beside_raters_only_with_the_judges_numbers_marked(people, planned):
    round, runs, judge, labelled = planned
    found = estimated(people, round, judge, runs)
    page = people.client("viewer").get(found.get_absolute_url()).content.decode()
    assert "The labelled queries are a random sample of the set" in page
    assert f"raters labelled\n  <strong>{len(labelled)} of the {len(QUERIES)} queries</strong>" in page and f"seed {SAMPLE_SEED}" in page
    assert "1 sampled queries are still being graded" in page and "0 could not be judged" in page
    row = next(row for row in found.results["runs"] if row["run"] == "good")["measures"]["AP"]
    for value in (row["ppi"]["mean"], row["ppi"]["low"], row["human"]["mean"], row["judge_mean"]):
        assert f"{value:.4f}" in page
    assert f"as much as <strong>{row['effective_labelled']:.1f} labelled queries</strong>; raters labelled {len(labelled)}" in page
    kind = "normal-approximation" if row["ppi"].get("df") is None else "Student&#x27;s t"
    assert f"PPI++, power-tuned; Angelopoulos et al. 2023), {kind}" in page
    assert "Judge's mean (judge)" in page and page.count('<small>judge</small>') == 3 * len(MEASURES)
    assert "good − mid" in page and "good − poor" in page and "mid − poor" in page
    listing = people.client("viewer").get(reverse("evaluation:judge-estimates", args=[people.project.slug])).content.decode()
    assert "overlap" in listing and 'role="button">Estimate with a judge' not in listing  # a viewer cannot start one
    lead_listing = people.client("lead").get(reverse("evaluation:evaluations", args=[people.project.slug])).content.decode()
    assert reverse("evaluation:judge-estimate-create", args=[people.project.slug]) in lead_listing


def test_the_comparisons_verdicts_follow_the_engines_states(people, planned):
    round, runs, judge, _labelled = planned
    found = estimated(people, round, judge, runs)
    page = people.client("lead").get(found.get_absolute_url()).content.decode()
    states = {"significant": "pass", "not significant": "fail", "insufficient": "insufficient"}
    for measure, comparisons in found.results["comparisons"].items():
        for c, verdict in zip(comparisons, found.results["verdicts"][measure]):
            assert verdict["state"] == states[c["state"]] and verdict["reasons"] == [c["reason"]]
            assert escape(c["reason"]) in page
            if c["state"] != "significant" and c["queries_needed"] is not None:
                assert f"{c['queries_needed'] - c['ppi']['n_labelled']:,} more ({c['queries_needed']:,} labelled in all)" in page
    assert {c["state"] for cs in found.results["comparisons"].values() for c in cs} >= {"significant"}


def test_the_downloads_carry_the_estimates_and_mark_the_judges_mean(people, planned):
    round, runs, judge, labelled = planned
    found = estimated(people, round, judge, runs)
    slug, viewer = people.project.slug, people.client("viewer")
    rows = list(csv.DictReader(io.StringIO(viewer.get(reverse("evaluation:judge-estimate-download", args=[slug, found.uuid, "estimates", "csv"])).content.decode())))
    good = next(row for row in found.results["runs"] if row["run"] == "good")["measures"]["AP"]
    ppi_row = next(r for r in rows if r["run"] == "good" and r["measure"] == "AP" and r["labels"].endswith("(PPI)") and r["weighted"] == "no" and not r["tier"])
    assert float(ppi_row["mean"]) == pytest.approx(good["ppi"]["mean"], abs=1e-12) and ppi_row["labelled_queries"] == str(len(labelled))
    judge_row = next(r for r in rows if r["run"] == "good" and r["measure"] == "AP" and r["labels"].startswith("judge only"))
    assert float(judge_row["mean"]) == pytest.approx(good["judge_mean"], abs=1e-12)
    assert not any(cell.startswith(("=", "+", "@")) for row in rows for cell in row.values() if cell)
    compared = list(csv.DictReader(io.StringIO(viewer.get(reverse("evaluation:judge-estimate-download", args=[slug, found.uuid, "comparisons", "csv"])).content.decode())))
    assert len(compared) == 2 * 3 * len(MEASURES) and {r["verdict"] for r in compared if r["labels"].endswith("(PPI)")} <= {
        "significant", "not significant", "not enough evidence"}
    document = viewer.get(reverse("evaluation:judge-estimate-download", args=[slug, found.uuid, "estimate", "json"])).json()
    assert document["runs"] == found.results["runs"] and document["human_qrels_sha256"] == found.human_qrels_sha256
    assert document["inputs"]["sample"]["seed"] == SAMPLE_SEED
    assert viewer.get(reverse("evaluation:judge-estimate-download", args=[slug, found.uuid, "x", "csv"])).status_code == 404


def test_a_sample_drawn_within_tiers_weighs_each_tier_by_its_share(people):
    round, runs = make_planned_round(people.project, people.lead, [people.rater], by_tier=True)
    labelled = grade_sample(round, people.rater, leave_pending=0)
    judge = overlap_judge_on_every_pair(round)
    found = estimated(people, round, judge, runs)
    tiers = {q: "head" if int(q[1:]) <= 10 else "tail" for q in QUERIES}
    engine = estimate(expected_values(truth, labelled), expected_values(judged, QUERIES), labelled=sorted(labelled),
                      weights={q: float(int(q[1:])) for q in QUERIES}, tiers=tiers, tier_shares=round.human_sample.tier_shares).to_json()
    assert found.results["runs"] == json.loads(json.dumps(engine["runs"]))
    assert "within tiers, each tier weighted by its share of the set" in people.client("lead").get(found.get_absolute_url()).content.decode()


def test_the_htmx_request_gets_only_the_partial(people, planned):
    round, runs, judge, _labelled = planned
    found = estimated(people, round, judge, runs[:1])
    response = people.client("lead").get(found.get_absolute_url(), headers={"HX-Request": "true", "HX-Target": "estimate-body"})
    assert response.content.decode().lstrip().startswith('<div id="estimate-body"') and "<nav" not in response.content.decode()


def test_it_refuses_a_round_without_a_random_sample_with_a_link_to_plan_one(people, planned):
    round, runs, judge, _labelled = planned
    HumanSample.objects.filter(round=round).delete()
    page = start(people, round, judge, runs).content.decode()
    assert "The labelled queries must be a random sample drawn by Verdict" in page
    assert f'href="{reverse("judgments:round-create", args=[people.project.slug])}"' in page and "it has opened, so plan a new round" in page
    draft, _ = make_planned_round(people.project, people.lead, [people.rater], name="Draft", open=False)
    planning.remove_plan(draft)
    page = start(people, draft, judge, runs).content.decode()
    assert f'href="{reverse("judgments:round-plan", args=[people.project.slug, draft.uuid])}"' in page
    assert not JudgeEstimate.objects.exists()


def test_it_refuses_a_judge_of_another_round_one_that_has_not_graded_every_pair_and_no_run(people, planned):
    round, runs, judge, _labelled = planned
    other, _ = make_planned_round(people.project, people.lead, [people.rater], name="Other")
    stranger = add_judge(other, name="stranger", kind="token_overlap", settings={})
    assert "Judge &#x27;stranger&#x27; belongs to another round" in start(people, round, stranger, runs).content.decode()
    lazy = add_judge(round, name="lazy", kind="token_overlap", settings={})
    automatic.run_judge(lazy, PairChoice("sample", 10, seed=1))
    page = start(people, round, lazy, runs).content.decode()
    assert f"Judge &#x27;lazy&#x27; has not graded {3 * len(QUERIES) - 10} of the round&#x27;s {3 * len(QUERIES)} pairs" in page and "Run it on all pairs" in page
    assert "This field is required" in start(people, round, judge, []).content.decode()
    assert not JudgeEstimate.objects.exists()


def test_it_refuses_runs_of_another_project(people, planned):
    from judgments.models import Project
    from tests.factory import add_member

    round, runs, judge, _labelled = planned
    other = Project.objects.get(name="Otto's other project")
    add_member(other, people.lead, "lead")
    foreign, _ = import_run(other, trec_run({"q01": ["q01a"]}), "f.trec", name="foreign", system="x")
    page = start(people, round, judge, [foreign]).content.decode()
    assert "Select a valid choice" in page and not JudgeEstimate.objects.exists()
    from evaluation.evaluations import EvaluationRefused
    from evaluation.judge_estimates import create_judge_estimate

    with pytest.raises(EvaluationRefused, match="These runs belong to another project: foreign"):
        create_judge_estimate(round, judge, [foreign], queue=False)


def test_access_outsiders_404_raters_403_viewers_read_only(people, planned):
    round, runs, judge, _labelled = planned
    slug = people.project.slug
    assert start(people, round, judge, runs, who="outsider").status_code == 404
    assert start(people, round, judge, runs, who="rater").status_code == 403
    assert start(people, round, judge, runs, who="viewer").status_code == 403
    assert not JudgeEstimate.objects.exists()
    found = estimated(people, round, judge, runs)
    download = reverse("evaluation:judge-estimate-download", args=[slug, found.uuid, "estimate", "json"])
    create = reverse("evaluation:judge-estimate-create", args=[slug])
    for url in (found.get_absolute_url(), download, reverse("evaluation:judge-estimates", args=[slug]), create):
        assert people.client("outsider").get(url).status_code == 404
        assert people.client("rater").get(url).status_code == 403
    for url in (found.get_absolute_url(), download, reverse("evaluation:judge-estimates", args=[slug])):
        assert people.client("viewer").get(url).status_code == 200
    assert people.client("viewer").get(create).status_code == 403
    assert people.client("lead").put(create).status_code == 405
    assert people.client("lead").post(found.get_absolute_url()).status_code == 405


def test_could_not_judge_pairs_are_unjudged_and_counted_and_unrateable_pairs_left_out_as_exports_do(people, planned):
    round, runs, judge, labelled = planned
    pending = round.human_sample.query_ids[-1]
    flagged = round.items.get(query__query_id=pending, document__doc_id=f"{pending}c")
    grading.record(flagged, people.rater, grading.Verdict(unrateable="broken"))  # the last sampled query is now fully labelled
    unlabelled = [q for q in QUERIES if q not in round.human_sample.query_ids]
    lost = judge.grades.filter(item__query__query_id__in=unlabelled[:3], item__document__doc_id__endswith="b")
    assert lost.update(outcome="could_not_judge", grade=None, problem="endpoint_failed") == 3
    found = estimated(people, round, judge, runs)
    inputs = found.results["inputs"]
    assert inputs["still_grading"] == [] and found.results["labelled"] == SAMPLE_SIZE
    assert inputs["human_labels"] == 3 * SAMPLE_SIZE - 1  # the unrateable pair has no label
    assert inputs["judge"]["could_not_judge"] == 3 and inputs["judge_labels"] == 3 * len(QUERIES) - 3
    assert "3 could not be judged" in people.client("lead").get(found.get_absolute_url()).content.decode()

    def judged_but_lost(query_id: str, doc_id: str) -> int | None:
        return None if (query_id in unlabelled[:3] and doc_id.endswith("b")) else judged(query_id, doc_id)

    def human(query_id: str, doc_id: str) -> int | None:
        return None if doc_id == f"{pending}c" else truth(query_id, doc_id)

    sample = sorted(round.human_sample.query_ids)
    engine = estimate(expected_values(human, sample), expected_values(judged_but_lost, QUERIES), labelled=sample,
                      weights={q: float(int(q[1:])) for q in QUERIES}, tiers={q: "head" if int(q[1:]) <= 10 else "tail" for q in QUERIES})
    assert found.results["runs"] == json.loads(json.dumps(engine.to_json()["runs"]))


def test_the_command_twin_stores_the_same_numbers_as_the_job(people, planned, tmp_path):
    from django.core.management import CommandError, call_command

    round, runs, judge, _labelled = planned
    out = io.StringIO()
    call_command("estimate_with_judge", str(round.uuid), "--judge", judge.name, "--runs", "good", "mid", "poor", "--measures", *MEASURES,
                 "--json", str(tmp_path / "out.json"), stdout=out)
    by_command = JudgeEstimate.objects.get()
    text = out.getvalue()
    assert f"Raters labelled {SAMPLE_SIZE - 1} of the {len(QUERIES)} queries" in text and "judge mean" in text and "good - mid" in text
    assert start(people, round, judge, runs).status_code == 302
    run_queued_jobs()
    by_job = JudgeEstimate.objects.exclude(pk=by_command.pk).get()
    assert by_job.results["runs"] == by_command.results["runs"] and by_job.results["comparisons"] == by_command.results["comparisons"]
    assert json.loads((tmp_path / "out.json").read_text())["runs"] == by_command.results["runs"]
    with pytest.raises(CommandError, match="no run named 'nope'"):
        call_command("estimate_with_judge", str(round.uuid), "--judge", judge.name, "--runs", "nope")


def test_while_the_job_waits_the_page_polls_its_progress_and_a_failed_job_says_why(people):
    round, runs = make_planned_round(people.project, people.lead, [people.rater])
    judge = overlap_judge_on_every_pair(round)  # no rater has graded yet
    assert start(people, round, judge, runs).status_code == 302
    found = JudgeEstimate.objects.get()
    page = people.client("lead").get(found.get_absolute_url()).content.decode()
    assert f'hx-get="{found.get_absolute_url()}"' in page and "Waiting for a worker to pick this job up" in page
    [job] = run_queued_jobs()
    found.refresh_from_db()
    assert job.state == Job.State.FAILED and found.state == JudgeEstimate.State.FAILED
    message = f"None of the {SAMPLE_SIZE} sampled queries has raters' labels on every pair and a judge's label yet ({SAMPLE_SIZE} are still being graded)"
    assert message in job.error
    page = people.client("lead").get(found.get_absolute_url()).content.decode()
    assert escape(message) in page and "hx-get" not in page
