"""webui/markdown.py: a note's markdown as HTML with nothing of the note's own markup."""

from __future__ import annotations

import pytest

from acp_memory.httpserver.webui.markdown import render


def test_headings_lists_code_and_emphasis_are_marked_up():
    note = (
        "# Decisions ##\n\nWe use **SQLite** and _never_ `rm -rf`.\nSecond line.\n\n"
        "- one\n- *two*\n  continued\n1. first\n2) second\n\n"
        "```python\nx = '<b>'\n```\n###### small"
    )
    assert render(note) == (
        "<h1>Decisions</h1>\n"
        "<p>We use <strong>SQLite</strong> and <em>never</em> <code>rm -rf</code>.\n"
        "Second line.</p>\n"
        "<ul><li>one</li><li><em>two</em>\ncontinued</li></ul>\n"
        "<ol><li>first</li><li>second</li></ol>\n"
        "<pre><code>x = &#x27;&lt;b&gt;&#x27;</code></pre>\n"
        "<h6>small</h6>"
    )


def test_a_link_to_an_http_address_is_a_link_and_its_address_is_escaped():
    html = render('[the docs](https://example.com/a?b=1&c="2") and snake_case_name')
    assert html == (
        '<p>[the docs](https://example.com/a?b=1&amp;c=&quot;2&quot;) and snake_case_name</p>'
    )
    assert render("[docs](HTTP://example.com/x?a=1&b=2)") == (
        '<p><a href="HTTP://example.com/x?a=1&amp;b=2" rel="noopener noreferrer nofollow">'
        "docs</a></p>"
    )


@pytest.mark.parametrize(
    "note",
    [
        "[click](javascript:alert(1))",
        "[click](data:text/html,<script>alert(1)</script>)",
        "[click](//evil.example/x)",
        "[click](vbscript:msgbox)",
    ],
)
def test_a_link_to_any_other_scheme_stays_text(note):
    assert "<a" not in render(note)


@pytest.mark.parametrize(
    "note",
    [
        "<script>alert(1)</script>",
        '<img src=x onerror="alert(1)">',
        "# <iframe src=//evil>",
        "- <b onclick=x>item</b>",
        "`<script>`",
        "**<svg onload=alert(1)>**",
        "[<script>x</script>](https://example.com)",
        "```\n</code></pre><script>x</script>\n```",
    ],
)
def test_no_tag_of_the_note_reaches_the_page(note):
    html = render(note)
    for tag in ("<script", "<img", "<iframe", "<svg", "<b ", "</code></pre><"):
        assert tag not in html
    assert "&lt;" in html


def test_unclosed_markers_are_text():
    assert render("**bold and `code and [link](") == (
        "<p>**bold and `code and [link](</p>"
    )
