"""A lead's round pages over HTTP: set up, open, close, new guidelines, flags, reassigning, gold pairs."""

import io

import pytest
from django.urls import reverse

from judgments.lib.scales import GRADED
from judgments.models import Claim, Judgment, Round
from judgments.ops import grading, rounds
from judgments.ops.actions import ActionRefused, save_guidelines
from judgments.ops.grading import Verdict
from judgments.ops.imports import import_corpus, import_run
from judgments.ops.pools import add_runs_to_pool, create_pool
from tests.factory import make_pool, make_round, run_queued_jobs, trec_run

pytestmark = pytest.mark.django_db


def url(name: str, round: Round, *extra) -> str:
    return reverse(f"judgments:{name}", args=[round.project.slug, round.uuid, *extra])


@pytest.fixture
def pool(people):
    save_guidelines(people.project, "# Rules v1", author=people.lead)
    return make_pool(people.project, {"q1": ["d1", "d2", "d3"], "q2": ["d4", "d5"]})


def form_data(pool, **changes) -> dict:
    data = {"name": "Autumn round", "pool": pool.uuid, "guidelines": 1, "scale": "graded", "custom_scale": "",
            "raters": ["ravi", "lena"], "raters_per_pair": 1, "overlap_percent": 15, "order": "grouped"}
    return {**data, **changes}


def test_a_lead_creates_a_draft_round_from_the_form(people, pool):
    response = people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form_data(pool))
    round = Round.objects.get()
    assert response.status_code == 302 and response["Location"] == round.get_absolute_url()
    assert (round.status, round.guidelines.number, round.grading_scale.values, round.overlap_share) == ("draft", 1, [0, 1, 2, 3], 0.15)
    assert set(round.raters.values_list("username", flat=True)) == {"ravi", "lena"}
    assert not round.items.exists()


def test_a_custom_scale_is_read_from_the_form_and_mistakes_name_the_line(people, pool):
    client = people.client("lead")
    create = reverse("judgments:round-create", args=[people.project.slug])
    response = client.post(create, form_data(pool, scale="custom", custom_scale="0 | Off topic\n1 Related\n"))
    assert "line 2: write `value | label | cue`" in response.content.decode() and not Round.objects.exists()
    client.post(create, form_data(pool, scale="custom", custom_scale="0 | Off topic | Nothing to do with it\n1 | On topic\n2 | The answer"))
    assert [g.label for g in Round.objects.get().grading_scale.grades] == ["Off topic", "On topic", "The answer"]


@pytest.mark.parametrize("percent", [5, 25])
def test_an_overlap_share_outside_the_range_is_refused_in_the_form(people, pool, percent):
    response = people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form_data(pool, overlap_percent=percent))
    assert response.status_code == 200 and not Round.objects.exists()


@pytest.mark.parametrize(("changes", "problem"), [
    ({"raters": ["ravi"]}, "1 rater chosen, but with 15% overlap, those pairs need a second, independent rater"),
    ({"raters": ["ravi", "lena"], "raters_per_pair": 3, "overlap_percent": 0}, "every pair needs 3 independent judgments"),
])
def test_too_few_raters_for_the_policy_are_refused_in_the_form_not_at_opening(people, pool, changes, problem):
    response = people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form_data(pool, **changes))
    assert response.status_code == 200 and problem in response.content.decode()
    assert not Round.objects.exists()


@pytest.mark.parametrize("changes", [{"raters": ["ravi"], "overlap_percent": 0}, {"raters": []}])
def test_one_rater_without_overlap_or_no_raters_yet_make_a_draft(people, pool, changes):
    people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form_data(pool, **changes))
    assert Round.objects.get().status == "draft"


def test_the_edit_form_refuses_too_few_raters_too(people, pool):
    round = make_round(people.project, people.lead, [people.rater, people.lead], open=False, overlap_share=0.15)
    data = {**form_data(round.pool, raters=["ravi"]), "version": round.version}
    response = people.client("lead").post(url("round-edit", round), data)
    assert "1 rater chosen" in response.content.decode()
    assert round.raters.count() == 2


def test_a_round_on_an_empty_pool_is_refused_by_the_form_and_the_action(people):
    save_guidelines(people.project, "# Rules v1", author=people.lead)
    full = make_pool(people.project, {"q1": ["d1"]})
    empty = create_pool(people.project, name="Empty", query_set=full.query_set, depth=10, strategy="best_rank")
    response = people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form_data(empty))
    assert "The pool “Empty” has no pairs" in response.content.decode() and not Round.objects.exists()
    with pytest.raises(ActionRefused, match="has no pairs"):
        rounds.create_round(people.project, name="R", pool=empty, guidelines=people.project.guideline_versions.get(), scale=GRADED)
    assert not Round.objects.exists()


def test_a_round_on_a_pool_still_being_built_says_to_wait(people):
    save_guidelines(people.project, "# Rules v1", author=people.lead)
    full = make_pool(people.project, {"q1": ["d1"]})
    response = people.client("lead").post(reverse("judgments:pool-create", args=[people.project.slug]), {
        "name": "Building", "query_set": full.query_set.uuid, "runs": [full.runs.get().uuid], "depth": 10, "strategy": "best_rank"})
    assert response.status_code == 302
    building = people.project.pools.get(name="Building")
    response = people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form_data(building))
    assert "is still being built" in response.content.decode() and not Round.objects.exists()
    run_queued_jobs()
    people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form_data(building))
    assert Round.objects.get().pool == building


def test_a_round_needs_guidelines_first(people):
    response = people.client("lead").get(reverse("judgments:round-create", args=[people.project.slug]))
    assert response["Location"] == reverse("judgments:guidelines-edit", args=[people.project.slug])


def test_opening_lays_out_the_pairs_and_closing_stops_judgments(people, pool):
    round = make_round(people.project, people.lead, [people.rater, people.lead], open=False)
    client = people.client("lead")
    client.post(url("round-open", round))
    round.refresh_from_db()
    assert round.status == "open" and round.items.count() == 12
    client.post(url("round-close", round))
    round.refresh_from_db()
    assert round.status == "closed"
    assert "This round is closed" in people.client("rater").get(url("grade", round)).content.decode()
    client.post(url("round-open", round))
    round.refresh_from_db()
    assert round.status == "open" and round.items.count() == 12  # reopening adds nothing


def test_an_open_round_keeps_its_guidelines_and_the_app_offers_a_new_round(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead])
    client = people.client("lead")
    response = client.post(reverse("judgments:guidelines-edit", args=[people.project.slug]), {"text": "# Rules v2", "note": "Edge cases", "version": 1},
                           follow=True)
    assert "Open rounds keep the version they started with" in response.content.decode()
    with pytest.raises(ActionRefused, match="keeps its guidelines version"):
        rounds.update_round(round, guidelines=people.project.guideline_versions.first())
    page = client.get(round.get_absolute_url()).content.decode()
    assert "The guidelines changed since this round started" in page
    client.post(url("round-successor", round))
    successor = Round.objects.exclude(pk=round.pk).get()
    assert (successor.status, successor.guidelines.number, successor.pool, successor.name) == ("draft", 2, round.pool, "Round 1 (guidelines v2)")
    round.refresh_from_db()
    assert round.guidelines.number == 1


def test_the_edit_form_cannot_change_what_is_fixed(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead])
    grading.record(grading.next_item(round, people.rater), people.rater, Verdict(grade=1))
    save_guidelines(people.project, "# Rules v2", author=people.lead)
    response = people.client("lead").post(url("round-edit", round), {
        "name": "Renamed", "guidelines": 2, "scale": "binary", "raters": ["ravi", "lena"], "raters_per_pair": 3,
        "overlap_percent": 0, "order": "shuffled", "show_rank": "on", "version": round.version})
    assert response.status_code == 302
    round.refresh_from_db()
    assert (round.name, round.order, round.show_rank) == ("Renamed", "shuffled", True)
    assert (round.guidelines.number, round.grading_scale.kind, round.raters_per_pair) == (1, "graded", 1)


def test_the_round_page_shows_progress_per_rater_and_per_query(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead])
    for _ in range(3):
        grading.record(grading.next_item(round, people.rater), people.rater, Verdict(grade=2))
    grading.put_off(grading.next_item(round, people.rater), people.rater)
    page = people.client("viewer").get(round.get_absolute_url()).content.decode()
    assert "3 of 12 judgments" in page and "Flags: 0 unrateable, 1 judge later" in page
    assert "Reassign" not in page and "Close the round" not in page  # viewers only read


def test_flags_list_reasons_and_a_lead_resets_them(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead])
    grading.record(grading.next_item(round, people.rater), people.rater, Verdict(unrateable="other", unrateable_note="Paywall"))
    grading.put_off(grading.next_item(round, people.rater), people.rater)
    client = people.client("lead")
    page = client.get(url("round-flags", round)).content.decode()
    assert "Other: Paywall" in page and "ravi" in page
    client.post(url("round-reset-flags", round), {"later": "on", "unrateable": "on", "rater": "ravi"})
    assert not Judgment.objects.exists() and not Claim.objects.filter(kind="later").exists()


def flagged_round(people, unrateable: int, later: int):
    """A round of 130 pairs with `unrateable` verdicts flagged by ravi (a minute apart, the first oldest) and
    `later` pairs put off by lena."""
    from datetime import timedelta

    from django.utils import timezone

    round = make_round(people.project, people.lead, [people.rater, people.lead], {"q1": [f"d{n:03d}" for n in range(130)]})
    items = list(round.items.order_by("pk"))
    start = timezone.now() - timedelta(days=1)
    for n, item in enumerate(items[:unrateable]):
        grading.record(item, people.rater, Verdict(unrateable="broken", unrateable_note=f"flag {n:03d}"))
    for n, judgment in enumerate(Judgment.objects.order_by("pk")):
        Judgment.objects.filter(pk=judgment.pk).update(created_at=start + timedelta(minutes=n))
    for n, item in enumerate(items[unrateable:unrateable + later]):
        Claim.objects.create(item=item, rater=people.lead, kind=Claim.Kind.LATER, since=start + timedelta(minutes=n))
    return round


def test_the_flags_page_lists_50_unrateable_flags_a_page_newest_first(people):
    round = flagged_round(people, unrateable=55, later=0)
    client = people.client("viewer")
    first = client.get(url("round-flags", round))
    page = first.content.decode()
    assert [j.unrateable_note for j in first.context["unrateable"].rows] == [f"flag {n:03d}" for n in range(54, 4, -1)]
    assert "Unrateable (55)" in page and "flag 054" in page and "flag 004" not in page
    last = Judgment.objects.get(unrateable_note="flag 005")
    assert f'href="?after={last.uuid}"' in page and "Next 50 unrateable flags, from" in page
    assert "Newest unrateable flags" not in page
    second = client.get(url("round-flags", round), {"after": str(last.uuid)})
    assert [j.unrateable_note for j in second.context["unrateable"].rows] == [f"flag {n:03d}" for n in range(4, -1, -1)]
    page = second.content.decode()
    assert "Newest unrateable flags (first 50)" in page and "Next 50 unrateable flags" not in page and "flag 005" not in page
    assert "Judge later (0)" in page


def test_the_flags_page_lists_pairs_put_off_50_a_page_longest_first(people):
    round = flagged_round(people, unrateable=0, later=52)
    client = people.client("lead")
    first = client.get(url("round-flags", round))
    rows = first.context["later"].rows
    assert len(rows) == 50 and [c.since for c in rows] == sorted(c.since for c in rows)
    page = first.content.decode()
    assert "Judge later (52)" in page and "Unrateable (0)" in page
    last = rows[-1]
    assert f'href="?later_after={last.item.uuid}&amp;later_rater=lena"' in page
    second = client.get(url("round-flags", round), {"later_after": str(last.item.uuid), "later_rater": "lena"})
    assert [c.pk for c in second.context["later"].rows] == list(Claim.objects.order_by("since").values_list("pk", flat=True)[50:])
    assert "Longest put off (first 50 pairs)" in second.content.decode()


def test_the_flags_page_says_when_a_list_is_empty_and_who_may_read_it(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead])
    page = people.client("lead").get(url("round-flags", round)).content.decode()
    assert page.count("None.") == 2 and "Next 50" not in page and "Reset flags" in page
    gone = Judgment.objects.model(uuid="00000000-0000-0000-0000-000000000000").uuid  # a cursor naming no flag: the first page
    assert "None." in people.client("viewer").get(url("round-flags", round), {"after": str(gone)}).content.decode()
    assert "Reset flags" not in people.client("viewer").get(url("round-flags", round)).content.decode()
    assert people.client("rater").get(url("round-flags", round)).status_code == 403
    assert people.client("outsider").get(url("round-flags", round)).status_code == 404
    assert people.client("lead").get(url("round-flags", round), {"after": "not-a-uuid"}).status_code == 400


def test_a_lead_reassigns_a_raters_remaining_pairs(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead])
    held = grading.next_item(round, people.rater)
    people.client("lead").post(url("round-reassign", round), {"source": "ravi", "target": "lena"})
    claim = Claim.objects.get()
    assert (claim.item_id, claim.rater, claim.kind) == (held.pk, people.lead, "handed")
    assert grading.next_item(round, people.lead).pk == held.pk


def test_gold_pairs_are_set_per_pair_and_reported_per_rater(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead])
    item = grading.next_item(round, people.rater)
    client = people.client("lead")
    response = client.post(url("round-gold", round, item.uuid), {"grade": "3"})
    assert response["Location"] == url("round-query", round, item.query.query_id)
    grading.record(item, people.rater, Verdict(grade=3))
    page = client.get(round.get_absolute_url()).content.decode()
    assert "100% (1 of 1)" in page
    assert "<strong>ravi</strong>: 3 Perfect" in client.get(url("round-query", round, item.query.query_id)).content.decode()
    assert client.post(url("round-gold", round, item.uuid), {"grade": "7"}).status_code == 302
    item.refresh_from_db()
    assert item.gold_grade == 3


def test_new_pool_pairs_join_an_open_round_on_request(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead])
    run, _ = import_run(people.project, trec_run({"q1": ["d11", "d15"]}), "new.run", name="new", system="dense")
    import_corpus(people.project, io.BytesIO(b'{"doc_id": "d15", "title": "New"}\n'), "more.jsonl")
    add_runs_to_pool(round.pool, [run])
    people.client("lead").post(url("round-add-pairs", round))
    assert round.items.count() == 13


def test_the_pool_and_run_pages_show_what_has_been_judged(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead])
    item = grading.next_item(round, people.rater)
    grading.record(item, people.rater, Verdict(grade=2))
    client = people.client("viewer")
    pool_page = client.get(round.pool.get_absolute_url()).content.decode()
    assert "0.083" in pool_page  # 1 of the run's 12 pooled pairs
    run = round.pool.runs.get()
    run_page = client.get(run.get_absolute_url(), {"query": item.query.query_id}).content.decode()
    assert "<td>2</td>" in run_page.replace("\n", "").replace("        ", "") and run_page.count("unjudged") == 3
