"""The docs, served by the app itself: docs/*.md at /docs/<page>/, rendered at request time (no build step), so
that the links of the app's pages work under `make run` and in production. The same pages build the MkDocs site
(`make docs`); links between pages are rewritten to directory URLs as MkDocs does, and headings get MkDocs'
anchors. A page is read only from inside DOCS_DIR: the path is resolved and checked, anything else is a 404."""

import mimetypes
import posixpath
import re
import xml.etree.ElementTree as etree
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import markdown
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_safe
from markdown.extensions.toc import TocExtension

from judgments.lib.guidelines import ALLOWED_TAGS, clean

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp"}
# Guidelines' tags, and what MkDocs' Markdown extensions (admonitions, attr_list, permalinks) and the pages' own
# HTML use. No style attribute: the Content-Security-Policy refuses inline styles anyway.
TAGS = ALLOWED_TAGS | {"div", "span", "img", "kbd", "details", "summary", "sup", "sub", "figure", "figcaption"}
ATTRIBUTES = {
    "*": {"id", "class", "title"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height", "loading"},
    "th": {"align"}, "td": {"align"},
}
_FENCE = re.compile(r"^\s*(```|~~~)")
_SCROLLABLE = re.compile(r"<(pre|table)(?=[\s>])")
# mkdocs.yml's nav: "- Title: page.md", "- page.md", "- Section:" (a title may be quoted, then it may hold a colon).
_NAV_ITEM = re.compile(r"^(?P<indent>\s*)- (?P<item>.*?)\s*$")
_NAV_KEY = re.compile(r"""^(?:(?P<quote>["'])(?P<quoted>.*?)(?P=quote)|(?P<plain>[^"':][^:]*?))\s*:(?:\s+(?P<target>.*))?$""")


@dataclass
class Page:
    title: str
    html: str


@dataclass
class NavItem:
    title: str
    url: str = ""  # "" for a section
    children: list["NavItem"] = field(default_factory=list)


def docs_root() -> Path:
    return Path(settings.DOCS_DIR).resolve()


def inside(root: Path, relative: str) -> Path | None:
    """root/relative if it names a file inside root: no absolute path, no "..", ".", hidden or empty segment, and
    the resolved path (symbolic links followed) still under root."""
    parts = relative.split("/")
    if "\x00" in relative or "\\" in relative or any(not part or part.startswith(".") for part in parts):
        return None
    try:
        target = root.joinpath(*parts).resolve()
        return target if target.is_relative_to(root) and target.is_file() else None
    except OSError:  # a name too long for the file system
        return None


def page_file(root: Path, name: str) -> Path | None:
    """The Markdown file of the page at /docs/<name>/ as MkDocs names it: <name>.md, or <name>/index.md."""
    name = name.removesuffix("/")
    if not name:
        return inside(root, "index.md")
    return inside(root, f"{name}.md") or inside(root, f"{name}/index.md")


def page_url(base: str, source: str) -> str:
    """The directory URL MkDocs gives the page whose file is `source` (relative to docs/): leads/judges.md ->
    <base>leads/judges/, index.md -> <base>, benchmarks/index.md -> <base>benchmarks/."""
    stem = source.removesuffix(".md")
    stem = "" if stem == "index" else stem.removesuffix("/index")
    return f"{base}{stem}/" if stem else base


class _DirectoryUrls(markdown.treeprocessors.Treeprocessor):
    """Relative links and images as MkDocs writes them, for a page served at a directory URL: a link to
    another page (`../leads/agreement.md#x`) goes to that page's URL, an image to its file under the docs' URL."""

    def __init__(self, md, source: str, base: str):
        super().__init__(md)
        self.folder, self.base = posixpath.dirname(source), base

    def run(self, root: etree.Element) -> None:
        for element in root.iter():
            attribute = {"a": "href", "img": "src"}.get(element.tag)
            if attribute and (value := element.get(attribute)):
                element.set(attribute, self.rewritten(value))

    def rewritten(self, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or not parts.path or parts.path.startswith("/"):
            return url  # another site, this page's own anchor, or an absolute path: as written
        target = posixpath.normpath(posixpath.join(self.folder, parts.path))
        if target.startswith("../"):
            return url  # outside the docs: MkDocs --strict refuses it
        path = page_url(self.base, target) if target.endswith(".md") else self.base + target
        return urlunsplit(("", "", path, parts.query, parts.fragment))


class _DocsExtension(markdown.Extension):
    def __init__(self, source: str, base: str):
        super().__init__()
        self.source, self.base = source, base

    def extendMarkdown(self, md: markdown.Markdown) -> None:
        # After the inline patterns (20) have made the links.
        md.treeprocessors.register(_DirectoryUrls(md, self.source, self.base), "directory_urls", 4)


def title_of(text: str, source: str) -> str:
    """The page's first "# " heading outside code blocks, as MkDocs takes it for the page's title (its text, without
    code and emphasis marks); else the file's name."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("# ") and (title := line[2:].strip().rstrip("#").replace("`", "").replace("*", "").strip()):
            return title
    return Path(source).stem.replace("-", " ").capitalize()


@lru_cache(maxsize=256)
def _rendered(file: str, mtime_ns: int, source: str, base: str) -> Page:
    """One page's HTML, kept until its file changes (the modification time is part of the key)."""
    text = Path(file).read_text(encoding="utf-8")
    # toc's own slugify is MkDocs' default: "## Calibration report" gets the id calibration-report, with a ¶ link.
    html = markdown.markdown(text, extensions=[
        "tables", "fenced_code", "attr_list", "admonition", "sane_lists",
        TocExtension(permalink=True, permalink_title="Link to this section"), _DocsExtension(source, base),
    ])
    # A code block or table wider than the page scrolls sideways: focusable, so that the keyboard can scroll it too.
    html = _SCROLLABLE.sub(r'<\1 tabindex="0"', clean(html, tags=TAGS, attributes=ATTRIBUTES, link_rel=None))
    return Page(title=title_of(text, source), html=html)


def render(root: Path, file: Path, base: str) -> Page:
    return _rendered(str(file), file.stat().st_mtime_ns, file.relative_to(root).as_posix(), base)


@lru_cache(maxsize=256)
def _title(file: str, mtime_ns: int, source: str) -> str:
    return title_of(Path(file).read_text(encoding="utf-8"), source)


def page_title(root: Path, source: str) -> str:
    """A page's title for the side list, read again only when its file changes."""
    file = inside(root, source)
    return _title(str(file), file.stat().st_mtime_ns, source) if file else title_of("", source)


def nav_entries(config: str) -> list[tuple[int, str, str]]:
    """(indent, title, target) of each item of mkdocs.yml's `nav:` list, target "" for a section. A reader of that
    one list's shape (`- Title: page.md`, `- page.md`, `- Section:`), not of YAML: PyYAML is not a runtime
    dependency, and mkdocs.yml may hold tags (!!python/name) that a safe YAML loader refuses."""
    entries, in_nav = [], False
    for line in config.splitlines():
        if not in_nav:
            in_nav = line.rstrip() == "nav:"
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith((" ", "-")):
            break  # the next top-level key
        if match := _NAV_ITEM.match(line):
            if keyed := _NAV_KEY.match(match["item"]):
                title, target = keyed["quoted"] if keyed["quote"] else keyed["plain"], keyed["target"] or ""
            else:
                title, target = "", match["item"]
            entries.append((len(match["indent"]), title.strip(), target.strip().strip("\"'")))
    return entries


def nav(root: Path, base: str) -> list[NavItem]:
    """The side list: mkdocs.yml's nav (beside DOCS_DIR, as MkDocs finds it), or else every page by folder."""
    config = root.parent / "mkdocs.yml"
    entries = nav_entries(config.read_text(encoding="utf-8")) if config.is_file() else []
    if not entries:
        pages = sorted(file.relative_to(root).as_posix() for file in root.rglob("*.md"))
        entries = [(0, "", source) for source in pages if "/" not in source]
        for folder in sorted({source.split("/")[0] for source in pages if "/" in source}):
            entries.append((0, folder.replace("-", " ").capitalize(), ""))
            entries += [(2, "", source) for source in pages if source.startswith(f"{folder}/")]
    top: list[NavItem] = []
    stack: list[tuple[int, list[NavItem]]] = [(-1, top)]
    for indent, title, target in entries:
        while indent <= stack[-1][0]:
            stack.pop()
        if target and "://" not in target:
            item = NavItem(title or page_title(root, target), page_url(base, target))
        else:
            item = NavItem(title, target)
        stack[-1][1].append(item)
        if not target:
            stack.append((indent, item.children))
    return top


@login_not_required
@require_safe
def page(request: HttpRequest, name: str = "") -> HttpResponse:
    """A docs page, or an image of the docs. Public: the docs hold nothing a visitor may not read."""
    root, base = docs_root(), reverse("docs:index")
    if not name or name.endswith("/"):
        file = page_file(root, name)
        if not file:
            raise Http404("No such page in the docs.")
        shown = render(root, file, base)
        return TemplateResponse(request, "docs/page.html", {
            "page": shown, "nav": nav(root, base), "here": request.path,
            "source": file.relative_to(root).as_posix(),
        })
    if Path(name).suffix.lower() in IMAGE_SUFFIXES and (file := inside(root, name)):
        return FileResponse(file.open("rb"), content_type=mimetypes.guess_type(file.name)[0])
    if page_file(root, name):
        return redirect(f"{base}{name}/")  # as MkDocs' server does for a page's URL without its slash
    raise Http404("No such page in the docs.")


app_name = "docs"
urlpatterns = [
    path("", page, name="index"),
    path("<path:name>", page, name="page"),
]
