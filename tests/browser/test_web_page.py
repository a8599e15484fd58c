"""The web page in headless Chromium against a real `acp-memory http`: the notes of both
roots browsed, edited, guarded and searched; a memory run watched from its card to its
read-only transcript; a setting saved into the config file. Screenshots at 390 and 1280
pixels go to test-artifacts/browser/."""

from __future__ import annotations

import re

import pytest
import yaml

pytest.importorskip("selenium", reason="selenium is in the test extra: pip install '.[test]'")

from selenium.webdriver.common.alert import Alert
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions
from webpage import CONFIG, Page

pytestmark = pytest.mark.browser

SECRET = "sk-proj-" + "A1b2C3d4" * 5


def edit_and_save(page: Page, text: str, *, typed: bool = True) -> None:
    page.one("#edit-note").click()
    editor = page.one("#note-text")
    editor.clear()
    if typed:
        editor.send_keys(text)
    else:  # a long text, faster pasted than typed
        page.driver.execute_script("arguments[0].value = arguments[1]", editor, text)
    page.one("#note-editor button[type=submit]").click()


def test_both_roots_are_browsed_and_a_note_is_read_rendered_and_raw(page):
    page.open()
    page.node("workspace").send_keys(Keys.ENTER)  # the tree is buttons: keys open it too
    page.wait(lambda: page.node("workspace").get_attribute("aria-expanded") == "true", "a root")
    page.open_note("api", "auth.md")
    assert page.text("#note-path") == "workspace:api/auth.md"
    rendered = page.one("#note-rendered")
    assert rendered.find_element("css selector", "h1").text == "Auth"
    links = rendered.find_elements("css selector", "a")
    assert [a.get_attribute("href") for a in links] == ["https://example.com/auth?a=1&b=2"]
    assert "[click](javascript:window.__pwned=1)" in rendered.text
    assert '<img src=x onerror="window.__pwned=1">' in rendered.text
    code = rendered.find_element("css selector", "pre").text
    assert code == "<script>window.__pwned = 1</script>"
    assert page.driver.execute_script("return window.__pwned") is None
    page.one("#show-raw").click()
    assert page.one("#note-raw").get_attribute("textContent") == (
        page.site.workspace_notes / "api" / "auth.md"
    ).read_text()
    page.open_note("global", "fruit.md")
    assert page.text("#note-path") == "global:fruit.md"
    page.shot("notes-1280")
    page.viewport(390)
    page.shot("notes-390")
    assert page.driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
    )


def test_an_edited_note_is_saved_to_disk(page):
    page.open()
    page.open_note("workspace", "todo.md")
    edit_and_save(page, "# Todo\n\n- ship the page\n- write the tests\n")
    page.wait(lambda: page.text("#note-message") == "Saved workspace:todo.md.", "the save")
    assert (page.site.workspace_notes / "todo.md").read_text() == (
        "# Todo\n\n- ship the page\n- write the tests\n"
    )
    items = page.all("#note-rendered li")
    assert [li.text for li in items] == ["ship the page", "write the tests"]


def test_a_secret_comes_back_redacted_and_the_page_says_so(page):
    page.open()
    page.open_folder("workspace")
    page.one("#new-name").send_keys("keys")
    page.one("#create-form button[value=note]").click()
    page.wait(lambda: page.text("#tree-message") == "Created workspace:keys.", "the new note")
    assert page.text("#note-path") == "workspace:keys.md" and page.one("#note-text").is_displayed()
    edit_and_save(page, f'openai: api_key = "{SECRET}"\n')
    page.wait(lambda: "redacted" in page.text("#note-message"), "the redaction notice")
    assert "openai_key" in page.text("#note-message")
    on_disk = (page.site.workspace_notes / "keys.md").read_text()
    assert SECRET not in on_disk and "[REDACTED:openai_key]" in on_disk
    assert not page.one("#note-text").is_displayed()
    assert "[REDACTED:openai_key]" in page.text("#note-rendered")
    assert SECRET not in page.driver.page_source


def test_a_refused_save_keeps_the_text_in_the_editor_with_the_reason(page):
    page.open()
    page.open_note("workspace", "todo.md")
    before = (page.site.workspace_notes / "todo.md").read_text()
    long_text = "# Todo\n\n" + "- a line that makes the note too long\n" * 20
    edit_and_save(page, long_text, typed=False)
    page.wait(lambda: page.text("#note-message").startswith("Not saved:"), "the refusal")
    assert "over the limit of 600 bytes" in page.text("#note-message")
    assert page.one("#note-text").is_displayed()
    assert page.one("#note-text").get_attribute("value") == long_text
    assert (page.site.workspace_notes / "todo.md").read_text() == before


def test_a_folder_is_made_and_a_note_deleted_after_a_confirmation_never_a_root(page):
    page.open()
    page.open_folder("workspace")
    assert not page.one("#delete-selected").is_enabled()  # a root is never deleted
    page.one("#new-name").send_keys("plans")
    page.one("#create-form button[value=folder]").click()
    page.wait(lambda: page.text("#tree-message") == "Created workspace:plans.", "the folder")
    assert (page.site.workspace_notes / "plans").is_dir()
    page.open_folder("plans")
    page.one("#new-name").send_keys("q3")
    page.one("#create-form button[value=note]").click()
    page.wait(lambda: page.text("#tree-message") == "Created workspace:plans/q3.", "the note")
    assert page.text("#note-path") == "workspace:plans/q3.md"
    note = page.site.workspace_notes / "plans" / "q3.md"
    assert note.read_text() == "# q3\n"
    page.node("q3.md").click()
    page.one("#delete-selected").click()
    alert: Alert = page.waiter.until(expected_conditions.alert_is_present())
    assert "workspace:plans/q3.md" in alert.text
    alert.dismiss()
    assert note.exists()
    page.one("#delete-selected").click()
    page.waiter.until(expected_conditions.alert_is_present()).accept()
    page.wait(lambda: page.text("#tree-message").startswith("Deleted"), "the deletion")
    assert not note.exists()
    # The tree is listed again after the deletion: read it within a wait, which reads a
    # re-rendered listing again rather than failing on a node it replaced.
    page.wait(
        lambda: all(b.text.split("\n")[0] != "q3.md" for b in page.all("#tree .node")),
        "q3.md to leave the tree",
    )
    assert page.one("#note").get_attribute("hidden") is not None


def test_a_search_over_both_roots_highlights_the_matches(page):
    page.open()
    search = page.one("#search-q")
    search.send_keys("favourite mango", Keys.ENTER)
    page.wait(lambda: page.all("#search-results .hit"), "the hits")
    hits = [b.text for b in page.all("#search-results .hit")]
    assert hits[0] == "global:fruit.md"
    marks = [m.text for m in page.all("#search-results .snippet mark")]
    assert marks[:2] == ["favourite", "mango"]
    page.all("#search-results .hit")[0].click()
    page.wait(lambda: page.text("#note-path") == "global:fruit.md", "the hit's note")


def test_a_memory_run_is_watched_from_its_card_to_its_read_only_transcript(page):
    page.open()
    page.one("#tasks-toggle").click()
    page.one("#prompt-text").send_keys("What is my favourite fruit?\nThe mango, I think.")
    page.one("#send").click()
    page.wait(lambda: page.text("#status") == "Working with memory", "the status line")
    card = page.wait(lambda: next(iter(page.all("#tasks-running .card")), None), "a running card")
    assert card.find_element("css selector", ".tag").text == "memory"
    assert card.find_element("css selector", ".card-title").text == "What is my favourite fruit?"
    first = card.find_element("css selector", ".elapsed").text
    page.wait(
        lambda: card.get_attribute("data-status") == "running"
        and card.find_element("css selector", ".elapsed").text != first,
        "the elapsed time to tick while the run runs",
    )
    page.shot("drawer-running-1280")
    page.wait(lambda: card.get_attribute("data-status") == "succeeded", "the run to finish")
    page.wait(lambda: page.text("#status").startswith("memory: recalled in"), "the settle line")
    assert card.find_element("css selector", ".card-status").text == "succeeded"
    assert card in page.all("#tasks-finished .card")
    assert re.fullmatch(r"\d+\.\ds", card.find_element("css selector", ".elapsed").text)

    card.find_element("css selector", ".card-head").click()
    log = card.find_element("css selector", ".log")
    page.wait(lambda: "report delivered to the turn" in log.text, "the run's log")
    assert "memory_search" in log.text and "=== subagent report ===" in log.text
    cost = card.find_element("css selector", ".card-cost").text  # as the log's cost line
    assert re.fullmatch(r"cost: \d+ model calls?, \d+ tokens in, \d+ out, \d+\.\d s", cost)
    assert f"\n{cost}\n" in f"\n{log.text}\n"
    page.wait(lambda: "From memory:" in page.text("#transcript"), "the answer with memory")
    page.shot("drawer-finished-1280")

    card.find_element("css selector", "a").click()  # Show transcript
    page.wait(lambda: page.one("#transcript-banner").is_displayed(), "the child's transcript")
    assert re.fullmatch(
        r"Transcript of the memory run bg_\d+, read-only\.", page.text("#transcript-banner")
    )
    assert not page.one("#composer").is_displayed()
    assert page.one("#back-to-chat").is_displayed()
    tools = [s.text for s in page.all("#transcript .tool summary")]
    assert tools and tools[0].startswith("Memory Search")
    page.one("#drawer-close").click()
    page.shot("transcript-1280")
    page.viewport(390)
    page.shot("transcript-390")
    page.one("#back-to-chat").click()
    page.wait(lambda: page.one("#composer").is_displayed(), "the chat again")
    assert page.all("#transcript .msg.user")[0].text.startswith("You\nWhat is my favourite fruit?")
    page.one("#tasks-toggle").click()
    page.shot("drawer-390")


def test_wait_seconds_changed_in_settings_lands_in_the_config_file(page):
    page.open()
    page.one("#settings-open").click()
    form = page.wait(lambda: page.one("#settings").is_displayed() and page.one("#settings-form"),
                     "the settings dialog")
    assert page.text("#config-file") == str(page.site.config_file)
    wait = page.one("#s-wait")
    assert wait.get_attribute("value") == "20"
    prompt = page.one("#s-prompt")
    prompt.send_keys("Only deal with the notes.")
    assert page.text("#s-prompt-count") == "25 characters"
    page.one("#s-cap").clear()
    page.one("#s-cap").send_keys("10")
    assert page.text("#s-prompt-count").startswith("25 characters of 10: past the cap")
    page.one("#s-cap").clear()
    page.one("#s-cap").send_keys("0")
    page.shot("settings-1280")

    wait.clear()
    wait.send_keys("-1")
    form.find_element("css selector", "button[type=submit]").click()
    page.wait(lambda: page.text("#settings-message").startswith("Not saved:"), "the refusal")
    assert "memory.wait_seconds: Input should be greater than or equal to 0" in page.text(
        "#settings-message"
    )
    assert page.site.config_file.read_text() == CONFIG

    wait.clear()
    wait.send_keys("7")
    form.find_element("css selector", "button[type=submit]").click()
    page.wait(lambda: page.text("#settings-message").startswith("Saved to"), "the save")
    text = page.site.config_file.read_text()
    assert "  wait_seconds: 7      # the turn waits for the report\n" in text
    assert text.startswith("# The browser tests' config: these comments must survive")
    memory = yaml.safe_load(text)["memory"]
    assert memory["wait_seconds"] == 7
    assert memory["additional_prompt"] == "Only deal with the notes."
    assert "additional_prompt_max_chars" not in memory  # left at its default, left out
    page.viewport(390)
    page.shot("settings-390")


def test_the_page_is_light_or_dark_by_the_system_setting_and_keyboard_reachable(page):
    page.open(390, dark=True)
    dark = page.driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    page.shot("notes-390-dark")
    page.open(1280)
    light = page.driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert dark == "rgb(13, 17, 23)" and light == "rgb(255, 255, 255)"
    body = page.one("body")
    reached = []
    for _ in range(12):
        body.send_keys(Keys.TAB) if not reached else page.driver.switch_to.active_element.send_keys(
            Keys.TAB
        )
        active = page.driver.switch_to.active_element
        reached.append(active.tag_name)
        assert active.value_of_css_property("outline-style") == "solid"
    assert set(reached) <= {"a", "button", "input", "select", "textarea"}
    assert page.script_errors() == []
