"""Config warnings: rules that do something the user probably did not mean. Pure.

Each warning is a JSON object for the report's ``warnings[]``: ``kind``, ``message``, and
``path`` (a fork path) or ``key`` (the config key) where it applies, with ``line``, the
line of that key in the fork's config file, where known. They are shown by ``forksync
plan``, in the PR body and as check-run annotations; they never fail a sync.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from bot.engine.config import CONFIG_PATH, Config
from bot.engine.translate import Translator

Warning_ = dict[str, Any]

# Where a word must never change in prose: a command-line flag, a module path, a URL.
_PROBES = (("command-line flag", "--{w}-config"), ("module path", "python -m {w}.launch_server"),
           ("URL", "https://example.com/{w}/docs"))
_PATCH = re.compile(r"\.(patch|diff)$")


def _scope_sample(globs: Iterable[str]) -> str | None:
    """A path one of these globs matches (``*`` becomes a plain name), to probe with."""
    for glob in globs:
        sample = glob.replace("**", "x").replace("*", "x").replace("?", "x")
        if "[" not in sample:
            return sample
    return None


def rule_warnings(config: Config, translator: Translator) -> list[Warning_]:
    """Static checks of the config: prose rules that reach flags, modules and URLs; flags
    that name a word only the translation writes (they are matched on upstream's lines)."""
    out: list[Warning_] = []
    for i, rule in enumerate(config.translate.replace):
        if not rule.files or rule.regex:
            continue
        inside = _scope_sample(rule.files)
        if inside is None:
            continue
        for what, probe in _PROBES:
            text = probe.format(w=rule.from_)
            scoped = translator.text(text, inside)
            general = translator.text(text, "forksync-probe.py")
            if scoped != general:
                out.append({
                    "kind": "prose-rule", "key": f"translate.replace[{i}]", "path": None,
                    **_where(config, rule.line),
                    "message": f"the prose rule `{rule.from_}` → `{rule.to}` (files: "
                               f"{', '.join(rule.files)}) also rewrites a {what}: `{text}` "
                               f"becomes `{scoped}`, where code says `{general}`; add a "
                               "`keep` entry or a lookaround so it stays as code says"})
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


def _where(config: Config, line: int | None) -> dict[str, Any]:
    """A rule's line in the config file, when the config is the fork's own file."""
    return {"line": line} if line and config.source == CONFIG_PATH else {}


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


__all__ = ["is_patch", "patch_warning", "path_warning", "rule_warnings"]
