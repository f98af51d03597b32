"""A round's labels state (judgment_files.labels_state) changes with every write that can change its final labels,
whoever makes it (the grading screen, imports, the ORM in bulk, raw SQL: database triggers write it), and with
nothing else; equal states give equal exports. Pruning keeps each round's newest change only."""

import pytest
from django.db import connection

from judgments.models import Adjudication, Document, Judgment, LabelsChange, Query, Round
from judgments.ops import grading, judgment_files, rounds
from judgments.ops.grading import Verdict
from judgments.ops.judgment_files import labels_state, prune_labels_changes
from tests.factory import make_round
from tests.judgments.test_round_counters import raters  # noqa: F401 (ravi and rosa, raters of the project)

pytestmark = pytest.mark.django_db


def exported(round: Round) -> str:
    round.refresh_from_db()
    return "".join(judgment_files.export(round, "consensus-csv"))


class Watch:
    """The round's state and export before a step, to compare with after it."""

    def __init__(self, round: Round):
        self.round = round
        self.state, self.export = labels_state(round), exported(round)

    def changed(self) -> bool:
        state, export = labels_state(self.round), exported(self.round)
        if state == self.state:
            assert export == self.export, "the labels changed but their state did not"
        changed = state != self.state
        self.state, self.export = state, export
        return changed


def test_every_write_to_a_round_s_labels_changes_its_state(people, raters):
    round = make_round(people.project, people.lead, raters, raters_per_pair=2)
    first, second = list(round.items.select_related("query", "document").order_by("pk")[:2])
    watch = Watch(round)

    grading.record(first, raters[0], Verdict(grade=0))
    assert watch.changed()
    grading.record(first, raters[1], Verdict(grade=3))
    assert watch.changed()
    grading.record(first, raters[1], Verdict(grade=2))  # a changed grade
    assert watch.changed()
    grading.record(second, raters[0], Verdict(unrateable="broken"))  # a flag: no label, still a write to them
    assert watch.changed()
    rounds.reset_flags(round, unrateable=True, by=people.lead)
    assert watch.changed()

    Adjudication.objects.create(item=first, grade=1, lead=people.lead)
    assert watch.changed()
    Adjudication.objects.filter(item=first).update(grade=3)
    assert watch.changed()
    Adjudication.objects.filter(item=first).delete()
    assert watch.changed()

    Judgment.objects.filter(item=first, rater=raters[1]).delete()
    assert watch.changed()
    Judgment.objects.bulk_create([Judgment(item=second, rater=raters[1], grade=1)])
    assert watch.changed()
    with connection.cursor() as cursor:  # a write no Django code path makes is seen too
        cursor.execute("UPDATE judgments_judgment SET grade = 3 WHERE item_id = %s", [second.pk])
    assert watch.changed()

    report = judgment_files.import_judgments(round, f"{first.query.query_id} 0 {first.document.doc_id} 1\n".encode(), "more.qrels",
                                             rater="rosa")
    assert report.changed or report.added
    assert watch.changed()

    Query.objects.filter(pk=first.query_id).update(text="a new wording")
    assert watch.changed()
    Document.objects.filter(pk=first.document_id).update(doc_id="d-renamed")
    assert watch.changed()

    round.consensus_rule = Round.Consensus.MEAN
    round.save(update_fields=["consensus_rule"])
    assert watch.changed()


def test_writes_elsewhere_leave_a_round_s_state_alone(people, raters):
    round = make_round(people.project, people.lead, raters)
    other = make_round(people.project, people.lead, raters, {"q9": ["d91", "d92"]}, name="Round 2")
    grading.record(round.items.first(), raters[0], Verdict(grade=2))
    watch = Watch(round)

    grading.record(other.items.first(), raters[0], Verdict(grade=1))  # another round's grade
    assert grading.next_item(round, raters[1]) is not None  # a pair shown (a claim) is not a label
    Document.objects.filter(pk=other.items.first().document_id).update(fields={"title": "changed"})  # on no pair of this round
    assert not watch.changed()


def test_pruning_keeps_each_round_s_newest_change_and_so_its_state(people, raters):
    round = make_round(people.project, people.lead, raters, raters_per_pair=2)
    other = make_round(people.project, people.lead, raters, name="Round 2")
    for item in round.items.all()[:3]:
        grading.record(item, raters[0], Verdict(grade=1))
    grading.record(other.items.first(), raters[0], Verdict(grade=1))
    states = labels_state(round), labels_state(other)
    assert LabelsChange.objects.filter(round_id=round.pk).count() >= 3

    assert prune_labels_changes(other) == 0 and LabelsChange.objects.filter(round_id=round.pk).count() >= 3
    assert prune_labels_changes() >= 2
    kept = LabelsChange.objects.filter(round_id__in=[round.pk, other.pk]).values_list("round_id", flat=True)
    assert sorted(kept) == sorted([round.pk, other.pk])
    assert (labels_state(round), labels_state(other)) == states
