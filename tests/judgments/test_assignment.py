"""The assignment rules: which pair a rater gets next, and how many judgments each pair gets."""

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from judgments.models import Claim, Judgment, JudgmentEdit, Round
from judgments.ops import grading, rounds
from judgments.ops.actions import ActionRefused
from judgments.ops.grading import GradingRefused, Verdict
from tests.factory import Role, add_member, make_round, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def raters(people):
    second = make_user("rosa")
    third = make_user("rico")
    add_member(people.project, second, Role.RATER)
    add_member(people.project, third, Role.RATER)
    return [people.rater, second, third]


def grade_all(round, rater, grade=1) -> list:
    """Let the rater judge until nothing is left; the pairs in the order they were served."""
    served = []
    while (item := grading.next_item(round, rater)) is not None:
        served.append(item)
        grading.record(item, rater, Verdict(grade=grade))
    return served


def test_the_overlap_share_of_pairs_needs_two_judgments_and_the_rest_one(people, raters):
    pairs = {f"q{q}": [f"d{q}-{d}" for d in range(10)] for q in range(20)}
    round = make_round(people.project, people.lead, raters, pairs, overlap_share=0.15)
    required = list(round.items.values_list("required", flat=True))
    assert len(required) == 200
    assert required.count(2) == 30 and required.count(1) == 170


def test_the_overlap_is_reproducible_from_the_round_seed(people, raters):
    first = rounds.required_judgments(1000, 1, 0.15, random.Random("7:0"))
    assert first == rounds.required_judgments(1000, 1, 0.15, random.Random("7:0"))
    assert first != rounds.required_judgments(1000, 1, 0.15, random.Random("8:0"))


@pytest.mark.parametrize("share", [0.05, 0.25])
def test_an_overlap_share_outside_ten_to_twenty_percent_is_refused(people, raters, share):
    with pytest.raises(ActionRefused, match="between 10% and 20%"):
        make_round(people.project, people.lead, raters, overlap_share=share)


def test_with_n_raters_per_pair_every_pair_gets_n_independent_judgments(people, raters):
    round = make_round(people.project, people.lead, raters, raters_per_pair=3)
    for rater in raters:
        assert len(grade_all(round, rater)) == 12
    assert set(round.items.values_list("n_judged", flat=True)) == {3}
    assert Judgment.objects.filter(item__round=round).count() == 36


def test_a_round_cannot_open_with_fewer_raters_than_a_pair_needs(people, raters):
    round = make_round(people.project, people.lead, raters[:2], raters_per_pair=3, open=False)
    with pytest.raises(ActionRefused, match="3 independent judgments but the round has 2"):
        rounds.open_round(round)


def test_no_rater_ever_gets_the_same_pair_twice(people, raters):
    round = make_round(people.project, people.lead, raters, raters_per_pair=2)
    served = {rater.pk: [item.pk for item in grade_all(round, rater)] for rater in raters}
    for items in served.values():
        assert len(items) == len(set(items))
    assert sum(len(items) for items in served.values()) == 24  # 12 pairs x 2 judgments, never more


def test_a_pair_needing_one_judgment_goes_to_one_rater_only(people, raters):
    round = make_round(people.project, people.lead, raters)
    first = [grading.next_item(round, rater) for rater in raters]
    assert len({item.pk for item in first}) == 3  # claimed pairs are not served to others
    assert sum(len(grade_all(round, rater)) for rater in raters) == 12
    assert list(round.items.values_list("n_judged", flat=True)) == [1] * 12


def test_fewest_judgments_come_first_then_pool_priority_within_the_query(people, raters):
    round = make_round(people.project, people.lead, raters, raters_per_pair=2)
    order = [(item.query.query_id, item.pair.doc_id) for item in grade_all(round, raters[0])]
    queries = [qid for qid, _ in order]
    assert [queries[i] for i in (0, 4, 8)] == sorted(set(queries), key=queries.index)
    for start in (0, 4, 8):  # one query at a time, best-ranked document first
        docs = [doc for _, doc in order[start:start + 4]]
        assert docs == sorted(docs)
    # The second rater now finds every pair at one judgment and still gets all twelve.
    assert len(grade_all(round, raters[1])) == 12


def test_a_rater_stays_on_their_query_until_its_pairs_are_done(people, raters):
    round = make_round(people.project, people.lead, raters)
    item = grading.next_item(round, raters[0])
    grading.record(item, raters[0], Verdict(grade=2))
    following = [grading.next_item(round, raters[0]) for _ in range(1)]
    assert following[0].query_id == item.query_id


def test_shuffled_order_mixes_queries_but_still_serves_everything_once(people, raters):
    pairs = {f"q{q}": [f"d{q}-{d}" for d in range(6)] for q in range(6)}
    round = make_round(people.project, people.lead, raters, pairs, order=Round.Order.SHUFFLED)
    served = grade_all(round, raters[0])
    queries = [item.query_id for item in served]
    assert len(served) == 36 and len({item.pk for item in served}) == 36
    switches = sum(1 for a, b in zip(queries, queries[1:]) if a != b)
    assert switches > 10  # grouped order would switch 5 times


def test_the_pair_on_screen_stays_the_same_until_it_is_answered(people, raters):
    round = make_round(people.project, people.lead, raters)
    first = grading.next_item(round, raters[0])
    assert grading.next_item(round, raters[0]).pk == first.pk


def test_a_pair_left_on_screen_past_the_hold_goes_to_someone_else(people, raters, settings):
    round = make_round(people.project, people.lead, raters, {"q1": ["d1"]})
    item = grading.next_item(round, raters[0])
    assert grading.next_item(round, raters[1]) is None
    Claim.objects.filter(item=item).update(since=timezone.now() - timedelta(seconds=settings.GRADING_HOLD_SECONDS + 1))
    assert grading.next_item(round, raters[1]).pk == item.pk


def test_judge_later_comes_back_after_the_rest_and_is_not_a_judgment(people, raters):
    round = make_round(people.project, people.lead, raters)
    put_off = grading.next_item(round, raters[0])
    grading.put_off(put_off, raters[0])
    assert not Judgment.objects.exists()
    put_off.refresh_from_db()
    assert put_off.n_judged == 0
    served = grade_all(round, raters[0])
    assert served[-1].pk == put_off.pk and len(served) == 12
    assert [item.pk for item in served].count(put_off.pk) == 1


def test_a_pair_put_off_stays_in_its_raters_queue_and_not_in_others(people, raters):
    round = make_round(people.project, people.lead, raters)
    put_off = grading.next_item(round, raters[0])
    grading.put_off(put_off, raters[0])
    assert put_off.pk not in {item.pk for item in grade_all(round, raters[1])}


def test_unrateable_counts_for_coverage_and_keeps_its_reason(people, raters):
    round = make_round(people.project, people.lead, raters, {"q1": ["d1", "d2"]})
    item = grading.next_item(round, raters[0])
    grading.record(item, raters[0], Verdict(unrateable="login_wall"))
    item.refresh_from_db()
    assert item.n_judged == 1
    judgment = Judgment.objects.get()
    assert judgment.grade is None and judgment.unrateable == "login_wall"
    assert not Judgment.objects.grades().exists()


def test_unrateable_for_another_reason_needs_the_reason_written(people, raters):
    round = make_round(people.project, people.lead, raters)
    item = grading.next_item(round, raters[0])
    with pytest.raises(GradingRefused, match="Say what makes"):
        grading.record(item, raters[0], Verdict(unrateable="other"))
    grading.record(item, raters[0], Verdict(unrateable="other", unrateable_note="Shows a cookie wall in Dutch"))


def test_a_grade_outside_the_scale_is_refused(people, raters):
    round = make_round(people.project, people.lead, raters)
    with pytest.raises(GradingRefused, match="not a grade"):
        grading.record(grading.next_item(round, raters[0]), raters[0], Verdict(grade=4))


def test_a_repeated_submit_keeps_one_judgment_and_a_change_keeps_history(people, raters):
    round = make_round(people.project, people.lead, raters)
    item = grading.next_item(round, raters[0])
    grading.record(item, raters[0], Verdict(grade=2))
    seconds = Judgment.objects.get().seconds
    _, created = grading.record(item, raters[0], Verdict(grade=2))
    assert not created and Judgment.objects.count() == 1 and not JudgmentEdit.objects.exists()
    grading.record(item, raters[0], Verdict(grade=3))
    edit = JudgmentEdit.objects.get()
    assert (edit.old_grade, edit.new_grade, edit.editor, edit.rater) == (2, 3, raters[0], raters[0])
    judgment = Judgment.objects.get()
    assert judgment.grade == 3 and judgment.seconds == seconds and 0 <= seconds < 60
    item.refresh_from_db()
    assert item.n_judged == 1


def test_back_opens_the_raters_judgments_latest_first(people, raters):
    round = make_round(people.project, people.lead, raters)
    served = [item for item in grade_all(round, raters[0])][:3]
    latest = grading.previous_judgment(round, raters[0])
    assert latest.item_id == round.items.get(pk=latest.item_id).pk
    before = grading.previous_judgment(round, raters[0], before=latest)
    assert before.created_at <= latest.created_at and before.pk != latest.pk
    assert grading.previous_judgment(round, raters[1]) is None
    assert served


def test_a_full_pair_is_refused_to_a_rater_who_was_not_given_it(people, raters):
    round = make_round(people.project, people.lead, raters, {"q1": ["d1"]})
    item = grading.next_item(round, raters[0])
    grading.record(item, raters[0], Verdict(grade=1))
    with pytest.raises(GradingRefused, match="already has all the judgments"):
        grading.record(item, raters[1], Verdict(grade=0))


def test_a_late_answer_after_the_hold_ran_out_is_still_kept(people, raters, settings):
    round = make_round(people.project, people.lead, raters, {"q1": ["d1"]})
    item = grading.next_item(round, raters[0])
    Claim.objects.filter(item=item).update(since=timezone.now() - timedelta(seconds=settings.GRADING_HOLD_SECONDS + 1))
    grading.record(grading.next_item(round, raters[1]), raters[1], Verdict(grade=1))
    grading.record(item, raters[0], Verdict(grade=2))  # never lose a grade a rater gave
    assert Judgment.objects.filter(item=item).count() == 2


def test_a_closed_round_takes_no_judgments(people, raters):
    round = make_round(people.project, people.lead, raters)
    item = grading.next_item(round, raters[0])
    rounds.close_round(round)
    round.refresh_from_db()
    item.round = round
    with pytest.raises(GradingRefused, match="closed"):
        grading.record(item, raters[0], Verdict(grade=1))


def test_reassigning_hands_a_raters_pairs_to_another(people, raters):
    round = make_round(people.project, people.lead, raters)
    shown = grading.next_item(round, raters[0])
    grading.put_off(shown, raters[0])
    other = grading.next_item(round, raters[0])
    assert rounds.reassign(round, raters[0], raters[1]) == 2
    assert not Claim.objects.filter(rater=raters[0]).exists()
    handed = {grading.next_item(round, raters[1]).pk}
    grading.record(round.items.get(pk=handed.pop()), raters[1], Verdict(grade=1))
    handed.add(grading.next_item(round, raters[1]).pk)
    assert {shown.pk, other.pk} & (handed | set(Judgment.objects.filter(rater=raters[1]).values_list("item", flat=True))) == {shown.pk, other.pk}


def test_resetting_flags_frees_put_off_pairs_and_reopens_unrateable_ones(people, raters):
    round = make_round(people.project, people.lead, raters, {"q1": ["d1", "d2"]})
    first = grading.next_item(round, raters[0])
    grading.record(first, raters[0], Verdict(unrateable="broken"))
    second = grading.next_item(round, raters[0])
    grading.put_off(second, raters[0])
    assert rounds.reset_flags(round, later=True, unrateable=True, by=people.lead) == {"later": 1, "unrateable": 1}
    assert not Judgment.objects.exists() and not Claim.objects.exists()
    edit = JudgmentEdit.objects.get()
    assert (edit.old_unrateable, edit.new_unrateable, edit.editor) == ("broken", "", people.lead)
    assert {item.pk for item in grade_all(round, raters[1])} == {first.pk, second.pk}


def test_the_scale_cannot_change_once_the_round_has_judgments(people, raters):
    from judgments.lib.scales import BINARY

    round = make_round(people.project, people.lead, raters)
    rounds.update_round(round, scale=BINARY)  # no judgments yet
    grading.record(grading.next_item(round, raters[0]), raters[0], Verdict(grade=1))
    with pytest.raises(ActionRefused, match="scale cannot change"):
        rounds.update_round(round, scale=rounds.Scale.from_json({"kind": "graded", "grades": [
            {"value": 0, "label": "No"}, {"value": 1, "label": "Yes"}, {"value": 2, "label": "Very"}]}))


def test_gold_accuracy_is_reported_per_rater(people, raters):
    round = make_round(people.project, people.lead, raters, {"q1": ["d1", "d2", "d3", "d4"]}, raters_per_pair=2)
    items = list(round.items.order_by("pk"))
    for item, gold in zip(items, [3, 0, 2]):
        rounds.set_gold(item, gold)
    for item in grade_all(round, raters[0], grade=3):
        pass
    for item in grade_all(round, raters[1], grade=0):
        pass
    report = {row["rater"].username: row for row in rounds.rater_report(round)}
    assert (report["ravi"]["gold"], report["ravi"]["gold_right"]) == (3, 1)
    assert (report["rosa"]["gold"], report["rosa"]["gold_right"]) == (3, 1)
    assert report["rico"]["gold_accuracy"] is None and report["ravi"]["graded"] == 4
