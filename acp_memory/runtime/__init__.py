"""The runtime: a user turn for any surface (the runner), the sessions a front end holds, the
memory run and spawn_agent's children; what the surfaces stand on."""
