"""Server-side transports: each carries one kind of connection to the engine through the host
protocol (``engine._host``) alone."""
