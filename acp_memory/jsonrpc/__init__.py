"""JSON-RPC 2.0 over newline-delimited byte streams; knows nothing of ACP."""
