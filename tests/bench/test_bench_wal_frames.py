"""``python -m bench.wal_frames``: the pages one thread creation writes, on Mastra's table and on workmem's schema."""

from __future__ import annotations

import pytest

from bench.wal_frames import main, measure

pytestmark = pytest.mark.backend("libsql")


def test_workmem_schema_writes_the_listing_indexes_and_count_pages_beside_mastras_table() -> None:
    result = measure(threads=400, creates=500)
    mastra, ours = result["mastra table"], result["workmem schema"]
    # Mastra's table: the row and its key's index (a page split now and then). workmem adds two listing
    # indexes and the count row: three pages more per creation (fewer splits in these small trees).
    assert 2.0 <= mastra["frames_per_create"] < 3.0
    assert ours["frames_per_create"] >= mastra["frames_per_create"] + 2.5
    for row in (mastra, ours):
        assert 0 < row["p50_us"] <= row["p99_us"] and row["mean_us"] > 0


def test_the_command_prints_both_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--threads", "100", "--creates", "500"]) == 0
    out = capsys.readouterr().out
    assert "mastra table" in out and "workmem schema" in out
    with pytest.raises(SystemExit):
        main(["--creates", "10"])
