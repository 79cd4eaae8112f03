"""Requests every sector gets: off-topic questions, asking for a person, small talk, the support number."""

from __future__ import annotations

from training.data.catalog import FactIntent
from training.data.values import phone

SUPPORT_LINE = FactIntent(
    "support_line",
    "The support line is {v}.",
    phone(),
    "the support phone number",
    ("What number can I call for support?", "Can I have your phone number?", "What's the number to call you back?"),
    ("You can reach us at {v}.", "Our support line is {v}."),
)

OFF_TOPIC = (
    "What's the weather going to be like tomorrow?",
    "Can you recommend a good restaurant nearby?",
    "Who won the football game last night?",
    "What's the capital of Australia?",
    "Can you help me with my taxes?",
    "Do you know a good plumber?",
    "Which stocks should I buy this year?",
    "What's the meaning of life?",
    "Can you book me a taxi?",
    "What time is it in Tokyo right now?",
    "How do I fix my laptop?",
    "Can you tell me the lottery numbers?",
    "What's a good recipe for lasagna?",
    "Who's the president of France?",
)

DONT_HAVE = (
    "I'm sorry, I don't have that information.",
    "I'm afraid I don't have that information.",
    "Sorry, I don't have that information right now.",
)
OFFER_TRANSFER = (
    "I can transfer you to {team} if you'd like.",
    "Would you like me to transfer you to {team}?",
    "I can connect you with {team}, who can help.",
)
CLOSERS_NO_TEAM = ("Is there anything else I can help with?", "Can I help with anything else?")
ONLY_BRAND = ("I can only help with questions about {brand}.", "Is there anything about {brand} I can help with?")

HUMAN_ASKS = (
    "Can I speak to a real person?",
    "I want to talk to a human.",
    "Agent, please.",
    "Representative!",
    "Get me your manager.",
    "Transfer me to someone who can actually help.",
    "Is there a person I can talk to?",
    "Operator.",
    "I'd rather talk to somebody, please.",
    "Can you put me through to a real agent?",
)
TRANSFER_NOW = (
    "Of course, I'll transfer you to {team} now.",
    "Sure, let me connect you with {team}.",
    "I understand, I'm transferring you to {team} right away.",
)
TRANSFER_OFFER = ("I can transfer you to {team}. Would you like me to do that now?",)
CODE_CONFIRMS = ("Yes.", "Yes, that's right.", "Correct.", "Yep, that's it.")
CONFIRMS = ("Yes, please.", "Yes.", "Yeah, go ahead.", "Please do.")
TRANSFERRING = ("Transferring you to {team} now, please hold.", "Okay, connecting you to {team} now.")
NO_TRANSFER = (
    "I'm sorry, I can't transfer this call, but I'm happy to help with anything about {brand}.",
    "I'm afraid I can't transfer calls, but I can answer your questions about {brand}.",
)

# intent -> (caller lines, agent replies, what the reply must contain: "name" | "brand" | "")
SMALL_TALK: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "how_are_you": (
        ("How are you today?", "Hi, how's it going?", "How are you doing?"),
        ("I'm doing well, thanks for asking. How can I help you today?", "I'm great, thank you. What can I do for you?"),
        "",
    ),
    "agent_name": (
        ("What's your name?", "Who am I speaking with?", "Sorry, what was your name again?"),
        ("I'm {name} from {brand}. How can I help?", "My name is {name}, and I'm here to help with {brand}."),
        "name",
    ),
    "is_robot": (
        ("Am I talking to a robot?", "Are you a real person?", "Is this an automated system?"),
        (
            "I'm {name}, the virtual assistant for {brand}. I can help with most questions or transfer you to a person.",
            "I'm {name}, {brand}'s automated assistant, and I'm happy to help.",
        ),
        "name",
    ),
    "thanks_bye": (
        ("Thanks, that's all.", "Great, thank you, bye.", "Okay, that's everything, thanks."),
        ("You're welcome, thanks for calling {brand}. Have a great day.", "My pleasure. Thanks for calling {brand}, goodbye."),
        "brand",
    ),
    "weather_chat": (
        ("Lovely weather today, isn't it?", "It's so cold out there today."),
        ("It really is. What can I help you with today?", "It sure is. How can I help you today?"),
        "",
    ),
    "hold_on": (
        ("Hold on a second, let me find my glasses.", "One moment please.", "Wait, let me grab a pen."),
        ("Of course, take your time.", "No problem, I'll wait."),
        "",
    ),
    "which_company": (
        ("Who did I call?", "Sorry, which company is this?"),
        ("This is {brand}, and I'm {name}. How can I help?", "You've reached {brand}; I'm {name}."),
        "brand",
    ),
}

REPEAT_ASKS = ("Sorry, could you say that again?", "Can you repeat that?", "Sorry, I didn't catch that.")
REPEAT_LEADS = ("Of course. ", "Sure, ", "No problem. ")
