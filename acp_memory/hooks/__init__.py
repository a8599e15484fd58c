"""Lifecycle hooks in Claude Code's shape: shell commands that config.yaml (and, when allowed,
the project) runs around sessions, prompts, tool calls and child agents."""
