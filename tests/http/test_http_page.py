"""The web page over a real socket: its shell and assets, public even behind a token, with a
strict content policy; the server's own details and the markdown route behind the guard."""

from __future__ import annotations

import httpx
import pytest
from httpkit import served

from acp_memory import __version__
from acp_memory.config import Config

pytestmark = pytest.mark.anyio


async def test_the_page_and_its_assets_are_served_with_a_strict_policy(paths):
    async with served(Config(), paths) as api:
        page = await api.client.get("/")
        script = await api.client.get("/static/app.js")
        style = await api.client.get("/static/app.css")
        missing = await api.client.get("/static/nothing.js")
        posted = await api.client.post("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f"acp-memory <small>{__version__}</small>" in page.text
    assert "Settings → Long-term memory" in page.text and "${VAR}" in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "connect-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert script.status_code == 200 and script.headers["content-type"].startswith(
        "text/javascript"
    )
    assert "'use strict'" in script.text
    assert style.status_code == 200 and "prefers-color-scheme: dark" in style.text
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert posted.status_code == 404  # only GET is answered by the page


async def test_behind_a_token_the_page_loads_but_its_data_needs_the_token(paths):
    async with served(Config(), paths, token="s3cret") as api:
        url = str(api.client.base_url)
        async with httpx.AsyncClient(base_url=url) as stranger:
            page = await stranger.get("/")
            asset = await stranger.get("/static/app.js")
            data = await stranger.get("/coddy/server")
        allowed = await api.client.get("/coddy/server")
    assert page.status_code == 200 and asset.status_code == 200
    assert data.status_code == 401
    assert allowed.status_code == 200


async def test_the_server_says_where_new_sessions_start(paths):
    async with served(Config(), paths) as api:
        info = (await api.client.get("/coddy/server")).json()
    assert info == {
        "object": "server",
        "version": __version__,
        "cwd": str(paths.cwd),
        "defaultModel": "offline/default",
    }


async def test_the_markdown_route_answers_safe_html(paths):
    async with served(Config(), paths) as api:
        resp = await api.client.post(
            "/coddy/markdown", json={"text": "# Hi\n<script>x</script> [a](javascript:y)"}
        )
        bad = await api.client.post("/coddy/markdown", json={"markdown": "x"})
    assert resp.json() == {
        "object": "markdown",
        "html": "<h1>Hi</h1>\n<p>&lt;script&gt;x&lt;/script&gt; [a](javascript:y)</p>",
    }
    assert bad.status_code == 400 and "text" in bad.json()["error"]["message"]


async def test_the_history_script_is_served_and_loaded_before_the_page_script(paths):
    async with served(Config(), paths) as api:
        page = (await api.client.get("/")).text
        script = await api.client.get("/static/history.js")
    assert script.status_code == 200 and "'use strict'" in script.text
    assert script.headers["content-type"].startswith("text/javascript")
    # app.js calls history.js's functions as it starts: history.js must be there first.
    assert page.index('src="/static/history.js"') < page.index('src="/static/app.js"')
