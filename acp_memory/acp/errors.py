"""How the runtime's and the bundle's neutral errors become ACP error answers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from acp_memory.jsonrpc.errors import INTERNAL_ERROR, INVALID_PARAMS, RpcError
from acp_memory.llm.registry import UnknownModelError
from acp_memory.llm.types import LLMError
from acp_memory.oserror import os_error_text
from acp_memory.paths import NotAWorkspace, check_workspace
from acp_memory.runtime.runner import ImagesRefused
from acp_memory.runtime.table import SessionUnsaved, Stopping, TurnRunning, saving
from acp_memory.sessions.lock import BundleBusy
from acp_memory.sessions.store import BundleError, Session, SessionNotFound

SESSION_BUSY = -32001
# ACP's own code for an unknown session (or other resource).
RESOURCE_NOT_FOUND = -32002


async def workspace(cwd: str) -> str:
    """The session's cwd, refused unless it is an absolute path to an existing folder."""
    try:
        return await check_workspace(cwd)
    except NotAWorkspace as exc:
        raise RpcError(INVALID_PARAMS, f"Invalid params: cwd: {exc}") from None


async def extra_roots(folders: list[str] | None) -> list[str]:
    """additionalDirectories, each refused, by name, unless it is an absolute path to an
    existing folder; in order, each once."""
    checked: list[str] = []
    for folder in folders or []:
        try:
            checked.append(await check_workspace(folder))
        except NotAWorkspace as exc:
            why = f"Invalid params: additionalDirectories: {exc}"
            raise RpcError(INVALID_PARAMS, why) from None
    return list(dict.fromkeys(checked))


def not_loadable(session_id: str, why: object) -> RpcError:
    return RpcError(RESOURCE_NOT_FOUND, f"Session {session_id} cannot be loaded: {why}")


@contextmanager
def loading(session_id: str) -> Iterator[None]:
    """A session that is not there, or whose bundle cannot be read, is an unknown resource."""
    try:
        yield
    except SessionNotFound:
        raise RpcError(RESOURCE_NOT_FOUND, f"Session not found: {session_id}") from None
    except BundleError as exc:
        raise not_loadable(session_id, exc) from None


@contextmanager
def creating() -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise RpcError(INTERNAL_ERROR, f"cannot create the session: {os_error_text(exc)}") from None


@contextmanager
def writes(session: Session) -> Iterator[None]:
    """A bundle that cannot be written becomes an error the editor shows, never a traceback."""
    try:
        with saving(session):
            yield
    except BundleBusy as exc:
        raise RpcError(SESSION_BUSY, f"Session {session.id} is busy: {exc}") from None
    except SessionUnsaved as exc:
        raise RpcError(INTERNAL_ERROR, str(exc)) from None


@contextmanager
def deleting(session: Session) -> Iterator[None]:
    """A bundle another process writes, or one that cannot be removed."""
    try:
        yield
    except BundleBusy as exc:
        raise RpcError(SESSION_BUSY, f"Session {session.id} is busy: {exc}") from None
    except OSError as exc:
        raise RpcError(
            INTERNAL_ERROR, f"cannot delete session {session.id}: {os_error_text(exc)}"
        ) from None


@contextmanager
def claiming() -> Iterator[None]:
    """A prompt to a session whose turn runs, or to an agent that is stopping."""
    try:
        yield
    except TurnRunning as exc:
        raise RpcError(
            SESSION_BUSY, f"{exc}; wait for its answer or send session/cancel first"
        ) from None
    except Stopping:
        raise RpcError(INTERNAL_ERROR, "the agent is stopping: its input closed") from None


@contextmanager
def model_calls() -> Iterator[None]:
    """A turn's model that cannot be found, called, or given the prompt; the editor is told
    why."""
    try:
        yield
    except ImagesRefused as exc:
        raise RpcError(INVALID_PARAMS, f"Invalid params: prompt: {exc}") from None
    except UnknownModelError as exc:
        raise RpcError(INTERNAL_ERROR, str(exc)) from None
    except LLMError as exc:
        # The turn ends, with the provider's status and words.
        data = {"status": exc.status, "provider": exc.provider, "afterOutput": exc.after_output}
        raise RpcError(INTERNAL_ERROR, f"model call failed: {exc}", data) from None
