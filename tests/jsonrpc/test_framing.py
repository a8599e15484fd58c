from __future__ import annotations

import anyio
import pytest

from acp_memory.jsonrpc.framing import OversizedLine, read_lines

pytestmark = pytest.mark.anyio


async def _lines(chunks: list[bytes], limit: int = 1 << 20) -> list[bytes | OversizedLine]:
    send, receive = anyio.create_memory_object_stream[bytes](len(chunks) + 1)
    for c in chunks:
        send.send_nowait(c)
    send.close()

    class _Bytes(anyio.abc.ByteReceiveStream):
        async def receive(self, max_bytes: int = 65536) -> bytes:
            try:
                return await receive.receive()
            except anyio.EndOfStream:
                raise

        async def aclose(self) -> None:
            await receive.aclose()

    return [line async for line in read_lines(_Bytes(), limit)]


async def test_lines_split_across_chunks_are_joined_whole():
    assert await _lines([b'{"a":', b'1}\n{"b"', b":2}\n"]) == [b'{"a":1}', b'{"b":2}']


async def test_several_lines_in_one_chunk_come_out_in_order():
    assert await _lines([b"one\ntwo\nthree\n"]) == [b"one", b"two", b"three"]


async def test_a_last_line_without_newline_is_still_delivered():
    assert await _lines([b"x\ny"]) == [b"x", b"y"]


async def test_an_oversized_line_is_reported_by_size_and_the_next_line_survives():
    out = await _lines([b"a" * 50, b"a" * 60 + b"\nok\n"], limit=100)
    assert out == [OversizedLine(110), b"ok"]


async def test_a_line_exactly_at_the_limit_is_kept():
    assert await _lines([b"a" * 100 + b"\n"], limit=100) == [b"a" * 100]
