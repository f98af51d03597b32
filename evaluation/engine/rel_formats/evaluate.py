"""The query loop and trec_eval's printing for the -R formats (see the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..data import Run, read_run
from ..errors import EngineInputError, UnknownMeasureError
from . import JG_MEASURES, MEASURE_ORDER, NICKNAMES, PREFS_MEASURES, REL_FORMATS
from .judgment_groups import P_AVGJG_CUTOFFS, RPREC_MULT_AVGJG_CUTOFFS, qrels_jg_measures, read_qrels_jg
from .prefs import COUNT_MEASURES, place_preferences, prefs_measures, read_prefs, read_qrels_prefs

MISSING_DOC = "ceci_nest_pas_un_docno"  # trec_eval's stand-in ranking for a query missing from the run (-c)


class MissingRanking(EngineInputError):
    """A judged query the run lacks, without -c: trec_eval stops there (exit 4) after the per-query lines it has
    printed, which ``output`` holds."""

    def __init__(self, qid: str, path: str | None, output: str):
        super().__init__(f"query {qid!r} has judgments but no ranking in the run (-c scores it)", path=path)
        self.qid, self.output = qid, output


@dataclass
class Selection:
    """The measures asked for, in trec_eval's printing order, and the cutoffs of the two cut measures."""

    names: list[str]
    p_cutoffs: tuple[int, ...] = P_AVGJG_CUTOFFS
    rprec_multiples: tuple[float, ...] = RPREC_MULT_AVGJG_CUTOFFS

    @classmethod
    def parse(cls, specs: Sequence[str], rel_format: str) -> Selection:
        chosen: set[str] = set()
        params: dict[str, str] = {}
        for spec in specs:
            name, dot, param = spec.partition(".")
            if dot:
                params.setdefault(name, param)  # trec_eval keeps a family's first parameter list
            chosen.update(_expand(name, rel_format))
        selection = cls([name for name in MEASURE_ORDER if name in chosen])
        if "P_avgjg" in params:
            selection.p_cutoffs = _cutoffs(params["P_avgjg"])
        if "Rprec_mult_avgjg" in params:
            selection.rprec_multiples = tuple(sorted(_number(value) for value in params["Rprec_mult_avgjg"].split(",")))
        return selection

    def labels(self, name: str) -> list[str]:
        if name == "P_avgjg":
            return [f"P_avgjg_{cutoff}" for cutoff in self.p_cutoffs]
        if name == "Rprec_mult_avgjg":
            return [f"Rprec_mult_avgjg_{multiple:3.2f}" for multiple in self.rprec_multiples]
        return [name]


def _expand(name: str, rel_format: str) -> tuple[str, ...]:
    if name in NICKNAMES:
        names = NICKNAMES[name]
    elif name in MEASURE_ORDER:
        names = (name,)
    else:
        raise UnknownMeasureError(name, [*MEASURE_ORDER, *NICKNAMES],
                                  detail=f"measure {name!r} cannot be computed from a -R {rel_format} file")
    wanted = JG_MEASURES if rel_format == "qrels_jg" else PREFS_MEASURES
    for each in names:
        if each not in wanted and each not in ("runid", "num_q"):
            raise ValueError(f"measure {each!r} needs -R {'qrels_jg' if each in JG_MEASURES else 'prefs'}, "
                                   f"not -R {rel_format}")
    return names


def _cutoffs(text: str) -> tuple[int, ...]:
    values = []
    for value in text.split(","):
        try:
            values.append(int(value))
        except ValueError:
            raise ValueError(f"P_avgjg cutoff {value!r} is not a whole number") from None
    values.sort()
    if not values or values[0] <= 0 or len(set(values)) != len(values):
        raise ValueError(f"P_avgjg cutoffs must be positive and distinct, found {text!r}")
    return tuple(values)


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"Rprec_mult_avgjg multiple {value!r} is not a number") from None


def evaluate_rel_format(rel_format: str, rel_path: str, run: Run | str, measures: Sequence[str], *,
                        per_query: bool = False, summary: bool = True, complete: bool = False,
                        max_docs: int | None = None, judged_only: bool = False, level: int = 1,
                        only_query: str | None = None) -> str:
    """trec_eval's standard output for ``trec_eval -R rel_format -m ... rel_path run``.

    ``measures`` are -m arguments (``all_prefs``, ``P_avgjg.5,10``...); ``run`` a path or a read Run.
    ``per_query`` is -q, ``summary`` False is -n, ``complete`` -c, ``max_docs`` -M, ``judged_only`` -J,
    ``level`` -l and ``only_query`` the query of ``-D level.qid``.
    """
    if rel_format not in REL_FORMATS:
        raise ValueError(f"unknown relevance format {rel_format!r}; -R takes qrels, {', '.join(REL_FORMATS)}")
    selection = Selection.parse(measures or ["official"], rel_format)
    judgments = _read_judgments(rel_format, rel_path)
    run = run if isinstance(run, Run) else read_run(run)
    rankings = _rankings(run, prefs_order=rel_format != "qrels_jg", max_docs=max_docs)
    lines, totals, evaluated = [], {}, 0
    for qid, judged in judgments.items():
        if only_query is not None and qid != only_query:
            continue
        ranking = rankings.get(qid)
        if ranking is None:
            if not complete:
                raise MissingRanking(qid, run.name, "".join(lines))
            ranking = [MISSING_DOC]
        values = _query_values(rel_format, qid, judged, ranking, selection, judged_only=judged_only, level=level,
                               source=rel_path)
        for label, value in values.items():
            totals[label] = totals.get(label, 0.0) + value
            if per_query:
                lines.append(_line(label, qid, value))
        evaluated += 1
    if not evaluated:
        raise EngineInputError("no queries with both results and relevance info", path=rel_path)
    if summary:
        # With -c trec_eval averages over every query of the judgments, even when -D picked one.
        lines.append(_summary(selection, totals, len(judgments) if complete else evaluated, run.run_id or ""))
    return "".join(lines)


def _read_judgments(rel_format: str, path: str) -> dict:
    if rel_format == "prefs":
        return read_prefs(path)
    if rel_format == "qrels_prefs":
        return read_qrels_prefs(path)
    return read_qrels_jg(path)


def _rankings(run, *, prefs_order: bool, max_docs: int | None) -> dict[str, list[str]]:
    """Each query's doc ids best first: score descending, ties by doc id (ascending for preferences, descending
    for qrels_jg, as trec_eval's two code paths differ), cut at ``max_docs``."""
    docs = run.doc_ids.to_pylist()
    scores = run.scores.tolist()
    rows: dict[str, list[int]] = {}
    for row, code in enumerate(run.query_codes.tolist()):
        rows.setdefault(run.query_ids[code], []).append(row)
    rankings = {}
    for qid, members in rows.items():
        members.sort(key=lambda row: docs[row].encode(), reverse=not prefs_order)
        members.sort(key=lambda row: -scores[row])
        rankings[qid] = [docs[row] for row in members[:None if max_docs is None else max(max_docs, 0)]]
    return rankings


def _query_values(rel_format: str, qid: str, judged, ranking: list[str], selection: Selection, *,
                  judged_only: bool, level: int, source: str) -> dict[str, float]:
    if rel_format == "qrels_jg":
        computed = qrels_jg_measures(judged, ranking, level=level, judged_only=judged_only,
                                     p_cutoffs=selection.p_cutoffs, rprec_multiples=selection.rprec_multiples)
    else:
        computed = prefs_measures(place_preferences(qid, judged, ranking, source=source))
    values = {}
    for name in selection.names:
        if name in ("runid", "num_q"):
            continue
        value = computed[name]
        for label, each in zip(selection.labels(name), value if isinstance(value, list) else [value]):
            values[label] = each
    return values


def _line(label: str, qid: str, value: float) -> str:
    if label in COUNT_MEASURES:
        return f"{label:<22}\t{qid}\t{int(value)}\n"
    return f"{label:<22}\t{qid}\t{value:6.4f}\n"


def _summary(selection: Selection, totals: dict[str, float], num_q: int, run_id: str) -> str:
    lines = []
    for name in selection.names:
        if name == "runid":
            lines.append(f"{'runid':<22}\tall\t{run_id}\n")
        elif name == "num_q":
            lines.append(f"{'num_q':<22}\tall\t{num_q}\n")
        for label in selection.labels(name) if name not in ("runid", "num_q") else []:
            total = totals.get(label, 0.0)
            lines.append(_line(label, "all", total if label in COUNT_MEASURES else total / num_q))
    return "".join(lines)
