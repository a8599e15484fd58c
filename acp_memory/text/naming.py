"""Flat note file names derived from titles."""

from __future__ import annotations

import hashlib
import unicodedata

MAX_NAME_CHARS = 80
MAX_NAME_BYTES = 160  # well under the usual 255-byte file-name limit, even for CJK titles


def _kept(ch: str) -> bool:
    # Letters, digits and combining marks of any script; marks keep Devanagari etc. readable.
    return unicodedata.category(ch)[0] in "LNM"


def name_from_title(title: str, suffix: str = ".md") -> str:
    """A file name from a title: letters and digits kept, other runs become '-', never empty."""
    text = unicodedata.normalize("NFC", title).lower()
    out: list[str] = []
    for ch in text:
        if _kept(ch):
            out.append(ch)
        elif out and out[-1] != "-":
            out.append("-")
    stem = "".join(out).strip("-")
    stem = _bounded(stem).rstrip("-")
    if not stem or not any(_kept(ch) and unicodedata.category(ch)[0] != "M" for ch in stem):
        # A title of only punctuation still needs a stable, distinct name.
        stem = "note-" + hashlib.sha1(title.encode("utf-8")).hexdigest()[:8]
    return stem + suffix


def _bounded(stem: str) -> str:
    stem = stem[:MAX_NAME_CHARS]
    while len(stem.encode("utf-8")) > MAX_NAME_BYTES:
        stem = stem[:-1]
    return stem
