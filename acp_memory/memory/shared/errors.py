"""What makes the shared project memory unusable now: one line for a person, whatever the
cause (the server out of reach, or a schema newer than this build knows)."""


class SharedUnavailable(Exception):
    """The server cannot be used now. str(): one line, e.g.
    'shared project memory postgresql://user:***@host/db: cannot connect: <reason>'."""
