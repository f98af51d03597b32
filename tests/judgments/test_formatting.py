"""Numbers, times and file names as people read them: weights without float noise, dates in one format
with no "a.m..", "just now" rather than "0 minutes ago", finished jobs without a stale percent, exports
to the millisecond, and a file name of its own for every export variant."""

import re
from datetime import datetime, timedelta, timezone

import pytest
from django.urls import reverse
from django.utils import timezone as django_timezone

from judgments.models import Job, Judgment
from judgments.ops import grading
from judgments.ops.grading import Verdict
from judgments.ops.imports import import_queries, import_run
from judgments.templatetags.verdict import ago, significant
from tests.factory import make_round, trec_run

pytestmark = pytest.mark.django_db

NOISY_WEIGHT = 390.35 + 0.1  # 390.45000000000005: the noise of float arithmetic


# ------------------------------------------------------------------------------------------ numbers


@pytest.mark.parametrize("value, shown", [
    (390.45000000000005, "390.5"), (12345.6, "12,346"), (0.000123456, "0.0001235"), (2.0, "2"), (12.5, "12.5"),
    (9.99996, "10"), (-3.14159, "-3.142"), (0.0, "0"), (1234567, "1,234,567"), ("a note", "a note"), (True, True),
])
def test_measured_numbers_read_to_four_significant_digits(value, shown):
    assert significant(value) == shown


def test_a_weight_reads_without_float_noise_on_the_page_and_exports_without_it(people):
    assert repr(NOISY_WEIGHT) == "390.45000000000005"
    collection, _ = import_queries(people.project, b"query_id,query\nq1,tent\n", "q.csv", name="Sampled")
    collection.queries.update(weight=NOISY_WEIGHT)
    client = people.client("lead")
    page = client.get(collection.get_absolute_url()).content.decode()
    assert '<td class="num">390.5</td>' in page and "390.4500" not in page
    download = client.get(reverse("judgments:query-set-csv", args=[people.project.slug, collection.uuid]))
    text = b"".join(download.streaming_content).decode()
    assert text.splitlines()[1].split(",")[5] == "390.45"


# ------------------------------------------------------------------------------------------ times


NOW = datetime(2026, 11, 24, 14, 2, tzinfo=timezone.utc)


@pytest.mark.parametrize("seconds_ago, said", [
    (-20, "just now"), (0, "just now"), (59, "just now"), (60, "a minute ago"), (119, "a minute ago"), (120, "2 minutes ago"),
    (3599, "59 minutes ago"), (3600, "an hour ago"), (7200, "2 hours ago"), (86399, "23 hours ago"), (86400, "a day ago"),
    (6 * 86400, "6 days ago"), (7 * 86400, "on 2026-11-17"),
])
def test_how_long_ago_is_said_as_a_person_says_it(seconds_ago, said):
    assert ago(NOW - timedelta(seconds=seconds_ago), now=NOW) == said


def finished_job(people, **fields) -> Job:
    now = django_timezone.now()
    return Job.objects.create(kind="selfcheck", project=people.project, owner=people.lead, created_at=now - timedelta(seconds=5),
                              finished_at=now - timedelta(seconds=3), **fields)


def test_a_job_that_just_finished_says_just_now_and_no_time_with_a_double_period(people):
    job = finished_job(people, state=Job.State.SUCCEEDED, progress_done=0, progress_total=5)
    page = people.client("lead").get(job.get_absolute_url()).content.decode()
    assert re.search(r"Finished <time datetime=\"[^\"]+\" title=\"\d{4}-\d\d-\d\d \d\d:\d\d UTC\">just now</time>\.", page)
    assert "0 minutes" not in page and "a.m." not in page and "p.m." not in page
    assert re.search(r"Started by lena, <time [^>]+>just now</time>\.</p>", page)


def test_the_job_list_shows_no_percent_once_a_job_has_ended(people):
    finished_job(people, state=Job.State.SUCCEEDED, progress_done=0, progress_total=5)
    finished_job(people, state=Job.State.FAILED, progress_done=2, progress_total=5)
    Job.objects.create(kind="selfcheck", project=people.project, state=Job.State.RUNNING, progress_done=1, progress_total=4)
    Job.objects.create(kind="selfcheck", project=people.project, state=Job.State.QUEUED)
    page = people.client("lead").get(reverse("judgments:jobs", args=[people.project.slug])).content.decode()
    cells = re.findall(r'<td class="state-\w+">([^<]+)</td>\s*<td>([^<]+)</td>', page)
    assert sorted(cells) == sorted([("Succeeded", "done"), ("Failed", "stopped at 40%"), ("Running", "25%"), ("Queued", "waiting")])
    assert ">0%<" not in page


def test_dates_printed_without_a_format_use_the_apps_own(people):
    run, _ = import_run(people.project, trec_run({"q1": ["d1"]}), "r.run", name="BM25", system="BM25")
    type(run).objects.filter(pk=run.pk).update(uploaded_at=datetime(2026, 11, 24, 2, 2, tzinfo=timezone.utc))
    page = people.client("lead").get(run.get_absolute_url()).content.decode()
    assert "<td>2026-11-24 02:02 by " in page  # Django's English default: "Nov. 24, 2026, 2:02 a.m."


# ------------------------------------------------------------------------------------------ exports


def test_the_long_csv_gives_times_and_durations_to_the_millisecond(people):
    round = make_round(people.project, people.lead, [people.rater], {"q1": ["d1"]})
    item = round.items.get()
    grading.record(item, people.rater, Verdict(grade=2))
    Judgment.objects.update(seconds=12.345678901234567)
    response = people.client("lead").get(reverse("judgments:round-export", args=[people.project.slug, round.uuid]), {"format": "long-csv"})
    row = b"".join(response.streaming_content).decode().splitlines()[1].split(",")
    seconds, created_at, updated_at = row[8:11]
    assert seconds == "12.346"
    for stamp in (created_at, updated_at):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", stamp), stamp


def test_a_jobs_result_reads_as_labels_and_numbers_not_python(people):
    job = finished_job(people, state=Job.State.SUCCEEDED, result={
        "query_set": "Launch", "judged": 12000, "seconds": 3.14159265, "could_not_judge": {"no_references": 4, "endpoint_failed": 1},
        "chosen": ["a", "b"], "link": "/somewhere/"})
    page = people.client("lead").get(job.get_absolute_url()).content.decode()
    assert "<dt>Query set</dt><dd>Launch</dd>" in page and "<dt>Judged</dt><dd>12,000</dd>" in page
    assert "<dt>Seconds</dt><dd>3.142</dd>" in page
    assert "<dt>Could not judge</dt><dd>no references: 4, endpoint failed: 1</dd>" in page
    assert "<dt>Chosen</dt><dd>a, b</dd>" in page and "{" not in page.split("<dl>")[1].split("</dl>")[0]
