from django import template

register = template.Library()


@register.inclusion_tag("judgments/_document_brief.html", takes_context=True)
def document_brief(context, document):
    """`{% document_brief document %}`: a document in a list, by its title (the display template's first
    text) and id, unfolding to the whole document as raters see it (<details>: no JavaScript needed)."""
    project = context["project"]
    shown = project.display_template()
    return {"project": project, "document": document, "title": document.title(shown), "shown": document.display(shown)}


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


@register.filter
def tenths(share) -> int:
    """A share in [0, 1] as whole tenths (0-10), for CSS classes that step with it (no style attributes)."""
    return min(10, max(0, round(float(share) * 10)))
