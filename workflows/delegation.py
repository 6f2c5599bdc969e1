"""Session mixin for sub-agents and delegation. Filled by its issue."""

from __future__ import annotations

from workflows.base import SessionBase


class DelegationMixin(SessionBase):
    pass
