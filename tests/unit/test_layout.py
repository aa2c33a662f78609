"""The tree's rooms: small files, and an import graph that only points down.

knee's Python package is layered: a module may import from its own layer or a lower one, never a higher one
(an "upward arrow"), so that analysis and reports read records without the planner or the machine they ran
on, and the engine wrapper never reaches into the runner. The package's `__init__` (the public API) and the
entry points sit on top and may import anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "python" / "knee"

# Low to high. A module's layer is that of the longest prefix of its dotted name listed here.
LAYERS: list[tuple[str, ...]] = [
    ("knee._engine", "knee.console", "knee.errors", "knee.fmt", "knee.scenario.units"),
    ("knee.scenario",),
    ("knee.importers",),
    ("knee.model", "knee.spec"),
    ("knee.analysis",),
    ("knee.plan", "knee.clientspec"),
    ("knee.engine", "knee.machine"),
    ("knee.preflight", "knee.executor", "knee.settle"),
    ("knee.store", "knee.operations"),
    ("knee.report",),
    ("knee.progress", "knee.progress_line", "knee.live"),
    ("knee.runner", "knee.searching", "knee.soaking"),
    ("knee.flowhttp", "knee.flowwire", "knee.flowcookies"),  # ctx.http of Python flows (knee.pyworker)
    ("knee.api", "knee.demo_target", "knee.target", "knee.pyworker"),
    ("knee.commands",),
    ("knee.cli", "knee.__main__", "knee"),
]

# The Python limit is on modules of the package; the Rust one on every source file of every crate.
MAX_PY_LINES = 500
MAX_RS_LINES = 700


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    best, best_len = None, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            covers = module == name or (name != "knee" and module.startswith(name + "."))
            if covers and len(name) > best_len:
                best, best_len = i, len(name)
    assert best is not None, f"{module} is in no layer: add it to LAYERS in {__file__}"
    return best


def _imports(path: Path, module: str) -> set[str]:
    """Every knee module `path` imports, at the top or inside a function (a lazy import is still a dependency)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "knee")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            if name.split(".")[0] != "knee":
                continue
            # `from knee import fmt` imports the module knee.fmt, not the package's __init__.
            for a in node.names:
                sub = f"{name}.{a.name}"
                path = PKG.parent / sub.replace(".", "/")
                is_module = path.with_suffix(".py").exists() or path.with_suffix(".pyi").exists() or path.is_dir()
                out.add(sub if is_module else name)
    return out


def _modules() -> list[tuple[Path, str]]:
    return [(p, _module_name(p)) for p in sorted(PKG.rglob("*.py"))]


def test_imports_point_down() -> None:
    upward = []
    for path, module in _modules():
        if module == "knee":
            continue  # the package's __init__ is the public API: it may import anything
        here = _layer(module)
        for target in sorted(_imports(path, module)):
            if _layer(target) > here:
                upward.append(f"{module} (layer {here}) imports {target} (layer {_layer(target)})")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_every_module_has_a_layer() -> None:
    for _, module in _modules():
        _layer(module)


def test_python_modules_are_small() -> None:
    big = {str(p.relative_to(ROOT)): n for p, _ in _modules() if (n := len(p.read_text().splitlines())) > MAX_PY_LINES}
    assert not big, f"modules over {MAX_PY_LINES} lines: {big}"


def test_rust_sources_are_small() -> None:
    files = sorted((ROOT / "crates").glob("*/src/**/*.rs"))
    assert files
    big = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_RS_LINES}
    assert not big, f"Rust sources over {MAX_RS_LINES} lines: {big}"


def test_the_rooms_exist() -> None:
    assert (PKG / "scenario" / "__init__.py").is_file()
    assert (PKG / "executor" / "base.py").is_file()
    assert (PKG / "machine" / "__init__.py").is_file()
    assert not (PKG / "diagnose.py").exists()
    assert not (ROOT / "crates" / "target").exists()
    assert (ROOT / "crates" / "demo-target" / "Cargo.toml").is_file()


def test_test_modules_have_names_of_their_own() -> None:
    # The test directories are not packages: pytest imports each test module by its base name, so a second
    # tests/*/test_x.py is not collected ("import file mismatch") and make test-py's pass stops at collection.
    seen: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        other = seen.setdefault(path.name, path)
        assert other == path, f"{path.relative_to(ROOT)} has the name of {other.relative_to(ROOT)}: rename one"
