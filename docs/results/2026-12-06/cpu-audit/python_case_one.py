import sys, traceback; sys.path.insert(0, "/tmp/aud/py"); from cases import CASES, pre
try:
    exec(compile(pre + CASES[sys.argv[1]], "<case>", "exec"))
except BaseException as e:
    tb = traceback.extract_tb(e.__traceback__)
    where = tb[-1].filename.split("/")[-1] + ":" + str(tb[-1].lineno) if tb else "?"
    print(f"EXC {type(e).__module__}.{type(e).__name__} @{where}: {str(e)[:600]}")
    sys.exit(1)
