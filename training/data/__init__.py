"""Synthetic, seeded customer-service conversations grounded in randomized brand profiles."""
