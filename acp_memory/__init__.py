"""acp-memory: an Agent Client Protocol agent with long-term markdown memory."""

__version__ = "0.1.0"
