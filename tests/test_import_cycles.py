"""No import cycle among the modules of constructs/ (read from the source: local and TYPE_CHECKING imports count)."""

from __future__ import annotations

from test_layers import PACKAGE, module_name, resolved_imports

CONSTRUCTS = PACKAGE / "constructs"


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of constructs/ it imports. Importing ``a.b.c`` from outside the package ``a.b`` runs
    ``a.b`` (its ``__init__``) first, so it counts as importing that package too."""
    modules = {module_name(path) for path in CONSTRUCTS.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in CONSTRUCTS.rglob("*.py"):
        name = module_name(path)
        edges: set[str] = set()
        for target in resolved_imports(path):
            parts = target.split(".")
            for end in range(2, len(parts) + 1):
                prefix = ".".join(parts[:end])
                inside = name == prefix or name.startswith(f"{prefix}.")
                if prefix in modules and prefix != name and (end == len(parts) or not inside):
                    edges.add(prefix)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if state.get(other) == "open":
                return [*stack[stack.index(other):], other]
            if other not in state and (cycle := visit(other)) is not None:
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_constructs_have_no_import_cycle():
    assert find_cycle(import_graph()) is None


def test_the_cycle_finder_finds_a_cycle_and_the_graph_sees_type_checking_imports():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    graph = import_graph()
    job = "cdk_sagemaker_debugger.constructs.training_job"
    assert f"{job}._parts" in graph[f"{job}.execution_role"]  # a TYPE_CHECKING import
    assert "cdk_sagemaker_debugger.constructs.family" in graph[job]
    # a submodule imported from outside its package runs the package first
    assert job in graph["cdk_sagemaker_debugger.constructs.family"] or not any(
        target.startswith(job) for target in graph["cdk_sagemaker_debugger.constructs.family"])
