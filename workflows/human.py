"""Session mixin for askUser (human in the loop). Filled by its issue."""

from __future__ import annotations

from workflows.base import SessionBase


class HumanLoopMixin(SessionBase):
    pass
