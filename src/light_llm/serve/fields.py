"""What every request body of the explorer's API shares: unknown fields are refused (a typo is
a 422 naming it, not a silently ignored option), a value of another JSON type is refused
rather than converted ("1.0" is not a temperature, true is not a top-k), and a text is at
most :data:`MAX_PROMPT_CHARACTERS` long."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MAX_PROMPT_CHARACTERS = 100_000


class Body(BaseModel):
    # strict: "1.0" is not a number, true is not a count (JSON's integers still are floats)
    model_config = ConfigDict(extra="forbid", strict=True)


Prompt = Annotated[str, Field(max_length=MAX_PROMPT_CHARACTERS)]
