"""Indexes brought up to date in the background: the words first, then the missing vectors.

An `IndexKeeper` works in its owner's task group, one root at a time: a session opening asks
for its roots, and a search asks for a root whose index is not ready or whose notes changed,
so a search never waits on a build (it scans the files meanwhile). Embedding runs here too, in
batches, never in a search; a batch that fails is left for the next request.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import TaskGroup

from acp_memory.llm.embeddings import Embeddings, EmbeddingsUnavailable
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.index.sync import Progress
from acp_memory.memory.index.vectors import Made, Pending, VectorShare
from acp_memory.memory.redact import redact_text
from acp_memory.memory.scan import SCANS

log = logging.getLogger(__name__)

# How long a build waits, between two batches, for the direct scans then running (a search is
# waiting on each); a scan still running after that is not waited for again by that build.
GIVE_WAY_S = 2.0


def embedding_input(rel: str, text: str) -> str:
    """What is embedded for a note: its title, its path and its body, secrets redacted."""
    title = next((line.lstrip("#").strip() for line in text.splitlines()
                  if line.startswith("# ")), Path(rel).stem)
    return redact_text(f"{title}\n{rel}\n{text}")


async def embed_pending(
    indexes: SearchIndexes, root: Path, progress: Progress | None = None
) -> int:
    """Embed root's notes that have no vector of the configured model, batch by batch;
    how many got one. Raises EmbeddingsUnavailable when a batch fails."""
    embeddings = indexes.embeddings
    if embeddings is None:
        return 0
    share = indexes.shared_vectors.get(root)  # roots are absolute (Roots makes them so)
    done = 0
    while notes := await anyio.to_thread.run_sync(
        indexes.pending_vectors, root, embeddings.batch
    ):
        inputs = await anyio.to_thread.run_sync(_inputs, embeddings, root, notes)
        found = await _vectors(embeddings, share, inputs)
        stored = await anyio.to_thread.run_sync(indexes.store_vectors, root, notes, found)
        done += stored
        if progress is not None:
            progress(done, done + len(notes))
        if len(notes) < embeddings.batch or not stored:
            break  # the last batch, or notes changed under it: the next pass has them
    return done


async def _vectors(
    embeddings: Embeddings, share: VectorShare | None, inputs: list[tuple[Made, str]]
) -> list[Sequence[float]]:
    """The vectors of a batch: the share's for the notes whose very text it has embedded, the
    rest embedded here (and given to the share)."""
    made = [note for note, _ in inputs]
    known = {} if share is None else await anyio.to_thread.run_sync(share.take, made)
    missing = [(note, text) for note, text in inputs if note[0] not in known]
    if missing:
        fresh = await embeddings.embed_batch([text for _, text in missing])
        known.update(zip((rel for (rel, _), _ in missing), fresh, strict=True))
        if share is not None:
            await anyio.to_thread.run_sync(share.give, [note for note, _ in missing], fresh)
    return [known[rel] for rel, _ in made]


def _inputs(embeddings: Embeddings, root: Path, notes: list[Pending]) -> list[tuple[Made, str]]:
    """Each note as (its path and the sha256 of its bytes, the text embedded for it)."""
    out = []
    for _, rel, _ in notes:
        try:
            data = (root / rel).read_bytes()
        except OSError:
            data = b""
        text = data.decode("utf-8", errors="replace")
        out.append(((rel, hashlib.sha256(data).hexdigest()),
                    embeddings.prepare(embedding_input(rel, text))))
    return out


def _cancelled(cancelled: type[BaseException]) -> bool:
    """In a worker thread: whether the task waiting for it was cancelled (the owner stops);
    `cancelled` is the backend's cancellation, which only the event loop's thread can name."""
    try:
        anyio.from_thread.check_cancelled()
    except cancelled:
        return True
    return False


class _Between:
    """A build's `stop`, asked between its batches: first it gives way to the direct scans
    running (the search behind each waits on it, and nobody on the build), then says whether
    the owner was cancelled."""

    def __init__(self, cancelled: type[BaseException]) -> None:
        self._cancelled = cancelled
        self._outlasted: set[int] = set()

    def __call__(self) -> bool:
        SCANS.give_way(GIVE_WAY_S, self._outlasted)
        return _cancelled(self._cancelled)


class IndexKeeper:
    """Keeps the indexes of `indexes` up to date from the owner's task group."""

    def __init__(self, indexes: SearchIndexes, owner: Callable[[], TaskGroup]) -> None:
        self.indexes = indexes
        self._owner = owner
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._loop_thread = threading.get_ident()
        with contextlib.suppress(RuntimeError):  # made on the event loop: searches may ask
            self._token = anyio.lowlevel.current_token()
        self._running: set[Path] = set()
        self._again: set[Path] = set()
        self._one_at_a_time = anyio.CapacityLimiter(1)  # two builds at once starve a turn
        self._failed: str | None = None
        indexes.background = self.keep_from_thread

    def keep(self, roots: Iterable[Path]) -> None:
        """Bring each root's index up to date in the background (on the event loop)."""
        owner = self._owner()  # RuntimeError when the owner is not running: nothing started
        self._token = anyio.lowlevel.current_token()
        self._loop_thread = threading.get_ident()
        for root in roots:
            key = root.absolute()
            if key in self._running:
                self._again.add(key)  # changed again while being kept: one more pass
                continue
            self._running.add(key)
            owner.start_soon(self._keep, key, name=f"index {key}")

    def keep_from_thread(self, root: Path) -> bool:
        """`keep` from a worker thread (a search); False when there is no event loop to run
        it (not made on one, or stopped)."""
        if self._token is None:
            return False
        if threading.get_ident() == self._loop_thread:
            self.keep([root])  # a search run on the event loop itself (waiting would hang)
            return True
        try:
            anyio.from_thread.run_sync(self.keep, [root], token=self._token)
        except (RuntimeError, anyio.RunFinishedError):
            return False
        return True

    async def _keep(self, root: Path) -> None:
        try:
            while True:
                self._again.discard(root)
                async with self._one_at_a_time:
                    stop = _Between(anyio.get_cancelled_exc_class())
                    built = await anyio.to_thread.run_sync(self.indexes.build, root, None, stop)
                    if built:
                        await self._embed(root)
                if root not in self._again:
                    return
        except Exception as exc:
            # Searches go on by scanning the files; the next request tries again.
            log.warning("search index for %s: cannot bring it up to date: %s", root, exc)
            log.debug("the failure in full", exc_info=True)
        finally:
            self._running.discard(root)

    async def _embed(self, root: Path) -> None:
        try:
            await embed_pending(self.indexes, root)
        except EmbeddingsUnavailable as exc:
            self.indexes.vectors_behind.add(root)
            # Said once until it works again; the notes without vectors are tried next time.
            if self._failed != str(exc):
                self._failed = str(exc)
                log.warning("embeddings unavailable: %s; the notes of %s are searched by their "
                            "words until it answers", exc, root)
        else:
            self._failed = None
            self.indexes.vectors_behind.discard(root)
