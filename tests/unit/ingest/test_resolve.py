from __future__ import annotations

import uuid

from khora_core.ingest.extract_base import ExtractedEntity as E
from khora_core.ingest.resolve import EntityResolver, entity_id, normalise_name
from khora_core.models import Entity


def _by_name(res):  # type: ignore[no-untyped-def]
    return {e.name: e for e in res.entities}


def test_normalise_name_and_deterministic_ids() -> None:
    assert normalise_name("  Acme   Corp. ") == "acme corp"
    assert normalise_name("O'Brien's") == "obrien"
    assert normalise_name("Jean-Luc PICARD") == "jean luc picard"
    a = entity_id("ns1", "Acme Corp")
    assert a == entity_id("ns1", "acme corp.") == entity_id("ns1", " ACME  CORP ")
    assert a != entity_id("ns2", "Acme Corp")
    assert uuid.UUID(a).version == 5


def test_case_title_suffix_and_acronym_merges() -> None:
    res = EntityResolver().resolve(
        [
            E("Dr. Jane Smith", "PERSON"),
            E("Jane Smith", "PERSON"),
            E("jane smith", "CONCEPT"),
            E("NASA", "ORGANIZATION"),
            E("National Aeronautics and Space Administration", "ORGANIZATION"),
            E("Acme Corp.", "ORGANIZATION"),
            E("Acme", "CONCEPT"),
        ]
    )
    names = _by_name(res)
    assert set(names) == {"Jane Smith", "National Aeronautics and Space Administration", "Acme Corp"}
    jane = names["Jane Smith"]
    assert jane.type == "PERSON" and jane.aliases == ["Dr. Jane Smith"]
    assert names["National Aeronautics and Space Administration"].aliases == ["NASA"]
    assert names["Acme Corp"].type == "ORGANIZATION"  # majority vote; CONCEPT loses ties
    assert res.lookup("dr jane smith") is jane and res.lookup("NASA") is not None


def test_fuzzy_merge_respects_digits_and_dates() -> None:
    res = EntityResolver(fuzzy_threshold=92).resolve(
        [
            E("Jonathan Smithers", "PERSON"),
            E("Jonathon Smithers", "PERSON"),
            E("GPT-3", "CONCEPT"),
            E("GPT-4", "CONCEPT"),
            E("March 2023", "DATE"),
            E("March 2024", "DATE"),
        ]
    )
    assert {"GPT-3", "GPT-4", "March 2023", "March 2024"} <= set(_by_name(res))
    [smithers] = [e for e in res.entities if "Smithers" in e.name]
    assert {smithers.name, *smithers.aliases} == {"Jonathan Smithers", "Jonathon Smithers"}
    assert len(res.entities) == 5


def test_embeddings_confirm_or_veto_fuzzy_merges() -> None:
    mentions = [E("Jonathan Smithers", "PERSON"), E("Jonathon Smithers", "PERSON")]
    same = {"Jonathan Smithers": [1.0, 0.0], "Jonathon Smithers": [0.99, 0.05]}
    different = {"Jonathan Smithers": [1.0, 0.0], "Jonathon Smithers": [0.0, 1.0]}
    assert len(EntityResolver().resolve(mentions, embeddings=same).entities) == 1
    assert len(EntityResolver().resolve(mentions, embeddings=different).entities) == 2
    # A looser spelling merges only when the embeddings agree.
    loose = [E("Acme Robotics", "ORGANIZATION"), E("Acme Robotix", "ORGANIZATION")]
    assert len(EntityResolver(fuzzy_threshold=99).resolve(loose).entities) == 2
    vecs = {"Acme Robotics": [1.0, 0.1], "Acme Robotix": [1.0, 0.12]}
    assert len(EntityResolver(fuzzy_threshold=99).resolve(loose, embeddings=vecs).entities) == 1


def test_type_conflicts_do_not_merge_by_similarity() -> None:
    res = EntityResolver(fuzzy_threshold=80).resolve(
        [E("Jordan River", "LOCATION"), E("Jordan Rivers", "PERSON")]
    )
    assert len(res.entities) == 2


def test_existing_entities_anchor_ids_and_are_never_merged_together() -> None:
    stored_a = Entity(
        id="a-id", namespace_id="ns", name="Initech Inc", type="ORGANIZATION", aliases=["Initech Corporation"]
    )
    stored_b = Entity(id="b-id", namespace_id="ns", name="Initech", type="ORGANIZATION")
    res = EntityResolver().resolve([E("Initech Corporation", "CONCEPT")], existing=[stored_a])
    [only] = res.entities
    assert only.name == "Initech Inc" and only.id("ns") == "a-id" and only.type == "ORGANIZATION"
    assert "Initech Corporation" in only.aliases
    res = EntityResolver().resolve(
        [E("Initech", "ORGANIZATION"), E("Initech Inc", "ORGANIZATION")], existing=[stored_a, stored_b]
    )
    assert {e.id("ns") for e in res.entities} == {"a-id", "b-id"}


def test_unmentioned_stored_entities_are_not_returned() -> None:
    stored = Entity(id="x", namespace_id="ns", name="Globex", type="ORGANIZATION")
    res = EntityResolver().resolve([E("Alice", "PERSON")], existing=[stored])
    assert [e.name for e in res.entities] == ["Alice"]
    assert res.entities[0].id("ns") == entity_id("ns", "Alice")


def test_the_plan_wants_only_the_names_of_close_pairs() -> None:
    mentions = [
        E("Jonathan Smithers", "PERSON"),
        E("Jonathon Smithers", "PERSON"),  # close to the first: its vector decides
        E("Dr. Jonathan Smithers", "PERSON"),  # one cluster with the first, close to the second
        E("Lisbon", "LOCATION"),
        E("March 2024", "DATE"),
    ]
    plan = EntityResolver().plan(mentions)
    assert sorted(plan.wanted) == ["Dr. Jonathan Smithers", "Jonathan Smithers", "Jonathon Smithers"]
    different = {"Jonathan Smithers": [1.0, 0.0], "Jonathon Smithers": [0.0, 1.0]}
    res = plan.finish(different)
    assert sorted(e.name for e in res.entities) == [
        "Jonathan Smithers",
        "Jonathon Smithers",
        "Lisbon",
        "March 2024",
    ]
    assert res.lookup("Dr. Jonathan Smithers") is res.lookup("Jonathan Smithers")
    assert EntityResolver().plan([E("Lisbon", "LOCATION"), E("Porto", "LOCATION")]).wanted == []
    # Close, but one cluster already (the same name without its title): no vector needed.
    assert EntityResolver().plan([E("Dr. Maya Chen", "PERSON"), E("Maya Chen", "PERSON")]).wanted == []
