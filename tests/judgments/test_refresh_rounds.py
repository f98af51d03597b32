"""Refresh rounds: a round made from a published version serves only the pairs the version does not label
(plus the old pairs its re-judge rule picks), publishing it gives the lineage's next version, and a sampled
re-judge reports Cohen's kappa between old and new labels."""

from unittest import mock

import pytest
from django.urls import reverse
from sklearn.metrics import cohen_kappa_score

from judgments.models import Round
from judgments.ops import actions, grading, rounds, versions
from judgments.ops.grading import Verdict
from tests.factory import make_round

pytestmark = pytest.mark.django_db

PAIRS = {f"q{q}": [f"d{q}{d}" for d in range(1, 6)] for q in range(1, 5)}  # 4 queries x 5 documents
OLD = {(q, d): (int(q[1:]) + int(d[-1])) % 4 for q, docs in PAIRS.items() for d in docs}
NEW_PAIRS = {("q4", "d45")}  # left ungraded in the first round: the refresh's only new pair


def grade(round, rater, grades: dict) -> None:
    items = {(i.query.query_id, i.document.doc_id): i for i in round.items.select_related("query", "document", "round")}
    for key, value in grades.items():
        grading.record(items[key], rater, Verdict(grade=value))


def served_to(round, rater) -> list[tuple[str, str]]:
    """Every pair the grading screen hands the rater, grading each with grade 0 to move on."""
    served = []
    while (item := grading.next_item(round, rater)) is not None:
        served.append((item.query.query_id, item.document.doc_id))
        grading.record(item, rater, Verdict(grade=0))
    return served


@pytest.fixture
def v1(people):
    round = make_round(people.project, people.lead, [people.rater], PAIRS)
    grade(round, people.rater, {key: value for key, value in OLD.items() if key not in NEW_PAIRS})
    return versions.publish(round, user=people.lead)


def test_a_refresh_round_serves_only_the_pairs_the_version_does_not_label(people, v1):
    actions.save_guidelines(people.project, "# Rules, clarified", author=people.lead)
    refresh = rounds.create_refresh(v1, user=people.lead, rejudge=Round.Rejudge.KEEP)
    assert refresh.guidelines.number == 2 and refresh.status == Round.Status.DRAFT
    opened = rounds.open_round(refresh)
    assert (opened["added"], opened["carried"]) == (1, 19)
    assert served_to(refresh, people.rater) == [("q4", "d45")]
    client = people.client("lead")
    assert "19 of the round's 20 pairs keep their v1 label" in client.get(refresh.get_absolute_url()).content.decode()
    assert grading.kept_totals(refresh)["carried"] == refresh.items.filter(required=0).count() == 19  # kept, not counted per page
    v2 = versions.publish(refresh)
    assert (v2.number, v2.lineage_id, v2.n_pairs, v2.guidelines_number) == (2, v1.lineage_id, 20, 2)
    carried = versions.carried_labels(v2)
    assert all(carried[key] == value for key, value in OLD.items() if key not in NEW_PAIRS) and carried[("q4", "d45")] == 0
    assert versions.difference(v2)["totals"] == {"added": 1, "removed": 0, "changed": 0}
    assert versions.drift(refresh) is None


def test_re_judging_all_serves_every_pair_again(people, v1):
    refresh = rounds.create_refresh(v1, rejudge=Round.Rejudge.ALL)
    rounds.open_round(refresh)
    assert len(served_to(refresh, people.rater)) == 20


def test_a_sampled_re_judge_serves_a_seeded_sample_and_reports_kappa(client, people, v1):
    refresh = rounds.create_refresh(v1, rejudge=Round.Rejudge.SAMPLE, share=0.5)
    rounds.open_round(refresh)
    sample = versions.rejudge_sample(refresh, versions.carried_labels(v1))
    assert len(sample) == 10 and sample == versions.rejudge_sample(Round.objects.get(pk=refresh.pk), versions.carried_labels(v1))
    items = {(i.query.query_id, i.document.doc_id): i for i in refresh.items.select_related("query", "document", "round")}
    served = set()
    while (item := grading.next_item(refresh, people.rater)) is not None:
        key = (item.query.query_id, item.document.doc_id)
        served.add(key)
        # The new guidelines move some grades: one up on every other old pair.
        new = OLD[key] if key in NEW_PAIRS or sum(map(ord, key[1])) % 2 else min(3, OLD[key] + 1)
        grading.record(items[key], people.rater, Verdict(grade=new))
    assert served == sample | NEW_PAIRS
    kept = {(i.query.query_id, i.document.doc_id): i.old_label for i in refresh.items.select_related("query", "document")}
    assert kept == {key: (None if key in NEW_PAIRS else value) for key, value in OLD.items()}
    with mock.patch("judgments.ops.versions.open_stored", side_effect=AssertionError("the drift read a version's file")):
        found = versions.drift(refresh)  # from the labels kept on the old pairs judged again, not v1's file
    old = [OLD[key] for key in sorted(sample)]
    new = [versions.carried_labels(versions.publish(refresh))[key] for key in sorted(sample)]
    assert found["pairs"] == 10 and found["unchanged"] == sum(a == b for a, b in zip(old, new))
    assert found["kappa"] == pytest.approx(cohen_kappa_score(old, new, labels=[0, 1, 2, 3]))
    assert found["kappa_quadratic"] == pytest.approx(cohen_kappa_score(old, new, labels=[0, 1, 2, 3], weights="quadratic"))
    client.force_login(people.lead)
    page = client.get(refresh.get_absolute_url()).content.decode()
    assert f"{found['kappa']:.3f}" in page and "over the 10 old pairs judged again" in page


def test_a_lead_starts_a_refresh_from_the_version_page(client, people, v1):
    url = reverse("judgments:list-version-refresh", args=[people.project.slug, v1.uuid])
    client.force_login(people.viewer)
    assert client.post(url, {"rejudge": "sample", "share": "10"}).status_code == 403
    client.force_login(people.lead)
    assert client.get(url).status_code == 405
    assert "Start a refresh round from v1" in client.get(v1.get_absolute_url()).content.decode()
    response = client.post(url, {"rejudge": "sample", "share": "20"})
    refresh = Round.objects.get(refreshed_from=v1)
    assert response.url == refresh.get_absolute_url() and (refresh.rejudge, refresh.rejudge_share) == ("sample", 0.2)
    assert client.post(url, {"rejudge": "sample", "share": "0"}).status_code == 302
    assert Round.objects.filter(refreshed_from=v1).count() == 1
    client.force_login(people.outsider)
    assert client.post(url, {"rejudge": "keep", "share": "10"}).status_code == 404



def test_the_migration_gives_existing_refresh_rounds_their_old_labels(people, v1):
    from importlib import import_module

    from django.apps import apps

    refresh = rounds.create_refresh(v1, rejudge=Round.Rejudge.SAMPLE, share=0.5)
    rounds.open_round(refresh)
    laid_out = dict(refresh.items.values_list("pk", "old_label"))
    refresh.items.update(old_label=None)
    import_module("judgments.migrations.0021_flags_pages_and_old_labels").keep_old_labels(apps, None)
    assert dict(refresh.items.values_list("pk", "old_label")) == laid_out and sum(v is not None for v in laid_out.values()) == 19
    assert grading.kept_totals(refresh)["carried"] == 9  # the 19 old pairs but the 10 (half, rounded up) served again
