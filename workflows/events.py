"""Session mixin for wait_for_event. Filled by its issue."""

from __future__ import annotations

from workflows.base import SessionBase


class EventWaitMixin(SessionBase):
    pass
