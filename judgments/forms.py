import json
import re
from dataclasses import dataclass

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import BadRequest
from django.core.paginator import Page, Paginator
from django.http import HttpRequest

from .lib.guidelines import diff
from .lib.sampling import DEFAULT_QUOTAS, Boundaries, Quota
from .lib.scales import FAITHFULNESS_PRESETS, PRESETS, ScaleError, custom_text, parse_custom
from .models import AnswerRun, DisplayField, GuidelinesVersion, Pool, Project, Query, QueryCollection, Role, Round, StoredRun
from .ops.actions import ActionRefused
from .ops.judgment_files import FORMATS, SOURCES, ExportOptions
from .ops.log_sampling import SamplingSettings
from .ops.pools import PoolRefused, check_runs_match
from .ops.rounds import check_judging_order, check_pool_has_pairs


@dataclass(frozen=True)
class Difference:
    """A field whose input differs from what another edit saved meanwhile; long texts come as a line diff."""

    label: str
    yours: str
    saved: str
    lines: list[tuple[str, str]] | None = None


def _shown(field: forms.Field, value) -> str:
    """A form value as a lead reads it: a choice's label, yes or no, or the text itself."""
    if isinstance(field, forms.BooleanField):
        return "yes" if field.to_python(value) else "no"
    values = [str(v) for v in (value if isinstance(value, (list, tuple)) else [value]) if v not in (None, "")]
    if isinstance(field, forms.ChoiceField):  # labels, in the order the form lists them
        values = [str(label) for key, label in field.choices if str(key) in values]
    return ", ".join(values) or "(empty)"


class VersionedForm:
    """Mixed into a form that edits a Versioned object, or the guidelines (whose versions are numbered).

    The version the lead loaded travels in a hidden field. When saving raises EditConflict (someone saved
    in between), `show_conflict` lists field by field where the input differs from what is saved now, and
    the form then carries the saved version: saving again puts the lead's input on top of it.
    """

    conflict: list[Difference] | None = None

    def add_version_field(self, loaded: int | None) -> None:
        """`loaded`: the edited object's version, None when the form creates an object (no field then)."""
        self.loaded = loaded
        if loaded is not None:
            self.fields["version"] = forms.IntegerField(widget=forms.HiddenInput, initial=loaded, required=False)

    def clean_version(self) -> int | None:
        version = self.cleaned_data["version"]
        if version is None:
            # A page from before versions were sent: what it started from is unknown, so nothing is
            # saved; the form now carries the version saved now, for the lead to check and save again.
            self.add_error(None, "This form came from an older page: check your input against the saved values, then save again.")
            self.data = self.data.copy()
            self.data[self.add_prefix("version")] = self.loaded
        return version

    def saved_values(self, current) -> dict:
        """The object as saved now, as this form's initial values."""
        return forms.model_to_dict(current, fields=list(self.fields))

    def saved_version(self, current) -> int:
        return current.version

    def save_edit(self):
        """A ModelForm's save, refused with EditConflict when the instance changed since the form was loaded."""
        self.instance.save_edit(self.cleaned_data["version"], self._meta.fields)
        return self.instance

    def show_conflict(self, current) -> None:
        saved = self.saved_values(current)
        self.conflict = [self._difference(name, saved[name]) for name, field in self.fields.items()
                         if name in saved and not field.disabled and field.has_changed(saved[name], self[name].data)]
        self.data = self.data.copy()
        self.data[self.add_prefix("version")] = self.saved_version(current)

    @property
    def conflicting_values(self) -> list[Difference]:
        return [row for row in self.conflict or () if row.lines is None]

    @property
    def conflicting_texts(self) -> list[Difference]:
        return [row for row in self.conflict or () if row.lines is not None]

    def _difference(self, name: str, saved) -> Difference:
        field, yours, label = self.fields[name], self[name].data, str(self[name].label)
        if isinstance(field.widget, forms.Textarea):
            return Difference(label, yours, saved, diff(saved or "", yours or "", "saved now", "your input"))
        return Difference(label, _shown(field, yours), _shown(field, saved))


# Free text people type is kept whole, so every such field has a ceiling. The database columns are TEXT:
# the limits live here, where the message can say what to do.
DESCRIPTION_MAX_LENGTH = 2_000
QUERY_TEXT_MAX_LENGTH = 4_000
INFORMATION_NEED_MAX_LENGTH = 10_000
REFERENCES_MAX_LENGTH = 50_000
GUIDELINES_MAX_LENGTH = 200_000


class MultilineField(forms.CharField):
    """Text in a textarea. Browsers count a line break as one character against maxlength but send it as
    two (CRLF): it is kept as one, so that the limit allows what the box allowed."""

    widget = forms.Textarea

    def to_python(self, value) -> str:
        return super().to_python(value).replace("\r\n", "\n")


class ReferencesField(MultilineField):
    """A query's reference texts in one box, separated by a blank line (a reference may span lines)."""

    def prepare_value(self, value):
        return "\n\n".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:
        return [text.strip() for text in re.split(r"\n[ \t]*\n", super().to_python(value)) if text.strip()]

    def validate(self, value) -> None:
        super().validate("\n\n".join(value))


def description_field(rows: int = 2) -> forms.CharField:
    return MultilineField(required=False, max_length=DESCRIPTION_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": rows}))


class ProjectForm(VersionedForm, forms.ModelForm):
    description = description_field(rows=10)

    class Meta:
        model = Project
        fields = ["name", "slug", "description", "gate_run_days"]
        help_texts = {"slug": "Used in the project's web address. Leave empty to derive it from the name."}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["slug"].required = False
        self.add_version_field(self.instance.version if self.instance.pk else None)

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if slug and Project.objects.filter(slug=slug).exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError("Another project already uses this address.")
        return slug


class InviteForm(forms.Form):
    email = forms.EmailField(label="E-mail", help_text="Whoever opens the link and logs in with an account that uses "
                                                       "this address (or has none) joins with the role.")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.RATER)

    def clean_email(self) -> str:
        return get_user_model().objects.normalize_email(self.cleaned_data["email"])


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


def errors_text(*forms_) -> str:
    """Every error of the forms, as one sentence-like string for a message."""
    return " ".join(str(error) for form in forms_ for errors in form.errors.values() for error in errors)


def unique_name(name: str, siblings, what: str, exclude=None) -> str:
    """A name not yet used by another object of the project (`siblings`), stripped of spaces."""
    name = name.strip()
    if siblings.filter(name=name).exclude(pk=exclude).exists():
        raise forms.ValidationError(f"The project already has a {what} with this name.")
    return name


# ------------------------------------------------------------------------------- query parameters


def query_params(form: forms.Form) -> dict:
    """The cleaned query parameters of a page, `form` being bound to request.GET. A bad value is a 400
    that names the parameter and the problem, never a 500 from deeper down."""
    if not form.is_valid():
        raise BadRequest("; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items()))
    return form.cleaned_data


class PageNumberParams(forms.Form):
    page = forms.IntegerField(required=False, min_value=1)


def page_of(request: HttpRequest, objects, per_page: int) -> Page:
    """The page of `objects` that ?page= asks for: a whole number from 1, else a 400. A number past the last
    page, however large, gives the last page (a link kept while rows were deleted still shows something), and
    is never handed to the database."""
    return Paginator(objects, per_page).get_page(query_params(PageNumberParams(request.GET))["page"])


class SearchParams(forms.Form):
    """The search box of a list page."""

    q = forms.CharField(required=False, max_length=300)


class TopKParams(forms.Form):
    """How many results of a ranking a page shows."""

    DEFAULT_K = 20

    k = forms.IntegerField(required=False, min_value=1, max_value=1000)

    def clean_k(self) -> int:
        return self.cleaned_data["k"] or self.DEFAULT_K


class RunBrowseParams(TopKParams):
    query = forms.CharField(required=False, max_length=200)


class RunsParams(forms.Form):
    """The query set whose coverage the run lists and the pool form show: the newest by default, or with
    `newest_by_default=False` none unless asked (the run lists then choose the set the runs answer)."""

    query_set = forms.ModelChoiceField(queryset=QueryCollection.objects.none(), to_field_name="uuid", required=False)

    def __init__(self, *args, project, newest_by_default: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["query_set"].queryset = project.query_sets.all()
        self.newest_by_default = newest_by_default

    def clean_query_set(self) -> QueryCollection | None:
        asked = self.cleaned_data["query_set"]
        return asked or (self.fields["query_set"].queryset.first() if self.newest_by_default else None)


class QueryPageParams(forms.Form):
    """Which page of a round's queries the round page shows: those after, or before, a query id."""

    after = forms.CharField(required=False, max_length=Query._meta.get_field("query_id").max_length, strip=False)
    before = forms.CharField(required=False, max_length=Query._meta.get_field("query_id").max_length, strip=False)

    def keys(self) -> dict:
        return {name: query_params(self)[name] or None for name in ("after", "before")}


class AdjudicationPageParams(forms.Form):
    """Which page of the adjudication queue: the pairs after one (by its uuid), widest spread first."""

    after = forms.UUIDField(required=False)


class FlagsPageParams(forms.Form):
    """Which page of each list on a round's flags page: the unrateable verdicts after one (its uuid), the
    pairs put off after one (the pair's uuid and the rater's username)."""

    after = forms.UUIDField(required=False)
    later_after = forms.UUIDField(required=False)
    later_rater = forms.CharField(required=False, max_length=150)

    def keys(self) -> dict:
        params = query_params(self)
        later = (params["later_after"], params["later_rater"]) if params["later_after"] and params["later_rater"] else None
        return {"after": params["after"], "later_after": later}


class GradeParams(forms.Form):
    judged = forms.BooleanField(required=False)  # set by the no-JavaScript path after a new judgment


class UploadForm(forms.Form):
    """A file to import; the view checks its size against UPLOAD_MAX_BYTES before stashing it."""

    file = forms.FileField()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # static/js/upload-limit.js refuses a bigger file in the browser, before a byte of it is sent.
        self.fields["file"].widget.attrs["data-max-bytes"] = settings.UPLOAD_MAX_BYTES

    def clean_file(self):
        from .lib.fileformats import FileProblem
        from .ops.imports import check_upload_size

        upload = self.cleaned_data["file"]
        if getattr(upload, "stopped_at_limit", False):
            raise forms.ValidationError(f"The file is over the limit of {settings.UPLOAD_MAX_BYTES / 2**20:,.0f} MB "
                                        "(UPLOAD_MAX_BYTES): the upload was stopped there.")
        try:
            check_upload_size(upload.name, upload.size)
        except FileProblem as problem:
            raise forms.ValidationError(problem.problem) from None
        return upload


class CorpusUploadForm(UploadForm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text = (
            "JSONL or CSV with a doc_id column and any other fields. "
            "Re-importing updates changed documents and adds new ones."
        )


class QueryImportForm(UploadForm):
    name = forms.CharField(max_length=200, label="Query set name")
    description = description_field()

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.fields["file"].help_text = "CSV, TSV or JSONL with query_id and query columns (optional: information_need, tier, weight, segment, anything else), or a TREC topics file."

    def clean_name(self) -> str:
        return unique_name(self.cleaned_data["name"], self.project.query_sets, "query set")


class QuerySetForm(forms.ModelForm):
    description = description_field()

    class Meta:
        model = QueryCollection
        fields = ["name", "description"]

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project

    def clean_name(self) -> str:
        return unique_name(self.cleaned_data["name"], self.project.query_sets, "query set", exclude=self.instance.pk)


class QueryForm(VersionedForm, forms.ModelForm):
    text = forms.CharField(label="Query", max_length=QUERY_TEXT_MAX_LENGTH)
    information_need = MultilineField(required=False, max_length=INFORMATION_NEED_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 3}))
    references = ReferencesField(
        required=False, max_length=REFERENCES_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Reference answers or passages, separated by a blank line: what the token-overlap and semantic judges compare documents with.")

    class Meta:
        model = Query
        fields = ["query_id", "text", "information_need", "references", "tier", "weight", "segment"]
        labels = {"query_id": "Query id"}

    def __init__(self, *args, collection, **kwargs):
        super().__init__(*args, **kwargs)
        self.collection = collection
        self.add_version_field(self.instance.version if self.instance.pk else None)

    def clean_query_id(self) -> str:
        query_id = self.cleaned_data["query_id"].strip()
        if self.collection.queries.filter(query_id=query_id).exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError("This query set already has a query with this id.")
        return query_id

    def clean_weight(self):
        weight = self.cleaned_data["weight"]
        if weight is not None and weight < 0:
            raise forms.ValidationError("A weight cannot be negative.")
        return weight


class DisplayFieldForm(forms.ModelForm):
    class Meta:
        model = DisplayField
        fields = ["field", "label", "render", "order"]


class BaseDisplayFieldFormSet(forms.BaseModelFormSet):
    def clean(self) -> None:
        super().clean()
        seen = set()
        for form in self.forms:
            if not form.has_changed() and not form.instance.pk or self._should_delete_form(form):
                continue
            name = form.cleaned_data.get("field")
            if name in seen:
                raise forms.ValidationError(f"The field {name!r} is listed twice.")
            seen.add(name)


DisplayFieldFormSet = forms.modelformset_factory(
    DisplayField, form=DisplayFieldForm, formset=BaseDisplayFieldFormSet, extra=2, can_delete=True
)


class RunUploadForm(UploadForm):
    name = forms.CharField(max_length=200, help_text="Unique in the project, e.g. bm25-2026-11")
    system = forms.CharField(max_length=200, help_text="The search system that produced it, e.g. BM25 or hybrid re-ranker")
    description = description_field()

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.fields["file"].help_text = "A TREC run (qid Q0 docno rank score tag) or JSON {qid: {docno: score}}."

    def clean_name(self) -> str:
        return unique_name(self.cleaned_data["name"], self.project.runs, "run")


class AnswerRunUploadForm(RunUploadForm):
    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, project=project, **kwargs)
        self.fields["name"].help_text = "Unique in the project, e.g. rag-gpt-2026-11"
        self.fields["system"].help_text = "The system that generated the answers, e.g. hybrid retriever + LLM"
        self.fields["file"].help_text = ('JSONL, one answer a line: {"query_id": "q1", "answer": "…", "cites": ["doc7"]} '
                                         '("cites" optional), or TSV query_id<TAB>answer.')

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if self.project.answer_runs.filter(name=name).exists():
            raise forms.ValidationError("The project already has an answer run with this name.")
        return name


class ReferencesUploadForm(UploadForm):
    replace = forms.BooleanField(required=False, label="Replace the references of the queries in the file",
                                 help_text="Otherwise the file's answers are added to those the queries have.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["file"].label = "Reference answers"
        self.fields["file"].help_text = ('JSONL, one query a line: {"query_id": "q1", "answers": ["Paris", "City of Paris"]}, '
                                         "or TSV query_id<TAB>answer, one reference a line.")


class PoolForm(forms.Form):
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=Pool.Kind.choices, initial=Pool.Kind.DOCUMENTS, widget=forms.RadioSelect, label="Pool of", required=False,
                             help_text="Documents: the stored runs' top k. Answers: each query with the answer each answer run gave.")
    query_set = forms.ModelChoiceField(queryset=QueryCollection.objects.none(), to_field_name="uuid")
    runs = forms.ModelMultipleChoiceField(queryset=StoredRun.objects.none(), to_field_name="uuid", widget=forms.CheckboxSelectMultiple,
                                          required=False, help_text="For a pool of documents.")
    answer_runs = forms.ModelMultipleChoiceField(queryset=AnswerRun.objects.none(), to_field_name="uuid", required=False,
                                                 widget=forms.CheckboxSelectMultiple, help_text="For a pool of answers.")
    depth = forms.IntegerField(min_value=1, max_value=1000, initial=10,
                               help_text="Documents pooled per system and query. Pooling more than 3 systems? TREC practice pools 20 to 50 deep.")
    strategy = forms.ChoiceField(choices=Pool.Strategy.choices, initial=Pool.Strategy.BEST_RANK,
                                 help_text="The order raters judge in when the budget is smaller than the pool.")

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.fields["query_set"].queryset = project.query_sets.all()
        self.fields["runs"].queryset = project.runs.all()
        self.fields["answer_runs"].queryset = project.answer_runs.all()

    def clean_name(self) -> str:
        return unique_name(self.cleaned_data["name"], self.project.pools, "pool")

    def clean_kind(self) -> str:
        return self.cleaned_data["kind"] or Pool.Kind.DOCUMENTS  # forms and scripts from before answer pools

    def clean(self):
        data = super().clean()
        if data.get("kind") == Pool.Kind.ANSWERS:
            if not data.get("answer_runs"):
                self.add_error("answer_runs", "Choose at least one answer run for a pool of answers.")
            return data
        if not data.get("runs"):
            self.add_error("runs", "Choose at least one run for a pool of documents.")
        elif data.get("query_set"):
            try:
                check_runs_match(data["query_set"], list(data["runs"]))
            except PoolRefused as refusal:
                self.add_error("runs", str(refusal))
        return data


class AddRunsForm(forms.Form):
    runs = forms.ModelMultipleChoiceField(queryset=StoredRun.objects.none(), to_field_name="uuid", widget=forms.CheckboxSelectMultiple,
                                          error_messages={"required": "Choose at least one run that is not in the pool yet."})

    def __init__(self, *args, pool, **kwargs):
        super().__init__(*args, **kwargs)
        self.pool = pool
        self.fields["runs"].queryset = pool.project.runs.exclude(pools=pool)

    def clean_runs(self):
        runs = self.cleaned_data["runs"]
        try:
            check_runs_match(self.pool.query_set, list(runs), outcome="These runs would add no pairs")
        except PoolRefused as refusal:
            raise forms.ValidationError(str(refusal)) from None
        return runs


class GuidelinesForm(VersionedForm, forms.Form):
    """A new version of the guidelines, based on the version the lead loaded (0: none yet)."""

    text = forms.CharField(label="Guidelines (Markdown)", widget=forms.Textarea(attrs={"rows": 24}), strip=False,
                           max_length=GUIDELINES_MAX_LENGTH)
    note = forms.CharField(label="What changed", max_length=300, required=False)

    def __init__(self, *args, current: GuidelinesVersion | None, **kwargs):
        super().__init__(*args, **kwargs)
        self.add_version_field(current.number if current else 0)

    def saved_values(self, current: GuidelinesVersion) -> dict:
        return {"text": current.text}

    def saved_version(self, current: GuidelinesVersion) -> int:
        return current.number


class RoundForm(VersionedForm, forms.Form):
    """A round's settings. Fields that can no longer change (the scale once there are judgments, the
    guidelines and the policy once the round is open) are shown disabled."""

    name = forms.CharField(max_length=200)
    pool = forms.ModelChoiceField(queryset=Pool.objects.none(), to_field_name="uuid")
    guidelines = forms.ModelChoiceField(queryset=GuidelinesVersion.objects.none(), to_field_name="number",
                                        help_text="The round keeps this version: new guidelines mean a new round.")
    scale = forms.ChoiceField(choices=[("graded", "Graded 0-3 (Poor, Fair, Good, Perfect)"), ("binary", "Binary (0 not relevant, 1 relevant)"),
                                       ("answers", "Answers 0-2 (Wrong, Partly, Right)"),
                                       ("custom", "Custom")], initial="graded", widget=forms.RadioSelect)
    custom_scale = MultilineField(required=False, max_length=2_000, widget=forms.Textarea(attrs={"rows": 4}),
                                   help_text="One grade per line, lowest first: value | label | cue, e.g. 0 | Off-topic | Nothing to do with the query")
    faithfulness = forms.ChoiceField(
        choices=[("none", "None"), ("supported", "Supported 0-2 (No, Partly, Fully)"), ("custom", "Custom")],
        initial="none", widget=forms.RadioSelect, required=False, label="Faithfulness to the cited documents (pools of answers only)",
        help_text="A second grade for each answer: are its claims in the documents it cites? Raters then give both grades.")
    custom_faithfulness = MultilineField(required=False, max_length=2_000, widget=forms.Textarea(attrs={"rows": 3}),
                                         label="Custom faithfulness scale", help_text="As the custom scale: value | label | cue, one per line.")
    raters = forms.ModelMultipleChoiceField(queryset=get_user_model().objects.none(), to_field_name="username",
                                            widget=forms.CheckboxSelectMultiple, required=False)
    raters_per_pair = forms.IntegerField(min_value=1, max_value=10, initial=1, label="Raters per pair",
                                         help_text="1 is the usual; 2 or more has every pair judged independently that many times.")
    overlap_percent = forms.IntegerField(min_value=0, max_value=20, initial=15, label="Overlap share (%)",
                                         help_text="With one rater per pair: the share of pairs a second rater judges too, "
                                                   "to measure agreement. 10 to 20, or 0 for none.")
    order = forms.ChoiceField(choices=Round.Order.choices, initial=Round.Order.GROUPED,
                              help_text="Grouped keeps a rater on one query for a while.")
    judging_order = forms.ChoiceField(
        choices=Round.JudgingOrder.choices, initial=Round.JudgingOrder.POOL, required=False, label="Judging order within a query",
        help_text="Which of a query's pairs come first. Move-To-Front and MM-NS serve first the pairs of the runs that "
                  "have given relevant documents so far, so a round stopped early has found more of them. Grouped order only.")
    show_rank = forms.BooleanField(required=False, label="Show raters the rank (rounds are blind by default)")

    def __init__(self, *args, project, round=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project, self.round = project, round
        self.fields["pool"].queryset = project.pools.all()
        self.fields["pool"].label_from_instance = lambda pool: f"{pool.name} ({pool.report.get('total_pairs', 0):,} pairs)"
        newest = project.pools.values_list("uuid", "kind").first()
        self.fields["pool"].initial = newest[0] if newest else None
        if newest and newest[1] == Pool.Kind.ANSWERS:
            self.fields["scale"].initial = "answers"
        self.fields["guidelines"].queryset = project.guideline_versions.all()
        self.fields["guidelines"].label_from_instance = lambda v: f"Version {v.number}" + (f": {v.note}" if v.note else "")
        self.fields["guidelines"].initial = project.guideline_versions.values_list("number", flat=True).first()
        self.fields["raters"].queryset = get_user_model().objects.filter(
            memberships__project=project, memberships__role__in=[Role.LEAD, Role.RATER]).order_by("username")
        if round is not None:
            self.fields["pool"].disabled = True
            if round.status != Round.Status.DRAFT:
                for name in ("guidelines", "raters_per_pair", "overlap_percent"):
                    self.fields[name].disabled = True
            if round.has_judgments():
                for name in ("scale", "custom_scale", "faithfulness", "custom_faithfulness"):
                    self.fields[name].disabled = True
        self.add_version_field(round.version if round else None)

    @classmethod
    def initial_for(cls, existing: Round) -> dict:
        scale = existing.grading_scale
        return {"name": existing.name, "pool": existing.pool.uuid, "guidelines": existing.guidelines.number,
                "scale": scale.kind, "custom_scale": custom_text(scale) if scale.kind == "custom" else "",
                **cls._faithfulness_initial(existing.faithfulness_grading_scale),
                "raters": list(existing.raters.values_list("username", flat=True)),
                "raters_per_pair": existing.raters_per_pair, "overlap_percent": round(existing.overlap_share * 100),
                "order": existing.order, "judging_order": existing.judging_order, "show_rank": existing.show_rank}

    @staticmethod
    def _faithfulness_initial(scale) -> dict:
        if scale is None:
            return {"faithfulness": "none", "custom_faithfulness": ""}
        custom = scale.kind not in FAITHFULNESS_PRESETS
        return {"faithfulness": "custom" if custom else scale.kind, "custom_faithfulness": custom_text(scale) if custom else ""}

    def saved_values(self, current: Round) -> dict:
        return self.initial_for(current)

    def clean_name(self) -> str:
        return unique_name(self.cleaned_data["name"], self.project.rounds, "round", exclude=self.round.pk if self.round else None)

    def clean_judging_order(self) -> str:
        return self.cleaned_data["judging_order"] or Round.JudgingOrder.POOL

    def clean_pool(self) -> Pool:
        pool = self.cleaned_data["pool"]
        if self.round is None:
            try:
                check_pool_has_pairs(pool)
            except ActionRefused as refusal:
                raise forms.ValidationError(str(refusal)) from None
        return pool

    def clean(self):
        data = super().clean()
        try:
            if data.get("scale") == "custom":
                data["scale"] = parse_custom(data.get("custom_scale", ""))
            elif data.get("scale"):
                data["scale"] = PRESETS[data["scale"]]
        except ScaleError as problem:
            self.add_error("custom_scale", str(problem))
        choice = data.get("faithfulness") or "none"
        try:
            data["faithfulness_scale"] = (None if choice == "none" else parse_custom(data.get("custom_faithfulness", ""))
                                          if choice == "custom" else FAITHFULNESS_PRESETS[choice])
        except ScaleError as problem:
            self.add_error("custom_faithfulness", str(problem))
        pool = self.round.pool if self.round else data.get("pool")
        if pool is not None and data.get("faithfulness_scale") and pool.kind != Pool.Kind.ANSWERS:
            self.add_error("faithfulness", "Only a round over a pool of answers grades faithfulness: choose None, or a pool of answers.")
        if data.get("raters_per_pair") == 1 and data.get("overlap_percent") not in (None, 0) and not 10 <= data["overlap_percent"] <= 20:
            self.add_error("overlap_percent", "Choose between 10 and 20%, or 0 for no overlap.")
        self._check_enough_raters(data)
        if data.get("order") and data.get("judging_order"):
            try:
                check_judging_order(data["order"], data["judging_order"])
            except ActionRefused as refusal:
                self.add_error("judging_order", str(refusal))
        return data

    def _check_enough_raters(self, data: dict) -> None:
        """Opening needs as many raters as a pair needs judgments; no raters yet is a draft still being set up."""
        chosen, per_pair, overlap = data.get("raters"), data.get("raters_per_pair"), data.get("overlap_percent")
        if not chosen or per_pair is None or overlap is None or self.has_error("overlap_percent"):
            return
        needed = Round.raters_needed(per_pair, overlap / 100)
        if len(chosen) >= needed:
            return
        why = (f"with {overlap}% overlap, those pairs need a second, independent rater: choose {needed} raters or set the overlap to 0"
               if per_pair == 1 else f"every pair needs {per_pair} independent judgments: choose {needed} raters or fewer raters per pair")
        self.add_error("raters", f"{len(chosen)} rater{'s' if len(chosen) != 1 else ''} chosen, but {why}.")

    def round_settings(self) -> dict:
        """The cleaned data as `rounds.create_round` and `rounds.update_round` take it."""
        data = self.cleaned_data
        return {"name": data["name"], "guidelines": data["guidelines"], "scale": data["scale"], "raters": list(data["raters"]),
                "faithfulness_scale": data["faithfulness_scale"],
                "raters_per_pair": data["raters_per_pair"], "overlap_share": data["overlap_percent"] / 100,
                "order": data["order"], "judging_order": data["judging_order"], "show_rank": data["show_rank"]}


class PlanForm(forms.Form):
    """A round planned for prediction-powered estimates: how many queries raters label, typed or suggested from
    a target interval half-width (`judgments.ops.planning`). "suggest" asks for N; "plan" draws the sample."""

    size = forms.IntegerField(required=False, min_value=1, max_value=10_000_000, label="Queries raters label (N)",
                              help_text="A random sample of the round's queries; the judge labels the rest.")
    half_width = forms.FloatField(required=False, min_value=1e-6, max_value=1, label="Target interval half-width (±)",
                                  help_text="For a suggested N: the 95% interval of the measure's mean, e.g. 0.03 for ±0.03.")
    measure = forms.CharField(max_length=60, initial="nDCG@10", help_text="As the evaluations name it: nDCG@10, AP, P@10.")
    judge = forms.ChoiceField(required=False, label="Calibrated judge",
                              help_text="A judge with a calibration report, in any round of the project.")
    run = forms.ModelChoiceField(queryset=StoredRun.objects.none(), to_field_name="uuid", required=False,
                                 label="Run scored", help_text="A run of the pool of the judge's round.")
    by_tier = forms.BooleanField(required=False, label="Draw within tiers",
                                 help_text="Each tier of the query set gets raters' queries in proportion to its size.")
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1,
                              help_text="The same seed draws the same sample. Empty: a random seed, shown once drawn.")

    def __init__(self, *args, project, judges, **kwargs):
        super().__init__(*args, **kwargs)
        self.judges = {str(judge.uuid): judge for judge in judges}
        self.fields["judge"].choices = [(key, f"{judge.name} (round {judge.round.name})") for key, judge in self.judges.items()]
        self.fields["run"].queryset = project.runs.filter(pools__rounds__judges__in=judges).distinct().order_by("name")
        self.fields["run"].label_from_instance = lambda run: run.name

    def clean_measure(self) -> str:
        from evaluation.engine.measures import parse_measure

        try:
            return parse_measure(self.cleaned_data["measure"]).canonical
        except ValueError as problem:
            raise forms.ValidationError(str(problem)) from None

    def clean(self):
        data = super().clean()
        data["judge"] = self.judges.get(data.get("judge") or "")
        judge, run = data["judge"], data.get("run")
        if judge is not None and run is not None and not judge.round.pool.runs.filter(pk=run.pk).exists():
            self.add_error("run", f"{run.name} is not a run of the pool of round {judge.round.name}: choose one of its runs.")
        if "suggest" in self.data:
            for name, why in (("half_width", "Say how wide an interval to aim for."), ("run", "Choose a run to score.")):
                if not data.get(name) and self.judges and not self.has_error(name):
                    self.add_error(name, why)
        elif not data.get("size") and not self.has_error("size"):
            self.add_error("size", "Say how many queries raters label (or ask for a suggestion first).")
        return data

    @property
    def wants_suggestion(self) -> bool:
        """Whether the input names a target, so that a suggestion can be computed (and stored with the plan)."""
        data = self.cleaned_data
        return bool(data.get("half_width") and data.get("judge") and data.get("run"))


class ReassignForm(forms.Form):
    source = forms.ModelChoiceField(queryset=get_user_model().objects.none(), to_field_name="username", label="From")
    target = forms.ModelChoiceField(queryset=get_user_model().objects.none(), to_field_name="username", label="To",
                                    required=False, empty_label="Everyone (back to the shared queue)")

    def __init__(self, *args, round, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["source"].queryset = self.fields["target"].queryset = round.raters.order_by("username")


class ResetFlagsForm(forms.Form):
    later = forms.BooleanField(required=False, label="Pairs put off for later (they go back to everyone)")
    unrateable = forms.BooleanField(required=False, label="Unrateable flags (the pairs are judged again)")
    rater = forms.ModelChoiceField(queryset=get_user_model().objects.none(), to_field_name="username", required=False,
                                   empty_label="Every rater")

    def __init__(self, *args, round, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["rater"].queryset = round.raters.order_by("username")


class GoldForm(forms.Form):
    grade = forms.TypedChoiceField(coerce=int, empty_value=None, required=False)

    def __init__(self, *args, round, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["grade"].choices = [("", "Not gold")] + [(g.value, f"{g.value} {g.label}") for g in round.grading_scale.grades]


class PublishForm(forms.Form):
    note = forms.CharField(max_length=300, required=False, help_text="What this version is for or what changed, in a sentence.")
    threshold = forms.TypedChoiceField(coerce=int, empty_value=None, required=False, label="Relevance threshold",
                                       help_text="For binary qrels: a grade at or above it is relevant. Leave it graded otherwise.")

    def __init__(self, *args, round, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["threshold"].choices = [("", "None (graded qrels)")] + [(g.value, f"{g.value} {g.label}") for g in round.grading_scale.grades]


class RefreshForm(forms.Form):
    rejudge = forms.ChoiceField(choices=Round.Rejudge.choices, initial=Round.Rejudge.SAMPLE,
                                label="Pairs the version labels already")
    share = forms.IntegerField(min_value=1, max_value=100, initial=10, label="Sample to re-judge (% of the old pairs)",
                               help_text="With a sample: the old and new labels of these pairs give Cohen's kappa, the drift between them.")


# ------------------------------------------------------------------------------------- query logs


class LogUploadForm(UploadForm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text = ("A query log: CSV, TSV, JSONL or Parquet, optionally gzip-compressed (.csv.gz). "
                                         "One row per search, or per query with a count column. Columns are mapped next.")


class LogMappingForm(forms.Form):
    """Which column holds what, and how queries are normalised before counting."""

    name = forms.CharField(max_length=200, label="Log name")
    query_column = forms.ChoiceField(label="Query text")
    time_column = forms.ChoiceField(label="Timestamp", required=False, help_text="Needed for a time window.")
    count_column = forms.ChoiceField(label="Count per row", required=False, help_text="Without one, each row counts 1.")
    segment_columns = forms.MultipleChoiceField(label="Segment columns", required=False, widget=forms.CheckboxSelectMultiple,
                                                help_text="Language, product category, device: kept per query, and a sample can be stratified by one.")
    nfkc = forms.BooleanField(label="Unicode NFKC (full-width and compatibility characters)", required=False, initial=True)
    casefold = forms.BooleanField(label="Case folding", required=False, initial=True)
    collapse_whitespace = forms.BooleanField(label="Collapse runs of whitespace", required=False, initial=True)
    trim_punctuation = forms.BooleanField(label="Trim punctuation at both ends", required=False, initial=True)
    drop_personal = forms.BooleanField(label="Drop queries that look like personal data (e-mail addresses, phone numbers, long digit runs)",
                                       required=False, initial=True)
    max_bad_percent = forms.FloatField(label="Stop if more than this % of rows are bad", min_value=0, max_value=100, initial=1.0)

    def __init__(self, *args, columns: list[str], project, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.fields["query_column"].choices = [(c, c) for c in columns]
        optional = [("", "(none)")] + [(c, c) for c in columns]
        self.fields["time_column"].choices = self.fields["count_column"].choices = optional
        self.fields["segment_columns"].choices = [(c, c) for c in columns]

    def clean_name(self) -> str:
        return unique_name(self.cleaned_data["name"], self.project.query_logs, "query log")

    def clean(self):
        data = super().clean()
        used = [data.get("query_column"), data.get("time_column"), data.get("count_column")]
        used = [column for column in used if column] + list(data.get("segment_columns", []))
        if len(used) != len(set(used)):
            raise forms.ValidationError("Each column can have one role only.")
        return data

    def job_params(self) -> dict:
        data = self.cleaned_data
        return {"name": data["name"], "query_column": data["query_column"], "time_column": data["time_column"] or None,
                "count_column": data["count_column"] or None, "segment_columns": list(data["segment_columns"]),
                "normalization": {key: data[key] for key in ("nfkc", "casefold", "collapse_whitespace", "trim_punctuation")},
                "drop_personal": data["drop_personal"], "max_bad_share": data["max_bad_percent"] / 100}


SAMPLING_METHODS = [("uniform", "Uniform"), ("traffic", "Proportional to traffic")]


class SamplingForm(forms.Form):
    """The settings of a sample (read from the query string, so a preview is a link), and its name."""

    window_days = forms.IntegerField(label="Window (days)", min_value=1, required=False, initial=90,
                                     help_text="Empty: the whole log.")
    end = forms.DateField(label="Window ends on", required=False, help_text="Empty: the newest day in the log.",
                          widget=forms.DateInput(attrs={"type": "date"}))
    boundaries = forms.ChoiceField(label="Tier boundaries", choices=[("rank", "By rank"), ("share", "By share of impressions")],
                                   initial="rank")
    head_until = forms.FloatField(label="Head until", min_value=0, initial=500,
                                  help_text="A rank (500) or a cumulative share (0.8).")
    torso_until = forms.FloatField(label="Torso until", min_value=0, initial=5000, help_text="A rank (5000) or a share (0.95).")
    head = forms.IntegerField(min_value=0, initial=DEFAULT_QUOTAS["head"].n, label="Head quota")
    torso = forms.IntegerField(min_value=0, initial=DEFAULT_QUOTAS["torso"].n, label="Torso quota")
    tail = forms.IntegerField(min_value=0, initial=DEFAULT_QUOTAS["tail"].n, label="Tail quota")
    head_method = forms.ChoiceField(choices=SAMPLING_METHODS, initial=DEFAULT_QUOTAS["head"].method)
    torso_method = forms.ChoiceField(choices=SAMPLING_METHODS, initial=DEFAULT_QUOTAS["torso"].method)
    tail_method = forms.ChoiceField(choices=SAMPLING_METHODS, initial=DEFAULT_QUOTAS["tail"].method)
    seed = forms.IntegerField(min_value=0, required=False, help_text="Empty: a new random seed, shown with the sample.")
    stratify_by = forms.ChoiceField(required=False, label="Stratify by")
    exclude_earlier = forms.BooleanField(required=False, initial=True, label="Leave out queries already in the project's query sets")

    def __init__(self, *args, log, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["stratify_by"].choices = [("", "(no stratification)")] + [(s, s) for s in log.segments]
        if not log.has_time:
            self.fields["window_days"].disabled = self.fields["end"].disabled = True
            self.fields["window_days"].help_text = "This log has no timestamps: every row counts."

    @classmethod
    def initial_data(cls) -> dict:
        return {name: field.initial for name, field in cls.base_fields.items() if field.initial is not None}

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        kind = data["boundaries"]
        values = (data["head_until"], data["torso_until"])
        text = f"rank:{int(values[0])},{int(values[1])}" if kind == "rank" else f"share:{values[0]:g},{values[1]:g}"
        if kind == "rank" and any(value != int(value) for value in values):
            raise forms.ValidationError("Rank boundaries are whole numbers.")
        try:
            data["parsed_boundaries"] = Boundaries.parse(text)
        except ValueError as problem:
            raise forms.ValidationError(str(problem)) from None
        return data

    def settings(self):
        data = self.cleaned_data
        return SamplingSettings(
            window_days=data.get("window_days"), end=data.get("end"), boundaries=data["parsed_boundaries"],
            quotas={tier: Quota(data[tier], data[f"{tier}_method"]) for tier in ("head", "torso", "tail")},
            seed=data.get("seed"), stratify_by=data.get("stratify_by") or None, exclude_earlier=data["exclude_earlier"])


class SaveSampleForm(forms.Form):
    name = forms.CharField(max_length=200, label="Query set name")
    description = description_field()

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project

    def clean_name(self) -> str:
        return unique_name(self.cleaned_data["name"], self.project.query_sets, "query set")


# ------------------------------------------------------------------------------- agreement, exports


class AgreementSettingsForm(VersionedForm, forms.ModelForm):
    class Meta:
        model = Round
        fields = ["consensus_rule", "adjudication_margin", "gate_statistic", "gate"]
        labels = {"consensus_rule": "Consensus rule", "adjudication_margin": "Adjudicate pairs whose grades differ by at least",
                  "gate_statistic": "Gate statistic", "gate": "Gate: at least"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.add_version_field(self.instance.version)

    def clean_gate(self) -> float:
        gate = self.cleaned_data["gate"]
        if not -1 <= gate <= 1:
            raise forms.ValidationError("An agreement gate is between -1 and 1 (0.60 is the usual one).")
        return gate

    def clean_adjudication_margin(self) -> int:
        margin = self.cleaned_data["adjudication_margin"]
        if margin < 1:
            raise forms.ValidationError("The margin is at least 1 grade.")
        return margin


class AdjudicationForm(forms.Form):
    grade = forms.TypedChoiceField(coerce=int, empty_value=None, required=False)
    note = forms.CharField(max_length=300, required=False)

    def __init__(self, *args, scale, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["grade"].choices = [("", "(no final label: the consensus rule decides)")] + [
            (grade.value, f"{grade.value} {grade.label}") for grade in scale.grades]


class ExportForm(forms.Form):
    format = forms.ChoiceField(choices=[])
    consensus = forms.ChoiceField(required=False, label="Consensus rule",
                                  choices=[("", "The round's rule")] + list(Round.Consensus.choices))
    threshold = forms.IntegerField(required=False, label="Relevance threshold (qrels)",
                                   help_text="Grades at or above it are written as 1, the rest as 0. Empty: graded.")
    metric = forms.ChoiceField(required=False, initial="ndcg", label="Metric (_rank_eval)",
                               choices=[(m, m) for m in ("ndcg", "dcg", "precision", "recall", "mrr", "err")])
    k = forms.IntegerField(required=False, min_value=1, initial=10, label="k (_rank_eval)")
    index = forms.CharField(required=False, max_length=255, initial="products", label="Index (_rank_eval)")
    fields = forms.CharField(required=False, max_length=1_000, initial="title", label="Fields to match the query on (_rank_eval)",
                             help_text="Comma-separated.")
    source = forms.ChoiceField(required=False, initial="human", label="Labels (qrels)", choices=list(SOURCES.items()))
    judge = forms.ChoiceField(required=False, label="Automatic judge (qrels)", choices=[],
                              help_text="Whose grades label the pairs, alone or where the raters gave none.")

    def __init__(self, *args, round, **kwargs):
        super().__init__(*args, **kwargs)
        self.round = round
        self.fields["format"].choices = [(f.name, f.label) for f in FORMATS.values()]
        self.fields["judge"].choices = [("", "–")] + [(name, name) for name in round.judges.values_list("name", flat=True)]

    def clean(self):
        data = super().clean()
        if data.get("source") in ("judge", "fill") and not data.get("judge"):
            self.add_error("judge", "Choose the judge whose grades label the pairs.")
        return data

    def options(self):
        data = self.cleaned_data
        fields = tuple(f.strip() for f in (data.get("fields") or "title").split(",") if f.strip()) or ("title",)
        return ExportOptions(rule=data.get("consensus") or None, threshold=data.get("threshold"), metric=data.get("metric") or "ndcg",
                             k=data.get("k") or 10, index=data.get("index") or "products", fields=fields,
                             source=data.get("source") or "human", judge=data.get("judge") or None)


class JudgmentImportForm(UploadForm):
    rater = forms.CharField(required=False, max_length=150, label="Attribute the grades to (username)",
                            help_text="A lead or rater of this project. Empty: the 'imported' account "
                                      "(a Quepid CSV's columns name their raters).")
    dry_run = forms.BooleanField(required=False, initial=True, label="Dry run: only report what would change")


# ------------------------------------------------------------------------------ automatic judges


def _reachable_url(url: str) -> str:
    """A URL a lead typed, if Verdict may call it (`judgments.ops.endpoints`)."""
    from .core.outbound_policy import url_problem

    if problem := url_problem(url):
        raise forms.ValidationError(problem)
    return url


class KeyedEndpointForm(forms.Form):
    """An endpoint's API key, write-only: the page says whether one is set, never which."""

    api_key = forms.CharField(label="API key", required=False, max_length=500, strip=True,
                              widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
                              help_text="Stored encrypted. Leave empty to keep the current key.")
    api_key_env = forms.RegexField(label="Or: environment variable", required=False, max_length=100, regex=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                   help_text="A variable the workers have, among those the operator allows (listed above); it wins "
                                             "over a stored key.")
    clear_key = forms.BooleanField(label="Remove the stored key", required=False)

    def clean_api_key_env(self) -> str:
        from .core.outbound_policy import key_variable_problem

        name = self.cleaned_data["api_key_env"]
        if name and (problem := key_variable_problem(name)):
            raise forms.ValidationError(problem)
        return name

    def clean(self):
        data = super().clean()
        if data.get("api_key") and any(c in data["api_key"] for c in "\r\n"):
            self.add_error("api_key", "The key must be one line.")
        return data


class LLMEndpointForm(KeyedEndpointForm):
    """The project's LLM endpoint."""

    field_order = ["base_url", "model", "api_key", "api_key_env", "clear_key"]
    base_url = forms.CharField(label="Base URL", max_length=2000, help_text="Up to /v1: https://api.openai.com/v1, or a server of your own "
                               "(Ollama, vLLM, llama.cpp server) at a public address, or at an internal one the operator allows.")
    model = forms.CharField(max_length=200, help_text="The model name the endpoint knows, e.g. gpt-4o or llama3.1:8b.")
    max_in_flight = forms.IntegerField(label="Requests in flight at most", required=False, min_value=1, max_value=10_000, initial=16,
                                       help_text="All workers and runs together (each judge's concurrency is per worker). Empty: kept as it is.")
    requests_per_minute = forms.IntegerField(label="Requests a minute at most", required=False, min_value=0, max_value=10_000_000, initial=1000,
                                             help_text="All workers together, paced evenly over the minute. 0: no limit.")
    tokens_per_minute = forms.IntegerField(label="Tokens a minute at most", required=False, min_value=0, max_value=10**10, initial=1_000_000,
                                           help_text="Prompt and reply tokens, all workers together. 0: no limit. A 429's "
                                                     "Retry-After pauses every worker, whatever these say.")

    def clean_base_url(self) -> str:
        return _reachable_url(self.cleaned_data["base_url"])

    def clean(self):
        from .judges import JudgeSettingsError, make_judge

        data = super().clean()
        if data.get("base_url") and data.get("model"):
            try:
                make_judge("llm", {"base_url": data["base_url"], "model": data["model"]})
            except JudgeSettingsError as problem:
                name, _, message = str(problem).partition(": ")
                self.add_error(name if name in self.fields else None, message.capitalize())
        return data


def backend_choices() -> list[tuple[str, str]]:
    from .judges.embedders import BACKENDS
    from .ops.embeddings import BACKEND_NAMES

    return [(backend, BACKEND_NAMES[backend]) for backend in BACKENDS]


class EmbeddingEndpointForm(KeyedEndpointForm):
    """The project's embeddings: the default backend of its semantic judges, and its /v1/embeddings endpoint
    (needed when a judge uses the endpoint backend)."""

    field_order = ["default_backend", "base_url", "model", "max_length", "batch_size", "api_key", "api_key_env", "clear_key"]
    default_backend = forms.ChoiceField(label="Default backend", choices=backend_choices,
                                        help_text="What the project's semantic judges embed with, unless a judge names one.")
    base_url = forms.CharField(label="Embeddings base URL", max_length=2000, required=False,
                               help_text="Up to /v1, where /v1/embeddings answers: text-embeddings-inference, vLLM, Ollama "
                                         "or https://api.openai.com/v1. Empty: no endpoint.")
    model = forms.CharField(label="Embeddings model", max_length=200, required=False,
                            help_text="The model name the endpoint knows, e.g. BAAI/bge-small-en-v1.5 or text-embedding-3-small.")
    max_length = forms.IntegerField(label="Longest input (word pieces)", required=False, min_value=0, max_value=1_000_000,
                                    help_text="What the endpoint's model reads of each text, as it states; 0 or empty: unknown.")
    batch_size = forms.IntegerField(label="Texts per request", required=False, min_value=1, max_value=4096,
                                    help_text="Empty: 64.")

    def clean_base_url(self) -> str:
        url = self.cleaned_data["base_url"]
        return _reachable_url(url) if url else ""

    def clean(self):
        data = super().clean()
        data["max_length"] = data.get("max_length") or 0
        data["batch_size"] = data.get("batch_size") or 64
        if bool(data.get("base_url")) != bool(data.get("model")) and not self.has_error("base_url"):
            self.add_error("model" if data.get("base_url") else "base_url", "An endpoint needs both its base URL and its model.")
        if data.get("default_backend") == "endpoint" and not (data.get("base_url") or self.has_error("base_url")):
            self.add_error("base_url", "The endpoint backend is the default: set the endpoint's base URL and model.")
        return data


class JudgeForm(forms.Form):
    """A new judge of a round: its name, the gate's thresholds, and one field per setting of its kind
    (`judges.settings_doc`). Empty settings take their defaults; lists are JSON."""

    name = forms.CharField(max_length=100, help_text="Unique in the round, e.g. overlap-strict or gpt-4o-graded.")
    min_kappa = forms.FloatField(label="Gate: lowest kappa", initial=0.40, min_value=-1, max_value=1,
                                 help_text="Cohen's kappa against the raters' consensus the judge must reach.")
    min_tau = forms.FloatField(label="Gate: lowest Kendall's tau", initial=0.90, min_value=-1, max_value=1,
                               help_text="Between the leaderboards of runs under human and under judge labels.")
    min_pairs = forms.IntegerField(label="Gate: fewest shared pairs", required=False, initial=100, min_value=1,
                                   max_value=10_000_000, help_text="Pairs with a human grade and a judge grade before "
                                   "the gate may pass. Empty: 100.")
    min_runs = forms.IntegerField(label="Gate: fewest runs", required=False, initial=4, min_value=2, max_value=1000,
                                  help_text="Runs compared under both labellings before Kendall's tau counts. Empty: 4.")

    def __init__(self, *args, kind: str, default_backend: str = "numpy", **kwargs):
        from .judges import settings_doc
        from .ops.automatic import ENDPOINT_SETTINGS

        super().__init__(*args, **kwargs)
        self.kind = kind
        self.docs = [doc for doc in settings_doc(kind) if not (kind == "llm" and doc.name in ENDPOINT_SETTINGS)]
        for doc in self.docs:
            self.fields[f"setting_{doc.name}"] = self._field(doc)
        if kind == "semantic" and "setting_backend" in self.fields:
            self.fields["setting_backend"] = forms.ChoiceField(
                label="Backend", required=False, choices=[("", f"The project's default ({default_backend})"), *backend_choices()],
                help_text="How the texts are embedded. The project's default can change later; a backend named here stays.")

    @staticmethod
    def _field(doc) -> forms.Field:
        shown_default = "empty" if doc.default is None else json.dumps(doc.default)
        options = {"label": doc.name.replace("_", " ").capitalize(), "required": False,
                   "help_text": f"{doc.help} Default: {shown_default}."}
        if doc.type == "true or false":
            return forms.TypedChoiceField(choices=[("", "Default"), ("true", "Yes"), ("false", "No")], **options)
        if doc.type == "whole number":
            return forms.IntegerField(**options)
        if doc.type == "number":
            return forms.FloatField(**options)
        if doc.type == "list":
            return forms.CharField(max_length=20_000, widget=forms.Textarea(attrs={"rows": 2}),
                                   **{**options, "help_text": options["help_text"] + " A JSON list, e.g. [\"a\", \"the\"]."})
        return forms.CharField(max_length=2000, **options)

    def clean(self):
        data = super().clean()
        settings = {}
        for doc in self.docs:
            value = data.get(f"setting_{doc.name}")
            if value in (None, ""):
                continue
            if doc.type == "true or false":
                value = value == "true"
            elif doc.type == "list":
                try:
                    value = json.loads(value)
                except ValueError:
                    self.add_error(f"setting_{doc.name}", "Write a JSON list, e.g. [\"a\", \"the\"].")
                    continue
            settings[doc.name] = value
        data["settings"] = settings
        from .judges.calibration import DEFAULT_MIN_PAIRS, DEFAULT_MIN_RUNS

        data["min_pairs"] = data.get("min_pairs") or DEFAULT_MIN_PAIRS
        data["min_runs"] = data.get("min_runs") or DEFAULT_MIN_RUNS
        return data

    def add_settings_error(self, problem: Exception) -> None:
        """Put a JudgeSettingsError ("name: what is wrong") on its field."""
        name, _, _ = str(problem).partition(":")
        field = f"setting_{name}"
        self.add_error(field if field in self.fields else None, str(problem))


class JudgeRunForm(forms.Form):
    """Which pairs a judge run grades. The order for a new judge: calibrate (the default until its calibration
    report passes the gate), read the report, then fill the pairs without a human grade (the default afterwards)."""

    pairs = forms.ChoiceField(choices=[
        ("calibrate", "Calibrate: a sample of the pairs the raters graded, stratified by their grade"),
        ("unjudged", "Fill: the pairs without a human grade"),
        ("all", "All pairs"),
        ("sample", "A seeded sample (of any pairs)")], initial="calibrate", widget=forms.RadioSelect)
    n = forms.IntegerField(label="Sample size", required=False, min_value=1, max_value=10_000_000, initial=100,
                           help_text="Pairs in a calibration sample or a seeded sample; for calibrating, empty: the "
                                     "judge's gate minimum.")
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1, initial=0,
                              help_text="The same seed draws the same pairs.")
    token_budget = forms.IntegerField(label="Token budget", required=False, min_value=1, max_value=10**12,
                                      help_text="Tokens (prompt and reply, as the endpoint counts them) after which the run "
                                                "asks nothing more: requests in flight finish and everything graded is "
                                                "kept. Empty: no budget. Compare with the estimate above.")

    def __init__(self, *args, judge=None, gate_passed: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.judge = judge
        if judge is not None:
            self.fields["n"].initial = judge.min_pairs
            if judge.kind != "llm":  # only an LLM judge pays tokens
                del self.fields["token_budget"]
        self.fields["pairs"].initial = "unjudged" if gate_passed else "calibrate"

    def clean(self):
        data = super().clean()
        if data.get("pairs") == "sample" and not data.get("n"):
            self.add_error("n", "Say how many pairs to sample.")
        return data

    def choice(self):
        from .ops.automatic import PairChoice

        data = self.cleaned_data
        if data["pairs"] == "calibrate":
            n = data.get("n") or (self.judge.min_pairs if self.judge is not None else 100)
            return PairChoice("calibrate", n, data.get("seed") or 0)
        return PairChoice.parse(f"sample:{data['n']}" if data["pairs"] == "sample" else data["pairs"], data.get("seed") or 0)


class HealthSettingsForm(forms.ModelForm):
    """A project's staleness schedule, thresholds and notifications; the webhook secret is write-only."""

    webhook_secret = forms.CharField(required=False, max_length=200, widget=forms.PasswordInput,
                                     help_text="Signs each webhook body (X-Verdict-Signature: sha256=HMAC). Left empty: kept as it is.")
    clear_secret = forms.BooleanField(required=False, label="Remove the webhook secret")
    cutoffs_text = forms.CharField(required=False, max_length=100, label="Unjudged share at cutoffs",
                                   help_text="Ranks k, separated by spaces; empty: 10 20.")

    class Meta:
        from .models import HealthSettings

        model = HealthSettings
        fields = ["every_days", "unjudged_warn", "unjudged_stale", "head_judged_share", "new_head_queries", "age_days",
                  "age_warn", "age_stale", "agreement_fire_after", "notify", "webhook_url"]
        labels = {"every_days": "Check every (days)", "unjudged_warn": "Unjudged share: warn above",
                  "unjudged_stale": "Unjudged share: stale above", "head_judged_share": "Judged head traffic: stale below",
                  "new_head_queries": "New head queries: stale at", "age_days": "Labels count as old after (days)",
                  "age_warn": "Old labels: warn above (share)", "age_stale": "Old labels: stale above (share)",
                  "agreement_fire_after": "Agreement without enough evidence: warn after (grades)",
                  "notify": "Notify the leads when a trigger starts firing", "webhook_url": "Webhook URL"}
        help_texts = {"agreement_fire_after": "When the newest graded round has this many grades and still no pair graded by two "
                                              "raters (its gate cannot be computed), the agreement trigger fires. Empty: it never "
                                              "fires for that and only says what is missing."}

    def clean(self):
        data = super().clean()
        for warn, stale in (("unjudged_warn", "unjudged_stale"), ("age_warn", "age_stale")):
            if data.get(warn) is not None and data.get(stale) is not None and data[warn] > data[stale]:
                self.add_error(stale, "The stale threshold must be at least the warn threshold.")
        for name in ("unjudged_warn", "unjudged_stale", "head_judged_share", "age_warn", "age_stale"):
            if data.get(name) is not None and not 0 <= data[name] <= 1:
                self.add_error(name, "A share between 0 and 1.")
        if data.get("every_days") == 0:
            self.add_error("every_days", "At least one day.")
        words = (data.get("cutoffs_text") or "").replace(",", " ").split()
        if not all(word.isascii() and word.isdigit() and 1 <= int(word) <= 1000 for word in words) or len(words) > 10:
            self.add_error("cutoffs_text", "Up to 10 whole numbers from 1 to 1000, e.g. 10 20.")
        else:
            data["cutoffs"] = sorted({int(word) for word in words})
        return data

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["cutoffs_text"].initial = " ".join(map(str, self.instance.cutoffs or (10, 20)))
        self.fields["webhook_url"].help_text = ("Where the worker POSTs a signed JSON notice when a trigger starts firing: "
                                                "http or https, at a public address or one the operator allows.")

    def clean_webhook_url(self) -> str:
        url = self.cleaned_data["webhook_url"]
        return _reachable_url(url) if url else url

    def save(self, commit=True):
        found = super().save(commit=False)
        found.cutoffs = self.cleaned_data.get("cutoffs", [])
        if self.cleaned_data.get("clear_secret"):
            found.set_webhook_secret("")
        elif self.cleaned_data.get("webhook_secret"):
            found.set_webhook_secret(self.cleaned_data["webhook_secret"])
        if commit:
            found.save()
        return found


class SnoozeForm(forms.Form):
    days = forms.IntegerField(min_value=1, max_value=365, initial=30)
    reason = forms.CharField(max_length=300)


class WebhookForm(forms.Form):
    url = forms.URLField(label="URL", max_length=500, assume_scheme="https",
                         help_text="Where the worker POSTs a signed JSON event when a job of this project ends: http or https, "
                                   "at a public address or one the operator allows.")

    def clean_url(self) -> str:
        return _reachable_url(self.cleaned_data["url"])
