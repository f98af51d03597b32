"""Django helpers below the models that use no model: sealed secrets, stored files, row reading, rate limits,
the job kinds' registry, the outbound policy, queueing a task by name."""
