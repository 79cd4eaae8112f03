"""General-instruction prompts (no brand) for the KL-to-base term that keeps the model a general assistant."""

from __future__ import annotations

import random

COUNTRIES = ("France", "Japan", "Brazil", "Canada", "Kenya", "Italy", "Egypt", "Mexico", "India", "Norway", "Peru", "Spain")
THINGS = ("the ocean", "autumn", "a cat", "the moon", "coffee", "a train journey", "rain", "a lighthouse", "friendship")
CONCEPTS = (
    "photosynthesis",
    "gravity",
    "inflation",
    "a black hole",
    "the water cycle",
    "democracy",
    "a vaccine",
    "an atom",
    "compound interest",
    "evolution",
    "electricity",
    "a rainbow",
    "the internet",
    "recycling",
    "a volcano",
)
SKILLS = (
    "sleep better",
    "learn a new language",
    "save money",
    "stay focused",
    "cook rice",
    "start running",
    "write an email",
    "keep a plant alive",
    "prepare for a job interview",
    "reduce stress",
    "make friends in a new city",
    "study for an exam",
)
FOODS = ("pancakes", "a green salad", "tomato soup", "guacamole", "scrambled eggs", "banana bread", "lemonade", "hummus")
TEMPLATES = (
    "What is the capital of {country}?",
    "What language do people speak in {country}?",
    "Write a short poem about {thing}.",
    "Describe {thing} in two sentences.",
    "Explain {concept} in one sentence.",
    "Explain {concept} to a ten-year-old.",
    "Give me one tip to {skill}.",
    "How can I {skill}?",
    "How do I make {food}?",
    "What do I need to make {food}?",
    "What is {a} plus {b}?",
    "What is {a} times {b}?",
    "Is {a} an even number?",
    "Translate 'good morning' into {language}.",
    "Name three animals that live in {habitat}.",
    "What's the difference between {pair}?",
    "Suggest a name for a {pet}.",
)
LANGUAGES = ("French", "Spanish", "German", "Italian", "Portuguese")
HABITATS = ("the desert", "the ocean", "the Arctic", "the rainforest", "the mountains")
PAIRS = ("weather and climate", "a virus and a bacterium", "a lake and a sea", "speed and velocity", "a fruit and a vegetable")
PETS = ("puppy", "kitten", "goldfish", "parrot", "hamster")


def general_prompts(seed: int, n: int = 200) -> list[str]:
    """`n` distinct general questions, the same for the same seed."""
    rng = random.Random(f"general-{seed}")
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        text = rng.choice(TEMPLATES).format(
            country=rng.choice(COUNTRIES),
            thing=rng.choice(THINGS),
            concept=rng.choice(CONCEPTS),
            skill=rng.choice(SKILLS),
            food=rng.choice(FOODS),
            a=rng.randint(2, 60),
            b=rng.randint(2, 12),
            language=rng.choice(LANGUAGES),
            habitat=rng.choice(HABITATS),
            pair=rng.choice(PAIRS),
            pet=rng.choice(PETS),
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out
