"""Make evret_reference.json: Evret's own evaluator's numbers for judge-only evaluation's worked cases.

Verdict's judge-only evaluation (evaluation/engine/judge_only.py) must give the numbers Evret's Evaluator
gives on the same inputs. This script is run by hand, in a throwaway virtualenv with the real library (Evret is
not a dependency of Verdict):

    python3 -m venv /tmp/evret-venv && /tmp/evret-venv/bin/pip install evret==0.0.3
    /tmp/evret-venv/bin/python tests/data/judges/make_evret_reference.py

Each case is a dataset (queries with expected answers, document texts), a ranking per query, and a judge:
Evret's TokenOverlapJudge with the given settings, or a table judge that says which (expected text, retrieved
text) pairs match; its "unjudged" pairs are those Verdict's judge could not judge, which Evret sees as False.
The script writes, for every case, Evret's mean of each metric at k = 1, 3, 5, 10 over all queries, and each
query's values (the same evaluator on a dataset of that query alone).
"""

import json
from pathlib import Path

import evret
from evret import (AveragePrecision, BaseRetriever, DocumentExample, EvaluationDataset, Evaluator, HitRate, MRR, NDCG,
                   Precision, QueryExample, Recall, RetrievalResult, TokenOverlapJudge)
from evret.judges import Judge

KS = (1, 3, 5, 10)
SEED_TEXT = "rag is a technique that combines retrieval with generation"

CASES = [
    {
        "name": "an answer is matched once: a later document matching only a taken answer takes nothing",
        "queries": [{"query_id": "q1", "query": "What is RAG?", "answers": ["alpha", "beta"]}],
        "documents": {"d1": "text one", "d2": "text two", "d3": "text three", "d4": "text four"},
        "runs": {"q1": ["d1", "d2", "d3", "d4"]},
        "table": {"matches": [["alpha", "text one"], ["alpha", "text two"], ["beta", "text three"]]},
    },
    {
        "name": "a document matching several answers takes the first free one",
        "queries": [{"query_id": "q1", "query": "several", "answers": ["alpha", "beta", "gamma"]}],
        "documents": {"d1": "text one", "d2": "text two", "d3": "text three"},
        "runs": {"q1": ["d1", "d2", "d3"]},
        "table": {"matches": [["alpha", "text one"], ["beta", "text one"], ["gamma", "text one"],
                              ["alpha", "text two"], ["beta", "text two"], ["alpha", "text three"]]},
    },
    {
        "name": "k beyond the ranking, a query with no results, and a query the run does not answer",
        "queries": [{"query_id": "q1", "query": "short ranking", "answers": ["alpha", "beta"]},
                    {"query_id": "q2", "query": "no results", "answers": ["alpha"]},
                    {"query_id": "q3", "query": "not in the run", "answers": ["gamma"]}],
        "documents": {"d1": "text one", "d2": "text two"},
        "runs": {"q1": ["d1", "d2"], "q2": []},
        "table": {"matches": [["beta", "text two"]]},
    },
    {
        "name": "could not judge counts as no match",
        "queries": [{"query_id": "q1", "query": "unsure", "answers": ["alpha", "beta"]}],
        "documents": {"d1": "text one", "d2": "text two", "d3": "text three"},
        "runs": {"q1": ["d1", "d2", "d3"]},
        "table": {"matches": [["beta", "text three"]], "unjudged": [["alpha", "text one"], ["beta", "text one"],
                                                                   ["alpha", "text two"]]},
    },
    {
        "name": "answers are normalised: empty and repeated answers are dropped before R is counted",
        "queries": [{"query_id": "q1", "query": "Dupes", "answers": ["Alpha", " alpha  ", "", "BETA"]},
                    {"query_id": "q2", "query": "no answers at all", "answers": []}],
        "documents": {"d1": "Text One", "d2": "text   two"},
        "runs": {"q1": ["d1", "d2"], "q2": ["d1"]},
        "table": {"matches": [["alpha", "text one"], ["alpha", "text two"], ["beta", "text two"]]},
    },
    {
        "name": "the same document twice in a ranking can take two answers; a document without text is judged by its id",
        "queries": [{"query_id": "q1", "query": "twice", "answers": ["alpha", "beta", "see doc-9"]}],
        "documents": {"d1": "text one"},
        "runs": {"q1": ["d1", "d1", "doc-9", "d1"]},
        "table": {"matches": [["alpha", "text one"], ["beta", "text one"], ["see doc-9", "doc-9"]]},
    },
    {
        "name": "the seed's example with Evret's default token-overlap judge",
        "queries": [{"query_id": "q1", "query": "What is RAG?",
                     "answers": ["RAG combines retrieval with generation for better accuracy",
                                 "Retrieval-augmented generation improves LLM responses"]}],
        "documents": {"doc_123": "RAG is a technique that combines retrieval with generation",
                      "doc_456": "Vector databases store embeddings",
                      "doc_789": "RAG combines retrieval with generation for better accuracy, the survey says"},
        "runs": {"q1": ["doc_123", "doc_456", "doc_789"]},
        "token_overlap": {},
    },
    {
        "name": "token overlap with a low token minimum over several queries",
        "queries": [
            {"query_id": "q1", "query": "how do vector databases index embeddings",
             "answers": ["vector databases index embeddings with approximate nearest neighbour graphs such as hnsw",
                         "product quantization compresses embeddings so the index fits in memory"]},
            {"query_id": "q2", "query": "why rerank retrieved passages",
             "answers": ["a cross encoder reranker reads the query and passage together and scores relevance precisely"]},
            {"query_id": "q3", "query": "what does bm25 not capture",
             "answers": ["bm25 does not capture synonyms or paraphrases of the query terms"]},
        ],
        "documents": {
            "p1": "Most vector databases index embeddings with approximate nearest neighbour graphs such as HNSW.",
            "p2": "Product quantization compresses embeddings so that the whole index fits in memory on one machine.",
            "p3": "HNSW graphs link each embedding to its nearest neighbours on several layers.",
            "p4": "A cross-encoder reranker reads the query and the passage together and scores their relevance precisely.",
            "p5": "BM25 captures synonyms and paraphrases of the query terms.",
            "p6": "BM25 does not capture synonyms or paraphrases of the query terms, which dense retrievers do.",
            "p7": "",
        },
        "runs": {"q1": ["p3", "p1", "p2", "p1", "p7"], "q2": ["p5", "p4", "p4"], "q3": ["p5", "p6", "p2"]},
        "token_overlap": {"min_tokens": 3, "overlap_ratio": 0.5},
    },
]


class TableJudge(Judge):
    name = "table"

    def __init__(self, matches):
        self.matches = {tuple(pair) for pair in matches}

    def judge(self, context) -> bool:
        return (context.expected_text, context.retrieved_text) in self.matches


class FixedRetriever(BaseRetriever):
    def __init__(self, results):
        self.results = results

    def retrieve(self, query: str, k: int):
        return [RetrievalResult(doc_id=doc_id, score=1.0 / (rank + 1)) for rank, doc_id in enumerate(self.results[query][:k])]


def evaluate(case, queries):
    metrics = [cls(k=k) for cls in (Recall, Precision, MRR, NDCG, HitRate, AveragePrecision) for k in KS]
    judge = TableJudge(case["table"]["matches"]) if "table" in case else TokenOverlapJudge(**case["token_overlap"])
    retriever = FixedRetriever({q["query"]: case["runs"].get(q["query_id"], []) for q in queries})
    dataset = EvaluationDataset(
        queries=[QueryExample(query_id=q["query_id"], query_text=q["query"], expected_answers=q["answers"]) for q in queries],
        documents=[DocumentExample(doc_id=doc_id, text=text) for doc_id, text in case["documents"].items()])
    return Evaluator(retriever, metrics, judge=judge).evaluate(dataset).metric_scores


def main() -> None:
    out = []
    for case in CASES:
        mean = evaluate(case, case["queries"])
        per_query = {q["query_id"]: evaluate(case, [q]) for q in case["queries"]}
        out.append({**case, "ks": list(KS), "evret": {"mean": mean, "per_query": per_query}})
    path = Path(__file__).with_name("evret_reference.json")
    path.write_text(json.dumps({"evret_version": evret.__version__, "cases": out}, indent=1) + "\n")
    print(f"wrote {path} ({len(out)} cases, evret {evret.__version__})")


if __name__ == "__main__":
    main()
