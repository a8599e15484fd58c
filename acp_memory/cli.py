"""The `acp-memory` command line: the ACP server by default, plus its helper subcommands (their
flags parsed by cli_parser.py)."""

from __future__ import annotations

import argparse
import logging
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from acp_memory.cli_parser import build_parser
from acp_memory.logs import log_to_file, setup_logging
from acp_memory.oserror import describe_os_error
from acp_memory.printmode.options import PrintOptions, print_flags_without_p
from acp_memory.stderr import error

if TYPE_CHECKING:
    from acp_memory.config import Config, Paths

# The config package (pydantic) is imported only once main() is inside its Ctrl-C guard,
# which also keeps `--help` quick.

log = logging.getLogger(__name__)

# Exit status of a process stopped by SIGINT, as shells report it.
INTERRUPTED = 130

NO_INNER_AGENT = (
    "acp-memory proxy: no inner agent: name its command after `--` "
    "(acp-memory proxy -- COMMAND [ARGS...]) or set proxy.agent.command in the config"
)
TTY_HINT = (
    "acp-memory speaks ACP (JSON-RPC) on stdin/stdout and is meant to be started by an editor; "
    "`acp-memory --help` lists the commands. Waiting for input (Ctrl-D ends)."
)


def load(args: argparse.Namespace) -> tuple[Config, Paths]:
    """Resolve the paths and load the config the flags point at."""
    from acp_memory.config import load_config, resolve_paths

    paths = resolve_paths(home=args.home, config=args.config, cwd=args.cwd)
    cfg = load_config(paths, explicit=args.config is not None)
    paths = resolve_paths(
        home=args.home, config=args.config, sessions_dir=args.sessions_dir, cwd=args.cwd, cfg=cfg
    )
    return cfg, paths


def _shared_warnings(cfg: Config, paths: Paths) -> list[str]:
    """memory.shared's warnings at start; a DSN that does not parse is a ConfigError."""
    shared = cfg.memory.shared
    if not shared.dsn and not shared.unset_variables():
        return []  # off, as meant: nothing of it is imported
    from acp_memory.config import ConfigError
    from acp_memory.memory.shared.checks import shared_config_warnings
    from acp_memory.memory.shared.dsn import DsnError

    try:
        return shared_config_warnings(cfg)
    except DsnError as exc:
        raise ConfigError(f"{paths.config_file}: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    label = "acp-memory"
    try:
        args = build_parser().parse_args(argv)
        label = args.command or ("-p" if args.print_text is not None else "acp")
        return _main(args)
    except KeyboardInterrupt:
        # Ctrl-C is how a terminal user stops any command: no traceback, the status shells
        # expect. The server says nothing: its stderr is an editor's log, and `demo` runs
        # it in the same process group, where a single Ctrl-C must not print two lines.
        if label != "acp":
            error("interrupted")
        return INTERRUPTED
    except OSError as exc:
        # The expected failures are caught where their context is known; this one line is
        # the safety net for the rest, whose traceback only helps a developer.
        log.debug("%s failed", label, exc_info=True)
        error(describe_os_error(f"{label} failed", exc))
        return 1


def _main(args: argparse.Namespace) -> int:
    from acp_memory.config import ConfigError

    command = args.command or "acp"
    serving = command == "acp" and args.print_text is None
    if args.command is not None and args.print_text is not None:
        return _usage_error(
            f"-p runs one turn on its own; it does not go with `{args.command}`", args
        )
    if problem := print_flags_without_p(args):
        return _usage_error(problem)
    problem = _cwd_problem(args.cwd) or _session_id_problem(getattr(args, "session_id", None))
    if problem:
        return _unconfigured(problem) if serving else _usage_error(problem, args)
    if command == "doctor":
        from acp_memory.doctor import run_doctor

        # Its findings are what it says; the log would say each failure a second time.
        setup_logging(args.log_level or "error", plain=True)
        try:
            return run_doctor(args)
        except ConfigError as exc:
            error(str(exc))
            return 2
    try:
        cfg, paths = load(args)
        shared_warnings = _shared_warnings(cfg, paths)  # a DSN that does not parse: an error
    except ConfigError as exc:
        return _unconfigured(str(exc)) if serving else _usage_error(str(exc), args)
    level = args.log_level or cfg.logging.level
    if (
        args.print_text is not None
        and not args.log_level
        and "level" not in cfg.logging.model_fields_set
    ):
        # Print mode's stderr is read by a person: its failure is one line, not a retry log.
        level = "warning"
    # The proxy's stderr, as the server's, is an editor's log.
    setup_logging(level, plain=command not in ("http", "proxy") and not serving)
    if cfg.logging.to_file:
        try:
            log_to_file(paths)
        except OSError as exc:
            error(describe_os_error("cannot open the log file (logging.to_file)", exc))
            return 1
    from acp_memory.config.loader import unknown_keys

    for key in unknown_keys(cfg):
        log.warning("config: unknown key %s is ignored (acp-memory doctor lists them)", key)
    for line in shared_warnings:
        log.warning("config: %s", line)
    handlers: dict[str, Callable[[], int]] = {
        "acp": lambda: _run_acp(cfg, paths, args),
        "demo": lambda: _run_demo(cfg, paths, args),
        "http": lambda: _run_http(cfg, paths, args),
        "notes": lambda: _run_notes(cfg, paths, args),
        "proxy": lambda: _run_proxy(cfg, paths, args),
    }
    return handlers[command]()


def _usage_error(problem: str, args: argparse.Namespace | None = None) -> int:
    error(problem)
    if args is not None and args.print_text is not None:
        # Print mode's json and stream-json end with a result object, this failure's too.
        from acp_memory.printmode.output import end_with_failure

        end_with_failure(args.print_output_format or "text", sys.stdout, 2, problem)
    return 2


def _unconfigured(problem: str) -> int:
    """An editor started us with a config or flag we cannot use: rather than exit before
    initialize (the editor would show only "server exited"), answer it and then refuse each
    session request with `problem`, which the editor shows."""
    from acp_memory.acp.stdio import serve_stdio_unconfigured

    error(problem)
    setup_logging("warning")
    # Exit 2 as for any other config or usage error, once the editor has been told (or the
    # signal's own status).
    return serve_stdio_unconfigured(problem) or 2


def _cwd_problem(cwd: str | None) -> str | None:
    """Why the --cwd folder cannot be used, or None; checked before anything is created."""
    if cwd is None:
        return None
    from acp_memory.config.loader import expand

    path = Path(expand(cwd)).absolute()
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"--cwd {path}: {exc.strerror or exc}"
    if not stat.S_ISDIR(mode):
        return f"--cwd {path}: not a folder"
    return None


def _session_id_problem(session_id: str | None) -> str | None:
    """Why `acp --session-id` cannot name a session, or None."""
    if session_id is None:
        return None
    from acp_memory.sessions.model import SESSION_ID_RULE, is_session_id

    if is_session_id(session_id):
        return None
    return f"--session-id {session_id!r}: not a session id ({SESSION_ID_RULE})"


def _run_acp(cfg: Config, paths: Paths, args: argparse.Namespace) -> int:
    if args.print_text is not None:
        from acp_memory.printmode.run import run_print_mode

        return run_print_mode(cfg, paths, PrintOptions.from_args(args))
    from acp_memory.acp.stdio import serve_stdio

    if sys.stdin is not None and sys.stdin.isatty():
        # A person typed the command: without this line it would seem to hang.
        print(TTY_HINT, file=sys.stderr, flush=True)
    return serve_stdio(cfg, paths, getattr(args, "session_id", None))


def _run_demo(cfg: Config, paths: Paths, args: argparse.Namespace) -> int:
    from acp_memory.demo import run_demo

    return run_demo(args)


def _run_http(cfg: Config, paths: Paths, args: argparse.Namespace) -> int:
    # FastAPI and uvicorn load here only: the ACP agent's cold start never pays for them.
    from acp_memory.httpserver.serve import run_http

    return run_http(cfg, paths, args.host, args.port, args.auth_token)


def _run_proxy(cfg: Config, paths: Paths, args: argparse.Namespace) -> int:
    inner = list(args.inner)
    if inner[:1] == ["--"]:
        inner = inner[1:]
    agent = cfg.proxy.agent
    if not inner and agent.command:
        inner = [agent.command, *agent.args]
    if not inner:
        print(NO_INNER_AGENT, file=sys.stderr, flush=True)
        return 2
    from acp_memory.proxy.serve import serve_proxy

    return serve_proxy(cfg, paths, inner, agent.env)


def _run_notes(cfg: Config, paths: Paths, args: argparse.Namespace) -> int:
    if getattr(args, "notes_action", None) == "tidy":  # a model's run: the runtime's
        from acp_memory.runtime.tidy_run import tidy_command

        return tidy_command(cfg, paths, args.scope.rstrip(":"), apply=args.apply,
                            as_json=args.json)
    from acp_memory.memory.cli import run_notes

    return run_notes(args, cfg, paths)
