"""Records a call returns are the caller's own, and so are those it passed in (the contract's rule).

On every backend: editing the metadata of a record read back, of one returned by
a write, of one passed in, or of a mapping or patch passed in, after the call,
changes nothing stored. (The conformance check ``no_aliasing`` checks the same
on any adapter, and more calls.)
"""

from __future__ import annotations

from backends import backend_url

import workmem
from workmem import Resource, Thread

__all__ = ["backend_url"]  # the fixture, run once per backend


def test_editing_records_after_the_call_changes_nothing_stored(backend_url: str) -> None:
    with workmem.connect(backend_url) as storage, workmem.connect(backend_url) as other:
        given = Thread("t", "r", "title", {"nested": {"list": [1]}})
        returned = storage.create_thread(given)
        given.metadata["nested"]["list"].append("edited")  # type: ignore[index]
        returned.metadata["nested"]["list"].append("edited")  # type: ignore[index]
        read = storage.get_thread("t")
        assert read is not None and read.metadata == {"nested": {"list": [1]}}
        read.metadata["nested"]["new"] = True  # type: ignore[index]
        patch = {"doc": {"list": [1]}}
        merged = storage.merge_working_memory(patch, scope="resource", resource_id="r")
        patch["doc"]["list"].append("edited")
        merged["doc"]["list"].append("edited")
        metadata = {"m": {"list": [1]}}
        updated = storage.update_resource("r", metadata=metadata)
        metadata["m"]["list"].append("edited")
        updated.metadata["m"]["list"].append("edited")  # type: ignore[index]
        storage.update_thread("t", title="an unrelated write")
        storage.save_resource(Resource("r2", None, {"k": [1]}))
        for conn in (storage, other):
            thread, resource = conn.get_thread("t"), conn.get_resource("r")
            assert thread is not None and thread.metadata == {"nested": {"list": [1]}}, thread
            assert resource is not None and resource.metadata == {"m": {"list": [1]}}, resource
            assert conn.get_working_memory(scope="resource", resource_id="r") in (
                '{"doc":{"list":[1]}}',
                '{"doc": {"list": [1]}}',
            )
            assert [t.metadata for t in conn.list_threads("r").threads] == [{"nested": {"list": [1]}}]
