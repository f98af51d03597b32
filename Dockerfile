# The production image: the web server, the worker and beat all run from it (docker-compose.yml).
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VERDICT_VAR_DIR=/var/lib/verdict
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
# collectstatic only needs settings that parse; the real secret comes from the environment at run time.
RUN DEBUG=false SECRET_KEY=build-only-secret-key-not-used-at-run-time ALLOWED_HOSTS=build \
    python manage.py collectstatic --no-input
RUN useradd --system --home /app verdict && mkdir -p /var/lib/verdict/media && chown -R verdict /var/lib/verdict
USER verdict
EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--worker-class", "gthread", "--workers", "2", "--threads", "8", "--timeout", "300", "--access-logfile", "-"]
