"""``ServiceMetrics``: what the service did, in the Prometheus text format (``/metrics``).

Calls are counted where their results pass through the service's transports (``observe``);
what the host is doing now (calls pending, running, queued, workers waiting, zygote restarts)
is read from ``Host.status()`` at each scrape. Each service has a registry of its own, so two
in one process do not mix. Label values are bounded: a tool name is a label only if the host
knows the tool (an unknown one is ``(unknown)``), and past ``MAX_TOOL_LABELS`` names the rest
share ``(other)``; a client cannot grow the server's memory by inventing names.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from a2e.caps.tools._models import ToolErrorCode, ToolResult
from a2e_engine.engine._host import Host

__all__ = ["CONTENT_TYPE", "MAX_TOOL_LABELS", "ServiceMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_TOOL_LABELS = 256
#: Seconds; a call's duration spans the fastest (a few ms) to the longest timeouts.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class _HostCollector:
    """Reads the host's status at each scrape."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def collect(self) -> Iterator[Metric]:
        status = self.host.status()
        gauges = (
            ("a2e_calls_in_flight", "Calls admitted and not finished.", status.calls_pending),
            ("a2e_calls_running", "Calls running in a worker.", status.calls_running),
            ("a2e_queue_length", "Calls waiting for a worker slot.", status.calls_queued),
            ("a2e_workers_waiting", "Pre-forked workers ready for a job.", status.workers_waiting),
            ("a2e_connections", "Protocol connections open on the host.", status.connections),
            (
                "a2e_sessions",
                "Sessions open on the host (a connection's, MCP's, a request's).",
                status.sessions,
            ),
            (
                "a2e_resident_workers",
                "Workers that sessions keep for stateful tools (python_session), alive now.",
                status.resident_workers,
            ),
            ("a2e_ready", "1 if the host can take calls.", int(status.ready)),
        )
        for name, documentation, value in gauges:
            yield GaugeMetricFamily(name, documentation, value=value)
        yield CounterMetricFamily(
            "a2e_zygote_restarts", "Times the sandbox zygote was restarted.", status.zygote_restarts
        )


class ServiceMetrics:
    def __init__(self, host: Host) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter(
            "a2e_calls",
            "Calls answered, by tool and outcome (success, or the result's error code).",
            ("tool", "outcome"),
            registry=self.registry,
        )
        self.duration = Histogram(
            "a2e_call_duration_seconds",
            "How long calls took, as the engine measured them.",
            ("tool",),
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.rejected = Counter(
            "a2e_rejected_requests",
            "Requests refused before any tool ran, by reason.",
            ("reason",),
            registry=self.registry,
        )
        self.registry.register(_HostCollector(host))
        self._tools: set[str] = set()

    def observe(self, result: ToolResult) -> None:
        tool = self._tool_label(result)
        self.calls.labels(tool, "success" if result.success else result.error_code).inc()
        self.duration.labels(tool).observe(result.duration_ms / 1000)

    def reject(self, reason: str) -> None:
        """``reason`` is one of the service's own words (a fixed set), never a client's."""
        self.rejected.labels(reason).inc()

    def _tool_label(self, result: ToolResult) -> str:
        if result.error_code == ToolErrorCode.UNKNOWN_TOOL:
            return "(unknown)"
        name = result.tool_name
        if name in self._tools:
            return name
        if len(self._tools) >= MAX_TOOL_LABELS:
            return "(other)"
        self._tools.add(name)
        return name

    def render(self) -> bytes:
        return generate_latest(self.registry)
