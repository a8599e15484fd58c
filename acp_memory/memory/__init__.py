"""Long-term memory: markdown notes in a global and a project root, and the six tools."""
