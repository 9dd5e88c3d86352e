"""Schema-mode working memory: a JSON Schema, the two forms derived from it, and validation.

Schema-mode memory starts as ``{}`` and grows by RFC 7396 merge patches, so two
forms of the developer's schema are used rather than the schema itself:

* the **document** form, which the stored memory must satisfy: the schema with
  every ``required`` list dropped along the paths that merges reach (the root and
  object properties, recursively), because memory is filled in bit by bit;
* the **patch** form, which every update must satisfy: the document form with
  every such property also nullable (``null`` deletes the key).

Arrays are replaced whole by a merge, so everything under an array keeps the
original schema, ``required`` included.

The derivation is checked to be *closed under merge*: for every document valid
against the document form and every patch valid against the patch form, the
merged result is valid against the document form again. Keywords that would
break that (``minProperties``, ``maxProperties``, ``dependentRequired``,
``dependentSchemas``, ``dependencies``, ``unevaluatedProperties``,
``if``/``then``/``else``, ``not``, ``enum``/``const`` holding objects, a
``oneOf`` with two variants that accept objects, an ``anyOf`` with two variants
that constrain objects, a non-local ``$ref``) are rejected where a merge can reach
them, with the JSON path of the offending keyword. This is what lets a patch be
validated *before* the atomic merge in the database: whatever other writers merge
concurrently, a valid patch applied to a valid document stays valid.

Validation uses the JSON Schema only (``model_json_schema()`` of a Pydantic
model): the model's Python validators do not run, and unknown keys are accepted
unless the model forbids them (``extra="forbid"``).

``jsonschema`` (and ``pydantic`` for model classes) are imported only when a
schema is used; both come with ``pip install 'workmem[schema]'``.
"""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Literal
from urllib.parse import quote, unquote

from workmem.errors import MissingDriverError, ValidationError
from workmem.validation import validate_json_object

__all__ = ["SchemaInput", "WorkingMemorySchema", "import_schema_dependency"]

SchemaInput = Mapping[str, Any] | type
"""A JSON Schema as a dict, or a Pydantic (v2) model class."""

_Form = Literal["patch", "document"]

_MERGE_UNSAFE = (
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "if",
    "then",
    "else",
    "not",
)
_OBJECT_CONSTRAINTS = ("properties", "additionalProperties", "patternProperties", "propertyNames")
_NULL: dict[str, Any] = {"type": "null"}
_MAX_ERRORS = 5


def import_schema_dependency(module: str) -> ModuleType:
    """Import ``jsonschema`` or ``pydantic``, or raise :class:`MissingDriverError` naming ``workmem[schema]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDriverError(f"schema-mode working memory needs {module!r}: pip install 'workmem[schema]'") from exc


def _schema_dict(schema: object) -> dict[str, Any]:
    if isinstance(schema, type):
        pydantic = import_schema_dependency("pydantic")
        if not issubclass(schema, pydantic.BaseModel):
            raise ValidationError(f"schema must be a JSON Schema dict or a Pydantic model class, not {schema.__name__}")
        generated: dict[str, Any] = getattr(schema, "model_json_schema")()  # noqa: B009 (pydantic is untyped here)
        return validate_json_object(generated, "schema")
    if isinstance(schema, Mapping):
        return validate_json_object(schema, "schema")
    raise ValidationError(f"schema must be a JSON Schema dict or a Pydantic model class, not {type(schema).__name__}")


def _pointer_token(token: str) -> str:
    return unquote(token).replace("~1", "/").replace("~0", "~")


def _pointer_escape(token: str) -> str:
    return quote(token.replace("~", "~0").replace("/", "~1"), safe="~")


def _type_set(schema: Mapping[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else {str(k) for k in kind}


class _Deriver:
    """Builds the document and patch forms of one root schema (no I/O, no jsonschema needed)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.new_defs: dict[tuple[str, str], Any] = {}  # (container, name) -> derived schema
        self.ref_names: dict[tuple[str, _Form], tuple[str, str]] = {}  # (ref, form) -> (container, name)

    # -- references ------------------------------------------------------------------

    def resolve(self, ref: str, path: str) -> tuple[str, str, Any]:
        """``(container, name, target)`` of a local ``$ref``; ``#`` is the root itself."""
        if ref == "#":
            return "$defs", "root", self.root
        parts = ref.split("/")
        if len(parts) != 3 or parts[0] != "#" or parts[1] not in ("$defs", "definitions"):
            raise ValidationError(
                f"schema at {path}: only local references like '#/$defs/Name' are supported, not {ref!r}"
            )
        container, name = parts[1], _pointer_token(parts[2])
        defs = self.root.get(container)
        if not isinstance(defs, dict) or name not in defs:
            raise ValidationError(f"schema at {path}: reference {ref!r} points to nothing")
        return container, name, defs[name]

    def deref(self, schema: Any, path: str) -> Any:
        seen: set[str] = set()
        while isinstance(schema, dict) and "$ref" in schema and len(schema) == 1:
            ref = schema["$ref"]
            if ref in seen:
                return True
            seen.add(ref)
            schema = self.resolve(ref, path)[2]
        return schema

    def derived_ref(self, ref: str, form: _Form, path: str) -> str:
        key = (ref, form)
        if key not in self.ref_names:
            container, name, target = self.resolve(ref, path)
            found = self.root.get(container)
            existing: dict[str, Any] = found if isinstance(found, dict) else {}
            new_name = f"{name}__{form}"
            while new_name in existing or (container, new_name) in self.new_defs:
                new_name += "_"
            self.ref_names[key] = (container, new_name)
            self.new_defs[(container, new_name)] = True  # placeholder while recursing
            self.new_defs[(container, new_name)] = self.derive(target, form, f"{path}->{ref}")
        container, new_name = self.ref_names[key]
        return f"#/{container}/{_pointer_escape(new_name)}"

    # -- which schemas take objects ----------------------------------------------------

    def accepts_objects(self, schema: Any, path: str, depth: int = 0) -> bool:
        """Whether some object may be valid (over-approximated: ``True`` when unsure)."""
        schema = self.deref(schema, path)
        if isinstance(schema, bool) or not isinstance(schema, dict) or depth > 16:
            return schema is not False
        types = _type_set(schema)
        if types is not None and "object" not in types:
            return False
        if "const" in schema and not isinstance(schema["const"], dict):
            return False
        if "enum" in schema and not any(isinstance(v, dict) for v in schema["enum"] or []):
            return False
        if "$ref" in schema and not self.accepts_objects({"$ref": schema["$ref"]}, path, depth + 1):
            return False
        if isinstance(schema.get("allOf"), list) and not all(
            self.accepts_objects(s, path, depth + 1) for s in schema["allOf"]
        ):
            return False
        for keyword in ("anyOf", "oneOf"):
            variants = schema.get(keyword)
            if isinstance(variants, list) and not any(self.accepts_objects(s, path, depth + 1) for s in variants):
                return False
        return True

    def constrains_objects(self, schema: Any, path: str, depth: int = 0) -> bool:
        """Whether the schema accepts objects and restricts which ones (after ``required`` is dropped)."""
        if not self.accepts_objects(schema, path, depth):
            return False
        schema = self.deref(schema, path)
        if not isinstance(schema, dict) or depth > 16:
            return False
        if any(k in schema and schema[k] is not True for k in _OBJECT_CONSTRAINTS):
            return True
        if "$ref" in schema and self.constrains_objects({"$ref": schema["$ref"]}, path, depth + 1):
            return True
        return any(
            isinstance(schema.get(keyword), list)
            and any(self.constrains_objects(s, path, depth + 1) for s in schema[keyword])
            for keyword in ("allOf", "anyOf", "oneOf")
        )

    # -- the derivation --------------------------------------------------------------------

    def nullable(self, schema: Any, form: _Form) -> Any:
        if form == "document" or schema is True:
            return schema
        if schema is False:
            return dict(_NULL)
        return {"anyOf": [schema, dict(_NULL)]}

    def derive(self, schema: Any, form: _Form, path: str) -> Any:
        """The ``form`` of ``schema`` found where a merge patch reaches (root or object property)."""
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            raise ValidationError(f"schema at {path} must be an object or a boolean")
        if not self.accepts_objects(schema, path):
            return copy.deepcopy(schema)  # a merge replaces such a value whole: nothing to derive
        for keyword in _MERGE_UNSAFE:
            if keyword in schema:
                raise ValidationError(
                    f"schema at {path}: {keyword!r} cannot be kept valid by merge updates "
                    "(a merge adds or deletes one key at a time); move it under an array or drop it"
                )
        for keyword in ("enum", "const"):
            values = schema.get(keyword) if keyword == "enum" else [schema.get(keyword)]
            if keyword in schema and any(isinstance(v, dict) for v in values or []):
                raise ValidationError(f"schema at {path}: {keyword!r} with object values cannot be merged into")
        # A union with more than one variant a merge could land in: it could mix them.
        for keyword, counts, variants, instead in (
            ("oneOf", self.accepts_objects, "variants that accept objects", "use 'anyOf' with one object variant"),
            ("anyOf", self.constrains_objects, "object variants", "keep one object variant"),
        ):
            if isinstance(schema.get(keyword), list):
                count = sum(1 for variant in schema[keyword] if counts(variant, path))
                if count > 1:
                    raise ValidationError(
                        f"schema at {path}: {keyword!r} has {count} {variants}; a merge could mix them "
                        f"({instead}, or keep the variants in an array)"
                    )
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "required" or (key in ("$defs", "definitions") and path == "$"):
                continue
            if key == "$ref":
                out[key] = self.derived_ref(value, form, path)
            elif key in ("properties", "patternProperties") and isinstance(value, dict):
                out[key] = {
                    name: self.nullable(self.derive(sub, form, f"{path}.{name}"), form) for name, sub in value.items()
                }
            elif key == "additionalProperties" and not isinstance(value, bool):
                out[key] = self.nullable(self.derive(value, form, f"{path}.*"), form)
            elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
                out[key] = [self.derive(sub, form, f"{path}/{key}[{i}]") for i, sub in enumerate(value)]
            else:
                out[key] = copy.deepcopy(value)
        return out

    def form(self, form: _Form) -> dict[str, Any]:
        """The whole derived root schema, with the definitions it uses (original or derived)."""
        self.new_defs.clear()
        self.ref_names.clear()
        body = self.derive(self.root, form, "$")
        assert isinstance(body, dict)
        defs: dict[str, dict[str, Any]] = {}
        for container in ("$defs", "definitions"):
            originals = self.root.get(container)
            defs[container] = {
                **copy.deepcopy(originals if isinstance(originals, dict) else {}),
                **{name: s for (c, name), s in self.new_defs.items() if c == container},
            }
        used: set[tuple[str, str]] = set()
        pending = _refs_in(body)
        while pending:
            ref = pending.pop()
            parts = ref.split("/")
            if len(parts) != 3:
                continue
            key = (parts[1], _pointer_token(parts[2]))
            if key not in used and key[1] in defs.get(key[0], {}):
                used.add(key)
                pending.extend(_refs_in(defs[key[0]][key[1]]))
        for container, entries in defs.items():
            kept = {name: entries[name] for name in entries if (container, name) in used}
            if kept:
                body[container] = kept
        return body


def _refs_in(node: Any) -> list[str]:
    """Every ``$ref`` string anywhere inside ``node``."""
    found: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                found.append(ref)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


class WorkingMemorySchema:
    """A developer's JSON Schema (or Pydantic model) and its document and patch forms.

    Construction checks the schema (a ``ValidationError`` names what is wrong)
    and compiles both validators.
    """

    def __init__(self, schema: SchemaInput) -> None:
        jsonschema = import_schema_dependency("jsonschema")
        source = _schema_dict(schema)
        validator_class = jsonschema.validators.validator_for(source, default=jsonschema.Draft202012Validator)
        try:
            validator_class.check_schema(source)
        except jsonschema.SchemaError as exc:
            raise ValidationError(f"schema is not a valid JSON Schema: {exc.message}") from None
        deriver = _Deriver(source)
        if not deriver.accepts_objects(source, "$"):
            raise ValidationError("working memory schema must describe a JSON object")
        self.source: dict[str, Any] = source
        """The schema as given (a Pydantic model's ``model_json_schema()``)."""
        self.document: dict[str, Any] = deriver.form("document")
        """What stored memory must satisfy: every property optional."""
        self.patch: dict[str, Any] = deriver.form("patch")
        """What an update must satisfy: every property optional and nullable."""
        self._document_validator = validator_class(self.document)
        self._patch_validator = validator_class(self.patch)

    def __repr__(self) -> str:
        return f"WorkingMemorySchema(title={self.source.get('title')!r})"

    @property
    def top_level_properties(self) -> list[str]:
        """Names of the root object's properties (following a root ``$ref``)."""
        root: Any = self.source
        seen = 0
        while isinstance(root, dict) and "$ref" in root and seen < 8:
            root = _Deriver(self.source).resolve(root["$ref"], "$")[2]
            seen += 1
        props = root.get("properties") if isinstance(root, dict) else None
        return list(props) if isinstance(props, dict) else []

    def patch_errors(self, patch: object) -> list[str]:
        """Readable problems of ``patch`` against the patch form; empty when it is valid."""
        return self._errors(self._patch_validator, patch)

    def document_errors(self, document: object) -> list[str]:
        """Readable problems of ``document`` against the document form; empty when it is valid."""
        return self._errors(self._document_validator, document)

    def _errors(self, validator: Any, instance: object) -> list[str]:
        messages: list[str] = []
        errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
        for error in errors[:_MAX_ERRORS]:
            best = _most_specific(error)
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in best.absolute_path)
            messages.append(f"at ${where}: {_shorten(_as_json(best))}")
        if len(errors) > _MAX_ERRORS:
            messages.append(f"... and {len(errors) - _MAX_ERRORS} more")
        return messages

    def to_json(self, form: Literal["source", "document", "patch"] = "document") -> str:
        """One form as indented JSON text."""
        return json.dumps(getattr(self, form), indent=2, ensure_ascii=False)


def _most_specific(error: Any) -> Any:
    """Descend into ``anyOf``/``oneOf`` failures, skipping the ``null`` branches the patch form adds."""
    while error.context:
        branches = [e for e in error.context if not (e.validator == "type" and e.validator_value == "null")]
        if not branches:
            break
        error = max(branches, key=lambda e: len(e.absolute_path))
    return error


def _as_json(error: Any) -> str:
    """jsonschema's message with the value it starts with written as JSON (``true``, ``null``, ``"3"``), not Python."""
    message: str = error.message
    shown = repr(error.instance)
    if not message.startswith(shown):
        return message
    try:
        return json.dumps(error.instance, ensure_ascii=False) + message[len(shown) :]
    except (TypeError, ValueError):
        return message


def _shorten(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."
