"""The MCP servers a session uses: their specs, connections and tools (the official `mcp` SDK)."""
