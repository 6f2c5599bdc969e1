"""The project's HTTP service: event ingress and the standalone tool endpoints, one ASGI app."""
