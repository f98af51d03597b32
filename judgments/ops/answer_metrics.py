"""The "which answer metric agrees with the raters" report of an answer round: the data it needs, gathered
in two queries, scored with the engine and handed to `judgments.lib.metric_agreement` (its statistics twin,
no Django).

An answer counts when it has a human label (the lead's adjudication, else the round's consensus rule over
its raters' grades; machine grades are never read) and its query has reference answers. The page computes
the report on request for up to `ANSWERS_ON_PAGE` counted answers; bigger rounds use the
`answer_metrics` command.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from ..lib import metric_agreement
from ..lib.fileformats import csv_chunks
from ..models import AnswerMetricsReport, Pool, QueryCollection, Round, RoundItem
from .judgment_files import final_labels, snapshot

ANSWERS_ON_PAGE = 2000


class NotAnAnswerRound(ValueError):
    pass


class TooManyAnswers(ValueError):
    pass


@dataclass
class Gathered:
    answers: list[metric_agreement.Answer] = field(default_factory=list)
    n_in_round: int = 0
    no_consensus: int = 0
    no_references: int = 0
    left_out: int = 0


def _engine():
    from evaluation.engine import answers

    return answers


def measures() -> tuple[str, ...]:
    return tuple(_engine().ANSWER_MEASURES)


def gather(round: Round, metrics=None, *, limit: int | None = None) -> Gathered:
    """The round's answers with a human label and references, each scored with every metric."""
    if round.pool.kind != Pool.Kind.ANSWERS:
        raise NotAnAnswerRound(f"{round.name} grades documents, not answers")
    engine = _engine()
    metrics = tuple(metrics or engine.ANSWER_MEASURES)
    with snapshot():
        items = list(RoundItem.objects.filter(round=round, document__answer_run__isnull=False)
                     .values_list("query__query_id", "query__references", "document__doc_id", "document__fields",
                                  "document__answer_run__name"))
        labels = {(label.query_id, label.doc_id): label.label for label in final_labels(round)}
    found = Gathered(n_in_round=len(items))
    counted = []
    for query_id, references, doc_id, fields, system in items:
        label = labels.get((query_id, doc_id))
        references = [r for r in references or [] if isinstance(r, str)]
        found.no_consensus += label is None
        found.no_references += not references
        if label is None or not references:
            found.left_out += 1
            continue
        counted.append((query_id, system, label, str((fields or {}).get("answer", "")), references))
    if limit is not None and len(counted) > limit:
        raise TooManyAnswers(f"{len(counted):,} answers to score; the page computes up to {limit:,}: run "
                             f"`manage.py answer_metrics {round.uuid}`")
    for query_id, system, label, answer, references in counted:
        values = engine.score_answer(answer, references, metrics)
        found.answers.append(metric_agreement.Answer(query=query_id, system=system, grade=float(label), metrics=values))
    return found


def compute(round: Round, *, limit: int | None = None, resamples: int = metric_agreement.RESAMPLES,
            seed: int = metric_agreement.SEED) -> dict:
    """The whole report as plain JSON values, with the round and what was left out."""
    metrics = measures()
    gathered = gather(round, metrics, limit=limit)
    data = metric_agreement.report(gathered.answers, metrics, resamples=resamples, seed=seed,
                                   min_answers=settings.ANSWER_METRICS_MIN_ANSWERS)
    data.update(round=round.name, round_uuid=str(round.uuid), consensus_rule=round.consensus_rule,
                computed_at=timezone.now().isoformat(timespec="seconds"), n_in_round=gathered.n_in_round,
                left_out=gathered.left_out, no_consensus=gathered.no_consensus, no_references=gathered.no_references)
    return data


def keep(round: Round, data: dict) -> None:
    """Keep `data` (from `compute`) as the round's report, replacing the one before: the answer leaderboard
    reads it. One statement, so two requests computing at once cannot both insert."""
    report = AnswerMetricsReport(round=round, data=data, best=data["verdict"]["best"] or "",
                                 computed_at=datetime.fromisoformat(data["computed_at"]))
    AnswerMetricsReport.objects.bulk_create([report], update_conflicts=True, unique_fields=["round"],
                                            update_fields=["data", "best", "computed_at"])


def latest_report(query_set: QueryCollection) -> AnswerMetricsReport | None:
    """The newest kept report of an answer round over a pool of the set's answers, or None."""
    return (AnswerMetricsReport.objects.filter(round__pool__query_set=query_set, round__pool__kind=Pool.Kind.ANSWERS)
            .select_related("round__project").order_by("-computed_at").first())


def verdict_text(data: dict, *, reasons: bool = True) -> str:
    """One or two sentences for the lead: the best-agreeing metric and whether the report may name it (pass),
    no metric agrees (fail), or not enough evidence yet, with what is missing (without it: `reasons=False`,
    for a page that lists the reasons itself)."""
    verdict = data["verdict"]
    best = verdict["best"]
    decision = verdict.get("decision") or {"state": "insufficient", "reasons": ["the report predates its verdict"]}
    if best is None:
        return "Not enough evidence to name a metric" + (": " + "; ".join(decision["reasons"]) if reasons else "") + "."
    tau = data["per_answer"][best]["tau"]
    tied = verdict.get("tied", [])
    names = " and ".join([best, *tied])
    measured = f"per-answer Kendall's tau-b {tau['value']:.3f}"
    if tau["low"] is not None:
        measured += f" (95% interval {tau['low']:.3f} to {tau['high']:.3f})"
    measured += f", over {data['n_answers']:,} answers to {data['n_queries']:,} queries"
    if decision["state"] == "pass":
        text = f"{names} agree{'s' * (not tied)} best with the raters{', tied' if tied else ''}: {measured}."
        shares = [share for m, share in verdict["wins"].items() if m not in tied and share is not None]
        if shares:
            text += (f" {best} is higher than each other metric in at least {min(shares):.0%} of the resamples; "
                     "the 95% interval of each paired difference lies above 0.")
        return text
    joined = "; ".join(decision["reasons"])
    because = f" {joined[:1].upper()}{joined[1:]}." if reasons and joined else ""
    if decision["state"] == "fail":
        return f"No metric agrees with the raters ({best}: {measured}).{because}"
    return f"Not enough evidence to name a metric. {names} agree{'s' * (not tied)} best so far{', tied' if tied else ''}: {measured}.{because}"


def report_csv(data: dict) -> Iterator[str]:
    """The correlation table and the per-system means as one CSV (a level column says which)."""
    return csv_chunks(_rows(data))


def _rows(data: dict) -> Iterator[list]:
    yield ["level", "metric", "statistic", "value", "low", "high", "n", "n_queries"]
    for metric, found in data["per_answer"].items():
        for statistic in ("tau", "rho"):
            c = found[statistic]
            yield ["answer", metric, statistic, c["value"], c["low"], c["high"], data["n_answers"], data["n_queries"]]
    system = data["system_level"]
    for metric, found in system["correlations"].items():
        for statistic in ("tau", "rho"):
            c = found[statistic]
            yield ["system", metric, statistic, c["value"], c["low"], c["high"], system["n_systems"], system["n_queries"]]
    for row in system["systems"]:
        yield ["system mean", "human", row["system"], row["human"], "", "", "", system["n_queries"]]
        for metric, value in row["metrics"].items():
            yield ["system mean", metric, row["system"], value, "", "", "", system["n_queries"]]
