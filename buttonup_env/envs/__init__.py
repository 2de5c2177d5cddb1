"""The environments: ``ButtonUp-v1`` (and ``-v0``), the batched ``ButtonUpVectorEnv``, the
PettingZoo AEC env, their wrappers, what they share and how they render."""
