"""The config file as pydantic models with their defaults (config.example.yaml documents them)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

# The memory section is its own module; its models stay importable from here, where the tests
# and benchmarks that build a Config take them.
from acp_memory.config.memory import EmbeddingsConfig as EmbeddingsConfig
from acp_memory.config.memory import MemoryConfig as MemoryConfig
from acp_memory.config.memory import ReflectConfig as ReflectConfig
from acp_memory.config.memory import SharedMemoryConfig as SharedMemoryConfig
from acp_memory.config.memory import TidyConfig as TidyConfig
from acp_memory.config.section import Section, false_means

OFFLINE_MODEL_ID = "offline/default"
# agent.model: auto picks the model from the keys in the environment (config/loader.py).
AUTO_MODEL = "auto"
# The names MCP tools get (mcp__<server>__<tool>, other characters as "_", cut at 64).
MCP_TOOL_NAME = re.compile(r"mcp__[A-Za-z0-9_-]+")
MCP_TOOL_NAME_MAX = 64


class ProviderConfig(Section):
    name: str
    type: Literal["openai", "anthropic", "offline"]
    api_base: str = ""
    api_key: str = Field(default="", repr=False)
    timeout_ms: int = Field(default=600_000, gt=0)
    # type offline only: a pause before each response, so a run can be watched in flight.
    delay_ms: int = Field(default=0, ge=0)


class ModelPrice(Section):
    """What a model's tokens cost, per million, for the usage_update's `cost`."""

    input: float = Field(ge=0)
    # The cached part of a prompt; unset: billed as the rest of the input.
    cached_input: float | None = Field(default=None, ge=0)
    output: float = Field(ge=0)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")  # ISO 4217, as ACP's Cost says


class ModelConfig(Section):
    model: str = Field(description="<provider>/<upstream model id>")
    max_tokens: int = Field(default=8192, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    stream: bool = True
    # The usage_update's `size`; unset: the built-in table (llm/windows.py), else no update.
    context_window: int | None = Field(default=None, gt=0)
    price: ModelPrice | None = None
    # Takes images in prompts (the offline model always does: it counts their bytes).
    vision: bool = False

    @property
    def upstream_id(self) -> str:
        return self.model.split("/", 1)[1] if "/" in self.model else ""


class AgentConfig(Section):
    # "": the first of models[]; "auto": as a run with no config file picks (AUTO_MODEL).
    model: str = ""
    max_turns: int = Field(default=50, gt=0)
    llm_retry_max: int = Field(default=3, ge=0)
    llm_retry_base_ms: int = Field(default=500, ge=0)
    llm_first_token_timeout_ms: int = Field(default=120_000, ge=0)
    llm_stream_idle_timeout_ms: int = Field(default=120_000, ge=0)
    wait_for_limit_reset: bool = False


class SessionsConfig(Section):
    dir: str = ""
    # An idle session (no turn, background task or events stream running) is let go after
    # this long, its lock, transcript and pool with it; a later request loads it again.
    idle_seconds: float = Field(default=300, gt=0)
    # Sessions a front end keeps open at most: beyond it the least recently used idle one goes.
    max_open: int = Field(default=64, ge=1)


class PromptsConfig(Section):
    dir: str = ""


class BackgroundConfig(Section):
    enabled: bool = True
    max_concurrent: int = Field(default=5, ge=1)
    default_timeout_seconds: int = Field(default=900, gt=0)
    max_timeout_seconds: int = Field(default=3600, gt=0)


class OutputLimitsConfig(Section):
    # What one tool result shows a model (a command's output, a task's, grep's hits), in
    # characters; cut with a marker saying how much went.
    tool_output_chars: int = Field(default=30_000, ge=1000)
    # What a task's output.log keeps on disk: its head and last quarter, a marker between.
    log_bytes: int = Field(default=10 * 1024 * 1024, ge=4096)


class ToolsConfig(Section):
    permission_mode: Literal["ask", "accept_edits", "bypass"] = "ask"
    command_allowlist: list[str] = Field(default_factory=list)
    # Whole mcp__<server>__<tool> names (as the model sees them) whose calls never ask.
    mcp_allowlist: list[str] = Field(default_factory=list)
    background: BackgroundConfig = Field(default_factory=BackgroundConfig)
    output_limits: OutputLimitsConfig = Field(default_factory=OutputLimitsConfig)

    @field_validator("mcp_allowlist")
    @classmethod
    def _whole_tool_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not MCP_TOOL_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an mcp__<server>__<tool> name")
            # A name cut at 64 characters may have lost its second "__"; a shorter one without
            # it names a whole server, which Claude Code's rules allow and ours do not.
            if len(name) < MCP_TOOL_NAME_MAX and "__" not in name.removeprefix("mcp__"):
                raise ValueError(f"{name!r} names a server: list each tool as {name}__<tool>")
        return names


class SubagentsConfig(Section):
    max_concurrent: int = Field(default=4, ge=1)
    max_depth: int = Field(default=2, ge=1)


# How memory_run updates reach an ACP client; a client may choose for its connection.
MemoryRunUpdates = Literal["session_update", "ext_notification", "off"]


class AcpConfig(Section):
    memory_run_updates: Annotated[MemoryRunUpdates, false_means("off")] = "session_update"


class ProxyAgentConfig(Section):
    """The inner agent `acp-memory proxy` starts when no command follows `--`."""

    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)  # added to the environment


class ProxyConfig(Section):
    """`acp-memory proxy`: long-term memory for another ACP agent."""

    agent: ProxyAgentConfig = Field(default_factory=ProxyAgentConfig)


def _level_name(value: Any) -> Any:
    # As --log-level reads it (cli_parser.py, before pydantic is imported): any case, `warn` too.
    if not isinstance(value, str):
        return value
    level = value.lower()
    return "warning" if level == "warn" else level


class LoggingConfig(Section):
    level: Annotated[
        Literal["debug", "info", "warning", "error"],
        BeforeValidator(_level_name),
    ] = "info"
    to_file: bool = False


class HttpServerConfig(Section):
    """`acp-memory http`: where it listens and who may talk to it."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    # Required for a non-loopback bind; when set, every request must carry it as a bearer token.
    auth_token: str = Field(default="", repr=False)
    # A request body past this is refused (413) before it is read whole.
    max_body_bytes: int = Field(default=1024 * 1024, gt=0)


class McpServerConfig(Section):
    """One MCP server as a Claude Code `.mcp.json` entry, so a block pastes over: a command to
    run (stdio), or a url to reach with `type: http` (streamable HTTP) or `type: sse`."""

    # Unset: stdio for a command, http for a url alone (the `transport` property).
    type: Literal["stdio", "http", "sse"] | None = None
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)

    @field_validator("args", "env", "headers", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        # YAML reads `--port 8080` or `DEBUG: true` as numbers and booleans; a process's
        # arguments and environment are text, as .mcp.json writes them (a bare yes, no, on
        # or off is a boolean to YAML too: quoted, it stays the word).
        def text(item: Any) -> Any:
            if isinstance(item, bool):
                return "true" if item else "false"
            return str(item) if isinstance(item, int | float) else item

        if isinstance(value, list):
            return [text(item) for item in value]
        if isinstance(value, dict):
            return {key: text(item) for key, item in value.items()}
        return value

    @model_validator(mode="after")
    def _one_way_to_start(self) -> McpServerConfig:
        if self.type is None and self.command and self.url:
            raise ValueError("has both a command and a url: set type (stdio, http or sse)")
        if self.transport == "stdio" and not self.command:
            raise ValueError(
                "needs a command (a stdio server) or a url with type: http or sse"
                if self.type is None
                else "type stdio needs a command"
            )
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"type {self.transport} needs a url")
        return self

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        """The type, or what the entry implies: http for a url alone, else stdio."""
        if self.type is not None:
            return self.type
        return "http" if self.url and not self.command else "stdio"


class McpConfig(Section):
    # Joined to every session's servers on every surface (ACP, print mode, HTTP); an editor's
    # server of the same name wins. Keyed by server name, as `.mcp.json`'s mcpServers, which
    # is another name for it here, so that a pasted block reads as it is.
    servers: dict[str, McpServerConfig] = Field(
        default_factory=dict, validation_alias=AliasChoices("servers", "mcpServers")
    )
    # allow: <cwd>/.mcp.json's servers join too (over these, under the editor's); off, as
    # hooks_allow_project: a cloned repository must not start programs.
    project_file: Annotated[Literal["off", "allow"], false_means("off")] = "off"
    startup_timeout_seconds: float = Field(default=30, gt=0)
    # One tools/call gets no answer past this (a progress notification restarts the clock):
    # the server is told the call is cancelled, the model that it failed; the server is kept.
    call_timeout_seconds: float = Field(default=120, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _one_name_for_servers(cls, data: Any) -> Any:
        if isinstance(data, dict) and "servers" in data and "mcpServers" in data:
            raise ValueError("has both servers and mcpServers (one name for the same list)")
        return data


class HookCommand(Section):
    """One hook: a shell command that reads the event as JSON on stdin (Claude Code's shape)."""

    type: Literal["command"] = "command"
    command: str
    timeout: float = Field(default=60, gt=0)  # seconds; past it the process group is killed


class HookMatcher(Section):
    # A regex the whole tool name must match (tool events only); "" or "*" matches every tool.
    matcher: str = ""
    hooks: list[HookCommand] = Field(default_factory=list)

    @field_validator("matcher")
    @classmethod
    def _compiles(cls, value: str) -> str:
        if value not in ("", "*"):
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value


class HooksConfig(Section):
    """Lifecycle hooks by event, named as Claude Code names them; other events are unknown
    keys (a doctor finding), so a pasted Claude Code block still loads."""

    SessionStart: list[HookMatcher] = Field(default_factory=list)
    UserPromptSubmit: list[HookMatcher] = Field(default_factory=list)
    PreToolUse: list[HookMatcher] = Field(default_factory=list)
    PostToolUse: list[HookMatcher] = Field(default_factory=list)
    SubagentStart: list[HookMatcher] = Field(default_factory=list)
    SubagentStop: list[HookMatcher] = Field(default_factory=list)
    Stop: list[HookMatcher] = Field(default_factory=list)


class Config(Section):
    providers: list[ProviderConfig] = Field(default_factory=list)
    models: list[ModelConfig] = Field(default_factory=list)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    prompts: PromptsConfig = Field(default_factory=PromptsConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    subagents: SubagentsConfig = Field(default_factory=SubagentsConfig)
    acp: AcpConfig = Field(default_factory=AcpConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    httpserver: HttpServerConfig = Field(default_factory=HttpServerConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    proxy: ProxyConfig = Field(default_factory=ProxyConfig)
    # <cwd>/.acp-memory/hooks.yaml runs too: a checked-out repository then runs its commands.
    hooks_allow_project: bool = False

    # Set by the loader when there is no config file: the line the first session logs,
    # naming the model picked from the keys in the environment.
    _no_file_note: str = PrivateAttr(default="")
    # Set by the loader when agent.model was auto: why it picked the model it did.
    _auto_why: str = PrivateAttr(default="")

    def model_ids(self) -> list[str]:
        """Every selectable model id: the configured ones (models, then agent.model), else
        the built-in offline model alone."""
        ids = [m.model for m in self.models]
        if self.agent.model and self.agent.model not in ids:
            ids.append(self.agent.model)
        return ids or [OFFLINE_MODEL_ID]

    def take_no_file_note(self) -> str:
        """The line naming the model picked with no config file, once (the first session
        logs it); "" when there is a config file."""
        note, self._no_file_note = self._no_file_note, ""
        return note

    def default_model_id(self) -> str:
        """agent.model, else the first configured model, else the offline model."""
        return self.model_choice()[0]

    def model_choice(self) -> tuple[str, str]:
        """The model new sessions use, and why (what `doctor` says)."""
        if self.agent.model and self._auto_why:
            return self.agent.model, f"agent.model: auto; {self._auto_why}"
        if self.agent.model:
            return self.agent.model, "agent.model"
        if self.models:
            return self.models[0].model, "the first of models[], as agent.model is empty"
        return OFFLINE_MODEL_ID, "the built-in offline model: no models are configured"

    def find_model(self, model_id: str) -> ModelConfig:
        """The models[] entry for an id; unlisted ids get defaults."""
        for m in self.models:
            if m.model == model_id:
                return m
        return ModelConfig(model=model_id)

    def find_provider(self, name: str) -> ProviderConfig | None:
        for p in self.providers:
            if p.name == name:
                return p
        if name == "offline":
            return ProviderConfig(name="offline", type="offline")
        return None
