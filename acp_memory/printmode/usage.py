"""Token counts of a turn: the meter lives with the providers (llm/usage.py), where every
surface that reports usage (print mode, /v1) reaches it."""

from __future__ import annotations

from acp_memory.llm.usage import UsageMeter

__all__ = ["UsageMeter"]
