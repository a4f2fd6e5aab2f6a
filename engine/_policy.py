"""Which tools a session may call: a declarative allow/deny policy, or any callable.

A policy answers ``(session, tool_name) -> None`` when allowed, or a reason string when denied;
the reason reaches the caller in the ``tool_denied`` result. The engine has one policy; a
connection may bring its own for the sessions it opens (``engine.connect(policy=...)``), and
then both must allow the call.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Collection
from dataclasses import dataclass

from a2e_engine.engine._session import Policy, SessionState

__all__ = ["AllowAll", "Policy", "PolicyFunction", "ToolPolicy", "check_policies"]

PolicyFunction = Callable[[SessionState, str], "str | None"]


class AllowAll:
    def check(self, session: SessionState, tool_name: str) -> str | None:
        return None


@dataclass(frozen=True)
class ToolPolicy:
    """Allow-list and deny-list of tool names; shell-style patterns (``fs_*``) work in both.

    ``allow=None`` allows every tool not denied; deny wins over allow.
    """

    allow: Collection[str] | None = None
    deny: Collection[str] = ()

    def check(self, session: SessionState, tool_name: str) -> str | None:
        if any(fnmatch.fnmatchcase(tool_name, pattern) for pattern in self.deny):
            return f"tool {tool_name!r} is denied by policy"
        if self.allow is not None and not any(
            fnmatch.fnmatchcase(tool_name, pattern) for pattern in self.allow
        ):
            return f"tool {tool_name!r} is not in the allowed tools of this session"
        return None


class _FunctionPolicy:
    def __init__(self, fn: PolicyFunction) -> None:
        self.fn = fn

    def check(self, session: SessionState, tool_name: str) -> str | None:
        return self.fn(session, tool_name)


def as_policy(policy: Policy | PolicyFunction | None) -> Policy:
    if policy is None:
        return AllowAll()
    if hasattr(policy, "check"):
        return policy  # type: ignore[return-value]
    if callable(policy):
        return _FunctionPolicy(policy)
    raise TypeError(f"a policy must have .check(session, tool) or be callable, not {policy!r}")


def check_policies(policies: list[Policy], session: SessionState, tool_name: str) -> str | None:
    for policy in policies:
        try:
            reason = policy.check(session, tool_name)
        except Exception as exc:  # a broken policy denies; it never crashes the engine
            return f"policy check failed ({type(exc).__name__}: {exc}); denied"
        if reason:
            return str(reason)
    return None
