import ipaddress

from django.core.management.base import BaseCommand, CommandError

from judgments.logins import unlock


class Command(BaseCommand):
    help = ("Lift the pause on logging in after too many failed attempts: for usernames, or with --ip for "
            "client addresses (LOGIN_FAILURE_LIMIT, LOGIN_LOCKOUT_MINUTES).")

    def add_arguments(self, parser):
        parser.add_argument("usernames", nargs="*", metavar="USERNAME", help="the username typed at the login page")
        parser.add_argument("--ip", action="append", default=[], metavar="ADDRESS", help="a client address (repeatable)")

    def handle(self, *args, usernames: list[str], ip: list[str], **options):
        if not usernames and not ip:
            raise CommandError("name a USERNAME or an --ip ADDRESS to unlock")
        for address in ip:
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise CommandError(f"--ip {address!r} is not an IP address") from None
        for what, target in [("username", name) for name in usernames] + [("address", address) for address in ip]:
            failures = unlock(**{what: target})
            if failures:
                self.stdout.write(f"{what} {target}: {failures} failed login(s) forgotten; logging in works again.")
            else:
                self.stdout.write(f"{what} {target}: no failed logins recorded, nothing to unlock.")
