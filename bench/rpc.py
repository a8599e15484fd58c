"""Just enough of an ACP client for the benches: raw JSON-RPC lines, no SDK in the timing."""

from __future__ import annotations

import asyncio
import json
from typing import Any


class RpcClient:
    """Send requests, skip notifications, read the answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.next_id = 0

    async def send(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        line = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.writer.write(json.dumps(line).encode() + b"\n")
        await self.writer.drain()
        return self.next_id

    async def answer(self, msg_id: int) -> Any:
        while True:
            message = json.loads(await self.reader.readline())
            if message.get("id") == msg_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        return await self.answer(await self.send(method, params))
