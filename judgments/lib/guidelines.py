"""Rater guidelines: safe Markdown rendering, the starting template, and diffs between versions.

No Django import: the views, the rating screen and exports all use these.
"""

import difflib

import markdown
import nh3

ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "strong", "em", "code", "pre",
    "blockquote", "a", "table", "thead", "tbody", "tr", "th", "td", "del", "dl", "dt", "dd",
}

TEMPLATE = """\
# Rater guidelines

## Task
Judge each result against the **user's information need**, not only the words of the query. The
information need under the query says what the user wants; "running shoes" may mean "find the Nike
page" or "compare models".

## Grades
### 3 Perfect: "This is exactly what I am looking for."
- Example: query *2 person tent*, result: a two-person backpacking tent.
- Example:

### 2 Good: "Relevant: I want these results, but haven't found the exact one yet."
- Example: query *2 person tent*, result: a three-person tent of the same range.
- Example:

### 1 Fair: "I see the connection, but these are not what I am looking for."
- Example: query *2 person tent*, result: a tent footprint.
- Example:

### 0 Poor: "These are terrible: I would search elsewhere."
- Example: query *2 person tent*, result: a camping stove.
- Example:

## Edge cases in our domain
- Out-of-stock items:
- Variants (colour, size) of the right product:
- Bundles and accessories:

## Unrateable results
Mark a result **unrateable** (with the reason) when you cannot judge it: the page is behind a login,
broken, or in a language you cannot read. Use **judge later** when you need to come back to it.
"""


class _NoRawHtml(markdown.Extension):
    """Raw HTML in the source is shown as text, never passed through."""

    def extendMarkdown(self, md: markdown.Markdown) -> None:
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")


def render(text: str) -> str:
    """Guidelines Markdown as HTML that is safe to show: no raw HTML, scripts or javascript: links."""
    html = markdown.markdown(text, extensions=[_NoRawHtml(), "tables", "sane_lists"])
    return clean(html)


def clean(html: str, *, tags: set[str] = ALLOWED_TAGS, attributes: dict[str, set[str]] | None = None,
          link_rel: str | None = "noopener noreferrer nofollow") -> str:
    """HTML with only the given tags and attributes (links' by default), and only http(s), mailto and relative
    links. The docs pages (config/docs.py) allow more tags than guidelines do."""
    return nh3.clean(html, tags=tags, attributes=attributes or {"a": {"href", "title"}},
                     url_schemes={"http", "https", "mailto"}, link_rel=link_rel)


def diff(old: str, new: str, old_label: str, new_label: str) -> list[tuple[str, str]]:
    """A line diff as (kind, line) pairs, kind one of "same", "added", "removed", "hunk"."""
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), old_label, new_label, lineterm="", n=2)
    kinds = {"+": "added", "-": "removed", "@": "hunk", " ": "same"}
    return [(kinds.get(line[:1], "same"), line) for line in list(lines)[2:]]
