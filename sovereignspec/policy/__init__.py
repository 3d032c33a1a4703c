"""Pure policy: sovereignty, conditions, placement and the decide() entry point."""
