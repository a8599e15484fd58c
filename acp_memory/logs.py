"""Where the log goes and how it reads: stderr (in acp mode stdout is the wire), plain
`acp-memory: …` lines for a person, the time, level and logger for a server's log, and every
URL's credentials masked on the way out."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

from acp_memory.mcpclient.specs import masked_urls

if TYPE_CHECKING:
    from acp_memory.config import Paths

SERVER_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _MaskedUrls(logging.Filter):
    """Each URL a log line names with its credentials masked: httpx names every request's
    URL, the MCP SDK its server's, whose query may carry a token."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if (masked := masked_urls(message)) != message:
            record.msg, record.args = masked, ()
        return True


def setup_logging(level: str, *, plain: bool = False) -> None:
    """Logs go to stderr: in acp mode stdout is the wire. `plain` is for a person reading a
    command's stderr: each line `acp-memory: <message>`, like its other lines, MCP servers'
    stderr only at debug; a server's log keeps the time, level and logger."""
    terminal = logging.StreamHandler(sys.stderr)
    terminal.addFilter(_MaskedUrls())
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="acp-memory: %(message)s" if plain else SERVER_LOG_FORMAT,
        handlers=[terminal],
    )
    if level.lower() != "debug":
        # httpx says every request at info (a line per model call, per MCP message).
        for name in ("httpx", "httpx2"):
            logging.getLogger(name).setLevel(logging.WARNING)
        if plain:
            from acp_memory.mcpclient.stderr import SERVER_STDERR

            # What a server writes on its stderr stays in the log file (logging.to_file).
            terminal.addFilter(lambda record: record.name != SERVER_STDERR)


def log_to_file(paths: Paths) -> None:
    """Also log to `<home>/logs/acp-memory.log` (logging.to_file), URLs masked as on stderr."""
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(paths.logs_dir / "acp-memory.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter(SERVER_LOG_FORMAT))
    handler.addFilter(_MaskedUrls())
    logging.getLogger().addHandler(handler)
