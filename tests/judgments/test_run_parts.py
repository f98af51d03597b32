"""A big TREC run is read and stored a part of whole queries at a time: the stored run is the one the whole-file
read stores, a file whose queries are scattered is read whole, and a bad line deep in the file is named by its
line in the file, with nothing stored."""

import pytest

from evaluation.engine import EngineInputError
from judgments.models import StoredRun
from judgments.ops import imports
from judgments.ops.imports import import_run, load_run
from tests.factory import make_project, make_user

pytestmark = pytest.mark.django_db

FIELDS = ("n_queries", "n_rows", "n_documents", "depth", "run_tag")


def lines(queries: range, depth: int, tag: str = "sys") -> list[str]:
    return [f"q{q} Q0 d{(q * 7 + r) % 50} {r} {depth - r + (q % 3) * 0.5} {tag}\n" for q in queries for r in range(depth)]


def stored_facts(run: StoredRun) -> tuple:
    return tuple(getattr(run, field) for field in FIELDS)


@pytest.fixture
def projects(db):
    lead = make_user("lena")
    return make_project(lead, "Parts"), make_project(lead, "Whole")


def both_ways(projects, path, monkeypatch):
    """The run imported in parts of about 300 bytes into one project, and whole into the other."""
    in_parts, whole = projects
    monkeypatch.setattr(imports, "RUN_PART_BYTES", 300)
    parts = import_run(in_parts, path, "run.txt", name="r", system="s")[0]
    monkeypatch.setattr(imports, "RUN_PART_BYTES", 1 << 40)
    return parts, import_run(whole, path, "run.txt", name="r", system="s")[0]


def test_a_run_stored_in_parts_is_the_run_stored_whole(projects, tmp_path, monkeypatch):
    path = tmp_path / "run.txt"
    path.write_text("# a comment\n" + "".join(lines(range(40), 12)) + "\n" + "".join(lines(range(40, 45), 3, tag="last")))
    read = []
    monkeypatch.setattr(imports, "_run_parts", lambda *args, real=imports._run_parts: (read.append(part) or part for part in real(*args)))

    parts, whole = both_ways(projects, path, monkeypatch)

    assert len(read) > 10
    assert stored_facts(parts) == stored_facts(whole) == (45, 495, 50, 12, "last")
    assert load_run(parts).to_dict() == load_run(whole).to_dict()


def test_a_run_whose_queries_are_scattered_is_read_whole(projects, tmp_path, monkeypatch):
    path = tmp_path / "run.txt"
    rows = lines(range(30), 10)
    path.write_text("".join(rows[:150] + rows[200:] + rows[150:200]))

    parts, whole = both_ways(projects, path, monkeypatch)

    assert stored_facts(parts) == stored_facts(whole)
    assert load_run(parts).to_dict() == load_run(whole).to_dict()


def test_a_bad_line_deep_in_a_big_run_is_named_by_its_line_in_the_file(projects, tmp_path, monkeypatch):
    path = tmp_path / "run.txt"
    rows = lines(range(30), 10)
    rows[250] = "q25 Q0 d1 1 high sys\n"
    path.write_text("".join(rows))
    monkeypatch.setattr(imports, "RUN_PART_BYTES", 300)

    with pytest.raises(EngineInputError, match=r"^run\.txt:251: "):
        import_run(projects[0], path, "run.txt", name="r", system="s")
    assert not StoredRun.objects.exists()
