"""`acp-memory doctor`: the checks of the config and the environment (`checks.py`), those of
the MCP servers (`servers.py`), those of shared project memory (`shared.py`) and the lines
it prints (`findings.py`)."""

from acp_memory.doctor.checks import check, run_doctor
from acp_memory.doctor.findings import Finding, Level

__all__ = ["Finding", "Level", "check", "run_doctor"]
