"""Options of ``connect()`` out of range are refused with ValidationError before anything is opened, on every backend.

A timeout of NaN never ends a wait (every comparison with it is false), an infinite one overflows
the clock (``OverflowError`` from a pool or HTTP wait), ``True`` is not a number of seconds and a
negative retry count is no count: each is the caller's input, and none may surface later as a
retryable ``BackendUnavailableError`` or a bare Python error.
"""

from __future__ import annotations

import pytest
from backends import backend_url

import workmem
from workmem import ValidationError
from workmem.urls import scheme_of

__all__ = ["backend_url"]  # the fixture, run once per backend

NAN, INF = float("nan"), float("inf")
_BAD_OPTIONS: dict[str, list[dict[str, object]]] = {
    "file": [{"busy_timeout": NAN}, {"busy_timeout": INF}, {"busy_timeout": True}, {"busy_timeout": -1}],
    "postgresql": [{"timeout": INF}, {"timeout": NAN}, {"connect_timeout": INF}, {"connect_timeout": True}],
    "upstash+http": [
        {"timeout": NAN},
        {"timeout": INF},
        {"timeout": 0},
        {"timeout": True},
        {"retries": -1},
        {"retries": True},
        {"retries": 1.5},
        {"retry_interval": NAN},
        {"retry_interval": -1},
        {"prefix": 5},
        {"listing": "full"},
        {"listing": None},
    ],
}
_BAD_QUERIES = {
    "upstash+http": [
        *("timeout=nan", "timeout=inf", "timeout=0", "timeout=abc"),
        *("retries=-1", "retries=x", "retry_interval=-1"),
        "listing=all",
    ]
}


def test_connect_options_out_of_range_are_refused(backend_url: str) -> None:
    scheme = scheme_of(backend_url)
    for options in _BAD_OPTIONS.get(scheme, []):
        with pytest.raises(ValidationError, match=next(iter(options))):
            workmem.connect(backend_url, **options)
    for query in _BAD_QUERIES.get(scheme, []):
        with pytest.raises(ValidationError, match=query.partition("=")[0]):
            workmem.connect(f"{backend_url}&{query}" if "?" in backend_url else f"{backend_url}?{query}")
    with workmem.connect(backend_url) as storage:  # the URL itself is fine
        assert storage.get_thread("t-1") is None
