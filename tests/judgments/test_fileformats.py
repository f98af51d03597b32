"""Reading query and corpus files: good paths, and every bad input named by file, line and problem."""

import io

import pytest

from judgments.lib.fileformats import FileProblem, read_documents, read_queries


def problem(call) -> FileProblem:
    with pytest.raises(FileProblem) as caught:
        call()
    return caught.value


def test_a_csv_query_file_with_optional_and_extra_columns():
    data = b"query_id,query,information_need,tier,weight,segment,brand\nq1,tent 2 person,A light tent,HEAD,12.5,en,acme\nq2,  rain   jacket ,,,,,\n"
    parsed = read_queries(data, "queries.csv")
    first, second = parsed.queries
    assert (first.query_id, first.text, first.information_need, first.tier, first.weight, first.segment) == (
        "q1", "tent 2 person", "A light tent", "head", 12.5, "en")
    assert first.extra == {"brand": "acme"}
    assert (second.text, second.weight, second.line) == ("rain jacket", None, 3)


def test_tsv_and_jsonl_and_bom_and_crlf_are_read():
    tsv = "\ufeffquery_id\tquery\r\nq1\tboots\r\n".encode()
    assert read_queries(tsv, "q.tsv").queries[0].text == "boots"
    jsonl = b'{"query_id": "q1", "query": "boots", "tier": "tail", "locale": "de"}\n\n{"qid": 7, "text": "socks"}\n'
    rows = read_queries(jsonl, "q.jsonl").queries
    assert [(r.query_id, r.text, r.line) for r in rows] == [("q1", "boots", 1), ("7", "socks", 3)]
    assert rows[0].extra == {"locale": "de"}


def test_classic_and_xml_trec_topics_are_read():
    classic = b"""<top>
<num> Number: 301
<title> International Organized Crime
<desc> Description:
Identify organizations that participate in international criminal activity.
<narr> Narrative:
A relevant document must name an organization.
</top>
<top>
<num> Number: 302
<title> Poliomyelitis and Post-Polio
<desc> Description: Is the disease still a problem?
</top>
"""
    rows = read_queries(classic, "topics.301-302").queries
    assert [(r.query_id, r.text, r.line) for r in rows] == [("301", "International Organized Crime", 1), ("302", "Poliomyelitis and Post-Polio", 9)]
    assert rows[0].information_need.startswith("Identify organizations") and "must name" in rows[0].information_need
    xml = b'<topics><topic number="1" type="faceted"><query>obama family tree</query><description>Find information on &amp; about</description></topic></topics>'
    assert [(r.query_id, r.text, r.information_need) for r in read_queries(xml, "web.xml").queries] == [("1", "obama family tree", "Find information on & about")]


def test_the_same_text_twice_is_reported_not_refused():
    parsed = read_queries(b"query_id,query\nq1,Boots\nq2,boots\n", "q.csv")
    assert len(parsed.queries) == 2
    assert parsed.warnings == ["line 3: the text 'boots' of query q2 repeats query q1 (line 2)"]


@pytest.mark.parametrize(
    "data,name,message",
    [
        (b"", "q.csv", "q.csv: the file is empty"),
        (b"  \n\n", "q.csv", "q.csv: the file is empty"),
        (b"query_id,query\n", "q.csv", "q.csv: the file holds no queries"),
        (b"query_id,query\nq1,boots\nq2\n", "q.csv", "q.csv:3: expected 2 columns, found 1"),
        (b"query_id,query\nq1,boots\nq1,socks\n", "q.csv", "q.csv:3: query_id 'q1' was already used on line 2"),
        (b"id,name\n1,boots\n", "q.csv", "q.csv:2: missing query (accepted names: query, query_text, text, title)"),
        (b"query_id,query\n,boots\n", "q.csv", "q.csv:2: missing query_id"),
        (b"query_id,query,weight\nq1,boots,heavy\n", "q.csv", "q.csv:2: weight 'heavy' is not a number"),
        (b"query_id,query,weight\nq1,boots,-1\n", "q.csv", "q.csv:2: weight '-1' must be a finite number >= 0"),
        (b"query_id,query,query_id\nq1,a,b\n", "q.csv", "q.csv:1: the header has empty or repeated column names"),
        (b'{"query_id": "q1", "query": "a"}\n{"query_id": "q2", "query": }\n', "q.jsonl", "q.jsonl:2: invalid JSON"),
        (b'["q1", "a"]\n', "q.jsonl", "q.jsonl:1: expected a JSON object, found list"),
        (b"query_id,query\nq1,caf\xe9\n", "q.csv", "q.csv:2: not valid UTF-8 (byte 0xe9)"),
        (b"<topics></topics>", "t.xml", "t.xml: no <top> or <topic> blocks"),
        (b"PK\x03\x04", "q.parquet", "q.parquet: files ending in .parquet are not accepted here"),
    ],
)
def test_a_bad_query_file_is_refused_naming_the_line_and_the_problem(data, name, message):
    assert str(problem(lambda: read_queries(data, name))).startswith(message)


def test_the_corpus_reader_streams_jsonl_and_csv_in_batches():
    jsonl = b"".join(b'{"doc_id": "d%d", "title": "Tent %d", "price": %d}\n' % (i, i, i) for i in range(7))
    batches = list(read_documents(io.BytesIO(jsonl), "docs.jsonl", batch_size=3))
    assert [len(b) for b in batches] == [3, 3, 1]
    assert batches[0][1].doc_id == "d1" and batches[0][1].fields == {"title": "Tent 1", "price": 1}
    csv_rows = list(read_documents(io.BytesIO(b"\xef\xbb\xbfdocno,title\r\nA,x\r\nB,y\r\n"), "docs.csv"))
    assert [(d.doc_id, d.fields) for d in csv_rows[0]] == [("A", {"title": "x"}), ("B", {"title": "y"})]


@pytest.mark.parametrize(
    "data,name,message",
    [
        (b"", "docs.jsonl", "docs.jsonl: the file is empty"),
        (b'{"doc_id": "a"}\n{"doc_id": "a"}\n', "docs.jsonl", "docs.jsonl:2: doc_id 'a' was already used on line 1"),
        (b'{"title": "no id"}\n', "docs.jsonl", "docs.jsonl:1: missing doc_id"),
        (b'{"doc_id": "a"}\n{oops}\n', "docs.jsonl", "docs.jsonl:2: invalid JSON"),
        (b"doc_id,title\na,x,extra\n", "docs.csv", "docs.csv:2: expected 2 columns, found 3"),
        (b'{"doc_id": "a", "t": "\xff"}\n', "docs.jsonl", "docs.jsonl:1: not valid UTF-8 (byte 0xff)"),
        (b"<topics/>", "docs.xml", "docs.xml: TREC files are not accepted here"),
    ],
)
def test_a_bad_corpus_file_is_refused_naming_the_line_and_the_problem(data, name, message):
    assert str(problem(lambda: list(read_documents(io.BytesIO(data), name)))).startswith(message)
