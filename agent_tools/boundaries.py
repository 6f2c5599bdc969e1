"""Where data enters (DESIGN §12): the one way a refusal is worded. Pure.

Every boundary that validates with pydantic (a model's tool arguments, a client's request, an HTTP body)
reports the problems in the same words: ``field.path: message; other.field: message``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError


def describe_validation_error(
    error: ValidationError | Iterable[Mapping[str, Any]],
    *,
    whole: str = "(arguments)",
    skip: Iterable[str] = (),
    messages: Mapping[str, str] | None = None,
) -> str:
    """The problems of a validation error as one line.

    Args:
        error: A pydantic error, or its ``errors()`` list (FastAPI hands those over).
        whole: What to call the input itself when a problem has no field path.
        skip: Path parts to leave out (FastAPI prefixes body fields with ``body``).
        messages: Wording that replaces pydantic's for some error types (``{"string_too_long": ...}``);
            ``{loc}`` in it is the field path.
    """
    errors = error.errors() if isinstance(error, ValidationError) else error
    skipped = set(skip)
    problems = []
    for e in errors:
        loc = ".".join(str(p) for p in e.get("loc", ()) if p not in skipped) or whole
        custom = (messages or {}).get(str(e.get("type")))
        problems.append(custom.format(loc=loc) if custom else f"{loc}: {e.get('msg')}")
    return "; ".join(problems)
