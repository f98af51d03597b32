from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import access
from ..forms import CorpusUploadForm, DisplayFieldFormSet, SearchParams, page_of, query_params
from .uploads import upload_view


@require_GET
def corpus(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    documents = project.documents.corpus().order_by("doc_id")
    search = query_params(SearchParams(request.GET))["q"]
    if search:
        documents = documents.filter(doc_id__startswith=search)
    context = {
        "project": project,
        "membership": membership,
        "page": page_of(request, documents, 25),
        "document_count": project.documents.corpus().count(),
        "search": search,
        "display_fields": project.display_fields.all(),
        "template_forms": DisplayFieldFormSet(queryset=project.display_fields.all()) if membership.can_manage else None,
        "known_fields": _known_fields(project),
    }
    return TemplateResponse(request, "judgments/corpus.html", context)


def _known_fields(project) -> list[str]:
    """Field names seen in a sample of the corpus, offered when building the display template."""
    names: dict[str, None] = {}
    for fields in project.documents.corpus().values_list("fields", flat=True)[:200]:
        names.update(dict.fromkeys(fields))
    return list(names)


@require_http_methods(["GET", "POST"])
def corpus_import(request: HttpRequest, slug: str) -> HttpResponse:
    return upload_view(request, slug, kind="import_corpus", title="Import corpus documents",
                       make_form=lambda data, files, project: CorpusUploadForm(data, files))


@require_POST
def display_template(request: HttpRequest, slug: str) -> HttpResponse:
    """Save which document fields raters see, in which order, and how each is rendered."""
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    formset = DisplayFieldFormSet(request.POST, queryset=project.display_fields.all())
    if formset.is_valid():
        formset.save(commit=False)
        for removed in formset.deleted_objects:
            removed.delete()
        for line in formset.new_objects + [changed for changed, _fields in formset.changed_objects]:
            line.project = project
            line.save()
        messages.success(request, "Display template saved.")
    else:
        messages.error(request, "The display template was not saved: " + "; ".join(
            f"{field}: {' '.join(errors)}" for form_errors in formset.errors for field, errors in form_errors.items()
        ) + " ".join(formset.non_form_errors()))
    return redirect("judgments:corpus", project.slug)


@require_GET
def document(request: HttpRequest, slug: str, doc_id: str) -> TemplateResponse:
    found, membership = access.document_for_user(request.user, slug, doc_id, "can_read_reports")
    project = found.project
    context = {"project": project, "membership": membership, "document": found,
               "shown": found.display(project.display_fields.all())}
    return TemplateResponse(request, "judgments/document.html", context)
