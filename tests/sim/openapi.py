"""GitHub's published OpenAPI descriptions, used to check every request and webhook.

The REST description (``@octokit/openapi``) is OpenAPI 3.0, so its schemas use
``nullable``; the webhooks description (``@octokit/openapi-webhooks``) is
OpenAPI 3.1, which is plain JSON Schema 2020-12. Both are loaded once per
process and dereferenced lazily: only the operations a test actually calls
pay for building a validator.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO_ROOT / "node_modules" / "@octokit"
REST_SPEC = NODE_MODULES / "openapi" / "generated" / "api.github.com.json"
WEBHOOK_SPEC = NODE_MODULES / "openapi-webhooks" / "generated" / "api.github.com.json"

# Path parameters that GitHub lets contain slashes (refs, file paths, branches).
_GREEDY_PARAMS = frozenset({"ref", "path", "branch", "basehead", "file_path", "name"})
_METHODS = ("get", "post", "put", "patch", "delete", "head")
_MAX_MESSAGE = 300


class SpecMissingError(RuntimeError):
    """The npm packages with GitHub's OpenAPI descriptions are not installed."""


def _require(path: Path) -> Path:
    if not path.is_file():
        raise SpecMissingError(
            f"{path} is missing: run `npm ci` in {REPO_ROOT} to install GitHub's OpenAPI "
            "descriptions (@octokit/openapi, @octokit/openapi-webhooks) used by tests/sim."
        )
    return path


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def _where(error: ValidationError) -> str:
    return "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


class _Deref:
    """Inline ``$ref``s on demand, memoised per pointer; optionally rewrite OpenAPI 3.0 nullable."""

    def __init__(self, doc: Mapping[str, Any], *, openapi30: bool) -> None:
        self._doc = doc
        self._openapi30 = openapi30
        self._memo: dict[str, Any] = {}
        self._active: set[str] = set()

    def pointer(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ValueError(f"only local $refs are supported, got {ref}")
        node: Any = self._doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.resolve(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in self._memo:
                return self._memo[ref]
            if ref in self._active:
                # A recursive schema: accept anything below the cycle rather than loop.
                return {}
            self._active.add(ref)
            try:
                resolved = self.resolve(self.pointer(ref))
            finally:
                self._active.discard(ref)
            self._memo[ref] = resolved
            return resolved
        out = {key: self.resolve(value) for key, value in node.items()}
        if self._openapi30 and out.pop("nullable", False) is True:
            out = _allow_null(out)
        return out


def _allow_null(schema: dict[str, Any]) -> dict[str, Any]:
    if "type" in schema and isinstance(schema["type"], str):
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


@dataclass(frozen=True)
class Operation:
    """One operation of the REST description: a method on a path template."""

    method: str
    template: str
    operation_id: str
    regex: re.Pattern[str]
    literal_chars: int
    raw: Mapping[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class Match:
    operation: Operation
    params: dict[str, str]


def _template_regex(template: str, *, greedy: bool) -> re.Pattern[str]:
    out = []
    for piece in re.split(r"(\{[^}]+\})", template):
        if piece.startswith("{") and piece.endswith("}"):
            name = piece[1:-1]
            body = ".+" if greedy and name in _GREEDY_PARAMS else "[^/]+"
            out.append(f"(?P<{name.replace('-', '_')}>{body})")
        else:
            out.append(re.escape(piece))
    return re.compile("^" + "".join(out) + "$")


class RestSpec:
    """Operations of ``api.github.com`` indexed for matching, with lazily built validators."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self._deref = _Deref(doc, openapi30=True)
        self._strict: dict[tuple[str, int], list[Operation]] = {}
        self._greedy: dict[str, list[tuple[re.Pattern[str], Operation]]] = {}
        self._validators: dict[tuple[str, str], Draft202012Validator | None] = {}
        self._params: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for template, item in doc["paths"].items():
            segments = template.count("/")
            literal = len(re.sub(r"\{[^}]+\}", "", template))
            for method in _METHODS:
                raw = item.get(method)
                if raw is None:
                    continue
                op = Operation(method.upper(), template, raw.get("operationId", ""),
                               _template_regex(template, greedy=False), literal, raw)
                self._strict.setdefault((op.method, segments), []).append(op)
                if "{" in template:
                    self._greedy.setdefault(op.method, []).append(
                        (_template_regex(template, greedy=True), op))
        for ops in self._strict.values():
            ops.sort(key=lambda o: -o.literal_chars)
        for pairs in self._greedy.values():
            pairs.sort(key=lambda p: -p[1].literal_chars)

    @classmethod
    def load(cls, path: Path = REST_SPEC) -> RestSpec:
        with _require(path).open("rb") as fh:
            return cls(json.load(fh))

    def match(self, method: str, raw_path: str) -> Match | None:
        """Find the operation for a request path (still percent-encoded), most literal first."""
        path = raw_path.rstrip("/") or "/"
        for op in self._strict.get((method.upper(), path.count("/")), []):
            m = op.regex.match(path)
            if m:
                return Match(op, self._params_of(op, m))
        for regex, op in self._greedy.get(method.upper(), []):
            m = regex.match(path)
            if m:
                return Match(op, self._params_of(op, m))
        return None

    def path_exists(self, raw_path: str) -> bool:
        return any(self.match(method, raw_path) for method in _METHODS)

    @staticmethod
    def _params_of(op: Operation, m: re.Match[str]) -> dict[str, str]:
        names = re.findall(r"\{([^}]+)\}", op.template)
        return {name: unquote(m.group(name.replace("-", "_"))) for name in names}

    def parameters(self, op: Operation) -> list[dict[str, Any]]:
        key = (op.method, op.template)
        if key not in self._params:
            self._params[key] = [self._deref.resolve(p) for p in op.raw.get("parameters", [])]
        return self._params[key]

    def _body_validator(self, op: Operation) -> Draft202012Validator | None:
        key = (op.method, op.template)
        if key not in self._validators:
            schema = (op.raw.get("requestBody", {}).get("content", {})
                      .get("application/json", {}).get("schema"))
            self._validators[key] = (
                Draft202012Validator(self._deref.resolve(schema)) if schema is not None else None)
        return self._validators[key]

    def _response_validator(self, op: Operation, status: int) -> Draft202012Validator | None:
        key = (op.method, f"{op.template}#{status}")
        if key not in self._validators:
            response = op.raw.get("responses", {}).get(str(status))
            schema = None
            if response is not None:
                response = self._deref.resolve(response)
                schema = response.get("content", {}).get("application/json", {}).get("schema")
            self._validators[key] = Draft202012Validator(schema) if schema is not None else None
        return self._validators[key]

    def validate_request(self, match: Match, query: Mapping[str, Sequence[str]],
                         body: Any, *, has_body: bool) -> list[str]:
        """Everything wrong with a request according to the spec; empty when it conforms."""
        op = match.operation
        where = f"{op.method} {op.template}"
        problems: list[str] = []
        for param in self.parameters(op):
            location, name = param.get("in"), param.get("name", "")
            if location == "path":
                value: str | None = match.params.get(name)
            elif location == "query":
                values = query.get(name)
                value = values[-1] if values else None
            else:
                continue  # headers and cookies: the HTTP clients own those
            if value is None:
                if param.get("required"):
                    problems.append(f"{where}: missing required {location} parameter {name!r}")
                continue
            problems.extend(_check_param(where, name, value, param.get("schema", {})))
        request_body = op.raw.get("requestBody")
        if not has_body:
            if request_body is not None and request_body.get("required"):
                problems.append(f"{where}: a JSON request body is required")
            return problems
        validator = self._body_validator(op)
        if validator is None:
            if request_body is None and body not in (None, {}, ""):
                problems.append(f"{where}: this operation takes no request body")
            return problems
        problems.extend(
            _short(f"{where}: body{_where(e)}: {e.message}")
            for e in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        )
        return problems

    def validate_response(self, match: Match, status: int, body: Any) -> list[str]:
        """Check one of the simulator's own answers against the documented response schema."""
        validator = self._response_validator(match.operation, status)
        if validator is None:
            return []
        op = match.operation
        return [_short(f"response {status} of {op.method} {op.template}: {_where(e)}: {e.message}")
                for e in validator.iter_errors(body)]


def _check_param(where: str, name: str, value: str, schema: Mapping[str, Any]) -> Iterator[str]:
    kind = schema.get("type")
    typed: Any = value
    if kind == "integer":
        try:
            typed = int(value)
        except ValueError:
            yield f"{where}: parameter {name!r} must be an integer, got {value!r}"
            return
    elif kind == "boolean":
        if value not in ("true", "false"):
            yield f"{where}: parameter {name!r} must be true or false, got {value!r}"
            return
        typed = value == "true"
    elif kind == "array":
        typed = value.split(",")
    for error in Draft202012Validator(dict(schema)).iter_errors(typed):
        yield _short(f"{where}: parameter {name!r}: {error.message}")


class WebhookSpec:
    """Payload schemas of ``@octokit/openapi-webhooks``, keyed like ``pull-request-opened``."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self._doc = doc
        self._deref = _Deref(doc, openapi30=False)
        self._validators: dict[str, Draft202012Validator] = {}

    @classmethod
    def load(cls, path: Path = WEBHOOK_SPEC) -> WebhookSpec:
        with _require(path).open("rb") as fh:
            return cls(json.load(fh))

    @staticmethod
    def key(event: str, action: str | None) -> str:
        name = event.replace("_", "-")
        return f"{name}-{action.replace('_', '-')}" if action else name

    def validate(self, event: str, payload: Mapping[str, Any]) -> list[str]:
        action = payload.get("action")
        key = self.key(event, action if isinstance(action, str) else None)
        if key not in self._validators:
            hook = self._doc["webhooks"].get(key)
            if hook is None:
                return [f"webhook {key}: no such event in the webhooks description"]
            schema = hook["post"]["requestBody"]["content"]["application/json"]["schema"]
            self._validators[key] = Draft202012Validator(self._deref.resolve(schema))
        return [_short(f"webhook {key}: payload{_where(e)}: {e.message}")
                for e in self._validators[key].iter_errors(payload)]


@functools.cache
def rest_spec() -> RestSpec:
    """The REST description, loaded once per process."""
    return RestSpec.load()


@functools.cache
def webhook_spec() -> WebhookSpec:
    """The webhooks description, loaded once per process."""
    return WebhookSpec.load()
