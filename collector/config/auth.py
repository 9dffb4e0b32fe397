"""Who may call: the bearer tokens of the receivers and the admin port, plain or named (a
named token is a person who labels review items)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, PlainValidator, SecretStr, ValidationError, field_validator

from collector.config.access import ReviewerName, Token, long_enough
from collector.config.sections import Strict


class NamedToken(Strict):
    token: Token = Field(description="The bearer token (16 characters or more).")
    name: ReviewerName = Field(
        description="Who holds it: the reviewer its console login and API calls label as."
    )


def token_entry(value: Any) -> SecretStr | NamedToken:
    """An auth.tokens entry: a plain token, or {token, name}."""
    if isinstance(value, SecretStr | NamedToken):
        return value
    if isinstance(value, dict):
        try:
            return NamedToken.model_validate(value)
        except ValidationError as exc:
            said = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
            raise ValueError("; ".join(said)) from None
    if not isinstance(value, str):
        raise ValueError("expected a token, or {token: ..., name: ...}")
    return long_enough(SecretStr(value))


class AuthConfig(Strict):
    tokens: list[Annotated[SecretStr | NamedToken, PlainValidator(token_entry)]] = Field(
        default_factory=list,
        description="Bearer tokens (16 characters or more) accepted by the receivers and the"
        " admin port, each a plain token or {token, name} for a person who labels review"
        " items; empty means no authentication.",
    )

    @property
    def secrets(self) -> list[SecretStr]:
        """Every token, named or not."""
        return [t.token if isinstance(t, NamedToken) else t for t in self.tokens]

    @property
    def names(self) -> dict[str, str]:
        """Token -> its holder's name, for the named ones."""
        return {
            t.token.get_secret_value(): t.name for t in self.tokens if isinstance(t, NamedToken)
        }

    @field_validator("tokens", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        return value
