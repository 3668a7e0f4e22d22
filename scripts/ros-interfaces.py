#!/usr/bin/env python3
"""Fetch the ROS 2 (Jazzy) interface definitions rosgate-ros2 embeds.

Usage: python3 scripts/ros-interfaces.py [OUTDIR]   (default: target/ros-interfaces)

Result: OUTDIR/share/<pkg>/{msg,srv,action}/<Name>.{msg,srv,action,json}, the
layout of an installed ROS `share/` directory. crates/ros2/build.rs reads it
(and runs this script itself when it is missing); CI runs it before cargo.

Where the files come from:
- Most packages: the `ros-<pkg>` wheels on PyPI (ros-python-wheels), which
  rosidl itself built. They carry the original .msg/.srv/.action files and
  rosidl's .json type descriptions with the official RIHS01 hashes, which the
  tests use as an oracle. Every wheel is pinned by version and sha256 in
  scripts/ros-interfaces.txt; pip checks the hashes (--require-hashes).
- example_interfaces and tf2_msgs are on no registry. example_interfaces is
  generated: its messages are std_msgs' (minus Header and ColorRGBA, which it
  does not have) under the other package name, and its SetBool/Trigger are
  std_srvs'. Upstream files are identical apart from comments, and relative
  type names resolve inside the package they are in, so renaming the package
  is enough. The few definitions with no counterpart (example_interfaces
  WString, AddTwoInts, Fibonacci; tf2_msgs TFMessage, TF2Error, FrameGraph)
  are kept as small files in crates/ros2/interfaces/ and copied in; the tests
  check them against the published hashes.

Reruns are no-ops: OUTDIR/stamp holds the sha256 of the pin list and of the
local definitions, and nothing is fetched while it matches. Stdlib only.
"""

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "scripts" / "ros-interfaces.txt"
LOCAL = ROOT / "crates" / "ros2" / "interfaces"
MEMBER = re.compile(
    r"^[^/]+\.data/data/share/([^/]+)/(msg|srv|action)/([^/]+\.(?:msg|srv|action|json))$"
)
# std_msgs types that example_interfaces does not define.
NOT_IN_EXAMPLE = {"Header.msg", "ColorRGBA.msg"}
EXAMPLE_SRVS = {"SetBool.srv", "Trigger.srv"}


def digest() -> str:
    """What the share tree is a function of: the pins and the local files."""
    h = hashlib.sha256()
    h.update(PINS.read_bytes())
    for path in sorted(p for p in LOCAL.rglob("*") if p.is_file()):
        h.update(path.relative_to(LOCAL).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def fetch(wheels: Path) -> None:
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps",
        "--only-binary=:all:", "--implementation", "cp",
        "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11",
        "--require-hashes", "-r", str(PINS), "-d", str(wheels),
    ]
    subprocess.run(cmd, check=True)


def pinned_wheels(wheels: Path) -> list[Path]:
    """The wheels of the current pins only: the directory keeps wheels of
    older pins, which must not be extracted over the new ones."""
    found = []
    for line in PINS.read_text().splitlines():
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if not m:
            continue
        prefix = f"{re.sub(r'[-_.]+', '_', m.group(1)).lower()}-{m.group(2)}-"
        match = sorted(w for w in wheels.glob("*.whl") if w.name.lower().startswith(prefix))
        if not match:
            raise SystemExit(f"ros-interfaces: no wheel for {m.group(1)}=={m.group(2)} in {wheels}")
        found.append(match[0])
    return found


def extract(wheels: Path, share: Path) -> int:
    count = 0
    for whl in pinned_wheels(wheels):
        with zipfile.ZipFile(whl) as z:
            for name in z.namelist():
                m = MEMBER.match(name)
                if not m:
                    continue
                pkg, kind, file = m.groups()
                dest = share / pkg / kind / file
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(z.read(name))
                count += 1
    return count


def derive_example_interfaces(share: Path) -> None:
    dest = share / "example_interfaces"
    for kind, src_pkg, keep in (
        ("msg", "std_msgs", lambda f: f.endswith(".msg") and f not in NOT_IN_EXAMPLE),
        ("srv", "std_srvs", lambda f: f in EXAMPLE_SRVS),
    ):
        src = share / src_pkg / kind
        if not src.is_dir():
            raise SystemExit(f"ros-interfaces: {src} missing after extraction")
        (dest / kind).mkdir(parents=True, exist_ok=True)
        for f in sorted(os.listdir(src)):
            if keep(f):
                shutil.copyfile(src / f, dest / kind / f)


def copy_local(share: Path) -> None:
    for path in sorted(p for p in LOCAL.rglob("*") if p.is_file()):
        dest = share / path.relative_to(LOCAL)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "target" / "ros-interfaces")
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    stamp = out / "stamp"
    want = digest()
    # cargo may run build scripts of several profiles at once: one at a time.
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text().strip() == want and (out / "share").is_dir():
            return 0
        fetch(out / "wheels")
        # Build next to the final tree and swap it in, so a reader never
        # sees half a tree and stale files from older pins do not survive.
        tmp = out / "share.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        n = extract(out / "wheels", tmp)
        derive_example_interfaces(tmp)
        copy_local(tmp)
        shutil.rmtree(out / "share", ignore_errors=True)
        tmp.rename(out / "share")
        stamp.write_text(want + "\n")
        print(f"ros-interfaces: {n} files from wheels into {out / 'share'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
