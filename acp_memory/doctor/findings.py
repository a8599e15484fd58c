"""What `acp-memory doctor` finds: one line, an error, a warning or an ok."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["error", "warning", "ok"]


@dataclass(frozen=True)
class Finding:
    level: Level
    text: str

    def __str__(self) -> str:
        return f"{self.level}: {self.text}"
