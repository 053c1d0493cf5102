"""UI state: the Reflex state classes (``app_state``) and the framework-free logic they run
(``activation``, ``ui_models``)."""
