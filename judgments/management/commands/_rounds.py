"""Finding a round from the command line (by its UUID, or by its name within a project), its judges and the
project's runs."""

from uuid import UUID

from django.core.management.base import CommandError

from judgments.models import Round, RoundJudge, StoredRun


def add_round_arguments(parser, *, judge: bool = False) -> None:
    """The ROUND argument and --project of every command about one round (and --judge for its judges)."""
    parser.add_argument("round", help="the round's UUID, or its name (with --project when names repeat)")
    parser.add_argument("--project", help="the project's slug, to find the round by name")
    if judge:
        parser.add_argument("--judge", required=True, help="the judge's name in the round")


def find_round(text: str, project: str | None = None) -> Round:
    rounds = Round.objects.select_related("project", "guidelines")
    try:
        found = rounds.filter(uuid=UUID(text)).first()
    except ValueError:
        matches = rounds.filter(name=text, **({"project__slug": project} if project else {}))
        if matches.count() > 1:
            raise CommandError(f"several projects have a round named {text!r}: add --project SLUG") from None
        found = matches.first()
    if found is None:
        raise CommandError(f"no round {text!r}" + (f" in project {project!r}" if project else ""))
    return found


def find_runs(round: Round, names: list[str]) -> list[StoredRun]:
    """The stored runs of the round's project with these names, in the order given."""
    runs = []
    for name in names:
        run = round.project.runs.filter(name=name).first()
        if run is None:
            raise CommandError(f"no run named {name!r} in {round.project.slug}")
        runs.append(run)
    return runs


def find_judge(round: Round, name: str) -> RoundJudge:
    judge = round.judges.select_related("round__project", "round__pool", "round__guidelines").filter(name=name).first()
    if judge is None:
        names = ", ".join(round.judges.values_list("name", flat=True)) or "none"
        raise CommandError(f"round {round.name!r} has no judge named {name!r} (its judges: {names})")
    return judge
