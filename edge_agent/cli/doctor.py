"""`edge-agent doctor`: settings in force, hardware, model check."""
from __future__ import annotations

import argparse

from edge_agent.cli.common import settings_from


def register(sub) -> None:
    d = sub.add_parser("doctor", help="show settings, hardware and check the model bundle")
    d.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from edge_agent.engine.bundle import BundleError, load_bundle
    from edge_agent.hardware import detect

    s = settings_from(args)
    for row in s.describe():
        print(f"{row['name']:<20} = {row['value']:<30} # {row['help']}")
    hw = detect(s.device)
    print(f"\nhardware: {hw.device} ({hw.reason}); providers {', '.join(hw.providers)}; {hw.physical_cores} physical cores")
    try:
        b = load_bundle(s.bundle_path(), verify=True)
        print(f"model: {b.name} OK ({b.architecture['arch']}, context {b.context_length})")
    except BundleError as e:
        print(f"model: {e}")
        return 1
    return 0


