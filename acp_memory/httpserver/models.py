"""The API's JSON bodies. Every answer names its kind in `object`; keys are camelCase, except
task records, which are meta.json as it is (snake_case, as the reference agent writes it)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from acp_memory.camel import CamelModel
from acp_memory.engine.turn import StopReason
from acp_memory.modes import Mode

Root = Literal["global", "workspace"]
# What a request may name a root: the tools' `project` is taken as `workspace`, the word
# every answer uses.
RootIn = Annotated[Root, BeforeValidator(lambda v: "workspace" if v == "project" else v)]


class Request(CamelModel):
    """A request body: an unknown key is refused, naming it (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    message: str
    type: str


class ErrorBody(BaseModel):
    """Every error answer."""

    error: ErrorDetail


# -- sessions ------------------------------------------------------------------------------


class NewSession(Request):
    cwd: str = Field(description="absolute path of an existing folder: the session's workspace")
    mode: Mode = "agent"
    model: str | None = Field(default=None, description="a configured model id")


class PromptBody(Request):
    text: str


class SessionInfo(CamelModel):
    object: Literal["session"] = "session"
    id: str
    cwd: str
    mode: str
    selected_model_id: str
    title: str
    created_at: str
    updated_at: str
    read_only: bool = Field(description="a child session (a memory run, a spawned agent)")
    running: bool = Field(description="a turn of it is running in this server")
    parent_session_id: str | None = None
    subagent_name: str | None = None
    subagent_task_id: str | None = None


class SessionList(CamelModel):
    object: Literal["session_list"] = "session_list"
    sessions: list[SessionInfo]


class SessionMessages(CamelModel):
    object: Literal["session_messages"] = "session_messages"
    session_id: str
    read_only: bool
    parent_session_id: str | None = None
    messages: list[dict[str, Any]] = Field(description="messages.json's messages, as stored")


class PromptResult(CamelModel):
    object: Literal["prompt_result"] = "prompt_result"
    session_id: str
    stop_reason: StopReason


class CancelResult(CamelModel):
    object: Literal["session_cancel"] = "session_cancel"
    session_id: str
    cancelled: bool = Field(description="a running turn was cancelled")


class SessionDeleted(CamelModel):
    object: Literal["session_delete"] = "session_delete"
    session_id: str
    deleted: bool = True


# -- memory --------------------------------------------------------------------------------


class NamesRoot(CamelModel):
    """An answer that names a root: `shared`, the project key, only when that root is the
    team's shared project memory (memory.shared)."""

    shared: str | None = Field(default=None, description="the project key when this is the "
                               "team's shared project memory (memory.shared); absent otherwise")

    # No return annotation on these serializers: pydantic would make it the answer's schema
    # (a bare object in the OpenAPI document), where without one the fields are the schema.
    @model_serializer(mode="wrap")
    def _shared_when_set(self, handler: SerializerFunctionWrapHandler):
        data: dict[str, Any] = handler(self)
        if data.get("shared") is None:
            data.pop("shared", None)
        return data


class RootInfo(NamesRoot):
    root: Root
    dir: str


class TreeEntry(CamelModel):
    name: str
    path: str = Field(description="relative to the root")
    type: Literal["file", "dir"]
    size: int
    modified: str = Field(description="ISO 8601, UTC")


class MemoryTree(NamesRoot):
    object: Literal["memory_tree"] = "memory_tree"
    roots: list[RootInfo] | None = Field(default=None, description="without `root`")
    root: Root | None = None
    path: str | None = None
    entries: list[TreeEntry] | None = Field(default=None, description="with `root`")


class NoteBody(Request):
    root: RootIn
    path: str
    content: str


class DirBody(Request):
    root: RootIn
    path: str


class MemoryFile(NamesRoot):
    object: Literal["memory_file"] = "memory_file"
    root: Root
    path: str
    content: str
    status: Literal["saved", "updated"] | None = Field(
        default=None, description="a write: a new note, or one replaced"
    )
    redacted: list[str] | None = Field(default=None, description="a write: secret kinds removed")


class MemoryDelete(NamesRoot):
    object: Literal["memory_delete"] = "memory_delete"
    root: Root
    path: str
    deleted: int = Field(description="notes removed")


class MemoryDir(NamesRoot):
    object: Literal["memory_dir"] = "memory_dir"
    root: Root
    path: str
    created: bool = Field(description="false when it already existed")


# -- the history of the notes --------------------------------------------------------------


class ChangeSourceInfo(CamelModel):
    """Where a change came from; every key is present, null when it does not apply."""

    surface: str = Field(description="memory_run, reflect, memory_tool, cli, http or command")
    session_id: str | None
    task_id: str | None = Field(description="the memory run's task")
    message: str | None = Field(description="the first line of the turn's user message, "
                                "redacted")


ChangeAction = Literal["create", "update", "delete", "mkdir", "rmdir", "undo", "purge"]


class HeldPart(CamelModel):
    """Another note a held change makes with its own (a merge's)."""

    path: str = Field(description="relative to the root")
    action: ChangeAction


class MemoryChange(NamesRoot):
    """One journaled change, as `notes log --json` prints it."""

    id: str = Field(description="chg_ and 12 hex digits (pnd_ for a pending change)")
    time: str = Field(description="ISO 8601, UTC")
    root: Root
    path: str = Field(description="relative to the root")
    action: ChangeAction
    source: ChangeSourceInfo
    summary: str = Field(description="one line: `+3 -1 lines`, `deleted, 120 bytes`...")
    undoes: str | None = Field(default=None, description="an undo: the change it undid")
    reason: str | None = Field(default=None, description="a held change: why it was "
                               "proposed, in a line (a tidy run's proposals)")
    also: list[HeldPart] | None = Field(default=None, description="a held merge: the other "
                                        "notes it changes with this one, approved or "
                                        "rejected whole")

    @model_serializer(mode="wrap")
    def _without_undoes(self, handler: SerializerFunctionWrapHandler):
        # No return annotation: NamesRoot's serializer says why. The pinned object has
        # `undoes` on an undo only, `shared` on a shared root's change only, `reason` and
        # `also` on a held change that has them; the source keeps its nulls.
        data: dict[str, Any] = handler(self)
        for key in ("undoes", "shared", "reason", "also"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class MemoryHistory(CamelModel):
    object: Literal["memory_history"] = "memory_history"
    changes: list[MemoryChange] = Field(description="newest first")


class UndoBody(Request):
    # The issue pins `change_id`; the API's camelCase is taken too.
    change_id: str = Field(validation_alias=AliasChoices("change_id", "changeId"),
                           description="the chg_ id of the change to undo")
    force: bool = Field(default=False, description="undo even over a later change or a hand "
                        "edit")


class MemoryUndo(NamesRoot):
    object: Literal["memory_undo"] = "memory_undo"
    change_id: str | None = Field(description="the undo's own change in the history")
    undone: MemoryChange = Field(description="the change undone")
    root: Root
    path: str
    restored: int = Field(description="notes brought back (none when the undo removed one)")
    redacted: int = Field(0, description="secrets the restored text lacks (the history keeps "
                                         "contents redacted)")


class MemoryPending(CamelModel):
    object: Literal["memory_pending"] = "memory_pending"
    pending: list[MemoryChange] = Field(description="held for approval, oldest first")


class DecisionBody(Request):
    approve: bool = Field(description="true makes the change, false drops it")


class MemoryDecision(CamelModel):
    object: Literal["memory_pending_decision"] = "memory_pending_decision"
    approved: bool
    pending: MemoryChange = Field(description="the held change, no longer pending")


# -- background tasks ----------------------------------------------------------------------

TaskRecordJson = dict[str, Any]


class TaskList(CamelModel):
    object: Literal["background_task_list"] = "background_task_list"
    tasks: list[TaskRecordJson] = Field(description="meta.json records, system tasks included")


class TaskDetail(CamelModel):
    object: Literal["background_task"] = "background_task"
    task: TaskRecordJson
    tail: str | None = Field(default=None, description="the last lines of its output log")


# -- OpenAI-compatible ---------------------------------------------------------------------


class OpenAIModel(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "acp-memory"


class OpenAIModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[OpenAIModel]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        """The message's text: a string, or its text parts joined."""
        if isinstance(self.content, list):
            return "".join(
                str(p.get("text", "")) for p in self.content if p.get("type") == "text"
            )
        return self.content or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's body; keys this agent has no use for (temperature, tools, ...) are ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(description="the mode: agent, plan or ask")
    messages: list[ChatMessage] = Field(
        min_length=1,
        description=(
            "the last user message is the turn; without X-Coddy-Session-Id the earlier user "
            "and assistant messages are the conversation before it (system ones are ignored)"
        ),
    )
    stream: bool = False
    stream_options: StreamOptions | None = Field(
        default=None, description="include_usage: a last chunk carries the usage"
    )
    metadata: dict[str, Any] | None = Field(
        default=None, description='{"model": a configured model id} picks the model'
    )


class ChatChoice(BaseModel):
    index: int = 0
    message: dict[str, Any]
    finish_reason: str


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="of prompt_tokens, those read from the prompt cache")


class ChatUsage(BaseModel):
    """The tokens of the turn's own model calls (a memory run's are not counted)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage
