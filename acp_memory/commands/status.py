"""/memory: the session's last memory run (status, duration, what became of its report, what
it cost, the report itself) and how many notes each root holds, with its path."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from acp_memory.commands.base import CommandCall
from acp_memory.commands.history import SUBCOMMANDS, memory_subcommand
from acp_memory.memory.roots import Roots, is_note_name
from acp_memory.memory.shared.key import shared_key_of, shared_label
from acp_memory.runtime.memory_service import final_message
from acp_memory.runtime.run_retention import is_memory_run
from acp_memory.sessions.store import BundleError, SessionNotFound, load_bundle
from acp_memory.tasks.log import read_file_tail
from acp_memory.tasks.records import LOG_FILE, format_seconds, task_dir

FATE_BYTES = 4096  # the end of a run's log, where its last line is


class MemoryStatus:
    name = "memory"
    description = (
        "Show the last memory run of this session and the notes in both roots; /memory log, "
        "undo (the last run's changes), pending, approve or reject: the notes' history"
    )
    hint: str | None = f"{SUBCOMMANDS} (optional)"

    async def run(self, call: CommandCall) -> str:
        if call.argument:
            return await memory_subcommand(call)
        runner, session = call.runner, call.session
        lines: list[str] = []
        if not runner.memory_enabled(session):
            lines.append("Memory runs are off in this session (its memory option is off).")
        pool = runner.pool_for(session)
        runs = [r for r in await pool.records(include_system=True) if is_memory_run(r)]
        if not runs:
            lines.append("No memory run in this session yet.")
        else:
            last = runs[-1]
            elapsed = last.elapsed_seconds()
            took = f" ({format_seconds(elapsed)})" if elapsed is not None else ""
            lines.append(f"Last memory run: {last.id}, {last.status}{took}.")
            if last.finished:
                # Its log's last line says what became of the report (MemoryRun writes it).
                log = task_dir(session.dir, last.id) / LOG_FILE
                tail = await anyio.to_thread.run_sync(read_file_tail, log, FATE_BYTES)
                fate = tail.decode("utf-8", errors="replace").rstrip().rpartition("\n")[2]
                if fate:
                    lines.append(f"Delivery: {fate}.")
                if last.cost is not None:  # a run recorded before runs had a cost has none
                    lines.append(f"Cost: {last.cost.describe()}.")
            if last.agent is not None:  # a record lost in a crash names no child
                child = session.subagents_dir() / last.agent.session_id
                lines += ["", await anyio.to_thread.run_sync(_report, child)]
        roots = Roots.from_config(runner.cfg, runner.paths, Path(session.record.cwd))
        lines += ["", "Notes:"]
        for scope in roots.scopes():
            root = roots.root_of(scope)
            count = await anyio.to_thread.run_sync(count_notes, root)
            shown = shared_label(scope, shared_key_of(roots, scope))
            lines.append(f"- {shown}: {count} note{'' if count == 1 else 's'} in {root}")
        return "\n".join(lines)


def _report(child_dir: Path) -> str:
    try:
        child = load_bundle(child_dir)
    except (BundleError, SessionNotFound, OSError) as exc:
        return f"(its session cannot be read: {exc})"
    return final_message(child) or "(no report)"


def count_notes(root: Path) -> int:
    """The notes under a root (hidden folders skipped, as the memory tools skip them)."""
    count = 0
    for _, folders, files in os.walk(root):
        folders[:] = [f for f in folders if not f.startswith(".")]
        count += sum(1 for name in files if is_note_name(name))
    return count
