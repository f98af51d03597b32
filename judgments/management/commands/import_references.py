from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from judgments.ops.answers import import_references

from ._base import ProjectCommand, importing


class Command(ProjectCommand):
    help = ('Add reference answers (JSONL {"query_id", "answers": [...]} or TSV query_id<TAB>answer) to the queries of a '
            "query set, or replace theirs with --replace. All or nothing.")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("query_set", help="the query set's name or UUID")
        parser.add_argument("file", type=Path)
        parser.add_argument("--replace", action="store_true", help="replace the references of the queries in the file")

    def handle(self, *args, project: str, query_set: str, file: Path, replace: bool, **options):
        target = self.project(project)
        collection = find_query_set(target, query_set)
        with importing(file):
            counts = import_references(collection, file, replace=replace)
        self.stdout.write(f"Reference answers for {counts['queries']} queries of {collection.name!r}: {counts['changed']} changed, "
                          f"{counts['new_references']} new answers.")
        if counts["unknown"]:
            self.stdout.write(f"{len(counts['unknown'])} query ids are not in the set and were left out: "
                              f"{', '.join(counts['unknown'][:20])}")


def find_query_set(project, name_or_uuid: str):
    """A query set of the project by name, or by UUID."""
    found = project.query_sets.filter(name=name_or_uuid).first()
    if found is None:
        try:
            found = project.query_sets.filter(uuid=name_or_uuid).first()
        except ValidationError:  # not a UUID
            found = None
    if found is None:
        raise CommandError(f"no query set named {name_or_uuid!r} in {project.slug}")
    return found


def find_project_query_set_and_runs(options: dict, runs_of: str, what: str = "run") -> tuple:
    """The project (``options["project"]``, a slug), its query set (``options["query_set"]``) and the runs named in
    ``options["runs"]`` among the project's `runs_of` (``runs``, ``answer_runs``), in that order; CommandError
    naming what is missing."""
    from judgments.models import Project

    project = Project.objects.filter(slug=options["project"]).first()
    if project is None:
        raise CommandError(f"no project with the slug {options['project']!r}")
    query_set = find_query_set(project, options["query_set"])
    runs = []
    for name in options["runs"]:
        run = getattr(project, runs_of).filter(name=name).first()
        if run is None:
            raise CommandError(f"no {what} named {name!r} in {project.slug}")
        runs.append(run)
    return project, query_set, runs
