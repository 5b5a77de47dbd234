"""How often the offline extractor finds what a passage is about.

A Wikipedia-style passage is about the thing its title names, so its title (without a
comma-separated qualifier or a parenthesised disambiguation: "McRae, Arkansas" -> "McRae",
"Lloyd (film)" -> "Lloyd") is the entity the graph most needs from it: a question that
names that thing links to the passage only if the extractor found it. For every passage of
the multi-hop corpora whose text contains its title's name, this prints the share whose
extracted entity names include it (case-insensitive; a leading "The" is dropped on both
sides, as the extractor drops it).

    python -m benchmarks.extraction [--show N]
"""

from __future__ import annotations

import argparse
import re

from benchmarks._common import DATA, print_table, read_jsonl
from khora_core.ingest.extract_offline import OfflineExtractor

DATASETS = ("musique", "2wikimultihopqa", "hotpotqa")


def subject(title: str) -> str:
    """The name a passage title gives its subject: before a comma or a parenthesis."""
    name = re.sub(r"\s*\(.*\)\s*$", "", title).split(",")[0].strip()
    return re.sub(r"^the\s+", "", name, flags=re.IGNORECASE).casefold()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--show", type=int, default=0, help="print this many missed passages per corpus")
    args = parser.parse_args()
    extractor = OfflineExtractor()
    rows = []
    for name in DATASETS:
        passages = read_jsonl(DATA / "multihop" / name / "corpus.jsonl")
        named, missed = 0, []
        for p in passages:
            wanted = subject(p["title"])
            if not wanted or wanted not in p["text"].casefold():
                continue
            named += 1
            found = {
                re.sub(r"^the\s+", "", e.name, flags=re.IGNORECASE).casefold()
                for e in extractor.extract_chunk(p["id"], p["text"]).entities
            }
            if wanted not in found:
                missed.append((p["title"], p["text"][:80]))
        rows.append([name, len(passages), named, f"{100 * (named - len(missed)) / max(named, 1):.1f}"])
        for title, text in missed[: args.show]:
            print(f"  {name}: {title!r} <- {text!r}")
    print_table(
        "Passage subjects found by the offline extractor",
        ["corpus", "passages", "title's name in the text", "subject extracted (%)"],
        rows,
    )


if __name__ == "__main__":
    main()
