"""The background pool of a session: commands and child agents that outlive a tool call.

`records.py` is `background/<taskId>/meta.json`, `log.py` the bounded `output.log` and the
read-time cleaning of terminal output, `process.py` a running command (a local process group
or a client terminal), `pool.py` the per-session pool with its bounds, timeouts and statuses.
"""
