"""`edge-agent cluster status`: where the running daemon sends job items (its Ray pool, or itself)."""
from __future__ import annotations

import argparse
import http.client
import json
import sys

from edge_agent.cli.common import settings_from


def register(sub) -> None:
    p = sub.add_parser("cluster", help="the Ray pool that runs job items (jobs_backend = ray)")
    csub = p.add_subparsers(dest="cluster_cmd", required=True)
    st = csub.add_parser("status", help="nodes, actors, items in flight per node and throughput, from the running daemon")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    s = settings_from(args)
    host = "127.0.0.1" if s.host in ("0.0.0.0", "::", "") else s.host
    try:
        keys = s.accepted_keys()
    except OSError as e:  # 0640 root:edge-agent, and this shell is neither
        print(f"error: cannot read api_key_file {s.api_key_file}: {e.strerror or e}: run this as root or as the service's "
              "user, or give this shell a config whose api_keys the daemon accepts", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {keys[0]}"} if keys else {}
    conn = http.client.HTTPConnection(host, s.port, timeout=10)
    try:
        conn.request("GET", "/v1/cluster", headers=headers)
        resp = conn.getresponse()
        body = json.loads(resp.read() or b"{}")
    except (OSError, ValueError) as e:
        print(f"error: no daemon answers on {host}:{s.port} ({type(e).__name__}): start it with `edge-agent serve` "
              "or `systemctl start edge-agent`", file=sys.stderr)
        return 2
    finally:
        conn.close()
    if resp.status != 200:
        print(f"error: the daemon answered {resp.status}: {body.get('error', {}).get('message', '')}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    print(f"backend {body['backend']}: {body['actors']} actors, {body['in_flight']} items in flight, "
          f"{body['items_done']} done ({body.get('items_per_s', 0)} items/s)")
    if body.get("error"):
        print(body["error"])
    for node, row in sorted(body["nodes"].items()):
        print(f"  {node:<30} cpus {row['cpus']:<5g} gpus {row['gpus']:<3g} actors {row['actors']:<3} "
              f"in flight {row['in_flight']:<4} done {row['items_done']}")
    return 1 if body.get("error") else 0
