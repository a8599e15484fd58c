"""The built-in offline model: deterministic, no network, no key.

`provider.py` streams its answers; offered the memory tools it is the memory child
(`memory_child.py`, with the phrases that ask to keep or forget in `memory_intent.py`), else the
main agent (`main_agent.py`). Like every model it keeps no state between requests.
"""
