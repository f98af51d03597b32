"""The demo data `make run` loads: believable, small, and idempotent (a second load changes nothing)."""

from django.contrib.auth import get_user_model
from django.db import transaction

from .models import Membership, Project, Role

DEMO_PASSWORD = "verdict-demo"
DEMO_USERS = [
    ("lead", "Lena Lead", "lead@verdict.example", Role.LEAD),
    ("rater1", "Ravi Rater", "ravi@verdict.example", Role.RATER),
    ("rater2", "Rosa Rater", "rosa@verdict.example", Role.RATER),
]
DEMO_PROJECT = {
    "slug": "acme-shop",
    "name": "Acme Outdoor: product search",
    "description": (
        "Judgment list for the Acme Outdoor web shop's product search (tents, jackets, boots, "
        "climbing gear). Compares today's BM25 ranking with the new hybrid re-ranker."
    ),
}


@transaction.atomic
def load_demo() -> dict:
    """Create the demo users and project if missing; report what was created."""
    User = get_user_model()
    created = {"users": 0, "projects": 0, "memberships": 0}
    users = {}
    for username, full_name, email, _role in DEMO_USERS:
        first, last = full_name.split(" ", 1)
        user, made = User.objects.get_or_create(
            username=username, defaults={"first_name": first, "last_name": last, "email": email}
        )
        if made:
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
            created["users"] += 1
        users[username] = user
    project, made = Project.objects.get_or_create(
        slug=DEMO_PROJECT["slug"],
        defaults={**DEMO_PROJECT, "created_by": users["lead"]},
    )
    created["projects"] += made
    for username, _name, _email, role in DEMO_USERS:
        _membership, made = Membership.objects.get_or_create(
            project=project, user=users[username], defaults={"role": role}
        )
        created["memberships"] += made
    return created
