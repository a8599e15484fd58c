"""`acp-memory notes index`, and `notes search` with memory.embeddings on or failing."""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from fakes.embeddings_server import FakeEmbeddings, keyed, unreachable_url
from fakes.script import error

from acp_memory.cli import main
from acp_memory.memory.index import indexes as indexes_module
from acp_memory.memory.index import keeper
from acp_memory.memory.index.sync import Progress
from acp_memory.memory.progress import ProgressBar

REPO = Path(__file__).resolve().parents[2]
CLEAR = "\r\x1b[2K"
INTERRUPTED = ("acp-memory notes: index interrupted; what was indexed so far is kept, and the "
               "next `notes index` goes on from there\n")
# The notes' vectors: the query "orchard fruit" shares no word with the pie note, only meaning.
VECTORS = keyed({"apple": [1, 0, 0], "orchard": [1, 0, 0], "deploy": [0, 1, 0]},
                default=[0, 0, 1])


class TerminalErr(io.StringIO):
    """Stderr as a terminal gives it."""

    def isatty(self) -> bool:
        return True


def seed(tmp_path: Path, embeddings_url: str | None = None) -> None:
    root = tmp_path / "h" / "memory"
    (root / "infra").mkdir(parents=True)
    (root / "infra" / "deploy.md").write_text("Rotate the deploy keys monthly.")
    (root / "food").mkdir()
    (root / "food" / "pie.md").write_text("# Apple pie\nBake it for an hour.")
    (tmp_path / "w" / "memory").mkdir(parents=True)
    (tmp_path / "w" / "memory" / "cats.md").write_text("Cats sleep all day.")
    if embeddings_url is not None:
        (tmp_path / "h" / "config.yaml").write_text(
            f"providers:\n  - {{name: local, type: openai, api_base: '{embeddings_url}'}}\n"
            "memory:\n  embeddings: {model: local/tiny, batch: 1}\n"
        )


def argv(tmp_path: Path, *args: str) -> list[str]:
    return ["notes", *args, "--home", str(tmp_path / "h"), "--cwd", str(tmp_path / "w")]


def notes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str, stdin: str = ""
) -> tuple[int, str, str]:
    """One notes command in this process: (status, stdout, stderr)."""
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        code = main([*argv(tmp_path, *args), "--log-level", "warning"])
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    return code, out, err


async def process(tmp_path: Path, *args: str, stdin: str = "") -> tuple[int, str, str]:
    """One notes command in its own process, as a person runs it: (status, stdout, stderr)."""
    done = await anyio.run_process(
        [sys.executable, "-m", "acp_memory", *argv(tmp_path, *args)],
        input=stdin.encode(), check=False, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def lines_of(out: str) -> list[str]:
    """The result lines with the time taken left out."""
    return [re.sub(r", in \d+\.\d s$", "", line) for line in out.splitlines()]


@pytest.mark.anyio
async def test_index_embeds_every_note_once_and_search_then_embeds_only_the_query(
    tmp_path: Path,
) -> None:
    async with FakeEmbeddings(VECTORS) as server:
        seed(tmp_path, server.base_url)
        with anyio.fail_after(60):
            code, out, err = await process(tmp_path, "index")
        assert (code, err) == (0, "")  # off a terminal: no bar, only the result lines
        assert lines_of(out) == [
            f"global {tmp_path / 'h' / 'memory'}: 2 notes indexed, 2 embedded",
            f"project {tmp_path / 'w' / 'memory'}: 1 note indexed, 1 embedded",
        ]
        embedded = len(server.inputs)
        assert embedded == 3 and any("Apple pie" in text for text in server.inputs)

        with anyio.fail_after(60):
            code, out, err = await process(tmp_path, "search", "orchard fruit", "--json")
        assert (code, err) == (0, "")
        assert server.inputs[embedded:] == ["orchard fruit"]
        assert json.loads(out)[0]["path"] == "global:food/pie.md"  # by meaning alone

        with anyio.fail_after(60):
            code, out, _ = await process(tmp_path, "index")
        assert code == 0 and lines_of(out) == [
            f"global {tmp_path / 'h' / 'memory'}: words up to date, vectors up to date",
            f"project {tmp_path / 'w' / 'memory'}: words up to date, vectors up to date",
        ]
        assert len(server.inputs) == embedded + 1


@pytest.mark.anyio
async def test_a_terminal_gets_a_bar_per_root_and_phase_redrawn_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeEmbeddings(VECTORS) as server:
        seed(tmp_path, server.base_url)
        monkeypatch.setattr(sys, "stderr", TerminalErr())
        with anyio.fail_after(60):
            code = await anyio.to_thread.run_sync(main, argv(tmp_path, "index"))
    err = sys.stderr.getvalue()
    out = capsys.readouterr().out
    assert code == 0 and len(lines_of(out)) == 2
    bar = f"[{'#' * 15}{'.' * 15}]"
    assert err == (f"{CLEAR}global: words [{'#' * 30}] 2/2{CLEAR}"
                   f"{CLEAR}global: vectors {bar} 1/2{CLEAR}global: vectors [{'#' * 30}] 2/2"
                   f"{CLEAR}{CLEAR}project: words [{'#' * 30}] 1/1{CLEAR}"
                   f"{CLEAR}project: vectors [{'#' * 30}] 1/1{CLEAR}")


def test_a_bar_off_a_terminal_writes_nothing() -> None:
    err = io.StringIO()
    with ProgressBar("global: words", err) as bar:
        bar(1, 2)
    assert err.getvalue() == "" and bar.total == 2


def test_with_the_provider_down_the_words_are_indexed_and_each_root_says_what_lacks_a_vector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = unreachable_url()
    seed(tmp_path, url)
    code, out, err = notes(capsys, tmp_path, "index")
    assert code == 1  # a script learns the vectors are missing; the words are there
    assert lines_of(out) == [
        f"global {tmp_path / 'h' / 'memory'}: 2 notes indexed, 0 embedded",
        f"project {tmp_path / 'w' / 'memory'}: 1 note indexed, 0 embedded",
    ]
    later = ("(tried again by the next `notes index`, and by the agent in the background); "
             "searches use words\n")
    assert err == (
        f"acp-memory notes: global: embeddings unavailable: cannot reach {url}/embeddings; "
        f"2 notes have no vector yet {later}"
        f"acp-memory notes: project: embeddings unavailable: cannot reach {url}/embeddings; "
        f"1 note has no vector yet {later}"
    )
    code, out, _ = notes(capsys, tmp_path, "search", "deploy keys")
    assert code == 0 and "[1] global:infra/deploy.md" in out


@pytest.mark.anyio
async def test_a_provider_that_refused_is_not_asked_again_for_the_next_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeEmbeddings(VECTORS, error(401, "bad key")) as server:
        seed(tmp_path, server.base_url)
        with anyio.fail_after(60):
            code = await anyio.to_thread.run_sync(main, argv(tmp_path, "index"))
    out, err = capsys.readouterr()
    assert code == 1 and len(server.requests) == 1
    assert lines_of(out)[1].endswith("1 note indexed, 0 embedded")
    assert [line.split(";")[0] for line in err.splitlines()] == [
        f"acp-memory notes: {scope}: embeddings unavailable: {server.base_url}/embeddings "
        "answered HTTP 401: not authorised (check the provider's api_key)"
        for scope in ("global", "project")
    ]


def test_a_root_not_created_yet_says_so_and_an_index_in_step_says_up_to_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "w").mkdir()
    code, out, err = notes(capsys, tmp_path, "index")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"global {tmp_path / 'h' / 'memory'}: no notes (the folder does not exist yet)",
        f"project {tmp_path / 'w' / 'memory'}: no notes (the folder does not exist yet)",
    ]
    seed(tmp_path)
    notes(capsys, tmp_path, "index")
    (tmp_path / "w" / "memory" / "dogs.md").write_text("Dogs bark.")
    code, out, _ = notes(capsys, tmp_path, "index")
    assert code == 0 and lines_of(out) == [
        f"global {tmp_path / 'h' / 'memory'}: words up to date",
        f"project {tmp_path / 'w' / 'memory'}: 1 note indexed",
    ]


@pytest.mark.parametrize("phase", ["words", "vectors"])
def test_ctrl_c_ends_the_bar_and_says_one_line_with_status_130(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    phase: str,
) -> None:
    seed(tmp_path, unreachable_url())

    def words_interrupted(self: indexes_module.SearchIndexes, root: Path,
                          progress: Progress | None = None, *_: object) -> bool:
        assert progress is not None
        progress(1, 2)
        raise KeyboardInterrupt

    async def vectors_interrupted(indexes: indexes_module.SearchIndexes, root: Path,
                                  progress: Progress | None = None) -> int:
        assert progress is not None
        progress(1, 2)
        raise KeyboardInterrupt

    if phase == "words":
        monkeypatch.setattr(indexes_module.SearchIndexes, "build", words_interrupted)
    else:
        monkeypatch.setattr(keeper, "embed_pending", vectors_interrupted)
    monkeypatch.setattr(sys, "stderr", TerminalErr())
    code, out, _ = notes(capsys, tmp_path, "index")
    err = sys.stderr.getvalue()
    assert (code, out) == (130, "")
    # The bar cleared, then the one line.
    assert err.endswith(f"{CLEAR}global: {phase} [{'#' * 15}{'.' * 15}] 1/2{CLEAR}{INTERRUPTED}")
    assert "Traceback" not in err


def test_a_failing_provider_is_told_once_per_process_in_batch_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = unreachable_url()
    seed(tmp_path, url)
    code, out, _ = notes(capsys, tmp_path, "search", "-", "--scope", "global",
                         stdin="deploy keys\napple pie\n")
    notice = f"(embeddings unavailable: cannot reach {url}/embeddings; words only)\n"
    assert code == 0 and out.startswith(notice + "1 matching note for 'deploy keys'")
    assert out.count("embeddings unavailable") == 1
    assert "1 matching note for 'apple pie'" in out


@pytest.mark.anyio
async def test_json_search_keeps_stdout_a_list_and_says_the_failure_once_on_stderr(
    tmp_path: Path,
) -> None:
    url = unreachable_url()
    seed(tmp_path, url)
    with anyio.fail_after(60):
        code, out, err = await process(tmp_path, "search", "-", "--json",
                                       stdin="deploy keys\napple pie\n")
    assert code == 0
    answers = [json.loads(line) for line in out.splitlines()]
    assert [[hit["path"] for hit in hits] for hits in answers] == [
        ["global:infra/deploy.md"], ["global:food/pie.md"]
    ]
    assert err == (f"acp-memory: embeddings unavailable: cannot reach {url}/embeddings; "
                   "searching by words only\n")
