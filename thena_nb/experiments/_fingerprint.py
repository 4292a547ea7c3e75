"""Fingerprints of what a run depends on, code included, for reusing stored runs safely.

An experiment reuses a stored run only while nothing it depends on has changed: the
workflow's structure, every agent's prompt, tools and model settings, and the *code* of
every step, tool, stop condition, history processor and model function. Code is hashed
from its code object (bytecode, constants, names), its defaults, the values its closure
holds and the globals it reads, so two lambdas are told apart by what they do, and editing
a helper a stop condition calls changes the fingerprint too.

What cannot be fingerprinted (an object whose only description is its memory address, say)
raises `Unfingerprintable`; the experiment then does not reuse, and says so once.
"""

from __future__ import annotations

import functools
import hashlib
import types
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

__all__ = ["Unfingerprintable", "digest", "value_bytes"]

_DEPTH = 12
"""How deep values nest before fingerprinting gives up (a guard, not a limit users meet)."""
_RUNTIME_ATTRIBUTES = frozenset({"requests"})
"""Public attributes that record what happened, not what an object is (offline models
keep every request they received)."""


class Unfingerprintable(Exception):
    """A value has no stable description, so runs that depend on it cannot be reused."""


def value_bytes(value: Any) -> bytes:
    """A stable description of `value` (the same in every process), as bytes to hash.

    Raises:
        Unfingerprintable: Some part of `value` has no stable description.
    """
    return b"".join(_parts(value, 0, set()))


def _parts(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    if depth > _DEPTH:
        raise Unfingerprintable(f"{_kind(value)} nests more than {_DEPTH} levels deep")
    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        yield repr(value).encode()
        return
    if id(value) in seen:
        yield b"<cycle>"
        return
    seen = seen | {id(value)}
    yield from _composite(value, depth + 1, seen)


def _composite(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    for kinds, describe in _DESCRIBERS:
        if isinstance(value, kinds):
            yield from describe(value, depth, seen)
            return
    yield from _object(value, depth, seen)


def _set(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield b"set[" + b",".join(sorted(value_bytes(item) for item in value)) + b"]"


def _sequence(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield f"{type(value).__name__}[".encode()
    for item in value:
        yield from _parts(item, depth, seen)
        yield b","
    yield b"]"


def _mapping(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield b"dict{"
    for key, item in value.items():
        yield from _parts(key, depth, seen)
        yield b":"
        yield from _parts(item, depth, seen)
        yield b","
    yield b"}"


def _record(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield f"model {_qualified(type(value))}".encode()
    yield value.model_dump_json(round_trip=True).encode()


def _method(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield b"method"
    yield from _parts(value.__func__, depth, seen)
    yield from _parts(value.__self__, depth, seen)


def _partial(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield b"partial"
    yield from _parts((value.func, value.args, value.keywords), depth, seen)


def _module(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield f"module {value.__name__}".encode()


def _class(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield f"class {_qualified(value)}".encode()
    if issubclass(value, BaseModel):  # a state class: its fields and defaults
        yield repr(value.model_json_schema()).encode()


def _builtin(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield f"builtin {getattr(value, '__module__', '')}.{value.__qualname__}".encode()


def _exception(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield f"exception {_qualified(type(value))}".encode()
    yield from _parts(value.args, depth, seen)


def _function(fn: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    yield f"function {fn.__module__}.{fn.__qualname__}".encode()
    yield from _code(fn.__code__)
    yield from _parts((fn.__defaults__, fn.__kwdefaults__), depth, seen)
    for cell in fn.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # a cell not filled yet
            yield b"<empty cell>"
            continue
        yield from _parts(contents, depth, seen)
    # The globals the code reads: a helper it calls, a threshold it compares with.
    scope = fn.__globals__
    for name in _names(fn.__code__):
        if name in scope:
            yield f"global {name}=".encode()
            yield from _parts(scope[name], depth, seen)


def _code(code: types.CodeType) -> Iterator[bytes]:
    yield code.co_code
    yield repr(code.co_names).encode()
    yield repr(code.co_varnames).encode()
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code(const)
        else:  # a frozenset constant (`x in {"a", "b"}`) is ordered by hash: sort it
            yield value_bytes(const)


def _names(code: types.CodeType) -> Iterator[str]:
    """Names the code (and code nested in it) may look up as globals."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def _object(value: Any, depth: int, seen: set[int]) -> Iterator[bytes]:
    """Any other object: its class and its public attributes; a callable object its call;
    an object that says what it is (`__thena_fingerprint__()`, e.g. another framework's
    agent as a step: its configuration) by that."""
    described = getattr(type(value), "__thena_fingerprint__", None)
    if described is not None:
        yield f"object {_qualified(type(value))}".encode()
        yield from _parts(described(value), depth, seen)
        return
    attributes = getattr(value, "__dict__", None)
    if attributes is None:
        shown = repr(value)
        if " at 0x" in shown or shown.startswith("<"):
            raise Unfingerprintable(f"{_kind(value)} has no stable description ({shown})")
        yield f"{_qualified(type(value))} {shown}".encode()
        return
    yield f"object {_qualified(type(value))}".encode()
    for name in sorted(attributes):
        if name.startswith("_") or name in _RUNTIME_ATTRIBUTES:
            continue
        yield f".{name}=".encode()
        yield from _parts(attributes[name], depth, seen)
    inner = attributes.get("_fn")  # a wrapped function (a stop condition) is what it does
    if inner is not None:
        yield from _parts(inner, depth, seen)


_Describer = Callable[[Any, int, set[int]], Iterator[bytes]]
_DESCRIBERS: tuple[tuple[type | tuple[type, ...], _Describer], ...] = (
    ((set, frozenset), _set),
    ((list, tuple), _sequence),
    (dict, _mapping),
    (BaseModel, _record),
    (types.FunctionType, _function),
    (types.MethodType, _method),
    (functools.partial, _partial),
    (types.ModuleType, _module),
    (type, _class),
    (types.BuiltinFunctionType, _builtin),
    (BaseException, _exception),
)


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _kind(value: Any) -> str:
    return f"a `{type(value).__name__}` value"


def digest(*values: Any) -> str:
    """The blake2b hex digest of `values`' descriptions."""
    h = hashlib.blake2b(digest_size=16)
    for value in values:
        h.update(value_bytes(value))
        h.update(b"\x1e")
    return h.hexdigest()
