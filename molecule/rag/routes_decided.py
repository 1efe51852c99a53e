"""Every route each running engine lists on its own /openapi.json is decided by the front door (issue 44, 25).

    python3 routes_decided.py COLLECTIONS_DIR ROUTES.json

ROUTES.json: {service: {"kind": "generate" | "pooling", "paths": {path: [methods]}}}, read from each engine of the
host (GET http://127.0.0.1:PORT/openapi.json). A route is decided when plugins/module_utils/front/_front_routes.py allows it
(ALLOWED_ROUTES) or refuses it (REFUSED_ROUTES); a door routed by model sends the pooling routes
(_front_models.POOLING_ROUTES) to pooling services only. Prints one JSON line per service and exits 1 when a route
is undecided, or when a pooling route of an engine is not one the routed door gives its kind.
"""

import json
import sys


def main(collections, routes_file):
    sys.path.insert(0, collections)
    from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_routes, _front_models

    with open(routes_file) as f:
        engines = json.load(f)
    decided = set(_front_routes.ALLOWED_ROUTES) | set(_front_routes.REFUSED_ROUTES)
    bad = False
    for name in sorted(engines):
        kind = engines[name]["kind"]
        paths = sorted(engines[name]["paths"])
        undecided = [p for p in paths if p not in decided]
        served = set(_front_models.service_routes(kind)) | set(_front_routes.ALLOWED_ROUTES)
        through = [p for p in paths if p in served]
        pooling_here = [p for p in paths if p in _front_models.POOLING_ROUTES]
        wrong = [p for p in through if p in _front_models.MODEL_ROUTES and p not in _front_models.service_routes(kind)]
        bad = bad or bool(undecided) or bool(wrong) or not paths
        print(
            json.dumps(
                {
                    "service": name,
                    "kind": kind,
                    "routes": len(paths),
                    "undecided": undecided,
                    "through_the_door": through,
                    "pooling_routes_of_the_engine": pooling_here,
                    "wrong_kind": wrong,
                },
                sort_keys=True,
            )
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
