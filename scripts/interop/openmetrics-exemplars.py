#!/usr/bin/env python3
"""Reads OpenMetrics text on standard input with Prometheus' own parser (prometheus_client) and
prints, as JSON, every exemplar it carries: [{"sample", "labels", "exemplar_labels", "value"}].
A text the parser refuses ends it with status 1 and the parser's message."""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

found = []
try:
    for family in text_string_to_metric_families(sys.stdin.read()):
        for sample in family.samples:
            if sample.exemplar is not None:
                found.append({"sample": sample.name, "labels": sample.labels,
                              "exemplar_labels": sample.exemplar.labels, "value": sample.exemplar.value})
except Exception as error:  # the parser's refusal is the answer
    print(f"refused: {error}", file=sys.stderr)
    sys.exit(1)
print(json.dumps(found))
