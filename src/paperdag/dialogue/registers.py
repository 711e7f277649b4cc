"""The two registers the dialogue generator writes in: a chat between two people (LongMemEval-like) and a team meeting
(MeetingQA-like). A register is plain data: entity kinds with their attributes (value pools and sentence templates),
preference categories, openers and chit-chat. Templates use {E} (the entity's full name), {P} (its pronoun),
{v} (a value), {D} (a date in words), {S} (a speaker)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache


@dataclass(frozen=True)
class Attribute:
    values: tuple[str, ...]
    state: str  # a statement naming the entity: "{E} has moved to {v}."
    state_pronoun: str  # the same after the entity was named earlier in the session: "{P} has moved to {v}."
    tease: str  # mentions the attribute without a value (a hard negative): "{E} keeps talking about moving."
    ask_now: str  # the fact question (current value): "Where does {E} live now?"
    ask_then: str  # the temporal question (the value stated in one dated session): "... when we spoke on {D}?"
    pool: str = ""  # values drawn from this name pool instead ("people", "places") when `values` is empty


@dataclass(frozen=True)
class Kind:
    pattern: str  # how an entity of this kind is named from a drawn name: "my cousin {n}"
    names: str  # which name pool fills {n}: "people", "places", "pets", "codenames", "subjects"
    pronoun: str
    attributes: dict[str, Attribute]


@dataclass(frozen=True)
class Preference:
    values: tuple[str, ...]
    state: str  # said by the speaker about themself: "I'm really into {v} food."
    ask: str  # "What kind of food does {S} enjoy?"
    topic: str = ""  # what a session about this category is about ("food"): {T} in the register's topic lines


@dataclass(frozen=True)
class Register:
    name: str
    speakers: int  # people taking part in every session
    kinds: dict[str, Kind]
    preferences: dict[str, Preference]
    openers: tuple[str, ...]  # the session's first utterance, naming its entity
    chat: tuple[str, ...]  # topical filler naming the entity (near-duplicates of the questions, never useful)
    small_talk: tuple[str, ...] = field(default=())  # filler without the entity
    topic_openers: tuple[str, ...] = field(default=())  # a preference session's first utterance, naming its {T}
    topic_chat: tuple[str, ...] = field(default=())  # filler of a preference session naming its {T}


JOBS = ("nurse", "teacher", "architect", "pharmacist", "baker", "plumber", "lawyer", "pilot", "chemist", "librarian",
        "dentist", "translator", "carpenter", "journalist", "accountant", "electrician")
HOBBIES = ("pottery", "rock climbing", "salsa dancing", "birdwatching", "chess", "knitting", "surfing", "archery",
           "gardening", "origami", "rowing", "fencing", "baking bread", "painting")
HOTELS = ("the Harbour Inn", "the Old Mill Lodge", "the Grand Palace", "the Blue Door Hostel", "the Riverside Suites",
          "the Hilltop Hotel", "the Lantern House", "the Garden Court", "the Station Hotel", "the Cedar Rooms")
TRANSPORT = ("the night train", "a cheap flight", "the coach", "a rental car", "the ferry", "a shared van")
FOODS = ("salmon kibble", "chicken pellets", "grain-free biscuits", "wet tuna food", "lamb and rice", "raw carrots",
         "duck treats", "turkey mince")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
TOOLS = ("Jira", "Trello", "Notion", "Asana", "a shared spreadsheet", "Linear", "GitLab boards", "Basecamp")
STATUSES = ("on hold", "approved", "in review", "blocked", "under budget", "behind schedule", "signed off", "paused")
VENDORS = ("Northwind", "Globex", "Initech", "Umbrella Supplies", "Vandelay Imports", "Stark Logistics", "Acme Parts",
           "Hooli Cloud")
BUDGETS = tuple(str(n) for n in (300, 450, 600, 750, 900, 1200, 1500, 1800, 2400, 3000))
VENUES = ("the community hall", "the library basement", "the old school", "the sports centre", "the town museum",
          "the art studio", "the church hall")


def _people_attributes() -> dict[str, Attribute]:
    return {
        "job": Attribute(JOBS, "{E} has just started working as a {v}.", "{P} has just started working as a {v}.",
                         "{E} keeps saying the current job is not the right one.", "What does {E} work as now?",
                         "What was {E} working as when we spoke on {D}?"),
        "hobby": Attribute(HOBBIES, "{E} has taken up {v} recently.", "{P} has taken up {v} recently.",
                           "{E} always needs some hobby to fill the evenings.", "What hobby is {E} into now?",
                           "Which hobby had {E} taken up when we talked on {D}?"),
        "city": Attribute((), "{E} has moved to {v}.", "{P} has moved to {v}.",
                          "{E} is restless and might move house again.", "Where does {E} live now?",
                          "Where was {E} living when we spoke on {D}?", pool="places"),
    }


CHAT = Register(
    name="chat", speakers=2,
    kinds={
        "friend": Kind("my friend {n}", "people", "She", _people_attributes()),
        "cousin": Kind("my cousin {n}", "people", "He", _people_attributes()),
        "trip": Kind("the trip to {n}", "places", "It", {
            "hotel": Attribute(HOTELS, "For the trip to {n} we booked {v}.", "We booked {v} for it.",
                               "The trip to {n} still needs a decent place to sleep.",
                               "Which hotel is booked for the trip to {n} now?",
                               "Which hotel was booked for the trip to {n} when we talked on {D}?"),
            "budget": Attribute(BUDGETS, "The budget for the trip to {n} is {v} euros.", "The budget for it is {v} euros.",
                                "Money for the trip to {n} is tight.", "What is the budget for the trip to {n} now?",
                                "What was the budget for the trip to {n} when we spoke on {D}?"),
            "transport": Attribute(TRANSPORT, "We are taking {v} for the trip to {n}.", "We are taking {v} to get there.",
                                   "Getting to {n} is the hard part of the trip.",
                                   "How are we travelling for the trip to {n} now?",
                                   "How were we travelling to {n} when we talked on {D}?"),
        }),
        "pet": Kind("my dog {n}", "pets", "He", {
            "food": Attribute(FOODS, "My dog {n} only eats {v} now.", "He only eats {v} now.",
                              "My dog {n} is so picky about dinner.", "What does my dog {n} eat now?",
                              "What was my dog {n} eating when we spoke on {D}?"),
            "vet": Attribute((), "My dog {n} sees Dr {v} at the clinic.", "He sees Dr {v} at the clinic.",
                             "My dog {n} hates going to the clinic.", "Which vet does my dog {n} see now?",
                             "Which vet was my dog {n} seeing when we talked on {D}?", pool="people"),
        }),
        "course": Kind("the {n} course", "subjects", "It", {
            "teacher": Attribute((), "The {n} course is now taught by {v}.", "It is now taught by {v}.",
                                 "The {n} course had a change of staff.", "Who teaches the {n} course now?",
                                 "Who was teaching the {n} course when we spoke on {D}?", pool="people"),
            "day": Attribute(WEEKDAYS, "The {n} course meets on {v} evenings.", "It meets on {v} evenings.",
                             "The schedule of the {n} course is confusing.", "On which day does the {n} course meet now?",
                             "On which day did the {n} course meet when we talked on {D}?"),
            "venue": Attribute(VENUES, "The {n} course moved to {v}.", "It moved to {v}.",
                               "Finding the room for the {n} course is always tricky.", "Where is the {n} course held now?",
                               "Where was the {n} course held when we spoke on {D}?"),
        }),
    },
    preferences={
        "cuisine": Preference(("Thai", "Italian", "Mexican", "Ethiopian", "Korean", "Lebanese", "Georgian", "Peruvian"),
                              "I'm really into {v} food.", "What kind of food does {S} enjoy?", topic="food"),
        "music": Preference(("jazz", "bluegrass", "techno", "opera", "reggae", "punk rock", "bossa nova", "k-pop"),
                            "I mostly listen to {v} these days.", "What music does {S} like listening to?", topic="music"),
        "drink": Preference(("green tea", "espresso", "kombucha", "hot chocolate", "oat lattes", "ginger beer"),
                            "My favourite drink is {v}.", "What is {S}'s favourite drink?", topic="drinks"),
        "sport": Preference(("tennis", "badminton", "cycling", "swimming", "volleyball", "bouldering", "table tennis"),
                            "I love playing {v} at the weekend.", "Which sport does {S} enjoy playing?", topic="sport"),
        "films": Preference(("horror films", "documentaries", "westerns", "romantic comedies", "anime", "thrillers"),
                            "I could watch {v} all night.", "What kind of films does {S} enjoy?", topic="films"),
        "holidays": Preference(("beach holidays", "hiking trips", "city breaks", "camping", "cruises", "ski trips"),
                               "I always pick {v} when I get time off.", "What kind of holidays does {S} prefer?", topic="holidays"),
    },
    openers=("I wanted to tell you about {E}.", "Any news about {E}?", "So, {E} again.", "Let's talk about {E}."),
    chat=("Have you heard anything new about {E}?", "I keep thinking about {E}.", "{E} came up again yesterday.",
          "Tell me more about {E}.", "Honestly {E} is a big part of my week.", "Remind me what is going on with {E}."),
    topic_openers=("Can we talk about {T} for a minute?", "So, {T}.", "I've been thinking about {T}."),
    topic_chat=("We never agree on {T}.", "{T} is such a personal thing.", "Talking of {T}, guess what I tried.",
                "My sister has strong opinions on {T} too.", "I read an article about {T} yesterday."),
    small_talk=("That sounds great.", "How was your week otherwise?", "Ha, typical.", "I know what you mean.",
                "Let's see how it goes.", "Sorry, I was distracted for a second."),
)

MEETING = Register(
    name="meeting", speakers=4,
    kinds={
        "launch": Kind("the {n} launch", "codenames", "It", {
            "owner": Attribute((), "{v} now owns the {n} launch.", "{v} now owns it.",
                               "The {n} launch needs a clear owner.", "Who owns the {n} launch now?",
                               "Who owned the {n} launch after the meeting on {D}?", pool="people"),
            "status": Attribute(STATUSES, "The {n} launch is {v}.", "It is {v} as of today.",
                                "We should talk about where the {n} launch stands.", "What is the status of the {n} launch now?",
                                "What was the status of the {n} launch in the meeting on {D}?"),
            "tool": Attribute(TOOLS, "The {n} launch is tracked in {v}.", "We track it in {v}.",
                              "Tracking for the {n} launch is a mess.", "Where is the {n} launch tracked now?",
                              "Where was the {n} launch tracked after the meeting on {D}?"),
        }),
        "contract": Kind("the {n} contract", "codenames", "It", {
            "vendor": Attribute(VENDORS, "The {n} contract goes to {v}.", "It goes to {v}.",
                                "The vendor for the {n} contract is still open.", "Which vendor has the {n} contract now?",
                                "Which vendor had the {n} contract after the meeting on {D}?"),
            "budget": Attribute(BUDGETS, "The {n} contract is capped at {v} thousand.", "It is capped at {v} thousand.",
                                "The {n} contract keeps getting more expensive.", "What is the cap on the {n} contract now?",
                                "What was the cap on the {n} contract in the meeting on {D}?"),
            "deadline": Attribute(WEEKDAYS, "The {n} contract must be signed by {v}.", "It must be signed by {v}.",
                                  "The {n} contract deadline is slipping.", "By which day must the {n} contract be signed now?",
                                  "By which day was the {n} contract due after the meeting on {D}?"),
        }),
    },
    preferences={
        "channel": Preference(("Slack", "email", "Teams", "a phone call", "a shared doc", "Zoom"),
                              "I'd rather we handle these through {v}.", "How does {S} prefer to communicate?", topic="how we communicate"),
        "slot": Preference(("early mornings", "after lunch", "late afternoons", "Friday mornings", "Monday evenings"),
                           "Meetings work best for me {v}.", "When does {S} prefer to meet?", topic="meeting times"),
        "format": Preference(("slides", "a one-page memo", "a live demo", "a spreadsheet", "a recorded video"),
                             "I like updates as {v}.", "In what format does {S} like updates?", topic="status updates"),
        "snack": Preference(("fruit", "pastries", "nothing at all", "biscuits", "sandwiches"),
                            "Please order {v} for the offsite.", "What does {S} want ordered for the offsite?", topic="the offsite catering"),
    },
    openers=("Next item: {E}.", "Let's move on to {E}.", "Any updates on {E}?", "Quick one on {E}."),
    chat=("Can we revisit {E} next week?", "Let's take {E} offline.", "I have a question on {E}.",
          "{E} came up with the client too.", "Who has context on {E}?", "We spent too long on {E} last time."),
    topic_openers=("Let's settle {T}.", "Quick round on {T}.", "One more thing: {T}."),
    topic_chat=("We keep coming back to {T}.", "Last quarter {T} was a mess.", "Let's not spend long on {T}.",
                "HR asked about {T} as well.", "Everyone has a view on {T}."),
    small_talk=("Agreed.", "Makes sense.", "Can everyone hear me?", "Let's keep moving.", "Noted.", "Sorry, go ahead."),
)

REGISTERS = {"chat": CHAT, "meeting": MEETING}

PEOPLE = ("Anna", "Ben", "Chloe", "Daniel", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kavya", "Liam", "Maya",
          "Noah", "Olga", "Pavel", "Quinn", "Rosa", "Samir", "Tara", "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zoe",
          "Aiko", "Bruno", "Carmen", "Dmitri", "Esme", "Felix", "Gita", "Hamza", "Ivy", "Jamal", "Kira", "Lucas", "Mei",
          "Nadia", "Oscar", "Priya", "Rafael", "Sofia", "Theo", "Uma", "Viktor", "Willa", "Yara", "Zane", "Amara",
          "Boris", "Cleo", "Dario", "Eva", "Femi", "Greta", "Hiro", "Isla", "Joel", "Lena", "Marco", "Nina", "Omar")
PETS = ("Rex", "Biscuit", "Pepper", "Milo", "Luna", "Bruno", "Socks", "Ziggy", "Maple", "Pickle", "Nacho", "Olive",
        "Buster", "Tofu", "Waffles", "Scout")
SUBJECTS = ("pottery", "Spanish", "life drawing", "first aid", "photography", "jazz piano", "woodwork", "coding",
            "Italian cooking", "sign language", "yoga", "creative writing")
CODENAMES = ("Falcon", "Orion", "Atlas", "Juniper", "Cobalt", "Nimbus", "Granite", "Harbor", "Mosaic", "Quartz",
             "Summit", "Tundra", "Vega", "Willow", "Zephyr", "Beacon")


@cache
def places() -> tuple[str, ...]:
    """Place names from pycountry's subdivisions (plain ASCII words of 4-10 letters), sorted: a varied, offline pool."""
    import pycountry

    return tuple(sorted({s.name for s in pycountry.subdivisions
                         if s.type in ("City", "Municipality", "Province") and s.name.isascii() and s.name.isalpha()
                         and 4 <= len(s.name) <= 10}))


def name_pool(which: str) -> tuple[str, ...]:
    pools = {"people": PEOPLE, "pets": PETS, "subjects": SUBJECTS, "codenames": CODENAMES}
    if which == "places":
        return places()
    if which not in pools:
        raise ValueError(f"unknown name pool {which!r}: one of places, {', '.join(pools)}")
    return pools[which]
