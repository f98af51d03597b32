"""Queue a Celery task by its name.

`judgments.tasks` sits on top: it imports the domain operations to run them. The operations below it (the job
registry, health, webhooks, judges' runs) queue its tasks by name through the Celery app instead of importing
them, so no import runs upwards. The name is the contract anyway: queued messages carry it, and it never changes
(`judgments.tasks.run_job`...). `JudgmentsConfig.ready` imports `judgments.tasks`, so every process (web server,
worker, command) has the tasks registered; a test that patches a task object (`tasks.run_job.delay_on_commit`)
patches the very object found here.
"""

from celery import current_app


def task(name: str):
    """The registered task called `name` (its module path and function name: "judgments.tasks.run_job")."""
    return current_app.tasks[name]
