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

A verdict never depends silently on the machine. What holds on every machine is checked everywhere
(every GEMM output inside the error bound of any summation order; the casts). What depends on the
kernel that runs — torch's CPU capability for the bf16 cast (scalar vs vectorized NaN), MKL's code
branch for the float32 GEMMs, the GPU's compute capability — is an expectation keyed by that kernel
(``library_casts.KERNEL_CAPABILITIES``, ``torch_gemm.EXPECTED``) where it was measured, and otherwise an
observation: printed with the kernel named (``obs``), never a failure.

Exit status 1 when a case disagrees (a GEMM disagrees when it misses its guarantee, or the model it is
expected to match on this kernel), 2 on bad arguments. ``--table`` prints the cast and GEMM agreement
tables as markdown; ``--write-doc FILE`` / ``--check-doc FILE`` fill or check them between
``<!-- begin:library-casts -->`` and ``<!-- begin:torch-gemm KEY -->`` markers: one GEMM table per
kernel key, so a file holds the table of every kernel it was measured on; ``--write-doc`` adds the
block of a new key after the last one, ``--check-doc`` compares the block of this kernel's key and
says so (not a failure) when the file has none.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Dict, List

from .library_casts import compare_casts, cpu_capability, library_version
from .torch_gemm import compare_gemms, describe_kernel, device_kind, kernel_key


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
    lines = ["| profile | library | format | CPU kernel | values compared | agreeing |", "| --- | --- | --- | --- | ---: | ---: |"]
    for r in rows:
        lib = r["library"] or "—"
        if lib not in versions:
            versions[lib] = library_version(lib) or "?"
        kernel = f"{r['kernel']} only" if r.get("kernel") else "any"
        if r["compared"] and not r["expected"]:
            lines.append(f"| `{r['profile']}` | {lib} {versions[lib]} | `{r['format']}` | {kernel} | {r['compared']} | — (checked on its kernel; on {r['device']} {cpu_capability() if r['device'] == 'cpu' else ''}: {r['agreeing']}) |")
        elif r["compared"]:
            lines.append(f"| `{r['profile']}` | {lib} {versions[lib]} | `{r['format']}` | {kernel} | {r['compared']} | {r['agreeing']} |")
        else:
            lines.append(f"| `{r['profile']}` | {lib} {versions[lib]} | `{r['format']}` | {kernel} | 0 | — ({r['note'].split(' (')[0].replace('not available: ', '')}) |")
    return "\n".join(lines)


def gemm_table(rows: List[dict]) -> str:
    device = rows[0]["device"] if rows else "cpu"
    column = "torch op (CUDA)" if device.startswith("cuda") else "torch op (CPU, one thread)"
    head = f"Kernel key `{kernel_key(device)}`: measured on {describe_kernel(device)}."
    lines = [head, "", f"| {column} | operands | qrl-sim model | outputs equal | max ulp |", "| --- | --- | --- | ---: | ---: |"]
    for r in rows:
        if r["guarantee"]:
            lines.append(f"| `{r['op']}` | {r['operands']} | any order (guaranteed) | {r['agreeing']}/{r['compared']} | {r['note']} |")
            continue
        mark = " **(expected)**" if r["expected"] else ""
        unit = " (bf16)" if r["op"] == "matmul-bf16" else ""
        lines.append(f"| `{r['op']}` | {r['operands']} | `{r['model']}`{mark} | {r['agreeing']}/{r['compared']} | {r['max_abs_diff']}{unit} |")
    return "\n".join(lines)


def fill_gemm_block(text: str, key: str, body: str, add: bool) -> tuple:
    """(text with the ``torch-gemm KEY`` block replaced by ``body``, whether the block was there). With
    ``add``, a missing block is inserted after the last ``torch-gemm`` block (ValueError when there is none)."""
    begin, end = f"<!-- begin:torch-gemm {key} -->", f"<!-- end:torch-gemm {key} -->"
    block = f"{begin}\n{body}\n{end}"
    pattern = re.compile(re.escape(begin) + r"[\s\S]*?" + re.escape(end))
    if pattern.search(text):
        return pattern.sub(lambda _m: block, text), True
    if not add:
        return text, False
    last = None
    for last in re.finditer(r"<!-- end:torch-gemm [^>]*-->", text):
        pass
    if last is None:
        raise ValueError("no <!-- begin:torch-gemm KEY --> block to add this kernel's table after")
    return text[: last.end()] + "\n\n" + block + text[last.end():], False


def _masked(text: str, observed: List[tuple]) -> str:
    """``text`` with the cast-table rows of the (profile, format) pairs in ``observed`` blanked."""
    for profile, fmt in observed:
        text = re.sub(rf"^\| `{re.escape(profile)}` \|[^\n]*\| `{re.escape(fmt)}` \|[^\n]*$", f"| `{profile}` | (another kernel) | `{fmt}` |", text, flags=re.M)
    return text


def _gemm_checked(text: str) -> str:
    """``text`` with the observation rows and the "measured on" line of every GEMM table dropped: what
    ``--check-doc`` compares there is the guaranteed and the expected rows (an observation may move with
    a kernel detail the key does not name, such as ATen's capability for the bf16 matmul)."""
    out, inside = [], False
    for line in text.split("\n"):
        if line.startswith("<!-- begin:torch-gemm "):
            inside = True
        elif line.startswith("<!-- end:torch-gemm "):
            inside = False
        elif inside and (line.startswith("Kernel key ") or (line.startswith("| `") and "(expected)" not in line and "guaranteed" not in line)):
            continue
        out.append(line)
    return "\n".join(out)


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
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print(f"--device: '{args.device}' but torch {torch.__version__} sees no CUDA device", file=sys.stderr)
            return 2
    elif args.device != "cpu":
        print(f"--device: expected cpu, cuda or cuda:N, got '{args.device}'", file=sys.stderr)
        return 2
    if not os.path.isfile(os.path.join(args.golden_dir, "manifest.json")):
        print(f"golden_dir: no manifest.json in '{args.golden_dir}' (write one with qrl-sim golden)", file=sys.stderr)
        return 2
    from .reader import load

    try:
        suites = load(args.golden_dir).suites
    except ValueError as e:  # not a qrl-golden/1 manifest: one line, not a traceback
        print(f"golden_dir: {e}", file=sys.stderr)
        return 2
    if "library-casts" not in suites:
        # one line, not compare_casts' traceback; the other suites are optional
        print(f"golden_dir: '{args.golden_dir}' has no library-casts suite (suites: {', '.join(suites) or 'none'}); add it with qrl-sim golden --suite library-casts,quantizers,gemm --out {args.golden_dir}", file=sys.stderr)
        return 2

    failed = 0
    print(f"torch_check on {args.device} ({device_kind(args.device)}), golden {args.golden_dir}")
    print(f"kernels: {describe_kernel(args.device)}; key '{kernel_key(args.device)}'")
    casts = compare_casts(args.golden_dir, device=args.device)
    print(f"casts: {len(casts)} cases (obs = the profile models another kernel than this {args.device}'s "
          f"{'capability ' + cpu_capability() if args.device == 'cpu' else 'device'}: printed, not checked)")
    for r in casts:
        state = "ok  " if _ok(r) and r["compared"] else ("n/a " if not r["compared"] else "FAIL")
        if state != "n/a " and not r["expected"]:
            state = "obs "
        failed += state == "FAIL"
        kernel = f" (models the {r['kernel']} kernel)" if r["kernel"] else ""
        print(f"  {state} {r['case']:<24} {r['library'] or '-':<12} {r['device']:<6} {r['agreeing']}/{r['compared']} agree {r['note']}{kernel}".rstrip())

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
    key = kernel_key(args.device)
    print(f"gemm: {len(gemms)} rows (guaranteed = on every machine; expected = the model the op must match on kernel '{key}'; obs = measured only)")
    for r in gemms:
        if r["op"] is None:
            print(f"  n/a  {r['note']}")
            continue
        state = ("ok  " if _ok(r) else "FAIL") if r["expected"] else "obs "
        failed += state == "FAIL"
        if r.get("guarantee"):
            print(f"  {state} {r['op']:<34} guaranteed: {r['note']}")
        else:
            print(f"  {state} {r['op']:<34} vs {r['model']:<38} {r['agreeing']}/{r['compared']} equal, {r['note']}{' (expected)' if r['expected'] else ''}")

    if args.table or args.write_doc or args.check_doc:
        casts_block = cast_table(casts)
        # rows of profiles that model another kernel than this one: not compared by --check-doc
        observed = [(r["profile"], r["format"]) for r in casts if not r["expected"]]
        gemm_block = gemm_table([r for r in gemms if r["op"] is not None])
        if args.table:
            print(f"\n<!-- library-casts -->\n{casts_block}\n\n<!-- torch-gemm {key} -->\n{gemm_block}")
        for path in args.write_doc or args.check_doc or []:
            with open(path, encoding="utf-8") as f:
                before = f.read()
            after = before
            if "<!-- begin:library-casts -->" in before:
                after = fill_markers(after, {"library-casts": casts_block})
            if "<!-- begin:torch-gemm " in before:
                after, had = fill_gemm_block(after, key, gemm_block, add=bool(args.write_doc))
                if not had and args.check_doc:
                    print(f"{path}: no GEMM table for kernel '{key}' (scripts/library-tables.sh on such a machine adds one): not compared")
            elif "<!-- begin:library-casts -->" not in before:
                raise ValueError(f"{path}: no <!-- begin:library-casts --> or <!-- begin:torch-gemm KEY --> marker")
            if args.write_doc:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(after)
                print(f"wrote the tables into {path}")
            elif _gemm_checked(_masked(before, observed)) != _gemm_checked(_masked(after, observed)):
                print(f"{path}: the agreement tables are out of date: run scripts/library-tables.sh")
                failed += 1
    print("torch_check: " + ("all cases agree" if not failed else f"{failed} disagreement(s)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
