"""Session bundles on disk: create, load, save and list, every JSON file written atomically."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from acp_memory.atomic import write_json_atomic
from acp_memory.sessions.lock import BundleLock
from acp_memory.sessions.model import (
    SessionRecord,
    Transcript,
    TranscriptMessage,
    is_session_id,
    new_session_id,
)
from acp_memory.sessions.transcript import MESSAGES_FILE, READ_ATTEMPTS, Scrub, TranscriptFile
from acp_memory.text.lines import first_line
from acp_memory.timestamps import now_iso

log = logging.getLogger(__name__)

SESSION_FILE = "session.json"
SUBAGENTS_DIR = "subagents"
MAX_NESTING = 4  # children of children: deeper than any configured subagents.max_depth


class BundleError(Exception):
    """A bundle file exists but cannot be used; the message names the file."""


class SessionNotFound(Exception):
    """No bundle has this id."""


@dataclass
class Session:
    """A session in memory, mirrored by its bundle folder.

    Writes go through `append` and `save_record`: off the event loop, one at a time, and only
    while this process holds the bundle's lock (taken at the first write, so a second process
    can still read and replay the session).
    """

    record: SessionRecord
    dir: Path
    messages: list[TranscriptMessage] = field(default_factory=list)
    # messages.json as it was when read; a change by another process is reloaded before writing.
    seen: tuple[int, int, int] | None = None
    # False for a memory run's child: its files skip the syncs (see atomic.py).
    durable: bool = True
    # What every file of the bundle goes through before it is written (a memory run's child:
    # the note redaction); the session in memory keeps what it was told.
    scrub: Scrub | None = field(default=None, repr=False)
    # The prompt a new bundle was made and titled for (a memory run's task): its first user
    # message, that very prompt, leaves session.json as the bundle's creation just wrote it.
    made_for: str | None = field(default=None, repr=False)
    transcript: TranscriptFile = field(init=False)
    lock: BundleLock = field(init=False)
    # Told each time a write takes the lock again (the front end's table opens it again).
    on_locked: Callable[[Session], object] | None = field(init=False, default=None, repr=False)
    _writing: anyio.Lock = field(init=False, default_factory=anyio.Lock)

    def __post_init__(self) -> None:
        self.transcript = TranscriptFile(self.dir, durable=self.durable, scrub=self.scrub)
        self.lock = BundleLock(self.dir)

    @property
    def id(self) -> str:
        return self.record.id

    async def append(self, message: TranscriptMessage) -> None:
        """Add a message to the transcript and persist it, even while the turn is cancelled.

        session.json is rewritten once per user message (activity time, title), not for every
        assistant or tool message.
        """
        await self.append_all((message,))

    async def append_all(self, new: Sequence[TranscriptMessage]) -> None:
        """Add messages in order in one write of the transcript, as `append` does one."""
        if not new:
            return
        # Shielded: a message the turn produced is recorded whether or not the turn goes on.
        with anyio.CancelScope(shield=True):
            async with self._writing:
                await self._claim()
                # A user message also stamps session.json (activity time, first title), in the
                # same trip to the worker thread.
                record = None
                user = next((m for m in new if m.role == "user"), None)
                if user is not None and not self._made_for(user):
                    record = self.record.model_copy(
                        update={
                            "title": self.record.title or first_line(user.content),
                            "updated_at": now_iso(),
                        }
                    )
                messages = (*self.messages, *new)
                await self._io(partial(self._write_message, messages, record))
                # Joined only once written: a message that cannot be stored must not stay in
                # memory, where every later write would trip over it again.
                self.messages.extend(new)
                if record is not None:  # only these two fields: others may have changed since
                    self.record.title, self.record.updated_at = record.title, record.updated_at

    def _made_for(self, message: TranscriptMessage) -> bool:
        # Asked once: only the bundle's first message can be the prompt it was made for.
        made_for, self.made_for = self.made_for, None
        return made_for is not None and not self.messages and message.content == made_for

    async def save_record(self) -> None:
        """Write session.json, stamping updatedAt."""
        with anyio.CancelScope(shield=True):
            async with self._writing:
                await self._claim()
                await self._write_record()

    @property
    def writing(self) -> bool:
        """Whether a write is under way (the lock is never let go during one)."""
        return self._writing.locked()

    def close(self) -> None:
        """Let other processes write this bundle."""
        self.lock.release()

    def _write_message(
        self, messages: tuple[TranscriptMessage, ...], record: SessionRecord | None
    ) -> None:
        self.transcript.append(messages)
        # What this process wrote is known: taking the lock again later rereads nothing.
        self.seen = _stat_key(self.transcript.path)
        if record is not None:
            write_json_atomic(self.dir / SESSION_FILE, self._dump(record), durable=self.durable)

    def _dump(self, record: SessionRecord) -> dict[str, Any]:
        data = record.dump()
        return data if self.scrub is None else dict(self.scrub(data))

    async def _write_record(self) -> None:
        self.record.updated_at = now_iso()
        path, data = self.dir / SESSION_FILE, self._dump(self.record)
        await self._io(partial(write_json_atomic, path, data, durable=self.durable))

    async def _io(self, write: Callable[[], None]) -> None:
        # A bundle that skips the syncs (a memory run's child) writes a message in a few
        # small page-cache writes, cheaper on the event loop than a trip to a worker thread.
        if self.durable:
            await anyio.to_thread.run_sync(write)
        else:
            write()

    async def _claim(self) -> None:
        if self.lock.held:
            return
        fresh = await anyio.to_thread.run_sync(self._lock_and_reread)
        if fresh is not None:
            self.record, self.messages = fresh.record, fresh.messages
            # What we knew of the two files is stale too: the next append writes whole.
            self.transcript = TranscriptFile(self.dir, durable=self.durable, scrub=self.scrub)
        if self.on_locked is not None:
            self.on_locked(self)

    def _lock_and_reread(self) -> Session | None:
        self.lock.acquire()
        try:
            if _stat_key(self.transcript.path) == self.seen:
                return None
            # Another process wrote the bundle since we read it: build on what it wrote.
            return load_bundle(self.dir)
        except BaseException:
            self.lock.release()
            raise

    def create_files(self) -> None:
        """Lock a new bundle and write its two files (synchronously: one small write each)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lock.acquire()
        write_json_atomic(self.dir / SESSION_FILE, self._dump(self.record), durable=self.durable)
        self.transcript.write_all(self.messages)
        self.seen = _stat_key(self.transcript.path)

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
        additional_directories: Sequence[str] = (),
        parent: Session | None = None,
        durable: bool = True,
        session_id: str | None = None,
        scrub: Scrub | None = None,
        messages: Sequence[TranscriptMessage] = (),
        prompt: str | None = None,
        **child: Any,
    ) -> Session:
        """A new bundle, top-level or (with parent) under the parent's subagents/ folder;
        session_id is one from new_session_id() when the caller needs it in advance, and
        messages an earlier conversation it starts from (titled by its first user message);
        scrub rewrites what its files hold (see Session.scrub); prompt is the first prompt
        of a new bundle made for it (a memory run's task), which titles it at once, so that
        session.json is written once."""
        session_id = session_id or new_session_id()
        if not is_session_id(session_id):  # a folder name: it must never leave the root
            raise ValueError(f"not a session id: {session_id!r}")
        folder = (parent.subagents_dir() if parent else self.root) / session_id
        record = SessionRecord(
            id=session_id,
            cwd=cwd,
            mode=mode,
            selected_model_id=model_id,
            mcp_servers=mcp_servers or [],
            additional_directories=list(additional_directories),
            **child,
        )
        if parent is not None:
            record.subagent_run = True
            record.parent_session_id = parent.id
        if first := next((m.content for m in messages if m.role == "user"), prompt or ""):
            record.title = record.title or first_line(first)
        session = Session(record=record, dir=folder, durable=durable, messages=list(messages),
                          scrub=scrub, made_for=None if messages else prompt)
        session.create_files()
        return session

    def load(self, session_id: str) -> Session:
        """Read a bundle, top-level or a child nested under its parents' subagents/ folders.

        BundleError names a corrupt file, which is left untouched.
        """
        if not is_session_id(session_id):
            raise SessionNotFound(session_id)
        session = load_bundle(self.locate(session_id))
        if session.record.id != session_id:
            # Another session's bundle: a case-insensitive file system finds `Foo` for `foo`.
            session.close()
            raise SessionNotFound(session_id)
        return session

    def locate(self, session_id: str) -> Path:
        """The folder of a session's bundle: top-level, else the child of some session."""
        top = self.root / session_id
        if top.is_dir() or not is_session_id(session_id):
            return top
        for depth in range(1, MAX_NESTING + 1):
            pattern = "/".join(["*", SUBAGENTS_DIR] * depth) + f"/{session_id}"
            for folder in self.root.glob(pattern):
                return folder
        return top

    def list(self, cwd: str | None = None) -> list[SessionRecord]:
        """Top-level sessions, newest first; unreadable bundles are skipped with a warning."""
        records: list[SessionRecord] = []
        if not self.root.is_dir():
            return records
        for entry in self.root.iterdir():
            if not is_session_id(entry.name) or not entry.is_dir():
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
    """Read one bundle folder. A child's file found empty or torn reads as less: the record
    its parent implies, an empty transcript (a memory run's child skips the syncs, so a
    power cut may leave its files so); a top-level bundle's is a BundleError."""
    path = folder / SESSION_FILE
    child = folder.parent.name == SUBAGENTS_DIR
    try:
        record = _read_record(path)
    except FileNotFoundError:
        raise SessionNotFound(folder.name) from None
    except BundleError:
        implied = _implied_child_record(folder) if child else None
        if implied is None:
            raise
        record = implied
    messages_path = folder / MESSAGES_FILE
    seen = _stat_key(messages_path)
    try:
        transcript = Transcript.model_validate(_read_json(messages_path, READ_ATTEMPTS))
    except FileNotFoundError:
        transcript = Transcript()
    except (BundleError, ValidationError) as exc:
        if not child:
            if isinstance(exc, BundleError):
                raise
            why = _first_error(exc)
            raise BundleError(f"{messages_path}: not a valid transcript: {why}") from None
        transcript = Transcript()
    return Session(record=record, dir=folder, messages=transcript.messages, seen=seen)


def _implied_child_record(folder: Path) -> SessionRecord | None:
    """A child's record as its place says it: its id, and its parent's cwd and model; None
    when the parent's cannot be read either."""
    try:
        parent = _read_record(folder.parent.parent / SESSION_FILE)
    except (BundleError, FileNotFoundError):
        return None
    return SessionRecord(
        id=folder.name, cwd=parent.cwd, selected_model_id=parent.selected_model_id,
        subagent_run=True, parent_session_id=parent.id,
    )


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _read_record(path: Path) -> SessionRecord:
    try:
        return SessionRecord.model_validate(_read_json(path))
    except ValidationError as exc:
        raise BundleError(f"{path}: not a valid session record: {_first_error(exc)}") from None


def _read_json(path: Path, attempts: int = 1) -> Any:
    """The file parsed; a file that does not parse is read again, up to `attempts` reads in
    all (a transcript read while a slow reader was outpaced, see transcript.py)."""
    for _ in range(attempts - 1):
        with contextlib.suppress(ValueError):
            return json.loads(_read_bytes(path))
    try:
        return json.loads(_read_bytes(path))
    except ValueError as exc:
        raise BundleError(f"{path}: not valid JSON: {exc}") from None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BundleError(f"{path}: cannot read: {exc.strerror}") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"


def encode_cursor(updated_at: str, session_id: str) -> str:
    """An opaque session/list cursor: the (updatedAt, id) of the last session on a page."""
    raw = json.dumps([updated_at, session_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_cursor(cursor: str) -> tuple[str, str]:
    """The (updatedAt, id) a cursor stands for; ValueError for a cursor we did not issue."""
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, UnicodeError) as exc:  # binascii.Error is a ValueError
        raise ValueError(cursor) from exc
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise ValueError(cursor)
    return value[0], value[1]
