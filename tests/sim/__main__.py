"""Run the simulator by hand: ``python -m tests.sim --port 8765 --bot-url URL --secret S``."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from .server import Simulator


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--bot-url", default=None, help="where to POST webhooks")
    parser.add_argument("--secret", default="sim-webhook-secret", help="webhook secret")
    parser.add_argument("--root", type=Path, default=None, help="keep bare repos here")
    parser.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME[=PATH]",
                        help="create a repository, optionally copying a local one")
    args = parser.parse_args()
    sim = Simulator(bot_url=args.bot_url, webhook_secret=args.secret, root=args.root,
                    host=args.host, port=args.port).start()
    for spec in args.repo:
        name, _, path = spec.partition("=")
        owner, _, repo = name.partition("/")
        sim.create_repo(owner, repo, path or None)
        print(f"repo {name}: {sim.git_url(name)}  installation {sim.installation_id(name)}  "
              f"token {sim.issue_token(name)}")
    key = sim.root / "app-key.pem"
    key.write_text(sim.private_key_pem)
    print(f"GitHub simulator on {sim.base_url} (app id {sim.app_id}, private key {key})",
          flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    sim.stop()


if __name__ == "__main__":
    main()
