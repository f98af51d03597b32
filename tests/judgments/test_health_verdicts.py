"""The health page, the overview and `check_health` say pass, fail or not enough evidence for each trigger: the
agreement trigger reads its round's gate verdict (a gate no pair can compute is never "OK") and fires on it by a
project setting; the new-systems trigger reads the evaluation each run was last evaluated in, and names its round,
whatever round opened since; the counts name the triggers they count."""

import html
import json
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from judgments.lib.staleness import STALE, UNMEASURED, WARN
from judgments.models import HealthCheck, HealthSettings
from judgments.ops import grading, health, rounds
from judgments.ops.grading import Verdict
from judgments.ops.imports import import_run
from tests.evaluation.test_evaluations import DOCS, GRADES, evaluated, setup  # noqa: F401 (a fixture)
from tests.evaluation.test_judge_fill import evaluate as fill_evaluate, partly_graded  # noqa: F401 (a fixture)
from tests.factory import trec_run
from tests.judgments.test_agreement_gate import no_overlap, rosa  # noqa: F401 (fixtures)
from tests.judgments.test_health import RUN_C, health_url, import_log

pytestmark = pytest.mark.django_db


def text(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def article(page: str, key: str) -> str:
    start = page.index(f'id="trigger-{key}"')
    return page[page.rindex("<article", 0, start):page.index("</article>", start)]


def checked_page(client, project) -> str:
    assert client.post(health_url(project, "health-check")).status_code == 302
    return client.get(health_url(project)).content.decode()


def settings_form(**changes) -> dict:
    form = {"every_days": "30", "unjudged_warn": "0.2", "unjudged_stale": "0.3", "head_judged_share": "0.5",
            "new_head_queries": "20", "age_days": "180", "age_warn": "0.25", "age_stale": "0.5",
            "agreement_fire_after": "50", "notify": "on", "webhook_url": "", "cutoffs_text": "10 20"}
    return form | changes


def test_a_gate_no_pair_can_compute_is_not_enough_evidence_on_the_health_page_never_ok(people, no_overlap):
    client = people.client("lead")
    page = checked_page(client, people.project)
    agreement = article(page, "agreement")
    words = text(agreement)
    assert "AGREEMENT NOT ENOUGH EVIDENCE MISSING:" in words.upper()
    assert "Round 1: no pair graded by two raters yet (24 pairs graded once)" in words
    assert "24 grades so far; fires at 50 grades" in words
    assert "Keep grading: 15% of its pairs are to be graded by a second rater" in words
    assert "gate passes" not in words and "health-ok" not in agreement and " ok " not in words.lower()
    assert reverse("judgments:round-agreement", args=[people.project.slug, no_overlap.uuid]) in agreement
    assert no_overlap.get_absolute_url() in agreement
    latest = people.project.health_checks.first()
    assert latest.triggers["agreement"]["state"] == UNMEASURED and not latest.firing
    assert "nothing fires; 3 have not enough evidence: New systems, Query drift, Agreement" in text(page)


def test_the_agreement_trigger_fires_on_missing_evidence_by_the_project_setting(people, no_overlap):
    client = people.client("lead")
    page = client.get(health_url(people.project)).content.decode()
    assert "Agreement without enough evidence: warn after (grades)" in page
    assert HealthSettings.objects.get(project=people.project).agreement_fire_after == 50  # the default
    assert client.post(health_url(people.project, "health-settings"), settings_form(agreement_fire_after="20")).status_code == 302
    page = checked_page(client, people.project)
    words = text(article(page, "agreement"))
    assert "not enough evidence, fires: warn" in words and "fires: 20 grades or more" in words
    assert people.project.health_checks.first().triggers["agreement"]["state"] == WARN
    assert "1 trigger fires: Agreement (not enough evidence); 2 more have not enough evidence: New systems, Query drift" in text(page)
    assert client.post(health_url(people.project, "health-settings"), settings_form(agreement_fire_after="")).status_code == 302
    words = text(article(checked_page(client, people.project), "agreement"))
    assert "never fires" in words and "fires: warn" not in words


def test_check_health_json_reports_each_trigger_s_verdict_and_exits_3_without_enough_evidence(people, no_overlap, capsys):
    with pytest.raises(SystemExit) as exited:
        call_command("check_health", people.project.slug, "--json", "--no-notify")
    assert exited.value.code == 3
    [printed] = json.loads(capsys.readouterr().out)
    assert printed["firing"] is False and printed["verdict"] == "insufficient"
    assert printed["verdicts"] == {"pass": ["guidelines", "age"], "fail": [], "insufficient": ["new_systems", "query_drift", "agreement"]}
    agreement = printed["triggers"]["agreement"]
    assert agreement["state"] == UNMEASURED and agreement["firing"] is False
    assert agreement["verdict"]["state"] == "insufficient" and agreement["verdict"]["label"] == "not enough evidence"
    assert agreement["verdict"]["reasons"][0] == "Round 1: no pair graded by two raters yet (24 pairs graded once)"
    assert printed["triggers"]["age"]["verdict"]["state"] == "pass"
    call_command("check_health", people.project.slug, "--no-notify", "--allow-insufficient")
    assert "agreement    not enough evidence" in capsys.readouterr().out


def test_new_systems_read_each_run_s_last_evaluation_after_a_newer_round_opens_and_keep_their_remedies(people, setup):
    round, run_a, run_b, _ = setup
    run_c, _ = import_run(people.project, trec_run(RUN_C, "c"), "c.run", name="C", system="dense")
    evaluation = evaluated(people, round, [run_a, run_b, run_c], measures=("nDCG@10",))
    newer = rounds.create_round(people.project, name="Round 2", pool=round.pool, guidelines=round.guidelines,
                                scale=round.grading_scale, raters=[people.rater], user=people.lead, overlap_share=0)
    rounds.open_round(newer)  # the newest round now has no evaluation: the runs' last scores are still Round's
    newer.refresh_from_db()
    client = people.client("lead")
    page = checked_page(client, people.project)
    systems = article(page, "new_systems")
    words = text(systems)
    assert people.project.health_checks.first().triggers["new_systems"]["state"] == STALE
    assert "New systems fail: stale" in words and "Largest unjudged share 60.0% (C at @10, last evaluated on Round)." in words
    assert "no evaluated run yet" not in words
    assert "Where each run was last evaluated (3 runs)" in words
    assert re.search(r"C Round @10 60\.0%, @20 60\.0%", words)
    queue = reverse("evaluation:queue-unjudged", args=[people.project.slug, evaluation.uuid])
    assert queue in systems and "Queue the unjudged top 10 of C into a new round" in words
    # evaluated again on the newer round, once graded: that evaluation is the one read now
    for item in newer.items.select_related("query", "document"):
        index = DOCS[item.query.query_id].index(item.document.doc_id)
        grading.record(item, people.rater, Verdict(grade=GRADES[item.query.query_id][index]))
    evaluated(people, newer, [run_c], measures=("nDCG@10",))
    words = text(article(checked_page(client, people.project), "new_systems"))
    assert "(C at @10, last evaluated on Round 2)" in words


def test_the_header_the_message_and_the_overview_count_and_name_the_triggers_that_fire(people, setup, tmp_path):
    client = people.client("lead")
    import_log(people.project, tmp_path, "November", {"camping chair": 50, "tent": 10})
    response = client.post(health_url(people.project, "health-check"), follow=True)
    page = text(response.content.decode())
    counted = "2 triggers fire: Query drift, Agreement (not enough evidence); 1 more has not enough evidence: New systems"
    at = f"{people.project.health_checks.first().at:%Y-%m-%d %H:%M}"
    assert f"Checked: {counted}." in page and re.search(rf"Last checked {at} ?: {re.escape(counted)}", page)  # the date is a <time>
    assert "a trigger fires" not in page
    overview = text(client.get(reverse("judgments:project", args=[people.project.slug])).content.decode())
    assert counted in overview
    assert "New systems (not enough evidence): no evaluated run yet" in overview


def test_a_check_stored_before_verdicts_existed_draws_unmeasured_as_not_enough_evidence(people):
    old = {"key": "age", "state": "unmeasured", "value": None, "threshold": "t", "summary": "no labels yet", "details": {}}
    HealthCheck.objects.create(project=people.project, triggers={"age": old}, firing=False)
    page = people.client("lead").get(health_url(people.project)).content.decode()
    words = text(article(page, "age"))
    assert "Label age not enough evidence" in words and "Missing: no labels yet." in words
    assert "health-unmeasured" in article(page, "age")
    history = text(page[page.index('id="history"'):])
    assert "not enough evidence" in history and "unmeasured" not in history
    assert health.verdict_words(old) == "not enough evidence"


def test_an_evaluation_a_judge_filled_does_not_measure_new_systems(people, partly_graded):  # noqa: F811
    """The judge labelled every pair the raters left, so its evaluation's unjudged share is 0: it says nothing of
    what the raters left unjudged. Runs evaluated only that way are not yet measured; once the raters' labels
    alone are evaluated, that evaluation is read."""
    round, judge = partly_graded
    filled = fill_evaluate(round, judge)
    assert all(row["unjudged"]["10"]["share"] == 0 for row in filled.results["runs"])
    health.check_project(people.project, notify=False)
    trigger = people.project.health_checks.first().triggers["new_systems"]
    assert trigger["state"] == UNMEASURED and trigger["verdict"]["state"] == "insufficient"
    assert "2 runs never evaluated on the raters' labels" in " ".join(trigger["verdict"]["reasons"])
    human = fill_evaluate(round)
    health.check_project(people.project, notify=False)
    trigger = people.project.health_checks.first().triggers["new_systems"]
    assert trigger["state"] != UNMEASURED and not trigger["details"]["unmeasured"]
    assert {row["evaluation_uuid"] for row in trigger["details"]["evaluated"]} == {str(human.uuid)}
