"""The libSQL adapter's settings: its URLs (local files, ``:memory:``, remote servers) and options.

:func:`parse_libsql_url` turns a URL into what the driver opens; :func:`_file_query` reads a
``file:`` URL's ``mode=ro`` and ``synchronous``; :func:`_unopenable` says why a local path cannot
be a database before SQLite touches it. See :mod:`.storage` for what each option means.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from workmem.errors import ValidationError
from workmem.kit import mask_url, query_pairs, scheme_of, split_userinfo

__all__ = ["parse_libsql_url"]

_REMOTE_SCHEMES = {
    "libsql": "libsql",
    "libsql+https": "https",
    "libsql+http": "http",
    "libsql+wss": "https",
    "libsql+ws": "http",
}
_OPTIONS = frozenset({"auth_token", "busy_timeout", "pool_size", "create", "synchronous", "engine"})
_SYNCHRONOUS = ("full", "normal")
"""The ``PRAGMA synchronous`` levels a local database takes, safest first."""
_FILE_PARAMS = frozenset({"mode", "synchronous", "engine"})
_ENGINES = ("apsw", "libsql")
"""The SQLite engines a local database opens with (see :mod:`.port`), the default first."""
_REMOTE_DURABILITY = (
    "synchronous sets the durability of a local database file or :memory:; "
    "a remote libSQL server keeps its own and takes no synchronous"
)
_URL_PARAMS = frozenset({"authToken", "tls"})


def parse_libsql_url(url: str) -> tuple[str, str | None]:
    """``(database, auth_token)`` for the driver: a path, ``:memory:``, or a remote URL without its token."""
    if url in (":memory:", "file::memory:"):
        return ":memory:", None
    scheme = scheme_of(url)
    if scheme == "file" and not url.lower().startswith("file:"):
        return url, None  # a plain path, taken as written: no percent-decoding, '?' and '#' are part of the name
    if scheme == "file":
        path, _, query = url[5:].partition("?")
        if "#" in path:  # as @libsql/client: SQLite would drop it, not open it
            raise ValidationError(
                f"a file URL takes no #fragment ({url!r}); write a '#' in a file name as %23, or pass a plain path"
            )
        if query:
            raise ValidationError("file URLs take no query parameters; pass options to connect()")
        if path.startswith("//"):
            host, _, rest = path[2:].partition("/")
            if host not in ("", "localhost"):
                raise ValidationError(f"a file URL names a local path, not host {host!r}")
            path = "/" + rest
        if not path:
            raise ValidationError("the libSQL URL names no database file")
        return unquote(path), None
    if scheme not in _REMOTE_SCHEMES:
        raise ValidationError(f"not a libSQL URL scheme: {scheme!r}")
    info = split_userinfo(url)
    where, _, query = info.rest.partition("?")
    try:
        parts = urlsplit(info.head + where)
    except ValueError as exc:  # an unclosed IPv6 bracket, ...
        raise ValidationError(f"not a valid libSQL URL: {mask_url(url)} ({exc})") from None
    # as @libsql/client reads them: authToken (an '&' not followed by a parameter is the token's), tls=0/1
    params = {key: unquote(value) for key, value in query_pairs(query, _URL_PARAMS)}
    token = params.pop("authToken", None)
    tls = params.pop("tls", None)
    if "synchronous" in params:
        raise ValidationError(_REMOTE_DURABILITY)
    if params:
        raise ValidationError(f"unknown libSQL URL parameters: {', '.join(sorted(params))} (known: authToken, tls)")
    if info.user is not None:
        raise ValidationError(f"libSQL URLs take no user:password@, the token goes in ?authToken=: {mask_url(url)}")
    if not parts.hostname:
        raise ValidationError("a remote libSQL URL needs a host")
    http = _REMOTE_SCHEMES[scheme]
    if tls not in (None, "0", "1"):
        raise ValidationError(f"the libSQL URL parameter tls takes 0 or 1, not {tls!r}")
    if tls == "0" and scheme == "libsql":
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is None:
            raise ValidationError('a "libsql:" URL with ?tls=0 must name its port (libsql://127.0.0.1:8080?tls=0)')
        http = "http"
    elif tls is not None and scheme != "libsql" and (tls == "1") != (http == "https"):
        raise ValidationError(f"a {scheme}: URL cannot opt {'into' if tls == '1' else 'out of'} TLS with ?tls={tls}")
    return urlunsplit((http, parts.netloc, parts.path, "", "")), token


def _unopenable(database: str, read_only: bool = False) -> str | None:
    """Why the local file ``database`` cannot be a database (SQLite says only "error 14"), if the path tells."""
    try:
        return _path_problem(database, read_only)
    except OSError as exc:  # a name too long, a loop of links, ...
        return f"{database} cannot be looked at: {exc.strerror or exc}"


def _path_problem(database: str, read_only: bool) -> str | None:
    path = Path(database)
    if read_only and not path.exists():
        return f"{database} does not exist (mode=ro opens an existing database file, it creates nothing)"
    if path.is_dir():
        return f"{database} is a directory, not a database file"
    if path.exists() and not path.is_file():  # SQLite would write a journal beside its target (/dev/null-journal)
        return f"{database} is {_file_kind(path)}, not a regular file: a database is a file (or a new one)"
    folder = path.parent
    for ancestor in (folder, *folder.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                return f"{ancestor} is not a folder"
            break
    else:  # pragma: no cover - the root always exists
        return None
    if not folder.exists():
        if database.startswith("~"):  # as SQLite (and Python's sqlite3) read it: a folder named '~'
            return f"folder {folder} does not exist: '~' is not expanded; pass os.path.expanduser({database!r})"
        return f"folder {folder} does not exist (workmem creates the file, not its folder)"
    if path.exists() and not os.access(path, os.R_OK):
        return f"{database} is not readable by this process"
    if not path.exists() and not os.access(folder, os.W_OK | os.X_OK):
        return f"folder {folder} does not let this process create {path.name}"
    return None


def _file_kind(path: Path) -> str:
    mode = path.stat().st_mode  # of what a link points to
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((kind for test, kind in kinds if test(mode)), "another kind of file")


def _file_query(url: str) -> tuple[str, bool, dict[str, str]]:
    """``(url without its query, read_only, options)``: a file URL takes ``mode=ro``, ``synchronous`` and ``engine``."""
    if not url.lower().startswith("file:") or "?" not in url or url.startswith("file::memory:"):
        return url, False, {}  # a plain path has no query: its '?' is part of the name
    where, _, query = url.partition("?")
    params: dict[str, str] = {}
    for key, value in query_pairs(query):
        if key not in _FILE_PARAMS or key in params:
            params = {}  # refused below
            break
        params[key] = unquote(value)
    if not params or params.get("mode", "ro") != "ro":
        raise ValidationError(
            "a file URL takes the query parameters mode=ro (open read-only, create nothing), "
            "synchronous=full|normal (durability) and engine=apsw|libsql (the SQLite engine), each once; "
            "pass other options to connect()"
        )
    read_only = params.pop("mode", None) is not None
    return where, read_only, params


def _synchronous_level(value: object) -> str:
    """The ``synchronous`` option lower-cased, if one of :data:`_SYNCHRONOUS` (any case), else ValidationError."""
    if isinstance(value, str) and value.lower() in _SYNCHRONOUS:
        return value.lower()
    shown = repr(value) if isinstance(value, str) else f"a {type(value).__name__}"
    raise ValidationError(f"synchronous must be 'full' or 'normal' (in any case), not {shown}")


def _engine_name(value: object) -> str:
    """The ``engine`` option lower-cased, if one of :data:`_ENGINES` (any case), else ValidationError."""
    if isinstance(value, str) and value.lower() in _ENGINES:
        return value.lower()
    shown = repr(value) if isinstance(value, str) else f"a {type(value).__name__}"
    raise ValidationError(f"engine must be 'apsw' or 'libsql' (in any case), not {shown}")
