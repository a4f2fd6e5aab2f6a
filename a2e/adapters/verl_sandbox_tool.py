"""A verl multi-turn tool: a stateful code sandbox per trajectory, on an engine's E2B sandboxes
(``a2e serve --http``), through E2B's own SDK.

In verl's tool configuration (``actor_rollout_ref.rollout.multi_turn.tool_config_path``)::

    tools:
      - class_name: "a2e.adapters.verl_sandbox_tool.SandboxTool"
        config:
          a2e_url: "http://127.0.0.1:8080"   # or $A2E_URL
          idle_timeout_s: 300                # a trajectory's sandbox ends this long unused
          cell_timeout_s: 30
          max_output_chars: 4096
          type: native
        tool_schema:
          type: "function"
          function:
            name: "code_interpreter"
            description: "Run Python in a notebook kept for this conversation."
            parameters:
              type: "object"
              properties:
                code: {type: "string", description: "The code to run."}
              required: ["code"]

The token is ``$A2E_TOKEN`` (or ``config.token``). Each trajectory (verl's ``instance_id``)
gets its sandbox at its first ``execute``, not at ``create`` (a rollout that never calls the
tool costs nothing); its cells share one interpreter, files and a ``/home/user``, and no other
trajectory sees them. ``release`` kills it. verl does not always release, so a sandbox also
ends once it has sat unused for ``idle_timeout_s`` (the server's own timeout, renewed by each
use), and this side forgets it then: a later ``execute`` of that trajectory starts afresh and
says its earlier state is gone. ``execute`` answers the cell's stdout, stderr, value and error
as text, cut to ``max_output_chars``; a sandbox or server that fails answers why, in the text,
never an exception in the trainer.

Needs ``e2b-code-interpreter`` where verl runs; ``verl.tools.base_tool.BaseTool`` is the base
class when verl is there (and its ``ToolResponse`` the answer).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = ["SandboxTool"]

try:  # the trainer's own classes, where verl runs
    from verl.tools.base_tool import BaseTool as _Base
    from verl.tools.schemas import ToolResponse
except ImportError:  # elsewhere (tests, docs): the same shapes, without verl

    class _Base:  # type: ignore[no-redef]
        def __init__(self, config: dict[str, Any], tool_schema: Any) -> None:
            self.config = config
            self.tool_schema = tool_schema
            self.name = tool_schema.function.name

        def get_openai_tool_schema(self) -> Any:
            return self.tool_schema

    @dataclass
    class ToolResponse:  # type: ignore[no-redef]
        text: str | None = None


@dataclass
class _Trajectory:
    sandbox: Any  # e2b_code_interpreter.AsyncSandbox
    last_used: float


class SandboxTool(_Base):
    """One E2B sandbox per trajectory: ``create``, ``execute``, ``release``, as verl calls
    them (``verl.tools.base_tool.BaseTool``)."""

    def __init__(self, config: dict[str, Any], tool_schema: Any) -> None:
        super().__init__(config, tool_schema)
        self.url = str(config.get("a2e_url") or os.environ.get("A2E_URL", "")).rstrip("/")
        if not self.url:
            raise ValueError("SandboxTool needs config.a2e_url (or $A2E_URL): the engine's URL")
        self.token = str(config.get("token") or os.environ.get("A2E_TOKEN") or "none")
        self.idle_timeout_s = int(config.get("idle_timeout_s", 300))
        self.cell_timeout_s = float(config.get("cell_timeout_s", 30))
        self.max_output_chars = int(config.get("max_output_chars", 4096))
        self._trajectories: dict[str, _Trajectory] = {}
        self._expired: set[str] = set()
        self._ending: set[asyncio.Task[None]] = set()  # kills of idle ones, still going

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        """A trajectory's id; its sandbox comes with its first ``execute``."""
        return instance_id or str(uuid.uuid4()), ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, float, dict[str, Any]]:
        """The cell run in the trajectory's sandbox: its output as text, no reward, and what
        it cost (``cell_ms``, ``new_sandbox``)."""
        code = parameters.get("code", "")
        if not isinstance(code, str):
            code = str(code)
        self._forget_idle()
        said = ""
        if instance_id in self._expired:
            self._expired.discard(instance_id)
            said = (
                f"[this conversation's sandbox ended after {self.idle_timeout_s} s unused; "
                "a new one starts, without the earlier variables and files]\n"
            )
        started = time.monotonic()
        try:
            trajectory, new = await self._sandbox(instance_id)
            execution = await trajectory.sandbox.run_code(code, timeout=self.cell_timeout_s)
        except Exception as exc:  # the trainer gets a reason, never an exception
            self._trajectories.pop(instance_id, None)
            text = f"{said}[the sandbox failed: {type(exc).__name__}: {exc}]"
            return ToolResponse(text=self._cut(text)), 0.0, {"error": type(exc).__name__}
        trajectory.last_used = time.monotonic()
        metrics = {"cell_ms": (trajectory.last_used - started) * 1000, "new_sandbox": new}
        return ToolResponse(text=self._cut(said + _text_of(execution))), 0.0, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """The trajectory is over: its sandbox ends (if the server still has it)."""
        self._expired.discard(instance_id)
        trajectory = self._trajectories.pop(instance_id, None)
        if trajectory is not None:
            try:
                await trajectory.sandbox.kill()
            except Exception:  # gone already: what release wanted
                pass

    async def _sandbox(self, instance_id: str) -> tuple[_Trajectory, bool]:
        trajectory = self._trajectories.get(instance_id)
        if trajectory is not None:
            return trajectory, False
        from e2b_code_interpreter import AsyncSandbox

        sandbox = await AsyncSandbox.create(
            timeout=self.idle_timeout_s,
            api_key=self.token,
            api_url=self.url,
            sandbox_url=self.url,
            metadata={"verl_instance_id": instance_id[:200]},
        )
        trajectory = _Trajectory(sandbox, time.monotonic())
        self._trajectories[instance_id] = trajectory
        return trajectory, True

    def _forget_idle(self) -> None:
        """Trajectories whose sandbox the server has ended for idleness: forgotten here too
        (a second short of the server's timeout, so that none is used as it ends)."""
        now = time.monotonic()
        for instance_id, trajectory in list(self._trajectories.items()):
            if now - trajectory.last_used > self.idle_timeout_s - 1:
                del self._trajectories[instance_id]
                self._expired.add(instance_id)
                ending = asyncio.ensure_future(_quietly_kill(trajectory.sandbox))
                self._ending.add(ending)
                ending.add_done_callback(self._ending.discard)

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        left = len(text) - self.max_output_chars
        return text[: self.max_output_chars] + f"\n[... {left} more characters not shown]"


def _text_of(execution: Any) -> str:
    """A cell's output as a model reads it: stdout, stderr, its value, its error."""
    parts = ["".join(execution.logs.stdout), "".join(execution.logs.stderr)]
    if execution.text is not None:
        parts.append(execution.text + "\n")
    if execution.error is not None:
        parts.append(
            execution.error.traceback or f"{execution.error.name}: {execution.error.value}"
        )
    return "".join(parts) or "[no output]"


async def _quietly_kill(sandbox: Any) -> None:
    try:
        await sandbox.kill()
    except Exception:  # ended already, by its timeout
        pass
