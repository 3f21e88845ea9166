"""The engine of tests/mutations/*.py: removes one rule at a time from the source (a small edit),
rebuilds unit_tests in build/ and runs the test case of that rule, which must fail; then puts the
source back. Each script lists its rules as (name, path, old text, new text, test case) and calls
run(); WORDS on the command line pick the rules whose names contain them. Prints one line a rule;
exits 1 if any test still passed.
"""
import os
import shutil
import subprocess
import sys


def run(muts):
    survived = 0
    only = sys.argv[1:]  # words of the rules to remove (default: every rule)
    for name, path, old, new, test in muts:
        if only and not any(w in name for w in only):
            continue
        src = open(path).read()
        assert src.count(old) == 1, (name, old)
        shutil.copy(path, path + ".orig")
        try:
            open(path, "w").write(src.replace(old, new))
            b = subprocess.run(["cmake", "--build", "build", "-j2", "--target", "unit_tests"],
                               capture_output=True, text=True)
            if b.returncode != 0:
                print(f"{name}: BUILD FAILED\n{b.stdout[-2000:]}")
                survived += 1
                continue
            r = subprocess.run(["build/tests/unit_tests", "-tc=" + test.replace(",", "*")],
                               capture_output=True, text=True)
            fails = [l.replace("/work/main/", "") for l in r.stdout.splitlines() if "ERROR" in l][:1]
            ran = [l for l in r.stdout.splitlines() if "test cases:" in l]
            print(f"without {name}: '{test}' {'FAILS' if r.returncode else 'PASSES (!)'} {fails} {ran}")
            survived += r.returncode == 0
        finally:
            shutil.move(path + ".orig", path)
            # The copy's time is older than the mutant's build: without this the rebuild below
            # would keep the mutant in unit_tests.
            os.utime(path)
    subprocess.run(["cmake", "--build", "build", "-j2", "--target", "unit_tests"], capture_output=True)
    sys.exit(1 if survived else 0)
