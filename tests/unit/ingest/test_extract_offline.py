from __future__ import annotations

import time

from khora_core.ingest.extract_base import ChunkExtraction
from khora_core.ingest.extract_offline import OfflineExtractor, keyword_links
from khora_core.ingest.keywords import KeywordMatcher
from khora_core.ingest.vocabulary import constrain_entity_type, constrain_relation_type


def _run(text: str, **kwargs: object) -> ChunkExtraction:
    return OfflineExtractor().extract_chunk("c1", text, **kwargs)  # type: ignore[arg-type]


def _entities(result: ChunkExtraction) -> dict[str, str]:
    return {e.name: e.type for e in result.entities}


def _relations(result: ChunkExtraction) -> set[tuple[str, str, str]]:
    return {(r.source, r.type, r.target) for r in result.relations}


def test_people_organisations_and_relation_labels() -> None:
    result = _run("Alice Chen works at Acme Corp. She joined Acme Corp in March 2024.")
    assert _entities(result) == {"Alice Chen": "PERSON", "Acme Corp": "ORGANIZATION", "March 2024": "DATE"}
    assert _relations(result) == {("Alice Chen", "WORKS_AT", "Acme Corp")}
    rel = result.relations[0]
    assert rel.description == "works at"


def test_titles_apposition_locations_and_dates() -> None:
    result = _run(
        "Dr. Jane Smith, CEO of Globex Inc., said the company will expand to Berlin on 3 July 2023."
    )
    ents = _entities(result)
    assert ents["Jane Smith"] == "PERSON"  # the title is a cue, not part of the name
    assert ents["Globex Inc"] == "ORGANIZATION"
    assert ents["Berlin"] == "LOCATION"
    assert ents["3 July 2023"] == "DATE"
    date = next(e for e in result.entities if e.type == "DATE")
    assert date.description == "2023-07-03"
    assert ("Jane Smith", "CEO_OF", "Globex Inc") in _relations(result)


def test_coordination_shares_the_relation_and_dates_stay_out_of_relations() -> None:
    result = _run("Alice and Bob founded Initech in 2019. Project Phoenix is led by Carol White.")
    ents = _entities(result)
    assert ents["Initech"] == "ORGANIZATION" and ents["Project Phoenix"] == "PROJECT"
    assert ents["2019"] == "DATE" and ents["Carol White"] == "PERSON"
    assert _relations(result) == {
        ("Alice", "FOUNDED", "Initech"),
        ("Bob", "FOUNDED", "Initech"),
        ("Project Phoenix", "LED_BY", "Carol White"),
    }


def test_acronyms_quarters_and_sentence_start_words() -> None:
    result = _run(
        "The meeting in Paris was attended by Bob Jones. NASA and IBM announced a partnership in Q1."
    )
    ents = _entities(result)
    assert ents == {
        "Paris": "LOCATION",
        "Bob Jones": "PERSON",
        "NASA": "ORGANIZATION",
        "IBM": "ORGANIZATION",
        "Q1": "DATE",
    }
    assert "The" not in ents and "The meeting" not in ents
    # Plain capitalised words at a sentence start are not entities; weekdays are dates.
    assert _entities(_run("Revenue grew in 2023. Sales were flat on Monday.")) == {
        "2023": "DATE",
        "Monday": "DATE",
    }


def test_may_is_a_date_only_in_date_context() -> None:
    ents = _entities(_run("In May, the University of Cambridge hosted the AI Safety Summit. May I help?"))
    assert ents == {"May": "DATE", "University of Cambridge": "ORGANIZATION", "AI Safety Summit": "EVENT"}


def test_connectors_inside_names() -> None:
    ents = _entities(_run("Dr. Alice Chen joined the Bank of America and Johnson & Johnson as well as Acme."))
    assert {"Bank of America", "Johnson & Johnson", "Alice Chen"} <= set(ents)
    ents = _entities(_run("The Department of Health and Human Services met Alice."))
    assert "Department of Health and Human Services" in ents


def test_entity_types_constraint_maps_and_drops() -> None:
    text = "Dr. Jane Smith, CEO of Globex Inc., said the company will expand to Berlin on 3 July 2023."
    result = _run(text, entity_types=["PERSON", "ORG"], relationship_types=["CEO_OF"])
    assert _entities(result) == {"Jane Smith": "PERSON", "Globex Inc": "ORG"}  # ORGANIZATION -> ORG
    assert _relations(result) == {("Jane Smith", "CEO_OF", "Globex Inc")}


def test_vocabulary_mapping() -> None:
    assert constrain_entity_type("ORGANIZATION", ["Company", "Person"]) == "Company"
    assert constrain_entity_type("CONCEPT", ["PERSON", "TOPIC"]) == "TOPIC"
    assert constrain_entity_type("LOCATION", ["PERSON"]) is None
    assert constrain_relation_type("WORKED_AT", ["WORKS_AT", "FOUNDED"]) == "WORKS_AT"
    assert constrain_relation_type("PARTICIPATED_IN", ["PARTICIPATES_IN"]) == "PARTICIPATES_IN"
    assert constrain_relation_type("HOSTED", ["WORKS_AT", "RELATED_TO"]) == "RELATED_TO"
    assert constrain_relation_type("HOSTED", ["WORKS_AT"]) is None


async def test_async_extract_keeps_order_and_ids() -> None:
    chunks = [(f"id{i}", f"Alice Chen met Bob Jones in Paris on day {i}.") for i in range(5)]
    results = await OfflineExtractor().extract(chunks)
    assert [r.chunk_id for r in results] == [c for c, _ in chunks]
    assert all(not r.failed and len(r.entities) == 3 for r in results)


def test_keyword_links_case_rules_and_longest_match() -> None:
    names = ["Alice Chen", "Alice", "Acme Corp", "US", "May", "Bob"]
    text = "We met alice chen and the us team at ACME corp in May; the US office. Alice again."
    assert keyword_links(text, names) == ["Alice Chen", "Acme Corp", "May", "US", "Alice"]
    counts = KeywordMatcher(names).counts("Alice Chen and Alice Chen, then Alice.")
    assert counts == {"Alice Chen": 2, "Alice": 1}


def test_keyword_links_scale_to_many_names() -> None:
    names = [f"Entity Number {i}" for i in range(5000)] + ["Target Corp"]
    text = ("filler words here " * 2000) + "Target Corp and Entity Number 4321."
    started = time.perf_counter()
    assert keyword_links(text, names) == ["Target Corp", "Entity Number 4321"]
    assert time.perf_counter() - started < 2.0


def test_clause_after_and_keeps_its_subject_and_bare_prepositions() -> None:
    result = _run("Alice Chen works at Acme Corp and leads Project Phoenix.")
    assert _relations(result) == {
        ("Alice Chen", "WORKS_AT", "Acme Corp"),
        ("Alice Chen", "LEADS", "Project Phoenix"),
    }
    result = _run("Alice Chen met Bob Jones in Paris about Project Phoenix.")
    assert _relations(result) == {
        ("Alice Chen", "MET", "Bob Jones"),
        ("Bob Jones", "LOCATED_IN", "Paris"),
        ("Paris", "RELATED_TO", "Project Phoenix"),
    }


def test_chat_turns_yield_names_not_greetings_or_interjections() -> None:
    # "Speaker: text" turns: the word after the colon opens a clause, and greetings or
    # interjections before a name are not part of it.
    assert _entities(_run("Caroline: Hey Mel! Good to see you!")) == {"Caroline": "PERSON", "Mel": "CONCEPT"}
    assert _entities(_run("Melanie: Wow, that's cool, Caroline! Did you hear any stories?")) == {
        "Caroline": "PERSON"
    }
    assert _entities(_run("Jon: Wow, love that painting!")) == {}
    assert "I've" not in _entities(_run("Nate: I've got a new puppy, Max."))
    assert _entities(_run("Welcome Elena Marsh to the team.")) == {"Elena Marsh": "PERSON"}
    # "I'm"/"I've" are the pronoun; openers such as "Absolutely" or "Is" are not part of a name
    assert _entities(_run("Maybe I'll visit Rome with Anna.")) == {"Rome": "LOCATION", "Anna": "PERSON"}
    assert _entities(_run("Nate: Lately I've been painting.")) == {}
    assert "Mel" in _entities(_run("Jon: Absolutely Mel, see you there!"))
    assert "Harry Potter" in _entities(_run("Tim: Is Harry Potter your favourite?"))


def test_lone_names_at_a_sentence_start_with_their_own_evidence() -> None:
    # the subject of the text's opening definition, parentheses allowed before the copula
    assert "Tinnelva" in _entities(_run("Tinnelva is a river in Notodden, Norway."))
    assert "Teutberga" in _entities(_run("Teutberga( died 11 November 875) was a queen of Lotharingia."))
    assert "Empties" in _entities(_run("Empties is a 2007 film directed by Jan Sverak."))
    # ... but not a later sentence, a word the text also uses in lower case, or a pronoun
    assert "Kapolei" not in _entities(_run("It grew fast. Kapolei is a planned community."))
    assert "Life" not in _entities(_run("Life is a journey, and life goes on."))
    assert _entities(_run("It is a river.")) == {}
    # a capital inside the word, and hyphenated acronyms (call signs), anywhere
    assert "McRae" in _entities(_run("McRae is small. The population was 682."))
    assert "KAGH-FM" in _entities(_run("KAGH-FM (104.9 FM) serves Crossett."))
    assert "AMAZING" not in _entities(_run("AMAZING news from the team today."))


def test_a_capital_after_a_colon_needs_support_like_a_sentence_start() -> None:
    # a lone capitalised word opening the clause is dropped unless something says it is a name
    assert "Sounds" not in _entities(_run("Update: Sounds good to everyone."))
    assert _entities(_run("Note: Paris is lovely in May.")).get("Paris") == "LOCATION"  # gazetteer
    assert _entities(_run("Agenda: Maya Chen presents the roadmap.")).get("Maya Chen") == "PERSON"
