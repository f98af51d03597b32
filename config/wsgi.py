import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
# Import every view now and move what loading made to the permanent generation: the cyclic collector's full
# passes then walk what requests made, not the ~250,000 objects of Django, pandas and numpy. Such a pass cost
# a page of a hundred pairs 130-150 ms in one load out of ten or so (benchmarks/pages.py, issue 19).
get_resolver().url_patterns
gc.freeze()
