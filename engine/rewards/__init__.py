"""Rewards for RL trainers, graded by an engine they reach over REST (``a2e serve --http``).

``verl``: a drop-in for verl's SandboxFusion code reward (``custom_reward_function``), the
module whose file verl's configuration names (docs/grading.md says how).
"""
