"""Sector tables: airline, hotel, car rental, parcel delivery, grocery delivery, retail."""

from __future__ import annotations

from training.data.catalog import FactIntent as F
from training.data.catalog import Sector
from training.data.catalog import SlotIntent as S
from training.data.values import choice, clock, count, hours, money, percent

WEEK = ("every day", "Monday to Friday", "Monday to Saturday", "seven days a week")

AIRLINE = Sector(
    "airline", ("Air", "Airways", "Airlines"), ("the phone agent", "the reservations assistant"),
    ("a {brand} customer care specialist", "a reservations agent", "the {brand} travel desk"),
    ("Never promise a refund; the refunds team decides.", "Ask for the booking code before discussing a specific booking."),
    (
        F("checked_bag_fee", "A checked bag costs {v}.", money(20, 60, 5), "the checked bag fee",
          ("How much is a checked bag?", "What do you charge to check a bag?", "What's the fee for checking a suitcase?"),
          ("A checked bag costs {v}.", "It's {v} for each checked bag.")),
        F("carry_on", "Carry-on bags can weigh up to {v}.", count(7, 12, "kilograms"), "the carry-on weight limit",
          ("How heavy can my carry-on be?", "What's the weight limit for hand luggage?"),
          ("Your carry-on can weigh up to {v}.", "The carry-on limit is {v}.")),
        F("checkin_open", "Online check-in opens {v} before departure.", count(24, 48, "hours", 24), "when online check-in opens",
          ("When does online check-in open?", "How early can I check in online?"),
          ("Online check-in opens {v} before departure.",)),
        F("change_fee", "Changing a flight costs {v} plus any fare difference.", money(50, 150, 25), "the flight change fee",
          ("How much does it cost to change my flight?", "Is there a fee to change a flight?"),
          ("Changing a flight costs {v} plus any fare difference.",)),
        F("pet_fee", "A small pet in the cabin costs {v} each way.", money(75, 150, 25), "the fee for flying with a pet",
          ("Can I bring my cat on the plane, and how much is it?", "What's the pet fee?"),
          ("A small pet in the cabin costs {v} each way.",)),
        F("airline_hours", "The customer service line is open {v}.", hours((5, 6, 7), (22, 23), WEEK), "your phone line hours",
          ("What hours is your phone line open?", "When can I call you?"),
          ("Our phone line is open {v}.",)),
    ),
    (
        S("change_booking", ("I need to change my flight.", "I want to move my flight to another day."),
          "booking code", "letters_digits", "change_fee", "look at that booking"),
        S("booking_status", ("Can you check my booking?", "I want to know if my reservation went through."),
          "booking code", "letters_digits", None, "check that booking"),
    ),
)

HOTEL = Sector(
    "hotel", ("Hotel", "Inn", "Suites", "Resort"), ("the front desk assistant", "the reservations assistant"),
    ("the {brand} front desk manager", "a reservations specialist", "the {brand} guest services team"),
    ("Ask for the reservation number before discussing a specific stay.", "Never share another guest's details."),
    (
        F("checkin_time", "Check-in starts at {v}.", clock((13, 14, 15, 16)), "the check-in time",
          ("What time is check-in?", "When can I check in?", "How early can I get my room?"),
          ("Check-in starts at {v}.", "You can check in from {v}.")),
        F("checkout_time", "Check-out is at {v}.", clock((10, 11, 12)), "the check-out time",
          ("What time is check-out?", "When do I have to leave the room?"),
          ("Check-out is at {v}.",)),
        F("parking_fee", "Parking costs {v} per night.", money(10, 40, 5), "the parking fee",
          ("How much is parking?", "Do you charge for parking?"),
          ("Parking costs {v} per night.",)),
        F("breakfast", "Breakfast is served {v}.", hours((6, 7), (10, 11)), "the breakfast hours",
          ("When is breakfast?", "What time do you serve breakfast?"),
          ("Breakfast is served {v}.",)),
        F("hotel_cancel", "Reservations can be cancelled for free up to {v} before arrival.", count(24, 72, "hours", 24),
          "the cancellation deadline", ("Until when can I cancel for free?", "What's your cancellation policy?"),
          ("You can cancel for free up to {v} before arrival.",)),
        F("pool_hours", "The pool is open {v}.", hours((6, 7, 8), (20, 21, 22)), "the pool hours",
          ("When is the pool open?", "What are the pool hours?"),
          ("The pool is open {v}.",)),
    ),
    (
        S("modify_stay", ("I'd like to change the dates of my stay.", "I need to add a night to my reservation."),
          "reservation number", "digits", "hotel_cancel", "update that reservation"),
        S("stay_status", ("Can you confirm my reservation?", "I want to make sure my room is booked."),
          "reservation number", "digits", None, "confirm that reservation"),
    ),
)

CAR_RENTAL = Sector(
    "car rental", ("Car Rental", "Rent-a-Car", "Auto Rentals"), ("the rental desk assistant", "the phone agent"),
    ("a {brand} rental agent", "the {brand} roadside team", "a branch manager"),
    ("Ask for the rental agreement number before discussing a specific rental.",),
    (
        F("min_age", "Drivers must be at least {v} old.", count(21, 25, "years"), "the minimum driver age",
          ("How old do I have to be to rent a car?", "What's the minimum age to rent?"),
          ("Drivers must be at least {v} old.",)),
        F("deposit", "A security deposit of {v} is held on the card.", money(150, 500, 50), "the security deposit",
          ("How much is the deposit?", "Do you hold money on my card?"),
          ("We hold a security deposit of {v} on your card.",)),
        F("extra_driver", "An additional driver costs {v} per day.", money(8, 20, 1), "the additional driver fee",
          ("Can my wife drive too, and what does it cost?", "How much is an extra driver?"),
          ("An additional driver costs {v} per day.",)),
        F("late_return", "Returning a car late costs {v} per hour.", money(10, 30, 5), "the late return fee",
          ("What happens if I bring the car back late?", "Is there a late return fee?"),
          ("A late return costs {v} per hour.",)),
        F("fuel_policy", "Cars must be returned with a full tank or a refuelling charge of {v} applies.", money(40, 90, 10),
          "the fuel policy", ("Do I need to fill up the tank before returning?", "What's your fuel policy?"),
          ("Please return the car with a full tank, or a refuelling charge of {v} applies.",)),
        F("counter_hours", "Rental counters are open {v}.", hours((6, 7, 8), (20, 22, 23), WEEK), "the counter hours",
          ("When is the rental counter open?", "What time can I pick up the car?"),
          ("Our counters are open {v}.",)),
    ),
    (S("extend_rental", ("I want to keep the car two more days.", "Can I extend my rental?"),
       "rental agreement number", "prefixed", "late_return", "extend that rental"),),
)

PARCEL = Sector(
    "parcel delivery", ("Express", "Parcel", "Couriers", "Logistics"), ("the delivery assistant", "the phone agent"),
    ("a {brand} delivery specialist", "the {brand} claims team", "a depot supervisor"),
    ("Ask for the tracking number before discussing a specific parcel.",),
    (
        F("redelivery", "A missed parcel is redelivered {v} later at no cost.", count(1, 3, "business days"),
          "when a missed parcel comes back", ("I missed my delivery, when will you try again?", "When is the redelivery?"),
          ("We try again {v} later at no cost.",)),
        F("hold_days", "Parcels wait at the depot for {v} before going back to the sender.", count(5, 14, "days"),
          "how long a parcel waits at the depot", ("How long will you keep my parcel at the depot?",),
          ("Parcels wait at the depot for {v} before going back to the sender.",)),
        F("max_weight", "Parcels can weigh up to {v}.", count(20, 40, "kilograms", 5), "the parcel weight limit",
          ("What's the heaviest parcel you take?", "Is there a weight limit?"),
          ("Parcels can weigh up to {v}.",)),
        F("express_fee", "Next-day express delivery costs {v}.", money(9, 25, 1), "the express delivery price",
          ("How much is next-day delivery?", "What does express shipping cost?"),
          ("Next-day express delivery costs {v}.",)),
        F("claim_window", "Damage claims must be filed within {v} of delivery.", count(7, 30, "days"), "the damage claim deadline",
          ("How long do I have to report a damaged parcel?",), ("Please file a damage claim within {v} of delivery.",)),
        F("depot_hours", "Depots are open {v}.", hours((7, 8, 9), (18, 19, 20), WEEK), "the depot hours",
          ("When can I pick up at the depot?", "What are the depot's opening hours?"),
          ("Our depots are open {v}.",)),
    ),
    (S("track_parcel", ("Where is my parcel?", "My package hasn't arrived yet."),
       "tracking number", "prefixed", None, "trace that parcel"),),
)

GROCERY = Sector(
    "grocery delivery", ("Market", "Grocer", "Cart", "Pantry"), ("the voice assistant", "the order assistant"),
    ("a {brand} support teammate", "the {brand} order desk"),
    ("Ask for the order number before discussing a specific order.",),
    (
        F("free_delivery", "Delivery is free on orders over {v}.", money(35, 75, 5), "the free delivery minimum",
          ("How much do I need to spend for free delivery?", "When is delivery free?"),
          ("Delivery is free on orders over {v}.",)),
        F("delivery_fee", "Below the free delivery minimum, delivery costs {v}.", money(3, 8, 1, cents=True), "the delivery fee",
          ("How much is delivery?", "What's the delivery charge?"), ("Delivery costs {v} on smaller orders.",)),
        F("change_cutoff", "Orders can be changed until {v} before the delivery slot.", count(1, 6, "hours"),
          "the order change cutoff", ("How late can I change my order?", "Can I still add something to my order?"),
          ("You can change an order until {v} before the delivery slot.",)),
        F("refund_days", "Missing items are refunded within {v}.", count(2, 7, "days"), "how fast missing items are refunded",
          ("Something was missing from my bag, when do I get my money back?",),
          ("Missing items are refunded within {v}.",)),
        F("delivery_hours", "Deliveries run {v}.", hours((7, 8, 9), (20, 21, 22), WEEK), "the delivery hours",
          ("What times do you deliver?", "How late do deliveries go?"), ("We deliver {v}.",)),
        F("min_order", "The minimum order is {v}.", money(15, 30, 5), "the minimum order",
          ("Is there a minimum order?", "What's the smallest order I can place?"), ("The minimum order is {v}.",)),
    ),
    (S("order_problem", ("There's a problem with my order.", "I want to change my order."),
       "order number", "digits", "change_cutoff", "look into that order"),),
)

RETAIL = Sector(
    "retail", ("Electronics", "Home Store", "Outfitters", "Supply"), ("the store assistant", "the phone agent"),
    ("a {brand} store manager", "the {brand} returns desk", "a product specialist"),
    ("Ask for the order number before discussing a specific order.", "Do not recommend other stores."),
    (
        F("return_window", "Items can be returned within {v} of purchase.", count(14, 90, "days", 1), "the return window",
          ("How long do I have to return something?", "What's your return policy?"),
          ("You can return items within {v} of purchase.",)),
        F("warranty", "Products come with a {v} warranty.", choice(("one-year", "two-year", "three-year")), "the warranty",
          ("What warranty do your products have?", "How long is the warranty?"),
          ("Our products come with a {v} warranty.",)),
        F("price_match", "Price matching is offered within {v} of purchase.", count(7, 30, "days"), "the price match policy",
          ("Do you price match?", "I found it cheaper, can you match the price?"),
          ("We match prices within {v} of purchase.",)),
        F("store_hours", "Stores are open {v}.", hours((8, 9, 10), (19, 20, 21), WEEK), "the store hours",
          ("What time do you open?", "What are your store hours?"), ("Our stores are open {v}.",)),
        F("student_discount", "Students get {v} off with a valid student card.", percent(5, 20), "the student discount",
          ("Do you have a student discount?",), ("Students get {v} off with a valid student card.",)),
        F("gift_card", "Gift cards are sold from {v}.", money(10, 25, 5), "the smallest gift card",
          ("Do you sell gift cards?", "What's the smallest gift card?"), ("Gift cards start at {v}.",)),
    ),
    (S("return_item", ("I want to return something I bought online.", "Can I send back my order?"),
       "order number", "digits", "return_window", "start that return"),),
)

TRAVEL_SECTORS = (AIRLINE, HOTEL, CAR_RENTAL, PARCEL, GROCERY, RETAIL)
