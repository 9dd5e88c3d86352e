"""A merge writes each JSON document once: the patch at the door (its text goes down), the merged result once."""

from __future__ import annotations

from typing import Any

import pytest
from json_writes import json_writes

from workmem.adapters.reference import ReferenceStorage
from workmem.kit import CheckedPatch, MergeChange, ScopeTarget, patch_text
from workmem.validation import dump_json


class Recording(ReferenceStorage):
    patches: list[dict[str, Any]]

    async def _merge_working_memory(self, target: ScopeTarget, change: MergeChange) -> dict[str, Any]:
        patch = change.patch
        self.patches.append(patch)
        return await super()._merge_working_memory(target, change)


def test_the_merge_hook_receives_the_patch_with_the_text_the_door_wrote() -> None:
    storage = Recording()
    storage.patches = []
    storage.merge_working_memory({"name": "Ada", "n": -0.0, "tags": ["ü"]}, scope="resource", resource_id="u")
    (patch,) = storage.patches
    assert isinstance(patch, CheckedPatch) and isinstance(patch, dict)
    assert patch == {"name": "Ada", "n": 0.0, "tags": ["ü"]}  # the checked copy: -0.0 reads as 0.0
    assert patch_text(patch) == patch.text == dump_json(patch) == '{"name":"Ada","n":0.0,"tags":["ü"]}'
    assert patch_text({"a": 1}) == '{"a":1}'  # a plain dict (a hook called directly): written now


@pytest.mark.parametrize("max_chars", [None, 10_000])
def test_a_merge_serializes_the_patch_the_stored_and_the_merged_document_once_each(max_chars: int | None) -> None:
    storage = ReferenceStorage()
    storage.merge_working_memory({"a": {"b": [1, 2]}}, scope="resource", resource_id="u")
    with json_writes() as written:
        merged = storage.merge_working_memory({"c": "d"}, scope="resource", resource_id="u", max_chars=max_chars)
    assert merged == {"a": {"b": [1, 2]}, "c": "d"}
    assert written == [{"c": "d"}, {"a": {"b": [1, 2]}}, merged]  # before: 4 without a limit, 6 with one
    assert storage.get_working_memory(scope="resource", resource_id="u") == dump_json(merged)
