"""A stand-in embeddings server for the benchmarks: OpenAI's POST /v1/embeddings on loopback.

Run: .venv/bin/python bench/hash_embeddings.py [--dimensions 384]
Prints its base URL (http://127.0.0.1:<port>/v1) on the first line, then serves until killed.
A vector is the text's word stems hashed into `dimensions` signed buckets: no meaning at all,
but real HTTP, real JSON and the vector sizes of a small model, so the cost of the fused search
path (the query's round trip, the matrix, the fusion) can be measured with no model at hand.
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import zlib
from typing import Any

import anyio
import uvicorn

from acp_memory.text.analyze import analyze, tokens


def vector(text: str, dimensions: int) -> list[float]:
    out = [0.0] * dimensions
    for token in tokens(text):
        for stem in analyze(token).stems:
            digest = zlib.crc32(stem.encode())
            out[digest % dimensions] += 1.0 if digest & 0x80000000 else -1.0
    norm = math.sqrt(sum(x * x for x in out)) or 1.0
    return [x / norm for x in out]


def app(dimensions: int) -> Any:
    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body or b"{}")
        texts = request.get("input", [])
        size = request.get("dimensions") or dimensions
        data = [{"object": "embedding", "index": i, "embedding": vector(t, size)}
                for i, t in enumerate(texts)]
        payload = json.dumps({"object": "list", "data": data, "model": request.get("model")})
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload.encode()})

    return asgi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dimensions", type=int, default=384)
    args = parser.parse_args()
    sock = socket.socket()
    # Accepted sockets inherit it: without it, a response sent in two writes waits 40 ms
    # for the client's delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    server = uvicorn.Server(uvicorn.Config(app(args.dimensions), log_level="warning"))
    anyio.run(server.serve, [sock])


if __name__ == "__main__":
    main()
