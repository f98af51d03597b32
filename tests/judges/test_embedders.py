"""The embedders: the numpy backend, and the embeddings endpoint against a fake server on a loopback port that
answers like OpenAI (and text-embeddings-inference's /v1 route) and like text-embeddings-inference's /embed."""

import json
from urllib.parse import urlsplit

import numpy as np
import pytest

from judgments.judges import (ENDPOINT_FAILED, EmbeddingEndpointConfig, EmbeddingEndpointError,
                              EmbeddingRequestFailed, EndpointError, JudgeSettingsError, SemanticJudge, make_embedder)
from judgments.judges import embedders, minilm
from judgments.lib.outbound import Policy

from .conftest import context
from .fake_embeddings import Answer, FakeEmbeddings, vector_for

LOOPBACK = Policy.of(networks=["127.0.0.0/8"])
TEXTS = ["first text", "second text", "a third one", "fourth", "the fifth text"]


def normalised(text: str) -> np.ndarray:
    vector = np.array(vector_for(text))
    return vector / np.linalg.norm(vector)


def endpoint(base_url: str, **given) -> embedders.EndpointEmbedder:
    config = EmbeddingEndpointConfig(base_url, given.pop("model", "fake-embed"), **given)
    return make_embedder("endpoint", endpoint=config, policy=LOOPBACK)


@pytest.fixture
def server():
    with FakeEmbeddings() as fake:
        yield fake


def test_the_numpy_backend_is_the_built_in_encoder(semantic_available):
    embedder = make_embedder("numpy")
    vectors = embedder.encode(["RAG combines retrieval with generation", "Bananas are yellow"])

    assert np.array_equal(vectors, minilm.load().encode(["RAG combines retrieval with generation",
                                                         "Bananas are yellow"]))
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert embedder.cache_model == "numpy:sentence-transformers/all-MiniLM-L6-v2" and embedder.max_length == 256
    assert embedder.describe() == {"backend": "numpy", "model": "sentence-transformers/all-MiniLM-L6-v2",
                                   "max_length": 256}


def test_an_openai_endpoint_gets_batches_and_gives_normalised_vectors_in_order(server):
    embedder = endpoint(server.base_url, api_key="sk-secret", batch_size=2)
    server.script(Answer.shuffled())  # data items may come in any order: the indices decide
    vectors = embedder.encode(TEXTS)

    assert np.allclose(vectors, [normalised(text) for text in TEXTS], atol=1e-6)
    assert vectors.dtype == np.float32 and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-6)
    assert [request.path for request in server.requests] == ["/v1/embeddings"] * 3
    assert [request.json for request in server.requests] == [
        {"model": "fake-embed", "input": TEXTS[0:2]}, {"model": "fake-embed", "input": TEXTS[2:4]},
        {"model": "fake-embed", "input": TEXTS[4:]}]
    assert {request.headers["authorization"] for request in server.requests} == {"Bearer sk-secret"}


def test_a_base_url_without_v1_gets_the_v1_route(server):
    embedder = endpoint(server.root)
    assert np.allclose(embedder.encode(TEXTS[:2]), [normalised(t) for t in TEXTS[:2]], atol=1e-6)
    assert server.requests[0].path == "/v1/embeddings"


def test_text_embeddings_inferences_own_route_and_reply_are_understood(server):
    embedder = endpoint(server.root + "/embed", batch_size=4)
    vectors = embedder.encode(TEXTS)

    assert np.allclose(vectors, [normalised(text) for text in TEXTS], atol=1e-6)
    assert [request.path for request in server.requests] == ["/embed", "/embed"]
    assert server.requests[0].json == {"inputs": TEXTS[:4], "truncate": True}
    assert embedder.describe()["route"] == "tei"
    assert "authorization" not in server.requests[0].headers


def test_busy_answers_are_tried_again_after_retry_after(server):
    server.script(Answer.status_code(503, retry_after="0"), Answer.status_code(429, retry_after="0"),
                  Answer.status_code(408, retry_after="0"))
    vectors = endpoint(server.base_url, max_retries=3).encode(TEXTS[:2])

    assert np.allclose(vectors, [normalised(t) for t in TEXTS[:2]], atol=1e-6)
    assert len(server.requests) == 4


def test_an_endpoint_that_keeps_failing_fails_the_batch_and_the_judge_says_could_not_judge(server):
    server.script(*[Answer.status_code(503, retry_after="0")] * 4)
    embedder = endpoint(server.base_url, max_retries=1)
    with pytest.raises(EmbeddingRequestFailed, match="failed 2 tries; the last: HTTP 503: 'busy'") as failed:
        embedder.encode(TEXTS[:2])
    assert failed.value.cause == "HTTP status 503"

    verdicts = SemanticJudge(embedder=embedder).batch_judge([context("a document", "a reference"), context("doc")])
    assert [(v.problem, v.cause) for v in verdicts] == [(ENDPOINT_FAILED, "HTTP status 503"), ("no_references", "")]


@pytest.mark.parametrize("status", [401, 403, 404, 405])
def test_a_refusal_stops_the_run_naming_the_status_and_never_the_key(server, status):
    server.script(Answer.status_code(status, body=b'{"error": {"message": "Incorrect API key provided: sk-secret"}}'))
    with pytest.raises(EmbeddingEndpointError) as refused:
        endpoint(server.base_url, api_key="sk-secret").encode(TEXTS[:1])

    message = str(refused.value)
    assert f"refused the request with HTTP {status}" in message and "/v1/embeddings" in message
    assert "sk-secret" not in message and "[API key]" in message
    assert isinstance(refused.value, EndpointError)  # the app stops a run on either
    assert len(server.requests) == 1


def test_a_text_the_endpoint_refuses_loses_only_its_own_pairs(server):
    too_long = "word " * 600
    server.answer = lambda request: Answer.status_code(413, body=json.dumps({
        "error": "Input validation error: inputs must have less than 512 tokens", "error_type": "Validation"}).encode()
    ) if too_long in request.texts else Answer()
    judge = SemanticJudge(embedder=endpoint(server.base_url, batch_size=8))
    verdicts = judge.batch_judge([context("a document", "a reference"), context(too_long, "a reference"),
                                  context("another document", "a reference")])

    assert [v.problem for v in verdicts] == [None, ENDPOINT_FAILED, None]
    assert verdicts[1].cause == "HTTP status 413" and "less than 512 tokens" in verdicts[1].reason
    assert verdicts[0].score == pytest.approx(float(normalised("a document") @ normalised("a reference")), abs=1e-6)
    # the batch of four texts, then each alone (the refused one once, not retried)
    assert [len(request.texts) for request in server.requests] == [4, 1, 1, 1, 1]
    assert (judge.embed_count.embedded, judge.embed_count.cached) == (3, 0)


def test_a_loopback_address_is_refused_without_the_operators_permission(server):
    embedder = make_embedder("endpoint", endpoint=EmbeddingEndpointConfig(server.base_url, "fake-embed"))
    with pytest.raises(EmbeddingEndpointError, match="loopback address; Verdict calls public addresses only"):
        embedder.encode(TEXTS[:1])
    assert server.requests == []


def _drop_last(vectors):
    return vectors[:-1]


def _widen_second(vectors):
    return [vectors[0], vectors[1] + [1.0]] + vectors[2:]


@pytest.mark.parametrize("answer, problem", [
    (Answer(change=_drop_last), "the indices are not 0 to 2, each once (2 vectors for 3 texts)"),
    (Answer(indexes=lambda n: [0, 1, 1]), "the indices are not 0 to 2, each once"),
    (Answer(indexes=lambda n: [1, 2, 3]), "the indices are not 0 to 2, each once"),
    (Answer(change=_widen_second), "vectors of differing dimensions [8, 9]"),
    (Answer(change=lambda vectors: [[0.0] * 8] + vectors[1:]), "all zeros"),
    (Answer(body=b'{"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1]}, '
                 b'{"index": 2, "embedding": [1]}]}'), "not a list of numbers"),
    (Answer(body=b'[[1, 0], [0, 1], [1, 1]]'), 'not {"data": [{"index", "embedding"}, ...]}'),
    (Answer(body=b"<html>Bad gateway</html>"), "not JSON"),
    (Answer(body=b'{"embeddings": []}'), 'not {"data"'),
])
def test_a_reply_that_does_not_fit_the_texts_is_never_used(server, answer, problem):
    server.script(answer)
    with pytest.raises(EmbeddingRequestFailed, match="unreadable") as failed:
        endpoint(server.base_url, max_retries=0).encode(TEXTS[:3])
    assert problem in str(failed.value) and failed.value.cause == "unreadable reply"


def test_tei_native_replies_with_the_wrong_count_or_shape_are_never_used(server):
    server.script(Answer(change=_drop_last), Answer(body=b'{"data": []}'))
    with pytest.raises(EmbeddingRequestFailed, match="2 vectors for 3 texts"):
        endpoint(server.root + "/embed", max_retries=0).encode(TEXTS[:3])
    with pytest.raises(EmbeddingRequestFailed, match="not a list of vectors, as /embed answers"):
        endpoint(server.root + "/embed", max_retries=0).encode(TEXTS[:3])


def test_a_changed_dimension_between_batches_is_unreadable(server):
    embedder = endpoint(server.base_url, batch_size=2, max_retries=0)
    server.script(Answer(), Answer(change=lambda vectors: [v + [1.0] for v in vectors]))
    with pytest.raises(EmbeddingRequestFailed, match="dimension 9 after ones of 8"):
        embedder.encode(TEXTS[:4])


def test_a_slow_endpoint_is_cut_off_at_the_deadline(server):
    server.script(Answer(delay=3))
    with pytest.raises(EmbeddingRequestFailed, match="deadline of 0.5 s") as failed:
        endpoint(server.base_url, deadline=0.5, max_retries=0).encode(TEXTS[:1])
    assert failed.value.cause == "timeout"


def test_the_semantic_judge_grades_with_the_endpoint_and_says_so(server):
    judge = SemanticJudge(embedder=endpoint(server.base_url, api_key="sk-secret"))
    same, other = judge.batch_judge([context("the same text", "the same text"), context("a document", "a reference")])
    expected = float(normalised("a document") @ normalised("a reference"))

    assert same.score == pytest.approx(1.0, abs=1e-6) and same.grade == 1
    assert other.score == pytest.approx(expected, abs=1e-6)
    described = judge.describe()
    assert described["embedder"] == {"backend": "endpoint", "model": "fake-embed", "max_length": 0,
                                     "base_url": server.base_url, "route": "openai"}
    assert described["model"] == "fake-embed" and "sk-secret" not in repr(described)
    assert judge.embedder.cache_model == f"endpoint:127.0.0.1:{urlsplit(server.base_url).port}/fake-embed"


def test_endpoint_settings_are_checked_and_the_key_is_never_shown():
    config = EmbeddingEndpointConfig("ftp://example.com", "", api_key="sk-secret", batch_size=0, timeout=-1)
    with pytest.raises(JudgeSettingsError) as bad:
        make_embedder("endpoint", endpoint=config)
    for problem in ("base_url: must be an http:// or https:// URL", "model: must be a model name",
                    "batch_size: must be a whole number from 1", "timeout: must be a number of seconds"):
        assert problem in str(bad.value)
    assert "sk-secret" not in repr(config)
    with pytest.raises(JudgeSettingsError, match="no embeddings endpoint is configured"):
        make_embedder("endpoint")
    with pytest.raises(JudgeSettingsError, match="backend: must be one of numpy, sentence-transformers, endpoint"):
        make_embedder("word2vec")


def test_the_judge_refuses_an_embedder_of_another_backend_than_its_setting(server):
    with pytest.raises(JudgeSettingsError, match="set to numpy but was given a endpoint embedder"):
        SemanticJudge({"backend": "numpy"}, embedder=endpoint(server.base_url))
    with pytest.raises(JudgeSettingsError, match="backend: must be one of"):
        SemanticJudge({"backend": "onnx"})


def test_availability_of_each_backend(monkeypatch):
    assert embedders.availability("endpoint").available
    real = embedders.importlib.util.find_spec
    monkeypatch.setattr(embedders.importlib.util, "find_spec",
                        lambda name, *args: None if name == "torch" else real(name, *args))
    found = embedders.availability("sentence-transformers")
    assert not found.available and "torch" in found.reason and "requirements-torch.txt" in found.install
    with pytest.raises(embedders.JudgeUnavailable, match="needs torch"):
        make_embedder("sentence-transformers")
