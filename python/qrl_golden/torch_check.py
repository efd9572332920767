"""The real libraries against qrl-sim's golden files, on a device, in one command.

    qrl-sim golden --suite library-casts,quantizers,gemm --out golden/
    python -m qrl_golden.torch_check --device cpu golden/      # CI
    python -m qrl_golden.torch_check --device cuda golden/     # on a GPU: the same code on CUDA

Runs three parts and prints agreement per case:

1. casts: every cast profile named after a library against that library (``library_casts``;
   torch on the device, ml_dtypes and onnxruntime on the CPU);
2. quantizers: ``qrl_golden.torch_quantizers.compare_quantizers`` where that module exists;
3. GEMMs: ``torch.matmul`` (float32, bf16) and ``torch._scaled_mm`` (e4m3fn) against every
   accumulator model (``torch_gemm``); on Hopper ``_scaled_mm`` against ``hopper-fp8``.

Exit status 1 when a case disagrees (a GEMM disagrees when it misses the model it is expected to
match on this device), 2 on bad arguments. ``--table`` prints the cast and GEMM agreement tables
as markdown; ``--write-doc FILE`` / ``--check-doc FILE`` fill or check them between
``<!-- begin:library-casts -->`` / ``<!-- begin:torch-gemm -->`` markers.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Dict, List

from .library_casts import compare_casts, library_version
from .torch_gemm import compare_gemms, device_kind


def compare_quantizers_or_none(golden_dir: str, device: str):
    """The quantizer comparison when ``qrl_golden.torch_quantizers`` exists, else None."""
    try:
        from .torch_quantizers import compare_quantizers
    except ImportError:
        return None
    return compare_quantizers(golden_dir, device=device)


def _ok(row: dict) -> bool:
    # A quantizer row may count values that differ only in how a NaN is encoded (both sides decode
    # to NaN: torch on x86 keeps a NaN's sign where the golden holds the GPU's +NaN); they agree.
    return row["agreeing"] + row.get("nan_encoding", 0) == row["compared"]


def cast_table(rows: List[dict]) -> str:
    versions: Dict[str, str] = {}
    lines = ["| profile | library | format | values compared | agreeing |", "| --- | --- | --- | ---: | ---: |"]
    for r in rows:
        lib = r["library"] or "—"
        if lib not in versions:
            versions[lib] = library_version(lib) or "?"
        if r["compared"]:
            lines.append(f"| `{r['profile']}` | {lib} {versions[lib]} | `{r['format']}` | {r['compared']} | {r['agreeing']} |")
        else:
            lines.append(f"| `{r['profile']}` | {lib} {versions[lib]} | `{r['format']}` | 0 | — ({r['note'].split(' (')[0].replace('not available: ', '')}) |")
    return "\n".join(lines)


def cpu_capability() -> str:
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def gemm_table(rows: List[dict]) -> str:
    device = rows[0]["device"] if rows else "cpu"
    if device.startswith("cuda"):
        import torch

        d = torch.device(device)
        major, minor = torch.cuda.get_device_capability(d)
        head = f"Measured on {torch.cuda.get_device_name(d)} (compute capability {major}.{minor}), torch {torch.__version__}."
        column = "torch op (CUDA)"
    else:
        head = f"Measured with torch's CPU kernels for {cpu_capability()} (`torch.backends.cpu.get_cpu_capability()`), one thread."
        column = "torch op (CPU, one thread)"
    lines = [head, "", f"| {column} | operands | qrl-sim model | outputs equal | max ulp |", "| --- | --- | --- | ---: | ---: |"]
    for r in rows:
        mark = " **(expected)**" if r["expected"] else ""
        unit = " (bf16)" if r["op"] == "matmul-bf16" else ""
        lines.append(f"| `{r['op']}` | {r['operands']} | `{r['model']}`{mark} | {r['agreeing']}/{r['compared']} | {r['max_abs_diff']}{unit} |")
    return "\n".join(lines)


def fill_markers(text: str, blocks: Dict[str, str]) -> str:
    """Replaces the text between ``<!-- begin:NAME -->`` and ``<!-- end:NAME -->`` for each block
    the text has markers for; raises ValueError when it has none."""
    found = 0
    for name, body in blocks.items():
        pattern = re.compile(rf"<!-- begin:{re.escape(name)} -->[\s\S]*?<!-- end:{re.escape(name)} -->")
        if pattern.search(text):
            found += 1
            text = pattern.sub(lambda _m: f"<!-- begin:{name} -->\n{body}\n<!-- end:{name} -->", text)
    if not found:
        raise ValueError(f"no <!-- begin:NAME --> marker for any of {', '.join(blocks)}")
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qrl_golden.torch_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("golden_dir", help="directory written by qrl-sim golden (suites library-casts, quantizers, gemm)")
    parser.add_argument("--device", default="cpu", help="torch device: cpu (default), cuda or cuda:N")
    parser.add_argument("--table", action="store_true", help="print the cast and GEMM tables as markdown")
    doc = parser.add_mutually_exclusive_group()
    doc.add_argument("--write-doc", metavar="FILE", action="append", help="fill the tables between the markers of FILE (repeatable)")
    doc.add_argument("--check-doc", metavar="FILE", action="append", help="exit 1 when the tables in FILE differ from this run (repeatable)")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.golden_dir, "manifest.json")):
        print(f"golden_dir: no manifest.json in '{args.golden_dir}' (write one with qrl-sim golden)", file=sys.stderr)
        return 2
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print(f"--device: '{args.device}' but torch {torch.__version__} sees no CUDA device", file=sys.stderr)
            return 2
    elif args.device != "cpu":
        print(f"--device: expected cpu, cuda or cuda:N, got '{args.device}'", file=sys.stderr)
        return 2

    failed = 0
    print(f"torch_check on {args.device} ({device_kind(args.device)}), golden {args.golden_dir}")
    casts = compare_casts(args.golden_dir, device=args.device)
    print(f"casts: {len(casts)} cases")
    for r in casts:
        state = "ok  " if _ok(r) and r["compared"] else ("n/a " if not r["compared"] else "FAIL")
        failed += state == "FAIL"
        print(f"  {state} {r['case']:<24} {r['library'] or '-':<12} {r['device']:<6} {r['agreeing']}/{r['compared']} agree {r['note']}".rstrip())

    quant = compare_quantizers_or_none(args.golden_dir, args.device)
    if quant is None:
        print("quantizers: not available (qrl_golden.torch_quantizers is not installed in this checkout)")
    else:
        print(f"quantizers: {len(quant)} cases")
        for r in quant:
            state = "ok  " if _ok(r) else "FAIL"
            failed += state == "FAIL"
            nan = f" (+{r['nan_encoding']} NaN encodings)" if r.get('nan_encoding') else ''
            print(f"  {state} {r['case']:<40} {r['agreeing']}/{r['compared']} agree{nan}, max |diff| {r['max_abs_diff']} {r.get('note', '')}".rstrip())

    gemms = compare_gemms(args.golden_dir, device=args.device)
    print(f"gemm: {len(gemms)} torch op × model pairs (expected = the model the op must match on this device)")
    for r in gemms:
        if r["op"] is None:
            print(f"  n/a  {r['note']}")
            continue
        state = ("ok  " if _ok(r) else "FAIL") if r["expected"] else "    "
        failed += state == "FAIL"
        print(f"  {state} {r['op']:<24} vs {r['model']:<32} {r['agreeing']}/{r['compared']} equal, {r['note']}{' (expected)' if r['expected'] else ''}")

    if args.table or args.write_doc or args.check_doc:
        blocks = {"library-casts": cast_table(casts), "torch-gemm": gemm_table([r for r in gemms if r["op"] is not None])}
        if args.table:
            for name, body in blocks.items():
                print(f"\n<!-- {name} -->\n{body}")
        for path in args.write_doc or args.check_doc or []:
            with open(path, encoding="utf-8") as f:
                before = f.read()
            file_blocks = blocks
            recorded = re.search(r"<!-- begin:torch-gemm -->\nMeasured with torch's CPU kernels for (\S+) ", before)
            if args.check_doc and recorded and recorded.group(1) != cpu_capability():
                # the BLAS summation order differs between CPU kernels: compare the GEMM table only where it was measured
                print(f"{path}: GEMM table measured on {recorded.group(1)}, this CPU runs {cpu_capability()}: not compared")
                file_blocks = {k: v for k, v in blocks.items() if k != "torch-gemm"}
                if not any(f"<!-- begin:{k} -->" in before for k in file_blocks):
                    continue
            after = fill_markers(before, file_blocks)
            if args.write_doc:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(after)
                print(f"wrote the tables into {path}")
            elif before != after:
                print(f"{path}: the agreement tables are out of date: run scripts/library-tables.sh")
                failed += 1
    print("torch_check: " + ("all cases agree" if not failed else f"{failed} disagreement(s)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
