"""ACP v1 wire types: the requests we accept and the payloads we send, camelCase on the wire.

Written here rather than taken from the SDK's generated `acp.schema` for two measured reasons:
importing that module costs about 270 ms, more than half of this agent's cold start
(bench/wire.py), and its models repair bad input silently (invalid mcpServers entries are
dropped, a string protocolVersion becomes 1), where we owe the client a -32602 naming the
field. Every message we send is checked against the official JSON schema in the tests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from acp_memory.camel import CamelModel
from acp_memory.mcpclient.specs import MASK, masked_url

PROTOCOL_VERSION = 1


# -- requests ------------------------------------------------------------------------------


class InitializeRequest(CamelModel):
    protocol_version: Annotated[int, Field(ge=0, le=65535, strict=True)]
    client_capabilities: dict[str, Any] | None = None
    client_info: dict[str, Any] | None = None


class AuthenticateRequest(CamelModel):
    method_id: str


class McpServer(CamelModel):
    """Kept in the bundle; only the name is required of every transport."""

    name: str

    def stored(self) -> dict[str, Any]:
        """The server as the bundle keeps it, its credentials masked as `doctor` masks them:
        nothing reads them back (session/load and resume bring the editor's servers again)."""
        # The redaction passes load with a session's servers, not before initialize.
        from acp_memory.memory.masking import masked_args

        data = self.dump()
        for key in ("env", "headers"):
            if isinstance(data.get(key), list):
                data[key] = [
                    {**item, "value": MASK} if isinstance(item, dict) else item
                    for item in data[key]
                ]
        args = data.get("args")
        if isinstance(args, list) and all(isinstance(arg, str) for arg in args):
            data["args"] = masked_args(args)
        if isinstance(data.get("url"), str):
            data["url"] = masked_url(data["url"])
        return data


class NewSessionRequest(CamelModel):
    cwd: str
    # Required by the schema, but scripts written for the reference agent leave it out.
    mcp_servers: list[McpServer] = Field(default_factory=list)
    additional_directories: list[str] | None = None


class LoadSessionRequest(NewSessionRequest):
    session_id: str


class ResumeSessionRequest(LoadSessionRequest):
    """session/load's request, answered without the replay."""


class CloseSessionRequest(CamelModel):
    session_id: str


class DeleteSessionRequest(CamelModel):
    session_id: str


class ListSessionsRequest(CamelModel):
    cwd: str | None = None
    cursor: str | None = None


class TextBlock(CamelModel):
    type: Literal["text"]
    text: str


class MediaBlock(CamelModel):
    type: Literal["image", "audio"]
    data: str
    mime_type: str


class ResourceLinkBlock(CamelModel):
    type: Literal["resource_link"]
    uri: str
    name: str


class ResourceContents(CamelModel):
    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


class EmbeddedResourceBlock(CamelModel):
    type: Literal["resource"]
    resource: ResourceContents


ContentBlock = Annotated[
    TextBlock | MediaBlock | ResourceLinkBlock | EmbeddedResourceBlock, Field(discriminator="type")
]


class PromptRequest(CamelModel):
    session_id: str
    prompt: list[ContentBlock]


class CancelNotification(CamelModel):
    session_id: str


class SetSessionModeRequest(CamelModel):
    session_id: str
    mode_id: str


class SetConfigOptionRequest(CamelModel):
    session_id: str
    config_id: str
    # Any JSON value: each option checks its own (a loose str | bool would read 1 as true).
    value: Any


# -- what we send --------------------------------------------------------------------------


class Named(CamelModel):
    """A selectable thing: a session mode, or one option of a select."""

    name: str
    description: str | None = None


class SessionMode(Named):
    id: str


class SessionModeState(CamelModel):
    current_mode_id: str
    available_modes: list[SessionMode]


class SelectOption(Named):
    value: str


class SelectConfigOption(CamelModel):
    type: Literal["select"] = "select"
    id: str
    name: str
    category: str
    current_value: str
    options: list[SelectOption]


class BooleanConfigOption(CamelModel):
    type: Literal["boolean"] = "boolean"
    id: str
    name: str
    description: str | None = None
    current_value: bool


class SessionInfo(CamelModel):
    session_id: str
    cwd: str
    additional_directories: list[str] | None = None
    title: str | None = None
    updated_at: str | None = None


def text_content(text: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": text}


def initialize_response(protocol_version: int, name: str, version: str) -> dict[str, Any]:
    """What we can do: load, list, resume, close and delete sessions, extra workspace roots,
    embedded context and images (to a model configured with vision), no audio."""
    return {
        "protocolVersion": protocol_version,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {
                "list": {},
                "resume": {},
                "close": {},
                "delete": {},
                "additionalDirectories": {},
            },
        },
        "agentInfo": {"name": name, "title": name, "version": version},
        "authMethods": [],
    }
