"""The retry policy of idempotent tools, composed from tenacity's strategy objects.

Read it as a sentence: retry *if the attempt failed with a retryable tool_error* (a crash, a
broken frame, a failed sandbox set-up, or an exception that is not deterministic; not a
timeout, a cancel or an overload, ``NOT_RETRIED``), waiting
*exponentially longer* between attempts, and stop *after N attempts*, *when the next attempt
could not start before the call's deadline*, or *when the call was cancelled*.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
)
from tenacity.stop import stop_base

from a2e.caps.tools._reasons import NOT_RETRIED
from a2e_engine.engine._config import RetryPolicy
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._run import Outcome

__all__ = ["run_with_retries"]


class stop_before_deadline(stop_base):
    """Stop when the next attempt would start after ``deadline``."""

    def __init__(self, deadline: Deadline, loop: asyncio.AbstractEventLoop) -> None:
        self.deadline = deadline
        self.loop = loop

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.deadline.remaining(self.loop) <= retry_state.upcoming_sleep


class stop_when_set(stop_base):
    def __init__(self, event: asyncio.Event) -> None:
        self.event = event

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.event.is_set()


def _retryable(outcome: Outcome) -> bool:
    return outcome.reason is not None and outcome.reason not in NOT_RETRIED and outcome.retryable


async def run_with_retries(
    attempt: Callable[[], Awaitable[Outcome]],
    policy: RetryPolicy,
    deadline: Deadline,
    cancelled: asyncio.Event,
    on_retry: Callable[[int, Outcome], None],
) -> Outcome:
    """Run ``attempt`` until it succeeds or the policy says stop; return the last outcome.

    The first attempt runs before tenacity is set up: most calls need no other, and the
    retrying machinery costs a call more CPU than the rest of its way through the supervisor.
    One that could be retried is handed to tenacity as its first attempt's outcome."""
    first = await attempt()
    if not _retryable(first):
        return first
    loop = asyncio.get_running_loop()
    unread = [first]

    async def this_attempt() -> Outcome:
        return unread.pop() if unread else await attempt()

    async def interruptible_sleep(seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(cancelled.wait(), seconds)

    def before_sleep(state: RetryCallState) -> None:
        assert state.outcome is not None
        on_retry(state.attempt_number + 1, state.outcome.result())

    retrying = AsyncRetrying(
        retry=retry_if_result(_retryable),
        wait=wait_exponential(multiplier=policy.initial_backoff_s, max=policy.max_backoff_s),
        stop=(
            stop_after_attempt(policy.max_attempts)
            | stop_before_deadline(deadline, loop)
            | stop_when_set(cancelled)
        ),
        sleep=interruptible_sleep,
        before_sleep=before_sleep,
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    outcome: Outcome = await retrying(this_attempt)
    return outcome
