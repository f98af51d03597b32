"""Evaluations through the API: start one (202 with its job), list and read them, page through their per-query
values in the stored Parquet, and compare their runs with any one of them as the baseline. Leads start them; leads and
viewers read them; raters never see scores, as in the app.

Starting one is validated by the app's evaluation form (the same refusals, each naming its field) and queued by
the app's create_evaluation, as the evaluation page does it. Every number comes from the metric engine.
"""

import itertools
import math
import sys
from collections.abc import Iterator
from datetime import datetime
from uuid import UUID

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.core.files.storage import default_storage
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Field, Query, Router, Schema

from evaluation import evaluations
from evaluation.comparisons import with_verdicts
from evaluation.engine.measures import registered_measures
from evaluation.engine.significance import compare_many
from evaluation.forms import EvaluationForm
from evaluation.models import Evaluation
from judgments import access
from judgments.lib.jsonable import jsonable
from judgments.models import Job, JudgmentListVersion, StoredRun
from judgments.ops.versions import lineage_of

from .auth import object_access, project_access
from .errors import ApiError
from .jobs import JobOut, accepted, form_error, job_out
from .paging import Page, PageParams, page
from .results import ComparisonRow, EvaluationResultsOut
from .schemas import ERRORS, ErrorOut

router = Router(tags=["evaluations"])

PER_QUERY_BATCH = 65_536


class EvaluationIn(Schema):
    round: UUID = Field(description="The round whose labels are the qrels")
    version: int | None = Field(None, description="Pin a published version number of the round's judgment list (its labels "
                                                  "instead of the round's current ones)")
    runs: list[UUID] = Field(description="Stored runs; the first is the baseline of the comparisons")
    measures: list[str] = Field(list(evaluations.DEFAULT_MEASURES), description="Engine measure names: nDCG@10, AP, P(rel=2)@5, ndcg_cut.20...")
    relevance_level: int = Field(1, description="Relevant from this grade (trec_eval -l)")
    all_queries: bool = Field(False, description="Average over every judged query, missing ones scoring 0 (-c)")
    judged_only: bool = Field(False, description="Drop unjudged documents before scoring (-J)")
    max_docs: int | None = Field(None, description="Score only the top M of each ranking (-M)")
    consensus_rule: str | None = Field(None, description="The consensus rule; by default the round's")
    resamples: int = Field(10_000, ge=100, le=100_000, description="Permutation and bootstrap resamples of the comparisons")
    seed: int = Field(42, ge=0, le=2**31 - 1)


class RunRef(Schema):
    uuid: UUID
    name: str
    sha256: str


class LabelSourceOut(Schema):
    """Where the labels an evaluation scored against came from (evaluation.provenance.LabelSource)."""

    labels_source: str = Field(description="`human`: the raters' labels only; `judge_filled`: the raters' labels with an "
                                           "automatic judge's grades on the pairs no rater graded")
    judge: str | None = Field(description="The judge that filled the labels (judge_filled), else null")
    judge_labels: int | None = Field(description="How many of the labels came from the judge (0 for human; null when not "
                                                  "recorded)")
    labels: int | None = Field(description="How many labels the evaluation scored against (null until it is done)")
    judge_label_share: float | None = Field(description="judge_labels / labels (0 for human; null when not recorded)")


class EvaluationSummary(LabelSourceOut):
    uuid: UUID
    state: str = Field(description="queued, done or failed")
    round: UUID
    version: int | None
    measures: list[str]
    runs: list[RunRef]
    created_at: datetime
    url: str


class EvaluationOut(EvaluationSummary):
    results: EvaluationResultsOut | None = Field(description="The stored results (null until the evaluation is done): per run "
                                                             "its means, traffic-weighted means, tiers, segments and unjudged "
                                                             "shares; with two runs or more the baseline and the comparisons")


class EvaluationStarted(Schema):
    uuid: UUID
    state: str
    url: str
    job: JobOut


def evaluation_out(request: HttpRequest, evaluation: Evaluation, *, results: bool = True) -> dict:
    out = {"uuid": evaluation.uuid, "state": evaluation.state, "round": evaluation.round.uuid,
           "version": evaluation.list_version.number if evaluation.list_version_id else None, "measures": evaluation.measures,
           "runs": [{"uuid": run.uuid, "name": run.name, "sha256": run.sha256} for run in evaluation.ordered_runs()],
           **evaluation.label_source.as_dict(), "created_at": evaluation.created_at, "url": _url(request, evaluation)}
    if results:
        out["results"] = evaluation.results or None
    return out


def _url(request: HttpRequest, evaluation: Evaluation) -> str:
    return request.build_absolute_uri(reverse("api:get_evaluation", args=[evaluation.project.slug, evaluation.uuid]))


@router.post("/{slug}/evaluations", response={202: EvaluationStarted, **ERRORS}, summary="Start an evaluation (a job)",
             description="Validated as the app's evaluation form validates it: an unknown measure, a run or round of "
                         "another project, a version number the round's list has not published are 400 naming the field. "
                         "202 with the job's URL (also in Location); the evaluation's URL answers once the job is done.")
def start_evaluation(request: HttpRequest, response: HttpResponse, slug: str, body: EvaluationIn):
    project, _ = project_access(request, slug, "can_manage")
    form = EvaluationForm({
        "round": body.round, "runs": body.runs, "baseline": body.runs[0] if body.runs else None, "measures": " ".join(body.measures),
        "ks": "", "consensus_rule": body.consensus_rule or "", "relevance_level": body.relevance_level,
        "all_queries": body.all_queries, "judged_only": body.judged_only, "max_docs": body.max_docs,
        "list_version": _version(project, body.round, body.version)}, project=project)
    if not form.is_valid():
        raise form_error(form)
    data = form.cleaned_data
    position = {uuid: i for i, uuid in enumerate(body.runs)}
    try:
        evaluation = evaluations.create_evaluation(
            data["round"], sorted(data["runs"], key=lambda run: position[run.uuid]), measures=data["measures"], user=request.auth[0].user,
            consensus_rule=data["consensus_rule"] or None, relevance_level=data["relevance_level"], all_queries=data["all_queries"],
            judged_only=data["judged_only"], max_docs=data["max_docs"], resamples=body.resamples, seed=body.seed,
            list_version=data["list_version"])
    except evaluations.EvaluationRefused as refusal:
        raise ApiError(400, str(refusal)) from None
    job = Job.objects.filter(kind="evaluate_runs", params__evaluation=str(evaluation.uuid)).get()
    return accepted(request, response, {"uuid": evaluation.uuid, "state": evaluation.state, "url": _url(request, evaluation),
                                        "job": job_out(request, job)}, job)


def _version(project, round_uuid: UUID, number: int | None) -> str | None:
    """The published version `number` of the round's list, by uuid for the form; 400 naming `version` when there is none."""
    if number is None:
        return None
    round = project.rounds.filter(uuid=round_uuid).first()
    if round is None:
        return None  # the form names the round
    published = JudgmentListVersion.objects.filter(lineage=lineage_of(round))
    found = published.filter(number=number).first()
    if found is None:
        numbers = ", ".join(f"v{n}" for n in published.order_by("number").values_list("number", flat=True)) or "none yet"
        raise ApiError(400, f"version: {round.name}'s judgment list has no published version {number} (published: {numbers}).")
    return str(found.uuid)


class MeasuresOut(Schema):
    measures: list[str] = Field(description="The canonical names of the measures asked for, in order, without repeats; "
                                            "with no `name`, one example of every measure the engine has")


@router.get("/{slug}/measures", response={200: MeasuresOut, **ERRORS},
            summary="Check measure names as an evaluation would: 400 naming the first unknown one")
def check_measures(request: HttpRequest, slug: str, name: list[str] = Query(None, description="A measure name; repeat for more")):
    project_access(request, slug, "can_read_reports")
    if not name:
        return {"measures": [measure.canonical for measure in registered_measures()]}
    try:
        return {"measures": evaluations.measure_strings(name)}
    except ValueError as problem:
        raise ApiError(400, str(problem)) from None


@router.get("/{slug}/evaluations", response={200: Page[EvaluationSummary], **ERRORS}, summary="The project's evaluations, newest first")
def list_evaluations(request: HttpRequest, slug: str, params: Query[PageParams]):
    project, _ = project_access(request, slug, "can_read_reports")
    found = project.evaluations.select_related("round", "list_version", "project", "fill_judge").order_by("-created_at", "pk")
    return page(request, found, params, lambda evaluation: evaluation_out(request, evaluation, results=False))


def _evaluation(request: HttpRequest, slug: str, uuid: UUID) -> Evaluation:
    return object_access(request, slug, access.evaluation_for_user, uuid, "can_read_reports")


def _finished(request: HttpRequest, slug: str, uuid: UUID) -> Evaluation:
    evaluation = _evaluation(request, slug, uuid)
    if evaluation.state != Evaluation.State.DONE:
        raise ApiError(409, f"The evaluation is {evaluation.state}: it has no values yet.", "not_done")
    return evaluation


@router.get("/{slug}/evaluations/{uuid}", response={200: EvaluationOut, **ERRORS}, url_name="get_evaluation",
            summary="An evaluation with its stored results")
def get_evaluation(request: HttpRequest, slug: str, uuid: UUID):
    return evaluation_out(request, _evaluation(request, slug, uuid))


class PerQueryParams(PageParams):
    run: str | None = Field(None, description="Only this run (its uuid or its name)")
    measure: list[str] = Field([], description="Only these measures (any spelling the engine reads: nDCG@10, ndcg_cut.10); "
                                               "repeat for more. The unjudged shares (UnjudgedShare@10...) are there too")


class PerQueryValue(Schema):
    run: str = Field(description="The run's name")
    query_id: str
    measure: str = Field(description="The measure's canonical name")
    value: float | None = Field(description="null where the engine's value is not a number")


class PerQueryOut(LabelSourceOut):
    items: list[PerQueryValue] = Field(description="In the stored order: by run, then measure, then query")
    next: str | None = Field(None, description="The next page's URL; null on the last page.")


@router.get("/{slug}/evaluations/{uuid}/per-query", response={200: PerQueryOut, **ERRORS, 409: ErrorOut},
            summary="Per-query values, a page at a time, read from the stored Parquet",
            description="Filtered by `run` and `measure` (400 naming a run or measure the evaluation does not have), paged "
                        "by `limit` and `offset` like every list.")
def per_query(request: HttpRequest, slug: str, uuid: UUID, params: Query[PerQueryParams]):
    evaluation = _finished(request, slug, uuid)
    wanted = {"run": _run_name(evaluation, params.run), "measure": _measure_names(evaluation, params.measure)}
    rows = _per_query_rows(evaluation.per_query_file, {column: names for column, names in wanted.items() if names})
    return {**evaluation.label_source.as_dict(), **page(request, _Rows(rows), params, _per_query_value)}


def _run_name(evaluation: Evaluation, wanted: str | None) -> list[str]:
    if wanted is None:
        return []
    for run in evaluation.ordered_runs():
        if wanted in (str(run.uuid), run.name):
            return [run.name]
    raise ApiError(400, f"run: the evaluation has no run {wanted!r}.")


def _measure_names(evaluation: Evaluation, wanted: list[str]) -> list[str]:
    """The canonical names of the measures asked for; 400 naming the first one unknown to the engine or not
    stored with this evaluation (its measures and unjudged shares)."""
    try:
        names = evaluations.measure_strings(wanted)
    except ValueError as problem:
        raise ApiError(400, f"measure: {problem}") from None
    stored = [*evaluation.measures, *evaluations.unjudged_measures(evaluation.measures).values()]
    for name in names:
        if name not in stored:
            raise ApiError(400, f"measure: the evaluation has no values of {name} (it has {', '.join(stored)}).")
    return names


def _per_query_rows(name: str, wanted: dict[str, list[str]]) -> Iterator[dict]:
    """The stored rows matching `wanted` ({column: values}), read a batch at a time: never the whole file in memory."""
    with default_storage.open(name, "rb") as handle:
        for batch in pq.ParquetFile(handle).iter_batches(batch_size=PER_QUERY_BATCH, columns=["run", "query_id", "measure", "value"]):
            mask = None
            for column, values in wanted.items():
                match = pc.is_in(batch.column(column).cast("string"), value_set=pa.array(values, pa.string()))
                mask = match if mask is None else pc.and_(mask, match)
            yield from (batch if mask is None else batch.filter(mask)).to_pylist()


class _Rows:
    """An iterator sliced as paging slices a QuerySet: rows[start:stop] reads no further than `stop`."""

    def __init__(self, rows: Iterator[dict]):
        self.rows = rows

    def __getitem__(self, window: slice) -> list[dict]:
        return list(itertools.islice(self.rows, window.start, min(window.stop, sys.maxsize)))


def _per_query_value(row: dict) -> dict:
    value = row["value"]
    return {"run": str(row["run"]), "query_id": str(row["query_id"]), "measure": str(row["measure"]),
            "value": None if value is None or math.isnan(value) else value}


class ComparisonParams(Schema):
    baseline: UUID | None = Field(None, description="The run the others are compared with (a run of the evaluation); by default its first")


class ComparisonOut(LabelSourceOut):
    baseline: str = Field(description="The baseline run's name")
    rows: list[ComparisonRow] = Field(description="Per candidate run and measure, the engine's comparison with the baseline "
                                                  "(A is the candidate, B the baseline) and its verdict: pass (significant after "
                                                  "Holm's correction), fail (not significant, though the test could have been) or "
                                                  "insufficient (so few queries differ, or so few resamples, that the corrected p "
                                                  "could not go below 0.05); the engine's booleans have no third state")


@router.get("/{slug}/evaluations/{uuid}/comparison", response={200: ComparisonOut, **ERRORS, 409: ErrorOut},
            summary="Every other run compared with a baseline: paired permutation and t-tests, Holm-corrected, bootstrap interval")
def comparison(request: HttpRequest, slug: str, uuid: UUID, params: Query[ComparisonParams]):
    evaluation = _finished(request, slug, uuid)
    runs = evaluation.ordered_runs()
    if len(runs) < 2:
        raise ApiError(409, "The evaluation has one run: there is nothing to compare it with.", "single_run")
    baseline = runs[0] if params.baseline is None else next((run for run in runs if run.uuid == params.baseline), None)
    if baseline is None:
        raise ApiError(400, "baseline: not a run of this evaluation.")
    compared = (evaluation.results["comparisons"] if baseline.name == evaluation.results.get("baseline")
                else compare_with(evaluation, baseline, [run for run in runs if run != baseline]))
    compared = with_verdicts(compared, resamples=evaluation.resamples)
    return {**evaluation.label_source.as_dict(), "baseline": baseline.name,
            "rows": [{"candidate": name, **row} for name, rows in compared.items() for row in rows]}


def compare_with(evaluation: Evaluation, baseline: StoredRun, others: list[StoredRun]) -> dict[str, list[dict]]:
    """The engine's comparisons of `others` with `baseline` from the stored per-query values, with the
    evaluation's resamples and seed, corrected together as the job corrects them."""
    frame = evaluations.per_query_frame(evaluation)

    def values(run: StoredRun) -> dict[str, dict[str, float]]:
        return {m: frame[(run.name, m)].dropna().to_dict() for m in evaluation.measures}

    compared = compare_many(values(baseline), {run.name: values(run) for run in others},
                            resamples=evaluation.resamples, seed=evaluation.seed)
    return jsonable({name: [c.as_dict() for c in rows] for name, rows in compared.items()})
