"""Resource scope (shared by a user's threads) versus thread scope (one conversation), on one database.

Run: python examples/scopes.py
Storage: an embedded libSQL file in a temporary folder, or the URL in $WORKMEM_URL.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import workmem
from workmem import ThreadOwnershipError
from workmem.agent import Memory, sub_agent_resource_id

USER_TEMPLATE = "# User\n- **Name**:\n- **Diet**:\n"
TOPIC_TEMPLATE = "# Conversation\n- **Topic**:\n"


def start_over(memory: Memory, *resource_ids: str) -> None:
    """Remove what an earlier run left (on a persistent $WORKMEM_URL): the resources' threads and memory."""
    for resource_id in resource_ids:
        for thread in memory.list_threads(resource_id, per_page=None).threads:
            memory.delete_thread(thread.id)
        memory.storage.update_resource(resource_id, working_memory=None)  # None: no working memory stored


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("WORKMEM_URL") or f"file:{Path(tmp) / 'example.db'}"
        with workmem.connect(url) as storage:
            shared = Memory(storage, scope="resource", template=USER_TEMPLATE)
            per_thread = Memory(storage, scope="thread", template=TOPIC_TEMPLATE)
            researcher = sub_agent_resource_id("user-sam", "researcher", isolated=True)
            start_over(shared, "user-sam", "user-kim", researcher)

            shared.create_thread("monday", resource_id="user-sam")
            shared.create_thread("tuesday", resource_id="user-sam")

            # Resource scope: what is learnt on Monday is known on Tuesday.
            shared.call_tool({"memory": "# User\n- **Name**: Sam\n- **Diet**: vegetarian\n"}, thread_id="monday")
            print(f"resource scope, tuesday sees: {shared.get_working_memory(thread_id='tuesday')!r}")

            # Thread scope: each conversation keeps its own memory.
            per_thread.call_tool({"memory": "# Conversation\n- **Topic**: trip to Rome\n"}, thread_id="monday")
            print(f"thread scope, monday sees: {per_thread.get_working_memory(thread_id='monday')!r}")
            print(f"thread scope, tuesday sees: {per_thread.get_working_memory(thread_id='tuesday')!r}")

            # The two scopes never see each other.
            print(f"resource memory mentions Rome: {'Rome' in (shared.get_working_memory(thread_id='monday') or '')}")
            print(f"thread memory mentions Sam: {'Sam' in (per_thread.get_working_memory(thread_id='monday') or '')}")

            # Initial working memory through thread metadata.
            thread = shared.create_thread(
                "kim-1", resource_id="user-kim", metadata={"workingMemory": "# User\n- **Name**: Kim\n- **Diet**:\n"}
            )
            print(f"initial (resource scope) on the resource: {shared.get_working_memory(resource_id='user-kim')!r}")
            print(f"thread metadata keeps a copy: {'workingMemory' in (thread.metadata or {})}")
            thread = per_thread.create_thread(
                "kim-2", resource_id="user-kim", metadata={"workingMemory": "# Conversation\n- **Topic**: jazz\n"}
            )
            print(f"initial (thread scope) in thread metadata: {(thread.metadata or {}).get('workingMemory')!r}")

            # A thread used with a resource that does not own it is refused.
            try:
                shared.get_working_memory(thread_id="monday", resource_id="user-kim")
            except ThreadOwnershipError as exc:
                print(f"ownership: {exc}")

            # A sub-agent gets its own resource id, stable across delegations; isolated=True puts it where no
            # user id can reach it (Mastra's form, "user-sam-researcher", is also the id of a user of that name).
            for delegation in ("first", "second"):
                task = shared.create_thread(resource_id=researcher, title=f"{delegation} delegation")
                before = shared.get_working_memory(thread_id=task.id)
                notes = f"# User\n- **Name**: Sam\n- **Diet**: ({delegation} look-up)\n"
                shared.call_tool({"memory": notes}, thread_id=task.id)
                print(f"sub-agent {researcher}, {delegation} delegation found: {before!r}")
            print(f"parent memory unchanged: {shared.get_working_memory(resource_id='user-sam')!r}")


if __name__ == "__main__":
    main()
