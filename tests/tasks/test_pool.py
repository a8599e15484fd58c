"""The background pool on its own: records, logs, bounds, timeouts, stops, system tasks."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import anyio
import pytest
from tasks.procs import GRACE_S, Fifo, assert_gone, pool_in

from acp_memory.memory.redact import RedactedStream, redact_text
from acp_memory.tasks import log as task_log
from acp_memory.tasks import task as task_module
from acp_memory.tasks.admission import PoolRefused, PoolSettings
from acp_memory.tasks.log import TaskLog
from acp_memory.tasks.pool import UnknownTask
from acp_memory.tasks.records import TaskCost, TaskRecord, read_record
from acp_memory.tasks.task import Task, TaskFailed

pytestmark = pytest.mark.anyio

RECORD_KEYS = {
    "id", "session_id", "kind", "label", "command", "cwd", "status", "exit_code", "error",
    "started_at", "finished_at", "timeout_seconds", "output_bytes", "output_truncated",
    "system", "pid",
}


def meta(bundle: Path, task_id: str) -> dict:
    return json.loads((bundle / "background" / task_id / "meta.json").read_text())


def output_log(bundle: Path, task_id: str) -> bytes:
    return (bundle / "background" / task_id / "output.log").read_bytes()


async def leave_record(bundle: Path, record: TaskRecord) -> None:
    """A record left in the bundle as a pool writes it (Task.write_record), by a task that no
    process runs now."""
    folder = bundle / "background" / record.id
    folder.mkdir(parents=True)
    await Task(record, TaskLog(1024), folder).write_record(raise_errors=True)


async def test_a_finished_command_leaves_a_snake_case_record_and_its_log(tmp_path: Path):
    async with pool_in(tmp_path) as pool:
        task = await pool.start_command("echo out; echo err >&2", tmp_path)
        assert task.id == "bg_1"
        record = await pool.wait(task, 10)
    assert record.status == "succeeded" and record.exit_code == 0
    data = meta(tmp_path, "bg_1")
    assert set(data) == RECORD_KEYS  # `agent` only for agent tasks
    assert data["status"] == "succeeded" and data["kind"] == "command"
    assert data["command"] == data["label"] == "echo out; echo err >&2"
    assert data["cwd"] == str(tmp_path) and isinstance(data["pid"], int)
    assert data["started_at"] <= data["finished_at"] and data["timeout_seconds"] == 900
    assert sorted(output_log(tmp_path, "bg_1").splitlines()) == [b"err", b"out"]
    assert data["output_bytes"] == 8 and data["output_truncated"] is False


async def test_a_failing_command_fails_with_its_exit_code_and_a_missing_one_says_so(
    tmp_path: Path,
):
    async with pool_in(tmp_path) as pool:
        failing = await pool.start_command("exit 3", tmp_path)
        missing = await pool.start_command("no-such-command-here", tmp_path)
        failed = await pool.wait(failing, 10)
        not_found = await pool.wait(missing, 10)
    assert (failed.status, failed.exit_code, failed.error) == ("failed", 3, "exit code 3")
    assert not_found.status == "failed" and not_found.exit_code == 127
    assert "command not found" in (not_found.error or "")
    assert b"no-such-command-here" in output_log(tmp_path, missing.id)


async def test_task_ids_resume_past_the_ids_already_in_the_bundle(tmp_path: Path):
    (tmp_path / "background" / "bg_7").mkdir(parents=True)  # a record that never got written
    await leave_record(tmp_path, TaskRecord(id="bg_2", session_id="s", kind="command",
                                            status="succeeded"))
    async with pool_in(tmp_path) as pool:
        task = await pool.start_command("true", tmp_path)
        await pool.wait(task, 10)
    assert task.id == "bg_8"


async def test_a_second_pool_on_the_bundle_sees_the_firsts_tasks_and_never_takes_their_ids(
    tmp_path: Path,
):
    """Two processes on one session (here two pools, as an HTTP server and a `-p` turn would
    hold it): each lists the other's tasks as they are now, and ids are never shared."""
    go = Fifo(tmp_path / "go")
    async with pool_in(tmp_path) as first, pool_in(tmp_path) as second:
        assert await second.records() == []  # read before the first pool started anything
        running = await first.start_command(f"echo first; read x < {go.path}", tmp_path)
        (seen,) = await second.records()
        assert (seen.id, seen.status) == ("bg_1", "running")  # run elsewhere, not orphaned
        assert (await second.record("bg_1")).status == "running"
        with pytest.raises(ValueError, match="running in another process"):
            await second.remove("bg_1")
        mine = await second.start_command("echo second", tmp_path)
        assert mine.id == "bg_2"
        await second.wait(mine, 10)
        go.send()
        await first.wait(running, 10)
        assert (await second.record("bg_1")).status == "succeeded"
        assert [r.id for r in await first.records()] == ["bg_1", "bg_2"]
        assert "second" in await first.output("bg_2")
        after = await first.start_command("true", tmp_path)
        assert after.id == "bg_3"
        await first.wait(after, 10)
    assert meta(tmp_path, "bg_1")["label"] == f"echo first; read x < {go.path}"
    assert output_log(tmp_path, "bg_1") == b"first\n"
    assert output_log(tmp_path, "bg_2") == b"second\n"


async def test_a_task_left_running_by_a_process_that_ended_reads_as_orphaned(tmp_path: Path):
    await leave_record(tmp_path, TaskRecord(id="bg_1", session_id="s", kind="command",
                                            status="running"))
    async with pool_in(tmp_path) as pool:
        assert (await pool.record("bg_1")).status == "orphaned"
        await pool.remove("bg_1")  # nobody runs it: retention may take it
    assert not (tmp_path / "background" / "bg_1").exists()


async def test_a_task_given_a_redaction_keeps_no_secret_in_its_record_or_its_log(
    tmp_path: Path,
):
    key = "AKIAIOSFODNN7EXAMPLE"

    async def body(task: Task) -> str:
        await task.log.write(f"reading {key[:6]}")  # a secret split across two writes
        await task.log.write(f"{key[6:]} now\n")
        raise TaskFailed(f"the provider refused {key}")

    async with pool_in(tmp_path) as pool:
        task = await pool.start_agent(
            label=f"memory: {key}", agent_name="memory", child_session_id="sess_x", body=body,
            log=pool.new_log(RedactedStream()), redact=redact_text,
        )
        record = await pool.wait(task, 10)
    assert record.label == "memory: [REDACTED:aws_access_key]"
    assert record.error == "the provider refused [REDACTED:aws_access_key]"
    assert key not in json.dumps(meta(tmp_path, task.id))
    assert output_log(tmp_path, task.id) == b"reading [REDACTED:aws_access_key] now\n"


def test_the_hard_limit_is_the_timeout_else_three_times_expected_floored_else_the_default():
    s = PoolSettings(default_timeout_seconds=900, max_timeout_seconds=3600)
    assert s.hard_limit(timeout_seconds=5) == 5
    assert s.hard_limit(timeout_seconds=5, expected_seconds=100) == 5
    assert s.hard_limit(expected_seconds=100) == 300
    assert s.hard_limit(expected_seconds=2) == 60
    assert s.hard_limit() == 900
    assert s.hard_limit(timeout_seconds=10_000) == 3600
    assert s.hard_limit(expected_seconds=5000) == 3600


async def test_a_task_past_its_hard_limit_is_timed_out_and_its_process_group_is_gone(
    tmp_path: Path,
):
    ready = Fifo(tmp_path / "ready")
    async with pool_in(tmp_path) as pool:
        task = await pool.start_command(
            f"sleep 600 & echo $! > {ready.path}; wait", tmp_path, timeout_seconds=0.5
        )
        child = int(await ready.read_line())
        record = await pool.wait(task, 10)
        assert task.record.pid is not None
        await assert_gone(task.record.pid, child)  # by the limit, not by the pool's close
    assert record.status == "timed_out" and "hard limit" in (record.error or "")
    assert meta(tmp_path, task.id)["status"] == "timed_out"


async def test_a_child_left_running_in_the_background_ends_with_its_command(tmp_path: Path):
    ready = Fifo(tmp_path / "ready")
    async with pool_in(tmp_path) as pool:
        task = await pool.start_command(f"sleep 600 & echo $! > {ready.path}", tmp_path)
        child = int(await ready.read_line())
        record = await pool.wait(task, 10)
        await assert_gone(task.record.pid or 0, child)
    assert record.status == "succeeded"  # the command is its shell, which exited 0


async def test_stop_kills_a_group_that_ignores_sigterm_once_the_grace_is_over(tmp_path: Path):
    ready = Fifo(tmp_path / "ready")
    async with pool_in(tmp_path) as pool:
        task = await pool.start_command(
            f"trap '' TERM; sleep 600 & echo $! > {ready.path}; wait", tmp_path
        )
        child = int(await ready.read_line())
        started = anyio.current_time()
        with anyio.fail_after(10):
            record = await pool.stop(task.id)
        elapsed = anyio.current_time() - started
        await assert_gone(task.record.pid or 0, child)
    assert record.status == "stopped" and record.error == "stopped by background_stop"
    assert elapsed >= GRACE_S  # SIGTERM was ignored: SIGKILL came after the grace


async def test_a_full_pool_refuses_model_tasks_and_admits_system_ones(tmp_path: Path):
    go = Fifo(tmp_path / "go")

    async def report(task: Task) -> str:
        return "done"

    async with pool_in(tmp_path, max_concurrent=1) as pool:
        first = await pool.start_command(f"read x < {go.path}", tmp_path)
        with pytest.raises(PoolRefused, match=r"1 of 1 background tasks"):
            await pool.start_command("true", tmp_path)
        system = await pool.start_agent(
            label="memory: hi", agent_name="memory", child_session_id="sess_m", body=report,
            system=True,
        )
        assert (await pool.wait(system, 10)).status == "succeeded"
        # One flag says it all: never counted, a system record, the runtime's own child.
        data = meta(tmp_path, system.id)
        assert data["system"] is True and data["agent"]["system"] is True
        go.send()
        assert (await pool.wait(first, 10)).status == "succeeded"
        later = await pool.start_command("true", tmp_path)
        assert (await pool.wait(later, 10)).status == "succeeded"


async def test_a_queued_task_starts_when_a_slot_frees_and_its_limit_counts_from_then(
    tmp_path: Path,
):
    go = Fifo(tmp_path / "go")
    async with pool_in(tmp_path, max_concurrent=1) as pool:
        first = await pool.start_command(f"read x < {go.path}", tmp_path)
        queued = await pool.start_command("echo ran", tmp_path, queue=True)
        assert queued.record.status == "queued" and queued.record.started_at is None
        assert meta(tmp_path, queued.id)["status"] == "queued"
        go.send()
        await pool.wait(first, 10)
        record = await pool.wait(queued, 10)
    assert record.status == "succeeded" and output_log(tmp_path, queued.id) == b"ran\n"


async def test_turned_off_the_pool_refuses_model_tasks_but_runs_system_tasks(tmp_path: Path):
    async def report(task: Task) -> str:
        return "recalled"

    async with pool_in(tmp_path, enabled=False) as pool:
        with pytest.raises(PoolRefused, match="turned off"):
            await pool.start_command("true", tmp_path)
        task = await pool.start_agent(
            label="memory", agent_name="memory", child_session_id="sess_m", body=report,
            system=True,
        )
        record = await pool.wait(task, 10)
    assert record.status == "succeeded" and task.result == "recalled"


async def test_a_system_tasks_final_record_is_its_one_synced_write(tmp_path: Path, monkeypatch):
    """A memory run's files skip the syncs but its final record: the one durable point of
    the run (a record left unfinished reads as orphaned). Its setup runs in its claim's
    trip, with its log and first record already there, and on_sealed sees the final one."""
    synced: list[str] = []
    fsync = os.fsync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    at_setup: list[list[str]] = []
    sealed: list[TaskRecord] = []

    def setup(record: TaskRecord) -> None:
        folder = tmp_path / "background" / record.id
        at_setup.append(sorted(p.name for p in folder.iterdir()))

    async def report(task: Task) -> str:
        await task.log.write("recalled\n")
        return "recalled"

    async with pool_in(tmp_path) as pool:
        task = await pool.start_agent(
            label="memory: x", agent_name="memory", child_session_id="sess_c", body=report,
            system=True, log=pool.new_log(inline=True), setup=setup, on_sealed=sealed.append,
        )
        await pool.wait(task, 10)
    folder = tmp_path / "background" / "bg_1"
    assert at_setup == [["meta.json", "output.log"]]
    assert [r.status for r in sealed] == ["succeeded"]
    assert meta(tmp_path, "bg_1")["status"] == "succeeded"
    assert output_log(tmp_path, "bg_1") == b"recalled\n"
    # The final record's file before its rename, then the folder that holds the new name.
    assert len(synced) == 2 and Path(synced[0]).parent == folder and synced[1] == str(folder)
    assert Path(synced[0]).name.startswith(".meta.json.")


async def test_a_kind_limit_bounds_agent_tasks_apart_from_commands(tmp_path: Path):
    release = anyio.Event()

    async def held(task: Task) -> str:
        await release.wait()
        return "ok"

    async with pool_in(tmp_path) as pool:
        first = await pool.start_agent(
            label="a", agent_name="x", child_session_id="sess_a", body=held, kind_limit=1
        )
        with pytest.raises(PoolRefused, match="1 of 1 agent tasks"):
            await pool.start_agent(
                label="b", agent_name="x", child_session_id="sess_b", body=held, kind_limit=1
            )
        command = await pool.start_command("true", tmp_path)
        assert (await pool.wait(command, 10)).status == "succeeded"
        release.set()
        assert (await pool.wait(first, 10)).status == "succeeded"


async def test_an_agent_task_reports_fails_and_times_out_as_its_body_does(tmp_path: Path):
    ended: list[str] = []

    async def report(task: Task) -> str:
        await task.log.write("step 1\n")
        return "the report"

    async def broken(task: Task) -> str:
        raise RuntimeError("model down")

    async def stuck(task: Task) -> str:
        await anyio.Event().wait()
        return ""

    async with pool_in(tmp_path) as pool:
        good = await pool.start_agent(
            label="explore", agent_name="explorer", child_session_id="sess_c", body=report,
            on_finish=lambda t: ended.append(t.id),
        )
        bad = await pool.start_agent(
            label="b", agent_name="explorer", child_session_id="sess_d", body=broken
        )
        slow = await pool.start_agent(
            label="c", agent_name="explorer", child_session_id="sess_e", body=stuck,
            timeout_seconds=0.2,
        )
        records = [await pool.wait(t, 10) for t in (good, bad, slow)]
    assert [r.status for r in records] == ["succeeded", "failed", "timed_out"]
    assert good.result == "the report" and ended == [good.id]
    assert "model down" in (records[1].error or "")
    data = meta(tmp_path, good.id)
    assert data["agent"] == {"name": "explorer", "session_id": "sess_c"}
    assert data["kind"] == "agent" and data["pid"] is None and data["command"] is None
    assert output_log(tmp_path, good.id) == b"step 1\n"


async def test_a_tasks_cost_is_timed_as_its_record_and_an_older_record_without_one_loads(
    tmp_path: Path,
):
    async def costly(task: Task) -> str:
        # Its time is not the body's to say: the sealed record's start to finish is.
        task.record.cost = TaskCost(model_calls=3, input_tokens=1200, output_tokens=95,
                                    cached_read_tokens=800, duration_ms=999_999)
        return "the report"

    async with pool_in(tmp_path) as pool:
        task = await pool.start_agent(
            label="memory: x", agent_name="memory", child_session_id="sess_c", body=costly,
            system=True,
        )
        record = await pool.wait(task, 10)
    data = meta(tmp_path, task.id)
    took = record.duration_ms()
    assert took < 999_999
    assert data["cost"] == {"model_calls": 3, "input_tokens": 1200, "output_tokens": 95,
                            "cached_read_tokens": 800, "cached_write_tokens": 0,
                            "duration_ms": took}
    # A run recorded before runs had a cost still reads, and is written back without one.
    older = {k: v for k, v in data.items() if k != "cost"} | {"id": "bg_7"}
    (tmp_path / "background" / "bg_7").mkdir()
    (tmp_path / "background" / "bg_7" / "meta.json").write_text(json.dumps(older))
    loaded = read_record(tmp_path, "bg_7")
    assert loaded is not None and loaded.cost is None and loaded.status == "succeeded"
    assert "cost" not in loaded.dump()


def test_a_cost_line_names_the_prompt_cache_only_when_a_call_used_it():
    one = TaskCost(model_calls=1, input_tokens=40, output_tokens=5, duration_ms=400)
    assert one.describe() == "1 model call, 40 tokens in, 5 out, 0.4 s"
    both = TaskCost(model_calls=3, input_tokens=1200, output_tokens=95, cached_read_tokens=800,
                    cached_write_tokens=300, duration_ms=2140)
    assert both.describe() == (
        "3 model calls, 1200 tokens in (800 cached, 300 written to cache), 95 out, 2.1 s"
    )
    assert both.as_json() == {"modelCalls": 3, "inputTokens": 1200, "outputTokens": 95,
                              "cachedReadTokens": 800, "cachedWriteTokens": 300,
                              "durationMs": 2140}


async def test_a_record_left_running_by_an_ended_process_reads_orphaned_and_stays_as_it_was(
    tmp_path: Path,
):
    await leave_record(tmp_path, TaskRecord(id="bg_3", session_id="s", kind="command",
                                            command="make", status="running", pid=1))
    before = (tmp_path / "background" / "bg_3" / "meta.json").read_bytes()
    async with pool_in(tmp_path) as pool:
        assert [(r.id, r.status) for r in await pool.records()] == [("bg_3", "orphaned")]
        assert (await pool.record("bg_3")).status == "orphaned"
        assert (await pool.stop("bg_3")).status == "orphaned"  # nothing here to stop
        with pytest.raises(UnknownTask):
            await pool.record("bg_99")
        task = await pool.start_command("true", tmp_path)
        await pool.wait(task, 10)
    assert task.id == "bg_4"
    assert (tmp_path / "background" / "bg_3" / "meta.json").read_bytes() == before


async def test_finished_tasks_are_announced_once_and_system_tasks_never(tmp_path: Path):
    async def report(task: Task) -> str:
        return "x"

    go = Fifo(tmp_path / "go")
    async with pool_in(tmp_path) as pool:
        running = await pool.start_command(f"read x < {go.path}", tmp_path, label="waits")
        done = await pool.start_command("exit 2", tmp_path)
        system = await pool.start_agent(
            label="memory", agent_name="memory", child_session_id="sess_m", body=report,
            system=True,
        )
        await pool.wait(done, 10)
        await pool.wait(system, 10)
        lines = pool.announcements.take()
        assert len(lines) == 1 and lines[0].startswith(f"{done.id} failed (exit 2) after ")
        assert pool.announcements.take() == []
        assert [line.split()[:2] for line in pool.running_lines()] == [[running.id, "running"]]
        assert [r.id for r in await pool.records()] == [running.id, done.id]
        assert system.id in [r.id for r in await pool.records(include_system=True)]
        go.send()
        await pool.wait(running, 10)
        assert [line.split()[:2] for line in pool.announcements.take()] == [
            [running.id, "succeeded"]
        ]


async def test_a_log_past_log_bytes_keeps_head_and_tail_with_a_marker(tmp_path: Path):
    async with pool_in(tmp_path, log_bytes=4096) as pool:
        task = await pool.start_command("seq 1 3000", tmp_path)
        record = await pool.wait(task, 10)
        tail = await pool.output(task.id, tail_lines=3)
    produced = sum(len(f"{n}\n") for n in range(1, 3001))
    assert record.output_bytes == produced and record.output_truncated is True
    data = output_log(tmp_path, task.id)
    assert data.startswith(b"1\n2\n3\n") and data.endswith(b"2999\n3000\n")
    assert b"[output truncated: " in data and len(data) < 4096 + 100
    assert tail.splitlines()[-3:] == ["2998", "2999", "3000"]
    assert "earlier lines not shown" in tail.splitlines()[0]


async def test_output_is_cleaned_when_read_while_the_log_keeps_it_raw(tmp_path: Path):
    script = r"printf '\033[1;31mred\033[0m\n10%%\r50%%\r100%%\n\033]0;title\007done\n'"
    async with pool_in(tmp_path) as pool:
        task = await pool.start_command(script, tmp_path)
        await pool.wait(task, 10)
        shown = await pool.output(task.id)
    assert shown == "red\n100%\ndone"
    raw = output_log(tmp_path, task.id)
    assert b"\x1b[1;31m" in raw and b"\r50%" in raw


async def test_records_and_logs_are_written_in_worker_threads(tmp_path: Path, monkeypatch):
    loop_thread = threading.current_thread()
    writers: list[tuple[str, threading.Thread]] = []

    def spy(real):
        def wrapper(*args, **kwargs):
            writers.append((real.__name__, threading.current_thread()))
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(task_module, "write_json_atomic", spy(task_module.write_json_atomic))
    monkeypatch.setattr(task_log, "_append", spy(task_log._append))
    monkeypatch.setattr(task_log, "_write_new", spy(task_log._write_new))
    go = Fifo(tmp_path / "go")
    async with pool_in(tmp_path) as pool:
        task = await pool.start_command(f"read x < {go.path}; echo one; echo two", tmp_path)
        go.send()  # output after the log has its file: appended to it
        await pool.wait(task, 10)
    names = [name for name, _ in writers]
    assert {"write_json_atomic", "_write_new", "_append"} <= set(names)
    assert loop_thread not in [thread for _, thread in writers]


async def test_closing_the_pool_stops_its_tasks_and_kills_their_process_groups(tmp_path: Path):
    ready = Fifo(tmp_path / "ready")
    async with pool_in(tmp_path) as pool:
        task = await pool.start_command(f"sleep 600 & echo $! > {ready.path}; wait", tmp_path)
        child = int(await ready.read_line())
        with anyio.fail_after(10):
            await pool.aclose()
        await assert_gone(task.record.pid or 0, child)
        with pytest.raises(PoolRefused, match="closed"):
            await pool.start_command("true", tmp_path)
    data = meta(tmp_path, task.id)
    assert (data["status"], data["error"]) == ("stopped", "stopped: the session closed")


async def test_a_foreground_process_adopted_keeps_its_output_and_gets_the_max_limit(
    tmp_path: Path,
):
    go = Fifo(tmp_path / "go")
    async with pool_in(tmp_path, max_timeout_seconds=120) as pool:
        log = pool.new_log()
        proc = await pool.open_process(f"echo before; read x < {go.path}; echo after", tmp_path,
                                       log)
        with anyio.fail_after(10):
            while log.total < len("before\n"):  # the pump runs in the pool's group
                await anyio.wait_all_tasks_blocked()
        task = await pool.adopt(proc, command="the command", cwd=tmp_path)
        assert task.record.timeout_seconds == 120 and task.record.pid == proc.pid
        go.send()
        record = await pool.wait(task, 10)
    assert record.status == "succeeded"
    assert output_log(tmp_path, task.id) == b"before\nafter\n"


async def test_wait_returns_the_record_as_it_stands_when_its_time_is_up(tmp_path: Path):
    go = Fifo(tmp_path / "go")
    async with pool_in(tmp_path) as pool:
        task = await pool.start_command(f"read x < {go.path}", tmp_path)
        record = await pool.wait(task.id, 0.05)
        assert record.status == "running" and not record.finished
        go.send()
        assert (await pool.wait(task.id, 10)).status == "succeeded"


async def test_a_task_whose_record_cannot_be_written_is_refused_and_holds_no_slot(
    tmp_path: Path,
):
    bundle = tmp_path / "not-a-folder"
    bundle.write_text("")
    async with pool_in(bundle, max_concurrent=1) as pool:
        with pytest.raises(PoolRefused, match="cannot record the task"):
            await pool.start_command("true", tmp_path)
        assert not pool.busy and pool.get("bg_1") is None
        assert await pool.records() == []


async def test_a_task_whose_record_fails_after_its_id_was_claimed_frees_its_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    write = task_module.write_json_atomic

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    async with pool_in(tmp_path, max_concurrent=1) as pool:
        monkeypatch.setattr(task_module, "write_json_atomic", full_disk)
        with pytest.raises(PoolRefused, match="No space left on device"):
            await pool.start_command("true", tmp_path)
        monkeypatch.setattr(task_module, "write_json_atomic", write)
        assert not pool.busy
        # The one slot is free again: the next task is admitted (and takes the next id).
        task = await pool.start_command("true", tmp_path)
        await pool.wait(task, 10)
        assert task.record.status == "succeeded"


async def test_a_finished_task_can_be_removed_with_its_files_and_ids_keep_counting(
    tmp_path: Path,
):
    go = Fifo(tmp_path / "go")
    async with pool_in(tmp_path) as pool:
        done = await pool.start_command("true", tmp_path)
        await pool.wait(done, 10)
        running = await pool.start_command(f"read x < {go.path}", tmp_path)
        with pytest.raises(ValueError, match="still running"):
            await pool.remove(running.id)
        await pool.remove(done.id)
        assert not (tmp_path / "background" / done.id).exists()
        assert [r.id for r in await pool.records()] == [running.id]
        with pytest.raises(UnknownTask):
            await pool.remove("bg_42")
        go.send()
        await pool.wait(running, 10)
        assert (await pool.start_command("true", tmp_path)).id == "bg_3"


@pytest.mark.parametrize(("ms", "shown"), [(1250, "1.3 s"), (1249, "1.2 s"), (50, "0.1 s"),
                                           (0, "0.0 s"), (61_950, "62.0 s")])
def test_a_cost_lines_seconds_round_half_up_as_the_web_pages_card_does(ms, shown):
    cost = TaskCost(model_calls=1, input_tokens=1, output_tokens=1, duration_ms=ms)
    assert cost.describe().endswith(f", {shown}")
