"""The runtime: a user turn for any surface (the runner), the sessions a front end holds, the
memory runs (a service the runner owns, and a turn's run) and spawn_agent's children; what the
surfaces stand on."""
