"""Config warnings: rules that do something the user probably did not mean. Pure.

Each warning is a JSON object for the report's ``warnings[]``: ``kind``, ``message``, and
``path`` (a fork path) or ``key`` (the config key) where it applies, with ``line``, the
line of that key in the fork's config file, where known. They are shown by ``forksync
plan``, in the PR body and as check-run annotations; they never fail a sync.

A ``files:``-scoped prose rule that also rewrites code is shown by what it did in this
window: the lines upstream added where it wrote a flag, a module path, a URL, a file name
or an identifier otherwise than code does (``prose_rewrites``), counted, with the first
one as example. Only where the window has none is it worded as what the rule would do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.engine.config import CONFIG_PATH, Config, Rule
from bot.engine.translate import Translator

Warning_ = dict[str, Any]

# Where a word must never change in prose: a command-line flag, a module path, a URL. The
# examples of a warning worded as what a rule *would* do, when this window has none.
_PROBES = (("command-line flag", "--{w}-config"), ("module path", "python -m {w}.launch_server"),
           ("URL", "https://example.com/{w}/docs"))
_PATCH = re.compile(r"\.(patch|diff)$")
# Code inside a line of prose: a run of the characters flags, paths, modules and URLs use.
_SPAN = re.compile(r"[A-Za-z0-9_./:@%?=&#~+-]+")
_FILE = re.compile(r"\.(md|rst|txt|py|sh|ya?ml|json|toml|cfg|ini|html?|ipynb|patch|diff|png|"
                   r"svg|jpe?g)([#?].*)?$")  # a link's #anchor or ?query too
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
# The kinds of code a prose rule must leave as code says them, most telling first.
KINDS = ("command-line flags", "module paths", "URLs", "file names", "identifiers")


@dataclass(frozen=True)
class Rewrite:
    """One piece of code a ``files:``-scoped prose rule rewrote, in a line upstream added
    in this window, otherwise than code (a file outside the rule's scope) would say it."""

    rule: int  # its index in translate.replace
    kind: str  # one of KINDS
    upstream: str  # as upstream wrote it
    scoped: str  # as the rule wrote it
    general: str  # as the translation writes it in code
    path: str  # the fork path
    line: str  # the whole translated line, to find it in commit 1
    at: int  # which added line of the file (one line counts once per rule and kind)


def _kind(span: str) -> str | None:
    if "://" in span:
        return "URLs"
    if span.startswith("-"):
        return "command-line flags"
    if "/" in span or _FILE.search(span):
        return "file names"
    if _DOTTED.fullmatch(span):
        return "module paths"
    if "_" in span:
        return "identifiers"
    return None  # a word, or words joined by "-": prose


def _scope_sample(globs: Iterable[str]) -> str | None:
    """A path one of these globs matches (``*`` becomes a plain name), to probe with."""
    for glob in globs:
        sample = glob.replace("**", "x").replace("*", "x").replace("?", "x")
        if "[" not in sample:
            return sample
    return None


def _general_path(config: Config) -> str:
    """A path no ``files:`` rule applies to: how code outside their scope is translated."""
    scoped = [r for r in config.translate.replace if r.files]
    for path in ("forksync-probe.py", "forksync-probe.c", "forksync-probe", "x/forksync-probe"):
        if not any(r.applies_to(path) for r in scoped):
            return path
    return "forksync-probe.py"


def prose_rewrites(config: Config, translator: Translator, upstream_path: str,
                   fork_path: str, added: Sequence[str]) -> list[Rewrite]:
    """The code that the literal ``files:``-scoped rules rewrote, in the lines upstream
    added to one file, where code outside their scope says it otherwise."""
    rules = [(i, r) for i, r in enumerate(config.translate.replace)
             if r.files and not r.regex and r.applies_to(upstream_path)]
    if not rules or config.translate.is_excluded(upstream_path):
        return []
    general = _general_path(config)
    out: list[Rewrite] = []
    for at, line in enumerate(added):
        if not any(r.from_ in line for _, r in rules):
            continue
        translated = None
        for m in _SPAN.finditer(line):
            span = m.group().rstrip(".,:;")
            rule = next((i for i, r in rules if r.from_ in span and span != r.from_), None)
            kind = _kind(span) if rule is not None else None
            if rule is None or kind is None:
                continue
            scoped = translator.text(span, upstream_path)
            code = translator.text(span, general)
            if scoped != code:
                translated = translated or translator.text(line, upstream_path).rstrip("\n")
                out.append(Rewrite(rule, kind, span, scoped, code, fork_path, translated, at))
    return out


def _scope(rule: Rule) -> str:
    return f"the prose rule `{rule.from_}` → `{rule.to}` (files: {', '.join(rule.files)})"


def _where(config: Config, line: int | None) -> dict[str, Any]:
    """A rule's line in the config file, when the config is the fork's own file."""
    return {"line": line} if line and config.source == CONFIG_PATH else {}


def rule_warnings(config: Config, translator: Translator, rewrites: Sequence[Rewrite] = (),
                  locate: Callable[[Rewrite], int | None] | None = None) -> list[Warning_]:
    """Checks of the config: prose rules that rewrote code in this window (``rewrites``,
    one warning per rule and kind of code, counted in lines, with the first as example;
    ``locate`` gives its line in commit 1), or, with none here, could (worded as what
    they would do); flags that name a word only the translation writes (they are matched
    on upstream's lines)."""
    out: list[Warning_] = []
    by: dict[tuple[int, str], list[Rewrite]] = {}
    for rw in rewrites:
        by.setdefault((rw.rule, rw.kind), []).append(rw)
    for i, rule in enumerate(config.translate.replace):
        if not rule.files or rule.regex:
            continue
        found = [(kind, by[(i, kind)]) for kind in KINDS if (i, kind) in by]
        for kind, each in found:
            first = each[0]
            lines = len({(rw.path, rw.at) for rw in each})
            at = locate(first) if locate is not None else None
            where = f"`{first.path}`" + (f" L{at}" if at is not None else "")
            out.append({
                "kind": "prose-rule", "key": f"translate.replace[{i}]", "path": None,
                **_where(config, rule.line),
                "message": f"{_scope(rule)} rewrote {kind} on {lines} line"
                           f"{'s' if lines != 1 else ''} upstream added in this window, e.g. "
                           f"`{first.upstream}` became `{first.scoped}` ({where}), where code "
                           f"says `{first.general}`; add a `keep` entry or a lookaround so "
                           "code stays as code says"})
        if found:
            continue
        out += _would(config, translator, i, rule)
    targets = {r.to for r in config.translate.replace if r.to} - \
        {r.from_ for r in config.translate.replace}
    for i, flag in enumerate(config.flags):
        named = sorted(t for t in targets if re.search(re.escape(t), flag.pattern))
        if named:
            out.append({
                "kind": "flag-never-matches", "key": f"flags[{i}]", "path": None,
                **_where(config, flag.line),
                "message": f"the flag pattern `{flag.pattern}` names `{named[0]}`, a word only "
                           "the translation writes; flags are matched against upstream's "
                           "added lines before translation, so it can never match"})
    return out


def _would(config: Config, translator: Translator, i: int, rule: Rule) -> list[Warning_]:
    """One warning, worded as what the rule would do, where no line of this window shows it."""
    inside = _scope_sample(rule.files)
    if inside is None:
        return []
    general = _general_path(config)
    reached = []
    for what, probe in _PROBES:
        text = probe.format(w=rule.from_)
        scoped, code = translator.text(text, inside), translator.text(text, general)
        if scoped != code:
            reached.append((what, text, scoped, code))
    if not reached:
        return []
    what, text, scoped, code = reached[0]
    return [{"kind": "prose-rule", "key": f"translate.replace[{i}]", "path": None,
             **_where(config, rule.line),
             "message": f"{_scope(rule)} would also rewrite code in those files, e.g. the "
                        f"{what} `{text}` into `{scoped}`, where code says `{code}` (no line "
                        "upstream added in this window has such code); add a `keep` entry "
                        "or a lookaround so code stays as code says"}]


def path_warning(kind: str, fork_path: str, upstream_path: str, translated: str,
                 found: str) -> Warning_:
    """A path rule whose result the fork does not have, rescued by case or by rename."""
    how = {"path-case": f"the fork has `{found}`, which differs only in case",
           "rename-detection": f"only git's rename detection matched it to the fork's "
                               f"`{found}`"}[kind]
    return {"kind": kind, "path": fork_path, "key": "translate",
            "message": f"upstream `{upstream_path}` translates to `{translated}`, which the "
                       f"fork does not have; {how}. Fix translate.paths or translate.replace "
                       "so the path comes out as the fork names it"}


def patch_warning(fork_path: str, upstream_path: str) -> Warning_:
    return {"kind": "patch-translated", "path": fork_path, "key": "translate.exclude",
            "message": f"the patch file `{upstream_path}` is translated, so it may no longer "
                       "apply to the code it patches; add it to translate.exclude if that "
                       "code is not renamed"}


def is_patch(path: str) -> bool:
    return bool(_PATCH.search(path))


__all__ = ["KINDS", "Rewrite", "is_patch", "patch_warning", "path_warning",
           "prose_rewrites", "rule_warnings"]
