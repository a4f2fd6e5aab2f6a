"""Capabilities of the A2E protocol, one sub-package each."""
