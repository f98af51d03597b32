"""The difference between two judgment-list versions, pair by pair and per query (no Django).

Its twin `judgments.ops.versions` publishes and reads the versions; this module only compares two label tables
with columns query_id, doc_id, grade.
"""

import pandas as pd

DIFF_COLUMNS = ("query_id", "doc_id", "change", "old_grade", "new_grade")
CHANGES = ("added", "removed", "changed")


def diff(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Pairs added (in `new` only), removed (in `old` only) and changed (both, another grade), with the old and
    new grade (missing on the side without the pair); sorted by query id, doc id."""
    merged = old[["query_id", "doc_id", "grade"]].merge(new[["query_id", "doc_id", "grade"]], on=["query_id", "doc_id"],
                                                          how="outer", suffixes=("_old", "_new"), indicator=True)
    change = merged["_merge"].map({"right_only": "added", "left_only": "removed", "both": "changed"}).astype(str)
    frame = pd.DataFrame({"query_id": merged["query_id"], "doc_id": merged["doc_id"], "change": change,
                          "old_grade": merged["grade_old"].astype("Int64"), "new_grade": merged["grade_new"].astype("Int64")})
    frame = frame[(frame["change"] != "changed") | (frame["old_grade"] != frame["new_grade"])]
    return frame.sort_values(["query_id", "doc_id"], kind="stable").reset_index(drop=True)


def per_query(changes: pd.DataFrame) -> pd.DataFrame:
    """Per query with any change: how many pairs were added, removed and changed; most changes first."""
    if changes.empty:
        return pd.DataFrame(columns=["query_id", *CHANGES, "total"])
    counts = pd.crosstab(changes["query_id"], changes["change"]).reindex(columns=list(CHANGES), fill_value=0)
    counts["total"] = counts.sum(axis=1)
    counts = counts.reset_index().rename_axis(columns=None)
    return counts.sort_values(["total", "query_id"], ascending=[False, True], kind="stable").reset_index(drop=True)


def totals(changes: pd.DataFrame) -> dict[str, int]:
    counted = changes["change"].value_counts()
    return {change: int(counted.get(change, 0)) for change in CHANGES}
