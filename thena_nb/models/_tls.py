"""The TLS settings every connection pool the API adapters build verifies servers with.

Making them loads the CA bundle, about 25 ms of CPU, and an adapter builds a connection
pool for each event loop it runs on (`OpenAICompatModel._client_for_running_loop`,
`AnthropicModel._client_for_running_loop`): a notebook's `wf.run()` has a loop of its own
each time. So they are made once per process, the way the SDKs' transport makes them by
default (certifi's CA bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR` when set: read when the
first pool is built), and shared: an `ssl.SSLContext` serves any number of connections on
any thread. For other TLS settings, give the model a configured SDK client (`client=`).
"""

from __future__ import annotations

import ssl
import threading

try:  # the SDKs' transport: httpx2 from their 2.x and 3.x releases, httpx before
    import httpx2 as _http
except ImportError:  # pragma: no cover - older SDKs
    import httpx as _http  # type: ignore[no-redef]

__all__ = ["ssl_context"]

_lock = threading.Lock()
_context: list[ssl.SSLContext] = []


def ssl_context() -> ssl.SSLContext:
    """The process's TLS settings for the adapters' connection pools, made on first use.

    Example:
        >>> ssl_context() is ssl_context()
        True
    """
    with _lock:
        if not _context:
            _context.append(_http.create_ssl_context())
        return _context[0]
