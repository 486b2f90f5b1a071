"""The hand-written _rust_vdb.pyi names exactly what the compiled module exposes."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

rv = pytest.importorskip("vdbbench._rust_vdb")

import vdbbench  # noqa: E402

STUB = Path(vdbbench.__file__).with_name("_rust_vdb.pyi")


def stub_names():
    tree = ast.parse(STUB.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.ClassDef):
            top.add(node.name)
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return top, members


def test_stub_and_module_agree():
    top, members = stub_names()
    public = {n for n in dir(rv) if not n.startswith("_")}
    assert top == public, f"only in stub: {top - public}; only in module: {public - top}"
    for cls, names in members.items():
        runtime = getattr(rv, cls)
        own = {n for n in vars(runtime) if not n.startswith("_") or n in ("__init__", "__len__", "__repr__")}
        if issubclass(runtime, BaseException):
            continue
        stubbed = {n for n in names if not n.startswith("__")}
        assert stubbed == {n for n in own if not n.startswith("_")}, cls
        # Dunders the stub names (__len__, __enter__, ...) exist on the class.
        for dunder in names - stubbed - {"__init__"}:
            assert hasattr(runtime, dunder), f"{cls}.{dunder}"


def test_signatures_match_the_stub():
    tree = ast.parse(STUB.read_text())
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or node.name not in ("FlatIndex", "IvfIndex"):
            continue
        runtime = getattr(rv, node.name)
        for fn in node.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("__") or fn.decorator_list:
                continue
            sig = inspect.signature(getattr(runtime, fn.name))
            params = [p for p in sig.parameters if p != "self"]
            stub_params = [a.arg for a in fn.args.args[1:]]
            assert params == stub_params, (node.name, fn.name)
            defaults = [ast.literal_eval(d) for d in fn.args.defaults]
            runtime_defaults = [p.default for p in sig.parameters.values() if p.default is not p.empty]
            assert runtime_defaults == defaults, (node.name, fn.name)
    init = inspect.signature(rv.IvfIndex)
    assert [p.default for p in init.parameters.values()][1:] == [None, "l2", "u8+f16", 0]


def test_exception_hierarchy():
    assert issubclass(rv.InvalidInput, (rv.VdbError, ValueError))
    assert issubclass(rv.InvalidInput, ValueError) and issubclass(rv.InvalidInput, rv.VdbError)
    assert issubclass(rv.NotReady, RuntimeError) and issubclass(rv.NotReady, rv.VdbError)
    assert issubclass(rv.CorruptFile, OSError) and issubclass(rv.CorruptFile, rv.VdbError)
    assert rv.VdbError.__module__ == "vdbbench._rust_vdb"
    assert vdbbench.InvalidInput is rv.InvalidInput


def test_one_build_of_the_extension_beside_the_package():
    """The build is abi3 (`_rust_vdb.abi3.so`); a per-version build left by an older install
    (`_rust_vdb.cpython-311-...so`) would be imported instead, and the tests would test it."""
    builds = sorted(p.name for p in Path(rv.__file__).parent.glob("_rust_vdb.*") if p.suffix in (".so", ".pyd"))
    assert builds == [Path(rv.__file__).name], f"delete the older build(s) beside {rv.__file__}: {builds}"
    assert ".abi3." in Path(rv.__file__).name or Path(rv.__file__).suffix == ".pyd"
