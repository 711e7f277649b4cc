"""The code a stage depends on: its stage module plus every project module its stage function reaches (AST only):
the project's modules are stages/... and everything under src/ (paperdag's blocks and methods, a project's own
packages); the engine and installed third-party code are not.

DVC does not follow imports, so these files go into each stage's deps. In the stage module the unit is the stage
function: the module-level helpers and classes it names count, transitively, and so does the code that runs when the
module is imported (constants, class bodies, decorators, defaults); other stages' functions do not. A project module
reached counts whole, with every project module it imports anywhere in it, and the __init__.py of each package above
it. A lazy package (paperdag._lazy.attach) imports a submodule when one of its names is used: the names used decide
which. The engine is not a dependency: it moves data, it does not compute results.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from paperdag.engine.errors import PaperdagError

PACKAGE = "paperdag"
STAGES = "stages"  # the stage modules, at the repository's root; every other project module lives under src/
_NOT_DEPS = f"{PACKAGE}.engine"

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def code_deps(root: Path, stage_module_file: str, function: str | None = None) -> list[str]:
    """Sorted repo-relative files, the stage module first: what `function` of the stage module runs, or with no
    function what the whole stage module can reach (a scratch copy of a pipeline needs all of it)."""
    return CodeIndex(root).deps(stage_module_file, function)


class CodeIndex:
    """Parsed modules of one repository, shared by the stages rendered together."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._trees: dict[Path, ast.Module] = {}
        self._imports: dict[str, list[str]] = {}  # module -> the modules its file imports
        self._files: dict[str, Path | None] = {}
        self._lazy: dict[str, dict[str, str]] = {}
        self._uses: dict[tuple[str | Path, ...], tuple] = {}

    def deps(self, stage_module_file: str, function: str | None = None) -> list[str]:
        path = self.root / stage_module_file
        module = ".".join(Path(stage_module_file).with_suffix("").parts)
        direct = self._whole_module(path, module) if function is None else self._function(path, module, function)
        files = self._reach(direct)
        rel = {f.relative_to(self.root).as_posix() for f in files} - {stage_module_file}
        return [stage_module_file, *sorted(rel)]

    # ------------------------------------------------------------------ modules and files

    def file_of(self, module: str) -> Path | None:
        """The file of a project module that can be a dependency: stages/... or anything under src/ (paperdag's
        blocks and methods, or a project's own packages), not the engine (None: third-party, the engine, absent)."""
        if module not in self._files:
            self._files[module] = None
            if module != _NOT_DEPS and not module.startswith(_NOT_DEPS + "."):
                base = (self.root if module.split(".")[0] == STAGES else self.root / "src").joinpath(*module.split("."))
                self._files[module] = next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)
        return self._files[module]

    def _tree(self, path: Path) -> ast.Module:
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(path.read_text(), filename=str(path))
            except (OSError, SyntaxError) as e:
                raise PaperdagError(f"code dependencies: cannot parse {path.relative_to(self.root)}: {e}") from None
        return self._trees[path]

    def _reach(self, modules: list[str]) -> set[Path]:
        """The files importing `modules` executes: their own, their packages' __init__.py, what they import, and on."""
        files: set[Path] = set()
        todo, seen = list(modules), set()
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            parent = module.rpartition(".")[0]
            if parent:
                todo.append(parent)
            f = self.file_of(module)
            if f is not None:
                files.add(f)
                if module not in self._imports:
                    self._imports[module] = self._whole_module(f, module)
                todo += self._imports[module]
        return files

    def lazy_names(self, package: str) -> dict[str, str]:
        """A lazy package's exported name -> submodule, from its `attach(__name__, {...})` call ({} when not lazy)."""
        if package not in self._lazy:
            self._lazy[package] = self._attach_call(package)
        return self._lazy[package]

    def _attach_call(self, package: str) -> dict[str, str]:
        f = self.file_of(package)
        if f is None or f.name != "__init__.py":
            return {}
        for node in ast.walk(self._tree(f)):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "attach"
                    and len(node.args) == 2 and isinstance(node.args[1], ast.Dict)):
                names: dict[str, str] = {}
                for k, v in zip(node.args[1].keys, node.args[1].values, strict=True):
                    if isinstance(k, ast.Constant) and isinstance(v, (ast.List, ast.Tuple)):
                        names.update({str(e.value): str(k.value) for e in v.elts if isinstance(e, ast.Constant)})
                return names
        return {}

    def _from(self, module: str, name: str) -> list[str]:
        """The modules `from module import name` executes."""
        if name == "*":
            return [module, *{f"{module}.{s}" for s in self.lazy_names(module).values()}]
        if self.file_of(f"{module}.{name}"):
            return [f"{module}.{name}"]
        sub = self.lazy_names(module).get(name)
        return [module, f"{module}.{sub}"] if sub else [module]

    def _attributes(self, module: str, attrs: list[str]) -> list[str]:
        """The modules a use of `module.a.b...` executes; a lazy package used bare may load any of its submodules."""
        out = [module]
        for a in attrs:
            if self.file_of(f"{module}.{a}"):
                module = f"{module}.{a}"
                out.append(module)
                continue
            sub = self.lazy_names(module).get(a)
            if sub:
                out.append(f"{module}.{sub}")
            return out
        out += [f"{module}.{s}" for s in set(self.lazy_names(module).values())]
        return out

    # ------------------------------------------------------------------ what a module or a function uses

    def _whole_module(self, path: Path, module: str) -> list[str]:
        """Every module an import anywhere in the file names, with its attributes used where it is a lazy package."""
        tree = self._tree(path)
        out: list[str] = []
        bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    out.append(a.name)
                    bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, path, node)
                out += [m for a in node.names for m in self._from(base, a.name)]
        for chain in _chains(tree):
            if chain[0] in bound:
                out += self._attributes(bound[chain[0]], chain[1:])
        return out

    def _function(self, path: Path, module: str, function: str) -> list[str]:
        """The modules `function` of a stage module reaches, with the code that runs when the module is imported."""
        defs, bindings, at_import = self._module_uses(path, module)
        if not isinstance(defs.get(function), _FUNCTIONS):
            raise PaperdagError(f"code dependencies: {path.relative_to(self.root)} has no top-level function {function}")
        out = [m for b in bindings.values() if b[1] == "*" for m in self._imported(b)]  # names unknown: the import counts
        todo, done = [function], set()

        def use(chains: list[list[str]], names: dict[str, tuple[str, str | None]]) -> None:
            for root, *rest in chains:
                if root in names:
                    out.extend(self._bound(names[root], rest))
                if root in defs and root not in done:
                    todo.append(root)

        use(at_import, bindings)
        while todo:
            name = todo.pop()
            if name in done:
                continue
            done.add(name)
            own, chains = self._def_uses(path, module, defs[name])
            out += [m for b in own.values() for m in self._imported(b)]
            use(chains, {**bindings, **own})
        return out

    def _module_uses(self, path: Path, module: str) -> tuple[dict[str, _Definition], dict[str, tuple[str, str | None]], list[list[str]]]:
        """A stage module's top-level functions and classes, its module-level imports, the names used at import."""
        key = ("module", path)
        if key not in self._uses:
            tree = self._tree(path)
            defs = {n.name: n for n in tree.body if isinstance(n, (*_FUNCTIONS, ast.ClassDef))}
            self._uses[key] = (defs, self._bindings(_outside_functions(tree), module, path),
                               _chains(tree, import_time=True, lazy_annotations=_defers_annotations(tree)))
        return self._uses[key]

    def _def_uses(self, path: Path, module: str, node: _Definition) -> tuple[dict[str, tuple[str, str | None]], list[list[str]]]:
        """A top-level function's (or class's) own imports (they run when it does) and the names it uses, not
        counting those it binds itself."""
        key = (path, node.name)
        if key not in self._uses:
            imports = [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
            local = _local_names(node) if isinstance(node, _FUNCTIONS) else set()
            self._uses[key] = (self._bindings(imports, module, path), [c for c in _chains(node) if c[0] not in local])
        return self._uses[key]

    def _bindings(self, nodes: Iterable[ast.AST], module: str, path: Path) -> dict[str, tuple[str, str | None]]:
        """Name bound by an import -> (module, the name imported from it; None: the module itself; '*': all)."""
        out: dict[str, tuple[str, str | None]] = {}
        for node in nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    out[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
                    if not a.asname and "." in a.name:  # `import a.b.c` binds a, and imports a.b.c whether used or not
                        out[f"*{a.name}"] = (a.name, None)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, path, node)
                out.update({a.asname or a.name: (base, a.name) for a in node.names if a.name != "*"})
                if any(a.name == "*" for a in node.names):
                    out[f"*{base}"] = (base, "*")
        return out

    def _imported(self, binding: tuple[str, str | None]) -> list[str]:
        """The modules the import statement itself executes, before any use of what it binds."""
        base, imported = binding
        if imported is None:
            return [base]
        return [f"{base}.{imported}"] if self.file_of(f"{base}.{imported}") else self._from(base, imported)

    def _bound(self, binding: tuple[str, str | None], attrs: list[str]) -> list[str]:
        """The modules a use of an imported name (with the attributes read from it) executes."""
        base, imported = binding
        if imported is None:
            return self._attributes(base, attrs)
        if imported != "*" and self.file_of(f"{base}.{imported}"):
            return self._attributes(f"{base}.{imported}", attrs)
        return self._from(base, imported)


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module of `from <node.module> import ...`, relative imports resolved against `module`."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def _chains(node: ast.AST, import_time: bool = False, lazy_annotations: bool = False) -> list[list[str]]:
    """Every name used under node, with the attributes read from it: `a.b.c` -> ["a", "b", "c"], `x` -> ["x"].
    import_time: only what runs when the module is imported (a function's decorators, defaults and, unless
    `from __future__ import annotations` defers them, its annotations; not its body)."""
    out: list[list[str]] = []

    class Visitor(ast.NodeVisitor):
        def visit_Attribute(self, n: ast.Attribute) -> None:
            attrs: list[str] = []
            cur: ast.expr = n
            while isinstance(cur, ast.Attribute):
                attrs.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                out.append([cur.id, *reversed(attrs)])
            else:
                self.visit(cur)

        def visit_Name(self, n: ast.Name) -> None:
            out.append([n.id])

        def visit_FunctionDef(self, n: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            if not import_time:
                self.generic_visit(n)
                return
            a = n.args
            for x in [*n.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d)]:
                self.visit(x)
            if not lazy_annotations:
                for x in _annotations(n):
                    self.visit(x)

        def visit_AsyncFunctionDef(self, n: ast.AsyncFunctionDef) -> None:
            self.visit_FunctionDef(n)

    Visitor().visit(node)
    return out


def _annotations(f: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    a = f.args
    args = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]
    return [*(x.annotation for x in args if x.annotation), *([f.returns] if f.returns else [])]


def _outside_functions(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node of the module outside a function's body: where the imports that bind module-level names are."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _FUNCTIONS):
            todo += list(ast.iter_child_nodes(node))


def _local_names(f: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function binds itself (its arguments and assignments, not its imports): a use of one is not a use of the
    module-level name it shadows. Nested functions and comprehensions keep their own names (counted as uses)."""
    a = f.args
    names = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                             *([a.kwarg] if a.kwarg else [])]}
    declared: set[str] = set()
    todo: list[ast.AST] = list(f.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            names.add(node.name)
            continue
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        todo += list(ast.iter_child_nodes(node))
    return names - declared


def _defers_annotations(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
               for n in tree.body)
