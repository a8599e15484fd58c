"""Print mode, `acp-memory -p TEXT`: one turn for a script or a CI job, the reply on stdout,
console lines on stderr, an exit code that says how the turn ended.

`options` (the flags and exit codes) is light and imported by the parser; `run` does the work.
"""
