"""The engine's tools over the Model Context Protocol, on the official SDK: ``server`` builds the
SDK's low-level server over a session of the host's, ``definitions`` and ``events`` map
tools, results and events to MCP's shapes, and ``stdio`` and ``http`` are its two transports
(``a2e serve --mcp``, ``/mcp`` in the service)."""
