"""Print mode's run: pick or make the session, run one turn on the shared SessionRunner, keep
the process until its memory run settled, and say how it ended in the exit code."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from collections.abc import Iterator
from functools import partial

import anyio

from acp_memory.build import build_runner
from acp_memory.config import Config, Paths
from acp_memory.engine.events import (
    PromptBlocked,
    ServerNotice,
    ToolCallFinished,
    ToolCallStarted,
    TurnEvent,
)
from acp_memory.engine.reply import Reply
from acp_memory.engine.turn import StopReason
from acp_memory.llm.registry import ProviderHub, UnknownModelError
from acp_memory.llm.types import LLMError
from acp_memory.llm.usage import UsageMeter
from acp_memory.oserror import describe_os_error
from acp_memory.printmode.console import Console
from acp_memory.printmode.memory import MemoryWatch
from acp_memory.printmode.options import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_STOPPED,
    EXIT_USAGE,
    PrintOptions,
)
from acp_memory.printmode.output import (
    Output,
    TextOutput,
    end_with_failure,
    output_for,
    result_object,
)
from acp_memory.printmode.unattended import Unattended
from acp_memory.runtime.runner import SessionRunner
from acp_memory.runtime.table import ReadOnlySession, SessionUnsaved, refuse_child, saving
from acp_memory.sessions.lock import BundleBusy
from acp_memory.sessions.store import BundleError, Session, SessionNotFound
from acp_memory.signals import cancel_when_set, until_signalled
from acp_memory.stderr import error
from acp_memory.tasks.reaper import become_subreaper

# The MCP client's logger: its warnings name each server that failed.
MCP_LOG = logging.getLogger("acp_memory.mcpclient")

STOP_EXIT: dict[str, int] = {
    "end_turn": EXIT_OK,
    "max_tokens": EXIT_STOPPED,
    "max_turn_requests": EXIT_STOPPED,
    "refusal": EXIT_REFUSED,
    "cancelled": EXIT_CANCELLED,
}


class Failure(Exception):
    """Print mode cannot start, or the turn failed: an exit code and the line that says why."""

    def __init__(self, code: int, line: str) -> None:
        super().__init__(line)
        self.code = code
        self.line = line


def run_print_mode(cfg: Config, paths: Paths, options: PrintOptions) -> int:
    """Run one turn as the options say; the exit code (see options.EXIT_CODES_HELP)."""
    try:
        text = _prompt(options.text)
    except Failure as failure:
        error(failure.line)
        end_with_failure(options.output_format, sys.stdout, failure.code, failure.line)
        return failure.code
    become_subreaper()  # what its MCP servers leave behind is its own to end and reap
    with _said_on_the_console():
        return anyio.run(_main, cfg, paths, options, text)


# Loggers whose warnings the console lines already say: the memory run's news, and a
# session that cannot be saved (SessionUnsaved, one `acp-memory:` line).
_CONSOLE_LOGGERS = ("acp_memory.runtime.memory_run", "acp_memory.runtime.table")


@contextlib.contextmanager
def _said_on_the_console() -> Iterator[None]:
    """At the default log level, quiet the warnings that would say a console line twice."""
    loggers = [logging.getLogger(name) for name in _CONSOLE_LOGGERS]
    levels = [logger.level for logger in loggers]
    if logging.getLogger().level >= logging.WARNING:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _prompt(given: str) -> str:
    text = given
    if given == "-":
        try:
            text = sys.stdin.read() if sys.stdin is not None else ""
        except UnicodeDecodeError as exc:
            raise Failure(EXIT_USAGE, f"-p -: stdin is not {exc.encoding} text") from None
    if not text.strip():
        where = "stdin was empty" if given == "-" else "the prompt is empty"
        raise Failure(EXIT_USAGE, f"-p: nothing to send: {where}")
    return text


async def _main(cfg: Config, paths: Paths, options: PrintOptions, text: str) -> int:
    console = Console(sys.stderr, terminal=sys.stderr.isatty())
    output = output_for(options.output_format, sys.stdout)
    if isinstance(output, TextOutput) and sys.stdout.isatty() and console.terminal:
        # One terminal for both streams: a stderr line never lands mid-line in the reply.
        console.before_line = output.break_line
    elif isinstance(output, TextOutput):
        # Maybe one file for both (2>&1): a stderr line waits for the reply's line to end,
        # which leaves each stream as it would be alone.
        console.mid_line = output.mid_line
        output.line_start = console.line_start
    async with ProviderHub(cfg) as hub:
        runner = build_runner(cfg, paths, hub)
        # Print mode waits for its memory run itself, within the run's timeout; a process
        # stopped by Ctrl-C or SIGTERM stops at once.
        runner.memory.exit_wait_seconds = 0
        meter = UsageMeter()  # the turn's main-agent calls, as the ACP prompt answer counts them
        try:
            session = await open_session(runner, hub, options)
        except Failure as failure:
            console.error(failure.line)
            output.result(result_object(failure.code, failure.line, usage=meter.as_json()))
            return failure.code
        try:
            turn = PrintTurn(runner, session, options, console, output, meter)
            return await turn.run(text)
        finally:
            session.close()


async def open_session(runner: SessionRunner, hub: ProviderHub, options: PrintOptions) -> Session:
    """The session the options name (-c, --resume) or a new one in the cwd, on the model for
    this turn; Failure when there is no such session or no such model."""
    session: Session | None = None
    if options.resume is not None:
        session = await _load(runner, options.resume, "--resume")
    elif options.continue_session:
        cwd = str(runner.paths.cwd)
        records = await anyio.to_thread.run_sync(partial(runner.store.list, cwd=cwd))
        if not records:
            raise Failure(EXIT_USAGE, f"-c: no session to continue in {cwd}; start one with -p")
        session = await _load(runner, records[0].id, "-c")
    model_id = options.model or (
        session.record.selected_model_id if session else runner.cfg.default_model_id()
    )
    try:
        # Resolved before a bundle is made, so that a bad id leaves no empty session.
        hub.model(model_id)
    except UnknownModelError as exc:
        if session is not None:
            session.close()
        raise Failure(EXIT_USAGE, _one_line(exc)) from None
    if session is None:
        try:
            return await runner.create_session(
                str(runner.paths.cwd), model_id=model_id, mode=options.mode or "agent"
            )
        except OSError as exc:
            raise Failure(
                EXIT_FAILED, describe_os_error("cannot create the session bundle", exc)
            ) from None
    # Saved with the turn's user message, so the session keeps them, as a mode picked in an
    # editor is kept.
    session.record.selected_model_id = model_id
    if options.mode is not None:
        session.record.mode = options.mode
    return session


async def _load(runner: SessionRunner, session_id: str, flag: str) -> Session:
    try:
        session = await anyio.to_thread.run_sync(runner.store.load, session_id)
    except SessionNotFound:
        raise Failure(
            EXIT_USAGE, f"{flag} {session_id}: no such session in {runner.store.root}"
        ) from None
    except BundleError as exc:
        raise Failure(EXIT_FAILED, f"{flag} {session_id}: {exc}") from None
    try:
        return refuse_child(session)
    except ReadOnlySession as exc:
        raise Failure(EXIT_USAGE, f"{flag} {exc}") from None


class PrintTurn:
    """One user turn of print mode: its events to the output and the console, then the wait
    for its memory run, then the result."""

    def __init__(
        self,
        runner: SessionRunner,
        session: Session,
        options: PrintOptions,
        console: Console,
        output: Output,
        meter: UsageMeter,
    ) -> None:
        self.runner = runner
        self.session = session
        self.options = options
        self.console = console
        self.output = output
        self.meter = meter
        self.reply = Reply()
        self.stop: StopReason | None = None
        self.failure: Failure | None = None
        self.why: str | None = None  # the stderr line of a stop other than end_turn
        self.blocked: str | None = None  # a UserPromptSubmit hook's block, named
        self.titles: dict[str, str] = {}
        self.memory = MemoryWatch(
            session.id,
            console,
            output,
            lambda task_id: runner.pool_for(session).get(task_id),
            session.subagents_dir(),
        )
        self.editor = Unattended(
            allow=options.yes,
            permission_mode=runner.cfg.tools.permission_mode,
            say=console.error,
        )

    async def run(self, text: str) -> int:
        async with self.runner.running():
            signalled = await until_signalled(partial(self._until_stopped, text))
        await self.memory.settle()  # a run the stop cut short says so
        if signalled is not None:
            line = "interrupted" if signalled == signal.SIGINT else "terminated"
            self._result(EXIT_CANCELLED, line, "cancelled" if self.stop is None else self.stop)
            self.console.error(line)
            return EXIT_CANCELLED
        if self.failure is not None:
            return self._result(self.failure.code, self.failure.line, self.stop)
        assert self.stop is not None
        code = self._result(STOP_EXIT[self.stop], self.why, self.stop)
        if self.stop == "end_turn" and self.options.output_format == "text":
            self.console.line(f"[end_turn] session {self.session.id}")
        return code

    async def _until_stopped(self, text: str, stop: anyio.Event) -> None:
        """The turn and the memory wait, cancelled by Ctrl-C or SIGTERM (`stop`)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_set, stop, tg.cancel_scope)
            await self._turn_then_memory(text)
            tg.cancel_scope.cancel()

    async def _turn_then_memory(self, text: str) -> None:
        failure = None
        try:
            with saving(self.session):
                self.stop = await self.runner.run_turn(
                    self.session,
                    text,
                    self.emit,
                    editor=self.editor,
                    notify_memory=self.memory.notify,
                    meter=self.meter,
                )
        except LLMError as exc:
            failure = Failure(EXIT_FAILED, _one_line(exc))
        except UnknownModelError as exc:
            failure = Failure(EXIT_USAGE, _one_line(exc))
        except BundleBusy as exc:
            failure = Failure(EXIT_FAILED, f"session {self.session.id}: {exc}")
        except (BundleError, SessionUnsaved) as exc:
            failure = Failure(EXIT_FAILED, str(exc))
        self.output.end_reply()
        if failure is not None:
            self.failure = failure
            self.console.error(failure.line)
        elif self.stop is not None and (why := self._stopped_because(self.stop)):
            self.why = why
            self.console.error(why)
        await self.memory.wait_before_exit(self.runner.clock)

    async def emit(self, event: TurnEvent) -> None:
        """The engine's events: the reply to the output, tool calls to the console."""
        if isinstance(event, PromptBlocked):
            self.blocked = event.text  # the hook's words, not the model's: said on stderr
        elif isinstance(event, ServerNotice):
            # Not the model's words: not the reply. Print mode's stderr is its log too, where
            # the MCP client's warning already says this line, unless the level hides it.
            if not MCP_LOG.isEnabledFor(logging.WARNING):
                self.console.error(event.text.strip())
        elif piece := self.reply.add(event):
            self.console.clear_status()
            self.output.text(piece)
        elif isinstance(event, ToolCallStarted):
            self.titles[event.call_id] = event.title
            self.console.status(f"tool: {event.title}")
        elif isinstance(event, ToolCallFinished):
            title = self.titles.get(event.call_id, event.call_id)
            self.console.line(f"tool: {title} ({event.status})")
        self.output.event(self.session.id, event)

    def _stopped_because(self, stop: StopReason) -> str | None:
        session = f"(session {self.session.id})"
        if stop == "max_tokens":
            model = self.session.record.selected_model_id
            return f"stopped: max_tokens: the reply reached the output limit of {model} {session}"
        if stop == "max_turn_requests":
            limit = self.runner.cfg.agent.max_turns
            return f"stopped: max_turn_requests: agent.max_turns ({limit}) reached {session}"
        if stop == "refusal" and self.blocked is not None:
            return _one_line(self.blocked)
        if stop == "refusal":
            return f"stopped: refusal: the model refused to answer {session}"
        if stop == "cancelled":
            return f"stopped: cancelled {session}"
        return None

    def _result(self, code: int, error: str | None, stop: StopReason | None) -> int:
        """End the output with the result object; the exit code."""
        self.output.result(
            result_object(
                code,
                error,
                result=self.reply.text,
                stop_reason=stop,
                session_id=self.session.id,
                usage=self.meter.as_json(),
                memory=self.memory.summary(),
            )
        )
        return code


def _one_line(what: Exception | str) -> str:
    # Provider errors may quote a multi-line response body, a hook's reason may be its whole
    # stderr: stderr gets one line per failure.
    return " ".join(str(what).split())
