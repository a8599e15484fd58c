"""The baseline for bench/wire.py: a minimal echo agent on the official ACP Python SDK.

session/prompt with text "N" streams N agent_message_chunk updates, then ends the turn.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from acp import run_agent, text_block, update_agent_message
from acp.schema import (
    AgentCapabilities,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
)


class EchoAgent:
    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=1, agent_capabilities=AgentCapabilities(load_session=False)
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="sess_" + uuid.uuid4().hex[:24])

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        count = int(prompt[0].text)
        for i in range(count):
            await self.conn.session_update(session_id, update_agent_message(text_block(f"w{i} ")))
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(EchoAgent()))  # type: ignore[arg-type]
