import math
from datetime import datetime

from django import template
from django.conf import settings
from django.utils import timezone
from django.template.defaultfilters import date as date_filter
from django.utils.html import format_html

register = template.Library()


@register.inclusion_tag("judgments/_document_brief.html", takes_context=True)
def document_brief(context, document):
    """`{% document_brief document %}`: a document in a list, by its title (the display template's first
    text) and id, unfolding to the whole document as raters see it (<details>: no JavaScript needed)."""
    from judgments.ops.grading import shown_document

    project = context["project"]
    template = project.display_template()
    # A generated answer (answer rounds): the answer and its cited documents, no page of its own.
    return {"project": project, "document": document, "title": document.title(template), **shown_document(project, document, template),
            "shown": document.display(template)}


@register.filter
def get_item(mapping, key):
    """`mapping|get_item:key`: a dict value by a key held in a variable."""
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def web_url(value) -> str:
    """The value if it is an http(s) URL, else "": corpus fields must not smuggle javascript: links."""
    text = str(value or "").strip()
    return text if text.lower().startswith(("http://", "https://")) else ""


@register.filter
def grade_label(scale, value) -> str:
    """`scale|grade_label:judgment.grade`: the label the round's scale gives a grade."""
    return scale.label_of(value)


@register.simple_tag
def verdict_words(judgment, scale, faithfulness_scale=None) -> str:
    """`{% verdict_words judgment scale faithfulness_scale %}`: "2 Good", "2 Right, faithfulness 1 Partly supported"."""
    return judgment.in_words(scale, faithfulness_scale)


@register.filter
def tenths(share) -> int:
    """A share in [0, 1] as whole tenths (0-10), for CSS classes that step with it (no style attributes)."""
    return min(10, max(0, round(float(share) * 10)))


@register.filter
def p_value(value) -> str:
    """A p-value to 4 decimals; one that rounds to 0.0000 reads "< 0.0001" (a p-value is never shown as 0)."""
    if value is None:
        return ""
    return "<\u00a00.0001" if value < 0.00005 else f"{value:.4f}"  # no break between < and the number


@register.filter
def significant(value, digits: int = 4):
    """A measured number for reading (a weight, a duration): a float to `digits` significant digits with
    thousands separators and no trailing zeros (390.45000000000005 reads 390.5, 12345.6 reads 12,346,
    0.000123456 reads 0.0001235); a whole number with separators; anything else unchanged. Scores are not
    for this filter: their tables keep a fixed number of decimals so that columns compare."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{round(value, decimals):,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


@register.filter
def words(key: str) -> str:
    """A result's key as a label: "could_not_judge" reads "Could not judge"."""
    text = str(key).replace("_", " ")
    return text[:1].upper() + text[1:]


@register.filter
def readable(value):
    """A job result's value for reading: numbers through `significant`, a mapping as "key: value" pairs
    ("no references: 4, endpoint failed: 1"), a list joined with commas; anything else unchanged."""
    if isinstance(value, dict):
        return ", ".join(f"{words(key).lower()}: {readable(item)}" for key, item in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(readable(item)) for item in value) or "none"
    return significant(value)


def ago(moment: datetime, now: datetime | None = None) -> str:
    """How long ago `moment` was, as a person says it: "just now", "a minute ago", "5 minutes ago",
    "an hour ago", "3 hours ago", "a day ago", "4 days ago"; a week or more ago, its date."""
    seconds = ((now or timezone.now()) - moment).total_seconds()
    minutes, hours, days = int(seconds // 60), int(seconds // 3600), int(seconds // 86400)
    if minutes < 1:
        return "just now"  # also a moment a few seconds ahead, from another machine's clock
    if hours < 1:
        return "a minute ago" if minutes == 1 else f"{minutes} minutes ago"
    if days < 1:
        return "an hour ago" if hours == 1 else f"{hours} hours ago"
    if days < 7:
        return "a day ago" if days == 1 else f"{days} days ago"
    return f"on {timezone.localtime(moment):%Y-%m-%d}"


@register.simple_tag
def moment(value: datetime | None) -> str:
    """`{% moment job.finished_at %}`: when something happened, said as `ago` does, with the exact local
    time in a tooltip and machine-readable; every "... ago" in the app comes from here."""
    if value is None:
        return "–"
    exact = timezone.localtime(value)
    return format_html('<time datetime="{}" title="{}">{}</time>', value.isoformat(), f"{exact:%Y-%m-%d %H:%M %Z}", ago(value))


@register.simple_tag
def when(value, fmt: str = "Y-m-d H:i", missing: str = "–") -> str:
    """`{% when token.created_at %}`, `{% when run.uploaded_at "Y-m-d" %}`: a date as the `date` filter
    writes it, in a <time> element that never breaks at its hyphens (verdict.css), machine-readable;
    `missing` for None."""
    if value is None or value == "":
        return missing
    iso = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return format_html('<time datetime="{}">{}</time>', iso, date_filter(value, fmt) or value)


@register.simple_tag
def docs_link(page: str, anchor: str = "", text: str = "Read about this in the docs") -> str:
    """`{% docs_link "leads/judges" "calibration-report" "How to read this report" %}`: a plain link to a docs page
    (and one of its headings) at DOCS_URL, the app's own /docs/ or the team's MkDocs site. Its text says where it
    leads, for a screen reader's list of links."""
    href = settings.DOCS_URL + (f"{page.strip('/')}/" if page.strip("/") not in ("", "index") else "")
    return format_html('<a href="{}" class="docs-link">{}</a>', href + (f"#{anchor}" if anchor else ""), text)
