"""The proxy's own record of each inner session: its bundle under `<sessions dir>/proxy`, named
by a hash of the inner id, and the `<long_term_memory>` block a prompt carries."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import anyio

from acp_memory.config.models import OFFLINE_MODEL_ID, Config
from acp_memory.runtime.carried_run import CarriedRun
from acp_memory.runtime.memory_agent import memory_model_id
from acp_memory.sessions.model import ProxiedAgent
from acp_memory.sessions.store import Session, SessionNotFound, SessionStore

PROXY_FOLDER = "proxy"  # under the sessions folder
BLOCK_OPEN, BLOCK_CLOSE = "<long_term_memory>", "</long_term_memory>"
# The block as the proxy appends it, at the end of a user message's text (an agent that
# replays a prompt as one text joins its blocks).
_BLOCK = re.compile(
    r"\s*" + re.escape(BLOCK_OPEN) + r"\n.*?\n" + re.escape(BLOCK_CLOSE) + r"\s*\Z", re.DOTALL
)


def bundle_id(inner_session_id: str) -> str:
    """The proxy bundle's id: the inner id is untrusted text, so only its hash names a folder."""
    return "sess_" + hashlib.sha256(inner_session_id.encode("utf-8", "replace")).hexdigest()[:24]


def memory_block(reports: list[str]) -> dict[str, Any]:
    """The one text block a prompt carries its memory reports in, after the user's blocks."""
    body = "\n\n".join(reports)
    return {"type": "text", "text": f"{BLOCK_OPEN}\n{body}\n{BLOCK_CLOSE}"}


def without_block(text: str) -> str:
    """A replayed user message's text without the block the proxy appended to it."""
    return _BLOCK.sub("", text)


def prompt_text(blocks: list[Any]) -> str:
    """What the memory run and the commands read of a prompt: its text blocks, joined."""
    texts = [b["text"] for b in blocks
             if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    return "\n".join(texts)


@dataclass
class Proxied:
    """One inner session as the proxy keeps it."""

    inner_id: str
    session: Session
    # The agent's reply text of the prompt being answered (None between prompts).
    reply: list[str] | None = None
    # The prompts' memory waits, ended by session/cancel.
    waits: set[anyio.CancelScope] = field(default_factory=set)
    # Runs whose report has not ridden on a prompt yet.
    carried: list[CarriedRun] = field(default_factory=list)


def open_bundle(
    store: SessionStore, cfg: Config, inner_id: str, cwd: str, command: list[str]
) -> Session:
    """The inner session's bundle, made on first use (blocking: run it in a worker thread);
    its model is memory.model, else the built-in offline model. Raises BundleError, OSError."""
    try:
        session = store.load(bundle_id(inner_id))
    except SessionNotFound:
        return store.create(
            cwd=cwd,
            model_id=memory_model_id(cfg, OFFLINE_MODEL_ID),
            session_id=bundle_id(inner_id),
            proxy=ProxiedAgent(inner_session_id=inner_id, command=command),
        )
    session.record.cwd = cwd  # the editor's, as a loaded session takes it (saved with a turn)
    return session
