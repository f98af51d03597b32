from celery import shared_task


@shared_task
def clean_rendered() -> int:
    from .files import clean_rendered

    return len(clean_rendered())
