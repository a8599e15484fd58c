"""Test doubles for model providers: fake OpenAI and Anthropic servers on loopback.

    from fakes.openai_server import FakeOpenAI          # or fakes.anthropic_server.FakeAnthropic
    from fakes.script import call, error, text, tool_calls

    async with FakeOpenAI(default=text("ok")) as server:
        server.script(tool_calls(call("read", {"path": "a.md"}, chunks=3)), text("Done", chunks=2))
        ...  # api_base = server.base_url
        server.requests          # every request: method, path, headers, body, json, messages

Real HTTP/1.1 with keep-alive and real SSE on 127.0.0.1:<free port>, inside the test's event loop.
fakes.script documents every reply and fault; fakes.llamacpp starts a real tiny model;
fakes.embeddings_server.FakeEmbeddings serves POST /v1/embeddings with vectors a test chooses;
fakes.mcp_servers holds real MCP servers (stdio, streamable HTTP, SSE) written with the mcp SDK.
"""
