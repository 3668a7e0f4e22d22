#!/usr/bin/env bash
# A real ROS 2 Jazzy peer on Fast DDS for scripts/ros2-dds-check.py, with no
# ROS install: rclpy 7.1.6 from the PyPI `ros-<pkg>` wheels (cp311, so
# Python 3.11), pinned with their sha256 in scripts/ros2-dds-requirements.txt.
# No `ros2` CLI and no example_interfaces (neither has a wheel; the check
# uses rclpy's own graph and parameter calls, and test_msgs' types).
#
#   scripts/ros2-dds-env.sh [--dir DIR] [CMD ARGS...]
#
# Makes the venv DIR (default target/ros2-dds: kept between runs, as cargo's
# target/ is) unless it already holds this requirements file, then runs CMD
# (if given) with the environment rclpy needs, DIR/bin first on PATH (so
# `python3` is the venv's). Prints how long the install took.
#
# Needs: python3.11 (or python3 being 3.11) with venv, x86-64 Linux
# (manylinux_2_28), network access to PyPI for the first run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REQ=$ROOT/scripts/ros2-dds-requirements.txt
DIR=$ROOT/target/ros2-dds
if [ "${1:-}" = --dir ]; then DIR=$2; shift 2; fi

log() { printf 'ros2-dds-env: %s\n' "$*" >&2; }

if ! cmp -s "$REQ" "$DIR/requirements.txt" 2>/dev/null; then
    t0=$(date +%s)
    py=$(command -v python3.11 || command -v python3)
    "$py" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
        || { log "the ROS wheels are cp311 only: need python3.11 ($py is not)"; exit 1; }
    rm -rf "$DIR"
    "$py" -m venv "$DIR"
    # The wheels' bootstrap .pth (see below) would re-run pip itself under
    # another library path; skip it here too. Wheels only, but empy (a
    # rosidl generator's dependency) has only an sdist.
    _ROS_WHEELS_BOOTSTRAP_COMPLETE=1 "$DIR/bin/pip" install --quiet --disable-pip-version-check \
        --require-hashes --only-binary ':all:' --no-binary empy -r "$REQ" \
        || { rm -rf "$DIR"; log "pip install failed"; exit 1; }
    # Written last: a venv that holds it is complete.
    cp "$REQ" "$DIR/requirements.txt"
    log "venv $DIR made in $(( $(date +%s) - t0 )) s ($(du -sh "$DIR" | cut -f1))"
fi

[ $# -gt 0 ] || exit 0

SP=$(echo "$DIR"/lib/python3.11/site-packages)
# The wheels put the ROS C libraries (librcl.so, librcl_action.so, the
# message packages' type supports, Fast DDS) in DIR/lib, where nothing finds
# them unless the loader is told; the auditwheel-repaired wheels' own
# vendored libraries (libtinyxml2-<hash>.so, ...) are in
# site-packages/ros_*.libs, which the libraries in DIR/lib need but do not
# name in their RPATH. A sourced ROS 2 puts its lib/ here the same way.
WHEEL_LIBS=$(find "$SP" -maxdepth 1 -type d -name 'ros_*.libs' | sort | tr '\n' ':')
export LD_LIBRARY_PATH="$DIR/lib:$WHEEL_LIBS${LD_LIBRARY_PATH:-}"
# The ament index (DIR/share/ament_index) that ament_index_cpp and
# ament_index_python look packages up in, as a sourced ROS 2 sets it.
export AMENT_PREFIX_PATH="$DIR${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
# The ros-wheels-bootstrapper .pth re-executes every Python the venv starts
# with LD_LIBRARY_PATH rebuilt from a set (its order changing from run to
# run, the re-exec costing a second start-up): the path above is already
# complete, so the guard variable that skips it is set.
export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
# The wheels' rcl links librmw_fastrtps_cpp.so directly (there is no
# librmw_implementation to choose another); said anyway, so that what runs
# is what the check reports.
export RMW_IMPLEMENTATION=rmw_fastrtps_cpp
# Fast DDS discovery on loopback only, as the gateway's DDS side is by
# default (docs/ros2.md): a CI machine's other interfaces see nothing.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# No PYTHONPATH: every Python package is in the venv's site-packages (a
# ROS 2 built from source, or rosidl-generated example_interfaces, would
# need theirs added).
export PATH="$DIR/bin:$PATH"
exec "$@"
