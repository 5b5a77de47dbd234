"""Small word lists behind the offline extractor's cheap type cues.

They are cues, not knowledge: each list only has to be good enough to tip a guess. All
entries are compared case-insensitively unless noted.
"""

from __future__ import annotations

__all__ = [
    "CONCEPT_ACRONYMS",
    "EVENT_WORDS",
    "FIRST_NAMES",
    "GAZETTEER",
    "IGNORED_ACRONYMS",
    "LEADING_STOPWORDS",
    "LOCATION_PREFIXES",
    "LOCATION_SUFFIXES",
    "MONTHS",
    "ORG_PREFIXES",
    "ORG_SUFFIXES",
    "PERSON_TITLES",
    "PERSON_VERBS",
    "PROJECT_WORDS",
    "RELATION_FILLER",
    "ROLE_WORDS",
    "TYPE_SYNONYMS",
    "WEEKDAYS",
    "WORK_WORDS",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in text.split())


#: Capitalised words that start sentences (or names) without being names themselves,
#: greetings and interjections of chat text among them ("Hey Mel!", "Wow, Caroline").
LEADING_STOPWORDS = _words(
    """the a an in on at of to for from by with without as into onto over under after before
    during since until till while when whenever where wherever why how what which who whom whose
    this that these those it its he she they we i you our their his her my your me him them us
    and but or nor so yet if then than there here also however meanwhile moreover furthermore
    therefore thus hence although though because unless whether today yesterday tomorrow tonight
    last next each every some many most all both few several any no not none another other such
    once twice second third finally later earlier now still just only even please thanks
    thank dear hi hello yes ok okay according following regarding re note notes update summary
    our overall please let let's we'll i'm i've i'll i'd it's there's here's btw
    hey hiya howdy wow whoa oh ooh ah aw aww yeah yep yup nah nope sure congrats
    congratulations haha hahaha lol omg hmm um uh well sorry welcome bye goodbye cheers gosh
    yay hooray alright woah woohoo yo
    is are was were have has had can could would should
    maybe perhaps probably definitely absolutely totally really actually honestly anyway anyways"""
)

#: Titles before a person's name (trailing period optional).
PERSON_TITLES = _words(
    "mr mrs ms miss mx dr prof professor sir dame lord lady rev fr sen senator rep gov governor judge justice capt captain gen general col lt sgt officer coach"
)

#: Roles that precede or follow a person's name ("CEO Jane Smith", "Jane Smith, CEO of").
ROLE_WORDS = _words(
    """ceo cto cfo coo cio cmo cpo vp svp evp president vice chairman chairwoman chair chairperson
    director founder cofounder co-founder head manager lead engineer scientist researcher analyst
    professor minister secretary chancellor mayor king queen prince princess pope spokesperson
    spokesman spokeswoman chief partner owner editor author architect designer developer"""
)

#: Verbs that follow a person subject ("Alice said", "Bob told").
PERSON_VERBS = _words(
    """said says told asked explained wrote added noted argued claimed replied recalled believes
    thinks thought smiled laughed met meets joined joins married emailed called presented
    reported insisted suggested agreed confirmed admitted remembered promised"""
)

#: Words before "at X" that make X an employer ("works at Acme").
WORK_WORDS = _words(
    "works worked working work employed job engineer manager intern internship role position hired staff researcher professor student studies studied"
)

#: Last words that mark an organisation.
ORG_SUFFIXES = _words(
    """inc inc. incorporated corp corp. corporation ltd ltd. llc llp plc gmbh ag sa nv bv co co.
    company companies group holdings technologies technology tech labs lab laboratories systems
    bank university college institute foundation association agency department ministry council
    committee commission partners ventures capital industries solutions software networks network
    media studios studio airlines airways motors pharmaceuticals pharma therapeutics health
    hospital clinic school academy society union board bureau office services consulting
    enterprises international federation organization organisation party fund trust press times
    post journal news records entertainment games robotics dynamics energy analytics ai"""
)

#: First words that mark an organisation ("University of X", "Bank of Y").
ORG_PREFIXES = _words(
    "university bank institute department ministry college school academy federation museum league"
)

#: Last words that mark a place.
LOCATION_SUFFIXES = _words(
    """city county state province river mountain mountains lake street st avenue ave road rd
    boulevard blvd bridge island islands valley park bay ocean sea airport station square
    republic kingdom region district desert forest beach harbor harbour peninsula coast canyon
    heights hills village town borough"""
)

#: First words that mark a place ("Mount X", "Lake Y").
LOCATION_PREFIXES = _words(
    "mount mt lake port fort cape saint san santa los las new north south east west upper lower"
)

#: Well-known places (countries, big cities, regions); enough to tip a guess.
GAZETTEER = frozenset(
    name.strip().lower()
    for name in """Afghanistan|Africa|America|Alaska|Amsterdam|Argentina|Asia|Athens|Atlanta|Australia|Austin|
    Austria|Bangalore|Bangkok|Barcelona|Beijing|Belgium|Berlin|Bogota|Boston|Brazil|Brussels|
    Budapest|Buenos Aires|Cairo|California|Canada|Cape Town|Chicago|Chile|China|Colombia|
    Copenhagen|Denmark|Dubai|Dublin|Edinburgh|Egypt|England|Europe|Finland|Florida|France|Geneva|
    Germany|Greece|Hamburg|Helsinki|Hong Kong|Houston|India|Indonesia|Iran|Iraq|Ireland|Israel|
    Istanbul|Italy|Jakarta|Japan|Kenya|Korea|Lagos|Lisbon|London|Los Angeles|Madrid|Malaysia|
    Manchester|Melbourne|Mexico|Miami|Milan|Montreal|Moscow|Mumbai|Munich|Nairobi|Netherlands|
    New Delhi|New York|New Zealand|Nigeria|Norway|Oslo|Ottawa|Pakistan|Paris|Peru|Philippines|
    Poland|Portugal|Prague|Rome|Russia|San Francisco|Santiago|Scotland|Seattle|Seoul|Shanghai|
    Singapore|South Africa|Spain|Stockholm|Sweden|Switzerland|Sydney|Taiwan|Texas|Thailand|Tokyo|
    Toronto|Turkey|Ukraine|United Kingdom|United States|USA|UK|Vancouver|Vienna|Vietnam|Wales|
    Warsaw|Washington|Zurich|Silicon Valley|Bay Area|Europe|Antarctica|Oceania""".split("|")
)

#: Last (or first) words that mark an event.
EVENT_WORDS = _words(
    "conference summit forum festival expo olympics games war election meeting symposium workshop hackathon ceremony championship cup tournament congress convention webinar offsite retreat launch"
)

#: Words that mark a project ("Project Phoenix", "the Apollo Program").
PROJECT_WORDS = _words("project operation program programme initiative mission")

#: Common first names; a name starting with one is a person unless a stronger cue says otherwise.
FIRST_NAMES = _words(
    """aaron adam adrian ahmed aisha alan albert alex alexander alexandra alice alicia amanda amy
    ana andrea andrew angela anna anne anthony antonio arjun ava barbara ben benjamin beth bob
    brian bruce carl carlos carol caroline catherine charles charlie chen chris christina
    christopher claire daniel david deborah diana diego dmitri donald dorothy edward elena eli
    elizabeth ella emily emma eric ethan eva fatima frank george grace hannah harry helen henry
    hiro ian isabella jack jacob james jane janet jason jennifer jessica jim joan joe john jonathan
    jose joseph josh julia julie karen kate katherine kevin kim laura lauren lee leo linda lisa
    lucas lucy luis maria mark martin mary matthew maya michael michelle mike mohammed nancy natalie
    nathan nicole noah oliver olivia omar pablo patricia paul peter priya rachel raj rebecca richard
    robert ryan sam samantha sandra sara sarah scott sean sophia sophie stephen steve steven susan
    thomas tim tom victoria william yuki zoe"""
)

#: Acronyms that name concepts rather than organisations.
CONCEPT_ACRONYMS = _words(
    "ai ml api apis sdk kpi kpis okr okrs roi llm llms nlp rag gpu cpu sql http json pdf url faq hr it pr qa ui ux saas b2b b2c iot ar vr esg gdpr mvp poc crm erp etl"
)

#: All-caps words that are never entities on their own (roles, units, interjections).
IGNORED_ACRONYMS = _words(
    "ceo cto cfo coo cio cmo cpo vp svp evp am pm ok tbd fyi asap eta re cc bcc ps i ii iii iv "
    "notes note summary agenda update updates todo done new draft final attendees action items"
)

MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
WEEKDAYS = _words("monday tuesday wednesday thursday friday saturday sunday")

#: Words dropped from the edges of a linking phrase before it becomes a relation type.
RELATION_FILLER = _words(
    """the a an has have had is was were are be been being also recently now then who which that
    its his her their our will would just officially formally reportedly currently previously
    later soon already still both each all to 's ’s"""
)

#: Entity-type synonyms, used to map a guessed type onto a caller's vocabulary.
TYPE_SYNONYMS: dict[str, frozenset[str]] = {
    "PERSON": frozenset({"PERSON", "PER", "PEOPLE", "HUMAN", "INDIVIDUAL", "USER", "EMPLOYEE", "CONTACT"}),
    "ORGANIZATION": frozenset(
        {
            "ORGANIZATION",
            "ORGANISATION",
            "ORG",
            "COMPANY",
            "BUSINESS",
            "INSTITUTION",
            "TEAM",
            "AGENCY",
            "CORPORATION",
        }
    ),
    "LOCATION": frozenset({"LOCATION", "LOC", "PLACE", "GPE", "CITY", "COUNTRY", "REGION", "ADDRESS", "GEO"}),
    "DATE": frozenset({"DATE", "TIME", "DATETIME", "PERIOD", "TIMESTAMP", "YEAR"}),
    "EVENT": frozenset({"EVENT", "MEETING", "INCIDENT", "OCCASION"}),
    "PROJECT": frozenset({"PROJECT", "INITIATIVE", "PROGRAM", "PROGRAMME", "PRODUCT", "DEAL"}),
    "CONCEPT": frozenset(
        {"CONCEPT", "TOPIC", "THING", "OTHER", "MISC", "ENTITY", "TERM", "SUBJECT", "IDEA", "TECHNOLOGY"}
    ),
}
