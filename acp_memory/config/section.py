"""The one base of the config file's sections, and a key's word that YAML reads as false."""

from __future__ import annotations

from pydantic import BaseModel, BeforeValidator, ConfigDict


def false_means(word: str) -> BeforeValidator:
    # YAML 1.1 reads a bare `off` (and `no`) as false: for a key whose values include such a
    # word, that is what the user wrote.
    return BeforeValidator(lambda value: word if value is False else value)


class Section(BaseModel):
    # Unknown keys are kept (not rejected) so that `doctor` can report them as warnings.
    model_config = ConfigDict(extra="allow", validate_default=True)
