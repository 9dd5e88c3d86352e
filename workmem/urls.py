"""Connection URLs: splitting and masking secrets for display."""

from __future__ import annotations

import contextlib
import re

__all__ = ["SECRET_QUERY_KEYS", "mask_exception", "mask_secrets", "mask_url", "scheme_of"]

SECRET_QUERY_KEYS = frozenset({"password", "pass", "pwd", "token", "authtoken", "auth_token", "secret", "apikey"})
MASK = "***"


def scheme_of(url: str) -> str:
    """The lower-cased scheme of ``url`` (``"file"`` for a bare path or ``:memory:``)."""
    if url == ":memory:" or ("://" not in url and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", url)):
        return "file"
    return url.split(":", 1)[0].lower()


_USERINFO_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:)(?P<secret>[^/?#]*)(?=@)")
_SECRET_PARAM = re.compile(
    r"(?P<head>[?&;](?:" + "|".join(sorted(SECRET_QUERY_KEYS)) + r")=)(?P<secret>[^&;#]*)", re.IGNORECASE
)


def mask_url(url: str) -> str:
    """``url`` with any password and secret query parameter replaced by ``***``; the rest is left as written."""
    masked = _USERINFO_PASSWORD.sub(lambda m: m["head"] + MASK, url, count=1)
    return _SECRET_PARAM.sub(lambda m: m["head"] + MASK, masked)


def mask_secrets(text: str, *secrets: str | None) -> str:
    """``text`` with each non-empty secret (and its URL-encoded form) replaced by ``***``."""
    from urllib.parse import quote

    for secret in secrets:
        if secret:
            for form in {secret, quote(secret, safe=""), quote(secret)}:
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
