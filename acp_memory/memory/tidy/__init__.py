"""Tidying a root: the candidate groups a tidy run is handed (`candidates.py`), the duplicate
pairs found by MinHash and LSH (`minhash.py`)."""

from acp_memory.memory.tidy.candidates import MAX_GROUPS, Group, Kind, candidate_groups

__all__ = ["MAX_GROUPS", "Group", "Kind", "candidate_groups"]
