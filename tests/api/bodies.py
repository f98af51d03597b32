"""Request bodies for the access matrix's write rows, and the objects the evaluation rows' paths name.

A row's `body(world)` runs before its path is filled, so `evaluation(world)` can add the {evaluation} and {job}
the paths need to the world the first time a caller asks (one finished evaluation of the world's round over two
runs, made through the app's own create_evaluation and job).
"""

import json

from django.core.files.uploadedfile import SimpleUploadedFile

from api.models import ApiToken
from evaluation.evaluations import create_evaluation
from judgments.models import Job
from judgments.ops.imports import import_run
from judgments.ops.webhooks import add_webhook
from tests.factory import answers_file, run_queued_jobs, trec_run

RUN = {"q1": ["d11", "d14", "d12"], "q2": ["d21", "d22"]}


def multipart(filename: str, data: bytes, **fields) -> dict:
    return {"data": {"file": SimpleUploadedFile(filename, data), **fields}}


def run_upload(world) -> dict:
    return multipart("run.txt", trec_run(RUN, "api"), name="Uploaded through the API")


def answer_run_upload(world) -> dict:
    return multipart("answers.jsonl", answers_file({"q1": "Another answer"}), name="Uploaded answers")


def query_set_upload(world) -> dict:
    return multipart("queries.csv", b"query_id,query\nn1,new query\n", name="Uploaded queries")


def corpus_upload(world) -> dict:
    return multipart("docs.jsonl", b'{"doc_id": "new-doc", "title": "A new document"}\n')


def references_upload(world) -> dict:
    return multipart("references.jsonl", b'{"query_id": "q1", "answers": ["A reference"]}\n')


def pool_build(world) -> dict:
    body = {"name": "Pool built through the API", "query_set": str(world.objects["query_set"]), "runs": [str(world.objects["run"])], "depth": 5}
    return {"data": json.dumps(body), "content_type": "application/json"}


def round_settings(world) -> dict:
    return {"data": json.dumps({"judging_order": "mmns"}), "content_type": "application/json"}


def round_create(world) -> dict:
    body = {"name": "Created through the API", "pool": str(world.objects["pool"]), "raters": ["ravi"], "overlap_percent": 0}
    return {"data": json.dumps(body), "content_type": "application/json"}


def judgments_upload(world) -> dict:
    return multipart("fix.qrels", b"q2 0 d21 2\n", rater="ravi")


def evaluation_start(world) -> dict:
    body = {"round": str(world.objects["round"]), "runs": [str(world.objects["run"])], "measures": ["nDCG@10", "AP"]}
    return {"data": json.dumps(body), "content_type": "application/json"}


def llm_endpoint(world) -> dict:
    body = {"base_url": "https://api.example.com/v1", "model": "gpt-x", "api_key": "sk-through-the-api"}
    return {"data": json.dumps(body), "content_type": "application/json"}


def embedding_endpoint(world) -> dict:
    body = {"default_backend": "endpoint", "base_url": "https://api.example.com/v1", "model": "text-embedding-3-small",
            "api_key": "sk-through-the-api"}
    return {"data": json.dumps(body), "content_type": "application/json"}


def evaluation(world) -> dict:
    """Puts {evaluation} (finished, two runs) and {job} (its job) in the world; sends no body."""
    if "evaluation" not in world.objects:
        project = world.people.project
        round = project.rounds.get(uuid=world.objects["round"])
        other, _ = import_run(project, trec_run({"q1": ["d12", "d11", "d13"]}, "other"), "other.run", name="Other run", system="other")
        made = create_evaluation(round, [project.runs.get(uuid=world.objects["run"]), other], measures=["nDCG@10", "AP"],
                                 user=world.people.lead, resamples=200)
        run_queued_jobs()
        job = Job.objects.get(kind="evaluate_runs", params__evaluation=str(made.uuid))
        world.objects.update(evaluation=made.uuid, job=job.uuid)
    return {}


def _with_references(world):
    from judgments.models import QueryCollection
    from judgments.ops.answers import import_references

    query_set = QueryCollection.objects.get(uuid=world.objects["query_set"])
    import_references(query_set, b'{"query_id": "q1", "answers": ["d11 is the answer"]}\n', replace=True, original_name="refs.jsonl")
    return query_set


def judge_only_start(world) -> dict:
    _with_references(world)
    body = {"query_set": str(world.objects["query_set"]), "runs": [str(world.objects["run"])], "ks": [1, 5]}
    return {"data": json.dumps(body), "content_type": "application/json"}


def judge_only(world) -> dict:
    """Puts {judge_only} (a finished judge-only evaluation of the world's run) in the world; sends no body."""
    if "judge_only" not in world.objects:
        from evaluation.judge_only_evaluations import create_judge_only_evaluation, run_judge_only_evaluation

        project = world.people.project
        made = create_judge_only_evaluation(_with_references(world), [project.runs.get(uuid=world.objects["run"])], ks=(1, 5), queue=False)
        world.objects["judge_only"] = run_judge_only_evaluation(made).uuid
    return {}


def _planned(world) -> dict:
    """A round planned with a random sample for raters, the sample graded but one pair, an overlap judge on every pair."""
    if "planned" not in world.objects:
        from tests.evaluation.test_judge_estimates import grade_sample, make_planned_round, overlap_judge_on_every_pair

        people = world.people
        round, runs = make_planned_round(people.project, people.lead, [people.rater], name="Planned through the API")
        grade_sample(round, people.rater)
        judge = overlap_judge_on_every_pair(round)
        world.objects["planned"] = {"round": str(round.uuid), "judge": str(judge.uuid), "runs": [str(run.uuid) for run in runs]}
    return world.objects["planned"]


def judge_estimate_start(world) -> dict:
    body = {**_planned(world), "measures": ["nDCG@3", "AP"]}
    return {"data": json.dumps(body), "content_type": "application/json"}


def judge_estimate(world) -> dict:
    """Puts {judge_estimate} (a finished estimate with a judge of the planned round's three runs) in the world; sends no body."""
    if "judge_estimate" not in world.objects:
        from evaluation.judge_estimates import create_judge_estimate, run_judge_estimate
        from judgments.models import RoundJudge

        planned = _planned(world)
        judge = RoundJudge.objects.select_related("round").get(uuid=planned["judge"])
        runs = [world.people.project.runs.get(uuid=uuid) for uuid in planned["runs"]]
        world.objects["judge_estimate"] = run_judge_estimate(create_judge_estimate(judge.round, judge, runs, queue=False)).uuid
    return {}


def _draft_round(world):
    """Puts {draft_round} (a draft round of three queries, not yet planned) in the world."""
    if "draft_round" not in world.objects:
        from tests.factory import make_round

        people = world.people
        world.objects["draft_round"] = make_round(people.project, people.lead, [people.rater], {f"p{q}": [f"pd{q}"] for q in range(3)},
                                                  open=False, name="Draft to plan").uuid
    return world.people.project.rounds.get(uuid=world.objects["draft_round"])


def draft(world) -> dict:
    """Puts {draft_round} in the world; sends no body."""
    _draft_round(world)
    return {}


def unjudged_query(world) -> dict:
    """The pool run's unjudged top 10 in {evaluation} (the world's round grades only q1)."""
    evaluation(world)
    return {"data": {"run": str(world.objects["run"]), "k": 10}}


def unjudged_send(world) -> dict:
    evaluation(world)
    return {"data": json.dumps({"run": str(world.objects["run"]), "k": 10}), "content_type": "application/json"}


def plan(world) -> dict:
    _draft_round(world)
    return {"data": json.dumps({"size": 2, "seed": 1}), "content_type": "application/json"}


def planned(world) -> dict:
    """A plan on {draft_round} for each caller to remove; sends no body."""
    from judgments.ops.planning import plan_round

    plan_round(_draft_round(world), size=2, by_tier=False, seed=1)
    return {}


def retention(world) -> dict:
    return {"data": json.dumps({"gate_run_days": 30}), "content_type": "application/json"}


def spare_run(world) -> dict:
    """Adds {spare_run} (a run nothing uses, so that deleting it succeeds) to the world."""
    if "spare_run" not in world.objects:
        run, _ = import_run(world.people.project, trec_run({"q1": ["d11"]}, "spare"), "spare.run", name="Spare run", system="spare")
        world.objects["spare_run"] = run.uuid
    return {}


def webhook(world) -> dict:
    """A public address given as an IP: accepted without a DNS lookup (tests reach no network)."""
    return {"data": json.dumps({"url": "https://93.184.215.14/hook"}), "content_type": "application/json"}


def webhook_made(world) -> dict:
    """Adds {webhook} to the world; each lead caller's DELETE gets its own (a second DELETE of one is a 404)."""
    world.objects["webhook"] = add_webhook(world.people.project, "https://93.184.215.14/hook", user=None)[0].uuid
    return {}


def project_token(world) -> dict:
    return {"data": json.dumps({"name": "Made through the API", "scope": "read"}), "content_type": "application/json"}


def project_token_made(world) -> dict:
    """Adds {project_token} (a project token to revoke) to the world; revoking twice is no error."""
    if "project_token" not in world.objects:
        token, _secret = ApiToken.issue(user=None, project=world.people.project, name="to revoke", scope="read")
        world.objects["project_token"] = token.uuid
    return {}
