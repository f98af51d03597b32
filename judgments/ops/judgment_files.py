"""A round's judgment list in and out: consensus labels, streamed exports, and imports with a dry run.

Exports are generators over one database snapshot (a REPEATABLE READ transaction on PostgreSQL; SQLite
reads inside one transaction), fetching rows with a server-side cursor and turning them into labels a
chunk of pairs at a time, so a million judgments export in flat memory. The formats themselves are
written by `judgment_formats` (no Django); consensus labels come from `agreement.consensus`, with a
lead's adjudication overriding the rule.
"""

import hashlib
import io
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import IO

import pandas as pd
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from django.utils.text import slugify

from ..lib import agreement, judgment_formats
from ..lib.fileformats import show
from ..lib.judgment_formats import JudgmentFileProblem, Label, QueryLabels
from ..models import Judgment, JudgmentEdit, LabelsChange, MachineGrade, Query, Round
from .grading import recount_pairs

IMPORTED_RATER = "imported"  # the account imported judgments are attributed to when no rater is named
MAX_PROBLEMS = 20  # problems an import names (it counts the rest) when the file's rows do not fit the round
CHUNK_ROWS = 20_000  # judgments turned into labels at a time
WRITE_BATCH = 2_000  # judgments an import writes per statement

# A round's judgments with their query, document and rater; the queries below add columns and conditions.
_JUDGMENTS = """
FROM judgments_judgment j
JOIN judgments_rounditem i ON i.id = j.item_id
JOIN judgments_query q ON q.id = i.query_id
JOIN judgments_document d ON d.id = i.document_id
JOIN auth_user u ON u.id = j.rater_id
"""
_GRADES_SQL = ("SELECT q.query_id, q.text, d.doc_id, i.id, j.grade, u.username, a.grade" + _JUDGMENTS
               + "LEFT JOIN judgments_adjudication a ON a.item_id = i.id WHERE i.round_id = %s AND j.grade IS NOT NULL {query} "
               "ORDER BY q.id, d.doc_id, i.id, u.username")
_LONG_SQL = ("SELECT q.query_id, q.text, d.doc_id, u.username, j.grade, j.unrateable, j.unrateable_note, j.note, j.seconds, "
             "j.created_at, j.updated_at, j.faithfulness, ar.name" + _JUDGMENTS
             + "LEFT JOIN judgments_answerrun ar ON ar.id = d.answer_run_id WHERE i.round_id = %s ORDER BY q.id, d.doc_id, u.username")


@contextmanager
def snapshot():
    """One consistent view of the database for everything read inside. Inside a transaction already
    (a test, a caller's atomic block), that transaction is the snapshot."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def _rows(sql: str, params) -> Iterator[tuple]:
    """Rows of a query through a server-side cursor, never all of them in memory."""
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(5000):
            yield from batch


# --------------------------------------------------------------------------------------- consensus


@dataclass(frozen=True, slots=True)
class FinalLabel:
    query_id: str
    query: str
    doc_id: str
    label: int
    n_grades: int
    spread: int
    adjudicated: bool


def _grade_rows(round: Round, query_id: str | None = None) -> Iterator[tuple]:
    """Every grade of the round (or of one query), pair by pair in export order."""
    if query_id is None:
        return _rows(_GRADES_SQL.format(query=""), [round.pk])
    return _rows(_GRADES_SQL.format(query="AND q.query_id = %s"), [round.pk, query_id])


def final_labels(round: Round, rule: str | None = None, *, query_id: str | None = None) -> Iterator[FinalLabel]:
    """Each graded pair's one label: the lead's adjudication if there is one, else `rule` (the round's
    consensus rule by default) over its grades. Unrateable judgments are not grades; pairs with only
    those have no label. In query order, then doc id; with `query_id`, that query's pairs only."""
    rule = rule or round.consensus_rule
    labels = round.grading_scale.values
    rows = _grade_rows(round, query_id)
    carry: list[tuple] = []  # the first row of the next pair, read while completing a chunk
    while chunk := carry + list(itertools.islice(rows, CHUNK_ROWS)):
        carry = []
        for extra in rows:  # the chunk's last pair may have more grades: read them into the chunk
            if extra[3] != chunk[-1][3]:
                carry = [extra]
                break
            chunk.append(extra)
        yield from _labels_of(chunk, labels, rule)


def _labels_of(chunk: list[tuple], labels, rule: str) -> Iterator[FinalLabel]:
    """The labels of a chunk of whole pairs, in the chunk's order (whole columns at a time)."""
    frame = pd.DataFrame(chunk, columns=["query_id", "query", "doc_id", "item", "grade", "rater", "adjudicated"])
    agreed = agreement.consensus(frame[["item", "rater", "grade"]], labels, rule)
    pairs = frame.drop_duplicates("item").merge(agreed[["item", "label", "n_grades", "spread"]], on="item", how="left")
    adjudicated = pairs["adjudicated"].notna()
    final = pairs["adjudicated"].where(adjudicated, pairs["label"]).astype("int64")
    for values in zip(pairs["query_id"].tolist(), pairs["query"].tolist(), pairs["doc_id"].tolist(), final.tolist(),
                      pairs["n_grades"].tolist(), pairs["spread"].tolist(), adjudicated.tolist()):
        yield FinalLabel(*values)


# SQL selecting the id of the newest LabelsChange of the round whose table is named `{table}` in a query.
NEWEST_LABELS_CHANGE = "(SELECT MAX(c.id) FROM judgments_labelschange c WHERE c.round_id = {table}.id)"
UNREAD = object()  # labels_state reads the newest change itself


def labels_state(round: Round, *, newest_change=UNREAD) -> str:
    """A name for the state of the round's final labels: the newest write that may have changed them (a
    LabelsChange, written by database triggers) and the round's settings they are computed with. Equal
    names mean equal labels, so an export made in one state can be reused in it. One indexed row read,
    unless the caller read `newest_change` with the round (NEWEST_LABELS_CHANGE); read it in the export's
    snapshot for the name to be that export's."""
    if newest_change is UNREAD:
        newest_change = LabelsChange.objects.filter(round_id=round.pk).order_by("-id").values_list("id", flat=True).first()
    newest = newest_change or 0
    settings_digest = hashlib.sha256(json.dumps([round.consensus_rule, round.scale], sort_keys=True).encode()).hexdigest()[:16]
    return f"{newest}-{settings_digest}"


def prune_labels_changes(round: Round | None = None) -> int:
    """Delete every LabelsChange but each round's newest (the only one labels_state reads), of one round; or
    of all, and every one of a round that is gone. Returns how many went."""
    older = LabelsChange.objects.filter(Exists(LabelsChange.objects.filter(round_id=OuterRef("round_id"), id__gt=OuterRef("id"))))
    if round is not None:
        return older.filter(round_id=round.pk).delete()[0]
    return older.delete()[0] + LabelsChange.objects.exclude(Exists(Round.objects.filter(pk=OuterRef("round_id")))).delete()[0]


def unrateable_pairs(round: Round) -> int:
    """Pairs flagged unrateable that have no grade: they are left out of every label export."""
    graded = Judgment.objects.filter(item=OuterRef("pk"), grade__isnull=False)
    flagged = Judgment.objects.filter(item=OuterRef("pk"), grade__isnull=True)
    return round.items.filter(Exists(flagged)).exclude(Exists(graded)).count()


# ------------------------------------------------------------------------------------------ exports


@dataclass(frozen=True)
class ExportOptions:
    rule: str | None = None  # the round's consensus rule when None
    threshold: int | None = None  # qrels: grade >= threshold is 1, else 0
    metric: str = "ndcg"  # rank_eval
    k: int = 10
    index: str = "products"
    fields: tuple[str, ...] = ("title",)
    # qrels: "human" labels, one judge's grades ("judge"), or human labels with the judge's grades where there is
    # none ("fill"); `judge` names the round's judge for the last two.
    source: str = "human"
    judge: str | None = None


@dataclass(frozen=True)
class ExportFormat:
    name: str
    label: str
    extension: str
    content_type: str


FORMATS = {f.name: f for f in (
    ExportFormat("qrels", "TREC qrels", "qrels", "text/plain"),
    ExportFormat("json", "JSON judgment list", "json", "application/json"),
    ExportFormat("quepid-csv", "Quepid CSV (a column per rater)", "csv", "text/csv"),
    ExportFormat("long-csv", "Every judgment (long CSV)", "csv", "text/csv"),
    ExportFormat("consensus-csv", "Final labels with their number of grades and spread (CSV)", "csv", "text/csv"),
    ExportFormat("rank-eval", "Elasticsearch / OpenSearch _rank_eval body", "json", "application/json"),
    ExportFormat("ltr", "RankLib / LTR judgments", "txt", "text/plain"),
)}


def file_stem(round: Round) -> str:
    """What every file made from a round is named after: the round and its guidelines version."""
    return f"{slugify(round.name) or 'round'}_guidelines-v{round.guidelines.number}"


# The formats written from final labels: a consensus rule other than the round's changes their content.
_LABEL_FORMATS = ("qrels", "json", "consensus-csv", "rank-eval", "ltr")


def export_filename(round: Round, fmt: str, options: ExportOptions = ExportOptions()) -> str:
    """A name of its own for every variant of an export: graded and binary qrels (and each threshold), qrels
    of one judge's grades (``_judge-<name>``) or of the raters' labels filled by a judge (``_judge-filled-<name>``),
    each _rank_eval metric and cutoff, labels by a consensus rule other than the round's (a judge's grades alone
    take no consensus, so their name leaves the rule out)."""
    stem = file_stem(round)
    if fmt == "quepid-csv":
        return judgment_formats.quepid_filename(stem)
    variant = fmt
    if fmt == "qrels":
        variant = "qrels-graded" if options.threshold is None else f"qrels-binary-ge{options.threshold}"
        if options.source != "human":
            variant += f"_{'judge' if options.source == 'judge' else 'judge-filled'}-{judge_tag(round, options.judge or '')}"
    elif fmt == "rank-eval":
        variant = f"rank-eval-{options.metric}-at{options.k}"
    by_rule = not (fmt == "qrels" and options.source == "judge")
    if fmt in _LABEL_FORMATS and by_rule and options.rule and options.rule != round.consensus_rule:
        variant += f"_{options.rule.replace('_', '-')}"
    return f"{stem}_{variant}.{FORMATS[fmt].extension}"


def judge_tag(round: Round, name: str) -> str:
    """The judge's name as it goes into a file name: slugified; when another judge of the round slugifies the same
    ("GPT 4" beside "gpt-4"), a name that is not its own slug gets its uuid's first 8 digits too, so that two judges'
    files never share a name."""
    tag = slugify(name) or "judge"
    if name == tag:
        return tag
    same = [judge for judge in round.judges.only("uuid", "name") if (slugify(judge.name) or "judge") == tag]
    mine = next((judge for judge in same if judge.name == name), None)
    return f"{tag}-{mine.uuid.hex[:8]}" if len(same) > 1 and mine is not None else tag


def check_exportable(round: Round, fmt: str) -> None:
    """Refuse, before the first byte, an export whose format cannot hold the round's ids (TREC and LTR
    lines are split on whitespace), rather than break off halfway through a download."""
    if fmt not in ("qrels", "ltr"):
        return
    spaced = round.items.filter(Q(query__query_id__regex=r"\s") | Q(document__doc_id__regex=r"\s")).select_related("query", "document").first()
    if spaced is not None:
        raise ValueError(f"query {spaced.query.query_id!r} / document {spaced.document.doc_id!r} has whitespace in an id, "
                         f"which {fmt} cannot hold: export JSON or CSV instead")


def export(round: Round, fmt: str, options: ExportOptions = ExportOptions()) -> Iterator[str]:
    """The round's list in `fmt`, streamed from one snapshot."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    with snapshot():
        yield from _WRITERS[fmt](round, options)


def _qrels(round: Round, options: ExportOptions) -> Iterator[str]:
    return judgment_formats.qrels(_labels(round, options), threshold=options.threshold)


SOURCES = {"human": "The raters' labels", "judge": "An automatic judge's grades",
           "fill": "The raters' labels, and a judge's grades where there is none"}


def _labels(round: Round, options: ExportOptions) -> Iterator[Label]:
    """The pairs' labels from `options.source` (see ExportOptions)."""
    if options.source not in SOURCES:
        raise ValueError(f"unknown label source {options.source!r}; choose one of {', '.join(SOURCES)}")
    labelled = set()
    if options.source != "judge":
        for f in final_labels(round, options.rule):
            labelled.add((f.query_id, f.doc_id))
            yield Label(f.query_id, f.doc_id, f.label)
    if options.source == "human":
        return
    judge = round.judges.filter(name=options.judge).first()
    if judge is None:
        raise ValueError(f"the round has no judge named {options.judge!r}")
    grades = (judge.grades.filter(grade__isnull=False).order_by("item__query_id", "item__document__doc_id")
              .values_list("item__query__query_id", "item__document__doc_id", "grade"))
    for query_id, doc_id, grade in grades.iterator(chunk_size=5000):
        if (query_id, doc_id) not in labelled:
            yield Label(query_id, doc_id, grade)


def _by_query(round: Round, options: ExportOptions, *, name_answers: bool = False) -> Iterator[QueryLabels]:
    """Each query's labels; with `name_answers`, an answer round's ratings also name the answer run."""
    runs = answer_runs_of(round) if name_answers and round.is_answers else None
    for (query_id, query), group in itertools.groupby(final_labels(round, options.rule), key=lambda f: (f.query_id, f.query)):
        if runs is None:
            yield QueryLabels(query_id, query, tuple((f.doc_id, f.label) for f in group))
        else:
            yield QueryLabels(query_id, query, tuple((f.doc_id, f.label, {"answer_run": runs.get(f.doc_id)}) for f in group))


def answer_runs_of(round: Round) -> dict[str, str]:
    """An answer round's answer documents: doc id -> the name of the answer run that gave the answer."""
    return dict(round.items.filter(document__answer_run__isnull=False)
                .values_list("document__doc_id", "document__answer_run__name"))


def _json(round: Round, options: ExportOptions) -> Iterator[str]:
    return judgment_formats.json_list(_by_query(round, options, name_answers=True))


def _rank_eval(round: Round, options: ExportOptions) -> Iterator[str]:
    return judgment_formats.rank_eval(_by_query(round, options), metric=options.metric, k=options.k, index=options.index,
                                      fields=options.fields, relevant_threshold=options.threshold or 1,
                                      maximum_relevance=max(round.grading_scale.values))


def _ltr(round: Round, options: ExportOptions) -> Iterator[str]:
    return judgment_formats.ltr((Label(f.query_id, f.doc_id, f.label), f.query) for f in final_labels(round, options.rule))


JUDGE_COLUMN = "judge:"  # a Quepid CSV column of machine grades is named judge:<name>; imports skip it


def _quepid(round: Round, options: ExportOptions) -> Iterator[str]:
    """A column per rater, then a column per automatic judge (``judge:<name>``) on the pairs the raters graded."""
    raters = sorted(set(Judgment.objects.filter(item__round=round, grade__isnull=False).values_list("rater__username", flat=True)))
    judges = list(round.judges.order_by("name").values_list("pk", "name"))
    column = {name: i for i, name in enumerate(raters)}
    machine = {(item, judge): grade for item, judge, grade in MachineGrade.objects.filter(item__round=round, grade__isnull=False)
               .values_list("item_id", "judge_id", "grade").iterator(chunk_size=5000)} if judges else {}

    def rows():
        for (item, query, doc_id), group in itertools.groupby(_grade_rows(round), key=lambda r: (r[3], r[1], r[2])):
            grades: list[int | None] = [None] * len(raters)
            for row in group:
                grades[column[row[5]]] = row[4]
            yield query, doc_id, grades + [machine.get((item, judge)) for judge, _name in judges]

    return judgment_formats.quepid_csv(rows(), raters + [f"{JUDGE_COLUMN}{name}" for _pk, name in judges])


def _long(round: Round, options: ExportOptions) -> Iterator[str]:
    """Every rater's judgment (source ``human``), then every automatic judge's verdict (source ``judge``, the
    judge's name as the rater, its rationale as the note; a pair it could not judge has no grade)."""
    names = ("query_id", "query", "doc_id", "rater", "grade", "unrateable", "unrateable_note", "note", "seconds",
             "created_at", "updated_at", "faithfulness", "answer_run")
    human = ({**dict(zip(names, row)), "created_at": _utc(row[9]), "updated_at": _utc(row[10]), "source": "human"}
             for row in _rows(_LONG_SQL, [round.pk]))
    machine = ({"query_id": query_id, "query": query, "doc_id": doc_id, "rater": judge, "grade": grade, "note": rationale,
                "created_at": created, "updated_at": created, "source": "judge"}
               for query_id, query, doc_id, judge, grade, rationale, created in
               MachineGrade.objects.filter(item__round=round).order_by("item__query_id", "item__document__doc_id", "judge__name")
               .values_list("item__query__query_id", "item__query__text", "item__document__doc_id", "judge__name", "grade",
                            "rationale", "created_at").iterator(chunk_size=5000))
    columns = judgment_formats.LONG_CSV_COLUMNS + (judgment_formats.ANSWER_CSV_COLUMNS if round.is_answers else ())
    return judgment_formats.long_csv(itertools.chain(human, machine), columns)


def _utc(moment: datetime | None) -> datetime | None:
    """A time read by raw SQL, with its zone: SQLite's come naive (they are UTC), PostgreSQL's aware."""
    return moment.replace(tzinfo=dt_timezone.utc) if moment is not None and timezone.is_naive(moment) else moment


def _consensus(round: Round, options: ExportOptions) -> Iterator[str]:
    return judgment_formats.consensus_csv(
        (f.query_id, f.query, f.doc_id, f.label, f.n_grades, f.spread, f.adjudicated) for f in final_labels(round, options.rule))


_WRITERS = {"qrels": _qrels, "json": _json, "quepid-csv": _quepid, "long-csv": _long, "consensus-csv": _consensus,
            "rank-eval": _rank_eval, "ltr": _ltr}


# ------------------------------------------------------------------------------------------ imports


@dataclass
class ImportReport:
    """What an import did, or would do (dry run)."""

    format: str
    dry_run: bool
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    raters: dict[str, int] = field(default_factory=dict)  # judgments per rater in the file

    @property
    def summary(self) -> str:
        verb = "would add" if self.dry_run else "added"
        return (f"{self.format}: {verb} {self.added}, {'would change' if self.dry_run else 'changed'} {self.changed}, "
                f"{self.unchanged} unchanged, for {', '.join(f'{r} ({n})' for r, n in sorted(self.raters.items()))}")


class JudgmentFileProblems(JudgmentFileProblem):
    """Every row of a judgment file that does not fit the round (up to MAX_PROBLEMS of them, the rest counted),
    ``name:line: problem; name:line: problem (and N more)``. Its first problem is its path, line and problem."""

    def __init__(self, problems: list[JudgmentFileProblem], total: int):
        first = problems[0]
        super().__init__(first.path, first.problem, first.line)
        self.problems, self.total = problems, total
        more = f" (and {total - len(problems):,} more)" if total > len(problems) else ""
        self.args = ("; ".join(str(problem) for problem in problems) + more,)


class _Problems:
    """The problems found while checking every row, kept up to MAX_PROBLEMS and counted beyond."""

    def __init__(self, name: str):
        self.name, self.found, self.total = name, [], 0

    def add(self, problem: str, line: int | None) -> None:
        self.total += 1
        if len(self.found) < MAX_PROBLEMS:
            self.found.append(JudgmentFileProblem(self.name, problem, line))

    def raise_any(self) -> None:
        if self.total == 1:
            raise self.found[0]
        if self.total:
            raise JudgmentFileProblems(self.found, self.total)


def import_judgments(round: Round, source: bytes | IO[bytes], name: str, *, rater: str | None = None,
                     dry_run: bool = False, editor=None) -> ImportReport:
    """Read a qrels, JSON list or Quepid CSV file (its bytes, or a seekable binary stream) into the round:
    each grade becomes the judgment of the named rater (qrels and JSON: `rater`, or the "imported" account;
    Quepid CSV: each column's rater, by username, unless `rater` is given for a one-column file). Every
    pair must be a pair of the round and every grade on its scale: otherwise JudgmentFileProblem (for a file
    the readers cannot read, its first problem; for rows that do not fit the round, JudgmentFileProblems
    naming each up to MAX_PROBLEMS), and nothing is written."""
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    fmt = judgment_formats.detect_import_format(name, stream.read(4096))
    stream.seek(0)
    grades = _read(round, fmt, stream, name, rater)
    users = _raters(round, {username for _item, username, _grade in grades}, name, create_imported=not dry_run)
    report = ImportReport(format=fmt, dry_run=dry_run)
    for _item, username, _grade in grades:
        report.raters[username] = report.raters.get(username, 0) + 1
    with transaction.atomic():
        existing = {(j.item_id, j.rater_id): j for j in Judgment.objects.filter(item__round=round, rater__in=[u for u in users.values() if u.pk])}
        now = timezone.now()
        added, changed, edits = [], [], []
        for item_id, username, grade in grades:
            user = users[username]
            found = existing.get((item_id, user.pk))
            if found is None:
                added.append(Judgment(item_id=item_id, rater=user, grade=grade, created_at=now, updated_at=now))
            elif found.grade == grade and not found.unrateable:
                report.unchanged += 1
            else:
                edits.append(JudgmentEdit(item_id=item_id, rater=user, editor=editor, at=now, old_grade=found.grade,
                                          old_unrateable=found.unrateable, new_grade=grade, new_unrateable="",
                                          old_note=found.note, new_note=found.note))
                found.grade = grade
                changed.append(found)
        report.added, report.changed = len(added), len(changed)
        if not dry_run:
            Judgment.objects.bulk_create(added, batch_size=WRITE_BATCH)
            _regrade(changed, now)
            JudgmentEdit.objects.bulk_create(edits, batch_size=WRITE_BATCH)
            recount_pairs(round)
    return report


def _regrade(judgments: list[Judgment], now: datetime) -> None:
    """Each judgment's new grade, unflagged, in one prepared UPDATE run per row (bulk_update's CASE per batch
    was 5x slower on SQLite)."""
    table, at = Judgment._meta.db_table, connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.executemany(f"UPDATE {table} SET grade = %s, unrateable = '', unrateable_note = '', updated_at = %s WHERE id = %s",
                           [(judgment.grade, at, judgment.pk) for judgment in judgments])


def _read(round: Round, fmt: str, stream: IO[bytes], name: str, rater: str | None) -> list[tuple[int, str, int]]:
    """The file's grades as (round item id, username, grade), once every row fits the round."""
    limits = {"max_id_bytes": settings.INPUT_ID_MAX_BYTES}
    problems = _Problems(name)
    if fmt == "qrels":
        labels, lines = judgment_formats.numbered_qrels(stream, name, max_line_bytes=settings.INPUT_LINE_MAX_BYTES, **limits)
        found = [(label.query_id, label.doc_id, rater or IMPORTED_RATER, label.grade, line)
                 for label, line in zip(labels, lines)]
    elif fmt == "json":
        found = [(query.query_id, doc_id, rater or IMPORTED_RATER, grade, query.line)
                 for query in judgment_formats.read_json_list(stream, name, max_line_bytes=settings.INPUT_LINE_MAX_BYTES, **limits)
                 for doc_id, grade in query.labels]
    else:
        columns, rows = judgment_formats.read_quepid_csv(stream, name, max_line_bytes=settings.INPUT_LINE_MAX_BYTES,
                                                         **limits)
        if rater and len(columns) > 1:
            raise JudgmentFileProblem(name, f"it has {len(columns)} rater columns: name no rater, each column is one")
        names = [rater or (IMPORTED_RATER if column == "rating" else column) for column in columns]
        query_ids = _query_ids_by_text(round, name)
        found = []
        for line, (text, doc_id, grades) in enumerate(rows, start=2):
            if text not in query_ids:
                problems.add(f"the query {show(text)} is not in the round's query set", line)
                continue
            found += [(query_ids[text], doc_id, username, grade, line) for username, grade in zip(names, grades)
                      if grade is not None and not username.startswith(JUDGE_COLUMN)]  # machine grades are no judgments
    items = {(query_id, doc_id): pk for pk, query_id, doc_id in round.items.values_list("pk", "query__query_id", "document__doc_id")}
    scale = set(round.grading_scale.values)
    grades = []
    for query_id, doc_id, username, grade, line in found:
        item_id = items.get((query_id, doc_id))
        if item_id is None:
            problems.add(f"query {show(query_id)} / document {show(doc_id)} is not a pair of the round {round.name!r}", line)
        elif grade not in scale:
            problems.add(f"grade {grade} of query {show(query_id)} / document {show(doc_id)} is not on the round's scale "
                         f"({', '.join(map(str, sorted(scale)))})", line)
        else:
            grades.append((item_id, username, grade))
    problems.raise_any()
    return grades


def _query_ids_by_text(round: Round, name: str) -> dict[str, str]:
    ids: dict[str, str] = {}
    for query_id, text in Query.objects.filter(collection=round.pool.query_set_id).values_list("query_id", "text"):
        if text in ids:
            raise JudgmentFileProblem(name, f"the round's query set has the text {text!r} twice ({ids[text]}, {query_id}), "
                                            "so a Quepid file cannot say which is meant")
        ids[text] = query_id
    return ids


def _raters(round: Round, usernames: set[str], name: str, *, create_imported: bool) -> dict:
    """The accounts the grades go to: the project's leads and raters, or the inactive "imported" account.

    Anyone else gets the same answer whether or not an account has that name, so that an import (a dry
    run too) cannot tell a lead which usernames exist outside the project."""
    members = {m.user.username: m for m in round.project.memberships.filter(user__username__in=usernames).select_related("user")}
    users, outsiders = {}, []
    for username in sorted(usernames):
        membership = members.get(username)
        if membership is not None:
            if not membership.can_grade:
                raise JudgmentFileProblem(name, f"{username!r} is a viewer of this project, and viewers do not grade: "
                                                "make them a rater, or name another rater for the file")
            users[username] = membership.user
        elif username == IMPORTED_RATER and (imported := _imported_account(create=create_imported)) is not None:
            users[username] = imported
        else:
            outsiders.append(repr(username))
    if outsiders:
        verb = "is not a member" if len(outsiders) == 1 else "are not members"
        raise JudgmentFileProblem(name, f"{', '.join(outsiders)} {verb} of this project: add them as raters first, "
                                        "or name one rater for the file")
    return users


def _imported_account(*, create: bool):
    """The inactive account grades from files are attributed to when no rater is named; None when an active
    account took its name (it is then a person like any other). Without `create`, an unsaved stand-in."""
    User = get_user_model()
    user = User.objects.filter(username=IMPORTED_RATER).first()
    if user is not None:
        return None if user.is_active else user
    if not create:
        return User(username=IMPORTED_RATER, is_active=False)
    user, created = User.objects.get_or_create(username=IMPORTED_RATER, defaults={"is_active": False, "first_name": "Imported"})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return None if user.is_active else user
