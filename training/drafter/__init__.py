"""EAGLE3 drafter training (SpecForge-style): regenerate, draft vocab, online target features, TTT, checkpoints."""
