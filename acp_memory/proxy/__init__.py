"""`acp-memory proxy`: long-term memory for another ACP agent, relayed between it and the editor."""
