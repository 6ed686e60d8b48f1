"""A local GitHub for end-to-end tests: REST subset, git smart HTTP, signed webhooks.

Start one with the ``github_sim`` fixture (import it into a test module or a
conftest: ``from tests.sim import github_sim``) or by hand::

    sim = Simulator(bot_url="http://127.0.0.1:8080/webhook").start()   # or `with Simulator()`
    fork = sim.create_repo("vime-org", "vime", from_path=local_repo)    # auto-installs the App
    settings = Settings(app_id=sim.app_id, private_key=sim.private_key_pem,
                        api_url=sim.base_url, webhook_secret=sim.webhook_secret, ...)
    ...
    await sim.wait_deliveries()
    assert sim.violations == [] and sim.unimplemented == []
    sim.stop()

It runs on its own thread and event loop, so a bot that runs git synchronously
inside its own loop cannot deadlock it. ``base_url`` is the API root (paths as
on api.github.com) and ``git_base`` the git root (``{git_base}/owner/name.git``);
they are the same server.

What it checks, like GitHub would, and records:

- ``violations``: requests that do not match GitHub's OpenAPI description
  (``@octokit/openapi``: unknown operation, bad parameter, body not matching the
  schema; answered 422/404/400), webhooks it sent that do not match
  ``@octokit/openapi-webhooks``, and breaches of the secondary limit on
  content-creating requests (80 a minute, 500 an hour; answered 403).
- ``unimplemented``: real GitHub operations the simulator lacks (answered 404).
- ``response_violations`` / ``internal_errors``: the simulator's own bugs.

Counting: ``requests`` holds every ``RequestRecord`` (method, path, status,
kind "api" | "git" | "token" | "web", operation template, JSON body, actor, timestamp,
fault); ``writes(repo=None)`` is the non-GET REST calls, without git traffic or
token minting.

Faults: ``inject_fault(path_regex, kind, method=, times=, status=, retry_after=,
delay=)`` makes the next ``times`` matching requests fail; kinds are
``status`` (502 by default), ``timeout``, ``disconnect``,
``secondary_rate_limit`` (403 + Retry-After), ``rate_limit`` (429 +
Retry-After) and ``primary_rate_limit``. Review comments off the PR diff get
GitHub's natural ``422 Line could not be resolved``, and nothing is stored.

Webhooks (to ``bot_url``, signed with ``webhook_secret``; ``deliveries`` lists
them all) follow state changes: ``push`` for every ref a git push or helper
moves; ``pull_request`` opened / synchronize / edited / closed (merged or not);
``issue_comment`` created / edited (the bot's own too);
``pull_request_review_comment`` created (replies in review threads);
``check_run`` created / completed / rerequested; ``installation`` and
``installation_repositories``. Only installations that cover the repo and
subscribe to the event (``Installation.events``) get them; a bot slower than
10 s to answer a delivery is a violation.

Registering the App: the manifest flow's web page (``POST /settings/apps/new``)
answers with the redirect a person's confirmation gives, and
``POST /app-manifests/{code}/conversions`` makes the simulator that App: a new key,
a new webhook secret, webhooks to the manifest's URL (``apps``, ``tests.sim.apps``;
``press_the_button`` is the browser). ``create_repo(..., fork_of=...)`` makes a
GitHub fork (``parent``/``source`` in ``GET /repos``).

Helpers: ``create_repo``, ``add_collaborator``, ``add_user``, ``issue_token``,
``user_token``, ``git_url``, ``installation_id``, ``ref``, ``expire_tokens``;
async (they send webhooks): ``install``, ``add_installation_repos``,
``uninstall``, ``comment``, ``reply``, ``commit``, ``open_pr``, ``merge_pr``, ``close_pr``,
``mark_ready``, ``rerequest_check_run``, ``wait_deliveries``; inspection:
``prs``, ``pr``, ``reviews``, ``review_comments``, ``issue_comments``,
``check_runs``, ``events_sent``, ``state``.

By hand: ``python -m tests.sim --port 8765 --bot-url URL --secret S
[--repo owner/name=PATH]`` (needs ``npm ci`` for the OpenAPI descriptions).
"""

from .fixtures import github_sim
from .server import Simulator
from .traffic import Fault
from .webhooks import Delivery, signature

__all__ = ["Delivery", "Fault", "Simulator", "github_sim", "signature"]
