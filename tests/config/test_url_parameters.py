"""Hostile query parameters: every page of the judgments and evaluation apps that answers GET, for a lead,
a viewer and a rater, with hostile values in every parameter the page reads (and in some it does not),
never answers 500. A bad value is a 400 that names the parameter. POST forms get the same values."""

import io
import re
import uuid
from contextlib import contextmanager
from types import SimpleNamespace
from urllib.parse import urlencode

import pytest
from django import forms
from django.core.exceptions import BadRequest
from django.core.management import call_command
from django.http import QueryDict
from django.db import transaction
from django.test import Client, override_settings
from django.urls import URLResolver, get_resolver, reverse
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import api.forms
import evaluation.forms
import judgments.forms
from api.models import ApiToken
from evaluation.forms import AnswerComparisonParams, AnswerResultsParams, ComparisonParams, RankedListParams, ResultsParams
from evaluation.judge_estimates import create_judge_estimate, run_judge_estimate
from evaluation.judge_only_evaluations import create_judge_only_evaluation, run_judge_only_evaluation
from judgments.demo import DEMO_PROJECT, ROUND
from judgments.forms import GradeParams, RunBrowseParams, SearchParams, query_params
from judgments.forms import SamplingForm
from judgments.lib.querylog import ColumnMapping
from judgments.models import Adjudication, Job, Project, Role
from judgments.ops.actions import invite_member
from judgments.ops.imports import stash_upload
from judgments.ops.log_sampling import import_query_log
from judgments.ops.versions import publish
from judgments.ops.webhooks import add_webhook
from tests.evaluation.test_judge_estimates import grade_sample, make_planned_round, overlap_judge_on_every_pair
from tests.factory import add_member, make_graded_answer_round, make_user, upload

HOSTILE = ["x", "²", "-1", "0", "1e9", "99999999999999999999", "", "\x00", "a" * 5000, "Zürich ☃ 𝔘 مرحبا", "1.5", "nan",
           "2026-13-45", "<script>alert(1)</script>"]

# What each page reads from its query string. The test also watches which keys the views and templates
# really look up, so that a page reading a parameter not listed here fails it.
PARAMS = {
    "judgments:query-set": ["q", "page"],
    "judgments:corpus": ["q", "page"],
    "judgments:runs": ["query_set"],
    "judgments:answer-runs": ["query_set"],
    "judgments:answer-run": ["query_set", "page"],
    "judgments:pool-create": ["query_set"],
    "judgments:run": ["query", "k"],
    "judgments:pool": ["page"],
    "judgments:round": ["after", "before"],
    "judgments:round-adjudication": ["after"],
    "judgments:round-flags": ["after", "later_after", "later_rater"],
    "judgments:round-adjudicate": ["after"],
    "judgments:grade": ["judged"],
    "judgments:judge": ["page"],
    "judgments:query-log": ["preview", *SamplingForm.base_fields],
    "judgments:round-export": ["format", "consensus", "threshold", "metric", "k", "index", "fields", "source", "judge"],
    "evaluation:evaluation": ["measure", "tier", "segment", "sort", "page"],
    "evaluation:comparison": ["measure", "run"],
    "evaluation:ranked-list": ["run", "k"],
    "evaluation:leaderboard": ["round", "measure", "labels"],
    "evaluation:evaluation-create": ["round"],
    "evaluation:answer-evaluation": ["measure", "tier", "segment", "sort", "run", "page"],
    "evaluation:answer-comparison": ["measure", "run"],
    "evaluation:answer-leaderboard": ["query_set", "measure"],
    "judgments:round-answer-metrics": [],
    "judgments:health": [],
}
UNREAD = ["zz", "page"]  # parameters no page (or not every page) reads
NASTIEST = ["x", "²", "\x00", "a" * 5000, "99999999999999999999"]


@pytest.fixture(scope="module")
def demo_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """Built once for the module inside a transaction rolled back at its end; each test runs in a savepoint."""
    folder = tmp_path_factory.mktemp("world")
    with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=folder / "media"), transaction.atomic():
        yield {**build_world(folder), "media": folder / "media"}
        transaction.set_rollback(True)


@pytest.fixture
def world(demo_world, db, settings):
    settings.MEDIA_ROOT = demo_world["media"]
    return demo_world


def build_world(tmp_path) -> dict:
    """The demo project (`make run` loads the same), a viewer, a job, a stashed log upload and a round item."""
    call_command("load_demo", stdout=io.StringIO())
    project = Project.objects.get(slug=DEMO_PROJECT["slug"])
    viewer = make_user("vera")
    add_member(project, viewer, Role.VIEWER)
    round = project.rounds.get(name=ROUND)
    evaluation = project.evaluations.get()
    answer_evaluation = project.answer_evaluations.get()
    job = Job.objects.create(kind="selfcheck", project=project, owner=project.created_by, state=Job.State.FAILED)
    token = stash_upload(project, upload("log.csv", b"query,timestamp\ntent,2026-01-01\n")).split("/")[-2]
    item = round.items.select_related("query", "document").filter(judgments__isnull=False).first()
    # A small log of its own: the demo's 60,000 rows would make each of the hundreds of previews slow.
    log_file = tmp_path / "log.csv"
    log_file.write_text("query,timestamp,language\n" + "".join(
        f"query {i % 40},2026-10-{1 + i % 28:02d},{'en' if i % 3 else 'de'}\n" for i in range(400)))
    query_log = import_query_log(project, log_file, "log.csv", name="Small log",
                                 mapping=ColumnMapping(query="query", time="timestamp", segments=("language",)))
    runs = evaluation.ordered_runs()
    publish(round, note="first")
    relabelled = round.items.filter(judgments__grade=0).distinct().first()
    Adjudication.objects.create(item=relabelled, grade=3, note="Exactly what was asked", lead=project.created_by)
    version = publish(round, note="second")  # a version with a previous one and a changed label, so that its changes show
    invitation, _mailed = invite_member(project, email="new.rater@example.com", role=Role.RATER, invited_by=project.created_by,
                                        absolute_url=lambda path: f"http://testserver{path}")
    kwargs = {
        "slug": project.slug, "member": project.memberships.get(user=viewer).uuid, "job_uuid": job.uuid,
        "number": project.guideline_versions.first().number, "set_uuid": project.query_sets.first().uuid,
        "log_uuid": query_log.uuid, "token": token, "query_id": item.query.query_id, "doc_id": item.document.doc_id,
        "run_uuid": runs[0].uuid, "pool_uuid": round.pool.uuid, "round_uuid": round.uuid, "item_uuid": item.uuid,
        "evaluation_uuid": evaluation.uuid, "fmt": "csv", "what": "aggregate", "invitation_uuid": invitation.uuid,
        "judge_uuid": round.judges.get().uuid, "kind": "token_overlap", "trigger": "agreement",
        "answer_run_uuid": project.answer_runs.first().uuid, "answer_evaluation_uuid": answer_evaluation.uuid,
        "version_uuid": version.uuid,
    }
    # What a page's parameters are set to when another one is hostile, so that forms are bound.
    valid = {
        "judgments:run": {"query": item.query.query_id, "k": "10"},
        "judgments:query-log": {"preview": "1", **{k: str(v) for k, v in SamplingForm.initial_data().items()}, "seed": "3"},
        "judgments:round-export": {"format": "qrels", "k": "10"},
        "evaluation:evaluation": {"measure": "nDCG@10", "sort": runs[0].name},
        "evaluation:comparison": {"measure": "nDCG@10", "run": runs[1].name},
        "evaluation:ranked-list": {"run": str(runs[1].uuid), "k": "5"},
        "evaluation:leaderboard": {"round": str(round.uuid), "measure": "AP"},
        "evaluation:answer-evaluation": {"measure": "f1", "sort": "assistant-large", "run": "assistant-large"},
        "evaluation:answer-comparison": {"measure": "em", "run": "assistant-large"},
        "evaluation:answer-leaderboard": {"query_set": str(answer_evaluation.query_set.uuid), "measure": "acc"},
        "judgments:answer-run": {"query_set": str(answer_evaluation.query_set.uuid)},
    }
    users = {"lead": project.created_by, "viewer": viewer, "rater": round.raters.order_by("username").first()}
    # Pages of answer rounds only (the demo's round grades documents): their own round.
    answer_round = make_graded_answer_round(
        project, project.created_by, list(round.raters.order_by("username")[:2]),
        {"world-good": {"a1": "Paris is the capital", "a2": "In 1969"}, "world-poor": {"a1": "London", "a2": "Never"}},
        references={"a1": ["Paris"], "a2": ["1969"]},
        grades={("world-good", "a1"): [2, 2], ("world-good", "a2"): [2, 1], ("world-poor", "a1"): [0, 0], ("world-poor", "a2"): [0, 1]},
        name="World answer round")
    kwargs_of = {name: {"round_uuid": answer_round.uuid} for name in ("judgments:round-answer-metrics", "judgments:round-answer-metrics-download")}
    judge_only = create_judge_only_evaluation(round.pool.query_set, runs, judge_settings={"min_tokens": 2}, ks=(1, 10), queue=False)
    run_judge_only_evaluation(judge_only)
    kwargs_of.update({f"evaluation:judge-only-{name}": {"evaluation_uuid": judge_only.uuid, "what": "scores"}
                      for name in ("evaluation", "calibrate", "download")})
    planned, planned_runs = make_planned_round(project, project.created_by, [users["rater"]], name="Planned")
    grade_sample(planned, users["rater"])
    estimate = run_judge_estimate(create_judge_estimate(planned, overlap_judge_on_every_pair(planned), planned_runs, queue=False))
    kwargs["estimate_uuid"] = estimate.uuid
    kwargs_of["evaluation:judge-estimate-download"] = {"what": "estimate", "fmt": "json"}
    kwargs["token_uuid"] = ApiToken.issue(user=project.created_by, project=project, name="CI", scope="read")[0].uuid
    kwargs_of["docs:page"] = {"name": "leads/judges/"}  # a page of the repository's docs/ (config/docs.py)
    kwargs["webhook_uuid"] = add_webhook(project, "https://hooks.example.com/verdict", user=project.created_by)[0].uuid
    return {"kwargs": kwargs, "valid": valid, "users": users, "kwargs_of": kwargs_of}


def app_patterns():
    """(name, pattern) of every URL of the apps' pages."""
    for top in get_resolver().url_patterns:
        if isinstance(top, URLResolver) and top.namespace in ("judgments", "evaluation", "tokens"):
            for pattern in top.url_patterns:
                yield f"{top.namespace}:{pattern.name}", pattern


def url_of(name: str, pattern, kwargs: dict) -> str:
    unknown = set(pattern.pattern.converters) - set(kwargs)
    assert not unknown, f"{name}: the fuzz test has no value for {unknown}: add one to the world fixture"
    return reverse(name, kwargs={key: kwargs[key] for key in pattern.pattern.converters})


def clients(users: dict) -> dict[str, Client]:
    made = {}
    for who, user in users.items():
        made[who] = Client(raise_request_exception=False)
        made[who].force_login(user)
    return made


@contextmanager
def watching_query_keys():
    """Record every key looked up in a QueryDict (request.GET and the forms bound to it)."""
    seen = set()
    original = {name: getattr(QueryDict, name) for name in ("__getitem__", "get", "getlist", "__contains__")}

    def recorder(name):
        def lookup(self, key, *args, **kwargs):
            seen.add(key)
            return original[name](self, key, *args, **kwargs)
        return lookup

    for name in original:
        setattr(QueryDict, name, recorder(name))
    try:
        yield seen
    finally:
        for name, method in original.items():
            setattr(QueryDict, name, method)


def hostile_queries(name: str, valid: dict, thorough: bool) -> list[list[tuple[str, str]]]:
    """Thorough (for leads, who see every page): each parameter the page reads set to each hostile value in
    turn, the others valid. Always: every parameter hostile at once together with parameters the page does not
    read, and each parameter repeated with clashing values."""
    base, params = valid.get(name, {}), PARAMS.get(name, [])
    queries = []
    for value in HOSTILE if thorough else NASTIEST:
        if thorough:
            queries += [[(k, v) for k, v in base.items() if k != param] + [(param, value)] for param in params]
        queries.append([(param, value) for param in params + UNREAD])
    for param in params:
        queries.append(list(base.items()) + [(param, "²"), (param, base.get(param, "1"))])
        queries.append([(param, value) for value in NASTIEST])
    return queries


def answer(client: Client, url: str) -> int:
    """The status of a GET, a streamed body read to its end: a download failing halfway is a failure too."""
    response = client.get(url)
    if response.streaming:
        try:
            b"".join(response.streaming_content)
        except Exception:
            return 500
    return response.status_code


def test_no_page_answers_500_to_hostile_query_parameters(world):
    """Each page answers every hostile query string with a 2xx, 3xx or 4xx for each role."""
    by_role = clients(world["users"])
    failures = []
    for name, pattern in app_patterns():
        url = url_of(name, pattern, {**world["kwargs"], **world["kwargs_of"].get(name, {})})
        for who, client in by_role.items():
            for query in hostile_queries(name, world["valid"], thorough=who == "lead"):
                status = answer(client, url + "?" + urlencode(query))
                if status >= 500:
                    failures.append(f"{who} GET {name}?{urlencode(query)[:200]} -> {status}")
    assert not failures, f"{len(failures)} answers of 500 or more:\n" + "\n".join(failures[:40])


def test_no_page_answers_500_to_hostile_text_in_its_path(world):
    """Query ids, document ids and download names come from the path: the same values there."""
    client = clients(world["users"])["lead"]
    failures = []
    for name, pattern in app_patterns():
        texts = [key for key, converter in pattern.pattern.converters.items() if type(converter).__name__ in ("StringConverter", "PathConverter")]
        for key in texts:
            for value in HOSTILE + ["../../etc/passwd", "a/b", "%2F"]:
                if not value or ("/" in value and type(pattern.pattern.converters[key]).__name__ == "StringConverter"):
                    continue
                url = url_of(name, pattern, {**world["kwargs"], key: value})
                status = answer(client, url)
                if status >= 500:
                    failures.append(f"GET {url[:200]} -> {status}")
    assert not failures, f"{len(failures)} answers of 500 or more:\n" + "\n".join(failures[:40])


def posted_fields() -> set[str]:
    """The name of every field of every form of both apps, the grading screen's and the display template's."""
    names = {"grade", "note", "unrateable", "unrateable_note", "later", "bulk", "form-TOTAL_FORMS", "form-INITIAL_FORMS",
             "form-0-id", "form-0-field", "form-0-label", "form-0-render", "form-0-order", "form-0-DELETE"}
    for module in (judgments.forms, evaluation.forms, api.forms):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, forms.BaseForm) and value.__module__ == module.__name__:
                names |= set(value.base_fields)
    return names - {"slug", "file"}  # a new slug would move the project away from every other URL here


def test_no_form_answers_500_to_hostile_values_in_its_fields(world):
    """Every URL that takes a POST, for a lead and a rater, with every form field hostile at once. Pages that
    change state without a form (open, close, remove) go last."""
    by_role = {who: client for who, client in clients(world["users"]).items() if who != "viewer"}
    fields = posted_fields()
    failures = []
    ordered = sorted(app_patterns(), key=lambda pair: any(word in pair[0] for word in ("open", "close", "remove", "delete", "successor")))
    for name, pattern in ordered:
        url = url_of(name, pattern, {**world["kwargs"], **world["kwargs_of"].get(name, {})})
        for who, client in by_role.items():
            for value in NASTIEST + ["", "0", "-1", "1"]:
                response = client.post(url, {field: value for field in fields})
                if response.status_code >= 500:
                    failures.append(f"{who} POST {name} with {value[:20]!r} -> {response.status_code}")
    assert not failures, f"{len(failures)} answers of 500 or more:\n" + "\n".join(failures[:40])


def test_every_query_parameter_a_page_reads_is_fuzzed(world):
    """The list above is complete: the keys each page looks up, with valid parameters, are in it."""
    client = clients(world["users"])["lead"]
    unlisted = {}
    for name, pattern in app_patterns():
        url = url_of(name, pattern, {**world["kwargs"], **world["kwargs_of"].get(name, {})})
        with watching_query_keys() as seen:
            client.get(url + "?" + urlencode(world["valid"].get(name, {})))
        extra = seen - set(PARAMS.get(name, [])) - {"csrfmiddlewaretoken"}
        if extra:
            unlisted[name] = sorted(extra)
    assert not unlisted, f"pages read query parameters the fuzz test does not know: {unlisted}"


PARAMETER_NAMES = sorted({name for names in PARAMS.values() for name in names})


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PARAMETER_NAMES), st.text(max_size=30)), max_size=8))
def test_the_parameter_forms_clean_or_refuse_any_text(pairs):
    """Beyond the fixed hostile values: any text, any repetition. A form gives clean values or a BadRequest."""
    data = QueryDict(mutable=True)
    for key, value in pairs:
        data.appendlist(key, value)
    finished = SimpleNamespace(measures=["nDCG@10", "AP"], results={"runs": [{"run": "A"}, {"run": "B"}]})
    runs = [SimpleNamespace(uuid=uuid.UUID(int=n), name=f"run {n}") for n in (1, 2)]
    for form in (SearchParams(data), RunBrowseParams(data), GradeParams(data), ResultsParams(data, evaluation=finished),
                 ComparisonParams(data, evaluation=finished), RankedListParams(data, runs=runs),
                 AnswerResultsParams(data, evaluation=finished), AnswerComparisonParams(data, evaluation=finished)):
        try:
            cleaned = query_params(form)
        except BadRequest as refusal:
            assert str(refusal).split(":")[0] in form.fields
        else:
            assert set(cleaned) == set(form.fields)


def test_a_bad_parameter_is_a_400_naming_it(world):
    client = clients(world["users"])["lead"]
    kwargs = world["kwargs"]
    for name, query, named in [
        ("judgments:runs", "query_set=x", "query_set"),
        ("judgments:run", f"query={kwargs['query_id']}&k=%C2%B2", "k"),
        ("evaluation:ranked-list", "k=%C2%B2", "k"),
        ("evaluation:evaluation", "measure=nope", "measure"),
        ("evaluation:answer-evaluation", "measure=nope", "measure"),
        ("evaluation:answer-evaluation", "run=nope", "run"),
        ("judgments:answer-runs", "query_set=x", "query_set"),
    ]:
        pattern = dict(app_patterns())[name]
        response = client.get(url_of(name, pattern, kwargs) + "?" + query)
        assert response.status_code == 400, (name, query)
        assert named in response.content.decode(), (name, query)


def test_a_page_number_is_a_whole_number_from_one_and_one_past_the_last_shows_the_last(world):
    """Every page that reads ?page=: anything else is a 400 naming it; a number past the last page, however large,
    shows the last page (a link kept while rows were deleted), never a query the database cannot run."""
    client = clients(world["users"])["lead"]
    paged = [(name, pattern) for name, pattern in app_patterns() if "page" in PARAMS.get(name, [])]
    assert len(paged) >= 7
    wrong = []
    for name, pattern in paged:
        url, valid = url_of(name, pattern, world["kwargs"]), world["valid"].get(name, {})
        for value in ["0", "-1", "x", "1.5", "1e9", "²", "\x00", "9" * 5000]:
            response = client.get(url, {**valid, "page": value})
            if response.status_code != 400 or "page: " not in response.content.decode():
                wrong.append(f"{name}?page={value[:20]!r} -> {response.status_code}")
        for value in ["", "1", "2", "9223372036854775808", "99999999999999999999"]:
            if (status := client.get(url, {**valid, "page": value}).status_code) != 200:
                wrong.append(f"{name}?page={value!r} -> {status}")
    assert not wrong, "\n".join(wrong)


def test_every_page_title_is_plain_text(world):
    """A page's <title> holds text only: markup there (a block left open in a template) shows up in the tab."""
    client = clients(world["users"])["lead"]
    broken = []
    for name, pattern in app_patterns():
        url = url_of(name, pattern, {**world["kwargs"], **world["kwargs_of"].get(name, {})})
        response = client.get(url + "?" + urlencode(world["valid"].get(name, {})))
        if response.streaming or not response["Content-Type"].startswith("text/html"):
            continue
        found = re.search(r"<title>(.*?)</title>", response.content.decode(), re.S)
        if found and "<" in found.group(1):
            broken.append(f"{name}: {found.group(1)[:80]!r}")
    assert not broken, "titles with markup:\n" + "\n".join(broken)
