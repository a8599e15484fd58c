"""stdout for a command whose reader may leave early (`acp-memory demo | head`)."""

from __future__ import annotations

from typing import TextIO


class Stdout:
    """A text stream that flushes every write and, once its reader has gone, drops the rest:
    the command goes on to its usual end and exit code, with no "Broken pipe" line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.out.write(text)
                self.out.flush()
            except BrokenPipeError:
                # The failed flush dropped its buffer: nothing is left for the exit's flush.
                self.gone = True
        return len(text)

    def flush(self) -> None:
        """Every write is flushed already (print(flush=True) calls this)."""
        return None
