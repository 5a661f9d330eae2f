"""What a run records of its user files (model SourceMap) and how every renderer names a place
(model.location): a notebook cell by its number, a file by its path and line."""

from __future__ import annotations

from lazyscope.model import Frame, SourceMap, location
from lazyscope.model.info import run_info
from lazyscope.model.ownership import cell_number, source_map


def test_location_names_cells_as_ipython_does() -> None:
    cell = "/tmp/ipykernel_4242/98072684.py"
    sources = SourceMap(labels={cell: "cell In[3]"})
    assert location(Frame(cell, 12, "<module>"), sources) == "cell In[3], line 12"
    assert location(Frame("/u/train.py", 7), sources) == "/u/train.py:7"
    assert location(Frame(cell, 12)) == f"{cell}:12"  # a run that recorded no labels
    # the %%lazyscope magic compiles a cell under the name "cell In[N]": its own label
    assert location(Frame("cell In[7]", 13)) == "cell In[7], line 13"


def test_source_map_round_trips_and_tolerates_junk() -> None:
    sm = SourceMap(labels={"/a.py": "cell In[1]"}, lines={"/a.py": {3: "x = y.item()"}})
    assert SourceMap.from_json(sm.to_json()) == sm
    assert sm.text("/a.py", 3) == "x = y.item()" and sm.text("/a.py", 4) is None
    assert run_info({}).sources == SourceMap()  # a run made before it existed
    for junk in (None, 3, "x", {"labels": [1], "lines": {"/a.py": {"x": 1, "2": 5}}}):
        assert SourceMap.from_json(junk).text("/a.py", 2) is None


def test_source_map_of_files(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\n\n    loss = model(x)   \nprint(loss.item())\n")
    sm = source_map({str(script), str(tmp_path / "gone.py")})
    assert sm.lines == {str(script): {1: "import torch", 3: "loss = model(x)",
                                      4: "print(loss.item())"}}
    assert sm.labels == {}  # not in IPython: no cells
    assert cell_number(str(script)) is None


def test_every_module_of_lazyscope_is_library_code_and_its_tests_are_not() -> None:
    """Which frames are the user's is decided by where lazyscope's package is: every module of
    every folder of it is library code, wherever the deciding module sits in it."""
    from pathlib import Path

    import lazyscope
    from lazyscope.model.ownership import is_lazyscope_file, is_library_file

    package = Path(lazyscope.__file__).parent
    modules = [str(p) for p in package.rglob("*.py")]
    assert len(modules) > 50
    assert [m for m in modules if not (is_library_file(m) and is_lazyscope_file(m))] == []
    assert not is_library_file(str(package.parent / "tests" / "programs" / "memory" / "rebind.py"))
