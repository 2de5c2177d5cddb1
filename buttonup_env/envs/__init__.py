"""The environments: ``ButtonUp-v0``, the batched ``ButtonUpVectorEnv``, the PettingZoo AEC env,
their wrappers, what they share and how they render."""
