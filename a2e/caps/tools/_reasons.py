"""Why a call failed: ``FailureReason``, the extension ``ToolResult.reason`` carries, and the
one account of how a call ended that the supervisor keeps (no reason: it returned a result).

Apart from the wire models (pydantic) because a worker names the reason of its own failure
(``ToolExecutionError(reason=...)``), and a worker imports nothing it does not need.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ENDED_BY_WHAT_RAN", "NOT_RETRIED", "TOOL_REASONS", "FailureReason"]


class FailureReason(StrEnum):
    """Extension: why a call failed, machine-readable, beside the spec's ``error_code`` (which
    says only unknown, denied or failed). ``ToolResult.reason`` carries it on every failed
    result; a peer may send others, so it is read as a string and compared with these."""

    UNKNOWN_TOOL = "unknown_tool"  # no tool of that name
    POLICY_DENIED = "policy_denied"  # a policy, or a capability not granted, refused it
    INVALID_ARGUMENTS = "invalid_arguments"  # the arguments do not fit the tool's parameters
    TIMEOUT = "timeout"  # the wall-clock deadline passed (or no reply came in time)
    CPU_LIMIT = "cpu_limit"  # the call used up its CPU time (RLIMIT_CPU)
    CANCELLED = "cancelled"  # tool/cancel/req, or the call's client or server went away
    OUT_OF_MEMORY = "out_of_memory"  # its address space or memory cgroup ran out
    OUTPUT_LIMIT = "output_limit"  # output, events, a result or a file past its cap
    WORKER_CRASHED = "worker_crashed"  # the worker died without a result
    WORKER_VIOLATION = "worker_violation"  # the worker broke the frame protocol
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"  # no sandboxed worker could be had
    TOOL_FAILED = "tool_failed"  # the tool ran and reported a failure (it raised)
    PLUGIN_ERROR = "plugin_error"  # a plugin's hook in the supervisor broke
    OVERLOADED = "overloaded"  # the host turned the call away: retry later
    NODE_LOST = "node_lost"  # the cluster node running the call was lost
    CONNECTION_LOST = "connection_lost"  # the connection to the host ended first
    PROTOCOL_ERROR = "protocol_error"  # the host answered with a protocol error


#: What a tool may say of its own failure; the others are the host's to say.
TOOL_REASONS = frozenset(
    {
        FailureReason.TOOL_FAILED,
        FailureReason.INVALID_ARGUMENTS,
        FailureReason.OUT_OF_MEMORY,
        FailureReason.OUTPUT_LIMIT,
        FailureReason.TIMEOUT,
        FailureReason.CPU_LIMIT,
    }
)

#: How a call ends when what ran in its worker died or broke one of its limits. For a tool that
#: runs the code it judges, that is an answer, not a mishap (``ToolPlugin.retry_crashes``).
ENDED_BY_WHAT_RAN = frozenset(
    {
        FailureReason.WORKER_CRASHED,
        FailureReason.WORKER_VIOLATION,
        FailureReason.OUT_OF_MEMORY,
        FailureReason.CPU_LIMIT,
        FailureReason.OUTPUT_LIMIT,
    }
)

#: Failures that another attempt would not mend: the deadline is used up, the caller asked to
#: stop, or the host turned the call away.
NOT_RETRIED = frozenset({FailureReason.TIMEOUT, FailureReason.CANCELLED, FailureReason.OVERLOADED})
