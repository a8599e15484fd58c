"""Background task pool."""
