"""The `environment` check reads no `[conformance.*]` table of its own."""

from __future__ import annotations

from typing import Any

# The `[conformance.*]` tables the check reads, with their schemas.
TABLES: dict[str, dict[str, Any]] = {}
