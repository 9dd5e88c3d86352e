"""Markdown templates of template-mode working memory, and the empty-update guard."""

from __future__ import annotations

from collections.abc import Iterable

from workmem.errors import ValidationError
from workmem.validation import validate_text

__all__ = ["DEFAULT_TEMPLATE", "DEFAULT_TEMPLATE_FIELDS", "check_template", "is_blank_update", "normalize_whitespace"]

DEFAULT_TEMPLATE_FIELDS = (
    "First Name",
    "Last Name",
    "Location",
    "Occupation",
    "Interests",
    "Goals",
    "Events",
    "Facts",
    "Projects",
)
"""The fields of :data:`DEFAULT_TEMPLATE`, in order."""

DEFAULT_TEMPLATE = "# User Information\n" + "".join(f"- **{field}**: \n" for field in DEFAULT_TEMPLATE_FIELDS)
"""The template used when a ``Memory`` is given neither a template nor a schema."""


def check_template(template: object) -> str:
    """Validate a developer's Markdown template: text within the limits and not blank."""
    text = validate_text(template, "template")
    if not text.strip():
        raise ValidationError("template must not be blank")
    return text


def normalize_whitespace(text: str) -> str:
    """``text`` with every run of whitespace collapsed to one space and the ends stripped."""
    return " ".join(text.split())


def is_blank_update(content: str, empty_forms: Iterable[str]) -> bool:
    """Whether ``content`` is blank or, whitespace aside, one of ``empty_forms`` (an unfilled template).

    Storing such an update would wipe what the memory holds, so ``Memory.call_tool`` ignores it.
    """
    normalized = normalize_whitespace(content)
    return not normalized or any(normalized == normalize_whitespace(form) for form in empty_forms)
