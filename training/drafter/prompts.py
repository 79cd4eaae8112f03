"""Broad conversational prompts for drafter stage 1: varied general questions and instructions, deterministic."""

from __future__ import annotations

import random

TOPICS = [
    "photosynthesis",
    "black holes",
    "the water cycle",
    "compound interest",
    "the French Revolution",
    "sourdough bread",
    "houseplants",
    "marathon training",
    "learning a new language",
    "climate change",
    "the human heart",
    "electric cars",
    "volcanoes",
    "jazz music",
    "the Roman Empire",
    "vaccines",
    "budgeting",
    "job interviews",
    "coffee brewing",
    "sleep",
    "meditation",
    "recycling",
    "honeybees",
    "the Moon landing",
    "chess",
    "public speaking",
    "solar panels",
    "the stock market",
    "dinosaurs",
    "time management",
    "camping",
    "the immune system",
    "renting an apartment",
    "first aid for burns",
    "password security",
    "the Great Wall of China",
    "rainbows",
    "tea",
    "dog training",
    "origami",
    "the Olympic Games",
    "earthquakes",
    "gardening tomatoes",
    "credit scores",
    "the printing press",
    "ocean tides",
    "vitamins",
    "mountain hiking",
    "email etiquette",
    "the Renaissance",
    "recycled plastic",
    "airport security",
    "online shopping",
    "home insurance",
    "bicycles",
    "the periodic table",
    "cloud computing",
    "pizza dough",
    "birdwatching",
    "saving for retirement",
    "the Amazon rainforest",
    "making friends as an adult",
    "moving to a new city",
    "penguins",
    "the speed of light",
    "yoga",
    "writing a resume",
    "hurricanes",
    "the Internet",
    "composting",
    "train travel",
    "bread baking",
]

TEMPLATES = [
    "Explain {t} in simple terms.",
    "What are three interesting facts about {t}?",
    "Give me a short introduction to {t}.",
    "Why does {t} matter?",
    "What is a common misconception about {t}?",
    "How would a beginner get started with {t}?",
    "Summarize what you know about {t} in two sentences.",
    "Explain {t} to a ten-year-old.",
    "What are the pros and cons of {t}?",
    "Tell me something surprising about {t}.",
    "What questions should I ask an expert on {t}?",
    "Write a short paragraph about {t}.",
]

STANDALONE = [
    "What is the capital of Australia?",
    "How many days are in a leap year?",
    "What is 15 percent of 80?",
    "Can you help me write a polite email to reschedule a meeting?",
    "What should I pack for a weekend trip?",
    "How do I boil an egg?",
    "What is the difference between weather and climate?",
    "Suggest a name for a small bakery.",
    "How do I politely decline an invitation?",
    "What time zone is London in?",
    "Write a haiku about autumn.",
    "Tell me a short joke.",
    "How can I stay focused while working from home?",
    "What is a good way to start a conversation?",
    "Convert 10 miles to kilometers.",
    "What does a project manager do?",
    "How do I reset a forgotten password?",
    "Give me a simple dinner recipe.",
    "What is the tallest mountain in the world?",
    "How should I prepare for a phone interview?",
    "What is the boiling point of water?",
    "Can you explain what an API is?",
    "How do I make my phone battery last longer?",
    "What is the best way to learn to type faster?",
    "Write a thank-you note to a colleague.",
    "How long should I steep green tea?",
    "What are some tips for a long flight?",
    "How do I cancel a subscription I no longer use?",
    "What is a balanced breakfast?",
    "Why do leaves change color in the fall?",
]

SYSTEMS = [
    None,  # the chat template's default system prompt
    "You are a friendly assistant. Keep answers short and clear.",
    "You are a helpful assistant on a phone call: answer in at most two short sentences.",
    "You are a knowledgeable and patient tutor.",
]


def broad_prompts(n: int = 400, seed: int = 0) -> list[list[dict]]:
    """Up to `n` single-turn chats (894 exist): topic x template questions and standalone ones, seeded order,
    rotating system prompts."""
    rng = random.Random(seed)
    questions = STANDALONE + [tpl.format(t=topic) for topic in TOPICS for tpl in TEMPLATES]
    rng.shuffle(questions)
    chats = []
    for i, question in enumerate(questions[:n]):
        system = SYSTEMS[i % len(SYSTEMS)]
        head = [{"role": "system", "content": system}] if system else []
        chats.append(head + [{"role": "user", "content": question}])
    return chats
