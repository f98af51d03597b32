"""Evaluating stored runs in the app: numbers equal the engine's on the exported qrels, weights and tiers
with known answers, unjudged shares, reproducibility, comparisons, queueing unjudged pairs, refusals."""

import io
import json
import re
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.urls import reverse

from evaluation import evaluations
from evaluation.engine import evaluate, read_qrels, read_run
from evaluation.models import Evaluation
from judgments.lib.scales import GRADED
from judgments.models import Job, Round
from judgments.ops import grading, judgment_files, rounds
from judgments.ops.grading import Verdict
from judgments.ops.imports import import_corpus, import_queries, import_run
from judgments.ops.pools import add_runs_to_pool, create_pool
from tests.factory import run_queued_jobs, trec_run

pytestmark = pytest.mark.django_db

# Four queries: two head (weights 30 and 10), two tail (weights 2 and 1), in two segments.
QUERIES = ("query_id,query,tier,weight,segment\n"
           "h1,tent,head,30,en\nh2,boots,head,10,de\nt1,red tent,tail,2,en\nt2,blue boots,tail,1,de\n")
DOCS = {q: [f"{q}-d{i}" for i in range(1, 6)] for q in ("h1", "h2", "t1", "t2")}
GRADES = {"h1": [3, 0, 2, 0, 1], "h2": [0, 3, 0, 0, 0], "t1": [1, 1, 0, 0, 0], "t2": [0, 0, 0, 0, 2]}
# System A ranks each query's documents in pool order; B reverses them and adds a document nobody judged.
RUN_A = {q: docs for q, docs in DOCS.items()}
RUN_B = {q: [f"{q}-new"] + list(reversed(docs)) for q, docs in DOCS.items()}


@pytest.fixture
def setup(people, tmp_path):
    """A round whose 20 pairs (the pool of run A, depth 5) the rater has graded, runs A and B stored."""
    project = people.project
    docs = "".join(json.dumps({"doc_id": d, "title": d}) + "\n" for q in DOCS for d in DOCS[q] + [f"{q}-new"])
    import_corpus(project, io.BytesIO(docs.encode()), "docs.jsonl")
    collection, _ = import_queries(project, QUERIES.encode(), "queries.csv", name="Sample")
    run_a, _ = import_run(project, trec_run(RUN_A, "a"), "a.run", name="A", system="bm25")
    run_b, _ = import_run(project, trec_run(RUN_B, "b"), "b.run", name="B", system="hybrid")
    pool = create_pool(project, name="Pool", query_set=collection, depth=5, strategy="best_rank")
    add_runs_to_pool(pool, [run_a])
    from judgments.ops.actions import save_guidelines

    guidelines = save_guidelines(project, "# Rules", author=people.lead)[0]
    round = rounds.create_round(project, name="Round", pool=pool, guidelines=guidelines, scale=GRADED, raters=[people.rater],
                                user=people.lead, seed=1, overlap_share=0)
    rounds.open_round(round)
    round.refresh_from_db()
    for item in round.items.select_related("query", "document"):
        index = DOCS[item.query.query_id].index(item.document.doc_id)
        grading.record(item, people.rater, Verdict(grade=GRADES[item.query.query_id][index]))
    (tmp_path / "a.run").write_bytes(trec_run(RUN_A, "a"))
    (tmp_path / "b.run").write_bytes(trec_run(RUN_B, "b"))
    return round, run_a, run_b, tmp_path


def evaluated(people, round, runs, measures=("nDCG@5", "AP", "P@1", "RR"), **options) -> Evaluation:
    client = people.client("lead")
    form = {"round": round.uuid, "runs": [run.uuid for run in runs], "measures": " ".join(measures), "relevance_level": "1", **options}
    response = client.post(reverse("evaluation:evaluation-create", args=[round.project.slug]), form)
    assert response.status_code == 302, response.content.decode()[:3000]
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    return Evaluation.objects.latest("created_at")


def test_the_numbers_equal_the_engine_cli_on_the_exported_qrels(people, setup):
    round, run_a, run_b, folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    (folder / "round.qrels").write_text("".join(judgment_files.export(round, "qrels")))
    for run, name in ((run_a, "a.run"), (run_b, "b.run")):
        output = subprocess.run([sys.executable, "-m", "evaluation.engine", str(folder / "round.qrels"), str(folder / name),
                                 "-m", "ndcg_cut.5", "-m", "map", "-m", "P.1", "-m", "recip_rank"],
                                capture_output=True, text=True, check=True).stdout
        cli = {line.split()[0]: float(line.split()[2]) for line in output.splitlines() if line.split()[1] == "all" and line.split()[0] != "runid"}
        means = next(row for row in evaluation.results["runs"] if row["run"] == run.name)["mean"]
        assert means["nDCG@5"] == pytest.approx(cli["ndcg_cut_5"], abs=5e-5)
        assert means["AP"] == pytest.approx(cli["map"], abs=5e-5)
        assert means["P@1"] == pytest.approx(cli["P_1"], abs=5e-5)
        assert means["RR"] == pytest.approx(cli["recip_rank"], abs=5e-5)


def test_weighted_means_and_tiers_have_the_known_answers(people, setup):
    round, run_a, _run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a], measures=("P@1",))
    [row] = evaluation.results["runs"]
    # P@1 of A: h1 3 -> 1, h2 0 -> 0, t1 1 -> 1, t2 0 -> 0.
    assert row["mean"]["P@1"] == pytest.approx(0.5)
    assert row["weighted"]["P@1"] == pytest.approx((30 * 1 + 10 * 0 + 2 * 1 + 1 * 0) / 43)
    assert row["by_tier"]["head"]["queries"] == 2 and row["by_tier"]["head"]["mean"] == {"P@1": 0.5}
    assert row["by_segment"]["en"]["mean"]["P@1"] == pytest.approx(1.0)
    assert row["by_segment"]["de"]["mean"]["P@1"] == pytest.approx(0.0)


def test_unjudged_shares_count_the_unlabelled_share_of_the_documents_ranked(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    shares = {row["run"]: row["unjudged"] for row in evaluation.results["runs"]}
    assert list(shares["B"]) == ["1", "5", "10", "20", "50", "100", "all"]
    assert shares["A"]["5"]["share"] == 0 and shares["A"]["5"]["level"] == "ok"
    assert shares["B"]["1"]["share"] == 1.0 and shares["B"]["1"]["level"] == "stale"  # its new document leads every ranking
    assert shares["B"]["5"]["share"] == pytest.approx(0.2) and shares["B"]["5"]["level"] == "ok"
    # B ranks 6 documents per query, one unjudged: 1/6 at every depth from 6 on (trec_eval's unj: 0.1 at 10, 0.01 at 100).
    for depth in ("10", "20", "50", "100", "all"):
        assert shares["B"][depth]["share"] == pytest.approx(1 / 6) and shares["B"][depth]["queries_over_20"] == 0
    assert shares["B"]["1"]["queries_over_20"] == 4


def test_with_judged_only_the_unjudged_shares_still_describe_the_runs_ranking(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b], measures=("P@1", "UnjudgedShare@1"), judged_only="on")
    [_, b] = evaluation.results["runs"]
    assert evaluation.judged_only and b["mean"]["P@1"] == 0.5  # -J scored B without its unjudged first document
    assert b["mean"]["UnjudgedShare@1"] == 0.0 and b["unjudged"]["1"]["share"] == 1.0 and b["unjudged"]["1"]["level"] == "stale"
    frame = evaluations.per_query_frame(evaluation)
    assert frame[("B", "UnjudgedShare@1")].tolist() == [0.0] * 4 and frame[("B", "UnjudgedShare@5")].tolist() == [0.2] * 4


def test_an_evaluation_stored_with_shares_over_k_still_shows_and_says_so(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    for row in evaluation.results["runs"]:  # as an earlier version stored them: trec_eval's unj at CUTOFFS only
        del row["unjudged"]["all"]
        for group in (*row["by_tier"].values(), *row["by_segment"].values()):
            del group["unjudged"]
    evaluation.save()
    viewer = people.client("viewer")
    page = viewer.get(evaluation.get_absolute_url()).content.decode()
    assert "computed by an earlier version over k" in page and "@100</th>" in page and "whole ranking</th>" not in page
    leaderboard = viewer.get(reverse("evaluation:leaderboard", args=[round.project.slug]), {"round": str(round.uuid), "measure": "AP"})
    assert leaderboard.status_code == 200 and ">–</td>" in leaderboard.content.decode()


def score_cells(page: str, measure: str) -> list[str]:
    """A measure's plain means in the scores table, one cell per run (each followed by its traffic-weighted mean)."""
    row = re.search(rf'<th scope="row"><a href="[^"]*">{re.escape(measure)}</a></th>(.*?)</tr>', page, re.S)
    return re.findall(r"<td [^>]*>.*?</td>", row.group(1), re.S)[::2]


def test_every_score_shows_the_warning_of_the_unjudged_share_at_its_own_depth(people, setup):
    round, run_a, run_b, _folder = setup
    # Measures at 1 (B stale), 5 (B at 20%: fine) and over the whole ranking (AP, RR: B at 1/6: fine).
    evaluation = evaluated(people, round, [run_a, run_b], measures=("P@1", "nDCG@5", "AP", "RR"))
    page = people.client("viewer").get(evaluation.get_absolute_url()).content.decode()
    a_p1, b_p1 = score_cells(page, "P@1")
    assert "unjudged-stale" in b_p1 and "unjudged 1.00, stale" in b_p1 and "unjudged-ok" in a_p1 and "unjudged" not in a_p1.split(">", 1)[1]
    for measure in ("nDCG@5", "AP", "RR"):
        assert all("unjudged-ok" in cell and "unjudged-flag" not in cell for cell in score_cells(page, measure)), measure
    assert "<strong>B</strong>: the list is stale at @1: more than 30% of the documents ranked there have no label" in page
    assert "whole ranking" in page and "unjudged @5" not in page
    per_query = people.client("viewer").get(evaluation.get_absolute_url(), {"measure": "P@1"}).content.decode()
    assert "unjudged @1</th>" in per_query and per_query.count(  # B on each query, its tint said in words too
        '<td class="num unjudged-stale">1.00<small class="unjudged-flag">stale (over 0.30)</small></td>') == 4
    comparison = people.client("viewer").get(reverse("evaluation:comparison", args=[round.project.slug, evaluation.uuid])).content.decode()
    assert comparison.count("unjudged 1.00, stale") == 1  # B's P@1; A, the baseline, is judged
    leaderboard = people.client("viewer").get(reverse("evaluation:leaderboard", args=[round.project.slug]),
                                              {"round": str(round.uuid), "measure": "P@1"}).content.decode()
    assert "Unjudged share @1" in leaderboard and "unjudged 1.00, stale" in leaderboard


def test_a_short_run_warns_at_every_depth_past_its_end_not_only_at_10(people, setup):
    round, run_a, _run_b, _folder = setup
    # C ranks 2 judged and 3 unjudged documents per query: 60% unjudged at 5 and at every deeper cutoff.
    short = {q: [docs[0], f"{q}-x1", f"{q}-x2", f"{q}-x3", docs[1]] for q, docs in DOCS.items()}
    run_c, _ = import_run(round.project, trec_run(short, "c"), "c.run", name="C", system="short")
    evaluation = evaluated(people, round, [run_a, run_c], measures=("nDCG@10", "nDCG@50", "nDCG@100", "nDCG@1000", "AP"))
    [_, c] = evaluation.results["runs"]
    deep = ("10", "50", "100", "1000", "all")
    assert {depth: c["unjudged"][depth]["level"] for depth in deep} == dict.fromkeys(deep, "stale")
    page = people.client("viewer").get(evaluation.get_absolute_url()).content.decode()
    for measure in ("nDCG@10", "nDCG@50", "nDCG@100", "nDCG@1000", "AP"):
        assert "unjudged 0.60, stale" in score_cells(page, measure)[1], measure
    assert "<strong>C</strong>: the list is stale at @5, @10, @20, @50, @100, @1000 and over the whole ranking:" in page
    headers = re.findall(r'<th scope="col" class="num">(@\d+|whole ranking)</th>', page)
    assert headers == ["@1", "@5", "@10", "@20", "@50", "@100", "@1000", "whole ranking"]  # whatever order the database keeps


def test_err_takes_the_top_grade_of_the_rounds_scale_even_when_nobody_used_it(people, setup):
    round, run_a, _run_b, folder = setup
    for item in round.items.filter(judgments__grade=3):  # now nobody used the top grade of the 0-3 scale
        grading.record(item, people.rater, Verdict(grade=2))
    evaluation = evaluated(people, round, [run_a], measures=("ERR@5",))
    assert evaluation.measures == ["ERR(max=3)@5"]
    qrels = read_qrels("".join(judgment_files.export(round, "qrels")).encode())
    engine = evaluate(qrels, read_run(folder / "a.run"), ["ERR(max=3)@5", "ERR@5"]).aggregate
    [row] = evaluation.results["runs"]
    assert row["mean"]["ERR(max=3)@5"] == pytest.approx(engine["ERR(max=3)@5"])
    assert engine["ERR(max=3)@5"] < engine["ERR@5"]  # the top grade in the labels (2) would overstate every stop


def test_the_same_inputs_give_the_same_numbers(people, setup):
    round, run_a, run_b, _folder = setup
    first, second = evaluated(people, round, [run_a, run_b]), evaluated(people, round, [run_a, run_b])
    assert first.results == second.results and first.labels_sha256 == second.labels_sha256
    assert first.results["comparisons"]["B"][0]["p_value"] == second.results["comparisons"]["B"][0]["p_value"]
    link = first.run_links.get(run=run_b)
    assert link.sha256 == run_b.sha256 and first.guidelines_number == 1 and first.consensus_rule == "majority"


def test_comparisons_give_ultrarag_fields_and_the_pages_show_them(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    client = people.client("viewer")
    body = json.loads(client.get(reverse("evaluation:download", args=[round.project.slug, evaluation.uuid, "comparison", "json"])).content)
    [ndcg] = [c for c in body["comparisons"]["B"] if c["measure"] == "nDCG@5"]
    assert {"A_mean", "B_mean", "diff", "p_value", "significant"} <= set(ndcg)
    assert ndcg["diff"] == pytest.approx(ndcg["A_mean"] - ndcg["B_mean"])
    table = client.get(reverse("evaluation:download", args=[round.project.slug, evaluation.uuid, "comparison", "csv"])).content.decode()
    assert table.startswith("run,baseline,measure,A_mean") and "\nB,A,nDCG@5," in table
    breakdown = client.get(reverse("evaluation:download", args=[round.project.slug, evaluation.uuid, "breakdown", "csv"])).content.decode()
    assert "\nA,tier,head,2,nDCG@5," in breakdown
    assert "\nB,all,,4,UnjudgedShare@1,1.0,4,human,,0.0\n" in breakdown  # every top 1 of B is unjudged, on all 4 queries
    page = client.get(reverse("evaluation:comparison", args=[round.project.slug, evaluation.uuid])).content.decode()
    assert "B vs A" in page and "<svg" in page
    trec = client.get(reverse("evaluation:download", args=[round.project.slug, evaluation.uuid, "trec-A", "txt"])).content.decode()
    assert "ndcg_cut_5            \th1\t" in trec and trec.splitlines()[-5] == "runid                 \tall\tA"


def test_a_query_links_to_its_ranked_list_and_unjudged_pairs_go_to_raters(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    client = people.client("lead")
    page = client.get(reverse("evaluation:ranked-list", args=[round.project.slug, evaluation.uuid, "h1"]), {"run": str(run_b.uuid)}).content.decode()
    assert "h1-new" in page and "<strong>unjudged</strong>" in page and "1 unjudged" in page
    response = client.post(reverse("evaluation:queue-unjudged", args=[round.project.slug, evaluation.uuid]),
                           {"run": run_b.uuid, "k": "3", "into": round.uuid})
    assert response.status_code == 302
    assert round.pool.pairs.filter(doc_id__endswith="-new").count() == 4
    assert round.items.filter(document__doc_id__endswith="-new").count() == 4  # open round: the raters get them
    again = client.post(reverse("evaluation:queue-unjudged", args=[round.project.slug, evaluation.uuid]),
                        {"run": run_b.uuid, "k": "3", "into": round.uuid}, follow=True)
    assert "0 unjudged pairs" in again.content.decode() and round.pool.pairs.count() == 24  # nothing twice
    client.post(reverse("evaluation:queue-unjudged", args=[round.project.slug, evaluation.uuid]), {"run": run_b.uuid, "k": "3", "into": ""})
    fresh = Round.objects.get(name="Unjudged top 3 of B")  # still unjudged (queued, not graded): a new draft round gets them too
    assert fresh.status == Round.Status.DRAFT and fresh.pool.pairs.count() == 4 and fresh.raters.get() == people.rater


def test_queueing_no_unjudged_pairs_into_a_new_round_says_so_and_makes_nothing(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    pools = round.project.pools.count()
    response = people.client("lead").post(reverse("evaluation:queue-unjudged", args=[round.project.slug, evaluation.uuid]),
                                          {"run": run_a.uuid, "k": "5", "into": ""}, follow=True)
    assert "Nothing queued: The top 5 of A has no unjudged pairs" in response.content.decode()
    assert round.project.pools.count() == pools and not Round.objects.filter(name__startswith="Unjudged").exists()


def test_the_leaderboard_ranks_runs_best_first_with_their_unjudged_share(people, setup):
    round, run_a, run_b, _folder = setup
    evaluated(people, round, [run_b, run_a])
    page = people.client("viewer").get(reverse("evaluation:leaderboard", args=[round.project.slug]),
                                       {"round": str(round.uuid), "measure": "P@1"}).content.decode()
    assert page.index("<td>A</td>") < page.index("<td>B</td>")


def test_the_leaderboard_opens_on_the_newest_evaluated_round_with_a_measure_selector(people, setup):
    round, run_a, run_b, _folder = setup
    evaluated(people, round, [run_b, run_a], measures=("AP", "P@1"))
    newer = rounds.create_round(round.project, name="Newer", pool=round.pool, guidelines=round.guidelines, scale=GRADED,
                                raters=[people.rater], overlap_share=0)
    rounds.open_round(newer)
    url = reverse("evaluation:leaderboard", args=[round.project.slug])
    page = people.client("viewer").get(url).content.decode()
    assert f'<option value="{round.uuid}" selected>Round</option>' in page
    assert f'<option value="{newer.uuid}" >Newer (not evaluated yet)</option>' in page
    measures = re.search(r'<select name="measure" id="leaderboard-measure"[^>]*>(.*?)</select>', page, re.S).group(1)
    assert re.findall(r'<option value="([^"]+)"', measures) == ["AP", "P@1"]
    assert '<option value="AP" selected>' in measures  # nDCG@10 was not evaluated: the first measure that was
    assert page.index("<td>A</td>") < page.index("<td>B</td>")
    page = people.client("viewer").get(url, {"round": str(round.uuid), "measure": "nDCG@10"}).content.decode()
    assert "No evaluation of this round scored nDCG@10: ranked by AP instead." in page
    page = people.client("lead").get(url, {"round": str(newer.uuid)}).content.decode()
    assert "No run has been evaluated on this round yet" in page and f"?round={newer.uuid}" in page


COVERAGE = "Queries scored: <strong>4</strong> · with labels: <strong>4</strong> · in the query set “Sample”: <strong>{}</strong>"
UNDER_HALF = "Only 4 of the 9 queries in the set have labels: these scores describe those queries, not the whole set."


def unlabelled_queries(round, n: int) -> None:
    """Queries of the round's set that no run answers and nobody labelled."""
    for i in range(n):
        round.pool.query_set.queries.create(query_id=f"u{i}", text=f"unlabelled {i}")


def test_every_score_table_says_what_it_was_computed_over(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    assert evaluation.results["queries"] == {"in_set": 4, "labelled": 4}
    client, slug = people.client("viewer"), round.project.slug
    pages = [evaluation.get_absolute_url(), reverse("evaluation:comparison", args=[slug, evaluation.uuid]),
             reverse("evaluation:leaderboard", args=[slug])]
    for url in pages:
        page = client.get(url, {"measure": "AP"}).content.decode()
        assert COVERAGE.format(4) in page and "have labels: these scores" not in page, url
    assert "4 queries scored, of 4 with labels, of 4 in the query set" in client.get(pages[0]).content.decode()


def test_scores_over_under_half_of_the_set_are_flagged_on_every_table_and_in_the_commands(people, setup, tmp_path, capsys):
    round, run_a, run_b, _folder = setup
    unlabelled_queries(round, 5)
    evaluation = evaluated(people, round, [run_a, run_b])
    assert evaluation.results["queries"] == {"in_set": 9, "labelled": 4}
    client, slug = people.client("viewer"), round.project.slug
    for url in (evaluation.get_absolute_url(), reverse("evaluation:comparison", args=[slug, evaluation.uuid]),
                reverse("evaluation:leaderboard", args=[slug])):
        page = client.get(url, {"measure": "AP"}).content.decode()
        assert COVERAGE.format(9) in page and UNDER_HALF in page, url
    call_command("compare", "Round", "--runs", "A", "B", "--measures", "AP", "--resamples", "100", "--json", str(tmp_path / "c.json"))
    out = capsys.readouterr().out
    assert "Queries scored: 4, of 4 with labels, of 9 in the query set 'Sample'" in out and f"Warning: {UNDER_HALF}" in out
    assert json.loads((tmp_path / "c.json").read_text())["queries"] == {"in_set": 9, "labelled": 4}
    call_command("evaluate", "Round", "--runs", "A", "--measures", "AP")
    assert f"Warning: {UNDER_HALF}" in capsys.readouterr().out
    aggregate = client.get(reverse("evaluation:download", args=[slug, evaluation.uuid, "aggregate", "json"]))
    assert json.loads(aggregate.content)["queries"] == {"in_set": 9, "labelled": 4}


def test_the_commands_print_the_tables(people, setup, tmp_path, capsys):
    round, run_a, run_b, _folder = setup
    call_command("evaluate", "Round", "--runs", "A", "B", "--measures", "nDCG", "P", "--ks", "1", "5", "--json", str(tmp_path / "e.json"))
    out = capsys.readouterr().out
    assert "nDCG@1" in out and "P@5" in out and "unjudged share" in out and "by tier" in out
    assert json.loads((tmp_path / "e.json").read_text())["runs"][0]["run"] == "A"
    call_command("compare", "Round", "--runs", "A", "B", "--measures", "nDCG@5", "--resamples", "500", "--seed", "3")
    out = capsys.readouterr().out
    assert "B (A) vs A (B), 500 resamples, seed 3" in out and "p_holm" in out
    assert not Job.objects.filter(kind="evaluate_runs").exists()  # the commands ran in-process


def test_raters_see_no_evaluations_viewers_read_and_outsiders_get_404(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    slug = round.project.slug
    reads = [reverse("evaluation:evaluations", args=[slug]), reverse("evaluation:leaderboard", args=[slug]), evaluation.get_absolute_url(),
             reverse("evaluation:comparison", args=[slug, evaluation.uuid]), reverse("evaluation:ranked-list", args=[slug, evaluation.uuid, "h1"]),
             reverse("evaluation:download", args=[slug, evaluation.uuid, "aggregate", "csv"])]
    writes = [reverse("evaluation:evaluation-create", args=[slug]), reverse("evaluation:queue-unjudged", args=[slug, evaluation.uuid])]
    for address in reads:
        assert people.client("viewer").get(address).status_code == 200, address
        assert people.client("rater").get(address).status_code == 403, address
        assert people.client("outsider").get(address).status_code == 404, address
    for address in writes:
        assert people.client("viewer").post(address, {}).status_code == 403
        assert people.client("outsider").post(address, {}).status_code == 404
    assert Evaluation.objects.count() == 1


def start_evaluation(people, round, runs) -> Evaluation:
    form = {"round": round.uuid, "runs": [run.uuid for run in runs], "measures": "AP", "relevance_level": "1"}
    people.client("lead").post(reverse("evaluation:evaluation-create", args=[round.project.slug]), form)
    return Evaluation.objects.latest("created_at")


def test_a_running_evaluation_shows_each_runs_progress_and_htmx_swaps_in_the_scores(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = start_evaluation(people, round, [run_a, run_b])
    client = people.client("viewer")
    poll = {"HX-Request": "true", "HX-Target": "evaluation-body"}
    page = client.get(evaluation.get_absolute_url()).content.decode()
    assert f'hx-get="{evaluation.get_absolute_url()}" hx-trigger="every 1s"' in page
    assert "A: <span class=\"state-waiting\">waiting</span>" in page and "Reload when the job has finished" not in page
    assert f'<a href="{evaluation.get_absolute_url()}">Reload it</a>' in page and 'http-equiv="refresh"' not in page
    Job.objects.filter(kind="evaluate_runs").update(state=Job.State.RUNNING, progress_done=2, progress_total=4)
    running = client.get(evaluation.get_absolute_url(), headers=poll)
    body = running.content.decode()
    assert running.status_code == 200 and body.strip().startswith('<div id="evaluation-body"')
    assert "A: <span class=\"state-scored\">scored</span>" in body and "B: <span class=\"state-scoring\">scoring</span>" in body
    Job.objects.filter(kind="evaluate_runs").update(state=Job.State.QUEUED)
    run_queued_jobs()
    done = client.get(evaluation.get_absolute_url(), headers=poll)
    body = done.content.decode()
    assert done.status_code == 286  # htmx stops polling
    assert "<h2>Scores</h2>" in body and "hx-trigger" not in body and "<html" not in body


def test_each_run_scored_is_written_as_progress_however_quick(people, setup, monkeypatch):
    from judgments.ops import jobs

    round, run_a, run_b, _folder = setup
    start_evaluation(people, round, [run_a, run_b])
    written = []
    original = jobs.Progress.__call__

    def recording(self, done, total=None, message="", **kwargs):
        before = self._last_write
        original(self, done, total, message, **kwargs)
        if self._last_write != before:
            written.append(message)

    monkeypatch.setattr(jobs.Progress, "__call__", recording)
    run_queued_jobs()
    assert written == ["Building the qrels from the round's labels", "Scoring A (run 1 of 2)", "Scoring B (run 2 of 2)",
                       "Comparing runs", "Done"]


def test_a_refused_evaluation_shows_why_on_its_page(people, setup):
    round, run_a, _run_b, _folder = setup
    evaluation = start_evaluation(people, round, [run_a])
    evaluation.run_links.update(sha256="0" * 64)  # the run's file was replaced since it was picked
    [job] = run_queued_jobs()
    page = people.client("viewer").get(evaluation.get_absolute_url()).content.decode()
    assert job.error == "run 'A' no longer has the bytes it was picked with"
    assert "run &#x27;A&#x27; no longer has the bytes it was picked with" in page and "Traceback" not in page


def test_an_evaluation_that_fails_unexpectedly_shows_no_server_path(people, setup, monkeypatch, caplog):
    round, run_a, _run_b, _folder = setup
    evaluation = start_evaluation(people, round, [run_a])

    def unreadable(run):
        raise OSError(f"/srv/verdict/media/runs/{run.sha256}.parquet: Input/output error")

    monkeypatch.setattr(evaluations, "load_run", unreadable)
    [job] = run_queued_jobs()
    evaluation.refresh_from_db()
    assert (job.state, evaluation.state) == (Job.State.FAILED, Evaluation.State.FAILED)
    for who in ("lead", "viewer"):
        page = people.client(who).get(evaluation.get_absolute_url()).content.decode()
        assert f"An unexpected error (OSError) stopped the job. The worker&#x27;s log has the details under job {job.uuid}" in page
        assert "/srv/verdict" not in page and "Traceback" not in page
    assert "/srv/verdict/media/runs/" in caplog.text and "Traceback" in caplog.text


def test_bad_cutoffs_options_and_runs_are_refused_by_the_form(people, setup):
    round, run_a, _run_b, _folder = setup
    url = reverse("evaluation:evaluation-create", args=[round.project.slug])
    base = {"round": round.uuid, "runs": [run_a.uuid], "measures": "nDCG", "relevance_level": "1"}
    for change, message in [({"ks": "5 ²"}, "Cutoffs are whole numbers above 0"), ({"relevance_level": "10"}, "less than or equal to 9"),
                            ({"max_docs": "99999999999999999999"}, "less than or equal to"),
                            ({"runs": ["99999999999999999999"]}, "is not a valid value"), ({"round": run_a.pk}, "valid choice")]:
        response = people.client("lead").post(url, {**base, **change})
        assert response.status_code == 200, change
        assert message in response.content.decode(), change
    assert not Evaluation.objects.exists()


def test_measure_names_are_checked_and_expanded():
    assert evaluations.measure_strings(["ndcg_cut.10", "map", "P"], ks=[5]) == ["nDCG@10", "AP", "P@5"]
    from evaluation.engine import UnknownMeasureError

    with pytest.raises(UnknownMeasureError):
        evaluations.measure_strings(["nDGC@10"])
    with pytest.raises(UnknownMeasureError, match="text per query"):
        evaluations.measure_strings(["relstring.5"])


def test_every_evaluation_download_has_a_file_name_of_its_own_and_times_to_the_millisecond(people, setup):
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    client = people.client("viewer")
    downloads = [("aggregate", "csv"), ("aggregate", "json"), ("per-query", "csv"), ("per-query", "json"), ("breakdown", "csv"),
                 ("comparison", "csv"), ("comparison", "json"), ("trec-A", "txt"), ("trec-B", "txt")]
    names = []
    for what, fmt in downloads:
        response = client.get(reverse("evaluation:download", args=[round.project.slug, evaluation.uuid, what, fmt]))
        assert response.status_code == 200, (what, fmt)
        names.append(re.search(r'filename="([^"]+)"', response["Content-Disposition"]).group(1))
    assert len(set(names)) == len(downloads), names
    assert all(name.startswith(f"round_guidelines-v1_evaluation-{evaluation.uuid.hex[:8]}_") for name in names), names
    aggregate = json.loads(client.get(reverse("evaluation:download", args=[round.project.slug, evaluation.uuid, "aggregate", "json"])).content)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", aggregate["evaluated_at"])
