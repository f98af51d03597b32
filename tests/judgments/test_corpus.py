"""The corpus: importing and re-importing documents, the display template raters see."""

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from judgments.models import DisplayField, Document, Job
from tests.factory import run_queued_jobs, upload

DOCS = b'{"doc_id": "p1", "title": "Trail tent", "price": 199, "url": "https://shop.example/p1"}\n{"doc_id": "p2", "title": "Rain jacket", "price": 89}\n'


def import_docs(people, data: bytes, name: str = "docs.jsonl") -> Job:
    people.client("lead").post(reverse("judgments:corpus-import", args=[people.project.slug]), {"file": upload(name, data)})
    [job] = run_queued_jobs()
    return job


def test_a_lead_imports_documents_with_any_fields(people):
    job = import_docs(people, DOCS)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.result["added"] == 2
    assert Document.objects.get(project=people.project, doc_id="p1").fields == {"title": "Trail tent", "price": 199, "url": "https://shop.example/p1"}


def test_a_reimport_updates_changed_documents_adds_new_ones_and_counts_them(people):
    import_docs(people, DOCS)
    job = import_docs(people, b"doc_id,title,price\np1,Trail tent,149\np2,Rain jacket,89\np3,Stove,40\n", "docs.csv")
    assert {k: job.result[k] for k in ("added", "updated", "unchanged")} == {"added": 1, "updated": 2, "unchanged": 0}
    job = import_docs(people, b"doc_id,title,price\np1,Trail tent,149\n", "again.csv")
    assert {k: job.result[k] for k in ("added", "updated", "unchanged")} == {"added": 0, "updated": 0, "unchanged": 1}
    assert Document.objects.get(doc_id="p1").fields["price"] == "149"


def test_a_bad_line_late_in_the_file_leaves_the_corpus_untouched(people):
    import_docs(people, DOCS)
    lines = b"".join(b'{"doc_id": "n%d", "title": "x"}\n' % i for i in range(6000)) + b'{"doc_id": "n1"}\n'
    job = import_docs(people, lines)
    assert job.state == Job.State.FAILED
    assert "docs.jsonl:6001: doc_id 'n1' was already used on line 2" in job.error
    assert Document.objects.filter(project=people.project).count() == 2


def test_the_display_template_decides_what_raters_see(people):
    import_docs(people, DOCS)
    client = people.client("lead")
    form = {
        "form-TOTAL_FORMS": "2", "form-INITIAL_FORMS": "0",
        "form-0-field": "title", "form-0-label": "Product", "form-0-render": "text", "form-0-order": "1",
        "form-1-field": "url", "form-1-label": "Shop page", "form-1-render": "link", "form-1-order": "2",
    }
    client.post(reverse("judgments:display-template", args=[people.project.slug]), form)
    assert list(DisplayField.objects.filter(project=people.project).values_list("field", "label", "render")) == [
        ("title", "Product", "text"), ("url", "Shop page", "link")]
    page = client.get(reverse("judgments:document", args=[people.project.slug, "p1"])).content.decode()
    assert "Product" in page and 'href="https://shop.example/p1"' in page
    assert "199" not in page  # price is not in the template


def test_a_field_listed_twice_is_refused(people):
    form = {
        "form-TOTAL_FORMS": "2", "form-INITIAL_FORMS": "0",
        "form-0-field": "title", "form-0-label": "A", "form-0-render": "text", "form-0-order": "1",
        "form-1-field": "title", "form-1-label": "B", "form-1-render": "text", "form-1-order": "2",
    }
    response = people.client("lead").post(reverse("judgments:display-template", args=[people.project.slug]), form, follow=True)
    assert "listed twice" in response.content.decode()
    assert not DisplayField.objects.exists()


def test_the_import_corpus_command_reports_counts_and_bad_input(people, tmp_path, capsys):
    good = tmp_path / "docs.jsonl"
    good.write_bytes(DOCS)
    call_command("import_corpus", people.project.slug, str(good))
    assert "2 added, 0 updated, 0 unchanged" in capsys.readouterr().out
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(CommandError, match="empty.csv: the file is empty"):
        call_command("import_corpus", people.project.slug, str(empty))


def test_a_link_field_never_renders_a_javascript_url(people):
    import io

    from judgments.ops.imports import import_corpus

    import_corpus(people.project, io.BytesIO(b'{"doc_id": "evil", "url": "javascript:alert(1)", "img": "javascript:x"}\n'), "d.jsonl")
    DisplayField.objects.create(project=people.project, field="url", label="Link", render="link", order=1)
    DisplayField.objects.create(project=people.project, field="img", label="Picture", render="image", order=2)
    page = people.client("lead").get(reverse("judgments:document", args=[people.project.slug, "evil"])).content.decode()
    assert 'href="javascript' not in page and 'src="javascript' not in page
    assert "javascript:alert(1)" in page  # shown as text
