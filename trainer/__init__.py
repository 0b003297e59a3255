"""A compact GRPO trainer that sees tasks only through the env API."""
