"""Sector tables: bank, insurance, telecom, utilities, clinic, fitness club."""

from __future__ import annotations

from training.data.catalog import FactIntent as F
from training.data.catalog import Sector
from training.data.catalog import SlotIntent as S
from training.data.values import choice, count, hours, money, percent

WEEKDAYS = ("Monday to Friday", "weekdays", "Monday to Saturday")

BANK = Sector(
    "bank", ("Bank", "Savings", "Credit Union"), ("the phone assistant", "the banking assistant"),
    ("a {brand} card services agent", "a personal banker", "the {brand} fraud team"),
    ("Never ask for a full card number, PIN or password.", "Do not give investment advice."),
    (
        F("withdrawal_limit", "The daily cash withdrawal limit is {v}.", money(300, 1500, 100), "the daily withdrawal limit",
          ("How much cash can I take out in a day?", "What's my ATM limit?"), ("The daily cash withdrawal limit is {v}.",)),
        F("intl_transfer", "International transfers cost {v} each.", money(5, 40, 5), "the international transfer fee",
          ("How much is it to send money abroad?", "What's the fee for an international transfer?"),
          ("International transfers cost {v} each.",)),
        F("new_card", "A replacement card arrives within {v}.", count(3, 10, "business days"), "how long a new card takes",
          ("I lost my card, how long until I get a new one?", "When will my replacement card arrive?"),
          ("A replacement card arrives within {v}.",)),
        F("branch_hours", "Branches are open {v}.", hours((8, 9, 10), (16, 17, 18), WEEKDAYS), "the branch hours",
          ("When are your branches open?", "What time does the branch close?"), ("Our branches are open {v}.",)),
        F("overdraft_fee", "An overdraft costs {v}.", money(10, 35, 5), "the overdraft fee",
          ("What happens if I go overdrawn?", "How much is the overdraft fee?"), ("An overdraft costs {v}.",)),
        F("savings_rate", "The savings account pays {v} interest a year.", percent(1, 5, 1), "the savings interest rate",
          ("What interest does the savings account pay?", "What's your savings rate?"),
          ("Our savings account pays {v} interest a year.",)),
    ),
    (S("dispute_charge", ("There's a charge on my account I don't recognize.", "I want to dispute a payment."),
       "account number", "digits", None, "look into that charge"),),
)

INSURANCE = Sector(
    "insurance", ("Insurance", "Mutual", "Assurance"), ("the claims assistant", "the policy assistant"),
    ("a licensed {brand} agent", "a claims adjuster", "the {brand} policy team"),
    ("Ask for the policy number before discussing a specific policy.", "Never promise that a claim will be approved."),
    (
        F("claim_time", "Claims are decided within {v}.", count(5, 30, "business days"), "how long a claim takes",
          ("How long does a claim take?", "When will I hear back about my claim?"), ("Claims are decided within {v}.",)),
        F("deductible", "The standard deductible is {v}.", money(250, 1000, 250), "the standard deductible",
          ("What's my deductible?", "How much do I pay before insurance kicks in?"),
          ("The standard deductible is {v}.",)),
        F("grace_period", "Late premiums have a grace period of {v}.", count(10, 31, "days"), "the grace period",
          ("What if I pay my premium late?", "Is there a grace period?"),
          ("There is a grace period of {v} for late premiums.",)),
        F("multi_discount", "Bundling home and car insurance saves {v}.", percent(5, 25), "the bundle discount",
          ("Do I save if I insure my home and car together?",), ("Bundling home and car insurance saves {v}.",)),
        F("roadside", "Roadside assistance is included for {v} a year.", choice(("three call-outs", "four call-outs", "five call-outs")),
          "roadside assistance", ("Is roadside assistance included?",), ("Roadside assistance is included for {v} a year.",)),
        F("insurance_hours", "Agents are available {v}.", hours((8, 9), (17, 18, 20), WEEKDAYS), "agent hours",
          ("When can I talk to an agent?", "What hours are you open?"), ("Agents are available {v}.",)),
    ),
    (S("file_claim", ("I need to file a claim.", "I had an accident and want to make a claim."),
       "policy number", "prefixed", "claim_time", "open that claim"),),
)

TELECOM = Sector(
    "telecom", ("Mobile", "Telecom", "Wireless", "Connect"), ("the support assistant", "the phone agent"),
    ("a {brand} technical support agent", "the {brand} billing team", "a retention specialist"),
    ("Ask for the account number before discussing a specific account.",),
    (
        F("unlimited_price", "The unlimited plan costs {v} a month.", money(25, 70, 5), "the unlimited plan price",
          ("How much is the unlimited plan?", "What does unlimited data cost?"), ("The unlimited plan costs {v} a month.",)),
        F("roaming", "Roaming in Europe costs {v} a day.", money(3, 12, 1), "the roaming charge",
          ("I'm going to Europe, how much is roaming?", "What does it cost to use my phone abroad?"),
          ("Roaming in Europe costs {v} a day.",)),
        F("contract", "Contracts can be cancelled with {v} notice.", count(14, 60, "days"), "the cancellation notice",
          ("How do I cancel my contract?", "How much notice do I need to give to cancel?"),
          ("You can cancel with {v} notice.",)),
        F("sim_swap", "A replacement SIM card costs {v}.", money(5, 15, 5), "the replacement SIM price",
          ("My SIM is broken, how much for a new one?",), ("A replacement SIM card costs {v}.",)),
        F("data_topup", "An extra 10 gigabyte data pack costs {v}.", money(5, 20, 5), "the data top-up price",
          ("My data is all used up, how much is a top-up?",), ("An extra ten gigabyte data pack costs {v}.",)),
        F("shop_hours", "Shops are open {v}.", hours((9, 10), (18, 19, 20), WEEKDAYS), "the shop hours",
          ("When are your shops open?",), ("Our shops are open {v}.",)),
    ),
    (S("bill_question", ("I have a question about my bill.", "My bill is higher than usual."),
       "account number", "digits", None, "go through that bill"),),
)

UTILITIES = Sector(
    "utilities", ("Energy", "Power", "Water", "Utilities"), ("the customer service assistant", "the phone agent"),
    ("a {brand} billing specialist", "the {brand} emergency team", "a field service coordinator"),
    (
        "Ask for the customer number before discussing a specific account.",
        "For a gas smell, tell the caller to leave and call the emergency line.",
    ),
    (
        F("late_fee", "A late payment fee of {v} applies after the due date.", money(5, 25, 5), "the late payment fee",
          ("What happens if I pay my bill late?", "Is there a late fee?"), ("A late payment fee of {v} applies after the due date.",)),
        F("emergency_line", "The emergency line is open {v}.", choice(("day and night", "around the clock", "twenty-four hours a day")),
          "when the emergency line is open", ("Is the emergency line always open?",), ("The emergency line is open {v}.",)),
        F("meter_reading", "Meter readings can be submitted until the {v} of each month.",
          choice(("fifth", "tenth", "fifteenth", "twentieth")), "the meter reading deadline",
          ("When do I need to send my meter reading?",), ("You can submit meter readings until the {v} of each month.",)),
        F("move_notice", "Moving customers should give {v} notice.", count(3, 14, "days"), "the notice for moving",
          ("I'm moving house, how much notice do you need?",), ("Please give us {v} notice before you move.",)),
        F("green_tariff", "The green tariff costs {v} more per month.", money(2, 10, 1), "the green tariff",
          ("How much extra is the green energy plan?",), ("The green tariff costs {v} more per month.",)),
        F("office_hours", "The service desk is open {v}.", hours((8, 9), (17, 18, 19), WEEKDAYS), "the service desk hours",
          ("When can I call about my bill?", "What are your office hours?"), ("Our service desk is open {v}.",)),
    ),
    (S("payment_plan", ("I can't pay my whole bill this month.", "Can I set up a payment plan?"),
       "customer number", "digits", "late_fee", "set up that payment plan"),),
)

CLINIC = Sector(
    "clinic", ("Clinic", "Health", "Medical Center", "Family Practice"), ("the reception assistant", "the booking assistant"),
    ("the {brand} nurse line", "a member of the front desk team", "the practice manager"),
    ("Never give medical advice; for an emergency tell the caller to call emergency services.",
     "Ask for the patient number before discussing a specific appointment."),
    (
        F("visit_fee", "A standard consultation costs {v} without insurance.", money(60, 180, 10), "the consultation price",
          ("How much is a visit without insurance?", "What does an appointment cost?"),
          ("A standard consultation costs {v} without insurance.",)),
        F("cancel_notice", "Appointments must be cancelled {v} ahead or a fee applies.", count(12, 48, "hours", 12),
          "the cancellation notice", ("How late can I cancel my appointment?",),
          ("Please cancel at least {v} ahead, or a fee applies.",)),
        F("clinic_hours", "The clinic is open {v}.", hours((7, 8, 9), (17, 18, 19, 20), WEEKDAYS), "the opening hours",
          ("When are you open?", "What time does the clinic close?"), ("The clinic is open {v}.",)),
        F("walk_in", "Walk-in hours are {v}.", hours((8, 9, 10), (11, 12)), "the walk-in hours",
          ("Can I just walk in?", "Do you take walk-ins?"), ("Walk-in hours are {v}.",)),
        F("lab_results", "Lab results are ready within {v}.", count(2, 7, "business days"), "when lab results are ready",
          ("When will my blood test results be back?",), ("Lab results are ready within {v}.",)),
        F("doctor_name", "The lead physician is {v}.", choice(("Dr. Patel", "Dr. Okafor", "Dr. Lindqvist", "Dr. Moreau", "Dr. Tanaka")),
          "the lead physician", ("Who is the main doctor there?",), ("Our lead physician is {v}.",)),
    ),
    (S("reschedule", ("I need to move my appointment.", "Can I reschedule my visit?"),
       "patient number", "digits", "cancel_notice", "move that appointment"),),
)

FITNESS = Sector(
    "fitness club", ("Fitness", "Gym", "Athletic Club"), ("the membership assistant", "the front desk assistant"),
    ("a {brand} membership advisor", "the club manager"),
    ("Ask for the membership number before discussing a specific membership.",),
    (
        F("monthly_fee", "Membership costs {v} a month.", money(20, 80, 5), "the monthly membership fee",
          ("How much is a membership?", "What's the monthly fee?"), ("Membership costs {v} a month.",)),
        F("joining_fee", "The one-time joining fee is {v}.", money(10, 60, 10), "the joining fee",
          ("Is there a joining fee?",), ("The one-time joining fee is {v}.",)),
        F("gym_hours", "The club is open {v}.", hours((5, 6), (21, 22, 23), ("weekdays", "every day")), "the opening hours",
          ("What time do you open in the morning?", "When is the gym open?"), ("The club is open {v}.",)),
        F("guest_pass", "A guest day pass costs {v}.", money(5, 20, 5), "the guest pass price",
          ("Can I bring a friend, and what does it cost?",), ("A guest day pass costs {v}.",)),
        F("freeze", "Memberships can be frozen for up to {v} a year.", count(1, 3, "months"), "membership freezes",
          ("Can I pause my membership?",), ("You can freeze your membership for up to {v} a year.",)),
        F("class_booking", "Classes can be booked {v} in advance.", count(2, 7, "days"), "how far ahead classes open",
          ("How early can I book a class?",), ("Classes can be booked {v} in advance.",)),
    ),
    (S("cancel_membership", ("I want to cancel my membership.", "How do I stop my membership?"),
       "membership number", "digits", "freeze", "process that request"),),
)

SERVICE_SECTORS = (BANK, INSURANCE, TELECOM, UTILITIES, CLINIC, FITNESS)
