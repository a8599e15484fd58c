"""Who may talk to the server, what it refuses to read, and the OpenAPI document, over a real
socket: the token rule off loopback, Host and Origin on loopback, body limits, malformed
requests, and every route documented."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import pytest
from fastapi.routing import APIRoute
from httpkit import BOUND_S, served

from acp_memory.config import Config
from acp_memory.config.models import HttpServerConfig
from acp_memory.httpserver.app import ROUTERS
from acp_memory.httpserver.security import Guard, bind_problem, is_loopback
from acp_memory.httpserver.serve import CannotServe, Listen, run_http

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token"
# The routes: each must be served and documented.
ROUTES = {
    ("post", "/coddy/sessions"), ("get", "/coddy/sessions"),
    ("get", "/coddy/sessions/{id}"), ("delete", "/coddy/sessions/{id}"),
    ("get", "/coddy/sessions/{id}/messages"), ("post", "/coddy/sessions/{id}/prompt"),
    ("post", "/coddy/sessions/{id}/cancel"), ("get", "/coddy/sessions/{id}/events"),
    ("get", "/coddy/sessions/{id}/memory/tree"), ("get", "/coddy/sessions/{id}/memory/file"),
    ("put", "/coddy/sessions/{id}/memory/file"), ("delete", "/coddy/sessions/{id}/memory/file"),
    ("post", "/coddy/sessions/{id}/memory/dir"),
    ("get", "/coddy/sessions/{id}/background-tasks"),
    ("get", "/coddy/sessions/{id}/background-tasks/{taskId}"),
    ("post", "/coddy/sessions/{id}/background-tasks/{taskId}/stop"),
    ("get", "/v1/models"), ("post", "/v1/chat/completions"),
}


def operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method, path) for path, ops in doc["paths"].items() for method in ops}


async def test_every_route_is_in_the_openapi_document(paths):
    async with served(Config(), paths) as api:
        doc = (await api.client.get("/openapi.json")).json()
        served_routes = {
            (method.lower(), route.path)
            for router in ROUTERS
            for route in router(api.server.agent).routes
            if isinstance(route, APIRoute)
            for method in route.methods
        }
    assert served_routes == operations(doc)
    assert ROUTES <= served_routes
    # Malformed requests are documented as the 400 they are, in the one error shape.
    prompt = doc["paths"]["/coddy/sessions/{id}/prompt"]["post"]["responses"]
    assert "422" not in prompt and prompt["400"]["content"]["application/json"]["schema"]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "my-server.lan"])
def test_a_bind_other_machines_can_reach_needs_a_token(host):
    assert not is_loopback(host)
    assert "auth_token" in (bind_problem(host, "") or "")
    assert bind_problem(host, TOKEN) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"])
def test_a_loopback_bind_needs_no_token(host):
    assert is_loopback(host) and bind_problem(host, "") is None


async def test_a_non_loopback_bind_refuses_to_start_without_a_token(paths):
    with pytest.raises(CannotServe, match="--auth-token"):
        async with served(Config(), paths, host="0.0.0.0"):
            pytest.fail("the server started")


def test_the_command_refuses_a_non_loopback_bind_without_a_token_in_one_line(paths):
    proc = subprocess.run(
        [sys.executable, "-m", "acp_memory", "http", "--home", str(paths.home),
         "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("acp-memory http: refusing to listen on 0.0.0.0 without a token")


def test_a_port_out_of_range_is_a_usage_error_in_one_line(paths, capsys):
    # 65536 must not slip through: the resolver wraps it to 0, a free port.
    listen = Listen.from_config(HttpServerConfig(), port=65536)
    assert "a port is 0 to 65535" in (listen.problem() or "")
    assert run_http(Config(), paths, port=-1) == 2
    assert capsys.readouterr().err == (
        "acp-memory http: --port -1: a port is 0 to 65535 (0 picks a free one)\n"
    )


async def test_with_a_token_every_route_refuses_a_request_without_it(paths):
    async with served(Config(), paths, host="0.0.0.0", token=TOKEN) as api:
        doc = (await api.client.get("/openapi.json")).json()
        sid = await api.new_session()
        # Another machine's name for the server is fine: the token is what counts.
        named = await api.client.get("/coddy/sessions", headers={"Host": "my-server.lan:1"})
        refused = []
        extra = [("get", "/openapi.json"), ("get", "/docs"), ("get", "/nope")]
        for method, path in [*sorted(operations(doc)), *extra]:
            url = path.replace("{id}", sid).replace("{taskId}", "bg_1")
            for auth in (None, "Bearer wrong", f"Basic {TOKEN}", TOKEN):
                headers = {"Authorization": auth} if auth else {}
                api.client.headers.pop("Authorization", None)
                resp = await api.client.request(method.upper(), url, headers=headers, json={})
                refused.append((method, path, auth, resp.status_code, resp.headers, resp.json()))
    assert named.status_code == 200
    assert len(refused) == 4 * (len(operations(doc)) + 3)
    for method, path, auth, status, headers, body in refused:
        assert status == 401, (method, path, auth)
        assert headers["www-authenticate"] == "Bearer"
        assert body["error"]["type"] == "authentication_error"
    assert not list((paths.sessions_dir / sid).glob("background/*"))  # nothing ran


HOSTS_AND_ORIGINS = [
    ({"Host": "evil.example:{port}"}, 403),
    ({"Host": "evil.example"}, 403),
    ({"Host": "127.0.0.1:1"}, 403),
    ({"Host": "127.0.0.1"}, 403),  # no port: 80, not ours
    ({"Host": "localhost:{port}"}, 200),
    ({"Origin": "http://evil.example"}, 403),
    ({"Origin": "http://127.0.0.1:1"}, 403),
    ({"Origin": "http://127.0.0.1"}, 403),
    ({"Origin": "null"}, 403),
    ({"Origin": "https://127.0.0.1:{port}"}, 403),
    ({"Origin": "http://127.0.0.1:{port}"}, 200),
    ({"Origin": "http://localhost:{port}"}, 200),
]


async def test_on_loopback_a_host_or_origin_of_another_site_is_403(paths):
    async with served(Config(), paths) as api:
        port = str(api.server.port)
        answers = []
        for headers, status in HOSTS_AND_ORIGINS:
            sent = {k: v.replace("{port}", port) for k, v in headers.items()}
            resp = await api.client.post("/coddy/sessions", json={"cwd": "/"}, headers=sent)
            answers.append((sent, status, resp))
    for sent, status, resp in answers:
        assert resp.status_code == status, (sent, resp.text)
        if status == 403:
            assert resp.json()["error"]["type"] == "permission_error", sent
    # Only the allowed ones made a session: the refused ones stopped before any route ran.
    allowed = sum(1 for _, status in HOSTS_AND_ORIGINS if status == 200)
    assert len(list(paths.sessions_dir.iterdir())) == allowed


def test_on_loopback_the_bound_address_names_this_server_too():
    scope = {"type": "http", "server": ("127.0.0.2", 8080),
             "headers": [(b"host", b"127.0.0.2:8080"), (b"origin", b"http://127.0.0.2:8080")]}
    assert Guard(None, token="", host="127.0.0.2").refusal(scope) is None  # type: ignore[arg-type]
    refused = Guard(None, token="", host="127.0.0.1").refusal(scope)  # type: ignore[arg-type]
    assert refused is not None and refused[0] == 403


async def test_a_body_announced_over_the_limit_is_refused_before_it_is_sent(paths):
    async with served(Config(), paths, max_body_bytes=1000) as api:
        sid = await api.new_session()
        head = (
            f"POST /coddy/sessions/{sid}/prompt HTTP/1.1\r\nHost: 127.0.0.1:{api.server.port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
        )
        # Not a byte of the body follows: an answer at all means it was never waited for.
        with anyio.fail_after(BOUND_S):
            async with await anyio.connect_tcp("127.0.0.1", api.server.port) as conn:
                await conn.send(head.encode())
                answer = b""
                while b"httpserver.max_body_bytes" not in answer:  # head and body come apart
                    answer += await conn.receive()
    assert answer.startswith(b"HTTP/1.1 413 ")


async def test_a_body_over_the_limit_is_413_whether_announced_or_streamed(paths):
    async with served(Config(), paths, max_body_bytes=1000) as api:
        sid = await api.new_session()
        announced = await api.prompt(sid, "x" * 2000)

        async def chunks():  # no Content-Length: the limit holds as the body streams in
            for _ in range(4):
                yield b'{"text": "' + b"y" * 400
            yield b'"}'

        streamed = await api.client.post(
            f"/coddy/sessions/{sid}/prompt", content=chunks(),
            headers={"Content-Type": "application/json"},
        )
        messages = (await api.client.get(f"/coddy/sessions/{sid}/messages")).json()["messages"]
    for resp in (announced, streamed):
        assert resp.status_code == 413
        assert resp.json()["error"] == {
            "message": "the request body is over the limit (httpserver.max_body_bytes)",
            "type": "request_too_large",
        }
    assert messages == []


MALFORMED = [
    (b'{"text": "unterminated',
     "malformed JSON in the request body: Unterminated string starting at character 9"),
    (b'{"text": }', "malformed JSON in the request body: Expecting value at character 9"),
    (b"[1, 2]", "request body"),
    (b'{"txt": "typo"}', "request body: text: Field required"),
]


async def test_a_malformed_body_is_400_naming_the_problem(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        answers = [
            await api.client.post(
                f"/coddy/sessions/{sid}/prompt", content=content,
                headers={"Content-Type": "application/json"},
            )
            for content, _ in MALFORMED
        ]
    for (content, says), resp in zip(MALFORMED, answers, strict=True):
        assert resp.status_code == 400, content
        assert resp.json()["error"]["type"] == "invalid_request_error", content
        assert says in resp.json()["error"]["message"], (content, resp.text)


async def test_a_body_without_a_json_content_type_is_400_saying_so(paths):
    async with served(Config(), paths) as api:
        resp = await api.client.post("/coddy/sessions", content=f'{{"cwd": "{paths.cwd}"}}')
    assert resp.status_code == 400
    assert "Content-Type: application/json" in resp.json()["error"]["message"]


async def test_an_unknown_route_is_404_and_a_wrong_method_405_as_json(paths):
    async with served(Config(), paths) as api:
        unknown = await api.client.get("/coddy/nothing")
        wrong = await api.client.put("/v1/models")
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"
    assert wrong.status_code == 405 and "PUT" in wrong.json()["error"]["message"]
