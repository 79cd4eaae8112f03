"""Sector tables added for variety (training only): pharmacy, veterinary, streaming, self storage, transit, broadband."""

from __future__ import annotations

from training.data.catalog import FactIntent as F
from training.data.catalog import Sector
from training.data.catalog import SlotIntent as S
from training.data.values import choice, clock, count, hours, money, percent

DAYS = ("every day", "Monday to Friday", "Monday to Saturday", "weekdays")

PHARMACY = Sector(
    "pharmacy", ("Pharmacy", "Chemists", "Drugstore", "Apothecary"), ("the pharmacy assistant", "the phone assistant"),
    ("the {brand} pharmacist on duty", "a pharmacy technician", "the {brand} prescriptions team"),
    ("Never give dosage or medical advice; the pharmacist answers those.",
     "Ask for the prescription number before discussing a specific prescription."),
    (
        F("refill_ready", "Prescription refills are ready within {v}.", count(1, 3, "business days"), "when a refill is ready",
          ("When will my refill be ready?", "How long does a refill take?", "If I order a refill today, when can I pick it up?"),
          ("Refills are ready within {v}.", "Your refill will be ready within {v}.")),
        F("pharmacy_hours", "The pharmacy counter is open {v}.", hours((7, 8, 9), (18, 20, 22), DAYS), "the pharmacy hours",
          ("When is the pharmacy counter open?", "How late can I pick up a prescription?"),
          ("The pharmacy counter is open {v}.",)),
        F("flu_shot", "A flu shot costs {v} without insurance.", money(20, 45, 5), "the flu shot price",
          ("How much is a flu shot?", "Do you do flu jabs, and what do they cost?"),
          ("A flu shot costs {v} without insurance.",)),
        F("rx_delivery", "Prescriptions are delivered for {v}.", money(3, 10, 1), "the prescription delivery fee",
          ("Can you deliver my medicine?", "What do you charge to deliver a prescription?"),
          ("We deliver prescriptions for {v}.",)),
        F("transfer_rx", "Transferring a prescription from another pharmacy takes {v}.", count(1, 4, "days"),
          "how long a prescription transfer takes", ("I want to move my prescription to you, how long does that take?",),
          ("Moving a prescription to us takes {v}.",)),
        F("senior_discount", "Customers over sixty-five get {v} off on Tuesdays.", percent(5, 15), "the senior discount",
          ("Is there a discount for seniors?", "Do pensioners get anything off?"),
          ("Customers over sixty-five get {v} off on Tuesdays.",)),
    ),
    (
        S("refill_status", ("Is my prescription ready?", "I want to check on my refill."),
          "prescription number", "digits", "refill_ready", "check that prescription"),
        S("insurance_rejected", ("My insurance didn't cover my prescription.", "Why was I charged full price?"),
          "prescription number", "digits", None, "sort out that claim"),
    ),
)

VET = Sector(
    "veterinary", ("Animal Hospital", "Vets", "Pet Clinic"), ("the reception assistant", "the phone assistant"),
    ("the {brand} duty vet", "a veterinary nurse", "the {brand} front desk team"),
    ("Never diagnose an animal over the phone.", "For an animal in danger, tell the caller to come in at once."),
    (
        F("checkup_price", "A routine checkup costs {v}.", money(40, 90, 5), "the checkup price",
          ("How much is a checkup for my dog?", "What do you charge for a routine visit?"),
          ("A routine checkup costs {v}.",)),
        F("vaccine_price", "A yearly vaccination costs {v}.", money(30, 80, 5), "the vaccination price",
          ("How much are my cat's shots?", "What does a vaccination cost?"), ("A yearly vaccination costs {v}.",)),
        F("vet_hours", "The clinic is open {v}.", hours((8, 9), (18, 19), DAYS), "the clinic hours",
          ("When are you open?", "Can I bring my dog in on Saturday?"), ("We're open {v}.",)),
        F("emergency_fee", "Out-of-hours emergency visits cost {v}.", money(100, 250, 25), "the emergency visit fee",
          ("What if my pet gets sick at night?", "How much is an emergency visit?"),
          ("An out-of-hours emergency visit costs {v}.",)),
        F("boarding", "Pet boarding costs {v} a night.", money(20, 50, 5), "the boarding price",
          ("Can you look after my cat while I'm away?", "How much is boarding?"), ("Boarding costs {v} a night.",)),
        F("microchip", "Microchipping costs {v}.", money(15, 40, 5), "the microchip price",
          ("Do you microchip puppies?", "How much to get my dog chipped?"), ("Microchipping costs {v}.",)),
    ),
    (
        S("pet_appointment", ("I need to change my pet's appointment.", "Can I move Bella's visit to another day?"),
          "client number", "digits", None, "move that appointment"),
        S("test_results", ("Are my dog's test results back?", "I'm calling about my cat's blood test."),
          "client number", "digits", None, "pass that to the vet"),
    ),
)

STREAMING = Sector(
    "streaming", ("TV", "Stream", "Plus", "Play"), ("the help assistant", "the account assistant"),
    ("a {brand} account specialist", "the {brand} billing team"),
    ("Ask for the account number before discussing a specific account.", "Do not discuss other services' catalogs."),
    (
        F("basic_price", "The basic plan costs {v} a month.", money(5, 12, 1, cents=True), "the basic plan price",
          ("How much is the cheapest plan?", "What does the basic plan cost?"), ("The basic plan costs {v} a month.",)),
        F("premium_price", "The premium plan costs {v} a month.", money(13, 25, 1, cents=True), "the premium plan price",
          ("How much is premium?", "What's the price of the top plan?"), ("The premium plan costs {v} a month.",)),
        F("screens", "The premium plan streams on {v} at once.", choice(("two screens", "three screens", "four screens")),
          "how many screens premium allows", ("How many people can watch at the same time?", "How many screens do I get?"),
          ("Premium streams on {v} at once.",)),
        F("free_trial", "New members get a free trial of {v}.", count(7, 30, "days"), "the free trial",
          ("Is there a free trial?", "Can I try it before I pay?"), ("New members get a free trial of {v}.",)),
        F("downloads", "Up to {v} can be downloaded for offline viewing.", count(10, 100, "titles", 10), "the download limit",
          ("Can I download shows to watch on the plane?", "How many downloads can I have?"),
          ("You can download up to {v} to watch offline.",)),
        F("refund_window", "Charges can be refunded within {v} if nothing was watched.", count(7, 14, "days"),
          "the refund window", ("Can I get my money back for this month?", "I was charged by mistake, can I get a refund?"),
          ("We refund a charge within {v} if nothing was watched.",)),
    ),
    (
        S("cancel_subscription", ("I want to cancel my subscription.", "How do I stop being charged?"),
          "account number", "digits", "refund_window", "close that subscription"),
        S("cant_log_in", ("I can't log in to my account.", "My password doesn't work."),
          "account number", "digits", None, "reset that login"),
    ),
)

STORAGE = Sector(
    "self storage", ("Storage", "Self Storage", "Lockers"), ("the storage assistant", "the phone agent"),
    ("a {brand} site manager", "the {brand} rentals team"),
    ("Ask for the unit number before discussing a specific unit.", "Never say what is stored in a customer's unit."),
    (
        F("small_unit", "A small unit costs {v} a month.", money(40, 90, 5), "the small unit price",
          ("How much is a small unit?", "What does the smallest locker cost?"), ("A small unit costs {v} a month.",)),
        F("large_unit", "A large unit costs {v} a month.", money(120, 260, 10), "the large unit price",
          ("How much is a big unit?", "I need space for a whole flat, what does that cost?"),
          ("A large unit costs {v} a month.",)),
        F("access_hours", "Units can be accessed {v}.", hours((5, 6, 7), (21, 22, 23), DAYS), "the access hours",
          ("When can I get to my unit?", "Can I drop things off in the evening?"), ("You can access your unit {v}.",)),
        F("min_term", "The minimum rental is {v}.", count(1, 3, "months"), "the minimum rental period",
          ("What's the shortest I can rent for?", "Is there a minimum term?"), ("The minimum rental is {v}.",)),
        F("move_out_notice", "Customers should give {v} notice before moving out.", count(7, 30, "days"), "the move-out notice",
          ("How much notice do I need to give to leave?",), ("Please give us {v} notice before you move out.",)),
        F("office_open", "The site office opens at {v}.", clock((7, 8, 9, 10)), "when the site office opens",
          ("What time does the office open?",), ("The site office opens at {v}.",)),
    ),
    (
        S("unit_access", ("My gate code doesn't work.", "I can't get into my unit."),
          "unit number", "letters_digits", "access_hours", "fix that access"),
        S("billing_storage", ("I was charged twice for my unit.",), "unit number", "letters_digits", None, "check that charge"),
    ),
)

TRANSIT = Sector(
    "public transit", ("Transit", "Metro", "Rail", "Buses"), ("the travel information assistant", "the phone agent"),
    ("a {brand} customer relations officer", "the {brand} lost property office"),
    ("Do not promise that a delayed service will run.", "Ask for the pass number before discussing a specific pass."),
    (
        F("single_fare", "A single fare costs {v}.", money(2, 4, 1, cents=True), "the single fare",
          ("How much is one ticket?", "What does a single ride cost?"), ("A single fare costs {v}.",)),
        F("monthly_pass", "A monthly pass costs {v}.", money(60, 140, 5), "the monthly pass price",
          ("How much is a monthly pass?", "What's the price for a month of travel?"), ("A monthly pass costs {v}.",)),
        F("first_train", "The first service leaves at {v}.", clock((4, 5, 6)), "the first departure",
          ("What time is the first train?", "How early do the buses start?"), ("The first service leaves at {v}.",)),
        F("last_train", "The last service leaves at {v}.", clock((22, 23)), "the last departure",
          ("When is the last train?", "How late do the buses run?"), ("The last service leaves at {v}.",)),
        F("child_fare", "Children under {v} travel free.", choice(("five", "eleven", "twelve")), "the child fare",
          ("Do kids need a ticket?", "How old before my son has to pay?"), ("Children under {v} travel free.",)),
        F("delay_refund", "Delays of over {v} can be refunded.", count(15, 60, "minutes", 15), "the delay refund",
          ("My train was late, can I get my money back?", "Do you refund delays?"),
          ("We refund delays of over {v}.",)),
    ),
    (
        S("lost_pass", ("I lost my travel pass.", "My pass was stolen."), "pass number", "digits", None, "block that pass"),
        S("pass_refund", ("I want a refund on my monthly pass.", "Can I get money back on my pass?"),
          "pass number", "digits", "delay_refund", "process that refund"),
    ),
)

BROADBAND = Sector(
    "broadband", ("Broadband", "Fiber", "Net"), ("the support assistant", "the sales assistant"),
    ("a {brand} network engineer", "the {brand} accounts team", "a {brand} installer"),
    ("Ask for the account number before discussing a specific account.", "Do not promise exact speeds."),
    (
        F("fiber_price", "Fiber internet costs {v} a month.", money(25, 60, 5), "the fiber price",
          ("How much is your fiber internet?", "What does broadband cost a month?"), ("Fiber internet costs {v} a month.",)),
        F("install_fee", "Installation costs {v}.", money(10, 90, 10), "the installation fee",
          ("Is there a setup fee?", "How much to get it installed?"), ("Installation costs {v}.",)),
        F("install_wait", "An engineer can install within {v}.", count(3, 14, "days"), "how soon installation happens",
          ("How soon can you connect me?", "When can an engineer come?"), ("An engineer can install it within {v}.",)),
        F("router_fee", "A replacement router costs {v}.", money(20, 60, 5), "the replacement router price",
          ("My router broke, how much is a new one?",), ("A replacement router costs {v}.",)),
        F("min_contract", "Contracts run for {v}.", count(12, 24, "months", 6), "the contract length",
          ("How long is the contract?", "Am I locked in for long?"), ("Contracts run for {v}.",)),
        F("outage_credit", "Outages longer than {v} are credited on the next bill.", count(12, 48, "hours", 12),
          "the outage credit", ("My internet was down all day, do I get anything back?",),
          ("Outages longer than {v} are credited on your next bill.",)),
    ),
    (
        S("internet_down", ("My internet isn't working.", "The connection keeps dropping."),
          "account number", "digits", "outage_credit", "send an engineer"),
        S("move_home", ("I'm moving and want to take my internet with me.",), "account number", "digits", "install_wait",
          "move that service"),
    ),
)

EVERYDAY_SECTORS = (PHARMACY, VET, STREAMING, STORAGE, TRANSIT, BROADBAND)
