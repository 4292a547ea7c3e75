"""Checks the adapter tests share on what a model's connection pools cost and leave behind."""

from __future__ import annotations

import asyncio
import gc
import ssl
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from thena_nb import Run, Workflow

T = TypeVar("T")


def in_a_cell(wf: Workflow) -> Run:
    """`wf.run("go")` called as a notebook cell calls it: under a running event loop, so
    that it runs on a fresh loop of its own."""

    async def cell() -> Run:
        return wf.run("go", store=False)  # blocks the running loop, as a cell does

    return asyncio.run(cell())


def resource_warnings(run: Callable[[], T]) -> tuple[T, list[str]]:
    """`run()`'s result, and the `ResourceWarning`s (sockets and transports left open) of
    what it left for the collector; what earlier tests left is collected first, unseen."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        result = run()
        gc.collect()
    return result, [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def count_ca_bundle_loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """A list that gets an entry each time TLS settings load a CA bundle (~25 ms of CPU)
    from now on in this test."""
    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        load(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    return loads
