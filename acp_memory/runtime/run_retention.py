"""Which tasks are memory runs, and how many of them are kept (memory.keep_runs): a session's
finished runs, each with its child bundle, and the bundles of the tidy runs that have no
session (`notes tidy`, the background passes)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import anyio

from acp_memory.sessions.store import Session, SessionStore
from acp_memory.tasks.pool import TaskPool
from acp_memory.tasks.records import TaskRecord, task_names

log = logging.getLogger(__name__)

MEMORY_AGENT_NAME = "memory"


def is_memory_run(record: TaskRecord) -> bool:
    """Whether record is a memory run's (a system task of the memory agent; the memory run
    is the only system task, so one whose record was lost is one too)."""
    return record.system and (record.agent is None or record.agent.name == MEMORY_AGENT_NAME)


async def retain_runs(session: Session, pool: TaskPool, keep: int) -> None:
    """The oldest finished memory runs of session beyond `keep` removed, record and child
    bundle alike (0 keeps every one)."""
    # The run's own pool, never a new one: a pool closed since (the session deleted or
    # released) leaves the bundle alone, and its next run's retention catches up.
    if keep <= 0 or pool.closed:
        return
    try:
        # A finished run has its folder: no more folders than keep_runs, nothing to read.
        # One small listing, on the event loop: cheaper than a worker-thread trip.
        if len(task_names(pool.bundle)) <= keep:
            return
        records = await pool.records(include_system=True)
    except OSError as exc:
        log.warning("cannot list the memory runs of %s: %s", session.id, exc)
        return
    finished = [r for r in records if is_memory_run(r) and r.finished]
    for record in finished[: max(len(finished) - keep, 0)]:
        try:
            await pool.remove(record.id)
        except (ValueError, LookupError, OSError):
            continue
        if record.agent is not None and record.agent.session_id:  # a lost record names none
            child_dir = session.subagents_dir() / record.agent.session_id
            await anyio.to_thread.run_sync(remove_tree, child_dir)


def retain_bundles(sessions: Path, keep: int) -> None:
    """The newest `keep` bundles of a sessions folder kept, the older ones removed (0 keeps
    every one): the sessionless tidy runs' retention, as retain_runs is a session's."""
    if keep <= 0:
        return
    for old in SessionStore(sessions).list()[keep:]:
        remove_tree(sessions / old.id)


def remove_tree(path: Path) -> None:
    """A run's folder or bundle removed, whatever of it is left."""
    shutil.rmtree(path, ignore_errors=True)
