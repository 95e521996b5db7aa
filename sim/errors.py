"""User-facing errors: one clear line naming the field and what is allowed."""


class ConfigError(ValueError):
    """A scenario, CLI argument, CSV or DSN the user gave is not acceptable."""
