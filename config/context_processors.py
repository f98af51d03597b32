from django.conf import settings


def mail(request) -> dict:
    """`mail_enabled`: whether pages may offer what needs mail (the password reset link)."""
    return {"mail_enabled": settings.EMAIL_ENABLED}
