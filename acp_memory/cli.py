"""The `acp-memory` command line: the ACP server by default, plus its helper subcommands."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from acp_memory import __version__
from acp_memory.config import Config, ConfigError, Paths, load_config, resolve_paths

SUBCOMMANDS = ("acp", "demo", "http", "notes", "doctor")


def _shared_flags(suppress: bool) -> argparse.ArgumentParser:
    # The same flags live on the main parser and on every subparser; SUPPRESS on the
    # subparsers keeps a flag given before the subcommand from being reset after it.
    p = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    p.add_argument("--config", metavar="PATH", default=default, help="config file")
    p.add_argument("--home", metavar="DIR", default=default, help="home folder")
    p.add_argument("--sessions-dir", metavar="DIR", default=default, help="session bundles")
    p.add_argument("--cwd", metavar="DIR", default=default, help="working directory")
    p.add_argument(
        "--log-level",
        metavar="LEVEL",
        default=default,
        choices=["debug", "info", "warning", "error"],
        help="debug, info, warning or error",
    )
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-memory",
        description="An Agent Client Protocol agent on stdio with long-term markdown memory.",
        parents=[_shared_flags(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"acp-memory {__version__}")
    parser.add_argument(
        "-p",
        "--print",
        dest="print_text",
        metavar="TEXT",
        help="one-shot print mode: run one turn and print the reply",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    shared = [_shared_flags(suppress=True)]
    sub.add_parser("acp", parents=shared, help="serve ACP on stdio (the default)")
    sub.add_parser("demo", parents=shared, help="a scripted session on the offline model")
    sub.add_parser("http", parents=shared, help="HTTP surface on 127.0.0.1")
    sub.add_parser("doctor", parents=shared, help="check the config and the environment")
    from acp_memory.memory.cli import add_notes_parser

    add_notes_parser(sub, shared)
    return parser


def setup_logging(level: str) -> None:
    """Logs go to stderr: in acp mode stdout is the wire."""
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def load(args: argparse.Namespace) -> tuple[Config, Paths]:
    """Resolve the paths and load the config the flags point at."""
    paths = resolve_paths(home=args.home, config=args.config, cwd=args.cwd)
    cfg = load_config(paths, explicit=args.config is not None)
    paths = resolve_paths(
        home=args.home, config=args.config, sessions_dir=args.sessions_dir, cwd=args.cwd, cfg=cfg
    )
    return cfg, paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "acp"
    if command == "doctor":
        from acp_memory.doctor import run_doctor

        return run_doctor(args)
    try:
        cfg, paths = load(args)
    except ConfigError as exc:
        print(f"acp-memory: {exc}", file=sys.stderr)
        return 2
    setup_logging(args.log_level or cfg.logging.level)
    if cfg.logging.to_file:
        _log_to_file(paths)
    handlers: dict[str, Callable[[], int]] = {
        "acp": lambda: _run_acp(cfg, paths, args),
        "demo": lambda: _run_demo(cfg, paths, args),
        "http": lambda: _not_yet("http"),
        "notes": lambda: _run_notes(cfg, paths, args),
    }
    return handlers[command]()


def _run_acp(cfg: Config, paths: Paths, args: argparse.Namespace) -> int:
    if args.print_text is not None:
        from acp_memory.oneshot import run_print_mode

        return run_print_mode(cfg, paths, args.print_text)
    from acp_memory.acp.stdio import serve_stdio

    return serve_stdio(cfg, paths)


def _run_demo(cfg: Config, paths: Paths, args: argparse.Namespace) -> int:
    from acp_memory.demo import run_demo

    return run_demo(args)


def _run_notes(cfg: Config, paths: Paths, args: argparse.Namespace) -> int:
    from acp_memory.memory.cli import run_notes

    return run_notes(args, cfg, paths)


def _not_yet(name: str) -> int:
    print(f"acp-memory {name}: not available in this version yet", file=sys.stderr)
    return 2


def _log_to_file(paths: Paths) -> None:
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(paths.logs_dir / "acp-memory.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
