"""The fork's `.github/forksync.yml`: typed, precompiled config, or a ConfigError with line and key.

    types    the config the engine reads: Config, TranslateConfig, Rule, PathRule, Policy, Flag
    loader   YAML into a Config, section by section; EXAMPLE_CONFIG, the DESIGN.md example
    nodes    typed reads of composed YAML nodes, each error with its line and key path
    regexes  which user regexes are accepted, and compiling them for time-limited matching
    redos    the static check for regexes that backtrack catastrophically
    globs    path globs: the whole path, `*` crosses `/`

`FLAG_TIMEOUT` is not re-exported: `Flag.matches` reads it from `types`, so set it there.
"""

from bot.engine.config.globs import GlobSet, compile_glob, glob_matcher
from bot.engine.config.loader import (
    EXAMPLE_CONFIG,
    check_config_file,
    load_config,
    load_config_file,
    load_downstream,
    upstream_only,
)
from bot.engine.config.redos import redos_reason
from bot.engine.config.regexes import (
    RegexProblem,
    check_regex,
    check_template,
    compile_pattern,
    scoped_source,
)
from bot.engine.config.types import (
    ACTIONS,
    CONFIG_PATH,
    Config,
    Flag,
    FlagTimeoutError,
    MatchLike,
    PathRule,
    PatternLike,
    Policy,
    Rule,
    TranslateConfig,
)

__all__ = [
    "ACTIONS",
    "CONFIG_PATH",
    "EXAMPLE_CONFIG",
    "Config",
    "Flag",
    "FlagTimeoutError",
    "GlobSet",
    "MatchLike",
    "PathRule",
    "PatternLike",
    "Policy",
    "RegexProblem",
    "Rule",
    "TranslateConfig",
    "check_config_file",
    "check_regex",
    "check_template",
    "compile_glob",
    "compile_pattern",
    "glob_matcher",
    "load_config",
    "load_config_file",
    "load_downstream",
    "redos_reason",
    "scoped_source",
    "upstream_only",
]
