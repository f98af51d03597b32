"""Dates and times as Verdict shows them wherever a template prints one without a format of its own:
ISO order and a 24-hour clock. Django's English default ("Nov. 24, 2026, 2:02 a.m.") ends in a period
that doubles up at the end of a sentence and reads differently in every locale."""

DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
TIME_FORMAT = "H:i"
MONTH_DAY_FORMAT = "j F"
YEAR_MONTH_FORMAT = "F Y"
