"""The config file's `memory` section: notes, recall, review, embeddings, shared memory,
reflection and tidy runs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PrivateAttr

from acp_memory.config.section import Section, false_means


class EmbeddingsConfig(Section):
    """Recall by meaning: a provider's OpenAI-compatible /embeddings, off while model is ""."""

    model: str = Field(default="", description="<provider>/<embedding model id>")
    dimensions: int | None = Field(default=None, gt=0)  # sent when set; other lengths refused
    batch: int = Field(default=64, ge=1, le=2048)  # notes per request
    timeout_ms: int = Field(default=2000, gt=0)  # a query's embedding; past it, words only
    batch_timeout_ms: int = Field(default=30_000, gt=0)  # one batch of notes
    max_input_chars: int = Field(default=8000, ge=100)  # a note's title, path and body, cut
    # A note found by its vector alone counts only at this cosine or more. The default was
    # measured with all-MiniLM-L6-v2 over six notes: eight nonsense or unrelated queries came
    # to at most 0.23 against any note (and paraphrases to the wrong note at most 0.24), eight
    # paraphrases to their own note 0.30 to 0.67. Another model wants its own floor.
    min_similarity: float = Field(default=0.27, ge=-1, le=1)


class SharedMemoryConfig(Section):
    """The project scope in PostgreSQL, shared by every agent on the same repository."""

    # postgresql://user@host:5432/db?sslmode=require; "" keeps the project scope on disk.
    dsn: str = ""
    # The project's key; "" takes the cwd's git remote origin, normalised (github.com/org/repo).
    project: str = ""
    # Set by the loader: the ${VAR}s that left `dsn` empty (unset), for the start's warning.
    _unset_variables: list[str] = PrivateAttr(default_factory=list)

    def unset_variables(self) -> list[str]:
        """The ${VAR}s of the file's dsn whose being unset turned shared memory off."""
        return list(self._unset_variables)


class ReflectConfig(Section):
    """Reflection runs: what a whole session taught, saved once it is let go or closed."""

    enable: bool = True  # only where memory is on for the session
    min_turns: int = Field(default=3, ge=1)  # user turns since the last reflection
    max_chars: int = Field(default=60_000, ge=1000)  # the transcript's cut, newest kept


class TidyConfig(Section):
    """Tidy runs: duplicates merged, contradictions settled, stale lines dropped, as held
    proposals."""

    every_hours: float = Field(default=0, ge=0)  # a background pass per root; 0: never by itself
    max_groups: int = Field(default=50, ge=1)  # candidate groups one run is handed


class MemoryConfig(Section):
    enable: bool = False
    model: str = ""
    fallback_models: list[str] = Field(default_factory=list)
    dir: str = ""
    wait_seconds: float = Field(default=20, ge=0)
    timeout_seconds: float = Field(default=300, gt=0)
    keep_runs: int = Field(default=20, ge=0)
    recall_max_turns: int = Field(default=6, ge=1)
    persist_max_turns: int = Field(default=12, ge=1)
    copilot_max_tokens: int = Field(default=4096, gt=0)
    max_search_hits: int = Field(default=8, ge=1)
    additional_prompt: str = ""
    additional_prompt_max_chars: int = Field(default=0, ge=0)
    # Kodik's inline memory: the notes themselves go into the main agent's context instead of
    # a subagent's report.
    inline: bool = False
    # Kodik's safeguards: a note body is bounded in UTF-8 bytes and never cut.
    max_note_bytes: int = Field(default=16 * 1024, gt=0)
    # Search indexes kept open, each a SQLite connection and an inotify descriptor; the least
    # recently searched root's is closed past this.
    index_max_roots: int = Field(default=16, ge=1)
    # `<cwd>/memory` linking outside the cwd (a cloned repository can ship such a link) is
    # refused unless allowed; YAML's `false` means refuse.
    project_root_symlinks: Annotated[Literal["refuse", "allow"], false_means("refuse")] = "refuse"
    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
    # The journal of note changes keeps this many days (0: all); held changes expire after
    # pending_days. review: ask puts each write of a memory run to the user first.
    history_days: int = Field(default=90, ge=0)
    review: Annotated[Literal["off", "ask"], false_means("off")] = "off"
    pending_days: int = Field(default=7, ge=1)
    shared: SharedMemoryConfig = Field(default_factory=SharedMemoryConfig)
    reflect: ReflectConfig = Field(default_factory=ReflectConfig)
    tidy: TidyConfig = Field(default_factory=TidyConfig)
