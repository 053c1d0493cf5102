"""Responses for large payloads.

FastAPI passes a returned ``dict`` through ``jsonable_encoder`` and then the standard library's
encoder, both of which walk every value in Python; for a 10,000-task boot payload that walk
costs as much as the database work. Routes whose payload is already plain JSON data (strings,
numbers, booleans, ``None``, lists and dicts) return :func:`plain_json`, encoded by orjson in
one native pass.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import Response


class PlainJSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def plain_json(content: Any, status_code: int = 200) -> Response:
    return PlainJSONResponse(content, status_code=status_code)
