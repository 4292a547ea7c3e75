"""The core executor: records, steps, tools, rescue, agents, workflows, sessions."""
