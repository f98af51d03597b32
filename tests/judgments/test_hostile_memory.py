"""What a hostile file costs the process that reads it, measured in a fresh interpreter (issue #27's targets):
the 10 KB Parquet run with one 300 MB doc id, read as a run import reads it, in under 100 MB more than the
process held before; a 600 MB line given to the query-set, reference-answer and judgment-list importers,
refused at its line in under 50 MB more (the judgment list as qrels and as JSON);
a Parquet dictionary that unpacks to gigabytes, refused before it is unpacked.

One child process measures every case (setting Django up once). It runs on an empty SQLite file with no
tables: each importer has to refuse the file before it asks the database anything, or the child fails loudly."""

import os

import pytest

from tests.hostile import long_line_file, measured_in_child, write_dictionary_bomb

LINE_MB = 600
LIMIT = "line longer than 1,048,576 bytes"

CHILD = """
import django
django.setup()
from pathlib import Path
from django.conf import settings
from evaluation.engine import read_run
from judgments.ops.answers import import_references
from judgments.ops.imports import import_queries
from judgments.ops.judgment_files import import_judgments
from judgments.models import Project, QueryCollection, Round
from judgments.lib.querylog import ColumnMapping, aggregate_log

def opened(path, call):
    with open(path, "rb") as stream:
        call(stream)

measure("run", lambda: read_run(paths["bomb"], name="bomb.parquet", max_line_bytes=settings.INPUT_LINE_MAX_BYTES,
                                max_id_bytes=settings.INPUT_ID_MAX_BYTES,
                                max_unpacked_bytes=settings.DECOMPRESSED_MAX_BYTES))
measure("dictionary run", lambda: read_run(paths["dictionary run"], name="dict.parquet",
                                           max_line_bytes=settings.INPUT_LINE_MAX_BYTES,
                                           max_id_bytes=settings.INPUT_ID_MAX_BYTES,
                                           max_unpacked_bytes=settings.DECOMPRESSED_MAX_BYTES))
measure("dictionary log", lambda: aggregate_log(paths["dictionary log"], "log.parquet", ColumnMapping(query="query"),
                                                max_decompressed_bytes=settings.DECOMPRESSED_MAX_BYTES))
measure("queries", lambda: opened(paths["queries"], lambda stream: import_queries(Project(slug="p"), stream,
                                                                                    "queries.csv", name="Long")))
measure("references", lambda: import_references(QueryCollection(name="Long"), Path(paths["references"])))
measure("judgments", lambda: opened(paths["judgments"], lambda stream: import_judgments(Round(name="Long"), stream,
                                                                                        "labels.qrels")))
measure("judgments json", lambda: opened(paths["judgments json"], lambda stream: import_judgments(Round(name="Long"), stream,
                                                                                                  "labels.json")))
"""


@pytest.fixture(scope="module")
def measured(parquet_bomb, tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("hostile-memory")
    lines = {
        "queries": long_line_file(folder / "queries.csv", b"query_id,query\nq1,tent\nq2,", b"\n", LINE_MB),
        "references": long_line_file(folder / "references.jsonl", b'{"query_id": "q1", "answers": ["Paris"]}\n'
                                     b'{"query_id": "q2", "answers": ["', b'"]}\n', LINE_MB),
        "judgments": long_line_file(folder / "labels.qrels", b"q1 0 d1 2\nq1 0 ", b" 1\n", LINE_MB),
        "judgments json": long_line_file(folder / "labels.json", b'[{"query_id": "q1",\n "ratings": [{"doc_id": "',
                                         b'", "rating": 1}]}]\n', LINE_MB),
    }
    # Each unpacks to 4 GB (a value over the id limit) and 100 GB (values within the line limit) in all.
    lines["dictionary run"] = write_dictionary_bomb(folder / "dict.parquet", "doc_id", rows=200_000, value_bytes=20_000)
    lines["dictionary log"] = write_dictionary_bomb(folder / "log.parquet", "query", rows=200_000, value_bytes=500_000)
    paths = {"bomb": str(parquet_bomb), **{what: str(path) for what, path in lines.items()}}
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": f"sqlite:///{folder / 'child.sqlite3'}"}
    try:
        return measured_in_child(f"paths = {paths!r}\n" + CHILD, env)
    finally:
        for path in lines.values():
            path.unlink()


def test_the_parquet_bomb_is_refused_from_its_footer_in_under_100_mb(parquet_bomb, measured):
    assert parquet_bomb.stat().st_size < 16 << 10
    assert measured["run"]["raised"].startswith("bomb.parquet: column 'doc_id' holds a value longer than 512 bytes")
    assert measured["run"]["extra_mb"] < 100, measured["run"]


def test_a_dictionary_that_unpacks_to_gigabytes_is_refused_before_it_is_unpacked(measured):
    """The footer counts a dictionary's value once; the rows that name it are counted before they are unpacked."""
    assert measured["dictionary run"]["raised"] == (
        "dict.parquet: column 'doc_id' holds a value longer than 512 bytes (row group 1 of 1)")
    assert measured["dictionary log"]["raised"].startswith(
        "log.parquet: the column 'query' unpacks to at least 100,001,600,000 bytes; the most accepted is")
    assert measured["dictionary run"]["extra_mb"] < 100 and measured["dictionary log"]["extra_mb"] < 100, measured


def test_a_600_mb_line_is_refused_at_its_line_by_each_importer_in_under_50_mb(measured):
    lines = {what: measured[what] for what in ("queries", "references", "judgments", "judgments json")}
    assert {what: result["raised"] for what, result in lines.items()} == {
        "queries": f"queries.csv:3: {LIMIT}", "references": f"references.jsonl:2: {LIMIT}", "judgments": f"labels.qrels:2: {LIMIT}",
        "judgments json": f"labels.json:2: {LIMIT}"}
    assert all(result["extra_mb"] < 50 for result in lines.values()), lines
