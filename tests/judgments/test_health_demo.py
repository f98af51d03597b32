"""The demo fires staleness triggers: its newer log drifted, and a new system waits to be evaluated."""

import pytest
from django.core.management import call_command

from judgments.demo import DEMO_PROJECT, NEW_RUN
from judgments.lib.staleness import STALE
from judgments.models import Project

pytestmark = pytest.mark.django_db


def test_the_demo_has_a_firing_drift_trigger_and_a_run_not_yet_measured(capsys):
    call_command("load_demo")
    project = Project.objects.get(slug=DEMO_PROJECT["slug"])
    check = project.health_checks.get()
    assert check.firing and check.triggers["query_drift"]["state"] == STALE
    drift = check.triggers["query_drift"]
    assert drift["value"] < 0.5 and drift["details"]["n_new_head"] == 25 and drift["details"]["divergence"] > 0.3
    assert "ski goggles" in [query for query, _ in check.triggers["query_drift"]["details"]["new_head"]]
    assert NEW_RUN in check.triggers["new_systems"]["details"]["unmeasured"]
    print({key: (t["state"], t["summary"]) for key, t in check.triggers.items()})
