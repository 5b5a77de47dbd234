"""Khora's framework integrations.

Each lives in its own subpackage and needs its extra; importing this package loads none
of them:

* ``khora_integrations.langchain`` (``pip install 'khora-memory[langchain]'``);
* ``khora_integrations.llama_index`` (``pip install 'khora-memory[llamaindex]'``).
"""

from __future__ import annotations

__all__: list[str] = []
