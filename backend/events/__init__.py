"""Domain events: what changed, for UI state, WebSocket clients and projectors."""

from backend.events.bus import Event, EventBus, InMemoryEventBus

__all__ = ["Event", "EventBus", "InMemoryEventBus"]
