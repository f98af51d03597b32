"""A round's agreement report: computed by a job from the round's grades, stored, and read by the page.

The statistics are `agreement`'s (no Django); this module gathers the grades, names what the numbers
are about (raters by username, queries by id), adds the gate and the flag counts, and keeps the result.
"""

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from uuid import UUID

import numpy as np
import pandas as pd
import psycopg
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import CharField, Count, F, Prefetch, Sum
from django.db.models.functions import Cast
from django.utils import timezone

from ..lib import agreement
from ..lib.fileformats import cell_text, csv_chunks
from ..lib.jsonable import records
from ..lib.verdicts import Verdict
from ..models import Adjudication, AgreementReport, Claim, Judgment, Query, RaterTotals, Round
from .jobs import Job, Progress, job_kind
from .rounds import after_row

RESAMPLES = 1000
SEED = 0
# The statistic a gate compares, by the round's gate_statistic and its scale.
_GATE_KEYS = {("alpha", "binary"): "alpha_nominal", ("alpha", "graded"): "alpha_ordinal",
              ("kappa", "binary"): "mean_pairwise_kappa", ("kappa", "graded"): "mean_pairwise_kappa",
              ("ac1", "binary"): "gwet_ac1", ("ac1", "graded"): "gwet_ac1"}


def scale_kind(round: Round) -> str:
    return "binary" if len(round.grading_scale.values) == 2 else "graded"


def grades_of(round: Round) -> pd.DataFrame:
    """Every grade of the round (unrateable judgments are not grades): item, rater, grade, time, query."""
    return _streamed_grades(round, "grade")


# Rows read from the database at a time on SQLite: one streamed query is read chunk by chunk into numpy
# arrays, so a million judgments never live as a million Python tuples.
_CHUNK = 50_000


def _streamed_grades(round: Round, column: str) -> pd.DataFrame:
    """The round's judgments that carry `column` (grade or faithfulness), in the columns of `grades_of`:
    raters by username and queries by id, looked up once each rather than joined into every row."""
    judgments = Judgment.objects.filter(item__round=round, **{f"{column}__isnull": False}).order_by()
    if connection.vendor == "postgresql":
        item, rater, grade, time, query = _aggregated_arrays(judgments, column)
    else:
        # The time as text, parsed a chunk at a time by pandas: a datetime object per row cost 4 s a million rows.
        rows = (judgments.values_list("item_id", "rater_id", column, Cast("created_at", CharField()), "item__query_id")
                .iterator(chunk_size=_CHUNK))
        parts = [_arrays(chunk) for chunk in itertools.batched(rows, _CHUNK)]
        item, rater, grade, time, query = (np.concatenate(column) for column in zip(*parts)) if parts else (np.empty(0, np.int64),) * 5
    usernames = dict(get_user_model().objects.filter(pk__in=pd.unique(rater).tolist()).values_list("pk", "username"))
    query_ids = dict(Query.objects.filter(pk__in=pd.unique(query).tolist()).values_list("pk", "query_id"))
    return pd.DataFrame({"item": item, "rater": _named(rater, usernames), "grade": grade,
                         "time": pd.to_datetime(time, utc=True), "query": _named(query, query_ids)}, copy=False)


def _arrays(chunk: tuple) -> tuple[np.ndarray, ...]:
    item, rater, grade, time, query = zip(*chunk)
    return (np.array(item, np.int64), np.array(rater, np.int64), np.array(grade, np.int64),
            pd.to_datetime(time, utc=True, format="ISO8601").to_numpy(dtype="datetime64[us]"), np.array(query, np.int64))


# On PostgreSQL each column comes back as one bytea, every value's binary form (big-endian integers, and a
# timestamp as microseconds since 2000) aggregated in the same pass over the rows, so the five stay in one
# row order. numpy reads them in place: a million judgments in about 1 s, 0.1 s of it in Python, where a
# cursor took 3 s (a tuple a row) and a COPY 1.2 s (a block a row through psycopg).
_SENT = (("int8send(item)", ">i8"), ("int4send(rater)", ">i4"), ("int2send(grade)", ">i2"),
         ("timestamptz_send(time)", ">i8"), ("int8send(query)", ">i8"))
_POSTGRES_EPOCH = np.datetime64("2000-01-01T00:00:00", "us")


def _aggregated_arrays(judgments, column: str) -> tuple[np.ndarray, ...]:
    """Item, rater, grade, time and query of each judgment, read with one aggregate query."""
    sql, params = judgments.values_list("item_id", "rater_id", column, "created_at", "item__query_id").query.sql_with_params()
    aggregates = ", ".join(f"string_agg({sent}, '')" for sent, _ in _SENT)
    connection.ensure_connection()
    # psycopg's own cursor, which binds on the server whatever Django's do (DATABASE_PREPARED_STATEMENTS): only
    # such a cursor takes results in binary (as hex text they cost 17 MB more). Never prepared, so a pooler in
    # transaction mode is fine with it.
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(f"SELECT {aggregates} FROM ({sql}) AS g(item, rater, grade, time, query)", params, binary=True, prepare=False)
        values = list(cursor.fetchone())  # None each when the round has no such judgment
    columns = []
    for _, dtype in _SENT:  # each column's bytes let go once read
        columns.append(np.frombuffer(values.pop(0) or b"", dtype).astype(np.int64))
    item, rater, grade, time, query = columns
    return item, rater, grade, _POSTGRES_EPOCH + time.view("timedelta64[us]"), query


def _named(keys: np.ndarray, names: dict) -> pd.Series:
    """Each key's name, as a column of strings taken from the distinct keys' names."""
    codes, distinct = pd.factorize(keys)
    return pd.Series([names[key] for key in distinct.tolist()], dtype="str").take(codes).reset_index(drop=True)


ADJUDICATION_PAGE = 50


@dataclass(frozen=True)
class DisagreementPage:
    """One page of a round's adjudication queue, widest spread first (keyset pagination after a pair)."""

    rows: list[dict]
    has_next: bool
    after: UUID | None  # the pair the page starts after, None on the first page

    @property
    def last(self) -> str | None:
        return str(self.rows[-1]["item"].uuid) if self.rows else None

    @property
    def last_spread(self) -> int | None:
        return self.rows[-1]["spread"] if self.rows else None


def disagreement_page(round: Round, *, after: UUID | None = None, size: int = ADJUDICATION_PAGE) -> DisagreementPage:
    """Pairs whose grades differ by at least the round's margin, widest first, then in pair order: an
    index walk (round_item_disagreement, over the kept spreads), with each pair's grades, the label the
    consensus rule gives them and the lead's final label."""
    found = round.items.filter(spread__gte=max(1, round.adjudication_margin)).order_by("-spread", "pk")
    start = round.items.filter(uuid=after).values("spread", "pk").first() if after else None
    found = after_row(found, start, "spread", key_descending=True, pk_descending=False)
    items = list(found.select_related("query", "document")[:size + 1]
                 .prefetch_related(Prefetch("judgments", Judgment.objects.select_related("rater").order_by("grade", "rater__username"))))
    items, has_next = items[:size], len(items) > size
    grades = pd.DataFrame([(item.pk, j.rater_id, j.grade) for item in items for j in item.judgments.all() if j.grade is not None],
                          columns=["item", "rater", "grade"])
    by_rule = agreement.consensus(grades, round.grading_scale.values, round.consensus_rule) if items else None
    rule_label = dict(zip(by_rule["item"], by_rule["label"].tolist())) if items else {}
    decided = {a.item_id: a for a in Adjudication.objects.filter(item__in=items)}
    rows = [{"item": item, "spread": item.spread, "rule_label": rule_label[item.pk], "adjudication": decided.get(item.pk)}
            for item in items]
    return DisagreementPage(rows=rows, has_next=has_next, after=after if start is not None else None)


def kept_grade_count(round: Round) -> int:
    """The round's grades now (unrateable flags are not grades), from the raters' kept totals."""
    return RaterTotals.objects.filter(round=round).aggregate(n=Sum(F("judgments") - F("unrateable")))["n"] or 0


def faithfulness_grades_of(round: Round) -> pd.DataFrame:
    """An answer round's faithfulness grades, in the columns of `grades_of` (the grade column holds them)."""
    return _streamed_grades(round, "faithfulness")


def faithfulness_agreement(round: Round, *, resamples: int = RESAMPLES, seed: int = SEED) -> dict | None:
    """Agreement on the faithfulness grades of an answer round that has that scale (None otherwise):
    the same statistics as on the main scale, with the rater pairs' kappas."""
    scale = round.faithfulness_grading_scale
    if scale is None:
        return None
    labels = list(scale.values)
    kind = "binary" if len(labels) == 2 else "graded"
    grades = agreement.prepare(faithfulness_grades_of(round), labels)
    return {"labels": labels, "scale_kind": kind, "scale_text": ", ".join(f"{grade.value} {grade.label}" for grade in scale.grades),
            "summary": agreement.summary(grades, labels, scale_kind=kind, resamples=resamples, seed=seed),
            "pairs": [_pair(result) for result in agreement.pairwise(grades, labels)]}


def compute(round: Round, *, resamples: int = RESAMPLES, seed: int = SEED, progress=None) -> dict:
    """The whole report as plain JSON values."""
    report = progress or (lambda *args, **kwargs: None)
    labels = list(round.grading_scale.values)
    kind = scale_kind(round)
    grades = grades_of(round)
    coded = agreement.prepare(grades, labels)
    report(0, 4, "Agreement statistics with bootstrap intervals")
    summary = agreement.summary(coded, labels, scale_kind=kind, resamples=resamples, seed=seed)
    report(1, 4, "Rater pairs")
    pairs = [_pair(result) for result in agreement.pairwise(coded, labels)]
    report(2, 4, "Queries and raters")
    level = "nominal" if kind == "binary" else "ordinal"
    queries = agreement.per_item_group_alpha(coded, _query_of_item(grades), labels, level)
    raters = agreement.rater_vs_consensus(coded, labels, rule=round.consensus_rule) if len(grades) else pd.DataFrame()
    report(3, 4, "Drift")
    drift = agreement.drift(coded, labels, level=level) if len(grades) else pd.DataFrame()
    distributions = {rater: {str(label): int(count) for label, count in group.value_counts().reindex(labels, fill_value=0).items()}
                     for rater, group in grades.groupby("rater")["grade"]}
    return {
        "computed_at": timezone.now().isoformat(timespec="milliseconds"), "round": round.name, "guidelines": round.guidelines.number,
        "scale_kind": kind, "labels": labels, "summary": summary, "gate": gate(round, summary).to_json(),
        "pairs": pairs, "queries": records(queries), "raters": records(raters), "drift": records(drift),
        "distributions": distributions, "flags": _flags(round),
        "faithfulness": faithfulness_agreement(round, resamples=resamples, seed=seed),
    }


def _query_of_item(grades: pd.DataFrame) -> pd.Series:
    """Each graded pair's query, indexed by pair (a dict of half a million pairs took a second to build)."""
    first = ~grades["item"].duplicated()
    return grades["query"][first].set_axis(grades["item"][first])


@dataclass(frozen=True)
class Gate:
    """A round's agreement gate as its settings read the report now: the statistic, its value, the threshold, and
    the one verdict (`agreement.gate_verdict`) that the page, the overview, the health check and the API show."""

    statistic: str  # the key in the summary's statistics
    label: str
    value: float | None
    threshold: float
    n_items: int  # pairs graded by two raters or more
    verdict: Verdict

    @property
    def state(self) -> str:
        return self.verdict.state

    @property
    def advice(self) -> tuple[str, ...]:
        """What to do about raters who disagree: only for a gate that fails."""
        return self.verdict.steps if self.verdict.failed else ()

    def to_json(self) -> dict:
        """`passed` is true, false, or null when there is not enough evidence (as before the verdict was added)."""
        return {"statistic": self.statistic, "label": self.label, "value": self.value, "threshold": self.threshold,
                "n_items": self.n_items, "state": self.state, "passed": None if self.verdict.insufficient else self.verdict.passed,
                "verdict": self.verdict.to_json(), "advice": list(self.advice)}


def overlap_plan(round: Round) -> str:
    """The round's plan for pairs graded by two raters, in words; "" when it plans none."""
    if round.raters_per_pair > 1:
        return f"every pair is to be graded by {round.raters_per_pair} raters"
    if round.overlap_share:
        return f"{round.overlap_share:.0%} of its pairs are to be graded by a second rater"
    return ""


def gate(round: Round, summary: dict) -> Gate:
    """The round's gate on a report's summary, under the round's gate settings now."""
    key = _GATE_KEYS[(round.gate_statistic, summary["scale_kind"])]
    found = summary["statistics"][key]
    label = round.get_gate_statistic_display()
    verdict = agreement.gate_verdict(label, found["value"], round.gate, n_items=summary["n_items"],
                                     n_items_single=summary.get("n_items_single", 0), reason=found.get("reason"),
                                     overlap=overlap_plan(round))
    return Gate(key, label, found["value"], round.gate, summary["n_items"], verdict)


def gate_links(round: Round, gate: Gate, *, can_manage: bool) -> list[dict]:
    """Where a lead supplies what a gate without enough evidence misses, each {"label", "url"}: the round's
    progress when overlap is planned; its settings while it is a draft; else a refresh round re-judging a sample
    (from a published version: the round's page) or the next round's overlap (the new round form)."""
    from django.urls import reverse

    if not gate.verdict.insufficient:
        return []
    slug = round.project.slug
    links = [{"label": f"{round.name}: progress and published versions", "url": round.get_absolute_url()}]
    if gate.n_items == 0 and not overlap_plan(round) and can_manage:
        if round.status == Round.Status.DRAFT:
            links.append({"label": "Round settings: set an overlap or two raters per pair",
                          "url": reverse("judgments:round-edit", args=[slug, round.uuid])})
        else:
            links.append({"label": "New round form (raters per pair and overlap)", "url": reverse("judgments:round-create", args=[slug])})
    return links


def _pair(result) -> dict:
    return {"rater_a": result.rater_a, "rater_b": result.rater_b, "n_items": result.n_items,
            "percent_agreement": result.percent_agreement, "kappa": result.kappa, "kappa_linear": result.kappa_linear,
            "kappa_quadratic": result.kappa_quadratic, "reason": result.reason,
            "band": agreement.band(result.kappa_quadratic if result.kappa_quadratic is not None else result.kappa),
            "confusion": result.confusion.tolist(), "per_grade": result.per_grade}


def _flags(round: Round) -> dict:
    """Unrateable judgments and judge-later claims per rater: not grades, so counted apart."""
    unrateable = dict(Judgment.objects.filter(item__round=round, grade__isnull=True)
                      .values_list("rater__username").annotate(n=Count("pk")))
    later = dict(Claim.objects.filter(item__round=round, kind=Claim.Kind.LATER)
                 .values_list("rater__username").annotate(n=Count("pk")))
    return {"unrateable": unrateable, "later": later,
            "unrateable_total": sum(unrateable.values()), "later_total": sum(later.values())}


def store(round: Round, data: dict) -> AgreementReport:
    found, _ = AgreementReport.objects.update_or_create(
        round=round, defaults={"data": data, "judgments": data["summary"]["n_judgments"], "computed_at": timezone.now()})
    return found


@job_kind("agreement_report", "Compute an agreement report")
def agreement_report_job(job: Job, progress: Progress) -> dict:
    round = Round.objects.select_related("guidelines").get(uuid=job.params["round"], project=job.project)
    stored = store(round, compute(round, progress=progress))
    return {"round": round.name, "items graded twice or more": stored.data["summary"]["n_items"],
            "link": round.get_absolute_url() + "agreement/"}


ALL_AGREE = "all agree"
NO_OVERLAP = "undefined: no pair graded twice"


def query_alpha_reading(query: dict) -> str:
    """Words for a query's alpha when it is undefined: alpha divides by the grades' variance, so it is
    undefined both when every grade is the same label (the raters all agree) and when the query has no
    pair graded twice (no data); "" when it is defined."""
    if query["alpha"] is not None:
        return ""
    return ALL_AGREE if query["n_items"] else NO_OVERLAP


def queries_best_read(queries: list[dict]) -> list[dict]:
    """The per-query rows worst agreement first, then the queries whose raters all agree, then those without data."""
    return sorted(queries, key=lambda query: (query["alpha"] is None, query["n_items"] == 0))


def report_csv(data: dict) -> Iterator[str]:
    """The report's tables as one CSV: a section column says which table a row belongs to."""
    return csv_chunks(_report_rows(data))


def _number(value: float | None) -> str:
    return "undefined" if value is None else cell_text(value)


def _report_rows(data: dict) -> Iterator[list]:
    yield ["section", "name", "value", "low", "high", "band", "n", "detail"]
    n_items = data["summary"]["n_items"]
    for name, stat in data["summary"]["statistics"].items():
        yield ["statistic", name, stat["value"], stat["low"], stat["high"], stat["band"], n_items, stat["reason"] or ""]
    kappa = "kappa_quadratic" if data["scale_kind"] == "graded" else "kappa"
    for pair in data["pairs"]:
        detail = (f"unweighted {_number(pair['kappa'])}; linear {_number(pair['kappa_linear'])}; "
                  f"agreement {_number(pair['percent_agreement'])}")
        yield ["pair", f"{pair['rater_a']} / {pair['rater_b']}", pair[kappa], "", "", pair["band"], pair["n_items"], detail]
    for query in queries_best_read(data["queries"]):
        yield ["query", query["group"], query["alpha"], "", "", agreement.band(query["alpha"]), query["n_items"], query_alpha_reading(query)]
    for rater in data["raters"]:
        detail = (f"bias {_number(rater['bias'])}; agreement {_number(rater['agreement'])}"
                  + ("; most out of line" if rater["out_of_line"] else ""))
        yield ["rater", rater["rater"], rater["kappa"], "", "", agreement.band(rater["kappa"]), rater["n_items"], detail]
    for week in data["drift"]:
        yield ["week", week["start"], week["alpha"], "", "", agreement.band(week["alpha"]), week["n_items"],
               f"agreement {_number(week['percent_agreement'])}"]
    faithfulness = data.get("faithfulness")  # answer rounds with a faithfulness scale
    if faithfulness:
        n_items = faithfulness["summary"]["n_items"]
        for name, stat in faithfulness["summary"]["statistics"].items():
            yield ["faithfulness statistic", name, stat["value"], stat["low"], stat["high"], stat["band"], n_items, stat["reason"] or ""]
