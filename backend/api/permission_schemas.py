"""The permission respond body: strict like every body of ``schemas.py`` (unknown fields,
wrong types, a missing or empty ``option_id`` → 400), for the route and the UI alike.

Its own module while ``schemas.py`` is being reworked; it belongs there eventually.
"""

from __future__ import annotations

from backend.api.schemas import Body, Id


class PermissionRespondBody(Body):
    #: The chosen option's id (one of the request's ``options``; an unknown one is a 400 from
    #: the desk, which knows the request).
    option_id: Id
