"""forksync: keep a translated downstream fork in sync with its upstream."""

__version__ = "0.1.0"
