"""A progress bar redrawn in place on a terminal's stderr; off a terminal, nothing at all."""

from __future__ import annotations

from typing import TextIO

from acp_memory.memory.index.indexes import ClosedOnExit

_CLEAR_LINE = "\r\x1b[2K"
_WIDTH = 30


class ProgressBar(ClosedOnExit):
    """`bar(done, total)` redraws `label [####......] done/total` on a terminal (a log or a
    pipe would keep every frame, so there it writes nothing); leaving the block clears it, so
    the line after it starts clean. `total` is the last total it was given."""

    def __init__(self, label: str, out: TextIO) -> None:
        self.label = label
        self.out = out
        self.terminal = out.isatty()
        self._drawn = False
        self.total = 0

    def __call__(self, done: int, total: int) -> None:
        self.total = total
        if not self.terminal or total <= 0:
            return
        filled = _WIDTH * min(done, total) // total
        self.out.write(f"{_CLEAR_LINE}{self.label} [{'#' * filled}{'.' * (_WIDTH - filled)}] "
                       f"{done}/{total}")
        self.out.flush()
        self._drawn = True

    def close(self) -> None:
        """Clear the bar (the end of a `with` block does)."""
        if self._drawn:
            self.out.write(_CLEAR_LINE)
            self.out.flush()
            self._drawn = False
