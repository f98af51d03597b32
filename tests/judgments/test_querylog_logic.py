"""Reading query logs without a database: formats, normalisation, personal data, bad rows, timestamps.

Expected counts are worked out by hand from the small logs below; normalisation is checked against Python's
own ``unicodedata`` and ``str.casefold``, timestamps against ``datetime``.
"""

import csv
import gzip
import io
import json
import subprocess
import sys
import unicodedata
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgments.lib import querylog
from judgments.lib.querylog import (
    ColumnMapping,
    LogProblem,
    Normalization,
    aggregate_log,
    detect_format,
    looks_personal,
    peek,
)

ROOT = Path(__file__).resolve().parents[2]

# A week of searches: "iPhone 15" is spelled three ways, one row holds an e-mail address.
LOG = [
    {"timestamp": "2026-10-01T09:00:00Z", "query": "iPhone 15", "lang": "en"},
    {"timestamp": "2026-10-01T10:00:00Z", "query": "iphone  15?", "lang": "en"},
    {"timestamp": "2026-10-01T11:00:00Z", "query": "Schuhe", "lang": "de"},
    {"timestamp": "2026-10-02T08:00:00Z", "query": "IPHONE 15", "lang": "en"},
    {"timestamp": "2026-10-02T09:00:00Z", "query": "iPhone 15", "lang": "de"},
    {"timestamp": "2026-10-03T12:00:00Z", "query": "mail john.doe@example.com", "lang": "en"},
    {"timestamp": "2026-10-07T23:59:59Z", "query": "schuhe", "lang": "de"},
]
DAILY = {
    ("iphone 15", "en", date(2026, 10, 1)): 2,
    ("schuhe", "de", date(2026, 10, 1)): 1,
    ("iphone 15", "en", date(2026, 10, 2)): 1,
    ("iphone 15", "de", date(2026, 10, 2)): 1,
    ("schuhe", "de", date(2026, 10, 7)): 1,
}
VARIANTS = {("iphone 15", "iPhone 15"): 2, ("iphone 15", "iphone  15?"): 1, ("iphone 15", "IPHONE 15"): 1,
            ("schuhe", "Schuhe"): 1, ("schuhe", "schuhe"): 1}
MAPPING = ColumnMapping(query="query", time="timestamp", segments=("lang",))


def write_log(directory: Path, name: str, rows: list[dict]) -> Path:
    """The rows as a log file of the format `name` says, written without pyarrow where possible."""
    path = directory / name
    kind = name.removesuffix(".gz").rsplit(".", 1)[1].replace("ndjson", "jsonl")
    if kind == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
        return path
    if kind == "jsonl":
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), delimiter="\t" if kind == "tsv" else ",", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        data = out.getvalue().encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def write_text(directory: Path, name: str, text: str | bytes) -> Path:
    path = directory / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def daily_of(aggregate) -> dict:
    table = aggregate.daily.to_pylist()
    segments = aggregate.segments
    return {(row["query"], *(row[column] for column in segments), row["day"]): row["count"] for row in table}


def variants_of(aggregate) -> dict:
    return {(row["query"], row["raw"]): row["count"] for row in aggregate.variants.to_pylist()}


def queries_of(aggregate) -> dict:
    totals: dict[str, int] = {}
    for row in aggregate.daily.to_pylist():
        totals[row["query"]] = totals.get(row["query"], 0) + row["count"]
    return totals


# ------------------------------------------------------------------------------------------- formats


@pytest.mark.parametrize("name", ["log.csv", "log.tsv", "log.jsonl", "log.parquet", "log.csv.gz", "log.jsonl.gz",
                                  "log.tsv.gz", "log.ndjson"])
def test_every_format_gives_the_same_counts(tmp_path, name):
    aggregate = aggregate_log(write_log(tmp_path, name, LOG), name, MAPPING)

    assert daily_of(aggregate) == DAILY
    assert variants_of(aggregate) == VARIANTS
    assert aggregate.daily.column_names == ["query", "lang", "day", "count"]
    assert aggregate.daily.schema.field("day").type == pa.date32()
    assert (aggregate.rows_read, aggregate.rows_good, aggregate.rows_bad) == (7, 7, 0)
    assert (aggregate.rows_personal, aggregate.impressions_personal, aggregate.queries_personal) == (1, 1, 1)
    assert aggregate.impressions == 6
    assert aggregate.first_time == datetime(2026, 10, 1, 9, tzinfo=UTC)
    assert aggregate.last_time == datetime(2026, 10, 7, 23, 59, 59, tzinfo=UTC)
    first_lines = 2 if "csv" in name or "tsv" in name else 1
    assert aggregate.rows.to_pylist()[0] == {
        "query": "iphone 15", "line": first_lines, "raw": "iPhone 15",
        "time": datetime(2026, 10, 1, 9, tzinfo=UTC), "count": 1, "lang": "en",
    }


def test_a_count_column_counts_like_repeated_rows(tmp_path):
    repeated = [{"query": "shoes"}] * 3 + [{"query": "boots"}] * 2
    counted = [{"query": "shoes", "n": "2"}, {"query": "boots", "n": "2"}, {"query": "shoes", "n": "1"},
               {"query": "hats", "n": "0"}]

    by_rows = aggregate_log(write_log(tmp_path, "rows.csv", repeated), "rows.csv", ColumnMapping("query"))
    by_count = aggregate_log(write_log(tmp_path, "count.csv", counted), "count.csv", ColumnMapping("query", count="n"))

    assert daily_of(by_rows) == daily_of(by_count) == {("shoes", None): 3, ("boots", None): 2}
    assert by_count.rows_zero == 1 and by_count.rows_bad == 0
    assert by_count.impressions == by_rows.impressions == 5


def test_a_log_without_times_has_no_days(tmp_path):
    aggregate = aggregate_log(write_log(tmp_path, "log.csv", LOG), "log.csv", ColumnMapping("query"))

    assert set(aggregate.daily["day"].to_pylist()) == {None}
    assert aggregate.first_time is None and aggregate.last_time is None
    assert set(aggregate.rows["time"].to_pylist()) == {None}
    assert queries_of(aggregate) == {"iphone 15": 4, "schuhe": 2}


def test_blocks_cut_anywhere_give_the_same_counts_and_lines(tmp_path, monkeypatch):
    rows = [{"query": f"q{i % 7}", "timestamp": f"2026-10-{1 + i % 28:02d}"} for i in range(300)]
    rows[150]["timestamp"] = "later"
    path = write_log(tmp_path, "log.csv", rows)
    whole = aggregate_log(path, "log.csv", ColumnMapping("query", time="timestamp"), max_bad_share=0.5)
    monkeypatch.setattr(querylog, "BLOCK_SIZE", 37)

    cut = aggregate_log(path, "log.csv", ColumnMapping("query", time="timestamp"), max_bad_share=0.5)

    assert daily_of(cut) == daily_of(whole)
    assert cut.rows.to_pylist() == whole.rows.to_pylist()
    assert cut.bad_examples == whole.bad_examples == [(152, "unparseable timestamp: 'later'", "q3,later")]


def test_detect_format_reads_the_name():
    assert detect_format("Search Log.CSV") == ("csv", False)
    assert detect_format("log.tsv.gz") == ("tsv", True)
    assert detect_format("export.txt") == ("tsv", False)
    assert detect_format("log.ndjson") == ("jsonl", False)
    assert detect_format("log.json.gz") == ("jsonl", True)
    assert detect_format("log.parquet") == ("parquet", False)
    with pytest.raises(LogProblem, match=r"^log\.xlsx: files ending in \.xlsx are not read"):
        detect_format("log.xlsx")
    with pytest.raises(LogProblem, match="Parquet files are compressed inside"):
        detect_format("log.parquet.gz")


def test_peek_shows_the_first_rows_and_guesses_the_columns(tmp_path):
    rows = [{"ts": "2026-10-01", "Search Term": "shoes", "Impressions": "3", "market": "de"}] * 30

    for name in ("log.csv", "log.jsonl", "log.parquet"):
        preview = peek(write_log(tmp_path, name, rows), name, n=5)

        assert preview.columns == ["ts", "Search Term", "Impressions", "market"]
        assert preview.rows == [{"ts": "2026-10-01", "Search Term": "shoes", "Impressions": "3", "market": "de"}] * 5
        assert preview.guess == ColumnMapping(query="Search Term", time="ts", count="Impressions", segments=("market",))


def test_segment_columns_are_guessed_from_their_names(tmp_path):
    header = "Query,Device Type,colour,language,time\n"
    preview = peek(write_text(tmp_path, "log.csv", header + "tent,mobile,red,en,2026-10-01\n"), "log.csv")

    assert preview.guess == ColumnMapping(query="Query", time="time", segments=("Device Type", "language"))


def test_peek_falls_back_to_the_first_column_for_the_query(tmp_path):
    preview = peek(write_text(tmp_path, "log.csv", "text,when\nshoes,2026-10-01\n"), "log.csv")

    assert preview.guess == ColumnMapping(query="text")


def test_a_mapping_cannot_use_a_column_twice_or_a_reserved_segment_name():
    with pytest.raises(ValueError, match="mapped twice"):
        ColumnMapping(query="q", time="q")
    with pytest.raises(ValueError, match="cannot be named day"):
        ColumnMapping(query="q", segments=("day",))


# ------------------------------------------------------------------------------------- normalisation


def test_normalisation_merges_width_case_spaces_and_end_punctuation(tmp_path):
    texts = ["ＡＢＣ", "abc", "Abc!", "  abc ", "¿abc?", "iphone  15", "iPhone 15", "iphone\t15", "iphone 15?",
             "Straße", "STRASSE", "node.js", "c++", "C#", "100%", "at&t", "(foo) bar"]

    normalised = Normalization().apply(pa.array(texts)).to_pylist()

    assert normalised == ["abc", "abc", "abc", "abc", "abc", "iphone 15", "iphone 15", "iphone 15", "iphone 15",
                          "strasse", "strasse", "node.js", "c++", "c#", "100%", "at&t", "foo) bar"]


@pytest.mark.parametrize(("switch", "apart"), [
    ("nfkc", ("ＡＢＣ", "abc")),
    ("casefold", ("ABC", "abc")),
    ("collapse_whitespace", ("iphone  15", "iphone 15")),
    ("trim_punctuation", ("iphone?", "iphone")),
])
def test_each_normalisation_switched_off_keeps_its_spellings_apart(tmp_path, switch, apart):
    rows = [{"query": text} for text in apart]
    path = write_log(tmp_path, "log.jsonl", rows)

    merged = aggregate_log(path, "log.jsonl", ColumnMapping("query"))
    kept_apart = aggregate_log(path, "log.jsonl", ColumnMapping("query"), Normalization(**{switch: False}))

    assert len(queries_of(merged)) == 1
    assert len(queries_of(kept_apart)) == 2


def test_nothing_is_left_is_an_empty_query_and_a_bad_row(tmp_path):
    path = write_log(tmp_path, "log.csv", [{"query": "shoes"}] * 200 + [{"query": " ?! "}])

    aggregate = aggregate_log(path, "log.csv", ColumnMapping("query"))

    assert aggregate.rows_bad == 1
    assert aggregate.bad_examples == [(202, "empty query", " ?! ")]


def reference_fold(text: str) -> str:
    """NFKC, Python's case fold, NFKC again: the normalisation the module promises, one string at a time."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


@pytest.mark.parametrize("text", ["Straße", "İstanbul", "ΣΊΣΥΦΟΣ", "ﬁle", "Ǆemal", "ǰ", "ᾼ", "ＫＡＴＡ", "ꭰꭱ", "ŉ",
                                  "\u1e9e", "Ⅻ", "ℌ", "µ", "Ω", "K"])
def test_case_folding_is_pythons_casefold(text):
    folded = Normalization(collapse_whitespace=False, trim_punctuation=False).apply(pa.array([text])).to_pylist()

    assert folded == [reference_fold(text)]


# Characters this Python's Unicode tables leave unassigned (category Cn) are left out: pyarrow's tables may be
# newer (U+1CCD6, assigned in Unicode 16, NFKC-folds to "A" there and is unknown to Python 3.12's).
@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cn",)), max_size=12), min_size=1, max_size=20))
def test_case_folding_matches_python_on_any_text(texts):
    folded = Normalization(collapse_whitespace=False, trim_punctuation=False).apply(pa.array(texts)).to_pylist()

    assert folded == [reference_fold(text) for text in texts]


def test_no_character_beyond_the_scanned_planes_has_a_case():
    assert not [code for code in range(0x20000, 0x110000) if not 0xD800 <= code <= 0xDFFF
                and (chr(code).casefold() != chr(code) or chr(code).lower() != chr(code))]


def test_the_variants_list_every_raw_spelling_with_its_impressions(tmp_path):
    aggregate = aggregate_log(write_log(tmp_path, "log.csv", LOG), "log.csv", MAPPING)

    assert variants_of(aggregate) == VARIANTS
    assert ("mail john.doe@example.com", "mail john.doe@example.com") not in variants_of(aggregate)


# ------------------------------------------------------------------------------------- personal data


PERSONAL = ["john.doe@example.com", "write to Anna.B+shop@mail.co.uk please", "+1 (555) 123-4567",
            "call 555-1234567", "order 123456789012", "card 4111 1111 1111 1111", "(030) 1234567", "0176 123 456 78",
            "192.168.1.20"]
NOT_PERSONAL = ["iphone 15", "2024 tax form", "route 66", "iphone 15 (2023) 128gb", "events 2024-10-31",
                "31.10.2024 concert", "1.5 kg flour", "ps5", "12345678", "a@b", "size 10 12 14", "price 1,299.99"]


def test_personal_data_is_recognised():
    flags = looks_personal(pa.array(PERSONAL + NOT_PERSONAL + [None])).to_pylist()

    assert dict(zip(PERSONAL + NOT_PERSONAL + [None], flags)) == {
        **dict.fromkeys(PERSONAL, True), **dict.fromkeys(NOT_PERSONAL, False), None: False}


def test_personal_queries_are_dropped_and_only_counted(tmp_path):
    rows = ([{"query": "+1 (555) 123-4567", "n": "3"}, {"query": "555-1234567", "n": "2"},
             {"query": "+1 (555) 123-4567", "n": "1"}, {"query": "ID 123456789012", "n": "4"}]
            + [{"query": text, "n": "1"} for text in ("iphone 15", "2024 tax form", "route 66")])

    aggregate = aggregate_log(write_log(tmp_path, "log.csv", rows), "log.csv", ColumnMapping("query", count="n"))

    assert queries_of(aggregate) == {"iphone 15": 1, "2024 tax form": 1, "route 66": 1}
    assert (aggregate.rows_personal, aggregate.impressions_personal, aggregate.queries_personal) == (4, 10, 3)
    assert set(aggregate.rows["query"].to_pylist()) == {"iphone 15", "2024 tax form", "route 66"}
    assert aggregate.impressions == 3


def test_the_personal_data_filter_can_be_switched_off(tmp_path):
    aggregate = aggregate_log(write_log(tmp_path, "log.csv", LOG), "log.csv", MAPPING, drop_personal=False)

    assert queries_of(aggregate)["mail john.doe@example.com"] == 1
    assert aggregate.rows_personal == 0


# ------------------------------------------------------------------------------------------ bad rows


BAD_CSV = """query,timestamp,n
shoes,2026-10-01,1
,2026-10-01,1
boots,2026-10-01,1,extra

hats,yesterday,1
socks,2026-10-02,-2
caps,2026-10-02,2.5
belts,2026-10-02,0
shoes,2026-10-03,
shoes,2026-10-03,2
"""


def test_bad_rows_are_counted_with_their_lines_and_problems(tmp_path):
    path = write_text(tmp_path, "log.csv", BAD_CSV)

    aggregate = aggregate_log(path, "log.csv", ColumnMapping("query", time="timestamp", count="n"), max_bad_share=1)

    assert aggregate.bad_examples == [
        (3, "missing query", ",2026-10-01,1"),
        (4, "expected 3 fields, found 4", "boots,2026-10-01,1,extra"),
        (6, "unparseable timestamp: 'yesterday'", "hats,yesterday,1"),
        (7, "count is not a whole number >= 0: '-2'", "socks,2026-10-02,-2"),
        (8, "count is not a whole number >= 0: '2.5'", "caps,2026-10-02,2.5"),
        (10, "missing count", "shoes,2026-10-03,"),
    ]
    assert (aggregate.rows_read, aggregate.rows_good, aggregate.rows_bad, aggregate.rows_zero) == (9, 3, 6, 1)
    assert aggregate.bad_by_problem == {"count is not a whole number >= 0": 2, "missing count": 1, "missing query": 1,
                                        "unparseable timestamp": 1, "wrong number of fields": 1}
    assert daily_of(aggregate) == {("shoes", date(2026, 10, 1)): 1, ("shoes", date(2026, 10, 3)): 2}
    assert aggregate.rows["line"].to_pylist() == [2, 11]


def test_rows_with_extra_fields_do_not_send_a_block_line_by_line(tmp_path, monkeypatch):
    lines = ["query,n"] + [f"query {i % 40},1" for i in range(3000)]
    for at in (100, 1500, 2999):
        lines[at] = "shoes, size 42,1"
    lines[700] = lines[100]
    path = write_text(tmp_path, "log.csv", "\n".join(lines) + "\n")

    def line_by_line(*args):
        raise AssertionError("the block went line by line")

    monkeypatch.setattr(querylog, "_delimited_lines", line_by_line)
    aggregate = aggregate_log(path, "log.csv", ColumnMapping("query", count="n"))

    assert [(line, problem) for line, problem, _ in aggregate.bad_examples] == [
        (101, "expected 2 fields, found 3"), (701, "expected 2 fields, found 3"), (1501, "expected 2 fields, found 3"),
        (3000, "expected 2 fields, found 3")]
    assert aggregate.rows_good == 2996
    assert aggregate.rows["line"].to_pylist()[:3] == [2, 3, 4]


def test_bad_json_lines_are_counted_with_their_lines(tmp_path):
    text = '{"q": "shoes"}\n\n{"q": "boots"\n[1, 2]\n{"other": 1}\n{"q": 42}\n  \n{"q": "hats"}\n'
    path = write_text(tmp_path, "log.jsonl", text)

    aggregate = aggregate_log(path, "log.jsonl", ColumnMapping("q"), max_bad_share=1)

    assert [(line, problem.split(":")[0]) for line, problem, _ in aggregate.bad_examples] == [
        (3, "invalid JSON"), (4, "a JSON array, not an object"), (5, "missing query")]
    assert queries_of(aggregate) == {"shoes": 1, "42": 1, "hats": 1}
    assert aggregate.rows["line"].to_pylist() == [1, 6, 8]


def test_too_many_bad_rows_are_fatal_and_say_where_the_first_is(tmp_path):
    path = write_text(tmp_path, "log.csv", BAD_CSV)

    with pytest.raises(LogProblem) as caught:
        aggregate_log(path, "log.csv", ColumnMapping("query", time="timestamp", count="n"), max_bad_share=0.5)

    assert str(caught.value) == ("log.csv: 6 of 9 rows are bad (66.7%), more than the 50.0% allowed; "
                                 "the first bad row is on line 3: missing query")


def test_a_few_bad_rows_under_the_threshold_are_not_fatal(tmp_path):
    rows = [{"query": "shoes", "timestamp": "2026-10-01"}] * 199 + [{"query": "hats", "timestamp": "never"}]
    path = write_log(tmp_path, "log.csv", rows)

    aggregate = aggregate_log(path, "log.csv", ColumnMapping("query", time="timestamp"), max_bad_share=0.005)

    assert aggregate.rows_bad == 1 and aggregate.rows_good == 199
    with pytest.raises(LogProblem, match="1 of 200 rows are bad"):
        aggregate_log(path, "log.csv", ColumnMapping("query", time="timestamp"), max_bad_share=0.001)


def test_bad_examples_stop_at_ten(tmp_path):
    rows = [{"query": ""}] * 30 + [{"query": "shoes"}] * 10

    aggregate = aggregate_log(write_log(tmp_path, "log.csv", rows), "log.csv", ColumnMapping("query"), max_bad_share=1)

    assert aggregate.rows_bad == 30
    assert [line for line, _, _ in aggregate.bad_examples] == list(range(2, 12))


@pytest.mark.parametrize(("name", "content", "message"), [
    ("empty.csv", b"", "empty.csv: the file holds no rows"),
    ("blank.csv", b"\n\n  \n", "blank.csv: the file holds no rows"),
    ("header.csv", b"query,timestamp\n", "header.csv: the file holds no rows"),
    ("empty.jsonl", b"\n", "empty.jsonl: the file holds no rows"),
    ("image.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "image.csv: this is not a text file"),
    ("noise.jsonl", bytes(range(256)) * 40, "noise.jsonl: this is not a text file"),
    ("fake.csv.gz", b"query\nshoes\n", "fake.csv.gz: not a valid gzip file"),
    ("fake.parquet", b"query\nshoes\n", "fake.parquet: not a readable Parquet file"),
    ("latin1.csv", b"query\n" + "straße\n".encode("latin-1") * 3, "latin1.csv: no rows with a usable query"),
    ("text.jsonl", b"just some words\nand more\n", "text.jsonl: no rows with a usable query"),
])
def test_files_that_are_not_logs_are_refused_with_a_clear_message(tmp_path, name, content, message):
    path = write_text(tmp_path, name, content)

    with pytest.raises(LogProblem) as caught:
        aggregate_log(path, name, ColumnMapping("query"), max_bad_share=1)

    assert str(caught.value).startswith(message)


def test_a_cut_short_gzip_file_is_named_as_such(tmp_path):
    data = gzip.compress("query\n".encode() + "".join(f"query number {i}\n" for i in range(50_000)).encode())
    path = write_text(tmp_path, "log.csv.gz", data[: len(data) // 2])

    with pytest.raises(LogProblem, match="log.csv.gz: the gzip data is damaged or cut short"):
        aggregate_log(path, "log.csv.gz", ColumnMapping("query"))


def test_utf16_text_is_refused_with_the_fix(tmp_path):
    path = write_text(tmp_path, "log.csv", "query\nshoes\n".encode("utf-16"))

    with pytest.raises(LogProblem, match="log.csv: the file is UTF-16 text; save it as UTF-8"):
        aggregate_log(path, "log.csv", ColumnMapping("query"))


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=1, max_size=3000), name=st.sampled_from(["log.csv", "log.tsv", "log.jsonl", "log.csv.gz"]))
def test_any_bytes_give_counts_or_a_log_problem(tmp_path_factory, data, name):
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_bytes(b"query\n" + data if name != "log.jsonl" else data)

    try:
        aggregate = aggregate_log(path, name, ColumnMapping("query"), max_bad_share=1)
    except LogProblem as problem:
        assert str(problem).startswith(name)
    else:
        assert aggregate.rows_good + aggregate.rows_bad == aggregate.rows_read


def test_many_bad_rows_are_accepted_when_every_share_is_allowed(tmp_path):
    rows = [{"query": "" if i % 3 else "shoes"} for i in range(15_000)]

    aggregate = aggregate_log(write_log(tmp_path, "log.csv", rows), "log.csv", ColumnMapping("query"), max_bad_share=1)

    assert (aggregate.rows_good, aggregate.rows_bad) == (5_000, 10_000)


def test_only_zero_counts_is_no_rows(tmp_path):
    path = write_text(tmp_path, "log.csv", "query,n\nshoes,0\n")

    with pytest.raises(LogProblem, match="log.csv: no rows with a count above zero"):
        aggregate_log(path, "log.csv", ColumnMapping("query", count="n"))


@pytest.mark.parametrize("name", ["log.csv", "log.jsonl", "log.parquet"])
def test_a_missing_column_is_named_with_the_columns_found(tmp_path, name):
    path = write_log(tmp_path, name, LOG)

    with pytest.raises(LogProblem) as caught:
        aggregate_log(path, name, ColumnMapping("query", time="when", segments=("market",)))

    if name == "log.jsonl":  # no header: the first lines tell which fields there are
        assert str(caught.value) == ("log.jsonl: no field 'when', 'market' in the first 7 lines; "
                                     "the fields found are: 'timestamp', 'query', 'lang'")
    else:
        assert str(caught.value) == (f"{name}: no column 'when', 'market' in this file; "
                                     "the columns found are: 'timestamp', 'query', 'lang'")


def test_invalid_utf8_is_a_bad_row_with_its_line(tmp_path):
    data = b"query\n" + b"shoes\n" * 300 + b"stra\xdfe\n" + b"boots\n"
    path = write_text(tmp_path, "log.csv", data)

    aggregate = aggregate_log(path, "log.csv", ColumnMapping("query"))

    assert aggregate.bad_examples == [(302, "not valid UTF-8", "stra\ufffde")]
    assert queries_of(aggregate) == {"shoes": 300, "boots": 1}


def test_the_header_may_start_with_a_byte_order_mark_and_lines_end_in_crlf(tmp_path):
    path = write_text(tmp_path, "log.csv", "\ufeffquery,n\r\nshoes,2\r\n\r\nboots,1\r\n")

    aggregate = aggregate_log(path, "log.csv", ColumnMapping("query", count="n"))

    assert queries_of(aggregate) == {"shoes": 2, "boots": 1}
    assert aggregate.rows["line"].to_pylist() == [2, 4]
    assert aggregate.rows["raw"].to_pylist() == ["shoes", "boots"]


# ----------------------------------------------------------------------------------------- timestamps


def test_timestamps_in_every_accepted_shape_land_on_their_utc_day(tmp_path):
    stamps = {
        "2026-10-31T23:30:00-02:00": datetime(2026, 11, 1, 1, 30, tzinfo=UTC),
        "2026-10-31T01:30:00+02:00": datetime(2026, 10, 30, 23, 30, tzinfo=UTC),
        "2026-10-31 12:00:00": datetime(2026, 10, 31, 12, tzinfo=UTC),
        "2026-10-31T12:00:00.250Z": datetime(2026, 10, 31, 12, 0, 0, 250000, tzinfo=UTC),
        "2026-10-31": datetime(2026, 10, 31, tzinfo=UTC),
        "1790000000": datetime.fromtimestamp(1790000000, UTC),
        "1790000000123": datetime.fromtimestamp(1790000000.123, UTC),
        " 2026-10-31T12:00Z ": datetime(2026, 10, 31, 12, tzinfo=UTC),
    }
    rows = [{"query": f"q{i}", "t": stamp} for i, stamp in enumerate(stamps)]

    aggregate = aggregate_log(write_log(tmp_path, "log.csv", rows), "log.csv", ColumnMapping("query", time="t"))

    assert aggregate.rows["time"].to_pylist() == list(stamps.values())
    assert aggregate.daily["day"].to_pylist() == [stamp.date() for stamp in stamps.values()]
    assert aggregate.first_time == min(stamps.values()) and aggregate.last_time == max(stamps.values())


@pytest.mark.parametrize("stamps", [
    ["2026-10-30T10:00:00Z", "2026-10-31T10:00:00Z"],
    ["2026-10-30 10:00:00", "2026-10-31 10:00:00"],
    ["1793354400", "1793440800"],
    ["1793354400000", "1793440800000"],
    ["2026-10-30", "2026-10-31"],
])
def test_a_column_of_one_shape_with_a_bad_value_keeps_the_others(tmp_path, stamps):
    rows = [{"query": "shoes", "t": stamps[i % 2]} for i in range(400)]
    rows[123]["t"] = "2026-02-30"
    rows[321]["t"] = "soon"

    aggregate = aggregate_log(write_log(tmp_path, "log.csv", rows), "log.csv", ColumnMapping("query", time="t"))

    assert aggregate.bad_examples == [(125, "unparseable timestamp: '2026-02-30'", "shoes,2026-02-30"),
                                      (323, "unparseable timestamp: 'soon'", "shoes,soon")]
    assert daily_of(aggregate) == {("shoes", date(2026, 10, 30)): 200, ("shoes", date(2026, 10, 31)): 198}


def test_timestamps_with_a_utc_word_are_read(tmp_path):
    rows = [{"query": "shoes", "t": "2026-10-31 23:30:00 UTC"}, {"query": "boots", "t": "2026-10-30 01:00:00.5 UTC"}]

    aggregate = aggregate_log(write_log(tmp_path, "log.csv", rows), "log.csv", ColumnMapping("query", time="t"))

    assert aggregate.rows["time"].to_pylist() == [datetime(2026, 10, 31, 23, 30, tzinfo=UTC),
                                                  datetime(2026, 10, 30, 1, 0, 0, 500000, tzinfo=UTC)]


def test_parquet_nulls_are_missing_queries_and_empty_segments(tmp_path):
    table = pa.table({"query": pa.array([None, None, "shoes", "boots"] + ["shoes"] * 396, pa.large_string()),
                      "market": pa.array(["de", None, None, "fr"] + ["de"] * 396).dictionary_encode()})
    pq.write_table(table, tmp_path / "log.parquet")

    aggregate = aggregate_log(tmp_path / "log.parquet", "log.parquet", ColumnMapping("query", segments=("market",)))

    assert aggregate.bad_examples == [(1, "missing query", "query=None, market='de'"),
                                      (2, "missing query", "query=None, market=None")]
    assert daily_of(aggregate) == {("shoes", "", None): 1, ("boots", "fr", None): 1, ("shoes", "de", None): 396}


def test_parquet_time_columns_are_used_as_they_are(tmp_path):
    table = pa.table({
        "query": ["a", "b", "c"],
        "aware": pa.array([datetime(2026, 10, 31, 23, 30, tzinfo=UTC)] * 3, pa.timestamp("ms", "Europe/Berlin")),
        "naive": pa.array([1793489400123456789] * 3, pa.timestamp("ns")),
        "day": pa.array([date(2026, 10, 31)] * 3, pa.date32()),
        "epoch": pa.array([1793491200] * 3, pa.int64()),
        "n": pa.array([1.0, 2.0, 3.0]),
    })
    pq.write_table(table, tmp_path / "log.parquet")

    for column in ("aware", "naive", "day", "epoch"):
        aggregate = aggregate_log(tmp_path / "log.parquet", "log.parquet", ColumnMapping("query", time=column, count="n"))

        assert set(aggregate.daily["day"].to_pylist()) == {date(2026, 10, 31) if column != "epoch" else date(2026, 11, 1)}
        assert queries_of(aggregate) == {"a": 1, "b": 2, "c": 3}


# ------------------------------------------------------------------------------------- raw rows kept


def test_raw_rows_are_kept_up_to_the_limit_per_query_in_file_order(tmp_path, monkeypatch):
    rows = [{"query": ["Shoes", "boots", "shoes!"][i % 3], "t": f"2026-10-{1 + i // 10:02d}T00:00:00Z"} for i in range(60)]
    path = write_log(tmp_path, "log.csv", rows)
    monkeypatch.setattr(querylog, "BLOCK_SIZE", 100)

    aggregate = aggregate_log(path, "log.csv", ColumnMapping("query", time="t"), keep_rows=5)

    kept = aggregate.rows.to_pylist()
    shoes = [row for row in kept if row["query"] == "shoes"]
    assert [row["line"] for row in shoes] == [2, 4, 5, 7, 8]
    assert [row["raw"] for row in shoes] == ["Shoes", "shoes!", "Shoes", "shoes!", "Shoes"]
    assert [row["line"] for row in kept if row["query"] == "boots"] == [3, 6, 9, 12, 15]
    assert [row["line"] for row in kept] == sorted(row["line"] for row in kept)
    assert aggregate_log(path, "log.csv", ColumnMapping("query"), keep_rows=0).rows.num_rows == 0


# ------------------------------------------------------------------------------------------ progress


def test_progress_on_a_gzipped_log_follows_the_file_on_disk(tmp_path, monkeypatch):
    rows = [{"query": f"query {i % 500}", "t": "2026-10-01"} for i in range(20_000)]
    path = write_log(tmp_path, "log.csv.gz", rows)
    monkeypatch.setattr(querylog, "BLOCK_SIZE", 16_384)
    calls = []

    aggregate_log(path, "log.csv.gz", ColumnMapping("query", time="t"), progress=lambda done, total: calls.append((done, total)))

    size = path.stat().st_size
    assert len(calls) > 5
    assert all(total == size for _, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert calls[-1] == (size, size)


# -------------------------------------------------------------------------------------------- misc


def test_a_hash_collision_reads_the_log_again_with_another_seed(tmp_path, monkeypatch):
    real = querylog._string_hashes

    def colliding(strings, seed):
        first, second = real(strings, seed)
        return (first * 0, second) if seed == 0 else (first, second)

    monkeypatch.setattr(querylog, "_string_hashes", colliding)

    aggregate = aggregate_log(write_log(tmp_path, "log.csv", LOG), "log.csv", MAPPING)

    assert daily_of(aggregate) == DAILY


def test_the_modules_import_nothing_from_django():
    code = ("import sys, judgments.lib.sampling, judgments.lib.querylog; "
            "assert not [m for m in sys.modules if m.startswith('django')], 'django imported'")

    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
