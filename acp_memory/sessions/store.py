"""Session bundles on disk: create, load, save and list, every JSON file written atomically."""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from acp_memory.atomic import write_json_atomic
from acp_memory.sessions.model import (
    SessionRecord,
    Transcript,
    TranscriptMessage,
    new_session_id,
    utc_now,
)

log = logging.getLogger(__name__)

SESSION_FILE = "session.json"
MESSAGES_FILE = "messages.json"
SUBAGENTS_DIR = "subagents"


class BundleError(Exception):
    """A bundle file exists but cannot be used; the message names the file."""


class SessionNotFound(Exception):
    """No bundle has this id."""


@dataclass
class Session:
    """A session in memory, mirrored by its bundle folder."""

    record: SessionRecord
    dir: Path
    messages: list[TranscriptMessage] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.record.id

    def save(self) -> None:
        """Write session.json and messages.json (each atomically)."""
        self.save_record()
        self._save_messages(self.messages)

    def save_record(self) -> None:
        """Write session.json, stamping updatedAt."""
        self.record.updated_at = utc_now()
        write_json_atomic(self.dir / SESSION_FILE, self.record.dump())

    def append(self, message: TranscriptMessage) -> None:
        """Add a message to the transcript and persist it.

        session.json is rewritten once per user message (activity time, title), not for every
        assistant or tool message: each write is an fsync on the turn's critical path.
        """
        # Written before it joins the list: a message that cannot be stored must not stay in
        # memory, where every later write of the transcript would trip over it again.
        self._save_messages([*self.messages, message])
        self.messages.append(message)
        if message.role == "user":
            if not self.record.title:
                self.record.title = _title_from(message.content)
            self.save_record()

    def _save_messages(self, messages: list[TranscriptMessage]) -> None:
        write_json_atomic(self.dir / MESSAGES_FILE, Transcript(messages=messages).dump())

    def subagents_dir(self) -> Path:
        return self.dir / SUBAGENTS_DIR


class SessionStore:
    """All bundles under one sessions folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def create(
        self,
        *,
        cwd: str,
        model_id: str,
        mode: str = "agent",
        mcp_servers: list[dict[str, Any]] | None = None,
        parent: Session | None = None,
        **child: Any,
    ) -> Session:
        """A new bundle, top-level or (with parent) under the parent's subagents/ folder."""
        session_id = new_session_id()
        folder = (parent.subagents_dir() if parent else self.root) / session_id
        record = SessionRecord(
            id=session_id,
            cwd=cwd,
            mode=mode,
            selected_model_id=model_id,
            mcp_servers=mcp_servers or [],
            **child,
        )
        if parent is not None:
            record.subagent_run = True
            record.parent_session_id = parent.id
        session = Session(record=record, dir=folder)
        session.save()
        return session

    def load(self, session_id: str) -> Session:
        """Read a top-level bundle; BundleError names a corrupt file, which is left untouched."""
        if not _valid_id(session_id):
            raise SessionNotFound(session_id)
        return load_bundle(self.root / session_id)

    def list(self, cwd: str | None = None) -> list[SessionRecord]:
        """Top-level sessions, newest first; unreadable bundles are skipped with a warning."""
        records: list[SessionRecord] = []
        if not self.root.is_dir():
            return records
        for entry in self.root.iterdir():
            if not entry.name.startswith("sess_"):
                continue
            try:
                record = _read_record(entry / SESSION_FILE)
            except (BundleError, FileNotFoundError) as exc:
                log.warning("skipping bundle %s: %s", entry.name, exc)
                continue
            if record.subagent_run or (cwd is not None and record.cwd != cwd):
                continue
            records.append(record)
        records.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return records


def load_bundle(folder: Path) -> Session:
    """Read one bundle folder."""
    path = folder / SESSION_FILE
    try:
        record = _read_record(path)
    except FileNotFoundError:
        raise SessionNotFound(folder.name) from None
    messages_path = folder / MESSAGES_FILE
    try:
        transcript = Transcript.model_validate(_read_json(messages_path))
    except FileNotFoundError:
        transcript = Transcript()
    except ValidationError as exc:
        raise BundleError(f"{messages_path}: not a valid transcript: {_first_error(exc)}") from None
    return Session(record=record, dir=folder, messages=transcript.messages)


def _read_record(path: Path) -> SessionRecord:
    try:
        return SessionRecord.model_validate(_read_json(path))
    except ValidationError as exc:
        raise BundleError(f"{path}: not a valid session record: {_first_error(exc)}") from None


def _read_json(path: Path) -> Any:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BundleError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise BundleError(f"{path}: not valid JSON: {exc}") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"


def _valid_id(session_id: str) -> bool:
    hexpart = session_id.removeprefix("sess_")
    return (
        session_id.startswith("sess_")
        and len(hexpart) == 24
        and all(c in "0123456789abcdef" for c in hexpart)
    )


def _title_from(text: str, limit: int = 80) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def encode_cursor(index: int) -> str:
    """An opaque cursor for session/list pagination."""
    return base64.urlsafe_b64encode(f"o:{index}".encode()).decode()


def decode_cursor(cursor: str) -> int:
    """The offset a cursor stands for; ValueError for a cursor we did not issue."""
    raw = base64.urlsafe_b64decode(cursor.encode()).decode()
    if not raw.startswith("o:") or not raw[2:].isdigit():
        raise ValueError(cursor)
    return int(raw[2:])
