"""A fixed sample of real merges, as regression cases.

Each case is a minimal hunk written by hand in the shape of one conflict from a public
merge replayed by ``bench/replay_suggestions.py`` (named as repo@merge:path), with the
text the people who made that merge committed. No content is copied from those projects.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bot.engine.model import Tier
from bot.engine.suggest import Hunk, propose_hunk


@dataclass(frozen=True)
class Case:
    merge: str  # the real conflict this hunk has the shape of
    hunk: Hunk
    committed: str | None  # what people committed; None: a question, no suggestion
    tier: Tier


CASES = [
    Case("glitch-soc/mastodon@bf94a43496:app/views/settings/preferences/show.html.haml",
         # Both sides add the same field; the fork also replaces the next line. A word
         # merge wrote the field twice; upstream's edit is already in the fork's.
         Hunk(ours="  .group\n    = f.input :show_app\n",
              base="  %hr/\n",
              theirs="  .group\n    = f.input :show_app\n\n  %hr/\n"),
         "  .group\n    = f.input :show_app\n", Tier.CONFIRM),
    Case("glitch-soc/mastodon@79d898ae0a:app/javascript/styles/components.scss",
         # Upstream's two added rules are already inside the block the fork added.
         Hunk(ours="\n    &:not(.box) {\n      height: 100%;\n      fit: cover;\n    }\n",
              base="", theirs="    height: 100%;\n    fit: cover;\n"),
         "\n    &:not(.box) {\n      height: 100%;\n      fit: cover;\n    }\n", Tier.CONFIRM),
    Case("glitch-soc/mastodon@45fce0e496:app/controllers/invites_controller.rb",
         # Two Ruby methods added at one place: both are kept whole, each with its `end`.
         Hunk(ours="  def set_pack\n    use_pack 'x'\n  end\n\n",
              base="", theirs="  def invites\n    Invite.mine\n  end\n\n",
              before=("  private\n", "\n"), after=("end\n",)),
         "  def set_pack\n    use_pack 'x'\n  end\n\n  def invites\n    Invite.mine\n  end\n\n",
         Tier.DECIDE),  # the order is a guess: offered as a starting point
    Case("glitch-soc/mastodon@bf94a43496:config/settings.yml",
         # Two values for one setting: a choice, never two lines.
         Hunk(ours="  show_app: false\n", base="", theirs="  show_app: true\n"),
         None, Tier.DECIDE),
    Case("HabanaAI/vllm-fork@3e061107fa:vllm/model_executor/layers/fused_moe/layer.py",
         # Both add the same import; the fork also adds a line after it.
         Hunk(ours="from pkg.platforms import platform\n\nis_x = platform.is_x()\n",
              base="", theirs="from pkg.platforms import platform\n"),
         "from pkg.platforms import platform\n\nis_x = platform.is_x()\n", Tier.CONFIRM),
    Case("HabanaAI/vllm-fork@e411a64676:vllm/utils.py",
         # One import each, inside a sorted block of imports: kept sorted.
         Hunk(ours="import math\n", base="", theirs="import multiprocessing\n",
              before=("import gc\n", "import inspect\n"), after=("import os\n",)),
         "import math\nimport multiprocessing\n", Tier.CONFIRM),
    Case("HabanaAI/vllm-fork@ca30d505bb:setup.py",
         # Upstream adds a block above the line the fork changed.
         Hunk(ours="    cmd={'b': ext} if not a() or b() else {},\n",
              base="    cmd={'b': ext} if not a() else {},\n",
              theirs="    extras={\n        't': ['t==2'],\n    },\n"
                     "    cmd={'b': ext} if not a() else {},\n"),
         "    extras={\n        't': ['t==2'],\n    },\n"
         "    cmd={'b': ext} if not a() or b() else {},\n", Tier.CONFIRM),
    Case("HabanaAI/vllm-fork@ca30d505bb:vllm/utils.py",
         # The fork adds an import above the line upstream changes.
         Hunk(ours="import importlib\nfrom collections import OrderedDict\n",
              base="from collections import OrderedDict\n",
              theirs="from collections import defaultdict\n"),
         "import importlib\nfrom collections import defaultdict\n", Tier.CONFIRM),
    Case("HabanaAI/vllm-fork@f4d20971ae:vllm/config.py",
         # Upstream only trims a blank line's spaces; the fork writes a docstring line.
         Hunk(ours="        device: where the weights load.\n", base="            \n",
              theirs="\n"),
         "        device: where the weights load.\n", Tier.CONFIRM),
    Case("HabanaAI/vllm-fork@2448687035:examples/online_serving/disagg_proxy_demo.py",
         # The fork only dropped a blank line; upstream adds a constructor there.
         Hunk(ours="", base="\n", theirs="\n    def __init__(self):\n        self.lock = L()\n\n"),
         "\n    def __init__(self):\n        self.lock = L()\n\n", Tier.CONFIRM),
    Case("HabanaAI/vllm-fork@2126fd2dbb:vllm/attention/backends/hpu_attn.py",
         # The same keyword argument with two values: a question.
         Hunk(ours="                groups=meta.groups,\n", base="",
              theirs="                groups=None,\n"),
         None, Tier.DECIDE),
]


@pytest.mark.parametrize("case", CASES, ids=[c.merge.split(":")[0] + ":" +
                                             c.merge.rsplit("/", 1)[-1] for c in CASES])
def test_replayed_conflict(case: Case) -> None:
    p = propose_hunk(case.hunk)
    assert p.tier is case.tier, p.reason
    assert p.suggestion == case.committed
    if p.tier is Tier.DECIDE:
        assert {"ours", "theirs"} <= set(p.choices) and p.suggestion != case.hunk.theirs
