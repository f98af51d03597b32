"""The docs served by the app at /docs/ (config/docs.py): pages from a docs folder rendered with MkDocs' anchors and
directory URLs, its images, nothing from outside the folder, no login needed; and the links to them on the app's
report pages (`{% docs_link %}`)."""

import os
import struct
import zlib

import pytest
from django.test import Client
from django.urls import reverse

from judgments.ops.automatic import add_judge
from tests.config.test_settings import load_settings
from tests.factory import make_round

MKDOCS_YML = """\
site_name: Verdict
theme:
  name: material
  features: [navigation.sections]
nav:
  - Home: index.md
  - Leads:
      - leads/judges.md
      - "Agreement: verdicts and exports": leads/agreement.md
  - Benchmarks: benchmarks/index.md
markdown_extensions:
  - toc:
      permalink: true
  - pymdownx.superfences:
      custom_fences:
        - name: mermaid
          format: !!python/name:pymdownx.superfences.fence_code_format
"""

JUDGES = """\
# Automatic judges

For leads. Read [the agreement report](agreement.md#agreement-report) first, or go [home](../index.md),
[to the figures](../benchmarks/index.md), [the web](https://example.com/x.md) or [below](#calibration-report).

![The report](../images/report.png)

## Calibration report

!!! note "Before you trust a judge"
    Compare it with the raters.

| Statistic | Means |
|---|---|
| kappa | agreement beyond chance |

```python
# not a heading
judge = "token overlap"
```

<script>alert("docs")</script><p onclick="alert(1)">Raw <kbd>j</kbd> HTML</p>

### Kendall's tau {#tau}
"""


def png(width: int, height: int) -> bytes:
    """A grey PNG picture of that size."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + b"\x99" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def write_sample_docs(tmp_path):
    """A small docs tree beside its mkdocs.yml, as the repository holds them, and a secret outside it."""
    root = tmp_path / "site" / "docs"
    (root / "leads").mkdir(parents=True)
    (root / "benchmarks").mkdir()
    (root / "images").mkdir()
    (root.parent / "mkdocs.yml").write_text(MKDOCS_YML)
    (root / "index.md").write_text("# Verdict\n\nJudgment lists you can trust. See [judges](leads/judges.md).\n")
    (root / "leads" / "judges.md").write_text(JUDGES)
    (root / "leads" / "agreement.md").write_text("# `Agreement`\n\n## Agreement report\n\nKrippendorff's alpha.\n")
    (root / "benchmarks" / "index.md").write_text("# Benchmarks\n\nEvery figure with its command.\n")
    (root / "leads" / "notes.txt").write_text("not a page")
    (root / "images" / "report.png").write_bytes(png(240, 60))
    (tmp_path / "site" / "secret.md").write_text("# Secret\n\nSECRET_KEY=outside-the-docs\n")
    os.symlink(tmp_path / "site" / "secret.md", root / "leads" / "linked.md")
    return root


@pytest.fixture
def docs_dir(tmp_path, settings):
    settings.DOCS_DIR = write_sample_docs(tmp_path)
    return settings.DOCS_DIR


def get(path: str):
    return Client().get(path)


def test_a_page_renders_with_its_title_headings_and_mkdocs_anchors(docs_dir, settings):
    assert settings.DEBUG is False  # pytest-django serves requests as production does
    response = get("/docs/leads/judges/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "<title>Automatic judges · Docs · Verdict</title>" in page
    assert '<h2 id="calibration-report">Calibration report<a class="headerlink" href="#calibration-report"' in page
    assert '<h3 id="tau">Kendall' in page  # attr_list
    assert '<div class="admonition note">' in page and '<p class="admonition-title">Before you trust a judge</p>' in page
    assert "<th>Statistic</th>" in page and '<pre tabindex="0"><code class="language-python"># not a heading' in page
    assert 'aria-label="Main"' in page and "/static/css/verdict.css" in page  # the site's layout


def test_links_between_pages_become_directory_urls_as_mkdocs_makes_them(docs_dir):
    page = get("/docs/leads/judges/").content.decode()
    assert 'href="/docs/leads/agreement/#agreement-report"' in page
    assert 'href="/docs/">home</a>' in page and 'href="/docs/benchmarks/">to the figures</a>' in page
    assert 'href="https://example.com/x.md"' in page and 'href="#calibration-report">below</a>' in page
    assert 'src="/docs/images/report.png"' in page
    assert get("/docs/leads/agreement/").status_code == get("/docs/benchmarks/").status_code == 200
    assert 'href="/docs/leads/judges/"' in get("/docs/").content.decode()


def test_raw_html_in_a_page_keeps_only_harmless_tags(docs_dir):
    page = get("/docs/leads/judges/").content.decode()
    assert "alert" not in page and "onclick" not in page
    assert "<kbd>j</kbd>" in page


def test_the_side_list_follows_mkdocs_nav_with_page_titles_and_marks_the_current_page(docs_dir):
    page = get("/docs/leads/judges/").content.decode()
    nav = page[page.index('id="docs-nav"'):]
    assert nav.index(">Home<") < nav.index(">Leads<") < nav.index(">Automatic judges<") < nav.index(">Benchmarks<")
    assert '<a href="/docs/leads/judges/" aria-current="page">Automatic judges</a>' in nav
    assert '<a href="/docs/leads/agreement/">Agreement: verdicts and exports</a>' in nav


def test_without_a_nav_the_side_list_has_every_page_by_folder(docs_dir):
    (docs_dir.parent / "mkdocs.yml").unlink()
    nav = get("/docs/").content.decode().split('id="docs-nav"')[1]
    assert '<a href="/docs/leads/agreement/">Agreement</a>' in nav and '<a href="/docs/benchmarks/">Benchmarks</a>' in nav
    assert nav.index(">Leads<") < nav.index(">Automatic judges<")


def test_an_image_is_served_with_its_content_type(docs_dir):
    response = get("/docs/images/report.png")
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert b"".join(response.streaming_content).startswith(b"\x89PNG")


def test_a_page_without_its_slash_is_sent_to_its_directory_url(docs_dir):
    response = get("/docs/leads/judges")
    assert response.status_code == 302 and response["Location"] == "/docs/leads/judges/"


@pytest.mark.parametrize("path", [
    "/docs/../secret/", "/docs/../../etc/passwd", "/docs/leads/../../secret/", "/docs/%2e%2e/secret/",
    "/docs/leads%2F..%2F..%2Fsecret/", "/docs//etc/passwd/", "/docs/%2Fetc%2Fpasswd/", "/docs/leads/linked/",
    "/docs/leads/judges.md", "/docs/leads/judges.md/", "/docs/leads/notes.txt", "/docs/../mkdocs.yml",
    "/docs/leads/no-such-page/", "/docs/images/", "/docs/images/missing.png", "/docs/leads/.%2e/secret/",
    "/docs/leads/judges%00/",
])
def test_nothing_outside_the_docs_pages_is_served(docs_dir, path):
    response = get(path)
    page = response.content.decode()
    assert "outside-the-docs" not in page and "root:" not in page
    if "%00" in path:
        assert response.status_code == 400, path  # the app refuses a NUL in any address before a view sees it
    else:
        assert response.status_code == 404, path
        assert "<h1>Not found</h1>" in page  # the app's own 404 page


def test_a_changed_page_is_rendered_again(docs_dir):
    assert "Krippendorff" in get("/docs/leads/agreement/").content.decode()
    file = docs_dir / "leads" / "agreement.md"
    file.write_text("# Agreement\n\nCohen's kappa now.\n")
    os.utime(file, ns=(file.stat().st_atime_ns, file.stat().st_mtime_ns + 1_000_000))
    assert "Cohen" in get("/docs/leads/agreement/").content.decode()


APP_LINKS = ["leads/judges/#calibration-report", "leads/versions-and-health/#health-checks",
             "leads/agreement/#agreement-report", "leads/fewer-judgments/#estimate-with-a-judge"]


def test_every_page_of_the_repositorys_docs_renders_with_the_headings_the_app_links(settings):
    assert settings.DOCS_DIR == settings.BASE_DIR / "docs"
    root = settings.BASE_DIR / "docs"
    if not (root / "index.md").is_file():
        pytest.skip("the docs/ folder arrives with the docs pages")
    for file in root.rglob("*.md"):
        source = file.relative_to(root).as_posix()
        assert get("/docs/" + ("" if source == "index.md" else source.removesuffix(".md") + "/")).status_code == 200, source
    for link in APP_LINKS:
        page, anchor = link.split("#")
        assert f'id="{anchor}"' in get(f"/docs/{page}").content.decode(), link


# --- Links from the app's pages -------------------------------------------------------------------------


def app_pages(people) -> dict[str, str]:
    """The four reports a lead needs explained, each with the docs page and heading it links."""
    from evaluation.judge_estimates import create_judge_estimate
    from tests.evaluation.test_judge_estimates import make_planned_round, overlap_judge_on_every_pair

    round = make_round(people.project, people.lead, [people.rater])
    judge = add_judge(round, name="overlap", kind="token_overlap", settings={})
    planned, runs = make_planned_round(people.project, people.lead, [people.rater])
    estimate = create_judge_estimate(planned, overlap_judge_on_every_pair(planned), runs, queue=False)
    slug = people.project.slug
    urls = [f"{judge.get_absolute_url()}calibration/", reverse("judgments:health", args=[slug]),
            reverse("judgments:round-agreement", args=[slug, round.uuid]), estimate.get_absolute_url()]
    return dict(zip(urls, APP_LINKS))


def test_each_report_page_links_its_docs_page_at_docs_url(people, settings):
    lead = people.client("lead")
    pages = app_pages(people)
    for url, target in pages.items():
        response = lead.get(url)
        assert response.status_code == 200, url
        assert f'<a href="/docs/{target}" class="docs-link">' in response.content.decode(), url
    settings.DOCS_URL = "https://docs.example.com/verdict/"
    for url, target in pages.items():
        assert f'href="https://docs.example.com/verdict/{target}"' in lead.get(url).content.decode(), url


def test_the_docs_link_tag_writes_a_plain_link_with_its_text(settings):
    from django.template import Context, Template

    def tag(arguments: str) -> str:
        return Template("{% load verdict %}{% docs_link " + arguments + " %}").render(Context({"text": "<b>"}))

    assert tag('"leads/judges" "calibration-report" "How to read this report"') == (
        '<a href="/docs/leads/judges/#calibration-report" class="docs-link">How to read this report</a>')
    assert tag('"index"') == '<a href="/docs/" class="docs-link">Read about this in the docs</a>'
    assert tag('"leads/agreement" "" text') == '<a href="/docs/leads/agreement/" class="docs-link">&lt;b&gt;</a>'


def test_the_app_serves_the_docs_to_a_logged_in_member_too(docs_dir, people):
    assert people.client("rater").get("/docs/leads/judges/").status_code == 200


def test_the_url_names(docs_dir):
    assert reverse("docs:index") == "/docs/"
    assert reverse("docs:page", kwargs={"name": "leads/judges/"}) == "/docs/leads/judges/"


@pytest.mark.parametrize("value", ["/docs/", "/help/verdict/", "https://docs.example.com/verdict/"])
def test_docs_url_takes_a_path_or_an_https_address(value):
    result = load_settings(DOCS_URL=value)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("value", ["/docs", "docs/", "//evil.example/", "http://docs.example.com/", "javascript:alert(1)//",
                                   "https:///", "https://docs.example.com/?page=/", "/my docs/"])
def test_a_malformed_docs_url_stops_start_up_naming_it(value):
    result = load_settings(DOCS_URL=value)
    assert result.returncode != 0 and "DOCS_URL=" in result.stderr, value


def test_the_docker_image_holds_the_docs_pages_and_mkdocs_yml(settings):
    """The Dockerfile copies the whole tree (COPY . .) but what .dockerignore names: the app serves docs/ in production."""
    from fnmatch import fnmatch

    ignored = [line.strip().rstrip("/") for line in (settings.BASE_DIR / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    assert "COPY . ." in (settings.BASE_DIR / "Dockerfile").read_text()
    for path in ("docs", "docs/index.md", "docs/leads/judges.md", "docs/images/home.png", "mkdocs.yml"):
        assert not [pattern for pattern in ignored if fnmatch(path, pattern) or path.startswith(pattern + "/")], path


@pytest.mark.parametrize("name", ["a" * 5000, "a/" * 3000, "Zürich ☃ 𝔘 مرحبا", "<script>alert(1)</script>", "²", "%2F",
                                  "images/" + "b" * 300 + ".png", "leads/" + "c" * 300 + "/"])
def test_hostile_text_in_the_path_is_a_404_not_an_error(docs_dir, name):
    from urllib.parse import quote

    assert get(f"/docs/{quote(name)}").status_code == 404
    assert get(f"/docs/{quote(name)}/").status_code == 404
