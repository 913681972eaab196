// A fixture, never compiled: an app file that reaches below the engine API, which
// scripts/check-app-includes.py must refuse (ctest app_includes_refuse_internal).
#include <canopy/actors/cache_actor.hpp>
#include <canopy/engine.hpp>
