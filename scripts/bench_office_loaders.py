#!/usr/bin/env python3
"""Load time and peak memory of the office loaders on realistic files: a 5,000 x 8 sheet (.xlsx and .ods) and a
30-slide deck (.pptx and .odp) with bullets, notes and tables.

Each file is written once (openpyxl, python-pptx, odfpy: the tests' makers in tests/rag/office_docs.py), then
loaded in a fresh process per round, formats alternating (xlsx, ods, pptx, odp, xlsx, ...), so one format's
garbage does not weigh on the next (the .odp has no tables: the maker writes none); the child reports the wall
time of load_bytes, its peak RSS (VmHWM, reset just before the load), and that peak above its RSS before loading
(after the imports). "cold" includes py3langid's first use (the sheet loaders detect the
language of a sheet's words to show numbers as its authors saw them); "warm" has it loaded, as a daemon that has
indexed anything has. Prints the load average before and after.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_office_loaders.py --rounds 3
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
from edge_agent.rag import language, loaders, loaders_office  # noqa: F401
import openpyxl, pptx, defusedxml.ElementTree  # noqa: F401
if sys.argv[2] == "warm":
    language.detect("de taal van een werkblad")  # loads py3langid's model (~1 s), as the daemon has it for BM25

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024

path = sys.argv[1]
data = open(path, "rb").read()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets the peak (VmHWM) to the RSS now: the peak after is the load's own
base = status("VmRSS")
t = time.perf_counter()
doc = loaders.load_bytes(data, path.rsplit("/", 1)[-1])
took = time.perf_counter() - t
peak = status("VmHWM")
print(json.dumps({"s": took, "peak_mb": peak, "above_start_mb": peak - base,
                  "sections": len(doc.sections), "chars": sum(len(s.text) for s in doc.sections)}))
"""

WORDS = ["onderhoud", "licentie", "declaratie", "consult", "huur", "energie", "verzekering", "advies"]


def sheet_rows(n: int) -> list[list]:
    rows: list[list] = [["Factuurnummer", "Klant", "Omschrijving", "Bedrag", "BTW", "Datum", "Status", "Afdeling"]]
    for i in range(n):
        rows.append([f"F2026-{i:05d}", f"Klant {i % 613} BV", f"{WORDS[i % 8]} {WORDS[(i * 7) % 8]} periode {i % 12 + 1}",
                     round(100 + (i * 37.31) % 9000, 2), round((100 + (i * 37.31) % 9000) * 0.21, 2),
                     dt.date(2026, 1, 1) + dt.timedelta(days=i % 365), ("open", "betaald", "herinnering")[i % 3],
                     f"afdeling {i % 9}"])
    return rows


def deck(n: int) -> list[dict]:
    slides = []
    for i in range(n):
        spec = {"title": f"Onderwerp {i + 1}: {WORDS[i % 8]}",
                "bullets": [f"Punt {j + 1} over {WORDS[(i + j) % 8]} en de planning voor kwartaal {j % 4 + 1}" for j in range(5)],
                "notes": f"Spreker: leg uit waarom {WORDS[i % 8]} dit jaar duurder is en noem de afspraken met de leveranciers."}
        if i % 5 == 4:
            spec = {"title": spec["title"], "notes": spec["notes"],
                    "table": [["Post", "2026", "2027"]] + [[WORDS[k], f"{1000 + k * 250}", f"{1100 + k * 260}"] for k in range(6)]}
        slides.append(spec)
    return slides


def build(folder: Path, rows: int, slides: int) -> dict[str, Path]:
    sys.path.insert(0, str(REPO / "tests" / "rag"))
    from office_docs import make_ods, make_odp, make_pptx, make_xlsx

    data = sheet_rows(rows)
    fmt = {f"D{r}": "#,##0.00" for r in range(2, rows + 2)} | {f"E{r}": "#,##0.00" for r in range(2, rows + 2)}
    ods_rows = [data[0]] + [[c if not isinstance(c, float) else (c, f"{c:,.2f}".translate(str.maketrans(",.", ".,")))
                             for c in (x.isoformat() if isinstance(x, dt.date) else x for x in row)] for row in data[1:]]
    files = {"xlsx": make_xlsx({"Facturen": data}, formats=fmt), "ods": make_ods({"Facturen": ods_rows}),
             "pptx": make_pptx(deck(slides)), "odp": make_odp([{k: v for k, v in s.items() if k != "table"} for s in deck(slides)])}
    out = {}
    for kind, blob in files.items():
        path = folder / f"bench.{kind}"
        path.write_bytes(blob)
        out[kind] = path
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--slides", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    load_before = os.getloadavg()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = build(Path(tmp), args.rows, args.slides)
        for _ in range(args.rounds):
            for kind, path in files.items():
                for warm in ("cold", "warm"):
                    out = subprocess.run([sys.executable, "-c", CHILD, str(path), warm], env=env, capture_output=True,
                                         text=True, check=True)
                    results.setdefault(f"{kind} {warm}", []).append(json.loads(out.stdout))
        sizes = {kind: path.stat().st_size for kind, path in files.items()}
    for kind, runs in results.items():
        times = sorted(r["s"] for r in runs)
        print(f"{kind}: {sizes[kind.split()[0]] / 1024:.0f} KiB, load {times[len(times) // 2]:.2f} s median of {len(times)} "
              f"({', '.join(f'{t:.2f}' for t in (r['s'] for r in runs))}), peak RSS {max(r['peak_mb'] for r in runs):.0f} MB "
              f"(+{max(r['above_start_mb'] for r in runs):.0f} MB over the RSS before loading), {runs[0]['sections']} sections, "
              f"{runs[0]['chars']} chars")
    print("load average before %.2f %.2f %.2f, after %.2f %.2f %.2f" % (*load_before, *os.getloadavg()))


if __name__ == "__main__":
    main()
