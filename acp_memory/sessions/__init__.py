"""Session bundles on disk."""
