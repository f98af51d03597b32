"""Run the staleness checks now, for cron: exit 1 when a trigger fires, 3 when none fires but one lacks evidence."""

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from judgments.lib import staleness
from judgments.models import Project
from judgments.ops import health

FIRES, NOT_ENOUGH_EVIDENCE = 1, 3  # 2 is argparse's, for a usage error


class Command(BaseCommand):
    help = ("Check every staleness trigger of a project (or of every project), record the check and notify about "
            "triggers that start firing. Exits 1 when a trigger fires, 3 when none fires but a trigger has not enough "
            "evidence (0 then with --allow-insufficient), 0 when every trigger passes.")

    def add_arguments(self, parser):
        parser.add_argument("project", nargs="?", help="the project's slug; every project without it")
        parser.add_argument("--json", action="store_true", help="print the checks as JSON")
        parser.add_argument("--no-notify", action="store_true", help="record the check but send no mail or webhook")
        parser.add_argument("--allow-insufficient", action="store_true",
                            help="exit 0, not 3, when no trigger fires but some have not enough evidence")

    def handle(self, *args, **options):
        if options["project"]:
            projects = list(Project.objects.filter(slug=options["project"]))
            if not projects:
                raise CommandError(f"no project with the slug {options['project']!r}")
        else:
            projects = list(Project.objects.all())
        checks = [health.check_project(project, notify=not options["no_notify"]) for project in projects]
        verdicts = [_verdicts(check) for check in checks]
        if options["json"]:
            self.stdout.write(json.dumps([{"project": project.slug, "at": check.at.isoformat(), "firing": check.firing,
                                           "verdict": _overall(found), "verdicts": found,
                                           "triggers": {key: _with_verdict(check.triggers[key]) for key in staleness.TRIGGERS}}
                                          for project, check, found in zip(projects, checks, verdicts)],
                                         indent=2, default=str))
        else:
            for project, check in zip(projects, checks):
                self.stdout.write(f"{project.slug}: {health.counts(check.triggers)['words']}")
                for key in staleness.TRIGGERS:  # in this order: PostgreSQL's jsonb keeps its own
                    trigger = check.triggers[key]
                    self.stdout.write(f"  {trigger['key']:<12} {health.verdict_words(trigger):<36} {trigger['summary']}")
        if any(check.firing for check in checks):
            sys.exit(FIRES)
        if not options["allow_insufficient"] and any(found["insufficient"] for found in verdicts):
            sys.exit(NOT_ENOUGH_EVIDENCE)


def _verdicts(check) -> dict[str, list[str]]:
    """The check's trigger keys by verdict: {"pass": [...], "fail": [...], "insufficient": [...]}."""
    found = {"pass": [], "fail": [], "insufficient": []}
    for key in staleness.TRIGGERS:
        found[staleness.verdict_of(check.triggers[key]).state].append(key)
    return found


def _overall(found: dict[str, list[str]]) -> str:
    """fail when a trigger's data prove it fires, else insufficient when one lacks evidence, else pass."""
    return "fail" if found["fail"] else "insufficient" if found["insufficient"] else "pass"


def _with_verdict(trigger: dict) -> dict:
    """A stored trigger with its verdict and whether it fires, also one stored before verdicts existed."""
    return {**trigger, "verdict": staleness.verdict_of(trigger).to_json(), "firing": trigger["state"] in staleness.FIRING}
