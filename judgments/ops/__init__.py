"""Domain operations: verbs across models (rounds, pools, imports, jobs, judges' runs, health, versions,
webhooks...). Views, tasks, commands and the API call them; they never import those."""
