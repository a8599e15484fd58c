"""ACP v1 wire types: the requests we accept and the payloads we send, camelCase on the wire.

Written here rather than taken from the SDK's generated `acp.schema` for two measured reasons:
importing that module costs about 270 ms, more than half of this agent's cold start
(bench/wire.py), and its models repair bad input silently (invalid mcpServers entries are
dropped, a string protocolVersion becomes 1), where we owe the client a -32602 naming the
field. Every message we send is checked against the official JSON schema in the tests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

PROTOCOL_VERSION = 1


class Wire(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown keys (such as _meta) are kept."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# -- requests ------------------------------------------------------------------------------


class InitializeRequest(Wire):
    protocol_version: Annotated[int, Field(ge=0, le=65535, strict=True)]
    client_capabilities: dict[str, Any] | None = None
    client_info: dict[str, Any] | None = None


class AuthenticateRequest(Wire):
    method_id: str


class McpServer(Wire):
    """Kept in the bundle; only the name is required of every transport."""

    name: str

    def stored(self) -> dict[str, Any]:
        """The server as the bundle keeps it: env and header values (credentials) masked."""
        data = self.dump()
        for key in ("env", "headers"):
            if isinstance(data.get(key), list):
                data[key] = [
                    {**item, "value": "[REDACTED]"} if isinstance(item, dict) else item
                    for item in data[key]
                ]
        return data


class NewSessionRequest(Wire):
    cwd: str
    mcp_servers: list[McpServer]
    additional_directories: list[str] | None = None


class LoadSessionRequest(NewSessionRequest):
    session_id: str


class ListSessionsRequest(Wire):
    cwd: str | None = None
    cursor: str | None = None


class TextBlock(Wire):
    type: Literal["text"]
    text: str


class MediaBlock(Wire):
    type: Literal["image", "audio"]
    data: str
    mime_type: str


class ResourceLinkBlock(Wire):
    type: Literal["resource_link"]
    uri: str
    name: str


class ResourceContents(Wire):
    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


class EmbeddedResourceBlock(Wire):
    type: Literal["resource"]
    resource: ResourceContents


ContentBlock = Annotated[
    TextBlock | MediaBlock | ResourceLinkBlock | EmbeddedResourceBlock, Field(discriminator="type")
]


class PromptRequest(Wire):
    session_id: str
    prompt: list[ContentBlock]


class CancelNotification(Wire):
    session_id: str


class SetSessionModeRequest(Wire):
    session_id: str
    mode_id: str


class SetConfigOptionRequest(Wire):
    session_id: str
    config_id: str
    value: str | bool


# -- what we send --------------------------------------------------------------------------


class Named(Wire):
    """A selectable thing: a session mode, or one option of a select."""

    name: str
    description: str | None = None


class SessionMode(Named):
    id: str


class SessionModeState(Wire):
    current_mode_id: str
    available_modes: list[SessionMode]


class SelectOption(Named):
    value: str


class SelectConfigOption(Wire):
    type: Literal["select"] = "select"
    id: str
    name: str
    category: str
    current_value: str
    options: list[SelectOption]


class SessionInfo(Wire):
    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None


def text_content(text: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": text}


def initialize_response(protocol_version: int, name: str, version: str) -> dict[str, Any]:
    """What we can do: load and list sessions, embedded context, no images or audio."""
    return {
        "protocolVersion": protocol_version,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": {"list": {}},
        },
        "agentInfo": {"name": name, "title": name, "version": version},
        "authMethods": [],
    }
