"""The background pool of a session: commands and child agents that outlive a tool call.

`records.py` is `background/<taskId>/meta.json`, `log.py` the bounded `output.log` and the
read-time cleaning of terminal output, `process.py` a running command (a local process group
or a client terminal), `task.py` one task run to its outcome, `admission.py` the bounds, ids
and queue a task gets in by, `announcements.py` what the next model step hears of ended
tasks, `pool.py` the per-session pool that starts, lists and stops them.
"""
