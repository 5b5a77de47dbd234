"""The one LLM address cassette tests talk to (recorded by ``make cassettes``, replayed in CI).

Cassettes match on method, host, port, path and body, so these values must not change
between recording and replay.
"""

from __future__ import annotations

LLM_HOST = "127.0.0.1"
LLM_PORT = 18765
LLM_MODEL_ALIAS = "gemma3-270m"
LLM_MODEL = f"openai/{LLM_MODEL_ALIAS}"
#: The instruction-tuned model the same server also serves (``tools/cassettes.py`` lists both):
#: for the paths where the base Gemma only echoes its prompt (HyDE passages, RAG answers).
INSTRUCT_MODEL_ALIAS = "smollm2-135m"
INSTRUCT_MODEL = f"openai/{INSTRUCT_MODEL_ALIAS}"
LLM_API_BASE = f"http://{LLM_HOST}:{LLM_PORT}/v1"
LLM_API_KEY = "sk-local-not-a-secret"


def llm_config_dict(**overrides: object) -> dict[str, object]:
    """``KhoraConfig(llm=...)`` pointing at the recording server."""
    return {
        "model": LLM_MODEL,
        "api_base": LLM_API_BASE,
        "api_key": LLM_API_KEY,
        "max_retries": 1,
        "max_tokens": 384,
        **overrides,
    }
