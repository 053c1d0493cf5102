"""The service layer: the use cases both the REST routes and the Reflex UI call.

Each function takes the process's :class:`~backend.runtime.Runtime` and the acting
:class:`~backend.access.Caller`, checks what the caller may see (``visible_*``: 404 for missing
or invisible, before any work), runs the work (transactions of :mod:`backend.workflow`,
:mod:`backend.task_deletion`, the orchestrator, the responder) and returns contract-shaped
dicts, or raises the domain errors of :mod:`backend.errors`.

Keeping the use cases here, not in the routes, is what lets ``state/gateway.py`` run exactly
what the API runs without importing FastAPI handlers: the routes parse, make one service call
and shape the HTTP response (status code, ``Response(204)``, ``plain_json``); the gateway
validates with the same request models and makes the same call.

Modules by resource: :mod:`.tasks`, :mod:`.boot`, :mod:`.sessions`, :mod:`.clarifications`,
:mod:`.workflows`, :mod:`.events`.
"""
