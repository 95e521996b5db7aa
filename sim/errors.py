"""User-facing errors: one clear line naming the field and what is allowed."""


class ConfigError(ValueError):
    """A scenario, CLI argument, CSV or DSN the user gave is not acceptable."""


def expect_flag(name: str, value, *, none_ok: bool = False) -> None:
    """ConfigError naming `name` unless `value` is True or False (or None, when `none_ok`)."""
    if not (isinstance(value, bool) or (none_ok and value is None)):
        allowed = "True, False or None" if none_ok else "True or False"
        raise ConfigError(f"{name}: expected {allowed}, got {type(value).__name__} {value!r:.60}")


def expect_text(name: str, value, *, none_ok: bool = False) -> None:
    """ConfigError naming `name` unless `value` is a string (or None, when `none_ok`)."""
    if not (isinstance(value, str) or (none_ok and value is None)):
        raise ConfigError(f"{name}: expected a string, got {type(value).__name__} {value!r:.60}")
