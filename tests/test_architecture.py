"""The house rules of the layout, checked on the source: one concept per package, dependencies that
point one way, no reaching into another module's private names, heavy or cyclic imports only where
a comment says why.

The import graph is read with ``ast`` (no module is imported), counting imports inside functions
too — a function-level import that closes a cycle is still a cycle — and those under ``if TYPE_CHECKING:``: a
cycle a type annotation needs is a design that goes both ways.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
PACKAGES = ("skill", "server")
CHECKED_FOR_PRIVATE_IMPORTS = ("skill", "server", "tests", "bench", "scripts")
MAX_MODULE_LINES = 420  # "modules under ~400 lines": code lines, docstrings, comments and blanks left out
MAX_FUNCTION_LINES = 60  # code lines too
LAZY_REASON = re.compile(r"#\s*lazy:\s*\S")


@dataclass(frozen=True)
class ImportEdge:
    importer: str
    imported: str
    names: tuple[str, ...]
    line: int
    in_function: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPOSITORY).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((REPOSITORY / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for child in node.body:
                inside.update(id(inner) for inner in ast.walk(child))
    return inside


def imports_of(path: Path, importer: str, known: set[str]) -> list[ImportEdge]:
    """Every import of a project module in one file, resolved to module names (``from pkg import mod`` is mod)."""
    tree = ast.parse(path.read_text())
    in_function = _function_nodes(tree)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    edges = []
    for node in ast.walk(tree):
        targets: list[tuple[str, tuple[str, ...]]] = []
        if isinstance(node, ast.Import):
            targets = [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = tuple(alias.name for alias in node.names)
            submodules = [f"{base}.{name}" for name in names if f"{base}.{name}" in known]
            targets = [(module, ()) for module in submodules] + [(base, names)]
        for target, names in targets:
            if target.split(".")[0] in PACKAGES or target in known:
                edges.append(ImportEdge(importer, target, names, node.lineno, id(node) in in_function))
    return edges


def import_graph() -> tuple[dict[str, Path], list[ImportEdge]]:
    modules = project_modules()
    known = set(modules)
    edges = [edge for name, path in modules.items() for edge in imports_of(path, name, known)]
    return modules, edges


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; components of more than one module (or a module importing itself) are cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_the_cycle_finder_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_has_no_cycle():
    modules, edges = import_graph()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in edges:
        if edge.imported in modules and edge.imported != edge.importer:
            graph[edge.importer].add(edge.imported)
            # importing skill.a.b runs skill/__init__ and skill/a/__init__ first
            parent = edge.imported.rpartition(".")[0]
            while parent and parent != edge.importer and parent in modules:
                graph[edge.importer].add(parent)
                parent = parent.rpartition(".")[0]
    assert strongly_connected(graph) == []


def test_no_private_name_is_imported_across_modules():
    known = set(project_modules())
    offenders = []
    for folder in CHECKED_FOR_PRIVATE_IMPORTS:
        for path in sorted((REPOSITORY / folder).rglob("*.py")):
            for edge in imports_of(path, module_name(path), known):
                private = [name for name in edge.names if name.startswith("_") and not name.startswith("__")]
                if private:
                    offenders.append(f"{path.relative_to(REPOSITORY)}:{edge.line} {edge.imported} {private}")
    assert offenders == []


def test_function_level_imports_of_the_project_say_why():
    """An import of a project module inside a function hides the graph; each one states its reason."""
    modules, edges = import_graph()
    unexplained = []
    for edge in edges:
        if edge.in_function and edge.imported.split(".")[0] in PACKAGES:
            line = modules[edge.importer].read_text().splitlines()[edge.line - 1]
            if not LAZY_REASON.search(line):
                unexplained.append(f"{modules[edge.importer].relative_to(REPOSITORY)}:{edge.line}: {line.strip()}")
    assert unexplained == []


# Dependencies point down: a package may import only packages of a lower layer (docs/architecture.md §2).
LAYERS = (
    ("errors", "intervals", "python_source", "grpo_fields", "markdown"),
    ("state", "skill", "hub_errors"),  # ``skill`` is the package face; modules read only its __version__
    ("absolute_paths",),
    ("data", "models"),
    ("sampling", "hardware", "rewards"),
    ("timing",),
    ("memory", "rewards.code", "rewards.judge"),  # the registry reaches these by name, when first asked
    ("routing",),
    ("inspection",),
    ("recipe",),
    ("runs",),
    ("demo",),
    ("server",),
)


def package_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "server" or len(parts) == 1:
        return parts[0]
    if parts[1] == "rewards" and len(parts) > 3 and parts[2] in ("code", "judge"):
        return f"rewards.{parts[2]}"
    return parts[1]


def test_dependencies_point_down_the_layers():
    layer = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}
    modules, edges = import_graph()
    assert {package_of(name) for name in modules} <= set(layer), "a new package needs a place in LAYERS"
    upward = sorted(
        {
            f"{package_of(edge.importer)} -> {package_of(edge.imported)} ({edge.importer} imports {edge.imported})"
            for edge in edges
            if edge.imported in modules
            and package_of(edge.importer) != package_of(edge.imported)
            and layer[package_of(edge.importer)] <= layer[package_of(edge.imported)]
        }
    )
    assert upward == []


def test_nothing_in_the_core_imports_the_demo():
    _modules, edges = import_graph()
    leaks = [
        f"{edge.importer} -> {edge.imported}"
        for edge in edges
        if edge.imported.startswith("skill.demo")
        and edge.importer.startswith("skill.")
        and not edge.importer.startswith("skill.demo")
    ]
    assert leaks == []


def test_the_domain_core_does_not_import_the_faces():
    _modules, edges = import_graph()
    assert [
        f"{e.importer} -> {e.imported}"
        for e in edges
        if e.importer.startswith("skill") and e.imported.startswith("server")
    ] == []


@pytest.mark.parametrize("name", sorted(project_modules()))
def test_each_module_says_what_it_owns(name):
    path = project_modules()[name]
    tree = ast.parse(path.read_text())
    if path.name == "__init__.py" or tree.body:
        assert ast.get_docstring(tree), f"{path.relative_to(REPOSITORY)} has no module docstring"
    assert path.stem not in ("utils", "helpers", "misc", "common")


def code_lines(tree: ast.AST, text: str, first: int = 1, last: int | None = None) -> int:
    """Lines of code between two line numbers: blank lines, comment-only lines and docstrings (doctests with
    them) do not count, so an example or an explanation never pushes a module over its cap."""
    last = len(text.splitlines()) if last is None else last
    documentation: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                documentation.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines = text.splitlines()[first - 1 : last]
    return sum(
        1
        for number, line in enumerate(lines, start=first)
        if number not in documentation and line.strip() and not line.strip().startswith("#")
    )


def test_code_lines_leave_out_docstrings_comments_and_blanks():
    text = 'def f():\n    """Doc.\n\n    >>> f()\n    1\n    """\n    # why\n\n    return 1\n'
    assert code_lines(ast.parse(text), text) == 2


def test_modules_and_functions_stay_short():
    long_modules, long_functions = [], []
    for name, path in project_modules().items():
        text = path.read_text()
        tree = ast.parse(text)
        if (count := code_lines(tree, text)) > MAX_MODULE_LINES:
            long_modules.append(f"{name} ({count} code lines)")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = code_lines(tree, text, node.lineno, node.end_lineno)
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}.{node.name} ({length} code lines)")
    assert long_modules == []
    assert long_functions == []


def test_the_package_face_names_the_ten_tools_and_resolves_them():
    import skill

    assert skill.TOOLS == (
        "route_check",
        "inspect_rewards",
        "record_review",
        "emit_grpo_config",
        "estimate_memory",
        "run_grpo",
        "run_status",
        "run_logs",
        "cancel_run",
        "list_runs",
    )
    for name in skill.__all__:
        assert getattr(skill, name) is not None
    with pytest.raises(AttributeError):
        _ = skill.not_a_tool


def test_each_package_names_every_module_it_owns():
    """A package's ``__init__`` docstring is its inventory: every module and subpackage on disk appears in it as
    ``name`` (a module added without a line there, or one removed and still named, is a drift)."""
    drifts = []
    for init in sorted([*(REPOSITORY / "skill").rglob("__init__.py"), REPOSITORY / "server" / "__init__.py"]):
        package = init.parent
        if "__pycache__" in package.parts:
            continue
        owned = {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
        owned |= {path.name for path in package.iterdir() if (path / "__init__.py").is_file()}
        named = set(re.findall(r"``(\w+)/?``", ast.get_docstring(ast.parse(init.read_text())) or ""))
        drifts += [f"{package.relative_to(REPOSITORY)}: {name} is not named" for name in sorted(owned - named)]
    assert drifts == []


def _receiver(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def grpo_field_reads_outside_the_view(tree: ast.AST, fields: set[str]) -> list[tuple[int, str]]:
    """Reads of GRPOConfig keywords that bypass ``GRPOFields``: ``X.trl[...]`` / ``X.trl.get(...)``, and a default
    restated on any kwargs named ``trl``: ``trl.get("beta", 0.0)`` or ``trl.get("beta") or 0.0``."""

    def field_get(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and "trl" in _receiver(node.func.value)
            and bool(node.args)
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in fields
        )

    def of_trl(node: ast.expr) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "trl"

    def restated(default: ast.expr) -> bool:
        return not (isinstance(default, ast.Constant) and default.value is None)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and of_trl(node.value):
            found.append((node.lineno, "a subscript read of .trl"))
        if isinstance(node, ast.Attribute) and node.attr == "get" and of_trl(node.value):
            found.append((node.lineno, "a .trl.get() read"))
        if field_get(node) and len(node.args) > 1 and restated(node.args[1]):
            found.append((node.lineno, f"{ast.unparse(node)} restates a default"))
        fallback = isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and field_get(node.values[0])
        if fallback and any(isinstance(value, ast.Constant) and restated(value) for value in node.values[1:]):
            found.append((node.lineno, f"{ast.unparse(node)} restates a default"))
    return sorted(found)


def test_the_reader_of_grpo_fields_finds_every_kind_of_bypass():
    source = (
        "a = recipe.trl['beta']\nb = recipe.trl.get('beta')\nc = trl.get('beta', 0.0)\nd = trl.get('beta') or 0.0\n"
        "recipe.trl['beta'] = 1.0\ne = trl.get('beta')\nf = settings.get('beta', 0.0)\n"
    )
    assert [line for line, _ in grpo_field_reads_outside_the_view(ast.parse(source), {"beta"})] == [1, 2, 3, 4]


def test_grpo_fields_are_read_through_their_view():
    """A GRPOConfig field left out of a recipe has one default, TRL's (skill/grpo_fields.py reads it from the target
    GRPOConfig): a recipe's kwargs are read through ``GRPOFields`` (``recipe.grpo``), never with a default of ours."""
    import json

    fields = set(json.loads((REPOSITORY / "skill" / "grpo_config_defaults.json").read_text()))
    view = REPOSITORY / "skill" / "grpo_fields.py"
    bypasses = []
    for root in ("skill", "server", "bench", "scripts"):
        for path in sorted((REPOSITORY / root).rglob("*.py")):
            if path == view:
                continue
            for line, what in grpo_field_reads_outside_the_view(ast.parse(path.read_text()), fields):
                bypasses.append(f"{path.relative_to(REPOSITORY)}:{line}: {what}")
    assert bypasses == []
