"""`.github/forksync.yml` into a `Config`: the sections, their keys, and what a schema can't check.

`bot/forksync.schema.json` describes the same shape for editors; this module is
the authority.
"""

from __future__ import annotations

import re

import regex as _regex  # type: ignore[import-untyped]  # mrab-regex ships no stubs
from yaml.nodes import MappingNode, Node, ScalarNode

from bot.engine.config.nodes import NodeReader, compose, did_you_mean, given, node_line
from bot.engine.config.regexes import scoped_source
from bot.engine.config.types import (
    ACTIONS,
    Config,
    Flag,
    PathRule,
    Policy,
    Rule,
    TranslateConfig,
)
from bot.errors import ConfigError

# The example from DESIGN.md. Kept here (not only in the docs) so that
# `check-config`, the README and the tests all use the one copy.
EXAMPLE_CONFIG = r"""upstream: {repo: THUDM/slime, branch: main}
translate:
  paths:                       # longest prefix first; regex: true for patterns
    - {from: "slime/backends/sglang_utils/", to: "vime/backends/vllm_utils/"}
  keep:                        # spans copied unchanged
    - 'sglang\.srt(\.\w+)+'
    - 'https?://github\.com/THUDM/slime\S*'
  replace:
    - {from: '--sglang-mem-fraction-static', to: '--vllm-gpu-memory-utilization'}
    - {from: 'SGLang(?=[A-Z_])', to: VLLM, regex: true}
    - {from: SGLang, to: vLLM}
    - {from: sglang, to: vLLM, files: ['*.md']}   # scoped: prose in docs
    - {from: sglang, to: vllm}
    - {from: '(?<![A-Za-z])slime(?![A-Za-z])', to: vime, regex: true}
  exclude: ['*.png', '*.svg', 'README*.md']       # content kept as is, path still translated
policies:                      # first matching glob wins
  - {paths: ['.github/workflows/**'], action: skip}      # fork keeps its own
  - {paths: ['docker/Dockerfile'],    action: ours}
  - {paths: ['docker/version.txt'],   action: theirs}
  - {paths: ['vime/rollout/vllm_rollout.py'], action: manual}  # port by hand
flags:                         # upstream lines that always need a human look
  - {pattern: '--sglang-(enable-metrics|ep-size|speculative-)', say: 'no vLLM equivalent'}
"""

# The keys each mapping may hold; any other key is refused, with a did-you-mean.
_TOP_KEYS = ("upstream", "translate", "policies", "flags", "downstream")
_UPSTREAM_KEYS = ("repo", "branch", "mirror")
_TRANSLATE_KEYS = ("paths", "keep", "replace", "exclude")
_PATH_KEYS = ("from", "to", "regex")
_RULE_KEYS = ("from", "to", "regex", "word", "files")
_POLICY_KEYS = ("paths", "action")
_FLAG_KEYS = ("pattern", "say")

# GitHub's rules: owner is alphanumeric or single hyphens, up to 39 chars; the
# repository name is letters, digits, `.`, `_` and `-`, up to 100 chars.
_REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}/[A-Za-z0-9._-]{1,100}")
# The parts of `git check-ref-format` a typo can trip over.
_BAD_BRANCH = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|^[-/.]|[/.]$|\.lock$|//")


def load_config_file(path: str) -> Config:
    """Read and load a config file; a missing or unreadable file is a ConfigError too."""
    return load_config(_read(path), path)


def check_config_file(path: str) -> str:
    """`forksync check-config`: validate a fork's file or an upstream's own; a one-line summary."""
    text = _read(path)
    if upstream_only(text, path):
        forks = load_downstream(text, path)
        return (f"{path}: ok (an upstream's file; downstream forks that may read it: "
                f"{', '.join(forks) or 'none'})")
    cfg = load_config(text, path)
    mirror = f", announced by the mirror {cfg.upstream_mirror}" if cfg.upstream_mirror else ""
    downstream = f", {len(cfg.downstream)} downstream forks" if cfg.downstream else ""
    return (f"{path}: ok (upstream {cfg.upstream_repo}@{cfg.upstream_branch}{mirror}, "
            f"{len(cfg.translate.replace)} replace rules, {len(cfg.policies)} policies"
            f"{downstream})")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError(
            path, None, "file", "expected a config file, but it does not exist"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(path, None, "file", "expected UTF-8 text") from None
    except OSError as e:
        raise ConfigError(path, None, "file", f"expected a readable file: {e.strerror}") from None
    return text


def load_config(text: str, source: str) -> Config:
    """Parse and validate a fork's config `text`; `source` names it in every error."""
    root = compose(text, source)
    if root is None:
        raise ConfigError(source, 1, "upstream", "expected a config with `upstream:`")
    r = NodeReader(source)
    top = r.mapping(root, "", _TOP_KEYS, required=("upstream",))
    repo, branch, mirror = _upstream(r, top["upstream"])
    downstream = _downstream(r, top["downstream"]) if given(top, "downstream") else ()
    translate = TranslateConfig()
    if given(top, "translate"):
        translate = _translate(r, top["translate"])
    policies: tuple[Policy, ...] = ()
    if given(top, "policies"):
        policies = tuple(
            _policy(r, n, f"policies[{i}]") for i, n in r.items(top["policies"], "policies")
        )
    flags: tuple[Flag, ...] = ()
    if given(top, "flags"):
        flags = tuple(_flag(r, n, f"flags[{i}]") for i, n in r.items(top["flags"], "flags"))
    return Config(repo, branch, translate, policies, flags, source,
                  upstream_mirror=mirror, downstream=downstream)


def upstream_only(text: str, source: str) -> bool:
    """Is this an upstream's own file (`downstream:` and no `upstream:`), not a fork's?"""
    root = compose(text, source)
    if not isinstance(root, MappingNode):
        return False
    keys = {str(k.value) for k, _ in root.value if isinstance(k, ScalarNode)}
    return "downstream" in keys and "upstream" not in keys


def load_downstream(text: str, source: str) -> tuple[str, ...]:
    """`downstream:`: the forks in other accounts that may read this repository.

    Read from the upstream's own file; only its top-level keys and `downstream` are
    checked here, since the rest (if it is a fork too) is checked when it syncs.
    """
    root = compose(text, source)
    if root is None:
        return ()
    r = NodeReader(source)
    top = r.mapping(root, "", _TOP_KEYS)
    return _downstream(r, top["downstream"]) if given(top, "downstream") else ()


def _repo_name(r: NodeReader, node: Node, key: str) -> str:
    name = r.string(node, key)
    if not _REPO.fullmatch(name):
        raise r.fail(node, key, f"expected owner/repo, got {name!r}")
    return name


def _upstream(r: NodeReader, node: Node) -> tuple[str, str, str | None]:
    """`upstream:` as (owner/repo, branch, mirror or None)."""
    upstream = r.mapping(node, "upstream", _UPSTREAM_KEYS, required=("repo",))
    repo = _repo_name(r, upstream["repo"], "upstream.repo")
    mirror = None
    if given(upstream, "mirror"):
        mirror = _repo_name(r, upstream["mirror"], "upstream.mirror")
        if mirror.lower() == repo.lower():
            raise r.fail(upstream["mirror"], "upstream.mirror",
                         "expected a repository other than upstream.repo")
    branch = "main"
    if "branch" in upstream:
        branch = r.string(upstream["branch"], "upstream.branch")
        if _BAD_BRANCH.search(branch):
            raise r.fail(
                upstream["branch"], "upstream.branch", f"expected a branch name, got {branch!r}"
            )
    return repo, branch, mirror


def _downstream(r: NodeReader, node: Node) -> tuple[str, ...]:
    """`downstream:` as owner/repo names, each once."""
    names: list[str] = []
    for i, n in r.items(node, "downstream"):
        name = _repo_name(r, n, f"downstream[{i}]")
        if name.lower() in (seen.lower() for seen in names):
            raise r.fail(n, f"downstream[{i}]", f"expected each fork once, but {name} is repeated")
        names.append(name)
    return tuple(names)


def _translate(r: NodeReader, node: Node) -> TranslateConfig:
    """`translate:`: path rules, keep spans, replace rules and excluded globs."""
    m = r.mapping(node, "translate", _TRANSLATE_KEYS)
    paths: list[PathRule] = []
    keep: list[str] = []
    replace: list[Rule] = []
    exclude: tuple[str, ...] = ()
    if given(m, "paths"):
        for i, n in r.items(m["paths"], "translate.paths"):
            paths.append(_path_rule(r, n, f"translate.paths[{i}]"))
    if given(m, "keep"):
        for i, n in r.items(m["keep"], "translate.keep"):
            key = f"translate.keep[{i}]"
            keep.append(r.regex(n, key, r.string(n, key)))
    if given(m, "replace"):
        for i, n in r.items(m["replace"], "translate.replace"):
            replace.append(_rule(r, n, f"translate.replace[{i}]"))
    if given(m, "exclude"):
        exclude = r.globs(m["exclude"], "translate.exclude")
    return TranslateConfig(tuple(paths), tuple(keep), tuple(replace), exclude)


def _path_rule(r: NodeReader, node: Node, key: str) -> PathRule:
    """`translate.paths[i]`; a regex `from` is checked, and its `to` as a template."""
    m = r.mapping(node, key, _PATH_KEYS, required=("from", "to"))
    is_regex = r.boolean(m["regex"], f"{key}.regex") if "regex" in m else False
    from_ = r.string(m["from"], f"{key}.from", nonempty=True)
    to = r.string(m["to"], f"{key}.to")
    if is_regex:
        r.regex(m["from"], f"{key}.from", from_)
        r.template(m["to"], f"{key}.to", from_, to)
    return PathRule(from_, to, is_regex)


def _rule(r: NodeReader, node: Node, key: str) -> Rule:
    """`translate.replace[i]`; a regex `from` is checked, and its `to` as a template."""
    m = r.mapping(node, key, _RULE_KEYS, required=("from", "to"))
    is_regex = r.boolean(m["regex"], f"{key}.regex") if "regex" in m else False
    word = r.boolean(m["word"], f"{key}.word") if "word" in m else False
    from_ = r.string(m["from"], f"{key}.from", nonempty=True)
    to = r.string(m["to"], f"{key}.to")
    if is_regex:
        r.regex(m["from"], f"{key}.from", from_)
        r.template(m["to"], f"{key}.to", from_, to)
    files = r.globs(m["files"], f"{key}.files", nonempty=True) if "files" in m else ()
    return Rule(from_, to, is_regex, word, files, line=node_line(node))


def _policy(r: NodeReader, node: Node, key: str) -> Policy:
    """`policies[i]`: globs and one of the known actions."""
    m = r.mapping(node, key, _POLICY_KEYS, required=("paths", "action"))
    paths = r.globs(m["paths"], f"{key}.paths", nonempty=True)
    action = r.string(m["action"], f"{key}.action")
    if action not in ACTIONS:
        raise r.fail(
            m["action"],
            f"{key}.action",
            f"expected one of {', '.join(ACTIONS)}{did_you_mean(action, ACTIONS)}",
        )
    return Policy(paths, action)


def _flag(r: NodeReader, node: Node, key: str) -> Flag:
    """`flags[i]`: a checked pattern, compiled for time-limited matching, and what to say."""
    m = r.mapping(node, key, _FLAG_KEYS, required=("pattern", "say"))
    pattern = r.regex(m["pattern"], f"{key}.pattern", r.string(m["pattern"], f"{key}.pattern"))
    say = r.string(m["say"], f"{key}.say", nonempty=True)
    return Flag(pattern, say, _regex.compile(scoped_source(pattern)), line=node_line(node))
