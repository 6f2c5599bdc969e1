"""Activity implementations of the built-in tools, one module per capability, plus the runner that turns
each into a named activity."""
