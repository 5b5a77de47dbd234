"""LlamaIndex instrumentation events Khora dispatches.

Register a handler on the root dispatcher (or any dispatcher above
``khora_integrations.llama_index``) to see them, next to LlamaIndex's own retrieval events::

    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    class Printer(BaseEventHandler):
        def handle(self, event, **kwargs):
            if isinstance(event, KhoraAbstentionEvent):
                print("abstained:", event.query, event.signals["combined_score"])

    get_dispatcher().add_event_handler(Printer())
"""

from __future__ import annotations

from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.base import BaseEvent
from pydantic import Field

__all__ = ["KhoraAbstentionEvent", "dispatcher"]

#: The dispatcher Khora's LlamaIndex integration sends its events through (child of root).
dispatcher = get_dispatcher("khora_integrations.llama_index")


class KhoraAbstentionEvent(BaseEvent):
    """Recall said memory does not cover the question (``RecallResult.should_abstain``).

    Dispatched by ``KhoraRetriever`` whatever its ``abstain`` policy, before the policy
    acts (so a ``"raise"`` retriever still reports it).

    Attributes:
        query: the question.
        namespace: the namespace recalled from.
        policy: the retriever's policy: ``"flag"``, ``"empty"`` or ``"raise"``.
        signals: ``engine_info["abstention_signals"]`` (``combined_score``,
            ``top_score_low``, ``chunks_empty``, ... and ``should_abstain``).
    """

    query: str
    namespace: str
    policy: str
    signals: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "KhoraAbstentionEvent"
