"""The memory history on the web page, in headless Chromium against a real `acp-memory http`:
a note's changes undone (and undone anyway over a later change), a deleted note restored from
Recently deleted, and changes held for approval approved or rejected."""

from __future__ import annotations

import pytest

pytest.importorskip("selenium", reason="selenium is in the test extra: pip install '.[test]'")

from selenium.webdriver.support import expected_conditions
from test_web_page import edit_and_save
from webpage import Page

from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.states import Captured

pytestmark = pytest.mark.browser


def actions(page: Page, css: str) -> list[str]:
    return [li.get_attribute("data-action") for li in page.all(f"{css} .change")]


def new_note(page: Page, name: str) -> None:
    page.open_folder("workspace")
    page.one("#new-name").send_keys(name)
    page.one("#create-form button[value=note]").click()
    page.wait(lambda: page.text("#tree-message") == f"Created workspace:{name}.", "the note")


def test_a_notes_history_undoes_a_save_and_undoes_anyway_over_a_later_change(page):
    page.open()
    new_note(page, "port")
    note = page.site.workspace_notes / "port.md"
    edit_and_save(page, "The API listens on 8080.\n")
    page.wait(lambda: actions(page, "#history-list") == ["update", "create"], "two changes")
    update = page.all("#history-list .change")[0]
    assert update.find_element("css selector", ".summary").text == "+1 -1 lines"
    assert update.find_element("css selector", ".source").text.startswith("http")
    assert update.find_element("css selector", "time").text[:2] == "20"
    page.shot("history-1280")

    update.find_element("css selector", "button.undo").click()
    page.wait(lambda: actions(page, "#history-list") == ["undo", "update", "create"], "the undo")
    assert note.read_text() == "# port\n"
    assert page.one("#note-raw").get_attribute("textContent") == "# port\n"  # read again
    assert page.text("#history-message") == "Undid the update of workspace:port.md, 1 note back."

    page.all("#history-list .change")[2].find_element("css selector", "button.undo").click()
    conflict = page.wait(lambda: page.text("#history-list .conflict .message"), "the refusal")
    assert "workspace:port.md changed since (chg_" in conflict and "undoes anyway" in conflict
    assert note.exists()
    page.one("#history-list .conflict button.undo-anyway").click()
    page.wait(lambda: page.one("#note").get_attribute("hidden") is not None, "the note closed")
    assert not note.exists()
    assert page.text("#tree-message") == "Undid the create of workspace:port.md."
    assert page.script_errors() == []


def test_a_deleted_note_comes_back_from_recently_deleted(page):
    page.open()
    new_note(page, "gone-soon")
    note = page.site.workspace_notes / "gone-soon.md"
    page.node("gone-soon.md").click()
    page.one("#delete-selected").click()
    alert = page.waiter.until(expected_conditions.alert_is_present())
    assert "Recently deleted" in alert.text
    alert.accept()
    page.wait(lambda: "workspace:gone-soon.md" in page.text("#deleted-list"), "the deleted note")
    assert not note.exists()
    item = page.all("#deleted-list .change")[0]
    assert item.get_attribute("data-action") == "delete"
    item.find_element("css selector", "button.restore").click()
    page.wait(lambda: page.text("#trust-message").startswith("Undid the delete"), "the restore")
    assert note.read_text() == "# gone-soon\n"
    page.node("gone-soon.md")  # back in the tree
    assert "gone-soon" not in page.text("#deleted-list")
    assert page.script_errors() == []


def test_changes_held_for_approval_are_approved_or_rejected(page):
    page.open()
    sid = page.driver.execute_script(
        "return new URLSearchParams(location.hash.slice(1)).get('session')")
    journal = Journal(page.site.home / "history" / "journal.sqlite3")
    source = ChangeSource("memory_run", sid, "bg_7", "remember the port")
    try:
        for name, text in [("held.md", b"Approve me.\n"), ("dropped.md", b"Reject me.\n")]:
            journal.hold(("project", page.site.workspace_notes, name), "create", Captured(None),
                         Captured.note(text), source)
    finally:
        journal.close()
    page.open()
    page.wait(lambda: page.one("#pending").is_displayed(), "the pending changes")
    items = page.all("#pending-list .change")
    assert [i.find_element("css selector", ".change-path").text for i in items] == [
        "workspace:held.md", "workspace:dropped.md",
    ]
    assert 'memory_run bg_7 · “remember the port”' in items[0].text
    page.shot("pending-1280")
    page.viewport(390)
    page.shot("pending-390")
    assert page.driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
    )
    page.viewport(1280)
    items[0].find_element("css selector", "button.approve").click()
    page.wait(lambda: page.text("#trust-message") == "Approved: create of workspace:held.md.",
              "the approval")
    assert (page.site.workspace_notes / "held.md").read_text() == "Approve me.\n"
    page.one("#pending-list .change button.reject").click()
    page.wait(lambda: not page.one("#pending").is_displayed(), "no change left to approve")
    assert page.text("#trust-message") == "Rejected: workspace:dropped.md is unchanged."
    assert not (page.site.workspace_notes / "dropped.md").exists()
    assert page.script_errors() == []


def test_a_held_merge_shows_its_reason_and_other_note_and_is_approved_whole(page):
    page.open()
    sid = page.driver.execute_script(
        "return new URLSearchParams(location.hash.slice(1)).get('session')")
    notes = page.site.workspace_notes
    kept, merged_away = notes / "deploy.md", notes / "deploy-old.md"
    kept.write_text("Deploy with scripts/ship.sh.\n")
    merged_away.write_text("Deploy with scripts/ship.sh.\nShip on Fridays.\n")
    merged = b"Deploy with scripts/ship.sh.\nShip on Fridays.\n"
    journal = Journal(page.site.home / "history" / "journal.sqlite3")
    try:  # as `/memory tidy` holds a merge in this session
        journal.hold(("project", notes, "deploy.md"), "update",
                     Captured.note(kept.read_bytes()), Captured.note(merged),
                     ChangeSource("tidy", sid), reason="both notes say how to deploy",
                     parts=[("deploy-old.md", "delete", Captured.note(merged_away.read_bytes()),
                             Captured(None))])
    finally:
        journal.close()
    page.open()
    page.wait(lambda: page.one("#pending").is_displayed(), "the held merge")
    (item,) = page.all("#pending-list .change")
    assert item.find_element("css selector", ".change-path").text == "workspace:deploy.md"
    assert item.find_element("css selector", ".change-reason").text == (
        "Why: both notes say how to deploy")
    also = item.find_elements("css selector", ".change-also li")
    assert [(li.get_attribute("data-action"), li.text) for li in also] == [
        ("delete", "delete workspace:deploy-old.md")]
    page.shot("pending-merge-1280")
    page.open_folder("workspace")
    page.node("deploy-old.md").click()  # the note merged away is the one open
    page.wait(lambda: "Ship on Fridays." in page.text("#note"), "the note open")
    item.find_element("css selector", "button.approve").click()
    page.wait(lambda: page.text("#trust-message") == "Approved: update of workspace:deploy.md.",
              "the approval")
    assert kept.read_bytes() == merged and not merged_away.exists()
    assert not page.one("#pending").is_displayed()
    page.wait(lambda: page.one("#note").get_attribute("hidden") is not None, "the note closed")
    assert "deploy-old.md" not in page.text("#tree")
    assert page.script_errors() == []
