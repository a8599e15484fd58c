"""`acp-memory http`: the HTTP API (FastAPI on uvicorn), imported only by that command.

`serve.py` runs it, `app.py` assembles the application, `agent.py` holds the sessions and turns
of the server, `security.py` guards every request, and each `routes_*.py` serves one subject.
"""
