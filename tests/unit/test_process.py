"""The one launcher of child processes (dlbench.process.run_child): a child's end turned into its outcome (exited 0,
exited non-zero, killed by a signal, timed out), its stderr copied to the log as it comes and its last lines kept,
its result line read, and the environment and PYTHONPATH it is given."""

import io
import os
import signal
import sys

from conftest import SCRIPTS
from dlbench.process import child_environment, run_child, thread_count


def python(code):
    return [sys.executable, "-c", code]


def test_a_child_that_exits_0_reports_its_result_line():
    child = run_child(python("print('working'); print('{\"images_per_s\": 12.5}')"), capture_stdout=True)
    assert child.ok and child.returncode == 0 and child.signal is None
    assert child.description == "exited with code 0" and child.result() == {"images_per_s": 12.5}
    assert run_child(python("pass"), capture_stdout=True).result() is None  # printed nothing


def test_a_child_that_exits_non_zero_says_so_with_its_last_lines_of_stderr():
    code = "import sys; print('first\\nsecond\\nthird\\n', file=sys.stderr); sys.exit(3)"
    child = run_child(python(code))
    assert not child.ok and child.returncode == 3 and child.description == "exited with code 3"
    assert child.stderr_tail(2) == "second | third" and child.stderr_tail(1) == "third"
    assert run_child(python("raise SystemExit(1)")).stderr_tail(3) == ""


def test_a_child_killed_by_a_signal_names_the_signal():
    child = run_child(python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert not child.ok and child.signal == signal.SIGKILL and child.description == "killed by signal SIGKILL"
    terminated = run_child(python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
    assert terminated.description == "killed by signal SIGTERM"


def test_a_child_still_running_after_its_timeout_is_killed_and_said_to_have_timed_out():
    child = run_child(
        python("import sys, time; print('started', file=sys.stderr, flush=True); time.sleep(60)"), timeout=1
    )
    assert child.timed_out and not child.ok and child.signal is None and child.description == "timed out after 1 s"
    assert 1 <= child.seconds < 30 and child.stderr_tail(1) == "started"
    assert not run_child(python("pass"), timeout=30).timed_out


def test_stderr_goes_to_the_log_line_by_line_and_the_last_lines_are_kept():
    log = io.StringIO()
    code = "import sys\nfor n in range(500): print(f'line {n}', file=sys.stderr)"
    child = run_child(python(code), log=log, kept=10)
    assert log.getvalue() == "".join(f"line {n}\n" for n in range(500))
    assert child.stderr == "".join(f"line {n}\n" for n in range(490, 500))


def test_stdout_not_captured_is_this_processs_own(capfd):
    child = run_child(python("print('to the terminal')"))
    assert child.stdout == "" and capfd.readouterr().out == "to the terminal\n"


def test_the_child_gets_the_variables_and_the_library_on_its_pythonpath(tmp_path, monkeypatch):
    """A child outside scripts/ imports the library through PYTHONPATH, in front of what the caller had there."""
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    code = "import json, os, dlbench; print(json.dumps([os.environ['KERAS_BACKEND'], os.environ['PYTHONPATH']]))"
    child = run_child(python(code), environment={"KERAS_BACKEND": "jax"}, pythonpath=[SCRIPTS], capture_stdout=True)
    assert child.ok, child.stderr
    assert child.result() == ["jax", os.pathsep.join([str(SCRIPTS), str(tmp_path)])]
    monkeypatch.delenv("PYTHONPATH")
    assert child_environment({"KERAS_BACKEND": "jax"}, [SCRIPTS])["PYTHONPATH"] == str(SCRIPTS)
    assert "PYTHONPATH" not in child_environment({"KERAS_BACKEND": "jax"})


def test_cpu_threads_all_pins_every_framework_to_the_cpus_its_job_may_run_on():
    assert thread_count("all") == len(os.sched_getaffinity(0))
    assert thread_count("framework") is None and thread_count("3") == 3
