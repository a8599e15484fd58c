"""An MCP server's command line with its credentials masked: `doctor` shows it so, and
session.json keeps the editor's servers so (their URLs through `masked_url`, the values of env
and headers not at all).

A flag's value is masked by the flag's name, whatever it looks like (`--token X`,
`--api-key=X`), a URL's query values and password by their place; every other argument goes
through the note redaction, which knows a secret by its shape (`ghp_…`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from acp_memory.mcpclient.specs import MASK, masked_urls
from acp_memory.memory.redact import redact_text

# An argument after a flag so named (or in --name=value) is a secret whatever its shape.
_SECRET_FLAG = re.compile(r"^--?[\w-]*(key|token|secret|password|passwd|auth)[\w-]*$", re.I)


def masked_args(argv: Sequence[str]) -> list[str]:
    """Each argument, the values of secret-named flags masked, URLs as `masked_url` shows
    them and secret-looking values redacted."""
    shown: list[str] = []
    for previous, arg in zip(["", *argv], argv, strict=False):
        flag, eq, _ = arg.partition("=")
        if eq and _SECRET_FLAG.match(flag):
            shown.append(f"{flag}={MASK}")
        elif _SECRET_FLAG.match(previous):
            shown.append(MASK)
        else:
            shown.append(redact_text(masked_urls(arg)))
    return shown
