"""Secrets are replaced by [REDACTED:<kind>] before any write, and the result says so."""

from __future__ import annotations

import random
import re
import re._parser as sre_parse
import signal
import sys
import time
from array import array
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_memory.memory.redact import PASSES, SHORTEST_CHANGED, redact, redact_text
from acp_memory.memory.secrets import names, shapes
from acp_memory.memory.secrets.names import (
    _CASE_FIXES,
    _FOR_WORDS,
    _NAME_TAILS,
    _PASSWORD_NAMES,
    _SECRETISH_NAMES,
    _TOKEN_NAMES,
    NAME_PASSES,
    _folded,
    _Rule,
)
from acp_memory.memory.secrets.shapes import SHAPE_PASSES, _Shape
from acp_memory.memory.secrets.values import looks_random, plausible_password, plausible_token
from acp_memory.memory.store import MemoryStore

GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


ONE_OF_EACH_KIND = [
    ("key sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1w", "openai_key"),
    ("ANTHROPIC_API_KEY=sk-ant-api03-" + "x1Y2z3W4v5U6t7S8r9Q0p1O2n3", "anthropic_key"),
    ("AWS key AKIAIOSFODNN7EXAMPLE here", "aws_access_key"),
    ("google AIzaSyA-1234567890abcdefghijklmnopqrstu", "google_api_key"),
    ("DefaultEndpointsProtocol=https;AccountName=x;AccountKey="
     + "a" * 20 + "B1" * 20 + "==", "azure_key"),
    (f"token {GH}", "github_token"),
    ("glpat-" + "AbCdEf1234567890XyZw", "gitlab_token"),
    ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp", "slack_token"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "jwt"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "private_key"),
    ("db postgres://admin:S3cretPass@db.local:5432/app", "url_password"),
    ("password: hunter22", "password"),
    ("DB_PASSWORD=correct-horse", "password"),
    ("пароль: qwerty123", "password"),
    ("auth_token = 'abc123def456ghi'", "token"),
    ("client_secret: 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "secret"),
]


@pytest.mark.parametrize(("text", "kind"), ONE_OF_EACH_KIND)
def test_each_kind_of_secret_is_redacted(text: str, kind: str) -> None:
    result = redact(text)
    assert f"[REDACTED:{kind}]" in result.text
    assert result.removed[kind] >= 1


def test_url_password_keeps_user_and_host() -> None:
    text = redact("postgres://admin:S3cretPass@db.local/app").text
    assert text == "postgres://admin:[REDACTED:url_password]@db.local/app"


@pytest.mark.parametrize(
    "introduced", [" with secret ", " / ", " | ", ", the secret being "]
)
def test_an_aws_key_pair_loses_both_halves_however_the_secret_is_introduced(
    introduced: str,
) -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    text = redact(f"the aws key AKIAIOSFODNN7EXAMPLE{introduced}{secret} is for staging").text
    assert text == (
        f"the aws key [REDACTED:aws_access_key]{introduced}[REDACTED:aws_secret_key] is for "
        "staging"
    )


def test_a_commit_id_after_an_aws_key_id_is_no_secret() -> None:
    text = redact("AKIAIOSFODNN7EXAMPLE rotated in 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39").text
    assert text == "[REDACTED:aws_access_key] rotated in 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39"


@pytest.mark.parametrize(
    "harmless",
    [
        "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed the bug",
        "request id 123e4567-e89b-12d3-a456-426614174000",
        "max_tokens: 4096",
        "tokenizer = AutoTokenizer.from_pretrained('bert')",
        "password: str",
        "token = get_token()",
        "The password policy says twelve characters at least.",
        "private_key_path: /etc/ssl/private/server.pem",
        "api_key: ${OPENAI_API_KEY}",
        "Кошки любят спать на солнце.",
    ],
)
def test_harmless_text_is_left_alone(harmless: str) -> None:
    result = redact(harmless)
    assert result.text == harmless and result.count == 0


def test_save_redacts_before_writing_and_says_what_was_removed(store: MemoryStore) -> None:
    result = store.save("Creds", f"GITHUB_TOKEN={GH}\npassword: hunter22\n", "global")
    on_disk = (store.roots.global_root / "creds.md").read_text()
    assert GH not in on_disk and "hunter22" not in on_disk
    assert "[REDACTED:github_token]" in on_disk and "[REDACTED:password]" in on_disk
    assert result.redaction.removed == {"github_token": 1, "password": 1}
    assert "github_token" in result.redaction.summary()


def test_secret_in_a_title_never_reaches_the_file_name(store: MemoryStore) -> None:
    result = store.save(f"token {GH}", "body", "global")
    assert GH.lower() not in result.path.lower()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('password = "my secret pass"', 'password = "[REDACTED:password]"'),
        ("password: correct horse battery staple", "password: [REDACTED:password]"),
        ("DB_PASSWORD='Tr0ub4dor&3 x'", "DB_PASSWORD='[REDACTED:password]'"),
        ("password: str | None = None", "password: str | None = None"),
    ],
)
def test_passwords_with_spaces_are_redacted_whole(line: str, expected: str) -> None:
    assert redact(line).text == expected


def test_a_random_token_with_a_dot_is_not_mistaken_for_code() -> None:
    line = '  "access_token": "DKwpMeZ2oDuSksE_Q4K5K5cbl.IK3lUECZK3SRh5",'
    assert redact(line).text == '  "access_token": "[REDACTED:token]",'
    assert redact("token = self.config.access_token").text == "token = self.config.access_token"


@pytest.mark.parametrize(
    "line",
    [
        # The spaces before a value already redacted are part of a (harmless) password value,
        # so what follows on the line is not looked at again.
        "password:  [REDACTED:password] and pass: hunter22",
        "password: Bearer  [REDACTED:password] pass: hunter22",
        "key = [REDACTED:secret]",
    ],
)
def test_redacting_twice_changes_nothing(line: str) -> None:
    assert redact(line).text == line


def test_a_jwt_inside_a_longer_run_keeps_the_run_before_it() -> None:
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"
    assert redact(f"cookie=x-{jwt};").text == "cookie=x-[REDACTED:jwt];"
    assert redact(f"AccountKey={'aB1' * 15}==;").text == "AccountKey=[REDACTED:azure_key];"


def test_names_are_folded_to_lower_case_exactly_as_ignorecase_would() -> None:
    # The names are matched in a lower-cased copy of the text; every character that re's
    # IGNORECASE takes for a letter of a name must become that letter there.
    letters = set("".join((*_PASSWORD_NAMES, *_TOKEN_NAMES, *_SECRETISH_NAMES, *_NAME_TAILS,
                           *_FOR_WORDS)))
    codec = f"utf-32-{sys.byteorder[0]}e"
    every_char = array("I", range(sys.maxunicode + 1)).tobytes().decode(codec, "surrogatepass")
    foldable = re.findall(f"[{''.join(sorted(letters))}]", every_char, re.IGNORECASE)
    for ch in foldable:
        for letter in letters:
            if re.fullmatch(letter, ch, re.IGNORECASE):
                assert _folded(ch) == letter, f"{ch!r} matches {letter!r}, folds to {_folded(ch)!r}"
    # Lower case is one character for one, but for İ (folded first): positions in the
    # lower-cased copy are positions in the text.
    assert len(every_char.replace("\u0130", "").lower()) == len(every_char) - 1
    assert len(_folded("\u0130")) == 1


def _prose(size: int) -> str:
    rng = random.Random(3)
    words = ("the notes say we moved the nightly backup to friday because the old server was "
             "slow and the team wanted a quieter window for the migration of customer reports "
             "after lunch while everyone reviewed what changed in the release").split()
    parts: list[str] = []
    for _ in range(400):
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(6, 18))).capitalize()
        parts.append(sentence + (".\n\n" if rng.random() < 0.2 else ". "))
    page = "".join(parts)
    return (page * (size // len(page) + 1))[:size]


# Shapes that made a pattern backtrack or rescan: identifier runs, runs of separators and
# quotes, base64-ish and dotted runs, the start of each recognisable token, and values (after
# a head) that are one long run of dotted code or of spaces.
ADVERSARIAL: list[str | tuple[str, str]] = [
    "key.", "aA1-", "a", "aA1", "=", ":", "'", '"', "`", " ", "A+/=", "a.b", "key=",
    "password for ", "eyJ-", "eyJa.", "://a:", "-----BEGIN ", "1Q~", "AKIA", "?sig=", "ghp_",
    ("password: x.", "a"), ("password: Bearer", " "),
]


class _TooSlow(Exception):
    pass


def test_redaction_stays_linear_on_adversarial_shapes() -> None:
    size = 1 << 20
    # CPU time of this process, not the wall clock: other work on the machine does not count.
    clock = time.process_time
    start = clock()
    # Every pass, as redact runs them on a text that holds something to redact: redact itself
    # returns prose at once.
    _every_pass(_prose(size))
    budget = 10 * (clock() - start)

    def too_slow(signum: int, frame: object) -> None:
        raise _TooSlow

    # The budget is enforced by a CPU-time alarm rather than checked afterwards, so a
    # super-linear pattern fails the test at once instead of running for hours (re checks for
    # signals while it matches).
    previous = signal.signal(signal.SIGPROF, too_slow)
    slow: list[str] = []
    try:
        for shape in ADVERSARIAL:
            head, unit = shape if isinstance(shape, tuple) else ("", shape)
            text = (head + unit * (size // len(unit) + 1))[:size]
            for _attempt in range(2):  # a second try forgives one unlucky pause
                signal.setitimer(signal.ITIMER_PROF, budget)
                try:
                    redact(text)
                    break
                except _TooSlow:
                    continue
                finally:
                    signal.setitimer(signal.ITIMER_PROF, 0)
            else:
                slow.append(repr(shape))
    finally:
        signal.signal(signal.SIGPROF, previous)
    assert not slow, f"1 MB of these took over 10x the time of 1 MB of prose: {slow}"


def _every_pass(text: str) -> tuple[str, Counter[str]]:
    """What redact did before it skipped anything: every pass, in turn (the reference)."""
    removed: Counter[str] = Counter()
    for step in PASSES:
        text = step.apply(text, removed)
    return text, removed


def test_redact_runs_the_shapes_then_the_names() -> None:
    # redact checks each group at once and skips it whole: every pass must be in one.
    assert PASSES == [*SHAPE_PASSES, *NAME_PASSES]


def _mixed_case(word: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(word, upper, strict=True)))


_EVERY_NAME = sorted({name for rule in NAME_PASSES for name in rule.names})
_EVERY_MARKER = sorted({marker for shape in SHAPE_PASSES for marker in shape.markers})
_PIECES = st.one_of(
    st.sampled_from([text for text, _kind in ONE_OF_EACH_KIND]),
    st.sampled_from(_EVERY_MARKER),
    st.sampled_from(_EVERY_NAME).flatmap(_mixed_case),
    st.sampled_from(sorted(_CASE_FIXES)),
    st.sampled_from(["=", ":", ": ", " = ", "=>", ":=", "'", '"', "\n", " ", "_", " for the db: ",
                     "hunter22", "9f8e7d6c5b4a39281706f5e4d3c2b1a0", "abc123def456ghi",
                     "[REDACTED:secret]", "IOSFODNN7EXAMPLE", "-" * 5, "://a:b@"]),
    st.text(max_size=6),
)


@settings(max_examples=400, deadline=None, database=None)
@given(pieces=st.lists(_PIECES, max_size=10))
def test_redact_gives_what_every_pass_in_turn_gives(pieces: list[str]) -> None:
    text = "".join(pieces)
    result = redact(text)
    assert (result.text, result.removed) == _every_pass(text)
    assert redact_text(text) == result.text


@pytest.mark.parametrize("marker", _EVERY_MARKER)
def test_the_check_for_shapes_sees_every_marker(marker: str) -> None:
    assert shapes.could_change(f"see {marker} here")


@pytest.mark.parametrize("name", _EVERY_NAME)
def test_the_check_for_names_sees_every_name_in_any_case(name: str) -> None:
    for spelled in (name, name.upper(), name.title()):
        assert names.could_change(f"my {spelled}=")
        assert names.could_change(f"{spelled} for it: x")
    # Folded as the rules fold it: a long s is an s, a dotless i an i.
    odd = name.replace("s", "\u017f").replace("i", "\u0131")
    assert names.could_change(f"{odd}: x")
    assert not names.could_change(f"{name} and nothing assigned")


# The shortest value each rule's check accepts: shorter ones are never redacted.
_SHORTEST_VALUE = {plausible_password: 3, plausible_token: 8, looks_random: 16}


@settings(max_examples=300, deadline=None, database=None)
@given(value=st.text(st.characters(codec="utf-8"), max_size=15))
def test_no_rule_accepts_a_value_shorter_than_its_bound(value: str) -> None:
    for plausible, shortest in _SHORTEST_VALUE.items():
        if len(value) < shortest:
            assert not plausible(value), (plausible.__name__, value)
    for strong in ("Xy7#kP2$qR9!mZ4&", "aB3dE6gH9jK2mN5p"):
        for plausible, shortest in _SHORTEST_VALUE.items():
            assert not plausible(strong[: shortest - 1])


def _shortest_match(pattern: re.Pattern[str]) -> int:
    return int(sre_parse.parse(pattern.pattern, pattern.flags).getwidth()[0])


def test_no_pass_changes_a_text_shorter_than_the_bound() -> None:
    # What each pass can change at the least, from its own patterns: a shape changes only what
    # its pattern matches; a rule needs its name and separator (`before`) and then a value its
    # check accepts. A pass added with a shorter reach lowers the bound, and this test fails.
    reach = {}
    for step in PASSES:
        if isinstance(step, _Shape):
            reach[step] = _shortest_match(step.pattern)
        else:
            assert isinstance(step, _Rule), f"teach this test the reach of {step!r}"
            reach[step] = _shortest_match(step.before) + _SHORTEST_VALUE[step.plausible]
    assert SHORTEST_CHANGED <= min(reach.values())
    assert redact("://a:b@").text == "://a:[REDACTED:url_password]@"
    assert redact("pwd=abc").text == "pwd=[REDACTED:password]"

