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

SAME = "<the committed text>"  # the suggestion is what people committed


@dataclass(frozen=True)
class Case:
    merge: str  # the real conflict this hunk has the shape of
    hunk: Hunk
    committed: str | None  # what people committed; None: not recorded here
    tier: Tier
    suggestion: str | None = SAME  # what forksync offers; None: a question, no suggestion

    @property
    def expected(self) -> str | None:
        return self.committed if self.suggestion == SAME else self.suggestion


CASES = [
    Case("glitch-soc/mastodon@bf94a43496:app/views/settings/preferences/show.html.haml",
         # Both sides add the same field; the fork also replaces the next line. A word
         # merge wrote the field twice; upstream's lines are all in the fork's, which is
         # a starting point (right six times in ten when judged by lines).
         Hunk(ours="  .group\n    = f.input :show_app\n",
              base="  %hr/\n",
              theirs="  .group\n    = f.input :show_app\n\n  %hr/\n"),
         "  .group\n    = f.input :show_app\n", Tier.DECIDE),
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
         None, Tier.DECIDE, None),
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
         # Upstream adds a block above the line the fork changed: in code a word merge is
         # a starting point (people commit it six times in ten).
         Hunk(ours="    cmd={'b': ext} if not a() or b() else {},\n",
              base="    cmd={'b': ext} if not a() else {},\n",
              theirs="    extras={\n        't': ['t==2'],\n    },\n"
                     "    cmd={'b': ext} if not a() else {},\n", path="setup.py"),
         "    extras={\n        't': ['t==2'],\n    },\n"
         "    cmd={'b': ext} if not a() or b() else {},\n", Tier.DECIDE),
    Case("HabanaAI/vllm-fork@ca30d505bb:vllm/utils.py",
         # The fork adds an import above the line upstream changes.
         Hunk(ours="import importlib\nfrom collections import OrderedDict\n",
              base="from collections import OrderedDict\n",
              theirs="from collections import defaultdict\n", path="vllm/utils.py"),
         "import importlib\nfrom collections import defaultdict\n", Tier.DECIDE),
    Case("HabanaAI/vllm-fork@a2899d5d3c:vllm/model_executor/layers/quantization/awq.py",
         # The same shape, where people dropped the fork's edit: the starting point is not
         # what they committed, which is why it is not a Confirm.
         Hunk(ours="if is_x():\n    from pkg.x import ops\nelse:\n    from pkg._C import ops\n",
              base="from pkg._C import ops\n", theirs="from pkg import _ops as ops\n",
              path="pkg/awq.py"),
         "from pkg import _ops as ops\n", Tier.DECIDE,
         "if is_x():\n    from pkg.x import ops\nelse:\n    from pkg import _ops as ops\n"),
    Case("glitch-soc/mastodon@ec49aa8175:config/settings.yml",
         # A data file: upstream adds a setting above the one whose value the fork changed.
         Hunk(ours="  show_app: false\n", base="  show_app: true\n",
              theirs="  no_swipe: false\n  show_app: true\n", path="config/settings.yml"),
         "  no_swipe: false\n  show_app: false\n", Tier.CONFIRM),
    Case("glitch-soc/mastodon@dbe311f0e9:config/locales/simple_form.pl.yml",
         # The fork renamed a key; upstream added the next key: one entry each.
         Hunk(ours="    skin: Zmienia wygląd\n", base="    theme: Zmienia wygląd\n",
              theirs="    theme: Zmienia wygląd\n    username: Twoja nazwa\n",
              path="config/locales/simple_form.pl.yml"),
         "    skin: Zmienia wygląd\n    username: Twoja nazwa\n", Tier.CONFIRM),
    Case("HabanaAI/vllm-fork@a2899d5d3c:tests/kernels/test_cache.py",
         # Upstream deleted two lines; the fork had added a skip right after them. People
         # kept the fork's lines and upstream's deletion.
         Hunk(ours="    if not a() and t == 'f':\n        skip()\n    if x() and t != 'a':\n"
                   "        skip('x')\n",
              base="    if not a() and t == 'f':\n        skip()\n", theirs="",
              path="tests/test_cache.py"),
         "    if x() and t != 'a':\n        skip('x')\n", Tier.DECIDE),
    Case("glitch-soc/mastodon@35fbdc36f9:config/webpack/shared.js",
         # The fork deleted lines that upstream changed; people kept the deletion.
         Hunk(ours="", base="const p = keys(t).reduce(\n  (p, n) => {\n    p[n] = r(n);\n",
              theirs="const p = keys(t).reduce(\n  (p, n) => {\n    p[`t/${n}`] = r(n);\n",
              path="config/webpack/shared.js"),
         "", Tier.DECIDE),
    Case("glitch-soc/mastodon@65e994b29b:app/controllers/settings/exports_controller.rb",
         # Both sides only deleted lines; the fork deleted them all, upstream one of them.
         Hunk(ours="", base="  layout 'admin'\n\n  before_action :auth!\n  before_action :body\n",
              theirs="  layout 'admin'\n\n  before_action :auth!\n"),
         "", Tier.CONFIRM),
    Case("glitch-soc/mastodon@5cadb47238:app/controllers/auth/sessions_controller.rb",
         # Two calls of one method with other arguments are two additions, not two values
         # of one setting: both kept, the fork's first.
         Hunk(ours="  prepend_before_action :set_pack\n\n", base="",
              theirs="  prepend_before_action :authenticate, if: :two_factor?\n\n"),
         "  prepend_before_action :set_pack\n  prepend_before_action :authenticate, "
         "if: :two_factor?\n\n", Tier.DECIDE),
    Case("HabanaAI/vllm-fork@35b8bf7f7e:docker/Dockerfile.hpu",
         # Two bumps of one version: a question. Digit by digit they merged into the
         # fork's version, which people did not keep.
         Hunk(ours="FROM img/1.20.0/x:2.6.0\n", base="FROM img/1.19.1/x:2.5.1\n",
              theirs="FROM img/1.20.1/x:2.6.0\n", path="docker/Dockerfile.hpu"),
         "FROM img/1.20.1/x:2.6.0\n", Tier.DECIDE, None),
    Case("HabanaAI/vllm-fork@f4d20971ae:vllm/config.py",
         # Upstream only trims a blank line's spaces; the fork writes a docstring line.
         Hunk(ours="        device: where the weights load.\n", base="            \n",
              theirs="\n"),
         "        device: where the weights load.\n", Tier.CONFIRM),
    Case("HabanaAI/vllm-fork@2448687035:examples/online_serving/disagg_proxy_demo.py",
         # The fork only dropped a blank line; upstream adds a constructor there. People
         # took upstream's edit here, but kept the fork's blank-line edit about as often
         # elsewhere: a question, and upstream's side is never its default.
         Hunk(ours="", base="\n", theirs="\n    def __init__(self):\n        self.lock = L()\n\n"),
         "\n    def __init__(self):\n        self.lock = L()\n\n", Tier.DECIDE, None),
    Case("glitch-soc/mastodon@09c61e1376:streaming/index.js",
         # Upstream only re-aligned an assignment; the fork added an argument on the line
         # above. The fork's edit is kept as it is (the in-line layout is lost).
         Hunk(ours="  f = (a, b, c = 1) => {\n    const id  = a;\n",
              base="  f = (a, b) => {\n    const id  = a;\n",
              theirs="  f = (a, b) => {\n    const id = a;\n", path="streaming/index.js"),
         "  f = (a, b, c = 1) => {\n    const id = a;\n", Tier.CONFIRM,
         "  f = (a, b, c = 1) => {\n    const id  = a;\n"),
    Case("HabanaAI/vllm-fork@2126fd2dbb:vllm/attention/backends/hpu_attn.py",
         # The same keyword argument with two values: a question.
         Hunk(ours="                groups=meta.groups,\n", base="",
              theirs="                groups=None,\n"),
         None, Tier.DECIDE, None),
]


@pytest.mark.parametrize("case", CASES, ids=[c.merge.split(":")[0] + ":" +
                                             c.merge.rsplit("/", 1)[-1] for c in CASES])
def test_replayed_conflict(case: Case) -> None:
    p = propose_hunk(case.hunk)
    assert p.tier is case.tier, p.reason
    assert p.suggestion == case.expected
    if p.tier is Tier.DECIDE:
        assert {"ours", "theirs"} <= set(p.choices) and p.suggestion != case.hunk.theirs
        assert ("suggested" in p.choices) == (p.suggestion is not None)
