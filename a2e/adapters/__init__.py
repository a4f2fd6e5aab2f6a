"""Host-side adapters: the engine's tools in the shapes other agent frameworks expect."""
