"""The semantic judge's backends in the app: the embeddings table as its cache (each distinct text embedded once,
a changed document again), the project's default backend and embeddings endpoint (page, API, key rules, what
cannot run here), a judge's backend chosen on the add-judge form, the embedding counts of a run, and the gate
refusing a calibration made under another backend."""

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from api.models import ApiToken, Scope
from judgments.judges import Availability, embedders
from judgments.judges.embedding_cache import EmbeddingKey
from judgments.models import EmbeddingEndpoint, EmbeddingVector, Job, RoundJudge
from judgments.ops import automatic
from judgments.ops.actions import ActionRefused
from judgments.ops.embeddings import DatabaseEmbeddingCache, save_embedding_endpoint
from tests.factory import make_project, run_queued_jobs
from tests.judgments.test_automatic_judges import reference_round

pytestmark = pytest.mark.django_db

KEY = "sk-embed-do-not-show-77c1"
# reference_round: 3 queries x 4 documents, each query with one reference text; the 12 documents' texts and the
# 3 references all differ ("Title of d11\nText of d11" is not the reference "Title of d11 Text of d11").
DISTINCT_TEXTS = 15


class FakeEmbeddings:
    """An OpenAI-compatible ``/v1/embeddings`` server on a loopback port. A text's vector counts its lower-cased
    words hashed into 64 dimensions, so texts with the same words have cosine 1 and "Title of d12 Text of d12"
    is at cosine 0.6 from "Title of d11 Text of d11". `status` other than 200 answers that status instead."""

    def __init__(self, status: int = 200):
        self.status, self.requests = status, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "authorization": self.headers.get("Authorization"), "body": body})
                if fake.status != 200:
                    answer = json.dumps({"error": "Incorrect API key provided"}).encode()
                else:
                    data = [{"object": "embedding", "index": i, "embedding": vector(text)} for i, text in enumerate(body["input"])]
                    answer = json.dumps({"object": "list", "data": data, "model": body["model"],
                                         "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"

    @property
    def inputs(self) -> list[str]:
        return [text for request in self.requests for text in request["body"]["input"]]

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def vector(text: str) -> list[float]:
    counts = [0.0] * 64
    for word in text.lower().split():
        counts[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1
    return counts


def judges_url(round) -> str:
    return f"/p/{round.project.slug}/rounds/{round.uuid}/judges/"


def endpoints_url(people) -> str:
    return reverse("judgments:llm-endpoint", args=[people.project.slug])


def add_semantic(people, round, name="minilm", **fields) -> RoundJudge:
    response = people.client("lead").post(f"{judges_url(round)}new/semantic/", {
        "name": name, "setting_threshold": "0.95", "min_kappa": "0.4", "min_tau": "0.9", **fields})
    assert response.status_code == 302, response.content.decode()[-3000:]
    return RoundJudge.objects.get(name=name)


def run_through_the_page(people, judge) -> Job:
    response = people.client("lead").post(f"{judge.get_absolute_url()}run/", {"pairs": "all", "n": "", "seed": "0"})
    assert response.status_code == 302
    [job] = run_queued_jobs()
    return job


def save_embeddings(people, **fields):
    body = {"embeddings-default_backend": "numpy", "embeddings-base_url": "", "embeddings-model": "",
            "save_embeddings": "", **{f"embeddings-{name}": value for name, value in fields.items()}}
    return people.client("lead").post(endpoints_url(people), body)


# ------------------------------------------------------------------------------------------ the cache


@pytest.mark.parametrize("dim", [384, 3])
def test_the_database_cache_returns_what_it_stored_over_many_chunks_and_never_mixes_models_or_lengths(people, dim):
    cache = DatabaseEmbeddingCache(people.project)
    rng = np.random.default_rng(7)
    keys = [EmbeddingKey("numpy:m", 256, hashlib.sha256(str(i).encode()).hexdigest()) for i in range(2000)]
    vectors = {key: rng.standard_normal(dim).astype(np.float32) for key in keys}
    cache.put_many(vectors)
    cache.put_many({keys[0]: np.zeros(dim, np.float32)})  # stored already: the first vector stays
    assert EmbeddingVector.objects.count() == 2000
    found = cache.get_many(keys + [keys[5]])
    assert found.keys() == set(keys)
    assert all(np.array_equal(found[key], vectors[key]) and found[key].dtype == np.float32 for key in keys)
    assert cache.get_many([key._replace(max_length=512) for key in keys[:3]]) == {}
    assert cache.get_many([key._replace(model="endpoint:tei:8080/m") for key in keys[:3]]) == {}
    EmbeddingVector.objects.filter(text_sha256=keys[1].text_sha256).update(dim=dim + 1)  # a row that is no vector of ours
    assert keys[1] not in cache.get_many(keys[:3]) and keys[2] in cache.get_many(keys[:3])


def test_another_projects_cache_learns_nothing_of_this_ones_texts(people):
    """A shared cache would tell a lead, by a run's "from the cache" count, whether another project embedded a text."""
    ours, theirs = DatabaseEmbeddingCache(people.project), DatabaseEmbeddingCache(make_project(people.lead, "Other"))
    key = EmbeddingKey("numpy:m", 256, hashlib.sha256(b"a guessed document").hexdigest())
    ours.put_many({key: np.ones(3, np.float32)})
    assert theirs.get_many([key]) == {} and key in ours.get_many([key])
    theirs.put_many({key: np.zeros(3, np.float32)})  # their own vector, beside ours
    assert EmbeddingVector.objects.count() == 2 and np.array_equal(ours.get_many([key])[key], np.ones(3, np.float32))
    people.project.delete()
    assert EmbeddingVector.objects.count() == 1  # a deleted project takes its vectors with it


# ------------------------------------------------------------------------------------------ runs and their counts


def test_a_semantic_judge_run_twice_over_the_same_round_embeds_nothing_the_second_time(people):
    round = reference_round(people)
    judge = add_semantic(people, round)
    assert judge.settings["backend"] is None  # the project's default, decided at each run
    first = run_through_the_page(people, judge)
    assert first.state == Job.State.SUCCEEDED, first.error
    assert (first.result["texts_embedded"], first.result["texts_from_the_cache"]) == (DISTINCT_TEXTS, 0)
    assert f"{DISTINCT_TEXTS} texts embedded, 0 from the cache" in first.progress_message
    assert EmbeddingVector.objects.count() == DISTINCT_TEXTS
    grades = dict(judge.grades.values_list("item_id", "score"))
    assert judge.grades.get(item__document__doc_id="d11").provenance["embedder"]["backend"] == "numpy"

    judge.grades.all().delete()  # the grades are gone, the vectors are not: nothing is embedded again
    second = run_through_the_page(people, judge)
    assert (second.result["texts_embedded"], second.result["texts_from_the_cache"]) == (0, DISTINCT_TEXTS)
    assert dict(judge.grades.values_list("item_id", "score")) == grades
    page = people.client("lead").get(judge.get_absolute_url()).content.decode()
    assert f"0 texts embedded, {DISTINCT_TEXTS} from the cache" in page and f"{DISTINCT_TEXTS} texts embedded, 0 from" in page
    assert "embedding with numpy (sentence-transformers/all-MiniLM-L6-v2): no requests, no tokens" in page

    other = add_semantic(people, round, name="looser", setting_threshold="0.5")  # another judge, the same texts
    assert run_through_the_page(people, other).result["texts_embedded"] == 0
    assert EmbeddingVector.objects.count() == DISTINCT_TEXTS


def test_a_changed_document_is_embedded_again(people):
    round = reference_round(people)
    judge = add_semantic(people, round)
    run_through_the_page(people, judge)
    document = round.items.get(document__doc_id="d12").document
    document.fields = {**document.fields, "body": "A body rewritten since the last run"}
    document.save()
    judge.grades.all().delete()
    again = run_through_the_page(people, judge)
    assert (again.result["texts_embedded"], again.result["texts_from_the_cache"]) == (1, DISTINCT_TEXTS - 1)
    assert EmbeddingVector.objects.count() == DISTINCT_TEXTS + 1


def test_the_judge_command_says_how_many_texts_it_embedded(people):
    import io

    from django.core.management import call_command

    round = reference_round(people)
    add_semantic(people, round)
    out = io.StringIO()
    call_command("judge", str(round.uuid), "--judge", "minilm", stdout=out, stderr=io.StringIO())
    assert f"{DISTINCT_TEXTS} texts embedded, 0 from the cache" in out.getvalue()


def test_the_device_setting_reaches_the_embedder(people, settings, monkeypatch):
    asked = []
    real = embedders.make_embedder
    monkeypatch.setattr(embedders, "make_embedder", lambda backend, **kwargs: asked.append(kwargs["device"]) or real(backend, **kwargs))
    settings.SEMANTIC_DEVICE = "cpu"
    round = reference_round(people)
    automatic.run_judge(add_semantic(people, round), automatic.PairChoice.parse("sample:1"))
    assert asked and set(asked) == {"cpu"}


# ------------------------------------------------------------------------------------------ the endpoint backend


@pytest.mark.usefixtures("outbound_loopback")
def test_the_endpoint_backend_embeds_at_the_projects_endpoint_with_its_key_once_per_text(people, monkeypatch):
    monkeypatch.setenv("VERDICT_KEY_TEST_EMBED", KEY)
    round = reference_round(people)
    with FakeEmbeddings() as server:
        saved = save_embeddings(people, default_backend="endpoint", base_url=server.base_url, model="fake-embedder",
                                batch_size="4", api_key_env="VERDICT_KEY_TEST_EMBED")
        assert saved.status_code == 302, saved.content.decode()[-2000:]
        judge = add_semantic(people, round)
        job = run_through_the_page(people, judge)
        assert job.state == Job.State.SUCCEEDED, job.error
        assert job.result["texts_embedded"] == DISTINCT_TEXTS == len(server.inputs) == len(set(server.inputs))
        assert {r["authorization"] for r in server.requests} == {f"Bearer {KEY}"}
        assert {r["path"] for r in server.requests} == {"/v1/embeddings"}
        assert {r["body"]["model"] for r in server.requests} == {"fake-embedder"}
        assert max(len(r["body"]["input"]) for r in server.requests) <= 4
        grades = {g.item.document.doc_id: (g.grade, g.score) for g in judge.grades.select_related("item__document")}
        assert grades["d11"][0] == 3 and grades["d11"][1] == pytest.approx(1.0, abs=1e-6)
        assert grades["d12"] == (0, pytest.approx(0.6, abs=1e-6))
        assert judge.grades.first().provenance["embedder"]["backend"] == "endpoint"
        assert not EmbeddingVector.objects.exclude(model__startswith="endpoint:").exists()

        page = people.client("lead").get(judge.get_absolute_url()).content.decode()
        assert f"embeds at endpoint (fake-embedder at {server.base_url}): one request for each 4 texts" in page

        judge.grades.all().delete()
        again = run_through_the_page(people, judge)
        assert again.result["texts_embedded"] == 0 and len(server.inputs) == DISTINCT_TEXTS
    assert KEY not in people.client("lead").get(endpoints_url(people)).content.decode()


@pytest.mark.usefixtures("outbound_loopback")
def test_an_endpoint_that_refuses_the_key_fails_the_run_saying_so(people):
    round = reference_round(people)
    with FakeEmbeddings(status=401) as server:
        save_embeddings(people, default_backend="endpoint", base_url=server.base_url, model="fake-embedder", api_key=KEY)
        judge = add_semantic(people, round)
        job = run_through_the_page(people, judge)
    assert job.state == Job.State.FAILED and "401" in job.error and KEY not in job.error
    assert not judge.grades.exists() and not EmbeddingVector.objects.exists()


@pytest.mark.usefixtures("outbound_loopback")
def test_a_key_variable_the_operator_does_not_allow_is_refused_at_run_time_too(people):
    """A row written past the form (or before the operator changed the list) never sends that variable anywhere."""
    round = reference_round(people)
    judge = add_semantic(people, round, setting_backend="numpy")
    with FakeEmbeddings() as server:
        EmbeddingEndpoint.objects.create(project=people.project, default_backend="endpoint", base_url=server.base_url,
                                         model="fake-embedder", api_key_env="SECRET_KEY")
        judge.settings = {**judge.settings, "backend": "endpoint"}
        judge.save()
        job = run_through_the_page(people, judge)
    assert job.state == Job.State.FAILED and "SECRET_KEY is not a variable the operator allows" in job.error
    assert server.requests == [] and not judge.grades.exists()
    assert "NOT USABLE: the environment variable SECRET_KEY is not one the operator allows" in people.client("lead").get(
        endpoints_url(people)).content.decode()


# ------------------------------------------------------------------------------------------ pages and API


def test_the_endpoints_page_says_which_backends_cannot_run_here_and_why(people, monkeypatch):
    real = embedders.availability
    monkeypatch.setattr(embedders, "availability", lambda backend: Availability(
        False, "the sentence-transformers backend needs torch", "pip install -r requirements-torch.txt")
        if backend == "sentence-transformers" else real(backend))
    page = people.client("lead").get(endpoints_url(people)).content.decode()
    assert page.count("NOT USABLE") == 2
    assert "the sentence-transformers backend needs torch; install with: pip install -r requirements-torch.txt" in page
    assert "the project has no embeddings endpoint" in page
    assert '<label for="id_embeddings-default_backend">' in page and '<label for="id_base_url">' in page


def test_the_lead_saves_the_embeddings_with_a_key_never_shown_back(people, monkeypatch):
    saved = save_embeddings(people, default_backend="endpoint", base_url="https://emb.example.com/v1",
                            model="text-embedding-3-small", max_length="8191", api_key=KEY)
    assert saved.status_code == 302
    found = EmbeddingEndpoint.objects.get()
    assert (found.default_backend, found.base_url, found.model, found.max_length, found.batch_size) == (
        "endpoint", "https://emb.example.com/v1", "text-embedding-3-small", 8191, 64)
    assert found.api_key() == KEY and KEY not in found.api_key_sealed
    page = people.client("lead").get(endpoints_url(people)).content.decode()
    assert KEY not in page and "API key <strong>set</strong>" in page and "(the project's default)" in page
    assert "NOT USABLE" not in page.split('id="embeddings-title"')[1].split("sentence-transformers")[0]

    save_embeddings(people, default_backend="numpy", base_url="https://emb.example.com/v1", model="m",
                    api_key_env="VERDICT_KEY_NOT_SET_ANYWHERE")
    found.refresh_from_db()
    assert found.api_key() is None and found.default_backend == "numpy"
    page = people.client("lead").get(endpoints_url(people)).content.decode()
    assert "NOT USABLE: the environment variable VERDICT_KEY_NOT_SET_ANYWHERE is not set" in page


@pytest.mark.parametrize("fields, field, message", [
    ({"default_backend": "endpoint"}, "base_url", "The endpoint backend is the default"),
    ({"base_url": "https://emb.example.com/v1"}, "model", "both its base URL and its model"),
    ({"base_url": "http://127.0.0.1:8080/v1", "model": "m"}, "base_url", "127.0.0.1"),
    ({"base_url": "ftp://emb.example.com", "model": "m"}, "base_url", "http:// or https://"),
    ({"base_url": "https://emb.example.com/v1", "model": "m", "api_key_env": "SECRET_KEY"}, "api_key_env",
     "SECRET_KEY is not a variable the operator allows"),
    ({"default_backend": "onnx"}, "default_backend", "Select a valid choice"),
    ({"batch_size": "0"}, "batch_size", "greater than or equal to 1"),
])
def test_the_page_refuses_embeddings_it_could_not_use(people, fields, field, message):
    page = save_embeddings(people, api_key=KEY, **fields)
    text = page.content.decode()
    assert page.status_code == 200 and message in text and KEY not in text
    assert not EmbeddingEndpoint.objects.exists()


def test_only_leads_see_or_change_the_embeddings(people):
    for who, status in (("viewer", 403), ("rater", 403), ("outsider", 404)):
        client = people.client(who)
        assert client.get(endpoints_url(people)).status_code == status
        assert client.post(endpoints_url(people), {"embeddings-default_backend": "numpy", "save_embeddings": ""}).status_code == status
    assert not EmbeddingEndpoint.objects.exists()


def test_the_api_reads_and_sets_the_embeddings_as_the_page_does(people):
    """Who may call it, with which token, is the access matrix's (tests/api/test_access_matrix.py)."""
    url = f"/api/v1/projects/{people.project.slug}/embedding-endpoint"
    _, secret = ApiToken.issue(user=people.lead, project=people.project, name="script", scope=Scope.WRITE)
    lead = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    empty = lead.get(url).json()
    assert (empty["default_backend"], empty["base_url"], empty["key_status"]) == ("numpy", "", "not set")
    assert [b["backend"] for b in empty["backends"]] == list(embedders.BACKENDS)
    body = {"default_backend": "endpoint", "base_url": "https://emb.example.com/v1", "model": "bge", "batch_size": 16,
            "api_key": KEY}
    answer = lead.put(url, json.dumps(body), content_type="application/json")
    assert answer.status_code == 200 and KEY not in answer.content.decode()
    assert answer.json()["key_status"] == "set" and answer.json()["batch_size"] == 16
    assert EmbeddingEndpoint.objects.get().api_key() == KEY
    refused = lead.put(url, json.dumps({**body, "base_url": "http://169.254.169.254/v1"}), content_type="application/json")
    assert refused.status_code == 400 and "base_url" in refused.content.decode()
    assert EmbeddingEndpoint.objects.get().base_url == "https://emb.example.com/v1"


def test_the_add_judge_form_offers_the_backends_and_refuses_one_that_cannot_run_here(people, monkeypatch):
    round = reference_round(people)
    url = f"{judges_url(round)}new/semantic/"
    form = people.client("lead").get(url).content.decode()
    assert 'name="setting_backend"' in form and "The project&#x27;s default (numpy)" in form
    monkeypatch.setattr(embedders, "availability", lambda backend: Availability(
        backend != "sentence-transformers", "the sentence-transformers backend needs torch", "pip install -r requirements-torch.txt"))
    refused = people.client("lead").post(url, {"name": "st", "setting_backend": "sentence-transformers",
                                               "min_kappa": "0.4", "min_tau": "0.9"})
    assert refused.status_code == 200 and "cannot run here" in refused.content.decode()
    assert "pip install -r requirements-torch.txt" in refused.content.decode() and not RoundJudge.objects.exists()
    refused = people.client("lead").post(url, {"name": "ep", "setting_backend": "endpoint", "min_kappa": "0.4", "min_tau": "0.9"})
    assert "the project has no embeddings endpoint" in refused.content.decode() and not RoundJudge.objects.exists()
    assert add_semantic(people, round, name="named", setting_backend="numpy").settings["backend"] == "numpy"


# ------------------------------------------------------------------------------------------ calibration and the gate


def test_the_gate_refuses_a_calibration_made_under_another_backend_than_the_judges_current_one(people):
    round = reference_round(people)
    judge = add_semantic(people, round)
    run_through_the_page(people, judge)
    people.client("lead").post(f"{judge.get_absolute_url()}calibration/compute/")
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    report = people.client("viewer").get(f"{judge.get_absolute_url()}calibration/").content.decode()
    assert "Computed from grades made by <strong>numpy (sentence-transformers/all-MiniLM-L6-v2)</strong>" in report
    with pytest.raises(ActionRefused) as before:
        automatic.check_gate(judge)
    assert "backend" not in str(before.value)  # refused for its evidence only

    save_embedding_endpoint(people.project, default_backend="endpoint", base_url="https://emb.example.com/v1",
                            model="bge-small", max_length=512, batch_size=64)
    with pytest.raises(ActionRefused, match=r"computed from grades made by numpy \(sentence-transformers/all-MiniLM-L6-v2\), "
                                            r"and it now embeds with endpoint \(bge-small at https://emb.example.com/v1\)"):
        automatic.check_gate(judge)
    report = people.client("viewer").get(f"{judge.get_absolute_url()}calibration/").content.decode()
    assert "This report does not stand for the judge now" in report
    page = people.client("viewer").get(judge.get_absolute_url()).content.decode()
    assert "endpoint (bge-small at https://emb.example.com/v1)" in page and "numpy (sentence-transformers/all-MiniLM-L6-v2)" in page


def test_an_evaluation_refuses_to_fill_with_a_semantic_judge_whose_backend_changed_since_its_calibration(people):
    """The partly graded round of the judge-fill tests, with a semantic judge that agrees with every label: its gate
    passes under numpy, and the evaluation page refuses it, in words, once the project's default backend changed."""
    from evaluation.evaluations import create_evaluation, run_evaluation
    from evaluation.models import Evaluation
    from judgments.models import Adjudication
    from tests.judgments.test_judge_calibration import judged_round

    round, _overlap = judged_round(people, ungraded=("q3",))
    for item in round.items.filter(document__doc_id__in=["d12", "d22"]):
        Adjudication.objects.create(item=item, grade=0, lead=people.lead)
    judge = automatic.add_judge(round, name="minilm", kind="semantic", settings={"threshold": 0.95}, min_pairs=8, min_runs=2)
    automatic.run_judge(judge)
    automatic.store_calibration(judge, automatic.calibrate(judge, resamples=50, system_resamples=100))
    runs = list(round.pool.runs.order_by("name"))
    filled = run_evaluation(create_evaluation(round, runs, measures=["P@1"], queue=False, resamples=100, fill_judge=judge))
    assert filled.results["fill"]["judge"] == "minilm" and filled.results["fill"]["labels"] == 4

    save_embedding_endpoint(people.project, default_backend="endpoint", base_url="https://emb.example.com/v1",
                            model="bge-small", max_length=512, batch_size=64)
    response = people.client("lead").post(f"/p/{round.project.slug}/evaluations/new/", {
        "round": round.uuid, "runs": [run.uuid for run in runs], "measures": "P@1", "relevance_level": 1, "fill_judge": judge.uuid})
    page = response.content.decode().replace("&#x27;", "'")
    assert response.status_code == 200 and "it now embeds with endpoint (bge-small at https://emb.example.com/v1)" in page
    assert Evaluation.objects.count() == 1
