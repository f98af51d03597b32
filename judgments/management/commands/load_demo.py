from django.core.management.base import BaseCommand

from judgments.demo import DEMO_PASSWORD, DEMO_USERS, load_demo


class Command(BaseCommand):
    help = "Load the demo project and users (idempotent: a second run changes nothing)."

    def handle(self, *args, **options):
        created = load_demo()
        summary = ", ".join(f"{count} {what}" for what, count in created.items())
        self.stdout.write(f"Demo loaded (new: {summary}).")
        for username, name, _email, role in DEMO_USERS:
            self.stdout.write(f"  {role.label:<7} {username:<8} password {DEMO_PASSWORD}   ({name})")
