"""Base model for every external shape: frozen, camelCase on the wire, snake_case in Python."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


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
