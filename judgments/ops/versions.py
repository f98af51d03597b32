"""Judgment-list versions: a round's final labels published as an immutable Parquet snapshot, read back,
exported, and compared with the version before (the comparison itself is in `version_diff`, no Django).

A version's file holds one row per labelled pair: query_id, query (its text when published), doc_id, grade,
source (human: the consensus rule's label; adjudicated: a lead's). Every export of a version is written
from that file alone, so the same version gives the same bytes forever, whatever happens to the round.
"""

import hashlib
import io
import random
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.core.files.base import ContentFile
from django.db import connection, transaction
from django.db.models import Max
from django.utils.text import slugify

from ..core.storage import open_stored
from ..lib import agreement, judgment_formats, version_diff
from ..lib.fileformats import csv_chunks
from ..lib.judgment_formats import Label, QueryLabels
from ..models import Job, JudgmentListVersion, Round
from .actions import ActionRefused
from .jobs import Progress, job_kind
from .judgment_files import snapshot

SCHEMA = pa.schema([("query_id", pa.string()), ("query", pa.string()), ("doc_id", pa.string()), ("grade", pa.int64()),
                    ("source", pa.string())])
VERSION_FORMATS = {"qrels": ("qrels", "text/plain"), "json": ("json", "application/json"), "csv": ("csv", "text/csv")}
CSV_COLUMNS = ("query_id", "query", "doc_id", "grade", "source")
DIFF_CSV_COLUMNS = ("query_id", "query", "doc_id", "change", "old_grade", "new_grade")


def lineage_of(round: Round) -> Round:
    """The first round of the lineage `round` publishes in: itself, unless it refreshes a published version."""
    return round.refreshed_from.lineage if round.refreshed_from_id else round


# Every grade of the round as integers only (ids, not texts): a million rows come out of the database in seconds.
_GRADES_SQL = ("SELECT i.id, i.query_id, i.document_id, j.grade, j.rater_id, COALESCE(a.grade, %s) FROM judgments_judgment j "
               "JOIN judgments_rounditem i ON i.id = j.item_id LEFT JOIN judgments_adjudication a ON a.item_id = i.id "
               "WHERE i.round_id = %s AND j.grade IS NOT NULL")
_TEXTS_SQL = {"query": "SELECT DISTINCT q.id, q.query_id, q.text FROM judgments_query q JOIN judgments_rounditem i ON i.query_id = q.id "
                       "WHERE i.round_id = %s",
              "document": "SELECT DISTINCT d.id, d.doc_id FROM judgments_document d JOIN judgments_rounditem i ON i.document_id = d.id "
                          "WHERE i.round_id = %s"}
_NO_ADJUDICATION = -(2**31)
# A refresh round's old pairs judged again: each grade with the label the refreshed version gave the pair (kept on
# the pair when it was laid out), walked from round_item_rejudged.
_REJUDGED_SQL = ("SELECT i.id, i.old_label, j.grade, j.rater_id, COALESCE(a.grade, %s) FROM judgments_rounditem i "
                 "JOIN judgments_judgment j ON j.item_id = i.id LEFT JOIN judgments_adjudication a ON a.item_id = i.id "
                 "WHERE i.round_id = %s AND i.old_label IS NOT NULL AND i.n_judged > 0 AND j.grade IS NOT NULL")


def _labels_table(round: Round) -> pa.Table:
    """Each graded pair's final label, as `judgment_files.final_labels` gives it (a lead's adjudication, else the
    round's consensus rule over its grades), computed on whole columns: a pair with one grade is labelled with
    it whatever the rule, so only pairs graded several times go through `agreement.consensus`."""
    with snapshot(), connection.cursor() as cursor:
        cursor.execute(_GRADES_SQL, [_NO_ADJUDICATION, round.pk])
        rows = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 6)
        cursor.execute(_TEXTS_SQL["query"], [round.pk])
        queries = pd.DataFrame(cursor.fetchall(), columns=["pk", "query_id", "query"]).set_index("pk")
        cursor.execute(_TEXTS_SQL["document"], [round.pk])
        documents = pd.DataFrame(cursor.fetchall(), columns=["pk", "doc_id"]).set_index("pk")
    if not len(rows):
        return SCHEMA.empty_table()
    pairs = _final_labels(round, pd.DataFrame(rows, columns=["item", "query", "document", "grade", "rater", "adjudicated"]))
    adjudicated = (pairs["adjudicated"] != _NO_ADJUDICATION).to_numpy()
    query_at = queries.index.get_indexer(pairs["query"])
    table = pa.table({"query_id": queries["query_id"].to_numpy(dtype=object)[query_at],
                      "query": queries["query"].to_numpy(dtype=object)[query_at],
                      "doc_id": documents["doc_id"].to_numpy(dtype=object)[documents.index.get_indexer(pairs["document"])],
                      "grade": pairs["final"].to_numpy(),
                      "source": np.where(adjudicated, "adjudicated", "human").astype(object)}, schema=SCHEMA)
    return table.sort_by([("query_id", "ascending"), ("doc_id", "ascending")])


def _final_labels(round: Round, frame: pd.DataFrame) -> pd.DataFrame:
    """One row per pair of `frame` (a row per grade: item, grade, rater, adjudicated, and columns of the pair) with
    `final`, its label: a lead's adjudication, else its one grade, else the round's consensus rule over its grades."""
    several = frame["item"].duplicated(keep=False).to_numpy()
    pairs = frame[~several].drop(columns="rater").rename(columns={"grade": "label"})
    if several.any():
        agreed = agreement.consensus(frame.loc[several, ["item", "rater", "grade"]], round.grading_scale.values, round.consensus_rule)
        graded = frame[several].drop_duplicates("item").drop(columns=["rater", "grade"])
        pairs = pd.concat([pairs, graded.merge(agreed[["item", "label"]], on="item")], ignore_index=True)
    adjudicated = (pairs["adjudicated"] != _NO_ADJUDICATION).to_numpy()
    return pairs.assign(final=np.where(adjudicated, pairs["adjudicated"], pairs["label"]).astype(np.int64))


def publish(round: Round, *, user=None, note: str = "", threshold: int | None = None, progress=None) -> JudgmentListVersion:
    """Freeze the round's final labels (its consensus rule, a lead's adjudication first) as the lineage's next
    version. Refused when the round has no label yet."""
    scale = round.grading_scale
    if threshold is not None and threshold not in scale.values:
        raise ActionRefused(f"The relevance threshold {threshold} is not a grade of the round's scale ({', '.join(map(str, scale.values))}).")
    if progress:
        progress(0, 3, "Reading the round's labels")
    table = _labels_table(round)
    if round.refreshed_from_id and table.num_rows:
        table = _carry_forward(round.refreshed_from, table)
    if table.num_rows == 0:
        raise ActionRefused(f"The round “{round.name}” has no labels yet: nothing to publish. Grade some pairs first.")
    if progress:
        progress(1, 3, f"Writing {table.num_rows:,} labels")
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    data = buffer.getvalue()
    grades = pd.Series(table.column("grade").to_numpy()).value_counts()
    lineage = lineage_of(round)
    with transaction.atomic():
        Round.objects.select_for_update().filter(pk=lineage.pk).first()  # one publish at a time numbers a lineage
        number = (JudgmentListVersion.objects.filter(lineage=lineage).aggregate(n=Max("number"))["n"] or 0) + 1
        version = JudgmentListVersion(
            project=round.project, round=round, lineage=lineage, number=number, consensus_rule=round.consensus_rule,
            threshold=threshold, guidelines_number=round.guidelines.number, n_pairs=table.num_rows,
            n_queries=len(pc.unique(table.column("query_id"))),
            grade_counts={str(grade): int(n) for grade, n in sorted(grades.items())},
            sha256=hashlib.sha256(data).hexdigest(), created_by=user, note=note)
        version.file.save("labels.parquet", ContentFile(data), save=False)
        version.save()
    if progress:
        progress(3, 3, f"Published v{number}")
    return version


def _carry_forward(version: JudgmentListVersion, new: pa.Table) -> pa.Table:
    """A refresh round's labels over the version it refreshes: the old label of every pair it did not label
    again, its own label where it did; sorted by query id and doc id."""
    old = _table(version)
    keys = pc.binary_join_element_wise(new.column("query_id"), new.column("doc_id"), "\x00")
    old_keys = pc.binary_join_element_wise(old.column("query_id"), old.column("doc_id"), "\x00")
    kept = old.filter(pc.invert(pc.is_in(old_keys, value_set=keys)))
    return pa.concat_tables([kept.cast(SCHEMA), new]).sort_by([("query_id", "ascending"), ("doc_id", "ascending")])


@job_kind("publish_list", "Publish a judgment-list version")
def publish_list_job(job: Job, progress: Progress) -> dict:
    round = Round.objects.select_related("guidelines", "project").get(uuid=job.params["round"], project=job.project)
    version = publish(round, user=job.owner, note=job.params.get("note", ""), threshold=job.params.get("threshold"),
                      progress=progress)
    return {"round": round.name, "version": f"v{version.number}", "pairs": version.n_pairs, "link": version.get_absolute_url()}


def carried_labels(version: JudgmentListVersion) -> dict[tuple[str, str], int]:
    """(query_id, doc_id) -> grade of every pair the version labels."""
    frame = read(version)
    return dict(zip(zip(frame["query_id"], frame["doc_id"]), frame["grade"].tolist()))


def rejudge_sample(round: Round, carried) -> set[tuple[str, str]]:
    """The old pairs a refresh round serves again: none, all, or a seeded sample of its rejudge share (the same
    pairs whenever asked: the round's seed draws them from the version's pairs in a fixed order)."""
    if round.rejudge == Round.Rejudge.ALL:
        return set(carried)
    if round.rejudge != Round.Rejudge.SAMPLE or not carried:
        return set()
    keys = sorted(carried)
    size = min(len(keys), max(1, int(len(keys) * round_share(round) + 0.5)))
    return set(random.Random(f"{round.seed}:rejudge").sample(keys, size))


def round_share(round: Round) -> float:
    return min(1.0, max(0.0, round.rejudge_share))


def drift(round: Round) -> dict | None:
    """Old against new labels on the old pairs a refresh round judged again: how many, the share unchanged, and
    Cohen's kappa (quadratic-weighted too, on a graded scale); None for a round that refreshes nothing."""
    if not round.refreshed_from_id or round.rejudge == Round.Rejudge.KEEP:
        return None
    from ..lib.agreement import cohen_kappa

    with snapshot(), connection.cursor() as cursor:
        cursor.execute(_REJUDGED_SQL, [_NO_ADJUDICATION, round.pk])
        rows = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 5)
    planned = round.items.filter(old_label__isnull=False, required__gt=0).count()
    pairs = _final_labels(round, pd.DataFrame(rows, columns=["item", "old", "grade", "rater", "adjudicated"])) if len(rows) else None
    old_grades, new_grades = ([], []) if pairs is None else (pairs["old"].tolist(), pairs["final"].tolist())
    scale = round.grading_scale
    labels = sorted(set(scale.values) | set(old_grades))
    return {"pairs": len(new_grades), "planned": planned, "version": round.refreshed_from,
            "unchanged": sum(a == b for a, b in zip(old_grades, new_grades)),
            "kappa": cohen_kappa(old_grades, new_grades, labels) if new_grades else None,
            "kappa_quadratic": cohen_kappa(old_grades, new_grades, labels, "quadratic") if new_grades and len(scale.values) > 2 else None}


def _table(version: JudgmentListVersion) -> pa.Table:
    with open_stored(version.file.name) as handle:
        return pq.read_table(handle)


def read(version: JudgmentListVersion) -> pd.DataFrame:
    """The version's labels as stored, in their stored order (query, then doc id)."""
    return _table(version).to_pandas()


def filename(version: JudgmentListVersion, fmt: str, *, suffix: str = "") -> str:
    """`<lineage>_qrels@v3.qrels`: the version a file holds is in its name."""
    extension, _ = VERSION_FORMATS[fmt]
    variant = "qrels" if fmt == "qrels" and version.threshold is None else (
        f"qrels-binary-ge{version.threshold}" if fmt == "qrels" else "labels")
    return f"{slugify(version.lineage.name) or 'round'}_{variant}{suffix}@v{version.number}.{extension}"


def export(version: JudgmentListVersion, fmt: str) -> Iterator[str]:
    """The version's labels in `fmt` (qrels, json or csv), written from its file alone."""
    if fmt not in VERSION_FORMATS:
        raise ValueError(f"unknown version format {fmt!r}; choose one of {', '.join(VERSION_FORMATS)}")
    frame = read(version)
    if fmt == "qrels":
        return judgment_formats.qrels((Label(q, d, int(g)) for q, d, g in zip(frame["query_id"], frame["doc_id"], frame["grade"])),
                                      threshold=version.threshold)
    if fmt == "json":
        return judgment_formats.json_list(
            QueryLabels(query_id, group["query"].iat[0], tuple(zip(group["doc_id"], map(int, group["grade"]))))
            for query_id, group in frame.groupby("query_id", sort=False))
    return csv_chunks(_csv_rows(frame))


def _csv_rows(frame: pd.DataFrame) -> Iterator[list]:
    yield list(CSV_COLUMNS)
    yield from frame[list(CSV_COLUMNS)].itertuples(index=False, name=None)


def difference(version: JudgmentListVersion) -> dict | None:
    """What changed since the lineage's previous version: the changed pairs, per query counts and totals; None
    for a lineage's first version."""
    previous = version.previous
    if previous is None:
        return None
    old, new = read(previous), read(version)
    changes = version_diff.diff(old, new)
    texts = dict(zip(pd.concat([old["query_id"], new["query_id"]]), pd.concat([old["query"], new["query"]])))
    return {"previous": previous, "changes": changes, "per_query": version_diff.per_query(changes),
            "totals": version_diff.totals(changes), "texts": texts}


def difference_csv(found: dict) -> Iterator[str]:
    return csv_chunks(_difference_rows(found))


def _difference_rows(found: dict) -> Iterator[list]:
    yield list(DIFF_CSV_COLUMNS)
    for query_id, doc_id, change, old, new in found["changes"][list(version_diff.DIFF_COLUMNS)].itertuples(index=False, name=None):
        yield [query_id, found["texts"].get(query_id, ""), doc_id, change, "" if pd.isna(old) else int(old), "" if pd.isna(new) else int(new)]


def of_lineage(round: Round):
    """The published versions of the round's lineage, newest first."""
    return JudgmentListVersion.objects.filter(lineage=lineage_of(round)).select_related("round").order_by("-number")


def page_context(round: Round, *, publish_form=None) -> dict:
    """What a round's pages show of its published versions (and, for leads, the publish form)."""
    found = list(of_lineage(round))
    return {"list_versions": found, "version_formats": list(VERSION_FORMATS), "publish_form": publish_form,
            "next_version": (found[0].number if found else 0) + 1}
