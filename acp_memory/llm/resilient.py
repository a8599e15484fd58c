"""Retries around any provider: rate limits, server errors, dropped connections, quota resets."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio

from acp_memory.config.models import AgentConfig
from acp_memory.llm.provider import Provider, closing
from acp_memory.llm.transport import ConnectionDropped
from acp_memory.llm.types import ChatRequest, LLMError, StreamEvent

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait before calling a failing provider again."""

    max_retries: int = 3  # for 429, 408/409 and 5xx
    base_delay: float = 0.5  # seconds; doubles each retry
    max_delay: float = 30.0
    jitter: float = 0.2  # each backoff is scaled by a random factor in [1 - jitter, 1 + jitter]
    wait_for_limit_reset: bool = False
    limit_reset_cap: float = 60.0  # a longer announced wait is a quota reset, not a hiccup
    redials: int = 1  # retries of a connection that broke before any output

    @classmethod
    def from_config(
        cls, agent: AgentConfig, *, wait_for_limit_reset: bool | None = None
    ) -> RetryPolicy:
        """The policy of agent.*; child sessions pass wait_for_limit_reset=False."""
        wait = agent.wait_for_limit_reset if wait_for_limit_reset is None else wait_for_limit_reset
        return cls(
            max_retries=agent.llm_retry_max,
            base_delay=agent.llm_retry_base_ms / 1000,
            wait_for_limit_reset=wait,
        )

    def backoff(self, retry: int) -> float:
        """The wait before retry number retry (0-based) when the provider named none."""
        delay = min(self.max_delay, self.base_delay * 2**retry)
        return delay * random.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter else delay


class ResilientProvider:
    """Wraps a provider; retries only failures that came before any output was yielded."""

    def __init__(self, inner: Provider, policy: RetryPolicy, *, sleep: Sleep | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.policy = policy
        self._sleep = sleep  # tests pass a recorder instead of waiting; None is anyio.sleep

    def __repr__(self) -> str:
        return f"ResilientProvider({self.inner!r}, {self.policy!r})"

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        """The inner stream, called again after a retryable failure before any output."""
        retries = redials = 0
        while True:
            produced = False
            try:
                events = self.inner.stream(request)
                async with closing(events):
                    async for event in events:
                        produced = True
                        yield event
                return
            except LLMError as err:
                err.after_output = err.after_output or produced
                if err.after_output:  # never stream an answer twice
                    raise
                if isinstance(err, ConnectionDropped):
                    if redials >= self.policy.redials:
                        raise
                    redials += 1
                    log.info("%s; calling again on a new connection", err.brief)
                    continue
                delay = self._delay(err, retries)
                retries += 1
                # The provider's own words go out once, in the final error.
                log.warning(
                    "%s; retry %d of %d in %.1fs",
                    err.brief,
                    retries,
                    self.policy.max_retries,
                    delay,
                )
            # anyio.sleep is looked up here, not bound as the default, so that a test can stand
            # in for it and see that the real sleep is the one used.
            await (self._sleep or anyio.sleep)(delay)

    def _delay(self, err: LLMError, retries: int) -> float:
        """Seconds before the next attempt, or the error itself when there is none."""
        if not err.retryable or retries >= self.policy.max_retries:
            raise err
        wait = err.retry_after
        if wait is None:
            return self.policy.backoff(retries)
        if wait > self.policy.limit_reset_cap and not self.policy.wait_for_limit_reset:
            raise limit_error(err, wait) from err
        return wait


def limit_error(err: LLMError, wait: float) -> LLMError:
    """The error for a limit that resets too late to wait for."""
    when = datetime.now(UTC) + timedelta(seconds=wait)
    return LLMError(
        f"{err.message}; the limit resets at {when:%Y-%m-%d %H:%M:%S} UTC "
        f"(in {_duration(wait)}), not waiting for it (agent.wait_for_limit_reset is false)",
        status=err.status,
        provider=err.provider,
        retry_after=wait,
        model=err.model,
        url=err.url,
    )


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"
