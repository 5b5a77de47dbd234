"""LangGraph integration: ``KhoraStore``, Khora as an agent's long-term memory store.

Needs the ``langgraph`` extra (``pip install 'khora-memory[langgraph]'``)::

    from langgraph.prebuilt import create_react_agent
    from khora_integrations.langgraph import KhoraStore

    store = KhoraStore()                      # the embedded store in ./.khora
    store.put(("users", "ada"), "food", {"text": "Ada is vegetarian"})
    store.search(("users", "ada"), query="what does Ada eat?")
    agent = create_react_agent(model, tools, store=store)
"""

from __future__ import annotations

try:
    import langgraph.store.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from khora_core.errors import MissingExtraError

    raise MissingExtraError("The LangGraph integration", "langgraph", "langgraph") from exc

from khora_integrations.langgraph._items import StoreNamespaceError
from khora_integrations.langgraph.store import DEFAULT_PREFIX, KhoraSearchItem, KhoraStore

__all__ = ["DEFAULT_PREFIX", "KhoraSearchItem", "KhoraStore", "StoreNamespaceError"]
