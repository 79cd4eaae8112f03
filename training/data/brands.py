"""Brands: a real `Profile` per brand with randomized facts, names and escalation target."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from pipeline.profile import Profile, parse_profile
from training.data.catalog import FactIntent, Sector, SlotIntent
from training.data.generic import SUPPORT_LINE
from training.data.realistic.pools import SectorPool
from training.data.sectors_everyday import EVERYDAY_SECTORS
from training.data.sectors_services import SERVICE_SECTORS
from training.data.sectors_travel import TRAVEL_SECTORS
from training.data.values import Value, tidy

SECTORS: dict[str, Sector] = {s.name: s for s in TRAVEL_SECTORS + SERVICE_SECTORS + EVERYDAY_SECTORS}
TRAIN_ONLY_SECTORS = tuple(s.name for s in EVERYDAY_SECTORS)  # added after the held-out split was fixed

STEMS = (
    "Acorn",
    "Alder",
    "Amber",
    "Apex",
    "Arrow",
    "Aspen",
    "Atlas",
    "Beacon",
    "Birch",
    "Bluebell",
    "Brightway",
    "Cascade",
    "Cedar",
    "Clearwater",
    "Cobalt",
    "Copper",
    "Crescent",
    "Crest",
    "Dune",
    "Ember",
    "Evergreen",
    "Falcon",
    "Fern",
    "Foxglove",
    "Glacier",
    "Granite",
    "Harbor",
    "Hawthorn",
    "Heron",
    "Horizon",
    "Indigo",
    "Ironwood",
    "Juniper",
    "Keystone",
    "Lakeside",
    "Lantern",
    "Laurel",
    "Lighthouse",
    "Linden",
    "Magnolia",
    "Maple",
    "Meadow",
    "Meridian",
    "Mistral",
    "Nimbus",
    "Oakridge",
    "Onyx",
    "Orchid",
    "Pebble",
    "Pinnacle",
    "Prairie",
    "Quartz",
    "Raven",
    "Redwood",
    "Ridgeline",
    "Riverbend",
    "Saffron",
    "Sequoia",
    "Sierra",
    "Silverline",
    "Sparrow",
    "Starling",
    "Stonebridge",
    "Summit",
    "Sunrise",
    "Tamarack",
    "Thistle",
    "Tidewater",
    "Topaz",
    "Trillium",
    "Valley",
    "Vista",
    "Willow",
    "Zephyr",
)
AGENT_NAMES = (
    "Ava",
    "Sam",
    "Max",
    "Mia",
    "Leo",
    "Nora",
    "Eli",
    "Zoe",
    "Omar",
    "Lena",
    "Ravi",
    "Ines",
    "Theo",
    "Maya",
    "Jonah",
    "Priya",
    "Luca",
    "Hana",
    "Diego",
    "Ruth",
    "Kofi",
    "Elena",
    "Yusuf",
    "Clara",
    "Tariq",
    "Ingrid",
    "Mateo",
    "Amara",
)
TRAITS = ("warm", "calm", "brief", "friendly", "precise", "patient", "cheerful", "reassuring", "polite", "clear")
GREETINGS = (
    "Thanks for calling {brand}, this is {name}. How can I help you today?",
    "Hello, you've reached {brand}. I'm {name}. What can I do for you?",
    "Hi, this is {name} from {brand}. How can I help?",
)


@dataclass(frozen=True)
class Brand:
    profile: Profile
    sector: Sector
    agent: str
    team: str | None  # escalation description, None when the brand has no escalation
    known: dict[str, Value]  # fact intent name -> its value in this brand's profile
    unknown: tuple[FactIntent, ...]  # sector intents this profile has no fact for
    split: str
    lookup: SlotIntent | None = None  # the record its lookup tool finds, when the profile declares tools

    @property
    def name(self) -> str:
        return self.profile.brand


def fact_intents(sector: Sector) -> tuple[FactIntent, ...]:
    return sector.facts + (SUPPORT_LINE,)


def brand_names(sector: Sector | SectorPool) -> list[str]:
    """Every brand name a sector (a templated one or a composed pool) can have: stem x suffix, in a fixed order."""
    return [f"{stem} {suffix}" for stem in STEMS for suffix in sector.suffixes]


def profile_data(
    rng: random.Random,
    brand: str,
    sector: str,
    agent: str,
    roles: tuple[str, ...],
    facts: list[str],
    policies: tuple[str, ...],
    team: str | None,
    at: str = "of",
) -> dict:
    """A brand's profile fields: persona ("You are Ava, <a role> <at> <brand>"), greeting, facts, some policies, escalation."""
    traits = rng.sample(TRAITS, 2)
    data = {
        "id": re.sub(r"[^a-z0-9]+", "-", brand.lower()).strip("-")[:64],
        "brand": brand,
        "sector": sector,
        "persona": f"You are {agent}, {rng.choice(roles)} {at} {brand}. You are {traits[0]} and {traits[1]}.",
        "greeting": rng.choice(GREETINGS).format(brand=brand, name=agent),
        "facts": facts,
        "policies": rng.sample(policies, rng.randint(1, len(policies))),
    }
    if team:
        data["escalation"] = {"target": f"+1800555{rng.randrange(10000):04d}", "description": team}
    return data


def make_brand(rng: random.Random, sector: Sector, brand: str, split: str) -> Brand:
    """A brand with 4-6 of its sector's facts (values drawn here), policies and an escalation target."""
    agent = rng.choice(AGENT_NAMES)
    intents = list(fact_intents(sector))
    rng.shuffle(intents)
    keep = rng.randint(4, 6)
    known = {i.name: i.value(rng) for i in intents[:keep]}
    facts = [tidy(i.fact.format(v=known[i.name].written)) for i in intents[:keep]]
    facts[0] = facts[0][:1].upper() + facts[0][1:]
    team = rng.choice(sector.teams).format(brand=brand) if rng.random() < 0.9 else None
    data = profile_data(rng, brand, sector.name, agent, sector.roles, facts, sector.policies, team)
    profile = parse_profile(data, brand)
    return Brand(profile, sector, agent, team, known, tuple(intents[keep:]), split)
