"""The package's shape: imports at the top (cycles cannot hide), no import cycle between files or between packages,
`yolo.ops` at the bottom, every layer type registered in one place, thin command-line tools, one console script per
tool; no test module imports another."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set

import pytest

from helpers import console_scripts
from yolo.models.layer_types.registry import BUILDERS

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "yolo"
# an import inside a function: an optional dependency, or a slow third-party import deferred to its first use
OPTIONAL = re.compile(r"#.*(optional dependency|deferred import)")


def python_files(*folders: str) -> List[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.slow
def test_imports_inside_functions_are_only_optional_dependencies():
    offenders = []
    for path in python_files("yolo", "tools"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)) and \
                            not OPTIONAL.search(lines[inner.lineno - 1]):
                        offenders.append(f"{path.relative_to(REPO)}:{inner.lineno}: {lines[inner.lineno - 1].strip()}")
    assert not offenders, "imports inside functions (mark a true optional dependency with " \
                          "'# optional dependency: ...', a slow library imported on first use with " \
                          "'# deferred import: ...'):\n" + "\n".join(offenders)


def import_graph() -> Dict[str, Set[str]]:
    """Module -> the yolo modules it imports at load time (top level, and inside classes or if-blocks)."""
    files = {module_name(p): p for p in python_files("yolo")}
    graph: Dict[str, Set[str]] = {}
    for name, path in files.items():
        deps: Set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        stack = list(tree.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("yolo"))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("yolo") \
                    and node.level == 0:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    deps.add(sub if sub in files else node.module)
            stack.extend(ast.iter_child_nodes(node))
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def cycles_in(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """The cycles a depth-first walk of ``edges`` (node -> nodes it imports) meets, each as ``[a, b, ..., a]``."""
    state: Dict[str, int] = {}
    cycles: List[List[str]] = []

    def visit(node: str, path: List[str]) -> None:
        state[node] = 1
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep] if dep in path else [node, dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return cycles


@pytest.mark.slow
def test_no_import_cycle():
    graph = import_graph()
    # A package's __init__ re-exporting its modules is not a cycle of ideas: leave the package -> child edges
    # out, keep every module -> module edge.
    edges = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in graph.items()}
    cycles = cycles_in(edges)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def top_level(module: str) -> str:
    """``yolo.models.layer_types.cost`` -> ``yolo.models``; a top-level module (``yolo.errors``) is its own unit."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Dict[str, Set[str]]) -> Dict[str, Dict[str, List[str]]]:
    """Top-level unit of ``yolo`` -> unit it imports -> the module imports that make that edge. ``yolo/__init__``
    (the public API, which gathers from every package) is left out."""
    edges: Dict[str, Dict[str, List[str]]] = {}
    for module, deps in graph.items():
        if module == "yolo":
            continue
        unit = top_level(module)
        edges.setdefault(unit, {})
        for dep in sorted(deps):
            if dep != "yolo" and top_level(dep) != unit:
                edges[unit].setdefault(top_level(dep), []).append(f"{module} -> {dep}")
    return edges


def describe_cycle(cycle: List[str], edges: Dict[str, Dict[str, List[str]]]) -> str:
    """A package cycle and, for each step, the imports that make it."""
    steps = [f"  {a} -> {b}: {', '.join(edges[a][b])}" for a, b in zip(cycle, cycle[1:])]
    return " -> ".join(cycle) + "\n" + "\n".join(steps)


@pytest.mark.slow
def test_no_import_cycle_between_packages():
    """The packages form layers: no package imports one that (through others) imports it back."""
    edges = package_graph(import_graph())
    cycles = cycles_in({unit: set(deps) for unit, deps in edges.items()})
    assert not cycles, "package import cycles:\n" + "\n".join(describe_cycle(c, edges) for c in cycles)


@pytest.mark.slow
def test_ops_is_the_bottom_layer():
    """``yolo.ops`` (boxes, letterbox, NMS, sizes, COCO ids) is what every package may take; it takes from none
    but the error types and the builder of C code (:mod:`yolo.files.native`, a leaf)."""
    edges = package_graph(import_graph())
    assert "yolo.ops" in edges
    # and the builder of the package's C code (the resize kernel), itself on the cache folder and the errors alone
    native = "yolo.ops.darknet_resize_kernel -> yolo.files.native"
    above = {unit: [i for i in imports if i != native] for unit, imports in edges["yolo.ops"].items()
             if unit != "yolo.errors"}
    above = {unit: imports for unit, imports in above.items() if imports}
    assert not above, "yolo.ops imports from above it: " + "; ".join(i for imports in above.values() for i in imports)
    assert import_graph()["yolo.files.native"] <= {"yolo.errors", "yolo.files.cache_dir"}
    assert not import_graph()["yolo.files.cache_dir"]
    # The one module it may take, the error types, is a leaf itself.
    assert not edges.get("yolo.errors"), "yolo.errors imports from yolo: " + str(edges.get("yolo.errors"))


@pytest.mark.slow
def test_the_settings_sit_on_the_ops_layer():
    """The tools' parsers import the settings, so the settings import nothing that loads torch: only the error
    types, the counts' bounds (yolo.counts), the size helpers and the post-processing defaults of yolo.ops and the
    path check of yolo.files (tests/test_tool_flags.py checks --help in a fresh process)."""
    edges = package_graph(import_graph())
    assert set(edges["yolo.settings"]) <= {"yolo.errors", "yolo.ops", "yolo.files", "yolo.counts"}
    assert not edges.get("yolo.counts"), "yolo.counts imports from yolo: " + str(edges.get("yolo.counts"))
    light = ("yolo.ops.sizes", "yolo.ops.postprocess_defaults", "yolo.files.paths")
    assert all(d in light for m, deps in import_graph().items()
               if m.startswith("yolo.settings") for d in deps if d.startswith(("yolo.ops", "yolo.files")))


# Package edges that would put a package below one it serves: (importer, imported, why not).
FORBIDDEN_EDGES = [
    ("yolo.export", "yolo.benchmark", "the benchmark times the exports; what both need lives lower "
                                      "(yolo.timing, yolo.models.opencv_importer)"),
    ("yolo.models", "yolo.settings", "the settings are the tools' declarations, above the models they configure"),
]


@pytest.mark.slow
@pytest.mark.parametrize("importer, imported, why", FORBIDDEN_EDGES,
                         ids=[f"{a}-not-{b}" for a, b, _ in FORBIDDEN_EDGES])
def test_forbidden_package_edges(importer, imported, why):
    edges = package_graph(import_graph())
    assert imported not in edges.get(importer, {}), f"{importer} imports {imported} ({why}): " + \
        ", ".join(edges[importer][imported])


# Where an image size enters, the one place each is turned into an ImageSize (yolo.ops.sizes.image_size); every
# function inside takes the (height, width) it is given.
SIZE_ENTRIES = {
    "yolo/ops/sizes.py": "the normaliser itself (checked_image_size)",
    "yolo/settings/values.py": "a tool's --img-size (size_from_flag)",
    "yolo/engine/config.py": "a hyp file's img_size, a training flag, the cfg's [net] (resolve_hyp); a saved run's "
                             "hyp (Hyperparameters.from_dict, from_saved)",
    "yolo/models/preprocessing.py": "a checkpoint's record, a tool's or the Detector's img_size",
    "yolo/data/dataset.py": "the datasets' img_size (DetectionDataset(..., img_size=416), build_dataset)",
    "yolo/models/summary.py": "model.summary(img_size), layer_rows, total_bflops",
}


MAX_SIZE_NORMALISER_CALLS = 8


def size_normaliser_calls(path: Path) -> List[int]:
    """The lines of ``path`` that call the size normaliser (``image_size(...)``, ``sizes.image_size(...)``,
    ``checked_image_size(...)``)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name in ("image_size", "checked_image_size"):
                lines.append(node.lineno)
    return lines


@pytest.mark.slow
def test_sizes_are_normalised_only_where_they_enter():
    calls = {str(p.relative_to(REPO)): size_normaliser_calls(p) for p in python_files("yolo", "tools")}
    inside = {path: lines for path, lines in calls.items() if lines and path not in SIZE_ENTRIES}
    assert not inside, f"image sizes normalised inside (take an ImageSize, annotated so, instead): {inside}"
    assert all(calls[path] for path in SIZE_ENTRIES), "an entry that no longer normalises: drop it from SIZE_ENTRIES"
    # One call a place where a size enters; a new one is a new entry, not a size re-normalised on its way.
    assert sum(map(len, calls.values())) <= MAX_SIZE_NORMALISER_CALLS, calls


def test_the_size_rule_finds_a_call_inside(tmp_path):
    module = tmp_path / "inner.py"
    module.write_text("from yolo.ops import sizes\n\ndef f(x):\n    return sizes.image_size(x, 'x')\n")
    assert size_normaliser_calls(module) == [4]


# Names every command-line tool defines once, each meaning the same (its entry point, its parser); and one function
# of the export that asks the model what yolo.models.heads asks its heads.
SAME_MEANING_NAMES = {"main", "cli", "build_parser", "parse_args", "has_gaussian_heads"}


@pytest.mark.slow
def test_no_two_public_classes_or_functions_share_a_name():
    defined: Dict[str, List[str]] = {}
    for path in python_files("yolo"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(str(path.relative_to(REPO)))
    twice = {name: paths for name, paths in defined.items() if len(paths) > 1 and name not in SAME_MEANING_NAMES}
    assert not twice, f"one name, two definitions (name each for what it is): {twice}"


def add_argument_calls(path: Path) -> List[str]:
    """``function:line`` of each ``add_argument`` call in ``path``."""
    found = []
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(function, ast.FunctionDef):
            found += [f"{function.name}:{node.lineno}" for node in ast.walk(function)
                      if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"]
    return found


def test_every_tool_flag_comes_from_a_declaration():
    """The tools' parsers add their flags from the settings dataclasses (yolo/settings; yolo.cli.flags.common's
    add_setting_flags) and hidden older spellings (hidden_alias): no tool module writes an add_argument."""
    for path in python_files("yolo/cli", "tools"):
        calls = add_argument_calls(path)
        if path == PACKAGE / "cli" / "flags" / "common.py":
            assert {call.split(":")[0] for call in calls} == {"add_setting_flags", "hidden_alias"}
        else:
            assert not calls, f"{path.relative_to(REPO)} adds flags itself: {calls}"


@pytest.mark.slow
def test_img_size_is_declared_once():
    """One declaration of --img-size (yolo.settings.common.img_size_setting) that every tool's settings use."""
    declared = [str(p.relative_to(REPO)) for p in python_files("yolo", "tools")
                for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(node, ast.Call)
                and (getattr(node.func, "id", None) == "setting" or getattr(node.func, "attr", None) == "add_argument")
                and any(isinstance(a, ast.Constant) and a.value == "--img-size" for a in node.args)]
    assert declared == ["yolo/settings/common.py"], declared


def test_the_cycle_check_finds_a_package_cycle():
    graph = {"yolo.models.heads": {"yolo.inference.nms"}, "yolo.inference.nms": {"yolo.evaluation.coco"},
             "yolo.evaluation.coco": {"yolo.models.heads"}, "yolo.ops.boxes": set()}
    edges = package_graph(graph)
    cycles = cycles_in({unit: set(deps) for unit, deps in edges.items()})
    assert cycles == [["yolo.evaluation", "yolo.models", "yolo.inference", "yolo.evaluation"]]
    assert "yolo.models -> yolo.inference: yolo.models.heads -> yolo.inference.nms" in describe_cycle(cycles[0], edges)


LAYER_TYPES = PACKAGE / "models" / "layer_types"


def register_calls(path: Path) -> List[int]:
    """Lines of ``path`` that call a function named ``register`` (the layer-type decorator, however imported)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and
            (getattr(node.func, "id", None) == "register" or getattr(node.func, "attr", None) == "register")]


@pytest.mark.slow
def test_every_layer_type_is_registered_in_layer_types():
    """Every section type's builder is a function of a module in ``yolo/models/layer_types/`` (beside the module
    it builds), and no module elsewhere calls ``register(``."""
    assert {"convolutional", "maxpool", "route", "shortcut", "yolo", "region", "Gaussian_yolo"} <= set(BUILDERS)
    outside = {name: fn.__module__ for name, fn in BUILDERS.items()
               if Path(fn.__code__.co_filename).resolve().parent != LAYER_TYPES}
    assert not outside, f"builders outside yolo/models/layer_types/: {outside}"
    callers = [f"{path.relative_to(REPO)}:{line}" for path in python_files("yolo", "tools", "tests")
               if path.parent != LAYER_TYPES for line in register_calls(path)]
    assert not callers, "register( called outside yolo/models/layer_types/: " + ", ".join(callers)


@pytest.mark.slow
def test_the_layer_types_package_imports_every_registering_module():
    """Importing ``yolo.models.layer_types`` is what fills the registry: it imports each module of the folder
    (found there, not listed by hand), so every module that registers has its builders in ``BUILDERS``."""
    registering = {module_name(p) for p in LAYER_TYPES.glob("*.py") if p.stem != "__init__" and register_calls(p)}
    assert len(registering) > 20
    missing = registering - {fn.__module__ for fn in BUILDERS.values()}
    assert not missing, f"importing yolo.models.layer_types leaves {sorted(missing)} out of the registry"
    listed = import_graph()["yolo.models.layer_types"] & registering
    assert not listed, f"yolo/models/layer_types/__init__.py lists modules by hand again: {sorted(listed)}"


@pytest.mark.parametrize("path", sorted((REPO / "tools").glob("*.py")) + python_files("yolo/cli"),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_command_line_tools_are_thin(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) < 150


# Lab tooling that lives beside its launcher in tools/ rather than in the package (the package is what a user
# installs): the folder, and why it is not in yolo.
LAB_FOLDERS = {"gpu_lab": "tools/gpu_report.py: ours against Darknet's GPU build, built from ../shared/darknet"}


@pytest.mark.slow
def test_lab_tooling_stays_out_of_the_package():
    """The package imports nothing from the lab folders of tools/ (installed, it has no tools/ beside it), and
    their modules keep the package's size rule."""
    assert sorted(p.name for p in (REPO / "tools").iterdir() if p.is_dir() and p.name != "__pycache__") == \
        sorted(LAB_FOLDERS)
    offenders = [f"{path.relative_to(REPO)} -> {dep}" for path, deps in import_names(python_files("yolo")).items()
                 for dep in deps if dep.split(".")[0] in {*LAB_FOLDERS, "tools"}]
    assert not offenders, "the package imports lab tooling: " + ", ".join(offenders)
    long = [f"{path.relative_to(REPO)}: {lines}" for folder in LAB_FOLDERS for path in python_files(f"tools/{folder}")
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 500]
    assert not long, "modules over 500 lines: " + ", ".join(long)


def import_names(paths: List[Path]) -> Dict[Path, Set[str]]:
    """File -> every absolute module name it imports, anywhere in the file (functions too)."""
    found: Dict[Path, Set[str]] = {}
    for path in paths:
        names: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[path] = names
    return found


def test_the_lab_check_finds_an_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from gpu_lab.gpu_report import run_report\n")
    assert import_names([module]) == {module: {"gpu_lab.gpu_report"}}


# Tools that only make sense in a clone beside ../shared (no console script), and why.
CLONE_ONLY = {"compare_darknet": "trains with the Darknet CLI built from ../shared/darknet by the test harness",
              "gpu_report": "builds Darknet's GPU build from ../shared/darknet and reads ../shared/assets "
                            "(lab tooling, tools/gpu_lab)"}


def test_every_tool_is_a_console_script_running_the_same_code():
    scripts = console_scripts()
    launchers = sorted(p.stem for p in (REPO / "tools").glob("*.py") if not p.stem.startswith("_"))
    assert launchers
    for stem in launchers:
        if stem in CLONE_ONLY:
            continue
        text = (REPO / "tools" / f"{stem}.py").read_text(encoding="utf-8")
        assert f"from yolo.cli.{stem} import cli" in text, f"tools/{stem}.py does not launch yolo.cli.{stem}"
        # yolo.cli.launch answers --help, then runs yolo.cli.<stem>.cli
        assert scripts.get(f"yolo-{stem.replace('_', '-')}") == f"yolo.cli.launch:{stem}", \
            f"no console script yolo-{stem.replace('_', '-')} = yolo.cli.launch:{stem}"
    from yolo.cli import launch

    assert sorted(launch.COMMANDS) == sorted(name.replace("yolo-", "").replace("-", "_") for name in scripts)


# ``from test_x import ...`` or ``import test_x``, at any indent: inside a function, or in the source text of a
# script a test runs in a subprocess (which an AST walk would not see).
TEST_MODULE_IMPORT = re.compile(r"^\s*(?:from\s+(test_\w+)\s+import\b|import\s+(test_\w+)\b)", re.MULTILINE)


def imported_test_modules(text: str) -> List[str]:
    """The test modules (``test_*``) that Python source ``text`` imports."""
    return [match.group(1) or match.group(2) for match in TEST_MODULE_IMPORT.finditer(text)]


def test_no_test_module_imports_another():
    """What tests share lives in tests/helpers.py, training_helpers.py, darknet_parity.py, cfg_snippets.py,
    previous_darknet_augment.py and conftest.py, so that a test module is read for its tests alone and can change
    without breaking another."""
    offenders = [f"{path.relative_to(REPO)}: {name}" for path in python_files("tests")
                 for name in imported_test_modules(path.read_text(encoding="utf-8"))]
    assert not offenders, "test modules importing test modules:\n" + "\n".join(offenders)


def test_the_test_import_check_finds_them():
    text = "import os\nfrom test_train import FAST\n\ndef f():\n    import test_loss as other\n" \
           "DRIVER = \"\"\"\nfrom test_kill_resume import made_up\n\"\"\"\nfrom training_helpers import run\n"
    assert imported_test_modules(text) == ["test_train", "test_loss", "test_kill_resume"]


# The post-processing settings whose defaults live in yolo/ops/postprocess_defaults.py, by keyword and by flag.
POSTPROCESS_SETTINGS = re.compile(r"^(conf_thres|iou_thres|max_det|beta_nms)(_|$)")
POSTPROCESS_FLAGS = {"--conf-thres", "--iou-thres", "--max-det", "--beta-nms"}
POSTPROCESS_DEFAULTS = PACKAGE / "ops" / "postprocess_defaults.py"


def _number(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def written_postprocess_defaults(source: str) -> List[int]:
    """Lines of ``source`` that write a post-processing default as a number: a parameter default, a field, a
    keyword (``conf_thres=0.25``), a flag's ``default=`` or a ``setting(0.25, "--conf-thres")``, a cfg read
    (``get_float("beta_nms", 0.6)``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arguments):
            named = node.args[len(node.args) - len(node.defaults):] + node.kwonlyargs
            values = list(node.defaults) + list(node.kw_defaults)
            lines += [v.lineno for a, v in zip(named, values) if POSTPROCESS_SETTINGS.match(a.arg) and _number(v)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if POSTPROCESS_SETTINGS.match(node.target.id) and _number(node.value):
                lines.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg and POSTPROCESS_SETTINGS.match(node.arg) and _number(node.value):
            lines.append(node.value.lineno)
        elif isinstance(node, ast.Call):
            strings = {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
            numbers = [a for a in node.args if _number(a)] + [k.value for k in node.keywords
                                                              if k.arg == "default" and _number(k.value)]
            named = bool(strings & POSTPROCESS_FLAGS) or any(POSTPROCESS_SETTINGS.match(s) for s in strings)
            if named and numbers:
                lines.append(node.lineno)
    return sorted(set(lines))


def test_the_postprocess_check_finds_written_defaults():
    snippets = ["def f(x, conf_thres=0.25): pass", "class A:\n    iou_thres: float = 0.45",
                "f(x, max_det=300)", 'p.add_argument("--conf-thres", type=float, default=0.25)',
                'x = setting(0.001, "--conf-thres")', 's.get_float("beta_nms", 0.6)']
    assert all(written_postprocess_defaults(s) for s in snippets)
    assert not written_postprocess_defaults("def f(x, conf_thres=DETECT_CONF_THRES, max_det=None): pass")


@pytest.mark.slow
def test_postprocess_defaults_are_written_once():
    """Thresholds, max_det and beta_nms take their defaults from yolo/ops/postprocess_defaults.py; nowhere else in
    the package or the tools writes one as a number."""
    offenders = [f"{path.relative_to(REPO)}:{line}" for path in python_files("yolo", "tools")
                 if path != POSTPROCESS_DEFAULTS
                 for line in written_postprocess_defaults(path.read_text(encoding="utf-8"))]
    assert not offenders, "post-processing defaults written outside yolo/ops/postprocess_defaults.py: " + \
        ", ".join(offenders)


def test_ops_knows_no_cfg_section_names():
    """Reading a cfg (its sections, which one is a head) is yolo.models' business: no module of yolo.ops compares
    with a section type's name."""
    section_types = {name.lower() for name in BUILDERS} | {"net", "network"}
    offenders = [f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}" for path in python_files("yolo/ops")
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in section_types]
    assert not offenders, "cfg section names in yolo.ops: " + ", ".join(offenders)


HEAD_SECTIONS_MODULE = PACKAGE / "models" / "head_sections.py"


def head_name_groups(source: str) -> List[int]:
    """Lines of ``source`` with a tuple, list or set of two or more head section names (``("yolo", "region")``)."""
    heads = {"yolo", "region", "gaussian_yolo", "detection"}
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Tuple, ast.List, ast.Set))
            and sum(isinstance(e, ast.Constant) and str(e.value).lower() in heads for e in node.elts) >= 2]


@pytest.mark.slow
def test_groups_of_head_sections_are_named_once():
    """A group of head section types (the heads whose options the trainer reads, whose class count changes, ...)
    is a constant of yolo/models/head_sections.py, not a tuple written again where it is used."""
    assert head_name_groups('if s.type in ("yolo", "region"): pass') == [1]
    offenders = [f"{path.relative_to(REPO)}:{line}" for path in python_files("yolo", "tools")
                 if path != HEAD_SECTIONS_MODULE for line in head_name_groups(path.read_text(encoding="utf-8"))]
    assert not offenders, "head section names grouped outside yolo/models/head_sections.py: " + ", ".join(offenders)


@pytest.mark.slow
def test_the_tools_load_torchvision_and_matplotlib_only_when_they_use_them():
    """Importing torchvision takes seconds (it loads torch._dynamo), matplotlib half a second: every tool's module
    and the package import without them, so that help and refused input answer at once; NMS loads torchvision on
    first use, a drawing matplotlib (on the Agg backend)."""
    tools = [module_name(p) for p in python_files("yolo/cli") if p.stem != "__init__"]
    code = ("import importlib, sys\n"
            f"for name in {['yolo', *tools]!r}:\n"
            "    importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.startswith(('torchvision', 'torch._dynamo', 'matplotlib'))))\n"
            "from yolo.ops.nms import nms\n"
            "import torch\n"
            "boxes, scores, groups = torch.tensor([[0., 0, 10, 10], [1, 1, 10, 10]]), torch.ones(2), torch.zeros(2)\n"
            "nms(boxes, scores, groups.long(), 0.5)\n"
            "print('torchvision' in sys.modules)\n"
            "from yolo.plots import results_figure\n"
            "results_figure([{'epoch': '1', 'loss': '2.5'}])\n"
            "import matplotlib\n"
            "print(matplotlib.get_backend())\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "MPLBACKEND"})
    assert run.returncode == 0, run.stderr[-2000:]
    loaded, after_nms, backend = run.stdout.strip().splitlines()
    assert loaded == "[]", loaded
    assert after_nms == "True"
    assert backend.lower() == "agg"
