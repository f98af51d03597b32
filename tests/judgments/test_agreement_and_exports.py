"""A round's agreement report, adjudication, exports and imports over HTTP and the commands, and who may see them."""

import html
import json
import re

import krippendorff
import pytest
import pytrec_eval
from django.core.management import CommandError, call_command
from django.urls import reverse
from sklearn.metrics import cohen_kappa_score

from evaluation.engine import evaluate, read_qrels, read_run
from judgments.models import AgreementReport, Document, Judgment, Query, Round
from judgments.ops import grading, judgment_files
from judgments.ops.grading import Verdict
from tests.factory import Role, add_member, make_round, make_user, run_queued_jobs, trec_run, upload

pytestmark = pytest.mark.django_db

PAIRS = {f"q{q}": [f"d{q}{d}" for d in range(1, 7)] for q in range(1, 6)}  # 5 queries x 6 documents


def first_grade(query: str, doc: str) -> int:
    return (int(query[1:]) + int(doc[-1])) % 4


def second_grade(query: str, doc: str) -> int:
    """Mostly the first rater's grade, one higher on every third document."""
    grade = first_grade(query, doc)
    return min(3, grade + 1) if int(doc[-1]) % 3 == 0 else grade


@pytest.fixture
def rosa(people):
    rosa = make_user("rosa")
    add_member(people.project, rosa, Role.RATER)
    return rosa


def graded_round(people, rosa, name="Round 1", second=second_grade) -> Round:
    """Every pair graded by two raters (ravi and rosa), and one pair flagged unrateable by ravi."""
    round = make_round(people.project, people.lead, [people.rater, rosa], PAIRS, raters_per_pair=2, name=name)
    for item in round.items.select_related("query", "document"):
        q, d = item.query.query_id, item.document.doc_id
        if (q, d) == ("q5", "d56"):
            grading.record(item, people.rater, Verdict(unrateable="broken"))
            continue
        grading.record(item, people.rater, Verdict(grade=first_grade(q, d)))
        if (q, d) != ("q5", "d55"):  # one pair has a single grade
            grading.record(item, rosa, Verdict(grade=second(q, d)))
    return round


def url(name: str, round: Round, *extra) -> str:
    return reverse(f"judgments:{name}", args=[round.project.slug, round.uuid, *extra])


def download(client, round: Round, fmt: str, **options) -> tuple[str, str]:
    response = client.get(url("round-export", round), {"format": fmt, **options})
    assert response.status_code == 200, response.content[:500]
    return b"".join(response.streaming_content).decode(), response["Content-Disposition"]


def test_the_report_job_computes_statistics_equal_to_independent_implementations(people, rosa):
    round = graded_round(people, rosa)
    client = people.client("lead")
    response = client.post(url("round-agreement-compute", round))
    [job] = run_queued_jobs()
    assert response["Location"] == job.get_absolute_url() and job.state == "succeeded", job.error
    data = AgreementReport.objects.get(round=round).data
    pairs = [(first_grade(q, d), second_grade(q, d)) for q, docs in PAIRS.items() for d in docs if (q, d) not in {("q5", "d55"), ("q5", "d56")}]
    a, b = zip(*pairs)
    expected = cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="quadratic")
    assert data["summary"]["n_items"] == 28 and data["summary"]["n_items_single"] == 1
    assert data["summary"]["statistics"]["mean_pairwise_kappa"]["value"] == pytest.approx(expected)
    [pair] = data["pairs"]
    assert pair["kappa"] == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2, 3]))
    assert data["flags"]["unrateable_total"] == 1
    page = client.get(url("round-agreement", round)).content.decode()
    assert "Gate: Krippendorff" in page and "<svg" in page and "Cohen&#x27;s kappa" in page
    assert "q1" in page  # the per-query table links each query
    csv_text = client.get(url("round-agreement-download", round, "csv")).content.decode()
    assert csv_text.startswith("section,name,value") and "mean_pairwise_kappa" in csv_text
    assert json.loads(client.get(url("round-agreement-download", round, "json")).content)["gate"]["passed"] is True


def test_a_graded_report_shows_ratio_alpha_beside_interval_in_the_page_and_downloads(people, rosa):
    round = graded_round(people, rosa)
    client = people.client("lead")
    client.post(url("round-agreement-compute", round))
    run_queued_jobs()
    pairs = [(first_grade(q, d), second_grade(q, d)) for q, docs in PAIRS.items() for d in docs if (q, d) not in {("q5", "d55"), ("q5", "d56")}]
    expected = krippendorff.alpha(reliability_data=list(zip(*pairs)), level_of_measurement="ratio", value_domain=[0, 1, 2, 3])
    page = client.get(url("round-agreement", round)).content.decode()
    assert re.search(r"Krippendorff&#x27;s alpha \(interval\).*Krippendorff&#x27;s alpha \(ratio\)</td><td class=\"num\">"
                     + f"{expected:.3f}</td>", page, re.S)
    csv_rows = [line.split(",") for line in client.get(url("round-agreement-download", round, "csv")).content.decode().splitlines()]
    [ratio] = [row for row in csv_rows if row[:2] == ["statistic", "alpha_ratio"]]
    assert float(ratio[2]) == pytest.approx(expected) and float(ratio[3]) <= float(ratio[2]) <= float(ratio[4])
    statistics = json.loads(client.get(url("round-agreement-download", round, "json")).content)["summary"]["statistics"]
    assert statistics["alpha_ratio"]["value"] == pytest.approx(expected)


def test_a_lead_sets_the_gate_and_a_failing_gate_says_what_to_do(people, rosa):
    round = graded_round(people, rosa)
    client = people.client("lead")
    client.post(url("round-agreement-compute", round))
    run_queued_jobs()
    client.post(url("round-agreement-settings", round), {"consensus_rule": "median", "adjudication_margin": "1",
                                                        "gate_statistic": "kappa", "gate": "0.99", "version": round.version})
    round.refresh_from_db()
    assert (round.consensus_rule, round.adjudication_margin, round.gate_statistic, round.gate) == ("median", 1, "kappa", 0.99)
    page = client.get(url("round-agreement", round)).content.decode()
    assert re.search(r"—\s+fail", page) and "Rewrite the guidelines" in page and "Re-judge the overlap" in page


def test_a_mistake_in_the_settings_shows_the_page_again_with_the_input_kept(people, rosa):
    round = graded_round(people, rosa)
    response = people.client("lead").post(url("round-agreement-settings", round), {
        "consensus_rule": "median", "adjudication_margin": "1", "gate_statistic": "kappa", "gate": "1.5", "version": round.version})
    page = response.content.decode()
    assert response.status_code == 200 and "An agreement gate is between -1 and 1" in page
    assert 'value="1.5"' in page and '<option value="median" selected>' in page
    round.refresh_from_db()
    assert (round.consensus_rule, round.gate, round.version) == ("majority", 0.6, 1)


def test_adjudication_lists_disagreements_and_the_final_label_wins_in_exports(people, rosa):
    round = graded_round(people, rosa)
    client = people.client("lead")
    page = client.get(url("round-adjudication", round)).content.decode()
    assert page.count(" id=\"pair-") == 0  # margin 2: grades differ by 1 at most
    round.adjudication_margin = 1
    round.save()
    page = client.get(url("round-adjudication", round)).content.decode()
    disagreeing = [(q, d) for q, docs in PAIRS.items() for d in docs
                   if (q, d) not in {("q5", "d55"), ("q5", "d56")} and first_grade(q, d) != second_grade(q, d)]
    assert page.count(" id=\"pair-") == len(disagreeing)
    q, d = disagreeing[0]
    item = round.items.get(query__query_id=q, document__doc_id=d)
    client.post(url("round-adjudicate", round, item.uuid), {"grade": "0", "note": "Off topic"})
    qrels, _ = download(client, round, "qrels")
    assert f"{q} 0 {d} 0\n" in qrels
    assert people.client("viewer").post(url("round-adjudicate", round, item.uuid), {"grade": "3"}).status_code == 403


def test_every_export_format_names_the_round_and_leaves_out_unrateable_pairs(people, rosa):
    round = graded_round(people, rosa)
    client = people.client("viewer")  # viewers read and download
    qrels, disposition = download(client, round, "qrels")
    assert 'filename="round-1_guidelines-v1_qrels-graded.qrels"' in disposition
    lines = qrels.splitlines()
    assert len(lines) == 29 and "d56" not in qrels and not any(line.startswith("#") for line in lines)
    assert "q1 0 d11 2" in lines  # both raters gave 2
    assert "q1 0 d13 0" in lines  # grades 0 and 1: majority, ties to the lower grade
    binary, disposition = download(client, round, "qrels", threshold="2")
    assert set(line.split()[3] for line in binary.splitlines()) == {"0", "1"}
    assert 'filename="round-1_guidelines-v1_qrels-binary-ge2.qrels"' in disposition
    listing = json.loads(download(client, round, "json")[0])
    assert listing[0]["query_id"] == "q1" and listing[0]["query"] == "query q1" and len(listing[0]["ratings"]) == 6
    quepid, disposition = download(client, round, "quepid-csv")
    assert quepid.splitlines()[0] == "query,docid,ravi,rosa" and 'filename="book_round-1_guidelines-v1_judgements.csv"' in disposition
    long, _ = download(client, round, "long-csv")
    assert len(long.splitlines()) == 1 + 30 + 28 and "broken" in long  # ravi: 29 grades and the unrateable pair
    consensus, _ = download(client, round, "consensus-csv")
    assert consensus.splitlines()[:4] == ["query_id,query,doc_id,label,n_grades,spread,adjudicated", "q1,query q1,d11,2,2,0,false",
                                          "q1,query q1,d12,3,2,0,false", "q1,query q1,d13,0,2,1,false"]
    body, disposition = download(client, round, "rank-eval", metric="precision", k="5", index="shop", fields="title,body")
    body = json.loads(body)
    assert 'filename="round-1_guidelines-v1_rank-eval-precision-at5.json"' in disposition
    assert body["metric"] == {"precision": {"k": 5, "relevant_rating_threshold": 1, "ignore_unlabeled": False}}
    assert body["requests"][0]["ratings"][0]["_index"] == "shop"
    ltr, _ = download(client, round, "ltr")
    assert ltr.splitlines()[0] == "2 qid:q1 # d11 query q1"
    page = client.get(url("round-export", round)).content.decode()
    assert "1 unrateable pair without a grade is left out" in page


def test_exported_qrels_score_a_run_the_same_in_pytrec_eval_and_the_engine(people, rosa, tmp_path):
    round = graded_round(people, rosa)
    qrels, _ = download(people.client("lead"), round, "qrels")
    (tmp_path / "qrels").write_text(qrels)
    run_rows = {q: list(reversed(docs)) for q, docs in PAIRS.items()}
    (tmp_path / "run").write_bytes(trec_run(run_rows))
    engine = evaluate(read_qrels(str(tmp_path / "qrels")), read_run(str(tmp_path / "run")), ["nDCG@5", "AP"]).per_query
    with open(tmp_path / "qrels") as handle:
        judged = pytrec_eval.parse_qrel(handle)
    with open(tmp_path / "run") as handle:
        ranked = pytrec_eval.parse_run(handle)
    oracle = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.5", "map"}).evaluate(ranked)
    for query in PAIRS:
        assert engine["nDCG@5"][query] == pytest.approx(oracle[query]["ndcg_cut_5"], abs=1e-12)
        assert engine["AP"][query] == pytest.approx(oracle[query]["map"], abs=1e-12)


HOSTILE_QUERIES = {"q1": ("=1+1", '=HYPERLINK("x")'), "q2": ("@SUM(1)", "+cmd|' /C calc'!A0"), "q3": ("-2+3", "@SUM(1)"),
                   "q4": ("'=already", "\tx"), "q5": ("-1", "'=already")}
HOSTILE_DOCS = {"d11": "+cmd|calc!A0", "d12": "=d12", "d21": "'@d21", "d22": "-2+3", "d31": "-1"}


def make_hostile(round: Round) -> None:
    """Formula-like query ids, texts and doc ids (without whitespace, which qrels cannot hold)."""
    for query in Query.objects.filter(collection=round.pool.query_set):
        query.query_id, query.text = HOSTILE_QUERIES[query.query_id]
        query.save()
    for old, new in HOSTILE_DOCS.items():
        Document.objects.filter(project=round.project, doc_id=old).update(doc_id=new)


@pytest.mark.parametrize("fmt", ["qrels", "json", "quepid-csv"])
def test_export_import_export_gives_identical_bytes(people, rosa, fmt):
    source = graded_round(people, rosa)
    make_hostile(source)
    client = people.client("lead")
    exported, _ = download(client, source, fmt)
    target = _copy_round(people, rosa, source)
    name = {"qrels": "list.qrels", "json": "list.json", "quepid-csv": "book_1_judgements.csv"}[fmt]
    response = client.post(url("round-import", target), {"file": upload(name, exported.encode()), "dry_run": ""}, follow=True)
    assert "added" in response.content.decode()
    again, _ = download(client, target, fmt)
    assert again == exported


def _copy_round(people, rosa, source: Round) -> Round:
    from judgments.ops import rounds

    copy = rounds.create_round(people.project, name="Copy", pool=source.pool, guidelines=source.guidelines, scale=source.grading_scale,
                               raters=[people.rater, rosa], user=people.lead, seed=7, raters_per_pair=2, overlap_share=0)
    rounds.open_round(copy)
    copy.refresh_from_db()
    return copy


def test_a_dry_run_reports_what_would_change_and_changes_nothing(people, rosa):
    round = graded_round(people, rosa)
    before = list(Judgment.objects.order_by("pk").values_list("pk", "grade"))
    qrels = b"q1 0 d11 3\nq1 0 d12 3\n"  # ravi gave d11 2 and d12 3
    response = people.client("lead").post(url("round-import", round), {"file": upload("fix.qrels", qrels), "rater": "ravi", "dry_run": "on"}, follow=True)
    page = response.content.decode()
    assert "would add 0, would change 1, 1 unchanged" in page and "dry run: nothing changed" in page
    assert list(Judgment.objects.order_by("pk").values_list("pk", "grade")) == before
    people.client("lead").post(url("round-import", round), {"file": upload("fix.qrels", qrels), "rater": "ravi"})
    assert Judgment.objects.get(item__round=round, item__query__query_id="q1", item__document__doc_id="d11", rater=people.rater).grade == 3


@pytest.mark.parametrize("name,data,message", [
    ("bad.qrels", b"q1 0 d11 2\nq1 0 nowhere 1\n", "bad.qrels:2: query 'q1' / document 'nowhere' is not a pair of the round"),
    ("bad.qrels", b"q1 0 d11 7\n", "grade 7 of query 'q1' / document 'd11' is not on the round's scale"),
    ("bad.qrels", b"q1 0 nowhere 1\nq1 0 d11 2\nq1 0 d12 7\n", "is not a pair of the round 'Round 1'; bad.qrels:3: grade 7 of"),
    ("bad.qrels", b"q1 0 d11\n", "bad.qrels:1"),
    ("bad.json", b'[{"query_id": "q1", "ratings": [{"doc_id": "d11"}]}]', "bad.json:1"),
    ("book.csv", b"query,docid,nobody\nquery q1,d11,2\n", "'nobody' is not a member of this project"),
    ("junk.bin", b"\x00\xff\x00garbage", "junk.bin"),
])
def test_a_bad_import_file_is_refused_with_its_line_and_nothing_is_imported(people, rosa, name, data, message):
    round = graded_round(people, rosa)
    count = Judgment.objects.count()
    response = people.client("lead").post(url("round-import", round), {"file": upload(name, data), "dry_run": ""}, follow=True)
    assert message in html.unescape(response.content.decode())
    assert Judgment.objects.count() == count


def test_grades_go_only_to_leads_and_raters_and_outsiders_known_or_not_get_the_same_answer(people, rosa):
    round = graded_round(people, rosa)
    count = Judgment.objects.count()
    qrels = b"q1 0 d11 3\n"
    answers = {}
    for rater in ("otto", "ghost"):  # otto has an account (and a project of his own), ghost has none
        for dry_run in ("on", ""):
            response = people.client("lead").post(url("round-import", round), {"file": upload("fix.qrels", qrels), "rater": rater,
                                                                                "dry_run": dry_run}, follow=True)
            message = re.search(r"Nothing was imported: [^<]*", html.unescape(response.content.decode())).group()
            assert message.startswith(f"Nothing was imported: fix.qrels: '{rater}' is not a member of this project")
            answers[rater, dry_run] = message.replace(rater, "NAME")
    assert len(set(answers.values())) == 1
    book = b"query,docid,otto,ravi\nquery q1,d11,2,3\n"
    response = people.client("lead").post(url("round-import", round), {"file": upload("book.csv", book), "dry_run": ""}, follow=True)
    assert "'otto' is not a member of this project" in html.unescape(response.content.decode())
    viewer = people.client("lead").post(url("round-import", round), {"file": upload("fix.qrels", qrels), "rater": "vera"}, follow=True)
    assert "'vera' is a viewer of this project, and viewers do not grade" in html.unescape(viewer.content.decode())
    with pytest.raises(CommandError, match="'otto' is not a member of this project"):
        call_command("import_judgments", str(round.uuid), "--rater", "otto", "--dry-run", str(_written(qrels)))
    assert Judgment.objects.count() == count
    lead = people.client("lead").post(url("round-import", round), {"file": upload("fix.qrels", qrels), "rater": "lena"}, follow=True)
    assert "added 1" in lead.content.decode()
    assert Judgment.objects.get(rater=people.lead).grade == 3


def test_the_imported_account_takes_grades_unless_a_person_took_its_name(people, rosa):
    round = graded_round(people, rosa)
    people.client("lead").post(url("round-import", round), {"file": upload("a.qrels", b"q1 0 d11 3\n")})
    imported = Judgment.objects.get(item__round=round, rater__username="imported").rater
    assert not imported.is_active and not imported.has_usable_password()
    type(imported).objects.filter(pk=imported.pk).update(is_active=True)  # now a person, and an outsider
    response = people.client("lead").post(url("round-import", round), {"file": upload("a.qrels", b"q1 0 d11 3\n")}, follow=True)
    assert "'imported' is not a member of this project" in html.unescape(response.content.decode())
    assert Judgment.objects.filter(rater__username="imported").count() == 1


def _written(data: bytes):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "fix.qrels"
    path.write_bytes(data)
    return path


def test_the_commands_export_with_a_consensus_rule_and_import_with_a_dry_run(people, rosa, tmp_path, capsys):
    round = graded_round(people, rosa)
    call_command("export_judgments", str(round.uuid), "--format", "qrels", "--consensus", "mean", "--output", str(tmp_path))
    written = tmp_path / "round-1_guidelines-v1_qrels-graded_mean.qrels"  # not the round's rule (majority)
    assert "q1 0 d13 1" in written.read_text()  # grades 0 and 1: their mean, 0.5, rounds up (majority would say 0)
    err = capsys.readouterr().err
    assert "1 unrateable pair left out" in err
    call_command("import_judgments", "Round 1", str(written), "--project", people.project.slug, "--rater", "rosa", "--dry-run")
    assert "would add 1, would change 0, 28 unchanged" in capsys.readouterr().out  # rosa had not graded q5/d55
    with pytest.raises(CommandError, match="no round"):
        call_command("export_judgments", "No such round")


def test_raters_see_no_report_and_outsiders_nothing(people, rosa):
    round = graded_round(people, rosa)
    reads = [url("round-agreement", round), url("round-adjudication", round), url("round-export", round),
             url("round-agreement-download", round, "csv")]
    writes = [url("round-agreement-compute", round), url("round-agreement-settings", round), url("round-import", round)]
    for address in reads:
        assert people.client("outsider").get(address).status_code == 404
        assert people.client("rater").get(address).status_code == 403
        assert people.client("viewer").get(address).status_code in (200, 302)
    for address in writes:
        assert people.client("viewer").post(address, {}).status_code == 403
        assert people.client("rater").post(address, {}).status_code == 403
        assert people.client("outsider").post(address, {}).status_code == 404
    assert not AgreementReport.objects.exists()


def test_exports_stream_and_refuse_ids_a_line_format_cannot_hold(people, rosa):
    round = graded_round(people, rosa)
    response = people.client("lead").get(url("round-export", round), {"format": "qrels"})
    assert response.streaming
    round.items.filter(document__doc_id="d11").first().document.__class__.objects.filter(doc_id="d11").update(doc_id="d 11")
    page = people.client("lead").get(url("round-export", round), {"format": "qrels"}).content.decode()
    assert "has whitespace in an id" in page
    assert judgment_files.unrateable_pairs(round) == 1


@pytest.mark.django_db(transaction=True)
def test_an_export_reads_one_repeatable_read_snapshot_on_postgresql(people, rosa):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("SQLite reads the whole export inside one transaction; isolation levels are PostgreSQL's")
    round = graded_round(people, rosa)
    chunks = judgment_files.export(round, "quepid-csv")
    first = next(chunks)
    with connection.cursor() as cursor:
        cursor.execute("SHOW transaction_isolation")
        assert cursor.fetchone()[0] == "repeatable read"
    assert first.startswith("query,docid,ravi,rosa")
    list(chunks)
    assert not connection.in_atomic_block  # the snapshot ends with the export


def test_labels_are_the_same_whatever_the_chunk_size(people, rosa, monkeypatch):
    round = graded_round(people, rosa)
    whole = list(judgment_files.final_labels(round))
    for size in (1, 2, 3, 7):
        monkeypatch.setattr(judgment_files, "CHUNK_ROWS", size)
        assert list(judgment_files.final_labels(round)) == whole
    assert len(whole) == 29 and all(label.n_grades in (1, 2) for label in whole)


def test_every_export_variant_downloads_under_a_name_of_its_own(people, rosa):
    """Two downloads with different content never share a file name (a binary qrels saved over the graded
    one); the same variant asked for two ways gets the same name."""
    round = graded_round(people, rosa)
    client = people.client("viewer")
    variants = [("qrels", {}), ("qrels", {"threshold": "1"}), ("qrels", {"threshold": "2"}), ("qrels", {"consensus": "mean"}),
                ("json", {}), ("json", {"consensus": "min_top3"}), ("consensus-csv", {}), ("consensus-csv", {"consensus": "mean"}),
                ("rank-eval", {}), ("rank-eval", {"metric": "err"}), ("rank-eval", {"k": "5"}), ("ltr", {}), ("long-csv", {}),
                ("quepid-csv", {})]
    contents_by_name = {}
    for fmt, options in variants:
        content, disposition = download(client, round, fmt, **options)
        contents_by_name.setdefault(disposition, set()).add(content)
    assert len(contents_by_name) == len(variants), sorted(contents_by_name)
    assert download(client, round, "qrels", consensus="majority")[1] == download(client, round, "qrels")[1]  # the round's rule
    assert "qrels-binary-ge2.qrels" in download(client, round, "qrels", threshold="2")[1]


def test_the_agreement_csv_writes_numbers_without_float_noise_even_inside_its_details(people, rosa):
    round = graded_round(people, rosa)
    client = people.client("lead")
    client.post(url("round-agreement-compute", round))
    run_queued_jobs()
    text = client.get(url("round-agreement-download", round, "csv")).content.decode()
    assert not re.search(r"\d\.\d{16}", text)  # a float's 17 significant digits, as repr writes 2/3
    [pair] = [line for line in text.splitlines() if line.startswith("pair,")]
    detail = pair.split(",", 7)[7]
    assert re.fullmatch(r"unweighted -?[\d.]+; linear -?[\d.]+; agreement [\d.]+", detail), detail
