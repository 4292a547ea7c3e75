"""IPython magics: `%%thena_workflow` defines a workflow, `%thena_run` / `%thena_step` run it.

```
%load_ext thena_nb

%%thena_workflow review --state ReviewState --budget-tokens 20000
parallel([SecurityAgent, PerfAgent])
loop(steps=[ExecutorAgent], until=until_answered, max_iterations=8)

%thena_run review "Review this diff"
```

Each top-level expression of the cell body is a step, in order; other statements (imports,
assignments, `def`) run in the user namespace. thena_nb's public names are in scope without
an import. A wrong cell raises IPython's `UsageError` with one line that names the line as
the editor numbers it (the `%%thena_workflow` line is line 1) and says what to do; IPython
prints it without a traceback. `%thena_run` returns the `Run`, so `run = %thena_run ...`
binds it (and `_` holds it).
"""

from __future__ import annotations

import ast
import builtins
import difflib
import functools
import inspect
import keyword
import re
import shlex
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, TypeVar

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument as _argument
from IPython.core.magic_arguments import magic_arguments as _magic_arguments
from IPython.core.magic_arguments import parse_argstring as _parse_argstring
from IPython.display import display as _display

import thena_nb
from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.steps import LoopStep, ParallelStep
from thena_nb.core.parts.stopping import Condition
from thena_nb.core.parts.tools import Tool
from thena_nb.core.records import _html
from thena_nb.core.records.errors import WorkflowDefinitionError
from thena_nb.core.records.types import Budget
from thena_nb.core.workflow import Workflow, adopted
from thena_nb.notebook._interrupt import install as install_interrupt
from thena_nb.notebook._interrupt import uninstall as uninstall_interrupt

__all__ = ["ThenaMagics", "define_workflow", "load_ipython_extension", "unload_ipython_extension"]

_F = TypeVar("_F", bound=Callable[..., Any])


class _Decorator(Protocol):
    def __call__(self, func: _F, /) -> _F: ...


# IPython's `magic_arguments` and `display` carry no annotations: their types as used here
# (each of those decorators returns the function it is given).
magic_arguments: Callable[[], _Decorator] = _magic_arguments
argument: Callable[..., _Decorator] = _argument
parse_argstring: Callable[[Callable[..., Any], str], Any] = _parse_argstring
display: Callable[..., object] = _display

_MAGIC_LINE = "line 1 (the `%%thena_workflow` line)"
_STEP_KINDS = "a step is an `Agent`, `parallel([...])`, `loop(...)` or a function `fn(ctx)`"
_NESTED_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _public_names() -> list[str]:
    return [n for n in getattr(thena_nb, "__all__", ()) if not n.startswith("_")]


class _CellScope(MutableMapping[str, Any]):
    """The locals of a cell body: reads see the user namespace, then thena_nb's names.

    Writes go to the user namespace, so `import`, assignments and `def` stay defined after
    the cell, while thena_nb's names are only a fallback and are not copied in.
    """

    def __init__(self, user_ns: dict[str, Any]) -> None:
        self.user_ns = user_ns
        self.public = set(_public_names())

    def __getitem__(self, key: str) -> Any:
        try:
            return self.user_ns[key]
        except KeyError:
            if key in self.public:
                return getattr(thena_nb, key)
            raise

    def __setitem__(self, key: str, value: Any) -> None:
        self.user_ns[key] = value

    def __delitem__(self, key: str) -> None:
        del self.user_ns[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.user_ns)

    def __len__(self) -> int:
        return len(self.user_ns)


@dataclass
class _Cell:
    """A parsed cell body and where it is compiled from."""

    body: str
    """The body as compiled: padded with blank lines so that line numbers are the editor's."""
    tree: ast.Module
    filename: str
    user_ns: dict[str, Any]


def define_workflow(
    name: str,
    body: str,
    user_ns: dict[str, Any],
    *,
    state: str | None = None,
    budget: Budget | None = None,
    filename: str = "<thena_workflow>",
    first_line: int = 2,
) -> Workflow:
    """Run a `%%thena_workflow` cell body and build its `Workflow`.

    Args:
        name: The workflow's name, also the variable the caller binds it to.
        body: The cell body: one step per top-level expression, other statements run as usual.
        user_ns: The namespace statements run in and names are looked up in.
        state: The source text of `--state` (a name in `user_ns`), if given.
        budget: The workflow's `Budget`, if any.
        filename: The name the body is compiled under (shown in later tracebacks).
        first_line: The line number of the body's first line in the editor (2: the line
            after `%%thena_workflow`); errors and tracebacks number lines from it.

    Returns:
        The new `Workflow`.

    Raises:
        UsageError: The cell is wrong; the message names the line and the fix.
    """
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(
            f"{_MAGIC_LINE}: {name!r} is not a Python name; the workflow is bound to NAME, "
            f"e.g. `%%thena_workflow review`"
        )
    cell = _parse(body, filename, user_ns, first_line)
    scope = _CellScope(user_ns)
    _provide_nested_names(cell.tree, user_ns, scope.public)
    steps: list[Any] = []
    lines: list[int] = []
    for stmt in cell.tree.body:
        if isinstance(stmt, ast.Expr):
            value = _evaluate(cell, stmt, user_ns, scope)
            _check_step(cell, stmt, value)
            steps.append(value)
            lines.append(stmt.lineno)
        else:
            _execute(cell, stmt, user_ns, scope)
    if not steps:
        raise UsageError(
            f"line {max(1, len(body.splitlines())) + first_line - 1}: the cell has no steps; "
            f"write one step per "
            f"line, e.g. `loop(steps=[agent], until=until_answered)`"
        )
    state_class = _resolve_state(state, user_ns, scope) if state is not None else None
    return _build(name, steps, lines, state_class, budget)


def _parse(body: str, filename: str, user_ns: dict[str, Any], first_line: int) -> _Cell:
    body = "\n" * max(first_line - 1, 0) + body
    try:
        tree = ast.parse(body, filename=filename)
    except SyntaxError as exc:
        line = exc.lineno or 1
        lines = body.splitlines()
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        shown = f": `{text}`" if text else ""
        raise UsageError(
            f"line {line}: syntax error ({exc.msg}){shown}; fix the Python on that line"
        ) from None
    return _Cell(body, tree, filename, user_ns)


def _provide_nested_names(tree: ast.Module, user_ns: dict[str, Any], public: set[str]) -> None:
    # A function, lambda or class defined in the cell looks names up in its globals, the
    # user namespace, when it runs later; the fallback scope cannot reach it there. So the
    # thena_nb names such code uses (and only those) are bound in the user namespace.
    for node in ast.walk(tree):
        if not isinstance(node, _NESTED_SCOPES):
            continue
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Name)
                and isinstance(sub.ctx, ast.Load)
                and sub.id in public
                and sub.id not in user_ns
            ):
                user_ns[sub.id] = getattr(thena_nb, sub.id)


def _evaluate(cell: _Cell, stmt: ast.Expr, user_ns: dict[str, Any], scope: _CellScope) -> Any:
    def thunk() -> Any:
        code = compile(ast.Expression(stmt.value), cell.filename, "eval")
        return eval(code, user_ns, scope)

    return _guarded(cell, stmt, thunk)


def _execute(cell: _Cell, stmt: ast.stmt, user_ns: dict[str, Any], scope: _CellScope) -> None:
    def thunk() -> None:
        # Some errors (`return` outside a function, top-level `await`) appear only here.
        code = compile(ast.Module([stmt], type_ignores=[]), cell.filename, "exec")
        exec(code, user_ns, scope)

    _guarded(cell, stmt, thunk)


def _guarded(cell: _Cell, stmt: ast.stmt, thunk: Callable[[], Any]) -> Any:
    try:
        return thunk()
    except UsageError:
        raise
    except SyntaxError as exc:
        line = exc.lineno if exc.filename == cell.filename and exc.lineno else stmt.lineno
        raise UsageError(
            f"line {line}: syntax error ({exc.msg}); fix the Python on that line"
        ) from None
    except NameError as exc:
        line = _error_line(cell, exc.__traceback__, stmt)
        raise UsageError(_name_message(line, exc.name, cell.user_ns)) from None
    except Exception as exc:
        line = _error_line(cell, exc.__traceback__, stmt)
        hint = _keyword_hint(exc, cell.user_ns) if isinstance(exc, TypeError) else None
        if hint is not None:
            raise UsageError(f"line {line}: {hint}") from None
        raise UsageError(f"line {line}: {type(exc).__name__}: {_one_line(exc)}") from None


_UNEXPECTED_KEYWORD = re.compile(
    r"^(?:(?P<cls>\w+)\.__init__|(?P<fn>\w+))\(\) got an unexpected keyword argument '(?P<kw>\w+)'"
)


def _keyword_hint(exc: TypeError, user_ns: dict[str, Any]) -> str | None:
    """For an unknown keyword to one of thena_nb's callables (or the user's): the keyword,
    a did-you-mean and the keywords it takes."""
    found = _UNEXPECTED_KEYWORD.match(str(exc))
    if found is None:
        return None
    name = found["cls"] or found["fn"]
    target = user_ns.get(name, getattr(thena_nb, name, None) if name in _public_names() else None)
    if target is None:
        return None
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return None
    valid = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not valid:
        return None
    keyword_ = found["kw"]
    match = difflib.get_close_matches(keyword_, valid, n=1)
    mean = f" (did you mean `{match[0]}`?)" if match else ""
    listed = ", ".join(f"`{v}`" for v in valid)
    return f"`{name}()` has no keyword `{keyword_}`{mean}; it takes {listed}"


def _error_line(cell: _Cell, tb: TracebackType | None, stmt: ast.stmt) -> int:
    # The innermost frame compiled from this cell: the statement itself, or a function the
    # cell defined and the statement called.
    line = stmt.lineno
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == cell.filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _name_message(line: int, name: str | None, user_ns: dict[str, Any]) -> str:
    if name is None:
        return f"line {line}: a name is not defined; define or import it above this line"
    candidates = [n for n in (*user_ns, *_public_names()) if not n.startswith("_")]
    match = difflib.get_close_matches(name, [*candidates, *dir(builtins)], n=1)
    if match:
        return f"line {line}: name {name!r} is not defined (did you mean `{match[0]}`?)"
    return f"line {line}: name {name!r} is not defined; define or import it above this line"


def _check_step(cell: _Cell, stmt: ast.Expr, value: Any) -> None:
    if isinstance(value, (Agent, ParallelStep, LoopStep)) or adopted(value) is not value:
        return  # (another framework's agent is adopted as a step by the workflow)
    source = _source(cell, stmt)
    line = stmt.lineno
    if isinstance(value, Tool):
        raise UsageError(
            f"line {line}: `{source}` is a tool, not a step; give it to an agent: "
            f"`Agent(..., tools=[{value.name}])`"
        )
    if isinstance(value, Condition):
        raise UsageError(
            f"line {line}: `{source}` is a stop condition, not a step; use it in a loop: "
            f"`loop(steps=[...], until={source})`"
        )
    if isinstance(value, Workflow):
        raise UsageError(
            f"line {line}: `{source}` is a workflow, not a step; write its steps here instead"
        )
    is_function = inspect.isfunction(value) or inspect.ismethod(value)
    if is_function or isinstance(value, functools.partial):
        return
    if callable(value) and not isinstance(value, type):
        return
    kind = f"the class `{value.__name__}`" if isinstance(value, type) else _a(value)
    raise UsageError(f"line {line}: `{source}` is {kind}, not a step; {_STEP_KINDS}")


def _a(value: Any) -> str:
    if value is None:
        return "`None`"
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{article} `{name}` value"


def _source(cell: _Cell, stmt: ast.stmt) -> str:
    text = ast.get_source_segment(cell.body, stmt) or ast.unparse(stmt)
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _resolve_state(state: str, user_ns: dict[str, Any], scope: _CellScope) -> type:
    if not _DOTTED_NAME.fullmatch(state):
        raise UsageError(f"{_MAGIC_LINE}: `--state {state}` must name a pydantic model class")
    try:
        value = eval(state, user_ns, scope)
    except NameError as exc:
        candidates = [n for n in user_ns if not n.startswith("_")]
        match = difflib.get_close_matches(exc.name or state, candidates, n=1)
        hint = f" (did you mean `{match[0]}`?)" if match else "; define the class first"
        raise UsageError(
            f"{_MAGIC_LINE}: `--state {state}`: name {exc.name or state!r} is not defined{hint}"
        ) from None
    except AttributeError as exc:
        raise UsageError(f"{_MAGIC_LINE}: `--state {state}`: {_one_line(exc)}") from None
    if not isinstance(value, type):
        raise UsageError(
            f"{_MAGIC_LINE}: `--state {state}` is {_a(value)}, not a class; give a pydantic "
            f"model class"
        )
    return value


def _build(
    name: str,
    steps: list[Any],
    lines: list[int],
    state: type | None,
    budget: Budget | None,
) -> Workflow:
    try:
        return Workflow(name, steps, state=state, budget=budget)
    except WorkflowDefinitionError as exc:
        line = _culprit_line(name, steps, lines, state, budget)
        message = f"line {line}: {_one_line(exc)}"
        if state is None and "state" in str(exc):
            message += " Here: add `--state YourState` to the `%%thena_workflow` line."
        raise UsageError(message) from None


def _culprit_line(
    name: str, steps: list[Any], lines: list[int], state: type | None, budget: Budget | None
) -> int:
    # The first prefix of the steps that fails names the step at fault; the error text
    # carries only a step path, and the line is what the user can act on.
    for count in range(1, len(steps) + 1):
        try:
            Workflow(name, steps[:count], state=state, budget=budget)
        except WorkflowDefinitionError:
            return lines[count - 1]
    return lines[-1]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def parse_input(text: str, user_ns: dict[str, Any]) -> Any:
    """The INPUT of `%thena_run` / `%thena_step`: a name's value, or shell-quoted text.

    Args:
        text: What follows NAME on the magic line.
        user_ns: Where a name is looked up.

    Returns:
        The value of `text` when it is a (dotted) name defined in `user_ns`; otherwise the
        words of `text` after shell-style unquoting, joined by single spaces.

    Raises:
        UsageError: `text` is empty or has an unclosed quote.
    """
    text = text.strip()
    if _DOTTED_NAME.fullmatch(text):
        head = text.split(".", 1)[0]
        if head in user_ns:
            try:
                return eval(text, user_ns)
            except AttributeError as exc:
                raise UsageError(f"INPUT `{text}`: {_one_line(exc)}") from None
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"INPUT {text!r}: {exc}; close the quote") from None
    return " ".join(words)


@magics_class
class ThenaMagics(Magics):
    """`%%thena_workflow`, `%thena_run` and `%thena_step`."""

    @no_var_expand
    @magic_arguments()
    @argument("name", help="the variable the workflow is bound to, and its name")
    @argument("--state", default=None, help="a pydantic model class for the run's state")
    @argument("--budget-tokens", type=int, default=None, help="Budget(max_tokens=N)")
    @argument("--budget-tool-calls", type=int, default=None, help="Budget(max_tool_calls=N)")
    @argument("--force", action="store_true", help="bind NAME even if it hides a builtin")
    @cell_magic
    def thena_workflow(self, line: str, cell: str) -> None:
        """Define a workflow: each top-level expression of the cell is a step, in order."""
        # IPython annotates `cell_magic(f)` as `f | Callable[[f], f]`; it returns `f`.
        args = parse_argstring(self.thena_workflow, line)  # type: ignore[misc]
        if not args.force:
            _check_free_name(args.name, self._user_ns())
        budget = None
        if args.budget_tokens is not None or args.budget_tool_calls is not None:
            try:
                budget = Budget(
                    max_tokens=args.budget_tokens, max_tool_calls=args.budget_tool_calls
                )
            except ValueError as exc:
                raise UsageError(f"{_MAGIC_LINE}: budget: {_one_line(exc)}") from None
        user_ns = self._user_ns()
        filename = self._cache_source(f"%%thena_workflow {line}\n{cell}")
        wf = define_workflow(
            args.name, cell, user_ns, state=args.state, budget=budget, filename=filename
        )
        user_ns[args.name] = wf
        display({"text/html": _html.workflow_html(wf), "text/plain": repr(wf)}, raw=True)

    @no_var_expand
    @line_magic
    def thena_run(self, line: str) -> Any:
        """Run a workflow on INPUT and return the run: `run = %thena_run NAME INPUT`.

        The notebook shows the returned `Run` (as the cell's output when the magic is the
        cell's last line), and `_` holds it."""
        wf, value = self._target(line, "thena_run")
        return _run_returning(wf, value)

    @no_var_expand
    @line_magic
    def thena_step(self, line: str) -> Any:
        """Open the Stepper on a new session of a workflow: `%thena_step NAME INPUT`."""
        wf, value = self._target(line, "thena_step")
        try:
            return wf.stepper(value)
        except ModuleNotFoundError as exc:
            if exc.name != "thena_nb.notebook.stepper":
                raise
        # The Stepper widget is not installed in this build: run it whole instead.
        return _run_returning(wf, value)

    def _target(self, line: str, magic: str) -> tuple[Workflow, Any]:
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            raise UsageError(f'usage: %{magic} NAME INPUT, e.g. %{magic} review "Fix the bug"')
        name, rest = parts
        user_ns = self._user_ns()
        wf = user_ns.get(name)
        if not isinstance(wf, Workflow):
            workflows = [k for k, v in user_ns.items() if isinstance(v, Workflow)]
            match = difflib.get_close_matches(name, workflows, n=1)
            hint = f" (did you mean `{match[0]}`?)" if match else ""
            raise UsageError(
                f"{name!r} is not a workflow{hint}; define it with `%%thena_workflow {name}`"
            )
        return wf, parse_input(rest, user_ns)

    def _user_ns(self) -> dict[str, Any]:
        assert self.shell is not None, "the magics are registered with a shell"
        user_ns: dict[str, Any] = self.shell.user_ns
        return user_ns

    def _cache_source(self, cell: str) -> str:
        # Registered with linecache, so tracebacks from functions defined in the cell show
        # their source when the workflow runs later.
        compiler = getattr(self.shell, "compile", None)
        if compiler is not None and hasattr(compiler, "cache"):
            return str(compiler.cache(cell))
        return "<thena_workflow>"


def _run_returning(wf: Workflow, value: Any) -> Any:
    try:
        return wf.run(value)
    except BaseException as exc:
        partial = getattr(exc, "run", None)
        if partial is not None:
            display(partial)
        raise


def _check_free_name(name: str, user_ns: dict[str, Any]) -> None:
    """Refuse a NAME that would hide a builtin or replace something that is no workflow."""
    if name in user_ns:
        value = user_ns[name]
        if isinstance(value, Workflow):
            return  # redefining a workflow is the usual edit-and-run-again
        what = f"holds {_a(value)}"
    elif hasattr(builtins, name):
        what = "is a Python builtin"
    else:
        return
    raise UsageError(
        f"{_MAGIC_LINE}: `{name}` {what}; binding the workflow to it would hide that. Choose "
        f"another name, or add `--force`"
    )


def load_ipython_extension(ip: InteractiveShell) -> None:
    """Register the magics; `%load_ext thena_nb` calls this.

    Args:
        ip: The running IPython shell.
    """
    ip.register_magics(ThenaMagics)
    install_interrupt(ip)  # a kernel interrupt during a run: one line, not the traceback


def unload_ipython_extension(ip: InteractiveShell) -> None:
    """Remove the magics; `%unload_ext thena_nb` calls this.

    Args:
        ip: The running IPython shell.
    """
    manager = ip.magics_manager
    manager.magics["cell"].pop("thena_workflow", None)
    manager.magics["line"].pop("thena_run", None)
    manager.magics["line"].pop("thena_step", None)
    manager.registry.pop(ThenaMagics.__name__, None)
    uninstall_interrupt(ip)
