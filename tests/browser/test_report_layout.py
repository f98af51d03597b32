"""Report charts as a person sees them at 1366 and 390 px: labels apart and inside their chart, and
no gap between a heading and its chart."""

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT, ROUND, SEARCH_LOG
from judgments.models import QueryLog, Round

from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser

VIEWPORTS = [{"width": 1366, "height": 768}, {"width": 390, "height": 844}]

# Every text box of the chart, and the chart's own box, as the browser drew them.
TEXT_BOXES = """svg => {
  const box = r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom});
  return {svg: box(svg.getBoundingClientRect()),
          texts: [...svg.querySelectorAll(':scope > text')].map(t => ({text: t.textContent, cls: t.getAttribute('class') || '',
                                                                 ...box(t.getBoundingClientRect())}))};
}"""


def overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def assert_labels_apart_and_inside(drawn: dict) -> None:
    svg, texts = drawn["svg"], drawn["texts"]
    assert texts
    for text in texts:
        assert svg["left"] - 0.5 <= text["left"] and text["right"] <= svg["right"] + 0.5, text
        assert svg["top"] - 0.5 <= text["top"] and text["bottom"] <= svg["bottom"] + 0.5, text
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            assert not overlap(a, b), (a, b)


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=["1366", "390"])
def test_the_traffic_curve_s_tick_labels_and_titles_neither_overlap_nor_clip(demo, live_server, browser, viewport):
    log = QueryLog.objects.get(name=SEARCH_LOG)
    with fresh_page(browser, viewport=viewport) as page:
        log_in(page, live_server, "lead", DEMO_PASSWORD)
        page.goto(f"{live_server.url}{log.get_absolute_url()}")
        page.get_by_role("button", name="Preview the sample").click()
        chart = page.get_by_role("img", name="Traffic per query by rank")
        expect(chart).to_be_visible()
        drawn = chart.evaluate(TEXT_BOXES)
        assert {t["text"] for t in drawn["texts"]} >= {"rank", "impressions", "head | torso", "torso | tail", "1", "10", "100"}
        assert_labels_apart_and_inside(drawn)
        assert drawn["svg"]["right"] <= viewport["width"]


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=["1366", "390"])
def test_the_heat_map_starts_right_under_its_heading_and_rater_names_stay_inside_their_charts(demo, live_server, browser, viewport):
    round = Round.objects.get(name=ROUND)
    with fresh_page(browser, viewport=viewport) as page:
        log_in(page, live_server, "lead", DEMO_PASSWORD)
        page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/rounds/{round.uuid}/agreement/")
        heading = page.get_by_role("heading", name="Rater pairs").bounding_box()
        heatmap = page.get_by_role("img", name="Cohen's kappa")
        first_cell = heatmap.locator("rect").first.bounding_box()
        assert first_cell["y"] - (heading["y"] + heading["height"]) < 60  # it was ~240 px: a 110-unit margin, stretched
        names = heatmap.evaluate(TEXT_BOXES.replace(":scope > text", "text.row-name, text.column-name"))
        assert_labels_apart_and_inside(names)
        assert_labels_apart_and_inside(page.get_by_role("img", name="Share of each grade per rater").evaluate(TEXT_BOXES))
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
