"""A note's markdown as safe HTML: headings, lists, fenced and inline code, emphasis, and links
to http(s) addresses; everything else is shown as the text it is.

Every piece of the note is HTML-escaped on its way out, so no tag, attribute or script of the
note's own ever reaches the page; a link to any other scheme (javascript:, data:) stays text.
"""

from __future__ import annotations

import re
from html import escape

_HEADING = re.compile(r"(#{1,6})[ \t]+(.*)")
_BULLET = re.compile(r"[ \t]*[-*+][ \t]+(.*)")
_NUMBERED = re.compile(r"[ \t]*\d{1,9}[.)][ \t]+(.*)")
_FENCE = re.compile(r"[ \t]*(```|~~~)")
# Spans are bounded, so that a line of unclosed markers costs a bounded scan per marker.
_INLINE = re.compile(
    r"`(?P<code>[^`\n]{1,500})`"
    r"|\[(?P<label>[^\]\n]{1,500})\]\((?P<url>[^)\s]{1,2000})\)"
    r"|\*\*(?P<strong>[^*\n]{1,500})\*\*|__(?P<strong2>[^_\n]{1,500})__"
    r"|\*(?P<em>[^*\n]{1,500})\*|(?<!\w)_(?P<em2>[^_\n]{1,500})_(?!\w)"
)
_SAFE_URL = re.compile(r"https?://[^\s<>\"'`\\]+", re.IGNORECASE)


def render(text: str) -> str:
    """The note as HTML (block elements, one per line)."""
    out: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    list_tag = ""

    def close_paragraph() -> None:
        if paragraph:
            out.append(f"<p>{inline(chr(10).join(paragraph))}</p>")
            paragraph.clear()

    def close_list() -> None:
        nonlocal list_tag
        if items:
            body = "".join(f"<li>{inline(item)}</li>" for item in items)
            out.append(f"<{list_tag}>{body}</{list_tag}>")
            items.clear()
        list_tag = ""

    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        fence = _FENCE.match(line)
        if fence:
            close_paragraph()
            close_list()
            code: list[str] = []
            while i < len(lines) and not lines[i].strip().startswith(fence.group(1)):
                code.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end of the note)
            out.append(f"<pre><code>{escape(chr(10).join(code))}</code></pre>")
            continue
        if not line.strip():
            close_paragraph()
            close_list()
            continue
        if heading := _HEADING.fullmatch(line):
            close_paragraph()
            close_list()
            level = len(heading.group(1))
            out.append(f"<h{level}>{inline(_heading_text(heading.group(2)))}</h{level}>")
            continue
        item = _BULLET.fullmatch(line) or _NUMBERED.fullmatch(line)
        if item:
            close_paragraph()
            tag = "ul" if item.re is _BULLET else "ol"
            if tag != list_tag:
                close_list()
                list_tag = tag
            items.append(item.group(1))
            continue
        if items:
            items[-1] += "\n" + line.strip()  # a continuation line of the item
            continue
        paragraph.append(line)
    close_paragraph()
    close_list()
    return "\n".join(out)


def _heading_text(rest: str) -> str:
    """A heading's text without the closing #s ("## Title ##")."""
    text = rest.rstrip(" \t")
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        text = bare.rstrip(" \t")
    return text


def inline(text: str) -> str:
    """One block's text: code, links and emphasis marked up, the rest escaped."""
    out: list[str] = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(escape(text[pos : m.start()]))
        pos = m.end()
        if m.group("code") is not None:
            out.append(f"<code>{escape(m.group('code'))}</code>")
        elif m.group("url") is not None:
            url = m.group("url")
            if _SAFE_URL.fullmatch(url):
                out.append(
                    f'<a href="{escape(url)}" rel="noopener noreferrer nofollow">'
                    f"{inline(m.group('label'))}</a>"
                )
            else:
                out.append(escape(m.group()))
        elif (strong := m.group("strong") or m.group("strong2")) is not None:
            out.append(f"<strong>{inline(strong)}</strong>")
        else:
            out.append(f"<em>{inline(m.group('em') or m.group('em2'))}</em>")
    out.append(escape(text[pos:]))
    return "".join(out)
