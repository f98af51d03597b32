"""Versioned rater guidelines: every edit a new version, rendered safely, diffable."""

from django.urls import reverse

from judgments.lib.guidelines import TEMPLATE, diff, render
from judgments.models import GuidelinesVersion
from judgments.ops import actions


def edit(people, text: str, note: str = ""):
    """Save from the edit form, as loaded now (it sends the version it started from)."""
    latest = people.project.guideline_versions.first()
    form = {"text": text, "note": note, "version": latest.number if latest else 0}
    return people.client("lead").post(reverse("judgments:guidelines-edit", args=[people.project.slug]), form)


def test_the_editor_starts_from_the_template_with_the_sections_that_matter(people):
    page = people.client("lead").get(reverse("judgments:guidelines-edit", args=[people.project.slug])).content.decode()
    for section in ("## Task", "information need", "3 Perfect", "0 Poor", "## Edge cases", "unrateable"):
        assert section in TEMPLATE and section.replace('"', "&quot;") in page


def test_every_edit_saves_a_new_version_with_author_and_note(people):
    edit(people, "# v1\nGrade by need.", "first")
    response = edit(people, "# v2\nGrade by need, not words.", "clarified")
    versions = list(GuidelinesVersion.objects.filter(project=people.project).order_by("number"))
    assert [(v.number, v.note, v.author) for v in versions] == [(1, "first", people.lead), (2, "clarified", people.lead)]
    assert response["Location"] == versions[1].get_absolute_url()
    assert versions[1].previous == versions[0]


def test_saving_unchanged_text_makes_no_new_version(people):
    edit(people, "same")
    url = reverse("judgments:guidelines-edit", args=[people.project.slug])
    response = people.client("lead").post(url, {"text": "same", "note": "", "version": 1}, follow=True)
    assert GuidelinesVersion.objects.count() == 1
    assert "Nothing changed: the guidelines are still version 1." in response.content.decode()


def test_every_member_reads_the_guidelines_and_only_the_lead_edits_them(people):
    edit(people, "# Rules\nBe **kind**.")
    url = reverse("judgments:guidelines", args=[people.project.slug])
    rater_page = people.client("rater").get(url).content.decode()
    assert "<strong>kind</strong>" in rater_page and "Edit (saves a new version)" not in rater_page
    edit_url = reverse("judgments:guidelines-edit", args=[people.project.slug])
    assert people.client("rater").post(edit_url, {"text": "hijack"}).status_code == 403
    assert people.client("viewer").get(edit_url).status_code == 403
    assert people.client("outsider").get(url).status_code == 404
    assert people.client("outsider").post(edit_url, {"text": "x"}).status_code == 404
    assert people.client("lead").delete(edit_url).status_code == 405
    assert GuidelinesVersion.objects.count() == 1


def test_a_version_page_shows_what_changed_since_the_previous_one(people):
    edit(people, "Grade 3: exact match\nGrade 0: unrelated")
    edit(people, "Grade 3: exact match or its variant\nGrade 0: unrelated")
    page = people.client("viewer").get(reverse("judgments:guidelines-version", args=[people.project.slug, 2])).content.decode()
    assert '<span class="diff-removed">-Grade 3: exact match</span>' in page
    assert '<span class="diff-added">+Grade 3: exact match or its variant</span>' in page
    assert people.client("viewer").get(reverse("judgments:guidelines-version", args=[people.project.slug, 9])).status_code == 404


def test_markdown_is_rendered_without_raw_html_scripts_or_javascript_links():
    html = render('# Title\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(1)> [click](javascript:alert(1)) [ok](https://example.com)')
    assert "<h1>Title</h1>" in html
    assert "<script" not in html and "<img" not in html and "javascript:" not in html
    assert "&lt;script&gt;" in html  # shown as text
    assert 'href="https://example.com"' in html


def test_a_page_never_passes_raw_html_through(people):
    edit(people, '<script>document.title="owned"</script>\n\nText')
    page = people.client("rater").get(reverse("judgments:guidelines", args=[people.project.slug])).content.decode()
    assert '<script>document.title' not in page


def test_two_saves_get_consecutive_numbers(people):
    first, _ = actions.save_guidelines(people.project, "a", author=people.lead)
    second, _ = actions.save_guidelines(people.project, "b", author=people.lead)
    assert (first.number, second.number) == (1, 2)


def test_the_diff_marks_added_and_removed_lines():
    assert diff("a\nb", "a\nc", "v1", "v2") == [("hunk", "@@ -1,2 +1,2 @@"), ("same", " a"), ("removed", "-b"), ("added", "+c")]
