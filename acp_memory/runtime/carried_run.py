"""The memory run of a prompt that another agent answers (`acp-memory proxy`): waited for as a
turn's is, and when its report comes after the wait, carried to the session's next prompt,
once, rather than into a step of a turn this process does not run."""

from __future__ import annotations

from acp_memory.runtime.memory_run import MemoryRun, report_of

LATE = "the next prompt"


class CarriedRun(MemoryRun):
    """A MemoryRun whose undelivered report waits for the next prompt (`late_report`)."""

    def first_report(self) -> str | None:
        """After the wait: the report, when the run settled within it (its finished update
        sent, delivered); else None."""
        return self.step().memory_report

    async def end_turn(self) -> None:
        """The prompt's answer came (shielded by the caller): a review question still open
        is withdrawn (its change held), the updates on their way go out; a run that has
        not delivered keeps its report for the next prompt; one that ended without a report
        says so now."""
        await self._turn_ended()
        task = self.task
        if task is not None and task.ended.is_set() and not self._finished_sent:
            if not report_of(task):  # nothing to carry: its end is told now
                self._finished_sent = True
                await self._settled(task, delivered=False)

    @property
    def pending(self) -> bool:
        """Whether the run still owes its fate: it started and was neither delivered nor
        told finished."""
        return self.task is not None and not self._finished_sent

    async def late_report(self) -> str | None:
        """At the session's next prompt: the report of a run that settled since, delivered
        now (its finished update says so), else None; a run still going stays pending."""
        task = self.task
        if task is None or self._finished_sent or not task.ended.is_set():
            return None
        self._finished_sent = True
        if report := report_of(task):
            self.report, self.delivered_at = report, LATE
            await self._settled(task, delivered=True)
            return report
        await self._settled(task, delivered=False)
        return None

    async def abandon(self) -> None:
        """The session closed: a settled run says it was not delivered; one still going
        writes its fate when it settles."""
        task = self.task
        if task is None or self._finished_sent:
            return
        self._finished_sent = True
        if task.ended.is_set():
            await self._settled(task, delivered=False)
        else:
            task.add_done_callback(lambda t: self._spawn(self._write_fate(t)))
