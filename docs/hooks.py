"""mkdocs hooks (``hooks:`` in mkdocs.yml): the docstrings' Sphinx roles rendered as code.

The docstrings cross-reference with Sphinx roles (``:class:`~workmem.storage.MemoryStorage```),
which mkdocstrings leaves as text: ``:class:`` before the code. This drops the role and, for a
``~`` target, keeps the last name, as Sphinx shows it.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj):<code>(~?)([^<]*)</code>")


def sphinx_roles_as_code(html: str) -> str:
    """``html`` with each rendered Sphinx role reduced to its code (``~a.b.c`` shows ``c``)."""
    return ROLE.sub(lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html)


def on_page_content(html: str, **_: Any) -> str:
    return sphinx_roles_as_code(html)
