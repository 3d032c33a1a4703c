"""Pure policy: the decide() entry point and one module per rule it applies (docs/decision-core.md)."""
