"""Connection URLs: splitting and masking secrets for display."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["SECRET_QUERY_KEYS", "mask_secrets", "mask_url", "scheme_of"]

SECRET_QUERY_KEYS = frozenset({"password", "pass", "pwd", "token", "authtoken", "auth_token", "secret", "apikey"})
MASK = "***"


def scheme_of(url: str) -> str:
    """The lower-cased scheme of ``url`` (``"file"`` for a bare path or ``:memory:``)."""
    if url == ":memory:" or ("://" not in url and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", url)):
        return "file"
    return url.split(":", 1)[0].lower()


def mask_url(url: str) -> str:
    """``url`` with any password and secret query parameter replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{hostinfo}" if sep else f"{userinfo}@{hostinfo}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if k.lower() in SECRET_QUERY_KEYS else v) for k, v in pairs], safe="*")
    return urlunsplit(SplitResult(parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_secrets(text: str, *secrets: str | None) -> str:
    """``text`` with each non-empty secret (and its URL-encoded form) replaced by ``***``."""
    from urllib.parse import quote

    for secret in secrets:
        if secret:
            for form in {secret, quote(secret, safe=""), quote(secret)}:
                text = text.replace(form, MASK)
    return text
