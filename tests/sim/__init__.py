"""A local GitHub for end-to-end tests: REST subset, git smart HTTP, signed webhooks.

Use the ``github_sim`` fixture (import it into a test module or a conftest) or
``Simulator`` directly. Every request is checked against GitHub's OpenAPI
description; see ``Simulator.violations``.
"""

from .fixtures import github_sim
from .server import Simulator
from .traffic import Fault
from .webhooks import Delivery, signature

__all__ = ["Delivery", "Fault", "Simulator", "github_sim", "signature"]
