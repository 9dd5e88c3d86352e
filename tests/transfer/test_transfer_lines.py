"""``workmem import`` line by line: every bad line is reported by number and skipped, in bounded memory.

The rule (``docs/export-format.md``): each line is parsed and validated whole
before anything of it is written; a line that is no valid record, for whatever
reason (not UTF-8, not JSON, a number JSON or the contract refuses, a wrong
shape or type, a value outside the input rules, a timestamp without a time
zone, a line longer than any valid one), is reported with its number and
skipped, and the lines around it are imported. No bare Python exception leaves
``import_records``; the CLI exits 1 (some lines were bad), never 2.

The Hypothesis tests check the rule over generated lines, each put between two
valid lines: lines built to be invalid (every field given a value of the wrong
type or outside the rules, raw JSON tokens the contract refuses spliced in,
missing and unknown fields, cut-off lines, invalid UTF-8) must be reported;
arbitrary bytes must be imported or reported, never raise.
"""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from backends import fresh_url
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workmem
from workmem import MemoryStorage, Resource, Thread, ValidationError
from workmem.cli import main
from workmem.transfer import BadLine, TransferReport, import_records, parse_record, record_line
from workmem.transfer.format import HEADER_LINE, MAX_LINE_BYTES
from workmem.validation import MAX_ID_BYTES, MAX_SAFE_INT, MAX_TEXT_BYTES, MAX_TITLE_BYTES

T0 = datetime(2021, 3, 4, 5, 6, 7, 891000, tzinfo=UTC)
STAMP = "2024-01-01T00:00:00.000Z"
BEFORE = Resource("guard-before", "wm before", {"k": 1}, T0, T0)
AFTER = Thread("guard-after", "guard-before", "after", {"workingMemory": "# t"}, T0, T0)

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def export_of(*middle: bytes) -> bytes:
    """An export: the header, a valid resource, the given lines (newline added), a valid thread."""
    return b"".join(
        [
            HEADER_LINE.encode(),
            record_line(BEFORE).encode(),
            *(line + b"\n" for line in middle),
            record_line(AFTER).encode(),
        ]
    )


def import_into(storage: MemoryStorage, data: bytes) -> TransferReport:
    return import_records(storage, io.BytesIO(data))


def assert_guards_imported(storage: MemoryStorage) -> None:
    assert storage.get_resource(BEFORE.id) == BEFORE
    assert storage.get_thread(AFTER.id) == AFTER


def assert_only_line_reported(report: TransferReport, number: int) -> None:
    assert [(issue.kind, issue.line) for issue in report.issues] == [("bad line", number)], report.issues


# -- the table: one line of each kind of failure, through the CLI, on real backends ----------------

RESOURCE = {
    "kind": "resource",
    "id": "r-x",
    "working_memory": None,
    "metadata": None,
    "created_at": STAMP,
    "updated_at": STAMP,
}
THREAD = {
    "kind": "thread",
    "id": "t-x",
    "resource_id": "r-x",
    "title": "",
    "metadata": None,
    "created_at": STAMP,
    "updated_at": STAMP,
}


def with_field(base: dict[str, Any], name: str, value: Any) -> bytes:
    return json.dumps({**base, name: value}).encode()


def with_raw(base: dict[str, Any], name: str, raw: bytes) -> bytes:
    """``base`` as JSON with the value of ``name`` replaced by ``raw``, verbatim (tokens JSON has no value for)."""
    marker = "\x01marker\x01"
    return json.dumps({**base, name: marker}).encode().replace(json.dumps(marker).encode(), raw)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


TABLE: list[tuple[str, bytes, str]] = [
    ("huge int, 5,000 digits", with_raw(RESOURCE, "metadata", b'{"n":' + b"9" * 5000 + b"}"), "integer"),
    ("huge int, 100,000 digits", with_raw(RESOURCE, "metadata", b'{"n":-' + b"1" * 100_000 + b"}"), "integer"),
    ("int just over 2**53 - 1", with_field(RESOURCE, "metadata", {"n": MAX_SAFE_INT + 1}), "2**53"),
    ("NaN", with_raw(RESOURCE, "metadata", b'{"n":NaN}'), "NaN is not a JSON number"),
    ("Infinity", with_raw(RESOURCE, "metadata", b'{"n":Infinity}'), "Infinity is not a JSON number"),
    ("-Infinity", with_raw(RESOURCE, "metadata", b'{"n":-Infinity}'), "Infinity is not a JSON number"),
    ("float overflow", with_raw(RESOURCE, "metadata", b'{"n":1e999}'), "out of range"),
    ("invalid UTF-8", b'{"kind":"resource","id":"r-\xff"}', "not UTF-8"),
    ("CESU-8 surrogate bytes", b'{"kind":"resource","id":"r-\xed\xa0\x80"}', "not UTF-8"),
    ("lone surrogate in an id", with_raw(RESOURCE, "id", b'"r-\\ud800"'), "lone surrogate"),
    ("lone surrogate in a key", with_raw(RESOURCE, "metadata", b'{"\\udfff":1}'), "lone surrogate"),
    ("NUL in working memory", with_field(RESOURCE, "working_memory", "a\x00b"), "NUL"),
    ("JSON nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ("metadata nested 40 deep", with_field(RESOURCE, "metadata", nested(40)), "nested more than 32"),
    ("id a number", with_field(RESOURCE, "id", 7), "must be a string"),
    ("id empty", with_field(RESOURCE, "id", ""), "must not be empty"),
    ("id too long", with_field(RESOURCE, "id", "x" * (MAX_ID_BYTES + 1)), "longer than 512"),
    ("working memory an object", with_field(RESOURCE, "working_memory", {"a": 1}), "must be a string"),
    ("metadata a string", with_field(RESOURCE, "metadata", "{}"), "must be a JSON object"),
    ("metadata an array", with_field(RESOURCE, "metadata", [1]), "must be a JSON object"),
    ("title null", with_field(THREAD, "title", None), "title must be a string"),
    ("resource_id a list", with_field(THREAD, "resource_id", ["r"]), "must be a string"),
    ("unknown kind", with_field(RESOURCE, "kind", "message"), '"kind" must be'),
    ("kind missing", json.dumps({k: v for k, v in RESOURCE.items() if k != "kind"}).encode(), '"kind" must be'),
    ("a thread field on a resource", with_field(RESOURCE, "title", "t"), "unknown field(s)"),
    ("a JSON string", b'"just a string"', "must be a JSON object"),
    ("null", b"null", "must be a JSON object"),
    ("cut off", json.dumps(RESOURCE).encode()[:-5], "not JSON"),
    ("two objects", json.dumps(RESOURCE).encode() * 2, "not JSON"),
    ("timestamp without zone", with_field(RESOURCE, "created_at", "2024-01-01T00:00:00"), "time zone"),
    ("timestamp with milliseconds, no zone", with_field(RESOURCE, "updated_at", "2024-01-01T00:00:00.123"), "zone"),
    ("bare date", with_field(RESOURCE, "created_at", "2024-01-01"), "time zone"),
    ("date and time with a space, no zone", with_field(THREAD, "updated_at", "2024-01-01 10:00:00"), "time zone"),
    ("year 10000", with_field(RESOURCE, "created_at", "10000-01-01T00:00:00Z"), "created_at"),
    ("before year 1 in UTC", with_field(RESOURCE, "created_at", "0001-01-01T00:00:00+01:00"), "years 1 to 9999"),
    ("after year 9999 in UTC", with_field(THREAD, "updated_at", "9999-12-31T23:30:00-01:00"), "years 1 to 9999"),
    ("timestamp a number", with_field(RESOURCE, "created_at", 1704067200000), "ISO-8601 string"),
    ("timestamp with a lone surrogate", with_raw(RESOURCE, "created_at", b'"2024\\udc00"'), "created_at"),
    ("duplicate key in metadata", with_raw(RESOURCE, "metadata", b'{"a":1,"a":2}'), "appears twice"),
]


@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.backend(b)) for b in ("libsql", "postgres")])
def test_every_kind_of_bad_line_is_reported_by_number_and_the_rest_imported(backend: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(export_of(*(raw for _, raw, _ in TABLE)))
    with fresh_url(backend) as url:
        status, out, err = run_cli("import", url, str(path))
        assert status == 1, err
        for number, (name, _, reason) in enumerate(TABLE, 3):
            line = next((text for text in out.splitlines() if text.startswith(f"line {number}: bad line: ")), "")
            assert reason in line, (name, reason, line)
        assert f"problems: {len(TABLE)} bad lines" in out
        with workmem.connect(url) as storage:
            assert_guards_imported(storage)
            assert [r.id for r in storage.iter_resources()] == [BEFORE.id]
            assert [t.id for t in storage.iter_threads()] == [AFTER.id]


def test_the_python_api_reports_bad_lines_and_raises_nothing() -> None:
    with workmem.connect("memory://") as storage:
        report = import_into(storage, export_of(*(raw for _, raw, _ in TABLE)))
        assert report.bad_lines == len(TABLE)
        assert [issue.line for issue in report.issues] == list(range(3, 3 + len(TABLE)))
        assert_guards_imported(storage)
    for _, raw, _ in TABLE:  # parse_record raises BadLine, a ValidationError, and nothing else
        with pytest.raises(BadLine):
            parse_record(raw)
    assert issubclass(BadLine, ValidationError)


def test_lines_given_as_text_are_refused_before_anything_is_written() -> None:
    with workmem.connect("memory://") as storage:
        with pytest.raises(ValidationError, match="bytes"):
            import_records(storage, io.StringIO(export_of().decode()))  # type: ignore[arg-type]
        assert list(storage.iter_resources()) == []


# -- the rule, generated --------------------------------------------------------------------------

JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False) | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
)
NOT_A_STRING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False),
    st.lists(JSON_SCALARS, max_size=2),
    st.dictionaries(st.text(max_size=3), JSON_SCALARS, max_size=2),
)
BAD_TEXT = st.one_of(
    st.text(max_size=5).map(lambda s: s + "\x00"),
    st.text(max_size=5).map(lambda s: s + "\ud800"),
    st.sampled_from(["\udc80", "a\udfffb"]),
)
NAIVE_TIMESTAMPS = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)).flatmap(
    lambda moment: st.sampled_from(
        [
            moment.isoformat(),
            moment.isoformat(sep=" "),
            moment.date().isoformat(),
            moment.isoformat(timespec="milliseconds"),
            moment.strftime("%Y%m%dT%H%M%S"),
        ]
    )
)
BAD_TIMESTAMPS = st.one_of(
    NAIVE_TIMESTAMPS,
    NOT_A_STRING,
    BAD_TEXT,
    st.text(max_size=12).filter(lambda s: not any(c.isdigit() for c in s)),
    st.sampled_from(["0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01", "2024-13-01T00:00:00Z"]),
)
LONG_ID = st.integers(MAX_ID_BYTES + 1, MAX_ID_BYTES + 40).map(lambda n: "é" * (n // 2 + 1))
BAD_IDS = st.one_of(NOT_A_STRING, BAD_TEXT, st.just(""), LONG_ID)
BAD_METADATA = st.one_of(
    st.booleans(),
    st.integers(),
    st.text(max_size=5),
    st.lists(JSON_VALUES, max_size=3),
    st.integers(33, 60).map(nested),
    st.integers(MAX_SAFE_INT + 1, 2**80).flatmap(lambda n: st.sampled_from([{"n": n}, {"n": -n}, {"a": [n]}])),
    BAD_TEXT.map(lambda text: {"k": text}),
    BAD_TEXT.map(lambda text: {text: 1}),
)
BAD_FIELDS: dict[str, Any] = {
    "kind": JSON_VALUES.filter(lambda kind: kind not in ("resource", "thread")),
    "id": BAD_IDS,
    "resource_id": BAD_IDS,
    "working_memory": st.one_of(st.booleans(), st.integers(), st.lists(JSON_SCALARS, max_size=2), BAD_TEXT),
    "title": st.one_of(NOT_A_STRING, BAD_TEXT, st.integers(MAX_TITLE_BYTES + 1, MAX_TITLE_BYTES + 9).map("t".__mul__)),
    "metadata": BAD_METADATA,
    "created_at": BAD_TIMESTAMPS,
    "updated_at": BAD_TIMESTAMPS,
}
RAW_TOKENS = st.one_of(
    st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999", b"[" * 5000 + b"]" * 5000]),
    st.integers(17, 6000).map(lambda n: b"1" + b"0" * n),
    st.integers(4301, 6000).map(lambda n: b"-" + b"7" * n),
)


@st.composite
def valid_records(draw: st.DrawFn) -> dict[str, Any]:
    base = dict(draw(st.sampled_from([RESOURCE, THREAD])))
    base["id"] = "gen-" + draw(st.text(min_size=1, max_size=6).filter(lambda s: "\x00" not in s))
    return base


@st.composite
def invalid_lines(draw: st.DrawFn) -> bytes:
    """A line built to be invalid: whatever it is, the contract has no record for it."""
    record = draw(valid_records())
    how = draw(st.sampled_from(["field", "raw", "missing", "unknown", "cut", "not utf-8", "not an object"]))
    if how == "field":
        name = draw(st.sampled_from([name for name in BAD_FIELDS if name in record]))
        return json.dumps({**record, name: draw(BAD_FIELDS[name])}).encode()
    if how == "raw":
        name = draw(st.sampled_from(["metadata", "working_memory", "id", "created_at"]))
        token = draw(RAW_TOKENS)
        raw = token if name != "metadata" or draw(st.booleans()) else b'{"x":[' + token + b"]}"
        return with_raw(record, name, raw)
    if how == "missing":
        del record[draw(st.sampled_from(sorted(record)))]
        return json.dumps(record).encode()
    if how == "unknown":
        key = draw(st.text(max_size=6).filter(lambda key: key not in record))
        return json.dumps({**record, key: draw(JSON_VALUES)}).encode()
    if how == "cut":
        text = json.dumps(record).encode()
        return text[: draw(st.integers(1, len(text) - 1))]
    if how == "not utf-8":
        text = json.dumps(record, ensure_ascii=False).encode()
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82"])) + text[at:]
    return json.dumps(draw(st.one_of(JSON_SCALARS, st.lists(JSON_VALUES, max_size=3)))).encode()


@SETTINGS
@given(line=invalid_lines())
def test_every_invalid_line_is_reported_and_skipped(line: bytes) -> None:
    line = line.replace(b"\n", b"")
    if not line.strip():
        return
    with workmem.connect("memory://") as storage:
        report = import_into(storage, export_of(line))
        assert_only_line_reported(report, 3)
        assert_guards_imported(storage)
        assert sum(1 for _ in storage.iter_resources()) == 1 and sum(1 for _ in storage.iter_threads()) == 1


@SETTINGS
@given(line=st.binary(max_size=300) | JSON_VALUES.map(lambda value: json.dumps(value).encode()))
def test_any_line_is_imported_or_reported_never_raised(line: bytes) -> None:
    line = line.replace(b"\n", b"")
    with workmem.connect("memory://") as storage:
        report = import_into(storage, export_of(line))
        assert [issue.line for issue in report.issues] in ([], [3]), report.issues
        assert_guards_imported(storage)


# -- timestamps: a time zone is required -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01T10:00:00Z", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01T10:00:00.123456+00:00", datetime(2024, 1, 1, 10, 0, 0, 123000, tzinfo=UTC)),
        ("2024-01-01T10:00:00+05:30", datetime(2024, 1, 1, 4, 30, tzinfo=UTC)),
        ("2024-01-01T10:00:00-0800", datetime(2024, 1, 1, 18, tzinfo=UTC)),
        ("2024-01-01 10:00:00Z", datetime(2024, 1, 1, 10, tzinfo=UTC)),
    ],
)
def test_timestamps_with_a_zone_are_read_in_utc(text: str, expected: datetime) -> None:
    with workmem.connect("memory://") as storage:
        report = import_into(storage, export_of(with_field({**RESOURCE, "id": "r-z"}, "created_at", text)))
        assert report.ok, report.issues
        stored = storage.get_resource("r-z")
        assert stored is not None and stored.created_at == expected


@pytest.mark.parametrize("text", ["2024-01-01T10:00:00", "2024-01-01T10:00:00.000", "2024-01-01", "2024-01-01 10:00"])
def test_timestamps_without_a_zone_are_refused_not_taken_as_utc(text: str) -> None:
    with workmem.connect("memory://") as storage:
        report = import_into(storage, export_of(with_field({**RESOURCE, "id": "r-z"}, "updated_at", text)))
        assert_only_line_reported(report, 3)
        assert "updated_at" in report.issues[0].detail and "time zone" in report.issues[0].detail
        assert storage.get_resource("r-z") is None


# -- line length: the bound, and bounded memory ----------------------------------------------------


def worst_case_records() -> list[Resource | Thread]:
    """The longest canonical lines the input rules allow: every byte of text a 6-byte escape, metadata full."""
    control = "\x01"  # one UTF-8 byte, written \u0001
    rest = {"k": "x" * (MAX_TEXT_BYTES - len('{"k":""}'))}  # exactly MAX_TEXT_BYTES as JSON
    return [
        Resource(control * MAX_ID_BYTES, control * MAX_TEXT_BYTES, rest, T0, T0),
        Thread(
            control * MAX_ID_BYTES,
            "\x02" * MAX_ID_BYTES,
            control * MAX_TITLE_BYTES,
            {"workingMemory": control * MAX_TEXT_BYTES, **rest},
            T0,
            T0,
        ),
    ]


def test_the_line_bound_is_the_longest_valid_line_and_such_a_line_imports() -> None:
    records = worst_case_records()
    lengths = [len(record_line(record).encode()) - 1 for record in records]
    assert max(lengths) <= MAX_LINE_BYTES < max(lengths) + 1024, (lengths, MAX_LINE_BYTES)
    assert min(lengths) > 8.5 * 2**20  # a valid line can be far longer than its 8 MiB of raw text
    assert f"**{MAX_LINE_BYTES:,} bytes**" in (Path(__file__).parents[2] / "docs" / "export-format.md").read_text()
    with workmem.connect("memory://") as storage:
        report = import_into(storage, HEADER_LINE.encode() + b"".join(record_line(r).encode() for r in records))
        assert report.ok, report.issues
        assert storage.get_resource(records[0].id) == records[0] and storage.get_thread(records[1].id) == records[1]


class _Generated(io.RawIOBase):
    """A stream of ``head``, then ``size`` bytes of filler, then ``tail``, made as it is read (never held whole)."""

    def __init__(self, head: bytes, size: int, tail: bytes) -> None:
        self.parts: Iterator[bytes] = iter([head, *self._filler(size), tail])
        self.pending = memoryview(b"")

    @staticmethod
    def _filler(size: int) -> Iterator[bytes]:
        chunk = b"x" * (1 << 20)
        while size > 0:
            yield chunk[: min(size, len(chunk))]
            size -= len(chunk)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            part = next(self.parts, None)
            if part is None:
                return 0
            self.pending = memoryview(part)
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def _peak(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_an_over_long_line_is_refused_while_read_in_bounded_memory() -> None:
    size = 6 * MAX_LINE_BYTES  # about 170 MB: read whole, the line alone would take that much
    head = HEADER_LINE.encode() + record_line(BEFORE).encode() + b'{"kind":"resource","id":"big","working_memory":"'
    tail = b'","metadata":null}\n' + record_line(AFTER).encode()
    with workmem.connect("memory://") as storage:
        reports: list[TransferReport] = []
        stream = io.BufferedReader(_Generated(head, size, tail), 1 << 16)
        peak = _peak(lambda: reports.append(import_records(storage, stream)))
        assert peak < 3 * MAX_LINE_BYTES, f"{peak:,} bytes at the peak for a line of {size:,}"
        assert_only_line_reported(reports[0], 3)
        assert f"longer than {MAX_LINE_BYTES:,} bytes" in reports[0].issues[0].detail
        assert_guards_imported(storage)
        assert storage.get_resource("big") is None


def test_the_cli_skips_an_over_long_line_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_bytes(export_of(b"{" + b" " * MAX_LINE_BYTES + b"}", json.dumps({**RESOURCE, "id": "r-next"}).encode()))
    with fresh_url("memory") as url:
        status, out, _ = run_cli("import", url, str(path))
        assert status == 1 and f"line 3: bad line: longer than {MAX_LINE_BYTES:,} bytes" in out, out
        with workmem.connect(url) as storage:
            assert_guards_imported(storage)
            assert storage.get_resource("r-next") is not None
