"""Short secrets (``?token=tok``, the password ``1``) are masked where they stand, not wherever their characters appear.

A URL is masked by its structure: the user info's password and the values of
secret query parameters (``token``, ``authToken``, ``password``, ...) become
``***`` and nothing else changes. A driver's free text may echo a secret
anywhere, so it is masked by a rule (``workmem.urls.mask_secrets``): a secret
of ``SHORT_SECRET`` (8) characters or more wherever it appears; a shorter one
where it stands as a whole token -- not continuing a word, nor a dotted or
hyphenated run of words (a host name, an IP address, a date). Both are checked
as rules over generated secrets, URLs and texts, and through ``connect()`` on
the failures the defect was found with.
"""

from __future__ import annotations

import secrets
import string
from urllib.parse import quote

import pytest
from backends import shared_bridge
from hypothesis import example, given
from hypothesis import strategies as st
from test_reliability_secrets import closed_port, failure_of

from workmem.urls import SECRET_QUERY_KEYS, SHORT_SECRET, mask_secrets, mask_url

# -- strategies -------------------------------------------------------------------------

WORD = string.ascii_letters + string.digits + "_"
SPECIAL = "!#$&()+,/:;=?@[]-.~% '\"<>"  # no "*": a secret "***" cannot be told from its mask


def secrets_(*, min_size: int = 1, max_size: int = SHORT_SECRET - 1) -> st.SearchStrategy[str]:
    """Secrets that begin and end with a word character, with anything in between."""
    edge = st.sampled_from(WORD)
    return st.builds(
        lambda first, middle, last, size: first + middle[: size - 2] + last if size > 1 else first,
        edge,
        st.text(WORD + SPECIAL, max_size=max(0, max_size - 2)),
        edge,
        st.integers(min_size, max_size),
    )


def any_secret() -> st.SearchStrategy[str]:
    """Any secret of 1 to 12 characters: a user may pick ``!`` or ``p@:/`` too."""
    return st.text(WORD + SPECIAL, min_size=1, max_size=12)


_HOSTS = st.one_of(
    st.sampled_from(["127.0.0.1", "10.1.2.3", "db.example.com", "localhost", "[::1]", "host-1.internal"]),
    st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z0-9]{1,6}){0,2}", fullmatch=True).filter(lambda h: not h.endswith("-")),
)
_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
_VALUES = st.from_regex(r"[A-Za-z0-9._-]{0,8}", fullmatch=True)


# -- URLs: masked where the secret stands -------------------------------------------------


@st.composite
def urls_with_a_secret(draw: st.DrawFn) -> tuple[str, str, str]:
    """``(url, the url as mask_url must show it, secret)``: the secret as the password or a secret query value."""
    secret = draw(any_secret())
    scheme = draw(st.sampled_from(["postgresql", "mongodb", "oracle", "libsql+http", "upstash+https", "redis"]))
    host = draw(_HOSTS)
    port = draw(st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}")))
    path = draw(st.one_of(st.just(""), _NAMES.map(lambda name: f"/{name}")))
    others = draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=3, unique_by=lambda kv: kv[0]))
    others = [(k, v) for k, v in others if k not in SECRET_QUERY_KEYS]
    where = draw(st.sampled_from(["password", "token", "authToken", "password=", "sslpassword"]))
    encoded = quote(secret, safe="")
    user = draw(_NAMES)
    query = [f"{k}={v}" for k, v in others]
    if where == "password":
        userinfo, shown_userinfo = f"{user}:{encoded}@", f"{user}:***@"
        shown_query = query
    else:
        key = where.rstrip("=")
        position = draw(st.integers(0, len(query)))
        userinfo = shown_userinfo = draw(st.sampled_from(["", f"{user}@"]))
        shown_query = [*query[:position], f"{key}=***", *query[position:]]
        query = [*query[:position], f"{key}={encoded}", *query[position:]]
    tail = f"{host}{port}{path}"

    def url(info: str, pairs: list[str]) -> str:
        return f"{scheme}://{info}{tail}{'?' if pairs else ''}{'&'.join(pairs)}"

    return url(userinfo, query), url(shown_userinfo, shown_query), secret


@given(urls_with_a_secret())
@example(("libsql+http://127.0.0.1:8080?authToken=tok", "libsql+http://127.0.0.1:8080?authToken=***", "tok"))
@example(("postgresql://u:1@127.0.0.1:5432/db", "postgresql://u:***@127.0.0.1:5432/db", "1"))
@example(("upstash+https://h.example?token=tok&retries=0", "upstash+https://h.example?token=***&retries=0", "tok"))
def test_a_url_is_masked_where_its_secret_stands_and_nowhere_else(case: tuple[str, str, str]) -> None:
    url, shown, _ = case
    assert mask_url(url) == shown


# -- free text: the rule ------------------------------------------------------------------

SEPARATORS = [" ", "=", ":", "@", "/", "?", "&", '"', "'", ", ", "(", ")", "\n", "[", "]", "; "]
"""Characters that end a token (none is a word character, ``.``, ``-`` or ``%``)."""


_DRIVER_TEXT = ["127.0.0.1", "token", "authToken", "Connection refused", "port 5432", "[Errno 111]", "2026-01-31"]


@st.composite
def texts_with_a_short_secret(draw: st.DrawFn) -> tuple[list[str], list[str], str]:
    """``(pieces, separators, secret)``: pieces are the secret itself, or words that only contain it inside them."""
    secret = draw(secrets_())
    word = st.text(WORD, min_size=1, max_size=6)
    inside = st.one_of(
        word.map(lambda w: secret + w),  # tok -> token
        word.map(lambda w: w + secret),  # 1 -> 11
        word.map(lambda w: f"{w}.{secret}"),  # 1 -> 127.0.0.1
        word.map(lambda w: f"{secret}.{w}"),  # tok -> tok.example.com
        word.map(lambda w: f"{w}-{secret}"),
        word.map(lambda w: f"{secret}-{w}"),
        st.sampled_from([text for text in _DRIVER_TEXT if secret not in text] or ["x"]),
    )
    pieces = draw(st.lists(st.one_of(st.just(secret), inside), min_size=1, max_size=8))
    separators = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(pieces) + 1, max_size=len(pieces) + 1))
    return pieces, separators, secret


def _join(pieces: list[str], separators: list[str]) -> str:
    return separators[0] + "".join(piece + separator for piece, separator in zip(pieces, separators[1:], strict=True))


@given(texts_with_a_short_secret())
@example((["127.0.0.1"], ['"', '"'], "1"))
@example((["token", "tok"], ["?", "=", "&"], "tok"))
@example((["tok"], ["", "."], "tok"))  # at the end of a sentence
def test_a_short_secret_is_masked_as_a_whole_token_and_text_around_it_is_unchanged(
    case: tuple[list[str], list[str], str],
) -> None:
    pieces, separators, secret = case
    text = _join(pieces, separators)
    expected = _join(["***" if piece == secret else piece for piece in pieces], separators)
    assert mask_secrets(text, secret) == expected


@given(any_secret(), st.text(WORD + SPECIAL, max_size=20), st.text(WORD + SPECIAL, max_size=20))
def test_a_secret_set_off_from_its_neighbours_never_shows(secret: str, before: str, after: str) -> None:
    """Echoed by a driver between delimiters (quoted, as ``key=value``, in a URL), a secret of any kind is masked."""
    for left, right in (('"', '"'), ("=", "&"), (":", "@"), (" ", ". "), ("'", "'")):
        masked = mask_secrets(f"{before}{left}{secret}{right}{after}", secret)
        assert f"{left}{secret}{right}" not in masked
        assert f"{left}{quote(secret, safe='')}{right}" not in mask_secrets(
            f"{before}{left}{quote(secret, safe='')}{right}{after}", secret
        )


@given(st.text(WORD + SPECIAL, min_size=SHORT_SECRET, max_size=30), st.text(max_size=20), st.text(max_size=20))
def test_a_long_secret_is_masked_wherever_it_appears(secret: str, before: str, after: str) -> None:
    assert secret not in mask_secrets(before + secret + after, secret)


# -- through connect(): the failures the defect was found with ----------------------------


def test_a_short_token_leaves_the_rest_of_the_message_alone() -> None:
    text = str(failure_of(f"libsql+http://127.0.0.1:{closed_port()}?authToken=tok"))
    assert "?authToken=***" in text and "***en" not in text and "Connection refused" in text, text


@pytest.mark.backend("upstash")
def test_a_short_wrong_upstash_token_leaves_the_servers_answer_alone() -> None:
    base = shared_bridge().url.replace("http://", "upstash+http://")
    text = str(failure_of(f"{base}?token=tok&retries=0"))
    assert "WRONGPASS" in text and "auth token" in text and "***en" not in text, text


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:1@127.0.0.1:{port}/postgres",
        "mongodb://u:1@127.0.0.1:{port}/db?serverSelectionTimeoutMS=300",
        "oracle://u:1@127.0.0.1:{port}/FREEPDB1",
    ],
)
def test_a_one_character_password_leaves_the_host_alone(url: str) -> None:
    error = failure_of(url.format(port=closed_port()), **({"connect_timeout": 2} if "mongodb" not in url else {}))
    text = str(error)
    assert "u:***@127.0.0.1" in text, text
    assert "***27" not in text and ".0.***" not in text and "Errno ***" not in text, text


@pytest.mark.backend("upstash")
def test_a_conformance_report_names_the_url_with_only_its_short_token_masked() -> None:
    """``workmem conformance URL`` reports the URL it ran against: ``?token=***&prefix=...``, not ``?***en=***``."""
    from servers import server_url
    from upstash_fixtures import delete_prefix, start_bridge, stop_bridge

    from workmem.conformance import run

    bridge = start_bridge(server_url("redis"), token="tok")
    prefix = f"wm_test_{secrets.token_hex(6)}:"
    try:
        port = bridge.url.rsplit(":", 1)[1]
        report = run(f"upstash+http://127.0.0.1:{port}?token=tok&prefix={prefix}", only=["timestamps"])
        assert report.url == f"upstash+http://127.0.0.1:{port}?token=***&prefix={prefix}"
    finally:
        delete_prefix(bridge, prefix)
        stop_bridge(bridge)
