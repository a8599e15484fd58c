"""A shared memory DSN as people may see it: checked, masked, and the one warning it may earn.

A password never appears in any output, log or file: every message names the database by
`mask_dsn`, which keeps the user, host, port and database and drops everything else.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import quote

# sslmode values that encrypt and check the server (`require` and stronger).
STRONG_SSLMODES = ("require", "verify-ca", "verify-full")


class DsnError(ValueError):
    """A DSN that cannot be parsed; the message names it masked."""


def parse_dsn(dsn: str) -> dict[str, str]:
    """The DSN's parameters (URL or `key=value` form), or DsnError."""
    from psycopg.conninfo import conninfo_to_dict  # only where a DSN is set

    try:
        return {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    except Exception as exc:  # psycopg.ProgrammingError names the bad part, never the password
        raise DsnError(f"memory.shared.dsn {mask_text(dsn)} is not a PostgreSQL DSN: "
                       f"{str(exc).splitlines()[0]}") from None


def mask_dsn(dsn: str) -> str:
    """`postgresql://user:***@host:port/db`: the password (if any) as ***, nothing else kept."""
    try:
        params = parse_dsn(dsn)
    except DsnError:
        return mask_text(dsn)
    return _shown(params)


def mask_text(dsn: str) -> str:
    """A DSN that does not parse, as far as it can be shown: its scheme and host only."""
    head, _, rest = dsn.partition("://")
    if not rest:
        return "(unparsable DSN)"
    host = rest.rpartition("@")[2].split("/", 1)[0].split("?", 1)[0]
    return f"{head}://***@{host}/…"


def _shown(params: dict[str, str]) -> str:
    user = params.get("user", "")
    secret = ":***" if params.get("password") else ""
    host = params.get("host", "")
    port = f":{params['port']}" if params.get("port") and not host.startswith("/") else ""
    at = f"{quote(user, safe='')}{secret}@" if user or secret else ""
    where = "" if host.startswith("/") else host
    tail = f"?host={host}" if host.startswith("/") else ""
    return f"postgresql://{at}{where}{port}/{params.get('dbname', '')}{tail}"


def dsn_warnings(dsn: str) -> list[str]:
    """One warning for a host off this machine reached with an sslmode weaker than require."""
    params = parse_dsn(dsn)
    hosts = [h for h in params.get("host", "").split(",") if h]
    remote = [h for h in hosts if not _is_local(h)]
    mode = params.get("sslmode", "prefer")
    if remote and mode not in STRONG_SSLMODES:
        return [f"memory.shared.dsn {_shown(params)} reaches {remote[0]} with sslmode={mode}: "
                "the notes and the password may cross the network unencrypted; add "
                "?sslmode=require (or verify-full)"]
    return []


def _is_local(host: str) -> bool:
    if host.startswith("/") or host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
