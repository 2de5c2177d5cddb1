"""The batched engine: the whole game as tables of boards and moves, and thousands of games played
at once over them (a numpy reference and compiled numba kernels)."""
