"""Pure model: acceptance, step time, speed-up. numpy and pydantic only."""
