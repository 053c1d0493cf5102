"""UI state: the Reflex state classes (``app_state`` and one substate per panel), the
``workspace`` that changes several panels at once, and the framework-free logic they run
(``activation``, ``ui_models``). Map: docs/architecture.md (UI)."""
