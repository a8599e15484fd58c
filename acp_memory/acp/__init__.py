"""The Agent Client Protocol layer: method handlers over a JSON-RPC connection."""
