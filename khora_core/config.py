"""Configuration: ``KhoraConfig`` (global, from env / YAML / keywords) and ``VectorCypherConfig``.

Precedence, highest first:

1. keyword overrides passed to ``KhoraConfig(...)`` / ``KhoraConfig.load(..., **overrides)``;
2. environment variables: ``KHORA_*`` for top-level fields and ``KHORA_<SECTION>_*`` for a
   section (``KHORA_QUERY_ENABLE_BM25_CHANNEL=true``, ``KHORA_LLM_MODEL=...``). The storage
   section also reads the specification's names ``KHORA_DATABASE_URL`` and
   ``KHORA_NEO4J_URL``;
3. a YAML file (``KhoraConfig.load(path)`` or ``KHORA_CONFIG_FILE``), with one mapping per
   section (``query:``, ``storage:``, ...);
4. the defaults below.

The environment is read only when a config object is built, never at import.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from khora_core.errors import ConfigError

__all__ = [
    "EmbeddingConfig",
    "IngestConfig",
    "KhoraConfig",
    "LLMConfig",
    "QueryConfig",
    "StorageConfig",
    "VectorCypherConfig",
]

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"


#: Settings the specification names that never changed anything: still accepted, with a
#: ``DeprecationWarning``, so configurations written from the specification keep loading.
_RETIRED_SETTINGS: dict[str, dict[str, str]] = {
    "QueryConfig": {
        "enable_hyde_cypher": "HyDE-Cypher is not part of retrieval; use enable_hyde",
    },
    "VectorCypherConfig": {
        "fusion_hybrid_alpha": "fusion is weighted RRF; set the fusion_*_weight settings",
        "retriever_coherence_weight": "recall does no cross-chunk coherence scoring",
        "retriever_max_chunks": "recall's limit and QueryConfig.candidate_pool bound the chunks",
    },
}


def _drop_retired(owner: str, data: Any) -> Any:
    """Remove retired settings from ``data`` (keywords or YAML), warning once per setting."""
    if not isinstance(data, dict):
        return data
    retired = _RETIRED_SETTINGS[owner]
    for name in [k for k in data if k in retired]:
        data = {k: v for k, v in data.items() if k != name}
        warnings.warn(
            f"{owner}.{name} is ignored and will be removed: {retired[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
    return data


class _Section(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", validate_default=True, populate_by_name=True)


class StorageConfig(_Section):
    """Where Khora keeps its data.

    No ``database_url`` means the embedded ``sqlite_lance`` store under ``data_dir``.
    """

    model_config = SettingsConfigDict(env_prefix="KHORA_STORAGE_", extra="forbid", populate_by_name=True)

    #: PostgreSQL DSN (``postgresql://user:pass@host:5432/db``); unset: the embedded store.
    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("KHORA_DATABASE_URL", "database_url")
    )
    #: Neo4j Bolt URL (``bolt://host:7687``), the graph beside PostgreSQL.
    neo4j_url: str | None = Field(default=None, validation_alias=AliasChoices("KHORA_NEO4J_URL", "neo4j_url"))
    #: Neo4j user name.
    neo4j_user: str = "neo4j"
    #: Neo4j password.
    neo4j_password: str | None = None
    #: Neo4j database name.
    neo4j_database: str = "neo4j"
    #: Folder of the embedded SQLite + LanceDB store (used when ``database_url`` is unset).
    data_dir: Path = Field(
        default=Path(".khora"), validation_alias=AliasChoices("KHORA_DATA_DIR", "data_dir")
    )
    #: PostgreSQL connections opened at start and kept in the pool.
    pool_min_size: int = 1
    #: Most PostgreSQL connections in the pool at once.
    pool_max_size: int = 10
    #: Seconds to wait for a database server before opening fails with one ``KhoraError``.
    connect_timeout_s: float = 5.0
    #: HNSW ``ef_search`` used by the PostgreSQL vector channel per query.
    hnsw_ef_search: int = 100
    #: HNSW ``ef_construction`` of the pgvector chunk index (applies when the index is built).
    hnsw_ef_construction: int = 128
    #: HNSW ``m`` (links per node) of the pgvector chunk index (applies when the index is built).
    hnsw_m: int = 16
    #: BM25 term-frequency saturation ``k1`` of the keyword channel.
    bm25_k1: float = 1.2
    #: BM25 length normalisation ``b`` of the keyword channel.
    bm25_b: float = 0.75


class EmbeddingConfig(_Section):
    """The embedder: ``sentence-transformers`` (local, default) or ``litellm``."""

    model_config = SettingsConfigDict(env_prefix="KHORA_EMBEDDING_", extra="forbid")

    #: Where vectors come from: a local sentence-transformers model or a litellm embedding API.
    provider: Literal["sentence-transformers", "litellm"] = "sentence-transformers"
    #: A sentence-transformers model name or folder, or a litellm embedding model.
    model: str = DEFAULT_EMBEDDING_MODEL
    #: Texts per call to the embedder while remembering.
    batch_size: int = 64
    #: Torch device of a local model (``"cpu"``, ``"cuda"``); unset: the library picks.
    device: str | None = None
    #: Needed only for litellm models whose dimension Khora cannot probe offline.
    dimension: int | None = None
    #: Torch threads for a small call to a local model (at most 8 texts and 1,024
    #: characters: a question, its entity mentions); ``None`` uses every core, as large
    #: calls always do. One thread embeds a question nearly as fast and leaves the other
    #: cores to the event loop and the databases working on the same recall.
    query_threads: int | None = Field(default=1, ge=1)
    #: Precision of a local model's forward pass for entity names (``embed_names``):
    #: ``"auto"`` uses bfloat16 on CPUs that compute it natively (AVX512-BF16 or AMX), else
    #: float32.
    name_precision: Literal["auto", "float32", "bfloat16"] = "auto"
    #: The same for chunks and questions, float32 unless asked: on such CPUs bfloat16
    #: encodes chunks about twice as fast, at cosine 0.999 or more with the float32 vectors
    #: (vectors of either precision can share a namespace).
    precision: Literal["auto", "float32", "bfloat16"] = "float32"


class LLMConfig(_Section):
    """The LLM used for extraction, query understanding, HyDE and reranking.

    No ``model`` means no LLM: the offline extractor and heuristic router are used.
    """

    model_config = SettingsConfigDict(env_prefix="KHORA_LLM_", extra="forbid")

    #: A litellm model name (``"openai/gpt-4o-mini"``); unset: no LLM (offline extractor, heuristic
    #: router).
    model: str | None = None
    #: Base URL of the LLM's API (an OpenAI-compatible server).
    api_base: str | None = None
    #: API key for the LLM; unset: litellm's own environment variables.
    api_key: str | None = None
    #: Sampling temperature of every LLM call.
    temperature: float = 0.0
    #: Answer budget of an LLM call, in tokens.
    max_tokens: int = 1024
    #: Seconds before an LLM call is abandoned.
    timeout_s: float = 60.0
    #: Retries after the first attempt, for errors the retry predicate calls transient.
    max_retries: int = 2
    #: LLM calls in flight at once (extraction).
    concurrency: int = 4


class IngestConfig(_Section):
    """The write path."""

    model_config = SettingsConfigDict(env_prefix="KHORA_INGEST_", extra="forbid")

    #: Search each chunk with its document's title and, in Markdown, the heading path above it
    #: in front (embedded and BM25-indexed with it, not part of its content), so a question
    #: that names the title finds the chunk. Chunks stored before keep their vectors until
    #: their document is remembered again.
    chunk_context: bool = True
    #: Chunk size, in tokenizer tokens.
    chunk_tokens: int = 256
    #: Tokens that consecutive chunks share.
    chunk_overlap_tokens: int = 32
    #: Content longer than this raises ``ContentTooLargeError`` (about 2 MB of text).
    max_content_chars: int = 2_000_000
    #: Items of a ``remember_batch`` extracted and written at once.
    batch_concurrency: int = 4
    #: Entity resolution: names within this normalised edit-distance ratio (0-100) may merge.
    resolve_fuzzy_threshold: float = 92.0
    #: Entity resolution: name embeddings at or above this cosine confirm a merge.
    resolve_embedding_threshold: float = 0.85
    #: Which entities carry a name vector for recall's entity vector search: ``"all"``, or
    #: ``"repeated"``, those mentioned in two chunks or more (a new entity that one chunk
    #: mentions gets its vector when a later write mentions it again). Linking by name
    #: and the graph's edges reach every entity either way. ``"repeated"`` embeds fewer
    #: names and ingests faster, at a cost in graph recall (``docs/benchmarks.md``).
    entity_vectors: Literal["all", "repeated"] = "all"


class QueryConfig(_Section):
    """Global read-path toggles (env ``KHORA_QUERY_*``)."""

    model_config = SettingsConfigDict(env_prefix="KHORA_QUERY_", extra="forbid")

    #: MMR after fusion, which removes near-duplicate chunks.
    enable_diversity: bool = True
    #: MMR balance: 1.0 is relevance only, 0.0 diversity only.
    diversity_lambda: float = 0.5
    #: MMR counts two chunks as redundant only above this cosine (rescaled to 0-1 above
    #: it), so it removes near-duplicates, as the specification says, rather than pushing
    #: apart related passages that a multi-hop answer needs; 0.0 is classic MMR.
    diversity_duplicate_floor: float = Field(default=0.8, ge=0.0, lt=1.0)
    #: Reorder the top candidates with a cross-encoder (``reranker_model``).
    enable_reranking: bool = False
    #: The sentence-transformers cross-encoder used when ``enable_reranking`` is on.
    reranker_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    #: Reorder the top candidates of temporal questions with the LLM (needs ``llm.model``).
    enable_llm_reranking: bool = False
    #: HyDE: also search with the embedding of a hypothetical answer written by the LLM; ``"auto"``
    #: fires on complex or temporal questions; needs ``llm.model``.
    enable_hyde: Literal["auto", "always", "never"] = "auto"
    #: Run the BM25 keyword channel in HYBRID recalls (KEYWORD and ALL modes always run it).
    enable_bm25_channel: bool = False
    #: Cap on the graph walk depth of every recall (also bounded by ``vectorcypher.graph_max_depth``).
    max_graph_depth: int = 4
    #: Boost newer chunks when the question asks for recent facts (weight
    #: ``vectorcypher.temporal_recency_weight``).
    apply_recency_bias: bool = True
    #: Use the adaptive chunk count (very_focused 3 ... broad 15) capped by ``limit``.
    adaptive_limit: bool = True
    #: Candidates fetched per channel before fusion.
    candidate_pool: int = 50
    #: The longest question ``recall`` accepts, in characters (a longer one raises
    #: ``InvalidInputError`` at once instead of tying up the event loop).
    max_question_chars: int = Field(default=10_000, ge=1)
    #: Abstention: fewer chunks than this sets ``chunks_below_min``.
    abstain_min_chunks: int = 1
    #: Abstention: a raw top cosine below this sets ``top_score_low``.
    abstain_min_top_score: float = 0.3
    #: Abstention: ``should_abstain`` when ``combined_score`` reaches this.
    abstain_threshold: float = 0.5

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data: Any) -> Any:
        if os.environ.get("KHORA_QUERY_ENABLE_HYDE_CYPHER") is not None:
            warnings.warn(
                "KHORA_QUERY_ENABLE_HYDE_CYPHER is ignored: HyDE-Cypher is not part of retrieval",
                DeprecationWarning,
                stacklevel=2,
            )
        return _drop_retired("QueryConfig", data)


class VectorCypherConfig(BaseModel):
    """Every knob of the VectorCypher engine, with the specification's defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Routing
    #: Route each question as SIMPLE / MODERATE / COMPLEX; off: every question takes the MODERATE path
    #: with the graph channel.
    routing_enabled: bool = True
    #: Ask the LLM to understand the question (complexity, entities, dates) instead of the heuristics;
    #: needs ``llm.model``.
    routing_use_llm: bool = False
    # Skeleton indexing (KET-RAG): fraction of chunks sent to full extraction.
    #: Share of chunks (the most central, by PageRank) sent to full entity extraction; the rest get
    #: keyword links only.
    skeleton_core_ratio: float = Field(default=0.50, ge=0.0, le=1.0)
    #: Minimum cosine for a similarity edge between chunks when ranking them for the core.
    skeleton_similarity_threshold: float = 0.5
    #: Where the core is chosen: among each document's chunks (``"document"``), or among
    #: all chunks of one ``remember_batch`` call (``"batch"``, the spec's "top 50% of
    #: chunks"; one-chunk passages then compete, and the rest get keyword links only).
    skeleton_scope: Literal["document", "batch"] = "document"
    # Graph traversal
    #: Graph walk depth when routing is off, and the base depth of COMPLEX questions.
    graph_default_depth: int = 2
    #: Deepest graph walk allowed, for recall and ``find_related_entities``.
    graph_max_depth: int = 4
    #: Entities the graph walk starts from (half for SIMPLE, one and a half times for COMPLEX).
    graph_max_entry_entities: int = 10
    #: Neighbours followed from one entity at each hop.
    graph_max_fanout: int = 50
    #: Chunks per entity (most mentions first) that the graph channel scores for relevance
    #: before each evidence group keeps its most relevant ones (unfiltered recalls).
    graph_reach_scan: int = Field(default=200, ge=1)
    #: An entry entity mentioned in more than this share of the namespace's chunks counts
    #: as common and its evidence is discounted (``fusion.entity_specificity``); the graph
    #: walk does not pass through a common entity with more mentions than
    #: ``graph_reach_scan`` (``graph_channel.walk_through_limit``); 1.0: off.
    graph_common_entity_share: float = Field(default=0.05, gt=0.0, le=1.0)
    #: In fusion, the graph channel's evidence quality is capped at this for a question routed
    #: COMPLEX only because it names two or more things, with no multi-hop, comparison or
    #: relationship wording (``retrieval.ranking.graph_fusion_quality``); 1.0: no cap.
    graph_quality_without_hop_wording: float = Field(default=0.6, ge=0.0, le=1.0)
    #: How the graph channel ranks the passages it reaches on unfiltered recalls: ``"walk"``
    #: is personalized PageRank over the question's passage-entity graph, restarting at its
    #: entities and nearest passages (``retrieval.ppr``); ``"evidence"`` scores each passage
    #: by the entry entities it names times its relevance to the question.
    graph_scoring: Literal["walk", "evidence"] = "evidence"
    #: The walk's probability of following an edge rather than restarting.
    graph_walk_damping: float = Field(default=0.5, gt=0.0, lt=1.0)
    #: Share of the walk's restart mass on the nearest passages (the rest on the question's
    #: entities; all of it when the question names none).
    graph_walk_passage_share: float = Field(default=0.5, ge=0.0, le=1.0)
    #: Nearest passages whose entities' other passages join the walk (the second hops).
    graph_walk_expand: int = Field(default=5, ge=0)
    #: Passages each of the question's (or expanded) entities adds to the walk.
    graph_walk_per_entity: int = Field(default=30, ge=0)
    #: Adjust the walk depth to the number of entry entities (the two thresholds below).
    adaptive_depth_enabled: bool = True
    #: At or above this many entry entities, walk one hop only.
    adaptive_depth_high_entity_threshold: int = 10
    #: At or below this many entry entities (and at least one), walk one hop deeper.
    adaptive_depth_low_entity_threshold: int = 2
    # Fusion
    #: Reciprocal Rank Fusion constant ``k``: smaller trusts each channel's top ranks more.
    fusion_rrf_k: int = 60
    #: Vector channel weight in fusion for MODERATE questions.
    fusion_vector_weight: float = 0.6
    #: Graph channel weight in fusion for MODERATE questions.
    fusion_graph_weight: float = 0.4
    #: BM25 keyword channel weight in fusion, for every complexity.
    fusion_keyword_weight: float = 0.3
    #: Vector channel weight for SIMPLE questions.
    fusion_simple_vector_weight: float = 0.8
    #: Graph channel weight for SIMPLE questions.
    fusion_simple_graph_weight: float = 0.2
    #: Vector channel weight for COMPLEX questions.
    fusion_complex_vector_weight: float = 0.4
    #: Graph channel weight for COMPLEX questions.
    fusion_complex_graph_weight: float = 0.6
    #: Fuse with normalised weighted RRF (scores rescaled to 0-1) instead of plain weighted RRF.
    fusion_normalized: bool = False
    #: The vector channel's hit at rank ``i`` stays within the first ``ceil(i / (factor *
    #: share))`` fused places, ``share`` being its part of the fusion weights in use
    #: (``retrieval.fusion.keep_anchor_order``); 0 lets fusion move it anywhere.
    fusion_vector_share_factor: float = Field(default=0.9, ge=0.0)
    # Temporal
    #: Weight of the recency boost (0 turns it off).
    temporal_recency_weight: float = 0.35
    #: Age, in days, over which the recency boost decays.
    temporal_recency_decay_days: int = 30
    #: Shape of the recency decay.
    temporal_recency_decay_type: Literal["exponential", "linear"] = "exponential"
    #: Weight of the soft boost toward a date window found in the question.
    temporal_window_boost: float = 0.2
    # Thresholds and limits
    #: Minimum cosine for an entity found by vector search to seed the graph walk.
    retriever_min_entity_similarity: float = 0.3
    #: Most entities a recall result carries (and the graph channel keeps).
    retriever_max_entities: int = 30
    #: Most relationships a recall result carries between one ordered pair of its entities
    #: (the heaviest): two entities named together in many documents are joined once per
    #: document, and those parallel edges would crowd out every other pair.
    retriever_relationships_per_pair: int = Field(default=3, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data: Any) -> Any:
        return _drop_retired("VectorCypherConfig", data)


_SECTIONS: dict[str, type[_Section]] = {
    "storage": StorageConfig,
    "embedding": EmbeddingConfig,
    "llm": LLMConfig,
    "ingest": IngestConfig,
    "query": QueryConfig,
}


def _env_names(section: type[_Section], field_name: str) -> list[str]:
    prefix = section.model_config.get("env_prefix", "")
    names = [f"{prefix}{field_name}".upper()]
    alias = section.model_fields[field_name].validation_alias
    if isinstance(alias, AliasChoices):
        names += [c.upper() for c in alias.choices if isinstance(c, str) and c.upper().startswith("KHORA_")]
    return names


def _build_section(section: type[_Section], yaml_part: dict[str, Any], overrides: dict[str, Any]) -> _Section:
    # YAML sits below the environment: drop YAML keys that an env variable sets.
    base = {
        k: v
        for k, v in yaml_part.items()
        if not (k in section.model_fields and any(n in os.environ for n in _env_names(section, k)))
    }
    try:
        return section(**{**base, **overrides})
    except Exception as exc:  # pydantic ValidationError: name the setting
        raise ConfigError(f"Invalid {section.__name__} setting: {exc}", setting=section.__name__) from exc


class KhoraConfig(BaseModel):
    """All of Khora's global configuration, one section per concern.

    Build it with ``KhoraConfig()`` (env + defaults), ``KhoraConfig.load(path, **overrides)``
    (YAML too), or pass section objects / dicts as keywords::

        KhoraConfig(query={"enable_bm25_channel": True}, llm={"model": "openai/gpt-4o-mini"})
        KhoraConfig(preset="memory")  # a named read-path preset (retrieval.presets)

    A preset's settings sit just above the defaults: the environment, the YAML file and
    keywords each override them setting by setting (a ``VectorCypherConfig`` object passed
    whole replaces the preset's engine settings).
    """

    model_config = ConfigDict(extra="forbid")

    #: The named read-path preset the query and engine settings start from
    #: (``retrieval.presets``: ``default``, ``memory``, ``fast``, ...); ``KHORA_PRESET``.
    preset: str = "default"

    storage: StorageConfig
    embedding: EmbeddingConfig
    llm: LLMConfig
    ingest: IngestConfig
    query: QueryConfig
    vectorcypher: VectorCypherConfig = Field(default_factory=VectorCypherConfig)

    def __init__(self, **data: Any) -> None:
        yaml_path = data.pop("config_file", None) or os.environ.get("KHORA_CONFIG_FILE")
        yaml_data: dict[str, Any] = _read_yaml(yaml_path) if yaml_path else {}
        preset_name = data.pop("preset", None) or yaml_data.get("preset") or os.environ.get("KHORA_PRESET")
        preset = _preset(preset_name or "default")
        built: dict[str, Any] = {"preset": preset.name}
        for name, cls in _SECTIONS.items():
            given = data.pop(name, None)
            if isinstance(given, cls):
                built[name] = given
                continue
            if given is not None and not isinstance(given, dict):
                raise ConfigError(f"KhoraConfig({name}=...) takes a {cls.__name__} or a dict", setting=name)
            below = {**(dict(preset.query) if name == "query" else {}), **dict(yaml_data.get(name) or {})}
            built[name] = _build_section(cls, below, dict(given or {}))
        vc = data.pop("vectorcypher", None)
        if vc is None and "vectorcypher" in yaml_data:
            vc = _flatten_vectorcypher_yaml(yaml_data["vectorcypher"])
        if not isinstance(vc, VectorCypherConfig):
            try:
                vc = VectorCypherConfig(**{**dict(preset.vectorcypher), **dict(vc or {})})
            except Exception as exc:  # pydantic ValidationError: name the setting
                raise ConfigError(
                    f"Invalid VectorCypherConfig setting: {exc}", setting="vectorcypher"
                ) from exc
        built["vectorcypher"] = vc
        super().__init__(**built, **data)

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> KhoraConfig:
        """Build a config from a YAML file (optional), the environment and overrides."""
        return cls(config_file=path, **overrides) if path else cls(**overrides)


def _preset(name: str) -> Any:
    from khora_core.retrieval.presets import PRESETS

    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(
            f"Unknown preset {name!r}; choose one of {', '.join(PRESETS)} (KHORA_PRESET)",
            setting="KHORA_PRESET",
        )
    return PRESETS[name]


def _read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"Config file {str(p)!r} does not exist (KHORA_CONFIG_FILE)", setting="KHORA_CONFIG_FILE"
        )
    data = yaml.safe_load(p.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"Config file {str(p)!r} must hold a mapping of sections", setting="KHORA_CONFIG_FILE"
        )
    return data


def _flatten_vectorcypher_yaml(section: dict[str, Any]) -> dict[str, Any]:
    """Turn the spec's nested YAML (``routing: {enabled: true}``) into flat field names."""
    flat: dict[str, Any] = {}
    for key, value in (section or {}).items():
        if isinstance(value, dict):
            for sub, v in value.items():
                name = f"{key}_{sub}"
                flat[name if name in VectorCypherConfig.model_fields else f"{key}_{sub}"] = v
        else:
            flat[key] = value
    return flat
