"""The main agent's model calls of a turn as the editor sees them: a usage_update after every
answer (the last request's tokens against the model's window, the session's cost so far), and
the session's cost kept in its session.json."""

from __future__ import annotations

import logging

from acp_memory.engine.events import ContextUsage, Emit
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import Finished, Usage
from acp_memory.llm.usage import UsageMeter, call_cost, void_line
from acp_memory.llm.windows import context_window
from acp_memory.sessions.model import SessionCost
from acp_memory.sessions.store import Session

log = logging.getLogger(__name__)


class UsageReports:
    """The runner's usage reporting; it remembers which models the log already named."""

    def __init__(self) -> None:
        self._unsized: set[str] = set()  # models without a known window, told once each
        self._voided: set[str] = set()  # sessions told that a provider's usage was void

    def turn(self, session: Session, meter: UsageMeter, emit: Emit) -> TurnUsage:
        """The usage of one turn of `session`, counted in `meter`, reported on `emit`."""
        return TurnUsage(self, session, meter, emit)

    def window(self, model: ModelHandle) -> int | None:
        """The model's window; the first time one is unknown, the log says why."""
        size = context_window(model.config)
        if size is None and model.model_id not in self._unsized:
            self._unsized.add(model.model_id)
            # Info, not a warning: nothing is wrong, and print mode's stderr stays its own.
            log.info(
                "no usage_update for model %s: its context window is unknown "
                "(set models[].context_window)",
                model.model_id,
            )
        return size


    def void(self, session: Session, model: ModelHandle, why: str) -> None:
        """An answer's usage was void (absurd or malformed counts): said once per session."""
        if session.id not in self._voided:
            self._voided.add(session.id)
            log.warning("session %s: %s", session.id, void_line(model.model_id, why))


class TurnUsage:
    """One turn's main-agent calls: metered, each answer told as a ContextUsage."""

    def __init__(self, reports: UsageReports, session: Session, meter: UsageMeter,
                 emit: Emit) -> None:
        self.reports = reports
        self.session = session
        self.meter = meter
        self.emit = emit
        self.charged = False  # the session's cost changed in this turn

    def metered(self, model: ModelHandle) -> ModelHandle:
        """`model`, its calls counted and reported."""

        async def answered(finished: Finished) -> None:
            usage = finished.usage
            if finished.usage_void:
                self.reports.void(self.session, model, finished.usage_void)
            if usage is None:
                return  # the provider reported nothing usable: no numbers to show
            cost = self._charge(model, usage)
            size = self.reports.window(model)
            if size is None:
                return  # the schema requires a size
            used = usage.input_tokens + usage.output_tokens
            amount, currency = (None, "USD") if cost is None else (cost.amount, cost.currency)
            await self.emit(ContextUsage(used, size, amount, currency))

        return self.meter.wrap(model, answered)

    def _charge(self, model: ModelHandle, usage: Usage) -> SessionCost | None:
        """The session's cost with this call added at the model's price; what it was when
        the model has none."""
        record = self.session.record
        price = model.config.price
        if price is None:
            return record.cost
        cost = record.cost
        if cost is None or cost.currency != price.currency:
            # Amounts in two currencies do not add up: the session's count starts again.
            if cost is not None:
                log.warning("session %s: cost now counted in %s (was %s %.6f)",
                            self.session.id, price.currency, cost.currency, cost.amount)
            cost = SessionCost(currency=price.currency)
        record.cost = cost.model_copy(update={"amount": cost.amount + call_cost(usage, price)})
        self.charged = True
        return record.cost

    async def keep(self) -> None:
        """The session's new cost written to session.json (a turn's user message writes the
        record before any call, so a priced turn writes it once more at its end)."""
        if not self.charged:
            return
        try:
            await self.session.save_record()
        except OSError as exc:
            log.warning("session %s: cannot keep its cost: %s", self.session.id, exc)
