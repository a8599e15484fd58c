"""`acp-memory doctor`: checks the config and the environment and prints what it finds.

With --online it also makes one tiny call to every configured provider, asks for one
embedding when memory.embeddings names a model, and starts every `mcp.servers` entry to count
its tools (the MCP servers' checks are in `servers.py`).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from acp_memory.config import Config, ConfigError, Paths, resolve_paths
from acp_memory.config.loader import (
    load_env_file,
    no_file_config,
    parse_config,
    read_raw,
    unknown_keys,
    unset_variables,
)
from acp_memory.config.models import ProviderConfig
from acp_memory.doctor.findings import Finding, Level
from acp_memory.doctor.servers import mcp_findings, mcp_online_findings, mcp_unset_variables
from acp_memory.doctor.shared import shared_findings, shared_online_findings
from acp_memory.llm.registry import api_key, key_variable
from acp_memory.llm.windows import context_window
from acp_memory.mcpclient.configured import configured_specs
from acp_memory.memory.roots import Roots
from acp_memory.runtime.memory_agent import memory_model_warnings

if TYPE_CHECKING:
    import httpx

# A doctor run should not hang for the ten minutes a real call may take.
ONLINE_TIMEOUT_S = 30.0


def check(
    paths: Paths, *, explicit: bool, sessions_dir: str | None = None, online: bool = False
) -> list[Finding]:
    """Every finding about the config file and the folders it names; online adds the providers."""
    findings: list[Finding] = []
    load_env_file(paths.env_file)
    try:
        raw = read_raw(paths.config_file)
    except ConfigError as exc:
        return [Finding("error", str(exc))]
    if raw is None:
        if explicit:
            findings.append(Finding("error", f"no config file at {paths.config_file}"))
            cfg = Config()
        else:
            # What a run would pick: the model named by the keys in the environment.
            cfg = no_file_config(paths.config_file)
            findings.append(Finding("ok", f"{cfg.take_no_file_note()}; memory on"))
    else:
        try:
            cfg = parse_config(raw, paths.config_file)
        except ConfigError as exc:
            return [Finding("error", str(exc))]
        findings.append(Finding("ok", f"config {paths.config_file} parsed"))
        findings += [Finding("warning", f"unknown key {key}") for key in unknown_keys(cfg)]
    findings += _model_findings(cfg, raw or {})
    findings += _model_choice_findings(cfg, has_file=raw is not None)
    findings += _embeddings_findings(cfg)
    findings += mcp_findings(cfg, paths.cwd)
    findings += mcp_unset_variables(raw or {})
    findings += shared_findings(cfg, paths.cwd)
    if raw is not None and not cfg.memory.enable:
        findings.append(
            Finding(
                "warning",
                "memory is off (memory.enable is false): nothing is recalled or saved; set "
                "memory.enable: true to turn it on",
            )
        )
    # The same precedence as a real run: --sessions-dir, then sessions.dir, then the home.
    paths = resolve_paths(
        home=str(paths.home),
        config=str(paths.config_file),
        sessions_dir=sessions_dir,
        cwd=str(paths.cwd),
        cfg=cfg,
    )
    for label, folder in (("home", paths.home), ("sessions folder", paths.sessions_dir)):
        problem = _unwritable(folder)
        findings.append(
            Finding("error", f"{label} {folder} is not writable: {problem}")
            if problem
            else Finding("ok", f"{label} {folder} is writable")
        )
    # Every surface leaves such a project root out; doctor says why once.
    if refused := Roots.from_config(cfg, paths).project_refusal():
        findings.append(Finding("warning", refused))
    # Measured as a launch reads it: without its surrounding blanks.
    operator_chars = len(cfg.memory.additional_prompt.strip())
    if cfg.memory.additional_prompt_max_chars and (
        operator_chars > cfg.memory.additional_prompt_max_chars
    ):
        findings.append(
            Finding(
                "warning",
                f"memory.additional_prompt is {operator_chars} characters, longer than "
                f"additional_prompt_max_chars ({cfg.memory.additional_prompt_max_chars})"
                " and will be cut",
            )
        )
    if online:
        findings += anyio.run(online_findings, cfg)
        if configured_specs(cfg, paths.cwd, problems=[]):
            findings += anyio.run(mcp_online_findings, cfg, paths.cwd)
        findings += shared_online_findings(cfg, paths.cwd)
    return findings



async def online_findings(cfg: Config) -> list[Finding]:
    """One tiny call per configured provider: is it reachable, does it take the key?"""
    if not cfg.providers:
        return [Finding("ok", "no providers configured; the offline model needs no network")]
    import httpx  # only here: a plain doctor run stays off the network stack

    found: dict[int, Finding] = {}
    async with httpx.AsyncClient() as client, anyio.create_task_group() as tg:

        async def probe(index: int, provider: ProviderConfig) -> None:
            found[index] = await _provider_finding(cfg, provider, client)

        async def embed() -> None:
            if (finding := await _embeddings_probe(cfg)) is not None:
                found[len(cfg.providers)] = finding

        # All at once: an unreachable provider may take the whole timeout.
        for index, provider in enumerate(cfg.providers):
            tg.start_soon(probe, index, provider)
        tg.start_soon(embed)
    return [found[index] for index in sorted(found)]


async def _embeddings_probe(cfg: Config) -> Finding | None:
    """One tiny embedding from memory.embeddings.model, when one is set that can be asked."""
    from acp_memory.llm.embeddings import EmbeddingsUnavailable, embeddings_for

    embeddings = embeddings_for(cfg)
    if embeddings is None or embeddings.problem:
        return None  # off, or already an error without the network
    try:
        vectors = await embeddings.embed_batch(["acp-memory doctor"])
    except EmbeddingsUnavailable as exc:
        return Finding("error", f"memory.embeddings: {exc}")
    return Finding(
        "ok",
        f"memory.embeddings: {embeddings.url} embedded a probe "
        f"({embeddings.settings.model}, {len(vectors[0])} dimensions)",
    )


async def _provider_finding(
    cfg: Config, provider: ProviderConfig, client: httpx.AsyncClient
) -> Finding:
    name = f"provider {provider.name!r}"
    if provider.type == "offline":
        return Finding("ok", f"{name} is the built-in offline model: no network check needed")
    model = _model_of(cfg, provider.name)
    if model is None:
        if cfg.memory.embeddings.model.partition("/")[0] == provider.name:
            only = "serves memory.embeddings only: not asked for a completion"
            return Finding("ok", f"{name} {only}")
        return Finding("warning", f"{name} not checked online: no configured model uses it")
    key = api_key(provider)
    if not key and not provider.api_base:
        return Finding("warning", f"{name} not checked online: it has no key")
    from acp_memory.llm.anthropic import AnthropicProvider
    from acp_memory.llm.openai import OpenAIProvider

    cls = OpenAIProvider if provider.type == "openai" else AnthropicProvider
    llm = cls(
        client,
        name=provider.name,
        api_base=provider.api_base,
        api_key=key,
        timeout_s=min(provider.timeout_ms / 1000, ONLINE_TIMEOUT_S),
    )
    found = await llm.probe(model)
    where = f"{name} at {found.url}"
    if found.status is None:
        return Finding("error", f"{where} is unreachable: {found.problem}")
    if found.status in (401, 403):
        return Finding("error", f"{where} rejected the key: {found.status} {found.problem}")
    if found.problem and found.status < 400:
        return Finding("error", f"{where} answered, but not as a model API: {found.problem}")
    if found.problem:
        # Busy or down for now (429, 5xx) is not a mistake in the config; the rest mostly is.
        level: Level = "warning" if found.status == 429 or found.status >= 500 else "error"
        failed = f"{found.status} {found.problem}"
        return Finding(
            level, f"{where} is reachable, but a 1-token call to {model} failed: {failed}"
        )
    accepted = "accepted the key" if key else "answered without a key"
    return Finding("ok", f"{where} is reachable and {accepted} (model {model})")


def _model_of(cfg: Config, provider: str) -> str | None:
    """The upstream id of the first configured model served by a provider."""
    ids = [cfg.agent.model, cfg.memory.model, *(m.model for m in cfg.models)]
    for model_id in [*ids, *cfg.memory.fallback_models]:
        name, _, upstream = model_id.partition("/")
        if name == provider and upstream:
            return upstream
    return None


def _model_findings(cfg: Config, raw: Mapping[str, Any]) -> list[Finding]:
    found: list[Finding] = []
    names = [p.name for p in cfg.providers]
    for dup in {n for n in names if names.count(n) > 1}:
        found.append(Finding("error", f"providers: the name {dup!r} is used twice"))
    refs = [(f"models[{i}].model", m.model) for i, m in enumerate(cfg.models)]
    refs += [("agent.model", cfg.agent.model), ("memory.model", cfg.memory.model)]
    refs += [(f"memory.fallback_models[{i}]", m) for i, m in enumerate(cfg.memory.fallback_models)]
    for key, model_id in refs:
        if not model_id:
            continue
        provider, _, upstream = model_id.partition("/")
        if not upstream:
            found.append(
                Finding("error", f"{key}: {model_id!r} is not of the form <provider>/<model>")
            )
        elif cfg.find_provider(provider) is None:
            found.append(
                Finding("error", f"{key}: {model_id!r} names no configured provider {provider!r}")
            )
    used = {m.partition("/")[0] for m in (cfg.default_model_id(), cfg.memory.model) if m}
    for i, p in enumerate(cfg.providers):
        if p.type == "offline" or api_key(p):
            continue
        unset = _unset_key_variables(raw, i)
        if p.api_base and not unset:
            continue  # a server of one's own (llama.cpp, vLLM) may take no key at all
        hint = (
            f"its api_key names ${{{unset[0]}}}, which is not set"
            if unset
            else f"set its api_key or ${key_variable(p)}"
        )
        # Without a key the default model's (or memory's) provider fails every call.
        level: Level = "error" if p.name in used else "warning"
        found.append(Finding(level, f"provider {p.name!r} has no key: {hint}"))
    return found


def _model_choice_findings(cfg: Config, *, has_file: bool) -> list[Finding]:
    """The model new sessions use and why (a run without a file said so in its note); the
    memory models a run passes over; a price that no usage_update can carry."""
    found: list[Finding] = []
    if has_file:
        model, why = cfg.model_choice()
        found.append(Finding("ok", f"new sessions use {model} ({why})"))
    found += [Finding("warning", line) for line in memory_model_warnings(cfg)]
    for index, model_config in enumerate(cfg.models):
        if model_config.price is not None and context_window(model_config) is None:
            found.append(Finding("warning", f"models[{index}].price is set but its context "
                                 "window is unknown: no usage_update, no cost"))
    return found


def _embeddings_findings(cfg: Config) -> list[Finding]:
    """Whether memory.embeddings.model can be served, as a search would find out."""
    if not cfg.memory.embeddings.model:
        return []  # off; and a plain doctor run stays off the network stack
    from acp_memory.llm.embeddings import embeddings_for

    embeddings = embeddings_for(cfg)
    assert embeddings is not None  # a model is named
    if embeddings.problem:
        # Searches go on by words alone, but recall by meaning never works.
        return [Finding("error", f"memory.embeddings.model: {embeddings.problem}")]
    return [Finding("ok", f"memory.embeddings: {embeddings.key} from {embeddings.url}")]


def _unset_key_variables(raw: Mapping[str, Any], index: int) -> list[str]:
    """The ${VAR} names in the file's providers[index].api_key that the environment leaves
    unset."""
    items = raw.get("providers")
    item = items[index] if isinstance(items, list) and index < len(items) else None
    value = item.get("api_key") if isinstance(item, Mapping) else None
    if not isinstance(value, str):
        return []
    return unset_variables(value)


def _unwritable(folder: Path) -> str | None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def run_doctor(args: argparse.Namespace) -> int:
    """Print the findings; exit code 1 when any is an error."""
    paths = resolve_paths(
        home=args.home, config=args.config, sessions_dir=args.sessions_dir, cwd=args.cwd
    )
    findings = check(
        paths,
        explicit=args.config is not None,
        sessions_dir=args.sessions_dir,
        online=getattr(args, "online", False),  # the flag may be missing from an older parser
    )
    for f in findings:
        print(f)
    errors = sum(f.level == "error" for f in findings)
    warnings = sum(f.level == "warning" for f in findings)
    print(f"{errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0
