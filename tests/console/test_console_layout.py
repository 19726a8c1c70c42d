"""Issue 42, item 5 and the first run on a phone: the layout at 390 and 1280 px, light and dark;
the skip links; how many Tabs it takes to reach a card; the placeholder's contrast."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.console.conftest import Served, Shots
from tests.console.steps import confirm, open_console, paused_session, send

PAYMENT = "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117."


def test_details_on_a_phone_keep_the_card_on_screen(served: Served, browser, shots: Shots):
    paused = paused_session(served, PAYMENT, app="pay", agent="paymentsAgent")
    page = browser.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    open_console(page, served, app="pay", agent="paymentsAgent", session=paused["session_id"])
    card = page.locator(".card")
    card.locator(".card-details summary").click()
    expect(card.locator(".json").first).to_be_visible()
    card.scroll_into_view_if_needed()
    shots(page, "details-open")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    for part in (".card", ".card-summary", ".card-expiry", ".card-details .json"):
        box = card.locator(part).first.bounding_box() if part != ".card" else card.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (part, box)
    deny = card.get_by_role("button", name="Deny…")
    box = deny.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390


def test_the_wheel_over_an_open_form_never_pushes_the_top_bar_off_screen(served: Served, browser, shots: Shots):
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 640})
    open_console(page, served, app="pay")
    send(page, PAYMENT)
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    send(page, "\n".join(f"line {i}" for i in range(12)))  # kept, with a notice: the pause waits
    page.get_by_role("button", name="Cancel it to write something else").click()  # a form above the log
    card.get_by_role("button", name="Edit input").click()  # and one in the card
    form = card.locator("form[aria-label^='Edit']")
    expect(form).to_be_visible()
    box = form.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + 40, min(box["y"] + 40, 600))
    for _ in range(8):
        page.mouse.wheel(0, 600)
        page.wait_for_timeout(50)
    page.wait_for_timeout(200)
    top = page.locator("#app .topbar").bounding_box()
    assert top is not None and top["y"] == 0, top
    assert page.evaluate("document.scrollingElement.scrollTop") == 0
    shots(page, "wheel")


def test_skip_to_the_conversation_stays_in_the_session(served: Served, browser, shots: Shots):
    paused = paused_session(served, "Transfer $7 to carol.")
    page = browser.new_page()
    open_console(page, served, agent="bankingAgent", session=paused["session_id"])
    expect(page.locator(".card")).to_have_attribute("data-state", "open")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to the conversation")
    expect(skip).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    expect(page.locator("#conv-title")).to_have_text(f"Session {paused['session_id'][:12]}…")
    assert paused["session_id"] in page.url
    expect(page.locator(".card")).to_have_count(1)
    shots(page, "skipped")


def test_few_tabs_reach_the_first_card(served: Served, browser):
    for i in range(4):
        paused_session(served, f"Transfer ${i + 1} to carol.")
    paused = paused_session(served, "Transfer $9 to zoe.")
    page = browser.new_page()
    open_console(page, served, agent="bankingAgent", session=paused["session_id"])
    expect(page.locator(".card")).to_have_attribute("data-state", "open")
    presses = 0
    while presses < 24 and not page.evaluate("!!document.activeElement.closest('.card')"):
        page.keyboard.press("Tab")
        presses += 1
    assert presses <= 10, presses  # the conversation comes before the lists (it took 24)
    page.reload()  # or the skip link: Tab, Tab, Enter
    expect(page.locator(".card")).to_have_attribute("data-state", "open")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to what waits for you")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".card")).to_be_focused()


def test_the_placeholder_is_readable_in_both_schemes(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    box = page.get_by_label("Message", exact=True)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        ratio = box.evaluate(
            """(el) => {
                const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
                const lum = ([r, g, b]) => {
                  const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
                  return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
                };
                const ph = getComputedStyle(el, '::placeholder');
                const fg = rgb(ph.color), bg = rgb(getComputedStyle(el).backgroundColor);
                const alpha = (fg.length > 3 ? fg[3] : 1) * Number(ph.opacity || 1);
                const mixed = [0, 1, 2].map((i) => fg[i] * alpha + bg[i] * (1 - alpha));
                const [hi, lo] = [lum(mixed), lum(bg)].sort((x, y) => y - x);
                return (hi + 0.05) / (lo + 0.05);
            }"""
        )
        assert ratio >= 4.5, (scheme, ratio)
        shots(page, f"placeholder-{scheme}")


def test_on_a_phone_the_conversation_and_its_approve_button_come_first(served: Served, browser, shots: Shots):
    for i in range(3):
        paused_session(served, f"Transfer ${i + 1} to carol.")  # a long inbox and recent list
    paused = paused_session(served, "Transfer $700 to savings.")
    page = browser.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    open_console(page, served, agent="bankingAgent", session=paused["session_id"])
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    approve = card.get_by_role("button", name="Approve", exact=True)
    top = approve.evaluate("(e) => e.getBoundingClientRect().top + window.scrollY")
    assert top < 844, f"the Approve button is {top:.0f} px down the page"
    shots(page, "phone")
    approve.click()
    confirm(page, card, "approve")
    expect(card).to_have_attribute("data-state", "answered")
    expect(card.locator(".card-approval")).to_have_count(0)  # no yellow "Needs an answer" box left
    expect(card).not_to_contain_text("Needs an answer")
    shots(page, "phone-approved")
