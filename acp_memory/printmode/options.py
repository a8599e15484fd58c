"""Print mode's flags, its exit codes and what the flags ask for."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Literal

from acp_memory.modes import MODES

OutputFormat = Literal["text", "json", "stream-json"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("text", "json", "stream-json")

# Exit codes, as --help and the README list them.
EXIT_OK = 0  # end_turn
EXIT_FAILED = 1  # a model or runtime failure
EXIT_USAGE = 2  # a usage or config error
EXIT_STOPPED = 3  # max_turn_requests or max_tokens
EXIT_REFUSED = 4  # refusal
EXIT_CANCELLED = 130  # Ctrl-C (or SIGTERM)

EXIT_CODES_HELP = """\
print mode (-p) exit codes:
  0    the turn ended (end_turn)
  1    a model or runtime failure
  2    a usage or config error (a bad flag or key, an unknown model or session)
  3    the turn was cut short (max_turn_requests or max_tokens)
  4    the model refused, or a UserPromptSubmit hook blocked the prompt (refusal)
  130  cancelled (Ctrl-C)
  every non-zero exit says why in one line on stderr; json and stream-json end
  with a result object all the same (is_error, error, exitCode)
"""

# The flags that mean something only with -p (dest -> how a user types it). Their dests are
# prefixed: a subcommand's own flag of the same name (`notes rm --yes`) must not collide.
_PRINT_ONLY = {
    "print_continue": "-c/--continue",
    "print_resume": "--resume",
    "print_model": "--model",
    "print_mode": "--mode",
    "print_output_format": "--output-format",
    "print_yes": "--yes",
}


def add_print_flags(parser: argparse.ArgumentParser) -> None:
    """-p and its companions, as a group of the main parser."""
    group = parser.add_argument_group("print mode")
    group.add_argument(
        "-p",
        "--print",
        dest="print_text",
        metavar="TEXT",
        help="run one turn and print the reply on stdout (TEXT - reads stdin)",
    )
    which = group.add_mutually_exclusive_group()
    which.add_argument(
        "-c",
        "--continue",
        dest="print_continue",
        action="store_true",
        default=None,
        help="continue the most recent session of this cwd",
    )
    which.add_argument("--resume", dest="print_resume", metavar="ID", help="continue session ID")
    group.add_argument(
        "--model",
        dest="print_model",
        metavar="ID",
        help="model for this turn, <provider>/<model> (kept by the session)",
    )
    group.add_argument(
        "--mode",
        dest="print_mode",
        choices=MODES,
        help="agent, plan or ask for this turn (kept by the session)",
    )
    group.add_argument(
        "--output-format",
        dest="print_output_format",
        choices=OUTPUT_FORMATS,
        default=None,
        help="text (the reply), json (one result object) or stream-json (one object per "
        "update, then the result); default text",
    )
    group.add_argument(
        "--yes",
        dest="print_yes",
        action="store_true",
        default=None,
        help="allow what tools.permission_mode would ask for (denied otherwise)",
    )


def print_flags_without_p(args: argparse.Namespace) -> str | None:
    """The problem with print-mode flags given without -p, or None."""
    given = [flag for dest, flag in _PRINT_ONLY.items() if getattr(args, dest, None) is not None]
    if args.print_text is None and given:
        return f"{', '.join(given)}: for print mode only; add -p TEXT"
    return None


@dataclass(frozen=True)
class PrintOptions:
    """What the flags ask of one print-mode run."""

    text: str  # the prompt as given: "-" means stdin
    continue_session: bool = False
    resume: str | None = None
    model: str | None = None
    mode: str | None = None
    output_format: OutputFormat = "text"
    yes: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PrintOptions:
        return cls(
            text=args.print_text,
            continue_session=bool(args.print_continue),
            resume=args.print_resume,
            model=args.print_model,
            mode=args.print_mode,
            output_format=args.print_output_format or "text",
            yes=bool(args.print_yes),
        )
