"""Client-side transports for ``A2EClient``."""

from a2e.transports.stdio import StdioTransport

__all__ = ["StdioTransport"]
