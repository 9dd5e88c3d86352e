"""A PostgreSQL call cancelled twice: psycopg's warning goes to workmem's logger, not to stderr (REAL server).

The scenario runs in a fresh interpreter that configures no logging, as an
application that never calls ``logging.basicConfig``: whatever reaches Python's
last-resort handler is printed on its stderr.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from postgres_schemas import fresh_schema_url

import workmem

pytestmark = pytest.mark.backend("postgres")

_SCENARIO = textwrap.dedent(
    """
    import asyncio, logging, sys
    import psycopg, workmem
    from workmem.adapters.postgres import parse_postgres_url

    url = sys.argv[1]
    conninfo, schema = parse_postgres_url(url)
    workmem_log = logging.getLogger("workmem")  # only workmem's records are shown, on stdout
    workmem_log.addHandler(logging.StreamHandler(sys.stdout))
    workmem_log.setLevel(logging.DEBUG)


    async def cancel_twice(task: asyncio.Task[object]) -> None:
        await asyncio.sleep(1)  # the statement waits for the row lock
        task.cancel()
        for _ in range(3):  # psycopg is now asking the server to cancel the statement
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            print("cancelled twice")


    async def main() -> None:
        async with await workmem.connect_async(url) as storage:
            await storage.merge_working_memory({"a": 1}, scope="resource", resource_id="r")
            with psycopg.connect(conninfo) as lock:  # holds the row lock until the block ends
                lock.execute(f'SELECT 1 FROM "{schema}".mastra_resources WHERE id = %s FOR UPDATE', ["r"])
                merge = storage.merge_working_memory({"b": 2}, scope="resource", resource_id="r")
                await cancel_twice(asyncio.create_task(merge))
                async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as other:
                    update = f'UPDATE "{schema}".mastra_resources SET "workingMemory" = %s WHERE id = %s'
                    await cancel_twice(asyncio.create_task(other.execute(update, ["{}", "r"])))
            # the storage goes on: the connection psycopg closed is not used again
            print("after:", await storage.get_working_memory(scope="resource", resource_id="r") is not None)


    asyncio.run(main())
    """
)


def test_a_call_cancelled_twice_logs_to_workmem_and_prints_nothing() -> None:
    with fresh_schema_url() as url:
        workmem.connect(url).close()  # the tables
        done = subprocess.run(
            [sys.executable, "-c", _SCENARIO, url], capture_output=True, text=True, timeout=120, check=False
        )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    psycopg_said = "query cancellation interrupted (CancelledError): closing connection"
    assert out[0] == f"psycopg, on a cancelled workmem statement: {psycopg_said}"  # a debug record of workmem's
    assert out[1:] == ["cancelled twice", "cancelled twice", "after: True"]
    # the plain psycopg connection of the application keeps psycopg's own warning, as before
    assert done.stderr.splitlines() == [psycopg_said]
