"""Fingerprints of what a run depends on, code included, as named parts.

A fingerprint is a dict of *parts*, each a name a user can read and the digest of what it
names: `workflow.steps[0].system`, `answer (code)`, `answer default word`, `closure seen`,
`global PROMPTS['A']`, `global helpers.shout`, `Style.PREFIX`. What a value is made of is
split into parts along the way: a function into its code, each default, each closure
variable and each global its code reads (a helper it calls, a module attribute it reads as
`helpers.shout`, a class it uses, whose methods and attributes are parts too); a dict, list
or tuple (up to `_SPLIT_MAX` items) into its items; an object into its attributes.

So the fingerprint can say *what* changed, and an experiment can tell state from
configuration part by part (see `thena_nb.experiments`): a part the runs change (a counter
in a closure, a cache dict's new keys) is left out from then on, while the prompt beside it
in the same dict is still a part of its own.

Your code (a notebook, a script, your modules) is described in full: a function by its
code, defaults, closure and the globals it reads; an object by all its attributes, private
ones too; a class by its methods and class attributes. Installed libraries (and thena_nb)
are described by name, except what configures them: a library function's defaults and
closure (`keep_first_and_recent(3)`'s `3`), a library object's public attributes. Numpy
arrays and pandas objects are described by their contents. A callable wrapped by
`functools.wraps` or `functools.lru_cache` is described by what it wraps. An object that
says what it is (`__thena_fingerprint__()`, e.g. another framework's agent as a step) is
described by that.

What cannot be fingerprinted (an object whose only description is its memory address, say)
raises `Unfingerprintable`; the experiment then does not reuse, and says so once.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import site
import sys
import sysconfig
import types
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["Fingerprint", "Unfingerprintable", "digest", "fingerprint_of", "is_state"]

_DEPTH = 24
"""How deep values nest before fingerprinting gives up (a guard, not a limit users meet)."""
_SPLIT_MAX = 64
"""Containers with at most this many items get a part per item; larger ones are one part."""
_RUNTIME_ATTRIBUTES = frozenset({"requests"})
"""Public attributes of library objects that record what happened, not what an object is
(offline models keep every request they received)."""
_SCALARS = (bool, int, float, complex, str, bytes)


class Unfingerprintable(Exception):
    """A value has no stable description, so runs that depend on it cannot be reused."""


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """A value's parts: each part's name and the digest of what it names, in walk order."""

    parts: Mapping[str, str]

    def digest(self, state: Collection[str] = ()) -> str:
        """One digest of every part except those of `state` (see `is_state`)."""
        h = hashlib.blake2b(digest_size=16)
        for name in sorted(self.parts):
            if not (state and is_state(name, state)):
                h.update(f"{name}\x1f{self.parts[name]}\x1e".encode())
        return h.hexdigest()

    def changed(self, other: Mapping[str, str], state: Collection[str] = ()) -> list[str]:
        """The parts that differ from `other`'s (added, removed or changed), in walk order,
        those of `state` left out."""
        names = [*self.parts, *(n for n in other if n not in self.parts)]
        return [
            n
            for n in names
            if self.parts.get(n) != other.get(n) and not (state and is_state(n, state))
        ]


def is_state(name: str, state: Collection[str]) -> bool:
    """`name` is one of `state` or a part of one (`global CACHE['q1']` of `global CACHE`)."""
    if name in state:
        return True
    return any(name.startswith(s) and name[len(s)] in "[." for s in state if len(name) > len(s))


def fingerprint_of(value: Any, name: str = "workflow") -> Fingerprint:
    """`value`'s parts, the same in every process.

    Raises:
        Unfingerprintable: Some part of `value` has no stable description.
    """
    walk = _Walk()
    walk.part(name, value, 0)
    return Fingerprint(walk.parts)


def digest(*values: Any) -> str:
    """One digest of `values`' fingerprints.

    Raises:
        Unfingerprintable: Some part of a value has no stable description.
    """
    h = hashlib.blake2b(digest_size=16)
    for i, value in enumerate(values):
        h.update(fingerprint_of(value, f"value {i}").digest().encode())
    return h.hexdigest()


_Out = list[bytes]


class _Walk:
    """One walk over a value: the parts it found, and what it has named already (so a
    value reached twice, or in a cycle, is described once and referred to after)."""

    def __init__(self) -> None:
        self.parts: dict[str, str] = {}
        self._named: dict[int, str] = {}
        self._alive: list[Any] = []  # ids stay unique while the walk holds what it named
        self._globals: dict[tuple[int, str], str] = {}

    def part(self, name: str, value: Any, depth: int) -> None:
        """Describe `value` as the part `name` (its items and attributes as parts of
        their own)."""
        self.parts[name] = ""  # taken (and in walk order) before its children
        out: _Out = []
        self.describe(out, value, name, depth, split=True)
        self.parts[name] = hashlib.blake2b(b"".join(out), digest_size=8).hexdigest()

    def fresh(self, name: str) -> str:
        """`name`, or `name#2`, `name#3`… when the walk has a part of that name already."""
        if name not in self.parts:
            return name
        n = 2
        while f"{name}#{n}" in self.parts:
            n += 1
        return f"{name}#{n}"

    def describe(self, out: _Out, value: Any, path: str, depth: int, *, split: bool) -> None:
        """Append `value`'s description to `out`; with `split`, its items and attributes
        become parts named after `path`."""
        if depth > _DEPTH:
            raise Unfingerprintable(f"{_kind(value)} nests more than {_DEPTH} levels deep")
        if value is None or isinstance(value, _SCALARS):
            out.append(repr(value).encode())
            return
        known = self._named.get(id(value))
        if known is not None:
            out.append(f"@{known};".encode())
            return
        for kinds, describer in _DESCRIBERS:
            if isinstance(value, kinds):
                describer(self, out, value, path, depth + 1, split)
                return
        self.unknown(out, value, path, depth + 1, split)

    def name(self, value: Any, path: str) -> None:
        self._named[id(value)] = path
        self._alive.append(value)

    def items(
        self, out: _Out, items: list[tuple[str, Any]], path: str, depth: int, split: bool
    ) -> None:
        """Named items of a container or object: parts of their own, or inline.

        A part of its own is not named in its container's part: an item the runs add (a
        cache's new key) is then state alone, not the whole container with it."""
        if split and len(items) <= _SPLIT_MAX:
            for label, item in items:
                self.part(self.fresh(path + label), item, depth)
            return
        for label, item in items:
            out.append(label.encode())
            self.describe(out, item, path + label, depth, split=False)

    # -- kinds of values ---------------------------------------------------------------------

    def mapping(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        self.name(value, path)
        out.append(f"{_qualified(type(value))}{{".encode())
        simple = all(k is None or isinstance(k, _SCALARS) for k in value)
        if simple:
            self.items(out, [(f"[{k!r}]", v) for k, v in value.items()], path, depth, split)
        else:
            for k, v in value.items():
                self.describe(out, k, path, depth, split=False)
                out.append(b":")
                self.describe(out, v, path, depth, split=False)
        out.append(b"}")

    def sequence(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        self.name(value, path)
        out.append(f"{_qualified(type(value))}[".encode())
        self.items(out, [(f"[{i}]", v) for i, v in enumerate(value)], path, depth, split)
        out.append(b"]")

    def set(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        # Ordered by hash, which differs between processes: sort the items' descriptions.
        described = []
        for item in value:
            one: _Out = []
            self.describe(one, item, path, depth, split=False)
            described.append(b"".join(one))
        out.append(b"set[" + b",".join(sorted(described)) + b"]")

    def record(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        out.append(f"model {_qualified(type(value))}".encode())
        out.append(value.model_dump_json(round_trip=True).encode())

    def function(self, out: _Out, fn: Any, path: str, depth: int, split: bool) -> None:
        out.append(f"fn {self.function_part(fn, depth)};".encode())

    def function_part(self, fn: Any, depth: int) -> str:
        """Describe a function as parts (`name (code)`, `name default x`, `closure x`,
        `global X`) and return its name."""
        known = self._named.get(id(fn))
        if known is not None:
            return known
        name = self.fresh(fn.__qualname__.replace(".<locals>", ""))
        self.name(fn, name)
        code = fn.__code__
        user = _user_module(fn.__module__)
        self.parts[f"{name} (code)"] = _code_digest(code) if user else _text_digest(
            f"library {former_name(fn.__module__, fn.__qualname__)}"
        )  # fmt: skip
        self.defaults(fn, name, depth)
        for var, cell in zip(code.co_freevars, fn.__closure__ or (), strict=True):
            self.closure(var, cell, name, depth)
        if user:  # the globals the code reads: a helper it calls, a threshold it compares
            names = _names(code)
            for global_name in dict.fromkeys(names):
                self.global_part(fn.__globals__, global_name, names, depth)
        return name

    def defaults(self, fn: Any, name: str, depth: int) -> None:
        code = fn.__code__
        positional = code.co_varnames[: code.co_argcount]
        values = fn.__defaults__ or ()
        for param, value in zip(positional[len(positional) - len(values) :], values, strict=True):
            self.part(self.fresh(f"{name} default {param}"), value, depth)
        for param, value in (fn.__kwdefaults__ or {}).items():
            self.part(self.fresh(f"{name} default {param}"), value, depth)

    def closure(self, var: str, cell: Any, owner: str, depth: int) -> None:
        if id(cell) in self._named:
            return
        name = f"closure {var}"
        if name in self.parts:
            name = self.fresh(f"closure {var} (in {owner})")
        self.name(cell, name)
        try:
            contents = cell.cell_contents
        except ValueError:  # a cell not filled yet
            self.parts[name] = _text_digest("<empty cell>")
            return
        self.part(name, contents, depth)

    def global_part(
        self, scope: dict[str, Any], name: str, attributes: Collection[str], depth: int
    ) -> None:
        if name not in scope or (id(scope), name) in self._globals:
            return
        part = f"global {name}"
        if part in self.parts:
            part = self.fresh(f"global {scope.get('__name__')}.{name}")
        self._globals[(id(scope), name)] = part
        value = scope[name]
        if isinstance(value, types.ModuleType):
            self.module_part(part, value, attributes, depth)
        else:
            self.part(part, value, depth)

    def module_part(
        self, part: str, module: types.ModuleType, attributes: Collection[str], depth: int
    ) -> None:
        """A module the code reads: by name; a module of yours also by each attribute the
        code names (`helpers.shout`), as a part of its own."""
        self.parts[part] = _text_digest(f"module {module.__name__}")
        if depth > _DEPTH or not _user_module(module.__name__):
            return
        scope = vars(module)
        for attribute in dict.fromkeys(attributes):
            if attribute in scope and not attribute.startswith("__"):
                value = scope[attribute]
                child = f"{part}.{attribute}"
                if child in self.parts:
                    continue
                if isinstance(value, types.ModuleType):
                    self.module_part(child, value, attributes, depth + 1)
                else:
                    self.part(child, value, depth + 1)

    def method(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        out.append(b"method ")
        self.describe(out, value.__func__, path, depth, split=False)
        self.describe(out, value.__self__, path + ".__self__", depth, split=split)

    def partial(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        self.name(value, path)
        out.append(b"partial")
        fields = [(".func", value.func), (".args", value.args), (".keywords", value.keywords)]
        self.items(out, fields, path, depth, split)

    def module(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        out.append(f"module {value.__name__}".encode())

    def klass(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        out.append(f"class {self.class_part(value, depth)};".encode())

    def class_part(self, cls: type, depth: int) -> str:
        """A class of yours as parts (each method's, each class attribute's); a library
        class by its name. Returns the name it is referred to by."""
        known = self._named.get(id(cls))
        if known is not None:
            return known
        qualified = _qualified(cls)
        if not _user_module(cls.__module__):
            if issubclass(cls, BaseModel) and cls is not BaseModel:
                return f"{qualified} {_schema(cls)}"
            return qualified
        name = self.fresh(f"class {cls.__qualname__.replace('.<locals>', '')}")
        self.name(cls, name)
        self.parts[name] = ""
        out: _Out = [qualified.encode()]
        for base in cls.__bases__:
            out.append(f"base {self.class_part(base, depth + 1)};".encode())
        if issubclass(cls, BaseModel):  # a state class: its fields and defaults
            out.append(_schema(cls).encode())
        owner = name.removeprefix("class ")
        for attribute, raw in sorted(vars(cls).items()):
            value = _unwrapped(raw)
            if isinstance(value, types.FunctionType | property):
                self.describe(out, value, f"{owner}.{attribute}", depth + 1, split=False)
            elif _class_data(cls, attribute):
                self.part(self.fresh(f"{owner}.{attribute}"), value, depth + 1)
        self.parts[name] = hashlib.blake2b(b"".join(out), digest_size=8).hexdigest()
        return name

    def property_(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        out.append(b"property")
        for accessor in (value.fget, value.fset, value.fdel):
            self.describe(out, accessor, path, depth, split=False)

    def builtin(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        out.append(f"builtin {getattr(value, '__module__', '')}.{value.__qualname__}".encode())
        owner = getattr(value, "__self__", None)  # `PROMPTS.get`: the dict is what it reads
        if owner is not None and not isinstance(owner, types.ModuleType):
            self.describe(out, owner, path + ".__self__", depth, split=split)

    def exception(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        out.append(f"exception {_qualified(type(value))}".encode())
        self.describe(out, value.args, path, depth, split=False)

    def unknown(self, out: _Out, value: Any, path: str, depth: int, split: bool) -> None:
        """Arrays and frames by their contents; any other object by its class and its
        attributes (what it says it is, when it says: `__thena_fingerprint__()`)."""
        cls = type(value)
        array = _array_bytes(value)
        if array is not None:
            out.append(array)
            return
        self.name(value, path)
        described = getattr(cls, "__thena_fingerprint__", None)
        if described is not None:
            out.append(f"object {_qualified(cls)}".encode())
            said = described(value)
            self._alive.append(said)
            self.describe(out, said, path, depth, split=split)
            return
        wrapped = getattr(value, "__wrapped__", None)  # `lru_cache`, `functools.wraps`
        if callable(wrapped) and not isinstance(value, type):
            out.append(f"wraps {_qualified(cls)}".encode())
            self.describe(out, wrapped, path, depth, split=False)
        user = _user_module(cls.__module__)
        attributes = _attributes(value, user)
        if attributes is None:
            shown = repr(value)
            if " at 0x" in shown or shown.startswith("<"):
                raise Unfingerprintable(f"{_kind(value)} has no stable description ({shown})")
            out.append(f"{_qualified(cls)} {shown}".encode())
            return
        out.append(f"object {self.class_part(cls, depth)};".encode())
        if user:  # a private lock or client of yours is machinery, not configuration
            attributes = [(k, v) for k, v in attributes if not self.unstable(k, v, depth)]
        self.items(out, [(f".{k}", v) for k, v in attributes], path, depth, split)

    def unstable(self, name: str, value: Any, depth: int) -> bool:
        """A private attribute that has no stable description (left out, said nowhere)."""
        if not name.startswith("_"):
            return False
        try:
            fingerprint_of(value, name)
        except Unfingerprintable:
            return True
        return False


def _attributes(value: Any, user: bool) -> list[tuple[str, Any]] | None:
    """The attributes that say what `value` is, sorted; `None` when it has none to show.

    An object of yours: all of them, private ones too. A library object: its public ones
    (and a wrapped function, `_fn`, which is what a stop condition does)."""
    found = getattr(value, "__dict__", None)
    slots = [s for c in type(value).__mro__ for s in getattr(c, "__slots__", ())]
    if found is None and not (user and slots):
        return None
    names = dict(found or {})
    for slot in slots:
        if isinstance(slot, str) and slot not in names and hasattr(value, slot):
            names[slot] = getattr(value, slot)
    if user:
        return sorted((k, v) for k, v in names.items() if not k.startswith("__"))
    kept = [(k, v) for k, v in names.items() if k == "_fn" or not k.startswith("_")]
    return sorted((k, v) for k, v in kept if k not in _RUNTIME_ATTRIBUTES)


def _schema(cls: type[BaseModel]) -> str:
    """A state class's fields and defaults (its JSON schema, or its fields when it has none)."""
    try:
        return repr(cls.model_json_schema())
    except Exception:  # a field of a type JSON schema cannot show
        return repr({k: repr(f) for k, f in cls.model_fields.items()})


def _unwrapped(raw: Any) -> Any:
    if isinstance(raw, staticmethod | classmethod):
        return raw.__func__
    return raw


def _class_data(cls: type, attribute: str) -> bool:
    """A class attribute that is configuration: not Python's or pydantic's own."""
    if attribute.startswith("_") and (attribute.endswith("_") or attribute.startswith("_abc")):
        return False
    return not issubclass(cls, BaseModel)


def _array_bytes(value: Any) -> bytes | None:
    """A numpy array's or a pandas object's contents; `None` for anything else."""
    module = type(value).__module__
    if module.startswith("numpy"):
        np = sys.modules["numpy"]
        if isinstance(value, np.ndarray):
            head = f"ndarray {value.dtype.str} {value.shape}".encode()
            if value.dtype.hasobject:
                return head + digest(value.tolist()).encode()
            return head + hashlib.blake2b(value.tobytes()).digest()
    if module.startswith("pandas"):
        pd = sys.modules["pandas"]
        if isinstance(value, pd.DataFrame | pd.Series | pd.Index):
            return _pandas_bytes(pd, value)
    return None


def _pandas_bytes(pd: Any, value: Any) -> bytes:
    head = f"{type(value).__name__} {value.shape}".encode()
    if isinstance(value, pd.DataFrame):
        head += digest([str(c) for c in value.columns], [str(d) for d in value.dtypes]).encode()
    else:
        head += f"{value.dtype} {value.name!r}".encode()
    try:
        hashed = pd.util.hash_pandas_object(value, index=not isinstance(value, pd.Index))
        return head + hashlib.blake2b(hashed.to_numpy().tobytes()).digest()
    except TypeError:  # cells that cannot be hashed (lists): their values
        return head + digest(value.to_numpy().tolist(), value.index.tolist()).encode()


def _code_digest(code: types.CodeType) -> str:
    h = hashlib.blake2b(digest_size=8)
    for piece in _code(code):
        h.update(piece)
    return h.hexdigest()


def _text_digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _code(code: types.CodeType) -> Iterator[bytes]:
    yield code.co_code
    yield repr(code.co_names).encode()
    yield repr(code.co_varnames).encode()
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code(const)
        elif isinstance(const, frozenset):  # `x in {"a", "b"}` is ordered by hash: sort it
            yield repr(sorted(map(repr, const))).encode()
        else:
            yield repr(const).encode()


def _names(code: types.CodeType) -> list[str]:
    """Names the code (and code nested in it) may look up as globals or attributes."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_names(const))
    return names


@functools.cache
def _library_paths() -> tuple[str, ...]:
    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths.update(site.getsitepackages())
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # thena_nb
    return tuple(os.path.realpath(p) + os.sep for p in paths)


@functools.lru_cache(maxsize=1024)
def _user_module(name: str | None) -> bool:
    """Code of yours (described in full), not an installed library's or thena_nb's.

    A module without a file (a notebook's `__main__`, code run with `exec`) is yours."""
    if name is None:
        return True
    if name == "builtins" or name in sys.builtin_module_names:
        return False
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    if not file:
        return True
    return not os.path.realpath(file).startswith(_library_paths())


_Describer = Callable[[_Walk, _Out, Any, str, int, bool], None]
_DESCRIBERS: tuple[tuple[type | tuple[type, ...], _Describer], ...] = (
    ((set, frozenset), _Walk.set),
    ((list, tuple), _Walk.sequence),
    (dict, _Walk.mapping),
    (BaseModel, _Walk.record),
    (types.FunctionType, _Walk.function),
    (types.MethodType, _Walk.method),
    (functools.partial, _Walk.partial),
    (types.ModuleType, _Walk.module),
    (type, _Walk.klass),
    (property, _Walk.property_),
    (types.BuiltinFunctionType, _Walk.builtin),
    (BaseException, _Walk.exception),
)


def _qualified(cls: type) -> str:
    return former_name(cls.__module__, cls.__qualname__)


MOVED = {
    f"thena_nb.core.{floor}.{module}": f"thena_nb.core.{module}"
    for floor, modules in {
        "records": "types model events report errors _sent _secrets _html",
        "parts": "agent tools steps stopping history context changes _tool_size _tool_time",
        "rescue": "_reasoning _harmony",
        "runs": "run diff what_if _current",
        "engine": "session _executor _turn gates _replay _run_state _tool_sources _observe "
        "_signals _aio _reply_check foreign",
    }.items()
    for module in modules.split()
} | {
    "thena_nb.experiments.cases": "thena_nb.core.cases",
    "thena_nb.core.records._keys": "thena_nb.core._replay",
    "thena_nb.core.records.decisions": "thena_nb.core.gates",
}
"""Modules the core's split into packages moved, by their former names: a fingerprint names
the library functions and classes it meets (`library thena_nb.core.stopping.until_answered`),
and experiments stored before the split must still be reused, so the former names are kept."""

_MOVED_NAMES = {
    ("thena_nb.core.records._text", "callable_name"): "thena_nb.core.steps.callable_name",
    ("thena_nb.core.records._text", "readable"): "thena_nb.core.tools.readable",
    ("thena_nb.core.records._text", "to_text"): "thena_nb.core.tools._to_text",
}


def former_name(module: str, qualname: str) -> str:
    """`module.qualname` as fingerprints spelled it before the core's split (`MOVED`).

    >>> former_name("thena_nb.core.parts.stopping", "until_answered")
    'thena_nb.core.stopping.until_answered'
    >>> former_name("mypkg.conditions", "enough")
    'mypkg.conditions.enough'
    """
    moved = _MOVED_NAMES.get((module, qualname))
    if moved is not None:
        return moved
    return f"{MOVED.get(module, module)}.{qualname}"


def _kind(value: Any) -> str:
    return f"a `{type(value).__name__}` value"
