"""Button Up! as a PettingZoo AEC environment: ``from buttonup_env.pettingzoo import env``.

The environment lives in :mod:`buttonup_env.envs.pettingzoo` (the ``pettingzoo`` extra).
"""

from .envs.pettingzoo import ButtonUpAEC, env

__all__ = ["ButtonUpAEC", "env"]
