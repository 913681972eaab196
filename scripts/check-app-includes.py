#!/usr/bin/env python3
"""The engine API as a wall: fails when a file under APPS includes a Canopy header
that is not part of what a host application may use.

usage: check-app-includes.py APPS_DIR

apps/ use the library as a host application would (README, Layout). A host sees:
  - <canopy/NAME.hpp>: the engine API (canopy::canopy: engine, worker nodes, the actor
    system setup; and canopy::engine_types under it: config, stats, errors, the sampler,
    the metrics histogram);
  - <canopy/server/...>: canopy serve's own library (apps/server);
  - <canopy/cache/...>: canopy::cache, the plain values the API's answers are made of
    (token ids, rows, enum names);
  - <canopy/backends/tokenizers/...> and <canopy/backends/checkpoints/...>: the plain
    libraries canopy::tokenizers and canopy::checkpoints, usable on their own;
  - the typed actor handle for hosts that run their own CAF system, and its error
    codes: <canopy/messages/actor_interfaces.hpp>, <canopy/messages/errors.hpp>;
  - <canopy/backends/backend.hpp>: the backend options and model description the
    configuration and the engine name.
Below the API on purpose (each named, with why): the bench's direct path and probes,
which measure the backend and the actors themselves.
Exit status: 0 when every include is allowed, 1 otherwise (each violation printed).
"""

import pathlib
import re
import sys

ALLOWED_PREFIXES = (
    "canopy/server/",
    "canopy/cache/",
    "canopy/backends/tokenizers/",
    "canopy/backends/checkpoints/",
)
ALLOWED_HEADERS = {
    "canopy/messages/actor_interfaces.hpp",
    "canopy/messages/errors.hpp",
    # The backend's options and description, which engine_config and engine::model() name.
    "canopy/backends/backend.hpp",
}
# Paths relative to APPS_DIR that reach below the API on purpose: the target canopy_bench
# (apps/canopy/CMakeLists.txt), the only part of apps/ that links canopy::actors.
BELOW_THE_API = {
    "canopy/bench/": "the bench's direct path and probes measure backends and actors",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*<(canopy/[^>]+)>', re.MULTILINE)


def allowed(header):
    if "/" not in header[len("canopy/"):]:
        return True  # the engine API
    return header.startswith(ALLOWED_PREFIXES) or header in ALLOWED_HEADERS


def violations(apps):
    for path in sorted(apps.rglob("*")):
        if path.suffix not in (".cpp", ".hpp", ".h") or not path.is_file():
            continue
        relative = path.relative_to(apps).as_posix()
        if any(relative.startswith(p) for p in BELOW_THE_API):
            continue
        text = path.read_text(encoding="utf-8")
        for match in INCLUDE.finditer(text):
            if not allowed(match.group(1)):
                line = text.count("\n", 0, match.start()) + 1
                yield f"{relative}:{line}: <{match.group(1)}> is internal to the engine"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    apps = pathlib.Path(sys.argv[1])
    if not apps.is_dir():
        sys.exit(f"check-app-includes: {apps} is not a directory")
    found = list(violations(apps))
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) reach below the engine API; use the API, or name "
              "the file in BELOW_THE_API with why")
        return 1
    print(f"every Canopy include under {apps} is one a host application may use")
    return 0


if __name__ == "__main__":
    sys.exit(main())
