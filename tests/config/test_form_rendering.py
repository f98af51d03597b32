"""Every form draws each field as one block: its label, input, help text and errors together (config/forms.py,
templates/forms/field.html), and a checkbox inside its own label. tests/browser/test_layout.py checks on every
page that the browser then draws each label beside its input."""

import pytest
from django.test.html import Element, parse_html
from django.urls import reverse

from tests.factory import upload
from tests.judgments.test_query_logs import log_csv

pytestmark = pytest.mark.django_db


def walk(node):
    yield node
    for child in getattr(node, "children", []):
        if isinstance(child, Element):
            yield from walk(child)


def attribute(node, name: str) -> str:
    return dict(node.attributes).get(name) or ""


def field_blocks(page: str) -> dict[str, Element]:
    """Each control's id, and the field block around it (an element whose classes include `field`)."""
    found = {}
    for block in walk(parse_html(page)):
        if "field" in attribute(block, "class").split():
            for node in walk(block):
                if node.name in ("input", "select", "textarea") and attribute(node, "id"):
                    found[attribute(node, "id")] = block
    return found


def controls(page: str) -> list[Element]:
    return [node for node in walk(parse_html(page)) if node.name in ("select", "textarea")
            or (node.name == "input" and attribute(node, "type") not in ("hidden", "search"))]


def assert_each_field_is_one_block(page: str) -> dict[str, Element]:
    blocks = field_blocks(page)
    for control in controls(page):
        control_id = attribute(control, "id")
        assert control_id in blocks, f"{control_id or control} is outside a field block"
        block = blocks[control_id]
        labels = [node for node in walk(block) if node.name == "label" and (attribute(node, "for") == control_id)]
        assert labels, f"the label of {control_id} is not in its block"
        for described in attribute(control, "aria-describedby").split():
            assert any(attribute(node, "id") == described for node in walk(block)), f"{described} is not beside {control_id}"
    return blocks


def test_the_log_mapping_form_draws_each_field_with_its_label_help_and_checkbox_label(people):
    client = people.client("lead")
    response = client.post(reverse("judgments:query-log-upload", args=[people.project.slug]), {"file": upload("log.csv", log_csv())})
    page = client.get(response["Location"]).content.decode()
    blocks = assert_each_field_is_one_block(page)
    assert "id_time_column_helptext" in str(blocks["id_time_column"])
    for checkbox in ("id_drop_personal", "id_nfkc", "id_segment_columns_0"):
        [label] = [node for node in walk(blocks[checkbox]) if node.name == "label" and attribute(node, "for") == checkbox]
        assert any(attribute(node, "id") == checkbox for node in walk(label)), f"{checkbox} is not inside its own label"
        assert "personal data" not in str(label) or checkbox == "id_drop_personal"


def test_errors_come_back_inside_their_fields_block(people):
    client = people.client("lead")
    response = client.post(reverse("judgments:query-log-upload", args=[people.project.slug]), {"file": upload("log.csv", log_csv())})
    page = client.post(response["Location"], {"name": "October", "query_column": "query", "max_bad_percent": "200"}).content.decode()
    blocks = assert_each_field_is_one_block(page)
    assert "id_max_bad_percent_error" in str(blocks["id_max_bad_percent"])
    assert "less than or equal to 100" in str(blocks["id_max_bad_percent"])


def test_a_whole_form_rendered_at_once_uses_the_same_blocks(people):
    page = people.client("lead").get(reverse("judgments:project-settings", args=[people.project.slug])).content.decode()
    blocks = assert_each_field_is_one_block(page)
    assert len(set(map(id, blocks.values()))) == len(blocks) >= 2  # one block per field
