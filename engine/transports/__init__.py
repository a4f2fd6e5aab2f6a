"""Server-side transports: how messages reach an engine ``Connection``."""
