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

import re
from collections.abc import Callable, Collection
from typing import NamedTuple
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = [
    "SECRET_QUERY_KEYS",
    "SHORT_SECRET",
    "UserInfo",
    "encode_userinfo",
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


SHORT_SECRET = 8
"""Secrets shorter than this are masked in free text only where they stand as a whole token (:func:`mask_secrets`)."""


def _token_pattern(form: str) -> str:
    """``form`` where it stands as a whole token: not continuing a word or a dotted/hyphenated run of words.

    ``tok`` matches in ``token=tok&`` and ``"tok".``, not in ``token`` or
    ``tok.example``; ``1`` matches in ``password=1``, not in ``127.0.0.1``
    or ``111``. After a percent-encoded character (``%3Atok``) a word
    character does not continue the token: the encoded one ends it.
    """
    left = r"(?:(?<=%[0-9A-Fa-f]{2})|(?<!\w)(?<!\w[.-]))" if re.match(r"\w", form[0]) else ""
    right = r"(?!\w)(?![.-]\w)" if re.match(r"\w", form[-1]) else ""
    return f"{left}{re.escape(form)}{right}"


def mask_secrets(text: str, *secrets: str | None) -> str:
    """``text`` with each non-empty secret (and its URL-encoded forms) replaced by ``***``, in one pass.

    The rule for free text (a driver's message, which may echo a secret
    anywhere): a secret of :data:`SHORT_SECRET` characters or more is masked
    wherever it appears, since unrelated text does not contain it by chance;
    a shorter one only where it stands as a whole token (see
    :func:`_token_pattern`), so the password ``1`` leaves ``127.0.0.1`` and the
    token ``tok`` leaves ``token`` as they are, while ``password=1``, ``:tok@``
    or ``"tok"`` are masked. A URL is masked where each secret stands in it
    by :func:`mask_url`, not by this.
    """
    forms = {
        form
        for secret in secrets
        if secret
        for form in (secret, quote(secret, safe=""), quote(secret), quote_plus(secret))
    }
    if not forms:
        return text
    patterns = [
        re.escape(form) if len(form) >= SHORT_SECRET else _token_pattern(form)
        for form in sorted(forms, key=len, reverse=True)
    ]
    return re.sub("|".join(patterns), MASK, text)
