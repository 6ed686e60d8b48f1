"""Typed reads of PyYAML's composed nodes; each failure is a ConfigError with file, line and key.

The loader walks PyYAML's composed node tree rather than the constructed dicts,
so every key and list item keeps its line for the error message. Everything a
user can get wrong is a `ConfigError`; nothing in here lets a traceback escape.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from bot.engine.config.regexes import RegexProblem, check_regex, check_template
from bot.errors import ConfigError

_TAGS = {
    "tag:yaml.org,2002:str": "a string",
    "tag:yaml.org,2002:int": "a number",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "true/false",
    "tag:yaml.org,2002:null": "nothing",
}


def node_line(node: Node) -> int | None:
    """The 1-based line where ``node`` starts in the YAML text, if known."""
    mark = node.start_mark
    return mark.line + 1 if mark is not None else None



def _describe(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return _TAGS.get(node.tag, f"a {node.tag} value")


def compose(text: str, source: str) -> Node | None:
    """The node tree of YAML `text` (None when it holds no document); bad YAML is a ConfigError."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = e.problem or e.context or "invalid YAML"
        raise ConfigError(source, line, "yaml", f"expected valid YAML: {problem}") from None
    except yaml.YAMLError as e:
        raise ConfigError(source, None, "yaml", f"expected valid YAML: {e}") from None
    except RecursionError:
        # PyYAML composes recursively; no real config nests this deep.
        raise ConfigError(source, None, "yaml", "expected YAML nested less deeply") from None


class NodeReader:
    """Reads typed values out of nodes; every error carries `source`, a line and a key path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, node: Node | None, key: str, expected: str) -> ConfigError:
        return ConfigError(self.source, node_line(node) if node is not None else None, key,
                           expected)

    def mapping(
        self, node: Node, key: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> dict[str, Node]:
        """The mapping's values by key; unknown, duplicate and missing keys are errors."""
        if not isinstance(node, MappingNode):
            raise self.fail(
                node, key or "(top level)", f"expected a mapping, got {_describe(node)}"
            )
        out: dict[str, Node] = {}
        for knode, vnode in node.value:
            name = str(knode.value) if isinstance(knode, ScalarNode) else ""
            # An empty or non-scalar key still needs a readable key path.
            shown = name if name else "(empty key)" if isinstance(knode, ScalarNode) else "(?)"
            path = f"{key}.{shown}" if key else shown
            if name not in allowed:
                raise self.fail(
                    knode,
                    path,
                    f"unknown key{did_you_mean(name, allowed)}; "
                    f"expected one of: {', '.join(allowed)}",
                )
            if name in out:
                raise self.fail(knode, path, "expected each key once, but it is repeated")
            out[name] = vnode
        for name in required:
            if name not in out:
                raise self.fail(
                    node, f"{key}.{name}" if key else name, "expected this key, but it is missing"
                )
        return out

    def items(self, node: Node, key: str) -> Iterator[tuple[int, Node]]:
        if not isinstance(node, SequenceNode):
            raise self.fail(node, key, f"expected a list, got {_describe(node)}")
        return enumerate(node.value)

    def string(self, node: Node, key: str, *, nonempty: bool = False) -> str:
        # Only real YAML strings: `to: yes` is a boolean and `to: 1.0` a number,
        # and silently stringifying them would not be what the user wrote.
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            hint = (
                "; quote it"
                if isinstance(node, ScalarNode) and node.tag != "tag:yaml.org,2002:null"
                else ""
            )
            raise self.fail(node, key, f"expected a string, got {_describe(node)}{hint}")
        value = str(node.value)
        if nonempty and not value:
            raise self.fail(node, key, "expected a non-empty string")
        return value

    def boolean(self, node: Node, key: str) -> bool:
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
            raise self.fail(node, key, f"expected true or false, got {_describe(node)}")
        # PyYAML resolves yes/no/on/off/true/false (any case) to bool, as YAML 1.1 says.
        return str(node.value).lower() in ("yes", "true", "on")

    def globs(self, node: Node, key: str, *, nonempty: bool = False) -> tuple[str, ...]:
        out = tuple(self.string(n, f"{key}[{i}]", nonempty=True) for i, n in self.items(node, key))
        if nonempty and not out:
            raise self.fail(node, key, "expected at least one glob")
        return out

    def regex(self, node: Node, key: str, pattern: str) -> str:
        try:
            check_regex(pattern)
        except RegexProblem as e:
            raise self.fail(node, key, str(e)) from None
        return pattern

    def template(self, node: Node, key: str, pattern: str, template: str) -> None:
        try:
            check_template(pattern, template)
        except RegexProblem as e:
            raise self.fail(node, key, str(e)) from None


def given(section: dict[str, Node], key: str) -> bool:
    """Is an optional section there? `policies:` with every item commented out is empty."""
    node = section.get(key)
    return node is not None and node.tag != "tag:yaml.org,2002:null"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean `x`?)` for the closest of `choices`, or nothing when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""
