"""The worker's plain check of event data (``a2e.caps.tools._events``) and the supervisor's
models (``EVENT_DATA_MODELS``) declare the same shapes: same fields, defaults and bounds, and
nothing the worker lets through is refused (or changed) by the supervisor."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from a2e.caps.tools._events import EVENT_FIELDS, EventKind, check_event_data
from a2e.caps.tools._models import EVENT_DATA_MODELS


@pytest.mark.parametrize("kind", list(EventKind))
def test_each_kind_has_the_models_fields_and_defaults(kind: EventKind) -> None:
    model = EVENT_DATA_MODELS[kind].model_fields
    plain = {f.name: f for f in EVENT_FIELDS[kind]}
    assert set(plain) == set(model)
    for name, field in model.items():
        assert plain[name].required == field.is_required(), name
        if not field.is_required():
            assert plain[name].default == field.default, name


CASES: list[tuple[str, Any]] = [
    ("progress", {"pct": 0}),
    ("progress", {"pct": 100, "message": "done"}),
    ("progress", {"pct": 50.0}),
    ("progress", {"pct": 50.5}),
    ("progress", {"pct": -1}),
    ("progress", {"pct": 101}),
    ("progress", {"pct": True}),
    ("progress", {"pct": "5"}),
    ("progress", {"pct": None}),
    ("progress", {"message": "no pct"}),
    ("progress", {"pct": 1, "message": 7}),
    ("status", {"message": "m", "extra": [1, 2]}),
    ("status", {}),
    ("status", ["not", "an", "object"]),
    ("artifact", {"name": "a", "chunk": "c"}),
    ("artifact", {"name": "a", "chunk": "c", "final": True, "mime": "text/x"}),
    ("artifact", {"name": "a", "chunk": "c", "final": 1}),
    ("artifact", {"name": "a", "chunk": b"bytes"}),
    ("log", {"level": "info", "message": "m"}),
    ("log", {"level": 3, "message": "m"}),
]


@pytest.mark.parametrize(("kind", "data"), CASES)
def test_what_the_worker_passes_the_supervisor_passes_unchanged(kind: str, data: Any) -> None:
    model = EVENT_DATA_MODELS[EventKind(kind)]
    try:
        supervisor: dict[str, Any] | None = model.model_validate(data).model_dump()
    except ValidationError:
        supervisor = None
    try:
        _, worker = check_event_data(kind, data)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return  # stricter than the supervisor is allowed (no "5" for 5)
    assert worker == supervisor


def test_the_plain_check_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="pct must be between 0 and 100"):
        check_event_data("progress", {"pct": 400})
    with pytest.raises(ValueError, match="lacks 'message'"):
        check_event_data("status", {})
    with pytest.raises(ValueError, match="unknown event kind 'shout'"):
        check_event_data("shout", {})
    with pytest.raises(ValueError, match="final must be a bool, not int"):
        check_event_data("artifact", {"name": "a", "chunk": "c", "final": 1})
