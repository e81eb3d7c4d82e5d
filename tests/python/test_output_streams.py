"""A Python program's stdout is its own: ortfleet's warnings (its own, ONNX Runtime's, the warm pool
it leaves) go to stderr, through logging and warnings, never to stdout."""


def test_warnings_go_to_stderr_and_stdout_keeps_only_the_programs_output(models, run_script, private_runtime_dir):
    runtime, _ = private_runtime_dir
    code = f"""
import numpy as np, ortfleet
print("before")
# A CUDA-graph config on the CPU: ortfleet warns that the sessions run without CUDA graphs.
with ortfleet.Fleet({models["mlp"]!r}, devices="cpu", config={{"cuda": {{"cuda_graph": True}}}}) as fleet:
    fleet.start().wait()
    fleet.run(0, {{"input": np.zeros((1, 64), np.float32)}})
print("after")
"""
    rc, stdout, stderr = run_script(code, env={"XDG_RUNTIME_DIR": runtime, "ORTFLEET_AUTO_POOL": None})
    assert rc == 0, stderr
    assert stdout == "before\nafter\n"
    assert "CUDA graphs need a GPU" in stderr  # ortfleet's warning, through logging
    assert "LeftBehindWarning" in stderr  # the warm pool the start left, through warnings


def test_logging_configured_by_the_program_receives_ortfleets_records(models, run_script):
    code = f"""
import logging, ortfleet
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.name, record.levelname, record.getMessage()))
logging.getLogger("ortfleet").addHandler(Keep())
with ortfleet.Fleet({models["mlp"]!r}, devices="cpu", strategy="threads", config={{"cuda": {{"cuda_graph": True}}}}) as fleet:
    fleet.start().wait()
print([r for r in records if "CUDA graphs need a GPU" in r[2]][0][:2])
"""
    rc, stdout, stderr = run_script(code)
    assert rc == 0, stderr
    assert stdout == "('ortfleet', 'WARNING')\n"
