"""The house rules that keep sim/ readable: no module over 800 lines, no class over 400, no function
over 100, and no import circle between its modules (imports inside functions count too)."""

from __future__ import annotations

import ast
import pathlib

import sim

PACKAGE = pathlib.Path(sim.__file__).parent
MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 800, 400, 100


def modules() -> dict[str, pathlib.Path]:
    """Every module of sim by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def oversized() -> list[str]:
    """What passes the sizes, as `path: what (lines)`."""
    found = []
    for path in modules().values():
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(PACKAGE.parent).as_posix()
        if text.count("\n") > MODULE_LINES:
            found.append(f"{name}: module ({text.count(chr(10))} lines)")
        for node in ast.walk(ast.parse(text)):
            limit = {ast.ClassDef: CLASS_LINES, ast.FunctionDef: FUNCTION_LINES}.get(
                ast.FunctionDef if isinstance(node, ast.AsyncFunctionDef) else type(node)
            )
            if limit is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{name}: {node.name} ({lines} lines)")
    return sorted(found)


def import_graph() -> dict[str, set[str]]:
    """Module -> the sim modules it imports anywhere in its text."""
    names = modules()
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            for target in targets:
                while target and target not in names:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
                    break
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_class_or_function_passes_its_size():
    assert oversized() == []


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert "sim.runner" in import_graph()["sim.sweeps"]
