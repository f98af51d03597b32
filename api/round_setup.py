"""Setting a round up through the API, as the round form and the round page's buttons do: create a draft round
from a pool (raters, scale, guidelines version, assignment and overlap policy), open it, and import judgments
into it from a file (qrels, JSON list or Quepid CSV, all or nothing). Leads only, with a write token.

Creating is a POST on the path the rounds router lists, so it goes on that router (see api.py).
"""

from typing import Literal
from uuid import UUID

from django.http import HttpRequest
from ninja import Field, File, Form, Router, Schema, Status, UploadedFile

from judgments import access
from judgments.forms import RoundForm
from judgments.lib.judgment_formats import JudgmentFileProblem
from judgments.models import Round
from judgments.ops import judgment_files, rounds
from judgments.ops.actions import ActionRefused

from . import rounds as round_reads
from .auth import object_access, project_access
from .errors import ApiError
from .jobs import form_error
from .schemas import ERRORS, ErrorOut
from .uploads import _checked, clean_text

router = Router(tags=["rounds"])


class RoundIn(Schema):
    name: str = Field(max_length=200)
    pool: UUID = Field(description="A pool of the project with pairs (its build finished)")
    guidelines: int | None = Field(None, description="The guidelines version number the round keeps; absent: the latest")
    scale: Literal["graded", "binary", "answers", "custom"] = Field("graded", description="graded 0-3, binary 0-1, answers 0-2, "
                                                                                          "or custom (custom_scale)")
    custom_scale: str = Field("", max_length=2000, description="For scale custom: one grade per line, lowest first: "
                                                               "value | label | cue")
    faithfulness: Literal["none", "supported", "custom"] = Field("none", description="A second grade for answers (pools of "
                                                                                    "answers only): supported 0-2 or custom")
    custom_faithfulness: str = Field("", max_length=2000, description="For faithfulness custom, as custom_scale")
    raters: list[str] = Field([], description="Usernames of the project's raters and leads; may stay empty in a draft")
    raters_per_pair: int = Field(1, description="Independent judgments of every pair, 1 to 10")
    overlap_percent: int = Field(15, description="With one rater per pair: the share of pairs a second rater judges too, "
                                                 "10 to 20, or 0 for none")
    order: Literal["grouped", "shuffled"] = "grouped"
    judging_order: Literal["pool", "random", "mtf", "mmns"] = "pool"
    show_rank: bool = Field(False, description="Show raters the rank (rounds are blind by default)")


class RoundCreated(round_reads.RoundOut):
    pool: UUID
    guidelines: int = Field(description="The guidelines version the round keeps")
    raters: list[str]
    raters_per_pair: int
    overlap_share: float
    show_rank: bool


class RoundOpened(Schema):
    round: round_reads.RoundOut
    added: int = Field(description="Pairs laid out for raters now (0 when a closed round reopens)")
    overlap: int = Field(description="Of them, pairs a second rater judges too")
    missing_from_corpus: int = Field(description="Pool pairs left out: their document is not in the corpus")
    carried: int = Field(description="Pairs whose label a refreshed version carries over")
    for_judge: int = Field(description="Pairs outside a planned round's sample, left to its automatic judge")


class ImportOut(Schema):
    format: Literal["qrels", "json", "quepid-csv"]
    dry_run: bool = Field(description="True: nothing was written; the counts say what the import would do")
    created: int = Field(description="Judgments added")
    updated: int = Field(description="Judgments whose grade changed (the old grade is kept in the pair's edit history)")
    unchanged: int
    raters: dict[str, int] = Field(description="Judgments per rater in the file (username; 'imported' when none is named)")


class Problem(Schema):
    line: int | None = Field(description="The file's line (null for a JSON list's object without one)")
    problem: str


class ImportRefused(ErrorOut):
    """A 400: for a file the importer refuses (code bad_file), each problem found; for a bad request, none."""

    problems: list[Problem] = Field([], description=f"Each problem found, at most {judgment_files.MAX_PROBLEMS}")
    total: int = Field(0, description="Problems found in all")


def round_out(round: Round) -> dict:
    """A round as the rounds list shows it, with its progress now."""
    return round_reads._round_out(round, round_reads._totals([round.pk]).get(round.pk))


def _round_data(project, body: RoundIn) -> dict:
    """The body as the round form reads it, the latest guidelines version when none is named."""
    latest = project.guideline_versions.values_list("number", flat=True).first()
    if latest is None:
        raise ApiError(409, "The project has no rater guidelines yet: every round is bound to a guidelines version, so write "
                            "them first.")
    return {**body.dict(), "name": clean_text(body.name, "name"), "pool": str(body.pool),
            "guidelines": latest if body.guidelines is None else body.guidelines}


@round_reads.router.post("/{slug}/rounds", response={201: RoundCreated, 409: ErrorOut, **ERRORS},
                         summary="Create a draft round from a pool (leads)",
                         description="Validated as the round form validates it: a pool without pairs, a custom scale that "
                                     "does not parse, too few raters for the policy, a judging order with shuffled serving "
                                     "are 400 naming the field; a name in use, or no guidelines yet, is 409. Open it with "
                                     "POST .../rounds/{uuid}/open.")
def create_round(request: HttpRequest, slug: str, body: RoundIn):
    project, _ = project_access(request, slug, "can_manage")
    data = _round_data(project, body)
    if project.rounds.filter(name=data["name"]).exists():
        raise ApiError(409, f"The project already has a round named {data['name']!r}.")
    form = RoundForm(data, project=project)
    if not form.is_valid():
        raise form_error(form)
    try:
        round = rounds.create_round(project, pool=form.cleaned_data["pool"], user=request.auth[0].user, **form.round_settings())
    except ActionRefused as refusal:
        raise ApiError(400, str(refusal)) from None
    return Status(201, {**round_out(round), "pool": round.pool.uuid, "guidelines": round.guidelines.number,
                        "raters": sorted(round.raters.values_list("username", flat=True)), "raters_per_pair": round.raters_per_pair,
                        "overlap_share": round.overlap_share, "show_rank": round.show_rank})


@router.post("/{slug}/rounds/{uuid}/open", response={200: RoundOpened, 409: ErrorOut, **ERRORS},
             summary="Open a draft round to its raters, or reopen a closed one (leads)",
             description="As the round page's Open button: a draft lays out its pool's pairs for raters now. 409 saying "
                         "what is in the way when the round is open already, has no raters or too few for its policy, or "
                         "its pool has no pair whose document is in the corpus.")
def open_round(request: HttpRequest, slug: str, uuid: UUID):
    round = object_access(request, slug, access.round_for_user, uuid, "can_manage")
    try:
        added = rounds.open_round(round)
    except ActionRefused as refusal:
        raise ApiError(409, str(refusal)) from None
    round.refresh_from_db()
    counts = {key: added.get(key, 0) for key in ("added", "overlap", "missing_from_corpus", "carried", "for_judge")}
    return {"round": round_out(round), **counts}


@router.post("/{slug}/rounds/{uuid}/judgments", response={**ERRORS, 413: ErrorOut, 200: ImportOut, 400: ImportRefused},
             summary="Import judgments into a round from a file: qrels, JSON list or Quepid CSV (leads)",
             description="As the round's import form: every pair must be a pair of the round and every grade on its "
                         "scale, else 400 naming each problem as `file:line: problem` and nothing is written. Grades "
                         "become the judgments of `rater` (a lead or rater of the project), or of the inactive "
                         "'imported' account when none is named; a Quepid CSV's columns name their raters. A pair the "
                         "rater judged already is updated (its edit history keeps the old grade). With dry_run, only "
                         "the counts.")
def import_judgments(request: HttpRequest, slug: str, uuid: UUID, file: File[UploadedFile], rater: Form[str] = "",
                     dry_run: Form[bool] = False):
    round = object_access(request, slug, access.round_for_user, uuid, "can_manage")
    name = _checked(file)
    try:
        report = judgment_files.import_judgments(round, file, name, rater=clean_text(rater, "rater") or None, dry_run=dry_run,
                                                 editor=request.auth[0].user)
    except JudgmentFileProblem as refusal:
        return Status(400, _refused(refusal))
    return {"format": report.format, "dry_run": report.dry_run, "created": report.added, "updated": report.changed,
            "unchanged": report.unchanged, "raters": report.raters}


def _refused(refusal: JudgmentFileProblem) -> dict:
    problems = getattr(refusal, "problems", [refusal])
    return {"detail": f"Nothing was imported: {refusal}", "code": "bad_file", "total": getattr(refusal, "total", 1),
            "problems": [{"line": problem.line, "problem": problem.problem} for problem in problems]}
