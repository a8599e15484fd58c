"""The memory runs' in-flight bounds (`RunBounds`): a token of each bound per run, taken on the
run's behalf; a full bound skips the run with the seed's reason and never queues it."""

from __future__ import annotations

import pytest

from acp_memory.runtime.run_bounds import RunBounds

pytestmark = pytest.mark.anyio


async def test_a_full_session_bound_skips_the_run_and_others_sessions_still_start():
    bounds = RunBounds(session_limit=2, process_limit=16)
    one, two, three, other = object(), object(), object(), object()
    assert bounds.admit("s", one) is None and bounds.admit("s", two) is None
    assert bounds.admit("s", three) == "memory runs in flight for this session: 2 of 2"
    assert bounds.admit("t", other) is None
    assert (bounds.in_flight("s"), bounds.in_flight("t"), bounds.in_flight()) == (2, 1, 3)
    bounds.release("s", one)
    assert bounds.admit("s", three) is None  # a run that ended gave its token back


async def test_a_full_process_bound_gives_the_session_token_back():
    bounds = RunBounds(session_limit=2, process_limit=1)
    first, second = object(), object()
    assert bounds.admit("s", first) is None
    assert bounds.admit("t", second) == "memory runs in flight for this process: 1 of 1"
    assert bounds.in_flight("t") == 0 and bounds.in_flight() == 1
    # A session with a run in flight too: the token its own bound gave is given back.
    assert bounds.admit("s", second) == "memory runs in flight for this process: 1 of 1"
    assert bounds.in_flight("s") == 1
    bounds.release("s", first)
    bounds.release("s", first)  # given back once: a second release changes nothing
    assert bounds.in_flight() == 0 and bounds.admit("t", second) is None
