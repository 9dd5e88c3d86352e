"""Moving records between backends: :func:`copy`, :func:`verify`, and the export format (JSON Lines).

``workmem.copy(src, dst)`` copies every resource and thread between any two
backends, page by page (``await workmem.copy_async(src, dst)`` under the async
API); ``workmem copy``, ``workmem export`` and ``workmem import`` are the
commands (:mod:`workmem.transfer.cli`). The export format is documented in
``docs/export-format.md`` and implemented in :mod:`workmem.transfer.format`.
"""

from __future__ import annotations

from workmem.transfer.engine import copy, copy_async, export_records, export_records_async, import_records
from workmem.transfer.format import FORMAT, MAX_LINE_BYTES, VERSION, BadLine, parse_record, record_line
from workmem.transfer.progress import Progress
from workmem.transfer.report import Issue, TransferReport
from workmem.transfer.verify import verify

__all__ = [
    "FORMAT",
    "MAX_LINE_BYTES",
    "VERSION",
    "BadLine",
    "Issue",
    "Progress",
    "TransferReport",
    "copy",
    "copy_async",
    "export_records",
    "export_records_async",
    "import_records",
    "parse_record",
    "record_line",
    "verify",
]
