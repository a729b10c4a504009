"""Reward functions and the spec that names them."""

from skill.rewards.spec import RewardRole, RewardSpec

__all__ = ["RewardRole", "RewardSpec"]
