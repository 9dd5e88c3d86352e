"""Connection URLs: finding the user info whatever the password contains, and masking secrets for display.

A password in a URL should be percent-encoded, yet users paste raw ones
(``postgresql://u:Tr0ub#dor3@host/db`` works with libpq). :func:`split_userinfo`
finds where the user info really ends, the same way for every backend:

* no ``@`` at all, or the whole text after ``://`` reads as
  ``host[:port][,host[:port]...][/path][?key=value&...]`` with no ``@`` in the
  host or path: there is no user info (an ``@`` inside a query value such as
  ``?user=me@corp`` is left alone, as libpq leaves it);
* otherwise the user info ends at the first ``@`` whose remainder reads that
  way, so a password may contain ``#``, ``?``, ``/``, ``:`` or ``@``
  (``u:p@ss/w?rd#1@db.example.com:5432/app`` has the password ``p@ss/w?rd#1``);
* when no remainder reads that way, at the last ``@`` (so that masking still
  covers every character that could be the password).

Where libpq, pymongo or WHATWG URL parsers agree on a URL, this agrees with
them; where they would split a raw ``@`` or ``/`` in a password differently
(and then fail with a message quoting part of it), the adapters hand their
driver the URL rebuilt with the password percent-encoded
(:func:`encode_userinfo`), so the driver gets the password as written.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Collection
from typing import NamedTuple
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = [
    "SECRET_QUERY_KEYS",
    "UserInfo",
    "encode_userinfo",
    "mask_exception",
    "mask_secrets",
    "mask_url",
    "query_pairs",
    "scheme_of",
    "split_userinfo",
    "url_secrets",
]

SECRET_QUERY_KEYS = frozenset(
    {
        *("password", "pass", "pwd", "token", "authtoken", "auth_token", "secret", "apikey", "access_token"),
        "sslpassword",  # libpq: the passphrase of the client's SSL key
        "tlscertificatekeyfilepassword",  # MongoDB: the same
        "authmechanismproperties",  # MongoDB: may hold AWS_SESSION_TOKEN:<token>
        "wallet_password",  # python-oracledb
    }
)
"""Query parameters whose whole value is masked (compared lower-cased)."""
_SECRET_PROPERTY = re.compile(r"(?:^|,)[^:,]*(?:TOKEN|SECRET|PASSWORD)[^:,]*:([^,]*)", re.IGNORECASE)
"""Inside a MongoDB ``authMechanismProperties`` value: the value of a property such as ``AWS_SESSION_TOKEN``."""
MASK = "***"


def scheme_of(url: str) -> str:
    """The lower-cased scheme of ``url`` (``"file"`` for a bare path or ``:memory:``)."""
    if url == ":memory:" or ("://" not in url and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", url)):
        return "file"
    return url.split(":", 1)[0].lower()


_HEAD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_HOST = r"(?:\[[0-9A-Za-z:.%]*\]|[A-Za-z0-9._~%!$'()*+-]*)(?::[0-9]*)?"
_PAIR = r"[^=&#/@?]+=[^&#]*"
_AFTER_USERINFO = re.compile(rf"{_HOST}(?:,{_HOST})*(?:/[^?#@]*)?(?:\?(?:{_PAIR}(?:&{_PAIR})*)?)?")


class UserInfo(NamedTuple):
    """A URL cut at its user info: ``head + user[:password]@ + rest``, each part as written (still encoded)."""

    head: str
    """``scheme://``, or the whole text when it has no ``://``."""
    user: str | None
    """The user name as written, ``None`` without user info."""
    password: str | None
    """The password as written (``None``: none given; ``""``: ``user:@``)."""
    rest: str
    """Everything after the user info's ``@`` (host, port, path, query)."""


def split_userinfo(url: str) -> UserInfo:
    """``url`` cut at its user info, by the rule in this module's docstring."""
    match = _HEAD.match(url)
    if match is None:
        return UserInfo(url, None, None, "")
    head, body = url[: match.end()], url[match.end() :]
    ats = [i for i, char in enumerate(body) if char == "@"]
    if not ats or _AFTER_USERINFO.fullmatch(body):
        return UserInfo(head, None, None, body)
    end = next((i for i in ats if _AFTER_USERINFO.fullmatch(body, i + 1)), ats[-1])
    user, colon, password = body[:end].partition(":")
    return UserInfo(head, user, password if colon else None, body[end + 1 :])


def encode_userinfo(info: UserInfo, decode: Callable[[str], str] = unquote) -> str:
    """``user:password@`` of ``info`` percent-encoded (``""`` without user info), so any URL parser splits it right.

    ``decode`` is how the driver that will read the URL decodes them
    (``unquote``: libpq; ``unquote_plus``: pymongo, where ``+`` is a space).
    """
    if info.user is None:
        return ""
    userinfo = quote(decode(info.user), safe="")
    if info.password is not None:
        userinfo += ":" + quote(decode(info.password), safe="")
    return userinfo + "@"


def query_pairs(query: str, known: Collection[str] = ()) -> list[tuple[str, str]]:
    """``(key, raw value)`` pairs of a query string, values still percent-encoded.

    A piece without ``=`` (or, when ``known`` is given, an unknown key with an
    empty value, as base64 padding reads) that follows a secret key
    (:data:`SECRET_QUERY_KEYS`) belongs to that secret: ``token=a&b`` is the
    token ``a&b``, never a parameter named ``b`` that an error message would quote.
    """
    pairs: list[tuple[str, str]] = []
    for piece in query.split("&") if query else []:
        key, equals, value = piece.partition("=")
        absorbed = not equals or (bool(known) and not value and unquote_plus(key) not in known)
        if absorbed and pairs and pairs[-1][0].lower() in SECRET_QUERY_KEYS:
            pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]}&{piece}")
        elif piece:
            pairs.append((unquote_plus(key), value))
    return pairs


def url_secrets(url: str) -> list[str]:
    """Every secret in ``url``: its password and secret query values, as written and decoded both ways."""
    info = split_userinfo(url)
    raw = [info.password] if info.password else []
    for key, value in query_pairs(info.rest.partition("?")[2]):
        if key.lower() in SECRET_QUERY_KEYS:
            raw.append(value)
            if key.lower() == "authmechanismproperties":  # a driver may show the token alone
                raw += [match.group(1) for match in _SECRET_PROPERTY.finditer(unquote_plus(value))]
    found: list[str] = []
    for secret in raw:
        for form in (secret, unquote(secret), unquote_plus(secret)):
            if form and form not in found:
                found.append(form)
    return found


def _mask_query(query: str) -> str:
    pieces: list[str] = []
    for key, value in query_pairs(query):
        pieces.append(f"{quote_plus(key, safe='')}={MASK if key.lower() in SECRET_QUERY_KEYS else value}")
    return "&".join(pieces)


def mask_url(url: str) -> str:
    """``url`` with any password and secret query parameter replaced by ``***``; the rest is left as written."""
    info = split_userinfo(url)
    if info.head == url:
        return url
    rest = info.rest
    if "?" in rest:
        before, _, query = rest.partition("?")
        if any(key.lower() in SECRET_QUERY_KEYS for key, _ in query_pairs(query)):
            rest = f"{before}?{_mask_query(query)}"
    if info.user is None:
        return info.head + rest
    return f"{info.head}{info.user}{'' if info.password is None else ':' + MASK}@{rest}"


def mask_secrets(text: str, *secrets: str | None) -> str:
    """``text`` with each non-empty secret (and its URL-encoded forms) replaced by ``***``, longest first."""
    forms = {
        form
        for secret in secrets
        if secret
        for form in (secret, quote(secret, safe=""), quote(secret), quote_plus(secret))
    }
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, MASK)
    return text


def mask_exception(exc: BaseException, *secrets: str | None) -> bool:
    """Mask ``secrets`` in the string ``args`` of ``exc`` and of every exception it chains; ``True`` if now clean.

    A driver's exception that quotes a password or token (a server echoing the
    credentials, a parser quoting the URL) stays reachable as ``__cause__`` or
    ``__context__`` of the error raised for it; scrubbed in place, it can stay
    there for debugging.
    """
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop()
        if any(current is done for done in seen):
            continue
        seen.append(current)
        with contextlib.suppress(Exception):  # read-only args: judged by its text below
            current.args = tuple(mask_secrets(a, *secrets) if isinstance(a, str) else a for a in current.args)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
    return all(mask_secrets(text, *secrets) == text for e in seen for text in (str(e), repr(e)))
