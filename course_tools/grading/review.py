"""Which submissions a person should read: code that may reach the model answer around the block by name.

An exercise's model answer (``Exercise.forbidden``: course_lib's own function, torch's fused
attention) is out of bounds by rule. ``answers.forbid`` enforces the rule by name, against
accidents; it cannot prove the answer absent (a second copy of ``attention.py`` loaded under
another name computes it just as well, and the student copy ships course_lib). So the batch
grader also reads each submission's code cells and flags, never scores:

* anywhere in the notebook, a way around Python's imports or around names: ``importlib``,
  ``imp``, ``runpy``, ``builtins``, ``__import__``, ``sys.modules``/``sys.path``/``sys.meta_path``,
  ``exec``/``eval``/``compile``, ``spec_from_file_location`` and the other loader hooks, IPython's
  hooks that rewrite later cells, ``torch.ops`` and ``torch._…`` internals, ``%run``/``%load``/``!``
  lines, a string naming
  a path inside ``course_lib/``, course_lib's own dunders (``course_lib.__file__``), an import of
  a course_lib module by its bare name (``import attention``), of the grader tests' modules or of
  the channel's (``answers``, ``wire``: a notebook that writes its own frames);
* in the graded function and everything it uses (the notebook's functions, classes and globals it
  reads, followed transitively), the model answer itself under any name, or a module holding it
  passed around whole (``getattr(F, name)``).

An import of course_lib alone is not flagged: every exercise imports it, for helpers
(``elu_plus_one``) and for the "Try it" comparison with the reference, and that comparison lies
outside the graded function. Cells are read with ``ast`` after IPython's own rewriting of ``%``
and ``!`` lines; a cell that still does not parse (it could run after a hook rewrote it) is
searched line by line for the same ways around.
"""

import ast
import importlib
import pkgutil
import re
import types
from collections.abc import Iterable, Iterator
from functools import cache

import course_lib
from course_tools.grading.registry import Exercise

HATCH_MODULES = ("importlib", "imp", "runpy", "builtins", "__builtins__")
HATCH_NAMES = ("sys.modules", "sys.path", "sys.meta_path", "sys.path_hooks", "torch.ops",
               "course_tools.grading.exercises",  # the grader tests: they compute the answer keys
               "course_tools.grading.answers", "course_tools.grading.wire")  # the channel to the grader
HATCH_BUILTINS = ("__import__", "exec", "eval", "compile")
HOOKS = ("spec_from_file_location", "module_from_spec", "exec_module", "load_module", "SourceFileLoader",
         "load_source", "run_path", "run_module",  # loaders; then IPython's hooks that rewrite later cells
         "input_transformers_cleanup", "input_transformers_post", "ast_transformers", "input_transformer_manager")
DUNDERS = ("__file__", "__path__", "__spec__", "__loader__", "__dict__")
MAGICS = ("run", "load", "loadpy", "system", "sx", "getoutput", "script", "bash", "sh", "writefile")
COURSE_LIB_PATH = re.compile(r"course_lib[/\\]")
SHOWN_CHARS = 80  # of a name quoted from the submission
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
          ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
FALLBACK = [(re.compile(pattern), label) for pattern, label in (
    (r"\bimportlib\b", "importlib"), (r"\b(?:import|from)\s+imp\b", "imp"), (r"\brunpy\b", "runpy"),
    (r"\bbuiltins\b", "builtins"), (r"__import__", "__import__"),
    (r"\bsys\s*\.\s*(?:modules|path|meta_path|path_hooks)\b", "sys.modules or sys.path"),
    (r"\btorch\s*\.\s*(?:ops\b|_\w)", "torch internals"), (r"\b(?:exec|eval|compile)\s*\(", "exec, eval or compile"),
    (r"\b(?:" + "|".join(HOOKS) + r")\b", "a loader or IPython hook"))]


def review(cells: Iterable[tuple[int, str]], exercise: Exercise) -> list[str]:
    """Why a person should read this notebook's code: one finding per kind, the first place it occurs.

    ``cells``: (cell number, source) of each code cell. [] for an honest notebook; each finding
    reads like "uses spec_from_file_location (cell 3, line 2)".
    """
    findings: dict[str, str] = {}
    trees = []
    for number, source in cells:
        try:
            trees.append((number, compile(_python(source), f"cell {number}", "exec", dont_inherit=True,
                                          flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # it may still run after a transformer
            for line_number, line in enumerate(source.splitlines(), start=1):
                for pattern, label in FALLBACK:
                    if pattern.search(line):
                        findings.setdefault(label, f"{label} in a cell that does not parse (cell {number}, line "
                                                   f"{line_number})")
    imports = _imports(trees)
    for number, tree in trees:
        for label, text, node in _hatches(tree, imports):
            findings.setdefault(label, f"{text} (cell {number}, line {getattr(node, 'lineno', 1)})")
    for label, text, number, node in _model_answer(trees, imports, exercise):
        findings.setdefault(label, f"{text} (cell {number}, line {getattr(node, 'lineno', 1)})")
    return list(findings.values())


def _python(source: str) -> str:
    """``source`` as IPython runs it: ``%magic`` and ``!command`` lines rewritten into calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - then it is parsed as written
        return source


def _imports(trees: list[tuple[int, ast.Module]]) -> dict[str, set[str]]:
    """Every name an import statement binds anywhere in the notebook → the dotted names it may stand for."""
    bound: dict[str, set[str]] = {}
    for _, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.partition(".")[0]
                    bound.setdefault(name, set()).add(alias.name if alias.asname else name)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    bound.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")
    return bound


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _chains(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Each whole chain read in ``tree`` (``F.scaled_dot_product_attention``, not also ``F``), with its node."""
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in inner and isinstance(node.ctx, ast.Load):
            dotted = _dotted(node)
            if dotted:
                yield node, dotted


def _meanings(dotted: str, imports: dict[str, set[str]]) -> set[str]:
    """What ``dotted`` may name: its first part replaced by what imports bound to it (itself when unbound)."""
    first, _, rest = dotted.partition(".")
    return {".".join(filter(None, (target, rest))) for target in imports.get(first, {first})}


def _hatch(dotted: str) -> str | None:
    """The way around imports or names that ``dotted`` is, as a label, or None."""
    parts = dotted.split(".")
    hook = next((part for part in parts if part in HOOKS), None)
    if hook:
        return hook
    if parts[0] in HATCH_MODULES:
        return parts[0]
    if len(parts) == 1 and parts[0] in HATCH_BUILTINS:
        return parts[0]
    for name in HATCH_NAMES:
        if dotted == name or dotted.startswith(name + "."):
            return ".".join(parts[:3]) if name == "torch.ops" else name
    if parts[0] == "torch":
        private = next((i for i, part in enumerate(parts) if part.startswith("_") and not part.endswith("__")), None)
        if private is not None:
            return ".".join(parts[: private + 1])
    if parts[0] == "course_lib" and any(part in DUNDERS for part in parts):
        return ".".join(parts[: next(i for i, part in enumerate(parts) if part in DUNDERS) + 1])
    return None


@cache
def _course_lib_modules() -> frozenset[str]:
    return frozenset(module.name for module in pkgutil.iter_modules(course_lib.__path__))


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _hatches(tree: ast.Module, imports: dict[str, set[str]]) -> Iterator[tuple[str, str, ast.AST]]:
    """(label, finding, node) for each way around imports or names in one cell."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [
                node.module or "", *(f"{node.module}.{alias.name}" for alias in node.names)]
            for module in modules:
                label = _hatch(module)
                if label:
                    yield label, f"imports {_shown(module)}", node
                elif module.partition(".")[0] in _course_lib_modules() and not getattr(node, "level", 0):
                    yield f"bare {module}", f"imports {_shown(module)}, a course_lib module, by its bare name", node
        elif isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Attribute) and function.attr in ("run_line_magic", "run_cell_magic"):
                magic = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else ""
                if magic in MAGICS:
                    yield f"%{magic}", f"runs %{magic}", node
            elif isinstance(function, ast.Attribute) and function.attr in ("system", "getoutput") and \
                    isinstance(function.value, ast.Call) and _dotted(function.value.func) == "get_ipython":
                yield "!", "runs a shell command (!)", node
        elif isinstance(node, ast.Attribute) and node.attr in HOOKS:  # on anything: get_ipython().ast_transformers
            yield node.attr, f"uses {node.attr}", node
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and COURSE_LIB_PATH.search(node.value):
            yield "course_lib path", f"names a file inside course_lib ({_shown(node.value)!r})", node
    for node, dotted in _chains(tree):
        imported = dotted.partition(".")[0] in imports  # else a module's name only counts when it is a builtin's
        for meaning in sorted(_meanings(dotted, imports)):
            label = _hatch(meaning)
            if label and (imported or label in (*HATCH_BUILTINS, "__builtins__", *HOOKS)):
                yield label, f"uses {_shown(label)}", node


# --- the model answer reaching the graded function ----------------------------------------


def _resolve(dotted: str) -> list[tuple[str, object]]:
    """(prefix, object) for each prefix of ``dotted`` this process can look up: course_lib (its
    submodules imported on demand) and torch (attributes only); [] for anything else."""
    parts = dotted.split(".")
    if parts[0] not in ("course_lib", "torch"):
        return []
    found = [(parts[0], importlib.import_module(parts[0]))]
    for index in range(1, len(parts)):
        prefix = ".".join(parts[: index + 1])
        try:
            found.append((prefix, getattr(found[-1][1], parts[index])))
        except Exception:  # noqa: BLE001 - an attribute this installation does not have
            if parts[0] != "course_lib":
                break
            try:
                found.append((prefix, importlib.import_module(prefix)))
            except Exception:  # noqa: BLE001 - nor a module
                break
    return found


@cache
def _forbidden(names: tuple[str, ...]) -> tuple[object, ...]:
    """The objects the dotted ``names`` are (in this process: the grader's, never blocked)."""
    return tuple(steps[-1][1] for name in names if (steps := _resolve(name)) and steps[-1][0] == name)


def _holds(module: object, forbidden: tuple[object, ...]) -> bool:
    return isinstance(module, types.ModuleType) and any(
        value is answer for value in vars(module).values() for answer in forbidden)


def _model_answer(trees: list[tuple[int, ast.Module]], imports: dict[str, set[str]], exercise: Exercise
                  ) -> Iterator[tuple[str, str, int, ast.AST]]:
    """(label, finding, cell, node) where the model answer reaches the graded function."""
    forbidden = _forbidden(exercise.forbidden)
    if not forbidden:
        return
    function = exercise.function_name
    for number, statement in _dependencies(trees, function):
        seeds = [(statement, function)] if function in imports else []  # the function imported, not written
        for node, dotted in [*_chains(statement), *seeds]:
            for meaning in sorted(_meanings(dotted, imports)):
                steps = _resolve(meaning)
                for index, (prefix, value) in enumerate(steps):
                    following = meaning.split(".")[index + 1:index + 2]
                    if any(value is answer for answer in forbidden):
                        yield prefix, f"{function} uses the model answer {_shown(prefix)}", number, node
                        break
                    if _holds(value, forbidden) and (not following or following[0].startswith("__")):
                        yield prefix, (f"{function} uses {_shown(prefix)} as a whole, which holds the model "
                                       "answer"), number, node
                        break


def _dependencies(trees: list[tuple[int, ast.Module]], name: str) -> list[tuple[int, ast.stmt]]:
    """The top-level statements that bind ``name``, and, transitively, those binding every global they read."""
    binders: dict[str, list[tuple[int, ast.stmt]]] = {}
    for number, tree in trees:
        for statement in tree.body:
            for bound in _stores([statement])[0]:
                binders.setdefault(bound, []).append((number, statement))
    found, todo, seen = [], [name], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for number, statement in binders.get(current, []):
            if all(statement is not other for _, other in found):
                found.append((number, statement))
                todo.extend(_reads(statement))
    return found


def _stores(nodes: Iterable[ast.AST]) -> tuple[set[str], set[str]]:
    """(names bound in the scope of ``nodes``, names declared ``global`` there); nested scopes left out."""
    stored, declared, todo = set(), set(), list(nodes)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stored.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored |= {alias.asname or alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.Global):
            declared |= set(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            stored.add(node.name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        if not isinstance(node, SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return stored, declared


def _reads(node: ast.AST) -> set[str]:
    """The global names ``node`` reads: inside a function, class or comprehension, its own
    parameters and assignments are left out."""
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) else set()
    if not isinstance(node, SCOPES):
        return set().union(*map(_reads, ast.iter_child_nodes(node)))
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        arguments = node.args
        outer = [*getattr(node, "decorator_list", []), *arguments.defaults, *filter(None, arguments.kw_defaults)]
        inner = node.body if isinstance(node.body, list) else [node.body]
        local = {arg.arg for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                     *filter(None, (arguments.vararg, arguments.kwarg))]}
    elif isinstance(node, ast.ClassDef):
        outer, inner, local = [*node.decorator_list, *node.bases, *node.keywords], node.body, set()
    else:  # a comprehension: the first iterable is evaluated outside it
        generators = node.generators
        outer = [generators[0].iter]
        inner = [*(getattr(node, key) for key in ("elt", "key", "value") if hasattr(node, key)),
                 *(part for g in generators for part in (g.target, *g.ifs)), *(g.iter for g in generators[1:])]
        local = set()
    stored, declared = _stores(inner)
    local |= stored - declared
    return set().union(*map(_reads, outer)) | (set().union(*map(_reads, inner)) - local)
