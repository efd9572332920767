"""A validator for the subset of JSON Schema (draft 2020-12) that docs/qrl-backend-1.schema.json uses:
type, properties, required, additionalProperties, propertyNames, items, enum, const, anyOf, minimum,
maximum, minItems, minLength, $ref into $defs. jsonschema is not a dependency of the SDK; a keyword
outside this subset is an error, so the validator cannot silently pass a schema it does not read."""

from __future__ import annotations

from typing import Any, Dict, List

KNOWN = {"$schema", "$defs", "$ref", "type", "properties", "required", "additionalProperties", "propertyNames", "items",
         "enum", "const", "anyOf", "minimum", "maximum", "minItems", "minLength", "readOnly", "description"}

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def errors(value: Any, schema: Any, root: Dict[str, Any], path: str = "") -> List[str]:
    """Every violation of `schema` by `value`, as 'path: what' lines (empty when valid)."""
    if schema is True or schema == {}:
        return []
    if schema is False:
        return [f"{path or '(root)'}: not allowed"]
    unknown = set(schema) - KNOWN
    if unknown:
        raise ValueError(f"schema keyword(s) outside the supported subset: {sorted(unknown)}")
    here = path or "(root)"
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref
        return errors(value, root["$defs"][ref[len("#/$defs/"):]], root, path)
    if "anyOf" in schema:
        if all(errors(value, s, root, path) for s in schema["anyOf"]):
            return [f"{here}: matches none of {len(schema['anyOf'])} forms"]
    out: List[str] = []
    t = schema.get("type")
    if t is not None and not _TYPES[t](value):
        return [f"{here}: expected {t}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{here}: {value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{here}: expected {schema['const']!r}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        out.append(f"{here}: {value} < {schema['minimum']}")
    if "maximum" in schema and isinstance(value, (int, float)) and value > schema["maximum"]:
        out.append(f"{here}: {value} > {schema['maximum']}")
    if "minLength" in schema and isinstance(value, str) and len(value) < schema["minLength"]:
        out.append(f"{here}: shorter than {schema['minLength']}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append(f"{here}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, v in enumerate(value):
                out += errors(v, schema["items"], root, f"{path}.{i}" if path else str(i))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in value:
                out.append(f"{here}: missing required {k!r}")
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if k in props:
                out += errors(v, props[k], root, sub)
            elif "additionalProperties" in schema:
                out += errors(v, schema["additionalProperties"], root, sub)
            if "propertyNames" in schema:
                out += errors(k, schema["propertyNames"], root, sub)
    return out
