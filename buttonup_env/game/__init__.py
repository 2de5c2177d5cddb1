"""The game itself: the rules (standard library only), matches, game records, the exact solver, and
the encodings that turn a position into numbers."""
