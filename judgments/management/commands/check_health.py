"""Run the staleness checks now, for cron: exit status 1 when any trigger fires."""

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from judgments import health, staleness
from judgments.models import Project


class Command(BaseCommand):
    help = ("Check every staleness trigger of a project (or of every project), record the check and notify about "
            "triggers that start firing. Exits 1 when a trigger fires.")

    def add_arguments(self, parser):
        parser.add_argument("project", nargs="?", help="the project's slug; every project without it")
        parser.add_argument("--json", action="store_true", help="print the checks as JSON")
        parser.add_argument("--no-notify", action="store_true", help="record the check but send no mail or webhook")

    def handle(self, *args, **options):
        if options["project"]:
            projects = list(Project.objects.filter(slug=options["project"]))
            if not projects:
                raise CommandError(f"no project with the slug {options['project']!r}")
        else:
            projects = list(Project.objects.all())
        checks = [health.check_project(project, notify=not options["no_notify"]) for project in projects]
        if options["json"]:
            self.stdout.write(json.dumps([{"project": project.slug, "at": check.at.isoformat(), "firing": check.firing,
                                           "triggers": check.triggers} for project, check in zip(projects, checks)],
                                         indent=2, default=str))
        else:
            for project, check in zip(projects, checks):
                self.stdout.write(f"{project.slug}: {'FIRING' if check.firing else 'ok'}")
                for key in staleness.TRIGGERS:  # in this order: PostgreSQL's jsonb keeps its own
                    trigger = check.triggers[key]
                    self.stdout.write(f"  {trigger['key']:<12} {trigger['state']:<10} {trigger['summary']}")
        if any(check.firing for check in checks):
            sys.exit(1)
