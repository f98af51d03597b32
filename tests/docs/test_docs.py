"""The docs' claims about the repository hold: the README and every page under docs/ name only make targets, files,
folders and management commands that exist, configuration.md lists only variables the settings read, the README
stays a front door (at most 250 lines), and the navigation holds every page. No database."""

import os
import re
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# The pages of issue #32's docs tree (docs/architecture.md comes with the re-layout, which adds it to the nav).
PAGES = [
    "index.md", "getting-started.md", "raters/grading.md", "raters/accessibility.md", "leads/projects.md",
    "leads/sampling.md", "leads/pools.md", "leads/rounds.md", "leads/agreement.md", "leads/judges.md",
    "leads/fewer-judgments.md", "leads/answers.md", "leads/versions-and-health.md", "leads/evaluating-runs.md",
    "engineers/engine.md", "engineers/file-formats.md", "engineers/api.md", "engineers/ci-gate.md",
    "engineers/judges.md", "operators/configuration.md", "operators/production.md", "benchmarks.md",
    "development.md", "architecture.md",
]

# Other projects' targets the docs name as theirs.
FOREIGN_TARGETS = {"quicktest": "trec_eval's own test, `make quicktest` in its source"}

# Paths the docs name that are not in the repository, each for a reason: what make, the tests or the benchmarks write
# (all git-ignored), paths inside the storage (not the checkout), and paths in other people's repositories.
OUTPUTS = ("var/", ".venv/", ".venv-torch/", "dist/", "build/", "node_modules/", "test-results/", "benchmarks/data/")
STORAGE = ("api/rendered/",)
ELSEWHERE = {
    "ci/verdict.py": "the CI example's copy of clients/verdict.py, in the user's repository",
    "servers/evaluation/src/evaluation.py": "UltraRAG's evaluation server, which the answer metrics follow",
    "scripts/write-run": "the CI example's script that writes the user's run",
}
NOT_PATHS = ("application/", "text/")  # media types
PATH_SUFFIXES = (".py", ".txt", ".yml", ".toml", ".md")


def documents() -> dict[str, str]:
    pages = {f"docs/{path.relative_to(DOCS)}": path.read_text() for path in sorted(DOCS.rglob("*.md"))}
    return {"README.md": README.read_text(), **pages}


def code_spans(text: str) -> list[str]:
    """The inline code spans of a Markdown text, and the lines of its fenced code blocks."""
    blocks = re.findall(r"^ *```[^\n]*\n(.*?)^ *```", text, re.DOTALL | re.MULTILINE)
    prose = re.sub(r"^ *```[^\n]*\n.*?^ *```", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.findall(r"`([^`\n]+)`", prose) + [line for block in blocks for line in block.splitlines()]


def inline_spans(text: str) -> list[str]:
    prose = re.sub(r"^ *```[^\n]*\n.*?^ *```", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.findall(r"`([^`\n]+)`", prose)


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):(?!=)", (ROOT / "Makefile").read_text(), re.MULTILINE))


def make_targets_named(span: str) -> list[str]:
    """`make -o demo run`: demo and run; `make bench TREC_EVAL=...`: bench; `make test   # ...`: test; the words after anything else are prose."""
    named = []
    for match in re.finditer(r"(?:^|[\s;(&|])make((?:\s+[^\s#;&|)]+)+)", span):
        for word in match.group(1).split():
            if re.fullmatch(r"[a-z][\w-]*", word):
                named.append(word)
            elif not re.fullmatch(r"-\w+|[A-Z_]+=\S*", word):
                break  # prose after the command: `make run (HOST=... to be reached ...)`
    return named


TOP_LEVEL = {path.name for path in ROOT.iterdir()} | {prefix.split("/")[0] for prefix in OUTPUTS}


def repo_paths(span: str) -> list[str]:
    """The words of a code span that look like a repository's file or folder: a path under one of the checkout's
    top-level names (`judgments/ops/grading.py`, `tests/data/`), or any name ending .py, .txt, .yml, .toml or .md.
    URLs, API paths (`/api/v1/...`, `runs/{uuid}`), placeholders (`<project>`) and `a/b/c` alternatives are not."""
    found = []
    for word in span.split():
        word = word.strip("(),;:'\"").rstrip(".")
        if not word or word.startswith(("/", "~", "$", "-", "../", "@")) or word.startswith(NOT_PATHS):
            continue
        if any(mark in word for mark in "<>{}*%=@|[]()#\\") or "..." in word or "://" in word:
            continue
        if (word.endswith(PATH_SUFFIXES) and not word.startswith(".")) or word.split("/")[0] in TOP_LEVEL - {word}:
            found.append(word)
    return found


def missing_path(word: str, tracked_names: set[str]) -> bool:
    if word.startswith(OUTPUTS + STORAGE) or word in ELSEWHERE:
        return False
    if "/" not in word:
        # A bare name: a file the repository has somewhere (`calibration.py`, `requirements.txt`); the examples'
        # own files (`qrels.txt`, `run.txt`) are the reader's, not ours.
        return word.endswith((".py", ".toml", ".yml", ".md")) and word not in tracked_names and \
            not (ROOT / word).exists()
    return not (ROOT / word).exists()


@pytest.fixture(scope="module")
def tracked_names() -> set[str]:
    names = set()
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [sub for sub in subfolders if not sub.startswith(".") and f"{sub}/" not in OUTPUTS]
        names.update(files)
    return names


def test_every_make_target_the_docs_name_is_in_the_makefile():
    targets = makefile_targets() | set(FOREIGN_TARGETS)
    wrong = {(name, target) for name, text in documents().items() for span in code_spans(text)
             for target in make_targets_named(span) if target not in targets}
    assert not wrong, f"not a Makefile target: {sorted(wrong)}"


def test_every_file_and_folder_the_docs_name_exists(tracked_names):
    wrong = {(name, word) for name, text in documents().items() for span in inline_spans(text)
             for word in repo_paths(span) if missing_path(word, tracked_names)}
    assert not wrong, f"no such file or folder: {sorted(wrong)}"


def test_the_paths_in_the_docs_shell_commands_exist(tracked_names):
    """`.venv/bin/python benchmarks/engine.py ...`: the scripts and files a command runs or reads from the checkout."""
    wrong = set()
    for name, text in documents().items():
        for block in re.findall(r"^ *```sh\n(.*?)^ *```", text, re.DOTALL | re.MULTILINE):
            for line in block.splitlines():
                command = line.split("#", 1)[0]
                wrong |= {(name, word) for word in repo_paths(command) if missing_path(word, tracked_names)
                          and (word.endswith((".py", "/")) or word.startswith(("scripts/", "benchmarks/", "tests/")))}
    assert not wrong, f"no such file or folder: {sorted(wrong)}"


def test_every_management_command_the_docs_name_exists():
    commands = set(get_commands())
    wrong = {(name, command) for name, text in documents().items()
             for command in re.findall(r"manage\.py\s+([a-z][a-z0-9_]*)", text) if command not in commands}
    assert not wrong, f"no such management command: {sorted(wrong)}"


def test_every_variable_the_configuration_page_lists_is_read_or_documented():
    page = (DOCS / "operators" / "configuration.md").read_text()
    settings = (ROOT / "config" / "settings.py").read_text()
    example = (ROOT / ".env.example").read_text()
    first_cells = re.findall(r"^\| ([^|]+) \|", page, re.MULTILINE)  # the variables' tables
    listed = {name for cell in first_cells for name in re.findall(r"`([A-Z][A-Z0-9_]{3,})`", cell)}
    wrong = sorted(name for name in listed
                   if f'"{name}"' not in settings and not re.search(rf"^#? ?{name}=", example, re.MULTILINE))
    assert listed and not wrong, f"listed in configuration.md, read by neither settings.py nor .env.example: {wrong}"


def test_the_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move sections to docs/"


def test_the_readme_links_files_that_exist():
    links = re.findall(r"\]\(((?!https?:|#)[^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    assert links
    assert not [link for link in links if not (ROOT / link).exists()]


def test_the_navigation_holds_every_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(entries):
        for entry in entries:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                yield from pages(value) if isinstance(value, list) else [value]

    nav = list(pages(config["nav"]))
    assert not [page for page in PAGES if page not in nav], "pages of issue #32's tree missing from mkdocs.yml's nav"
    assert not [page for page in nav if not (DOCS / page).exists()], "the nav names a page docs/ does not have"
    on_disk = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert not on_disk - set(nav), "a page in docs/ that the nav leaves out"
