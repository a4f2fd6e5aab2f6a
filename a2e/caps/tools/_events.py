"""What a ``tool/event``'s ``data`` must hold for each ``kind``, checked on plain data.

A tool emits events inside its worker, and the worker must not need pydantic (every worker
would pay for it on fork and on exit). So the shapes are declared here as plain tables and
checked with nothing but the standard library; ``models.EVENT_DATA_MODELS`` declares the same
shapes for the supervisor, which validates every event again on its side of the pipe. This
check is the stricter of the two (no string to number coercion), so whatever passes here passes
there, and a wrong shape fails in the tool that made it, where its author can see why.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["EVENT_FIELDS", "EventField", "EventKind", "check_event_data"]


class EventKind(StrEnum):
    PROGRESS = "progress"
    STATUS = "status"
    ARTIFACT = "artifact"
    LOG = "log"


_REQUIRED = object()


@dataclass(frozen=True)
class EventField:
    """One field of an event's data: its type, its default (``_REQUIRED``: none), its bounds."""

    name: str
    kind: type
    default: Any = _REQUIRED
    low: int | None = None
    high: int | None = None

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def check(self, value: Any) -> Any:
        """``value`` as the field holds it; ``ValueError`` naming the field otherwise."""
        if self.kind is int:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{self.name} must be an integer, not {type(value).__name__}")
            value = int(value)
            if (self.low is not None and value < self.low) or (
                self.high is not None and value > self.high
            ):
                raise ValueError(f"{self.name} must be between {self.low} and {self.high}")
        elif not isinstance(value, self.kind):
            raise ValueError(
                f"{self.name} must be a {self.kind.__name__}, not {type(value).__name__}"
            )
        else:
            value = self.kind(value)  # a subclass of str: the plain str, as JSON holds it
        return value


EVENT_FIELDS: dict[EventKind, tuple[EventField, ...]] = {
    EventKind.PROGRESS: (EventField("pct", int, low=0, high=100), EventField("message", str, "")),
    EventKind.STATUS: (EventField("message", str),),
    EventKind.ARTIFACT: (
        EventField("name", str),
        EventField("mime", str, "text/plain"),
        EventField("chunk", str),
        EventField("final", bool, False),
    ),
    EventKind.LOG: (EventField("level", str), EventField("message", str)),
}


def check_event_data(kind: str, data: Any) -> tuple[EventKind, dict[str, Any]]:
    """The event's kind and its data with defaults filled in and unknown keys dropped (as the
    supervisor's models do); ``ValueError`` saying what is wrong."""
    try:
        event_kind = EventKind(kind)
    except ValueError:
        known = ", ".join(k.value for k in EventKind)
        raise ValueError(f"unknown event kind {kind!r:.40}: one of {known}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{event_kind} event data must be an object, not {type(data).__name__}")
    checked: dict[str, Any] = {}
    for spec in EVENT_FIELDS[event_kind]:
        if spec.name in data:
            checked[spec.name] = spec.check(data[spec.name])
        elif spec.required:
            raise ValueError(f"{event_kind} event data lacks {spec.name!r}")
        else:
            checked[spec.name] = spec.default
    return event_kind, checked
