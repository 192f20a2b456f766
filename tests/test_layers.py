"""The import graph of ``src/light_llm``, read from the source (every import, also those inside
functions and ``if TYPE_CHECKING:`` blocks): no cycles, arrows only downward through the layers,
and a foundation and NumPy engine that need no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "light_llm"

# top to bottom; a module may import its own layer's modules or any layer below
LAYERS = [
    (
        "entry points",
        (
            "light_llm",
            "light_llm.__main__",
            "light_llm.cli",
            "light_llm.explain",
            "light_llm.serve",
        ),
    ),
    (
        "generation and training",
        ("light_llm.generate", "light_llm.decode_stats", "light_llm.train", "light_llm.inspect"),
    ),
    ("persistence", ("light_llm.checkpoints",)),
    (
        "models and the NumPy engine",
        ("light_llm.nn", "light_llm.models", "light_llm.reference", "light_llm.device"),
    ),
    (
        "text and data",
        ("light_llm.tokenizers", "light_llm.data", "light_llm.shakespeare", "light_llm.cache"),
    ),
    (
        "foundations",
        (
            "light_llm.errors",
            "light_llm.config",
            "light_llm.atomic",
            "light_llm.limits",
            "light_llm.untrusted",
            "light_llm.assets",
            "light_llm.schedule",
            "light_llm.sampling_options",
            "light_llm.muon_spec",
            "light_llm.interventions",
            "light_llm.terminal",
        ),
    ),
]
# the entry points do not import one another: the two faces (the CLI, the explorer) and the book
# (the worked examples, which both faces show) are separate, except that the command that starts
# the explorer imports it
ENTRY_POINTS = ("light_llm.cli", "light_llm.serve", "light_llm.explain")
ALLOWED_BETWEEN_ENTRY_POINTS = {
    ("light_llm.cli.serve", "light_llm.serve"),  # `light-llm serve` starts the explorer
    ("light_llm.cli.explain", "light_llm.explain"),  # `light-llm explain` prints the book
    ("light_llm.cli.attention", "light_llm.explain"),  # `light-llm attention` draws its maps
    ("light_llm.serve", "light_llm.explain"),  # the explorer shows the book and its maps
}
TORCH_FREE = ("foundations",)  # layers whose modules never import torch, not even lazily
TORCH_FREE_MODULES = ("light_llm.reference", "light_llm.checkpoints.numpy_gpt")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, module: str, modules=()) -> list[tuple[str, bool]]:
    """(imported module, whether it runs) for every import in the file; an import under
    ``if TYPE_CHECKING:`` does not run. ``from package import name`` counts as importing
    ``package.name`` when that is one of ``modules``, else as importing ``package``."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    not_run = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            not_run.update(id(inner) for child in node.body for inner in ast.walk(child))
    found = []
    for node in ast.walk(tree):
        runs = id(node) not in not_run
        if isinstance(node, ast.Import):
            found.extend((alias.name, runs) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.append((submodule if submodule in modules else source, runs))
    return found


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """module -> light_llm modules it imports; module -> third-party roots it imports at run
    time."""
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph, external = {}, {}
    for module, path in files.items():
        graph[module], external[module] = set(), set()
        for name, runs in imported_names(path, module, files):
            if name.split(".")[0] != "light_llm":
                if runs:
                    external[module].add(name.split(".")[0])
            elif name in files and name != module:
                graph[module].add(name)
    return graph, external


def layer_of(module: str) -> int:
    """Index in LAYERS (0 = top) of the longest prefix that names ``module``."""
    best, best_length = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    if best is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS in {__file__}.")
    return best


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    arrows = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if layer_of(target) < layer_of(module):
                arrows.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                    f"({LAYERS[layer_of(target)][0]})"
                )
    return arrows


def test_the_import_graph_has_no_cycle():
    graph, _ = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_imports_point_down_the_layers():
    graph, _ = import_graph()
    assert upward_arrows(graph) == []


def entry_point(module: str) -> str | None:
    return next((p for p in ENTRY_POINTS if module == p or module.startswith(p + ".")), None)


def arrows_between_entry_points(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one entry point (cli, serve, explain) into another, except those in
    ALLOWED_BETWEEN_ENTRY_POINTS (a module, or the package above it, importing a package)."""
    arrows = []
    for module, targets in sorted(graph.items()):
        source = entry_point(module)
        for target in sorted(targets):
            into = entry_point(target)
            if source is None or into is None or into == source:
                continue
            allowed = any(
                (module == importer or module.startswith(importer + ".")) and into == package
                for importer, package in ALLOWED_BETWEEN_ENTRY_POINTS
            )
            if not allowed:
                arrows.append(f"{module} imports {target}")
    return arrows


def test_entry_points_do_not_import_one_another():
    graph, _ = import_graph()
    assert arrows_between_entry_points(graph) == []


def test_the_entry_point_check_catches_the_explorer_importing_the_cli():
    graph, _ = import_graph()
    graph = {module: set(targets) for module, targets in graph.items()}
    graph["light_llm.serve.session"].add("light_llm.cli.embed")
    graph["light_llm.explain.registry"].add("light_llm.serve.app")
    graph["light_llm.cli.eval"].add("light_llm.serve.app")
    assert arrows_between_entry_points(graph) == [
        "light_llm.cli.eval imports light_llm.serve.app",
        "light_llm.explain.registry imports light_llm.serve.app",
        "light_llm.serve.session imports light_llm.cli.embed",
    ]


def test_foundations_and_numpy_engine_import_no_torch():
    _, external = import_graph()
    torch_free_layers = [index for index, (name, _) in enumerate(LAYERS) if name in TORCH_FREE]
    offenders = sorted(
        module
        for module, roots in external.items()
        if "torch" in roots
        and (layer_of(module) in torch_free_layers or module.startswith(TORCH_FREE_MODULES))
    )
    assert offenders == []


def test_the_checks_catch_a_cycle_and_an_upward_arrow():
    graph, _ = import_graph()
    graph = {module: set(targets) for module, targets in graph.items()}
    graph["light_llm.models.gpt"].add("light_llm.checkpoints.gpt")  # checkpoints.gpt -> gpt
    assert find_cycle(graph) is not None
    assert upward_arrows(graph) == [
        "light_llm.models.gpt (models and the NumPy engine) imports light_llm.checkpoints.gpt "
        "(persistence)"
    ]


def test_imported_names_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "light_llm" / "models" / "example.py"
    source.parent.mkdir(parents=True)
    source.write_text("def f():\n    from light_llm.checkpoints import load\n    import torch\n")
    module = "light_llm.models.example"
    found = imported_names(source, module)
    assert ("light_llm.checkpoints", True) in found and ("torch", True) in found


TORCH_BLOCKED = textwrap.dedent(
    """
    import sys
    sys.modules["torch"] = None  # any import of torch now raises ImportError
    {body}
    assert not any(name == "torch" or name.startswith("torch.") for name, module
                   in sys.modules.items() if module is not None)
    """
)


def run_without_torch(body: str, cwd: Path) -> subprocess.CompletedProcess:
    env_path = str(PACKAGE.parent)
    return subprocess.run(
        [sys.executable, "-c", TORCH_BLOCKED.format(body=textwrap.dedent(body))],
        cwd=cwd,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
    )


def test_foundations_and_numpy_engine_import_with_torch_unimportable(tmp_path):
    done = run_without_torch(
        """
        import light_llm, light_llm.config, light_llm.atomic, light_llm.schedule
        import light_llm.sampling_options, light_llm.data, light_llm.tokenizers
        import light_llm.reference, light_llm.reference.optim, light_llm.reference.sampling
        import light_llm.reference.gradcheck, light_llm.checkpoints.numpy_gpt
        import light_llm.train, light_llm.train.numpy_trainer
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr


def test_numpy_engine_trains_saves_loads_and_samples_without_torch(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question.\n" * 40, encoding="utf-8")
    done = run_without_torch(
        f"""
        import numpy as np
        from light_llm.checkpoints import load, load_tokenizer
        from light_llm.reference.sampling import generate_text
        from light_llm.train import TrainConfig
        from light_llm.train.numpy_trainer import train_numpy

        config = TrainConfig(
            data={str(corpus)!r}, out="out", tokenizer="char", n_layer=1, n_head=2,
            n_embd=16, block_size=16, batch_size=4, max_iters=3, eval_interval=3,
            eval_iters=1, sample_tokens=5, engine="numpy",
        )
        result = train_numpy(config)
        assert result.iteration == 3 and len(result.sample) > 0
        model = load("out", engine="numpy")
        text = generate_text(model, load_tokenizer("out"), "to", 5, temperature=0.0)
        assert isinstance(text, str)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr


def test_the_pytorch_engine_loads_a_checkpoint_without_importing_scipy(tmp_path):
    """SciPy (about 0.3 s of a command's start) serves only the NumPy engine's float64 erf
    and sigmoid, imported where they run: a fresh process that imports the trainer, saves and
    loads a checkpoint with the PyTorch engine never imports it; the NumPy engine's GELU then
    does."""
    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        from light_llm.checkpoints import load, save
        from light_llm.models.gpt import GPT
        from light_llm.train import trainer
        from tests.conftest import tiny_config
        save(GPT(tiny_config()), {str(tmp_path)!r})
        load({str(tmp_path)!r})
        print("scipy" in sys.modules)
        from light_llm.reference.activations import gelu_forward
        gelu_forward(np.ones(3))
        print("scipy" in sys.modules)
        """
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "True"]
