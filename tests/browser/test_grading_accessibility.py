"""The grading screens for raters who grade all day (issue #20), in a real browser, in the light and the dark
theme: the focus follows the new pair after a keyboard grade and after a click, a live region outside the pair
names the saved grade and the next pair, every grade button has a focus ring of its own that stands out 3:1,
the cues under the grades read at 4.5:1, and a skip link reaches the grades. The colours are measured from
getComputedStyle and the contrast is computed here, with WCAG 2.1's formula.

Screenshots of each screen at 390 and 1366 px in both themes go to test-results/a11y/."""

import re

import pytest
from django.conf import settings
from django.urls import reverse
from playwright.sync_api import expect

from judgments.models import Judgment
from judgments.ops import grading
from tests.factory import PASSWORD, make_answer_round, make_round

from . import test_grading
from .conftest import fresh_page, log_in
from .test_grading import Screen

pytestmark = pytest.mark.browser
team = test_grading.team  # the fixture: a lead and two raters on a project

THEMES = pytest.mark.parametrize("theme", ["light", "dark"])
PHONE, LAPTOP = {"width": 390, "height": 844}, {"width": 1366, "height": 768}
SIZES = pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["390", "1366"])
SCREENSHOTS = settings.BASE_DIR / "test-results" / "a11y"

# What decides a colour's contrast: the colour, the opacity of the element and its ancestors, and the
# background colours from `start` up to the first opaque one (the outline sits outside its element, on its parent).
COLOURS = """(element, [property, fromParent]) => {
  let opacity = 1;
  for (let at = element; at; at = at.parentElement) { opacity *= parseFloat(getComputedStyle(at).opacity); }
  const backgrounds = [];
  for (let at = fromParent ? element.parentElement : element; at; at = at.parentElement) {
    const colour = getComputedStyle(at).backgroundColor;
    backgrounds.push(colour);
    if (!/rgba/.test(colour) || /, 1\\)$/.test(colour)) { break; }
  }
  const style = getComputedStyle(element);
  return {colour: style[property], opacity, backgrounds, outlineStyle: style.outlineStyle, outlineWidth: style.outlineWidth};
}"""


def rgba(text: str) -> tuple[float, float, float, float]:
    numbers = [float(n) for n in re.findall(r"[\d.]+", text)]
    assert text.startswith("rgb") and len(numbers) in (3, 4), text
    return (*numbers[:3], numbers[3] if len(numbers) == 4 else 1.0)


def over(top: tuple, bottom: tuple) -> tuple:
    """`top` (with its alpha) composited over an opaque `bottom`."""
    alpha = top[3]
    return (*(alpha * t + (1 - alpha) * b for t, b in zip(top[:3], bottom[:3])), 1.0)


def luminance(colour: tuple) -> float:
    def linear(channel: float) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(c) for c in colour[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(one: tuple, other: tuple) -> float:
    """WCAG 2.1 contrast ratio (https://www.w3.org/TR/WCAG21/#dfn-contrast-ratio)."""
    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def measured(locator, property: str = "color", from_parent: bool = False) -> dict:
    """The element's `property` colour and its contrast against what is behind it."""
    seen = locator.evaluate(COLOURS, [property, from_parent])
    backgrounds = [rgba(colour) for colour in seen["backgrounds"]]
    assert backgrounds and backgrounds[-1][3] == 1, f"no opaque background behind the element: {seen['backgrounds']}"
    behind = backgrounds[-1]
    for layer in reversed(backgrounds[:-1]):
        behind = over(layer, behind)
    colour = rgba(seen["colour"])
    shown = over((*colour[:3], colour[3] * seen["opacity"]), behind)
    return {**seen, "ratio": contrast(shown, behind)}


def browsing(browser, theme: str, size=LAPTOP):
    return fresh_page(browser, viewport=size, color_scheme=theme, has_touch=size is PHONE)


def open_screen(page, live_server, round, user) -> Screen:
    screen = Screen(page, live_server, round)
    screen.open(live_server, user)
    expect(screen.grader.locator("#grades")).to_be_attached()
    return screen


def status(page):
    return page.locator("#grading-status")


def focus_is_on_the_grades_of(page, screen, item: str) -> None:
    """The focus is inside the pair now shown (not on the page's body), on its grades."""
    expect(screen.grader).to_have_attribute("data-item", item)
    assert page.evaluate("document.activeElement.closest('#grader') && document.activeElement.closest('#grader').dataset.item") == item
    expect(page.locator("#grades")).to_be_focused()


def grade_buttons(page, within: str = "#grade-form"):
    return page.locator(f"{within} button[name=grade]")


def assert_each_button_has_its_own_ring(page, group: str, buttons) -> list[float]:
    """Tab through the grade buttons: each shows a solid 2-3 px outline on itself, none on the group; the
    ring's contrast against what is behind it, for each button."""
    ratios = []
    for n in range(buttons.count()):
        page.keyboard.press("Tab")
        button = buttons.nth(n)
        expect(button).to_be_focused()
        ring = measured(button, "outlineColor", from_parent=True)
        assert ring["outlineStyle"] == "solid" and 2 <= float(ring["outlineWidth"].removesuffix("px")) <= 3, ring
        around = page.locator(group).evaluate("g => [getComputedStyle(g).outlineStyle, getComputedStyle(g).boxShadow]")
        assert around == ["none", "none"], f"the group is ringed: {around}"
        ratios.append(ring["ratio"])
    return ratios


@THEMES
def test_focus_follows_the_new_pair_after_a_key_enter_and_a_click_and_the_region_says_what_was_saved(
        browser, live_server, team, theme):
    round = make_round(team.project, team.lead, [team.ravi])
    with browsing(browser, theme) as page:
        screen = open_screen(page, live_server, round, team.ravi)
        expect(status(page)).to_have_text("")

        shown = screen.press("2")
        focus_is_on_the_grades_of(page, screen, shown)
        query = round.items.get(uuid=shown).query.text
        expect(status(page)).to_have_text(re.compile(rf"^Saved: 2 Good\. Next: {query}, 2 of 12\.$"))
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / f"one-pair-saved-{theme}-1366.png")
        page.keyboard.press("Tab")  # one Tab from the new pair to its first grade
        expect(grade_buttons(page).first).to_be_focused()

        page.keyboard.press("Tab")
        expect(grade_buttons(page).nth(1)).to_be_focused()
        shown = screen.wait_past(screen.keys("Enter"))
        focus_is_on_the_grades_of(page, screen, shown)
        expect(status(page)).to_contain_text("Saved: 1 Fair. Next: ")

        page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        expect(grade_buttons(page).nth(2)).to_be_focused()
        shown = screen.wait_past(screen.keys(" "))
        focus_is_on_the_grades_of(page, screen, shown)
        expect(status(page)).to_contain_text("Saved: 2 Good. Next: ")

        before = screen.item
        grade_buttons(page).nth(3).click()
        shown = screen.wait_past(before)
        focus_is_on_the_grades_of(page, screen, shown)
        expect(status(page)).to_have_text(f"Saved: 3 Perfect. Next: {round.items.get(uuid=shown).query.text}, 5 of 12.")

        screen.press("b")
        expect(page.locator("#grades")).to_be_focused()
        expect(status(page)).to_contain_text("Your judged pair: ")
        expect(status(page)).to_contain_text(", 3 Perfect. Choose again to change it.")
        assert list(Judgment.objects.order_by("created_at").values_list("grade", flat=True)) == [2, 1, 2, 3]


@THEMES
def test_the_skip_link_goes_to_the_grades_each_grade_button_has_its_own_ring_and_the_cues_read_well(
        browser, live_server, team, theme):
    round = make_round(team.project, team.lead, [team.ravi])
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for size, name in ((LAPTOP, "1366"), (PHONE, "390")):
        with browsing(browser, theme, size) as page:
            screen = open_screen(page, live_server, round, team.ravi)
            page.keyboard.press("Tab")
            skip = page.get_by_role("link", name="Skip to the grades")
            expect(skip).to_be_focused()
            assert measured(skip, "outlineColor", from_parent=True)["ratio"] >= 3
            page.keyboard.press("Enter")
            expect(page.locator("#grades")).to_be_focused()

            ratios = assert_each_button_has_its_own_ring(page, "#grades", grade_buttons(page))
            assert len(ratios) == 4 and min(ratios) >= 3, ratios
            page.screenshot(path=SCREENSHOTS / f"one-pair-{theme}-{name}.png")

            cues = page.locator("#grade-form button small")
            assert cues.count() == 4
            assert min(measured(cues.nth(n))["ratio"] for n in range(4)) >= 4.5
            if size is LAPTOP:
                screen.press("1")
                screen.press("b")
                pressed = page.locator('#grade-form button[aria-pressed="true"] small')  # the chosen grade, filled
                assert measured(pressed)["ratio"] >= 4.5


@THEMES
def test_log_out_shows_a_ring_that_stands_out(browser, live_server, team, theme):
    round = make_round(team.project, team.lead, [team.ravi])
    with browsing(browser, theme) as page:
        open_screen(page, live_server, round, team.ravi)
        page.locator("body > header details.dropdown summary").click()
        log_out = page.get_by_role("button", name="Log out")
        page.get_by_role("link", name="API tokens").focus()  # the last link before it in the menu
        page.keyboard.press("Tab")
        expect(log_out).to_be_focused()
        # the menu fades in: measure once it is fully drawn
        log_out.evaluate("b => Promise.all(b.closest('ul').getAnimations({subtree: true}).map(a => a.finished))")
        page.wait_for_function("() => getComputedStyle(document.querySelector('body > header details.dropdown ul')).opacity === '1'")
        ring = measured(log_out, "outlineColor", from_parent=True)
        assert ring["outlineStyle"] == "solid" and ring["outlineWidth"] == "3px" and ring["ratio"] >= 3, ring


@SIZES
@THEMES
def test_on_the_one_page_view_focus_goes_to_the_next_ungraded_pair_and_the_region_names_it(browser, live_server, team, theme, size):
    round = make_round(team.project, team.lead, [team.ravi])
    query = round.items.order_by("pk").first().query
    items = [item for item, _ in grading.items_for_bulk(round, team.ravi, query)]
    titles = [item.document.title(round.project.display_template()) for item in items]  # as lists show them
    with browsing(browser, theme, size) as page:
        log_in(page, live_server, team.ravi.username, PASSWORD)
        expect(page.get_by_role("link", name="My work queue")).to_be_visible()
        page.goto(live_server.url + reverse("judgments:grade-bulk", args=[round.project.slug, round.uuid, query.query_id]))
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Skip to the grades")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator(f"#grades-{items[0].uuid}")).to_be_focused()
        ratios = assert_each_button_has_its_own_ring(page, f"#grades-{items[0].uuid}", grade_buttons(page, f"#pair-{items[0].uuid}"))
        assert min(ratios) >= 3, ratios
        page.screenshot(path=SCREENSHOTS / f"one-page-{theme}-{size['width']}.png")

        page.keyboard.press("Enter")  # on the last grade button: 3 Perfect
        expect(page.locator(f"#grades-{items[1].uuid}")).to_be_focused()
        expect(status(page)).to_have_text(f"Saved: 3 Perfect for {titles[0]}. Next: {titles[1]}, 2 of 4.")
        page.keyboard.press("Tab")
        expect(grade_buttons(page, f"#pair-{items[1].uuid}").first).to_be_focused()

        grade_buttons(page, f"#pair-{items[1].uuid}").nth(2).click()  # 2 Good, with the mouse
        expect(page.locator(f"#grades-{items[2].uuid}")).to_be_focused()
        expect(status(page)).to_contain_text(f"Saved: 2 Good for {titles[1]}. Next: ")
        assert {j.item_id: j.grade for j in Judgment.objects.all()} == {items[0].pk: 3, items[1].pk: 2}


@SIZES
@THEMES
def test_answer_grading_keeps_the_focus_on_the_new_answer_after_keys_and_clicks(browser, live_server, team, theme, size):
    round = make_answer_round(team.project, team.lead, [team.ravi])
    with browsing(browser, theme, size) as page:
        screen = open_screen(page, live_server, round, team.ravi)
        shown = screen.press("2", "1")
        focus_is_on_the_grades_of(page, screen, shown)
        expect(status(page)).to_contain_text("Saved: 2 Right, faithfulness 1 Partly supported. Next: ")

        before = screen.item
        page.locator("[data-step='1'] label").filter(has_text="Wrong").click()
        page.locator("[data-step='2'] label").filter(has_text="Fully supported").click()
        page.get_by_role("button", name="Save both grades").click()
        shown = screen.wait_past(before)
        focus_is_on_the_grades_of(page, screen, shown)
        expect(status(page)).to_contain_text("Saved: 0 Wrong, faithfulness 2 Fully supported. Next: ")
        page.keyboard.press("Tab")
        expect(page.locator("[data-step='1'] input[name=grade]").first).to_be_focused()
        page.screenshot(path=SCREENSHOTS / f"answers-{theme}-{size['width']}.png")
