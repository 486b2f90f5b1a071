"""Model tournaments: rollouts as Ray tasks (or one after another), the leaderboard, and their commands."""
