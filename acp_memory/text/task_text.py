"""The one bound of a child's task text, for spawn_agent's children and memory runs alike: a
runaway prompt must not flood a child's context."""

from __future__ import annotations

TASK_TEXT_BYTES = 32 * 1024  # long enough for any real brief
_CUT_MARKER = "[acp-memory: the message was cut here, after {kept} of its {total} bytes of UTF-8]"


def cut_task_text(text: str, limit_bytes: int = TASK_TEXT_BYTES) -> str:
    """`text` cut at limit_bytes of UTF-8 on a character boundary, with a marker line saying
    so (the marker comes on top of the kept bytes); shorter text is returned as it is."""
    # surrogatepass: a lone surrogate from a JSON \ud800 escape must cost a cut, not a crash.
    head = text[: limit_bytes + 1].encode("utf-8", "surrogatepass")
    if len(head) <= limit_bytes:
        return text
    cut = limit_bytes
    while cut > 0 and head[cut] & 0xC0 == 0x80:  # never split a character's bytes
        cut -= 1
    kept = head[:cut].decode("utf-8", "surrogatepass")
    total = len(text.encode("utf-8", "surrogatepass"))
    return f"{kept}\n\n{_CUT_MARKER.format(kept=cut, total=total)}"
