"""JAX's cache-miss explanations read and said in the user's names (pure: no jax).

The messages are jax 0.10.2's own, captured from real runs of torchax 0.0.13 programs (a
torchax jitted function is ``jax.jit(partial(call_torch, f))``: JAX names its arguments
``args[i]``)."""

from __future__ import annotations

import functools

from lazyscope.backends.torchax.collector import explain_compile, missing_op
from lazyscope.backends.torchax.explain import (
    NEW_FUNCTION,
    TREE,
    TYPES,
    parse_miss,
    shaped,
    static_value,
    user_path,
)
from lazyscope.backends.torchax.jit import JitInfo, describe, jax_name
from lazyscope.model import Frame

SP = "/venv/lib/python3.11/site-packages"
NEVER = (f"TRACING CACHE MISS at {SP}/torchax/interop.py:277:18 (call_jax):\n"
         "  never seen function:\n"
         f"    call_torch id=140268614881488 defined at {SP}/torchax/interop.py:281")
NEVER_AGAIN = NEVER + ("\n  but seen another function defined on the same line; maybe the "
                       "function is\n  being re-defined repeatedly, preventing caching?")
TYPES_MSG = (f"TRACING CACHE MISS at {SP}/torchax/interop.py:277:18 (call_jax):\n"
             f"  for call_torch defined at {SP}/torchax/interop.py:281\n"
             "  all previously seen cache keys differ. For the closest previous key:\n"
             "  different input types:\n"
             "  * at args[1]['x'], now f32[16,4] and before f32[8,4]")
WEAK_MSG = ("TRACING CACHE MISS at /tmp/e2.py:34:36 (<module>):\n"
            "  for <lambda> defined at /tmp/e2.py:33\n"
            "  all previously seen cache keys differ. For the closest previous key:\n"
            "  different input types:\n"
            "  * at b, now f32[]{weak_type=False} and before f32[]{weak_type=True}"
            "https://docs.jax.dev/en/latest/type_promotion.html#weak-types")
STATIC_MSG = (f"TRACING CACHE MISS at {SP}/torchax/interop.py:277:18 (call_jax):\n"
              f"  for call_torch defined at {SP}/torchax/interop.py:281\n"
              "  all previously seen cache keys differ. For the closest previous key:\n"
              "  different input pytree:\n"
              "  * at input path [0][2], now <class 'jax._src.tree_util.Static'> with pytree "
              "metadata Static(val=3.0) and before <class 'jax._src.tree_util.Static'> with "
              "pytree metadata Static(val=2.0), so the pytree node metadata does not match")
TREE_MSG = (f"TRACING CACHE MISS at {SP}/torchax/interop.py:277:18 (call_jax):\n"
            f"  for call_torch defined at {SP}/torchax/interop.py:281\n"
            "  all previously seen cache keys differ. For the closest previous key:\n"
            "  different input pytree:\n"
            "  * at input path [0][1], now <class 'dict'> with 2 children and before <class "
            "'dict'> with 1 child, so the numbers of children do not match, with the symmetric "
            "difference of key sets: {'y'}")


def test_a_new_function_object_is_read_with_jax_s_hint() -> None:
    miss = parse_miss(NEVER)
    assert miss is not None and miss.kind == NEW_FUNCTION and miss.function == "call_torch"
    assert miss.defined_at.endswith("torchax/interop.py:281") and not miss.same_line
    again = parse_miss(NEVER_AGAIN)
    assert again is not None and again.same_line


def test_types_tree_and_static_misses_give_their_items() -> None:
    types = parse_miss(TYPES_MSG)
    assert types is not None and types.kind == TYPES and types.function == "call_torch"
    assert [(i.path, i.now, i.before) for i in types.items] == [
        ("args[1]['x']", "f32[16,4]", "f32[8,4]")]
    weak = parse_miss(WEAK_MSG)
    assert weak is not None and weak.items[0].before == "f32[]{weak_type=True}"
    static = parse_miss(STATIC_MSG)
    assert static is not None and static.kind == TREE and static.items[0].path == "[0][2]"
    assert static_value(static.items[0].now) == "3.0"
    tree = parse_miss(TREE_MSG)
    assert tree is not None and tree.kind == TREE and "symmetric difference" in tree.items[0].why


def test_other_log_lines_are_not_misses() -> None:
    assert parse_miss("Finished XLA compilation of jit(f) in 0.1 sec") is None
    assert parse_miss("") is None


def test_jax_names_become_the_user_s_names() -> None:
    names = ["w", "batch", "scale"]
    assert user_path("args[1]['x']", names) == "batch['x']"
    assert user_path("[0][2]", names) == "scale"
    assert user_path("[1]['mask']", names) == "mask"
    assert user_path("kwargs['mask'][0]", names) == "mask[0]"
    assert user_path("args[4]", names, "rest") == "rest[1]"
    assert user_path("args[4]", names) == "args[4]"
    assert user_path("b", names) == "b"  # a plain jax.jit: JAX's names are the user's


def test_shapes_dtypes_and_weak_types_are_read() -> None:
    assert shaped("f32[16,4]") == ("f32", [16, 4], None)
    assert shaped("f32[]{weak_type=True}") == ("f32", [], True)
    assert shaped("<class 'dict'>") is None


def test_the_user_s_function_behind_torchax_s_wrappers() -> None:
    def step(weights, buffers, opt_state, batch, label):
        return weights

    def call_torch(torch_func, *args, **kwargs):  # torchax.interop.call_torch's shape
        return torch_func(*args, **kwargs)

    label, name, names, varargs = describe(functools.partial(call_torch, step))
    assert name.endswith("step") and names == ["weights", "buffers", "opt_state", "batch",
                                               "label"]
    assert label.startswith(name + " (") and label.endswith(f":{step.__code__.co_firstlineno})")
    assert jax_name(functools.partial(call_torch, step)) == "call_torch"

    class Model:
        def forward(self, input_ids, mask=None):
            return input_ids

    class JittableModule:  # torchax.interop.JittableModule's shape
        def __init__(self):
            self._model = Model()

        def functional_call(self, method_or_name, params, buffers, *args, **kwargs):
            return getattr(self._model, method_or_name)(*args)

    jm = JittableModule()
    _, name, names, _ = describe(functools.partial(call_torch,
                                                   functools.partial(jm.functional_call,
                                                                     "forward")))
    assert name == "Model.forward" and names == ["params", "buffers", "input_ids", "mask"]


def _info(**kw) -> JitInfo:
    return JitInfo(label="step (/p.py:3)", name="step", names=["w", "batch", "scale", "offset"],
                   created=(Frame("/p.py", 9, "<module>"),), **kw)


def test_each_cause_is_named_with_its_change() -> None:
    kind, cause, changes = explain_compile(_info(), parse_miss(TYPES_MSG), True)
    assert kind == "recompile" and "batch['x']: f32[8,4] -> f32[16,4]" in cause
    assert [(c.input, c.what, c.index, c.before, c.after) for c in changes] == [
        ("batch['x']", "dim", 0, 8, 16)]
    _, cause, changes = explain_compile(_info(), parse_miss(STATIC_MSG), True)
    assert "a static argument changed" in cause
    assert [(c.input, c.what, c.before, c.after) for c in changes] == [
        ("scale", "value", "2.0", "3.0")]
    _, cause, changes = explain_compile(_info(), parse_miss(TREE_MSG), True)
    assert "argument structure" in cause and changes[0].input == "batch"
    assert changes[0].what == "count"
    # the same function jitted again: a new function object, named with where it was jitted
    kind, cause, changes = explain_compile(_info(), parse_miss(NEVER), True)
    assert kind == "new_function" and "jitted again at /p.py:9" in cause
    assert explain_compile(_info(), parse_miss(NEVER), False)[0] == "first"
    assert explain_compile(_info(), None, False)[0] == "first"


def test_the_missing_op_is_read_from_torchax_s_message() -> None:
    assert missing_op("Operator with name aten::geqrf has no lowering") == "aten::geqrf"
    assert missing_op("something else") == "something else"
