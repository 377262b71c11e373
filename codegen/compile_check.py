"""Compile generated kernels for a GPU target without a GPU: catches what the CPU interpreter
cannot (types the GPU compiler rejects, ops without a PTX lowering, too-large blocks).

    python codegen/compile_check.py kernels.json [--arch 90] [--jobs 2]

`kernels.json` lists {"name", "source", "signature", "num_warps"} records (the triton
backend collects them, with their GPU block sizes, when `triton_backend.COLLECT` is a list;
the test suite does that and runs this at the end). Run it as a script, without
TRITON_INTERPRET (importing the `rewrite.codegen` package would turn the interpreter on): this process
imports triton for real. Exits 1 if any kernel fails to compile.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import warnings


def compile_one(record: dict, arch: int, workdir: str) -> str | None:
    """None if the kernel compiles for sm_<arch>, else the error."""
    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION")
    import triton  # (deferred: triton, imported only by this check)
    from triton.backends.compiler import GPUTarget  # (deferred: triton)
    from triton.compiler import ASTSource  # (deferred: triton)

    digest = hashlib.sha1(record["source"].encode()).hexdigest()[:12]
    path = os.path.join(workdir, f"check_{digest}.py")
    with open(path, "w") as f:
        f.write(record["source"])
    spec = importlib.util.spec_from_file_location(f"check_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        fn = getattr(module, record["name"])
        src = ASTSource(fn=fn, signature=record["signature"], constexprs={})
        triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": record["num_warps"]})
    except Exception as e:  # noqa: BLE001  (any compile error is the answer)
        return f"{type(e).__name__}: {e}"
    return None


def check(records: list[dict], arch: int = 90, jobs: int = 2) -> list[tuple[str, str]]:
    """(kernel name, error) for each record that does not compile."""
    unique = {hashlib.sha1((r["source"] + r["name"] + str(r["num_warps"])).encode()).hexdigest(): r for r in records}
    failures = []
    with tempfile.TemporaryDirectory(prefix="rewrite-sm90-") as workdir:
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(compile_one, r, arch, workdir): r for r in unique.values()}
            for fut in concurrent.futures.as_completed(futures):
                error = fut.result()
                if error:
                    r = futures[fut]
                    failures.append((r["name"], f"{error}\n--- source ---\n{r['source']}"))
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels")
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("compile_check: unset TRITON_INTERPRET (the interpreter compiles nothing)", file=sys.stderr)
        return 2
    with open(args.kernels) as f:
        records = json.load(f)
    failures = check(records, args.arch, args.jobs)
    n = len({r["source"] + r["name"] for r in records})
    for name, error in failures:
        print(f"FAILED {name} for sm_{args.arch}: {error}\n")
    print(f"compile_check: {n - len(failures)} of {n} kernels compile for sm_{args.arch}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
