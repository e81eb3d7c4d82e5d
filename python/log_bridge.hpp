#pragma once
// ortfleet's log in a Python process: its records (and ONNX Runtime's messages, which pass through it)
// go to the logger "ortfleet" of Python's logging module, never to the program's stdout. Unconfigured,
// logging prints warnings and errors on stderr; logging.getLogger("ortfleet").setLevel(logging.DEBUG)
// (with a handler, e.g. logging.basicConfig) shows everything down to ONNX Runtime's raw error texts.
#include "bindings.hpp"

namespace ortfleet::python {

/// Whether the interpreter runs Python code still: false once it has begun to shut down, when what
/// would go through Python goes to stderr instead.
bool python_running();

/// Makes the bridge ortfleet's default logger; called once, by the module's initialisation.
void install_log_bridge();

/// Hands the records queued since the last call to logging.getLogger("ortfleet"), and sets the level
/// ortfleet logs at to that logger's. The GIL held. Records made on other threads are queued (no thread
/// waits for the GIL to log) and handed on by the main thread as soon as it runs Python code (a pending
/// call), between the slices of a wait (waiting.hpp), and at exit. It runs Python code, and with it
/// Python's signal handlers: a KeyboardInterrupt they raise is left set (PyErr_Occurred) for the caller.
void forward_log_records();

}  // namespace ortfleet::python
