"""Players, anything with ``act(state) -> slot``: the bots, exported ONNX policies, the shipped
ones, the self-play pool, and the arena, league, evaluation and exploitability that measure them."""
