# Stored runs, evaluations and comparisons arrive with their issues; the metric engine lives in
# evaluation/engine/ and needs no models.
