"""Event contracts: wait_for_event (FYAI), the router's messages and the pure matching rules.

The models, tool and rules are in :mod:`.contract`, the settings section in :mod:`.settings`: the package
itself imports nothing, so that loading the settings loads none of the event models.

Pure: no temporalio, no I/O. The session's events part (``agent_tools/workflows/_events.py``), the router workflow
(``agent_tools/workflows/_event_router.py``), the activities (``agent_tools/activities/_events.py``) and the ingress
(``agent_tools/_service/events_routes.py``) share these models; they sit in workflow histories, so they are
durable contracts (add optional fields only).

Matching (documented in ``docs/events.md``):

* ``kind`` is a prefix on dot-separated segments: ``github.check_suite`` matches ``github.check_suite`` and
  ``github.check_suite.completed`` but not ``github.check_suite_x``; ``github`` matches every GitHub event.
* ``match`` maps paths to values that must be equal. A path is a dotted path into the payload
  (``pull_request.number``); a numeric segment indexes a list (``commits.0.id``); ``*`` means "any element"
  (``check_suite.pull_requests.*.number``). A key that literally contains dots is found too (the longest
  literal key wins). A dict value is a nested match: ``{"pull_request": {"number": 420}}`` equals
  ``{"pull_request.number": 420}``. Equality is exact JSON equality without coercion: ``"420"`` does not
  equal ``420`` and ``true`` does not equal ``1``.
"""
