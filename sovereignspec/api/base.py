"""Base model for every external shape: frozen, camelCase on the wire, snake_case in Python."""

from __future__ import annotations

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel

CUT = "…"


def bounded(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters (code points, as the API server counts maxLength), the cut
    marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - len(CUT)] + CUT


def cut_to(limit: int) -> BeforeValidator:
    """A before-validator that cuts a string to `limit` characters: use it with `Field(max_length=limit)`
    so that no text a tenant controls can make a record fail to validate, and the CRD publishes the
    same maxLength, e.g. `Annotated[str, cut_to(1024), Field(max_length=1024)]`."""

    def cut(value: object) -> object:
        return bounded(value, limit) if isinstance(value, str) else value

    return BeforeValidator(cut)


def cel_rules(*rules: tuple[str, str]) -> ConfigDict:
    """The model config of a CRD object validated by the API server: CEL rules, each (rule, message),
    published in the schema as `x-kubernetes-validations` (the API server refuses an object that breaks
    one; crdgen copies them). Merged with `Model`'s own config by pydantic."""
    return ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}
    )


class Model(BaseModel):
    """Frozen pydantic model with camelCase aliases; unknown keys are rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
    )

    def wire(self) -> dict[str, object]:
        """The JSON-ready dict with camelCase keys, as written to the API server or printed."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
