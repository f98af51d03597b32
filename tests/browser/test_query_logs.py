"""A lead samples queries from a log in the browser: upload, map the columns, import, preview, save."""

from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT, SEARCH_LOG_FILE
from judgments.models import Job, QueryCollection, QueryLog
from judgments.ops.jobs import execute_job

from .conftest import log_in

pytestmark = pytest.mark.browser


def test_a_lead_imports_a_log_previews_a_tiered_sample_and_saves_it(demo, live_server, page):
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/")
    project_menu = page.get_by_role("navigation", name="Project")
    project_menu.get_by_text("Data").click()
    project_menu.get_by_role("link", name="Logs").click()
    page.get_by_role("button", name="Import a query log").click()
    page.get_by_label("File").set_input_files(str(Path(settings.VAR_DIR) / "demo" / SEARCH_LOG_FILE))
    page.get_by_role("button", name="Upload and import").click()

    expect(page.get_by_role("heading", name=f"Map the columns of {SEARCH_LOG_FILE}")).to_be_visible()
    expect(page.get_by_role("columnheader", name="timestamp")).to_be_visible()  # the first rows, to map by
    page.get_by_label("Log name").fill("Autumn log")
    expect(page.get_by_role("combobox", name="Query text")).to_have_value("query")
    expect(page.get_by_role("combobox", name="Timestamp")).to_have_value("timestamp")
    page.get_by_label("language").check()
    page.get_by_role("button", name="Import the log").click()

    expect(page.get_by_text("Waiting for a worker")).to_be_visible()
    execute_job(Job.objects.get(kind="import_query_log").pk)  # stands in for the worker
    page.get_by_role("button", name="Open the result").click()
    expect(page.get_by_role("heading", name="Autumn log")).to_be_visible()

    page.get_by_label("Tier boundaries").select_option("share")
    page.get_by_label("Head until").fill("0.8")
    page.get_by_label("Torso until").fill("0.95")
    page.get_by_label("Seed").fill("99")
    page.get_by_label("Stratify by").select_option("language")
    page.get_by_role("button", name="Preview the sample").click()
    expect(page.get_by_role("heading", name="Sample with seed 99")).to_be_visible()
    chart = page.get_by_role("img", name="Traffic per query by rank")
    expect(chart).to_be_visible()
    expect(chart.locator("path.curve")).to_have_count(1)

    page.get_by_label("Query set name").fill("Autumn refresh")
    page.get_by_role("button", name="Save as a query set").click()
    expect(page.get_by_role("heading", name="Autumn refresh")).to_be_visible()
    expect(page.get_by_text("Sampled from the query log Autumn log with seed 99")).to_be_visible()

    collection = QueryCollection.objects.get(name="Autumn refresh")
    assert collection.parameters["seed"] == 99 and collection.parameters["stratify_by"] == "language"
    assert set(collection.queries.values_list("segment", flat=True)) == {"en", "de", "fr"}
    assert QueryLog.objects.get(name="Autumn log").rows_read > 50_000
