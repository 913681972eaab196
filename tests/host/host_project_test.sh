#!/bin/sh
# host_project_test.sh MODE SOURCE_DIR BUILD_DIR WORK_DIR
# Builds tests/host/project as a separate project in WORK_DIR and runs it.
#   package:      `cmake --install BUILD_DIR` into WORK_DIR/prefix, then find_package(canopy)
#   subdirectory: add_subdirectory(SOURCE_DIR) from the host's CMakeLists.txt
set -eu
mode=$1 source=$2 build=$3 work=$4
rm -rf "$work"
mkdir -p "$work/host"
cp "$source/tests/host/project/CMakeLists.txt" "$source/tests/host/project/main.cpp" "$work/host/"
case "$mode" in
  package)
    cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
    cmake -S "$work/host" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" ;;
  subdirectory)
    cmake -S "$work/host" -B "$work/build" -DCANOPY_SOURCE_DIR="$source" ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
cmake --build "$work/build" -j 2
"$work/build/host"
