"""Free text a person posts has a ceiling: a rater's note, an unrateable reason, descriptions, query text,
guidelines, custom scales. Over it, the form says so and nothing is stored; the grading screen keeps
what the rater typed and shows the limit."""

import inspect
import re

import pytest
from django import forms
from django.urls import reverse

import evaluation.forms
import judgments.forms
from judgments.models import GuidelinesVersion, Judgment, Project, Query, QueryCollection
from judgments.ops.grading import NOTE_MAX_LENGTH
from tests.factory import make_round, upload

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def all_forms():
    for module in (judgments.forms, evaluation.forms):
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, forms.BaseForm) and value.__module__ == module.__name__:
                yield f"{module.__name__}.{name}", value


def test_every_text_field_of_every_form_has_a_maximum_length():
    unbounded = [f"{form_name}.{field_name}" for form_name, form in all_forms() for field_name, field in form.base_fields.items()
                 if type(field) in (forms.CharField, judgments.forms.MultilineField) and field.max_length is None]
    assert not unbounded, f"free text without a limit: {unbounded}"


@pytest.fixture
def round(people):
    return make_round(people.project, people.lead, [people.rater])


def grade_screen(client, round):
    response = client.get(reverse("judgments:grade", args=[round.project.slug, round.uuid]))
    item = re.search(r'data-item="([^"]+)"', response.content.decode()).group(1)
    return response, reverse("judgments:grade-item", args=[round.project.slug, round.uuid, item])


def test_a_note_over_the_limit_is_refused_and_given_back_to_the_rater(people, round):
    client = people.client("rater")
    _, url = grade_screen(client, round)
    note = "why " * 600  # 2,400 characters

    response = client.post(url, {"grade": "2", "note": note}, **HTMX)

    page = response.content.decode()
    assert "The explanation is 2,399 characters long; the limit is 2,000" in page
    assert note.strip() in page  # the rater shortens it instead of typing it again
    assert not Judgment.objects.exists()


def test_a_note_at_the_limit_counts_a_line_break_once_as_the_browser_does(people, round):
    client = people.client("rater")
    _, url = grade_screen(client, round)
    note = ("x" * 99 + "\r\n") * 20  # 2,000 characters in the box, 2,020 as sent

    client.post(url, {"grade": "2", "note": note}, **HTMX)

    assert Judgment.objects.get().note == ("x" * 99 + "\n") * 19 + "x" * 99


def test_an_unrateable_reason_over_the_limit_is_refused_not_cut(people, round):
    client = people.client("rater")
    _, url = grade_screen(client, round)

    response = client.post(url, {"unrateable": "other", "unrateable_note": "r" * 301}, **HTMX)

    assert "The reason is 301 characters long; the limit is 300" in response.content.decode()
    assert not Judgment.objects.exists()


def test_the_screen_limits_the_boxes_and_shows_the_limit(people, round):
    page = grade_screen(people.client("rater"), round)[0].content.decode()
    assert f'maxlength="{NOTE_MAX_LENGTH}"' in page and "Up to 2,000 characters." in page
    assert 'name="unrateable_note" maxlength="300"' in page


def test_long_descriptions_and_query_texts_are_refused_by_their_forms(people, settings):
    settings.PROJECT_CREATION = "anyone"
    client, slug = people.client("lead"), people.project.slug
    collection = QueryCollection.objects.create(project=people.project, name="Manual")

    cases = [
        (reverse("judgments:project-settings", args=[slug]), {"name": "Shop", "slug": slug, "description": "d" * 2_001,
                                                                  "version": people.project.version}),
        (reverse("judgments:project-create"), {"name": "Other", "description": "d" * 2_001}),
        (reverse("judgments:query-set-create", args=[slug]), {"name": "New", "description": "d" * 2_001}),
        (reverse("judgments:query-add", args=[slug, collection.uuid]), {"query_id": "q1", "text": "t" * 4_001}),
        (reverse("judgments:query-add", args=[slug, collection.uuid]), {"query_id": "q1", "text": "t", "information_need": "n" * 10_001}),
        (reverse("judgments:guidelines-edit", args=[slug]), {"text": "g" * 200_001}),
        (reverse("judgments:run-upload", args=[slug]), {"name": "r", "system": "s", "description": "d" * 2_001,
                                                         "file": upload("r.run", b"q1 Q0 d1 1 1.0 s\n")}),
    ]
    for url, data in cases:
        response = client.post(url, data)
        assert response.status_code == 200, url
        assert "Ensure this value has at most" in response.content.decode(), url
    assert Project.objects.get(slug=slug).description == "Product search judgments"
    assert not Query.objects.exists() and not GuidelinesVersion.objects.exists()
    assert QueryCollection.objects.count() == 1 and Project.objects.count() == 2


def test_a_description_at_the_limit_counts_a_line_break_once(people):
    description = ("d" * 99 + "\r\n") * 20
    people.client("lead").post(reverse("judgments:project-settings", args=[people.project.slug]),
                               {"name": "Shop", "slug": people.project.slug, "description": description,
                                "version": people.project.version})
    assert Project.objects.get(pk=people.project.pk).description == ("d" * 99 + "\n") * 19 + "d" * 99
