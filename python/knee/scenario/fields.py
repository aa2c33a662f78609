"""What every scenario table shares: the base model (unknown keys refused) and the field types typed by
users (durations like "10s", counts, rates)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from knee.errors import UserError
from knee.scenario.units import parse_duration


def seconds(value: Any) -> Any:
    """A duration as typed ("10s", 2, "500ms") → seconds; anything else is left to the field's type."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            return parse_duration(value, "value")
        except UserError as exc:
            raise ValueError("must be a duration like 10s, 2m or 500ms") from exc
    return value


Duration = Annotated[float, BeforeValidator(seconds), Field(ge=0)]
PositiveInt = Annotated[int, Field(ge=1)]
PositiveRate = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Table(BaseModel):
    """A table of a scenario file: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
