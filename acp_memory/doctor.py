"""`acp-memory doctor`: checks the config and the environment and prints what it finds."""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from acp_memory.config import Config, ConfigError, Paths, resolve_paths
from acp_memory.config.loader import load_env_file, parse_config, read_raw, unknown_keys
from acp_memory.llm.registry import api_key, key_variable

Level = Literal["error", "warning", "ok"]


@dataclass(frozen=True)
class Finding:
    level: Level
    text: str

    def __str__(self) -> str:
        return f"{self.level}: {self.text}"


def check(paths: Paths, *, explicit: bool, sessions_dir: str | None = None) -> list[Finding]:
    """Every finding about the config file and the folders it names."""
    findings: list[Finding] = []
    load_env_file(paths.env_file)
    try:
        raw = read_raw(paths.config_file)
    except ConfigError as exc:
        return [Finding("error", str(exc))]
    if raw is None:
        level: Level = "error" if explicit else "ok"
        findings.append(
            Finding(
                level,
                f"no config file at {paths.config_file}"
                + ("" if explicit else "; using built-in defaults (offline model)"),
            )
        )
        cfg = Config()
    else:
        try:
            cfg = parse_config(raw, paths.config_file)
        except ConfigError as exc:
            return [Finding("error", str(exc))]
        findings.append(Finding("ok", f"config {paths.config_file} parsed"))
        findings += [Finding("warning", f"unknown key {key}") for key in unknown_keys(cfg)]
    findings += _model_findings(cfg)
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
    if cfg.memory.additional_prompt_max_chars and (
        len(cfg.memory.additional_prompt) > cfg.memory.additional_prompt_max_chars
    ):
        findings.append(
            Finding(
                "warning",
                "memory.additional_prompt is longer than "
                f"additional_prompt_max_chars ({cfg.memory.additional_prompt_max_chars})"
                " and will be cut",
            )
        )
    return findings


def _model_findings(cfg: Config) -> list[Finding]:
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
    for p in cfg.providers:
        if p.type != "offline" and not p.api_base and not api_key(p):
            found.append(
                Finding(
                    "warning",
                    f"provider {p.name!r} has no key: set its api_key or ${key_variable(p)}",
                )
            )
    return found


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
    findings = check(paths, explicit=args.config is not None, sessions_dir=args.sessions_dir)
    for f in findings:
        print(f)
    errors = sum(f.level == "error" for f in findings)
    warnings = sum(f.level == "warning" for f in findings)
    print(f"{errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0
