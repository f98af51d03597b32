"""A project's health: measure every staleness trigger, record the check, notify when a trigger starts firing.

The states come from `judgments.lib.staleness` (pure); this module reads the values from the database and the
stored files. `check_project` is what the command, the scheduled task and the page's "check now" call; the
notifications it decides on are sent by a worker (`tasks.notify_health`), never inside a web request: a
webhook URL is a lead's, and its server may be slow or silent.
"""

import hashlib
import hmac
import http.client
import json
import logging
import smtplib
import time
from datetime import timedelta

import pandas as pd
from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from evaluation.models import Evaluation

from ..core.queue import task
from ..lib import outbound, sampling, staleness
from ..models import (AgreementReport, HealthCheck, HealthSettings, Judgment, Membership, Project, QueryLog, Role, Round,
                      StoredRun, TriggerState)
from . import log_sampling, reports, webhooks

log = logging.getLogger(__name__)
WEBHOOK_TRIES = 4
WEBHOOK_BACKOFF = 1.0  # seconds before the second try; doubled each time


def health_settings(project: Project) -> HealthSettings:
    found, _ = HealthSettings.objects.get_or_create(project=project)
    return found


# ------------------------------------------------------------------------------------------ measuring


def measure_new_systems(project: Project, limits: staleness.Thresholds) -> staleness.Trigger:
    """Each stored run's unjudged shares from the finished evaluation it was last evaluated in, on whichever round
    (or published version) that was: a new round opened since does not hide what the runs' last scores rest on.
    Evaluations a judge filled are left out: the judge labelled what the raters left unjudged, so their shares are 0."""
    from evaluation.models import EvaluatedRun

    latest: dict[str, int] = {}  # run uuid: the evaluation it was last evaluated in
    for run_uuid, evaluation_id in (EvaluatedRun.objects.filter(run__project=project, evaluation__state=Evaluation.State.DONE,
                                                                  evaluation__fill_judge__isnull=True)
                                    .order_by("run_id", "-evaluation__created_at", "-evaluation_id")
                                    .values_list("run__uuid", "evaluation_id")):
        latest.setdefault(str(run_uuid), evaluation_id)
    evaluations = (Evaluation.objects.filter(pk__in=set(latest.values())).select_related("round", "list_version")
                   .only("uuid", "results", "round__name", "round__uuid", "list_version__number"))
    shares = []
    for evaluation in evaluations:
        where = evaluation.round.name + (f" v{evaluation.list_version.number}" if evaluation.list_version else "")
        for row in evaluation.results.get("runs", []):
            if latest.get(row.get("run_uuid")) != evaluation.pk:
                continue  # a run evaluated again later: its newer evaluation counts
            for cutoff in limits.cutoffs:
                share = (row.get("unjudged", {}).get(str(cutoff)) or {}).get("share")
                if share is not None and share == share:
                    shares.append({"run": row["run"], "run_uuid": row["run_uuid"], "cutoff": cutoff, "share": share,
                                   "round": where, "round_uuid": str(evaluation.round.uuid), "evaluation_uuid": str(evaluation.uuid)})
    runs = list(StoredRun.objects.filter(project=project).values_list("name", "uuid"))
    unmeasured = [{"run": name, "run_uuid": str(uuid)} for name, uuid in runs if str(uuid) not in latest]
    trigger = staleness.new_systems(shares, [row["run"] for row in unmeasured], limits, runs=len(runs))
    return trigger | _extra(unmeasured_runs=unmeasured, evaluated=_last_evaluated(shares))


def _last_evaluated(shares: list[dict]) -> list[dict]:
    """One row per run: where it was last evaluated and its unjudged share at each cutoff, largest share first."""
    by_run: dict[str, dict] = {}
    for row in shares:
        found = by_run.setdefault(row["run_uuid"], {"run": row["run"], "round": row["round"], "evaluation_uuid": row["evaluation_uuid"],
                                                     "shares": {}})
        found["shares"][str(row["cutoff"])] = row["share"]
    return sorted(by_run.values(), key=lambda row: (-max(row["shares"].values()), row["run"]))


class _extra(dict):
    """Merge extra details into a trigger with `trigger | _extra(...)`."""

    def __ror__(self, trigger: staleness.Trigger) -> staleness.Trigger:
        trigger.details.update(self)
        return trigger


def _traffic(log: QueryLog) -> pd.DataFrame:
    return sampling.query_traffic(log_sampling.load_table(log, "daily", columns=["query", "day", "count"]), (), window_days=None)


def measure_query_drift(project: Project, limits: staleness.Thresholds) -> staleness.Trigger:
    """The newest log against the query sets (judged = in a query set), and against the log before it."""
    logs = list(project.query_logs.order_by("-created_at", "-pk")[:2])
    if not logs:
        return staleness.query_drift({}, [], None, limits)
    newest = logs[0]
    traffic = _traffic(newest)
    tiered = sampling.assign_tiers(traffic, sampling.Boundaries.parse("rank:500,5000"))
    judged = log_sampling.earlier_queries(newest)
    divergence = None
    if len(logs) > 1:
        old = _traffic(logs[1])
        divergence = staleness.js_divergence(old.groupby("query")["traffic"].sum(), traffic.groupby("query")["traffic"].sum())
    return (staleness.query_drift(staleness.judged_traffic_share(tiered, judged), staleness.new_head_queries(tiered, judged),
                                  divergence, limits, log=newest.name)
            | _extra(log_uuid=str(newest.uuid)))


def measure_guidelines(project: Project) -> staleness.Trigger:
    current = project.guideline_versions.first()
    outdated = []
    if current is not None:
        for round in project.rounds.filter(guidelines__number__lt=current.number).select_related("guidelines"):
            labels = Judgment.objects.grades().filter(item__round=round, created_at__lt=current.created_at).count()
            if labels:
                outdated.append({"round": round.name, "round_uuid": str(round.uuid), "number": round.guidelines.number,
                                 "labels": labels})
    return staleness.guidelines(outdated) | _extra(current=current.number if current else None)


def measure_age(project: Project, limits: staleness.Thresholds, now) -> staleness.Trigger:
    grades = Judgment.objects.grades().filter(item__round__project=project)
    counts = grades.aggregate(total=Count("pk"), old=Count("pk", filter=Q(created_at__lt=now - timedelta(days=limits.age_days))))
    return staleness.age(counts["old"], counts["total"], limits)


def measure_agreement(project: Project, limits: staleness.Thresholds | None = None) -> staleness.Trigger:
    """The newest round with grades: its report's gate (the verdict its report page shows, under the round's
    settings now), its grades now, and whether grades came in after the report."""
    limits = limits or health_settings(project).thresholds()
    newest = (Round.objects.filter(project=project, items__judgments__grade__isnull=False)
              .annotate(last=Max("items__judgments__updated_at")).order_by("-created_at").first())
    if newest is None:
        return staleness.agreement(None, "", grades=0, newer_grades=False, limits=limits)
    grades = reports.kept_grade_count(newest)
    report = AgreementReport.objects.filter(round=newest).first()
    gate = reports.gate(newest, report.data["summary"]).to_json() if report else None
    return (staleness.agreement(gate, newest.name, grades=grades, newer_grades=bool(report) and newest.last > report.computed_at,
                                limits=limits) | _extra(round_uuid=str(newest.uuid)))


def measure(project: Project, limits: staleness.Thresholds | None = None, now=None) -> list[staleness.Trigger]:
    limits = limits or health_settings(project).thresholds()
    now = now or timezone.now()
    return [measure_new_systems(project, limits), measure_query_drift(project, limits), measure_guidelines(project),
            measure_age(project, limits, now), measure_agreement(project, limits)]


# ------------------------------------------------------------------------------------------ recording


def check_project(project: Project, *, now=None, notify: bool = True) -> HealthCheck:
    """Measure, record the check, update each trigger's state, and notify about triggers that just started
    firing (a snoozed trigger is recorded but not announced)."""
    now = now or timezone.now()
    started = time.perf_counter()
    found = health_settings(project)
    triggers = measure(project, found.thresholds(), now)
    started_firing = []
    with transaction.atomic():
        check = HealthCheck.objects.create(project=project, at=now, triggers={t.key: t.to_json() for t in triggers},
                                           firing=any(t.firing for t in triggers),
                                           seconds=time.perf_counter() - started)
        for trigger in triggers:
            state, _ = TriggerState.objects.select_for_update().get_or_create(project=project, trigger=trigger.key)
            if trigger.firing and state.first_fired_at is None:
                state.first_fired_at = now
                if not state.is_snoozed(now):
                    state.notified_at = now
                    started_firing.append(trigger)
                state.save()
            elif not trigger.firing and state.first_fired_at is not None:
                state.first_fired_at = None
                state.notified_at = None
                state.save()
    if started_firing and notify and found.notify:
        task("judgments.tasks.notify_health").delay_on_commit(check.pk, [trigger.key for trigger in started_firing])
    return check


def is_due(project: Project, now=None) -> bool:
    now = now or timezone.now()
    last = project.health_checks.order_by("-at").values_list("at", flat=True).first()
    return last is None or last <= now - timedelta(days=health_settings(project).every_days)


def check_due(now=None) -> list[HealthCheck]:
    """The scheduled job: check every project whose last check is as old as its schedule asks."""
    return [check_project(project, now=now) for project in Project.objects.all() if is_due(project, now)]


def snooze(project: Project, trigger: str, *, days: int, reason: str, user) -> TriggerState:
    if trigger not in staleness.TRIGGERS:
        raise ValueError(f"no trigger {trigger!r}")
    state, _ = TriggerState.objects.get_or_create(project=project, trigger=trigger)
    state.snoozed_until = timezone.now() + timedelta(days=days)
    state.snooze_reason = reason
    state.snoozed_by = user
    state.save()
    return state


def unsnooze(project: Project, trigger: str) -> None:
    TriggerState.objects.filter(project=project, trigger=trigger).update(snoozed_until=None, snooze_reason="", snoozed_by=None)


# --------------------------------------------------------------------------------------- notifications


def payload(project: Project, check: HealthCheck, triggers: list[staleness.Trigger]) -> dict:
    return {"project": project.slug, "check": str(check.uuid), "at": check.at.isoformat(),
            "firing": [{"trigger": t.key, "title": t.title, "state": t.state, "verdict": t.verdict.to_json(), "value": t.value,
                        "threshold": t.threshold, "summary": t.summary} for t in triggers]}


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def send_notifications(project: Project, check: HealthCheck, triggers: list[staleness.Trigger]) -> dict:
    """Mail the project's leads (when mail is on) and post to the webhook (when set); returns what went out."""
    found = health_settings(project)
    sent = {"mail": 0, "webhook": None}
    if settings.EMAIL_ENABLED:
        leads = list(Membership.objects.filter(project=project, role=Role.LEAD).exclude(user__email="")
                     .values_list("user__email", flat=True))
        if leads:
            lines = [f"- {t.title}: {verdict_words(t.to_json())} ({t.summary}); threshold {t.threshold}" for t in triggers]
            body = (f"A staleness check of “{project.name}” found {len(triggers)} trigger"
                    f"{'s' * (len(triggers) != 1)} newly firing:\n\n" + "\n".join(lines)
                    + f"\n\nThe project's health page: {project.get_absolute_url()}health/\n")
            try:
                EmailMessage(f"{project.name}: the judgment list needs a refresh", body, to=leads).send()
                sent["mail"] = len(leads)
            except (OSError, smtplib.SMTPException):
                log.exception("The health mail for %s could not be sent", project.slug)
    if found.webhook_url:
        sent["webhook"] = post_webhook(found.webhook_url, found.webhook_secret(), payload(project, check, triggers))
    return sent


def notify(check_id: int, keys: list[str]) -> dict:
    """What `tasks.notify_health` runs: the notifications of check `check_id` about the triggers `keys`."""
    check = HealthCheck.objects.select_related("project").get(pk=check_id)
    triggers = [staleness.Trigger.from_json(check.triggers[key]) for key in keys if key in check.triggers]
    return send_notifications(check.project, check, triggers)


def post_webhook(url: str, secret: str, body: dict, *, tries: int = WEBHOOK_TRIES, backoff: float = WEBHOOK_BACKOFF,
                 sleep=time.sleep) -> int | None:
    """POST `body` as JSON with `X-Verdict-Signature: sha256=<HMAC-SHA256 of the body>` (`judgments.lib.outbound`: a
    public address or one the operator allows, each try within webhooks.WEBHOOK_DEADLINE); retry on a network error or a
    5xx/429 answer, waiting backoff, 2*backoff, ... Returns the final status (None: unreachable or refused)."""
    data = json.dumps(body, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "Verdict health check"}
    if secret:
        headers["X-Verdict-Signature"] = signature(secret, data)
    status = None
    for attempt in range(tries):
        if attempt:
            sleep(backoff * 2 ** (attempt - 1))
        try:
            status = webhooks.post_once(url, data, headers)
        except outbound.Refused as refused:
            log.warning("The health webhook %s is refused: %s", url, refused)
            return None
        except (OSError, http.client.HTTPException) as problem:
            log.info("The health webhook %s: %s: %s", url, type(problem).__name__, problem)
            status = None
            continue
        if status < 500 and status != 429:
            return status
    log.warning("The health webhook %s failed after %d tries (last status %s)", url, tries, status)
    return status


# ---------------------------------------------------------------------------------------------- the page


def remedies(project: Project, key: str, details: dict) -> list[dict]:
    """What a lead can do about a trigger, each one click: a POST form ({"method": "post", "url", "fields"}) or a
    link to the page that does it ({"method": "get", "url"})."""
    from django.urls import reverse

    slug = project.slug
    found = []
    if key == "new_systems":
        for row in details.get("unmeasured_runs", [])[:3]:
            found.append({"label": f"Evaluate {row['run']}", "method": "post",
                          "url": reverse("judgments:health-evaluate", args=[slug, row["run_uuid"]]), "fields": {}})
        for row in _dedupe_runs(details.get("over", []))[:3]:
            evaluation = row.get("evaluation_uuid") or (
                Evaluation.objects.filter(project=project, state=Evaluation.State.DONE, runs__uuid=row["run_uuid"],
                                          fill_judge__isnull=True)
                .order_by("-created_at").values_list("uuid", flat=True).first())  # a check stored before it named its evaluation
            if evaluation:
                found.append({"label": f"Queue the unjudged top {row['cutoff']} of {row['run']} into a new round", "method": "post",
                              "url": reverse("evaluation:queue-unjudged", args=[slug, evaluation]),
                              "fields": {"run": row["run_uuid"], "k": row["cutoff"], "into": ""}})
        if not found:
            found.append({"label": "Runs: import one, or evaluate it", "method": "get", "url": reverse("judgments:runs", args=[slug])})
    elif key == "query_drift":
        if details.get("log_uuid"):
            found.append({"label": "Draw a refresh sample from the new log (judged queries left out)", "method": "get",
                          "url": reverse("judgments:query-log", args=[slug, details["log_uuid"]]) + "#sampling"})
        else:
            found.append({"label": "Import a search log", "method": "get", "url": reverse("judgments:query-log-upload", args=[slug])})
    elif key in ("guidelines", "age"):
        rounds = details.get("rounds") or []
        newest = project.rounds.exclude(status=Round.Status.DRAFT).order_by("-created_at").first()
        target = rounds[0]["round_uuid"] if rounds else (str(newest.uuid) if newest else None)
        if target:
            found.append({"label": "Start a new round with the current guidelines (re-judges its pairs)", "method": "post",
                          "url": reverse("judgments:round-successor", args=[slug, target]), "fields": {}})
        found.append({"label": "New round form", "method": "get", "url": reverse("judgments:round-create", args=[slug])})
    elif key == "agreement" and details.get("round_uuid"):
        round_uuid = details["round_uuid"]
        if details.get("gate") == staleness.INSUFFICIENT:
            found.append({"label": "The agreement report: what is missing", "method": "get",
                          "url": reverse("judgments:round-agreement", args=[slug, round_uuid])})
            found.append({"label": "The round: its overlap, progress and published versions", "method": "get",
                          "url": reverse("judgments:round", args=[slug, round_uuid])})
        found.append({"label": "Compute the agreement report", "method": "post",
                      "url": reverse("judgments:round-agreement-compute", args=[slug, round_uuid]), "fields": {}})
        found.append(_rejudge_remedy(slug, round_uuid))
    return found


def _rejudge_remedy(slug: str, round_uuid: str) -> dict:
    """Re-judging the overlap is a refresh round from the round's newest published version that re-judges a
    seeded 15% sample of its labelled pairs (the round page then shows the kappa between old and new labels);
    a round with no version yet is published first."""
    from django.urls import reverse

    from ..models import JudgmentListVersion

    version = JudgmentListVersion.objects.filter(round__uuid=round_uuid).order_by("-number").first()
    if version is None:
        return {"label": "Publish this round's list (a refresh round then re-judges a sample of it)", "method": "post",
                "url": reverse("judgments:round-publish", args=[slug, round_uuid]), "fields": {"note": "", "threshold": ""}}
    return {"label": f"Re-judge a 15% sample of v{version.number} in a refresh round (old against new labels: kappa)",
            "method": "post", "url": reverse("judgments:list-version-refresh", args=[slug, version.uuid]),
            "fields": {"rejudge": Round.Rejudge.SAMPLE, "share": 15}}


def _dedupe_runs(rows: list[dict]) -> list[dict]:
    """One row per run: its largest share (the queue remedy takes the top k at that cutoff)."""
    best: dict[str, dict] = {}
    for row in rows:
        if row["run_uuid"] not in best or row["share"] > best[row["run_uuid"]]["share"]:
            best[row["run_uuid"]] = row
    return sorted(best.values(), key=lambda row: -row["share"])


TREND_CHECKS = 12


def page_rows(project: Project, *, with_remedies: bool = True) -> tuple[HealthCheck | None, list[dict]]:
    """The latest check and, per trigger, its measured value, threshold, state, first firing, snooze, trend over
    the last checks (chart points) and remedies."""
    from ..lib import charts

    checks = list(project.health_checks.order_by("-at")[:TREND_CHECKS])
    latest = checks[0] if checks else None
    kept = {state.trigger: state for state in TriggerState.objects.filter(project=project).select_related("snoozed_by")}
    rows = []
    for key in staleness.TRIGGERS:
        trigger = (latest.triggers.get(key) if latest else None) or {}
        verdict = staleness.verdict_of(trigger) if trigger else None
        history = [(f"{check.at:%Y-%m-%d}", _number(check.triggers.get(key, {}).get("value"))) for check in reversed(checks)]
        values = [value for _, value in history if value is not None]
        high = max([1.0, *values])
        actionable = trigger.get("state") in staleness.FIRING or (verdict is not None and verdict.insufficient)
        rows.append({"key": key, "title": staleness.TITLES[key], "trigger": trigger, "verdict": verdict, "state": kept.get(key),
                     "words": verdict_words(trigger), "firing": trigger.get("state") in staleness.FIRING,
                     "evaluated": _evaluated_rows(project, trigger.get("details", {}).get("evaluated", [])),
                     "history": history, "chart": charts.line(history, high=high) if len(values) > 1 else None,
                     "remedies": remedies(project, key, trigger.get("details", {})) if with_remedies and actionable else []})
    return latest, rows


def _evaluated_rows(project: Project, evaluated: list[dict]) -> list[dict]:
    from django.urls import reverse

    return [{"run": row["run"], "round": row["round"],
             "url": reverse("evaluation:evaluation", args=[project.slug, row["evaluation_uuid"]]) if row.get("evaluation_uuid") else "",
             "shares": ", ".join(f"@{cutoff} {share:.1%}" for cutoff, share in sorted(row["shares"].items(), key=lambda kv: int(kv[0])))}
            for row in evaluated]


def verdict_words(trigger: dict) -> str:
    """A stored trigger's verdict and how far it fires, in words: "pass", "fail: stale", "not enough evidence",
    "not enough evidence, fires: warn"; "not checked" for none."""
    if not trigger:
        return "not checked"
    verdict = staleness.verdict_of(trigger)
    firing = trigger.get("state") in staleness.FIRING
    if verdict.failed or (verdict.passed and firing):
        return f"fail: {trigger['state']}"
    return verdict.label + (f", fires: {trigger['state']}" if firing else "")


def past_checks(checks) -> list[tuple]:
    """Each check with its triggers' verdict words in the page's order."""
    return [(check, [verdict_words(check.triggers.get(key, {})) for key in staleness.TRIGGERS]) for check in checks]


def counts(triggers: dict) -> dict:
    """A check's triggers that fire and those without enough evidence, by title in the page's order, and the
    words for them: "2 triggers fire: Query drift, Agreement (not enough evidence); 1 more has not enough evidence:
    New systems"."""
    firing, short, named = [], [], []
    for key in staleness.TRIGGERS:
        if key not in triggers:
            continue
        insufficient = staleness.verdict_of(triggers[key]).insufficient
        if triggers[key].get("state") in staleness.FIRING:
            firing.append(staleness.TITLES[key])
            named.append(staleness.TITLES[key] + (" (not enough evidence)" if insufficient else ""))
        elif insufficient:
            short.append(staleness.TITLES[key])
    words = f"{len(firing)} trigger{'s' * (len(firing) != 1)} fire{'s' * (len(firing) == 1)}: {', '.join(named)}" if firing else "nothing fires"
    if short:
        words += (f"; {len(short)}{' more' if firing else ''} {'has' if len(short) == 1 else 'have'} not enough evidence: "
                  f"{', '.join(short)}")
    return {"firing": firing, "insufficient": short, "words": words}


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value == value else None


def summary(project: Project) -> dict | None:
    """For the project overview: the latest check's firing triggers (snoozed ones too, marked) and those without
    enough evidence, each with its verdict, and the words that count them."""
    latest = project.health_checks.order_by("-at").first()
    if latest is None:
        return None
    snoozed = {state.trigger for state in TriggerState.objects.filter(project=project) if state.is_snoozed()}
    shown = []
    for key in staleness.TRIGGERS:
        trigger = latest.triggers.get(key)
        if trigger is None:
            continue
        verdict = staleness.verdict_of(trigger)
        if trigger["state"] in staleness.FIRING or verdict.insufficient:
            shown.append({"title": staleness.TITLES[key], "state": trigger["state"], "summary": trigger["summary"],
                          "verdict": verdict, "words": verdict_words(trigger), "firing": trigger["state"] in staleness.FIRING, "snoozed": key in snoozed})
    return {"check": latest, "firing": [row for row in shown if row["firing"]], "shown": shown, "counts": counts(latest.triggers),
            "worst": staleness.worst(t["state"] for t in latest.triggers.values())}
