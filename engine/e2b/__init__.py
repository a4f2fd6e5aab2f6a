"""The E2B protocol on ``a2e serve --http``, so that the unmodified ``e2b`` and
``e2b-code-interpreter`` SDKs reach this engine with ``E2B_API_URL`` (and, for a sandbox's own
side, ``E2B_SANDBOX_URL``) set to the service and ``E2B_API_KEY`` to its token.

``_sandboxes``: each sandbox a session of the engine made to last (its uid, workspace,
namespaces and limits, as every session's), ended at its timeout or when killed.
``_control``: the control plane the SDK drives (``POST /v2/sandboxes``, list, info, kill,
timeout, connect), in E2B's shapes and with its errors.
``_sandbox_side``: each sandbox's own side (what envd and the code interpreter serve inside an
E2B sandbox), reached by the ``E2b-Sandbox-Id`` header and opened by the sandbox's token:
``_processes`` (commands), ``_filesystem`` and ``_watching`` (files), ``_interpreter`` (cells
and contexts), over ``_connect_rpc`` (Connect's wire) and ``_in_sandbox`` (the engine's tools
run in the sandbox's session, and E2B's paths). ``_errors``: E2B's error shape, for both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.engine.e2b._control import E2BEndpoint

__all__ = ["E2BEndpoint"]

__getattr__ = lazy_exports(__name__, {"E2BEndpoint": "a2e_engine.engine.e2b._control"})
