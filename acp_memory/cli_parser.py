"""The `acp-memory` command line's parser: the shared flags, the subcommands and their --help
texts, a usage error as one line."""

from __future__ import annotations

import argparse
from typing import NoReturn

from acp_memory import __version__
from acp_memory.printmode.options import EXIT_CODES_HELP, add_print_flags

SUBCOMMANDS = ("acp", "demo", "http", "notes", "doctor", "proxy")

EPILOG = """\
defaults:
  home       --home, else $ACP_MEMORY_HOME, else ~/.acp-memory
  config     <home>/config.yaml (--config names another file)
  .env       <home>/.env sets the variables that are not already set
  sessions   <home>/sessions (--sessions-dir, else sessions.dir in the config)
  log file   <home>/logs/acp-memory.log, written when logging.to_file is true
  cwd        the working directory (--cwd names another); project notes in <cwd>/memory

Without a command, acp-memory serves ACP on stdio, as `acp-memory acp` does.
`acp-memory COMMAND --help` describes each command.

""" + EXIT_CODES_HELP

ACP_DESCRIPTION = (
    "Serve the Agent Client Protocol on stdin/stdout (newline-delimited JSON-RPC 2.0, logs on "
    "stderr) until stdin closes. This is what an editor starts; a bare `acp-memory` does the same."
)
DEMO_DESCRIPTION = (
    "Start the agent as an editor would and show long-term memory at work, on the built-in "
    "offline model (no network, no key): a note recalled, a fact saved, that fact recalled in a "
    "fresh session, the memory runs as they happen and their child sessions on disk. It runs in "
    "a new folder it keeps (--home names another: new, empty, or an earlier demo's)."
)
HTTP_DESCRIPTION = (
    "Serve the HTTP API (sessions and their turns, each session's updates as server-sent "
    "events, the notes, the background tasks and memory runs, an OpenAI-compatible "
    "/v1/chat/completions; the OpenAPI document at /openapi.json) until SIGTERM or Ctrl-C, "
    "which waits up to 15 s for running memory runs. On 127.0.0.1:8080 by default (httpserver "
    "in the config); an address other machines can reach needs a token, which every request "
    "must then carry as `Authorization: Bearer <token>`."
)
DOCTOR_DESCRIPTION = (
    "Check the config file, the model ids and their providers, the MCP servers (mcp.servers), "
    "shared project memory (memory.shared: the DSN masked, the project key), "
    "and that the home and sessions folders are writable. Prints one finding per line; exits 1 "
    "when any finding is an error."
)
PROXY_DESCRIPTION = (
    "Give another ACP agent (Claude Code, Codex, Gemini CLI, ...) acp-memory's long-term "
    "memory: start COMMAND as the inner agent (its stderr passed through, the environment "
    "passed on) and relay ACP between the editor on stdin/stdout and it, adding memory on the "
    "way. Without COMMAND, proxy.agent (command, args, env) in the config names the agent. "
    "Exits 1 when the inner agent dies, 2 when it cannot be started."
)


def _shared_flags(suppress: bool) -> argparse.ArgumentParser:
    # The same flags live on the main parser and on every subparser; SUPPRESS on the
    # subparsers keeps a flag given before the subcommand from being reset after it.
    p = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    p.add_argument(
        "--config", metavar="PATH", default=default, help="config file (default <home>/config.yaml)"
    )
    p.add_argument(
        "--home",
        metavar="DIR",
        default=default,
        help="home folder ($ACP_MEMORY_HOME, else ~/.acp-memory)",
    )
    p.add_argument(
        "--sessions-dir",
        metavar="DIR",
        default=default,
        help="session bundles (default sessions.dir, else <home>/sessions)",
    )
    p.add_argument(
        "--cwd",
        metavar="DIR",
        default=default,
        help="working directory; project notes in <cwd>/memory (default: the current one)",
    )
    p.add_argument(
        "--log-level",
        metavar="LEVEL",
        default=default,
        type=_log_level,
        choices=["debug", "info", "warning", "error"],
        help="debug, info, warning (or warn) or error (default logging.level, else info)",
    )
    return p


def _log_level(value: str) -> str:
    # `warn` is what other tools (and the reference agent's scripts) pass.
    level = value.lower()
    return "warning" if level == "warn" else level


class _OneLineErrors(argparse.ArgumentParser):
    """A usage error is one line on stderr, like every other failure (status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrors(
        prog="acp-memory",
        description="An Agent Client Protocol agent on stdio with long-term markdown memory.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_shared_flags(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"acp-memory {__version__}")
    add_print_flags(parser)
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser
    )
    shared = [_shared_flags(suppress=True)]
    acp = sub.add_parser(
        "acp", parents=shared, help="serve ACP on stdio (the default)", description=ACP_DESCRIPTION
    )
    acp.add_argument(
        "--session-id",
        metavar="ID",
        help="the connection's first session/new opens session ID (created when it does not "
        "exist) and replays its history after the answer",
    )
    sub.add_parser(
        "demo",
        parents=shared,
        help="long-term memory at work, on the offline model",
        description=DEMO_DESCRIPTION,
    )
    http = sub.add_parser(
        "http",
        parents=shared,
        help="the HTTP API on 127.0.0.1",
        description=HTTP_DESCRIPTION,
    )
    http.add_argument("--host", help="address to listen on (default httpserver.host, 127.0.0.1)")
    http.add_argument(
        "--port", type=int, help="port (default httpserver.port, 8080; 0 picks a free one)"
    )
    http.add_argument(
        "--auth-token",
        metavar="TOKEN",
        help="bearer token every request must carry (default httpserver.auth_token); required "
        "off loopback",
    )
    proxy = sub.add_parser(
        "proxy",
        parents=shared,
        help="long-term memory for another ACP agent",
        description=PROXY_DESCRIPTION,
        usage="acp-memory proxy [--home DIR] [--config PATH] -- COMMAND [ARGS...]",
    )
    proxy.add_argument(
        "inner",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="the inner agent and its arguments (default proxy.agent in the config)",
    )
    doctor = sub.add_parser(
        "doctor",
        parents=shared,
        help="check the config and the environment",
        description=DOCTOR_DESCRIPTION,
    )
    doctor.add_argument(
        "--online",
        action="store_true",
        help="also make one tiny request per configured provider to check reachability and the "
        "key, start each mcp.servers entry to count its tools, and connect to memory.shared's "
        "PostgreSQL server (its version, database, schema version and the key's notes)",
    )
    from acp_memory.memory.cli import add_notes_parser

    add_notes_parser(sub, shared)
    return parser
