"""What only the user's source says: where a number used at a line is set, where an attribute
a compiled function guards on is assigned and read (lazyscope/model/source_files.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from lazyscope.model.source_files import assignment_before, read_in, value_origin

LOOP = textwrap.dedent("""\
    import torch
    model = torch.nn.Linear(4, 4)
    for step in range(8):
        lr = 0.1 * max(0.0, 1.0 - step / 5)
        x = torch.randn(2, 4)
        for p in model.parameters():
            p.sub_(lr * p.grad)
        model.step = step
        out = model(x)
    """)

MODULE = textwrap.dedent("""\
    class M:
        def forward(self, x):
            y = x * 2
            return y * self.step
    """)


def test_the_number_used_at_a_line_is_set_where_it_is_computed(tmp_path: Path) -> None:
    src = tmp_path / "loop.py"
    src.write_text(LOOP)
    # p is a loop variable over parameters (not a number); lr is arithmetic of numbers
    assert value_origin(str(src), 7).line == 4
    assert value_origin(str(src), 4) is None  # nothing it reads is assigned before
    assert value_origin(str(tmp_path / "missing.py"), 3) is None


def test_a_guarded_attribute_is_set_in_the_loop_and_read_in_forward(tmp_path: Path) -> None:
    loop, module = tmp_path / "loop.py", tmp_path / "m.py"
    loop.write_text(LOOP)
    module.write_text(MODULE)
    assert assignment_before(str(loop), 9, "self.step").line == 8
    assert assignment_before(str(loop), 9, "L['self'].nothing") is None
    found = read_in(str(module), 2, "self.step")
    assert (found.line, found.function) == (4, "forward")


SHARDED = textwrap.dedent("""\
    for lengths in LENGTHS:
        tokens = pad_sequence(docs, batch_first=True).to(dev)
        xs.mark_sharding(tokens, mesh, ("data", None))
        logits = head(emb(tokens))
        loss = cross_entropy(logits.flatten(0, 1), tokens.flatten())
        history = torch.cat((history, loss.view(1)))
    """)


def test_where_a_tensor_used_at_a_line_was_moved_to_the_device(tmp_path: Path) -> None:
    from lazyscope.model.source_files import transfer_origin

    src = tmp_path / "sharded.py"
    src.write_text(SHARDED)
    assert transfer_origin(str(src), 5).line == 2  # tokens, not logits (not a transfer)
    assert transfer_origin(str(src), 2) is None  # the transfer line itself
    assert transfer_origin(str(src), 6) is None  # history is carried by its own line


def test_growth_origin_is_the_cat_that_grows_what_the_line_reads(tmp_path) -> None:
    from lazyscope.model.source_files import growth_origin

    script = tmp_path / "grow.py"
    script.write_text(
        "import torch\n"
        "h = torch.zeros(1)\n"
        "def smooth(t):\n"
        "    return t.mean()\n"
        "for i in range(3):\n"
        "    loss = smooth(h)\n"
        "    h = torch.cat((h, loss.view(1)))\n"
        "    g = torch.cat((torch.ones(1), loss.view(1)))\n")
    assert growth_origin(str(script), 7).line == 7  # the cat reads h and grows it
    assert growth_origin(str(script), 6).line == 7  # loss = smooth(h): h grows at line 7
    assert growth_origin(str(script), 4).line == 7  # inside smooth, through its call
    assert growth_origin(str(script), 8) is None  # g is made anew, not grown


def test_size_origin_is_the_call_that_makes_a_size_from_a_python_number(tmp_path) -> None:
    from lazyscope.model.source_files import size_origin

    script = tmp_path / "sizes.py"
    script.write_text(
        "import torch\n"
        "import torch.nn.functional as F\n"
        "for step in range(4):\n"
        "    scale = 1.0 + 0.25 * step\n"
        "    up = F.interpolate(x, scale_factor=scale)\n"
        "    y = conv(up)\n"
        "    z = torch.randn(8, 32)\n"
        "    w = z * 2\n")
    call, set_at = size_origin(str(script), 6)
    assert (call.line, set_at.line) == (5, 4)
    assert size_origin(str(script), 8) is None  # randn(8, 32): its sizes are literals
