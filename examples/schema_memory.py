"""Schema-mode working memory with a Pydantic model: merge, null deletion and array replacement.

Run: python examples/schema_memory.py
Storage: an embedded libSQL file in a temporary folder, or the URL in $WORKMEM_URL.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from workmem.agent import Memory


class Contact(BaseModel):
    email: str | None = None
    phone: str | None = None


class Profile(BaseModel):
    name: str | None = Field(default=None, description="The user's name")
    city: str | None = None
    contact: Contact | None = None
    interests: list[str] = Field(default_factory=list, description="Everything the user is into")


# Simulated updateWorkingMemory calls: in schema mode each carries only what changed.
UPDATES = [
    ("first facts", {"name": "Sam", "city": "Berlin", "contact": {"email": "sam@example.com"}, "interests": ["chess"]}),
    ("nested merge", {"contact": {"phone": "+49 30 1234567"}}),
    ("null deletes", {"city": None}),
    ("array replaced", {"interests": ["go", "climbing"]}),
    ("invalid", {"interests": "go"}),
]


def start_over(memory: Memory, *resource_ids: str) -> None:
    """Remove what an earlier run left (on a persistent $WORKMEM_URL): the resources' threads and memory."""
    for resource_id in resource_ids:
        for thread in memory.list_threads(resource_id, per_page=None).threads:
            memory.delete_thread(thread.id)
        memory.storage.update_resource(resource_id, working_memory=None)  # None: no working memory stored


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("WORKMEM_URL") or f"file:{Path(tmp) / 'example.db'}"
        with Memory(url, schema=Profile) as memory:
            start_over(memory, "user-8")
            parameters = memory.tool_definition()["parameters"]  # type: ignore[index]
            print(f"tool parameters: {sorted(parameters['properties'])}")
            for label, patch in UPDATES:
                result = memory.call_tool(json.dumps({"memory": patch}), resource_id="user-8")
                data = memory.get_working_memory_data(resource_id="user-8")
                outcome = result["action"] if result["ok"] else "error: " + result["error"]
                print(f"{label}: {outcome}")
                print(f"  memory = {json.dumps(data, sort_keys=True)}")


if __name__ == "__main__":
    main()
