"""Event recording that eager execution and the graph executor both emit into; steps;
Chrome-trace export. ``lk.profile()`` opens a recording."""
from .events import OpEvent
from .profile import Profile, active_profile, profile, register_hooks

__all__ = ["OpEvent", "Profile", "active_profile", "profile", "register_hooks"]
