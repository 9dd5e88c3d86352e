"""URLs as users of the TypeScript clients write them, read the way those clients read them."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_reliability_secrets import closed_port, echo_server, failure_of

import workmem
from workmem.adapters.libsql.storage import LibSQLStorage


def test_libsql_tls_0_talks_plain_http_to_a_local_server() -> None:
    """``libsql://127.0.0.1:8080?tls=0`` is @libsql/client's form for a local sqld: plain HTTP, not refused."""
    with echo_server(401) as port:
        exc = failure_of(f"libsql://127.0.0.1:{port}?tls=0&authToken=t0k3n-secret")
    assert isinstance(exc, workmem.BackendRefusedError), repr(exc)  # HTTP 401: the server answered, and said no
    assert "bad credentials" in str(exc)  # the plain-HTTP server answered: no TLS was attempted


def test_libsql_tls_1_is_the_default_of_libsql_urls() -> None:
    with echo_server(401) as port:
        exc = failure_of(f"libsql://127.0.0.1:{port}?tls=1")
    assert isinstance(exc, workmem.BackendUnavailableError), repr(exc)
    assert "bad credentials" not in str(exc)  # TLS to a plain-HTTP server never gets its answer


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("libsql://127.0.0.1?tls=0", "must name its port"),
        ("libsql://127.0.0.1:8080?tls=yes", "takes 0 or 1"),
        ("libsql+http://127.0.0.1:8080?tls=1", "cannot opt into TLS"),
        ("libsql+https://127.0.0.1:8080?tls=0", "cannot opt out of TLS"),
        ("libsql://127.0.0.1:8080?cache=private", "unknown libSQL URL parameters: cache"),
    ],
)
def test_libsql_tls_mistakes_are_named(url: str, message: str) -> None:
    with pytest.raises(workmem.ValidationError, match=message):
        workmem.connect(url)


def test_libsql_http_scheme_with_tls_0_is_plain_http() -> None:
    exc = failure_of(f"libsql+http://127.0.0.1:{closed_port()}?tls=0")
    assert isinstance(exc, workmem.BackendUnavailableError), repr(exc)


@pytest.mark.backend("libsql")
def test_libsql_file_url_with_a_fragment_is_refused_as_libsql_client_refuses_it(tmp_path: Path) -> None:
    """``file:agent.db#x``: SQLite reads ``#x`` as a fragment, @libsql/client refuses it; workmem must not open
    (and create) a file named ``agent.db#x`` that a TypeScript agent given the same URL never finds."""
    for url in (f"file:{tmp_path}/agent.db#x", f"file://{tmp_path}/agent.db#x", f"file:{tmp_path}/a#b.db?mode=ro"):
        with pytest.raises(workmem.ValidationError, match="%23"):
            workmem.connect(url)
    assert list(tmp_path.iterdir()) == []
    with workmem.connect(f"file:{tmp_path}/agent%23x.db") as storage:  # a '#' in the name, written as %23
        assert storage.get_thread("t") is None
    assert {p.name for p in tmp_path.iterdir()} <= {"agent#x.db", "agent#x.db-wal", "agent#x.db-shm"}
    assert (tmp_path / "agent#x.db").exists()


@pytest.mark.backend("libsql")
def test_libsql_plain_path_is_taken_as_written(tmp_path: Path) -> None:
    """A plain path is a file name, not a URL: '%xx', '?' and '#' in it are part of the name (as sqlite3 opens it)."""
    path = tmp_path / "report%2025 v2?draft#1.db"
    with workmem.connect(str(path)) as storage:
        storage.save_thread(workmem.Thread("t-1", "user-1", "Trip"))
    assert path.exists()
    assert {p.name for p in tmp_path.iterdir()} <= {path.name, f"{path.name}-wal", f"{path.name}-shm"}
    with workmem.connect(str(path), create=False) as storage:  # the same file, found again
        thread = storage.get_thread("t-1")
        assert thread is not None and thread.title == "Trip"
    with workmem.Memory(str(path), read_only=True) as memory:
        assert [t.id for t in memory.list_threads("user-1").threads] == ["t-1"]


@pytest.mark.backend("libsql")
def test_a_pathlib_path_names_a_libsql_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``connect(Path(...))`` and ``Memory(Path(...))`` open that file, even one whose name looks like a URL."""
    monkeypatch.chdir(tmp_path)
    for path in (tmp_path / "agent.db", Path("postgresql:relative.db")):
        with workmem.connect(path) as storage:
            assert isinstance(storage, LibSQLStorage)
            storage.save_thread(workmem.Thread("t-1", "user-1"))
        with workmem.Memory(path, read_only=True) as memory:
            assert [t.id for t in memory.list_threads("user-1").threads] == ["t-1"]
        assert (tmp_path / path).exists()


@pytest.mark.backend("libsql")
def test_libsql_tilde_is_not_expanded_and_the_error_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("~/agent.db", "file:~/agent.db"):
        with pytest.raises(workmem.ValidationError, match=r"'~' is not expanded.*expanduser"):
            workmem.connect(url)
    assert list(tmp_path.iterdir()) == []
