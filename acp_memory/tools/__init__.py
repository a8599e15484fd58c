"""Tools the model can call, and the registry that exposes them per mode."""
